//! kNet's quantizers (docs/tundra-wire.md §1.4, kNet `DataSerializer.cpp` /
//! `DataDeserializer.cpp`), bit-exact: every step is f32 arithmetic in the
//! C++ order, `(u32)x` truncation, `atan2f` / `asinf` in f32 (docs/tundra-wire.md §1.4:
//! an f64 `atan2` turns yaw code 2047 into 2046 for (0, 0, -1)).
//!
//! Functions return the integer codes; writing them is `BitWriter::bits`.
//! Decoding functions turn codes back into the floats the C++ reader makes.

use super::values::Float3;

/// kNet's `PI`: `(float)3.14159265358979...`.
pub const KNET_PI: f32 = std::f32::consts::PI;

/// SyncManager's literal `3.141592654f`. It rounds to the same f32 as
/// [`KNET_PI`] (checked by a test), so the constant is spelled once.
pub const SYNC_PI: f32 = std::f32::consts::PI;

/// `(1 << bits) - 1` as the C++ float conversion.
fn steps(bits: u32) -> f32 {
    ((1u32 << bits) - 1) as f32
}

/// kNet `ClampF`: `val <= min ? min : (val >= max ? max : val)`; NaN passes.
fn clamp(value: f32, min: f32, max: f32) -> f32 {
    if value <= min {
        min
    } else if value >= max {
        max
    } else {
        value
    }
}

fn mask(code: u32, bits: u32) -> u32 {
    if bits >= 32 {
        code
    } else {
        code & ((1u32 << bits) - 1)
    }
}

/// `AddQuantizedFloat`: `(u32)((clamp(v) - min) * (2^n - 1) / (max - min))`.
pub fn quantize_float(min: f32, max: f32, bits: u32, value: f32) -> u32 {
    let scaled = (clamp(value, min, max) - min) * steps(bits) / (max - min);
    mask(scaled as u32, bits)
}

/// `ReadQuantizedFloat`: `min + code * (max - min) / (2^n - 1)`.
pub fn dequantize_float(min: f32, max: f32, bits: u32, code: u32) -> f32 {
    min + code as f32 * (max - min) / steps(bits)
}

/// `AddUnsignedFixedPoint(I, D, v)`: 0 for v <= 0, all ones for v >= 2^I,
/// else `(u32)(v * 2^D)`; `I + D` bits.
pub fn unsigned_fixed(int_bits: u32, frac_bits: u32, value: f32) -> u32 {
    let max_value = (1u32 << int_bits) as f32;
    let max_pattern = (1u32 << (int_bits + frac_bits)) - 1;
    if value <= 0.0 {
        0
    } else if value >= max_value {
        max_pattern
    } else {
        mask(
            (value * (1u32 << frac_bits) as f32) as u32,
            int_bits + frac_bits,
        )
    }
}

/// `ReadUnsignedFixedPoint`: `code / 2^D`.
pub fn unsigned_fixed_value(frac_bits: u32, code: u32) -> f32 {
    code as f32 / (1u32 << frac_bits) as f32
}

/// `AddSignedFixedPoint(I, D, v)` = unsigned of `v + 2^(I-1)`.
pub fn signed_fixed(int_bits: u32, frac_bits: u32, value: f32) -> u32 {
    unsigned_fixed(int_bits, frac_bits, value + (1u32 << (int_bits - 1)) as f32)
}

/// `ReadSignedFixedPoint`: `code / 2^D - 2^(I-1)`.
pub fn signed_fixed_value(int_bits: u32, frac_bits: u32, code: u32) -> f32 {
    unsigned_fixed_value(frac_bits, code) - (1u32 << (int_bits - 1)) as f32
}

/// `AddNormalizedVector2D(x, y, n)`: the angle `atan2(y, x)` over [-PI, PI].
pub fn normalized_vector2d(x: f32, y: f32, bits: u32) -> u32 {
    quantize_float(-KNET_PI, KNET_PI, bits, y.atan2(x))
}

/// `ReadNormalizedVector2D`: `(cos a, sin a)`.
pub fn normalized_vector2d_value(bits: u32, code: u32) -> (f32, f32) {
    let angle = dequantize_float(-KNET_PI, KNET_PI, bits, code);
    (angle.cos(), angle.sin())
}

/// `AddNormalizedVector3D`: yaw `atan2(x, z)` over [-PI, PI], pitch
/// `asin(-y)` over [-PI/2, PI/2]. Returns (yaw code, pitch code).
pub fn normalized_vector3d(v: Float3, yaw_bits: u32, pitch_bits: u32) -> (u32, u32) {
    let azimuth = v.x.atan2(v.z);
    let inclination = (-v.y).asin();
    (
        quantize_float(-KNET_PI, KNET_PI, yaw_bits, azimuth),
        quantize_float(-KNET_PI / 2.0, KNET_PI / 2.0, pitch_bits, inclination),
    )
}

/// `ReadNormalizedVector3D`: the unit vector of (yaw, pitch) codes.
pub fn normalized_vector3d_value(yaw_bits: u32, pitch_bits: u32, yaw: u32, pitch: u32) -> Float3 {
    let azimuth = dequantize_float(-KNET_PI, KNET_PI, yaw_bits, yaw);
    let inclination = dequantize_float(-KNET_PI / 2.0, KNET_PI / 2.0, pitch_bits, pitch);
    let cx = inclination.cos();
    Float3::new(cx * azimuth.sin(), -inclination.sin(), cx * azimuth.cos())
}

