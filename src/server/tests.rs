//! Server core tests that drive frames and ticks through the pure core with
//! a scene, no sockets: the EditAttributes path from client to scene, and
//! what each client is sent at the tick.

use bytes::Bytes;

use super::core::{ServerConfig, TundraServer};
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::messages::{EditAttributes, EditAttributesBlock, Login};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::LoginDialect;
use crate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, EntityId, Message, ProtocolVersion,
    Registry,
};

pub(super) const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;

/// A scene with one local entity holding a Placeable (component 1) and a
/// RigidBody (component 2).
pub(super) fn scene() -> (Scene, EntityId) {
    let registry = Registry::builtin();
    let components = [(1, PLACEABLE), (2, RIGID_BODY)]
        .into_iter()
        .map(|(id, type_id)| {
            let schema = registry.get(type_id).unwrap();
            ComponentData::with_values(ComponentId(id), schema, schema.default_values())
        })
        .collect();
    let mut scene = Scene::new(registry);
    let id = scene
        .create_entity(
            ChangeSource::Node,
            None,
            Origin::Local,
            false,
            None,
            components,
        )
        .unwrap()
        .id;
    scene.take_journal();
    (scene, id)
}

pub(super) fn server() -> TundraServer {
    TundraServer::new(ServerConfig::default())
}

pub(super) fn connect(
    server: &mut TundraServer,
    scene: &mut Scene,
    client: ClientId,
    protocol: u32,
) {
    server.handle_connect(client, Time::ZERO, LoginDialect::Json);
    let login = Message::Login(Login {
        login_data: "{\"username\":\"t\"}".into(),
        protocol_version: Some(protocol),
    });
    let frame = login.encode_frame(ProtocolVersion(1)).unwrap();
    server.handle_frame(scene, client, Time::ZERO, &frame);
    while server.poll_transmit().is_some() {}
    while server.poll_event().is_some() {}
}

pub(super) fn transform(x: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, 0.0, 0.0),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

pub(super) fn block(
    scene: &Scene,
    component: u32,
    type_id: u32,
    edit: AttributeEdit,
) -> EditAttributesBlock {
    let slots = scene.registry().get(type_id).unwrap().slot_types();
    EditAttributesBlock::encode(ComponentId(component), &[edit], &slots).unwrap()
}

pub(super) fn edit_frame(entity: EntityId, blocks: Vec<EditAttributesBlock>) -> Vec<u8> {
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: entity,
        blocks,
    })
    .encode_frame(ProtocolVersion(3))
    .unwrap()
}

fn value(scene: &Scene, entity: EntityId, component: u32, index: u8) -> AttributeValue {
    let entity = scene.entity(entity).unwrap();
    let component = &entity.components[&ComponentId(component)];
    component.attribute(index).unwrap().value.clone()
}

#[test]
fn an_undecodable_block_is_skipped_and_the_others_applied() {
    let (mut scene, entity) = scene();
    let mut server = server();
    let client = ClientId(1);
    connect(&mut server, &mut scene, client, 3);
    let mut broken = block(
        &scene,
        1,
        PLACEABLE,
        AttributeEdit {
            index: 0,
            value: transform(5.0),
        },
    );
    broken.data.truncate(10);
    let good = block(
        &scene,
        2,
        RIGID_BODY,
        AttributeEdit {
            index: 0,
            value: AttributeValue::Real(7.0),
        },
    );
    let refused = server.stats().refused_messages;
    server.handle_frame(
        &mut scene,
        client,
        Time::ZERO,
        &edit_frame(entity, vec![broken, good]),
    );
    assert_eq!(value(&scene, entity, 1, 0), transform(0.0));
    assert_eq!(value(&scene, entity, 2, 0), AttributeValue::Real(7.0));
    assert_eq!(server.stats().refused_messages, refused + 1);
    assert!(server.poll_close().is_none());
}

