//! The web viewer in headless Chromium: three federated nodes run in this
//! process (the peers/example triangle, with Tundra and HTTP on ephemeral
//! 127.0.0.1 ports), a Tundra client on each puts named entities in the
//! scene, and `tests/web/viewer.mjs` loads alpha's page, waits for entities
//! of all three origins, drags one of beta's, and waits until beta's page
//! shows it at the new position; then it takes that entity for alpha
//! through alpha's admin endpoint (`POST /authority/take`) and waits until
//! both pages colour it as alpha's and alpha's inspector shows origin beta,
//! authority alpha, epoch 1. `tests/web/view3d.mjs` screenshots the 3D
//! view of the demo's three worlds and counts the pixels of each origin's
//! colour; `tests/web/login.mjs` logs in to a node that requires a token.
//! Screenshots land in target/.
//!
//! Needs Node.js, `npm ci --prefix tests/web` and `/usr/bin/chromium`;
//! each test first waits for tests/web_tools to install what is missing
//! (once for the binary), before it starts any node. Also checks `/status`,
//! `/metrics` and `/origins` of a federated node over real HTTP, each
//! polled until it shows what is asserted.

mod common;
mod web_tools;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::tundra_values::named_box_with;
use common::TundraClient;
use lessgate::config::NodeConfig;
use lessgate::demo::{quiet, Demo, DemoOptions, DemoPorts};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{AttributeValue, ComponentData};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// The admin token of the example nodes here; the script takes an entity
/// with it.
const ADMIN_TOKEN: &str = "9e2b4c6d8f0a1b3c5d7e9f1a2b4c6d8e";

/// How long the browser script may take (a failure limit, not a criterion).
const SCRIPT_LIMIT: Duration = Duration::from_secs(180);

