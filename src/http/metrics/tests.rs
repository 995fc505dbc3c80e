//! The exposition as Prometheus reads it.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::exposition::escape;
use super::*;
use crate::runtime::status::LinkStatus;
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
    s.peers = PeerHealth::new([("be\"ta", true), ("gamma", false)]).states(|name| name == "be\"ta");
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
