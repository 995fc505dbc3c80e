//! A scripted Tundra world server for node 0's bridge (upstream mode): what
//! the node sent it, what it answers, and the scene it logs the node into.

use std::collections::BTreeMap;
use std::time::Duration;

use lessgate::transport::client::ClientTransport;
use lessgate::tundra::messages::{
    CreateEntity, CreateEntityReply, EditAttributes, EditAttributesBlock, IdPair, LoginReply,
};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{AttributeEdit, AttributeValue};
use lessgate::tundra::{
    ComponentId, DecodeContext, EntityId, Message, ProtocolVersion, Registry, UserId,
};
use lessgate::upstream::{Bridge, BridgeSettings, LoginSettings};

use super::tundra_values::named_box_with;
use super::Sim;

pub const PROTOCOL: ProtocolVersion = ProtocolVersion(3);

/// What node 0 sent the world server since the last call.
pub fn to_world(sim: &mut Sim) -> Vec<Message> {
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: PROTOCOL,
        registry: &registry,
    };
    assert!(sim.nodes[0].upstream().is_some(), "upstream mode");
    sim.take_upstream(0)
        .into_iter()
        .map(|frame| Message::decode_frame(&frame, &context).expect("decodable"))
        .collect()
}

pub fn from_world(sim: &mut Sim, message: Message) {
    let frame = message.encode_frame(PROTOCOL).unwrap();
    sim.upstream_frame(0, &frame);
}

/// A bridge that logs in as "gw" at [`PROTOCOL`] over WebSocket.
pub fn bridge(grace: Duration) -> Bridge {
    Bridge::new(BridgeSettings {
        login: LoginSettings {
            properties: BTreeMap::from([("username".to_owned(), "gw".to_owned())]),
            protocol: PROTOCOL,
            transport: ClientTransport::WebSocket,
        },
        grace,
        settle: Duration::from_millis(200),
        login_timeout: Duration::from_secs(5),
    })
}

/// The world server accepts node 0's login.
pub fn accept_login(sim: &mut Sim) {
    sim.upstream_connected(0);
    assert!(matches!(to_world(sim).as_slice(), [Message::Login(_)]));
    from_world(
        sim,
        Message::LoginReply(LoginReply {
            success: true,
            user_id: UserId(2),
            reply_data: r#"{"storage":{"default":true,"name":"Scene","src":"http://world/","type":"HttpAssetStorage"}}"#.into(),
            protocol_version: Some(3),
        }),
    );
}

/// Node 0's bridge connects and logs in; the world server's scene is one
/// entity, "fountain", under `world_id`.
pub fn world_login(sim: &mut Sim, world_id: u32, rotation_y: f32) {
    accept_login(sim);
    from_world(sim, world_entity(world_id, "fountain", rotated(rotation_y)));
}

/// The world server's CreateEntity of a box named `name`.
pub fn world_entity(world_id: u32, name: &str, transform: AttributeValue) -> Message {
    Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(world_id),
        temporary: false,
        parent: None,
        components: named_box_with(name, transform),
    })
}

pub fn rotated(y: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(4.0, 0.0, 0.0),
        rot: Float3::new(0.0, y, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// A world-server client's edit of the Placeable transform (component 1).
pub fn world_edit(entity: u32, value: AttributeValue) -> Message {
    let slots = Registry::builtin().get(20).unwrap().slot_types();
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(entity),
        blocks: vec![EditAttributesBlock::encode(
            ComponentId(1),
            &[AttributeEdit { index: 0, value }],
            &slots,
        )
        .unwrap()],
    })
}

/// The world server's reply to a CreateEntity: the entity is `id`, its
/// components 1, 2, ... with the Placeable first (the one [`world_edit`]
/// addresses).
pub fn reply_to(create: &CreateEntity, id: u32) -> Message {
    let mut order: Vec<usize> = (0..create.components.len()).collect();
    if let Some(placeable) = create.components.iter().position(|c| c.type_id == 20) {
        order.swap(0, placeable);
    }
    Message::CreateEntityReply(CreateEntityReply {
        scene_id: 0,
        sender_entity_id: create.entity_id,
        entity_id: EntityId(id),
        components: order
            .iter()
            .zip(1..)
            .map(|(i, n)| IdPair {
                sender: create.components[*i].id,
                id: ComponentId(n),
            })
            .collect(),
    })
}
