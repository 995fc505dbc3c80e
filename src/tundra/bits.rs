//! The kNet bit stream (reference §1.1-1.3, kNet `DataSerializer` /
//! `DataDeserializer`): bits are packed LSB-first within each byte; every
//! multi-byte integer or float is its little-endian bytes appended one byte
//! at a time, so it works at any bit offset; the unused high bits of the last
//! byte are zero. VLE8_16_32 integers and the two string forms (S8: u8 length
//! + bytes; U16: u16 length + UTF-8) are built on top.
//!
//! This module owns only the stream primitives. It knows nothing of messages,
//! and it never panics on input: every read checks the bits left first and
//! returns a [`DecodeError`] instead of kNet's 0xFFFFFFFF sentinel.

use std::borrow::Cow;

use super::error::{DecodeError, EncodeError};

/// Largest value VLE8_16_32 can carry (`VLEType3<7,7,16>::maxValue`, §1.2).
pub const VLE_MAX: u32 = 0x3FFF_FFFF;

/// Longest S8 string kNet stable can frame: its length prefix is one byte
/// (§1.3; longer strings corrupt the stream in the C++ writer).
pub const S8_MAX_BYTES: usize = u8::MAX as usize;

/// Longest U16 string: its length prefix is a u16 (§1.3 `WriteUtf8String`).
pub const U16_STRING_MAX_BYTES: usize = u16::MAX as usize;

/// Writes a kNet bit stream.
#[derive(Debug, Default, Clone)]
pub struct BitWriter {
    buf: Vec<u8>,
    /// Bit offset inside the last byte of `buf`, 0..=7 (0 = byte aligned).
    bit: u32,
}

impl BitWriter {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the low `n` bits of `value`, bit 0 first (`AppendBits`).
    pub fn bits(&mut self, mut value: u32, mut n: u32) {
        debug_assert!(n <= 32);
        if n < 32 {
            value &= (1u32 << n) - 1;
        }
        while n > 0 {
            if self.bit == 0 {
                self.buf.push(0);
            }
            let take = (8 - self.bit).min(n);
            let mask = ((1u32 << take) - 1) as u8;
            if let Some(last) = self.buf.last_mut() {
                *last |= ((value as u8) & mask) << self.bit;
            }
            value = value.checked_shr(take).unwrap_or(0);
            n -= take;
            self.bit = (self.bit + take) & 7;
        }
    }

    /// Appends one bit (`Add<bit>`).
    pub fn bit(&mut self, value: bool) {
        self.bits(u32::from(value), 1);
    }

    /// Appends a byte at the current bit offset.
    pub fn u8(&mut self, value: u8) {
        if self.bit == 0 {
            self.buf.push(value);
        } else {
            self.bits(u32::from(value), 8);
        }
    }

    /// Appends little-endian bytes at the current bit offset.
    pub fn bytes(&mut self, data: &[u8]) {
        if self.bit == 0 {
            self.buf.extend_from_slice(data);
            return;
        }
        // Unaligned, a whole byte per step: its low bits complete the last
        // byte and its high bits start the next (the offset is unchanged).
        let offset = self.bit;
        self.buf.reserve(data.len());
        for &b in data {
            if let Some(last) = self.buf.last_mut() {
                *last |= b << offset;
            }
            self.buf.push(b >> (8 - offset));
        }
    }

    /// Appends a u16, little-endian.
    pub fn u16(&mut self, value: u16) {
        self.bytes(&value.to_le_bytes());
    }

    /// Appends a u32, little-endian.
    pub fn u32(&mut self, value: u32) {
        self.bytes(&value.to_le_bytes());
    }

    /// Appends an s32, little-endian two's complement.
    pub fn i32(&mut self, value: i32) {
        self.bytes(&value.to_le_bytes());
    }

    /// Appends a raw IEEE-754 single, little-endian.
    pub fn f32(&mut self, value: f32) {
        self.u32(value.to_bits());
    }

    /// Appends a VLE8_16_32 (§1.2): 1, 2 or 4 bytes.
    pub fn vle(&mut self, value: u32) -> Result<(), EncodeError> {
        if value < 0x80 {
            self.u8(value as u8);
        } else if value < 0x4000 {
            self.u16(((value & 0x7F) | 0x80 | ((value & 0x3F80) << 1)) as u16);
        } else if value <= VLE_MAX {
            self.u32(
                (value & 0x7F)
                    | 0x80
                    | (((value >> 7) & 0x7F) << 8)
                    | 0x8000
                    | ((value >> 14) << 16),
            );
        } else {
            return Err(EncodeError::VleOverflow(u64::from(value)));
        }
        Ok(())
    }

