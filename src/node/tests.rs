//! The node's poll API: what it hands out, and when.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::{Event, LinkUp, Node, Transmit, TIMER_GRANULARITY};
use crate::clock::Time;
use crate::federation::schemas::schema_registry;
use crate::federation::LinkPolicy;
use crate::less::schema::ConnectionSchema;
use crate::less::session::CloseReason;
use crate::link_id::LinkId;
use crate::peering::keys::Role;
use crate::peering::link_settings::{link_settings, Agreement, LinkSettings, LocalSettings};
use crate::peering::negotiate::LinkFraming;
use crate::scene::{ClientId, Scene};
use crate::server::{ServerConfig, TundraServer};
use crate::tundra::messages::{CreateEntity, Login};
use crate::tundra::ClientTransport;
use crate::tundra::{ComponentData, ComponentId, EntityId, Message, ProtocolVersion, Registry};

const TICK: Duration = Duration::from_millis(50);

fn node(id: u128) -> Node {
    let server = TundraServer::new(ServerConfig {
        tick: TICK,
        ..ServerConfig::default()
    });
    Node::new(Scene::new(Registry::builtin()), server, Uuid::from_u128(id))
}

fn no_backlog(_: ClientId) -> usize {
    0
}

/// Logs a protocol 3 WebSocket client in and drops what the node answers.
fn log_in(node: &mut Node, client: ClientId, now: Time) {
    node.handle_client_connect(client, now, ClientTransport::WebSocket);
    let login = Message::Login(Login {
        login_data: "{\"username\":\"test\"}".into(),
        protocol_version: Some(3),
    });
    node.handle_client_frame(
        client,
        now,
        &login.encode_frame(ProtocolVersion(1)).unwrap(),
    );
    while node.poll_transmit(now).is_some() {}
}

/// A CreateEntity frame for an entity with a Name component.
fn create_entity(tag: u32) -> Vec<u8> {
    let registry = Registry::builtin();
    let schema = registry.get(26).unwrap();
    let component =
        ComponentData::with_values(ComponentId(0x4000_0001), schema, schema.default_values());
    Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0000 | tag),
        temporary: false,
        parent: None,
        components: vec![component],
    })
    .encode_frame(ProtocolVersion(3))
    .unwrap()
}

/// The settings of one end of a link between two test nodes, as the peer
/// driver derives them (both ends offer the federation's features, as two
/// lessgate nodes do).
fn settings(node: &Node, role: Role, local: u8, remote: u8) -> LinkSettings {
    let features = crate::federation::wire::features::LinkFeatures::offered().map(str::to_owned);
    let agreement = Agreement {
        role,
        secret: &[7; 32],
        local_first_sequence: local,
        peer_first_sequence: remote,
        framing: LinkFraming::Datagram,
        mtu: 1200,
        features: &features,
    };
    let local = LocalSettings {
        schemas: Arc::new(schema_registry(node.scene().registry())),
        connection_schema: Arc::new(ConnectionSchema::builtin()),
        timestamp_quantum: Duration::from_millis(1),
        liveness_timeout: Duration::from_secs(10),
    };
    link_settings(&agreement, &local).unwrap()
}

/// Links `a` and `b` (link 1 on a, link 2 on b) at `now`.
fn link(a: &mut Node, b: &mut Node, now: Time) -> (LinkId, LinkId) {
    let (la, lb) = (LinkId(1), LinkId(2));
    let up_a = LinkUp {
        id: la,
        peer: b.federation().node_id(),
        peer_name: "b".into(),
        policy: LinkPolicy::default(),
        settings: settings(a, Role::Dialer, 3, 9),
    };
    let up_b = LinkUp {
        id: lb,
        peer: a.federation().node_id(),
        peer_name: "a".into(),
        policy: LinkPolicy::default(),
        settings: settings(b, Role::Listener, 9, 3),
    };
    a.handle_link_up(now, up_a).unwrap();
    b.handle_link_up(now, up_b).unwrap();
    (la, lb)
}

