//! Per-client limits and hostile clients on a real node: each refusal costs
//! only the offending connection.

mod common;

use common::tundra_values::{name_component, name_edit};
use common::{TestNode, TundraClient};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{exec_type, EntityAction};
use lessgate::tundra::{ComponentId, Message};

#[tokio::test]
async fn client_that_stops_reading_is_dropped_and_others_carry_on() {
    let mut config = NodeConfig::default();
    config.limits.max_client_backlog_bytes = 64 * 1024;
    config.limits.max_client_stall_secs = 1;
    let node = TestNode::start(config).await;
    let (mut writer, _) = TundraClient::login(&node.url, "writer", 3).await;
    // Logs in, then never reads again.
    let (_sleeper, _) = TundraClient::login(&node.url, "sleeper", 3).await;
    let _ = writer
        .recv_until(|m| matches!(m, Message::ClientJoined(_)))
        .await;
    let mut entities = Vec::new();
    for i in 1..=8 {
        let id = writer.create_entity(i, vec![name_component(1, "n")]).await;
        entities.push(id);
    }
    // Every round changes every name to 12 KB of new text; the sleeper's
    // socket buffers fill, its queue stays over the limit (it gets only
    // coalesced state meanwhile), and after a second it is closed.
    let mut left = false;
    for round in 0..2000u32 {
        let text: String = std::iter::repeat(char::from(b'a' + (round % 26) as u8))
            .take(12_000)
            .collect();
        for entity in &entities {
            writer
                .send(&name_edit(*entity, ComponentId(1), 0, &text))
                .await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // Drain what the node sends the writer; stop at the ClientLeft.
        while let Ok(Some(message)) =
            tokio::time::timeout(std::time::Duration::from_millis(1), writer.recv()).await
        {
            if let Message::ClientLeft(l) = message {
                assert_eq!(l.user_id.0, 2);
                left = true;
            }
        }
        if left {
            break;
        }
    }
    assert!(left, "the client that never reads is disconnected");
    // The writer still works.
    let id = writer
        .create_entity(99, vec![name_component(1, "after")])
        .await;
    assert!(id.is_replicated());
    node.stop().await;
}

#[tokio::test]
async fn oversized_frame_closes_the_sender() {
    let mut config = NodeConfig::default();
    config.limits.max_frame_bytes = 4096;
    let node = TestNode::start(config).await;
    let (mut big, _) = TundraClient::login(&node.url, "big", 4).await;
    let (mut other, _) = TundraClient::login(&node.url, "other", 4).await;
    let mut frame = vec![120u8, 0];
    frame.resize(10_000, 0);
    big.send_raw(frame).await;
    assert!(big.closed().await);
    let _ = other
        .recv_until(|m| matches!(m, Message::ClientLeft(_)))
        .await;
    node.stop().await;
}

#[tokio::test]
async fn entity_limit_refuses_further_creations() {
    let mut config = NodeConfig::default();
    config.limits.max_entities_per_client = 2;
    let node = TestNode::start(config).await;
    let (mut alice, _) = TundraClient::login(&node.url, "alice", 3).await;
    let first = alice.create_entity(1, vec![name_component(1, "one")]).await;
    let second = alice.create_entity(2, vec![name_component(1, "two")]).await;
    alice.send_create(3, vec![name_component(1, "three")]).await;
    // A marker after the refused creation: a late joiner sees the two
    // entities, then nothing but what follows.
    let (mut late, _) = TundraClient::login(&node.url, "late", 3).await;
    let mut created = Vec::new();
    alice
        .send(&Message::EntityAction(EntityAction {
            entity_id: first,
            name: "Marker".to_owned(),
            execution_type: exec_type::PEERS,
            parameters: vec![],
        }))
        .await;
    loop {
        match late.recv().await.expect("open") {
            Message::CreateEntity(c) => created.push(c.entity_id),
            Message::EntityAction(a) if a.name == "Marker" => break,
            _ => {}
        }
    }
    assert_eq!(created, vec![first, second]);
    node.stop().await;
}
