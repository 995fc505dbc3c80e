//! lessgate: an interop gateway that federates realXtend Tundra worlds.
//!
//! A node sits beside a world server (or stands in for one). It speaks the
//! Tundra protocol to local clients over WebSocket and native kNet (UDP,
//! TCP), a LESS peer link to other nodes, and in upstream mode logs in to an
//! existing Tundra server as a client. It renumbers entity ids between every
//! id space it touches and forwards each entity's state from the one origin
//! that simulates it.
//!
//! ```text
//!  Tundra clients ──ws, knet──┐
//!  world server ────ws, knet──┼─ transport ◀─▶ runtime ──snapshots──▶ http
//!  peer nodes ─────quic, udp──┘  (sockets)          │ frames, datagrams, now in
//!                                                   ▼ frames, timeouts, events out
//!                                node::Node ─┬─ server ──── tundra
//!                                            ├─ scene ───── tundra
//!                                            ├─ federation ─ less, peering
//!                                            └─ upstream ── federation ids
//! ```
//!
//! Sans-IO cores: bytes and an explicit `now` in; bytes, timeouts and events
//! out; no socket, clock or async runtime, and randomness only from seeds.
//! Listed bottom up; each uses only cores listed before it:
//! - protocols: `tundra` (messages, attribute values, component registry),
//!   `knet` (kNet framing and per-connection reliability), `less` (values,
//!   signed packets, one session per peer link), `peering` (identities,
//!   pinning, the control handshake, key derivation, backoff);
//! - state: `scene` (entities, origin, authority, the change journal);
//! - behaviour: `server` (what a Tundra server does for its clients),
//!   `federation` (id maps, translation Tundra <-> LESS, routing; it runs the
//!   LESS sessions), `upstream` (a world server's scene bridged in);
//! - `node::Node` joins them over one scene into one core with a poll API
//!   (inputs with `now`; `poll_transmit`, `poll_event`, `poll_timeout`
//!   out); the simulation tests drive the same `Node` under fake time.
//!
//! Two `tundra` loaders read a file (`txml::load_file`, `Registry::from_dir`)
//! for the drivers to call at start-up; the codecs behind them take text.
//!
//! Support open to every layer: `clock` (protocol time), `link_id` (the one
//! id of a peer link), `build_info` (version and commit), `log_budget` (rate
//! limits on log lines a remote party can cause) and `logging`'s
//! `RemoteText` (how every layer quotes what a remote party sent); the rest
//! of `logging` sets up tracing output on stderr for the drivers.
//!
//! I/O, built on the cores and never used by them:
//! - `transport`: the sockets, TLS and timers of clients, peer links and the
//!   upstream connection; it drives the `knet` connections and the `peering`
//!   handshake, and moves frames and events to and from the node;
//! - `runtime`: the tokio driver of a `Node` (as quinn drives quinn-proto):
//!   one `Driver` value owns the node, the connections' handles and the one
//!   clock (the only place process time becomes protocol time), sleeps
//!   until the node's next deadline or input, feeds it what the transports
//!   receive, hands its output back, and publishes the status snapshot
//!   (`runtime::status`, with peer health and loop lag);
//! - `http`: the operator endpoint (web viewer, `/status`, `/metrics`), fed
//!   snapshots by the runtime;
//! - `config`: the node file and the peer files, read and validated at
//!   start and on every reload into the settings each core takes, and
//!   which changed keys only a restart applies;
//! - `cli` (the subcommands), `demo` (three nodes in one process), `loadgen`
//!   (load generator and its measurements);
//! - `proc_stats`: this or another process's CPU time, memory and open
//!   files from `/proc`, for `/metrics` and the load generator.
//! - `fuzz`: the fuzz harnesses, one entry point per cargo-fuzz target,
//!   replayed by the normal suite; they may build anything (a node from the
//!   demo's worlds) and nothing uses them.
//!
//! `tests/architecture.rs` checks these dependency rules.
#![forbid(unsafe_code)]

pub mod build_info;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod federation;
#[doc(hidden)]
pub mod fuzz;
pub mod http;
pub mod knet;
pub mod less;
pub mod link_id;
pub mod loadgen;
pub mod log_budget;
pub mod logging;
pub mod node;
pub mod peering;
pub mod proc_stats;
pub mod runtime;
pub mod scene;
pub mod server;
#[cfg(test)]
mod test_log;
pub mod transport;
pub mod tundra;
pub mod upstream;
