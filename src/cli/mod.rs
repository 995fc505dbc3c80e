//! Command-line interface: argument types and dispatch. Each subcommand lives
//! in its own file; this module only parses and routes.

use clap::{Parser, Subcommand};

pub mod authority;
pub mod check;
pub mod demo;
pub mod inspect;
pub mod keygen;
pub mod loadgen;
pub mod reload;
pub mod run;

/// lessgate: a federation gateway for realXtend Tundra worlds.
#[derive(Debug, Parser)]
#[command(name = "lessgate", version = crate::build_info::VERSION_LINE, about)]
pub struct Cli {
    /// With no subcommand, runs the embedded default (`demo`).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Log line format on stderr (overrides `[log] format`); `RUST_LOG`
    /// filters, for example `RUST_LOG=lessgate=debug`.
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<crate::config::LogFormat>,
    /// With no subcommand, the demo's flags (`lessgate --tundra-port 3345`);
    /// a subcommand takes its own flags after its name.
    #[command(flatten)]
    pub demo: demo::DemoArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Three federated nodes in this process on 127.0.0.1 (the default).
    Demo(demo::DemoArgs),
    /// Run one node (Tundra clients, scene, peers).
    Run(run::RunArgs),
    /// Validate node files and everything they name (identity, peer files,
    /// scene) against each other; binds and dials nothing.
    Check(check::CheckArgs),
    /// Ask a running node's admin endpoint to take an entity for it, or to
    /// hand one of its entities to a peer.
    Authority(authority::AuthorityArgs),
    /// Ask a running node to reload its configuration (as SIGHUP does).
    Reload(reload::ReloadArgs),
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
    let log_format = cli.log_format;
    match cli.command {
        None => demo::run(demo::DemoArgs {
            log_format,
            ..cli.demo
        }),
        Some(Command::Demo(args)) => demo::run(demo::DemoArgs { log_format, ..args }),
        Some(Command::Run(args)) => run::run(run::RunArgs { log_format, ..args }),
        Some(Command::Check(args)) => check::run(args),
        Some(Command::Reload(args)) => reload::run(args),
        Some(Command::Authority(args)) => authority::run(args),
        Some(Command::Inspect(args)) => inspect::run(args),
        Some(Command::Keygen(args)) => keygen::run(args),
        Some(Command::Loadgen(args)) => loadgen::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogFormat;

    #[test]
    fn no_subcommand_takes_the_demo_flags() {
        let cli =
            Cli::try_parse_from(["lessgate", "--tundra-port", "0", "--http-port", "9000"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.demo.tundra_port, 0);
        assert_eq!(cli.demo.http_port, 9000);
        assert_eq!(cli.demo.peer_port, 7500);
    }

    #[test]
    fn log_format_is_global_before_or_after_the_subcommand() {
        for args in [
            &["lessgate", "--log-format", "json", "run"][..],
            &["lessgate", "run", "--log-format", "json"][..],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            assert!(matches!(cli.command, Some(Command::Run(_))), "{args:?}");
            assert_eq!(cli.log_format, Some(LogFormat::Json), "{args:?}");
        }
        let error = Cli::try_parse_from(["lessgate", "--log-format", "xml"]).unwrap_err();
        assert!(error.to_string().contains("xml"), "{error}");
    }
}
