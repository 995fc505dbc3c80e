//! One load run: start (or target) the servers, log in an observer and the
//! writers, create the entities, wait until the observer has seen them
//! all, move them for a warm-up and a measured window, and collect what
//! every party counted.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{run_observer, run_writer, Error, ObserverOutcome, ObserverState, Session};
use super::cluster::{Cluster, ClusterSpec, NodeCounters, Topology};
use super::latency::SendTable;
use super::proc_stats::{status_kib, CpuMark};
use super::report::{LinkReport, NodeReport, RunReport};

/// How long the observer's count of entities may stand still before the
/// run goes ahead with the entities that arrived.
const SEEN_PATIENCE: Duration = Duration::from_secs(5);

/// Which transport the load clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadTransport {
    /// Tundra over WebSocket.
    Ws,
    /// Native Tundra: kNet over UDP.
    KnetUdp,
    /// Native Tundra: kNet over TCP.
    KnetTcp,
}

impl LoadTransport {
    /// The URL clients of this transport dial on a started node.
    fn url(self, node: &super::cluster::NodeProcess) -> String {
        match self {
            LoadTransport::Ws => node.url.clone(),
            LoadTransport::KnetUdp => format!("knet+udp://{}", node.knet),
            LoadTransport::KnetTcp => format!("knet+tcp://{}", node.knet),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Nodes to start (ignored with `target`).
    pub nodes: usize,
    pub topology: Topology,
    pub tick_hz: u32,
    /// Moving entities in total.
    pub entities: usize,
    /// Updates per second per entity.
    pub rate_hz: f64,
    /// Writer connections (entities are split evenly).
    pub writers: usize,
    /// Time between a writer's sends (each carries what came due).
    pub send_interval: Duration,
    /// Observer connections, all on the last node (or the observer target).
    pub observers: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// An external Tundra server for the writers (and the observer unless
    /// `observer_target` is given).
    pub target: Option<String>,
    pub observer_target: Option<String>,
    /// The external server's pid, to read its CPU and memory.
    pub target_pid: Option<u32>,
    /// Tundra protocol version the clients ask for.
    pub protocol: u32,
    /// The clients' transport on started nodes (an external target's URL
    /// names its own: `ws://`, `knet+udp://`, `knet+tcp://`).
    pub transport: LoadTransport,
    /// `[tundra] knet_datagrams_per_sec` of started nodes.
    pub knet_datagrams_per_sec: u32,
    /// The binary started for each node.
    pub binary: PathBuf,
    /// Extra TOML appended to each generated node.toml.
    pub extra_toml: String,
    /// `[node] threads` of the generated nodes (`None`: their default).
    pub node_threads: Option<usize>,
    /// Keep the generated configs and node logs (their path is printed).
    pub keep_dir: bool,
}

/// Runs the scenario; errors are setup failures (a node that does not
/// start, a login refused), never measurements.
pub async fn run(scenario: &Scenario) -> Result<RunReport, Error> {
    let work = std::env::temp_dir().join(format!("lessgate-loadgen-{}", std::process::id()));
    let cluster = match &scenario.target {
        Some(_) => None,
        None => {
            let spec = ClusterSpec {
                nodes: scenario.nodes.max(1),
                topology: scenario.topology,
                tick_hz: scenario.tick_hz,
                dir: work.clone(),
                binary: scenario.binary.clone(),
                extra_toml: scenario.extra_toml.clone(),
                node_threads: scenario.node_threads,
                knet_datagrams_per_sec: scenario.knet_datagrams_per_sec,
                default_stats: false,
            };
            Some(tokio::task::spawn_blocking(move || Cluster::start(&spec)).await??)
        }
    };
    let (writer_url, observer_url) = match (&scenario.target, &cluster) {
        (Some(target), _) => (
            target.clone(),
            scenario.observer_target.clone().unwrap_or(target.clone()),
        ),
        (None, Some(c)) => (
            c.nodes
                .first()
                .map(|n| scenario.transport.url(n))
                .unwrap_or_default(),
            c.nodes
                .last()
                .map(|n| scenario.transport.url(n))
                .unwrap_or_default(),
        ),
        (None, None) => unreachable!("a cluster is started when there is no target"),
    };

    let table = Arc::new(SendTable::new(scenario.entities));
    let observer_count = scenario.observers.max(1);
    let mut states = Vec::new();
    let mut observers = Vec::new();
    for o in 0..observer_count {
        let state = Arc::new(ObserverState::default());
        let name = match o {
            0 => "lg-observer".to_owned(),
            o => format!("lg-observer-{o}"),
        };
        let session = Session::login(&observer_url, &name, scenario.protocol).await?;
        observers.push(tokio::spawn(run_observer(
            session,
            table.clone(),
            state.clone(),
        )));
        states.push(state);
    }
    // The fewest entities any observer has seen.
    let seen = |states: &[Arc<ObserverState>]| {
        states
            .iter()
            .map(|s| s.entities_seen.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    };

    // Writers log in and create their share, all at once.
    let writers = scenario.writers.clamp(1, scenario.entities.max(1));
    let setup_started = Instant::now();
    let mut creations = Vec::new();
    for w in 0..writers {
        let first = scenario.entities * w / writers;
        let count = scenario.entities * (w + 1) / writers - first;
        let url = writer_url.clone();
        let protocol = scenario.protocol;
        creations.push(tokio::spawn(async move {
            let mut session = Session::login(&url, &format!("lg-writer-{w}"), protocol).await?;
            let entities = session.create_entities(first, count).await?;
            Ok::<_, Error>((session, entities, first))
        }));
    }
    let mut ready = Vec::new();
    for creation in creations {
        ready.push(creation.await??);
    }
    // Wait until every observer has seen every entity, or until the count
    // has not grown for SEEN_PATIENCE (entities lost on the way are
    // reported, and the run measures the ones that arrived).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = (0u64, Instant::now());
    loop {
        let seen = seen(&states);
        if seen as usize >= scenario.entities {
            break;
        }
        if seen != last.0 {
            last = (seen, Instant::now());
        }
        if (seen > 0 && last.1.elapsed() > SEEN_PATIENCE) || Instant::now() > deadline {
            eprintln!(
                "loadgen: the observer saw only {seen} of {} entities; measuring those",
                scenario.entities
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let setup_secs = setup_started.elapsed().as_secs_f64();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let moving_started = Instant::now();
    let mut running = Vec::new();
    for (session, entities, first) in ready {
        running.push(tokio::spawn(run_writer(
            session,
            entities,
            first,
            scenario.rate_hz,
            scenario.send_interval,
            table.clone(),
            stop.clone(),
        )));
    }
    tokio::time::sleep(scenario.warmup).await;

    // The measured window.
    let pids: Vec<(String, u32)> = match &cluster {
        Some(c) => c.nodes.iter().map(|n| (n.name.clone(), n.pid())).collect(),
        None => scenario
            .target_pid
            .map(|pid| vec![("target".to_owned(), pid)])
            .unwrap_or_default(),
    };
    let counters_before: Vec<NodeCounters> = cluster
        .as_ref()
        .map(|c| c.nodes.iter().map(|n| n.counters()).collect())
        .unwrap_or_default();
    let cpu_marks: Vec<CpuMark> = pids.iter().map(|(_, pid)| CpuMark::start(*pid)).collect();
    let own_cpu = CpuMark::start(std::process::id());
    let window_started = Instant::now();
    let start_us = super::now_us().max(1);
    for state in &states {
        state.window_start_us.store(start_us, Ordering::Relaxed);
    }
    tokio::time::sleep(scenario.duration).await;
    let end_us = super::now_us().max(1);
    for state in &states {
        state.window_end_us.store(end_us, Ordering::Relaxed);
    }
    let window = window_started.elapsed().as_secs_f64();
    let counters_after: Vec<NodeCounters> = cluster
        .as_ref()
        .map(|c| c.nodes.iter().map(|n| n.counters()).collect())
        .unwrap_or_default();
    let generator_cores = own_cpu.cores().unwrap_or(0.0);
    let nodes: Vec<NodeReport> = pids
        .iter()
        .zip(&cpu_marks)
        .enumerate()
        .map(|(i, ((name, pid), mark))| {
            let (before, after) = (counters_before.get(i), counters_after.get(i));
            NodeReport {
                name: name.clone(),
                cpu_cores: mark.cores(),
                peak_rss_kib: status_kib(*pid, "VmHWM"),
                rss_kib: status_kib(*pid, "VmRSS"),
                frames_in_per_sec: match (before, after) {
                    (Some(b), Some(a)) => {
                        Some(a.frames_in.saturating_sub(b.frames_in) as f64 / window)
                    }
                    _ => None,
                },
                links: match (before, after) {
                    (Some(b), Some(a)) => link_reports(b, a, window),
                    _ => Vec::new(),
                },
            }
        })
        .collect();

    stop.store(true, Ordering::Relaxed);
    let moving_secs = moving_started.elapsed().as_secs_f64();
    let mut sent = 0;
    let mut due = 0;
    let mut writer_frames_received = 0;
    for writer in running {
        let outcome = writer.await??;
        sent += outcome.sent;
        due += outcome.due;
        writer_frames_received += outcome.frames_received;
    }
    for state in &states {
        state.stop.store(true, Ordering::Relaxed);
    }
    // Every observer's outcome, summed (latency samples merged); delivered
    // moves are reported per observer.
    let mut observed = ObserverOutcome::default();
    for observer in observers {
        observed.absorb(observer.await??);
    }
    let entities_seen = seen(&states) as usize;
    drop(cluster);
    if scenario.keep_dir {
        eprintln!("loadgen: configs and node logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }

    let offered = scenario.entities as f64 * scenario.rate_hz;
    Ok(RunReport {
        nodes_started: pids.len(),
        topology: scenario.topology,
        external_target: scenario.target.clone(),
        tick_hz: scenario.tick_hz,
        entities: scenario.entities,
        entities_seen,
        rate_hz: scenario.rate_hz,
        writers,
        send_interval_ms: u64::try_from(scenario.send_interval.as_millis()).unwrap_or(u64::MAX),
        observers: observer_count,
        window_secs: window,
        setup_secs,
        offered_per_sec: offered,
        sent_per_sec: sent as f64 / moving_secs,
        schedule_kept: if due == 0 {
            1.0
        } else {
            sent as f64 / due as f64
        },
        delivered_per_sec: observed.delivered as f64 / window / observer_count as f64,
        delivered_fraction: if offered > 0.0 {
            observed.delivered as f64 / window / observer_count as f64 / offered
        } else {
            0.0
        },
        latency: observed.latency.summary(),
        latency_samples: observed.latency.count(),
        stale: observed.stale,
        observer_bytes_per_sec: observed.bytes as f64 / window / observer_count as f64,
        observer_frames_per_sec: observed.frames as f64 / window / observer_count as f64,
        writer_frames_received,
        generator_cpu_cores: generator_cores,
        generator_peak_rss_kib: status_kib(std::process::id(), "VmHWM"),
        nodes,
    })
}

fn link_reports(before: &NodeCounters, after: &NodeCounters, window: f64) -> Vec<LinkReport> {
    // A pair of nodes may have had more than one connection (both dial; one
    // survives): sum every connection to the same peer over the window.
    let mut by_peer: std::collections::BTreeMap<String, LinkReport> = Default::default();
    for (key, a) in &after.links {
        let b = before.links.get(key).copied().unwrap_or_default();
        let peer = serde_json::from_str::<serde_json::Value>(key)
            .ok()
            .and_then(|span| span["peer"].as_str().map(str::to_owned))
            .unwrap_or_else(|| key.clone());
        let entry = by_peer.entry(peer.clone()).or_insert(LinkReport {
            link: peer,
            bytes_sent_per_sec: 0.0,
            bytes_received_per_sec: 0.0,
            packets_sent_per_sec: 0.0,
            values_sent_per_sec: 0.0,
        });
        entry.bytes_sent_per_sec += a.bytes_sent.saturating_sub(b.bytes_sent) as f64 / window;
        entry.bytes_received_per_sec +=
            a.bytes_received.saturating_sub(b.bytes_received) as f64 / window;
        entry.packets_sent_per_sec += a.packets_sent.saturating_sub(b.packets_sent) as f64 / window;
        entry.values_sent_per_sec += a.values_sent.saturating_sub(b.values_sent) as f64 / window;
    }
    by_peer.into_values().collect()
}
