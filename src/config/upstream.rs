//! The `[upstream]` section: the Tundra world server this node logs in to
//! as a client and bridges into the federation (docs/upstream.md §2),
//! over WebSocket (`ws://`) or natively over kNet (`knet+udp://`,
//! `knet+tcp://`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::transport::knet::KnetTransport;
use crate::tundra::login_xml::is_property_name;
use crate::tundra::ClientTransport;
use crate::tundra::ProtocolVersion;
use crate::upstream::{BridgeSettings, LoginSettings};

/// URL scheme of a world server's WebSocket listener.
const WS_SCHEME: &str = "ws://";
/// URL scheme of a world server's native kNet listener over UDP.
const KNET_UDP_SCHEME: &str = "knet+udp://";
/// URL scheme of a world server's native kNet listener over TCP.
const KNET_TCP_SCHEME: &str = "knet+tcp://";

/// Login properties are sent as one JSON string with a u16 length
/// (docs/tundra-wire.md §4.1); this keeps the whole object far below 64 KiB.
const MAX_LOGIN_PROPERTY_BYTES: usize = 1024;
/// At most this many login properties.
const MAX_LOGIN_PROPERTIES: usize = 32;
/// Ten minutes: a longer wait for LoginReply is a hung server, not a slow one.
const MAX_LOGIN_TIMEOUT_MS: u64 = 600_000;

/// `[upstream]`: present only in upstream mode.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamSection {
    /// `ws://host:port` of the world server's WebSocket listener, or
    /// `knet+udp://host:port` / `knet+tcp://host:port` of its native one.
    pub url: String,
    /// Protocol version requested at login (1 to 3; the server may lower it).
    pub protocol_version: u32,
    /// Login properties sent as the Login JSON object, for example
    /// `{ username = "gateway", password = "..." }`.
    pub login: BTreeMap<String, String>,
    /// First reconnect delay; doubles per failure up to `reconnect_max_ms`.
    pub reconnect_min_ms: u64,
    /// Ceiling of the reconnect delay.
    pub reconnect_max_ms: u64,
    /// Seconds the world's entities stay while the server is unreachable.
    pub grace_secs: u64,
    /// The initial scene after a login is complete once no new entity has
    /// arrived for this many milliseconds.
    pub settle_ms: u64,
    /// How long to wait for the world server's LoginReply before closing
    /// the connection and redialling with backoff.
    pub login_timeout_ms: u64,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            url: String::new(),
            protocol_version: 3,
            login: BTreeMap::from([("username".to_owned(), "lessgate".to_owned())]),
            reconnect_min_ms: 500,
            reconnect_max_ms: 30_000,
            // A restarted world server cannot bind its port again until
            // the old connections leave TIME_WAIT (about 60 s), then starts
            // up, and the next redial comes up to `reconnect_max_ms` (30 s)
            // later: 120 s outlasts that, so a restart keeps the world's
            // entities across the federation (docs/upstream.md §4).
            grace_secs: 120,
            settle_ms: 500,
            login_timeout_ms: 10_000,
        }
    }
}

impl UpstreamSection {
    /// Checks every key; the error names the key and what to write instead.
    pub(super) fn validate(
        &self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        // Tundra's WebSocket server is plain ws:// (docs/tundra-wire.md §2.1:
        // websocketpp `asio_no_tls`); its native listener is kNet over UDP
        // or TCP (docs/knet-wire.md §5.1). The bridge dials nothing else.
        let Some(transport) = parse_url(&self.url) else {
            return Err(invalid(
                "upstream.url",
                "must be the world server's address: \"ws://127.0.0.1:2345\" (WebSocket; wss:// is not supported), or \"knet+udp://127.0.0.1:2345\" / \"knet+tcp://127.0.0.1:2345\" (native kNet)",
            ));
        };
        if let UpstreamTransport::Knet { .. } = transport {
            // A native login is XML: names become element names, and the
            // `protocol` property names the transport (§5.3).
            if self.login.contains_key("protocol") {
                return Err(invalid(
                    "upstream.login",
                    "remove `protocol`: a native login sets it from the url scheme (udp or tcp)",
                ));
            }
            if let Some(name) = self.login.keys().find(|k| !is_property_name(k)) {
                return Err(invalid(
                    "upstream.login",
                    &format!("`{name}` cannot be a native (XML) login property: use letters, digits, '-', '_' and '.', starting with a letter or '_'"),
                ));
            }
        }
        if !(1..=4).contains(&self.protocol_version) {
            return Err(invalid("upstream.protocol_version", "must be 1, 2, 3 or 4"));
        }
        let bytes: usize = self.login.iter().map(|(k, v)| k.len() + v.len()).sum();
        if self.login.len() > MAX_LOGIN_PROPERTIES || bytes > MAX_LOGIN_PROPERTY_BYTES {
            return Err(invalid(
                "upstream.login",
                "at most 32 properties and 1024 bytes of keys and values",
            ));
        }
        if self.reconnect_min_ms == 0 {
            return Err(invalid("upstream.reconnect_min_ms", "must be at least 1"));
        }
        if self.reconnect_max_ms < self.reconnect_min_ms {
            return Err(invalid(
                "upstream.reconnect_max_ms",
                "must be at least upstream.reconnect_min_ms",
            ));
        }
        if self.settle_ms == 0 || self.settle_ms > 60_000 {
            return Err(invalid("upstream.settle_ms", "must be between 1 and 60000"));
        }
        if self.login_timeout_ms == 0 || self.login_timeout_ms > MAX_LOGIN_TIMEOUT_MS {
            return Err(invalid(
                "upstream.login_timeout_ms",
                "must be between 1 and 600000 (milliseconds to wait for the world server's LoginReply)",
            ));
        }
        Ok(())
    }

