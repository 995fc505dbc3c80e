//! The few MathGeoLib rotation routines RigidBodyUpdate depends on, in f32
//! and in the C++ operation order (tundra `Transform::Orientation3x3` /
//! `Orientation`, MathGeoLib `Set3x3PartRotateEulerZYX`,
//! `Quat::FromEulerZYX`, `Quat::ToAxisAngle`, `SetFromAxisAngle`).
//!
//! Transform rotations are Euler degrees applied as R = Rz · Ry · Rx. Only
//! what the sender's send-type selection and quantization need, and what a
//! receiver needs to turn a record back into Euler degrees (`LookAt`,
//! `ToEulerZYX`, `Transform::SetOrientation`), lives here.

use super::values::{Float3, Quat};

/// MathGeoLib `pi` as a float.
const PI: f32 = std::f32::consts::PI;

/// MathGeoLib `DegToRad`: `degrees * (pi / 180.f)`.
pub fn deg_to_rad(degrees: f32) -> f32 {
    degrees * (PI / 180.0)
}

/// MathGeoLib `RadToDeg`: `radians * (180.f / pi)`.
pub fn rad_to_deg(radians: f32) -> f32 {
    radians * (180.0 / PI)
}

/// A 3×3 rotation matrix, `m[row][col]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mat3 {
    pub m: [[f32; 3]; 3],
}

impl Mat3 {
    /// Column `c` as a vector (`float3x3::Col`).
    pub fn col(&self, c: usize) -> Float3 {
        Float3::new(self.m[0][c], self.m[1][c], self.m[2][c])
    }
}

/// `float3x3::FromEulerZYX(z, y, x)` (radians): R = Rz(z) · Ry(y) · Rx(x).
pub fn matrix_from_euler_zyx(z: f32, y: f32, x: f32) -> Mat3 {
    let (sx, cx) = x.sin_cos();
    let (sy, cy) = y.sin_cos();
    let (sz, cz) = z.sin_cos();
    Mat3 {
        m: [
            [cy * cz, cz * sx * sy - cx * sz, cx * cz * sy + sx * sz],
            [cy * sz, cx * cz + sx * sy * sz, -cz * sx + cx * sy * sz],
            [-sy, cy * sx, cx * cy],
        ],
    }
}

/// `Transform::Orientation3x3()` of Euler degrees (x, y, z).
pub fn transform_matrix(rot_degrees: Float3) -> Mat3 {
    matrix_from_euler_zyx(
        deg_to_rad(rot_degrees.z),
        deg_to_rad(rot_degrees.y),
        deg_to_rad(rot_degrees.x),
    )
}

/// `Quat::SetFromAxisAngle`.
pub fn quat_from_axis_angle(axis: Float3, angle: f32) -> Quat {
    let (s, c) = (angle / 2.0).sin_cos();
    Quat {
        x: axis.x * s,
        y: axis.y * s,
        z: axis.z * s,
        w: c,
    }
}

/// `Quat::operator*`.
pub fn quat_mul(a: Quat, r: Quat) -> Quat {
    Quat {
        x: a.w * r.x + a.x * r.w + a.y * r.z - a.z * r.y,
        y: a.w * r.y - a.x * r.z + a.y * r.w + a.z * r.x,
        z: a.w * r.z + a.x * r.y - a.y * r.x + a.z * r.w,
        w: a.w * r.w - a.x * r.x - a.y * r.y - a.z * r.z,
    }
}

/// `Quat::Normalized` (left unchanged when shorter than 1e-4).
pub fn quat_normalized(q: Quat) -> Quat {
    let length = (q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w).sqrt();
    if length < 1e-4 {
        return q;
    }
    let inv = 1.0 / length;
    Quat {
        x: q.x * inv,
        y: q.y * inv,
        z: q.z * inv,
        w: q.w * inv,
    }
}

/// `Quat::FromEulerZYX(z, y, x)` (radians).
pub fn quat_from_euler_zyx(z: f32, y: f32, x: f32) -> Quat {
    let rz = quat_from_axis_angle(Float3::new(0.0, 0.0, 1.0), z);
    let ry = quat_from_axis_angle(Float3::new(0.0, 1.0, 0.0), y);
    let rx = quat_from_axis_angle(Float3::new(1.0, 0.0, 0.0), x);
    quat_normalized(quat_mul(quat_mul(rz, ry), rx))
}

