//! Two kNet UDP connections (client and server) joined by a fake link under
//! fake time: loss, duplication, reordering and delay from a seeded PRNG.
//! Every scenario is deterministic and runs in well under a second of real
//! time.

#[allow(dead_code)] // the presets serve the other simulations
#[path = "common/link_model.rs"]
mod link_model;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use lessgate::clock::Time;
use lessgate::knet::ids::{PacketId, ReliableNumber};
use lessgate::knet::message::OutMessage;
use lessgate::knet::udp::{CloseReason, Role, UdpConfig, UdpConnection, UdpEvent};
use link_model::LinkModel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Client,
    Server,
}

/// The link: datagrams in flight with their delivery times.
struct Link {
    rng: ChaCha8Rng,
    model: LinkModel,
    /// (deliver at, sequence, destination, bytes)
    flying: Vec<(Time, u64, Side, Vec<u8>)>,
    seq: u64,
}

impl Link {
    fn send(&mut self, now: Time, to: Side, bytes: &[u8]) {
        for _ in 0..self.model.copies(&mut self.rng) {
            self.seq += 1;
            self.flying.push((
                now + self.model.delay(&mut self.rng),
                self.seq,
                to,
                bytes.to_vec(),
            ));
        }
    }

    fn next_delivery(&self) -> Option<Time> {
        self.flying.iter().map(|f| f.0).min()
    }

