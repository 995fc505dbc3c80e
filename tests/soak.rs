//! Soak: three in-process nodes in a line a - b - c on 127.0.0.1, a writer on
//! each moving its entities at a steady rate and an observer on each, for
//! ten minutes (by default). The process's resident memory is sampled every
//! five seconds; the run passes if memory is flat (the last third of the run
//! peaks no more than 10% + 8 MiB above the middle third), no warning or
//! error was logged, no client was dropped, and every observer ends with
//! the same, final scene.
//!
//! Not part of `cargo test`; run it explicitly:
//!
//! ```text
//! cargo test --test soak -- --ignored --nocapture
//! ```
//!
//! `SOAK_SECS` (600), `SOAK_ENTITIES` per writer (20) and `SOAK_HZ` moves
//! of each entity per second (5) change the load.

mod common;
mod net_common;

use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use common::TundraClient;
use net_common::{capture, wait_observers, wait_status, LiveNode, Observer};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident set size of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "ten-minute soak; run explicitly (see the module docs)"]
async fn ten_minutes_at_steady_load_with_flat_memory_and_no_error() {
    capture::install_warnings_only();
    let secs = env_or("SOAK_SECS", 600);
    let entities = env_or("SOAK_ENTITIES", 20) as usize;
    let hz = env_or("SOAK_HZ", 5).max(1);
    let names = ["a", "b", "c"];
    let dir = tempfile::tempdir().unwrap();
    // A line a - b - c (no proxy: clean sockets), as in the recorded runs.
    let pairs = [(0, 1), (1, 2)];
    let seats = net_common::write_nodes(dir.path(), &names, &pairs, None, "");
    let mut nodes = Vec::new();
    for seat in &seats {
        nodes.push(LiveNode::start(seat).await);
    }
    for (n, node) in nodes.iter().enumerate() {
        let degree = pairs.iter().filter(|(i, j)| *i == n || *j == n).count();
        wait_status(&[node], Duration::from_secs(60), "links up", |s| {
            s.links.len() == degree
        })
        .await;
    }
    let mut observers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        observers.push(Observer::join(&node.url, &format!("watch{n}")).await);
    }
    let observer_refs: Vec<&Observer> = observers.iter().collect();
    let mut writers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let (mut writer, _) = TundraClient::login(&node.url, &format!("w{n}"), 3).await;
        for i in 0..entities {
            writer
                .create_entity(i as u32 + 1, named_box(&format!("{}{i}", names[n])))
                .await;
        }
        writers.push(writer);
    }
    let total = names.len() * entities;
    wait_observers(
        &observer_refs,
        Duration::from_secs(120),
        "all entities everywhere",
        |seen| seen.iter().all(|o| o.view.entities.len() == total),
    )
    .await;
    let mut own = Vec::new();
    for (n, observer) in observers.iter().enumerate() {
        let view = observer.snapshot().view;
        own.push(
            (0..entities)
                .map(|i| {
                    let (id, seen) = view.find(&format!("{}{i}", names[n])).expect("once");
                    (id, seen.placeable.expect("a Placeable"))
                })
                .collect::<Vec<_>>(),
        );
    }

    let start = tokio::time::Instant::now();
    let period = Duration::from_secs_f64(1.0 / hz as f64);
    let mut next_sample = start;
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut step = 0u64;
    let mut moves = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        let round = tokio::time::Instant::now();
        step += 1;
        for (n, writer) in writers.iter_mut().enumerate() {
            for (entity, placeable) in &own[n] {
                writer
                    .send(&move_to(*entity, *placeable, step as f32))
                    .await;
                moves += 1;
            }
        }
        // Read what the writers were sent, within the round's budget.
        for writer in writers.iter_mut() {
            let budget = round + period / 2;
            while tokio::time::Instant::now() < budget
                && writer.recv_within(Duration::from_millis(1)).await.is_some()
            {}
        }
        if tokio::time::Instant::now() >= next_sample {
            samples.push((start.elapsed().as_secs_f64(), rss_kib()));
            next_sample += Duration::from_secs(5);
        }
        tokio::time::sleep_until(round + period).await;
    }

    let last = step as f32;
    for (n, observer) in observers.iter().enumerate() {
        let seen = observer.snapshot();
        assert!(!seen.closed, "observer on node {n} ended: {:?}", seen.end);
    }
    wait_observers(
        &observer_refs,
        Duration::from_secs(120),
        "the final scene everywhere",
        |seen| {
            seen.iter().all(|o| {
                o.view.entities.len() == total
                    && o.view.entities.values().all(|s| s.x == Some(last))
            })
        },
    )
    .await;
    for observer in &observers {
        assert!(!observer.closed(), "no observer dropped");
    }
    let warnings = capture::warnings();
    let third = samples.len() / 3;
    let middle = samples[third..2 * third]
        .iter()
        .map(|s| s.1)
        .max()
        .unwrap_or(0);
    let end = samples[2 * third..].iter().map(|s| s.1).max().unwrap_or(0);
    println!(
        "soak: {secs} s, {} writers x {entities} entities at {hz} Hz, {moves} moves, {} RSS samples",
        names.len(),
        samples.len()
    );
    println!(
        "RSS KiB: first {} middle-third peak {middle} last-third peak {end} final {}",
        samples.first().map_or(0, |s| s.1),
        samples.last().map_or(0, |s| s.1)
    );
    for (t, kib) in samples.iter().step_by(12) {
        println!("  t={t:>6.0} s rss={kib} KiB");
    }
    println!("warnings and errors logged: {}", warnings.len());
    assert!(warnings.is_empty(), "no warning or error: {warnings:#?}");
    assert!(
        end <= middle + middle / 10 + 8 * 1024,
        "memory flat: middle third peaks at {middle} KiB, last third at {end} KiB"
    );
    for node in nodes {
        node.stop().await;
    }
}
