//! RigidBodyUpdate (119) from the world server: world entities move in the
//! node's scene exactly as an EditAttributes of the same values moves them.
//!
//! Records are built by the sender code our own server uses
//! (`rigid_body_sender::encode_body`), so each case names the send types it
//! covers. Tolerances follow from the quantization of docs/tundra-wire.md §6.1; kNet
//! truncates, so each is one quantization step:
//! - position type 1 (signed 11.8 fixed point): 1/256 per coordinate;
//!   type 2 and scale are f32: exact;
//! - rotation type 1 (8-bit yaw over 2π): 360/255 = 1.412°; type 2 (yaw 9
//!   bits, pitch 8 bits): 0.705° and 0.706°, together at most 1.0° off the
//!   forward vector (no roll is sent, none is lost); type 3 (10-bit angle
//!   over π, 11/10-bit axis): 0.176° of angle, the axis 0.25° off, which
//!   moves a point by at most twice that: 0.68°. Rotations are compared as
//!   matrices (a column moves by at most the angle in radians), since
//!   Tundra's Euler form names some rotations by other angles (yaw 123° is
//!   read back as (180, 57, 180));
//! - velocity (magnitude 8 fraction bits, direction 11/10 bits): 1/256 plus
//!   |v| × 0.25° in radians; angular velocity about one axis: the 0.176°
//!   angle step plus |ω| × 0.25° in radians, doubled for the Euler form.

use super::tests::{ack, bridge, created, frame, logged_in, sent};
use super::*;
use crate::clock::Time;
use crate::scene::{ChangeKind, ChangeSource, Origin, Scene};
use crate::tundra::messages::{CreateEntity, EditAttributes, EditAttributesBlock};
use crate::tundra::orientation::{deg_to_rad, transform_matrix};
use crate::tundra::rigid_body::{RigidBodyEntityUpdate, RigidBodyUpdate};
use crate::tundra::rigid_body_sender::{encode_body, BodyState, SendDecision};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, EntityId, Message, Registry,
};

const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
const NAME: u32 = 26;
const WORLD_ID: EntityId = EntityId(7);

/// Where world entity 7 starts: a non-unit scale, so keeping it shows.
const START: Transform = Transform {
    pos: Float3::new(1.0, 2.0, 3.0),
    rot: Float3::new(0.0, 0.0, 0.0),
    scale: Float3::new(2.0, 3.0, 4.0),
};

/// Placeable, RigidBody and Name with ids from `first`.
fn body_components(first: u32, at: Transform) -> Vec<ComponentData> {
    let registry = Registry::builtin();
    [
        (first, PLACEABLE),
        (first + 1, RIGID_BODY),
        (first + 2, NAME),
    ]
    .into_iter()
    .map(|(id, type_id)| {
        let schema = registry.get(type_id).unwrap();
        let mut values = schema.default_values();
        match type_id {
            PLACEABLE => values[0] = AttributeValue::Transform(at),
            NAME => values[0] = AttributeValue::String("crate".into()),
            _ => {}
        }
        ComponentData::with_values(ComponentId(id), schema, values)
    })
    .collect()
}

/// Logged in, with world entity 7 mirrored at [`START`]; journal empty.
fn world() -> (Bridge, Scene, EntityId) {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let create = Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: WORLD_ID,
        temporary: false,
        parent: Some(EntityId(0)),
        components: body_components(1, START),
    });
    b.handle_frame(Time::ZERO, &frame(create), &mut scene);
    let local = b.ids().mirrored(WORLD_ID).unwrap().local;
    scene.take_journal();
    (b, scene, local)
}

fn update(records: Vec<RigidBodyEntityUpdate>) -> Vec<u8> {
    frame(Message::RigidBodyUpdate(RigidBodyUpdate {
        entities: records,
    }))
}

