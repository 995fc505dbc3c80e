//! Byte-aligned little-endian reads and the three VLE forms of the kNet
//! transport headers (docs/knet-wire.md §1), plus their writers.
//!
//! The reader is total: every read checks the bytes left and returns a
//! [`KnetError`] instead of kNet's `VLEReadError` sentinel (0xFFFFFFFF) or an
//! out-of-bounds read. It allocates nothing. VLE8_16_32 encoding reuses the
//! Tundra bit stream's byte-aligned writer (`tundra::bits::push_vle`), which
//! produces the same bytes. This module knows nothing of datagrams or
//! messages.

use super::error::KnetError;
use crate::tundra::bits::{push_vle, vle_size};

/// Largest VLE8_16_32 value (`VLEType3<7,7,16>`, §1): 2^30-1.
pub const VLE8_16_32_MAX: u32 = 0x3FFF_FFFF;
/// Largest VLE8_16 value (`VLEType2<7,8>`, §1): 2^15-1.
pub const VLE8_16_MAX: u32 = 0x7FFF;
/// Largest VLE16_32 value (`VLEType2<15,16>`, §1): 2^31-1.
pub const VLE16_32_MAX: u32 = 0x7FFF_FFFF;

/// A cursor over bytes: byte-aligned, little-endian, every read checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Reads `n` bytes; `what` names the field in the error.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], KnetError> {
        if n > self.data.len() {
            return Err(KnetError::Truncated { what });
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// Reads a fixed-size array.
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], KnetError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    /// Reads a u8.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, KnetError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, KnetError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, KnetError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Everything not read yet; the reader is then empty.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    /// Reads a VLE8_16_32 (1, 2 or 4 bytes, §1). Non-canonical encodings are
    /// accepted, as kNet accepts them; input ending inside it is an error.
    pub fn vle8_16_32(&mut self, what: &'static str) -> Result<u32, KnetError> {
        let bad = |_| KnetError::BadVle { what };
        let b0 = u32::from(self.u8(what).map_err(bad)?);
        if b0 & 0x80 == 0 {
            return Ok(b0);
        }
        let b1 = u32::from(self.u8(what).map_err(bad)?);
        if b1 & 0x80 == 0 {
            return Ok((b0 & 0x7F) | (b1 << 7));
        }
        let high = u32::from(self.u16(what).map_err(bad)?);
        Ok((b0 & 0x7F) | ((b1 & 0x7F) << 7) | (high << 14))
    }

    /// Reads a VLE8_16 (1 or 2 bytes, §1).
    pub fn vle8_16(&mut self, what: &'static str) -> Result<u32, KnetError> {
        let bad = |_| KnetError::BadVle { what };
        let b0 = u32::from(self.u8(what).map_err(bad)?);
        if b0 & 0x80 == 0 {
            return Ok(b0);
        }
        let b1 = u32::from(self.u8(what).map_err(bad)?);
        Ok((b0 & 0x7F) | (b1 << 7))
    }

    /// Reads a VLE16_32 (2 or 4 bytes, §1).
    pub fn vle16_32(&mut self, what: &'static str) -> Result<u32, KnetError> {
        let bad = |_| KnetError::BadVle { what };
        let low = u32::from(self.u16(what).map_err(bad)?);
        if low & 0x8000 == 0 {
            return Ok(low);
        }
        let high = u32::from(self.u16(what).map_err(bad)?);
        Ok((low & 0x7FFF) | (high << 15))
    }
}

/// Appends a VLE8_16_32. `v` must be at most [`VLE8_16_32_MAX`]: callers
/// check (a larger value is clamped so the length stays what
/// [`vle8_16_32_len`] says).
pub fn put_vle8_16_32(out: &mut Vec<u8>, v: u32) {
    debug_assert!(v <= VLE8_16_32_MAX, "VLE8_16_32 value {v:#x}");
    // Cannot fail: the value is clamped into range first.
    let _ = push_vle(out, v.min(VLE8_16_32_MAX));
}

/// Appends a VLE8_16. `v` must be at most [`VLE8_16_MAX`] (callers check;
/// higher bits are dropped).
pub fn put_vle8_16(out: &mut Vec<u8>, v: u32) {
    debug_assert!(v <= VLE8_16_MAX, "VLE8_16 value {v:#x}");
    if v < 0x80 {
        out.push(v as u8);
    } else {
        out.extend_from_slice(&[0x80 | (v & 0x7F) as u8, ((v >> 7) & 0xFF) as u8]);
    }
}

/// Appends a VLE16_32. `v` must be at most [`VLE16_32_MAX`] (callers check;
/// the top bit is dropped).
pub fn put_vle16_32(out: &mut Vec<u8>, v: u32) {
    debug_assert!(v <= VLE16_32_MAX, "VLE16_32 value {v:#x}");
    if v < 0x8000 {
        out.extend_from_slice(&(v as u16).to_le_bytes());
    } else {
        let word = (v & 0x7FFF) | 0x8000 | ((v >> 15) << 16);
        out.extend_from_slice(&word.to_le_bytes());
    }
}

