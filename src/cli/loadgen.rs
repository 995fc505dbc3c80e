//! `lessgate loadgen`: drives Tundra clients (WebSocket or kNet) against a federation
//! of `lessgate run` processes it starts on 127.0.0.1 (or any external
//! Tundra server) and prints what it measured; see BENCHMARKS.md.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::loadgen::baseline;
use crate::loadgen::cluster::{ClusterSpec, Topology};
use crate::loadgen::idle;
use crate::loadgen::report::{render_baselines, render_run, Baselines};
use crate::loadgen::scenario::{self, LoadTransport, Scenario};

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// Nodes to start (1 = a single node: writers and observer share it).
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    #[arg(long, value_enum, default_value = "chain")]
    pub topology: Topology,
    /// The generated nodes' tick rate.
    #[arg(long, default_value_t = 20)]
    pub tick_hz: u32,
    /// Moving entities in total.
    #[arg(long, default_value_t = 1000)]
    pub entities: usize,
    /// Updates per second per entity.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Writer connections on the first node.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Milliseconds between a writer's sends: each send carries the moves
    /// that came due since the last. 1 spreads them evenly; 50 sends a
    /// 20 Hz tick's moves at once, as a Tundra client's sync does.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub send_interval_ms: u64,
    /// Observer connections on the last node.
    #[arg(long, default_value_t = 1)]
    pub observers: usize,
    /// No clients: start the nodes, let their links settle, and measure
    /// each one's CPU and wake-ups over `--duration` (default configs).
    #[arg(long)]
    pub idle: bool,
    /// Seconds of movement before the window.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Worker threads of the generator's runtime.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// The clients' transport on started nodes.
    #[arg(long, value_enum, default_value = "ws")]
    pub transport: LoadTransport,
    /// `[tundra] knet_datagrams_per_sec` of started nodes (the node's
    /// default; real kNet's own rate is 1000).
    #[arg(long, default_value_t = crate::config::TundraSection::default().knet_datagrams_per_sec)]
    pub knet_rate: u32,
    /// An external Tundra server instead of started nodes: ws://host:port,
    /// knet+udp://host:port or knet+tcp://host:port.
    #[arg(long)]
    pub target: Option<String>,
    /// Where the observer connects (default: the target).
    #[arg(long)]
    pub observer_target: Option<String>,
    /// The external server's pid (for its CPU and peak memory).
    #[arg(long)]
    pub target_pid: Option<u32>,
    /// Tundra protocol version the clients ask for.
    #[arg(long, default_value_t = 3)]
    pub protocol: u32,
    /// `[node] threads` of the generated nodes (default: theirs, 1).
    #[arg(long)]
    pub node_threads: Option<usize>,
    /// TOML appended to every generated node.toml.
    #[arg(long, default_value = "")]
    pub extra_toml: String,
    /// The lessgate binary to start for nodes (default: this one).
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Measure the machine's raw limits first.
    #[arg(long)]
    pub baselines: bool,
    /// Only the baselines, no load run.
    #[arg(long)]
    pub baselines_only: bool,
    /// Keep the generated configs and node logs.
    #[arg(long)]
    pub keep: bool,
    /// Print the results as JSON too.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: LoadgenArgs) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    let binary = match &args.binary {
        Some(path) => path.clone(),
        None => std::env::current_exe()?,
    };
    runtime.block_on(async move {
        let mut baselines = None;
        if args.baselines || args.baselines_only {
            let measured = measure_baselines().await.map_err(|e| e.to_string())?;
            print!("{}", render_baselines(&measured));
            if args.json {
                println!("{}", serde_json::to_string(&measured)?);
            }
            if args.baselines_only {
                return Ok(());
            }
            baselines = Some(measured);
        }
        if args.idle {
            let spec = ClusterSpec {
                nodes: args.nodes.max(1),
                topology: args.topology,
                tick_hz: args.tick_hz,
                dir: std::env::temp_dir().join(format!("lessgate-loadgen-{}", std::process::id())),
                binary: binary.clone(),
                extra_toml: args.extra_toml.clone(),
                node_threads: args.node_threads,
                knet_datagrams_per_sec: args.knet_rate,
                default_stats: true,
            };
            let window = Duration::from_secs_f64(args.duration);
            let report = idle::run(spec, window, args.keep)
                .await
                .map_err(|e| e.to_string())?;
            print!("{}", idle::render(&report));
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            }
            return Ok(());
        }
        let scenario = Scenario {
            nodes: args.nodes,
            topology: args.topology,
            tick_hz: args.tick_hz,
            entities: args.entities,
            rate_hz: args.rate,
            writers: args.writers,
            send_interval: Duration::from_millis(args.send_interval_ms),
            observers: args.observers,
            warmup: Duration::from_secs_f64(args.warmup),
            duration: Duration::from_secs_f64(args.duration),
            target: args.target.clone(),
            observer_target: args.observer_target.clone(),
            target_pid: args.target_pid,
            protocol: args.protocol,
            transport: args.transport,
            knet_datagrams_per_sec: args.knet_rate,
            binary,
            extra_toml: args.extra_toml.clone(),
            node_threads: args.node_threads,
            keep_dir: args.keep,
        };
        let report = scenario::run(&scenario).await.map_err(|e| e.to_string())?;
        print!("{}", render_run(&report, args.threads, baselines.as_ref()));
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
            if let Some(per_core) = report.first_node_per_core(baselines.as_ref()) {
                println!("{}", serde_json::to_string(&per_core)?);
            }
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// The raw limits, with frames the size of a Transform EditAttributes.
async fn measure_baselines() -> Result<Baselines, crate::loadgen::client::Error> {
    let sizes = baseline::wire_sizes()?;
    let frame_bytes = sizes.tundra_edit_attributes;
    let window = Duration::from_secs(2);
    let websocket = baseline::websocket_sink_rate(frame_bytes, 4, window).await?;
    let udp = tokio::task::spawn_blocking(move || baseline::udp_rate(frame_bytes, window))
        .await?
        .map_err(|e| e.to_string())?;
    let blake3 = baseline::blake3_keyed_rate(frame_bytes, window);
    Ok(Baselines {
        frame_bytes,
        websocket_frames_per_sec: websocket.frames_per_sec,
        websocket_sink_cores: websocket.sink_cores,
        websocket_frames_per_sink_core_sec: websocket.frames_per_core_sec(),
        udp_datagrams_per_sec: udp,
        blake3_keyed_hashes_per_sec: blake3,
        sizes,
    })
}