fn value(scene: &Scene, local: EntityId, type_id: u32, index: u8) -> AttributeValue {
    let entity = scene.entity(local).unwrap();
    let component = entity.component_of_type(type_id).unwrap();
    component.attribute(index).unwrap().value.clone()
}

fn transform(scene: &Scene, local: EntityId) -> Transform {
    match value(scene, local, PLACEABLE, 0) {
        AttributeValue::Transform(t) => t,
        other => panic!("a Transform: {other:?}"),
    }
}

fn velocity(scene: &Scene, local: EntityId, index: u8) -> Float3 {
    match value(scene, local, RIGID_BODY, index) {
        AttributeValue::Float3(v) => v,
        other => panic!("a float3: {other:?}"),
    }
}

/// The journal as (component type, attribute index), each checked to be
/// the bridge's own (source Node): what the node's clients and peers are
/// sent from, as for a world-server EditAttributes.
fn node_changes(scene: &mut Scene, local: EntityId) -> Vec<(u32, u8)> {
    let journal = scene.take_journal();
    journal
        .iter()
        .map(|change| {
            assert_eq!(change.source, ChangeSource::Node);
            let ChangeKind::AttributeChanged(entity, component, index) = change.kind else {
                panic!("an attribute change: {change:?}");
            };
            assert_eq!(entity, local);
            let type_id = scene
                .entity(local)
                .unwrap()
                .components
                .get(&component)
                .unwrap()
                .type_id;
            (type_id, index)
        })
        .collect()
}

fn rotation_close(got: Float3, want: Float3, tolerance_deg: f32) -> bool {
    let (a, b) = (transform_matrix(got), transform_matrix(want));
    (0..3).all(|c| a.col(c).distance_sq(b.col(c)).sqrt() <= deg_to_rad(tolerance_deg))
}

fn within(got: Float3, want: Float3, tolerance: f32) -> bool {
    got.distance_sq(want).sqrt() <= tolerance
}

const NOTHING: SendDecision = SendDecision {
    position: false,
    rotation: false,
    scale: false,
    velocity: false,
    angular_velocity: false,
    reliable: false,
};

struct Case {
    state: BodyState,
    parts: SendDecision,
    /// Expected position and rotation send types.
    types: (u32, u32),
    rotation_tolerance_deg: f32,
    changed: &'static [(u32, u8)],
}

fn cases() -> Vec<Case> {
    let body = |pos, rot, scale, v, w| BodyState {
        transform: Transform { pos, rot, scale },
        linear_velocity: v,
        angular_velocity: w,
    };
    let zero = Float3::default();
    vec![
        // Fixed-point position, yaw only; scale and velocities kept.
        Case {
            state: body(
                Float3::new(10.3, -2.2, 500.7),
                Float3::new(0.0, 123.0, 0.0),
                START.scale,
                zero,
                zero,
            ),
            parts: SendDecision {
                position: true,
                rotation: true,
                ..NOTHING
            },
            types: (1, 1),
            rotation_tolerance_deg: 1.42,
            changed: &[(PLACEABLE, 0)],
        },
        // Full position, forward vector, uniform scale, short velocity,
        // angular velocity about Y.
        Case {
            state: body(
                Float3::new(1500.25, 3.0, -2000.5),
                Float3::new(30.0, 20.0, 0.0),
                Float3::new(0.5, 0.5, 0.5),
                Float3::new(1.0, -2.0, 0.5),
                Float3::new(0.0, 90.0, 0.0),
            ),
            parts: SendDecision {
                position: true,
                rotation: true,
                scale: true,
                velocity: true,
                angular_velocity: true,
                reliable: false,
            },
            types: (2, 2),
            rotation_tolerance_deg: 1.0,
            changed: &[(PLACEABLE, 0), (RIGID_BODY, 13), (RIGID_BODY, 14)],
        },
        // No position (kept), axis-angle, full scale, long velocity,
        // angular velocity about X.
        Case {
            state: body(
                START.pos,
                Float3::new(10.0, 20.0, 30.0),
                Float3::new(1.0, 2.0, 3.0),
                Float3::new(20.0, 0.0, -15.0),
                Float3::new(45.0, 0.0, 0.0),
            ),
            parts: SendDecision {
                rotation: true,
                scale: true,
                velocity: true,
                angular_velocity: true,
                ..NOTHING
            },
            types: (0, 3),
            rotation_tolerance_deg: 0.68,
            changed: &[(PLACEABLE, 0), (RIGID_BODY, 13), (RIGID_BODY, 14)],
        },
        // Velocity only: the transform is not touched.
        Case {
            state: body(
                START.pos,
                START.rot,
                START.scale,
                Float3::new(0.0, 0.0, -1.0),
                zero,
            ),
            parts: SendDecision {
                velocity: true,
                ..NOTHING
            },
            types: (0, 0),
            rotation_tolerance_deg: 0.0,
            changed: &[(RIGID_BODY, 13)],
        },
    ]
}

