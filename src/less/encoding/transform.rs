//! `tundra-transform/1` and `/2`: a Tundra Transform as the federation
//! carries it (VECTOR(9, FLOAT32): position xyz, Euler degrees xyz with
//! R = Rz·Ry·Rx, scale xyz; docs/federation.md §2.4) in 8 to 13 bytes for
//! the usual cases (docs/less-wire.md §16.4).
//!
//! A 5-bit header chooses one form per part, so a value the compact forms
//! cannot carry (a coordinate beyond ±512, an angle out of range, a
//! non-uniform scale) is sent exactly, per value, rather than clamped:
//!
//! | bits | part | forms |
//! |---|---|---|
//! | 0 | position | 0 fixed point (3 × 18 bits, error ≤ 1/512); 1 three `f32` |
//! | 1-2 | rotation | 0 none (0, 0, 0); 1 yaw (0, y, 0); 2 general; 3 three `f32` Euler degrees |
//! | 3-4 | scale | 0 (1, 1, 1); 1 uniform, one `f32`; 2 three `f32`; 3 invalid |
//!
//! The two layouts differ only in the rotation forms 1 and 2. `/1` sends a
//! yaw as 12 bits modulo 360° and a general rotation as a smallest-three
//! quaternion (32 bits): the receiver gets the same orientation, written
//! with other angles (y in [-90, 90]). `/2` sends the angles as written,
//! as codes over [-360, 360), so a client or script
//! reading them sees the origin's numbers; angles outside that range go
//! exact (form 3). A yaw takes 13 bits (error ≤ 0.044°, 9 bytes like `/1`),
//! a general rotation 3 × 12 bits (error ≤ 0.088° per angle, 12 bytes like
//! `/1`).

use super::bits::{bytes_for, BitReader, BitWriter};
use super::position::{
    fixed_codes, read_fixed, read_floats, write_fixed, write_floats, FIXED_BITS,
};
use super::rotation::{
    angle_code, angle_from_code, euler_degrees_from_quat, quat_from_euler_degrees,
    read_smallest_three, read_yaw, write_smallest_three, write_yaw, ANGLE_BITS, QUAT_BITS,
    YAW_ANGLE_BITS, YAW_BITS,
};
use crate::less::codec::DecodeError;

/// Which of the two layouts (docs/less-wire.md §16.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `tundra-transform/1`: yaw modulo 360°, a general rotation as a
    /// quaternion.
    Quaternion,
    /// `tundra-transform/2`: the Euler angles as written.
    Angles,
}

const HEADER_BITS: usize = 5;

/// Position form codes (header bit 0).
const POSITION_FIXED: u64 = 0;
const POSITION_FLOAT: u64 = 1;
/// Rotation form codes (header bits 1-2).
const ROTATION_NONE: u64 = 0;
const ROTATION_YAW: u64 = 1;
/// Form 2 of `/1`: a smallest-three quaternion.
const ROTATION_QUAT: u64 = 2;
/// Form 2 of `/2`: three angle codes.
const ROTATION_ANGLES: u64 = 2;
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

