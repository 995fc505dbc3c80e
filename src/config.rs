//! The node's configuration file (TOML), parsed and validated once.
//!
//! Every error names the file, the key and what is wrong, so an operator can
//! fix it without reading code. Defaults make an empty file a working
//! standalone node. Peer files (`peers/*.toml`) are read here too
//! (`peer_files`) into the peering layer's `PeerSet`.
//!
//! The configuration depends on the cores it configures and builds their
//! settings (`Limits::server_limits`, the upstream's `BridgeSettings`); no
//! core depends on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod authority;
pub mod check;
mod files;
mod handover;
pub use handover::HandoverSection;
mod peer_files;
pub mod reload;
mod upstream;
pub use authority::AuthoritySection;
pub use upstream::{UpstreamSection, UpstreamTransport};

/// Tundra's own default port for its WebSocket and kNet servers.
pub const DEFAULT_TUNDRA_PORT: u16 = 2345;
/// Tundra's default network tick (`updatePeriod_ = 1/20`).
pub const DEFAULT_TICK_HZ: u32 = 20;
/// Tundra clamps `--netrate` to a period of at least 0.01 s.
const MAX_TICK_HZ: u32 = 100;
/// More threads than this is a typo, not a machine.
const MAX_THREADS: usize = 256;
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

/// A configuration error, always with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Parse { file: PathBuf, message: String },
    #[error("{file}: key `{key}`: {message}")]
    Invalid {
        file: PathBuf,
        key: &'static str,
        message: String,
    },
}

/// The validated configuration of one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Where the file was read from (`None` for the built-in defaults); relative
    /// paths inside it are resolved against its directory.
    pub source: Option<PathBuf>,
    pub node: NodeSection,
    pub tundra: TundraSection,
    pub limits: Limits,
    pub log: LogSection,
    /// The operator's HTTP endpoint: web viewer, `/status`, `/metrics`.
    pub http: HttpSection,
    /// Peer links; `None` when the file has no `[peering]` section (a
    /// standalone node).
    pub peering: Option<PeeringSection>,
    /// Upstream mode: the world server this node bridges (docs/upstream.md);
    /// `None` without an `[upstream]` section.
    pub upstream: Option<UpstreamSection>,
    /// Zones and departure (docs/federation.md §7.7, §7.8).
    pub authority: AuthoritySection,
    /// Which take-authority requests this node grants (docs/federation.md
    /// §7.2), checked.
    pub handover: crate::federation::HandoverPolicy,
}

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
    /// Threads the process runs on: 0, one socket worker per core beside
    /// the node's own thread; 1, everything on one thread (no hand-offs
    /// between threads: less CPU per update, at most one core); N, the
    /// node's thread and N - 1 socket workers.
    pub threads: usize,
}

impl Default for NodeSection {
    fn default() -> Self {
        NodeSection {
            name: "lessgate".to_owned(),
            tick_hz: DEFAULT_TICK_HZ,
            uuid: None,
            threads: 0,
        }
    }
}

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

