//! `/metrics`: the node's status in the Prometheus text exposition format
//! (version 0.0.4: `# HELP`, `# TYPE`, then `name{labels} value` lines,
//! every family's samples together). Rendered from a [`NodeStatus`]
//! snapshot, so scraping never touches the node.
//!
//! Counters of a peer link restart from zero when the link is re-established
//! (a new LESS session); Prometheus treats that as a counter reset.

use std::fmt::Write;

use crate::proc_stats::ProcessSample;
use crate::runtime::loop_lag::{LoopLag, BUCKETS};
use crate::runtime::status::{LinkStatus, NodeStatus};

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Escapes a label value: backslash, double quote and line feed (the
/// format's only escapes).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Writes metric families; each starts with its HELP and TYPE lines.
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"{}\"", escape(text));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family with one sample per peer link.
    fn per_link(
        &mut self,
        status: &NodeStatus,
        name: &str,
        kind: &str,
        help: &str,
        value: impl Fn(&LinkStatus) -> f64,
    ) {
        if status.links.is_empty() {
            return;
        }
        self.family(name, kind, help);
        for link in &status.links {
            let (id, uuid) = (link.link.to_string(), link.peer_uuid.to_string());
            self.sample(
                name,
                &[("peer", &link.peer), ("peer_uuid", &uuid), ("link", &id)],
                value(link),
            );
        }
    }
}

/// Reads one counter of a link.
type LinkCounter = fn(&LinkStatus) -> u64;

