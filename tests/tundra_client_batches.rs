//! Frames a client sends back to back reach the node in batches (one event
//! per batch of ready frames). On real sockets: a burst followed at once by
//! a close is applied whole and in order before the client counts as gone,
//! and the per-client message rate still counts every frame.

mod common;

use common::tundra_values::{edited_x, placeable_component, transform};
use common::{TestNode, TundraClient};
use futures_util::SinkExt;
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::Login;
use lessgate::tundra::{ComponentId, EntityId, Message, ProtocolVersion};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// A client's EditAttributes frame moving the Placeable to `x`.
fn move_to(entity: EntityId, component: ComponentId, x: f32) -> Vec<u8> {
    common::tundra_values::move_to(entity, component, x)
        .encode_frame(ProtocolVersion(3))
        .unwrap()
}

/// A shared entity with a Placeable: its id and the Placeable's id as
/// `observer` sees them.
async fn shared_box(
    creator: &mut TundraClient,
    observer: &mut TundraClient,
) -> (EntityId, ComponentId) {
    let entity = creator
        .create_entity(1, vec![placeable_component(1, transform(0.0))])
        .await;
    let Message::CreateEntity(created) = observer
        .recv_until(|m| matches!(m, Message::CreateEntity(c) if c.entity_id == entity))
        .await
    else {
        unreachable!()
    };
    (entity, created.components[0].id)
}

#[tokio::test]
async fn a_burst_then_close_is_applied_whole_and_in_order() {
    let node = TestNode::start(NodeConfig::default()).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 3).await;
    let (mut bob, _) = TundraClient::login(&node.url, "bob", 3).await;
    let (entity, component) = shared_box(&mut alice, &mut bob).await;

    // Carol logs in, moves the box 100 times and closes, all in one write
    // without reading: the node most likely reads them as one batch with
    // the close at its end (the test holds however they are split).
    let (mut carol, _) = tokio_tungstenite::connect_async(node.url.as_str())
        .await
        .unwrap();
    let login = Message::Login(Login {
        login_data: "{\"username\":\"carol\"}".into(),
        protocol_version: Some(3),
    });
    let mut frames = vec![login.encode_frame(ProtocolVersion(1)).unwrap()];
    frames.extend((1..=100).map(|x| move_to(entity, component, x as f32)));
    for frame in frames {
        carol.feed(WsMessage::Binary(frame.into())).await.unwrap();
    }
    carol.feed(WsMessage::Close(None)).await.unwrap();
    carol.flush().await.unwrap();

    // Every move was applied, the last one last.
    let last = bob.recv_until(|m| edited_x(m, entity) == Some(100.0)).await;
    assert_eq!(edited_x(&last, entity), Some(100.0));
    node.stop().await;
}

#[tokio::test]
async fn a_batch_over_the_message_budget_is_slowed_and_every_frame_still_applied() {
    let mut config = NodeConfig::default();
    config.limits.max_messages_per_second = 50;
    config.limits.max_message_burst = Some(10);
    let node = TestNode::start(config).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 3).await;
    let (mut bob, _) = TundraClient::login(&node.url, "bob", 3).await;
    let (entity, component) = shared_box(&mut alice, &mut bob).await;
    for x in 1..=100 {
        bob.send_raw(move_to(entity, component, x as f32)).await;
    }
    // Two seconds' worth at 50 a second: read slowly, none dropped, the
    // sender not closed.
    let last = alice
        .recv_until(|m| edited_x(m, entity) == Some(100.0))
        .await;
    assert_eq!(edited_x(&last, entity), Some(100.0));
    let marker = bob
        .create_entity(
            7,
            vec![common::tundra_values::name_component(1, "still here")],
        )
        .await;
    assert!(marker.is_replicated(), "the sender is still served");
    node.stop().await;
}