    /// Appends a VLE from a `usize` length or count.
    pub fn vle_len(&mut self, len: usize) -> Result<(), EncodeError> {
        let value = u32::try_from(len).map_err(|_| EncodeError::VleOverflow(len as u64))?;
        self.vle(value)
    }

    /// Appends an S8 string: u8 length + bytes (kNet stable `AddString`).
    /// The text is written as Latin-1 (see [`latin1_encode`]).
    pub fn s8(&mut self, text: &str) -> Result<(), EncodeError> {
        let bytes = latin1_encode(text);
        self.u8_len_bytes(&bytes, "S8 string")
    }

    /// Appends `u8 len` + raw bytes (generated kNet structs with a u8 count).
    pub fn u8_len_bytes(&mut self, bytes: &[u8], what: &'static str) -> Result<(), EncodeError> {
        let len = u8::try_from(bytes.len()).map_err(|_| EncodeError::TooLong {
            what,
            len: bytes.len(),
            limit: S8_MAX_BYTES,
        })?;
        self.u8(len);
        self.bytes(bytes);
        Ok(())
    }

    /// Appends a U16 string: u16 byte length + UTF-8 (`WriteUtf8String`).
    pub fn u16_string(&mut self, text: &str) -> Result<(), EncodeError> {
        let len = u16::try_from(text.len()).map_err(|_| EncodeError::TooLong {
            what: "U16 string",
            len: text.len(),
            limit: U16_STRING_MAX_BYTES,
        })?;
        self.u16(len);
        self.bytes(text.as_bytes());
        Ok(())
    }

    /// Bits written so far (`BitsFilled`).
    pub fn bit_len(&self) -> usize {
        if self.bit == 0 {
            self.buf.len() * 8
        } else {
            (self.buf.len() - 1) * 8 + self.bit as usize
        }
    }

    /// Bytes written so far, a partial last byte counted (`BytesFilled`).
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// The stream, zero-padded to a whole byte.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a kNet bit stream; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: usize,
}

