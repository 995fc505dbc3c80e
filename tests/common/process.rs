//! The real `lessgate` binary as a child process: which binary to run, a
//! handle that kills it when the test ends (pass or fail), and reading the
//! addresses it prints on stdout.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The line `lessgate run` prints once it listens for Tundra clients.
pub const TUNDRA_LINE: &str = "lessgate: Tundra clients connect to ";

/// The binary under test: `LESSGATE_BIN` when set (to run the tests
/// against another build, e.g. a release one), else this package's.
pub fn lessgate_binary() -> PathBuf {
    std::env::var_os("LESSGATE_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_lessgate").into())
}

/// A child process, killed and reaped when dropped.
pub struct Process(pub std::process::Child);

impl Process {
    /// Starts `command` with stdout piped (for [`Process::read_stdout_until`]).
    pub fn spawn(command: &mut Command) -> Process {
        Process(
            command
                .stdout(Stdio::piped())
                .spawn()
                .expect("binary starts"),
        )
    }

    /// Reads stdout lines until `pick` returns something, and returns it;
    /// the rest of stdout is drained so the child never blocks on a full
    /// pipe.
    pub async fn read_stdout_until<T: Send + 'static>(
        &mut self,
        mut pick: impl FnMut(&str) -> Option<T> + Send + 'static,
    ) -> T {
        let stdout = self.0.stdout.take().expect("stdout is piped");
        tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                let line = lines
                    .next()
                    .expect("the process prints the line")
                    .expect("readable");
                if let Some(found) = pick(&line) {
                    std::thread::spawn(move || lines.for_each(drop));
                    return found;
                }
            }
        })
        .await
        .expect("stdout reader")
    }

    /// The HTTP address (`host:port`, no scheme) and the peer-control
    /// address `lessgate run` prints when started with `--http-listen`
    /// and peering.
    pub async fn http_and_control(&mut self) -> (String, String) {
        let (mut http, mut control) = (None, None);
        self.read_stdout_until(move |line| {
            if let Some(rest) = line.strip_prefix("lessgate: status, metrics and health at http://")
            {
                http = Some(rest.trim_end_matches('/').to_owned());
            }
            if let Some(rest) = line.strip_prefix("lessgate: peer links listen on ") {
                control = rest.split(' ').next().map(str::to_owned);
            }
            Some((http.clone()?, control.clone()?))
        })
        .await
    }

    /// The WebSocket URL the node prints ([`TUNDRA_LINE`]).
    pub async fn tundra_url(&mut self) -> String {
        self.read_stdout_until(|line| line.strip_prefix(TUNDRA_LINE).map(str::to_owned))
            .await
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
