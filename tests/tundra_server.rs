//! A node serving real Tundra WebSocket clients on 127.0.0.1: login order,
//! propagation between clients, custom types, late joiners, bad clients.

mod common;

use common::tundra_values::{
    edited_x, move_to, name_component, placeable_component, transform, PLACEABLE,
};
use common::{TestNode, TundraClient};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{
    exec_type, EntityAction, RegisterComponentType, RegisteredAttribute, RemoveEntity,
};
use lessgate::tundra::{
    AttributeType, AttributeValue, ComponentData, ComponentId, EntityId, Message,
};

#[tokio::test]
async fn login_order_matches_tundra() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (alice, seen) = TundraClient::login(&node.url, "alice", 4).await;
    // ClientJoined(self) precedes LoginReply, which carries the accepted version.
    assert!(
        matches!(&seen[..], [Message::ClientJoined(j), Message::LoginReply(r)]
        if j.user_id.0 == 1 && r.user_id.0 == 1 && r.protocol_version == Some(4))
    );
    assert_eq!(alice.user, 1);

    let mut alice = alice;
    let (bob, seen) = TundraClient::login(&node.url, "bob", 9).await;
    // Version clamped to 4; joined(new) first, then the existing users.
    let ids: Vec<u32> = seen
        .iter()
        .filter_map(|m| match m {
            Message::ClientJoined(j) => Some(j.user_id.0),
            _ => None,
        })
        .collect();
    assert_eq!(ids, vec![2, 1]);
    assert_eq!(bob.protocol.0, 4);
    match alice.recv().await {
        Some(Message::ClientJoined(j)) => {
            assert_eq!(j.user_id.0, 2);
            assert_eq!(j.username.as_deref(), Some("bob"));
        }
        other => panic!("expected ClientJoined, got {other:?}"),
    }
    drop(bob);
    match alice.recv().await {
        Some(Message::ClientLeft(l)) => assert_eq!(l.user_id.0, 2),
        other => panic!("expected ClientLeft, got {other:?}"),
    }
    node.stop().await;
}

#[tokio::test]
async fn login_without_version_is_protocol_one() {
    let node = TestNode::start(NodeConfig::default()).await;
    let mut client = TundraClient::connect(&node.url).await;
    client
        .send(&Message::Login(lessgate::tundra::messages::Login {
            login_data: "{}".to_owned(),
            protocol_version: None,
        }))
        .await;
    let reply = client.login_reply().await;
    assert!(reply.success);
    assert_eq!(reply.protocol_version, Some(1));
    node.stop().await;
}

#[tokio::test]
async fn login_policy_refuses_with_reason() {
    let mut config = NodeConfig::default();
    config
        .tundra
        .required_login
        .insert("token".to_owned(), "s3cret".to_owned());
    let node = TestNode::start(config).await;
    let mut client = TundraClient::connect(&node.url).await;
    client
        .send(&Message::Login(lessgate::tundra::messages::Login {
            login_data: "{\"username\":\"eve\",\"token\":\"guess\"}".to_owned(),
            protocol_version: Some(4),
        }))
        .await;
    match client.recv().await {
        Some(Message::LoginReply(reply)) => {
            assert!(!reply.success);
            assert_eq!(reply.user_id.0, 0);
            assert!(reply.reply_data.contains("token"), "{}", reply.reply_data);
            assert_eq!(reply.protocol_version, None);
        }
        other => panic!("expected a failed LoginReply, got {other:?}"),
    }
    assert!(client.closed().await, "refused client is closed");
    // The right token gets in.
    let mut good = TundraClient::connect(&node.url).await;
    good.send(&Message::Login(lessgate::tundra::messages::Login {
        login_data: "{\"token\":\"s3cret\"}".to_owned(),
        protocol_version: Some(4),
    }))
    .await;
    let reply = good
        .recv_until(|m| matches!(m, Message::LoginReply(_)))
        .await;
    assert!(matches!(reply, Message::LoginReply(r) if r.success));
    node.stop().await;
}

#[tokio::test]
async fn create_edit_remove_propagate_without_echo() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 4).await;
    let (mut bob, _) = TundraClient::login(&node.url, "bob", 3).await;
    let _ = alice
        .recv_until(|m| matches!(m, Message::ClientJoined(_)))
        .await;

    let entity = alice
        .create_entity(
            1,
            vec![
                placeable_component(1, transform(1.0)),
                name_component(2, "box"),
            ],
        )
        .await;
    assert!(entity.is_replicated());

    let created = bob
        .recv_until(|m| matches!(m, Message::CreateEntity(_)))
        .await;
    let Message::CreateEntity(created) = created else {
        unreachable!()
    };
    assert_eq!(created.entity_id, entity);
    assert_eq!(created.components.len(), 2);
    let placeable_id = created
        .components
        .iter()
        .find(|c| c.type_id == PLACEABLE)
        .unwrap()
        .id;
    assert!(placeable_id.is_replicated());

    alice.send(&move_to(entity, placeable_id, 7.5)).await;
    let edit = bob
        .recv_until(|m| matches!(m, Message::EditAttributes(_)))
        .await;
    assert_eq!(edited_x(&edit, entity), Some(7.5));

    // Bob's edit reaches Alice (protocol 4: as a RigidBodyUpdate, 11.8
    // fixed point); Alice's own edit never came back to her.
    bob.send(&move_to(entity, placeable_id, -2.0)).await;
    let update = alice
        .recv_until(|m| {
            matches!(
                m,
                Message::EditAttributes(_) | Message::CreateEntity(_) | Message::RigidBodyUpdate(_)
            )
        })
        .await;
    let Message::RigidBodyUpdate(update) = update else {
        panic!("protocol 4 client gets transforms as RigidBodyUpdate, got {update:?}");
    };
    assert_eq!(update.entities.len(), 1);
    assert_eq!(update.entities[0].entity_id, entity);
    let position = update.entities[0].position.value().expect("position sent");
    assert_eq!(position.x, -2.0);

    bob.send(&Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: entity,
    }))
    .await;
    let removed = alice
        .recv_until(|m| matches!(m, Message::RemoveEntity(_)))
        .await;
    assert!(matches!(removed, Message::RemoveEntity(r) if r.entity_id == entity));
    node.stop().await;
}