impl<'a> BitReader<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0 }
    }

    /// Bits not yet read (`BitsLeft`).
    pub fn bits_left(&self) -> usize {
        self.data.len() * 8 - self.pos
    }

    /// Bytes not yet fully read; a partly read byte counts (`BytesLeft`).
    pub fn bytes_left(&self) -> usize {
        self.data.len() - self.pos / 8
    }

    /// Position in bits.
    pub fn bit_pos(&self) -> usize {
        self.pos
    }

    fn need(&self, bits: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.bits_left() < bits {
            Err(DecodeError::truncated(what, bits, self.bits_left()))
        } else {
            Ok(())
        }
    }

    /// Reads `n` (<= 32) bits, bit 0 first (`ReadBits`).
    pub fn bits(&mut self, n: u32, what: &'static str) -> Result<u32, DecodeError> {
        debug_assert!(n <= 32);
        self.need(n as usize, what)?;
        let mut value: u64 = 0;
        let mut got = 0u32;
        while got < n {
            let byte = self.data[self.pos / 8];
            let offset = (self.pos % 8) as u32;
            let take = (8 - offset).min(n - got);
            let chunk = (u64::from(byte) >> offset) & ((1u64 << take) - 1);
            value |= chunk << got;
            got += take;
            self.pos += take as usize;
        }
        Ok(value as u32)
    }

    /// Reads one bit.
    pub fn bit(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.bits(1, what)? != 0)
    }

    /// Reads a byte at the current bit offset.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        if self.pos % 8 == 0 {
            self.need(8, what)?;
            let b = self.data[self.pos / 8];
            self.pos += 8;
            Ok(b)
        } else {
            Ok(self.bits(8, what)? as u8)
        }
    }

    /// Reads `n` bytes at the current bit offset; borrowed when aligned.
    /// `n` is checked against the bits left before anything is allocated.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<Cow<'a, [u8]>, DecodeError> {
        let bits = n.checked_mul(8).ok_or(DecodeError::LimitExceeded {
            what,
            value: n,
            limit: self.bits_left() / 8,
        })?;
        self.need(bits, what)?;
        if self.pos % 8 == 0 {
            let start = self.pos / 8;
            self.pos += bits;
            Ok(Cow::Borrowed(&self.data[start..start + n]))
        } else {
            let mut out = vec![0u8; n];
            self.unaligned_into(&mut out);
            Ok(Cow::Owned(out))
        }
    }

    /// Fills `out` from a position that is not on a byte boundary, a whole
    /// byte per step (each output byte is the high bits of one input byte
    /// and the low bits of the next). The caller has checked with `need`
    /// that `out.len() * 8` bits remain, so the next byte exists; `get`
    /// keeps this total even so.
    fn unaligned_into(&mut self, out: &mut [u8]) {
        let offset = (self.pos % 8) as u32;
        for (index, slot) in (self.pos / 8..).zip(out.iter_mut()) {
            let low = self.data.get(index).map_or(0, |b| b >> offset);
            let high = self
                .data
                .get(index + 1)
                .map_or(0, |b| ((u32::from(*b) << (8 - offset)) & 0xff) as u8);
            *slot = low | high;
        }
        self.pos += out.len() * 8;
    }

    /// N bytes without allocating (floats and integers of attribute values
    /// sit at any bit offset inside an EditAttributes block).
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        self.need(N * 8, what)?;
        let mut out = [0u8; N];
        if self.pos % 8 == 0 {
            let start = self.pos / 8;
            out.copy_from_slice(&self.data[start..start + N]);
            self.pos += N * 8;
        } else {
            self.unaligned_into(&mut out);
        }
        Ok(out)
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian s32.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// Reads a raw IEEE-754 single.
    pub fn f32(&mut self, what: &'static str) -> Result<f32, DecodeError> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    /// Reads a VLE8_16_32 (§1.2). Non-canonical encodings are accepted
    /// (`81 80 00 00` is 1), as kNet accepts them.
    pub fn vle(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b0 = u32::from(self.u8(what)?);
        if b0 & 0x80 == 0 {
            return Ok(b0);
        }
        let b1 = u32::from(self.u8(what)?);
        if b1 & 0x80 == 0 {
            return Ok((b0 & 0x7F) | (b1 << 7));
        }
        let hi = u32::from(self.u16(what)?);
        Ok((b0 & 0x7F) | ((b1 & 0x7F) << 7) | (hi << 14))
    }

    /// Reads an S8 string (u8 length + bytes), decoded as Latin-1 so every
    /// byte survives a round trip.
    pub fn s8(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = usize::from(self.u8(what)?);
        let bytes = self.bytes(len, what)?;
        Ok(latin1_decode(&bytes))
    }

    /// Reads a U16 string (u16 length + UTF-8). Invalid UTF-8 is replaced
    /// as Qt's `QString::fromUtf8` does.
    pub fn u16_string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = usize::from(self.u16(what)?);
        let bytes = self.bytes(len, what)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The remaining whole bytes at the current position if it is byte
    /// aligned (used to keep unread tails byte for byte).
    pub fn rest_aligned(&mut self) -> Option<&'a [u8]> {
        if self.pos % 8 != 0 {
            return None;
        }
        let start = self.pos / 8;
        self.pos = self.data.len() * 8;
        Some(&self.data[start..])
    }
}

