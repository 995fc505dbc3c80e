//! The one error type of the kNet codecs and connections: every way remote
//! bytes can be malformed (docs/knet-wire.md §4.11 lists what kills a kNet
//! connection) and every value a local caller may try to write that the wire
//! cannot carry. Each variant names the problem well enough for a log line.

use thiserror::Error;

/// Why kNet bytes could not be decoded, or a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KnetError {
    /// The input ended inside a fixed-size field.
    #[error("truncated {what}")]
    Truncated { what: &'static str },
    /// A UDP datagram shorter than its 3-byte header (§4.1, §4.11).
    #[error("datagram of {0} bytes is shorter than the 3-byte header")]
    ShortDatagram(usize),
    /// A message block with ContentLength 0 (§4.2: kNet closes the connection).
    #[error("message block with content length 0")]
    EmptyContent,
    /// A message block whose content runs past the end of the datagram.
    #[error("message content of {len} bytes runs past the datagram end ({left} left)")]
    ContentBeyondEnd { len: usize, left: usize },
    /// A FragmentStart with FragmentCount ≤ 1 (§4.2).
    #[error("fragment count {0} (a fragmented transfer has at least 2)")]
    BadFragmentCount(u32),
    /// A later fragment with index 0 (only the FragmentStart has index 0).
    #[error("fragment index {index} on a non-start fragment")]
    BadFragmentIndex { index: u32 },
    /// A VLE that ends early (kNet's `VLEReadError`).
    #[error("bad VLE in {what}")]
    BadVle { what: &'static str },
    /// A PacketAck payload that is not exactly 7 bytes (§4.4).
    #[error("PacketAck payload of {0} bytes (must be 7)")]
    PacketAckSize(usize),
    /// A length above its limit, read from the wire or given by a caller.
    #[error("{what} is {len} bytes, above the limit {max}")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// A reliable number too far above the datagram's base for a VLE8_16
    /// delta (§4.3: at most 32767).
    #[error("reliable number delta {0} exceeds 32767")]
    DeltaTooLarge(u32),
    /// A message id above VLE8_16_32's range 2^30-1 (§2).
    #[error("message id {0:#x} exceeds 0x3fffffff")]
    MessageIdTooLarge(u32),
    /// A value above the range of the field it is written into.
    #[error("{what} {value:#x} is out of range")]
    OutOfRange { what: &'static str, value: u64 },
    /// Block fields that contradict each other (e.g. a message id on a
    /// later fragment, or none on a whole message).
    #[error("inconsistent block: {0}")]
    Inconsistent(&'static str),
    /// A fragment or later part asked for the message id it does not carry.
    #[error("a later fragment carries no message id")]
    NoMessageId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        assert_eq!(
            KnetError::ContentBeyondEnd { len: 300, left: 12 }.to_string(),
            "message content of 300 bytes runs past the datagram end (12 left)"
        );
        assert_eq!(
            KnetError::MessageIdTooLarge(0x4000_0000).to_string(),
            "message id 0x40000000 exceeds 0x3fffffff"
        );
        assert_eq!(
            KnetError::Truncated { what: "u16 header" }.to_string(),
            "truncated u16 header"
        );
    }
}
