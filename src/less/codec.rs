//! The byte-level codec shared by every LESS structure: a borrowing [`Reader`],
//! the INTEGER encoding (docs/less-wire.md §1), and the one narrow [`DecodeError`].
//!
//! This module owns how bytes become integers and slices; it knows nothing of
//! values, messages or packets. Every read is bounds-checked and total.

use super::limits::{INTEGER_MAX_LEN, VALUE_BUDGET_SLACK};

/// Why bytes could not be decoded. A decode error from an authenticated peer
/// is a framing error: the session ends (docs/less-wire.md §12).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("input ends inside a field")]
    Truncated,
    #[error("INTEGER longer than {INTEGER_MAX_LEN} bytes")]
    IntegerTooLong,
    #[error("INTEGER does not fit in a signed 64-bit value")]
    IntegerOverflow,
    #[error("{what} is negative")]
    Negative { what: &'static str },
    #[error("{what} of {value} exceeds the limit {limit}")]
    LimitExceeded {
        what: &'static str,
        value: u64,
        limit: usize,
    },
    #[error("STRING byte value {0} is out of range or NUL")]
    InvalidStringByte(i64),
    #[error("STRING is not valid UTF-8")]
    InvalidUtf8,
    #[error("unknown type code {0}")]
    UnknownTypeCode(i64),
    #[error("unknown message code {0}")]
    UnknownMessageCode(i64),
    #[error("{0} bytes left after the last field")]
    TrailingBytes(usize),
    #[error("nesting deeper than the limit")]
    TooDeep,
    #[error("more decoded values than the input can justify")]
    BudgetExhausted,
    #[error("{0}")]
    Invalid(&'static str),
    #[error("property {0} is not declared by the schema")]
    UndeclaredProperty(String),
    /// Decoding needs state the receiver does not have yet (a type or an
    /// entity introduced by a packet that has not arrived). Only an error if
    /// every earlier packet has been processed.
    #[error("reference to unknown {0}")]
    Unresolved(Unresolved),
}

/// What a decoder needed but could not find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresolved {
    /// A type id in the sender's space.
    SenderType(u64),
    /// An object id in the sender's space.
    SenderEntity(u64),
    /// An object id in the receiver's space.
    ReceiverEntity(u64),
    /// An interaction id not in the connection schema.
    Interaction(u64),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::SenderType(id) => write!(f, "sender type {id}"),
            Unresolved::SenderEntity(id) => write!(f, "sender entity {id}"),
            Unresolved::ReceiverEntity(id) => write!(f, "receiver entity {id}"),
            Unresolved::Interaction(id) => write!(f, "interaction {id}"),
        }
    }
}

