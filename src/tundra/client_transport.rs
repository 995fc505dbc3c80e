//! What carries a Tundra client's frames, and the login form that implies.
//!
//! A WebSocket client writes its login data as JSON, a native client (kNet
//! over UDP or TCP) as XML (docs/knet-wire.md §5.6 point 2). The server core and
//! the upstream client decide by these values; the transports that carry the
//! frames live in `crate::transport`.

use std::fmt;

/// What carries a client's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientTransport {
    WebSocket,
    KnetUdp,
    KnetTcp,
}

impl ClientTransport {
    /// The login data the client sends: JSON over WebSocket, XML natively
    /// (docs/knet-wire.md §5.6 point 2).
    pub fn login_dialect(self) -> LoginDialect {
        match self {
            ClientTransport::WebSocket => LoginDialect::Json,
            ClientTransport::KnetUdp | ClientTransport::KnetTcp => LoginDialect::Xml,
        }
    }
}

impl fmt::Display for ClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientTransport::WebSocket => "websocket",
            ClientTransport::KnetUdp => "knet-udp",
            ClientTransport::KnetTcp => "knet-tcp",
        })
    }
}

/// How a client writes its login data, which its transport decides
/// (docs/knet-wire.md §5.6 point 2). The LoginReply's data uses the same form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoginDialect {
    /// A JSON object (WebSocket clients, docs/tundra-wire.md §4.1).
    #[default]
    Json,
    /// `<login><key value="..." />...</login>` (native clients,
    /// docs/knet-wire.md §5.3).
    Xml,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_follows_the_transport() {
        assert_eq!(
            ClientTransport::WebSocket.login_dialect(),
            LoginDialect::Json
        );
        assert_eq!(ClientTransport::KnetUdp.login_dialect(), LoginDialect::Xml);
        assert_eq!(ClientTransport::KnetTcp.login_dialect(), LoginDialect::Xml);
    }
}
