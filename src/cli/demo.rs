//! `lessgate demo` (and `lessgate` with no subcommand): the three-node
//! federation of [`crate::demo`] in this process, with progress on stdout.

use clap::Args;

use crate::config::LogFormat;
use crate::demo::{Demo, DemoOptions, DemoPorts, DEFAULT_MOVERS};

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// First Tundra WebSocket port; the nodes use it and the next two
    /// (0: any free ports).
    #[arg(long, value_name = "PORT", default_value_t = DemoPorts::default().tundra)]
    pub tundra_port: u16,
    /// First HTTP port (web viewer, /status, /metrics); the nodes use it and
    /// the next two (0: any free ports).
    #[arg(long, value_name = "PORT", default_value_t = DemoPorts::default().http)]
    pub http_port: u16,
    /// First peer-link UDP port; each node uses two (control, data)
    /// counting up from it (0: any free ports).
    #[arg(long, value_name = "PORT", default_value_t = DemoPorts::default().peer)]
    pub peer_port: u16,
    /// First kNet port for native Tundra clients (UDP and TCP); the nodes
    /// use it and the next two (0: any free ports).
    #[arg(long, value_name = "PORT", default_value_t = DemoPorts::default().knet)]
    pub knet_port: u16,
    /// Simulated moving entities per node.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MOVERS)]
    pub movers: usize,
    /// Set from the global `--log-format`.
    #[arg(skip)]
    pub log_format: Option<LogFormat>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        let ports = DemoPorts::default();
        DemoArgs {
            tundra_port: ports.tundra,
            http_port: ports.http,
            peer_port: ports.peer,
            knet_port: ports.knet,
            movers: DEFAULT_MOVERS,
            log_format: None,
        }
    }
}

pub fn run(args: DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Progress goes to stdout; logs (stderr) stay at warnings unless
    // RUST_LOG asks for more, so the progress lines are readable.
    crate::logging::init(args.log_format.unwrap_or_default(), "warn")?;
    let options = DemoOptions {
        ports: DemoPorts {
            tundra: args.tundra_port,
            http: args.http_port,
            peer: args.peer_port,
            knet: args.knet_port,
        },
        movers: args.movers,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        println!("lessgate demo: starting three federated nodes (alpha, beta, gamma) on 127.0.0.1");
        let progress: crate::demo::Progress = std::sync::Arc::new(|line: &str| println!("{line}"));
        let demo = Demo::start(options, progress).await?;
        demo.run(super::run::shutdown_signal()).await;
        Ok(())
    })
}