/// Per-client limits; each refusal is logged with the limit's name.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest WebSocket message accepted from a client. Tundra caps an
    /// attribute block at 16 KiB; a CreateEntity with many blocks needs more.
    pub max_frame_bytes: usize,
    /// Entities one client may create.
    pub max_entities_per_client: usize,
    /// Messages per second read from one client (every message counts:
    /// binary, text, ping). Above it the client is slowed (its transport
    /// stops reading it), never closed for it.
    pub max_messages_per_second: u32,
    /// Messages read from one client at once after a quiet spell.
    pub max_message_burst: u32,
    /// Refused requests (edits of unknown entities, creates over a limit,
    /// ...) one client may send in a minute before it is closed: a few
    /// are races any client meets, this many are not.
    pub max_refused_requests_per_minute: u32,
    /// Entities clients may have created in the scene, all together. They
    /// outlive their creator (as Tundra keeps them), so this bounds what
    /// reconnecting clients can pile up.
    pub max_client_entities: usize,
    /// Entities clients from one IP address may have created in the scene.
    pub max_entities_per_address: usize,
    /// Outbound bytes queued for a client that does not read; past this the
    /// client gets only coalesced state, and past twice this (or for longer
    /// than `max_client_stall_secs`) it is dropped.
    pub max_client_backlog_bytes: usize,
    /// Seconds a client may stay over `max_client_backlog_bytes` before it
    /// is disconnected.
    pub max_client_stall_secs: u64,
    /// Simultaneous Tundra clients.
    pub max_clients: usize,
    /// kNet UDP connections from one IP address that have not yet answered
    /// the node's first datagram. kNet has no handshake, so any datagram
    /// from a new endpoint opens a connection; a spoofed source never
    /// answers, and these bounds keep what it can open small.
    pub max_half_open_per_address: usize,
    /// kNet UDP connections not yet answered, from all addresses.
    pub max_half_open: usize,
    /// Seconds a TCP connection may take to finish its TLS and WebSocket
    /// handshake; on the HTTP port, to send a request's headers, and to stay
    /// idle between keep-alive requests.
    pub handshake_timeout_secs: u64,
    /// Seconds a connected client may take to send its Login (every
    /// transport); after that it is closed.
    pub login_timeout_secs: u64,
    /// TCP connections one IP address may hold open to the node, over all
    /// its listeners (Tundra WebSocket, HTTP, kNet TCP); more are closed at
    /// once.
    pub max_connections_per_address: usize,
    /// Clients connected but not yet logged in, from all addresses; they do
    /// not take the seats of `max_clients`, which counts logged-in clients.
    pub max_pending_logins: usize,
    /// Clients connected but not yet logged in, from one IP address.
    pub max_pending_logins_per_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 256 * 1024,
            max_entities_per_client: 10_000,
            max_messages_per_second: 200_000,
            max_message_burst: 200_000,
            max_refused_requests_per_minute: 100_000,
            max_client_entities: 100_000,
            max_entities_per_address: 20_000,
            max_client_backlog_bytes: 4 * 1024 * 1024,
            max_client_stall_secs: 10,
            max_clients: 1_000,
            max_half_open_per_address: 8,
            max_half_open: 256,
            handshake_timeout_secs: 10,
            login_timeout_secs: 10,
            max_connections_per_address: 64,
            max_pending_logins: 256,
            max_pending_logins_per_address: 16,
        }
    }
}

/// Longest handshake or login deadline accepted: past an hour a deadline
/// no longer protects anything.
const MAX_CONNECTION_TIMEOUT_SECS: u64 = 3_600;

impl Limits {
    /// The deadlines and per-address budgets of connections.
    fn validate_connection_limits(
        &self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let timeouts = [
            ("limits.handshake_timeout_secs", self.handshake_timeout_secs),
            ("limits.login_timeout_secs", self.login_timeout_secs),
        ];
        for (key, secs) in timeouts {
            if secs == 0 || secs > MAX_CONNECTION_TIMEOUT_SECS {
                return Err(invalid(key, "must be between 1 and 3600"));
            }
        }
        let counts = [
            (
                "limits.max_connections_per_address",
                self.max_connections_per_address,
            ),
            ("limits.max_pending_logins", self.max_pending_logins),
            (
                "limits.max_pending_logins_per_address",
                self.max_pending_logins_per_address,
            ),
        ];
        for (key, count) in counts {
            if count == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// See [`Limits::handshake_timeout_secs`].
    pub fn handshake_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.handshake_timeout_secs)
    }

    /// See [`Limits::login_timeout_secs`].
    pub fn login_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.login_timeout_secs)
    }

    /// The budgets the server core enforces (the rest bound transports).
    pub fn server_limits(&self) -> crate::server::ServerLimits {
        crate::server::ServerLimits {
            max_entities_per_client: self.max_entities_per_client,
            max_client_entities: self.max_client_entities,
            max_entities_per_address: self.max_entities_per_address,
            max_client_backlog_bytes: self.max_client_backlog_bytes,
            max_client_stall_secs: self.max_client_stall_secs,
            max_clients: self.max_clients,
            max_refused_requests_per_minute: self.max_refused_requests_per_minute,
            max_pending_logins: self.max_pending_logins,
            max_pending_logins_per_address: self.max_pending_logins_per_address,
            login_timeout_secs: self.login_timeout_secs,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub format: LogFormat,
    /// Default filter when `RUST_LOG` is not set.
    pub filter: String,
    /// Seconds between periodic stats lines (0 turns them off).
    pub stats_interval_secs: u64,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            format: LogFormat::Human,
            filter: "info".to_owned(),
            stats_interval_secs: 10,
        }
    }
}

