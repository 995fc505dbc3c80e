//! Three in-process nodes on 127.0.0.1 whose LESS datagrams all pass through
//! an impairment proxy (20% loss, 5% duplication, up to 100 ms jitter, which
//! reorders): clients on every node create and move entities; after the
//! changes stop every node's clients see the same scene; EntityActions sent
//! to a remote authority are executed there exactly once and in order.
//! Then datagrams injected from a peer's address (replayed, tampered,
//! truncated, forged) are rejected, counted, and change nothing.

mod common;
mod net_common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use common::TundraClient;
use lessgate::tundra::messages::{exec_type, EntityAction};
use lessgate::tundra::Message;
use net_common::{capture, wait_observers, wait_status, LinkModel, LiveNode, Observer, Proxy};

const NAMES: [&str; 3] = ["a", "b", "c"];
const BOXES: usize = 4;
const MOVES: u32 = 15;
const ACTIONS: usize = 20;
/// A failure bound for convergence; a healthy run takes a few seconds.
const CONVERGE: Duration = Duration::from_secs(90);
/// Message of the runtime's log line for an action executed at its authority.
const EXECUTED: &str = "entity action from a peer executed here, its authority";

/// Drains whatever a writer has been sent, so its socket never backs up.
async fn drain(client: &mut TundraClient) {
    while client.recv_within(Duration::from_millis(1)).await.is_some() {}
}

/// The final scene every client must see: every box once, at the last x.
fn expected() -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for node in NAMES {
        for i in 0..BOXES {
            out.insert(
                format!("{node}{i}"),
                vec![format!("{:?}", Some(MOVES as f32))],
            );
        }
    }
    out
}

struct Mesh {
    _dir: tempfile::TempDir,
    proxy: Proxy,
    nodes: Vec<LiveNode>,
    observers: Vec<Observer>,
}

/// Peer links of a triangle and of a line a - b - c.
const TRIANGLE: [(usize, usize); 3] = [(0, 1), (1, 2), (0, 2)];
const LINE: [(usize, usize); 2] = [(0, 1), (1, 2)];

