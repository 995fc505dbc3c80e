//! `[peering]`: the peer-link listeners, identity, MTU and timers
//! (docs/peer-link.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default peer-link datagram size: fits the IPv6 minimum MTU (1280) less
/// IPv6 and UDP headers with room to spare, so no path fragments it.
pub const DEFAULT_PEER_MTU: u16 = 1200;
/// Smallest peer-link MTU: the LESS core's minimum (largest header plus a
/// useful payload).
pub const MIN_PEER_MTU: u16 = 128;
/// Largest UDP payload over IPv4.
pub const MAX_PEER_MTU: u16 = 65_507;
/// Default background refresh budget per peer link, bytes per second: a few
/// hundred transforms per minute, background noise beside live updates.
pub const DEFAULT_REFRESH_BYTES_PER_SECOND: u32 = 2048;

/// How LESS packets travel on a peer link (docs/peer-link.md §7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerLinkMode {
    /// Datagrams on the node's UDP data socket; oversize packets on a QUIC stream.
    #[default]
    Udp,
    /// Every packet on a QUIC stream of the control connection (no UDP socket).
    Stream,
}

/// The `[peering]` section: the peer-link listeners, identity and timers.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeeringSection {
    /// QUIC listen address for peer control connections.
    pub control_listen: SocketAddr,
    /// UDP listen address for LESS datagrams (mode `udp`).
    pub data_listen: SocketAddr,
    /// The data address announced to peers in the Hello instead of the
    /// bound one (docs/peer-link.md §5.2): for a node behind a UDP relay or
    /// port forward, and for tests that put an impairment proxy on the data
    /// path. Peers send to it and accept datagrams only from it.
    pub data_advertise: Option<SocketAddr>,
    /// PEM certificate made by `lessgate keygen`.
    pub certificate: PathBuf,
    /// PEM private key of `certificate`.
    pub private_key: PathBuf,
    /// Directory of `*.toml` peer files.
    pub peers_dir: PathBuf,
    /// Largest LESS datagram this node sends or accepts.
    pub mtu: u16,
    /// `udp` or `stream`.
    pub mode: PeerLinkMode,
    /// First reconnect delay; doubles per failure up to `reconnect_max_ms`.
    pub reconnect_min_ms: u64,
    /// Ceiling of the reconnect delay.
    pub reconnect_max_ms: u64,
    /// A link with no valid packet for this long is ended.
    pub liveness_timeout_ms: u64,
    /// A handshake not finished within this long is abandoned.
    pub handshake_timeout_ms: u64,
    /// Seconds between per-link stats lines (0 turns them off).
    pub stats_interval_secs: u64,
    /// Offer the compact per-property encodings (docs/less-wire.md §16) in
    /// the Hello; a link uses them only if the peer offers them too.
    pub compact_encodings: bool,
    /// Offer bulk packets (`bulk:zstd/1`, docs/less-wire.md §16.5) in the
    /// Hello: on a UDP link where the peer offers them too, a large backlog
    /// of introductions (a link start with thousands of entities) travels
    /// zstd-compressed on the reliable stream.
    pub bulk_introductions: bool,
    /// Background refresh budget per link in bytes per second: current
    /// values of exported entities are re-sent round-robin so a lost final
    /// update heals without a request (docs/less-wire.md §16.7). 0 is off; the default
    /// is [`DEFAULT_REFRESH_BYTES_PER_SECOND`].
    pub refresh_bytes_per_sec: u32,
}

impl Default for PeeringSection {
    fn default() -> Self {
        PeeringSection {
            control_listen: SocketAddr::from(([127, 0, 0, 1], 7400)),
            data_listen: SocketAddr::from(([127, 0, 0, 1], 7401)),
            data_advertise: None,
            certificate: PathBuf::from("identity/node.cert.pem"),
            private_key: PathBuf::from("identity/node.key.pem"),
            peers_dir: PathBuf::from("peers"),
            mtu: DEFAULT_PEER_MTU,
            mode: PeerLinkMode::Udp,
            reconnect_min_ms: 500,
            reconnect_max_ms: 30_000,
            liveness_timeout_ms: 10_000,
            handshake_timeout_ms: 5_000,
            stats_interval_secs: 10,
            compact_encodings: true,
            bulk_introductions: true,
            refresh_bytes_per_sec: DEFAULT_REFRESH_BYTES_PER_SECOND,
        }
    }
}

impl PeeringSection {
    /// The liveness timeout as a duration.
    pub fn liveness_timeout(&self) -> Duration {
        Duration::from_millis(self.liveness_timeout_ms)
    }

    /// The handshake timeout as a duration.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }
}
