//! Errors of the Tundra codec: one narrow type for decoding remote bytes and
//! one for encoding local values. Decoders return `DecodeError` for every
//! malformed input (they never panic); encoders return `EncodeError` when a
//! value cannot be represented on the wire (a VLE above 2^30-1, a string too
//! long for its length prefix, a block above the 16 KiB limit).

use thiserror::Error;

/// Why a byte string could not be decoded as a Tundra message or block.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before a field was complete. kNet's reader returns
    /// 0xFFFFFFFF for a short VLE and throws for other short reads; both are
    /// an error here (docs/tundra-wire.md §1.2).
    #[error("truncated {what}: needs {needed} bits, {available} left")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    /// A length or count read from the wire is above its named limit.
    #[error("{what} is {value}, above the limit {limit}")]
    LimitExceeded {
        what: &'static str,
        value: usize,
        limit: usize,
    },
    /// A field holds a value the protocol does not define.
    #[error("invalid {what}: {value}")]
    Invalid { what: &'static str, value: u64 },
}

impl DecodeError {
    pub(crate) fn truncated(what: &'static str, needed: usize, available: usize) -> Self {
        DecodeError::Truncated {
            what,
            needed,
            available,
        }
    }
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// VLE8_16_32 carries at most 2^30-1; kNet throws for larger values
    /// (docs/tundra-wire.md §1.2).
    #[error("value {0:#x} does not fit VLE8_16_32 (maximum 0x3fffffff)")]
    VleOverflow(u64),
    /// A string, list or block is longer than its length prefix or limit.
    #[error("{what} is {len}, above the limit {limit}")]
    TooLong {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    /// A value does not match the slot or field it is written into.
    #[error("{0}")]
    Mismatch(String),
}
