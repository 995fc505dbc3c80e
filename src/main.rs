//! Thin entry point: parse arguments, hand over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = lessgate::cli::Cli::parse();
    match lessgate::cli::dispatch(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lessgate: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
