//! The peer link's pure parts: identities and pinning, the validated peer
//! set (the files are read by `crate::config`) and what a reload changes in
//! it, peer addresses (names resolved by the driver), the control-stream codec
//! and handshake state machine, key derivation, a link's session settings
//! from its handshake, link arbitration, reconnect backoff and liveness.
//!
//! Nothing here opens a socket, reads a clock or draws randomness: time and
//! random seeds come in as arguments. The quinn and UDP drivers live in
//! `crate::transport::peer`. The normative description is docs/peer-link.md.

pub mod arbiter;
pub mod backoff;
pub mod bytes;
pub mod control;
pub mod fingerprint;
pub mod handshake;
pub mod hello;
pub mod keys;
pub mod link_settings;
pub mod negotiate;
pub mod peer_address;
pub mod peer_diff;
pub mod peer_file;
pub mod reason;