async fn mesh(model: LinkModel, seed: u64, pairs: &[(usize, usize)]) -> Mesh {
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(NAMES.len(), model, seed).await;
    let seats = net_common::write_nodes(dir.path(), &NAMES, pairs, Some(&proxy), "");
    let mut nodes = Vec::new();
    for seat in &seats {
        nodes.push(LiveNode::start(seat).await);
    }
    for (n, node) in nodes.iter().enumerate() {
        let degree = pairs.iter().filter(|(i, j)| *i == n || *j == n).count();
        wait_status(&[node], CONVERGE, "every link up", |s| {
            s.links.len() == degree
        })
        .await;
    }
    let mut observers = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        observers.push(Observer::join(&node.url, &format!("watch{i}")).await);
    }
    Mesh {
        _dir: dir,
        proxy,
        nodes,
        observers,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_reordering_line_converges_and_actions_arrive_once_in_order() {
    // c's calls to a cross two lossy hops (c - b - a).
    lossy_run("line", &LINE, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_reordering_triangle_converges_and_actions_arrive_once_in_order() {
    lossy_run("triangle", &TRIANGLE, 8).await;
}

/// `run` names the calls: the log record is shared by every test of this
/// binary, and they run at the same time.
async fn lossy_run(run: &str, pairs: &[(usize, usize)], seed: u64) {
    capture::install();
    let Mesh {
        _dir,
        proxy,
        nodes,
        observers,
    } = mesh(LinkModel::LOSSY_PROXY, seed, pairs).await;
    let observer_refs: Vec<&Observer> = observers.iter().collect();

    // Every node's writer creates its boxes.
    let mut writers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let (mut writer, _) = TundraClient::login(&node.url, &format!("w{n}"), 3).await;
        for i in 0..BOXES {
            writer
                .create_entity(i as u32 + 1, named_box(&format!("{}{i}", NAMES[n])))
                .await;
        }
        writers.push(writer);
    }
    // The boxes' ids and Placeable ids as each writer's own node numbers them.
    wait_observers(&observer_refs, CONVERGE, "every box everywhere", |seen| {
        seen.iter()
            .all(|o| o.view.entities.len() == NAMES.len() * BOXES)
    })
    .await;
    let mut own = Vec::new();
    for (n, observer) in observers.iter().enumerate() {
        let view = observer.snapshot().view;
        let boxes: Vec<_> = (0..BOXES)
            .map(|i| {
                let (id, seen) = view.find(&format!("{}{i}", NAMES[n])).expect("once");
                (id, seen.placeable.expect("a Placeable"))
            })
            .collect();
        own.push(boxes);
    }

    // Each writer moves its own boxes many times; the last value must win.
    for step in 1..=MOVES {
        for (n, writer) in writers.iter_mut().enumerate() {
            for (entity, placeable) in &own[n] {
                writer
                    .send(&move_to(*entity, *placeable, step as f32))
                    .await;
            }
            drain(writer).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }

    // Method calls: b's writer calls a0, c's writer calls a1, numbered.
    let targets: Vec<_> = [(1usize, "a0"), (2usize, "a1")]
        .into_iter()
        .map(|(n, name)| {
            let (id, _) = observers[n]
                .snapshot()
                .view
                .find(name)
                .map(|(id, s)| (id, s.clone()))
                .expect("seen once");
            (n, id)
        })
        .collect();
    for k in 0..ACTIONS {
        for (n, entity) in &targets {
            writers[*n]
                .send(&Message::EntityAction(EntityAction {
                    entity_id: *entity,
                    name: format!("Ping-{run}-{}-{k:02}", NAMES[*n]),
                    execution_type: exec_type::SERVER,
                    parameters: vec![format!("{k}")],
                }))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Changes have stopped: every node's client converges to one scene.
    let want = expected();
    wait_observers(&observer_refs, CONVERGE, "one scene everywhere", |seen| {
        seen.iter().all(|o| o.view.by_name() == want)
    })
    .await;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let ours = || {
        capture::lines(EXECUTED)
            .into_iter()
            .filter(|l| {
                l.field("name")
                    .is_some_and(|name| name.starts_with(&format!("Ping-{run}-")))
            })
            .count()
    };
    while ours() < 2 * ACTIONS && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Anything duplicated would arrive within a few re-send intervals.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let executed = capture::lines(EXECUTED);
    for (n, _) in &targets {
        let prefix = format!("Ping-{run}-{}-", NAMES[*n]);
        let calls: Vec<_> = executed
            .iter()
            .filter(|l| {
                l.field("name")
                    .is_some_and(|name| name.starts_with(&prefix))
            })
            .collect();
        let names: Vec<&str> = calls.iter().filter_map(|l| l.field("name")).collect();
        let want: Vec<String> = (0..ACTIONS).map(|k| format!("{prefix}{k:02}")).collect();
        assert_eq!(
            names, want,
            "calls from {} executed once each, in order",
            NAMES[*n]
        );
        let entities: std::collections::BTreeSet<_> =
            calls.iter().filter_map(|l| l.field("entity")).collect();
        assert_eq!(entities.len(), 1, "all on one entity at the authority");
    }
    for observer in &observers {
        assert!(!observer.closed(), "no client was dropped");
    }
    let counters = &proxy.counters;
    let dropped = counters.dropped.load(std::sync::atomic::Ordering::Relaxed);
    let duplicated = counters
        .duplicated
        .load(std::sync::atomic::Ordering::Relaxed);
    let reordered = counters
        .reordered
        .load(std::sync::atomic::Ordering::Relaxed);
    let received = counters.received.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "proxy: {received} datagrams, {dropped} dropped, {duplicated} duplicated, {reordered} reordered"
    );
    assert!(
        dropped > 0 && duplicated > 0 && reordered > 0,
        "the proxy impaired the links"
    );
    for node in nodes {
        node.stop().await;
    }
}

/// Flips one byte in the middle of a datagram.
fn tampered(datagram: &[u8]) -> Vec<u8> {
    let mut out = datagram.to_vec();
    let middle = out.len() / 2;
    out[middle] ^= 0x5a;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_replayed_tampered_truncated_and_forged_datagrams_are_rejected() {
    let Mesh {
        _dir,
        proxy,
        nodes,
        observers,
    } = mesh(LinkModel::PASS_THROUGH, 9, &LINE).await;
    let observer_refs: Vec<&Observer> = observers.iter().collect();
    let (mut writer, _) = TundraClient::login(&nodes[1].url, "writer", 3).await;
    writer.create_entity(1, named_box("b0")).await;
    wait_observers(&observer_refs, CONVERGE, "b0 everywhere", |seen| {
        seen.iter().all(|o| o.view.find("b0").is_some())
    })
    .await;
    // Let the links go quiet, then note node a's view of the link from b.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rejected = |node: &LiveNode| -> BTreeMap<&'static str, u64> {
        node.status()
            .links
            .iter()
            .find(|l| l.peer == "b")
            .expect("a link with b")
            .rejected
            .clone()
    };
    let before = rejected(&nodes[0]);
    let scene_before = nodes[0].status().entities;
    let views_before: Vec<_> = observers
        .iter()
        .map(|o| o.snapshot().view.by_name())
        .collect();

    let captured = proxy.captured(1, 0);
    assert!(!captured.is_empty(), "b has sent a datagrams");
    let mut sent = 0u64;
    // Well over 64 in a row with a bad signature: datagrams never count
    // towards SessionConfig::max_bad_signature_run (only stream frames do),
    // so a spoofer cannot end the link. A quiet link may have sent only a
    // few datagrams: they are reused.
    for datagram in captured.iter().rev().cycle().take(40) {
        // Replayed as it was, tampered in the middle, cut short.
        proxy.inject(1, 0, datagram).await;
        proxy.inject(1, 0, &tampered(datagram)).await;
        proxy.inject(1, 0, &datagram[..datagram.len() / 2]).await;
        sent += 3;
    }
    // Forged: plausible sizes, random content (no key, no valid MAC).
    let mut forged = 0x1234_5678_9abc_def0u64;
    for len in [5usize, 16, 40, 120, 600, 1200] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                forged = forged.wrapping_mul(6364136223846793005).wrapping_add(1);
                (forged >> 56) as u8
            })
            .collect();
        proxy.inject(1, 0, &bytes).await;
        sent += 1;
    }

    // The status snapshot is refreshed every 500 ms.
    let total = |m: &BTreeMap<&'static str, u64>| m.values().sum::<u64>();
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let now = rejected(&nodes[0]);
        if total(&now) >= total(&before) + sent {
            println!("rejected after injecting {sent}: {now:?} (before {before:?})");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "every injected datagram is rejected and counted: sent {sent}, before {before:?}, now {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rejected(&nodes[0]);
    assert!(
        after.get("bad_signature").copied().unwrap_or(0)
            > before.get("bad_signature").copied().unwrap_or(0),
        "bad signatures counted: {after:?}"
    );
    assert_eq!(
        nodes[0].status().links.len(),
        1,
        "the link with b carries on"
    );
    assert_eq!(nodes[0].status().entities, scene_before, "scene unchanged");
    let views_after: Vec<_> = observers
        .iter()
        .map(|o| o.snapshot().view.by_name())
        .collect();
    assert_eq!(views_before, views_after, "no client saw a change");
    // And the link still carries real updates.
    let (id, placeable) = {
        let view = observers[1].snapshot().view;
        let (id, seen) = view.find("b0").unwrap();
        (id, seen.placeable.unwrap())
    };
    writer.send(&move_to(id, placeable, 7.0)).await;
    wait_observers(
        &observer_refs,
        CONVERGE,
        "the move after the attack",
        |seen| {
            seen.iter()
                .all(|o| o.view.find("b0").is_some_and(|(_, s)| s.x == Some(7.0)))
        },
    )
    .await;
    for node in nodes {
        node.stop().await;
    }
}
