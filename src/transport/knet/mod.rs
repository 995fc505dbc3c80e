//! kNet drivers: the sockets around the sans-IO connections of
//! `crate::knet`. A node listens on one address with UDP and TCP on the same
//! port, as a real Tundra server does; the client side (used by the upstream
//! bridge, `lessgate loadgen` and the tests) dials either.
//!
//! Both directions speak in Tundra frames as the WebSocket transport does
//! (u16 LE message id + payload), so the node and the bridge see one kind of
//! client whatever the transport; only the login data differs (XML,
//! docs/knet-wire.md §5.3).

pub mod batch_socket;
pub mod client;
pub mod listener;
pub mod tcp;
pub mod udp_driver;
pub mod udp_server;

use bytes::Bytes;

/// Which kNet transport a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnetTransport {
    Udp,
    Tcp,
}

impl std::fmt::Display for KnetTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KnetTransport::Udp => "udp",
            KnetTransport::Tcp => "tcp",
        })
    }
}

/// What the owner of a client connection asks of it.
#[derive(Debug)]
pub enum ClientCommand {
    /// One Tundra frame: u16 LE message id + payload. Sent with the flags of
    /// the message's id (docs/tundra-wire.md §5.2).
    Frame(Bytes),
    /// Close the connection (UDP: Disconnect, then wait for DisconnectAck;
    /// TCP: FIN).
    Close,
}

/// What a client connection reports to its owner.
#[derive(Debug)]
pub enum ClientInbound {
    /// Tundra frames (u16 LE id + payload) that arrived together, in order.
    Frames(Vec<Bytes>),
    /// The connection is over, and why.
    Closed(String),
}

/// URL schemes naming a Tundra server reached over kNet.
pub const KNET_UDP_SCHEME: &str = "knet+udp://";
/// See [`KNET_UDP_SCHEME`].
pub const KNET_TCP_SCHEME: &str = "knet+tcp://";

/// The transport and `host:port` of a `knet+udp://host:port` or
/// `knet+tcp://host:port` URL (a trailing `/` is allowed); `None` for any
/// other URL.
pub fn parse_knet_url(url: &str) -> Option<(KnetTransport, &str)> {
    let (transport, rest) = if let Some(rest) = url.strip_prefix(KNET_UDP_SCHEME) {
        (KnetTransport::Udp, rest)
    } else if let Some(rest) = url.strip_prefix(KNET_TCP_SCHEME) {
        (KnetTransport::Tcp, rest)
    } else {
        return None;
    };
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    // host:port with a non-empty host and a numeric port; no path.
    let (host, port) = host_port.rsplit_once(':')?;
    if host.is_empty() || host_port.contains('/') || port.parse::<u16>().is_err() {
        return None;
    }
    Some((transport, host_port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knet_urls_name_transport_and_address() {
        assert_eq!(
            parse_knet_url("knet+udp://world.example:2345"),
            Some((KnetTransport::Udp, "world.example:2345"))
        );
        assert_eq!(
            parse_knet_url("knet+tcp://127.0.0.1:2345/"),
            Some((KnetTransport::Tcp, "127.0.0.1:2345"))
        );
        assert_eq!(
            parse_knet_url("knet+udp://[::1]:2345"),
            Some((KnetTransport::Udp, "[::1]:2345"))
        );
        for bad in [
            "ws://127.0.0.1:2345",
            "knet+udp://",
            "knet+udp://host",
            "knet+udp://:2345",
            "knet+tcp://host:99999",
            "knet+tcp://host:2345/path",
        ] {
            assert_eq!(parse_knet_url(bad), None, "{bad}");
        }
    }
}