    fn take_due(&mut self, now: Time) -> Vec<(Side, Vec<u8>)> {
        let mut due: Vec<_> = Vec::new();
        let mut i = 0;
        while i < self.flying.len() {
            if self.flying[i].0 <= now {
                due.push(self.flying.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|f| (f.0, f.1));
        due.into_iter().map(|f| (f.2, f.3)).collect()
    }
}

struct Sim {
    now: Time,
    link: Link,
    client: UdpConnection,
    server: Option<UdpConnection>,
    config: UdpConfig,
    /// Events per side, with the time they were seen.
    events: HashMap<&'static str, Vec<(Time, UdpEvent)>>,
    server_counters: Option<(PacketId, ReliableNumber)>,
}

impl Sim {
    fn new(seed: u64, loss: f64, duplicate: f64) -> Sim {
        let config = UdpConfig::default();
        Sim {
            now: Time::ZERO,
            link: Link {
                rng: ChaCha8Rng::seed_from_u64(seed),
                // 5-60 ms: datagrams overtake each other.
                model: LinkModel {
                    loss,
                    duplicate,
                    jitter: Duration::from_millis(55),
                    ..LinkModel::clean(Duration::from_millis(5))
                },
                flying: Vec::new(),
                seq: 0,
            },
            client: UdpConnection::new(Role::Client, config.clone(), Time::ZERO),
            server: None,
            config,
            events: HashMap::new(),
            server_counters: None,
        }
    }

    fn next_time(&self) -> Option<Time> {
        [
            self.link.next_delivery(),
            self.client.poll_timeout(),
            self.server.as_ref().and_then(|s| s.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// One step: advance to the next deadline, deliver, run timers, transmit.
    fn step(&mut self, limit: Time) -> bool {
        let Some(next) = self.next_time() else {
            return false;
        };
        if next > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(next);
        let now = self.now;
        for (to, bytes) in self.link.take_due(now) {
            match to {
                Side::Server => match &mut self.server {
                    Some(server) => server.handle_datagram(now, &bytes),
                    None => {
                        // docs/knet-wire.md §4.8: the connect datagram creates the connection;
                        // its bytes are ignored.
                        let mut server = UdpConnection::new(Role::Server, self.config.clone(), now);
                        if let Some((p, r)) = self.server_counters {
                            server.start_counters_at(p, r);
                        }
                        self.server = Some(server);
                    }
                },
                Side::Client => self.client.handle_datagram(now, &bytes),
            }
        }
        self.client.handle_timeout(now);
        if let Some(server) = &mut self.server {
            server.handle_timeout(now);
        }
        let mut out = Vec::new();
        while self.client.poll_transmit(now, &mut out) {
            self.link.send(now, Side::Server, &out);
        }
        if let Some(server) = &mut self.server {
            while server.poll_transmit(now, &mut out) {
                self.link.send(now, Side::Client, &out);
            }
        }
        while let Some(e) = self.client.poll_event() {
            self.events.entry("client").or_default().push((now, e));
        }
        if let Some(server) = &mut self.server {
            while let Some(e) = server.poll_event() {
                self.events.entry("server").or_default().push((now, e));
            }
        }
        true
    }

    fn run_until(&mut self, limit: Time) {
        while self.step(limit) {}
    }

    fn server(&mut self) -> &mut UdpConnection {
        self.server.as_mut().expect("server connection exists")
    }

    fn messages(&self, side: &'static str) -> Vec<(u32, Bytes, bool)> {
        self.events
            .get(side)
            .into_iter()
            .flatten()
            .filter_map(|(_, e)| match e {
                UdpEvent::Message {
                    id,
                    payload,
                    reliable,
                } => Some((id.0, payload.clone(), *reliable)),
                _ => None,
            })
            .collect()
    }

    fn closed(&self, side: &'static str) -> Option<(Time, CloseReason)> {
        self.events.get(side)?.iter().find_map(|(t, e)| match e {
            UdpEvent::Closed { reason } => Some((*t, reason.clone())),
            _ => None,
        })
    }
}

/// A payload that names its message and can be checked whole.
fn payload(tag: u32, len: usize) -> Bytes {
    let mut p = tag.to_le_bytes().to_vec();
    p.extend(
        (0..len.saturating_sub(4)).map(|i| (i as u32).wrapping_mul(31).wrapping_add(tag) as u8),
    );
    Bytes::from(p)
}

fn connect(sim: &mut Sim) {
    sim.run_until(Time::from_millis(200));
    assert!(sim.server.is_some(), "connect datagram delivered");
    assert!(
        matches!(sim.events["client"][0].1, UdpEvent::Connected),
        "client connected"
    );
}

#[test]
fn lossy_link_delivers_every_reliable_message_exactly_once() {
    let mut sim = Sim::new(19, 0.0, 0.0);
    // Packet ids of both sides wrap (22 bits) during the run.
    let near_wrap = PacketId::new(PacketId::MAX.get() - 300);
    sim.client.start_counters_at(near_wrap, ReliableNumber(0));
    sim.server_counters = Some((near_wrap, ReliableNumber(0)));
    connect(&mut sim);
    sim.link.model.loss = 0.2;
    sim.link.model.duplicate = 0.1;

    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut expected: HashMap<&'static str, Vec<(u32, Bytes)>> = HashMap::new();
    let mut unreliable_sent = 0;
    let mut tag = 0u32;
    for round in 0..60u64 {
        for (side, to) in [("client", "server"), ("server", "client")] {
            for _ in 0..4 {
                tag += 1;
                let (id, len) = match rng.gen_range(0..40) {
                    0 => (110u16, rng.gen_range(20_000..60_000)),
                    1..=8 => (119u16, rng.gen_range(4..300)),
                    _ => (120u16, rng.gen_range(4..900)),
                };
                let p = payload(tag, len);
                if id == 119 {
                    unreliable_sent += 1;
                } else {
                    expected.entry(to).or_default().push((tag, p.clone()));
                }
                let message = OutMessage::tundra(id, p);
                match side {
                    "client" => sim.client.send(message),
                    _ => sim.server().send(message),
                }
            }
        }
        sim.run_until(Time::from_millis(200 + round * 100));
    }
    // Let everything drain (big transfers wait for acks, losses for 5 s).
    let deadline = Time::from_millis(3_000_000);
    while sim.now < deadline {
        sim.run_until(sim.now + Duration::from_secs(10));
        let done = ["client", "server"].iter().all(|s| {
            let got = sim.messages(s).iter().filter(|m| m.2).count();
            got >= expected.get(s).map_or(0, Vec::len)
        });
        if done {
            break;
        }
    }
    for side in ["client", "server"] {
        assert!(
            sim.closed(side).is_none(),
            "{side} closed: {:?}",
            sim.closed(side)
        );
        let got = sim.messages(side);
        let mut reliable: HashMap<u32, Bytes> = HashMap::new();
        let mut unreliable = HashMap::new();
        for (id, p, is_reliable) in got {
            let tag = u32::from_le_bytes(p[..4].try_into().unwrap());
            assert_eq!(payload(tag, p.len()), p, "whole and intact");
            if is_reliable {
                assert_ne!(id, 119);
                assert!(reliable.insert(tag, p).is_none(), "{side}: {tag} twice");
            } else {
                assert_eq!(id, 119);
                assert!(
                    unreliable.insert(tag, ()).is_none(),
                    "{side}: unreliable twice"
                );
            }
        }
        let want = &expected[side];
        assert_eq!(reliable.len(), want.len(), "{side}: every reliable message");
        for (tag, p) in want {
            assert_eq!(reliable.get(tag), Some(p));
        }
        assert!(unreliable.len() < unreliable_sent);
    }
    assert!(expected["client"].iter().any(|(_, p)| p.len() > 20_000));
    let (c, s) = (sim.client.stats().clone(), sim.server().stats().clone());
    for stats in [&c, &s] {
        assert!(stats.datagrams_out > 400, "packet ids wrapped: {stats:?}");
        assert!(stats.resent_messages > 0);
        assert!(stats.duplicate_datagrams > 0);
        assert!(stats.rtt.is_some(), "pings flowed");
    }
}

#[test]
fn silence_times_out_on_both_sides() {
    let mut sim = Sim::new(3, 0.0, 0.0);
    connect(&mut sim);
    sim.run_until(secs(10));
    sim.link.model.loss = 1.0;
    sim.run_until(secs(60));
    for side in ["client", "server"] {
        let (at, reason) = sim.closed(side).expect("closed");
        assert_eq!(reason, CloseReason::TimedOut);
        // Last datagram heard shortly before the link was cut at 10 s.
        assert!(at >= secs(21) && at <= secs(25), "{at}");
    }
}

#[test]
fn close_is_acknowledged_and_both_sides_close() {
    let mut sim = Sim::new(5, 0.0, 0.0);
    connect(&mut sim);
    sim.client.send(OutMessage::tundra(120, payload(1, 10)));
    sim.run_until(Time::from_millis(1000));
    sim.client.close(sim.now);
    sim.run_until(Time::from_millis(2000));
    assert_eq!(
        sim.closed("client").unwrap().1,
        CloseReason::LocalDisconnect
    );
    assert_eq!(
        sim.closed("server").unwrap().1,
        CloseReason::PeerDisconnected
    );
    assert_eq!(sim.messages("server").len(), 1);
    // Client waited for the ack, not for the linger.
    assert!(sim.closed("client").unwrap().0 < Time::from_millis(1200));
}

#[test]
fn client_without_server_fails_to_connect_after_5_s() {
    let mut sim = Sim::new(9, 1.0, 0.0);
    sim.run_until(Time::from_millis(20_000));
    assert_eq!(
        sim.closed("client"),
        Some((Time::from_millis(5000), CloseReason::ConnectFailed))
    );
    assert_eq!(sim.client.stats().datagrams_out, 1);
}

fn secs(s: u64) -> Time {
    Time::from_millis(s * 1000)
}
