//! Where a peer is dialled: an IP socket address, or a host name and port
//! resolved by the driver at each dial (docs/peer-link.md §8.1), so a peer
//! whose address changes is found again on the next redial.
//!
//! Only the syntax lives here; resolving is the transport's (this module
//! must not look names up).

use std::fmt;
use std::net::SocketAddr;

/// Longest host name (RFC 1035: 253 characters written out).
pub const MAX_HOST_LEN: usize = 253;
/// Longest label between dots (RFC 1035).
const MAX_LABEL_LEN: usize = 63;

/// A peer file's `control` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerAddress {
    /// An IP address and port, dialled as is.
    Ip(SocketAddr),
    /// A host name, looked up at every dial.
    Host { name: String, port: u16 },
}

impl From<SocketAddr> for PeerAddress {
    fn from(address: SocketAddr) -> PeerAddress {
        PeerAddress::Ip(address)
    }
}

impl fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddress::Ip(address) => address.fmt(f),
            PeerAddress::Host { name, port } => write!(f, "{name}:{port}"),
        }
    }
}

impl PeerAddress {
    /// Parses `IP:PORT`, `[IPv6]:PORT` or `HOST:PORT`. A dialable address
    /// only: no port 0, no unspecified IP. The error is the message for the
    /// key.
    pub fn parse(text: &str) -> Result<PeerAddress, String> {
        const SHAPE: &str = "expected IP:PORT, [IPv6]:PORT or HOST:PORT";
        if let Ok(address) = text.parse::<SocketAddr>() {
            if address.port() == 0 || address.ip().is_unspecified() {
                return Err("must be a dialable address (no port 0, no 0.0.0.0 or ::)".to_owned());
            }
            return Ok(PeerAddress::Ip(address));
        }
        let Some((name, port)) = text.rsplit_once(':') else {
            return Err(format!("{SHAPE}, found {text:?} (no port)"));
        };
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{SHAPE}, found {text:?} (the port is not 1 to 65535)"))?;
        if port == 0 {
            return Err("must be a dialable address (no port 0)".to_owned());
        }
        if !is_host_name(name) {
            return Err(format!(
                "{SHAPE}, found {text:?} (a host name is letters, digits, '-' and '.', labels of at most {MAX_LABEL_LEN})"
            ));
        }
        Ok(PeerAddress::Host {
            name: name.to_ascii_lowercase(),
            port,
        })
    }

    /// The port dialled.
    pub fn port(&self) -> u16 {
        match self {
            PeerAddress::Ip(address) => address.port(),
            PeerAddress::Host { port, .. } => *port,
        }
    }
}

/// RFC 1123 host name syntax: dot-separated labels of letters, digits and
/// inner hyphens; one trailing dot allowed.
fn is_host_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= MAX_HOST_LEN
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= MAX_LABEL_LEN
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_stay_ip_addresses() {
        assert_eq!(
            PeerAddress::parse("127.0.0.1:7501"),
            Ok(PeerAddress::Ip("127.0.0.1:7501".parse().unwrap()))
        );
        assert_eq!(
            PeerAddress::parse("[::1]:7501"),
            Ok(PeerAddress::Ip("[::1]:7501".parse().unwrap()))
        );
        assert!(PeerAddress::parse("0.0.0.0:7501").is_err());
        assert!(PeerAddress::parse("127.0.0.1:0").is_err());
    }

    #[test]
    fn host_names_are_kept_for_the_dial() {
        let address = PeerAddress::parse("Beta.Example.org:7501").unwrap();
        assert_eq!(
            address,
            PeerAddress::Host {
                name: "beta.example.org".to_owned(),
                port: 7501
            }
        );
        assert_eq!(address.to_string(), "beta.example.org:7501");
        assert_eq!(address.port(), 7501);
        assert!(PeerAddress::parse("localhost:7501").is_ok());
        assert!(PeerAddress::parse("beta.example.org.:1").is_ok());
    }

    #[test]
    fn malformed_addresses_say_why() {
        for bad in [
            "localhost",
            "localhost:",
            "localhost:0",
            "localhost:70000",
            ":7501",
            "-beta:7501",
            "be ta:7501",
            "beta..org:7501",
            "::1:7501",
        ] {
            assert!(PeerAddress::parse(bad).is_err(), "{bad} parsed");
        }
        let long = format!("{}:1", "a.".repeat(130));
        assert!(PeerAddress::parse(&long).is_err());
    }
}
