//! What a load run measured, as JSON (serde) and as the plain-text table
//! `lessgate loadgen` prints. Only measured numbers; ratios are computed
//! from numbers of the same run.

use std::fmt::Write as _;

use serde::Serialize;

use super::baseline::WireSizes;
use super::cluster::Topology;
use super::latency::Percentiles;

/// One peer link as seen from one node over the window.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// The span the node's stats line carried (identifies the link).
    pub link: String,
    pub bytes_sent_per_sec: f64,
    pub bytes_received_per_sec: f64,
    pub packets_sent_per_sec: f64,
    /// Property values carried per second (coalesced state: at most one per
    /// property per packet).
    pub values_sent_per_sec: f64,
}

/// One server process over the window.
#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    pub name: String,
    /// Average cores used (1.0 = one core busy).
    pub cpu_cores: Option<f64>,
    /// VmHWM: peak resident memory since start.
    pub peak_rss_kib: Option<u64>,
    pub rss_kib: Option<u64>,
    /// Tundra frames received from clients per second.
    pub frames_in_per_sec: Option<f64>,
    pub links: Vec<LinkReport>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub nodes_started: usize,
    pub topology: Topology,
    pub external_target: Option<String>,
    pub tick_hz: u32,
    pub entities: usize,
    /// Of those, how many the observer saw created.
    pub entities_seen: usize,
    pub rate_hz: f64,
    pub writers: usize,
    /// Milliseconds between a writer's sends.
    pub send_interval_ms: u64,
    /// Observer connections on the last node.
    pub observers: usize,
    pub window_secs: f64,
    /// Login, creation and the observer seeing every entity.
    pub setup_secs: f64,
    /// Updates per second the schedule asks for.
    pub offered_per_sec: f64,
    /// Updates per second the writers sent.
    pub sent_per_sec: f64,
    /// Sent over due at the end (below 0.95: the writers fell behind).
    pub schedule_kept: f64,
    /// Moves one observer saw per second (after any coalescing), averaged
    /// over the observers.
    pub delivered_per_sec: f64,
    /// `delivered_per_sec` over the offered rate.
    pub delivered_fraction: f64,
    /// Every observer's moves together.
    pub latency: Percentiles,
    /// Timed moves, all observers together.
    pub latency_samples: u64,
    /// Moves seen whose send time had left the ring, all observers.
    pub stale: u64,
    /// Per observer.
    pub observer_bytes_per_sec: f64,
    /// Per observer.
    pub observer_frames_per_sec: f64,
    /// Frames the servers sent the writers (drained unread).
    pub writer_frames_received: u64,
    /// Cores this load generator used in the window.
    pub generator_cpu_cores: f64,
    pub generator_peak_rss_kib: Option<u64>,
    pub nodes: Vec<NodeReport>,
}

impl RunReport {
    /// Whether the generator, not the server, limited the run: it fell
    /// behind its schedule while using nearly all of its worker threads.
    pub fn generator_bound(&self, generator_threads: usize) -> bool {
        self.schedule_kept < 0.95 && self.generator_cpu_cores > 0.85 * generator_threads as f64
    }

    /// Peer-link bytes per delivered update, summed over links that sent.
    pub fn link_bytes_per_update(&self) -> Option<f64> {
        let first = self.nodes.first()?;
        let sent: f64 = first.links.iter().map(|l| l.bytes_sent_per_sec).sum();
        (self.delivered_per_sec > 0.0 && sent > 0.0).then(|| sent / self.delivered_per_sec)
    }
}

/// The first node's throughput per second of its own CPU time (client
/// side, scene, federation, peer link and tick all included), and its ratio
/// to the raw WebSocket sink of the same run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerCore {
    /// Client frames (attribute updates) the node took per core-second.
    pub frames_in: f64,
    /// Property values its peer links carried per core-second; below
    /// `frames_in` when later edits superseded unsent ones. `None` for a
    /// node without links (a single-node relay run).
    pub values_out: Option<f64>,
    /// `frames_in` over the sink's frames per core-second, when the
    /// baselines were measured in the same run.
    pub of_raw_websocket: Option<f64>,
}

