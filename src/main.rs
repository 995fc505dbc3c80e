//! Thin entry point: parse arguments, hand over to the library.

use clap::Parser;

/// The node allocates and frees small buffers for every update it
/// forwards (decoded attributes, LESS values, packet buffers); glibc's
/// malloc and free were 13 % of the forwarding node's samples under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