struct Node {
    tundra: String,
    http: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn start(name: &str) -> Node {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("peers/example")
        .join(name)
        .join("node.toml");
    let mut config = NodeConfig::load(&path).expect("example config loads");
    config.tundra.listen = "127.0.0.1:0".parse().unwrap();
    config.http.listen = Some("127.0.0.1:0".parse().unwrap());
    config.http.admin_token = Some(ADMIN_TOKEN.to_owned());
    start_with(config).await
}

async fn start_with(config: NodeConfig) -> Node {
    let running = lessgate::runtime::start(config).await.expect("node starts");
    let tundra = running.tundra_url();
    let http = running.http_addr().expect("http is configured");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(running.run(async {
        let _ = stopped.await;
    }));
    Node {
        tundra,
        http,
        stop: Some(stop),
    }
}

/// A placed, named entity at (x, 0, z).
fn named_box(name: &str, x: f32, z: f32) -> Vec<ComponentData> {
    named_box_with(
        name,
        AttributeValue::Transform(Transform {
            pos: Float3::new(x, 0.0, z),
            rot: Float3::new(0.0, 0.0, 0.0),
            scale: Float3::new(1.0, 1.0, 1.0),
        }),
    )
}

async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

/// Polls `path` until `done` holds for its body (or the patience runs out).
async fn poll_until(addr: SocketAddr, path: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let body = http_get(addr, path).await;
        if done(&body) || tokio::time::Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_shows_three_origins_and_moves_a_remote_entity() {
    web_tools::ready(web_tools::Need::Browser);
    let alpha = start("alpha").await;
    let beta = start("beta").await;
    let gamma = start("gamma").await;

    let mut clients = Vec::new();
    for (node, name, spots) in [
        (&alpha, "alpha", [(-6.0, -3.0), (-4.0, 2.0)]),
        (&beta, "beta", [(5.0, -4.0), (6.0, 1.0)]),
        (&gamma, "gamma", [(0.0, 5.0), (2.0, 6.0)]),
    ] {
        let (mut client, _) = TundraClient::login(&node.tundra, &format!("{name}-maker"), 3).await;
        for (i, (x, z)) in spots.into_iter().enumerate() {
            client
                .create_entity(i as u32 + 1, named_box(&format!("{name}-{}", i + 1), x, z))
                .await;
        }
        clients.push(client);
    }

    // The operator endpoints of a federated node, over real HTTP.
    // Entities may arrive through beta before alpha's own link to gamma
    // is up: wait for both.
    let status = poll_until(alpha.http, "/status", |b| {
        b.matches("\"entities\":2").count() >= 3
            && b.contains("\"peer\":\"beta\"")
            && b.contains("\"peer\":\"gamma\"")
    })
    .await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(status.contains("\"peer\":\"beta\""), "{status}");
    assert!(status.contains("\"peer\":\"gamma\""), "{status}");
    // Both ends dial; for a moment a node may hold two links to one peer.
    let beta_entities = "lessgate_entities_by_origin{origin=\"beta\"";
    let metrics = poll_until(alpha.http, "/metrics", |b| {
        b.contains("lessgate_peer_links 2\n") && b.contains(beta_entities)
    })
    .await;
    assert!(metrics.contains("lessgate_peer_links 2"), "{metrics}");
    assert!(metrics.contains(beta_entities), "{metrics}");
    // The viewer's snapshot is published on its own: polled too.
    let origins = poll_until(alpha.http, "/origins", |b| {
        ["alpha", "beta", "gamma"]
            .iter()
            .all(|name| b.contains(&format!("\"name\":\"{name}\"")))
    })
    .await;
    assert!(origins.contains("\"name\":\"gamma\""), "{origins}");

    let stdout = run_script(
        "viewer.mjs",
        &[
            format!("http://{}/", alpha.http),
            format!("http://{}/", beta.http),
            ADMIN_TOKEN.to_owned(),
        ],
    )
    .await;
    assert!(stdout.contains("B shows"), "{stdout}");
    assert!(stdout.contains("A's inspector shows authority"), "{stdout}");
    drop(clients);
    drop((alpha, beta, gamma));
}

/// Runs `tests/web/<script>` with `args` and returns its stdout; fails the
/// test when it fails.
async fn run_script(script: &str, args: &[String]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/web")
        .join(script);
    let child = tokio::process::Command::new("node")
        .arg(&path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let output = tokio::time::timeout(SCRIPT_LIMIT, child.wait_with_output())
        .await
        .expect("the browser script finishes")
        .expect("its output is readable");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    println!("{stdout}");
    stdout
}

/// The pixel counts `view3d.mjs` prints: `3D pixels by origin: {...}`.
fn pixels_by_origin(stdout: &str) -> BTreeMap<String, u64> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("3D pixels by origin: "))
        .unwrap_or_else(|| panic!("no pixel counts in:\n{stdout}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("pixel counts {line:?}: {e}"))
}

/// A drawn entity covers more than this many pixels of the 3D screenshot.
const MIN_PIXELS: u64 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_3d_view_renders_entities_of_the_three_demo_worlds() {
    web_tools::ready(web_tools::Need::Browser);
    let options = DemoOptions {
        ports: DemoPorts {
            tundra: 0,
            http: 0,
            peer: 0,
            knet: 0,
        },
        movers: 3,
    };
    let demo = Demo::start(options, quiet()).await.expect("demo starts");
    let nodes = demo.nodes().to_vec();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(demo.run(async move {
        let _ = stopped.await;
    }));
    let beta = nodes.iter().find(|n| n.name == "beta").expect("beta runs");

    let stdout = run_script("view3d.mjs", std::slice::from_ref(&beta.http_url)).await;
    let pixels = pixels_by_origin(&stdout);
    for origin in ["alpha", "beta", "gamma"] {
        let count = pixels.get(origin).copied().unwrap_or(0);
        assert!(
            count >= MIN_PIXELS,
            "{origin}: {count} pixels in the 3D view ({pixels:?}):\n{stdout}"
        );
    }
    assert!(stdout.contains("selects it"), "{stdout}");
    assert!(stdout.contains("3D focus pixels"), "{stdout}");

    let _ = stop.send(());
    run.await.expect("demo stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_logs_in_with_a_token_and_shows_why_a_login_was_refused() {
    web_tools::ready(web_tools::Need::Browser);
    let text = "[node]\nname = \"guarded\"\n\
                [tundra]\nlisten = \"127.0.0.1:0\"\nrequired_login = { token = \"open-sesame\" }\n\
                [http]\nlisten = \"127.0.0.1:0\"\n";
    let config = NodeConfig::parse(std::path::Path::new("guarded.toml"), text).expect("config");
    let node = start_with(config).await;

    let stdout = run_script(
        "login.mjs",
        &[format!("http://{}/", node.http), "open-sesame".to_owned()],
    )
    .await;
    assert!(
        stdout.contains("refused, the page says: The node refused the login: login property 'token' is required"),
        "{stdout}"
    );
    assert!(stdout.contains("?token= logs in"), "{stdout}");
    assert!(
        stdout.contains("a wrong ?token= shows the refusal"),
        "{stdout}"
    );
}
