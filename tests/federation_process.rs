//! Three real `lessgate run` processes on 127.0.0.1, peered by the example
//! configs in peers/example (a triangle): a Tundra client on alpha creates
//! an entity, a client on gamma sees it once and moves it, the move goes to
//! alpha (the authority) and comes back; a removal at alpha reaches gamma;
//! gamma killed and restarted sees the scene again.

mod common;

use std::process::{Command, Stdio};

use common::process::Process;
use common::tundra_values::{edited_x, move_to, named_box_at};
use common::TundraClient;
use lessgate::tundra::messages::RemoveEntity;
use lessgate::tundra::{AttributeValue, ComponentId, EntityId, Message};

/// Starts one example node and waits until it listens for Tundra clients.
async fn start(name: &str) -> (Process, String) {
    let config = format!(
        "{}/peers/example/{name}/node.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut child = Process::spawn(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["run", "--config", &config])
            .stderr(Stdio::null()),
    );
    let url = child.tundra_url().await;
    (child, url)
}

fn is_named(message: &Message, name: &str) -> Option<(EntityId, ComponentId)> {
    let Message::CreateEntity(create) = message else {
        return None;
    };
    let named = create.components.iter().any(|c| match &c.body {
        lessgate::tundra::ComponentBody::Attributes(b) => {
            b.values.first() == Some(&AttributeValue::String(name.into()))
        }
        _ => false,
    });
    let placeable = create.components.iter().find(|c| c.type_id == 20)?.id;
    named.then_some((create.entity_id, placeable))
}

#[tokio::test]
async fn three_processes_share_one_scene() {
    let (_alpha, alpha_url) = start("alpha").await;
    let (_beta, _beta_url) = start("beta").await;
    let (gamma, gamma_url) = start("gamma").await;

    let (mut at_alpha, _) = TundraClient::login(&alpha_url, "ann", 3).await;
    let entity_at_alpha = at_alpha
        .create_entity(1, named_box_at("lantern", 1.0))
        .await;

    let (mut at_gamma, _) = TundraClient::login(&gamma_url, "gil", 3).await;
    let (entity, placeable) = loop {
        let message = at_gamma.recv().await.expect("gamma stays connected");
        if let Some(found) = is_named(&message, "lantern") {
            break found;
        }
    };

    // Gamma's client moves it; alpha applies it and every copy follows.
    at_gamma.send(&move_to(entity, placeable, 42.0)).await;
    let moved = at_alpha
        .recv_until(|m| edited_x(m, entity_at_alpha).is_some())
        .await;
    assert_eq!(
        edited_x(&moved, entity_at_alpha),
        Some(42.0),
        "alpha applied gamma's edit"
    );
    let echoed = at_gamma
        .recv_until(|m| edited_x(m, entity).is_some() || is_named(m, "lantern").is_some())
        .await;
    assert_eq!(
        edited_x(&echoed, entity),
        Some(42.0),
        "and gamma sees it as state, not a second copy"
    );

    // Gamma is killed and restarted: it sees the scene again, once.
    drop(at_gamma);
    drop(gamma);
    let (_gamma, gamma_url) = start("gamma").await;
    let (mut again, _) = TundraClient::login(&gamma_url, "gil", 3).await;
    // The survivors notice the old link is gone after the configured
    // liveness timeout (10 s in the example files), then redial.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let entity = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let message = again
            .recv_within(left.min(std::time::Duration::from_secs(5)))
            .await;
        if let Some((entity, _)) = message.as_ref().and_then(|m| is_named(m, "lantern")) {
            break entity;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restarted node never saw the scene again"
        );
    };

    // Removal at the origin reaches the restarted node.
    at_alpha
        .send(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: entity_at_alpha,
        }))
        .await;
    let removed = again
        .recv_until(|m| {
            matches!(m, Message::RemoveEntity(r) if r.entity_id == entity)
                || is_named(m, "lantern").is_some()
        })
        .await;
    assert!(
        matches!(removed, Message::RemoveEntity(_)),
        "removed, never duplicated: {removed:?}"
    );
}
