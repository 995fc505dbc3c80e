//! The embedded demo in this process: three real nodes on free ports reach
//! a full triangle, every node presents entities of all three origins, and
//! the simulated movers of another node move in a client's view.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::TundraClient;
use lessgate::demo::{quiet, Demo, DemoOptions, DemoPorts};
use lessgate::runtime::status::NodeStatus;
use lessgate::tundra::{AttributeValue, ComponentBody, EntityId, Message};

/// Bounded patience for the federation to settle: failing past it, never
/// passing because of it.
const SETTLE: Duration = Duration::from_secs(60);

fn any_ports() -> DemoOptions {
    DemoOptions {
        ports: DemoPorts {
            tundra: 0,
            http: 0,
            peer: 0,
            knet: 0,
        },
        movers: 3,
    }
}

/// Origin names with at least one entity in a node's status.
fn origins(status: &NodeStatus) -> BTreeSet<String> {
    status
        .origins
        .iter()
        .filter(|o| o.entities > 0)
        .filter_map(|o| o.name.clone())
        .collect()
}

/// The `Name` of a created entity, if it has one.
fn entity_name(message: &Message) -> Option<(EntityId, String)> {
    let Message::CreateEntity(create) = message else {
        return None;
    };
    create.components.iter().find_map(|c| match &c.body {
        ComponentBody::Attributes(block) if c.type_id == 26 => match block.values.first() {
            Some(AttributeValue::String(name)) => Some((create.entity_id, name.clone())),
            _ => None,
        },
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_nodes_see_all_three_origins_and_remote_movers_move() {
    let demo = Demo::start(any_ports(), quiet())
        .await
        .expect("demo starts");
    let nodes = demo.nodes().to_vec();
    let dir = demo.dir().to_owned();
    assert!(dir.join("alpha/node.toml").is_file());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(demo.run(async move {
        let _ = stopped.await;
    }));

    let all: BTreeSet<String> = ["alpha", "beta", "gamma"].map(String::from).into();
    for node in &nodes {
        let mut status = node.status.clone();
        let settled = tokio::time::timeout(
            SETTLE,
            status.wait_for(|s| origins(s) == all && s.links.len() == 2),
        )
        .await
        .map(|ready| ready.is_ok());
        assert_eq!(
            settled,
            Ok(true),
            "{} never saw three origins: {:?}",
            node.name,
            node.status.borrow().origins
        );
    }

    // A client of beta sees alpha's movers and their transforms change.
    let beta = nodes.iter().find(|n| n.name == "beta").unwrap();
    let (mut client, mut seen) = TundraClient::login(&beta.tundra_url, "viewer", 3).await;
    let mut names: BTreeMap<EntityId, String> = BTreeMap::new();
    let mut moved: BTreeSet<String> = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + SETTLE;
    while moved.len() < 2 && tokio::time::Instant::now() < deadline {
        let message = match (!seen.is_empty()).then(|| seen.remove(0)) {
            Some(message) => message,
            None => match client.recv_within(Duration::from_secs(1)).await {
                Some(message) => message,
                None => continue,
            },
        };
        if let Some((id, name)) = entity_name(&message) {
            names.insert(id, name);
        }
        if let Message::EditAttributes(edit) = &message {
            if let Some(name) = names.get(&edit.entity_id) {
                if name.contains("mover") && !name.starts_with("beta") {
                    moved.insert(name.split(' ').next().unwrap_or_default().to_owned());
                }
            }
        }
    }
    assert_eq!(
        moved,
        ["alpha", "gamma"].map(String::from).into(),
        "movers of the other two nodes move at beta"
    );

    let _ = stop.send(());
    run.await.expect("demo stops cleanly");
    assert!(!dir.exists(), "the demo removes its files");
}
