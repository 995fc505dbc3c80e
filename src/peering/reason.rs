//! Why a peer link was refused or ended: the reason codes of Refuse and
//! Goodbye messages, which double as QUIC application close codes
//! (docs/peer-link.md §9).
//!
//! The numbers are part of the wire format and frozen across versions, so an
//! old node can still tell a new one why it was refused.

use std::fmt;

/// A reason code. Unknown codes from newer peers are kept, not rejected:
/// a Refuse must stay readable across versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReasonCode(pub u16);

impl ReasonCode {
    /// No error (a QUIC close after a completed Goodbye exchange).
    pub const NONE: ReasonCode = ReasonCode(0x0000);
    /// The sender is shutting down on purpose.
    pub const SHUTDOWN: ReasonCode = ReasonCode(0x0001);
    /// The envelope's version is not one the receiver speaks.
    pub const VERSION_MISMATCH: ReasonCode = ReasonCode(0x0002);
    /// The first eight bytes are not the peer-link magic.
    pub const BAD_MAGIC: ReasonCode = ReasonCode(0x0003);
    /// A control message could not be decoded.
    pub const MALFORMED: ReasonCode = ReasonCode(0x0004);
    /// The envelope sets a flag the receiver does not implement.
    pub const UNSUPPORTED_FLAGS: ReasonCode = ReasonCode(0x0005);
    /// A hello parameter cannot be used (schema, MTU, data address ...).
    pub const INCOMPATIBLE: ReasonCode = ReasonCode(0x0006);
    /// The peer's node UUID is the receiver's own.
    pub const SELF_CONNECTION: ReasonCode = ReasonCode(0x0007);
    /// Another connection to the same peer survives (section 6.3).
    pub const DUPLICATE_LINK: ReasonCode = ReasonCode(0x0008);
    /// No valid LESS packet arrived within the liveness timeout.
    pub const LIVENESS_TIMEOUT: ReasonCode = ReasonCode(0x0009);
    /// The LESS session hit a framing or logic error (docs/less-wire.md §12).
    pub const PROTOCOL_ERROR: ReasonCode = ReasonCode(0x000a);
    /// The handshake did not finish in time.
    pub const HANDSHAKE_TIMEOUT: ReasonCode = ReasonCode(0x000b);
    /// A control message arrived in a state that does not allow it.
    pub const UNEXPECTED_MESSAGE: ReasonCode = ReasonCode(0x000c);
    /// The sender failed internally (for example, lost its data socket).
    pub const INTERNAL: ReasonCode = ReasonCode(0x000d);
    /// The peer's node UUID is already linked to the receiver as another
    /// peer (another certificate): two nodes share one UUID.
    pub const IDENTITY_CONFLICT: ReasonCode = ReasonCode(0x000e);

    /// Whether the code says two nodes share one node UUID: a configuration
    /// error no retry can mend.
    pub fn is_identity_conflict(self) -> bool {
        self == ReasonCode::SELF_CONNECTION || self == ReasonCode::IDENTITY_CONFLICT
    }

    /// The code's name as the spec writes it.
    pub fn name(self) -> &'static str {
        match self {
            ReasonCode::NONE => "none",
            ReasonCode::SHUTDOWN => "shutdown",
            ReasonCode::VERSION_MISMATCH => "version-mismatch",
            ReasonCode::BAD_MAGIC => "bad-magic",
            ReasonCode::MALFORMED => "malformed",
            ReasonCode::UNSUPPORTED_FLAGS => "unsupported-flags",
            ReasonCode::INCOMPATIBLE => "incompatible",
            ReasonCode::SELF_CONNECTION => "self-connection",
            ReasonCode::DUPLICATE_LINK => "duplicate-link",
            ReasonCode::LIVENESS_TIMEOUT => "liveness-timeout",
            ReasonCode::PROTOCOL_ERROR => "protocol-error",
            ReasonCode::HANDSHAKE_TIMEOUT => "handshake-timeout",
            ReasonCode::UNEXPECTED_MESSAGE => "unexpected-message",
            ReasonCode::INTERNAL => "internal",
            ReasonCode::IDENTITY_CONFLICT => "identity-conflict",
            _ => "unknown",
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (0x{:04x})", self.name(), self.0)
    }
}

/// A reason code with its human-readable explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub code: ReasonCode,
    /// UTF-8, at most [`crate::peering::control::MAX_REASON_TEXT`] bytes.
    pub text: String,
}

impl Reason {
    /// A reason with its text.
    pub fn new(code: ReasonCode, text: impl Into<String>) -> Reason {
        Reason {
            code,
            text: text.into(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_print_name_and_number() {
        assert_eq!(
            ReasonCode::VERSION_MISMATCH.to_string(),
            "version-mismatch (0x0002)"
        );
        assert_eq!(ReasonCode(0x1234).to_string(), "unknown (0x1234)");
        let reason = Reason::new(ReasonCode::SHUTDOWN, "node stopping");
        assert_eq!(reason.to_string(), "shutdown (0x0001): node stopping");
    }
}
