//! LESS MAC keys from the TLS session (docs/peer-link.md section 6.4).
//!
//! Both nodes export the same secret from their TLS 1.3 session (RFC 8446
//! section 7.5, through QUIC), then derive one key per direction with BLAKE3
//! in key-derivation mode. No key crosses the wire, every connection gets
//! fresh keys, and the two directions differ, so a packet reflected back to
//! its sender fails the MAC check. This module owns the labels and the
//! derivation; the driver performs the export.

use std::fmt;

/// RFC 5705 / RFC 8446 exporter label.
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-lessgate-peer-link-v1";
/// Exporter context: empty (the TLS session already binds both identities).
pub const EXPORTER_CONTEXT: &[u8] = b"";
/// Exported secret length in bytes.
pub const EXPORTED_SECRET_LEN: usize = 32;
/// BLAKE3 `derive_key` context for packets the dialer (QUIC client) sends.
pub const CONTEXT_DIALER_TO_LISTENER: &str =
    "lessgate peer-link v1 LESS MAC key dialer to listener";
/// BLAKE3 `derive_key` context for packets the listener (QUIC server) sends.
pub const CONTEXT_LISTENER_TO_DIALER: &str =
    "lessgate peer-link v1 LESS MAC key listener to dialer";

/// Which end of the QUIC connection this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Opened the QUIC connection (the TLS client).
    Dialer,
    /// Accepted it (the TLS server).
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

/// A 32-byte LESS MAC key; its `Debug` does not print the key.
#[derive(Clone, PartialEq, Eq)]
pub struct MacKey(pub [u8; 32]);

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey(..)")
    }
}

/// The two keys of one link, seen from one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacKeys {
    /// Signs packets this node sends.
    pub send: MacKey,
    /// Checks packets this node receives.
    pub receive: MacKey,
}

impl MacKeys {
    /// Derives both directions' keys from the exported secret.
    pub fn derive(exported: &[u8; EXPORTED_SECRET_LEN], role: Role) -> MacKeys {
        let dialer_to_listener = MacKey(blake3::derive_key(CONTEXT_DIALER_TO_LISTENER, exported));
        let listener_to_dialer = MacKey(blake3::derive_key(CONTEXT_LISTENER_TO_DIALER, exported));
        match role {
            Role::Dialer => MacKeys {
                send: dialer_to_listener,
                receive: listener_to_dialer,
            },
            Role::Listener => MacKeys {
                send: listener_to_dialer,
                receive: dialer_to_listener,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [0x42; 32];

    #[test]
    fn both_ends_agree_and_directions_differ() {
        let dialer = MacKeys::derive(&SECRET, Role::Dialer);
        let listener = MacKeys::derive(&SECRET, Role::Listener);
        assert_eq!(dialer.send, listener.receive);
        assert_eq!(dialer.receive, listener.send);
        assert_ne!(dialer.send, dialer.receive);
        assert_eq!(format!("{:?}", dialer.send), "MacKey(..)");
    }

    #[test]
    fn derivation_matches_the_spec_vector() {
        // docs/peer-link.md appendix B: exported secret of 32 bytes 0x42.
        let dialer = MacKeys::derive(&SECRET, Role::Dialer);
        assert_eq!(
            hex::encode(dialer.send.0),
            hex::encode(blake3::derive_key(CONTEXT_DIALER_TO_LISTENER, &SECRET))
        );
        assert_eq!(hex::encode(dialer.send.0), DIALER_TO_LISTENER_HEX);
        assert_eq!(hex::encode(dialer.receive.0), LISTENER_TO_DIALER_HEX);
    }

    const DIALER_TO_LISTENER_HEX: &str =
        "e6ff8c14ed3dc53c9c89e57e4fc9bbbec792246fdfb9ae9c23f0f899300a1264";
    const LISTENER_TO_DIALER_HEX: &str =
        "7cfa1c252a445d6345f96697455280fef80e5fcd9608f1db8360952c8c9050dd";
}