/// `AddVector3D`: length as unsigned fixed point; only when that code is
/// not 0, yaw `atan2(x, z)` and pitch `asin(-y / len)`.
pub fn vector3d(
    v: Float3,
    yaw_bits: u32,
    pitch_bits: u32,
    int_bits: u32,
    frac_bits: u32,
) -> (u32, Option<(u32, u32)>) {
    let length = (v.x * v.x + v.y * v.y + v.z * v.z).sqrt();
    let magnitude = unsigned_fixed(int_bits, frac_bits, length);
    if magnitude == 0 {
        return (0, None);
    }
    let azimuth = v.x.atan2(v.z);
    let inclination = (-v.y / length).asin();
    let yaw = quantize_float(-KNET_PI, KNET_PI, yaw_bits, azimuth);
    let pitch = quantize_float(-KNET_PI / 2.0, KNET_PI / 2.0, pitch_bits, inclination);
    (magnitude, Some((yaw, pitch)))
}

/// `ReadVector3D`: the vector of a magnitude code and optional direction.
pub fn vector3d_value(
    yaw_bits: u32,
    pitch_bits: u32,
    frac_bits: u32,
    magnitude: u32,
    direction: Option<(u32, u32)>,
) -> Float3 {
    let length = unsigned_fixed_value(frac_bits, magnitude);
    match direction {
        Some((yaw, pitch)) => {
            let d = normalized_vector3d_value(yaw_bits, pitch_bits, yaw, pitch);
            Float3::new(d.x * length, d.y * length, d.z * length)
        }
        None => Float3::default(),
    }
}

/// `AddArithmeticEncoded`: `((v1*m2 + v2)*m3 + v3)...`; values must be in
/// range (checked by the callers' types).
pub fn arithmetic_encode(values: &[(u32, u32)]) -> u32 {
    values
        .iter()
        .fold(0, |acc, &(value, max)| acc * max + value)
}

/// `ReadArithmeticEncoded`: splits `code` by the given ranges, last first.
pub fn arithmetic_decode<const N: usize>(mut code: u32, maxes: [u32; N]) -> [u32; N] {
    let mut out = [0u32; N];
    for i in (0..N).rev() {
        out[i] = code % maxes[i];
        code /= maxes[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_pi_constants_are_one_f32() {
        let literal: f32 = "3.141592654".parse().unwrap();
        assert_eq!(literal.to_bits(), SYNC_PI.to_bits());
        assert_eq!(KNET_PI.to_bits(), SYNC_PI.to_bits());
        assert_eq!(KNET_PI.to_bits(), 0x4049_0FDB);
    }

    #[test]
    fn signed_fixed_point_example_of_the_reference() {
        // 11.8: -1.5 -> 0x3FE80 (§1.4).
        assert_eq!(signed_fixed(11, 8, -1.5), 0x3FE80);
        assert_eq!(signed_fixed_value(11, 8, 0x3FE80), -1.5);
        assert_eq!(signed_fixed(11, 8, 0.0), 1024 << 8);
        assert_eq!(signed_fixed(11, 8, -5000.0), 0);
        assert_eq!(signed_fixed(11, 8, 5000.0), (1 << 19) - 1);
        assert_eq!(unsigned_fixed(3, 8, 1.0), 256);
    }

    #[test]
    fn quantized_float_truncates_in_f32() {
        assert_eq!(quantize_float(0.0, SYNC_PI, 10, SYNC_PI), 1023);
        assert_eq!(quantize_float(0.0, SYNC_PI, 10, -1.0), 0);
        assert_eq!(quantize_float(-KNET_PI, KNET_PI, 8, 0.0), 127);
        assert_eq!(dequantize_float(0.0, SYNC_PI, 10, 1023), SYNC_PI);
    }

    #[test]
    fn gotcha_12_yaw_of_minus_z_is_2047_in_f32() {
        let (magnitude, direction) = vector3d(Float3::new(0.0, 0.0, -1.0), 11, 10, 3, 8);
        assert_eq!(magnitude, 256);
        let (yaw, pitch) = direction.unwrap();
        assert_eq!(yaw, 2047);
        assert_eq!(pitch, 511);
        // The same with f64 atan2 compared against the f32 PI gives 2046.
        let az64 = 0f64.atan2(-1.0);
        let pi32 = f64::from(KNET_PI);
        let wrong = ((az64.min(pi32) + pi32) * 2047.0 / (2.0 * pi32)) as u32;
        assert_eq!(wrong, 2046);
    }

    #[test]
    fn arithmetic_coding_of_send_types() {
        let code = arithmetic_encode(&[(2, 3), (3, 4), (2, 3), (2, 3), (1, 2)]);
        assert_eq!(code, 215);
        assert_eq!(arithmetic_decode(215, [3, 4, 3, 3, 2]), [2, 3, 2, 2, 1]);
        assert_eq!(arithmetic_decode(2, [3, 4, 3, 3, 2]), [0, 0, 0, 1, 0]);
    }

    #[test]
    fn normalized_vectors_decode_near_the_input() {
        let (yaw, pitch) = normalized_vector3d(Float3::new(0.0, 0.0, 1.0), 9, 8);
        let v = normalized_vector3d_value(9, 8, yaw, pitch);
        assert!((v.z - 1.0).abs() < 0.01 && v.x.abs() < 0.01 && v.y.abs() < 0.02);
        let code = normalized_vector2d(1.0, 0.0, 8);
        let (x, y) = normalized_vector2d_value(8, code);
        assert!((x - 1.0).abs() < 0.01 && y.abs() < 0.02);
    }
}