#[test]
fn a_node_with_a_client_ticks_and_does_not_catch_up_a_late_tick() {
    let mut node = node(1);
    log_in(&mut node, ClientId(1), Time::ZERO);
    assert_eq!(
        node.poll_timeout(),
        Some(Time::ZERO),
        "the first tick is due at once"
    );
    node.handle_timeout(Time::ZERO, &no_backlog);
    while node.poll_transmit(Time::ZERO).is_some() {}
    assert_eq!(node.poll_timeout(), Some(Time::ZERO + TICK));
    // A late wake-up is not caught up with a burst of ticks.
    let late = Time::ZERO + TICK * 3 + Duration::from_millis(7);
    node.handle_timeout(late, &no_backlog);
    assert_eq!(node.poll_timeout(), Some(late + TICK));
    assert!(node.poll_transmit(late).is_none());
    assert!(node.poll_event().is_none());
}

#[test]
fn a_node_without_clients_entities_or_links_sleeps_until_an_input() {
    let mut node = node(1);
    assert_eq!(node.poll_timeout(), None, "no tick: it has no work");
    // A client connecting brings the tick back at once (its login deadline
    // and its writes need it).
    let now = Time::ZERO + Duration::from_secs(30);
    node.handle_client_connect(ClientId(1), now, ClientTransport::WebSocket);
    assert!(node.poll_timeout().is_some_and(|at| at <= now));
    node.handle_timeout(now, &no_backlog);
    assert_eq!(node.poll_timeout(), Some(now + TICK));
    node.handle_client_disconnect(ClientId(1), "gone");
    assert_eq!(node.poll_timeout(), None);
}

#[test]
fn an_idle_linked_node_wakes_only_for_its_links_liveness() {
    // Two linked nodes, no clients and no entities, for a minute of fake
    // time: every packet delivered at once. Each wakes only for its
    // session's keepalives (1 s by default here) and what answers them,
    // never at the 20 Hz tick, and the link stays up.
    let mut a = node(1);
    let mut b = node(2);
    let (la, lb) = link(&mut a, &mut b, Time::ZERO);
    let end = Time::ZERO + Duration::from_secs(60);
    let mut wakes = [0u32; 2];
    loop {
        let next = [a.poll_timeout(), b.poll_timeout()];
        let Some(now) = next.iter().flatten().min().copied().filter(|t| *t <= end) else {
            break;
        };
        for (i, node) in [&mut a, &mut b].into_iter().enumerate() {
            if node.poll_timeout().is_some_and(|at| at <= now) {
                wakes[i] += 1;
                node.handle_timeout(now, &no_backlog);
            }
        }
        for datagram in link_packets(&mut a, now) {
            b.handle_link_datagram(now, lb, &datagram);
        }
        for datagram in link_packets(&mut b, now) {
            a.handle_link_datagram(now, la, &datagram);
        }
    }
    // One keepalive a second each (and a few wake-ups at link-up): not
    // the 1 200 ticks of a minute.
    for w in wakes {
        assert!((55..=70).contains(&w), "{wakes:?} wake-ups in 60 s");
    }
    assert_eq!(a.federation().links().count(), 1, "the link is alive");
    assert_eq!(b.federation().links().count(), 1, "the link is alive");
}

#[test]
fn a_deadline_still_due_after_its_timeout_is_reported_later() {
    let mut a = node(1);
    let mut b = node(2);
    let now = Time::ZERO + Duration::from_secs(1);
    link(&mut a, &mut b, now);
    a.handle_timeout(now, &no_backlog);
    // Whatever the session still waits for, the node is not due again at
    // the same instant: a driver sleeping until poll_timeout never spins.
    let next = a.poll_timeout().unwrap();
    assert!(next >= now + TIMER_GRANULARITY, "{next:?} after {now:?}");
}

/// Logs in a writer and a reader, and has the writer create an entity 10 ms
/// after the first tick; returns the node, the reader and that time.
fn created_after_the_first_tick() -> (Node, ClientId, Time) {
    let mut node = node(1);
    let (writer, reader) = (ClientId(1), ClientId(2));
    log_in(&mut node, writer, Time::ZERO);
    log_in(&mut node, reader, Time::ZERO);
    node.handle_timeout(Time::ZERO, &no_backlog);
    while node.poll_transmit(Time::ZERO).is_some() {}
    let now = Time::ZERO + Duration::from_millis(10);
    node.handle_client_frames(writer, now, &[create_entity(1)]);
    let before: Vec<_> = std::iter::from_fn(|| node.poll_transmit(now)).collect();
    assert!(
        !before
            .iter()
            .any(|t| matches!(t, Transmit::Client(c, _) if *c == reader)),
        "nothing for the other client before a timer runs: {before:?}"
    );
    (node, reader, now)
}

