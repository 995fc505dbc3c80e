//! The kNet bit stream (docs/tundra-wire.md §1.1-§1.3, kNet `DataSerializer` /
//! `DataDeserializer`): bits are packed LSB-first within each byte; every
//! multi-byte integer or float is its little-endian bytes appended one byte
//! at a time, so it works at any bit offset; the unused high bits of the last
//! byte are zero. VLE8_16_32 integers and the two string forms (S8: u8 length
//! + bytes; U16: u16 length + UTF-8) are built on top.
//!
//! Whatever the bit offset, reads and writes move a whole u64 (three floats:
//! a u128) shifted into place instead of one byte or bit at a time; the
//! property tests below hold every path to the bit-by-bit definition.
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

/// Spare bytes a window write appends before cutting back (a u128).
const WINDOW_SLACK: usize = 16;

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

    /// An empty stream with room for `bytes` bytes, for encoders that know
    /// (or can estimate) their size: no reallocation while writing. A
    /// window write needs up to 16 spare bytes, so that much is added.
    pub fn with_capacity(bytes: usize) -> Self {
        BitWriter {
            buf: Vec::with_capacity(bytes.saturating_add(WINDOW_SLACK)),
            bit: 0,
        }
    }

    /// Appends the low `n` bits of `value`, bit 0 first (`AppendBits`).
    pub fn bits(&mut self, value: u32, n: u32) {
        debug_assert!(n <= 32);
        let n = n.min(32);
        // `n` <= 32, so the mask and the shifted value fit a u64 window:
        // at most 7 + 32 bits from the start of the partial last byte.
        let value = u64::from(value) & ((1u64 << n) - 1);
        self.window(value, n);
    }

    /// Writes the low `n` (<= 57) bits of `value` at the current offset in
    /// one step: the low byte of the shifted window completes the partial
    /// last byte, the rest is appended whole. Bits of `value` above `n`
    /// must be zero (they would land in the padding).
    fn window(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 57);
        self.window128(u128::from(value), n);
    }

    /// As [`BitWriter::window`] for up to 121 bits (three floats at once).
    /// The copy is always a whole u128, cut back to the bytes written, so it
    /// stays a fixed-size store rather than a variable-length copy.
    fn window128(&mut self, value: u128, n: u32) {
        debug_assert!(n <= 121);
        let offset = self.bit;
        let end = offset + n;
        let shifted = value << offset;
        let partial = self.complete_last(shifted as u8);
        let len = self.buf.len();
        self.buf
            .extend_from_slice(&(shifted >> (8 * partial)).to_le_bytes());
        self.buf
            .truncate(len + (end as usize).div_ceil(8) - partial);
        self.bit = end & 7;
    }

    /// ORs `low` into the partial last byte, if there is one; returns 1 if
    /// there was (the window's first byte is then used up), else 0.
    fn complete_last(&mut self, low: u8) -> usize {
        if self.bit == 0 {
            return 0;
        }
        // A non-zero offset means the last byte is partial, so it exists.
        if let Some(last) = self.buf.last_mut() {
            *last |= low;
        }
        1
    }

    /// Appends one bit (`Add<bit>`).
    pub fn bit(&mut self, value: bool) {
        self.window(u64::from(value), 1);
    }

    /// Appends a byte at the current bit offset.
    pub fn u8(&mut self, value: u8) {
        if self.bit == 0 {
            self.buf.push(value);
        } else {
            self.window(u64::from(value), 8);
        }
    }

    /// Appends little-endian bytes at the current bit offset.
    pub fn bytes(&mut self, data: &[u8]) {
        let offset = self.bit;
        let Some((&last_in, _)) = data.split_last() else {
            return;
        };
        if offset == 0 {
            self.buf.extend_from_slice(data);
            return;
        }
        // Unaligned: the first byte's low bits complete the partial last
        // byte; every output byte after it is the high bits of one input
        // byte and the low bits of the next; the offset is unchanged. One
        // reservation, then a pass the compiler sees as exact-length.
        if let Some(last) = self.buf.last_mut() {
            *last |= data[0] << offset;
        }
        let back = 8 - offset;
        self.buf.reserve(data.len());
        self.buf.extend(
            data.iter()
                .zip(&data[1..])
                .map(|(&low, &high)| (low >> back) | (high << offset)),
        );
        self.buf.push(last_in >> back);
    }

    /// Appends a u16, little-endian.
    pub fn u16(&mut self, value: u16) {
        self.window(u64::from(value), 16);
    }

    /// Appends a u32, little-endian.
    pub fn u32(&mut self, value: u32) {
        self.window(u64::from(value), 32);
    }

    /// Appends an s32, little-endian two's complement.
    pub fn i32(&mut self, value: i32) {
        self.u32(value as u32);
    }

    /// Appends a raw IEEE-754 single, little-endian.
    pub fn f32(&mut self, value: f32) {
        self.u32(value.to_bits());
    }

    /// Appends raw IEEE-754 singles, little-endian, back to back (vectors,
    /// quaternions, transforms): three per window step.
    pub fn f32s(&mut self, values: &[f32]) {
        let mut triples = values.chunks_exact(3);
        for triple in &mut triples {
            let word = u128::from(triple[0].to_bits())
                | (u128::from(triple[1].to_bits()) << 32)
                | (u128::from(triple[2].to_bits()) << 64);
            self.window128(word, 96);
        }
        for &v in triples.remainder() {
            self.f32(v);
        }
    }

    /// Appends a VLE8_16_32 (§1.2): 1, 2 or 4 bytes.
    pub fn vle(&mut self, value: u32) -> Result<(), EncodeError> {
        let (word, bytes) = vle_word(value)?;
        self.window(u64::from(word), 8 * bytes as u32);
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

    /// Ends the current byte: the next write starts on a byte boundary
    /// (the unused high bits stay zero), as when a new stream starts. Used
    /// to put several whole-byte blocks back to back in one buffer.
    pub fn pad_to_byte(&mut self) {
        self.bit = 0;
    }

    /// Appends `n` zero bits (runs of unchanged-attribute flags).
    pub fn zeros(&mut self, mut n: usize) {
        while n > 0 {
            let step = n.min(32);
            self.window(0, step as u32);
            n -= step;
        }
    }

    /// The stream so far, zero-padded to a whole byte.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Empties the stream, keeping its allocation for the next one.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.bit = 0;
    }

    /// The stream, zero-padded to a whole byte.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// The VLE8_16_32 encoding of `value` (§1.2) as a little-endian word and