/// Renders a status snapshot and this process's figures as Prometheus text.
pub fn render(status: &NodeStatus, process: &ProcessSample) -> String {
    let mut e = Exposition { out: String::new() };
    let uuid = status.uuid.to_string();
    e.family(
        "lessgate_build_info",
        "gauge",
        "The version and commit this node runs (always 1).",
    );
    e.sample(
        "lessgate_build_info",
        &[("version", &status.version), ("commit", &status.commit)],
        1.0,
    );
    e.family(
        "lessgate_ready",
        "gauge",
        "1 when every listener serves and every configured peer is linked (as /readyz).",
    );
    let ready = if status.readiness().ready { 1.0 } else { 0.0 };
    e.sample("lessgate_ready", &[], ready);
    if let Some(state) = status.upstream {
        e.family(
            "lessgate_upstream_ready",
            "gauge",
            "Upstream mode: 1 when the session to the world server is logged in and reconciled.",
        );
        let ready = if state == "ready" { 1.0 } else { 0.0 };
        e.sample("lessgate_upstream_ready", &[], ready);
    }
    process_families(&mut e, process);
    loop_lag_family(&mut e, &status.loop_lag);
    e.family(
        "lessgate_node_info",
        "gauge",
        "The node's name and federation identity (always 1).",
    );
    e.sample(
        "lessgate_node_info",
        &[("node", &status.node), ("uuid", &uuid)],
        1.0,
    );
    e.family(
        "lessgate_uptime_seconds",
        "gauge",
        "Seconds since the node started.",
    );
    e.sample("lessgate_uptime_seconds", &[], status.uptime_secs);
    e.family("lessgate_clients", "gauge", "Logged-in Tundra clients.");
    e.sample("lessgate_clients", &[], status.clients as f64);
    e.family(
        "lessgate_entities",
        "gauge",
        "Entities in the scene, local and remote.",
    );
    e.sample("lessgate_entities", &[], status.entities as f64);
    e.family(
        "lessgate_entities_by_origin",
        "gauge",
        "Entities presented here per origin node, this node included.",
    );
    for origin in &status.origins {
        let uuid = origin.uuid.to_string();
        let name = origin.name.as_deref().unwrap_or("");
        e.sample(
            "lessgate_entities_by_origin",
            &[("origin", name), ("origin_uuid", &uuid)],
            origin.entities as f64,
        );
    }
    e.family(
        "lessgate_entities_by_authority",
        "gauge",
        "Federated entities presented here per authority node, this node included.",
    );
    for authority in &status.authorities {
        let uuid = authority.uuid.to_string();
        let name = authority.name.as_deref().unwrap_or("");
        e.sample(
            "lessgate_entities_by_authority",
            &[("authority", name), ("authority_uuid", &uuid)],
            authority.entities as f64,
        );
    }
    let h = &status.handovers;
    e.family(
        "lessgate_handovers_given_total",
        "counter",
        "Entities this node handed to another node (reclaim: took back), by node and reason.",
    );
    for given in &h.given {
        let uuid = given.peer_uuid.to_string();
        e.sample(
            "lessgate_handovers_given_total",
            &[
                ("peer", given.peer.as_deref().unwrap_or("")),
                ("peer_uuid", &uuid),
                ("reason", &given.reason),
            ],
            given.count as f64,
        );
    }
    e.family(
        "lessgate_handovers_taken_total",
        "counter",
        "Entities this node took over, by previous authority and reason (push: not asked for).",
    );
    for taken in &h.taken {
        let uuid = taken.peer_uuid.to_string();
        e.sample(
            "lessgate_handovers_taken_total",
            &[
                ("peer", taken.peer.as_deref().unwrap_or("")),
                ("peer_uuid", &uuid),
                ("reason", &taken.reason),
            ],
            taken.count as f64,
        );
    }
    e.family(
        "lessgate_handover_refusals_total",
        "counter",
        "Take-authority requests this node refused as the authority, by reason.",
    );
    for (reason, count) in &h.refused {
        e.sample(
            "lessgate_handover_refusals_total",
            &[("reason", reason)],
            *count as f64,
        );
    }
    e.family(
        "lessgate_handover_requests_refused_total",
        "counter",
        "This node's take-authority requests refused, by status.",
    );
    for (status, count) in &h.requests_refused {
        e.sample(
            "lessgate_handover_requests_refused_total",
            &[("status", status)],
            *count as f64,
        );
    }
    e.family(
        "lessgate_stale_epoch_updates_total",
        "counter",
        "Entity updates refused for an older epoch than the copy's.",
    );
    e.sample(
        "lessgate_stale_epoch_updates_total",
        &[],
        h.stale_epochs as f64,
    );
    e.family(
        "lessgate_superseded_edits_total",
        "counter",
        "This node's own edits that came back after a later edit overtook them, dropped.",
    );
    e.sample(
        "lessgate_superseded_edits_total",
        &[],
        h.superseded_edits as f64,
    );
    e.family(
        "lessgate_world_handovers_total",
        "counter",
        "Upstream mode: world-server entities handed out of the world server (out) and entities that became the world server's (in).",
    );
    for (direction, count) in [("out", h.world_handed_out), ("in", h.world_adopted)] {
        e.sample(
            "lessgate_world_handovers_total",
            &[("direction", direction)],
            count as f64,
        );
    }
    let z = &status.zones;
    e.family(
        "lessgate_zone_requests_total",
        "counter",
        "Take-authority requests for entities that settled in this node's zones, by outcome.",
    );
    for (outcome, count) in [
        ("sent", z.sent),
        ("not_sent", z.not_sent),
        ("refused", z.refused),
    ] {
        e.sample(
            "lessgate_zone_requests_total",
            &[("outcome", outcome)],
            count as f64,
        );
    }
    e.family(
        "lessgate_zone_watched_entities",
        "gauge",
        "Entities this node's zone trigger watches.",
    );
    e.sample("lessgate_zone_watched_entities", &[], z.watched as f64);
    let s = &status.server;
    let server: [(&str, &str, u64); 10] = [
        (
            "lessgate_tundra_frames_received_total",
            "WebSocket frames received from Tundra clients.",
            s.frames_in,
        ),
        (
            "lessgate_tundra_frames_sent_total",
            "WebSocket frames sent to Tundra clients.",
            s.frames_out,
        ),
        (
            "lessgate_tundra_received_bytes_total",
            "Bytes of Tundra messages received.",
            s.bytes_in,
        ),
        (
            "lessgate_tundra_sent_bytes_total",
            "Bytes of Tundra messages sent.",
            s.bytes_out,
        ),
        (
            "lessgate_tundra_refused_messages_total",
            "Client messages refused or skipped.",
            s.refused_messages,
        ),
        (
            "lessgate_tundra_clients_closed_total",
            "Client connections closed for misbehaviour.",
            s.clients_closed_for_misbehaviour,
        ),
        (
            "lessgate_tundra_early_writes_total",
            "Clients written before the network tick because their connection was idle.",
            s.early_writes,
        ),
        (
            "lessgate_federation_scene_refusals_total",
            "Changes from peers the scene refused.",
            status.refusals.federation_scene,
        ),
        (
            "lessgate_federation_session_refusals_total",
            "Commands a LESS session refused.",
            status.refusals.federation_session,
        ),
        (
            "lessgate_upstream_scene_refusals_total",
            "Changes from the world server the scene refused.",
            status.refusals.upstream_scene,
        ),
    ];
    for (name, help, value) in server {
        e.family(name, "counter", help);
        e.sample(name, &[], value as f64);
    }
    e.family("lessgate_peer_links", "gauge", "Peer links that are up.");
    e.sample("lessgate_peer_links", &[], status.links.len() as f64);
    peer_health_families(&mut e, status);
    e.per_link(
        status,
        "lessgate_peer_rtt_seconds",
        "gauge",
        "Smoothed round-trip time of the link.",
        |l| l.rtt_ms / 1e3,
    );
    e.per_link(
        status,
        "lessgate_peer_rtt_variance_seconds",
        "gauge",
        "Round-trip time variance of the link.",
        |l| l.rtt_variance_ms / 1e3,
    );
    let counters: [(&str, &str, LinkCounter); 8] = [
        (
            "lessgate_peer_packets_sent_total",
            "Packets sent on the link.",
            |l| l.packets_sent,
        ),
        (
            "lessgate_peer_sent_bytes_total",
            "Bytes sent on the link.",
            |l| l.bytes_sent,
        ),
        (
            "lessgate_peer_packets_resent_total",
            "Packets sent again after a loss.",
            |l| l.packets_resent,
        ),
        (
            "lessgate_peer_packets_received_total",
            "Packets received on the link.",
            |l| l.packets_received,
        ),
        (
            "lessgate_peer_received_bytes_total",
            "Bytes received on the link.",
            |l| l.bytes_received,
        ),
        (
            "lessgate_peer_packets_lost_total",
            "Packets declared lost.",
            |l| l.packets_lost,
        ),
        (
            "lessgate_peer_values_sent_total",
            "Property values carried in new packets on the link.",
            |l| l.values_sent,
        ),
        (
            "lessgate_peer_values_received_total",
            "Property values received on the link.",
            |l| l.values_received,
        ),
    ];
    for (name, help, value) in counters {
        e.per_link(status, name, "counter", help, |l| value(l) as f64);
    }
    if !status.links.is_empty() {
        let name = "lessgate_peer_rejected_total";
        e.family(name, "counter", "Frames refused on the link, by reason.");
        for link in &status.links {
            let (id, uuid) = (link.link.to_string(), link.peer_uuid.to_string());
            for (reason, count) in &link.rejected {
                e.sample(
                    name,
                    &[
                        ("peer", &link.peer),
                        ("peer_uuid", &uuid),
                        ("link", &id),
                        ("reason", reason),
                    ],
                    *count as f64,
                );
            }
        }
    }
    e.per_link(
        status,
        "lessgate_peer_exported_entities",
        "gauge",
        "Entities this node sends on the link.",
        |l| l.exported_entities as f64,
    );
    e.per_link(
        status,
        "lessgate_peer_mirrored_entities",
        "gauge",
        "Entities the peer presents to this node on the link.",
        |l| l.mirrored_entities as f64,
    );
    e.out
}

