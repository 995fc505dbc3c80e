//! Property tests of the kNet bit stream: every write and read of
//! [`BitWriter`] / [`BitReader`], at every bit offset and length, against
//! the bit-by-bit definition (docs/tundra-wire.md §1.1), truncation included.
//!
//! [`BitWriter`]: super::bits::BitWriter
//! [`BitReader`]: super::bits::BitReader

/// The definition the fast paths must match: bits one at a time,
/// LSB-first within each byte (docs/tundra-wire.md §1.1).
mod model {
    use crate::tundra::bits::{BitReader, BitWriter, VLE_MAX};
    use crate::tundra::error::DecodeError;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    pub enum Op {
        Bits(u32, u32),
        Bit(bool),
        U8(u8),
        U16(u16),
        U32(u32),
        I32(i32),
        F32(u32),
        F32s(Vec<u32>),
        Bytes(Vec<u8>),
        Vle(u32),
        Zeros(usize),
    }

    pub fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u32>(), 0u32..=32).prop_map(|(v, n)| Op::Bits(v, n)),
            any::<bool>().prop_map(Op::Bit),
            any::<u8>().prop_map(Op::U8),
            any::<u16>().prop_map(Op::U16),
            any::<u32>().prop_map(Op::U32),
            any::<i32>().prop_map(Op::I32),
            any::<u32>().prop_map(Op::F32),
            proptest::collection::vec(any::<u32>(), 0..10).prop_map(Op::F32s),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(Op::Bytes),
            prop_oneof![0u32..0x80, 0x80u32..0x4000, 0x4000u32..=VLE_MAX].prop_map(Op::Vle),
            (0usize..80).prop_map(Op::Zeros),
        ]
    }

    /// Appends the low `n` bits of `value`, one by one.
    fn push_bits(out: &mut Vec<bool>, value: u64, n: u32) {
        for i in 0..n {
            out.push((value >> i) & 1 == 1);
        }
    }

    fn push_bytes(out: &mut Vec<bool>, bytes: &[u8]) {
        for &b in bytes {
            push_bits(out, u64::from(b), 8);
        }
    }

    /// The bits an op appends, by the definition.
    pub fn model_write(out: &mut Vec<bool>, op: &Op) {
        match op {
            Op::Bits(v, n) => push_bits(out, u64::from(*v), *n),
            Op::Bit(b) => push_bits(out, u64::from(*b), 1),
            Op::U8(v) => push_bytes(out, &[*v]),
            Op::U16(v) => push_bytes(out, &v.to_le_bytes()),
            Op::U32(v) | Op::F32(v) => push_bytes(out, &v.to_le_bytes()),
            Op::I32(v) => push_bytes(out, &v.to_le_bytes()),
            Op::F32s(vs) => vs.iter().for_each(|v| push_bytes(out, &v.to_le_bytes())),
            Op::Bytes(bytes) => push_bytes(out, bytes),
            // The aligned VLE bytes are pinned by the §1.2 table test.
            Op::Vle(v) => {
                let mut w = BitWriter::new();
                w.vle(*v).unwrap();
                push_bytes(out, &w.finish());
            }
            Op::Zeros(n) => out.extend(std::iter::repeat(false).take(*n)),
        }
    }

    pub fn real_write(w: &mut BitWriter, op: &Op) {
        match op {
            Op::Bits(v, n) => w.bits(*v, *n),
            Op::Bit(b) => w.bit(*b),
            Op::U8(v) => w.u8(*v),
            Op::U16(v) => w.u16(*v),
            Op::U32(v) => w.u32(*v),
            Op::I32(v) => w.i32(*v),
            Op::F32(v) => w.f32(f32::from_bits(*v)),
            Op::F32s(vs) => {
                let floats: Vec<f32> = vs.iter().map(|v| f32::from_bits(*v)).collect();
                w.f32s(&floats)
            }
            Op::Bytes(bytes) => w.bytes(bytes),
            Op::Vle(v) => w.vle(*v).unwrap(),
            Op::Zeros(n) => w.zeros(*n),
        }
    }

    /// Packs bits LSB-first, the last byte zero-padded.
    pub fn pack(bits: &[bool]) -> Vec<u8> {
        let mut out = vec![0u8; bits.len().div_ceil(8)];
        for (i, &b) in bits.iter().enumerate() {
            out[i / 8] |= u8::from(b) << (i % 8);
        }
        out
    }

    /// `n` bits at bit `pos`, one at a time; `None` if they are not all there.
    pub fn model_bits(data: &[u8], pos: usize, n: usize) -> Option<u64> {
        if pos + n > data.len() * 8 {
            return None;
        }
        let mut value = 0u64;
        for i in 0..n {
            let at = pos + i;
            value |= u64::from((data[at / 8] >> (at % 8)) & 1) << i;
        }
        Some(value)
    }

    #[derive(Debug, Clone, Copy)]
    pub enum Read {
        Bits(u32),
        U8,
        U16,
        U32,
        I32,
        F32,
        F32x3,
        F32x4,
        F32x9,
        Bytes(usize),
        Vle,
    }

    pub fn read() -> impl Strategy<Value = Read> {
        prop_oneof![
            (0u32..=32).prop_map(Read::Bits),
            Just(Read::U8),
            Just(Read::U16),
            Just(Read::U32),
            Just(Read::I32),
            Just(Read::F32),
            Just(Read::F32x3),
            Just(Read::F32x4),
            Just(Read::F32x9),
            (0usize..12).prop_map(Read::Bytes),
            Just(Read::Vle),
        ]
    }

    /// A read's result as bytes (so floats compare bit for bit) and
    /// the position after it; `Err` holds the position after failing.
    pub fn model_read(data: &[u8], pos: usize, read: Read) -> Result<(Vec<u8>, usize), usize> {
        let word = |n: usize| model_bits(data, pos, n).ok_or(pos);
        let le = |v: u64, bytes: usize| v.to_le_bytes()[..bytes].to_vec();
        match read {
            Read::Bits(n) => Ok((le(word(n as usize)?, 4), pos + n as usize)),
            Read::U8 => Ok((le(word(8)?, 1), pos + 8)),
            Read::U16 => Ok((le(word(16)?, 2), pos + 16)),
            Read::U32 | Read::I32 | Read::F32 => Ok((le(word(32)?, 4), pos + 32)),
            Read::F32x3 | Read::F32x4 | Read::F32x9 => {
                let n = match read {
                    Read::F32x3 => 3,
                    Read::F32x4 => 4,
                    _ => 9,
                };
                let mut out = Vec::new();
                for i in 0..n {
                    out.extend(le(model_bits(data, pos + 32 * i, 32).ok_or(pos)?, 4));
                }
                // All or none: a short last float fails the whole read.
                Ok((out, pos + 32 * n))
            }
            Read::Bytes(n) => {
                let mut out = Vec::new();
                for i in 0..n {
                    out.push(model_bits(data, pos + 8 * i, 8).ok_or(pos)? as u8);
                }
                Ok((out, pos + 8 * n))
            }
            Read::Vle => {
                let b0 = model_bits(data, pos, 8).ok_or(pos)? as u32;
                if b0 & 0x80 == 0 {
                    return Ok((b0.to_le_bytes().to_vec(), pos + 8));
                }
                let b1 = model_bits(data, pos + 8, 8).ok_or(pos + 8)? as u32;
                if b1 & 0x80 == 0 {
                    return Ok((((b0 & 0x7F) | (b1 << 7)).to_le_bytes().to_vec(), pos + 16));
                }
                let hi = model_bits(data, pos + 16, 16).ok_or(pos + 16)? as u32;
                let v = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (hi << 14);
                Ok((v.to_le_bytes().to_vec(), pos + 32))
            }
        }
    }

    fn floats(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|f| f.to_bits().to_le_bytes())
            .collect()
    }

    pub fn real_read(r: &mut BitReader<'_>, read: Read) -> Result<Vec<u8>, DecodeError> {
        Ok(match read {
            Read::Bits(n) => r.bits(n, "t")?.to_le_bytes().to_vec(),
            Read::U8 => vec![r.u8("t")?],
            Read::U16 => r.u16("t")?.to_le_bytes().to_vec(),
            Read::U32 => r.u32("t")?.to_le_bytes().to_vec(),
            Read::I32 => r.i32("t")?.to_le_bytes().to_vec(),
            Read::F32 => r.f32("t")?.to_bits().to_le_bytes().to_vec(),
            Read::F32x3 => floats(&r.f32s::<3>("t")?),
            Read::F32x4 => floats(&r.f32s::<4>("t")?),
            Read::F32x9 => floats(&r.f32s::<9>("t")?),
            Read::Bytes(n) => r.bytes(n, "t")?.into_owned(),
            Read::Vle => r.vle("t")?.to_le_bytes().to_vec(),
        })
    }
}

