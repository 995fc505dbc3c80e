//! Command-line interface: argument types and dispatch. Each subcommand lives
//! in its own file; this module only parses and routes.

use clap::{Parser, Subcommand};

pub mod inspect;
pub mod keygen;
pub mod loadgen;
pub mod run;

/// lessgate: a federation gateway for realXtend Tundra worlds.
#[derive(Debug, Parser)]
#[command(name = "lessgate", version, about)]
pub struct Cli {
    /// With no subcommand, runs the embedded default.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one node (Tundra clients, scene, peers).
    Run(run::RunArgs),
    /// Decode or encode protocol frames for reading by a person.
    Inspect(inspect::InspectArgs),
    /// Create a node key and self-signed certificate; print the fingerprint peers pin.
    Keygen(keygen::KeygenArgs),
    /// Drive Tundra clients against started nodes or any Tundra server and
    /// report throughput, latency, link bytes, CPU and memory.
    Loadgen(loadgen::LoadgenArgs),
}

/// Runs the parsed command line; the returned error is printed by `main`.
pub fn dispatch(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        None => run::run(run::RunArgs::default()),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Inspect(args)) => inspect::run(args),
        Some(Command::Keygen(args)) => keygen::run(args),
        Some(Command::Loadgen(args)) => loadgen::run(args),
    }
}
