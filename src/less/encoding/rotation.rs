//! Rotation forms of the compact encodings: the smallest-three quaternion
//! (`quat-smallest-three/1`), the yaw angle, Euler angles as written
//! (`tundra-transform/2`), and the conversions between
//! Euler angles in degrees (R = Rz · Ry · Rx, the order Tundra's Transform
//! uses, docs/federation.md §2.4) and unit quaternions.
//!
//! Computed in `f64` so that the stated error bounds are those of the
//! quantization, not of the arithmetic. Pure functions only.

use super::bits::{round_to_i64, BitReader, BitWriter};
use crate::less::codec::DecodeError;

/// A quaternion `(x, y, z, w)`.
pub type Quat = [f64; 4];

/// Bits per quantized component of the smallest-three form.
pub const QUAT_COMPONENT_BITS: u32 = 10;
/// Bits of the smallest-three form: 2-bit index and three components.
pub const QUAT_BITS: u32 = 2 + 3 * QUAT_COMPONENT_BITS;
/// Proven bound on the rotation error of the smallest-three form, degrees
/// (each component is off by at most half a step of sqrt(2)/1023, which
/// moves the unit quaternion by at most 0.0024 and the rotation by twice
/// that in radians); the property test measures it.
pub const QUAT_MAX_ERROR_DEGREES: f64 = 0.3;
/// Bits of the yaw form.
pub const YAW_BITS: u32 = 12;
/// Largest error of the yaw form: half a step of 360/4096 degrees.
pub const YAW_MAX_ERROR_DEGREES: f64 = 360.0 / 4096.0 / 2.0;

/// Bits of each Euler angle as written in a general rotation
/// (`tundra-transform/2`): 3 × 12 bits, as many as a smallest-three
/// quaternion, so a general transform stays 12 bytes.
pub const ANGLE_BITS: u32 = 12;
/// Bits of a yaw angle as written (`tundra-transform/2`): as fine as the
/// `/1` yaw, and a yaw transform stays 9 bytes.
pub const YAW_ANGLE_BITS: u32 = 13;
/// Angle codes cover [-360, 360): every angle Tundra's own conversions
/// produce ((-180, 180]) and those scripts and editors write beyond it
/// (-221.7, 270) keep their numbers, not only their rotation.
const ANGLE_MIN_DEGREES: f64 = -360.0;
const ANGLE_RANGE_DEGREES: f64 = 720.0;
/// Largest error of an angle code of `bits` bits: half a step of
/// 720 / 2^bits degrees (0.088° for 12 bits, 0.044° for 13).
pub fn angle_max_error_degrees(bits: u32) -> f64 {
    angle_step(bits) / 2.0
}

/// Degrees per code: 720 / 2^bits, exact in binary, so a decoded angle is
/// an exact `f32` and encodes to the same code again.
fn angle_step(bits: u32) -> f64 {
    ANGLE_RANGE_DEGREES / f64::from(1u32 << bits)
}

/// The `bits`-bit code of an angle in degrees, `round((a + 360) / step)`,
/// when it lies in 0..2^bits (the angle is finite and in about
/// [-360, 360)).
pub fn angle_code(bits: u32, degrees: f32) -> Option<u64> {
    let steps = (f64::from(degrees) - ANGLE_MIN_DEGREES) / angle_step(bits);
    // Also false for NaN; the range check keeps the conversion exact.
    if !(steps >= 0.0 && steps < f64::from(1u32 << bits)) {
        return None;
    }
    let code = round_to_i64(steps);
    (code < 1i64 << bits).then_some(code as u64) // 0..2^bits
}

/// The angle of a `bits`-bit code: `code · 720/2^bits - 360` degrees.
pub fn angle_from_code(bits: u32, code: u64) -> f32 {
    (code as f64 * angle_step(bits) + ANGLE_MIN_DEGREES) as f32
}

/// Components are quantized symmetrically to -511..=511 (stored plus 511),
/// so 0 is exact and the identity rotation round-trips exactly.
const QUAT_STEPS: f64 = ((1u32 << (QUAT_COMPONENT_BITS - 1)) - 1) as f64;

fn axis_quat(axis: usize, degrees: f64) -> Quat {
    let (s, c) = (degrees.to_radians() / 2.0).sin_cos();
    let mut q = [0.0, 0.0, 0.0, c];
    q[axis] = s;
    q
}

fn mul(a: Quat, b: Quat) -> Quat {
    let [ax, ay, az, aw] = a;
    let [bx, by, bz, bw] = b;
    [
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ]
}

/// The unit quaternion of Euler degrees `(x, y, z)`: Rz(z) · Ry(y) · Rx(x).
pub fn quat_from_euler_degrees(euler: [f32; 3]) -> Quat {
    let [x, y, z] = euler.map(f64::from);
    mul(mul(axis_quat(2, z), axis_quat(1, y)), axis_quat(0, x))
}

