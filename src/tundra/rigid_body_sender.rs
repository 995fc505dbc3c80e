//! Building RigidBodyUpdate (119) records from float state exactly as the
//! Tundra server does (docs/tundra-wire.md §6.1, tundra
//! `SyncManager::ReplicateRigidBodyChanges`): which parts changed enough to
//! send, which send type each part uses, the quantized codes, and how
//! records are packed into messages of at most 1400 bytes.
//!
//! Pure functions: the caller (the server's per-client sync state) keeps the
//! last sent state and the dirty bits, and applies [`BodyState::record_sent`]
//! after sending.

use super::bits::BitWriter;
use super::error::EncodeError;
use super::ids::EntityId;
use super::orientation::{
    deg_to_rad, fold_axis_angle, quat_from_euler_zyx, to_axis_angle, transform_matrix,
    transform_quat,
};
use super::quantize::{self, SYNC_PI};
use super::rigid_body::{
    AxisAngleCode, DirectionCode, PositionUpdate, RigidBodyEntityUpdate, RotationUpdate,
    ScaleUpdate, VectorCode, VelocityUpdate,
};
use super::values::{Float3, Transform};

/// Largest RigidBodyUpdate message (`maxMessageSizeBytes = 1400`).
pub const MAX_MESSAGE_BYTES: usize = 1400;

/// A new message starts when at most this many bits are free
/// (`maxRigidBodyMessageSizeBits = 350`, a bound on one record).
pub const MAX_RECORD_BITS: usize = 350;

/// What the receiver currently believes of a body (the server's
/// `EntitySyncState` transform and velocities), or the body's current state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BodyState {
    /// Placeable transform (rotation in Euler degrees).
    pub transform: Transform,
    /// RigidBody linear velocity (zero without a RigidBody).
    pub linear_velocity: Float3,
    /// RigidBody angular velocity in degrees per second.
    pub angular_velocity: Float3,
}

/// Which attributes are dirty for this client since the last tick:
/// Placeable attribute 0, RigidBody attributes 13 and 14.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirtyFlags {
    pub transform: bool,
    pub linear_velocity: bool,
    pub angular_velocity: bool,
}

/// The parts to send and whether the message must go reliably.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendDecision {
    pub position: bool,
    pub rotation: bool,
    pub scale: bool,
    pub velocity: bool,
    pub angular_velocity: bool,
    /// A body came to rest: Tundra sends this message reliably so the
    /// client does not extrapolate forever.
    pub reliable: bool,
}

impl SendDecision {
    /// True when anything is to be sent.
    pub fn any(&self) -> bool {
        self.position || self.rotation || self.scale || self.velocity || self.angular_velocity
    }
}

/// MathGeoLib `float3::IsZero(1e-4f)`: squared length <= 1e-4.
fn is_zero(v: Float3) -> bool {
    v.length_sq() <= 1e-4
}

/// Tundra's thresholds: position and scale move by more than sqrt(1e-3),
/// Euler rotation by more than sqrt(1e-1) degrees; velocity by at least
/// 0.1 and angular velocity by sqrt(0.1); a body coming to rest forces its
/// velocity out and makes the message reliable.
pub fn decide(last_sent: &BodyState, current: &BodyState, dirty: DirtyFlags) -> SendDecision {
    let t = &current.transform;
    let s = &last_sent.transform;
    let mut d = SendDecision {
        position: dirty.transform && t.pos.distance_sq(s.pos) > 1e-3,
        rotation: dirty.transform && t.rot.distance_sq(s.rot) > 1e-1,
        scale: dirty.transform && t.scale.distance_sq(s.scale) > 1e-3,
        velocity: dirty.linear_velocity
            && current
                .linear_velocity
                .distance_sq(last_sent.linear_velocity)
                >= 1e-2,
        angular_velocity: dirty.angular_velocity
            && current
                .angular_velocity
                .distance_sq(last_sent.angular_velocity)
                >= 1e-1,
        reliable: false,
    };
    if dirty.linear_velocity
        && is_zero(current.linear_velocity)
        && !is_zero(last_sent.linear_velocity)
    {
        d.velocity = true;
        d.reliable = true;
    }
    if dirty.angular_velocity
        && is_zero(current.angular_velocity)
        && !is_zero(last_sent.angular_velocity)
    {
        d.angular_velocity = true;
        d.reliable = true;
    }
    d
}

/// `DetectRotSendType`: 1 when upright (yaw only), 2 when there is no roll
/// and the forward vector is not near vertical, else 3.
pub fn rotation_send_type(rot_degrees: Float3) -> u32 {
    let m = transform_matrix(rot_degrees);
    let fwd = m.col(2);
    let up = m.col(1);
    let unit_y = Float3::new(0.0, 1.0, 0.0);
    // float3::unitY.Cross(col2), computed in full as MathGeoLib does.
    let plane_normal = Float3::new(
        unit_y.y * fwd.z - unit_y.z * fwd.y,
        unit_y.z * fwd.x - unit_y.x * fwd.z,
        unit_y.x * fwd.y - unit_y.y * fwd.x,
    );
    let d = plane_normal.dot(up);
    if up.dot(unit_y) >= 0.999 {
        1
    } else if d.abs() <= 0.001 && fwd.dot(unit_y).abs() < 0.95 && up.dot(unit_y) > 0.0 {
        2
    } else {
        3
    }
}

