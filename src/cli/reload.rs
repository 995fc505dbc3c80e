//! `lessgate reload`: asks a running node to reload its configuration, as
//! `kill -HUP` would, given the pid file `lessgate run --pid-file` wrote
//! (docs/operations.md "Reloading"). What the node changed, and what waits
//! for a restart, is in the node's log.

use std::path::{Path, PathBuf};

use clap::Args;

#[derive(Debug, Args)]
pub struct ReloadArgs {
    /// The pid file the node was started with (`lessgate run --pid-file`).
    #[arg(long, value_name = "FILE")]
    pub pid_file: PathBuf,
}

/// Why the node could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("cannot read the pid file {}: {source} (start the node with `lessgate run --pid-file FILE`)", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("the pid file {} does not hold a process id (found {found:?})", file.display())]
    NotAPid { file: PathBuf, found: String },
    #[error("cannot signal process {pid} from {}: {source} (is the node still running, and as this user?)", file.display())]
    Signal {
        file: PathBuf,
        pid: i32,
        source: std::io::Error,
    },
    #[error("`lessgate reload` needs a Unix system; send the node SIGHUP another way")]
    Unsupported,
}

/// The process id a pid file holds.
pub fn read_pid(file: &Path) -> Result<i32, ReloadError> {
    let text = std::fs::read_to_string(file).map_err(|source| ReloadError::Read {
        file: file.to_owned(),
        source,
    })?;
    let found = text.trim();
    found
        .parse::<i32>()
        .ok()
        .filter(|pid| *pid > 1)
        .ok_or_else(|| ReloadError::NotAPid {
            file: file.to_owned(),
            found: found.chars().take(40).collect(),
        })
}

pub fn run(args: ReloadArgs) -> Result<(), Box<dyn std::error::Error>> {
    let pid = read_pid(&args.pid_file)?;
    send_hangup(pid).map_err(|source| ReloadError::Signal {
        file: args.pid_file.clone(),
        pid,
        source,
    })?;
    println!("lessgate: asked process {pid} to reload; its log says what changed");
    Ok(())
}

#[cfg(unix)]
fn send_hangup(pid: i32) -> std::io::Result<()> {
    use rustix::process::{kill_process, Pid, Signal};
    // `read_pid` refuses ids below 2, so the pid is valid.
    let Some(pid) = Pid::from_raw(pid) else {
        return Err(std::io::ErrorKind::InvalidInput.into());
    };
    kill_process(pid, Signal::HUP).map_err(std::io::Error::from)
}

#[cfg(not(unix))]
fn send_hangup(_pid: i32) -> std::io::Result<()> {
    Err(std::io::Error::other(ReloadError::Unsupported))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_file_holds_one_process_id() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("node.pid");
        std::fs::write(&file, "4242\n").unwrap();
        assert_eq!(read_pid(&file).unwrap(), 4242);
        for bad in ["", "1", "-5", "42 43", "lessgate"] {
            std::fs::write(&file, bad).unwrap();
            let error = read_pid(&file).unwrap_err().to_string();
            assert!(
                error.contains("does not hold a process id"),
                "{bad}: {error}"
            );
        }
        let missing = read_pid(&dir.path().join("gone.pid")).unwrap_err();
        assert!(missing.to_string().contains("lessgate run --pid-file"));
    }
}