/// `Transform::Orientation()` of Euler degrees (x, y, z).
pub fn transform_quat(rot_degrees: Float3) -> Quat {
    quat_from_euler_zyx(
        deg_to_rad(rot_degrees.z),
        deg_to_rad(rot_degrees.y),
        deg_to_rad(rot_degrees.x),
    )
}

/// `Quat::ToAxisAngle`: angle `acos(w) * 2`, axis `xyz / sin(angle/2)`;
/// (1, 0, 0) and angle 0 when `|sin| <= 1e-4`.
pub fn to_axis_angle(q: Quat) -> (Float3, f32) {
    let angle = q.w.acos() * 2.0;
    let sinz = (angle / 2.0).sin();
    if sinz.abs() > 1e-4 {
        let inv = 1.0 / sinz;
        (Float3::new(q.x * inv, q.y * inv, q.z * inv), angle)
    } else {
        (Float3::new(1.0, 0.0, 0.0), 0.0)
    }
}

/// SyncManager's double-cover fold: an angle >= pi becomes `2*pi - angle`
/// with the axis negated, so the angle lies in [0, pi].
pub fn fold_axis_angle(axis: Float3, angle: f32, pi: f32) -> (Float3, f32) {
    if angle >= pi {
        (Float3::new(-axis.x, -axis.y, -axis.z), 2.0 * pi - angle)
    } else {
        (axis, angle)
    }
}

/// MathGeoLib `float3::Normalized`: (1, 0, 0) when the squared length is
/// at most 1e-6.
pub fn normalized(v: Float3) -> Float3 {
    let length_sq = v.length_sq();
    if length_sq > 1e-6 {
        let inv = 1.0 / length_sq.sqrt();
        Float3::new(v.x * inv, v.y * inv, v.z * inv)
    } else {
        Float3::new(1.0, 0.0, 0.0)
    }
}

/// `a.Cross(b)`.
fn cross(a: Float3, b: Float3) -> Float3 {
    Float3::new(
        a.y * b.z - a.z * b.y,
        a.z * b.x - a.x * b.z,
        a.x * b.y - a.y * b.x,
    )
}

/// `float3x3::LookAt(unitZ, forward, unitY, unitY)`, the orientation the
/// RigidBodyUpdate reader builds from a forward vector: columns (right, up,
/// forward) with right = `unitY × forward` and up = `forward × right`, both
/// normalized. With unit Z and Y as the local basis the C++ `m1 * m2` is
/// `m1` itself; its final `Orthonormalize` changes an already orthonormal
/// basis only in the last float bits, so it is left out.
pub fn look_at_forward(forward: Float3) -> Mat3 {
    let right = normalized(cross(Float3::new(0.0, 1.0, 0.0), forward));
    let up = normalized(cross(forward, right));
    Mat3 {
        m: [
            [right.x, up.x, forward.x],
            [right.y, up.y, forward.y],
            [right.z, up.z, forward.z],
        ],
    }
}

/// `Quat::ToFloat3x3` (MathGeoLib `SetMatrixRotatePart`).
pub fn quat_to_matrix(q: Quat) -> Mat3 {
    let (x, y, z, w) = (q.x, q.y, q.z, q.w);
    Mat3 {
        m: [
            [
                1.0 - 2.0 * (y * y + z * z),
                2.0 * (x * y - w * z),
                2.0 * (x * z + w * y),
            ],
            [
                2.0 * (x * y + w * z),
                1.0 - 2.0 * (x * x + z * z),
                2.0 * (y * z - w * x),
            ],
            [
                2.0 * (x * z - w * y),
                2.0 * (y * z + w * x),
                1.0 - 2.0 * (x * x + y * y),
            ],
        ],
    }
}

/// `float3x3::ToEulerZYX`: radians as MathGeoLib returns them, the Z angle
/// in `.x`, Y in `.y`, X in `.z`; at gimbal lock (|m20| >= 1) X is 0.
pub fn euler_zyx_of_matrix(m: &Mat3) -> Float3 {
    let m = &m.m;
    if m[2][0] < 1.0 {
        if m[2][0] > -1.0 {
            Float3::new(
                m[1][0].atan2(m[0][0]),
                (-m[2][0]).asin(),
                m[2][1].atan2(m[2][2]),
            )
        } else {
            Float3::new(-(-m[1][2]).atan2(m[1][1]), PI / 2.0, 0.0)
        }
    } else {
        Float3::new((-m[1][2]).atan2(m[1][1]), -PI / 2.0, 0.0)
    }
}

