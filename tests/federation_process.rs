//! Three real `lessgate run` processes on 127.0.0.1, peered by the example
//! configs in peers/example (a triangle): a Tundra client on alpha creates
//! an entity, a client on gamma sees it once and moves it, the move goes to
//! alpha (the authority) and comes back; a removal at alpha reaches gamma;
//! gamma killed and restarted sees the scene again.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::TundraClient;
use lessgate::tundra::messages::{EditAttributes, EditAttributesBlock, RemoveEntity};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, EntityId, Message, Registry,
};

struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts one example node and waits until it listens for Tundra clients.
async fn start(name: &str) -> (Node, String) {
    let config = format!(
        "{}/peers/example/{name}/node.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut child = Node(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["run", "--config", &config])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines
                .next()
                .expect("the node prints its address")
                .expect("readable");
            if let Some(url) = line.strip_prefix("lessgate: Tundra clients connect to ") {
                // Keep draining so the child never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines {});
                return url.to_owned();
            }
        }
    })
    .await
    .unwrap();
    (child, url)
}

fn transform(x: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, 0.0, 0.0),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

fn named_box(name: &str) -> Vec<ComponentData> {
    let registry = Registry::builtin();
    let placeable = registry.get(20).unwrap();
    let mut values = placeable.default_values();
    values[0] = transform(1.0);
    let name_schema = registry.get(26).unwrap();
    let mut names = name_schema.default_values();
    names[0] = AttributeValue::String(name.to_owned());
    vec![
        ComponentData::with_values(ComponentId(0x4000_0001), placeable, values),
        ComponentData::with_values(ComponentId(0x4000_0002), name_schema, names),
    ]
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

fn x_of_edit(message: &Message, entity: EntityId) -> Option<f32> {
    let Message::EditAttributes(edit) = message else {
        return None;
    };
    if edit.entity_id != entity {
        return None;
    }
    let slots = Registry::builtin().get(20)?.slot_types();
    let decoded = edit.blocks.first()?.decode(&slots).ok()?;
    match &decoded.edits.first()?.value {
        AttributeValue::Transform(t) => Some(t.pos.x),
        _ => None,
    }
}

#[tokio::test]
async fn three_processes_share_one_scene() {
    let (_alpha, alpha_url) = start("alpha").await;
    let (_beta, _beta_url) = start("beta").await;
    let (gamma, gamma_url) = start("gamma").await;

    let (mut at_alpha, _) = TundraClient::login(&alpha_url, "ann", 3).await;
    let entity_at_alpha = at_alpha.create_entity(1, named_box("lantern")).await;

    let (mut at_gamma, _) = TundraClient::login(&gamma_url, "gil", 3).await;
    let (entity, placeable) = loop {
        let message = at_gamma.recv().await.expect("gamma stays connected");
        if let Some(found) = is_named(&message, "lantern") {
            break found;
        }
    };

    // Gamma's client moves it; alpha applies it and every copy follows.
    let slots = Registry::builtin().get(20).unwrap().slot_types();
    let edit = AttributeEdit {
        index: 0,
        value: transform(42.0),
    };
    at_gamma
        .send(&Message::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: entity,
            blocks: vec![EditAttributesBlock::encode(placeable, &[edit], &slots).unwrap()],
        }))
        .await;
    let moved = at_alpha
        .recv_until(|m| x_of_edit(m, entity_at_alpha).is_some())
        .await;
    assert_eq!(
        x_of_edit(&moved, entity_at_alpha),
        Some(42.0),
        "alpha applied gamma's edit"
    );
    let echoed = at_gamma
        .recv_until(|m| x_of_edit(m, entity).is_some() || is_named(m, "lantern").is_some())
        .await;
    assert_eq!(
        x_of_edit(&echoed, entity),
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
