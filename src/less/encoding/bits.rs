//! The bit packer of the compact encodings (docs/less-wire.md §16):
//! fields are written least significant bit first into bytes filled from
//! bit 0 up, and the value is padded with zero bits to a whole byte.
//!
//! Owns only bit order and bounds; what the fields mean is the encodings'.

use crate::less::codec::DecodeError;

/// Appends fields of 1..=64 bits.
#[derive(Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    /// Bits not yet a whole byte, in the low `pending` bits.
    partial: u64,
    /// 0..=7.
    pending: u32,
}

impl BitWriter {
    /// An empty writer.
    pub fn new() -> BitWriter {
        BitWriter::default()
    }

    /// A writer appending to `bytes` (a value encoded straight into a
    /// message under construction, without a buffer of its own).
    pub fn continuing(bytes: Vec<u8>) -> BitWriter {
        BitWriter {
            bytes,
            partial: 0,
            pending: 0,
        }
    }

    /// Appends the low `count` (at most 64) bits of `value`, least
    /// significant first: the field joins the pending bits in a 128-bit
    /// window and every whole byte of it is appended at once.
    pub fn write(&mut self, value: u64, count: u32) {
        let count = count.min(64);
        let field = if count == 64 {
            value
        } else {
            value & ((1u64 << count) - 1)
        };
        let window = u128::from(self.partial) | (u128::from(field) << self.pending);
        let bits = self.pending + count;
        let whole = (bits / 8) as usize;
        self.bytes.extend_from_slice(&window.to_le_bytes()[..whole]);
        // At most 7 bits remain.
        self.partial = (window >> (whole * 8)) as u64;
        self.pending = bits % 8;
    }

    /// Appends an `f32` as its 32 IEEE 754 bits.
    pub fn write_f32(&mut self, value: f32) {
        self.write(u64::from(value.to_bits()), 32);
    }

    /// The bytes, the last one padded with zero bits.
    pub fn finish(mut self) -> Vec<u8> {
        if self.pending > 0 {
            self.bytes.push(self.partial as u8);
        }
        self.bytes
    }
}

/// Reads fields from a byte slice whose length the caller already checked.
#[derive(Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    bit: usize,
}

impl<'a> BitReader<'a> {
    /// Reads from the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> BitReader<'a> {
        BitReader { bytes, bit: 0 }
    }

    /// Reads `count` (at most 64) bits through a 128-bit window of the
    /// bytes that hold them.
    pub fn read(&mut self, count: u32) -> Result<u64, DecodeError> {
        let count = count.min(64);
        let end = self.bit + count as usize;
        if end > self.bytes.len() * 8 {
            return Err(DecodeError::Truncated);
        }
        let first = self.bit / 8;
        let window = match self.bytes.get(first..first + 16) {
            Some(bytes) => {
                let mut window = [0u8; 16];
                window.copy_from_slice(bytes);
                window
            }
            // Near the end: the bytes left, zero-padded.
            None => {
                let mut window = [0u8; 16];
                let rest = &self.bytes[first..];
                window[..rest.len()].copy_from_slice(rest);
                window
            }
        };
        let value = (u128::from_le_bytes(window) >> (self.bit % 8)) as u64;
        self.bit = end;
        Ok(if count == 64 {
            value
        } else {
            value & ((1u64 << count) - 1)
        })
    }

    /// Reads 32 bits as an `f32`.
    pub fn read_f32(&mut self) -> Result<f32, DecodeError> {
        // read(32) yields at most 32 significant bits.
        Ok(f32::from_bits(self.read(32)? as u32))
    }

    /// Checks that only zero padding bits of the last byte are left:
    /// exactly one encoding per value, so equal values give equal bytes.
    pub fn expect_padding(&self) -> Result<(), DecodeError> {
        let total = self.bytes.len() * 8;
        if total < self.bit || total - self.bit >= 8 {
            return Err(DecodeError::Invalid(
                "encoded value length does not match its header",
            ));
        }
        let mut probe = BitReader {
            bytes: self.bytes,
            bit: self.bit,
        };
        // At most 7 bits remain (checked above).
        match probe.read((total - self.bit) as u32)? {
            0 => Ok(()),
            _ => Err(DecodeError::Invalid(
                "non-zero padding bits in an encoded value",
            )),
        }
    }
}

