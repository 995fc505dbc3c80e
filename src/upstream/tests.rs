//! Scripted exchanges between the bridge core and a world server: frames in,
//! frames and scene changes out, time explicit.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::clock::Time;
use crate::scene::{ChangeKind, ChangeSource, Origin, Scene};
use crate::tundra::messages::{
    CreateEntity, CreateEntityReply, EditAttributes, EditAttributesBlock, EntityAction, IdPair,
    LoginReply, RemoveEntity,
};
use crate::tundra::ClientTransport;
use crate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, DecodeContext, EntityId, Message,
    ProtocolVersion, Registry, UserId,
};

const PROTOCOL: ProtocolVersion = ProtocolVersion(3);

pub(super) fn bridge() -> Bridge {
    Bridge::new(BridgeSettings {
        login: LoginSettings {
            properties: BTreeMap::from([("username".to_owned(), "gw".to_owned())]),
            protocol: PROTOCOL,
            transport: ClientTransport::WebSocket,
        },
        grace: Duration::from_secs(10),
        settle: Duration::from_millis(500),
        login_timeout: Duration::from_secs(5),
    })
}

pub(super) fn frame(message: Message) -> Vec<u8> {
    message.encode_frame(PROTOCOL).unwrap()
}

pub(super) fn sent(bridge: &mut Bridge) -> Vec<Message> {
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: PROTOCOL,
        registry: &registry,
    };
    std::iter::from_fn(|| bridge.poll_transmit())
        .map(|f| Message::decode_frame(&f, &context).unwrap())
        .collect()
}

pub(super) fn named(id: u32, name: &str, value: i32) -> Vec<ComponentData> {
    let registry = Registry::builtin();
    let schema = registry.get(26).unwrap();
    let mut values = schema.default_values();
    values[0] = AttributeValue::String(name.to_owned());
    let dynamic = registry.get(25).unwrap();
    let mut component = ComponentData::with_values(ComponentId(id + 1), dynamic, Vec::new());
    if let crate::tundra::ComponentBody::Attributes(block) = &mut component.body {
        block.dynamic.push(crate::tundra::DynamicAttribute {
            index: 0,
            name: "n".into(),
            value: AttributeValue::Int(value),
        });
    }
    vec![
        ComponentData::with_values(ComponentId(id), schema, values),
        component,
    ]
}

pub(super) fn create(id: u32, name: &str, value: i32) -> Vec<u8> {
    frame(Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(id),
        temporary: false,
        parent: Some(EntityId(0)),
        components: named(1, name, value),
    }))
}

/// Connects, logs in and takes `entities` as the initial scene.
pub(super) fn logged_in(
    bridge: &mut Bridge,
    scene: &mut Scene,
    now: Time,
    entities: &[(u32, &str, i32)],
) {
    bridge.handle_connected(now);
    let login = bridge.poll_transmit().unwrap();
    assert_eq!(&login[..2], &[0x64, 0x00], "Login (100) goes first");
    assert_eq!(*login.last().unwrap(), 0x03, "protocol 3 requested");
    let reply = frame(Message::LoginReply(LoginReply {
        success: true,
        user_id: UserId(2),
        reply_data: "{}".into(),
        protocol_version: Some(4),
    }));
    bridge.handle_frame(now, &reply, scene);
    for (id, name, value) in entities {
        bridge.handle_frame(now, &create(*id, name, value.to_owned()), scene);
    }
    assert!(matches!(bridge.state(), LinkState::Syncing { .. }));
    let later = now + Duration::from_millis(600);
    bridge.handle_timeout(later, scene);
    assert!(matches!(bridge.state(), LinkState::Ready { session } if session.protocol == PROTOCOL));
}

/// The one CreateEntity `b` sent.
pub(super) fn created(b: &mut Bridge) -> CreateEntity {
    let out = sent(b);
    match out.as_slice() {
        [Message::CreateEntity(create)] => create.clone(),
        other => panic!("one CreateEntity: {other:?}"),
    }
}

/// The world server answers `create` with entity `id`, components from
/// `first` on.
pub(super) fn ack(b: &mut Bridge, scene: &mut Scene, create: &CreateEntity, id: u32, first: u32) {
    let reply = frame(Message::CreateEntityReply(CreateEntityReply {
        scene_id: 0,
        sender_entity_id: create.entity_id,
        entity_id: EntityId(id),
        components: (first..)
            .zip(&create.components)
            .map(|(n, c)| IdPair {
                sender: c.id,
                id: ComponentId(n),
            })
            .collect(),
    }));
    b.handle_frame(Time::ZERO, &reply, scene);
}

