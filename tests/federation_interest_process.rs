//! Spatial interest with three real `lessgate run` processes on 127.0.0.1
//! (docs/federation.md §8, docs/operations.md §2.11): alpha - beta - gamma
//! in a chain, their worlds placed 1 km apart, every node with
//! `[interest] mode = "spatial"`. Alpha's client does not receive gamma's
//! beacon while it looks at home (gamma's sign, which has no Placeable and
//! was created after the beacon, arrives as the proof that the beacon would
//! have); it receives it, through beta, once its ObserverPosition is at
//! gamma's world, and loses it again when it looks home.

mod common;
mod net_common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::process::{lessgate_binary, Process};
use common::tundra_values::{name_component, named_box_at};
use common::PATIENCE;
use lessgate::tundra::messages::ObserverPosition;
use lessgate::tundra::rigid_body_parts::PositionUpdate;
use lessgate::tundra::values::Float3;
use lessgate::tundra::Message;
use net_common::{wait_observers, write_nodes, NodeFiles, Observer};

async fn start(files: &NodeFiles) -> (Process, String) {
    let mut command = Command::new(lessgate_binary());
    command
        .arg("run")
        .arg("--config")
        .arg(files.dir.join("node.toml"))
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stderr(Stdio::from(
            std::fs::File::create(files.dir.join("stderr.log")).unwrap(),
        ));
    let mut process = Process::spawn(&mut command);
    let url = process.tundra_url().await;
    (process, url)
}

fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", file.display());
    std::fs::write(file, text.replace(from, to)).unwrap();
}

fn look_from(x: f32) -> Message {
    Message::ObserverPosition(ObserverPosition {
        scene_id: 0,
        position: PositionUpdate::Full(Float3::new(x, 0.0, 0.0)),
        rotation: Default::default(),
    })
}

#[tokio::test]
async fn a_client_receives_a_far_world_only_while_it_looks_there() {
    let root = tempfile::tempdir().unwrap();
    let files = write_nodes(
        root.path(),
        &["alpha", "beta", "gamma"],
        &[(0, 1), (1, 2)],
        None,
        "",
    );
    for (seat, x) in files.iter().zip([0, 1000, 2000]) {
        let node_toml = seat.dir.join("node.toml");
        edit(
            &node_toml,
            "tick_hz = 20\n",
            &format!("tick_hz = 20\nplacement = [{x}, 0, 0]\n"),
        );
        let text = std::fs::read_to_string(&node_toml).unwrap();
        std::fs::write(
            &node_toml,
            format!("{text}\n[interest]\nmode = \"spatial\"\nradius = 100\ncentre = [0, 0, 0]\n"),
        )
        .unwrap();
    }
    let (_alpha, alpha_url) = start(&files[0]).await;
    let (_beta, _) = start(&files[1]).await;
    let (_gamma, gamma_url) = start(&files[2]).await;

    let ann = Observer::join(&alpha_url, "ann").await;
    ann.send(&look_from(0.0)).await;
    let gil = Observer::join(&gamma_url, "gil").await;
    gil.create(1, named_box_at("beacon", 1.0)).await;
    gil.create(2, vec![name_component(1, "sign")]).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "alpha's client receives gamma's sign (no Placeable: it goes everywhere)",
        |seen| seen[0].view.find("sign").is_some(),
    )
    .await;
    assert!(
        ann.snapshot().view.find("beacon").is_none(),
        "gamma's beacon, 2 km away, reached alpha's client"
    );

    // Ann looks at gamma's world: the beacon arrives where it stands.
    ann.send(&look_from(2000.0)).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "alpha's client receives the beacon once it looks at gamma's world",
        |seen| seen[0].view.find("beacon").and_then(|(_, s)| s.x) == Some(2001.0),
    )
    .await;

    // And home again: it leaves.
    ann.send(&look_from(0.0)).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "the beacon leaves alpha's client when it looks home",
        |seen| seen[0].view.find("beacon").is_none() && seen[0].view.find("sign").is_some(),
    )
    .await;
}
