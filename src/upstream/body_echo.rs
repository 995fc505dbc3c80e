//! A RigidBodyUpdate (119) that repeats what the bridge already holds
//! (docs/upstream.md §5, §7). A Tundra server sends a body's transform to
//! every native client when it changes there, including when the change is
//! the bridge's own edit written back by the server's physics: the value
//! the bridge sent comes back quantized (a yaw of 90 as (180, 89.294,
//! 180), a position within 1/256). Taking it would replace the owner's
//! exact value by a lossy copy of itself: a federation entity's authority
//! would be told a changed value nobody set, a world entity's copy would
//! lose what the node's clients wrote.
//!
//! A record part repeats a value when the server's own sender
//! (`rigid_body_sender::encode_body`, Tundra's
//! `ReplicateRigidBodyChanges`) writes exactly that part for the value the
//! bridge holds: the same quantized codes, or for the parts sent as f32
//! (a position beyond 1023, scale) the same floats up to f32 rounding. Such
//! a part carries nothing new and the held value stays; any other part is
//! a real change, however small, and is taken as received.
//!
//! Pure functions over records and body states.

use crate::tundra::rigid_body::{PositionUpdate, RigidBodyEntityUpdate, ScaleUpdate};
use crate::tundra::rigid_body_receiver::ReceivedBody;
use crate::tundra::rigid_body_sender::{encode_body, BodyState, SendDecision};
use crate::tundra::values::{Float3, Transform};

/// Which parts of a record repeat the held body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Repeated {
    pub position: bool,
    pub rotation: bool,
    pub scale: bool,
    pub velocity: bool,
    pub angular_velocity: bool,
}

/// Floats sent as f32 that a server's float arithmetic may have rounded.
fn close(a: Float3, b: Float3) -> bool {
    let near = |x: f32, y: f32| (x - y).abs() <= 1e-5 * x.abs().max(y.abs()).max(1.0);
    near(a.x, b.x) && near(a.y, b.y) && near(a.z, b.z)
}

fn same_position(got: &PositionUpdate, held: &PositionUpdate) -> bool {
    match (got, held) {
        (PositionUpdate::Full(a), PositionUpdate::Full(b)) => close(*a, *b),
        _ => got == held,
    }
}

fn same_scale(got: &ScaleUpdate, held: &ScaleUpdate) -> bool {
    match (got, held) {
        (ScaleUpdate::Uniform(a), ScaleUpdate::Uniform(b)) => {
            close(Float3::new(*a, 0.0, 0.0), Float3::new(*b, 0.0, 0.0))
        }
        (ScaleUpdate::Full(a), ScaleUpdate::Full(b)) => close(*a, *b),
        _ => got == held,
    }
}

/// The parts of `record` that the server would have written for `held`.
pub(super) fn repeated_parts(record: &RigidBodyEntityUpdate, held: &BodyState) -> Repeated {
    let parts = SendDecision {
        position: record.position != PositionUpdate::None,
        rotation: record.rotation.send_type() != 0,
        scale: record.scale != ScaleUpdate::None,
        velocity: record.velocity.send_type() != 0,
        angular_velocity: record.angular_velocity.is_some(),
        reliable: false,
    };
    let Some(expected) = encode_body(record.entity_id, held, &parts) else {
        return Repeated::default();
    };
    Repeated {
        position: parts.position && same_position(&record.position, &expected.position),
        rotation: parts.rotation && record.rotation == expected.rotation,
        scale: parts.scale && same_scale(&record.scale, &expected.scale),
        velocity: parts.velocity && record.velocity == expected.velocity,
        angular_velocity: parts.angular_velocity
            && record.angular_velocity == expected.angular_velocity,
    }
}

