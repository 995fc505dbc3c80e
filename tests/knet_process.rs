//! The real binary with native clients: `lessgate run --knet-listen
//! 127.0.0.1:0` prints where native clients connect, serves its scene file
//! to kNet/UDP and kNet/TCP clients beside a WebSocket one, and ends on
//! SIGTERM, telling its native clients.

mod common;
mod net_common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{Process, TUNDRA_LINE};
use common::tundra_values::named_box;
use net_common::{wait_observers, Observer};

/// A failure bound only.
const BOUND: Duration = Duration::from_secs(20);

const KNET_LINE: &str = "lessgate: native Tundra clients connect to ";

/// Starts `lessgate run` with native listeners on a free port; the child,
/// its WebSocket URL and the printed native line. `None` when the line
/// names UDP only (the TCP port was taken, as `LiveNode::start_knet` explains).
async fn start(scene: &'static str) -> Option<(Process, String, String)> {
    let mut child = Process::spawn(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args([
                "run",
                "--tundra-listen",
                "127.0.0.1:0",
                "--knet-listen",
                "127.0.0.1:0",
                "--scene",
                scene,
            ])
            .stderr(Stdio::null()),
    );
    let mut ws = None;
    let (ws_url, knet_line) = child
        .read_stdout_until(move |line| {
            if let Some(url) = line.strip_prefix(TUNDRA_LINE) {
                ws = Some(url.to_owned());
            }
            let rest = line.strip_prefix(KNET_LINE)?;
            Some((
                ws.clone().expect("the WebSocket line comes first"),
                rest.to_owned(),
            ))
        })
        .await;
    knet_line
        .contains(" and ")
        .then_some((child, ws_url, knet_line))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_native_clients_and_ends_on_sigterm() {
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/scenes/nested.txml");
    let mut started = None;
    for _ in 0..20 {
        started = start(scene).await;
        if started.is_some() {
            break;
        }
    }
    let (mut child, ws_url, knet_line) = started.expect("a port free for UDP and TCP");

    // `knet+udp://ADDR and knet+tcp://ADDR`, one port for both.
    let (udp_url, tcp_url) = knet_line.split_once(" and ").unwrap();
    let udp_addr = udp_url
        .strip_prefix("knet+udp://")
        .unwrap_or_else(|| panic!("a UDP URL: {knet_line}"));
    assert_eq!(tcp_url, format!("knet+tcp://{udp_addr}"), "same address");
    let addr: std::net::SocketAddr = udp_addr.parse().expect("an address");
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    let udp = Observer::join(udp_url, "native-udp").await;
    let tcp = Observer::join(tcp_url, "native-tcp").await;
    // The scene file's entities reach both native clients.
    wait_observers(&[&udp, &tcp], BOUND, "scene at native clients", |o| {
        o.iter()
            .all(|o| o.view.find("table").is_some() && o.view.find("lamp").is_some())
    })
    .await;
    // And a WebSocket client's new entity.
    let web = Observer::join(&ws_url, "web").await;
    web.create(1, named_box("newcomer")).await;
    wait_observers(&[&udp, &tcp], BOUND, "newcomer at native clients", |o| {
        o.iter().all(|o| o.view.find("newcomer").is_some())
    })
    .await;

    // SIGTERM ends the process cleanly; its native clients are told.
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = tokio::time::Instant::now() + BOUND;
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "clean exit on SIGTERM: {exit:?}");
    wait_observers(&[&udp, &tcp], BOUND, "native clients told", |o| {
        o.iter().all(|o| o.closed)
    })
    .await;
}