/// Euler degrees `(x, y, z)` with R = Rz · Ry · Rx for a unit quaternion;
/// y in [-90, 90]. At y = ±90 the x angle is set to 0.
pub fn euler_degrees_from_quat(q: Quat) -> [f32; 3] {
    let [x, y, z, w] = q;
    // Rotation matrix entries of the quaternion.
    let m00 = 1.0 - 2.0 * (y * y + z * z);
    let m01 = 2.0 * (x * y - z * w);
    let m10 = 2.0 * (x * y + z * w);
    let m11 = 1.0 - 2.0 * (x * x + z * z);
    let m20 = 2.0 * (x * z - y * w);
    let m21 = 2.0 * (y * z + x * w);
    let m22 = 1.0 - 2.0 * (x * x + y * y);
    let sy = (-m20).clamp(-1.0, 1.0);
    let (ex, ez) = if sy.abs() < 0.999_999_9 {
        (m21.atan2(m22), m10.atan2(m00))
    } else {
        (0.0, (-m01).atan2(m11))
    };
    [ex, sy.asin(), ez].map(|radians| radians.to_degrees() as f32)
}

/// The angle in degrees of the rotation taking `a` to `b` (unit quaternions).
pub fn angle_between_degrees(a: Quat, b: Quat) -> f64 {
    let dot: f64 = a.iter().zip(b.iter()).map(|(p, q)| p * q).sum();
    (2.0 * dot.abs().min(1.0).acos()).to_degrees()
}

fn normalized(q: Quat) -> Option<Quat> {
    let norm = q.iter().map(|c| c * c).sum::<f64>().sqrt();
    (norm.is_finite() && norm > 1e-9).then(|| q.map(|c| c / norm))
}

/// Writes the smallest-three form of a rotation: the index of the largest
/// component (2 bits, x = 0 .. w = 3), then the other three in order, each
/// mapped from [-1/sqrt(2), 1/sqrt(2)] to 0..=1023 with rounding. The sign
/// is chosen so the dropped component is positive (q and -q are one
/// rotation). `None` for a quaternion that cannot be normalized.
pub fn write_smallest_three(w: &mut BitWriter, q: Quat) -> Option<()> {
    let q = normalized(q)?;
    let mut largest = 0;
    for i in 1..4 {
        if q[i].abs() > q[largest].abs() {
            largest = i;
        }
    }
    let sign = if q[largest] < 0.0 { -1.0 } else { 1.0 };
    w.write(largest as u64, 2);
    for (i, c) in q.iter().enumerate() {
        if i != largest {
            // |c| <= 1 after normalizing, so the product is small.
            let scaled = round_to_i64(c * sign * std::f64::consts::SQRT_2 * QUAT_STEPS);
            // Clamped to -511..=511, so 0..=1022.
            let steps = QUAT_STEPS as i64;
            let code = (scaled.clamp(-steps, steps) + steps) as u64;
            w.write(code, QUAT_COMPONENT_BITS);
        }
    }
    Some(())
}

/// Reads the smallest-three form. Every bit pattern is a rotation.
pub fn read_smallest_three(r: &mut BitReader<'_>) -> Result<Quat, DecodeError> {
    let largest = r.read(2)? as usize; // two bits: 0..=3
    let mut q = [0.0; 4];
    let mut sum = 0.0;
    for (i, c) in q.iter_mut().enumerate() {
        if i != largest {
            // 1023 (never written) reads as 512/511 of the range: still finite.
            let code = r.read(QUAT_COMPONENT_BITS)? as f64 - QUAT_STEPS;
            *c = code / QUAT_STEPS / std::f64::consts::SQRT_2;
            sum += *c * *c;
        }
    }
    q[largest] = (1.0 - sum).max(0.0).sqrt();
    Ok(normalized(q).unwrap_or([0.0, 0.0, 0.0, 1.0]))
}

/// Writes a yaw angle in degrees as 12 bits: `round(y / 360 * 4096) mod 4096`.
pub fn write_yaw(w: &mut BitWriter, degrees: f32) {
    let steps = f64::from(degrees) / 360.0 * 4096.0;
    let code = if steps.abs() < 1.0e18 {
        round_to_i64(steps).rem_euclid(4096) as u64
    } else {
        // Angles of no practical size (or not finite) take the float path.
        steps.round().rem_euclid(4096.0) as u64
    }; // in 0..4096
    w.write(code, YAW_BITS);
}

