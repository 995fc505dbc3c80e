//! lessgate: an interop gateway that federates realXtend Tundra worlds.
//!
//! A node sits beside a world server. It speaks the Tundra protocol to local
//! clients over WebSocket and a LESS peer link to other nodes, renumbering
//! entity ids between every id space it touches and forwarding each entity's
//! state from the one origin that simulates it.
//!
//! ```text
//!  Tundra clients ──ws──▶ transport ──▶ tundra (codec, sync state)
//!                                          │
//!                                        scene  (entities, origin, authority)
//!                                          │
//!  peer nodes ◀──udp/quic──▶ transport ◀── less (values, packets, session)
//! ```
//!
//! The protocol modules (`tundra`, `less`) are pure: bytes and an explicit
//! `now` in, bytes, timeouts and events out. [`node::Node`] joins the cores
//! of one node (scene, Tundra server, federation, upstream bridge) into one
//! such core with a poll API; its driver (`node::runtime`) owns the sockets
//! and the one clock, sleeps until the node's next deadline or input, and
//! drains the node's outputs. The simulation tests drive the same `Node`
//! under fake time. Only `transport` and that driver do I/O.
#![forbid(unsafe_code)]

pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod federation;
pub mod http;
pub mod knet;
pub mod less;
pub mod link_id;
pub mod loadgen;
pub mod log_budget;
pub mod logging;
pub mod node;
pub mod peering;
pub mod scene;
pub mod server;
pub mod transport;
pub mod tundra;
pub mod upstream;
