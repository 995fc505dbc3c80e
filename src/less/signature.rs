//! The packet signature (docs/less-wire.md §5, "signature"): a keyed hash of the
//! whole frame with the 8 signature bytes treated as zero.
//!
//! docs/less-wire.md §5: the hash is keyed BLAKE3 with a 32-byte key from the peer-link
//! set-up, truncated to its first 8 output bytes, which are the signature's
//! 8 bytes on the wire in output order (so the UINT64-LITTLE-ENDIAN value is
//! `u64::from_le_bytes(output[0..8])`). Verification compares in constant
//! time. This module owns keys and MACs; it does not parse frames.

use std::fmt;

use subtle::ConstantTimeEq;

/// Bytes of the signature field.
pub const SIGNATURE_LEN: usize = 8;

/// Bytes of a MAC key.
pub const KEY_LEN: usize = 32;

/// A 32-byte BLAKE3 key. `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct MacKey([u8; KEY_LEN]);

impl MacKey {
    /// A key from its bytes.
    pub const fn new(bytes: [u8; KEY_LEN]) -> MacKey {
        MacKey(bytes)
    }

    /// The signature of `frame` with bytes `offset..offset + 8` taken as zero.
    /// The caller guarantees `offset + 8 <= frame.len()`.
    pub fn sign(&self, frame: &[u8], offset: usize) -> [u8; SIGNATURE_LEN] {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        hasher.update(&frame[..offset]);
        hasher.update(&[0u8; SIGNATURE_LEN]);
        hasher.update(&frame[offset + SIGNATURE_LEN..]);
        let mut signature = [0u8; SIGNATURE_LEN];
        hasher.finalize_xof().fill(&mut signature);
        signature
    }

    /// Writes the signature of `frame` into bytes `offset..offset + 8`.
    pub fn write_signature(&self, frame: &mut [u8], offset: usize) {
        let signature = self.sign(frame, offset);
        frame[offset..offset + SIGNATURE_LEN].copy_from_slice(&signature);
    }

    /// True if bytes `offset..offset + 8` hold the signature of `frame`;
    /// false also if the frame is too short. Constant time in the signature.
    pub fn verify(&self, frame: &[u8], offset: usize) -> bool {
        let Some(end) = offset.checked_add(SIGNATURE_LEN) else {
            return false;
        };
        let Some(received) = frame.get(offset..end) else {
            return false;
        };
        self.sign(frame, offset).ct_eq(received).into()
    }
}

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey(..)")
    }
}

/// Which end of the link this is, as fixed by the link set-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRole {
    /// The side that opened the link.
    Initiator,
    /// The side that accepted it.
    Acceptor,
}

/// The keys of one session: one signs what this end sends, the other checks
/// what it receives.
///
/// Distinct keys per direction stop a reflected packet (one of our own,
/// bounced back to us) from verifying. [`SessionKeys::derive`] produces them
/// from one 32-byte link secret (docs/less-wire.md "Keys").
#[derive(Clone, Debug)]
pub struct SessionKeys {
    pub send: MacKey,
    pub receive: MacKey,
}

/// BLAKE3 `derive_key` context for initiator-to-acceptor packets.
pub const INITIATOR_TO_ACCEPTOR_CONTEXT: &str = "lessgate LESS 1 packet MAC initiator to acceptor";
/// BLAKE3 `derive_key` context for acceptor-to-initiator packets.
pub const ACCEPTOR_TO_INITIATOR_CONTEXT: &str = "lessgate LESS 1 packet MAC acceptor to initiator";

impl SessionKeys {
    /// One key for both directions: what a peer that has only the draft's
    /// single negotiated key uses. Reflection is then not detected.
    pub fn symmetric(key: MacKey) -> SessionKeys {
        SessionKeys {
            send: key.clone(),
            receive: key,
        }
    }

    /// Per-direction keys derived from a link secret with BLAKE3 `derive_key`.
    pub fn derive(secret: &[u8; KEY_LEN], role: LinkRole) -> SessionKeys {
        let forward = MacKey(blake3::derive_key(INITIATOR_TO_ACCEPTOR_CONTEXT, secret));
        let backward = MacKey(blake3::derive_key(ACCEPTOR_TO_INITIATOR_CONTEXT, secret));
        match role {
            LinkRole::Initiator => SessionKeys {
                send: forward,
                receive: backward,
            },
            LinkRole::Acceptor => SessionKeys {
                send: backward,
                receive: forward,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_truncated_keyed_blake3_over_zeroed_field() {
        let key = MacKey::new([7u8; KEY_LEN]);
        let mut frame = hex::decode("0102c000ffffffffffffffff0a00").unwrap();
        key.write_signature(&mut frame, 4);
        let mut zeroed = frame.clone();
        zeroed[4..12].fill(0);
        let expected = blake3::keyed_hash(&[7u8; KEY_LEN], &zeroed);
        assert_eq!(&frame[4..12], &expected.as_bytes()[..8]);
        assert!(key.verify(&frame, 4));
        frame[13] ^= 1;
        assert!(!key.verify(&frame, 4));
        assert!(!key.verify(&frame, 10));
        assert!(!key.verify(&frame, usize::MAX));
    }

    #[test]
    fn derived_keys_pair_up_and_differ_by_direction() {
        let secret = [3u8; KEY_LEN];
        let initiator = SessionKeys::derive(&secret, LinkRole::Initiator);
        let acceptor = SessionKeys::derive(&secret, LinkRole::Acceptor);
        assert_eq!(initiator.send, acceptor.receive);
        assert_eq!(initiator.receive, acceptor.send);
        assert_ne!(initiator.send, initiator.receive);
        assert_eq!(format!("{:?}", initiator.send), "MacKey(..)");
    }
}
