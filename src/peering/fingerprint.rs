//! Certificate fingerprints: the identity a peer pins.
//!
//! A fingerprint is SHA-256 over the DER encoding of a node's certificate
//! (docs/peer-link.md §3), written `sha256:` followed by 64 lowercase
//! hex digits. This module owns the type, its text form and its computation;
//! it must not decide whom to trust (that is the peer set's job).

use std::fmt;
use std::str::FromStr;

/// The text prefix naming the hash function.
const PREFIX: &str = "sha256:";

/// SHA-256 of a certificate's DER bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of_certificate(der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut bytes = [0u8; 32];
        // SHA-256 output is always 32 bytes.
        bytes.copy_from_slice(digest.as_ref());
        Fingerprint(bytes)
    }

    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Fingerprint {
        Fingerprint(bytes)
    }

    /// The raw digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a fingerprint text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    #[error("must start with `sha256:`")]
    Prefix,
    #[error("must have 64 hex digits after `sha256:`, found {0} characters")]
    Length(usize),
    #[error("must have only hex digits after `sha256:`")]
    Digit,
}

impl FromStr for Fingerprint {
    type Err = FingerprintError;

    /// Accepts `sha256:` and 64 hex digits, either case; colons between
    /// digit pairs (as `openssl x509 -fingerprint` prints them) are allowed.
    fn from_str(text: &str) -> Result<Fingerprint, FingerprintError> {
        let digits = text
            .strip_prefix(PREFIX)
            .or_else(|| text.strip_prefix("SHA256:"))
            .ok_or(FingerprintError::Prefix)?;
        let digits: String = digits.chars().filter(|c| *c != ':').collect();
        if digits.len() != 64 {
            return Err(FingerprintError::Length(digits.len()));
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(&digits, &mut bytes).map_err(|_| FingerprintError::Digit)?;
        Ok(Fingerprint(bytes))
    }
}

impl<'de> serde::Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_empty_input_is_the_known_vector() {
        let fingerprint = Fingerprint::of_certificate(b"");
        assert_eq!(
            fingerprint.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn text_round_trips_and_accepts_colons_and_case() {
        let fingerprint = Fingerprint::of_certificate(b"abc");
        let text = fingerprint.to_string();
        assert_eq!(
            text,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(text.parse::<Fingerprint>(), Ok(fingerprint));
        let with_colons = "SHA256:BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:\
                           B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD";
        assert_eq!(with_colons.parse::<Fingerprint>(), Ok(fingerprint));
    }

    #[test]
    fn malformed_text_is_refused_with_a_reason() {
        assert_eq!(
            "md5:00".parse::<Fingerprint>(),
            Err(FingerprintError::Prefix)
        );
        assert_eq!(
            "sha256:abcd".parse::<Fingerprint>(),
            Err(FingerprintError::Length(4))
        );
        let bad_digit = format!("sha256:{}", "g".repeat(64));
        assert_eq!(
            bad_digit.parse::<Fingerprint>(),
            Err(FingerprintError::Digit)
        );
    }
}