/// Reads a yaw angle: code · 360/4096 degrees, taken into (-180, 180].
pub fn read_yaw(r: &mut BitReader<'_>) -> Result<f32, DecodeError> {
    let code = r.read(YAW_BITS)?;
    let degrees = code as f64 * 360.0 / 4096.0;
    Ok(if degrees > 180.0 {
        degrees - 360.0
    } else {
        degrees
    } as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn quat_bytes(q: Quat) -> Vec<u8> {
        let mut w = BitWriter::new();
        write_smallest_three(&mut w, q).unwrap();
        w.finish()
    }

    #[test]
    fn identity_and_a_quarter_turn_fixtures() {
        // w largest (index 3), x = y = z = 0 -> stored 511 each.
        let identity = quat_bytes([0.0, 0.0, 0.0, 1.0]);
        assert_eq!(hex::encode(&identity), "fff7df7f");
        // Not byte aligned on its own: 32 bits exactly.
        assert_eq!(identity.len(), 4);
        let mut r = BitReader::new(&identity);
        assert_eq!(read_smallest_three(&mut r), Ok([0.0, 0.0, 0.0, 1.0]));
        // A quarter turn about y: y = w = sqrt(1/2); ties pick the first (y).
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let quarter = quat_bytes([0.0, h, 0.0, h]);
        // index 1; x, z -> 511; w -> 511 + 511 = 1022.
        assert_eq!(hex::encode(&quarter), "fdf79fff");
        let back = read_smallest_three(&mut BitReader::new(&quarter)).unwrap();
        assert!(angle_between_degrees(back, [0.0, h, 0.0, h]) < 1e-6);
        // -q encodes like q.
        assert_eq!(quat_bytes([0.0, 0.0, 0.0, -1.0]), identity);
    }

    #[test]
    fn euler_round_trip() {
        for euler in [[10.0, 20.0, 30.0], [0.0, 90.0, 0.0], [-45.0, 0.0, 170.0]] {
            let q = quat_from_euler_degrees(euler);
            let back = quat_from_euler_degrees(euler_degrees_from_quat(q));
            assert!(angle_between_degrees(q, back) < 1e-3, "{euler:?}");
        }
    }

    #[test]
    fn yaw_fixture_and_wrap() {
        let mut w = BitWriter::new();
        write_yaw(&mut w, 90.0);
        write_yaw(&mut w, -90.0);
        let bytes = w.finish();
        // 1024 = 0x400, 3072 = 0xc00: 0x400 | 0xc00 << 12.
        assert_eq!(hex::encode(&bytes), "0004c0");
        let mut r = BitReader::new(&bytes);
        assert_eq!(read_yaw(&mut r), Ok(90.0));
        assert_eq!(read_yaw(&mut r), Ok(-90.0));
    }

    #[test]
    fn angle_codes_keep_the_numbers_written() {
        let (a, y) = (ANGLE_BITS, YAW_ANGLE_BITS);
        assert_eq!(angle_code(a, 0.0), Some(2048));
        assert_eq!(angle_from_code(a, 2048), 0.0);
        assert_eq!(angle_code(y, 0.0), Some(4096));
        assert_eq!(angle_code(a, -360.0), Some(0));
        assert_eq!(angle_code(y, 90.0), Some(5120));
        assert_eq!(angle_from_code(y, 5120), 90.0);
        // -221.7 stays about -221.7, not its equivalent 138.3.
        let code = angle_code(a, -221.7).unwrap();
        assert_eq!(code, 787);
        let back = f64::from(angle_from_code(a, code));
        assert!((back + 221.7).abs() <= angle_max_error_degrees(a));
        // Past the last code: out of range, as are 360 and NaN.
        assert_eq!(angle_code(a, 359.9), Some(4095));
        assert_eq!(angle_code(a, 359.95), None);
        assert_eq!(angle_code(y, 359.95), Some(8191));
        assert_eq!(angle_code(y, 359.97), None);
        assert_eq!(angle_code(a, -360.1), None);
        assert_eq!(angle_code(a, f32::NAN), None);
        assert_eq!(angle_code(y, f32::INFINITY), None);
    }

    proptest! {
        #[test]
        fn angle_code_error_is_bounded_and_stable(a in -360.0f32..359.9, yaw in any::<bool>()) {
            let bits = if yaw { YAW_ANGLE_BITS } else { ANGLE_BITS };
            let code = angle_code(bits, a).unwrap();
            let back = angle_from_code(bits, code);
            let error = (f64::from(back) - f64::from(a)).abs();
            prop_assert!(error <= angle_max_error_degrees(bits) + 1e-9);
            prop_assert_eq!(angle_code(bits, back), Some(code));
        }

        #[test]
        fn smallest_three_error_is_bounded(
            x in -180.0f32..180.0, y in -180.0f32..180.0, z in -180.0f32..180.0
        ) {
            let q = quat_from_euler_degrees([x, y, z]);
            let bytes = quat_bytes(q);
            prop_assert_eq!(bytes.len(), 4);
            let back = read_smallest_three(&mut BitReader::new(&bytes)).unwrap();
            prop_assert!(angle_between_degrees(q, back) <= QUAT_MAX_ERROR_DEGREES);
        }

        #[test]
        fn yaw_error_is_bounded(y in -720.0f32..720.0) {
            let mut w = BitWriter::new();
            write_yaw(&mut w, y);
            let back = read_yaw(&mut BitReader::new(&w.finish())).unwrap();
            let diff = (f64::from(back) - f64::from(y)).rem_euclid(360.0);
            let diff = diff.min(360.0 - diff);
            prop_assert!(diff <= YAW_MAX_ERROR_DEGREES + 1e-4);
        }

        #[test]
        fn every_bit_pattern_is_a_unit_rotation(bits in any::<u32>()) {
            let bytes = bits.to_le_bytes();
            let q = read_smallest_three(&mut BitReader::new(&bytes)).unwrap();
            let norm: f64 = q.iter().map(|c| c * c).sum();
            prop_assert!((norm - 1.0).abs() < 1e-9);
        }
    }
}