/// `[http]`: where the node serves its web viewer, `/status` (JSON) and
/// `/metrics` (Prometheus text).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    /// Address to listen on; none (the default) serves no HTTP.
    pub listen: Option<SocketAddr>,
    /// The bearer token operator commands (`lessgate authority`) must
    /// present; none (the default) turns them off (docs/operations.md
    /// §2.6.1). Written out only as a digest, so a reload still sees a
    /// changed token (which waits for a restart).
    #[serde(serialize_with = "token_digest")]
    pub admin_token: Option<String>,
}

fn token_digest<S: serde::Serializer>(token: &Option<String>, out: S) -> Result<S::Ok, S::Error> {
    let digest = token
        .as_ref()
        .map(|t| format!("blake3:{}", &blake3::hash(t.as_bytes()).to_hex()[..16]));
    digest.serialize(out)
}

/// The shortest admin token accepted: 128 bits as hex.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    node: NodeSection,
    #[serde(default)]
    tundra: TundraSection,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    log: LogSection,
    #[serde(default)]
    http: HttpSection,
    peering: Option<PeeringSection>,
    upstream: Option<UpstreamSection>,
    #[serde(default)]
    authority: authority::RawAuthority,
    #[serde(default)]
    handover: HandoverSection,
}

/// A TOML error as `line N, key `section.key`: what is wrong`: the line and
/// key are found from the error's position, so a bad value is reported under
/// the key that holds it (shared with the peer files).
pub(crate) fn parse_error(file: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let message = error.message().trim_end().replace('\n', " ");
    // A missing key has no line of its own to point at.
    let span = error
        .span()
        .filter(|_| !message.starts_with("missing field"));
    let Some(start) = span.map(|span| span.start.min(text.len())) else {
        return ConfigError::Parse {
            file: file.to_owned(),
            message,
        };
    };
    let line_number = text[..start].matches('\n').count() + 1;
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_number - 1).copied().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(key, _)| key.trim().trim_matches('"'))
        .filter(|key| !key.is_empty() && !key.starts_with('['));
    // The table the key is in: the nearest `[section]` line above it.
    let section = lines[..line_number.saturating_sub(1).min(lines.len())]
        .iter()
        .rev()
        .map(|line| line.trim())
        .find(|line| line.starts_with('[') && !line.starts_with("[["))
        .map(|line| line.trim_matches(|c| c == '[' || c == ']').trim());
    let message = match (section, key) {
        (Some(section), Some(key)) => {
            format!("line {line_number}, key `{section}.{key}`: {message}")
        }
        (None, Some(key)) => format!("line {line_number}, key `{key}`: {message}"),
        (_, None) => format!("line {line_number}: {message}"),
    };
    ConfigError::Parse {
        file: file.to_owned(),
        message,
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig::from_raw(None, RawConfig::default())
            .expect("the built-in defaults are valid (checked by a unit test)")
    }
}

