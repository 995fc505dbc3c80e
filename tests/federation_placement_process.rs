//! World placement with three real `lessgate run` processes on 127.0.0.1
//! (docs/federation.md §2.7, docs/operations.md §2.10): alpha - beta -
//! gamma in a chain, their worlds placed at x = 0, 500 and 1000. A client
//! of alpha creates a lantern at x = 1 and a wick as its child; gamma's
//! WebSocket and native (kNet UDP) clients see the lantern at -999 and the
//! wick at its own relative x; gamma's client moves the lantern and alpha
//! applies it in its own coordinates; a reload that moves gamma's world
//! moves the lantern for gamma's clients by updates, with no removal or
//! re-creation.

mod common;
mod net_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::process::{lessgate_binary, Process};
use common::tundra_values::{move_to, named_box_at};
use common::PATIENCE;
use lessgate::tundra::messages::CreateEntity;
use lessgate::tundra::{EntityId, Message};
use net_common::{edit, free_udp_port, wait_observers, write_nodes, NodeFiles, Observer};

/// A node process; its log (stderr) goes to a file.
struct Node {
    _process: Process,
    url: String,
}

async fn start(files: &NodeFiles, pid_file: Option<&Path>) -> Node {
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
    if let Some(pid_file) = pid_file {
        command.arg("--pid-file").arg(pid_file);
    }
    let mut process = Process::spawn(&mut command);
    let url = process.tundra_url().await;
    Node {
        _process: process,
        url,
    }
}

fn reload(pid_file: &Path) {
    let output = Command::new(lessgate_binary())
        .arg("reload")
        .arg("--pid-file")
        .arg(pid_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "lessgate reload failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The x an observer sees for the entity named `name`.
fn x_of(observer: &net_common::Observed, name: &str) -> Option<f32> {
    observer.view.find(name).and_then(|(_, seen)| seen.x)
}

#[tokio::test]
async fn three_placed_worlds_stand_apart_and_move_by_reload() {
    let root = tempfile::tempdir().unwrap();
    let files = write_nodes(
        root.path(),
        &["alpha", "beta", "gamma"],
        &[(0, 1), (1, 2)],
        None,
        "",
    );
    for (seat, x) in files.iter().zip([0, 500, 1000]) {
        edit(
            &seat.dir.join("node.toml"),
            "tick_hz = 20\n",
            &format!("tick_hz = 20\nplacement = [{x}, 0, 0]\n"),
        );
    }
    // Gamma serves native viewers too.
    let knet = free_udp_port();
    edit(
        &files[2].dir.join("node.toml"),
        "[tundra]\nlisten = \"127.0.0.1:0\"\n",
        &format!("[tundra]\nlisten = \"127.0.0.1:0\"\nknet_listen = \"127.0.0.1:{knet}\"\n"),
    );
    let pid_file: PathBuf = root.path().join("gamma.pid");
    let alpha = start(&files[0], None).await;
    let _beta = start(&files[1], None).await;
    let gamma = start(&files[2], Some(&pid_file)).await;

    let at_alpha = Observer::join(&alpha.url, "ann").await;
    let at_gamma = Observer::join(&gamma.url, "gil").await;
    let native = Observer::join(&format!("knet+udp://127.0.0.1:{knet}"), "nat").await;
    let (lantern, _) = at_alpha.create(1, named_box_at("lantern", 1.0)).await;
    let wick = CreateEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0002),
        temporary: false,
        parent: Some(lantern),
        components: named_box_at("wick", 2.0),
    };
    at_alpha.send(&Message::CreateEntity(wick)).await;
    wait_observers(
        &[&at_gamma, &native],
        PATIENCE,
        "gamma's clients see alpha's lantern where alpha's world stands",
        |seen| {
            seen.iter()
                .all(|o| x_of(o, "lantern") == Some(-999.0) && x_of(o, "wick") == Some(2.0))
        },
    )
    .await;

    // Gamma's client moves the lantern to its x = -995: alpha's x = 5.
    let (at_gamma_id, placeable) = at_gamma
        .snapshot()
        .view
        .find("lantern")
        .and_then(|(id, seen)| Some((id, seen.placeable?)))
        .expect("gamma's client sees the lantern's Placeable");
    at_gamma
        .send(&move_to(at_gamma_id, placeable, -995.0))
        .await;
    wait_observers(
        &[&at_alpha],
        PATIENCE,
        "alpha applies gamma's move in its own coordinates",
        |seen| x_of(&seen[0], "lantern") == Some(5.0),
    )
    .await;

    // Gamma's world moves to x = 2000: the lantern moves for gamma's
    // clients, by updates.
    let before: Vec<(usize, usize)> = [&at_gamma, &native]
        .iter()
        .map(|o| {
            let view = o.snapshot().view;
            (view.creates, view.removes)
        })
        .collect();
    edit(
        &files[2].dir.join("node.toml"),
        "placement = [1000, 0, 0]",
        "placement = [2000, 0, 0]",
    );
    reload(&pid_file);
    wait_observers(
        &[&at_gamma, &native],
        PATIENCE,
        "gamma's clients see the lantern where gamma's world now stands",
        |seen| seen.iter().all(|o| x_of(o, "lantern") == Some(-1995.0)),
    )
    .await;
    let after: Vec<(usize, usize)> = [&at_gamma, &native]
        .iter()
        .map(|o| {
            let view = o.snapshot().view;
            (view.creates, view.removes)
        })
        .collect();
    assert_eq!(
        after, before,
        "moved by updates: no removal, no re-creation"
    );
    assert_eq!(
        x_of(&at_alpha.snapshot(), "lantern"),
        Some(5.0),
        "alpha's world did not move"
    );
}
