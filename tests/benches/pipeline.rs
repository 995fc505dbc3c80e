//! The node's own work per forwarded edit, without sockets or tasks: a
//! writer node takes Tundra EditAttributes frames from a client, settles
//! them into its scene and LESS session, and seals datagrams; a receiver
//! node opens them, applies them to its scene and serves its own Tundra
//! client at the tick. Acknowledgements flow back, so the send window
//! behaves as on a real link. Fake time: 20 Hz ticks, `RATE` edits/s.
//!
//! ```text
//! cargo bench --bench pipeline                  # 1 000 and 10 000 entities
//! cargo bench --bench pipeline -- 10000         # one size
//! valgrind --tool=callgrind target/release/deps/pipeline-* 1000 --ticks 10
//! ```
//!
//! Under callgrind, the difference between `--ticks 20` and `--ticks 10`
//! divided by the 100 000 edits between them is instructions per edit,
//! stable on a noisy machine.
//!
//! `--observers N` connects N Tundra clients to the receiver instead of
//! one: they are all sent every change at the tick. `--native` makes
//! them native viewers (kNet, XML login), which take moves as
//! RigidBodyUpdate. `--between-ticks` writes the receiver's clients
//! whenever its `poll_timeout` comes, as the node loop does, not only at
//! the tick.
//!
//! Prints ns per edit for each node, and both together. This is the
//! single-threaded core the node loop runs; `lessgate loadgen` adds the
//! WebSocket and UDP tasks around it.

#[path = "../sim/mod.rs"]
mod sim;

/// The node binary's allocator, so the figures match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use lessgate::clock::Time;
use lessgate::federation::LinkId;
use lessgate::less::encoding::link::offered_features;
use lessgate::less::session::Path;
use lessgate::node::{Node, Transmit};
use lessgate::scene::ClientId;
use lessgate::server::ServerConfig;
use lessgate::tundra::messages::{EditAttributes, EditAttributesBlock};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{AttributeEdit, AttributeValue, EntityId, Message, ProtocolVersion};
use sim::{LinkModel, Sim};

/// Offered edits per second (the 10 000 x 20 Hz load).
const RATE: u64 = 200_000;
/// Fake time per tick.
const TICK: Duration = Duration::from_millis(50);
/// Edits handed to the writer node between link flushes, as the node loop
/// takes a batch of client events.
const BATCH: usize = 256;

struct Pipeline {
    writer: Node,
    receiver: Node,
    client: ClientId,
    links: (LinkId, LinkId),
    frames: Vec<Vec<u8>>,
    now: Time,
    /// Whether the receiver's clients are written between ticks.
    between_ticks: bool,
}

fn edit_frame(
    slots: &[Option<lessgate::tundra::AttributeType>],
    entity: EntityId,
    component: lessgate::tundra::ComponentId,
    step: u32,
) -> Vec<u8> {
    let t = step as f32;
    let value = AttributeValue::Transform(Transform {
        pos: Float3::new(entity.0 as f32 * 0.01 + t * 0.37, 1.5, t * 0.11),
        rot: Float3::new(0.0, t * 7.3, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    });
    let edit = AttributeEdit { index: 0, value };
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: entity,
        blocks: vec![EditAttributesBlock::encode(component, &[edit], slots).unwrap()],
    })
    .encode_frame(ProtocolVersion(3))
    .unwrap()
}

fn set_up(entities: u32, observers: usize, native: bool) -> Pipeline {
    // As the load generator's nodes: no per-client entity cap (the message
    // budget is the transport's, and no transport is in this pipeline).
    let mut config = ServerConfig::default();
    config.limits.max_entities_per_client = usize::MAX;
    let mut sim = Sim::with_server(2, 11, config);
    let links = sim.connect_with(
        0,
        1,
        LinkModel::CLEAN,
        &offered_features(),
        &offered_features(),
    );
    let writer = sim.add_client(0);
    for _ in 0..observers.max(1) {
        match native {
            true => sim.add_native_client(1),
            false => sim.add_client(1),
        };
    }
    for tag in 1..=entities {
        sim.create_box(0, writer, tag, &format!("e{tag}"), tag as f32);
    }
    for _ in 0..60 {
        if sim.nodes[1].scene().entities().count() == entities as usize {
            break;
        }
        sim.run(Duration::from_secs(1));
    }
    let seen = sim.nodes[1].scene().entities().count();
    assert_eq!(seen, entities as usize, "the receiver sees every entity");
    // Eight different moves per entity, so no edit repeats its predecessor.
    let targets: Vec<_> = sim
        .view(0, writer)
        .entities
        .iter()
        .map(|(id, components)| {
            let placeable = components
                .iter()
                .find(|(_, (t, _))| *t == 20)
                .map(|(c, _)| *c)
                .expect("a Placeable");
            (*id, placeable)
        })
        .collect();
    let slots = sim.nodes[0]
        .scene()
        .registry()
        .get(20)
        .unwrap()
        .slot_types();
    let frames = (0..8)
        .flat_map(|step| {
            let slots = &slots;
            targets
                .iter()
                .map(move |(e, c)| edit_frame(slots, *e, *c, step))
        })
        .collect();
    let now = sim.now;
    let mut nodes = std::mem::take(&mut sim.nodes).into_iter();
    Pipeline {
        writer: nodes.next().unwrap(),
        receiver: nodes.next().unwrap(),
        client: writer,
        links,
        frames,
        now,
        between_ticks: false,
    }
}

