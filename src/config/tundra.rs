//! `[tundra]`: the listeners for Tundra clients (WebSocket, native kNet),
//! their TLS, the scene and what a login must present.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Tundra's own default port for its WebSocket and kNet servers.
pub const DEFAULT_TUNDRA_PORT: u16 = 2345;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TundraSection {
    /// Address of the WebSocket listener for Tundra clients.
    pub listen: SocketAddr,
    /// A TXML scene loaded at start (the node's own world).
    pub scene: Option<PathBuf>,
    /// PEM certificate chain; with `tls_key`, the listener speaks wss://.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Login properties a client must present with exactly these values
    /// (for example `{ token = "secret" }`); a mismatch is refused with a reason.
    pub required_login: std::collections::BTreeMap<String, String>,
    /// Throttle far entities using ObserverPosition (docs/tundra-wire.md §6.3).
    pub interest_management: bool,
    /// Address for native Tundra clients over kNet: UDP and TCP on the same
    /// port, as a real Tundra server listens (docs/knet-wire.md §5.1).
    /// Off unless set. The port may equal `listen`'s: kNet UDP never
    /// collides with the WebSocket listener, but kNet TCP needs a port of
    /// its own then, so the TCP half is skipped with a warning.
    pub knet_listen: Option<SocketAddr>,
    /// Datagrams per second each kNet UDP connection may send. Real kNet
    /// sends at most 1000 (section 4.6), which holds a client watching
    /// 10 000 entities moving at 20 Hz to 1.4 MB/s where it needs about
    /// 2 MB/s (measured: 2 s behind, updates coalesced); 4000 serves it
    /// with room to spare, in bursts of at most 20 datagrams.
    pub knet_datagrams_per_sec: u32,
}

impl Default for TundraSection {
    fn default() -> Self {
        TundraSection {
            listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_TUNDRA_PORT)),
            scene: None,
            tls_cert: None,
            tls_key: None,
            required_login: Default::default(),
            interest_management: false,
            knet_listen: None,
            knet_datagrams_per_sec: 4000,
        }
    }
}
