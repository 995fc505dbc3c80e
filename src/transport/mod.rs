//! The network I/O: sockets, TLS, timers. Each driver moves bytes between the
//! network and the pure protocol cores and keeps its loop small.

pub mod accept_backoff;
pub mod address_limits;
pub mod client;
pub mod guarded_listener;
pub mod identity;
pub mod knet;
pub mod loop_timer;
pub mod message_budget;
pub mod open_files;
pub mod peer;
pub mod peer_tls;
pub mod tls;
pub mod udp_buffers;
pub mod upstream;
pub mod websocket;
