//! The load generator end to end at a tiny load: two real `lessgate run`
//! processes in a chain, writers on the first, the observer on the second.
//! Asserts that the counts agree with each other, never how fast anything
//! was. The same run goes over WebSocket, kNet/UDP and kNet/TCP.

use std::path::PathBuf;
use std::time::Duration;

use lessgate::loadgen::cluster::Topology;
use lessgate::loadgen::scenario::{run, LoadTransport, Scenario};

/// One run per transport, one after the other: three clusters of node
/// processes at once would measure the machine's contention, not the
/// transports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_load_through_two_nodes_reports_consistent_counts_on_every_transport() {
    // Two observers over WebSocket: their moves are reported per observer
    // and timed all together. The WebSocket writers send a tick's moves at
    // once (as a Tundra client does), the native ones every millisecond.
    // The kNet/UDP nodes serve their sockets on one worker per core
    // (`[node] threads = 0`), the others on their one thread (the default).
    for (transport, observers, send_interval_ms, node_threads) in [
        (LoadTransport::Ws, 2, 50, None),
        (LoadTransport::KnetUdp, 1, 1, Some(0)),
        (LoadTransport::KnetTcp, 1, 1, None),
    ] {
        tiny_load(transport, observers, send_interval_ms, node_threads).await;
    }
}

async fn tiny_load(
    transport: LoadTransport,
    observers: usize,
    send_interval_ms: u64,
    node_threads: Option<usize>,
) {
    let scenario = Scenario {
        nodes: 2,
        topology: Topology::Chain,
        tick_hz: 20,
        entities: 20,
        rate_hz: 10.0,
        writers: 2,
        send_interval: Duration::from_millis(send_interval_ms),
        observers,
        warmup: Duration::from_millis(500),
        duration: Duration::from_secs(2),
        target: None,
        observer_target: None,
        target_pid: None,
        protocol: 3,
        transport,
        knet_datagrams_per_sec: 1000,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_lessgate")),
        extra_toml: String::new(),
        node_threads,
        keep_dir: false,
    };
    let report = run(&scenario)
        .await
        .unwrap_or_else(|e| panic!("the run over {transport:?} completes: {e}"));
    assert_eq!(report.nodes_started, 2);
    assert_eq!(report.writers, 2);
    assert_eq!(report.send_interval_ms, send_interval_ms);
    assert_eq!(report.nodes.len(), 2);
    assert_eq!(report.observers, observers);
    let delivered =
        (report.delivered_per_sec * report.window_secs * observers as f64).round() as u64;
    assert!(
        delivered > 0,
        "moves crossed the link over {transport:?}: {report:?}"
    );
    assert_eq!(
        report.latency_samples + report.stale,
        delivered,
        "every delivered move is either timed or counted stale"
    );
    assert!(report.latency.p50_us <= report.latency.p99_us);
    assert!(report.latency.p99_us <= report.latency.p999_us);
    assert!(report.latency.p999_us <= report.latency.max_us);
    assert!(report.sent_per_sec > 0.0);
    // Each node printed a stats line for its one link during the window.
    assert!(
        report.nodes.iter().all(|n| n.links.len() == 1),
        "{transport:?}: {report:?}"
    );
    assert!(report.nodes.iter().all(|n| n.peak_rss_kib.is_some()));
}

/// `loadgen --idle`: two linked nodes without clients, measured briefly.
/// Asserts only that each node was measured, never how little it used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pair_is_measured_per_node() {
    let dir = std::env::temp_dir().join(format!("lessgate-idle-smoke-{}", std::process::id()));
    let spec = lessgate::loadgen::cluster::ClusterSpec {
        nodes: 2,
        topology: Topology::Chain,
        tick_hz: 20,
        dir,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_lessgate")),
        extra_toml: String::new(),
        node_threads: None,
        knet_datagrams_per_sec: 1000,
        default_stats: true,
    };
    let report = lessgate::loadgen::idle::run(spec, Duration::from_secs(1), false)
        .await
        .expect("the idle run completes");
    assert_eq!(report.nodes.len(), 2);
    for node in &report.nodes {
        assert!(node.cpu_percent.is_some_and(|c| c >= 0.0), "{node:?}");
        assert!(node.wake_ups_per_sec.is_some(), "{node:?}");
        assert!(node.threads > 0, "{node:?}");
    }
}
