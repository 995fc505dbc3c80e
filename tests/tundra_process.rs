//! The real binary: `lessgate run` serves Tundra clients and loads a scene.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::TundraClient;
use lessgate::tundra::Message;

/// Kills the child when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn run_serves_a_scene_file_to_a_client() {
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/scenes/nested.txml");
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["run", "--tundra-listen", "127.0.0.1:0", "--scene", scene])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines.next().expect("a line").expect("readable");
            if let Some(url) = line.strip_prefix("lessgate: Tundra clients connect to ") {
                return url.to_owned();
            }
        }
    })
    .await
    .unwrap();
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
