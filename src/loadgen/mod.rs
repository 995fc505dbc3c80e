//! Load generator: Tundra WebSocket clients that create entities and move
//! them at a fixed rate, an observer client that measures when each move
//! arrives, the orchestration that starts a federation of `lessgate run`
//! processes on 127.0.0.1 (or points at any external Tundra server), and
//! the baselines that make the results ratios (raw WebSocket frames, UDP
//! datagrams, keyed hashes, wire sizes of the same motion).
//!
//! The client side speaks only the Tundra wire protocol (over WebSocket,
//! messages per docs/tundra-wire.md), so the same run can target
//! the reference Tundra server. This module measures; it owns no protocol
//! logic and no pass/fail decision.

pub mod baseline;
pub mod client;
pub mod cluster;
pub mod idle;
pub mod latency;
pub mod link;
/// Kept here too: the load generator measured processes with it first.
pub use crate::proc_stats;
pub mod report;
pub mod scenario;

use std::sync::OnceLock;
use std::time::Instant;

/// Microseconds since the first call in this process: the one clock that
/// writers stamp sends with and the observer reads arrivals with.
pub fn now_us() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_micros() as u64
}
