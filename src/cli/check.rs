//! `lessgate check`: validates node files and everything they name, and
//! prints what they describe, binding and dialling nothing (the checks are
//! `config::check`).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A node configuration file (TOML). Give several (`--config a.toml
    /// --config b.toml`) to check a federation's files against each other.
    #[arg(long, value_name = "FILE", required = true)]
    pub config: Vec<PathBuf>,
}

/// Prints the summary on stdout and each warning and problem on stderr;
/// fails (exit status 1) when there is a problem. A reader that stops
/// early (`lessgate check ... | head`) does not change the verdict.
pub fn run(args: CheckArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = crate::config::check::check(&args.config);
    let mut summary = report.summary.clone();
    if report.problems.is_empty() {
        summary.push_str(&format!(
            "ok: {} node file(s) valid; nothing was bound or dialled\n",
            args.config.len()
        ));
    }
    print_ignoring_closed_pipe(&mut std::io::stdout(), &summary)?;
    let mut notes = String::new();
    for warning in &report.warnings {
        notes.push_str(&format!("warning: {warning}\n"));
    }
    for problem in &report.problems {
        notes.push_str(&format!("error: {problem}\n"));
    }
    print_ignoring_closed_pipe(&mut std::io::stderr(), &notes)?;
    match report.problems.len() {
        0 => Ok(()),
        1 => Err("1 problem found (above); nothing was started".into()),
        n => Err(format!("{n} problems found (above); nothing was started").into()),
    }
}

/// Writes `text`; a closed pipe is the reader's choice, not an error.
fn print_ignoring_closed_pipe(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