/// `Transform::SetOrientation`: the Euler degrees (x, y, z) a Transform
/// holds for a rotation matrix (inverse of [`transform_matrix`]). Also the
/// reader's angular velocity: `ToEulerZYX`, z and x swapped, `RadToDeg`.
pub fn transform_rot_of_matrix(m: &Mat3) -> Float3 {
    let r = euler_zyx_of_matrix(m);
    Float3::new(rad_to_deg(r.z), rad_to_deg(r.y), rad_to_deg(r.x))
}

/// [`transform_rot_of_matrix`] of a quaternion (`Quat::ToEulerZYX` is
/// `ToFloat3x3().ToEulerZYX()`).
pub fn transform_rot_of_quat(q: Quat) -> Float3 {
    transform_rot_of_matrix(&quat_to_matrix(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_rotation() {
        let m = transform_matrix(Float3::default());
        assert_eq!(m.col(1), Float3::new(0.0, 1.0, 0.0));
        assert_eq!(m.col(2), Float3::new(0.0, 0.0, 1.0));
        let q = transform_quat(Float3::default());
        assert_eq!(q, Quat::IDENTITY);
        assert_eq!(to_axis_angle(q), (Float3::new(1.0, 0.0, 0.0), 0.0));
    }

    #[test]
    fn yaw_of_90_degrees_turns_forward_to_plus_x() {
        let m = transform_matrix(Float3::new(0.0, 90.0, 0.0));
        let fwd = m.col(2);
        assert!((fwd.x - 1.0).abs() < 1e-6 && fwd.z.abs() < 1e-6);
        let (axis, angle) = to_axis_angle(transform_quat(Float3::new(0.0, 90.0, 0.0)));
        assert!((angle - PI / 2.0).abs() < 1e-5);
        assert!((axis.y - 1.0).abs() < 1e-5);
    }

    #[test]
    fn fold_keeps_angles_within_pi() {
        let (axis, angle) = fold_axis_angle(Float3::new(0.0, 1.0, 0.0), 1.5 * PI, PI);
        assert_eq!(axis, Float3::new(-0.0, -1.0, -0.0));
        assert!((angle - 0.5 * PI).abs() < 1e-6);
    }

    fn close(a: Float3, b: Float3, tolerance: f32) -> bool {
        (a.x - b.x).abs() <= tolerance
            && (a.y - b.y).abs() <= tolerance
            && (a.z - b.z).abs() <= tolerance
    }

    #[test]
    fn euler_degrees_survive_matrix_and_quat_round_trips() {
        for rot in [
            Float3::new(0.0, 0.0, 0.0),
            Float3::new(10.0, 20.0, 30.0),
            Float3::new(-45.0, 80.0, 170.0),
            Float3::new(0.0, -60.0, -120.0),
        ] {
            assert!(close(
                transform_rot_of_matrix(&transform_matrix(rot)),
                rot,
                1e-3
            ));
            assert!(close(transform_rot_of_quat(transform_quat(rot)), rot, 1e-3));
        }
        // Gimbal lock (pitch 90): other angles, the same rotation.
        let rot = Float3::new(0.0, 90.0, 25.0);
        let back = transform_rot_of_matrix(&transform_matrix(rot));
        assert!((back.y - 90.0).abs() < 1e-2);
        let (a, b) = (transform_matrix(rot), transform_matrix(back));
        for c in 0..3 {
            assert!(close(a.col(c), b.col(c), 1e-4));
        }
    }

    #[test]
    fn look_at_turns_unit_z_to_the_forward_vector_upright() {
        let m = look_at_forward(Float3::new(1.0, 0.0, 0.0));
        assert!(close(m.col(2), Float3::new(1.0, 0.0, 0.0), 1e-6));
        assert!(close(m.col(1), Float3::new(0.0, 1.0, 0.0), 1e-6));
        assert!(close(
            transform_rot_of_matrix(&m),
            Float3::new(0.0, 90.0, 0.0),
            1e-4
        ));
        // Straight down: right falls back to +X as MathGeoLib's Normalized.
        let down = look_at_forward(Float3::new(0.0, -1.0, 0.0));
        assert!(close(down.col(0), Float3::new(1.0, 0.0, 0.0), 1e-6));
        assert!(close(down.col(1), Float3::new(0.0, 0.0, 1.0), 1e-6));
    }
}