#[test]
fn edits_before_login_are_dropped_and_malformed_ones_close() {
    let (mut scene, entity) = scene();
    let mut server = server();
    let early = ClientId(1);
    server.handle_connect(early, Time::ZERO, LoginDialect::Json);
    let edit = AttributeEdit {
        index: 0,
        value: transform(3.0),
    };
    let frame = edit_frame(entity, vec![block(&scene, 1, PLACEABLE, edit)]);
    server.handle_frame(&mut scene, early, Time::ZERO, &frame);
    assert_eq!(value(&scene, entity, 1, 0), transform(0.0));
    assert!(server.poll_close().is_none());

    let client = ClientId(2);
    connect(&mut server, &mut scene, client, 3);
    server.handle_frame(&mut scene, client, Time::ZERO, &frame);
    assert_eq!(value(&scene, entity, 1, 0), transform(3.0));
    // A block longer than what follows: the whole frame is malformed.
    let mut cut = frame.clone();
    cut.truncate(cut.len() - 1);
    server.handle_frame(&mut scene, client, Time::ZERO, &cut);
    let (closed, reason) = server.poll_close().unwrap();
    assert_eq!(closed, client);
    assert!(reason.starts_with("malformed message 113"), "{reason}");
}

pub(super) fn settle(server: &mut TundraServer, scene: &mut Scene) {
    let changes = scene.take_journal();
    server.handle_scene_changes(&changes);
}

/// Runs a tick; returns each client's frames. `backlogged` clients report
/// more unsent bytes than the limit, so they are skipped this tick.
pub(super) fn tick(
    server: &mut TundraServer,
    scene: &Scene,
    now: Time,
    backlogged: &[ClientId],
) -> Vec<(ClientId, Bytes)> {
    let limit = server.config().limits.max_client_backlog_bytes;
    let backlog = |c: ClientId| {
        if backlogged.contains(&c) {
            limit + 1
        } else {
            0
        }
    };
    server.handle_tick(scene, now, &backlog);
    std::iter::from_fn(|| server.poll_transmit()).collect()
}

pub(super) fn frames_of(frames: &[(ClientId, Bytes)], client: ClientId) -> Vec<Bytes> {
    frames
        .iter()
        .filter(|(c, _)| *c == client)
        .map(|(_, f)| f.clone())
        .collect()
}

/// The EditAttributes frame the general encoder gives for these edits.
pub(super) fn expected_edit(
    scene: &Scene,
    entity: EntityId,
    edits: &[(u32, u32, AttributeEdit)],
) -> Vec<u8> {
    let blocks = edits
        .iter()
        .map(|(component, type_id, edit)| block(scene, *component, *type_id, edit.clone()))
        .collect();
    edit_frame(entity, blocks)
}

fn visible(value: bool) -> AttributeEdit {
    AttributeEdit {
        index: 2,
        value: AttributeValue::Bool(value),
    }
}

pub(super) fn moved(x: f32) -> AttributeEdit {
    AttributeEdit {
        index: 0,
        value: transform(x),
    }
}

