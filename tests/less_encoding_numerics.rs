//! The arithmetic docs/less-wire.md §16.3 states for the compact encodings,
//! one statement per test, so that an implementation from the document and
//! this encoder produce the same bytes: rounding half away from zero, the
//! inclusive range on the rounded fixed-point code, the Euclidean yaw code
//! and its +180 decoding, negative zero, the smallest-three tie and sign
//! rules, and the quaternion convention.

use lessgate::less::encoding::bits::{BitReader, BitWriter};
use lessgate::less::encoding::position::{decode_position, encode_position};
use lessgate::less::encoding::rotation::{
    quat_from_euler_degrees, read_yaw, write_smallest_three, write_yaw,
};
use lessgate::less::encoding::transform::{self, Layout};

const IDENTITY_ROTATION_UNIT_SCALE: [f32; 6] = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];

fn with_position(p: [f32; 3]) -> [f32; 9] {
    let r = IDENTITY_ROTATION_UNIT_SCALE;
    [p[0], p[1], p[2], r[0], r[1], r[2], r[3], r[4], r[5]]
}

/// The yaw code written for `degrees` (12 bits).
fn yaw_code(degrees: f32) -> u64 {
    let mut w = BitWriter::new();
    write_yaw(&mut w, degrees);
    let bytes = w.finish();
    BitReader::new(&bytes).read(12).unwrap()
}

#[test]
fn fixed_point_rounds_half_away_from_zero() {
    // c · 256 = ±0.5 exactly: half away from zero gives ±1 (ties to even
    // would give 0).
    let half_step = 0.5 / 256.0;
    let decoded = decode_position(&encode_position([half_step, -half_step, 0.0])).unwrap();
    assert_eq!(decoded, [1.0 / 256.0, -1.0 / 256.0, 0.0]);
    // 1.5 steps: 2 either way; 2.5 steps: 3 (ties to even: 2).
    let decoded =
        decode_position(&encode_position([1.5 / 256.0, 2.5 / 256.0, -2.5 / 256.0])).unwrap();
    assert_eq!(decoded, [2.0 / 256.0, 3.0 / 256.0, -3.0 / 256.0]);
}

#[test]
fn the_fixed_point_range_is_tested_on_the_rounded_code() {
    // 131071 / 256: the largest code, fixed (7 bytes).
    assert_eq!(encode_position([131_071.0 / 256.0, 0.0, 0.0]).len(), 7);
    // 131071.5 / 256 rounds to 131072: out of range, float form (13 bytes).
    assert_eq!(encode_position([131_071.5 / 256.0, 0.0, 0.0]).len(), 13);
    // -512 is code -131072, the smallest: fixed.
    assert_eq!(encode_position([-512.0, 0.0, 0.0]).len(), 7);
    // -131072.5 / 256 rounds to -131073: float.
    assert_eq!(encode_position([-131_072.5 / 256.0, 0.0, 0.0]).len(), 13);
    // Not finite: float, the bits kept.
    let nan = encode_position([f32::NAN, 0.0, 0.0]);
    assert_eq!(nan.len(), 13);
    assert!(decode_position(&nan).unwrap()[0].is_nan());
}

#[test]
fn yaw_codes_are_euclidean_and_180_decodes_positive() {
    assert_eq!(yaw_code(-90.0), 3072);
    assert_eq!(yaw_code(90.0), 1024);
    assert_eq!(yaw_code(-180.0), 2048);
    assert_eq!(yaw_code(180.0), 2048);
    assert_eq!(yaw_code(450.0), 1024);
    let decode = |code: u64| {
        let mut w = BitWriter::new();
        w.write(code, 12);
        let bytes = w.finish();
        read_yaw(&mut BitReader::new(&bytes)).unwrap()
    };
    assert_eq!(decode(2048), 180.0);
    assert_eq!(decode(2049), 2049.0 * 360.0 / 4096.0 - 360.0);
    assert_eq!(decode(3072), -90.0);
}