/// Sets attribute 0 of `entity`'s component of type `type_id`, as a peer.
pub(super) fn edit_first_attribute(
    scene: &mut Scene,
    entity: EntityId,
    type_id: u32,
    value: AttributeValue,
) {
    let component = scene
        .entity(entity)
        .unwrap()
        .component_of_type(type_id)
        .unwrap()
        .id;
    scene
        .edit_attribute(ChangeSource::Peer(1), entity, component, 0, value)
        .unwrap();
}

pub(super) fn dynamic_value(scene: &Scene, entity: EntityId) -> Option<AttributeValue> {
    let e = scene.entity(entity)?;
    Some(e.component_of_type(25)?.attribute(0)?.value.clone())
}

#[test]
fn world_entities_are_mirrored_as_proxied_local_entities() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(
        &mut b,
        &mut scene,
        Time::ZERO,
        &[(5, "box", 1), (6, "ball", 2)],
    );
    let Some(ids::UpstreamEntity::Mirrored(local)) = Some(b.ids().resolve(EntityId(5))) else {
        panic!("entity 5 mirrored");
    };
    let entity = scene.entity(local).unwrap();
    assert_eq!(
        entity.origin,
        Origin::Local,
        "exported to peers as this node's"
    );
    assert!(scene.is_proxied(local));
    assert_eq!(scene.len(), 2);
    // Its own entities never go back to the world server.
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    assert!(sent(&mut b).is_empty());
}

#[test]
fn a_peer_edit_of_a_world_entity_goes_upstream_not_into_the_scene() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let ids::UpstreamEntity::Mirrored(local) = b.ids().resolve(EntityId(5)) else {
        panic!("mirrored");
    };
    let component = scene
        .entity(local)
        .unwrap()
        .component_of_type(25)
        .unwrap()
        .id;
    let applied = scene
        .edit_attribute(
            ChangeSource::Peer(1),
            local,
            component,
            0,
            AttributeValue::Int(7),
        )
        .unwrap();
    assert!(!applied, "diverted");
    assert_eq!(dynamic_value(&scene, local), Some(AttributeValue::Int(1)));
    let edits = scene.take_proxied_edits();
    b.handle_proxied_edits(&mut scene, edits);
    let out = sent(&mut b);
    let [Message::EditAttributes(edit)] = out.as_slice() else {
        panic!("one EditAttributes: {out:?}");
    };
    assert_eq!(edit.entity_id, EntityId(5));
    assert_eq!(
        edit.blocks[0].component_id,
        ComponentId(2),
        "world server's component id"
    );
    // Applied to the node's copy as a Tundra client applies its own edit.
    assert_eq!(dynamic_value(&scene, local), Some(AttributeValue::Int(7)));
}

/// An entity named `name` created in the node's scene by `source`.
pub(super) fn entity(
    scene: &mut Scene,
    source: ChangeSource,
    origin: Origin,
    name: &str,
) -> EntityId {
    scene
        .create_entity(
            source,
            None,
            origin,
            false,
            None,
            named(0x4000_0001, name, 3),
        )
        .unwrap()
        .id
}

/// A federation entity in the node's scene (another node simulates it).
pub(super) fn remote_entity(scene: &mut Scene, name: &str) -> EntityId {
    entity(scene, ChangeSource::Peer(1), Origin::Remote, name)
}

