//! The link secret behind the LESS MAC keys (docs/peer-link.md §6.4).
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

#[cfg(test)]
mod vector_tests {
    use super::*;
    use crate::less::signature::{
        LinkRole, MacKey, SessionKeys, ACCEPTOR_TO_INITIATOR_CONTEXT, INITIATOR_TO_ACCEPTOR_CONTEXT,
    };

    /// docs/peer-link.md appendix B: an exported secret of 32 bytes 0x42.
    #[test]
    fn derivation_matches_the_spec_vector() {
        let secret = [0x42u8; EXPORTED_SECRET_LEN];
        assert_eq!(
            INITIATOR_TO_ACCEPTOR_CONTEXT,
            "lessgate LESS 1 packet MAC initiator to acceptor"
        );
        assert_eq!(
            ACCEPTOR_TO_INITIATOR_CONTEXT,
            "lessgate LESS 1 packet MAC acceptor to initiator"
        );
        let dialer_to_listener = blake3::derive_key(INITIATOR_TO_ACCEPTOR_CONTEXT, &secret);
        let listener_to_dialer = blake3::derive_key(ACCEPTOR_TO_INITIATOR_CONTEXT, &secret);
        assert_eq!(
            hex::encode(dialer_to_listener),
            "f5c43eb221b41744ba44ab65cded1168a274edcdeddf347302f0e8074119d00c"
        );
        assert_eq!(
            hex::encode(listener_to_dialer),
            "db1f1ca7a6980774f319572a095fd4609cd39d7c04158401a589b7491eadeb06"
        );
        let dialer = SessionKeys::derive(&secret, LinkRole::Initiator);
        let listener = SessionKeys::derive(&secret, LinkRole::Acceptor);
        assert_eq!(dialer.send, MacKey::new(dialer_to_listener));
        assert_eq!(dialer.receive, MacKey::new(listener_to_dialer));
        assert_eq!(dialer.send, listener.receive);
        assert_eq!(dialer.receive, listener.send);
        assert_ne!(dialer.send, dialer.receive);
    }
}
