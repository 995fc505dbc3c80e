//! A real `lessgate run` process reloads its configuration while Tundra
//! clients stay connected (docs/operations.md "Reloading").
//!
//! Four processes on 127.0.0.1: alpha dials beta and gamma; delta knows
//! alpha but alpha does not know delta yet. With a WebSocket client on
//! every node, alpha's peer files are edited (beta removed, delta added
//! under a host name, gamma's export narrowed to Name) and its node file
//! too (a log filter, a tick rate), then `lessgate reload` sends SIGHUP:
//! every client keeps its connection and its updates, beta's side sees a
//! goodbye, delta's entity reaches alpha, gamma's client loses the
//! Placeable it may no longer have, the tick rate is named as waiting for a
//! restart and the new filter is in force. A reload of a broken peer file
//! then changes nothing. A narrowed accept rule drops gamma's lamp's
//! Placeable at alpha on the live link; widened again, it re-establishes
//! the link and the Placeable comes back.
//! Ports are ephemeral: no lock needed.

mod common;
mod net_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{lessgate_binary, Process};
use common::tundra_values::{move_to, named_box_at, PLACEABLE};
use common::PATIENCE;
use net_common::{edit, wait_observers, write_nodes, NodeFiles, Observer};

/// A node process whose log (stderr) goes to a file.
struct Node {
    _process: Process,
    url: String,
    log: PathBuf,
}

async fn start(files: &NodeFiles, pid_file: Option<&Path>) -> Node {
    let log = files.dir.join("stderr.log");
    let mut command = Command::new(lessgate_binary());
    command
        .arg("run")
        .arg("--config")
        .arg(files.dir.join("node.toml"))
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    if let Some(pid_file) = pid_file {
        command.arg("--pid-file").arg(pid_file);
    }
    let mut process = Process::spawn(&mut command);
    let url = process.tundra_url().await;
    Node {
        _process: process,
        url,
        log,
    }
}