/// Bytes → text, one char per byte (ISO 8859-1). S8 strings are 8-bit text
/// on the wire (§1.3, seed "ASCII / LATIN1"); this mapping keeps every byte.
pub fn latin1_decode(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// Text → Latin-1 bytes; characters above U+00FF become '?', as Qt's
/// `QString::toLatin1` does.
pub fn latin1_encode(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vle_bytes(v: u32) -> Vec<u8> {
        let mut w = BitWriter::new();
        w.vle(v).unwrap();
        w.finish()
    }

    #[test]
    fn vle_table_of_reference_1_2() {
        let table: &[(u32, &str)] = &[
            (0, "00"),
            (127, "7f"),
            (128, "8001"),
            (255, "ff01"),
            (300, "ac02"),
            (16383, "ff7f"),
            (16384, "80800100"),
            (65535, "ffff0300"),
            (100000, "a08d0600"),
            (0x3FFF_FFFF, "ffffffff"),
        ];
        for &(value, hex_bytes) in table {
            assert_eq!(hex::encode(vle_bytes(value)), hex_bytes, "encode {value}");
            let bytes = hex::decode(hex_bytes).unwrap();
            let mut r = BitReader::new(&bytes);
            assert_eq!(r.vle("v").unwrap(), value, "decode {hex_bytes}");
            assert_eq!(r.bits_left(), 0);
        }
    }

    #[test]
    fn vle_rejects_values_above_30_bits() {
        let mut w = BitWriter::new();
        assert_eq!(
            w.vle(0x4000_0000),
            Err(EncodeError::VleOverflow(0x4000_0000))
        );
    }

    #[test]
    fn vle_accepts_non_canonical_and_reports_short_input() {
        let mut r = BitReader::new(&[0x81, 0x80, 0x00, 0x00]);
        assert_eq!(r.vle("v").unwrap(), 1);
        let mut r = BitReader::new(&[0x81, 0x80, 0x00]);
        assert!(matches!(r.vle("v"), Err(DecodeError::Truncated { .. })));
        let mut r = BitReader::new(&[0x80]);
        assert!(r.vle("v").is_err());
    }

    #[test]
    fn vle_after_one_bit_is_shifted() {
        // Reference §1.2: bit(1) then VLE(300) -> 59 05 00.
        let mut w = BitWriter::new();
        w.bit(true);
        w.vle(300).unwrap();
        let bytes = w.finish();
        assert_eq!(hex::encode(&bytes), "590500");
        let mut r = BitReader::new(&bytes);
        assert!(r.bit("b").unwrap());
        assert_eq!(r.vle("v").unwrap(), 300);
        assert_eq!(r.bits_left(), 7);
        assert_eq!(r.bytes_left(), 1);
    }

    #[test]
    fn bits_are_lsb_first_and_padding_is_zero() {
        let mut w = BitWriter::new();
        w.bits(0b101, 3);
        w.bits(0x1FF, 9);
        assert_eq!(w.bit_len(), 12);
        let bytes = w.finish();
        // 101 | 111111111 -> byte0 = 11111_101, byte1 = 0000_1111
        assert_eq!(bytes, vec![0xFD, 0x0F]);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.bits(3, "a").unwrap(), 0b101);
        assert_eq!(r.bits(9, "b").unwrap(), 0x1FF);
        assert_eq!(r.bits(4, "pad").unwrap(), 0);
        assert!(r.bits(1, "end").is_err());
    }

    #[test]
    fn integers_and_floats_at_a_bit_offset() {
        let mut w = BitWriter::new();
        w.bits(0, 3);
        w.u16(0xBEEF);
        w.u32(0x1234_5678);
        w.f32(-1.5);
        let bytes = w.finish();
        assert_eq!(hex::encode(&bytes), "78f7c5b3a291000000fe05");
        let mut r = BitReader::new(&bytes);
        r.bits(3, "pad").unwrap();
        assert_eq!(r.u16("a").unwrap(), 0xBEEF);
        assert_eq!(r.u32("b").unwrap(), 0x1234_5678);
        assert_eq!(r.f32("c").unwrap(), -1.5);
    }

    #[test]
    fn strings_s8_and_u16() {
        let mut w = BitWriter::new();
        w.s8("ab").unwrap();
        w.u16_string("é").unwrap();
        let bytes = w.finish();
        assert_eq!(hex::encode(&bytes), "0261620200c3a9");
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.s8("s").unwrap(), "ab");
        assert_eq!(r.u16_string("u").unwrap(), "é");
        let long = "x".repeat(256);
        assert!(BitWriter::new().s8(&long).is_err());
    }

    #[test]
    fn latin1_keeps_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(latin1_encode(&latin1_decode(&all)), all);
        assert_eq!(latin1_encode("a\u{20AC}"), b"a?".to_vec());
    }

    #[test]
    fn byte_reads_never_overrun() {
        let mut r = BitReader::new(&[1, 2]);
        assert!(r.bytes(3, "x").is_err());
        assert!(r.bytes(usize::MAX, "x").is_err());
        assert_eq!(&*r.bytes(2, "x").unwrap(), &[1, 2]);
    }

    #[test]
    fn unaligned_bytes_and_arrays_match_bit_by_bit_reads() {
        let data = [0xa5u8, 0x3c, 0xff, 0x01, 0x80, 0x7e];
        for skip in 1..8u32 {
            let mut slow = BitReader::new(&data);
            let mut fast = BitReader::new(&data);
            slow.bits(skip, "skip").unwrap();
            fast.bits(skip, "skip").unwrap();
            let expected: Vec<u8> = (0..4).map(|_| slow.bits(8, "b").unwrap() as u8).collect();
            let got = fast.array::<4>("a").unwrap();
            assert_eq!(got.to_vec(), expected, "offset {skip}");
            let mut again = BitReader::new(&data);
            again.bits(skip, "skip").unwrap();
            assert_eq!(again.bytes(4, "b").unwrap().to_vec(), expected);
            assert_eq!(again.bit_pos(), skip as usize + 32);
        }
        let mut short = BitReader::new(&data[..2]);
        short.bits(3, "skip").unwrap();
        assert!(short.array::<2>("a").is_err());
    }
}