fn axis_angle_code(axis: Float3, angle: f32) -> AxisAngleCode {
    let (axis, angle) = fold_axis_angle(axis, angle, SYNC_PI);
    let code = quantize::quantize_float(0.0, SYNC_PI, 10, angle);
    let axis = (code != 0).then(|| {
        let (yaw, pitch) = quantize::normalized_vector3d(axis, 11, 10);
        DirectionCode { yaw, pitch }
    });
    AxisAngleCode { angle: code, axis }
}

fn vector_code(v: Float3, int_bits: u32) -> VectorCode {
    let (magnitude, direction) = quantize::vector3d(v, 11, 10, int_bits, 8);
    VectorCode {
        magnitude,
        direction: direction.map(|(yaw, pitch)| DirectionCode { yaw, pitch }),
    }
}

/// The record Tundra writes for these decisions, or `None` when nothing is
/// to be sent.
pub fn encode_body(
    entity_id: EntityId,
    current: &BodyState,
    decision: &SendDecision,
) -> Option<RigidBodyEntityUpdate> {
    if !decision.any() {
        return None;
    }
    let t = &current.transform;
    let position = if !decision.position {
        PositionUpdate::None
    } else if t.pos.max_abs() >= 1023.0 {
        PositionUpdate::Full(t.pos)
    } else {
        PositionUpdate::Fixed {
            x: quantize::signed_fixed(11, 8, t.pos.x),
            y: quantize::signed_fixed(11, 8, t.pos.y),
            z: quantize::signed_fixed(11, 8, t.pos.z),
        }
    };
    let rotation = if !decision.rotation {
        RotationUpdate::None
    } else {
        match rotation_send_type(t.rot) {
            1 => {
                let fwd = transform_matrix(t.rot).col(2);
                RotationUpdate::Yaw {
                    yaw: quantize::normalized_vector2d(fwd.x, fwd.z, 8),
                }
            }
            2 => {
                let fwd = transform_matrix(t.rot).col(2);
                let fwd = super::orientation::normalized(fwd);
                let (yaw, pitch) = quantize::normalized_vector3d(fwd, 9, 8);
                RotationUpdate::Forward(DirectionCode { yaw, pitch })
            }
            _ => {
                let (axis, angle) = to_axis_angle(transform_quat(t.rot));
                RotationUpdate::AxisAngle(axis_angle_code(axis, angle))
            }
        }
    };
    let scale = if !decision.scale {
        ScaleUpdate::None
    } else {
        let a = Float3::new(t.scale.x.abs(), t.scale.y.abs(), t.scale.z.abs());
        let (max, min) = (a.x.max(a.y).max(a.z), a.x.min(a.y).min(a.z));
        if max - min <= 1e-3 {
            ScaleUpdate::Uniform(t.scale.x)
        } else {
            ScaleUpdate::Full(t.scale)
        }
    };
    let v = current.linear_velocity;
    let velocity = if !decision.velocity {
        VelocityUpdate::None
    } else if v.length_sq() >= 64.0 {
        VelocityUpdate::Long(vector_code(v, 10))
    } else {
        VelocityUpdate::Short(vector_code(v, 3))
    };
    let angular_velocity = decision.angular_velocity.then(|| {
        let w = current.angular_velocity;
        let q = quat_from_euler_zyx(deg_to_rad(w.z), deg_to_rad(w.y), deg_to_rad(w.x));
        let (axis, angle) = to_axis_angle(q);
        axis_angle_code(axis, angle)
    });
    Some(RigidBodyEntityUpdate {
        entity_id,
        position,
        rotation,
        scale,
        velocity,
        angular_velocity,
    })
}

impl BodyState {
    /// Updates the receiver's view after a record was sent, as Tundra
    /// updates its `EntitySyncState` (only the parts that were sent).
    pub fn record_sent(&mut self, current: &BodyState, decision: &SendDecision) {
        if decision.position {
            self.transform.pos = current.transform.pos;
        }
        if decision.rotation {
            self.transform.rot = current.transform.rot;
        }
        if decision.scale {
            self.transform.scale = current.transform.scale;
        }
        if decision.velocity {
            self.linear_velocity = current.linear_velocity;
        }
        if decision.angular_velocity {
            self.angular_velocity = current.angular_velocity;
        }
    }
}