fn sent_to(node: &mut Node, client: ClientId, now: Time) -> bool {
    std::iter::from_fn(|| node.poll_transmit(now))
        .any(|t| matches!(t, Transmit::Client(c, _) if c == client))
}

#[test]
fn a_client_frame_reaches_an_idle_client_before_the_tick() {
    let (mut node, reader, now) = created_after_the_first_tick();
    let due = node.poll_timeout().unwrap();
    assert!(due < Time::ZERO + TICK, "due at {due:?}, before the tick");
    let at = due.max(now);
    node.handle_timeout(at, &no_backlog);
    assert!(
        sent_to(&mut node, reader, at),
        "an idle client gets the new entity at once"
    );
    assert_eq!(node.server().stats().early_writes, 1, "counted as early");
}

#[test]
fn a_client_frame_waits_for_a_client_that_has_not_drained_and_not_for_the_tick() {
    let (mut node, reader, now) = created_after_the_first_tick();
    let unsent = std::cell::Cell::new(1 << 20);
    let backlog = |_: ClientId| unsent.get();
    let due = node.poll_timeout().unwrap().max(now);
    node.handle_timeout(due, &backlog);
    assert!(
        !sent_to(&mut node, reader, due),
        "nothing more is queued behind a backlog"
    );
    // Looked at again after the gap (5 ms), then after waits as long as it
    // has been held (5 ms, then 10 ms), not at the tick.
    for after in [5, 10] {
        let at = node.poll_timeout().unwrap();
        assert_eq!(at, due + Duration::from_millis(after));
        node.handle_timeout(at, &backlog);
        assert!(!sent_to(&mut node, reader, at));
    }
    // Drained: it gets the new entity at its next look, before the tick.
    unsent.set(0);
    let at = node.poll_timeout().unwrap();
    assert_eq!(at, now + Duration::from_millis(20));
    node.handle_timeout(at, &backlog);
    assert!(sent_to(&mut node, reader, at), "written once drained");
    assert_eq!(node.server().stats().early_writes, 1);
}

/// Runs a node's due timers and takes its link packets (client frames are
/// dropped).
fn link_packets(node: &mut Node, now: Time) -> Vec<Vec<u8>> {
    if node.poll_timeout().is_some_and(|at| at <= now) {
        node.handle_timeout(now, &no_backlog);
    }
    std::iter::from_fn(|| node.poll_transmit(now))
        .filter_map(|transmit| match transmit {
            Transmit::Link(_, transmit) => Some(transmit.bytes),
            _ => None,
        })
        .collect()
}

#[test]
fn a_link_datagram_is_acknowledged_before_it_is_applied() {
    let mut a = node(1);
    let mut b = node(2);
    let mut now = Time::ZERO;
    let (la, lb) = link(&mut a, &mut b, now);
    let writer = ClientId(1);
    log_in(&mut a, writer, now);
    for tag in 1..=3 {
        a.handle_client_frames(writer, now, &[create_entity(tag)]);
    }
    // Rounds of A -> B -> A until B has A's entities (B subscribes to the
    // types first). In the round that brings them, B's first output is a
    // link packet, handed out while the scene is still unchanged.
    let mut arrived = None;
    for _ in 0..100 {
        now += Duration::from_millis(10);
        for datagram in link_packets(&mut a, now) {
            b.handle_link_datagram(now, lb, &datagram);
        }
        let empty_before = b.scene().is_empty();
        // By the acknowledgement delay an acknowledgement is due.
        let due = now + Duration::from_millis(20);
        let first = b.poll_transmit(due);
        let empty_after_first = b.scene().is_empty();
        let mut back: Vec<Vec<u8>> = Vec::new();
        for transmit in first
            .iter()
            .cloned()
            .chain(std::iter::from_fn(|| b.poll_transmit(due)))
        {
            if let Transmit::Link(link, transmit) = transmit {
                assert_eq!(link, lb);
                back.push(transmit.bytes);
            }
        }
        if empty_before && b.scene().len() == 3 {
            arrived = Some((first, empty_after_first));
            break;
        }
        now = due;
        for datagram in back {
            a.handle_link_datagram(now, la, &datagram);
        }
    }
    let (first, empty_after_first) = arrived.expect("B gets A's entities");
    assert!(
        matches!(first, Some(Transmit::Link(link, _)) if link == lb),
        "the acknowledgement first: {first:?}"
    );
    assert!(
        empty_after_first,
        "applied only after the acknowledgement left"
    );
}

