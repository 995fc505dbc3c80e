//! `fixed-point-position/1` and `float3-half/1`: three-float vectors
//! (VECTOR(3, FLOAT32)) in fewer bits (docs/less-wire.md §16.3).
//!
//! Fixed point: step 2^-8 (1/256), 18 bits per coordinate, so each
//! coordinate c with round(c * 256) in [-2^17, 2^17 - 1] (about ±512) is
//! carried with an error of at most 1/512. A vector with any coordinate
//! outside that range, or not finite, goes as three plain `f32` behind a
//! flag bit: never clamped.

use super::bits::{round_to_i64, BitReader, BitWriter};
use crate::less::codec::DecodeError;

/// Bits per fixed-point coordinate.
pub const FIXED_BITS: u32 = 18;
/// Fraction bits: the step is 2^-8.
pub const FIXED_FRACTION_BITS: u32 = 8;
/// Largest error of a fixed-point coordinate: half a step.
pub const FIXED_MAX_ERROR: f32 = 1.0 / 512.0;
const FIXED_OFFSET: i64 = 1 << (FIXED_BITS - 1);
const FIXED_SCALE: f64 = (1u32 << FIXED_FRACTION_BITS) as f64;

/// The 18-bit code of a coordinate, or `None` if out of range or not finite.
fn fixed_code(c: f32) -> Option<u64> {
    let scaled = f64::from(c) * FIXED_SCALE;
    // Far outside the range, or not a number.
    if scaled.is_nan() || scaled.abs() >= FIXED_OFFSET as f64 + 1.0 {
        return None;
    }
    let rounded = round_to_i64(scaled);
    if !(-FIXED_OFFSET..FIXED_OFFSET).contains(&rounded) {
        return None;
    }
    // In range: 0 <= rounded + offset < 2^18.
    Some((rounded + FIXED_OFFSET) as u64)
}

/// The codes of three coordinates, if all have one.
pub fn fixed_codes(v: [f32; 3]) -> Option<[u64; 3]> {
    Some([fixed_code(v[0])?, fixed_code(v[1])?, fixed_code(v[2])?])
}

fn fixed_value(code: u64) -> f32 {
    // code < 2^18: exact in f64, and code/256 exact in f32 (18 significant bits).
    ((code as i64 - FIXED_OFFSET) as f64 / FIXED_SCALE) as f32
}

/// Whether every coordinate has a fixed-point code.
pub fn fits_fixed(v: [f32; 3]) -> bool {
    fixed_codes(v).is_some()
}

/// Writes three coordinates' codes ([`fixed_codes`]).
pub fn write_fixed(w: &mut BitWriter, codes: [u64; 3]) {
    // Three 18-bit fields in one 54-bit write.
    w.write(
        codes[0] | codes[1] << FIXED_BITS | codes[2] << (2 * FIXED_BITS),
        3 * FIXED_BITS,
    );
}

/// Reads three fixed-point coordinates.
pub fn read_fixed(r: &mut BitReader<'_>) -> Result<[f32; 3], DecodeError> {
    let codes = r.read(3 * FIXED_BITS)?;
    let mask = (1u64 << FIXED_BITS) - 1;
    Ok([
        fixed_value(codes & mask),
        fixed_value((codes >> FIXED_BITS) & mask),
        fixed_value(codes >> (2 * FIXED_BITS)),
    ])
}

/// Writes three plain `f32`.
pub fn write_floats(w: &mut BitWriter, v: &[f32]) {
    v.iter().for_each(|c| w.write_f32(*c));
}

/// Reads three plain `f32`.
pub fn read_floats(r: &mut BitReader<'_>) -> Result<[f32; 3], DecodeError> {
    Ok([r.read_f32()?, r.read_f32()?, r.read_f32()?])
}

/// `fixed-point-position/1`: flag bit 0 then 3 × 18 bits (7 bytes), or flag
/// bit 1 then 3 × 32 bits (13 bytes).
pub fn encode_position(v: [f32; 3]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_position_into(v, &mut out);
    out
}

/// [`encode_position`], appended to `out`.
pub fn encode_position_into(v: [f32; 3], out: &mut Vec<u8>) {
    let mut w = BitWriter::continuing(std::mem::take(out));
    match fixed_codes(v) {
        Some(codes) => {
            w.write(0, 1);
            write_fixed(&mut w, codes);
        }
        None => {
            w.write(1, 1);
            write_floats(&mut w, &v);
        }
    }
    *out = w.finish();
}

/// Length in bytes of a `fixed-point-position/1` value from its first byte.
pub fn position_len(first: u8) -> usize {
    if first & 1 == 0 {
        super::bits::bytes_for(1 + 3 * FIXED_BITS as usize)
    } else {
        super::bits::bytes_for(1 + 96)
    }
}