/// The process's resources, under the names Prometheus client libraries
/// give them; a figure `/proc` could not give is left out.
fn process_families(e: &mut Exposition, process: &ProcessSample) {
    let families = [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            process.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            process.resident_bytes.map(|b| b as f64),
        ),
        (
            "process_open_fds",
            "gauge",
            "Open file descriptors (sockets included).",
            process.open_files.map(|n| n as f64),
        ),
        (
            "process_max_fds",
            "gauge",
            "The limit on open file descriptors.",
            process.max_open_files.map(|n| n as f64),
        ),
    ];
    for (name, kind, help, value) in families {
        if let Some(value) = value {
            e.family(name, kind, help);
            e.sample(name, &[], value);
        }
    }
}

/// The node loop's lag as a Prometheus histogram.
fn loop_lag_family(e: &mut Exposition, lag: &LoopLag) {
    let name = "lessgate_node_loop_lag_seconds";
    e.family(
        name,
        "histogram",
        "How late the node loop served a due timer.",
    );
    let bucket = format!("{name}_bucket");
    for (bound, count) in BUCKETS.iter().zip(lag.buckets) {
        e.sample(&bucket, &[("le", &bound.to_string())], count as f64);
    }
    e.sample(&bucket, &[("le", "+Inf")], lag.count as f64);
    e.sample(&format!("{name}_sum"), &[], lag.sum_secs);
    e.sample(&format!("{name}_count"), &[], lag.count as f64);
}

