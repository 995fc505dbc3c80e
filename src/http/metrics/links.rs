//! Peer links: how many are up, each configured peer's health, and one
//! series per link (RTT, packets, bytes, values, refusals, entities).

use super::exposition::Exposition;
use crate::runtime::status::{LinkStatus, NodeStatus};

/// Reads one counter of a link.
type LinkCounter = fn(&LinkStatus) -> u64;

/// The peer links' families.
pub(super) fn link_families(e: &mut Exposition, status: &NodeStatus) {
    e.family("lessgate_peer_links", "gauge", "Peer links that are up.");
    e.sample("lessgate_peer_links", &[], status.links.len() as f64);
    peer_health_families(e, status);
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
