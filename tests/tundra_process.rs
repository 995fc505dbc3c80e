//! The real binary: `lessgate run` serves Tundra clients and loads a scene.

mod common;

use std::process::{Command, Stdio};

use common::process::Process;
use common::TundraClient;
use lessgate::tundra::Message;

#[tokio::test]
async fn run_serves_a_scene_file_to_a_client() {
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/scenes/nested.txml");
    let mut child = Process::spawn(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["run", "--tundra-listen", "127.0.0.1:0", "--scene", scene])
            .stderr(Stdio::null()),
    );
    let url = child.tundra_url().await;
    let (mut client, _) = TundraClient::login(&url, "visitor", 3).await;
    let mut created = Vec::new();
    while created.len() < 2 {
        if let Message::CreateEntity(c) = client.recv().await.expect("scene arrives") {
            created.push(c);
        }
    }
    // The lamp is nested in the table: parent first, with its id; the
    // sync="false" helper never arrives.
    assert_eq!(created[0].entity_id.0, 10);
    assert_eq!(created[0].components.len(), 2);
    assert_eq!(created[1].entity_id.0, 11);
    assert_eq!(created[1].parent, Some(created[0].entity_id));
    // A second visitor gets the same two entities and nothing else before
    // the marker action the first sends once it has joined.
    let (mut other, _) = TundraClient::login(&url, "second", 3).await;
    let _ = client
        .recv_until(|m| matches!(m, Message::ClientJoined(_)))
        .await;
    client
        .send(&Message::EntityAction(
            lessgate::tundra::messages::EntityAction {
                entity_id: created[0].entity_id,
                name: "Marker".to_owned(),
                execution_type: lessgate::tundra::messages::exec_type::PEERS,
                parameters: vec![],
            },
        ))
        .await;
    let mut ids = Vec::new();
    loop {
        match other.recv().await.expect("open") {
            Message::CreateEntity(c) => ids.push(c.entity_id.0),
            Message::EntityAction(a) if a.name == "Marker" => break,
            _ => {}
        }
    }
    assert_eq!(ids, vec![10, 11]);
}
