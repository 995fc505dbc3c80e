//! Bytes per transform update on the peer link (docs/less-wire.md §16.6):
//! one LESS update of a Placeable transform, plain (update-entity, and the
//! keyed update-property of 16.8) and in the link's transform encoding (keyed),
//! against what Tundra sends for the same change:
//! EditAttributes (113) and RigidBodyUpdate (119), both built by this
//! project's Tundra encoder as WebSocket frames (u16 id + payload). Also the
//! worst position and rotation error of the compact encoding and of
//! RigidBodyUpdate over the same motion.

use lessgate::federation::mapping::attribute_key;
use lessgate::federation::schemas::schema_registry;
use lessgate::federation::values::to_less;
use lessgate::less::encoding::link::{offered_features, UPDATE_PROPERTY_FEATURE};
use lessgate::less::encoding::rotation::{angle_between_degrees, quat_from_euler_degrees};
use lessgate::less::encoding::LinkEncodings;
use lessgate::less::ids::{Local, ObjectId, Remote};
use lessgate::less::message::Message;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::value::Value;
use lessgate::tundra::messages::{EditAttributes, EditAttributesBlock};
use lessgate::tundra::rigid_body::RigidBodyUpdate;
use lessgate::tundra::rigid_body::{PositionUpdate, RotationUpdate};
use lessgate::tundra::rigid_body_sender::{encode_body, BodyState, SendDecision};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentId, EntityId, Message as TundraMessage,
    ProtocolVersion, Registry,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Default, Debug)]
struct Tally {
    plain: usize,
    plain_keyed: usize,
    compact: usize,
    edit_attributes: usize,
    rigid_body: usize,
    compact_position_error: f32,
    compact_rotation_error: f64,
    rigid_position_error: f32,
    rigid_rotation_error: f64,
    samples: usize,
}

fn quat_of(q: lessgate::tundra::values::Quat) -> [f64; 4] {
    [q.x, q.y, q.z, q.w].map(f64::from)
}

fn measure(transforms: &[Transform]) -> Tally {
    let registry = Registry::builtin();
    let schemas = schema_registry(&registry);
    let placeable = schemas
        .get("urn:lessgate:tundra:component:Placeable")
        .unwrap()
        .clone();
    let link = LinkEncodings::from_features(&offered_features(), schemas.encoding_rules().to_vec());
    let keyed_only = LinkEncodings::from_features(
        &[UPDATE_PROPERTY_FEATURE.to_owned()],
        schemas.encoding_rules().to_vec(),
    );
    let no_features = LinkEncodings::plain();
    let slots = registry.get(20).unwrap().slot_types();
    let key = attribute_key(0);
    let mut tally = Tally::default();
    for t in transforms {
        let value = to_less(&AttributeValue::Transform(*t), &|_| Value::Null);
        let message = |value: Value, on: &LinkEncodings| {
            Message::<Local, Remote>::UpdateEntity {
                entity: ObjectId::new(5),
                values: vec![PropertyValue {
                    key: key.clone(),
                    value,
                }],
            }
            .to_bytes_on(on)
            .len()
        };
        tally.plain += message(value.clone(), &no_features);
        tally.plain_keyed += message(value.clone(), &keyed_only);
        let wire = link.to_wire(&placeable, &key, &value);
        tally.compact += message(wire.clone(), &link);
        let Value::FixedBinary(bytes) = wire else {
            panic!("the transform is encoded")
        };
        let decoded = link
            .for_property(&placeable, &key)
            .expect("the transform is encoded")
            .decode(&mut lessgate::less::codec::Reader::new(&bytes))
            .unwrap();
        let Value::Floats(f) = decoded else {
            unreachable!()
        };
        for (a, b) in [t.pos.x, t.pos.y, t.pos.z].iter().zip(&f[0..3]) {
            tally.compact_position_error = tally.compact_position_error.max((a - b).abs());
        }
        let original = quat_from_euler_degrees([t.rot.x, t.rot.y, t.rot.z]);
        tally.compact_rotation_error = tally.compact_rotation_error.max(angle_between_degrees(
            original,
            quat_from_euler_degrees([f[3], f[4], f[5]]),
        ));

        let edit = TundraMessage::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: EntityId(5),
            blocks: vec![EditAttributesBlock::encode(
                ComponentId(3),
                &[AttributeEdit {
                    index: 0,
                    value: AttributeValue::Transform(*t),
                }],
                &slots,
            )
            .unwrap()],
        });
        tally.edit_attributes += edit.encode_frame(ProtocolVersion(3)).unwrap().len();
        let state = BodyState {
            transform: *t,
            ..BodyState::default()
        };
        let decision = SendDecision {
            position: true,
            rotation: true,
            ..SendDecision::default()
        };
        let record = encode_body(EntityId(5), &state, &decision).unwrap();
        if let PositionUpdate::Fixed { .. } = record.position {
            let p = record.position.value().unwrap();
            for (a, b) in [(t.pos.x, p.x), (t.pos.y, p.y), (t.pos.z, p.z)] {
                tally.rigid_position_error = tally.rigid_position_error.max((a - b).abs());
            }
        }
        if let RotationUpdate::AxisAngle(_) = record.rotation {
            let q = quat_of(record.rotation.quat().unwrap());
            tally.rigid_rotation_error = tally
                .rigid_rotation_error
                .max(angle_between_degrees(original, q));
        }
        let frame = TundraMessage::RigidBodyUpdate(RigidBodyUpdate {
            entities: vec![record],
        });
        tally.rigid_body += frame.encode_frame(ProtocolVersion(3)).unwrap().len();
        tally.samples += 1;
    }
    tally
}