fn rotation_bits(layout: Layout, form: u64) -> usize {
    match (layout, form) {
        (_, ROTATION_NONE) => 0,
        (Layout::Quaternion, ROTATION_YAW) => YAW_BITS as usize,
        (Layout::Quaternion, ROTATION_QUAT) => QUAT_BITS as usize,
        (Layout::Angles, ROTATION_YAW) => YAW_ANGLE_BITS as usize,
        (Layout::Angles, ROTATION_ANGLES) => 3 * ANGLE_BITS as usize,
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
pub fn encode(layout: Layout, t: [f32; 9]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(layout, t, &mut out);
    out
}

/// The rotation form of Euler angles in a layout.
fn rotation_form(layout: Layout, rotation: [f32; 3]) -> u64 {
    let yaw_only = rotation[0] == 0.0 && rotation[2] == 0.0;
    match layout {
        _ if rotation == [0.0; 3] => ROTATION_NONE,
        Layout::Quaternion if !rotation.iter().all(|a| a.is_finite()) => ROTATION_EULER,
        Layout::Quaternion if yaw_only => ROTATION_YAW,
        Layout::Quaternion => ROTATION_QUAT,
        Layout::Angles if yaw_only && angle_code(YAW_ANGLE_BITS, rotation[1]).is_some() => {
            ROTATION_YAW
        }
        Layout::Angles
            if rotation
                .iter()
                .all(|a| angle_code(ANGLE_BITS, *a).is_some()) =>
        {
            ROTATION_ANGLES
        }
        Layout::Angles => ROTATION_EULER,
    }
}

/// [`encode`], appended to `out`.
pub fn encode_into(layout: Layout, t: [f32; 9], out: &mut Vec<u8>) {
    let position = [t[0], t[1], t[2]];
    let rotation = [t[3], t[4], t[5]];
    let scale = [t[6], t[7], t[8]];
    let codes = fixed_codes(position);
    let position_form = if codes.is_some() {
        POSITION_FIXED
    } else {
        POSITION_FLOAT
    };
    let rotation_form = rotation_form(layout, rotation);
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
    match (layout, rotation_form) {
        (_, ROTATION_NONE) => {}
        (Layout::Quaternion, ROTATION_YAW) => write_yaw(&mut w, rotation[1]),
        (Layout::Quaternion, ROTATION_QUAT) => {
            // Finite Euler angles always give a unit quaternion.
            if write_smallest_three(&mut w, quat_from_euler_degrees(rotation)).is_none() {
                write_smallest_three(&mut w, [0.0, 0.0, 0.0, 1.0]);
            }
        }
        (Layout::Angles, ROTATION_YAW) => write_angles(&mut w, YAW_ANGLE_BITS, &rotation[1..2]),
        (Layout::Angles, ROTATION_ANGLES) => write_angles(&mut w, ANGLE_BITS, &rotation),
        _ => write_floats(&mut w, &rotation),
    }
    match scale_form {
        SCALE_ONE => {}
        SCALE_UNIFORM => w.write_f32(scale[0]),
        _ => write_floats(&mut w, &scale),
    }
    *out = w.finish();
}

/// Angle codes; the form was chosen because every angle has one.
fn write_angles(w: &mut BitWriter, bits: u32, angles: &[f32]) {
    for angle in angles {
        w.write(angle_code(bits, *angle).unwrap_or(0), bits);
    }
}

fn read_angle(r: &mut BitReader<'_>, bits: u32) -> Result<f32, DecodeError> {
    Ok(angle_from_code(bits, r.read(bits)?))
}

/// The encoded length announced by the first byte (the header is its low 5
/// bits), or an error for the reserved scale form.
pub fn encoded_len(layout: Layout, first: u8) -> Result<usize, DecodeError> {
    let first = u64::from(first);
    let bits = HEADER_BITS
        + position_bits(first & 1)
        + rotation_bits(layout, (first >> 1) & 3)
        + scale_bits((first >> 3) & 3)?;
    Ok(bytes_for(bits))
}

/// Decodes exactly [`encoded_len`] bytes.
pub fn decode(layout: Layout, bytes: &[u8]) -> Result<[f32; 9], DecodeError> {
    let mut r = BitReader::new(bytes);
    let position_form = r.read(1)?;
    let rotation_form = r.read(2)?;
    let scale_form = r.read(2)?;
    scale_bits(scale_form)?;
    let position = match position_form {
        POSITION_FIXED => read_fixed(&mut r)?,
        _ => read_floats(&mut r)?,
    };
    let rotation = match (layout, rotation_form) {
        (_, ROTATION_NONE) => [0.0; 3],
        (Layout::Quaternion, ROTATION_YAW) => [0.0, read_yaw(&mut r)?, 0.0],
        (Layout::Quaternion, ROTATION_QUAT) => {
            euler_degrees_from_quat(read_smallest_three(&mut r)?)
        }
        (Layout::Angles, ROTATION_YAW) => [0.0, read_angle(&mut r, YAW_ANGLE_BITS)?, 0.0],
        (Layout::Angles, ROTATION_ANGLES) => [
            read_angle(&mut r, ANGLE_BITS)?,
            read_angle(&mut r, ANGLE_BITS)?,
            read_angle(&mut r, ANGLE_BITS)?,
        ],
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
    use super::super::rotation::{
        angle_between_degrees, angle_max_error_degrees, QUAT_MAX_ERROR_DEGREES,
    };
    use super::*;
    use proptest::prelude::*;

    fn round_trip(t: [f32; 9]) -> (Vec<u8>, [f32; 9]) {
        let bytes = encode(Layout::Quaternion, t);
        assert_eq!(
            encoded_len(Layout::Quaternion, bytes[0]),
            Ok(bytes.len()),
            "{t:?}"
        );
        let back = decode(Layout::Quaternion, &bytes).unwrap();
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
        assert!(encoded_len(Layout::Quaternion, 0b11000).is_err());
        assert!(decode(Layout::Quaternion, &[0b11000, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert_eq!(
            decode(Layout::Quaternion, &[0x00, 0x20]),
            Err(DecodeError::Truncated)
        );
        // Padding bits (the top 5 of the last byte) must be zero.
        assert!(decode(
            Layout::Quaternion,
            &[0x00, 0x20, 0x40, 0x00, 0x01, 0x01, 0x06, 0x84]
        )
        .is_err());
    }

    fn round_trip_angles(t: [f32; 9]) -> (Vec<u8>, [f32; 9]) {
        let bytes = encode(Layout::Angles, t);
        assert_eq!(
            encoded_len(Layout::Angles, bytes[0]),
            Ok(bytes.len()),
            "{t:?}"
        );
        (bytes.clone(), decode(Layout::Angles, &bytes).unwrap())
    }

    #[test]
    fn angles_arrive_as_written_not_as_an_equivalent_orientation() {
        // The same orientation as (165.39, 41.69, -179.95), which `/1`
        // delivers instead; `/2` keeps the origin's numbers.
        let t = [1.0, 2.0, 3.0, -14.7, -221.7, 0.0, 1.0, 1.0, 1.0];
        let (bytes, back) = round_trip_angles(t);
        // Header 00100 (fixed, angles, unit scale), 54 bits of position,
        // then 12-bit angle codes 1964, 787 and 2048: 95 bits, 12 bytes.
        assert_eq!(bytes[0] & 0x1f, 0b00100);
        assert_eq!(bytes.len(), 12);
        for (written, arrived) in t[3..6].iter().zip(&back[3..6]) {
            assert!(
                (f64::from(*written) - f64::from(*arrived)).abs()
                    <= angle_max_error_degrees(ANGLE_BITS),
                "{written} arrived as {arrived}"
            );
        }
        let (_, v1) = round_trip(t);
        assert!(
            (v1[4] - t[4]).abs() > 90.0,
            "/1 rewrites the angles: {v1:?}"
        );
    }

    #[test]
    fn angles_layout_yaw_fixture() {
        // Header 00010, position codes as in /1, then yaw 90 as angle code
        // 5120 (0x1400, bits 10 and 12: bits 69 and 71 of the value, the
        // top of the last byte) in 13 bits: 72 bits, 9 bytes like /1.
        let (bytes, back) = round_trip_angles([10.5, 0.0, -3.25, 0.0, 90.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(hex::encode(&bytes), "025041000081f903a0");
        assert_eq!(back, [10.5, 0.0, -3.25, 0.0, 90.0, 0.0, 1.0, 1.0, 1.0]);
        // A yaw of -221.7 stays negative (the /1 yaw form gives 138.3).
        let (_, back) = round_trip_angles([0.0, 0.0, 0.0, 0.0, -221.7, 0.0, 1.0, 1.0, 1.0]);
        assert!((f64::from(back[4]) + 221.7).abs() <= angle_max_error_degrees(YAW_ANGLE_BITS));
        let (_, v1) = round_trip([0.0, 0.0, 0.0, 0.0, -221.7, 0.0, 1.0, 1.0, 1.0]);
        assert!((v1[4] - 138.3).abs() < 0.1, "{v1:?}");
    }

    #[test]
    fn angles_beyond_the_code_range_go_exact() {
        for rotation in [
            [0.0, 400.0, 0.0],
            [10.0, 20.0, -725.5],
            [f32::NAN, 0.0, 0.0],
        ] {
            let t = [
                0.0,
                0.0,
                0.0,
                rotation[0],
                rotation[1],
                rotation[2],
                1.0,
                1.0,
                1.0,
            ];
            let (bytes, back) = round_trip_angles(t);
            assert_eq!(bytes[0] & 0b110, 0b110, "{rotation:?}");
            assert_eq!(
                [back[3], back[4], back[5]].map(f32::to_bits),
                rotation.map(f32::to_bits)
            );
        }
    }

    proptest! {
        #[test]
        fn angles_precision_is_as_stated_and_stable(
            p in proptest::array::uniform3(-512.0f32..511.99),
            r in proptest::array::uniform3(-360.0f32..359.9),
        ) {
            let t = [p[0], p[1], p[2], r[0], r[1], r[2], 1.0, 1.0, 1.0];
            let (bytes, back) = round_trip_angles(t);
            prop_assert!(bytes.len() <= 12);
            for i in 0..3 {
                prop_assert!((back[i] - t[i]).abs() <= FIXED_MAX_ERROR);
                let error = (f64::from(back[3 + i]) - f64::from(r[i])).abs();
                prop_assert!(error <= angle_max_error_degrees(ANGLE_BITS) + 1e-9);
            }
            // A decoded value crosses a second link unchanged.
            prop_assert_eq!(round_trip_angles(back).1, back);
        }

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
            let _ = decode(Layout::Quaternion, &bytes);
            let _ = decode(Layout::Angles, &bytes);
            if let Some(first) = bytes.first() {
                let _ = encoded_len(Layout::Quaternion, *first);
                let _ = encoded_len(Layout::Angles, *first);
            }
        }
    }
}
