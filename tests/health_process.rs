//! Health, readiness and metrics of real `lessgate run` processes on
//! ephemeral ports: `/readyz` refuses while a configured peer is not
//! linked and names it with its last failure, answers 200 once the link is
//! up, and refuses again when the peer dies; `/metrics` carries the build,
//! process, loop-lag and peer-health series with sane values; `/healthz`
//! answers throughout.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::process::{lessgate_binary, Process};
use common::PATIENCE;
use lessgate::transport::identity::generate_into;

/// An HTTP answer: status code and body.
struct Answer {
    code: u16,
    body: String,
}

async fn get(addr: &str, path: &str) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a full answer");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        code,
        body: body.to_owned(),
    }
}

/// Asks `path` until `done` holds (failing after [`PATIENCE`]).
async fn wait_for(addr: &str, path: &str, what: &str, done: impl Fn(&Answer) -> bool) -> Answer {
    let started = Instant::now();
    loop {
        let answer = get(addr, path).await;
        if done(&answer) {
            return answer;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: {path} still answers {} {}",
            answer.code,
            answer.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Samples of a Prometheus text page: `name{labels}` -> value; also
/// checks every line is a comment or a sample with a number.
fn samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("name and value");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
            (series.to_owned(), value)
        })
        .collect()
}

fn value(samples: &[(String, f64)], series: &str) -> f64 {
    samples
        .iter()
        .find(|(s, _)| s == series)
        .unwrap_or_else(|| panic!("no {series} in {samples:?}"))
        .1
}

/// One node's directory: identity, peers and node file, all on ports 0.
fn write_node(root: &Path, name: &str, uuid: &str) -> (PathBuf, String) {
    let dir = root.join(name);
    let (_, _, fingerprint) = generate_into(&dir.join("identity"), "node", false).unwrap();
    std::fs::create_dir_all(dir.join("peers")).unwrap();
    let text = format!(
        "[node]\nname = \"{name}\"\nuuid = \"{uuid}\"\n\n\
         [tundra]\nlisten = \"127.0.0.1:0\"\n\n\
         [peering]\ncontrol_listen = \"127.0.0.1:0\"\ndata_listen = \"127.0.0.1:0\"\n\
         certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
         peers_dir = \"peers\"\nliveness_timeout_ms = 1000\nhandshake_timeout_ms = 500\n\
         reconnect_min_ms = 100\nreconnect_max_ms = 500\n",
    );
    std::fs::write(dir.join("node.toml"), text).unwrap();
    (dir, fingerprint.to_string())
}

/// Starts `lessgate run` with HTTP on a free port; returns the process,
/// its HTTP address and its peer control address.
async fn run(node: &Path) -> (Process, String, String) {
    let mut process = Process::spawn(
        Command::new(lessgate_binary())
            .args(["run", "--config"])
            .arg(node.join("node.toml"))
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn"),
    );
    let (http, control) = process.http_and_control().await;
    (process, http, control)
}