/// A cursor over borrowed bytes. Also carries the per-frame value budget
/// (see [`VALUE_BUDGET_SLACK`]).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    budget: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes` with a value budget of `bytes.len() + VALUE_BUDGET_SLACK`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            position: 0,
            budget: bytes.len().saturating_add(VALUE_BUDGET_SLACK),
        }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.position..]
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless every byte was read.
    pub fn expect_end(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    /// Reads one byte.
    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        let byte = *self
            .bytes
            .get(self.position)
            .ok_or(DecodeError::Truncated)?;
        self.position += 1;
        Ok(byte)
    }

    /// Reads exactly `len` bytes.
    pub fn read_bytes(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        let slice = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(slice)
    }

    /// Reads exactly `N` bytes into an array.
    pub fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.read_bytes(N)?);
        Ok(array)
    }

    /// Reads an INTEGER (docs/less-wire.md §1).
    ///
    /// A first byte below 0x80 is the value. Otherwise bit 0x40 marks the
    /// negative form (the magnitude is the bitwise complement of the value),
    /// the low 6 bits are the lowest magnitude bits, and each following byte
    /// adds 7 bits, least significant first, while its 0x80 bit is set.
    /// Non-canonical encodings (a flagged form for 0..=127, zero padding
    /// groups) are accepted within [`INTEGER_MAX_LEN`] bytes; magnitudes above
    /// `i64::MAX` are [`DecodeError::IntegerOverflow`].
    pub fn read_integer(&mut self) -> Result<i64, DecodeError> {
        let first = self.read_u8()?;
        if first & 0x80 == 0 {
            return Ok(i64::from(first));
        }
        let negative = first & 0x40 != 0;
        let mut magnitude = u64::from(first & 0x3f);
        let mut shift = 6u32;
        let mut length = 1usize;
        loop {
            if length == INTEGER_MAX_LEN {
                return Err(DecodeError::IntegerTooLong);
            }
            let byte = self.read_u8()?;
            length += 1;
            let group = u64::from(byte & 0x7f);
            // shift <= 6 + 7 * 8 = 62 here, so the shifts below are defined.
            if group > (i64::MAX as u64) >> shift {
                return Err(DecodeError::IntegerOverflow);
            }
            magnitude |= group << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        // magnitude <= i64::MAX by the per-group check above.
        let value = magnitude as i64;
        Ok(if negative { !value } else { value })
    }

    /// Reads an INTEGER that counts something: it must be non-negative and at
    /// most `limit`.
    pub fn read_count(&mut self, what: &'static str, limit: usize) -> Result<usize, DecodeError> {
        let value = self.read_integer()?;
        if value < 0 {
            return Err(DecodeError::Negative { what });
        }
        let value = value as u64;
        if value > limit as u64 {
            return Err(DecodeError::LimitExceeded { what, value, limit });
        }
        Ok(value as usize)
    }

    /// Reads an INTEGER as the 64-bit pattern of an unsigned id or bitmask
    /// (decision: unsigned 64-bit fields travel as the same bits read as i64).
    pub fn read_u64(&mut self) -> Result<u64, DecodeError> {
        self.read_integer().map(|value| value as u64)
    }

    /// Charges one decoded value against the frame's budget.
    pub fn charge_value(&mut self) -> Result<(), DecodeError> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or(DecodeError::BudgetExhausted)?;
        Ok(())
    }

    /// Runs `decode` over exactly the next `len` bytes, which it must consume
    /// entirely. The budget is shared with the parent reader.
    pub fn read_nested<T>(
        &mut self,
        len: usize,
        decode: impl FnOnce(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let bytes = self.read_bytes(len)?;
        let mut nested = Reader {
            bytes,
            position: 0,
            budget: self.budget,
        };
        let value = decode(&mut nested)?;
        nested.expect_end()?;
        self.budget = nested.budget;
        Ok(value)
    }
}