#[tokio::test]
async fn late_joiner_gets_full_scene_and_custom_types_first() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 4).await;
    let (mut early, _) = TundraClient::login(&node.url, "early", 4).await;
    let custom = RegisterComponentType {
        type_id: lessgate::tundra::registry::custom_type_id("MyComponent"),
        type_name: "EC_MyComponent".to_owned(),
        attributes: vec![
            RegisteredAttribute {
                ty: AttributeType::String,
                id: "myString".to_owned(),
                name: "myString".to_owned(),
            },
            RegisteredAttribute {
                ty: AttributeType::Int,
                id: "myInteger".to_owned(),
                name: "myInteger".to_owned(),
            },
        ],
    };
    assert_eq!(custom.type_id, 69969);
    alice
        .send(&Message::RegisterComponentType(custom.clone()))
        .await;
    // A client that joined earlier is sent the new type.
    let got = early
        .recv_until(|m| matches!(m, Message::RegisterComponentType(_)))
        .await;
    assert!(matches!(got, Message::RegisterComponentType(r) if r.type_id == 69969));

    alice.register_custom(&custom);
    let schema = alice.registry.get(69969).unwrap().clone();
    let my = ComponentData::with_values(
        ComponentId(0x4000_0003),
        &schema,
        vec![
            AttributeValue::String("hello".into()),
            AttributeValue::Int(42),
        ],
    );
    let first = alice
        .create_entity(1, vec![placeable_component(1, transform(3.0)), my])
        .await;
    let second = alice
        .create_entity(2, vec![name_component(2, "second")])
        .await;

    let (mut late, before) = TundraClient::login(&node.url, "late", 4).await;
    assert!(before
        .iter()
        .all(|m| !matches!(m, Message::CreateEntity(_))));
    let first_msg = late.recv().await.unwrap();
    assert!(
        matches!(&first_msg, Message::RegisterComponentType(r) if r.type_id == 69969),
        "custom types come first, got {first_msg:?}"
    );
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let Message::CreateEntity(c) = late.recv().await.unwrap() {
            seen.push(c);
        }
    }
    let ids: Vec<EntityId> = seen.iter().map(|c| c.entity_id).collect();
    assert_eq!(ids, vec![first, second]);
    let custom_component = seen[0]
        .components
        .iter()
        .find(|c| c.type_id == 69969)
        .unwrap();
    match &custom_component.body {
        lessgate::tundra::ComponentBody::Attributes(block) => {
            assert_eq!(block.values[1], AttributeValue::Int(42));
        }
        other => panic!("custom component not decoded: {other:?}"),
    }
    node.stop().await;
}

#[tokio::test]
async fn peers_actions_reach_other_clients_as_local() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 4).await;
    let (mut bob, _) = TundraClient::login(&node.url, "bob", 4).await;
    let entity = alice
        .create_entity(1, vec![name_component(1, "door")])
        .await;
    alice
        .send(&Message::EntityAction(EntityAction {
            entity_id: entity,
            name: "Open".to_owned(),
            execution_type: exec_type::PEERS,
            parameters: vec!["fast".to_owned()],
        }))
        .await;
    let action = bob
        .recv_until(|m| matches!(m, Message::EntityAction(_)))
        .await;
    let Message::EntityAction(action) = action else {
        unreachable!()
    };
    assert_eq!(action.entity_id, entity);
    assert_eq!(action.execution_type, exec_type::LOCAL);
    assert_eq!(action.parameters, vec!["fast".to_owned()]);
    node.stop().await;
}

#[tokio::test]
async fn garbage_closes_only_the_sender() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 4).await;
    let (mut mallory, _) = TundraClient::login(&node.url, "mallory", 4).await;
    // CreateEntity claiming a 16 KiB+ attribute block that is not there.
    mallory
        .send_raw(vec![
            110, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 20, 0, 0xFF, 0xFF, 0x03, 0x00,
        ])
        .await;
    assert!(mallory.closed().await, "malformed frame closes the sender");
    let _ = alice
        .recv_until(|m| matches!(m, Message::ClientLeft(_)))
        .await;
    let entity = alice
        .create_entity(1, vec![name_component(1, "still here")])
        .await;
    assert!(entity.is_replicated());
    node.stop().await;
}

#[tokio::test]
async fn messages_before_login_are_dropped() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 4).await;
    let mut stranger = TundraClient::connect(&node.url).await;
    stranger.protocol = lessgate::tundra::ProtocolVersion(3);
    stranger
        .send_create(1, vec![name_component(1, "sneaky")])
        .await;
    // Alice's own creation is the first entity anyone sees.
    let mine = alice
        .create_entity(5, vec![name_component(1, "mine")])
        .await;
    let (mut bob, _) = TundraClient::login(&node.url, "bob", 4).await;
    let created = bob
        .recv_until(|m| matches!(m, Message::CreateEntity(_)))
        .await;
    assert!(matches!(created, Message::CreateEntity(c) if c.entity_id == mine));
    node.stop().await;
}