mod properties {
    use super::model::*;
    use crate::tundra::bits::{BitReader, BitWriter};
    use crate::tundra::error::DecodeError;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any sequence of writes, from any starting bit offset, gives
        /// the bytes of the bit-by-bit definition, with bit and byte
        /// counts to match.
        #[test]
        fn writes_equal_the_bit_by_bit_definition(
            lead in 0u32..16,
            ops in proptest::collection::vec(op(), 0..12),
        ) {
            let mut w = BitWriter::new();
            let mut model = Vec::new();
            w.bits(0x5A5A, lead);
            model_write(&mut model, &Op::Bits(0x5A5A, lead));
            for op in &ops {
                real_write(&mut w, op);
                model_write(&mut model, op);
                prop_assert_eq!(w.bit_len(), model.len());
                prop_assert_eq!(w.byte_len(), model.len().div_ceil(8));
            }
            prop_assert_eq!(w.finish(), pack(&model));
        }

        /// Every read at every offset of every input equals the
        /// bit-by-bit definition: the same value and position, or a
        /// truncation error exactly when the bits are not there.
        #[test]
        fn reads_equal_the_bit_by_bit_definition(
            data in proptest::collection::vec(any::<u8>(), 0..48),
            skip in any::<prop::sample::Index>(),
            reads in proptest::collection::vec(read(), 1..6),
        ) {
            let total = data.len() * 8;
            let start = skip.index(total + 1);
            let mut r = BitReader::new(&data);
            let mut at = 0;
            while at < start {
                let n = (start - at).min(32) as u32;
                r.bits(n, "skip").unwrap();
                at += n as usize;
            }
            for read in reads {
                let before = r.bit_pos();
                let expected = model_read(&data, before, read);
                let got = real_read(&mut r, read);
                match (expected, got) {
                    (Ok((value, after)), Ok(got)) => {
                        prop_assert_eq!(got, value, "{:?} at {}", read, before);
                        prop_assert_eq!(r.bit_pos(), after);
                    }
                    (Err(after), Err(DecodeError::Truncated { .. })) => {
                        prop_assert_eq!(r.bit_pos(), after, "{:?} at {}", read, before);
                        break;
                    }
                    (expected, got) => {
                        prop_assert!(false, "{:?} at {}: model {:?}, got {:?}", read, before, expected, got);
                    }
                }
                prop_assert_eq!(r.bits_left(), total - r.bit_pos());
            }
        }

