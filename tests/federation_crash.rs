//! Crash and restart with real processes: three `lessgate run` nodes in a
//! triangle (generated identities and ports), clients on every node. One
//! node is killed with SIGKILL and started again. Throughout, the clients of
//! the two surviving nodes stay connected (their sockets never close); after
//! a bounded time no ghost of the dead process remains, and after the
//! restart every client sees exactly the live entities of every origin, each
//! once.

mod common;
mod net_common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::Process;
use common::tundra_values::name_component;
use common::TundraClient;
use net_common::{wait_observers, write_mesh, Observed, Observer};

/// A failure bound: liveness (2 s here) plus reconnect backoff is the
/// expected time; this only stops a broken run.
const BOUND: Duration = Duration::from_secs(60);

/// Starts `lessgate run` on a node file; returns it and its Tundra URL.
async fn start(config: &std::path::Path) -> (Process, String) {
    let mut child = Process::spawn(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["run", "--config"])
            .arg(config)
            .stderr(Stdio::null()),
    );
    let url = child.tundra_url().await;
    (child, url)
}

/// Sorted names of the entities a client sees (repeats mean duplicates).
fn names(seen: &Observed) -> Vec<String> {
    let mut out: Vec<String> = seen
        .view
        .entities
        .values()
        .map(|s| s.name.clone().unwrap_or_default())
        .collect();
    out.sort();
    out
}

fn sorted(list: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_no_ghost_and_rejoins_while_other_clients_stay_connected() {
    let dir = tempfile::tempdir().unwrap();
    let seats = write_mesh(
        dir.path(),
        &["a", "b", "c"],
        None,
        "liveness_timeout_ms = 2000\n",
    );
    let mut processes = Vec::new();
    let mut urls = Vec::new();
    for seat in &seats {
        let (process, url) = start(&seat.dir.join("node.toml")).await;
        processes.push(Some(process));
        urls.push(url);
    }
    let watch_a = Observer::join(&urls[0], "watch-a").await;
    let watch_b = Observer::join(&urls[1], "watch-b").await;
    let mut writers = Vec::new();
    for (n, url) in urls.iter().enumerate() {
        let (mut writer, _) = TundraClient::login(url, &format!("w{n}"), 3).await;
        for i in 0..2u32 {
            let name = format!("{}{i}", ["a", "b", "c"][n]);
            writer
                .create_entity(i + 1, vec![name_component(1, &name)])
                .await;
        }
        writers.push(writer);
    }
    let all = sorted(&["a0", "a1", "b0", "b1", "c0", "c1"]);
    wait_observers(&[&watch_a, &watch_b], BOUND, "all six everywhere", |seen| {
        seen.iter().all(|o| names(o) == all)
    })
    .await;

    // SIGKILL: no Goodbye, the survivors learn it from silence.
    let killed_at = tokio::time::Instant::now();
    drop(processes[2].take());
    drop(writers.pop());
    let survivors = sorted(&["a0", "a1", "b0", "b1"]);
    wait_observers(&[&watch_a, &watch_b], BOUND, "c's entities gone", |seen| {
        seen.iter().all(|o| names(o) == survivors)
    })
    .await;
    let ghosts_gone = killed_at.elapsed();

    // Restarted (a new process has a new, empty scene of its own).
    let restarted_at = tokio::time::Instant::now();
    let (process, url) = start(&seats[2].dir.join("node.toml")).await;
    processes[2] = Some(process);
    let (mut writer, _) = TundraClient::login(&url, "w2-again", 3).await;
    writer.create_entity(1, vec![name_component(1, "c2")]).await;
    let watch_c = Observer::join(&url, "watch-c").await;
    let live = sorted(&["a0", "a1", "b0", "b1", "c2"]);
    wait_observers(
        &[&watch_a, &watch_b, &watch_c],
        BOUND,
        "one scene after the restart",
        |seen| seen.iter().all(|o| names(o) == live),
    )
    .await;
    let rejoined = restarted_at.elapsed();

    // The survivors' clients never lost their connections, and still work.
    assert!(
        !watch_a.closed() && !watch_b.closed(),
        "survivors' clients stayed connected"
    );
    writers[0]
        .create_entity(9, vec![name_component(1, "a9")])
        .await;
    let last = sorted(&["a0", "a1", "a9", "b0", "b1", "c2"]);
    wait_observers(
        &[&watch_a, &watch_b, &watch_c],
        BOUND,
        "updates flow after the restart",
        |seen| seen.iter().all(|o| names(o) == last),
    )
    .await;
    assert!(!watch_a.closed() && !watch_b.closed());
    println!(
        "ghosts gone {:.1} s after SIGKILL; one scene {:.1} s after restart",
        ghosts_gone.as_secs_f64(),
        rejoined.as_secs_f64()
    );
}