#[test]
fn federation_entities_are_created_upstream_once_and_edits_are_not_echoed() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let remote = remote_entity(&mut scene, "visitor");
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let out = sent(&mut b);
    let [Message::CreateEntity(create)] = out.as_slice() else {
        panic!("one CreateEntity: {out:?}");
    };
    // Unacked id 0x40000001 travels masked (docs/tundra-wire.md §7.3).
    assert_eq!(create.entity_id.wire(), 1);
    // Component ids are unacked ones too (masked on the wire), distinct.
    assert_eq!(
        create.components.iter().map(|c| c.id.0).collect::<Vec<_>>(),
        vec![2, 3]
    );
    let reply = frame(Message::CreateEntityReply(CreateEntityReply {
        scene_id: 0,
        sender_entity_id: create.entity_id,
        entity_id: EntityId(50),
        components: create
            .components
            .iter()
            .zip([ComponentId(1), ComponentId(2)])
            .map(|(c, id)| IdPair { sender: c.id, id })
            .collect(),
    }));
    b.handle_frame(Time::ZERO, &reply, &mut scene);
    assert!(sent(&mut b).is_empty(), "nothing changed while unacked");
    assert_eq!(
        b.ids().resolve(EntityId(50)),
        ids::UpstreamEntity::Exported(remote)
    );

    // Its copy echoed back in the world server's feed is not imported.
    b.handle_frame(Time::ZERO, &create_raw(50, "visitor", 3), &mut scene);
    assert_eq!(scene.len(), 1, "no second copy");

    // A world-server client edits it: the authority is asked, nothing is
    // sent back upstream when the federation applies that same value.
    let slots = scene
        .entity(remote)
        .unwrap()
        .component_of_type(25)
        .unwrap()
        .slot_types();
    let block = EditAttributesBlock::encode(
        ComponentId(2),
        &[AttributeEdit {
            index: 0,
            value: AttributeValue::Int(9),
        }],
        &slots,
    )
    .unwrap();
    let edit = frame(Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(50),
        blocks: vec![block],
    }));
    b.handle_frame(Time::ZERO, &edit, &mut scene);
    assert!(matches!(
        b.poll_event(),
        Some(BridgeEvent::EditToAuthority { entity, index: 0, value: AttributeValue::Int(9), .. }) if entity == remote
    ));
    edit_first_attribute(&mut scene, remote, 25, AttributeValue::Int(9));
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    assert!(
        sent(&mut b).is_empty(),
        "the world server's own value is not echoed"
    );

    // A different federation update is sent, once.
    edit_first_attribute(&mut scene, remote, 25, AttributeValue::Int(4));
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let out = sent(&mut b);
    assert!(matches!(out.as_slice(), [Message::EditAttributes(e)] if e.entity_id == EntityId(50)));

    // It leaves the federation: removed from the world server.
    scene.remove_entity(ChangeSource::Peer(1), remote).unwrap();
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let out = sent(&mut b);
    assert_eq!(
        out,
        vec![Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(50)
        })]
    );
}

fn create_raw(id: u32, name: &str, value: i32) -> Vec<u8> {
    frame(Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(id),
        temporary: false,
        parent: Some(EntityId(0)),
        components: named(1, name, value),
    }))
}

#[test]
fn reconnect_updates_in_place_removes_the_gone_and_recreates_the_lost() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(
        &mut b,
        &mut scene,
        Time::ZERO,
        &[(5, "box", 1), (6, "ball", 2)],
    );
    let remote = remote_entity(&mut scene, "visitor");
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let out = sent(&mut b);
    let [Message::CreateEntity(create)] = out.as_slice() else {
        panic!("created upstream");
    };
    let reply = frame(Message::CreateEntityReply(CreateEntityReply {
        scene_id: 0,
        sender_entity_id: create.entity_id,
        entity_id: EntityId(50),
        components: Vec::new(),
    }));
    b.handle_frame(Time::ZERO, &reply, &mut scene);
    let box_local = b.ids().mirrored(EntityId(5)).unwrap().local;

    // The world server restarts: box renumbered 9 with a new value, ball
    // gone, our visitor lost.
    let t = Time::from_millis(1_000);
    b.handle_disconnected(t, "closed by the world server");
    assert_eq!(scene.len(), 3, "kept through the grace period");
    let t = Time::from_millis(2_000);
    logged_in(&mut b, &mut scene, t, &[(9, "box", 8)]);
    let changes: Vec<ChangeKind> = scene.take_journal().into_iter().map(|c| c.kind).collect();
    assert!(
        !changes.contains(&ChangeKind::EntityRemoved(box_local))
            && !changes.contains(&ChangeKind::EntityCreated(box_local)),
        "box changed in place: {changes:?}"
    );
    assert_eq!(
        b.ids().mirrored(EntityId(9)).map(|m| m.local),
        Some(box_local)
    );
    assert_eq!(
        dynamic_value(&scene, box_local),
        Some(AttributeValue::Int(8))
    );
    assert_eq!(scene.len(), 2, "ball removed, nothing duplicated");
    let out = sent(&mut b);
    assert!(
        matches!(out.as_slice(), [Message::CreateEntity(c)] if c.entity_id.0 > 1 && c.components.len() == 2),
        "the lost visitor is created again: {out:?}"
    );
    assert!(scene.entity(remote).is_some());
}

