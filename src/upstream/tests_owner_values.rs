//! The owner's value is replaced only by a real change (docs/upstream.md
//! §5): no stale write-back of a federation entity's value while its
//! authority takes the world server's edit, and no RigidBodyUpdate (119)
//! that only repeats, quantized, what the bridge already holds.

use std::time::Duration;

use super::tests::{ack, bridge, created, frame, logged_in, remote_entity, sent};
use super::*;
use crate::clock::Time;
use crate::scene::{ChangeSource, Origin, Scene};
use crate::tundra::messages::{EditAttributes, EditAttributesBlock};
use crate::tundra::rigid_body::RigidBodyUpdate;
use crate::tundra::rigid_body_sender::{encode_body, BodyState, SendDecision};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{
    AttributeEdit, AttributeType, AttributeValue, ComponentData, ComponentId, EntityId, Message,
    Registry,
};

const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
const DYNAMIC: u32 = 25;
const NAME: u32 = 26;

fn journal(b: &mut Bridge, scene: &mut Scene) {
    let changes = scene.take_journal();
    b.handle_scene_changes(scene, &changes);
}

/// A federation entity (Name, DynamicComponent `n` = 3) exported to the
/// world server as entity 50, components 1 and 2.
fn exported() -> (Bridge, Scene, EntityId) {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let remote = remote_entity(&mut scene, "visitor");
    journal(&mut b, &mut scene);
    let create = created(&mut b);
    ack(&mut b, &mut scene, &create, 50, 1);
    assert!(sent(&mut b).is_empty());
    (b, scene, remote)
}

/// A world-server client sets the dynamic attribute of entity 50.
fn world_sets(b: &mut Bridge, scene: &mut Scene, now: Time, value: i32) {
    let slots = [Some(AttributeType::Int)];
    let block = EditAttributesBlock::encode(
        ComponentId(2),
        &[AttributeEdit {
            index: 0,
            value: AttributeValue::Int(value),
        }],
        &slots,
    )
    .unwrap();
    let edit = Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(50),
        blocks: vec![block],
    });
    b.handle_frame(now, &frame(edit), scene);
    assert!(matches!(
        b.poll_event(),
        Some(BridgeEvent::EditToAuthority { value: AttributeValue::Int(v), .. }) if v == value
    ));
}

/// The authority (a peer) sets attribute `index` of the entity's
/// component of `type_id`.
fn authority_sets(
    scene: &mut Scene,
    entity: EntityId,
    type_id: u32,
    index: u8,
    value: AttributeValue,
) {
    let component = scene
        .entity(entity)
        .unwrap()
        .component_of_type(type_id)
        .unwrap()
        .id;
    scene
        .edit_attribute(ChangeSource::Peer(1), entity, component, index, value)
        .unwrap();
}

/// The values of the world server's component 2 the bridge sent.
fn dynamic_values_sent(out: &[Message]) -> Vec<AttributeValue> {
    let slots = [Some(AttributeType::Int)];
    out.iter()
        .filter_map(|m| match m {
            Message::EditAttributes(e) => Some(e),
            _ => None,
        })
        .flat_map(|e| e.blocks.iter())
        .filter(|b| b.component_id == ComponentId(2))
        .flat_map(|b| b.decode(&slots).unwrap().edits)
        .map(|e| e.value)
        .collect()
}

#[test]
fn the_authoritys_old_value_is_not_written_back_while_it_takes_the_worlds_edit() {
    let (mut b, mut scene, remote) = exported();
    let t = Time::from_millis(1_000);
    world_sets(&mut b, &mut scene, t, 9);
    // Before the authority's answer, it changes another attribute (its
    // driver moves it): the bridge brings the entity up to date.
    authority_sets(
        &mut scene,
        remote,
        NAME,
        1,
        AttributeValue::String("moved".into()),
    );
    journal(&mut b, &mut scene);
    let out = sent(&mut b);
    assert_eq!(
        dynamic_values_sent(&out),
        Vec::<AttributeValue>::new(),
        "the world's 9 is not undone by the authority's old 3: {out:?}"
    );
    assert_eq!(out.len(), 1, "the other change goes: {out:?}");
    // The authority takes 9: nothing to send.
    authority_sets(&mut scene, remote, DYNAMIC, 0, AttributeValue::Int(9));
    journal(&mut b, &mut scene);
    assert!(sent(&mut b).is_empty());
    // A change of its own afterwards reaches the world server.
    authority_sets(&mut scene, remote, DYNAMIC, 0, AttributeValue::Int(11));
    journal(&mut b, &mut scene);
    assert_eq!(
        dynamic_values_sent(&sent(&mut b)),
        vec![AttributeValue::Int(11)]
    );
}

#[test]
fn edits_in_a_row_are_not_undone_by_the_authoritys_answers_to_the_first() {
    let (mut b, mut scene, remote) = exported();
    let t = Time::from_millis(1_000);
    world_sets(&mut b, &mut scene, t, 9);
    world_sets(&mut b, &mut scene, t + Duration::from_millis(5), 10);
    authority_sets(&mut scene, remote, DYNAMIC, 0, AttributeValue::Int(9));
    journal(&mut b, &mut scene);
    assert!(
        sent(&mut b).is_empty(),
        "9 is the world's own, 10 is coming"
    );
    authority_sets(&mut scene, remote, DYNAMIC, 0, AttributeValue::Int(10));
    journal(&mut b, &mut scene);
    assert!(sent(&mut b).is_empty());
}

