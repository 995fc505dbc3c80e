//! Reading RigidBodyUpdate (119) records as Tundra's client does
//! (docs/tundra-wire.md §6.1, tundra `SyncManager::HandleRigidBodyChanges`): the parts a record
//! carries turned back into the Placeable transform (Euler degrees) and the
//! RigidBody velocities it sets. Parts the record leaves out keep the
//! receiver's current values. No interpolation: these are the values the
//! C++ reader computes before its interpolator takes over.

use super::orientation::{look_at_forward, transform_rot_of_matrix, transform_rot_of_quat};
use super::rigid_body::{axis_angle_quat, RigidBodyEntityUpdate, ScaleUpdate};
use super::values::{Float3, Transform};

/// What one record sets on its entity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReceivedBody {
    /// The new Placeable transform, when the record has a position,
    /// rotation or scale part (missing parts are the current ones).
    pub transform: Option<Transform>,
    /// RigidBody linear velocity, when the record has one.
    pub linear_velocity: Option<Float3>,
    /// RigidBody angular velocity in degrees per second, when present.
    pub angular_velocity: Option<Float3>,
}

/// The rotation, in Transform's Euler degrees, of a record's rotation part:
/// send types 1 and 2 through `LookAt(unitZ, forward, unitY, unitY)`, 3 as
/// the axis-angle quaternion.
fn rotation(record: &RigidBodyEntityUpdate) -> Option<Float3> {
    if let Some(forward) = record.rotation.forward() {
        return Some(transform_rot_of_matrix(&look_at_forward(forward)));
    }
    record.rotation.quat().map(transform_rot_of_quat)
}

/// Applies `record` to an entity whose Placeable holds `current`.
pub fn receive(record: &RigidBodyEntityUpdate, current: Transform) -> ReceivedBody {
    let position = record.position.value();
    let rot = rotation(record);
    let scale = match record.scale {
        ScaleUpdate::None => None,
        ScaleUpdate::Uniform(s) => Some(Float3::new(s, s, s)),
        ScaleUpdate::Full(s) => Some(s),
    };
    let transform = (position.is_some() || rot.is_some() || scale.is_some()).then(|| Transform {
        pos: position.unwrap_or(current.pos),
        rot: rot.unwrap_or(current.rot),
        scale: scale.unwrap_or(current.scale),
    });
    // Angle code 0 is "no rotation per second": zero, as the C++ sets it.
    let angular_velocity = record.angular_velocity.map(|a| {
        if a.angle == 0 {
            Float3::default()
        } else {
            transform_rot_of_quat(axis_angle_quat(a))
        }
    });
    ReceivedBody {
        transform,
        linear_velocity: record.velocity.value(),
        angular_velocity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::ids::EntityId;
    use crate::tundra::rigid_body::RigidBodyUpdate;
    use crate::tundra::rigid_body_sender::{decide, encode_body, BodyState, DirtyFlags};

    const ALL_DIRTY: DirtyFlags = DirtyFlags {
        transform: true,
        linear_velocity: true,
        angular_velocity: true,
    };

    fn close(a: Float3, b: Float3, tolerance: f32) -> bool {
        a.distance_sq(b).sqrt() <= tolerance
    }

    /// Sender state -> record -> bytes -> record -> received values.
    fn through_the_wire(state: &BodyState) -> ReceivedBody {
        let decision = decide(&BodyState::default(), state, ALL_DIRTY);
        let record = encode_body(EntityId(3), state, &decision).unwrap();
        let bytes = RigidBodyUpdate {
            entities: vec![record],
        }
        .encode()
        .unwrap();
        let decoded = RigidBodyUpdate::decode(&bytes).unwrap();
        receive(&decoded.entities[0], Transform::default())
    }

    #[test]
    fn velocity_only_record_sets_no_transform() {
        // "050200f9ff7f": entity 5, velocity (0, 0, -1), nothing else.
        let update = RigidBodyUpdate::decode(&hex::decode("050200f9ff7f").unwrap()).unwrap();
        let got = receive(&update.entities[0], Transform::default());
        assert_eq!(got.transform, None);
        assert_eq!(got.angular_velocity, None);
        assert!(close(
            got.linear_velocity.unwrap(),
            Float3::new(0.0, 0.0, -1.0),
            1e-2
        ));
    }

    #[test]
    fn sender_values_come_back_within_the_quantization() {
        let mut state = BodyState::default();
        state.transform.pos = Float3::new(12.25, -3.5, 100.0);
        state.transform.rot = Float3::new(0.0, 45.0, 0.0); // upright: yaw, 8 bits
        state.transform.scale = Float3::new(2.0, 2.0, 2.0);
        state.linear_velocity = Float3::new(1.0, 0.0, 2.0);
        state.angular_velocity = Float3::new(0.0, 90.0, 0.0);
        let got = through_the_wire(&state);
        let t = got.transform.unwrap();
        // 11.8 fixed point: these values are exact multiples of 1/256.
        assert_eq!(t.pos, state.transform.pos);
        // 8-bit yaw over 360 degrees: a step of 1.41 degrees.
        assert!((t.rot.y - 45.0).abs() <= 1.42, "{t:?}");
        assert_eq!(t.scale, state.transform.scale);
        assert!(close(
            got.linear_velocity.unwrap(),
            state.linear_velocity,
            0.02
        ));
        // 10-bit angle over 180 degrees (0.18) and an 11/10-bit axis.
        assert!(close(
            got.angular_velocity.unwrap(),
            state.angular_velocity,
            0.5
        ));
    }

    #[test]
    fn rolled_rotation_uses_axis_angle_and_keeps_its_roll() {
        let mut state = BodyState::default();
        state.transform.rot = Float3::new(10.0, 20.0, 30.0);
        let got = through_the_wire(&state).transform.unwrap();
        assert!(close(got.rot, state.transform.rot, 0.6), "{got:?}");
        assert_eq!(got.pos, Float3::default(), "position not sent, kept");
    }
}