/// Bytes a VLE8_16_32 of `v` takes: 1, 2 or 4.
pub fn vle8_16_32_len(v: u32) -> usize {
    vle_size(v)
}

/// Bytes a VLE8_16 of `v` takes: 1 or 2.
pub fn vle8_16_len(v: u32) -> usize {
    if v < 0x80 {
        1
    } else {
        2
    }
}

/// Bytes a VLE16_32 of `v` takes: 2 or 4.
pub fn vle16_32_len(v: u32) -> usize {
    if v < 0x8000 {
        2
    } else {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(put: fn(&mut Vec<u8>, u32), v: u32) -> String {
        let mut out = Vec::new();
        put(&mut out, v);
        hex::encode(out)
    }

    #[test]
    fn vle_examples_of_section_1() {
        assert_eq!(encode(put_vle8_16, 200), "c801");
        assert_eq!(encode(put_vle16_32, 40000), "409c0100");
        // D6: a message id or content length of 16384.
        assert_eq!(encode(put_vle8_16_32, 16384), "80800100");
        assert_eq!(encode(put_vle8_16_32, 100), "64");
        assert_eq!(encode(put_vle8_16_32, 279), "9702");
        assert_eq!(encode(put_vle8_16_32, 0x3FFF_FFFF), "ffffffff");
        assert_eq!(encode(put_vle8_16, 0x7FFF), "ffff");
        assert_eq!(encode(put_vle16_32, 0x7FFF), "ff7f");
        assert_eq!(encode(put_vle16_32, 0x7FFF_FFFF), "ffffffff");
        assert_eq!(Reader::new(&[0xc8, 0x01]).vle8_16("d").unwrap(), 200);
        let mut r = Reader::new(&[0x40, 0x9c, 0x01, 0x00]);
        assert_eq!(r.vle16_32("b").unwrap(), 40000);
        assert!(r.is_empty());
        assert_eq!(
            Reader::new(&[0x80, 0x80, 1, 0]).vle8_16_32("id").unwrap(),
            16384
        );
        // For 32768..65535 the first two bytes equal the plain u16 (§1).
        assert_eq!(&encode(put_vle16_32, 0x9000)[..4], "0090");
    }

    #[test]
    fn every_form_round_trips_at_its_boundaries() {
        for v in [
            0,
            1,
            0x7F,
            0x80,
            0x3FFF,
            0x4000,
            0xFFFF,
            0x1_0000,
            VLE8_16_32_MAX,
        ] {
            let mut out = Vec::new();
            put_vle8_16_32(&mut out, v);
            assert_eq!(out.len(), vle8_16_32_len(v), "{v:#x}");
            let mut r = Reader::new(&out);
            assert_eq!(r.vle8_16_32("v").unwrap(), v);
            assert!(r.is_empty());
        }
        for v in [0, 0x7F, 0x80, 0x1234, VLE8_16_MAX] {
            let mut out = Vec::new();
            put_vle8_16(&mut out, v);
            assert_eq!(out.len(), vle8_16_len(v));
            assert_eq!(Reader::new(&out).vle8_16("v").unwrap(), v);
        }
        for v in [0, 0x7FFF, 0x8000, 0xFFFF, 0x12_3456, VLE16_32_MAX] {
            let mut out = Vec::new();
            put_vle16_32(&mut out, v);
            assert_eq!(out.len(), vle16_32_len(v));
            assert_eq!(Reader::new(&out).vle16_32("v").unwrap(), v);
        }
    }

    #[test]
    fn short_input_is_an_error_not_a_sentinel() {
        let bad = Err(KnetError::BadVle { what: "x" });
        assert_eq!(Reader::new(&[]).vle8_16_32("x"), bad);
        assert_eq!(Reader::new(&[0x80]).vle8_16_32("x"), bad);
        assert_eq!(Reader::new(&[0x80, 0x80, 0x01]).vle8_16_32("x"), bad);
        assert_eq!(Reader::new(&[0x80]).vle8_16("x"), bad);
        assert_eq!(Reader::new(&[0x00, 0x80, 0x01]).vle16_32("x"), bad);
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16("a").unwrap(), 0x0201);
        assert_eq!(r.u16("b"), Err(KnetError::Truncated { what: "b" }));
        assert_eq!(r.remaining(), 1, "a failed read consumes nothing");
        assert_eq!(r.bytes(2, "c"), Err(KnetError::Truncated { what: "c" }));
        assert_eq!(r.rest(), &[3]);
        assert!(r.is_empty());
    }

    #[test]
    fn fixed_reads_are_little_endian() {
        let mut r = Reader::new(&[0x78, 0x56, 0x34, 0x12, 0xAB]);
        assert_eq!(r.u32("w").unwrap(), 0x1234_5678);
        assert_eq!(r.u8("b").unwrap(), 0xAB);
        assert_eq!(r.u8("c"), Err(KnetError::Truncated { what: "c" }));
    }
}