/// its length in bytes (1, 2 or 4).
fn vle_word(value: u32) -> Result<(u32, usize), EncodeError> {
    if value < 0x80 {
        Ok((value, 1))
    } else if value < 0x4000 {
        Ok(((value & 0x7F) | 0x80 | ((value & 0x3F80) << 1), 2))
    } else if value <= VLE_MAX {
        Ok((
            (value & 0x7F) | 0x80 | (((value >> 7) & 0x7F) << 8) | 0x8000 | ((value >> 14) << 16),
            4,
        ))
    } else {
        Err(EncodeError::VleOverflow(u64::from(value)))
    }
}

/// Bytes a VLE8_16_32 of `value` takes (1, 2 or 4), for sizing a frame
/// before writing it; values above [`VLE_MAX`] are refused when written.
pub fn vle_size(value: u32) -> usize {
    vle_word(value).map_or(4, |(_, bytes)| bytes)
}

/// Appends a VLE8_16_32 to byte-aligned output (a frame assembled from
/// whole parts), the bytes [`BitWriter::vle`] writes at offset 0.
pub fn push_vle(out: &mut Vec<u8>, value: u32) -> Result<(), EncodeError> {
    // Fixed-size appends: no length-dependent copy, and never more than
    // the bytes written, so an exactly sized buffer is not outgrown.
    match vle_word(value)? {
        (word, 1) => out.push(word as u8),
        (word, 2) => out.extend_from_slice(&(word as u16).to_le_bytes()),
        (word, _) => out.extend_from_slice(&word.to_le_bytes()),
    }
    Ok(())
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

    /// The (up to) 8 bytes from the byte holding the read position, little
    /// endian; bytes past the end read as zero. One load when 8 bytes are
    /// there, which is every read but those near the end of a payload.
    fn peek_window(&self) -> u64 {
        let rest = self.data.get(self.pos / 8..).unwrap_or_default();
        match rest.first_chunk::<8>() {
            Some(chunk) => u64::from_le_bytes(*chunk),
            None => rest
                .iter()
                .rev()
                .fold(0, |word, &b| (word << 8) | u64::from(b)),
        }
    }

    /// As [`BitReader::peek_window`] with 16 bytes: three floats at any bit
    /// offset (96 + 7 bits) come from one window.
    fn peek_window128(&self) -> u128 {
        let rest = self.data.get(self.pos / 8..).unwrap_or_default();
        match rest.first_chunk::<16>() {
            Some(chunk) => u128::from_le_bytes(*chunk),
            None => rest
                .iter()
                .take(16)
                .rev()
                .fold(0, |word, &b| (word << 8) | u128::from(b)),
        }
    }

    /// Reads `n` (<= 32) bits, bit 0 first (`ReadBits`).
    pub fn bits(&mut self, n: u32, what: &'static str) -> Result<u32, DecodeError> {
        debug_assert!(n <= 32);
        let n = n.min(32);
        self.need(n as usize, what)?;
        // At most 7 + 32 bits from the window's first byte: one u64 holds
        // them; `need` has checked they are all inside `data`.
        let value = (self.peek_window() >> (self.pos % 8)) & ((1u64 << n) - 1);
        self.pos += n as usize;
        Ok(value as u32)
    }

    /// Reads one bit.
    pub fn bit(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.bits(1, what)? != 0)
    }

    /// Reads a byte at the current bit offset.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.bits(8, what)? as u8)
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
        let start = self.pos / 8;
        if self.pos % 8 == 0 {
            self.pos += bits;
            Ok(Cow::Borrowed(
                self.data.get(start..start + n).unwrap_or_default(),
            ))
        } else {
            let mut out = vec![0u8; n];
            self.unaligned_into(&mut out);
            Ok(Cow::Owned(out))
        }
    }

    /// Fills `out` from a position that is not on a byte boundary (each
    /// output byte is the high bits of one input byte and the low bits of
    /// the next). The caller has checked with `need` that `out.len() * 8`
    /// bits remain, so the `out.len() + 1` input bytes touched exist; the
    /// slice is taken with `get` so this stays total even so.
    fn unaligned_into(&mut self, out: &mut [u8]) {
        let offset = (self.pos % 8) as u32;
        let start = self.pos / 8;
        let input = self
            .data
            .get(start..start + out.len() + 1)
            .unwrap_or_default();
        for ((slot, &low), &high) in out.iter_mut().zip(input).zip(input.iter().skip(1)) {
            *slot = (low >> offset) | (high << (8 - offset));
        }
        self.pos += out.len() * 8;
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(self.bits(16, what)? as u16)
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.bits(32, what)
    }

    /// Reads a little-endian s32.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(self.bits(32, what)? as i32)
    }

    /// Reads a raw IEEE-754 single.
    pub fn f32(&mut self, what: &'static str) -> Result<f32, DecodeError> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    /// Reads `N` raw IEEE-754 singles back to back, all or none: the bits
    /// for all of them are checked once, then every three come from one
    /// window read.
    pub fn f32s<const N: usize>(&mut self, what: &'static str) -> Result<[f32; N], DecodeError> {
        self.need(N * 32, what)?;
        let mut out = [0f32; N];
        for triple in out.chunks_mut(3) {
            let word = self.peek_window128() >> (self.pos % 8);
            for (i, slot) in triple.iter_mut().enumerate() {
                *slot = f32::from_bits((word >> (32 * i)) as u32);
            }
            self.pos += 32 * triple.len();
        }
        Ok(out)
    }

    /// Reads a VLE8_16_32 (§1.2). Non-canonical encodings are accepted
    /// (`81 80 00 00` is 1), as kNet accepts them.
    ///
    /// All of it comes from one window read; when the input is too short
    /// the byte-by-byte reader below gives the position and error.
    pub fn vle(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let word = self.peek_window() >> (self.pos % 8);
        let b0 = (word & 0xFF) as u32;
        let b1 = ((word >> 8) & 0xFF) as u32;
        let (value, bits) = if b0 & 0x80 == 0 {
            (b0, 8)
        } else if b1 & 0x80 == 0 {
            ((b0 & 0x7F) | (b1 << 7), 16)
        } else {
            let hi = ((word >> 16) & 0xFFFF) as u32;
            ((b0 & 0x7F) | ((b1 & 0x7F) << 7) | (hi << 14), 32)
        };
        // Bytes past the end read as zero above, so a continuation bit
        // there says "shorter": the length is then at most what is needed.
        if self.bits_left() >= bits {
            self.pos += bits;
            return Ok(value);
        }
        self.vle_short(what)
    }

    /// The VLE read as kNet does it, byte, byte, u16, for input that ends
    /// inside it: the error says which part was missing.
    #[cold]
    fn vle_short(&mut self, what: &'static str) -> Result<u32, DecodeError> {
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
/// on the wire (docs/tundra-wire.md §1.3); this mapping keeps every byte.
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
            let mut pushed = Vec::new();
            push_vle(&mut pushed, value).unwrap();
            assert_eq!(hex::encode(&pushed), hex_bytes, "push {value}");
            assert_eq!(vle_size(value), pushed.len());
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
        assert_eq!(w.byte_len(), 0);
        assert_eq!(
            push_vle(&mut Vec::new(), 0x4000_0000),
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
        // docs/tundra-wire.md §1.2: bit(1) then VLE(300) -> 59 05 00.
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
    fn unaligned_bytes_and_words_match_bit_by_bit_reads() {
        let data = [0xa5u8, 0x3c, 0xff, 0x01, 0x80, 0x7e];
        for skip in 1..8u32 {
            let mut slow = BitReader::new(&data);
            let mut fast = BitReader::new(&data);
            slow.bits(skip, "skip").unwrap();
            fast.bits(skip, "skip").unwrap();
            let expected: Vec<u8> = (0..4).map(|_| slow.bits(8, "b").unwrap() as u8).collect();
            let got = fast.u32("a").unwrap().to_le_bytes();
            assert_eq!(got.to_vec(), expected, "offset {skip}");
            let mut again = BitReader::new(&data);
            again.bits(skip, "skip").unwrap();
            assert_eq!(again.bytes(4, "b").unwrap().to_vec(), expected);
            assert_eq!(again.bit_pos(), skip as usize + 32);
        }
        let mut short = BitReader::new(&data[..2]);
        short.bits(3, "skip").unwrap();
        assert!(short.u16("a").is_err());
    }
}