impl RunReport {
    /// [`PerCore`] for the first node, when its CPU and frames were measured.
    pub fn first_node_per_core(&self, baselines: Option<&Baselines>) -> Option<PerCore> {
        let node = self.nodes.first()?;
        let cores = node.cpu_cores.filter(|c| *c > 0.0)?;
        let frames_in = node.frames_in_per_sec? / cores;
        let values_out = (!node.links.is_empty()).then(|| {
            let values: f64 = node.links.iter().map(|l| l.values_sent_per_sec).sum();
            values / cores
        });
        let raw = baselines.and_then(|b| b.websocket_frames_per_sink_core_sec);
        Some(PerCore {
            frames_in,
            values_out,
            of_raw_websocket: raw.filter(|r| *r > 0.0).map(|r| frames_in / r),
        })
    }
}

/// The machine's raw limits and the formats' sizes.
#[derive(Debug, Clone, Serialize)]
pub struct Baselines {
    pub frame_bytes: usize,
    pub websocket_frames_per_sec: f64,
    /// Cores the sink's own thread used (`None` without Linux `/proc`).
    pub websocket_sink_cores: Option<f64>,
    /// Frames per second of the sink's own CPU time: the raw WebSocket
    /// frame rate per core a node's ingest is compared with.
    pub websocket_frames_per_sink_core_sec: Option<f64>,
    pub udp_datagrams_per_sec: f64,
    pub blake3_keyed_hashes_per_sec: f64,
    pub sizes: WireSizes,
}

/// Plain-text rendering of a run; `baselines`, measured in the same run,
/// make the first node's per-core rate a ratio.
pub fn render_run(
    report: &RunReport,
    generator_threads: usize,
    baselines: Option<&Baselines>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run: {} node(s) {:?}{}, tick {} Hz, {} entities ({} seen by every observer) x {} Hz by {} writer(s) sending every {} ms, {} observer(s), window {:.1} s (setup {:.1} s)",
        report.nodes_started,
        report.topology,
        report
            .external_target
            .as_ref()
            .map(|t| format!(" target {t}"))
            .unwrap_or_default(),
        report.tick_hz,
        report.entities,
        report.entities_seen,
        report.rate_hz,
        report.writers,
        report.send_interval_ms,
        report.observers,
        report.window_secs,
        report.setup_secs,
    );
    let _ = writeln!(
        out,
        "updates/s: offered {:.0}, sent {:.0} (schedule kept {:.3}), delivered end to end {:.0} per observer ({:.1} %)",
        report.offered_per_sec,
        report.sent_per_sec,
        report.schedule_kept,
        report.delivered_per_sec,
        report.delivered_fraction * 100.0
    );
    let _ = writeln!(
        out,
        "latency edit->observer: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms, max {:.3} ms ({} samples, {} stale)",
        report.latency.p50_us as f64 / 1e3,
        report.latency.p99_us as f64 / 1e3,
        report.latency.p999_us as f64 / 1e3,
        report.latency.max_us as f64 / 1e3,
        report.latency_samples,
        report.stale
    );
    let _ = writeln!(
        out,
        "observer: {:.0} frames/s, {:.0} B/s each; writers were sent {} frames",
        report.observer_frames_per_sec,
        report.observer_bytes_per_sec,
        report.writer_frames_received
    );
    for node in &report.nodes {
        let _ = writeln!(
            out,
            "node {}: cpu {} cores, peak rss {} MiB (now {} MiB), client frames in {}/s",
            node.name,
            node.cpu_cores.map_or("?".into(), |c| format!("{c:.3}")),
            node.peak_rss_kib
                .map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
            node.rss_kib
                .map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
            node.frames_in_per_sec
                .map_or("?".into(), |f| format!("{f:.0}")),
        );
        for link in &node.links {
            let per_update = if link.values_sent_per_sec > 0.0 {
                link.bytes_sent_per_sec / link.values_sent_per_sec
            } else {
                0.0
            };
            let packets_per_delivered = if report.delivered_per_sec > 0.0 {
                link.packets_sent_per_sec / report.delivered_per_sec
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  link {}: sent {:.0} updates/s, {:.0} B/s in {:.0} packets/s ({:.1} B per update, packet overhead included; {:.3} packets per delivered update), received {:.0} B/s",
                link.link,
                link.values_sent_per_sec,
                link.bytes_sent_per_sec,
                link.packets_sent_per_sec,
                per_update,
                packets_per_delivered,
                link.bytes_received_per_sec
            );
        }
    }
    if let (Some(per_core), Some(first)) =
        (report.first_node_per_core(baselines), report.nodes.first())
    {
        let _ = writeln!(
            out,
            "node {} per core-second: takes {:.0} client frames{}{}",
            first.name,
            per_core.frames_in,
            per_core
                .values_out
                .map(|v| format!(", its links carry {v:.0} values"))
                .unwrap_or_default(),
            per_core
                .of_raw_websocket
                .map(|r| format!(" ({r:.3} of the raw WebSocket sink per core)"))
                .unwrap_or_default(),
        );
    }
    let _ = writeln!(
        out,
        "generator: {:.2} cores of {} threads, peak rss {} MiB{}",
        report.generator_cpu_cores,
        generator_threads,
        report
            .generator_peak_rss_kib
            .map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
        if report.generator_bound(generator_threads) {
            " -- THE GENERATOR IS THE BOTTLENECK of this run"
        } else if report.schedule_kept < 0.95 {
            " -- writers fell behind: the server pushed back"
        } else {
            ""
        }
    );
    out
}