/// Moves every due datagram from one node's link to the other's; returns
/// the sender's and the receiver's time. The receiver applies what it got
/// when its outputs are next drained (after its acknowledgements leave),
/// which is in the carry the other way.
fn carry(
    from: &mut Node,
    from_link: LinkId,
    to: &mut Node,
    to_link: LinkId,
    now: Time,
) -> (Duration, Duration, usize) {
    let started = Instant::now();
    let mut packets = Vec::new();
    if from.poll_timeout().is_some_and(|t| t <= now) {
        from.handle_timeout(now, &|_| 0);
    }
    while let Some(transmit) = from.poll_transmit(now) {
        if let Transmit::Link(link, packet) = transmit {
            assert_eq!(link, from_link);
            packets.push(packet);
        }
    }
    let sent = Instant::now();
    let count = packets.len();
    for packet in packets {
        match packet.path {
            Path::Datagram => to.handle_link_datagram(now, to_link, &packet.bytes),
            Path::Stream => to.handle_link_frame(now, to_link, &packet.bytes),
        }
    }
    (sent - started, sent.elapsed(), count)
}

/// Runs `ticks` ticks of load; returns (writer, receiver) busy time, edits
/// and datagrams.
fn run(p: &mut Pipeline, ticks: u32) -> (Duration, Duration, u64, usize) {
    let per_tick = (RATE * TICK.as_millis() as u64 / 1000) as usize;
    let (mut writer_time, mut receiver_time) = (Duration::ZERO, Duration::ZERO);
    let mut edits = 0u64;
    let mut datagrams = 0;
    let mut next = 0usize;
    for _ in 0..ticks {
        let step = TICK / (per_tick / BATCH) as u32;
        let mut sent = 0;
        while sent < per_tick {
            let started = Instant::now();
            // A batch as the node loop gets it from one connection.
            let batch: Vec<&[u8]> = (0..BATCH.min(per_tick - sent))
                .map(|i| p.frames[(next + i) % p.frames.len()].as_slice())
                .collect();
            next += batch.len();
            sent += batch.len();
            p.writer.handle_client_frames(p.client, p.now, &batch);
            writer_time += started.elapsed();
            if p.between_ticks {
                // As the node loop does: its clients are written when
                // `poll_timeout` says, between ticks too.
                let started = Instant::now();
                if p.receiver.poll_timeout().is_some_and(|at| at <= p.now) {
                    p.receiver.handle_timeout(p.now, &|_| 0);
                }
                receiver_time += started.elapsed();
            }
            let (w, r) = (&mut p.writer, &mut p.receiver);
            let (out, into, packets) = carry(w, p.links.0, r, p.links.1, p.now);
            datagrams += packets;
            // Acknowledgements back: the receiver sends, the writer takes.
            let (back, acked, _) = carry(r, p.links.1, w, p.links.0, p.now);
            writer_time += out + acked;
            receiver_time += into + back;
            p.now += step;
        }
        edits += sent as u64;
        let started = Instant::now();
        p.writer.handle_timeout(p.now, &|_| 0);
        let mid = Instant::now();
        p.receiver.handle_timeout(p.now, &|_| 0);
        writer_time += mid - started;
        receiver_time += mid.elapsed();
        // The tick's packets, and the acknowledgements back.
        let (w, r) = (&mut p.writer, &mut p.receiver);
        let (out, into, packets) = carry(w, p.links.0, r, p.links.1, p.now);
        let (back, acked, _) = carry(r, p.links.1, w, p.links.0, p.now);
        datagrams += packets;
        writer_time += out + acked;
        receiver_time += into + back;
    }
    (writer_time, receiver_time, edits, datagrams)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `--ticks N`: one run of N ticks, for instruction counts (callgrind).
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse::<u32>().ok())
    };
    let ticks = option("--ticks");
    let observers = option("--observers").unwrap_or(1) as usize;
    let native = args.iter().any(|a| a == "--native");
    let sizes: Vec<u32> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || !args[i - 1].starts_with("--"))
        .filter_map(|(_, a)| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000]
    } else {
        sizes
    };
    for entities in sizes {
        let started = Instant::now();
        let mut p = set_up(entities, observers, native);
        p.between_ticks = args.iter().any(|a| a == "--between-ticks");
        eprintln!(
            "set-up of {entities} entities: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let (_, _, _, packets) = run(&mut p, 20);
        assert!(packets > 0, "the writer sends datagrams");
        if let Some(ticks) = ticks {
            let (_, _, edits, _) = run(&mut p, ticks);
            println!("pipeline_{entities}_entities  {edits} edits in {ticks} ticks");
            continue;
        }
        // Best of five one-second (fake) rounds.
        let best = (0..5)
            .map(|_| run(&mut p, 20))
            .min_by_key(|(w, r, _, _)| *w + *r)
            .unwrap();
        let (w, r, edits, _) = best;
        let per = |d: Duration| d.as_nanos() as f64 / edits as f64;
        println!(
            "pipeline_{entities}_entities  writer {:>7.0} ns/edit  receiver {:>7.0} ns/edit  both {:>7.0} ns/edit",
            per(w),
            per(r),
            per(w + r)
        );
    }
}
