//! The Tundra side's counters (frames, bytes, refusals, early writes) and
//! what the scene refused from peers and the world server.

use super::exposition::Exposition;
use crate::runtime::status::NodeStatus;

/// Counters of the Tundra server and the scene's refusals.
pub(super) fn tundra_families(e: &mut Exposition, status: &NodeStatus) {
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
}
