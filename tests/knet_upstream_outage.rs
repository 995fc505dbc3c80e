//! A world server reached over kNet UDP that dies is noticed by the
//! "connection refused" its closed port answers (docs/upstream.md §4,
//! docs/knet.md), with real sockets on 127.0.0.1: a scripted world server
//! (`net_common::knet_world`) is killed under bridge node U while a client
//! of U edits one of its entities, and U must report the connection lost
//! for the refusals, not after kNet's 15 s of silence.
//!
//! `measure_kill_to_next_login` (ignored; run it with `--ignored
//! --nocapture`) prints how long U takes from the kill to its next dial and
//! login, with the default redial settings, with a client editing and
//! without.

mod common;
mod net_common;

use std::path::Path;
use std::time::Duration;

use common::tundra_values::{name_component, placeable_component, transform};
use lessgate::config::NodeConfig;
use net_common::knet_world::{KnetWorld, Transport};
use net_common::{capture, wait_status, LiveNode, Observer};
use tokio::time::Instant;

/// A failure bound only: kNet's own silence timeout is 15-18.5 s.
const BOUND: Duration = Duration::from_secs(60);

const LOST: &str =
    "world server connection lost; redialling, its entities stay for the grace period";

/// A bridge node to `url`; `quick` redials within 100-500 ms, otherwise
/// the defaults (500 ms doubling to 30 s).
fn bridge(url: &str, quick: bool) -> NodeConfig {
    let redial = if quick {
        "reconnect_min_ms = 100\nreconnect_max_ms = 500\n"
    } else {
        ""
    };
    let text = format!(
        "[node]\nname = \"bridge\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         [upstream]\nurl = \"{url}\"\n{redial}settle_ms = 200\n\
         [upstream.login]\nusername = \"bridge\"\n"
    );
    NodeConfig::parse(Path::new("bridge.toml"), &text).expect("bridge config")
}

/// A world with one entity, the bridge logged in to it, and (`editing`) a
/// client of the bridge renaming that entity 15 times a second, which the
/// bridge sends to the world: the traffic of a bridge in use.
async fn running(
    quick: bool,
    editing: bool,
) -> (KnetWorld, LiveNode, Option<tokio::task::JoinHandle<()>>) {
    let world = KnetWorld::start(Transport::Udp, false, None).await;
    world.create(vec![
        name_component(1, "lamp"),
        placeable_component(2, transform(1.0)),
    ]);
    let u = LiveNode::start_config("bridge", bridge(&world.url(), quick)).await;
    wait_status(&[&u], BOUND, "the bridge logged in", |s| {
        s.upstream == Some("ready")
    })
    .await;
    let editor = if editing {
        let client = Observer::join(&u.url, "editor").await;
        net_common::wait_observers(&[&client], BOUND, "the lamp at U", |o| {
            o[0].view.find("lamp").is_some()
        })
        .await;
        Some(tokio::spawn(async move {
            for n in 0.. {
                let seen = client.snapshot();
                let Some((lamp, known)) = seen.view.find("lamp") else {
                    return;
                };
                let component = known.name_component.unwrap();
                let edit = common::tundra_values::name_edit(lamp, component, 1, &format!("#{n}"));
                client.send(&edit).await;
                tokio::time::sleep(Duration::from_millis(66)).await;
            }
        }))
    } else {
        None
    };
    (world, u, editor)
}

/// How many "connection lost" lines the bridges of this binary logged.
fn lost_lines() -> Vec<capture::Line> {
    capture::lines(LOST)
}

/// Waits for a "connection lost" line beyond the first `before`.
async fn next_lost(before: usize) -> capture::Line {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(line) = lost_lines().into_iter().nth(before) {
            return line;
        }
        assert!(Instant::now() < deadline, "the bridge never noticed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_knet_udp_world_server_is_noticed_by_its_refusals() {
    capture::install();
    let (world, u, editor) = running(true, true).await;
    let before = lost_lines().len();
    world.kill();
    let line = next_lost(before).await;
    let reason = line.field("reason").unwrap_or_default().to_owned();
    assert!(
        reason.contains("refused"),
        "the connection ended for the refusals, not kNet's silence timeout: {reason}"
    );
    if let Some(editor) = editor {
        editor.abort();
    }
    u.stop().await;
}

/// Kill, notice, restart on the same address, next dial and login: the
/// times from the kill, in ms.
async fn kill_to_login(editing: bool) -> (u128, u128, u128) {
    let (world, u, editor) = running(false, editing).await;
    // Past the first pings: a session in its steady state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let address = world.address;
    let before = lost_lines().len();
    let killed = Instant::now();
    world.kill();
    drop(world);
    next_lost(before).await;
    let noticed = killed.elapsed().as_millis();
    let again = KnetWorld::start(Transport::Udp, false, Some(address)).await;
    let deadline = Instant::now() + BOUND;
    while again.logins() == 0 {
        assert!(Instant::now() < deadline, "no login after the restart");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let dialled = again.dials()[0].duration_since(killed).as_millis();
    let logged_in = killed.elapsed().as_millis();
    if let Some(editor) = editor {
        editor.abort();
    }
    u.stop().await;
    (noticed, dialled, logged_in)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn measure_kill_to_next_login() {
    capture::install();
    for editing in [true, false] {
        for run in 0..3 {
            let (noticed, dialled, logged_in) = kill_to_login(editing).await;
            println!(
                "editing={editing} run={run}: noticed {noticed} ms, next dial {dialled} ms, \
                 logged in {logged_in} ms after the kill"
            );
        }
    }
}