#[test]
fn world_entities_move_by_rigid_body_updates() {
    for (n, case) in cases().into_iter().enumerate() {
        let (mut b, mut scene, local) = world();
        let record = encode_body(WORLD_ID, &case.state, &case.parts).unwrap();
        let types = (record.position.send_type(), record.rotation.send_type());
        assert_eq!(types, case.types, "case {n}");
        b.handle_frame(Time::ZERO, &update(vec![record]), &mut scene);

        let want = case.state.transform;
        let got = transform(&scene, local);
        let coordinates = [
            (got.pos.x, want.pos.x),
            (got.pos.y, want.pos.y),
            (got.pos.z, want.pos.z),
        ];
        for (g, w) in coordinates {
            assert!((g - w).abs() <= 1.0 / 256.0, "case {n}: {got:?}");
        }
        if types.0 == 2 {
            assert_eq!(got.pos, want.pos, "f32 positions are exact");
        }
        let rot_tolerance = case.rotation_tolerance_deg + 1e-3;
        assert!(
            rotation_close(got.rot, want.rot, rot_tolerance),
            "case {n}: {got:?}"
        );
        assert_eq!(got.scale, want.scale, "case {n}: scale exact or kept");
        let v = case.state.linear_velocity;
        let v_tolerance = 1.0 / 256.0 + v.length_sq().sqrt() * deg_to_rad(0.25);
        assert!(
            within(velocity(&scene, local, 13), v, v_tolerance),
            "case {n}"
        );
        let w = case.state.angular_velocity;
        let w_tolerance = 0.18 + 2.0 * w.length_sq().sqrt() * deg_to_rad(0.25);
        assert!(
            within(velocity(&scene, local, 14), w, w_tolerance),
            "case {n}"
        );

        assert_eq!(node_changes(&mut scene, local), case.changed, "case {n}");
        assert!(sent(&mut b).is_empty(), "the world's own values go nowhere");
    }
}

#[test]
fn a_rigid_body_update_equals_the_edit_attributes_of_its_values() {
    let case = &cases()[1];
    let (mut b, mut scene, local) = world();
    let record = encode_body(WORLD_ID, &case.state, &case.parts).unwrap();
    b.handle_frame(Time::ZERO, &update(vec![record]), &mut scene);
    let by_119 = scene.take_journal();

    let (mut b2, mut scene2, local2) = world();
    let edit = |index, value: AttributeValue| AttributeEdit { index, value };
    let block = |component: u32, type_id: u32, edits: &[AttributeEdit]| {
        let slots = scene2.registry().get(type_id).unwrap().slot_types();
        EditAttributesBlock::encode(ComponentId(component), edits, &slots).unwrap()
    };
    let blocks = vec![
        block(1, PLACEABLE, &[edit(0, value(&scene, local, PLACEABLE, 0))]),
        block(
            2,
            RIGID_BODY,
            &[
                edit(13, value(&scene, local, RIGID_BODY, 13)),
                edit(14, value(&scene, local, RIGID_BODY, 14)),
            ],
        ),
    ];
    let message = Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: WORLD_ID,
        blocks,
    });
    b2.handle_frame(Time::ZERO, &frame(message), &mut scene2);
    assert_eq!(scene2.take_journal(), by_119);
    assert_eq!(scene2.entity(local2), scene.entity(local));
}