#[test]
fn an_edit_the_authority_never_takes_is_undone_after_the_wait() {
    let (mut b, mut scene, remote) = exported();
    let t = Time::from_millis(1_000);
    world_sets(&mut b, &mut scene, t, 9);
    authority_sets(
        &mut scene,
        remote,
        NAME,
        1,
        AttributeValue::String("moved".into()),
    );
    journal(&mut b, &mut scene);
    assert!(dynamic_values_sent(&sent(&mut b)).is_empty());
    // The authority refused it (or it was lost): past the wait the world
    // server is given the authority's value again.
    let due = b.poll_timeout().expect("a timer for the forwarded edit");
    assert!(due > t && due <= t + Duration::from_secs(10), "{due:?}");
    b.handle_timeout(due, &mut scene);
    assert_eq!(
        dynamic_values_sent(&sent(&mut b)),
        vec![AttributeValue::Int(3)]
    );
}

/// Placeable, RigidBody and Name, from id `first`, at `at`.
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
            NAME => values[0] = AttributeValue::String("body".into()),
            _ => {}
        }
        ComponentData::with_values(ComponentId(id), schema, values)
    })
    .collect()
}

fn turned(rot: Float3) -> Transform {
    Transform {
        pos: Float3::new(4.0, 0.0, 0.0),
        rot,
        scale: Float3::new(1.0, 1.0, 1.0),
    }
}

/// What the world server's physics sends for a body holding `at`.
fn correction(entity: u32, at: Transform) -> Vec<u8> {
    let body = BodyState {
        transform: at,
        ..BodyState::default()
    };
    let parts = SendDecision {
        position: true,
        rotation: true,
        ..SendDecision::default()
    };
    let record = encode_body(EntityId(entity), &body, &parts).unwrap();
    frame(Message::RigidBodyUpdate(RigidBodyUpdate {
        entities: vec![record],
    }))
}

fn transform_of(scene: &Scene, entity: EntityId) -> Transform {
    let component = scene
        .entity(entity)
        .unwrap()
        .component_of_type(PLACEABLE)
        .unwrap();
    match &component.attribute(0).unwrap().value {
        AttributeValue::Transform(t) => *t,
        other => panic!("a transform: {other:?}"),
    }
}

/// The rotations of the issue: yaw only (sent as 8-bit yaw), and a roll
/// (sent as axis-angle).
const TURNS: [Float3; 2] = [Float3::new(0.0, 90.0, 0.0), Float3::new(-20.0, 135.0, 45.0)];

#[test]
fn a_physics_echo_of_a_federation_entity_is_not_sent_to_its_authority() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let start = turned(Float3::default());
    let remote = scene
        .create_entity(
            ChangeSource::Peer(1),
            None,
            Origin::Remote,
            false,
            None,
            body_components(0x4000_0001, start),
        )
        .unwrap()
        .id;
    journal(&mut b, &mut scene);
    let create = created(&mut b);
    ack(&mut b, &mut scene, &create, 50, 1);
    for rot in TURNS {
        // The authority turns it; the world server is told.
        authority_sets(
            &mut scene,
            remote,
            PLACEABLE,
            0,
            AttributeValue::Transform(turned(rot)),
        );
        journal(&mut b, &mut scene);
        assert_eq!(sent(&mut b).len(), 1);
        // Its physics answers with the same transform, quantized.
        b.handle_frame(Time::ZERO, &correction(50, turned(rot)), &mut scene);
        assert_eq!(b.poll_event(), None, "no edit for the authority");
        journal(&mut b, &mut scene);
        assert!(sent(&mut b).is_empty(), "and nothing back to the world");
        assert_eq!(transform_of(&scene, remote), turned(rot));
    }
    // A real move of the world's physics still goes to the authority.
    let mut fallen = turned(TURNS[1]);
    fallen.pos.y -= 0.5;
    b.handle_frame(Time::ZERO, &correction(50, fallen), &mut scene);
    let Some(BridgeEvent::EditToAuthority {
        value: AttributeValue::Transform(t),
        ..
    }) = b.poll_event()
    else {
        panic!("the move goes to the authority");
    };
    assert_eq!(t.pos, fallen.pos);
    assert_eq!(t.rot, TURNS[1], "the unchanged rotation is the owner's own");
}

#[test]
fn a_physics_echo_of_a_world_entity_leaves_the_exact_copy() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let create = Message::CreateEntity(crate::tundra::messages::CreateEntity {
        scene_id: 0,
        entity_id: EntityId(7),
        temporary: false,
        parent: Some(EntityId(0)),
        components: body_components(1, turned(Float3::default())),
    });
    b.handle_frame(Time::ZERO, &frame(create), &mut scene);
    let local = b.ids().mirrored(EntityId(7)).unwrap().local;
    let placeable = scene
        .entity(local)
        .unwrap()
        .component_of_type(PLACEABLE)
        .unwrap()
        .id;
    for rot in TURNS {
        // A peer turns the world's entity: the edit goes to the world
        // server, and the node's copy takes it exactly.
        scene.take_journal();
        let edits = vec![crate::scene::ProxiedEdit {
            source: ChangeSource::Peer(1),
            entity: local,
            component: placeable,
            index: 0,
            value: AttributeValue::Transform(turned(rot)),
        }];
        b.handle_proxied_edits(&mut scene, edits);
        assert_eq!(sent(&mut b).len(), 1);
        scene.take_journal();
        // The world's physics sends it back quantized: nothing new.
        b.handle_frame(Time::ZERO, &correction(7, turned(rot)), &mut scene);
        assert_eq!(transform_of(&scene, local), turned(rot));
        assert!(
            scene.take_journal().is_empty(),
            "no change for clients and peers"
        );
    }
}