/// What `record` sets once its repeated parts keep the held values: no
/// transform when every transform part it carries repeats, no velocity
/// when it repeats. `received` was read with `held.transform` as the
/// current transform, so the parts the record leaves out are held ones.
pub(super) fn news(
    record: &RigidBodyEntityUpdate,
    received: ReceivedBody,
    held: &BodyState,
) -> ReceivedBody {
    let repeated = repeated_parts(record, held);
    let transform = received.transform.and_then(|t| {
        let changed = (record.position != PositionUpdate::None && !repeated.position)
            || (record.rotation.send_type() != 0 && !repeated.rotation)
            || (record.scale != ScaleUpdate::None && !repeated.scale);
        changed.then_some(Transform {
            pos: if repeated.position {
                held.transform.pos
            } else {
                t.pos
            },
            rot: if repeated.rotation {
                held.transform.rot
            } else {
                t.rot
            },
            scale: if repeated.scale {
                held.transform.scale
            } else {
                t.scale
            },
        })
    });
    ReceivedBody {
        transform,
        linear_velocity: received.linear_velocity.filter(|_| !repeated.velocity),
        angular_velocity: received
            .angular_velocity
            .filter(|_| !repeated.angular_velocity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::ids::EntityId;
    use crate::tundra::rigid_body_receiver::receive;

    const ALL: SendDecision = SendDecision {
        position: true,
        rotation: true,
        scale: true,
        velocity: true,
        angular_velocity: true,
        reliable: false,
    };

    fn body(pos: Float3, rot: Float3, v: Float3) -> BodyState {
        BodyState {
            transform: Transform {
                pos,
                rot,
                scale: Float3::new(1.0, 2.0, 1.0),
            },
            linear_velocity: v,
            angular_velocity: Float3::new(0.0, 30.0, 0.0),
        }
    }

    fn through(record: &RigidBodyEntityUpdate, held: &BodyState) -> ReceivedBody {
        news(record, receive(record, held.transform), held)
    }

    #[test]
    fn a_body_sent_back_as_it_was_held_sets_nothing() {
        let v = Float3::new(0.5, 0.0, -1.0);
        for (pos, rot) in [
            (Float3::new(4.0, 0.1, -3.3), Float3::new(0.0, 90.0, 0.0)),
            (Float3::new(1500.5, 2.0, 3.0), Float3::new(30.0, 20.0, 0.0)),
            (
                Float3::new(-7.25, 1.0, 0.0),
                Float3::new(-20.0, 135.0, 45.0),
            ),
        ] {
            let held = body(pos, rot, v);
            let record = encode_body(EntityId(5), &held, &ALL).unwrap();
            let got = through(&record, &held);
            assert_eq!(got.transform, None, "{pos:?} {rot:?}");
            assert_eq!(got.linear_velocity, None);
            assert_eq!(got.angular_velocity, None);
        }
    }

    #[test]
    fn a_changed_part_is_taken_and_the_repeated_ones_stay_exact() {
        let held = body(
            Float3::new(4.0, 0.0, 0.0),
            Float3::new(-20.0, 135.0, 45.0),
            Float3::default(),
        );
        let mut moved = held;
        moved.transform.pos.y = -0.5;
        let record = encode_body(EntityId(5), &moved, &ALL).unwrap();
        let t = through(&record, &held).transform.expect("a move");
        assert_eq!(t.pos, moved.transform.pos);
        assert_eq!(t.rot, held.transform.rot, "the held rotation, exact");
        assert_eq!(t.scale, held.transform.scale);
    }

    #[test]
    fn one_quantization_step_is_a_change() {
        let held = body(
            Float3::new(4.0, 0.0, 0.0),
            Float3::default(),
            Float3::default(),
        );
        let mut nudged = held;
        nudged.transform.pos.x += 1.0 / 256.0;
        let parts = SendDecision {
            position: true,
            ..SendDecision::default()
        };
        let record = encode_body(EntityId(5), &nudged, &parts).unwrap();
        assert_eq!(
            through(&record, &held).transform.map(|t| t.pos),
            Some(nudged.transform.pos)
        );
    }
}