/// Hands every link packet `from` has due at `now` to `to`, on `link`.
fn carry(from: &mut Node, to: &mut Node, link: LinkId, now: Time) {
    for datagram in link_packets(from, now) {
        to.handle_link_datagram(now, link, &datagram);
    }
}

#[test]
fn a_change_from_a_link_reaches_a_client_without_the_timer_step() {
    let mut a = node(1);
    let mut b = node(2);
    let mut now = Time::ZERO;
    let (la, lb) = link(&mut a, &mut b, now);
    let (writer, reader) = (ClientId(1), ClientId(2));
    log_in(&mut a, writer, now);
    log_in(&mut b, reader, now);
    a.handle_client_frames(writer, now, &[create_entity(1)]);
    // Rounds until B has A's entity (B subscribes to the types first).
    for _ in 0..100 {
        now += Duration::from_millis(10);
        carry(&mut a, &mut b, lb, now);
        carry(&mut b, &mut a, la, now);
        if b.scene().len() == 1 {
            break;
        }
    }
    assert_eq!(b.scene().len(), 1, "B has A's first entity");
    b.handle_timeout(now, &no_backlog);
    assert!(sent_to(&mut b, reader, now), "the reader is sent it");
    // A second entity; A's link sends it at its next boundary at the latest.
    now += Duration::from_millis(10);
    a.handle_client_frames(writer, now, &[create_entity(2)]);
    let packets: Vec<Vec<u8>> = (0..10)
        .map(|step| link_packets(&mut a, now + Duration::from_millis(step)))
        .find(|packets| !packets.is_empty())
        .expect("A's link sends the new entity within its gap");
    // B ran its timers a moment before the packet arrives.
    b.handle_timeout(now, &no_backlog);
    assert!(
        !sent_to(&mut b, reader, now),
        "the reader had nothing waiting"
    );
    let arrival = now + Duration::from_micros(200);
    for datagram in &packets {
        b.handle_link_datagram(arrival, lb, datagram);
    }
    while b.poll_transmit(arrival).is_some() {}
    assert_eq!(b.scene().len(), 2, "applied on arrival");
    // Due at once, not a timer step (1 ms) after B's last timeout.
    let due = b.poll_timeout().unwrap();
    assert!(due <= arrival, "due at {due:?}, arrived at {arrival:?}");
    b.handle_timeout(arrival, &no_backlog);
    assert!(sent_to(&mut b, reader, arrival), "written on arrival");
}

#[test]
fn a_silent_link_is_closed_by_its_idle_timeout() {
    let mut a = node(1);
    let mut b = node(2);
    let (la, _) = link(&mut a, &mut b, Time::ZERO);
    let mut now = Time::ZERO;
    let mut closed = None;
    // B never answers: A's session gives up after its idle timeout (15 s).
    while now < Time::ZERO + Duration::from_secs(60) && closed.is_none() {
        now = a.poll_timeout().unwrap();
        a.handle_timeout(now, &no_backlog);
        while a.poll_transmit(now).is_some() {}
        closed = std::iter::from_fn(|| a.poll_event())
            .find(|event| matches!(event, Event::CloseLink(..)));
    }
    assert_eq!(closed, Some(Event::CloseLink(la, CloseReason::IdleTimeout)));
    assert_eq!(
        a.federation().links().count(),
        0,
        "the node dropped the link"
    );
}
