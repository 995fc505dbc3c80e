//! A packet flood at a node's data port on real sockets. Node a has two
//! peers, b and c. Datagrams are sent at a as fast as a loop can, for a
//! fixed count, from the address a knows b by (replays of b's datagrams and
//! random bytes) and from an address a does not know; meanwhile c's client
//! sends numbered actions and moves over c's real link.
//!
//! Pass criteria are counts, never timing: every action from c reaches a's
//! client once and in order, c's last move arrives, no link ends, nothing
//! from the flood changes a's scene, the flood is counted where the limits
//! say (the link's `rejected` counters, `data_socket.queue_full`,
//! `data_socket.unknown_source`), the refusal log line is rate-limited, and
//! a's memory does not grow with the flood's size.

mod common;
mod net_common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::tundra_values::move_to;
use lessgate::runtime::status::NodeStatus;
use lessgate::tundra::messages::{exec_type, EntityAction};
use lessgate::tundra::Message;
use net_common::star::{Star, A, B};
use net_common::{capture, wait_observers, LiveNode};
use rand::{Rng, SeedableRng};

const LIMIT: Duration = Duration::from_secs(30);
/// Datagrams of the first, smaller flood and of the second from b's address.
const SMALL_FLOOD: usize = 50_000;
const FLOOD: usize = 200_000;
/// Datagrams from an address a does not know.
const STRANGER_FLOOD: usize = 50_000;
/// Numbered actions c's client sends while the flood runs.
const ACTIONS: usize = 40;
/// Most a node's memory may grow over both floods. Every queue on the way
/// is bounded (ROUTE_QUEUE datagrams per link, EVENT_QUEUE events), a few
/// MiB of 1200-byte datagrams; holding the 250 000 flood datagrams would
/// take about 300 MiB.
const RSS_GROWTH_LIMIT_KIB: u64 = 64 * 1024;
/// The refusal line's message (transport/peer/udp.rs).
const REFUSED: &str = "datagrams refused: the link's receive queue is full";

fn rss_kib() -> u64 {
    lessgate::loadgen::proc_stats::status_kib(std::process::id(), "VmRSS").unwrap_or(0)
}

fn rejected_from(status: &NodeStatus, peer: &str) -> u64 {
    status
        .links
        .iter()
        .filter(|l| l.peer == peer)
        .flat_map(|l| l.rejected.values())
        .sum()
}

fn link_ids(status: &NodeStatus) -> BTreeMap<String, u64> {
    status
        .links
        .iter()
        .map(|l| (l.peer.clone(), l.link))
        .collect()
}

/// Sends `count` datagrams at a from b's proxy address: every fourth a
/// replay of something b really sent, the rest random 1200-byte datagrams.
async fn flood_from_b(proxy: net_common::Proxy, count: usize, seed: u64) {
    let captured = proxy.captured(B, A);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut random = vec![0u8; 1200];
    for i in 0..count {
        if i % 4 == 0 && !captured.is_empty() {
            proxy.inject(B, A, &captured[i / 4 % captured.len()]).await;
        } else {
            rng.fill(&mut random[..]);
            proxy.inject(B, A, &random).await;
        }
    }
}