    /// What `url` names, for the driver that dials it. Call after
    /// validation; an invalid url reads as WebSocket.
    pub fn transport(&self) -> UpstreamTransport {
        parse_url(&self.url).unwrap_or_else(|| UpstreamTransport::WebSocket(self.url.clone()))
    }

    /// Settings for the bridge core.
    pub fn bridge_settings(&self) -> BridgeSettings {
        let transport = match self.transport() {
            UpstreamTransport::WebSocket(_) => ClientTransport::WebSocket,
            UpstreamTransport::Knet {
                transport: KnetTransport::Udp,
                ..
            } => ClientTransport::KnetUdp,
            UpstreamTransport::Knet {
                transport: KnetTransport::Tcp,
                ..
            } => ClientTransport::KnetTcp,
        };
        BridgeSettings {
            login: LoginSettings {
                properties: self.login.clone(),
                protocol: ProtocolVersion(self.protocol_version),
                transport,
            },
            grace: Duration::from_secs(self.grace_secs),
            settle: Duration::from_millis(self.settle_ms),
            login_timeout: Duration::from_millis(self.login_timeout_ms),
        }
    }

    pub fn reconnect_min(&self) -> Duration {
        Duration::from_millis(self.reconnect_min_ms)
    }

    pub fn reconnect_max(&self) -> Duration {
        Duration::from_millis(self.reconnect_max_ms)
    }
}

/// How the bridge reaches the world server, from `[upstream] url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// The world server's WebSocket listener: the url, dialled as it is.
    WebSocket(String),
    /// The world server's native kNet listener.
    Knet {
        /// `host:port`, to resolve and dial.
        addr: String,
        transport: KnetTransport,
    },
}