impl Node {
    /// The log lines so far that contain every one of `parts`.
    fn lines(&self, parts: &[&str]) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| parts.iter().all(|part| line.contains(part)))
            .map(str::to_owned)
            .collect()
    }

    /// Waits for a log line containing every one of `parts`.
    async fn wait_line(&self, parts: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.lines(parts).into_iter().next() {
                return line;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line with {parts:?} in {}",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Runs `lessgate reload --pid-file`, as an operator would.
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

fn has_placeable(observer: &Observer, name: &str) -> Option<bool> {
    let seen = observer.snapshot();
    let (_, entity) = seen.view.find(name)?;
    Some(entity.types.contains(&PLACEABLE))
}

#[tokio::test]
async fn a_reload_changes_the_peers_while_clients_stay_connected() {
    let root = tempfile::tempdir().unwrap();
    let names = ["alpha", "beta", "gamma", "delta"];
    // Alpha dials each of the others; they only wait for it.
    let files = write_nodes(
        root.path(),
        &names,
        &[(0, 1), (0, 2), (0, 3)],
        None,
        "\n[log]\nfilter = \"info\"\n",
    );
    let alpha_peers = files[0].dir.join("peers");
    // Delta is added by the reload, dialled by host name.
    let delta_file = alpha_peers.join("delta.toml");
    let delta_peer = std::fs::read_to_string(&delta_file)
        .unwrap()
        .replace("127.0.0.1:", "localhost:");
    std::fs::remove_file(&delta_file).unwrap();

    let beta = start(&files[1], None).await;
    let gamma = start(&files[2], None).await;
    let delta = start(&files[3], None).await;
    let pid_file = root.path().join("alpha.pid");
    let alpha = start(&files[0], Some(&pid_file)).await;

    let at_alpha = Observer::join(&alpha.url, "ann").await;
    let at_beta = Observer::join(&beta.url, "bea").await;
    let at_gamma = Observer::join(&gamma.url, "gil").await;
    let at_delta = Observer::join(&delta.url, "dan").await;
    at_alpha.create(1, named_box_at("kite", 2.0)).await;
    at_beta.create(1, named_box_at("bench", 1.0)).await;
    at_gamma.create(1, named_box_at("lamp", 3.0)).await;
    let (drum, drum_placeable) = at_delta.create(1, named_box_at("drum", 4.0)).await;
    wait_observers(&[&at_alpha], PATIENCE, "alpha sees beta's bench", |seen| {
        seen[0].view.find("bench").is_some()
    })
    .await;
    wait_observers(&[&at_gamma], PATIENCE, "gamma sees the kite", |_| {
        has_placeable(&at_gamma, "kite") == Some(true)
    })
    .await;
    wait_observers(&[&at_alpha], PATIENCE, "alpha sees gamma's lamp", |_| {
        has_placeable(&at_alpha, "lamp") == Some(true)
    })
    .await;
    assert!(at_alpha.snapshot().view.find("drum").is_none());
    // Debug lines are filtered out before the reload.
    assert!(alpha.lines(&["client connected"]).is_empty());
    let alpha_user = at_alpha.user;

    // The operator edits the files and reloads.
    std::fs::remove_file(alpha_peers.join("beta.toml")).unwrap();
    std::fs::write(&delta_file, delta_peer).unwrap();
    edit(
        &alpha_peers.join("gamma.toml"),
        "export = \"all\"",
        "export = [\"EC_Name\"]",
    );
    let alpha_config = files[0].dir.join("node.toml");
    edit(
        &alpha_config,
        "filter = \"info\"",
        "filter = \"info,lessgate::runtime=debug\"",
    );
    edit(&alpha_config, "tick_hz = 20", "tick_hz = 25");
    reload(&pid_file);
    alpha.wait_line(&["configuration reloaded"]).await;

    // A key only a restart applies is named.
    alpha
        .wait_line(&["WARN", "key=node.tick_hz", "restart"])
        .await;
    // Beta's link ended with alpha's goodbye.
    beta.wait_line(&[
        "link down: peer ended it",
        "peer removed from this node's configuration",
    ])
    .await;
    // Delta's host name was looked up and its link came up: its entity
    // reaches alpha's client, beta's left it.
    alpha
        .wait_line(&["peer=delta", "dialling", "resolved=127.0.0.1:"])
        .await;
    wait_observers(
        &[&at_alpha],
        PATIENCE,
        "alpha's client sees delta's drum and no longer beta's bench",
        |seen| seen[0].view.find("drum").is_some() && seen[0].view.find("bench").is_none(),
    )
    .await;
    // Gamma keeps the kite but no longer gets its Placeable.
    wait_observers(
        &[&at_gamma],
        PATIENCE,
        "gamma loses the kite's Placeable",
        |_| has_placeable(&at_gamma, "kite") == Some(false),
    )
    .await;
    // Alpha's client is the same connection and still gets updates.
    at_delta
        .send(&move_to(drum, drum_placeable.unwrap(), 9.0))
        .await;
    wait_observers(
        &[&at_alpha],
        PATIENCE,
        "alpha's client sees the drum move",
        |seen| seen[0].view.find("drum").and_then(|(_, d)| d.x) == Some(9.0),
    )
    .await;
    for (observer, node) in [
        (&at_alpha, "alpha"),
        (&at_beta, "beta"),
        (&at_gamma, "gamma"),
        (&at_delta, "delta"),
    ] {
        assert!(!observer.closed(), "the client on {node} was disconnected");
    }
    assert_eq!(at_alpha.user, alpha_user);
    // The new log filter is in force.
    let _late = Observer::join(&alpha.url, "lou").await;
    alpha.wait_line(&["DEBUG", "client connected"]).await;

    // A broken peer file: the reload is refused and nothing changes.
    std::fs::write(
        alpha_peers.join("zeta.toml"),
        "name = \"ze ta\"\nfingerprint = \"sha256:00\"\n",
    )
    .unwrap();
    reload(&pid_file);
    let refused = alpha.wait_line(&["reload refused"]).await;
    assert!(refused.contains("zeta.toml"), "{refused}");
    // The links to gamma and delta stay: a later edit of gamma's file
    // still applies to its live link (a refused reload left the old set).
    std::fs::remove_file(alpha_peers.join("zeta.toml")).unwrap();
    edit(
        &alpha_peers.join("gamma.toml"),
        "export = [\"EC_Name\"]",
        "export = \"all\"",
    );
    reload(&pid_file);
    wait_observers(
        &[&at_gamma],
        PATIENCE,
        "gamma gets the kite's Placeable again",
        |_| has_placeable(&at_gamma, "kite") == Some(true),
    )
    .await;
    assert!(
        gamma.lines(&["link down"]).is_empty(),
        "gamma's link was not cut"
    );
    assert!(
        delta.lines(&["link down"]).is_empty(),
        "delta's link was not cut"
    );
    assert_eq!(alpha.lines(&["peer removed: its link ends"]).len(), 1);

    // Alpha now accepts only Name from gamma: applied to the live link,
    // the lamp loses its Placeable at alpha.
    edit(
        &alpha_peers.join("gamma.toml"),
        "accept = \"all\"",
        "accept = [\"EC_Name\"]",
    );
    reload(&pid_file);
    wait_observers(
        &[&at_alpha],
        PATIENCE,
        "alpha's lamp without Placeable",
        |_| has_placeable(&at_alpha, "lamp") == Some(false),
    )
    .await;
    assert!(
        gamma.lines(&["link down"]).is_empty(),
        "gamma's link was not cut"
    );
    // Accepting everything again takes the peer's type introductions: the
    // link is re-established and the lamp's Placeable comes back.
    edit(
        &alpha_peers.join("gamma.toml"),
        "accept = [\"EC_Name\"]",
        "accept = \"all\"",
    );
    reload(&pid_file);
    gamma
        .wait_line(&["link down: peer ended it", "accept rules changed"])
        .await;
    wait_observers(
        &[&at_alpha],
        PATIENCE,
        "alpha's lamp with Placeable again",
        |_| has_placeable(&at_alpha, "lamp") == Some(true),
    )
    .await;
    for observer in [&at_alpha, &at_beta, &at_gamma, &at_delta] {
        assert!(!observer.closed());
    }
}