/// Plain-text rendering of the baselines.
pub fn render_baselines(b: &Baselines) -> String {
    format!(
        "baselines ({} B frames): websocket sink {:.0} frames/s on {} sink cores ({} frames per sink core-second), udp {:.0} datagrams/s, blake3 keyed {:.0} hashes/s\n\
         bytes per transform update: Hadean Aether packed entity struct {}, Tundra EditAttributes {}, Tundra RigidBodyUpdate position {} / position+rotation {}\n",
        b.frame_bytes,
        b.websocket_frames_per_sec,
        b.websocket_sink_cores
            .map_or("?".into(), |c| format!("{c:.2}")),
        b.websocket_frames_per_sink_core_sec
            .map_or("?".into(), |f| format!("{f:.0}")),
        b.udp_datagrams_per_sec,
        b.blake3_keyed_hashes_per_sec,
        b.sizes.aether_packed_entity,
        b.sizes.tundra_edit_attributes,
        b.sizes.tundra_rigid_body_position,
        b.sizes.tundra_rigid_body_position_rotation,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(cpu: Option<f64>, frames_in: Option<f64>) -> RunReport {
        RunReport {
            nodes_started: 2,
            topology: Topology::Chain,
            external_target: None,
            tick_hz: 20,
            entities: 10,
            entities_seen: 10,
            rate_hz: 20.0,
            writers: 1,
            send_interval_ms: 1,
            observers: 1,
            window_secs: 1.0,
            setup_secs: 1.0,
            offered_per_sec: 200.0,
            sent_per_sec: 200.0,
            schedule_kept: 1.0,
            delivered_per_sec: 200.0,
            delivered_fraction: 1.0,
            latency: Percentiles {
                p50_us: 1,
                p99_us: 2,
                p999_us: 3,
                max_us: 3,
            },
            latency_samples: 1,
            stale: 0,
            observer_bytes_per_sec: 0.0,
            observer_frames_per_sec: 0.0,
            writer_frames_received: 0,
            generator_cpu_cores: 0.1,
            generator_peak_rss_kib: None,
            nodes: vec![NodeReport {
                name: "n0".into(),
                cpu_cores: cpu,
                peak_rss_kib: None,
                rss_kib: None,
                frames_in_per_sec: frames_in,
                links: vec![LinkReport {
                    link: "l1".into(),
                    bytes_sent_per_sec: 0.0,
                    bytes_received_per_sec: 0.0,
                    packets_sent_per_sec: 0.0,
                    values_sent_per_sec: 150_000.0,
                }],
            }],
        }
    }

    fn baselines(per_sink_core: Option<f64>) -> Baselines {
        Baselines {
            frame_bytes: 44,
            websocket_frames_per_sec: 1.0,
            websocket_sink_cores: Some(1.0),
            websocket_frames_per_sink_core_sec: per_sink_core,
            udp_datagrams_per_sec: 1.0,
            blake3_keyed_hashes_per_sec: 1.0,
            sizes: super::super::baseline::wire_sizes().unwrap(),
        }
    }

    #[test]
    fn per_core_divides_by_the_first_nodes_cpu_and_the_sinks_rate() {
        let run = run_with(Some(0.5), Some(200_000.0));
        let per_core = run
            .first_node_per_core(Some(&baselines(Some(1_600_000.0))))
            .unwrap();
        assert_eq!(per_core.frames_in, 400_000.0);
        assert_eq!(per_core.values_out, Some(300_000.0));
        assert_eq!(per_core.of_raw_websocket, Some(0.25));
        let text = render_run(&run, 2, Some(&baselines(Some(1_600_000.0))));
        assert!(
            text.contains("takes 400000 client frames, its links carry 300000 values"),
            "{text}"
        );
        assert!(text.contains("0.250 of the raw WebSocket sink"), "{text}");
    }

    #[test]
    fn per_core_is_absent_without_measurements() {
        assert_eq!(run_with(None, Some(1.0)).first_node_per_core(None), None);
        assert_eq!(
            run_with(Some(0.0), Some(1.0)).first_node_per_core(None),
            None
        );
        assert_eq!(run_with(Some(1.0), None).first_node_per_core(None), None);
        // Without same-run baselines there is a rate but no ratio.
        let alone = run_with(Some(1.0), Some(10.0)).first_node_per_core(None);
        assert_eq!(alone.unwrap().of_raw_websocket, None);
        let no_sink_cpu =
            run_with(Some(1.0), Some(10.0)).first_node_per_core(Some(&baselines(None)));
        assert_eq!(no_sink_cpu.unwrap().of_raw_websocket, None);
        assert!(!render_run(&run_with(None, None), 2, None).contains("per core-second"));
        // A single node has no links: no link figure, not a zero.
        let mut relay = run_with(Some(0.5), Some(100.0));
        relay.nodes[0].links.clear();
        assert_eq!(relay.first_node_per_core(None).unwrap().values_out, None);
        let text = render_run(&relay, 2, None);
        assert!(text.contains("takes 200 client frames\n"), "{text}");
    }

    #[test]
    fn the_baselines_name_each_format_in_words_a_user_can_follow() {
        let baselines = Baselines {
            frame_bytes: 44,
            websocket_frames_per_sec: 1000.0,
            websocket_sink_cores: None,
            websocket_frames_per_sink_core_sec: None,
            udp_datagrams_per_sec: 2000.0,
            blake3_keyed_hashes_per_sec: 3000.0,
            sizes: crate::loadgen::baseline::wire_sizes().unwrap(),
        };
        let text = render_baselines(&baselines);
        assert!(
            text.contains("bytes per transform update: Hadean Aether packed entity struct 44, Tundra EditAttributes "),
            "{text}"
        );
        assert!(text.contains("Tundra RigidBodyUpdate position "), "{text}");
        // No document the user does not have.
        assert!(!text.to_lowercase().contains("seed"), "{text}");
    }
}