/// Reads an upstream url: `ws://` followed by anything (the WebSocket
/// client checks the rest), or a kNet scheme followed by exactly
/// `host:port` (a port from 1 to 65535; an optional trailing `/`).
fn parse_url(url: &str) -> Option<UpstreamTransport> {
    if let Some(rest) = url.strip_prefix(WS_SCHEME) {
        return (!rest.is_empty()).then(|| UpstreamTransport::WebSocket(url.to_owned()));
    }
    let (rest, transport) = if let Some(rest) = url.strip_prefix(KNET_UDP_SCHEME) {
        (rest, KnetTransport::Udp)
    } else {
        (url.strip_prefix(KNET_TCP_SCHEME)?, KnetTransport::Tcp)
    };
    let addr = rest.strip_suffix('/').unwrap_or(rest);
    if addr.contains(['/', '?', '#', '@']) || addr.chars().any(char::is_whitespace) {
        return None;
    }
    let (host, port) = addr.rsplit_once(':')?;
    if host.is_empty() || !port.parse::<u16>().is_ok_and(|p| p != 0) {
        return None;
    }
    Some(UpstreamTransport::Knet {
        addr: addr.to_owned(),
        transport,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::NodeConfig;

    #[test]
    fn section_parses_with_login_table() {
        let text = "[upstream]\nurl = \"ws://127.0.0.1:2345\"\n\
                    [upstream.login]\nusername = \"gw\"\npassword = \"pw\"\n";
        let config = NodeConfig::parse(Path::new("n.toml"), text).unwrap();
        let upstream = config.upstream.unwrap();
        assert_eq!(upstream.protocol_version, 3);
        assert_eq!(
            upstream.login.get("password").map(String::as_str),
            Some("pw")
        );
        let settings = upstream.bridge_settings();
        assert_eq!(settings.login.protocol.0, 3);
        assert_eq!(settings.login_timeout, std::time::Duration::from_secs(10));
        assert!(NodeConfig::default().upstream.is_none());
    }

    #[test]
    fn knet_urls_name_the_transport_and_log_in_natively() {
        for (url, addr, transport, client) in [
            (
                "knet+udp://127.0.0.1:2345",
                "127.0.0.1:2345",
                KnetTransport::Udp,
                ClientTransport::KnetUdp,
            ),
            (
                "knet+tcp://world.example:2346/",
                "world.example:2346",
                KnetTransport::Tcp,
                ClientTransport::KnetTcp,
            ),
            (
                "knet+udp://[::1]:2345",
                "[::1]:2345",
                KnetTransport::Udp,
                ClientTransport::KnetUdp,
            ),
        ] {
            let text = format!("[upstream]\nurl = \"{url}\"\n[upstream.login]\nusername = \"gw\"\nclient-name = \"lessgate\"\n");
            let upstream = NodeConfig::parse(Path::new("n.toml"), &text)
                .unwrap()
                .upstream
                .unwrap();
            assert_eq!(
                upstream.transport(),
                UpstreamTransport::Knet {
                    addr: addr.to_owned(),
                    transport
                }
            );
            assert_eq!(upstream.bridge_settings().login.transport, client);
        }
        let text = "[upstream]\nurl = \"ws://127.0.0.1:2345/x\"\n";
        let upstream = NodeConfig::parse(Path::new("n.toml"), text)
            .unwrap()
            .upstream
            .unwrap();
        assert_eq!(
            upstream.transport(),
            UpstreamTransport::WebSocket("ws://127.0.0.1:2345/x".to_owned())
        );
        assert_eq!(
            upstream.bridge_settings().login.transport,
            ClientTransport::WebSocket
        );
    }

    #[test]
    fn bad_urls_are_refused() {
        for url in [
            "",
            "ws://",
            "wss://x:1",
            "knet://x:1",
            "knet+udp://",
            "knet+udp://x",
            "knet+udp://:2345",
            "knet+udp://x:0",
            "knet+udp://x:65536",
            "knet+tcp://x:1/path",
            "knet+tcp://user@x:1",
            "knet+tcp://x :1",
        ] {
            assert_eq!(parse_url(url), None, "{url}");
            let text = format!("[upstream]\nurl = \"{url}\"\n");
            let error = NodeConfig::parse(Path::new("n.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(error.contains("upstream.url"), "{url}: {error}");
        }
    }

    #[test]
    fn native_login_properties_must_be_xml_names_without_protocol() {
        for (login, needle) in [
            ("protocol = \"udp\"\n", "remove `protocol`"),
            ("\"user name\" = \"x\"\n", "`user name`"),
        ] {
            let text = format!("[upstream]\nurl = \"knet+udp://x:1\"\n[upstream.login]\n{login}");
            let error = NodeConfig::parse(Path::new("n.toml"), &text)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("upstream.login") && error.contains(needle),
                "{error}"
            );
            // The same login is fine over WebSocket (JSON keys are free).
            let text = format!("[upstream]\nurl = \"ws://x:1\"\n[upstream.login]\n{login}");
            assert!(NodeConfig::parse(Path::new("n.toml"), &text).is_ok());
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("url = \"http://x\"\n", "upstream.url"),
            (
                "url = \"ws://x:1\"\nprotocol_version = 5\n",
                "upstream.protocol_version",
            ),
            (
                "url = \"ws://x:1\"\nreconnect_min_ms = 0\n",
                "upstream.reconnect_min_ms",
            ),
            (
                "url = \"ws://x:1\"\nreconnect_max_ms = 1\n",
                "upstream.reconnect_max_ms",
            ),
            ("url = \"ws://x:1\"\nsettle_ms = 0\n", "upstream.settle_ms"),
            (
                "url = \"ws://x:1\"\nlogin_timeout_ms = 0\n",
                "upstream.login_timeout_ms",
            ),
            (
                "url = \"ws://x:1\"\nlogin_timeout_ms = 600001\n",
                "upstream.login_timeout_ms",
            ),
        ] {
            let error = NodeConfig::parse(Path::new("n.toml"), &format!("[upstream]\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