fn per_update(total: usize, tally: &Tally) -> f64 {
    total as f64 / tally.samples as f64
}

#[test]
fn general_motion_bytes_and_precision() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let transforms: Vec<Transform> = (0..2000)
        .map(|_| Transform {
            pos: Float3::new(
                rng.gen_range(-500.0..500.0),
                rng.gen_range(-500.0..500.0),
                rng.gen_range(-500.0..500.0),
            ),
            rot: Float3::new(
                rng.gen_range(-179.0..179.0),
                rng.gen_range(-89.0..89.0),
                rng.gen_range(-179.0..179.0),
            ),
            scale: Float3::new(1.0, 1.0, 1.0),
        })
        .collect();
    let t = measure(&transforms);
    eprintln!(
        "general: plain {:.2} plain keyed {:.2} compact {:.2} EditAttributes {:.2} RigidBodyUpdate {:.2} bytes; \
         position error compact {:.5} rigid {:.5}; rotation error compact {:.3}° rigid {:.3}°",
        per_update(t.plain, &t),
        per_update(t.plain_keyed, &t),
        per_update(t.compact, &t),
        per_update(t.edit_attributes, &t),
        per_update(t.rigid_body, &t),
        t.compact_position_error,
        t.rigid_position_error,
        t.compact_rotation_error,
        t.rigid_rotation_error,
    );
    assert!(t.plain <= t.edit_attributes, "{t:?}");
    assert!(t.plain_keyed < t.plain, "{t:?}");
    assert!(t.compact * 2 < t.plain, "{t:?}");
    // The target of docs/less-wire.md §16.6: no more bytes than
    // RigidBodyUpdate, at equal or better precision (asserted below).
    assert!(t.compact <= t.rigid_body, "{t:?}");
    assert!(t.compact_position_error <= t.rigid_position_error, "{t:?}");
    assert!(t.compact_rotation_error <= t.rigid_rotation_error, "{t:?}");
}

#[test]
fn yaw_only_motion_bytes() {
    let transforms: Vec<Transform> = (0..720)
        .map(|i| Transform {
            pos: Float3::new(i as f32 * 0.1, 0.0, 3.0),
            rot: Float3::new(0.0, i as f32 * 0.5 - 180.0, 0.0),
            scale: Float3::new(1.0, 1.0, 1.0),
        })
        .collect();
    let t = measure(&transforms);
    eprintln!(
        "yaw: plain {:.2} plain keyed {:.2} compact {:.2} EditAttributes {:.2} RigidBodyUpdate {:.2} bytes; \
         position error compact {:.5} rigid {:.5}; rotation error compact {:.3}°",
        per_update(t.plain, &t),
        per_update(t.plain_keyed, &t),
        per_update(t.compact, &t),
        per_update(t.edit_attributes, &t),
        per_update(t.rigid_body, &t),
        t.compact_position_error,
        t.rigid_position_error,
        t.compact_rotation_error,
    );
    assert!(t.plain <= t.edit_attributes, "{t:?}");
    assert!(t.compact <= t.rigid_body, "{t:?}");
    assert!(t.compact_position_error <= t.rigid_position_error, "{t:?}");
}