#[test]
fn records_for_unknown_entities_are_skipped_and_the_rest_applied() {
    let (mut b, mut scene, local) = world();
    let mut state = BodyState::default();
    state.transform.pos = Float3::new(5.0, 6.0, 7.0);
    let parts = SendDecision {
        position: true,
        ..NOTHING
    };
    let unknown = encode_body(EntityId(99), &state, &parts).unwrap();
    let known = encode_body(WORLD_ID, &state, &parts).unwrap();
    b.handle_frame(Time::ZERO, &update(vec![unknown, known]), &mut scene);
    assert_eq!(transform(&scene, local).pos, state.transform.pos);
    assert_eq!(node_changes(&mut scene, local), [(PLACEABLE, 0)]);
    assert_eq!(scene.len(), 1);
    assert_eq!(b.stats().undecodable_frames, 0);
}

#[test]
fn malformed_updates_are_refused_and_the_link_goes_on() {
    let (mut b, mut scene, local) = world();
    let case = &cases()[1];
    let record = encode_body(WORLD_ID, &case.state, &case.parts).unwrap();
    let good = update(vec![record]);
    let before = scene.entity(local).cloned();
    // Every truncation (a record cut short fails; fewer than 9 bits are
    // padding), a send-types code above 215, and bytes flipped one by one.
    let mut bad: Vec<Vec<u8>> = (2..good.len()).map(|n| good[..n].to_vec()).collect();
    bad.push(hex::decode("770007d8").unwrap());
    for i in 2..good.len() {
        let mut flipped = good.clone();
        flipped[i] ^= 0xFF;
        bad.push(flipped);
    }
    for f in &bad[..good.len() - 1] {
        b.handle_frame(Time::ZERO, f, &mut scene);
        assert_eq!(scene.entity(local).cloned(), before, "{}", hex::encode(f));
    }
    assert!(b.stats().undecodable_frames >= (good.len() - 4) as u64);
    // Flipped bytes may decode to other values: no panic, the link stays.
    for f in &bad[good.len() - 1..] {
        b.handle_frame(Time::ZERO, f, &mut scene);
    }
    assert!(matches!(b.state(), LinkState::Ready { .. }));
    b.handle_frame(Time::ZERO, &good, &mut scene);
    let want = case.state.transform;
    assert_eq!(transform(&scene, local).pos, want.pos, "applied after all");
}

#[test]
fn a_federation_entity_moved_in_the_world_goes_to_its_authority() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let remote = scene
        .create_entity(
            ChangeSource::Peer(1),
            None,
            Origin::Remote,
            false,
            None,
            body_components(0x4000_0001, START),
        )
        .unwrap()
        .id;
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let create = created(&mut b);
    ack(&mut b, &mut scene, &create, 50, 1);
    let mut state = BodyState::default();
    state.transform.pos = Float3::new(-4.0, 0.5, 8.0);
    let parts = SendDecision {
        position: true,
        ..NOTHING
    };
    let record = encode_body(EntityId(50), &state, &parts).unwrap();
    b.handle_frame(Time::ZERO, &update(vec![record]), &mut scene);
    let want = Transform {
        pos: state.transform.pos,
        ..START
    };
    assert!(matches!(
        b.poll_event(),
        Some(BridgeEvent::EditToAuthority { entity, index: 0, value: AttributeValue::Transform(t), .. })
            if entity == remote && t == want
    ));
    assert_eq!(b.poll_event(), None);
    assert_eq!(transform(&scene, remote), START, "the authority decides");
    assert!(sent(&mut b).is_empty());
}