/// Decodes a `fixed-point-position/1` value of exactly [`position_len`] bytes.
pub fn decode_position(bytes: &[u8]) -> Result<[f32; 3], DecodeError> {
    let mut r = BitReader::new(bytes);
    let v = match r.read(1)? {
        0 => read_fixed(&mut r)?,
        _ => read_floats(&mut r)?,
    };
    r.expect_padding()?;
    Ok(v)
}

/// `float3-half/1`: three IEEE 754 binary16, little-endian (6 bytes);
/// relative error at most 2^-11 within ±65504, larger magnitudes become
/// infinities. For directions and velocities, never positions.
pub fn encode_half(v: [f32; 3]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_half_into(v, &mut out);
    out
}

/// [`encode_half`], appended to `out`.
pub fn encode_half_into(v: [f32; 3], out: &mut Vec<u8>) {
    v.iter()
        .for_each(|c| out.extend_from_slice(&half::f16::from_f32(*c).to_le_bytes()));
}

/// Decodes `float3-half/1` from exactly 6 bytes.
pub fn decode_half(bytes: &[u8]) -> Result<[f32; 3], DecodeError> {
    let [a, b, c, d, e, f] = <[u8; 6]>::try_from(bytes).map_err(|_| DecodeError::Truncated)?;
    Ok([[a, b], [c, d], [e, f]].map(|h| half::f16::from_le_bytes(h).to_f32()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fixed_fixture() {
        // (1, -1.5, 0): codes 0x20100, 0x1fe80, 0x20000; flag 0.
        let bytes = encode_position([1.0, -1.5, 0.0]);
        assert_eq!(hex::encode(&bytes), "000204f40f0040");
        assert_eq!(position_len(bytes[0]), 7);
        assert_eq!(decode_position(&bytes), Ok([1.0, -1.5, 0.0]));
    }

    #[test]
    fn out_of_range_falls_back_per_value_never_clamps() {
        let far = [600.0, 0.0, 0.0];
        let bytes = encode_position(far);
        assert_eq!(bytes.len(), 13);
        assert_eq!(bytes[0] & 1, 1);
        assert_eq!(position_len(bytes[0]), 13);
        assert_eq!(decode_position(&bytes), Ok(far));
        let nan = encode_position([f32::NAN, 0.0, 0.0]);
        assert!(decode_position(&nan).unwrap()[0].is_nan());
        // The edge: 511.99 fits, 512 does not.
        assert!(fits_fixed([511.99, -512.0, 0.0]));
        assert!(!fits_fixed([512.0, 0.0, 0.0]));
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let bytes = encode_position([1.0, 2.0, 3.0]);
        assert_eq!(decode_position(&bytes[..6]), Err(DecodeError::Truncated));
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_position(&long).is_err());
        assert_eq!(decode_half(&[0; 5]), Err(DecodeError::Truncated));
    }

    #[test]
    fn half_fixture() {
        let bytes = encode_half([1.0, -2.0, 0.5]);
        assert_eq!(hex::encode(&bytes), "003c00c00038");
        assert_eq!(decode_half(&bytes), Ok([1.0, -2.0, 0.5]));
    }

    proptest! {
        #[test]
        fn fixed_error_is_at_most_half_a_step(
            x in -512.0f32..511.99, y in -512.0f32..511.99, z in -512.0f32..511.99
        ) {
            let bytes = encode_position([x, y, z]);
            prop_assert_eq!(bytes.len(), 7);
            let back = decode_position(&bytes).unwrap();
            for (a, b) in [x, y, z].iter().zip(back.iter()) {
                prop_assert!((a - b).abs() <= FIXED_MAX_ERROR);
            }
        }

        /// The code is the one `f64::round` gives (the definition).
        #[test]
        fn codes_round_half_away_from_zero(c in any::<f32>(), near in -600.0f32..600.0) {
            for c in [c, near, (near * 256.0).trunc() / 256.0 + 1.0 / 512.0] {
                let scaled = (f64::from(c) * FIXED_SCALE).round();
                let expected = (scaled.is_finite()
                    && scaled >= -(FIXED_OFFSET as f64)
                    && scaled < FIXED_OFFSET as f64)
                    .then(|| (scaled as i64 + FIXED_OFFSET) as u64);
                prop_assert_eq!(fixed_code(c), expected, "{}", c);
            }
        }

        #[test]
        fn any_floats_round_trip_somehow(x in any::<f32>(), y in any::<f32>(), z in any::<f32>()) {
            let bytes = encode_position([x, y, z]);
            let back = decode_position(&bytes).unwrap();
            if bytes.len() == 13 {
                prop_assert_eq!(back.map(f32::to_bits), [x, y, z].map(f32::to_bits));
            }
        }

        #[test]
        fn half_relative_error_is_bounded(x in -60000.0f32..60000.0) {
            let back = decode_half(&encode_half([x, 0.0, 0.0])).unwrap()[0];
            prop_assert!((back - x).abs() <= x.abs() / 2048.0 + 6.0e-8);
        }
    }
}
