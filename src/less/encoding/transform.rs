//! `tundra-transform/1`: a Tundra Transform as the federation carries it
//! (VECTOR(9, FLOAT32): position xyz, Euler degrees xyz with R = Rz·Ry·Rx,
//! scale xyz; docs/federation.md §2.4) in 9 to 12 bytes for the usual cases
//! (docs/less-wire.md §16.4).
//!
//! A 5-bit header chooses one form per part, so a value the compact forms
//! cannot carry (a coordinate beyond ±512, a non-finite angle, a
//! non-uniform scale) is sent exactly, per value, rather than clamped:
//!
//! | bits | part | forms |
//! |---|---|---|
//! | 0 | position | 0 fixed point (3 × 18 bits, error ≤ 1/512); 1 three `f32` |
//! | 1-2 | rotation | 0 none (0, 0, 0); 1 yaw (0, y, 0), 12 bits; 2 smallest-three quaternion, 32 bits; 3 three `f32` Euler degrees |
//! | 3-4 | scale | 0 (1, 1, 1); 1 uniform, one `f32`; 2 three `f32`; 3 invalid |

use super::bits::{bytes_for, BitReader, BitWriter};
use super::position::{
    fixed_codes, read_fixed, read_floats, write_fixed, write_floats, FIXED_BITS,
};
use super::rotation::{
    euler_degrees_from_quat, quat_from_euler_degrees, read_smallest_three, read_yaw,
    write_smallest_three, write_yaw, QUAT_BITS, YAW_BITS,
};
use crate::less::codec::DecodeError;

const HEADER_BITS: usize = 5;

/// Position form codes (header bit 0).
const POSITION_FIXED: u64 = 0;
const POSITION_FLOAT: u64 = 1;
/// Rotation form codes (header bits 1-2).
const ROTATION_NONE: u64 = 0;
const ROTATION_YAW: u64 = 1;
const ROTATION_QUAT: u64 = 2;
const ROTATION_EULER: u64 = 3;
/// Scale form codes (header bits 3-4).
const SCALE_ONE: u64 = 0;
const SCALE_UNIFORM: u64 = 1;
const SCALE_FULL: u64 = 2;

/// Largest encoded length: 5 + 96 + 96 + 96 bits.
pub const MAX_LEN: usize = (HEADER_BITS + 3 * 96).div_ceil(8);

fn position_bits(form: u64) -> usize {
    match form {
        POSITION_FIXED => 3 * FIXED_BITS as usize,
        _ => 96,
    }
}

fn rotation_bits(form: u64) -> usize {
    match form {
        ROTATION_NONE => 0,
        ROTATION_YAW => YAW_BITS as usize,
        ROTATION_QUAT => QUAT_BITS as usize,
        _ => 96,
    }
}

fn scale_bits(form: u64) -> Result<usize, DecodeError> {
    match form {
        SCALE_ONE => Ok(0),
        SCALE_UNIFORM => Ok(32),
        SCALE_FULL => Ok(96),
        _ => Err(DecodeError::Invalid("transform scale form 3 is reserved")),
    }
}

/// Encodes `[px, py, pz, rx, ry, rz, sx, sy, sz]`.
pub fn encode(t: [f32; 9]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(t, &mut out);
    out
}

/// [`encode`], appended to `out`.
pub fn encode_into(t: [f32; 9], out: &mut Vec<u8>) {
    let position = [t[0], t[1], t[2]];
    let rotation = [t[3], t[4], t[5]];
    let scale = [t[6], t[7], t[8]];
    let codes = fixed_codes(position);
    let position_form = if codes.is_some() {
        POSITION_FIXED
    } else {
        POSITION_FLOAT
    };
    let rotation_form = if !rotation.iter().all(|a| a.is_finite()) {
        ROTATION_EULER
    } else if rotation == [0.0; 3] {
        ROTATION_NONE
    } else if rotation[0] == 0.0 && rotation[2] == 0.0 {
        ROTATION_YAW
    } else {
        ROTATION_QUAT
    };
    let scale_form = if scale == [1.0; 3] {
        SCALE_ONE
    } else if scale[0] == scale[1] && scale[1] == scale[2] {
        SCALE_UNIFORM
    } else {
        SCALE_FULL
    };
    let mut w = BitWriter::continuing(std::mem::take(out));
    w.write(position_form, 1);
    w.write(rotation_form, 2);
    w.write(scale_form, 2);
    match codes {
        Some(codes) => write_fixed(&mut w, codes),
        None => write_floats(&mut w, &position),
    }
    match rotation_form {
        ROTATION_NONE => {}
        ROTATION_YAW => write_yaw(&mut w, rotation[1]),
        ROTATION_QUAT => {
            // Finite Euler angles always give a unit quaternion.
            if write_smallest_three(&mut w, quat_from_euler_degrees(rotation)).is_none() {
                write_smallest_three(&mut w, [0.0, 0.0, 0.0, 1.0]);
            }
        }
        _ => write_floats(&mut w, &rotation),
    }
    match scale_form {
        SCALE_ONE => {}
        SCALE_UNIFORM => w.write_f32(scale[0]),
        _ => write_floats(&mut w, &scale),
    }
    *out = w.finish();
}

