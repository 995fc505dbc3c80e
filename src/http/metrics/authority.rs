//! Authority: hand-overs given, taken and refused, stale epochs,
//! superseded edits, the world server's hand-overs and zone requests
//! (docs/federation.md §7).

use super::exposition::Exposition;
use crate::runtime::status::NodeStatus;

/// Hand-overs of authority and the zone trigger.
pub(super) fn authority_families(e: &mut Exposition, status: &NodeStatus) {
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
}
