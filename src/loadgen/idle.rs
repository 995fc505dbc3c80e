//! What idle nodes cost: a federation of `lessgate run` processes with
//! their links up and no client, measured over a window (`lessgate loadgen
//! --idle`). Each node's CPU comes from its threads' scheduler time (to the
//! nanosecond: an idle node uses about a thousandth of a core, which the
//! 10 ms ticks of utime and stime cannot resolve) and its wake-ups from its
//! threads' voluntary context switches.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::client::Error;
use super::cluster::{Cluster, ClusterSpec};
use super::proc_stats::{scheduled_seconds, voluntary_switches};

/// How long the links are left to settle before the window: the loser of
/// the dial arbitration closes about a second after it came up.
const SETTLE: Duration = Duration::from_secs(3);

/// One node over the window.
#[derive(Debug, Clone, Serialize)]
pub struct IdleNode {
    pub name: String,
    /// Percent of one core.
    pub cpu_percent: Option<f64>,
    /// Voluntary context switches per second, all threads together.
    pub wake_ups_per_sec: Option<f64>,
    pub threads: usize,
}

/// Every node over the window.
#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    pub window_secs: f64,
    pub nodes: Vec<IdleNode>,
}

/// Starts the cluster of `spec` (its stats at their default interval),
/// waits for its links, and measures every node over `window`; the
/// configs are removed afterwards unless `keep`.
pub async fn run(mut spec: ClusterSpec, window: Duration, keep: bool) -> Result<IdleReport, Error> {
    spec.default_stats = true;
    let dir = spec.dir.clone();
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&spec)).await??;
    tokio::time::sleep(SETTLE).await;
    let pids: Vec<(String, u32)> = cluster
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.pid()))
        .collect();
    let before: Vec<(Option<f64>, Option<u64>)> = pids
        .iter()
        .map(|(_, pid)| (scheduled_seconds(*pid), voluntary_switches(*pid)))
        .collect();
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let elapsed = started.elapsed().as_secs_f64();
    let nodes = pids
        .iter()
        .zip(before)
        .map(|((name, pid), (cpu, switches))| IdleNode {
            name: name.clone(),
            cpu_percent: scheduled_seconds(*pid)
                .zip(cpu)
                .map(|(after, before)| (after - before) / elapsed * 100.0),
            wake_ups_per_sec: voluntary_switches(*pid)
                .zip(switches)
                .map(|(after, before)| after.saturating_sub(before) as f64 / elapsed),
            threads: std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|d| d.count())
                .unwrap_or(0),
        })
        .collect();
    drop(cluster);
    if keep {
        eprintln!("loadgen: configs and node logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(IdleReport {
        window_secs: elapsed,
        nodes,
    })
}

/// The report as text.
pub fn render(report: &IdleReport) -> String {
    let mut out = format!(
        "idle: {} node(s) with their links up and no client, window {:.1} s\n",
        report.nodes.len(),
        report.window_secs
    );
    for node in &report.nodes {
        out += &format!(
            "node {}: cpu {} % of a core, {} wake-ups/s, {} threads\n",
            node.name,
            node.cpu_percent.map_or("?".into(), |c| format!("{c:.3}")),
            node.wake_ups_per_sec
                .map_or("?".into(), |w| format!("{w:.1}")),
            node.threads
        );
    }
    out
}