/// Packs records into message payloads the way Tundra does: before each
/// record, when `1400*8 - bits used <= 350`, the message is closed and a new
/// one started.
pub fn pack(records: &[RigidBodyEntityUpdate]) -> Result<Vec<Vec<u8>>, EncodeError> {
    let mut messages = Vec::new();
    let mut w = BitWriter::new();
    for record in records {
        if MAX_MESSAGE_BYTES * 8 - w.bit_len() <= MAX_RECORD_BITS {
            messages.push(std::mem::take(&mut w).finish());
        }
        record.write(&mut w)?;
    }
    if w.byte_len() > 0 {
        messages.push(w.finish());
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moving(velocity: Float3) -> BodyState {
        BodyState {
            linear_velocity: velocity,
            ..BodyState::default()
        }
    }

    #[test]
    fn ex14_velocity_minus_z_from_float_state() {
        let current = moving(Float3::new(0.0, 0.0, -1.0));
        let dirty = DirtyFlags {
            linear_velocity: true,
            ..DirtyFlags::default()
        };
        let decision = decide(&BodyState::default(), &current, dirty);
        assert!(decision.velocity && !decision.position && !decision.reliable);
        let record = encode_body(EntityId(5), &current, &decision).unwrap();
        let bytes = pack(&[record]).unwrap();
        assert_eq!(bytes.len(), 1);
        assert_eq!(hex::encode(&bytes[0]), "050200f9ff7f");
    }

    #[test]
    fn send_types_follow_the_server_rules() {
        let mut current = BodyState::default();
        current.transform.pos = Float3::new(2000.0, 0.0, 0.0);
        current.transform.rot = Float3::new(0.0, 45.0, 0.0);
        current.transform.scale = Float3::new(2.0, 2.0, 2.0);
        current.linear_velocity = Float3::new(10.0, 0.0, 0.0);
        let dirty = DirtyFlags {
            transform: true,
            linear_velocity: true,
            angular_velocity: false,
        };
        let d = decide(&BodyState::default(), &current, dirty);
        let r = encode_body(EntityId(9), &current, &d).unwrap();
        assert!(matches!(r.position, PositionUpdate::Full(_)));
        assert!(matches!(r.rotation, RotationUpdate::Yaw { .. }));
        assert_eq!(r.scale, ScaleUpdate::Uniform(2.0));
        assert!(matches!(r.velocity, VelocityUpdate::Long(_)));
        assert_eq!(r.angular_velocity, None);
        // Pitched forward without roll: 2 DOF; rolled: 3 DOF.
        assert_eq!(rotation_send_type(Float3::new(30.0, 20.0, 0.0)), 2);
        assert_eq!(rotation_send_type(Float3::new(0.0, 0.0, 30.0)), 3);
        assert_eq!(rotation_send_type(Float3::new(0.0, 0.0, 0.0)), 1);
    }

    #[test]
    fn small_changes_are_not_sent_and_rest_is_reliable() {
        let last = moving(Float3::new(1.0, 0.0, 0.0));
        let mut current = last;
        current.transform.pos.x += 0.01;
        let dirty = DirtyFlags {
            transform: true,
            linear_velocity: true,
            angular_velocity: true,
        };
        assert!(!decide(&last, &current, dirty).any());
        current.linear_velocity = Float3::default();
        let d = decide(&last, &current, dirty);
        assert!(d.velocity && d.reliable);
        let r = encode_body(EntityId(1), &current, &d).unwrap();
        assert_eq!(
            r.velocity,
            VelocityUpdate::Short(VectorCode {
                magnitude: 0,
                direction: None
            })
        );
    }

    #[test]
    fn angular_velocity_is_axis_angle_of_radians() {
        let current = BodyState {
            angular_velocity: Float3::new(0.0, 90.0, 0.0),
            ..BodyState::default()
        };
        let dirty = DirtyFlags {
            angular_velocity: true,
            ..DirtyFlags::default()
        };
        let d = decide(&BodyState::default(), &current, dirty);
        let r = encode_body(EntityId(1), &current, &d).unwrap();
        let a = r.angular_velocity.unwrap();
        // pi/2 of pi in 10 bits.
        assert_eq!(a.angle, 511);
        assert!(a.axis.is_some());
    }

    #[test]
    fn packing_splits_at_the_tundra_bound() {
        let record = RigidBodyEntityUpdate {
            entity_id: EntityId(1),
            position: PositionUpdate::Full(Float3::new(1.0, 2.0, 3.0)),
            rotation: RotationUpdate::None,
            scale: ScaleUpdate::Full(Float3::new(1.0, 1.0, 1.0)),
            velocity: VelocityUpdate::None,
            angular_velocity: None,
        };
        // 16 + 96 + 96 = 208 bits per record: (11200 - 350) / 208 -> 53 records fit.
        let messages = pack(&vec![record; 100]).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].len(), 53 * 208 / 8);
        assert!(messages.iter().all(|m| m.len() <= MAX_MESSAGE_BYTES));
    }
}
