//! Spatial interest with three real `lessgate run` processes on 127.0.0.1
//! (docs/federation.md §8, docs/operations.md §2.11): alpha - beta - gamma
//! in a chain, their worlds placed 1 km apart, every node with
//! `[interest] mode = "spatial"`. Alpha's client does not receive gamma's
//! beacon while it looks at home (gamma's sign, which has no Placeable and
//! was created after the beacon, arrives as the proof that the beacon would
//! have); it receives it, through beta, once its ObserverPosition is at
//! gamma's world (a teleport of 2 km); the beacon stays while it is moved
//! within the hysteresis beyond the radius, leaves beyond it and comes
//! back where it is; and it leaves again when the client looks home.

mod common;
mod net_common;

use std::process::{Command, Stdio};

use common::process::{lessgate_binary, Process};
use common::tundra_values::{move_to, name_component, named_box_at};
use common::PATIENCE;
use lessgate::tundra::messages::ObserverPosition;
use lessgate::tundra::rigid_body_parts::PositionUpdate;
use lessgate::tundra::values::Float3;
use lessgate::tundra::Message;
use net_common::{edit, wait_observers, write_nodes, NodeFiles, Observer};

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
    let (beacon, beacon_placeable) = gil.create(1, named_box_at("beacon", 1.0)).await;
    let beacon_placeable = beacon_placeable.unwrap();
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

    // Hysteresis: 105 m from where ann looks (radius 100, hysteresis 10)
    // the beacon stays; gamma's marker, moved after it, proves the move
    // arrived. At 130 m it leaves; back at 1 m it returns where it is.
    let (marker, marker_placeable) = gil.create(3, named_box_at("marker", 50.0)).await;
    let marker_placeable = marker_placeable.unwrap();
    gil.send(&move_to(beacon, beacon_placeable, 105.0)).await;
    gil.send(&move_to(marker, marker_placeable, 60.0)).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "alpha's client sees the marker's later move",
        |seen| seen[0].view.find("marker").and_then(|(_, s)| s.x) == Some(2060.0),
    )
    .await;
    assert_eq!(
        ann.snapshot().view.find("beacon").and_then(|(_, s)| s.x),
        Some(2105.0),
        "within the hysteresis the beacon stays, moved"
    );
    gil.send(&move_to(beacon, beacon_placeable, 130.0)).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "the beacon leaves alpha's client beyond the hysteresis",
        |seen| seen[0].view.find("beacon").is_none(),
    )
    .await;
    gil.send(&move_to(beacon, beacon_placeable, 1.0)).await;
    wait_observers(
        &[&ann],
        PATIENCE,
        "the beacon comes back where it now is",
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

/// A node process with its HTTP status address.
struct Measured {
    _process: Process,
    url: String,
    http: String,
}

async fn start_with_http(files: &NodeFiles) -> Measured {
    let mut process = Process::spawn(
        Command::new(lessgate_binary())
            .arg("run")
            .arg("--config")
            .arg(files.dir.join("node.toml"))
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stderr(Stdio::from(
                std::fs::File::create(files.dir.join("stderr.log")).unwrap(),
            )),
    );
    let (mut url, mut http) = (None, None);
    let (url, http) = process
        .read_stdout_until(move |line| {
            if let Some(rest) = line.strip_prefix(common::process::TUNDRA_LINE) {
                url = Some(rest.to_owned());
            }
            if let Some(rest) = line.strip_prefix("lessgate: status, metrics and health at http://")
            {
                http = Some(rest.trim_end_matches('/').to_owned());
            }
            Some((url.clone()?, http.clone()?))
        })
        .await;
    Measured {
        _process: process,
        url,
        http,
    }
}

/// Bytes a node's links have received so far (`/status`).
async fn link_bytes_received(http: &str) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(http).await.unwrap();
    let request = "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let (_, body) = text.split_once("\r\n\r\n").expect("a full answer");
    let status: serde_json::Value = serde_json::from_str(body).expect("/status is JSON");
    status["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["bytes_received"].as_u64().unwrap())
        .sum()
}

const BOXES: u32 = 100;

/// Measurement, not a check (`cargo test --release --test
/// federation_interest_process measure -- --ignored --nocapture`; figures in
/// BENCHMARKS.md): real nodes in a chain, worlds 1 km apart, `radius =
/// 300`, a client on each node moving 100 boxes of its world at 10 Hz and
/// looking at home. Prints the link bytes each node receives per second
/// with 3 and 8 nodes, in `spatial` and in `all` mode; then, in the chain
/// of 3, the time from an ObserverPosition that moves node 0's client
/// into world 2's area until it has all of world 2's boxes (20 rounds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_chain_link_bytes_and_observer_latency() {
    for spatial in [true, false] {
        for n in [3usize, 8] {
            let root = tempfile::tempdir().unwrap();
            let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let chain: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
            let files = write_nodes(root.path(), &names, &chain, None, "");
            for (i, seat) in files.iter().enumerate() {
                let node_toml = seat.dir.join("node.toml");
                edit(
                    &node_toml,
                    "tick_hz = 20\n",
                    &format!("tick_hz = 20\nplacement = [{}, 0, 0]\n", i * 1000),
                );
                let mode = if spatial { "spatial" } else { "all" };
                let text = std::fs::read_to_string(&node_toml).unwrap();
                std::fs::write(
                    &node_toml,
                    format!("{text}\n[interest]\nmode = \"{mode}\"\nradius = 300\n"),
                )
                .unwrap();
            }
            let mut nodes = Vec::new();
            for seat in &files {
                nodes.push(start_with_http(seat).await);
            }
            let mut movers = Vec::new();
            for (i, node) in nodes.iter().enumerate() {
                let client = Observer::join(&node.url, &format!("c{i}")).await;
                client.send(&look_from(50.0)).await;
                let mut boxes = Vec::new();
                for b in 0..BOXES {
                    let (id, placeable) = client
                        .create(b + 1, named_box_at(&format!("w{i}-{b}"), b as f32))
                        .await;
                    boxes.push((id, placeable.unwrap()));
                }
                movers.push((client, boxes));
            }
            let mut tick = 0u32;
            let mut step = || {
                tick += 1;
                tick
            };
            // Warm up 5 s, then measure 10 s.
            let mut before = Vec::new();
            for phase in 0..2 {
                let steps = if phase == 0 { 50 } else { 100 };
                if phase == 1 {
                    before.clear();
                    for node in &nodes {
                        before.push(link_bytes_received(&node.http).await);
                    }
                }
                for _ in 0..steps {
                    let t = step();
                    for (client, boxes) in &movers {
                        for (b, (id, placeable)) in boxes.iter().enumerate() {
                            let x = b as f32 + ((t % 10) as f32) * 0.1;
                            client.send(&move_to(*id, *placeable, x)).await;
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
            let mut per_node = Vec::new();
            for (i, node) in nodes.iter().enumerate() {
                per_node.push((link_bytes_received(&node.http).await - before[i]) as f64 / 10.0);
            }
            let max = per_node.iter().cloned().fold(0.0, f64::max);
            let mean = per_node.iter().sum::<f64>() / n as f64;
            println!(
                "chain of {n}, {}: link bytes received per node per second: mean {mean:.0}, max {max:.0} ({per_node:.0?})",
                if spatial { "spatial" } else { "all" }
            );
            if spatial && n == 3 {
                let (client, _) = &movers[0];
                let mut times = Vec::new();
                for _ in 0..20 {
                    // A pause between rounds, as between a user's
                    // teleports: the entries' rate limit (a burst of 4,
                    // then 10 rounds a second) is not what is measured.
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    let started = std::time::Instant::now();
                    client.send(&look_from(2050.0)).await;
                    // Polled every millisecond (wait_observers polls every
                    // 100 ms: too coarse to time with).
                    while !(0..BOXES)
                        .all(|b| client.snapshot().view.find(&format!("w2-{b}")).is_some())
                    {
                        assert!(started.elapsed() < PATIENCE, "world 2 never arrived");
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    times.push(started.elapsed().as_secs_f64() * 1e3);
                    client.send(&look_from(50.0)).await;
                    wait_observers(&[client], PATIENCE, "world 2 leaves", |seen| {
                        seen[0].view.find("w2-0").is_none()
                    })
                    .await;
                }
                times.sort_by(f64::total_cmp);
                println!(
                    "ObserverPosition into world 2 (2 hops) until all its {BOXES} boxes: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                    times[times.len() / 2],
                    times[(times.len() * 99 / 100).min(times.len() - 1)],
                    times[times.len() - 1]
                );
            }
        }
    }
}
