//! `[node]`: the node's name, identity, network tick and threads.

use serde::{Deserialize, Serialize};

/// Tundra's default network tick (`updatePeriod_ = 1/20`).
pub const DEFAULT_TICK_HZ: u32 = 20;
/// Tundra clamps `--netrate` to a period of at least 0.01 s.
pub(super) const MAX_TICK_HZ: u32 = 100;
/// More threads than this is a typo, not a machine.
pub(super) const MAX_THREADS: usize = 256;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSection {
    /// A short name shown in logs and to peers.
    pub name: String,
    /// Network ticks per second for client sync and peer packets.
    pub tick_hz: u32,
    /// The node's identity among peers (sent in the peer-link hello and used
    /// to settle simultaneous dials); required with `[peering]`.
    pub uuid: Option<uuid::Uuid>,
    /// Threads the process runs on: 1, the default, everything on one
    /// thread (no hand-offs between threads: 8-37 % less CPU per update
    /// than 0 at the same latency, at most one core); 0, one socket worker
    /// per core beside the node's own thread; N, the node's thread and
    /// N - 1 socket workers.
    pub threads: usize,
    /// Where this node's own world's origin lies in the federation's
    /// shared space, in metres (docs/federation.md §2.7); `[0, 0, 0]`, the
    /// default, translates nothing. A reload applies it.
    pub placement: [f64; 3],
}

impl Default for NodeSection {
    fn default() -> Self {
        NodeSection {
            name: "lessgate".to_owned(),
            tick_hz: DEFAULT_TICK_HZ,
            uuid: None,
            threads: 1,
            placement: [0.0; 3],
        }
    }
}