impl NodeConfig {
    /// Reads and validates a node configuration file.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses configuration text; `path` names it in errors and anchors
    /// relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<NodeConfig, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|error| parse_error(path, text, &error))?;
        Self::from_raw(Some(path.to_owned()), raw)
    }

    fn from_raw(source: Option<PathBuf>, raw: RawConfig) -> Result<NodeConfig, ConfigError> {
        let file = source
            .clone()
            .unwrap_or_else(|| PathBuf::from("<defaults>"));
        let invalid = |key, message: &str| ConfigError::Invalid {
            file: file.clone(),
            key,
            message: message.to_owned(),
        };
        if raw.node.name.is_empty() || raw.node.name.len() > 64 {
            return Err(invalid("node.name", "must be 1 to 64 characters"));
        }
        if raw.node.tick_hz == 0 || raw.node.tick_hz > MAX_TICK_HZ {
            return Err(invalid("node.tick_hz", "must be between 1 and 100"));
        }
        // README: "not nil". A nil uuid is no identity: it would collide
        // with every other node that forgot to set one.
        if raw.node.uuid.is_some_and(|uuid| uuid.is_nil()) {
            return Err(invalid(
                "node.uuid",
                "must not be the nil UUID (make one with `uuidgen`)",
            ));
        }
        if raw.node.threads > MAX_THREADS {
            return Err(invalid("node.threads", "must be between 0 and 256"));
        }
        if raw.tundra.tls_cert.is_some() != raw.tundra.tls_key.is_some() {
            return Err(invalid(
                "tundra.tls_cert",
                "tls_cert and tls_key must be given together",
            ));
        }
        if let Some(peering) = &raw.peering {
            Self::validate_peering(&raw.node, peering, &invalid)?;
        }
        if let Some(upstream) = &raw.upstream {
            upstream.validate(&invalid)?;
        }
        if let Err(error) = crate::logging::parse_filter("log.filter", &raw.log.filter) {
            return Err(invalid(
                "log.filter",
                &format!(
                    "{:?} is not a log filter ({}); write for example \"info\" or \"info,lessgate::transport=debug\"",
                    raw.log.filter, error.message
                ),
            ));
        }
        if raw.limits.max_frame_bytes < 1024 {
            return Err(invalid("limits.max_frame_bytes", "must be at least 1024"));
        }
        if raw.limits.max_clients == 0 {
            return Err(invalid("limits.max_clients", "must be at least 1"));
        }
        if raw.tundra.knet_datagrams_per_sec == 0 || raw.tundra.knet_datagrams_per_sec > 1_000_000 {
            return Err(invalid(
                "tundra.knet_datagrams_per_sec",
                "must be between 1 and 1000000",
            ));
        }
        if raw.limits.max_half_open_per_address == 0 || raw.limits.max_half_open == 0 {
            return Err(invalid(
                "limits.max_half_open",
                "max_half_open and max_half_open_per_address must be at least 1",
            ));
        }
        raw.limits.validate_connection_limits(&invalid)?;
        if raw.limits.max_messages_per_second == 0 {
            return Err(invalid(
                "limits.max_messages_per_second",
                "must be at least 1",
            ));
        }
        if raw.limits.max_message_burst == 0 {
            return Err(invalid("limits.max_message_burst", "must be at least 1"));
        }
        if raw.limits.max_refused_requests_per_minute == 0 {
            return Err(invalid(
                "limits.max_refused_requests_per_minute",
                "must be at least 1",
            ));
        }
        if raw.limits.max_entities_per_address > raw.limits.max_client_entities {
            return Err(invalid(
                "limits.max_entities_per_address",
                "must not be above limits.max_client_entities",
            ));
        }
        let handover = raw.handover.policy(&invalid)?;
        if let Some(token) = &raw.http.admin_token {
            let printable = token.chars().all(|c| c.is_ascii_graphic());
            if token.len() < MIN_ADMIN_TOKEN_CHARS || !printable {
                return Err(invalid(
                    "http.admin_token",
                    "must be at least 32 printable ASCII characters without spaces (e.g. `openssl rand -hex 16`)",
                ));
            }
        }
        let mut config = NodeConfig {
            source,
            node: raw.node,
            tundra: raw.tundra,
            limits: raw.limits,
            log: raw.log,
            http: raw.http,
            peering: raw.peering,
            upstream: raw.upstream,
            authority: raw.authority.validate(&invalid)?,
            handover,
        };
        config.resolve_paths();
        Ok(config)
    }

    fn validate_peering(
        node: &NodeSection,
        peering: &PeeringSection,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        // The nil uuid is refused for every node in `from_raw`.
        if node.uuid.is_none() {
            return Err(invalid(
                "node.uuid",
                "required when [peering] is set (make one with `uuidgen`)",
            ));
        }
        if peering.mtu < MIN_PEER_MTU || peering.mtu > MAX_PEER_MTU {
            return Err(invalid("peering.mtu", "must be between 128 and 65507"));
        }
        // docs/peer-link.md §5.2: the announced address is a real unicast
        // address with a port; anything else would be refused by peers.
        if let Some(advertise) = peering.data_advertise {
            if advertise.ip().is_unspecified() || advertise.ip().is_multicast() {
                return Err(invalid(
                    "peering.data_advertise",
                    "must be a unicast address, not unspecified or multicast",
                ));
            }
            if advertise.port() == 0 {
                return Err(invalid("peering.data_advertise", "must have a port"));
            }
        }
        if peering.reconnect_min_ms == 0 {
            return Err(invalid("peering.reconnect_min_ms", "must be at least 1"));
        }
        if peering.reconnect_max_ms < peering.reconnect_min_ms {
            return Err(invalid(
                "peering.reconnect_max_ms",
                "must not be less than reconnect_min_ms",
            ));
        }
        // Below a few ticks a single delayed packet would end the link.
        if peering.liveness_timeout_ms < 200 {
            return Err(invalid(
                "peering.liveness_timeout_ms",
                "must be at least 200",
            ));
        }
        if peering.handshake_timeout_ms < 100 {
            return Err(invalid(
                "peering.handshake_timeout_ms",
                "must be at least 100",
            ));
        }
        Ok(())
    }

    /// Makes file paths in the config relative to the config file's folder.
    fn resolve_paths(&mut self) {
        let Some(base) = self.source.as_deref().and_then(Path::parent) else {
            return;
        };
        for path in [
            &mut self.tundra.scene,
            &mut self.tundra.tls_cert,
            &mut self.tundra.tls_key,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
        if let Some(peering) = &mut self.peering {
            for path in [
                &mut peering.certificate,
                &mut peering.private_key,
                &mut peering.peers_dir,
            ] {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        }
    }

    /// The network tick period.
    pub fn tick_period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(self.node.tick_hz))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_standalone_node_on_tundra_port() {
        let config = NodeConfig::default();
        assert_eq!(config.tundra.listen.port(), 2345);
        assert!(config.tundra.listen.ip().is_loopback());
        assert_eq!(config.tick_period(), Duration::from_millis(50));
    }

    #[test]
    fn empty_file_is_valid() {
        let config = NodeConfig::parse(Path::new("/etc/lessgate/node.toml"), "").unwrap();
        assert_eq!(config.node.tick_hz, 20);
    }

    #[test]
    fn an_admin_token_is_long_and_printable() {
        let file = Path::new("node.toml");
        let good = "[http]\nadmin_token = \"0123456789abcdef0123456789abcdef\"\n";
        let config = NodeConfig::parse(file, good).unwrap();
        assert_eq!(config.http.admin_token.as_deref().map(str::len), Some(32));
        for bad in ["short", "0123456789abcdef 0123456789abcdef"] {
            let text = format!("[http]\nadmin_token = \"{bad}\"\n");
            let error = NodeConfig::parse(file, &text).unwrap_err().to_string();
            assert!(error.contains("http.admin_token"), "{bad}: {error}");
        }
    }

    #[test]
    fn relative_paths_follow_the_file() {
        let text = "[tundra]\nscene = \"worlds/a.txml\"\n";
        let config = NodeConfig::parse(Path::new("/srv/node/node.toml"), text).unwrap();
        assert_eq!(
            config.tundra.scene.as_deref(),
            Some(Path::new("/srv/node/worlds/a.txml"))
        );
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\nlisten_addr = 1\n")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("n.toml:"), "{error}");
        assert!(error.contains("listen_addr"), "{error}");
    }

    #[test]
    fn bulk_introductions_default_on_and_is_a_boolean() {
        let uuid = "[node]\nuuid = \"0b3c7f8e-6d5a-4c1b-9e2f-7a8b9c0d1e2f\"\n";
        let on = NodeConfig::parse(Path::new("n.toml"), &format!("{uuid}[peering]\n")).unwrap();
        assert!(on.peering.unwrap().bulk_introductions);
        let text = format!("{uuid}[peering]\nbulk_introductions = false\n");
        let off = NodeConfig::parse(Path::new("n.toml"), &text).unwrap();
        assert!(!off.peering.unwrap().bulk_introductions);
        let text = format!("{uuid}[peering]\nbulk_introductions = \"yes\"\n");
        let error = NodeConfig::parse(Path::new("n.toml"), &text)
            .unwrap_err()
            .to_string();
        assert!(error.contains("bulk_introductions"), "{error}");
    }

    #[test]
    fn threads_default_to_one_per_core_and_are_bounded() {
        assert_eq!(NodeConfig::default().node.threads, 0);
        let one = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = 1\n").unwrap();
        assert_eq!(one.node.threads, 1);
        let error = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = 300\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "n.toml: key `node.threads`: must be between 0 and 256"
        );
        let error = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = -1\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("threads"), "{error}");
    }

    #[test]
    fn the_server_core_defaults_are_the_configured_defaults() {
        assert_eq!(
            Limits::default().server_limits(),
            crate::server::ServerLimits::default()
        );
    }

    #[test]
    fn invalid_value_names_key() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[node]\ntick_hz = 0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "n.toml: key `node.tick_hz`: must be between 1 and 100"
        );
    }

    #[test]
    fn tls_needs_both_halves() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\ntls_cert = \"c.pem\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("tundra.tls_cert"), "{error}");
    }

    const PEERING: &str = "[node]\nuuid = \"6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01\"\n\
                           [peering]\ncontrol_listen = \"127.0.0.1:7101\"\n";

    #[test]
    fn peering_section_parses_with_defaults_and_resolves_paths() {
        let config = NodeConfig::parse(Path::new("/srv/a/node.toml"), PEERING).unwrap();
        let peering = config.peering.unwrap();
        assert_eq!(peering.control_listen.port(), 7101);
        assert_eq!(peering.mtu, DEFAULT_PEER_MTU);
        assert_eq!(peering.mode, PeerLinkMode::Udp);
        assert_eq!(peering.peers_dir, Path::new("/srv/a/peers"));
        assert_eq!(
            peering.certificate,
            Path::new("/srv/a/identity/node.cert.pem")
        );
        assert!(NodeConfig::default().peering.is_none());
    }

    #[test]
    fn peering_needs_a_uuid() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[peering]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "n.toml: key `node.uuid`: required when [peering] is set (make one with `uuidgen`)"
        );
    }

    #[test]
    fn peering_values_are_checked() {
        for (extra, key) in [
            ("mtu = 64\n", "peering.mtu"),
            ("mode = \"tcp\"\n", "mode"),
            ("reconnect_max_ms = 1\n", "peering.reconnect_max_ms"),
            ("liveness_timeout_ms = 5\n", "peering.liveness_timeout_ms"),
            ("data_advertise = \"0.0.0.0:7\"\n", "peering.data_advertise"),
            (
                "data_advertise = \"127.0.0.1:0\"\n",
                "peering.data_advertise",
            ),
        ] {
            let text = format!("{PEERING}{extra}");
            let error = NodeConfig::parse(Path::new("n.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("n.toml:"), "{error}");
            assert!(error.contains(key), "{extra}: {error}");
        }
    }

    #[test]
    fn bad_address_is_reported() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\nlisten = \"nowhere\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("n.toml: line 2, key `tundra.listen`: "),
            "{error}"
        );
        let error = NodeConfig::parse(
            Path::new("n.toml"),
            "[node]\nname = \"a\"\n\n[log]\nfilter = 3\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("n.toml: line 5, key `log.filter`: "),
            "{error}"
        );
    }

    #[test]
    fn nil_uuid_is_refused_with_or_without_peering() {
        let nil = "[node]\nuuid = \"00000000-0000-0000-0000-000000000000\"\n";
        for text in [nil.to_owned(), format!("{nil}[peering]\n")] {
            let error = NodeConfig::parse(Path::new("n.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(
                error.starts_with("n.toml: key `node.uuid`: must not be the nil UUID"),
                "{error}"
            );
        }
    }

    #[test]
    fn log_filter_must_parse() {
        let error = NodeConfig::parse(Path::new("n.toml"), "[log]\nfilter = \"lessgate=loud\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("n.toml: key `log.filter`: \"lessgate=loud\" is not a log filter"),
            "{error}"
        );
        assert!(NodeConfig::parse(
            Path::new("n.toml"),
            "[log]\nfilter = \"info,lessgate::transport=debug\"\n"
        )
        .is_ok());
    }

    #[test]
    fn connection_limits_default_and_refuse_zero_naming_the_key() {
        let limits = NodeConfig::default().limits;
        assert_eq!(limits.handshake_timeout_secs, 10);
        assert_eq!(limits.login_timeout_secs, 10);
        assert_eq!(limits.max_connections_per_address, 64);
        assert_eq!(limits.max_pending_logins, 256);
        assert_eq!(limits.max_pending_logins_per_address, 16);
        for key in [
            "handshake_timeout_secs",
            "login_timeout_secs",
            "max_connections_per_address",
            "max_pending_logins",
            "max_pending_logins_per_address",
        ] {
            let error = NodeConfig::parse(Path::new("n.toml"), &format!("[limits]\n{key} = 0\n"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(&format!("`limits.{key}`")), "{error}");
        }
        let error = NodeConfig::parse(Path::new("n.toml"), "[limits]\nlogin_timeout_secs = 3601\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("between 1 and 3600"), "{error}");
    }
}