#[test]
fn clients_with_the_same_pending_edits_share_one_frame_and_others_get_their_own() {
    let (mut scene, entity) = scene();
    let mut server = server();
    let (writer, b, c) = (ClientId(1), ClientId(2), ClientId(3));
    for client in [writer, b, c] {
        connect(&mut server, &mut scene, client, 3);
    }
    // Everyone gets the entity whole first.
    let first = tick(&mut server, &scene, Time::ZERO, &[]);
    assert_eq!(frames_of(&first, b).len(), 1);

    let frame = edit_frame(entity, vec![block(&scene, 1, PLACEABLE, moved(2.0))]);
    server.handle_frame(&mut scene, writer, Time::ZERO, &frame);
    settle(&mut server, &mut scene);
    // c does not read this tick: its edit stays pending.
    let second = tick(&mut server, &scene, Time::from_millis(50), &[c]);
    let to_b = frames_of(&second, b);
    assert_eq!(to_b.len(), 1);
    assert_eq!(
        &to_b[0][..],
        expected_edit(&scene, entity, &[(1, PLACEABLE, moved(2.0))])
    );
    assert!(frames_of(&second, writer).is_empty(), "no echo");
    assert!(frames_of(&second, c).is_empty());

    let frame = edit_frame(
        entity,
        vec![
            block(&scene, 1, PLACEABLE, visible(false)),
            block(
                &scene,
                2,
                RIGID_BODY,
                AttributeEdit {
                    index: 0,
                    value: AttributeValue::Real(4.0),
                },
            ),
        ],
    );
    server.handle_frame(&mut scene, writer, Time::ZERO, &frame);
    settle(&mut server, &mut scene);
    let third = tick(&mut server, &scene, Time::from_millis(100), &[]);
    let mass = AttributeEdit {
        index: 0,
        value: AttributeValue::Real(4.0),
    };
    // b had the move: it gets visibility and mass; c gets the move too.
    let to_b = frames_of(&third, b);
    let to_c = frames_of(&third, c);
    assert_eq!(
        &to_b[..],
        [expected_edit(
            &scene,
            entity,
            &[
                (1, PLACEABLE, visible(false)),
                (2, RIGID_BODY, mass.clone())
            ]
        )]
    );
    let placeable = scene.registry().get(PLACEABLE).unwrap().slot_types();
    let both =
        EditAttributesBlock::encode(ComponentId(1), &[moved(2.0), visible(false)], &placeable)
            .unwrap();
    let c_expected = edit_frame(entity, vec![both, block(&scene, 2, RIGID_BODY, mass)]);
    assert_eq!(&to_c[..], [c_expected]);

    // Same pending state: one frame, shared.
    let d = ClientId(4);
    connect(&mut server, &mut scene, d, 3);
    tick(&mut server, &scene, Time::from_millis(150), &[]);
    let frame = edit_frame(entity, vec![block(&scene, 1, PLACEABLE, moved(9.0))]);
    server.handle_frame(&mut scene, writer, Time::ZERO, &frame);
    settle(&mut server, &mut scene);
    let fourth = tick(&mut server, &scene, Time::from_millis(200), &[]);
    let expected = expected_edit(&scene, entity, &[(1, PLACEABLE, moved(9.0))]);
    let shared: Vec<Bytes> = [b, c, d]
        .iter()
        .flat_map(|x| frames_of(&fourth, *x))
        .collect();
    assert_eq!(shared.len(), 3);
    for frame in &shared {
        assert_eq!(&frame[..], expected);
        assert_eq!(frame.as_ptr(), shared[0].as_ptr(), "one buffer for all");
    }
}

#[test]
fn rigid_body_clients_take_transforms_apart_from_the_shared_edits() {
    let (mut scene, entity) = scene();
    let mut server = server();
    let (writer, classic, web) = (ClientId(1), ClientId(2), ClientId(3));
    connect(&mut server, &mut scene, writer, 3);
    connect(&mut server, &mut scene, classic, 3);
    connect(&mut server, &mut scene, web, 4);
    tick(&mut server, &scene, Time::ZERO, &[]);
    let frame = edit_frame(
        entity,
        vec![block(
            &scene,
            1,
            PLACEABLE,
            AttributeEdit {
                index: 0,
                value: transform(30.0),
            },
        )],
    );
    server.handle_frame(&mut scene, writer, Time::ZERO, &frame);
    settle(&mut server, &mut scene);
    let frames = tick(&mut server, &scene, Time::from_millis(50), &[]);
    assert_eq!(
        frames_of(&frames, classic),
        [expected_edit(
            &scene,
            entity,
            &[(1, PLACEABLE, moved(30.0))]
        )]
    );
    // The protocol 4 client gets the move as RigidBodyUpdate (119) only.
    let to_web = frames_of(&frames, web);
    assert_eq!(to_web.len(), 1);
    assert_eq!(&to_web[0][..2], &119u16.to_le_bytes());
}