/// Waits until a's flood counters stop moving (two snapshots alike), so the
/// figures are final; bounded.
async fn settled(node: &LiveNode) -> NodeStatus {
    let mut last = node.status();
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let now = node.status();
        let key = |s: &NodeStatus| (rejected_from(s, "b"), s.data_socket.clone());
        if key(&now) == key(&last) || tokio::time::Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_counted_and_bounded_and_does_not_starve_another_peer() {
    capture::install_warnings_only();
    let Star {
        dir: _dir,
        proxy,
        files,
        nodes,
        watch_a,
        watch_c,
        writer_b,
        mut writer_c,
        c0: (c0, c0_placeable),
    } = Star::start(11, LIMIT).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = nodes[0].status();
    let b0_before = watch_a.snapshot().view.find("b0").map(|(_, s)| s.clone());
    let rss_start = rss_kib();

    // First a smaller flood, to compare memory against.
    flood_from_b(proxy.clone(), SMALL_FLOOD, 1).await;
    let after_small = settled(&nodes[0]).await;
    let rss_small = rss_kib();

    // The measured flood, from b's address and from a stranger, while c's
    // client sends numbered actions and moves.
    let flood = tokio::spawn(flood_from_b(proxy.clone(), FLOOD, 2));
    let target = files[A].data;
    let stranger = tokio::spawn(async move {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let bytes = vec![0x5a; 600];
        for _ in 0..STRANGER_FLOOD {
            socket.send_to(&bytes, target).await.unwrap();
        }
    });
    let mut during_flood = 0;
    for k in 0..ACTIONS {
        writer_c
            .send(&Message::EntityAction(EntityAction {
                entity_id: c0,
                name: format!("Probe-{k:02}"),
                execution_type: exec_type::PEERS,
                parameters: vec![format!("{k}")],
            }))
            .await;
        writer_c
            .send(&move_to(c0, c0_placeable, k as f32 + 1.0))
            .await;
        while writer_c
            .recv_within(Duration::from_millis(1))
            .await
            .is_some()
        {}
        if !flood.is_finished() {
            during_flood += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flood.await.unwrap();
    stranger.await.unwrap();
    let last_x = ACTIONS as f32;
    wait_observers(
        &[&watch_a],
        LIMIT,
        "every probe and the last move",
        |seen| {
            seen[0].actions.len() >= ACTIONS
                && seen[0]
                    .view
                    .find("c0")
                    .is_some_and(|(_, s)| s.x == Some(last_x))
        },
    )
    .await;
    let after = settled(&nodes[0]).await;
    let rss_end = rss_kib();

    // Every update of c delivered once, in order.
    let names: Vec<String> = watch_a
        .snapshot()
        .actions
        .iter()
        .map(|a| a.name.clone())
        .collect();
    let want: Vec<String> = (0..ACTIONS).map(|k| format!("Probe-{k:02}")).collect();
    assert_eq!(
        names, want,
        "every action from c reaches a's client once, in order"
    );
    // No link ended, both are the links of before.
    assert_eq!(link_ids(&after), link_ids(&before), "both links carry on");
    assert!(after.link_ends.recent.is_empty(), "{:?}", after.link_ends);
    // Nothing from the flood changed a's scene or what its client sees of b.
    assert_eq!(
        after.entities, before.entities,
        "a's scene holds the same entities"
    );
    assert_eq!(
        watch_a.snapshot().view.find("b0").map(|(_, s)| s.clone()),
        b0_before,
        "b0 unchanged at a"
    );
    assert!(!watch_a.closed() && !watch_c.closed());

    // Counted where the limits say.
    let rejected = rejected_from(&after, "b") - rejected_from(&before, "b");
    let queue_full = after.data_socket.queue_full - before.data_socket.queue_full;
    let unknown = after.data_socket.unknown_source - before.data_socket.unknown_source;
    let sent = (SMALL_FLOOD + FLOOD) as u64;
    println!(
        "flood from b's address: {sent} sent, {rejected} rejected by the session \
         ({:?}), {queue_full} dropped at the full route queue, {} not counted \
         (dropped by the kernel's socket buffer); from a stranger: {STRANGER_FLOOD} sent, \
         {unknown} counted as unknown source; actions sent during the flood: \
         {during_flood}/{ACTIONS}, delivered: {}; RSS {rss_start} KiB before, {rss_small} \
         after {SMALL_FLOOD}, {rss_end} after {FLOOD} more; first flood counted {}",
        after
            .links
            .iter()
            .find(|l| l.peer == "b")
            .map(|l| &l.rejected),
        sent.saturating_sub(rejected + queue_full),
        names.len(),
        rejected_from(&after_small, "b") - rejected_from(&before, "b")
            + after_small.data_socket.queue_full
            - before.data_socket.queue_full,
    );
    assert!(
        rejected > 0,
        "the flood reached the session and was rejected"
    );
    assert!(
        rejected + queue_full <= sent,
        "nothing counted twice: {rejected} + {queue_full} > {sent}"
    );
    assert!(
        unknown > 0 && unknown <= STRANGER_FLOOD as u64,
        "the stranger is counted: {unknown}"
    );
    // The refusal line: the first and every 1000th only.
    let lines = capture::containing(REFUSED);
    for line in &lines {
        let count: u64 = line.field("count").unwrap().parse().unwrap();
        assert!(count == 1 || count % 1000 == 0, "rate-limited: {line:?}");
    }
    assert!(
        lines.len() as u64 <= 1 + after.data_socket.queue_full / 1000,
        "{} refusal lines for {} refusals",
        lines.len(),
        after.data_socket.queue_full
    );
    assert_eq!(
        lines.is_empty(),
        after.data_socket.queue_full == 0,
        "a full queue is logged"
    );
    // Memory is bounded by the queues, not by the flood's size.
    assert!(
        rss_end.saturating_sub(rss_start) <= RSS_GROWTH_LIMIT_KIB,
        "RSS grew from {rss_start} KiB to {rss_end} KiB"
    );
    drop(writer_b);
    for node in nodes {
        node.stop().await;
    }
}