/// The encoded length announced by the first byte (the header is its low 5
/// bits), or an error for the reserved scale form.
pub fn encoded_len(first: u8) -> Result<usize, DecodeError> {
    let first = u64::from(first);
    let bits = HEADER_BITS
        + position_bits(first & 1)
        + rotation_bits((first >> 1) & 3)
        + scale_bits((first >> 3) & 3)?;
    Ok(bytes_for(bits))
}

/// Decodes exactly [`encoded_len`] bytes.
pub fn decode(bytes: &[u8]) -> Result<[f32; 9], DecodeError> {
    let mut r = BitReader::new(bytes);
    let position_form = r.read(1)?;
    let rotation_form = r.read(2)?;
    let scale_form = r.read(2)?;
    scale_bits(scale_form)?;
    let position = match position_form {
        POSITION_FIXED => read_fixed(&mut r)?,
        _ => read_floats(&mut r)?,
    };
    let rotation = match rotation_form {
        ROTATION_NONE => [0.0; 3],
        ROTATION_YAW => [0.0, read_yaw(&mut r)?, 0.0],
        ROTATION_QUAT => euler_degrees_from_quat(read_smallest_three(&mut r)?),
        _ => read_floats(&mut r)?,
    };
    let scale = match scale_form {
        SCALE_ONE => [1.0; 3],
        SCALE_UNIFORM => [r.read_f32()?; 3],
        _ => read_floats(&mut r)?,
    };
    r.expect_padding()?;
    let [px, py, pz] = position;
    let [rx, ry, rz] = rotation;
    let [sx, sy, sz] = scale;
    Ok([px, py, pz, rx, ry, rz, sx, sy, sz])
}

#[cfg(test)]
mod tests {
    use super::super::position::FIXED_MAX_ERROR;
    use super::super::rotation::{angle_between_degrees, QUAT_MAX_ERROR_DEGREES};
    use super::*;
    use proptest::prelude::*;

    fn round_trip(t: [f32; 9]) -> (Vec<u8>, [f32; 9]) {
        let bytes = encode(t);
        assert_eq!(encoded_len(bytes[0]), Ok(bytes.len()), "{t:?}");
        let back = decode(&bytes).unwrap();
        (bytes, back)
    }

    #[test]
    fn still_entity_at_a_fixed_point_position() {
        // Header 00000, then position (1, 2, 3) as 18-bit codes 0x20100,
        // 0x20200, 0x20300, least significant bit first; 59 bits, 8 bytes.
        let (bytes, back) = round_trip([1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(hex::encode(&bytes), "0020400001010604");
        assert_eq!(back, [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn yaw_only_motion_is_nine_bytes() {
        // Header 00010 (fixed, yaw, unit scale), position codes, yaw 1024.
        let (bytes, back) = round_trip([10.5, 0.0, -3.25, 0.0, 90.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(bytes.len(), 9);
        assert_eq!(hex::encode(&bytes), "025041000081f90320");
        assert_eq!(back, [10.5, 0.0, -3.25, 0.0, 90.0, 0.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn general_rotation_is_twelve_bytes() {
        let t = [1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 1.0, 1.0, 1.0];
        let (bytes, back) = round_trip(t);
        assert_eq!(bytes.len(), 12);
        assert_eq!(bytes[0] & 0x1f, 0b00100);
        let a = quat_from_euler_degrees([10.0, 20.0, 30.0]);
        let b = quat_from_euler_degrees([back[3], back[4], back[5]]);
        assert!(angle_between_degrees(a, b) <= QUAT_MAX_ERROR_DEGREES);
    }

    #[test]
    fn out_of_range_parts_go_exact() {
        let t = [2000.0, 0.0, 0.0, f32::INFINITY, 0.0, 0.0, 1.0, 2.0, 3.0];
        let (bytes, back) = round_trip(t);
        assert_eq!(bytes.len(), MAX_LEN);
        assert_eq!(back, t);
        let uniform = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0];
        let (bytes, back) = round_trip(uniform);
        assert_eq!(bytes.len(), 12);
        assert_eq!(back, uniform);
    }

    #[test]
    fn reserved_and_malformed_inputs_are_errors() {
        assert!(encoded_len(0b11000).is_err());
        assert!(decode(&[0b11000, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert_eq!(decode(&[0x00, 0x20]), Err(DecodeError::Truncated));
        // Padding bits (the top 5 of the last byte) must be zero.
        assert!(decode(&[0x00, 0x20, 0x40, 0x00, 0x01, 0x01, 0x06, 0x84]).is_err());
    }

    proptest! {
        #[test]
        fn precision_is_as_stated(
            p in proptest::array::uniform3(-512.0f32..511.99),
            r in proptest::array::uniform3(-180.0f32..180.0),
            s in 0.01f32..100.0,
        ) {
            let t = [p[0], p[1], p[2], r[0], r[1], r[2], s, s, s];
            let (bytes, back) = round_trip(t);
            prop_assert!(bytes.len() <= 16);
            for i in 0..3 {
                prop_assert!((back[i] - t[i]).abs() <= FIXED_MAX_ERROR);
            }
            let a = quat_from_euler_degrees(r);
            let b = quat_from_euler_degrees([back[3], back[4], back[5]]);
            prop_assert!(angle_between_degrees(a, b) <= QUAT_MAX_ERROR_DEGREES);
            prop_assert_eq!(&back[6..], &[s, s, s][..]);
        }

        #[test]
        fn decoding_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
            let _ = decode(&bytes);
            if let Some(first) = bytes.first() {
                let _ = encoded_len(*first);
            }
        }
    }
}
