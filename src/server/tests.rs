//! Server core tests that drive frames and ticks through the pure core with
//! a scene, no sockets: the EditAttributes path from client to scene, and
//! what each client is sent at the tick.

use super::core::{ServerConfig, TundraServer};
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::messages::{EditAttributes, EditAttributesBlock, Login};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, EntityId, Message, ProtocolVersion,
    Registry,
};

const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;

/// A scene with one local entity holding a Placeable (component 1) and a
/// RigidBody (component 2).
fn scene() -> (Scene, EntityId) {
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

fn server() -> TundraServer {
    let mut config = ServerConfig::default();
    config.limits.max_messages_per_second = u32::MAX;
    TundraServer::new(config)
}

fn connect(server: &mut TundraServer, scene: &mut Scene, client: ClientId, protocol: u32) {
    server.handle_connect(client, Time::ZERO);
    let login = Message::Login(Login {
        login_data: "{\"username\":\"t\"}".into(),
        protocol_version: Some(protocol),
    });
    let frame = login.encode_frame(ProtocolVersion(1)).unwrap();
    server.handle_frame(scene, client, Time::ZERO, &frame);
    while server.poll_transmit().is_some() {}
    while server.poll_event().is_some() {}
}

fn transform(x: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, 0.0, 0.0),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

fn block(scene: &Scene, component: u32, type_id: u32, edit: AttributeEdit) -> EditAttributesBlock {
    let slots = scene.registry().get(type_id).unwrap().slot_types();
    EditAttributesBlock::encode(ComponentId(component), &[edit], &slots).unwrap()
}

fn edit_frame(entity: EntityId, blocks: Vec<EditAttributesBlock>) -> Vec<u8> {
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
    server.handle_connect(early, Time::ZERO);
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