/// Appends the INTEGER encoding of `value`: exactly the draft's encoder, with
/// its `emit_type` typo read as `emit_byte`.
pub fn write_integer(out: &mut Vec<u8>, value: i64) {
    let (mut rest, flag): (u64, u8) = if value > 127 {
        (value as u64, 0x80)
    } else if value < 0 {
        ((!value) as u64, 0xc0)
    } else {
        (value as u64, 0x00)
    };
    if flag != 0 {
        out.push(flag | (rest & 0x3f) as u8);
        rest >>= 6;
    }
    while rest > 0x7f {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends an unsigned 64-bit id or bitmask as the INTEGER of the same bits.
pub fn write_u64(out: &mut Vec<u8>, value: u64) {
    write_integer(out, value as i64);
}

/// Appends a count or length (always fits: lengths are bounded far below i64::MAX).
pub fn write_count(out: &mut Vec<u8>, count: usize) {
    write_integer(out, count as i64);
}

/// The number of bytes [`write_integer`] emits for `value`.
pub fn integer_len(value: i64) -> usize {
    // The same steps as `write_integer`, counted instead of written.
    let (mut rest, flagged) = if value > 127 {
        (value as u64, true)
    } else if value < 0 {
        ((!value) as u64, true)
    } else {
        (value as u64, false)
    };
    let mut len = 1;
    if flagged {
        len += 1;
        rest >>= 6;
    }
    while rest > 0x7f {
        len += 1;
        rest >>= 7;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(value: i64) -> String {
        let mut out = Vec::new();
        write_integer(&mut out, value);
        hex::encode(out)
    }

    fn decode(hex_text: &str) -> Result<i64, DecodeError> {
        let bytes = hex::decode(hex_text).unwrap();
        let mut reader = Reader::new(&bytes);
        let value = reader.read_integer()?;
        reader.expect_end()?;
        Ok(value)
    }

    /// Expected bytes worked out by hand from the draft's pseudo-code.
    const FIXTURES: &[(i64, &str)] = &[
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8002"),    // 0x80|(128&63)=80, 128>>6=2
        (191, "bf02"),    // 191&63=63 -> bf, 191>>6=2
        (255, "bf03"),    // 255&63=63 -> bf, 255>>6=3
        (300, "ac04"),    // 300&63=44=0x2c -> ac, 300>>6=4
        (8191, "bf7f"),   // 8191>>6=127 fits the last byte
        (8192, "808001"), // 8192>>6=128 -> 80 then 01
        (-1, "c000"),     // ~(-1)=0 -> c0, then 00
        (-64, "ff00"),    // ~(-64)=63 -> ff, then 00
        (-65, "c001"),    // ~(-65)=64 -> c0, 64>>6=1
        (-129, "c002"),   // ~(-129)=128 -> c0, 128>>6=2
        (i64::MAX, "bfffffffffffffffff01"),
        (i64::MIN, "ffffffffffffffffff01"),
    ];

    #[test]
    fn encodes_and_decodes_fixtures() {
        for &(value, bytes) in FIXTURES {
            assert_eq!(encode(value), bytes, "encoding {value}");
            assert_eq!(decode(bytes), Ok(value), "decoding {bytes}");
        }
    }

    #[test]
    fn all_ones_bitmask_is_two_bytes() {
        let mut out = Vec::new();
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, [0xc0, 0x00]);
        assert_eq!(Reader::new(&out).read_u64(), Ok(u64::MAX));
    }

    #[test]
    fn accepts_non_canonical_forms() {
        assert_eq!(decode("8001"), Ok(64)); // flagged form of a small value
        assert_eq!(decode("8000"), Ok(0));
        assert_eq!(decode("808000"), Ok(0)); // zero padding group
        assert_eq!(decode("c08000"), Ok(-1));
    }

    #[test]
    fn rejects_overlong_overflowing_and_truncated() {
        assert_eq!(decode("80808080808080808000"), Ok(0)); // 10 bytes is fine
        assert_eq!(
            decode("8080808080808080808000"),
            Err(DecodeError::IntegerTooLong)
        );
        // 2^63 in the positive form does not fit i64.
        assert_eq!(
            decode("80808080808080808002"),
            Err(DecodeError::IntegerOverflow)
        );
        assert_eq!(decode("80"), Err(DecodeError::Truncated));
        assert_eq!(decode(""), Err(DecodeError::Truncated));
        assert_eq!(decode("8002ff"), Err(DecodeError::TrailingBytes(1)));
    }

    #[test]
    fn counts_are_bounded_and_non_negative() {
        let mut reader = Reader::new(&[0xc0, 0x00]);
        assert_eq!(
            reader.read_count("count", 10),
            Err(DecodeError::Negative { what: "count" })
        );
        let mut reader = Reader::new(&[0x0b]);
        assert!(matches!(
            reader.read_count("count", 10),
            Err(DecodeError::LimitExceeded { value: 11, .. })
        ));
    }

    #[test]
    fn every_value_round_trips_and_lengths_match() {
        let mut samples = vec![0i64, 1, -1, 63, 64, -63, -64, -65, 127, 128, 129];
        for shift in 0..63 {
            let p = 1i64 << shift;
            samples.extend([p, p - 1, p + 1, -p, -p - 1, -p + 1]);
        }
        for value in samples {
            let mut out = Vec::new();
            write_integer(&mut out, value);
            assert!(out.len() <= INTEGER_MAX_LEN);
            assert_eq!(out.len(), integer_len(value));
            let mut reader = Reader::new(&out);
            assert_eq!(reader.read_integer(), Ok(value));
            assert!(reader.is_empty());
        }
    }

    #[test]
    fn nested_reads_must_consume_everything() {
        let mut reader = Reader::new(&[1, 2, 3]);
        let result = reader.read_nested(2, |inner| inner.read_u8());
        assert_eq!(result, Err(DecodeError::TrailingBytes(1)));
        let mut reader = Reader::new(&[1, 2, 3]);
        assert_eq!(reader.read_nested(1, |inner| inner.read_u8()), Ok(1));
        assert_eq!(reader.remaining(), 2);
    }
}