#[tokio::test]
async fn readiness_follows_the_configured_peer_and_metrics_show_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let (alpha_dir, alpha_fp) =
        write_node(dir.path(), "alpha", "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01");
    let (beta_dir, beta_fp) =
        write_node(dir.path(), "beta", "0b3c7f8e-6d5a-4c1b-9e2f-7a8b9c0d1e2f");
    // beta waits for alpha to dial it.
    std::fs::write(
        beta_dir.join("peers/alpha.toml"),
        format!("name = \"alpha\"\nfingerprint = \"{alpha_fp}\"\n"),
    )
    .unwrap();
    let (mut beta, beta_http, beta_control) = run(&beta_dir).await;

    // beta serves but is not ready: alpha, which only alpha can start, is missing.
    assert_eq!(get(&beta_http, "/healthz").await.code, 200);
    let not_ready = wait_for(&beta_http, "/readyz", "beta's listeners", |a| {
        a.body.contains("\"listening\":true")
    })
    .await;
    assert_eq!(not_ready.code, 503, "{}", not_ready.body);
    let body: serde_json::Value = serde_json::from_str(&not_ready.body).unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["peers_not_linked"][0]["name"], "alpha");
    assert_eq!(body["peers_not_linked"][0]["dialled"], false);
    assert_eq!(
        body["peers_not_linked"][0]["last_failure"],
        serde_json::Value::Null
    );

    // alpha dials beta; both become ready.
    std::fs::write(
        alpha_dir.join("peers/beta.toml"),
        format!("name = \"beta\"\ncontrol = \"{beta_control}\"\nfingerprint = \"{beta_fp}\"\n"),
    )
    .unwrap();
    let (_alpha, alpha_http, _) = run(&alpha_dir).await;
    let ready = wait_for(&alpha_http, "/readyz", "alpha linked", |a| a.code == 200).await;
    let body: serde_json::Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["peers_not_linked"], serde_json::json!([]));
    wait_for(&beta_http, "/readyz", "beta linked", |a| a.code == 200).await;

    let status: serde_json::Value =
        serde_json::from_str(&get(&alpha_http, "/status").await.body).unwrap();
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(status["commit"], lessgate::build_info::COMMIT);
    assert_eq!(status["peers"][0]["name"], "beta");
    assert_eq!(status["peers"][0]["linked"], true);
    assert_eq!(status["peers"][0]["dialled"], true);

    // Loop-lag observations come from the status timer (every 500 ms):
    // wait for a few so the histogram has content.
    let metrics = wait_for(&alpha_http, "/metrics", "loop lag observed", |a| {
        a.code == 200
            && samples(&a.body)
                .iter()
                .any(|(s, v)| s == "lessgate_node_loop_lag_seconds_count" && *v >= 3.0)
    })
    .await;
    let m = samples(&metrics.body);
    let build = format!(
        "lessgate_build_info{{version=\"{}\",commit=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        lessgate::build_info::COMMIT
    );
    assert_eq!(value(&m, &build), 1.0);
    assert_eq!(value(&m, "lessgate_ready"), 1.0);
    assert_eq!(value(&m, "lessgate_peer_up{peer=\"beta\"}"), 1.0);
    assert_eq!(value(&m, "lessgate_identity_conflicts_total"), 0.0);
    assert!(
        value(
            &m,
            "lessgate_data_socket_dropped_total{reason=\"unknown_source\"}"
        ) >= 0.0
    );
    let cpu = value(&m, "process_cpu_seconds_total");
    // Counted in 10 ms clock ticks: an idle node may not have used one yet.
    assert!((0.0..3600.0).contains(&cpu), "cpu {cpu}");
    let rss = value(&m, "process_resident_memory_bytes");
    assert!(rss > 1e6 && rss < 4e9, "rss {rss}");
    let (fds, max_fds) = (value(&m, "process_open_fds"), value(&m, "process_max_fds"));
    assert!(fds >= 5.0 && fds < max_fds, "fds {fds} of {max_fds}");
    // The histogram's buckets never decrease and end at the count.
    let buckets: Vec<f64> = m
        .iter()
        .filter(|(s, _)| s.starts_with("lessgate_node_loop_lag_seconds_bucket"))
        .map(|(_, v)| *v)
        .collect();
    assert!(
        buckets.len() >= 2 && buckets.windows(2).all(|w| w[0] <= w[1]),
        "{buckets:?}"
    );
    let count = value(&m, "lessgate_node_loop_lag_seconds_count");
    assert_eq!(buckets.last().copied(), Some(count));
    let sum = value(&m, "lessgate_node_loop_lag_seconds_sum");
    assert!(sum >= 0.0 && sum < count * 5.0, "sum {sum} of {count}");

    // beta dies without a goodbye: the link times out and alpha says so.
    beta.0.kill().unwrap();
    beta.0.wait().unwrap();
    // Polls what it asserts: not ready, and why (the failure is recorded
    // in the turn the link ends, which may follow the first 503).
    let down = wait_for(&alpha_http, "/readyz", "beta's link lost, and why", |a| {
        a.code == 503
            && serde_json::from_str::<serde_json::Value>(&a.body)
                .is_ok_and(|b| !b["peers_not_linked"][0]["last_failure"].is_null())
    })
    .await;
    let body: serde_json::Value = serde_json::from_str(&down.body).unwrap();
    assert_eq!(body["peers_not_linked"][0]["name"], "beta");
    let failure = &body["peers_not_linked"][0]["last_failure"];
    assert!(
        failure["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{}",
        down.body
    );
    assert!(
        failure["at_secs"].as_f64().is_some_and(|t| t > 0.0),
        "{}",
        down.body
    );
    let metrics = wait_for(&alpha_http, "/metrics", "the link's end counted", |a| {
        a.body.contains("lessgate_peer_link_ends_total{")
    })
    .await;
    let m = samples(&metrics.body);
    assert_eq!(value(&m, "lessgate_peer_up{peer=\"beta\"}"), 0.0);
    assert_eq!(value(&m, "lessgate_ready"), 0.0);
    let later_cpu = value(&m, "process_cpu_seconds_total");
    assert!(later_cpu >= cpu, "a counter: {cpu} then {later_cpu}");
    let ends: f64 = m
        .iter()
        .filter(|(s, _)| s.starts_with("lessgate_peer_link_ends_total{reason="))
        .map(|(_, v)| v)
        .sum();
    assert!(ends >= 1.0, "{}", metrics.body);
    assert_eq!(get(&alpha_http, "/healthz").await.code, 200);
}

#[tokio::test]
async fn a_peer_that_never_answers_is_named_with_the_failed_dial() {
    let dir = tempfile::tempdir().unwrap();
    let (alpha_dir, _) = write_node(dir.path(), "alpha", "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01");
    // A UDP socket held and never read: dials to it get no answer.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (_, _, gamma_fp) = generate_into(&dir.path().join("gamma"), "node", false).unwrap();
    std::fs::write(
        alpha_dir.join("peers/gamma.toml"),
        format!(
            "name = \"gamma\"\ncontrol = \"{}\"\nfingerprint = \"{gamma_fp}\"\n",
            silent.local_addr().unwrap()
        ),
    )
    .unwrap();
    let (_alpha, http, _) = run(&alpha_dir).await;
    let answer = wait_for(&http, "/readyz", "the failed dial", |a| {
        a.body.contains("\"reason\"")
    })
    .await;
    assert_eq!(answer.code, 503);
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["listening"], true);
    let gamma = &body["peers_not_linked"][0];
    assert_eq!(gamma["name"], "gamma");
    assert_eq!(gamma["dialled"], true);
    let reason = gamma["last_failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("no answer in time"), "{reason}");
    let metrics = samples(&get(&http, "/metrics").await.body);
    assert_eq!(value(&metrics, "lessgate_peer_up{peer=\"gamma\"}"), 0.0);
    assert_eq!(value(&metrics, "lessgate_ready"), 0.0);
    drop(silent);
}