        /// Padding to a byte boundary gives the bytes of the two parts
        /// written as separate streams, back to back.
        #[test]
        fn padded_parts_are_separate_streams_back_to_back(
            first in proptest::collection::vec(op(), 0..6),
            second in proptest::collection::vec(op(), 0..6),
        ) {
            let mut joined = BitWriter::new();
            let mut apart = Vec::new();
            for part in [&first, &second] {
                let mut alone = BitWriter::new();
                for op in part {
                    real_write(&mut joined, op);
                    real_write(&mut alone, op);
                }
                joined.pad_to_byte();
                apart.extend(alone.finish());
            }
            prop_assert_eq!(joined.as_bytes(), &apart[..]);
            prop_assert_eq!(joined.bit_len(), apart.len() * 8);
        }

        /// What any sequence of writes produced reads back the same at
        /// every offset, and the padding after it is zero.
        #[test]
        fn writes_read_back(
            lead in 0u32..8,
            ops in proptest::collection::vec(op(), 0..12),
        ) {
            let mut w = BitWriter::new();
            w.bits(0, lead);
            for op in &ops {
                real_write(&mut w, op);
            }
            let bits = w.bit_len();
            let bytes = w.finish();
            let mut r = BitReader::new(&bytes);
            r.bits(lead, "lead").unwrap();
            for op in &ops {
                match op {
                    Op::Bits(v, n) => {
                        let mask = if *n == 32 { u32::MAX } else { (1u32 << n) - 1 };
                        prop_assert_eq!(r.bits(*n, "t").unwrap(), v & mask);
                    }
                    Op::Bit(b) => prop_assert_eq!(r.bit("t").unwrap(), *b),
                    Op::U8(v) => prop_assert_eq!(r.u8("t").unwrap(), *v),
                    Op::U16(v) => prop_assert_eq!(r.u16("t").unwrap(), *v),
                    Op::U32(v) => prop_assert_eq!(r.u32("t").unwrap(), *v),
                    Op::I32(v) => prop_assert_eq!(r.i32("t").unwrap(), *v),
                    Op::F32(v) => prop_assert_eq!(r.f32("t").unwrap().to_bits(), *v),
                    Op::F32s(vs) => {
                        for v in vs {
                            prop_assert_eq!(r.f32("t").unwrap().to_bits(), *v);
                        }
                    }
                    Op::Bytes(b) => prop_assert_eq!(&*r.bytes(b.len(), "t").unwrap(), &b[..]),
                    Op::Vle(v) => prop_assert_eq!(r.vle("t").unwrap(), *v),
                    Op::Zeros(n) => {
                        for _ in 0..*n {
                            prop_assert!(!r.bit("t").unwrap());
                        }
                    }
                }
            }
            prop_assert_eq!(r.bit_pos(), bits);
            prop_assert_eq!(r.bits(r.bits_left().min(32) as u32, "pad").unwrap(), 0);
        }
    }
}
