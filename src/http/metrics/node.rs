//! The node itself: build, readiness, process resources, loop lag, name
//! and uptime, clients and entities by origin and authority.

use super::exposition::Exposition;
use crate::proc_stats::ProcessSample;
use crate::runtime::loop_lag::{LoopLag, BUCKETS};
use crate::runtime::status::NodeStatus;

/// The node's own families, in the order `render` writes them.
pub(super) fn node_families(e: &mut Exposition, status: &NodeStatus, process: &ProcessSample) {
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
    process_families(e, process);
    loop_lag_family(e, &status.loop_lag);
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