/// Configured peers up or down, why links ended, and what the data
/// socket and the identity check refused.
fn peer_health_families(e: &mut Exposition, status: &NodeStatus) {
    let name = "lessgate_peer_up";
    e.family(
        name,
        "gauge",
        "1 while a configured peer is linked, 0 while it is not.",
    );
    for peer in &status.peers {
        e.sample(
            name,
            &[("peer", &peer.name)],
            f64::from(u8::from(peer.linked)),
        );
    }
    let name = "lessgate_peer_link_ends_total";
    e.family(name, "counter", "Peer links ended, by reason code.");
    for (reason, count) in &status.link_ends.by_code {
        e.sample(name, &[("reason", reason)], *count as f64);
    }
    let name = "lessgate_data_socket_dropped_total";
    e.family(
        name,
        "counter",
        "Datagrams the peer data socket dropped before any link read them, by reason.",
    );
    let drops = &status.data_socket;
    e.sample(
        name,
        &[("reason", "unknown_source")],
        drops.unknown_source as f64,
    );
    e.sample(name, &[("reason", "queue_full")], drops.queue_full as f64);
    let name = "lessgate_identity_conflicts_total";
    e.family(
        name,
        "counter",
        "Peer connections refused because two nodes share one node UUID.",
    );
    e.sample(name, &[], status.identity_conflicts as f64);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::runtime::status::{OriginStatus, ServerCounters};

    fn status() -> NodeStatus {
        NodeStatus {
            node: "alpha".into(),
            uuid: Uuid::from_u128(1),
            tundra_url: "ws://127.0.0.1:2345".into(),
            uptime_secs: 12.5,
            clients: 2,
            entities: 3,
            origins: vec![
                OriginStatus {
                    uuid: Uuid::from_u128(1),
                    name: Some("alpha".into()),
                    entities: 1,
                },
                OriginStatus {
                    uuid: Uuid::from_u128(2),
                    name: None,
                    entities: 2,
                },
            ],
            server: ServerCounters {
                frames_in: 10,
                refused_messages: 1,
                ..ServerCounters::default()
            },
            links: vec![LinkStatus {
                link: 4,
                peer: "be\"ta".into(),
                peer_uuid: Uuid::from_u128(2),
                rtt_ms: 1.5,
                rtt_variance_ms: 0.25,
                packets_sent: 7,
                bytes_sent: 700,
                packets_resent: 0,
                packets_received: 6,
                bytes_received: 600,
                packets_lost: 1,
                values_sent: 12,
                values_received: 9,
                rejected: BTreeMap::from([("bad_signature", 3), ("stale", 0)]),
                exported_entities: 1,
                mirrored_entities: 2,
                bulk: Default::default(),
            }],
            ..NodeStatus::default()
        }
    }

    #[test]
    fn renders_families_with_help_type_and_labelled_samples() {
        let text = render(&status(), &ProcessSample::default());
        let lines: Vec<&str> = text.lines().collect();
        let at = |needle: &str| {
            lines
                .iter()
                .position(|l| *l == needle)
                .unwrap_or_else(|| panic!("missing line {needle:?} in\n{text}"))
        };
        let help = at("# HELP lessgate_clients Logged-in Tundra clients.");
        assert_eq!(lines[help + 1], "# TYPE lessgate_clients gauge");
        assert_eq!(lines[help + 2], "lessgate_clients 2");
        at("lessgate_node_info{node=\"alpha\",uuid=\"00000000-0000-0000-0000-000000000001\"} 1");
        at("lessgate_uptime_seconds 12.5");
        at("lessgate_entities_by_origin{origin=\"\",origin_uuid=\"00000000-0000-0000-0000-000000000002\"} 2");
        at("# TYPE lessgate_tundra_frames_received_total counter");
        at("lessgate_tundra_frames_received_total 10");
        at("lessgate_peer_links 1");
        // The peer's name is escaped: a quote cannot end the label early.
        at("lessgate_peer_rtt_seconds{peer=\"be\\\"ta\",peer_uuid=\"00000000-0000-0000-0000-000000000002\",link=\"4\"} 0.0015");
        at("lessgate_peer_packets_lost_total{peer=\"be\\\"ta\",peer_uuid=\"00000000-0000-0000-0000-000000000002\",link=\"4\"} 1");
        at("lessgate_peer_rejected_total{peer=\"be\\\"ta\",peer_uuid=\"00000000-0000-0000-0000-000000000002\",link=\"4\",reason=\"bad_signature\"} 3");
        at("lessgate_peer_mirrored_entities{peer=\"be\\\"ta\",peer_uuid=\"00000000-0000-0000-0000-000000000002\",link=\"4\"} 2");
    }

    #[test]
    fn every_sample_belongs_to_the_family_declared_just_before_it() {
        let text = render(&status(), &ProcessSample::default());
        let mut family = String::new();
        let mut types = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap().to_owned();
                types += 1;
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                // A histogram's samples are its name with a suffix.
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .filter(|base| *base == family)
                    .unwrap_or(name);
                assert_eq!(base, family, "sample outside its family: {line}");
                let value = line.rsplit(' ').next().unwrap();
                assert!(value.parse::<f64>().is_ok(), "{line}");
            }
        }
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(helps, types);
        assert!(types > 20);
    }

    #[test]
    fn two_links_to_one_peer_are_distinct_series() {
        // Both ends dial; until the duplicate is resolved a node holds two
        // links to the same peer, and every series must stay unique.
        let mut s = status();
        let mut second = s.links[0].clone();
        second.link = 5;
        s.links.push(second);
        let text = render(&s, &ProcessSample::default());
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect();
        let unique: std::collections::BTreeSet<&str> = samples.iter().copied().collect();
        assert_eq!(unique.len(), samples.len(), "{text}");
        assert!(text.contains("link=\"5\"} 0.0015"));
    }

    #[test]
    fn build_process_loop_lag_and_peer_health_series() {
        use crate::runtime::peer_health::PeerHealth;
        use crate::runtime::status::LinkEnd;
        let mut s = status();
        s.version = "0.1.0".into();
        s.commit = "1a2b3c".into();
        s.listening = true;
        s.peers =
            PeerHealth::new([("be\"ta", true), ("gamma", false)]).states(|name| name == "be\"ta");
        for code in ["liveness-timeout", "shutdown", "shutdown"] {
            s.link_ends.record(LinkEnd {
                link: 1,
                peer: "gamma".into(),
                code: code.into(),
                reason: String::new(),
                by_this_node: false,
                at_secs: 1.0,
            });
        }
        s.data_socket.unknown_source = 5;
        s.loop_lag.record(std::time::Duration::from_micros(300));
        s.loop_lag.record(std::time::Duration::from_millis(70));
        let process = ProcessSample {
            cpu_seconds: Some(1.25),
            resident_bytes: Some(4096),
            open_files: Some(17),
            max_open_files: None,
        };
        let text = render(&s, &process);
        let lines: Vec<&str> = text.lines().collect();
        for line in [
            "lessgate_build_info{version=\"0.1.0\",commit=\"1a2b3c\"} 1",
            "lessgate_ready 0",
            "lessgate_peer_up{peer=\"be\\\"ta\"} 1",
            "lessgate_peer_up{peer=\"gamma\"} 0",
            "lessgate_peer_link_ends_total{reason=\"liveness-timeout\"} 1",
            "lessgate_peer_link_ends_total{reason=\"shutdown\"} 2",
            "lessgate_data_socket_dropped_total{reason=\"unknown_source\"} 5",
            "lessgate_data_socket_dropped_total{reason=\"queue_full\"} 0",
            "process_cpu_seconds_total 1.25",
            "process_resident_memory_bytes 4096",
            "process_open_fds 17",
            "# TYPE lessgate_node_loop_lag_seconds histogram",
            "lessgate_node_loop_lag_seconds_bucket{le=\"0.0005\"} 1",
            "lessgate_node_loop_lag_seconds_bucket{le=\"0.05\"} 1",
            "lessgate_node_loop_lag_seconds_bucket{le=\"0.1\"} 2",
            "lessgate_node_loop_lag_seconds_bucket{le=\"+Inf\"} 2",
            "lessgate_node_loop_lag_seconds_count 2",
        ] {
            assert!(lines.contains(&line), "missing {line:?} in\n{text}");
        }
        // A figure /proc could not give is left out, not reported as 0.
        assert!(!text.contains("process_max_fds"));
        s.peers.iter_mut().for_each(|p| p.linked = true);
        assert!(render(&s, &process).contains("\nlessgate_ready 1\n"));
    }

    #[test]
    fn a_standalone_node_has_no_per_link_families() {
        let mut s = status();
        s.links.clear();
        let text = render(&s, &ProcessSample::default());
        assert!(text.contains("lessgate_peer_links 0\n"));
        assert!(!text.contains("lessgate_peer_rtt_seconds"));
        assert_eq!(escape("a\\b\nc"), "a\\\\b\\nc");
    }
}
