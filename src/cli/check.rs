//! `lessgate check`: validates node files and everything they name, and
//! prints what they describe, binding and dialling nothing (the checks are
//! `config::check`).

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
/// fails (exit status 1) when there is a problem.
pub fn run(args: CheckArgs) -> Result<(), Box<dyn std::error::Error>> {
    let report = crate::config::check::check(&args.config);
    print!("{}", report.summary);
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    for problem in &report.problems {
        eprintln!("error: {problem}");
    }
    match report.problems.len() {
        0 => {
            println!(
                "ok: {} node file(s) valid; nothing was bound or dialled",
                args.config.len()
            );
            Ok(())
        }
        1 => Err("1 problem found (above); nothing was started".into()),
        n => Err(format!("{n} problems found (above); nothing was started").into()),
    }
}
