//! kNet, the native transport of realXtend Tundra (docs/knet.md; the wire:
//! docs/knet-wire.md, whose sections are cited below), over UDP and TCP:
//! codecs and sans-IO connections.
//!
//! Everything here is pure: bytes and an explicit `now` in, bytes, timeouts
//! and events out. The sockets live in `crate::transport::knet`.
//!
//! - `reader`: byte-aligned little-endian reads and the three VLE forms (§1);
//! - `ids`: packet ids (22 bits, wrapping), message ids, reliable numbers;
//! - `message`: internal messages (ping, PacketAck, disconnect), priorities
//!   and the per-Tundra-message flags (§2, §4.13, §5.2);
//! - `datagram`: the UDP datagram header and message blocks (§4.1-4.2);
//! - `stream`: the TCP framing (§3.1);
//! - `udp`: one UDP connection (acks, re-sends, fragments, pings, close);
//! - `tcp`: one TCP connection (framing, pings, keep-alive, close).

pub mod datagram;
pub mod error;
pub mod ids;
pub mod message;
pub mod reader;
pub mod stream;
pub mod tcp;
pub mod udp;