#[test]
fn negative_zero_equals_zero_in_the_form_tests() {
    let plain = transform::encode(
        Layout::Quaternion,
        [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
    );
    let signed = transform::encode(
        Layout::Quaternion,
        [1.0, 2.0, 3.0, -0.0, 0.0, -0.0, 1.0, 1.0, 1.0],
    );
    // (−0, 0, −0) is "no rotation": the same 8 bytes.
    assert_eq!(plain, signed);
    assert_eq!(plain.len(), 8);
    // So it is in `tundra-transform/2`, which carries the angles.
    let angles = |r: [f32; 3]| {
        transform::encode(
            Layout::Angles,
            [1.0, 2.0, 3.0, r[0], r[1], r[2], 1.0, 1.0, 1.0],
        )
    };
    assert_eq!(angles([0.0, 0.0, 0.0]), angles([-0.0, 0.0, -0.0]));
    // (−0, 90, 0) takes the yaw form (12 bits more).
    let yaw = transform::encode(
        Layout::Quaternion,
        [0.0, 0.0, 0.0, -0.0, 90.0, 0.0, 1.0, 1.0, 1.0],
    );
    assert_eq!(yaw[0] & 0b110, 0b010, "rotation form 1 (yaw)");
    // A scale (0, −0, 0) is uniform: three copies of the first component.
    let scale = transform::encode(
        Layout::Quaternion,
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.0],
    );
    assert_eq!((scale[0] >> 3) & 0b11, 1, "scale form 1 (uniform)");
    let decoded = transform::decode(Layout::Quaternion, &scale).unwrap();
    assert!(decoded[6..].iter().all(|c| c.to_bits() == 0), "{decoded:?}");
    // A fixed-point −0 decodes as +0.
    let position = decode_position(&encode_position([-0.0, 0.0, 0.0])).unwrap();
    assert_eq!(position[0].to_bits(), 0);
    // The float form keeps the sign bit.
    let floats = transform::decode(
        Layout::Quaternion,
        &transform::encode(
            Layout::Quaternion,
            with_position([-0.0, f32::INFINITY, 0.0]),
        ),
    )
    .unwrap();
    assert_eq!(floats[0].to_bits(), (-0.0f32).to_bits());
}

#[test]
fn smallest_three_ties_keep_the_lowest_index_and_negate_only_when_negative() {
    let written = |q: [f64; 4]| {
        let mut w = BitWriter::new();
        write_smallest_three(&mut w, q).unwrap();
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        let index = r.read(2).unwrap();
        let codes: Vec<u64> = (0..3).map(|_| r.read(10).unwrap()).collect();
        (index, codes)
    };
    // All four equal: x (index 0) is the largest.
    let (index, codes) = written([0.5, 0.5, 0.5, 0.5]);
    assert_eq!(index, 0);
    // round(0.5 · √2 · 511) = round(361.33) = 361, plus 511.
    assert_eq!(codes, [872, 872, 872]);
    // x negative: q is negated, so the others become −0.5: 511 − 361.
    let (index, codes) = written([-0.5, 0.5, 0.5, 0.5]);
    assert_eq!(index, 0);
    assert_eq!(codes, [150, 150, 150]);
}

#[test]
fn euler_angles_compose_as_rz_ry_rx_in_xyzw_order() {
    let s = std::f64::consts::FRAC_1_SQRT_2;
    let close = |a: [f64; 4], b: [f64; 4]| a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-12);
    // A quarter turn about x: (sin 45°, 0, 0, cos 45°).
    let qx = quat_from_euler_degrees([90.0, 0.0, 0.0]);
    assert!(close(qx, [s, 0.0, 0.0, s]), "{qx:?}");
    let qz = quat_from_euler_degrees([0.0, 0.0, 90.0]);
    assert!(close(qz, [0.0, 0.0, s, s]), "{qz:?}");
    // x = z = 90: q = q_z · q_x (Hamilton) = (½, ½, ½, ½), which maps the
    // x axis to y (Rx leaves it, then Rz turns it).
    let q = quat_from_euler_degrees([90.0, 0.0, 90.0]);
    assert!(close(q, [0.5, 0.5, 0.5, 0.5]), "{q:?}");
}