#[test]
fn surviving_federation_entities_are_not_created_twice_after_a_reconnect() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    remote_entity(&mut scene, "visitor");
    let journal = scene.take_journal();
    b.handle_scene_changes(&scene, &journal);
    let out = sent(&mut b);
    let [Message::CreateEntity(create)] = out.as_slice() else {
        panic!("created upstream");
    };
    let pairs: Vec<IdPair> = create
        .components
        .iter()
        .zip([ComponentId(1), ComponentId(2)])
        .map(|(c, id)| IdPair { sender: c.id, id })
        .collect();
    let reply = frame(Message::CreateEntityReply(CreateEntityReply {
        scene_id: 0,
        sender_entity_id: create.entity_id,
        entity_id: EntityId(50),
        components: pairs,
    }));
    b.handle_frame(Time::ZERO, &reply, &mut scene);
    // Only the connection was cut: the world server still has it.
    b.handle_disconnected(Time::from_millis(100), "closed by the world server");
    logged_in(
        &mut b,
        &mut scene,
        Time::from_millis(200),
        &[(50, "visitor", 3)],
    );
    assert!(
        sent(&mut b).is_empty(),
        "matched by id, same state: nothing to send"
    );
    assert_eq!(scene.len(), 1);
}

#[test]
fn world_entities_leave_after_the_grace_period() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    b.handle_disconnected(Time::from_millis(1_000), "closed by the world server");
    assert_eq!(b.poll_timeout(), Some(Time::from_millis(11_000)));
    b.handle_timeout(Time::from_millis(10_999), &mut scene);
    assert_eq!(scene.len(), 1);
    b.handle_timeout(Time::from_millis(11_000), &mut scene);
    assert!(scene.is_empty());
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn actions_cross_in_both_directions_with_mapped_ids() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let local = b.ids().mirrored(EntityId(5)).unwrap().local;
    // From the world server (a Peers action of one of its clients).
    let action = |entity, kind| EntityAction {
        entity_id: EntityId(entity),
        name: "ring".into(),
        execution_type: kind,
        parameters: vec!["1".into()],
    };
    b.handle_frame(
        Time::ZERO,
        &frame(Message::EntityAction(action(5, 1))),
        &mut scene,
    );
    assert!(matches!(b.poll_event(), Some(BridgeEvent::DeliverAction(a)) if a.entity_id == local));
    assert!(matches!(b.poll_event(), Some(BridgeEvent::FloodAction(a)) if a.entity_id == local));
    assert_eq!(b.poll_event(), None);
    // Toward the world server: as its authority and for its clients.
    assert!(b.handle_action_for_world(&action(local.0, 3)));
    b.handle_peers_action(&action(local.0, 4));
    // Server|Peers: the authority path sends Server only, the Peers part
    // comes once through the flood path.
    assert!(b.handle_action_for_world(&action(local.0, 6)));
    b.handle_peers_action(&action(local.0, 6));
    let out = sent(&mut b);
    assert_eq!(
        out,
        vec![
            Message::EntityAction(action(5, 2)),
            Message::EntityAction(action(5, 4)),
            Message::EntityAction(action(5, 2)),
            Message::EntityAction(action(5, 4)),
        ],
        "Local stripped, Peers only once, ids mapped"
    );
    assert!(
        !b.handle_action_for_world(&action(999, 2)),
        "not a world entity"
    );
}

#[test]
fn undecodable_frames_are_counted_and_skipped() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    // CreateEntity (110 = 6e 00) cut short after its entity id.
    b.handle_frame(Time::ZERO, &hex::decode("6e000005").unwrap(), &mut scene);
    assert_eq!(b.stats().undecodable_frames, 1);
    assert!(scene.is_empty());
}

#[test]
fn clients_and_peers_cannot_restructure_world_entities() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let local = b.ids().mirrored(EntityId(5)).unwrap().local;
    let client = ChangeSource::Client(crate::scene::ClientId(1));
    assert_eq!(
        scene.remove_entity(client, local),
        Err(crate::scene::SceneError::NotAuthority(local))
    );
    assert!(scene
        .set_temporary(ChangeSource::Peer(1), local, true)
        .is_err());
    assert!(scene.set_parent(client, local, None).is_err());
    assert_eq!(scene.len(), 1);
}

#[test]
fn edits_while_the_world_server_is_unreachable_are_dropped() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let local = b.ids().mirrored(EntityId(5)).unwrap().local;
    let component = scene
        .entity(local)
        .unwrap()
        .component_of_type(25)
        .unwrap()
        .id;
    b.handle_disconnected(Time::from_millis(10), "closed by the world server");
    scene
        .edit_attribute(
            ChangeSource::Peer(1),
            local,
            component,
            0,
            AttributeValue::Int(7),
        )
        .unwrap();
    let edits = scene.take_proxied_edits();
    b.handle_proxied_edits(&mut scene, edits);
    assert!(sent(&mut b).is_empty());
    assert_eq!(
        dynamic_value(&scene, local),
        Some(AttributeValue::Int(1)),
        "not applied"
    );
}