/// `x.round()` (half away from zero) as an integer, for |x| < 2^62: the
/// fraction `x - trunc(x)` is exact, so this needs neither the libm call
/// `round` compiles to on x86-64 without SSE4.1 nor `rem_euclid`'s fmod.
pub fn round_to_i64(x: f64) -> i64 {
    let truncated = x as i64;
    let fraction = x - truncated as f64;
    if fraction >= 0.5 {
        truncated + 1
    } else if fraction <= -0.5 {
        truncated - 1
    } else {
        truncated
    }
}

/// Bytes needed for `bits` bits.
pub fn bytes_for(bits: usize) -> usize {
    bits.div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_packed_least_significant_bit_first() {
        let mut w = BitWriter::new();
        w.write(0b101, 3);
        w.write(0x1ff, 9);
        let bytes = w.finish();
        assert_eq!(hex::encode(&bytes), "fd0f");
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read(3), Ok(0b101));
        assert_eq!(r.read(9), Ok(0x1ff));
        assert_eq!(r.expect_padding(), Ok(()));
        assert_eq!(r.read(4), Ok(0));
        assert_eq!(r.read(1), Err(DecodeError::Truncated));
    }

    #[test]
    fn wide_and_unaligned_fields_read_back() {
        let fields = [
            (1u64, 1u32),
            (0x2_abcd, 18),
            (u64::MAX, 64),
            (0, 7),
            (0x1234_5678_9abc, 47),
            (5, 3),
        ];
        let mut w = BitWriter::new();
        for (value, bits) in fields {
            w.write(value, bits);
        }
        let bytes = w.finish();
        assert_eq!(bytes.len(), bytes_for(1 + 18 + 64 + 7 + 47 + 3));
        let mut r = BitReader::new(&bytes);
        for (value, bits) in fields {
            assert_eq!(r.read(bits), Ok(value), "{bits}-bit field");
        }
        assert_eq!(r.expect_padding(), Ok(()));
        // Bits above `count` are not written.
        let mut w = BitWriter::new();
        w.write(0xff, 3);
        assert_eq!(w.finish(), [0x07]);
    }

    proptest::proptest! {
        #[test]
        fn integer_rounding_is_f64_round(x in -4.0e18f64..4.0e18, small in -2000.0f64..2000.0) {
            for v in [x, small, small.trunc() + 0.5, small.trunc() - 0.5] {
                proptest::prop_assert_eq!(round_to_i64(v), v.round() as i64, "{}", v);
            }
        }

        /// The windowed writer lays bits out exactly as writing them one
        /// at a time would, after any prefix already in the buffer.
        #[test]
        fn fields_land_where_single_bits_would(
            prefix in proptest::collection::vec(proptest::num::u8::ANY, 0..4),
            fields in proptest::collection::vec((proptest::num::u64::ANY, 0u32..=64), 0..12),
        ) {
            let mut w = BitWriter::continuing(prefix.clone());
            let mut expected = prefix.clone();
            let mut bit = 0usize;
            for &(value, count) in &fields {
                w.write(value, count);
                for i in 0..count {
                    if bit % 8 == 0 {
                        expected.push(0);
                    }
                    let last = expected.len() - 1;
                    expected[last] |= (((value >> i) & 1) as u8) << (bit % 8);
                    bit += 1;
                }
            }
            let bytes = w.finish();
            proptest::prop_assert_eq!(&bytes, &expected);
            let mut r = BitReader::new(&bytes[prefix.len()..]);
            for &(value, count) in &fields {
                let mask = if count == 64 { u64::MAX } else { (1u64 << count) - 1 };
                proptest::prop_assert_eq!(r.read(count), Ok(value & mask));
            }
        }
    }

    #[test]
    fn padding_must_be_zero_and_short() {
        let bytes = [0x81];
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read(1), Ok(1));
        assert!(r.expect_padding().is_err());
        let two = [0x01, 0x00];
        let mut r = BitReader::new(&two);
        assert_eq!(r.read(1), Ok(1));
        assert!(r.expect_padding().is_err());
    }
}
