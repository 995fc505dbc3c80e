//! The link secret behind the LESS MAC keys (docs/peer-link.md section 6.4).
//!
//! Both nodes export the same 32-byte secret from their TLS 1.3 session
//! (RFC 8446 section 7.5 through QUIC, RFC 9001 section 4) with the label
//! below. The LESS core derives one MAC key per direction from it with
//! BLAKE3 `derive_key` (`crate::less::signature::SessionKeys::derive`, the
//! dialer being the initiator), so no key crosses the wire, every connection
//! gets fresh keys, and a packet reflected back to its sender fails the MAC
//! check. This module owns the exporter parameters and the roles.

use std::fmt;

/// RFC 5705 / RFC 8446 exporter label.
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-lessgate-peer-link-v1";
/// Exporter context: empty (the TLS session already binds both identities).
pub const EXPORTER_CONTEXT: &[u8] = b"";
/// Exported secret length in bytes (the LESS link secret).
pub const EXPORTED_SECRET_LEN: usize = 32;

/// Which end of the QUIC connection this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Opened the QUIC connection (the TLS client; the LESS initiator).
    Dialer,
    /// Accepted it (the TLS server; the LESS acceptor).
    Listener,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Dialer => "dialer",
            Role::Listener => "listener",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_print_as_the_spec_names_them() {
        assert_eq!(Role::Dialer.to_string(), "dialer");
        assert_eq!(Role::Listener.to_string(), "listener");
        assert!(EXPORTER_LABEL.starts_with(b"EXPORTER-"));
    }
}
