//! The write schedule through the server core: a client gets an edit as
//! soon as it is applied, one written a moment ago gets it at the end of
//! its gap, a busy one is written once per gap (never waiting for the
//! tick), and a slow one is held: its backlog stays bounded, it gets the
//! latest state once it drains, and one that stops reading is closed.

use std::time::Duration;

use bytes::Bytes;

use super::core::{ServerConfig, TundraServer};
use super::tests::{
    block, connect, edit_frame, expected_edit, frames_of, moved, scene, server, settle, tick,
    PLACEABLE,
};
use super::write_schedule::WRITE_MAX_BACKLOG_BYTES;
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::{ComponentData, ComponentId, EntityId, Message, ProtocolVersion, Registry};

const WRITER: ClientId = ClientId(1);
const OBSERVER: ClientId = ClientId(2);

/// A server with a writer and an observer that both have the scene's
/// entities (the first tick, at time zero, sent them).
fn two_clients(scene: &mut Scene) -> TundraServer {
    let mut server = server();
    connect(&mut server, scene, WRITER, 3);
    connect(&mut server, scene, OBSERVER, 3);
    tick(&mut server, scene, Time::ZERO, &[]);
    server
}

/// The writer moves `entity` to `x` at `now`; the change reaches the sync
/// states.
fn writer_moves(server: &mut TundraServer, scene: &mut Scene, entity: EntityId, x: f32, now: Time) {
    let frame = edit_frame(entity, vec![block(scene, 1, PLACEABLE, moved(x))]);
    server.handle_frame(scene, WRITER, now, &frame);
    settle(server, scene);
}

/// Runs the due writes with every client reporting `backlog` unsent bytes;
/// returns what they wrote.
fn write_due(
    server: &mut TundraServer,
    scene: &Scene,
    now: Time,
    backlog: usize,
) -> Vec<(ClientId, Bytes)> {
    server.handle_due_writes(scene, now, &|_| backlog);
    std::iter::from_fn(|| server.poll_transmit()).collect()
}

/// `count` more local entities with a Placeable (component 1).
fn add_entities(scene: &mut Scene, count: usize) -> Vec<EntityId> {
    let placeable = scene.registry().get(PLACEABLE).unwrap().clone();
    let entities = (0..count)
        .map(|_| {
            let component =
                ComponentData::with_values(ComponentId(1), &placeable, placeable.default_values());
            scene
                .create_entity(
                    ChangeSource::Node,
                    None,
                    Origin::Local,
                    false,
                    None,
                    vec![component],
                )
                .unwrap()
                .id
        })
        .collect();
    scene.take_journal();
    entities
}

/// `source` moves every one of `entities` to `x`; the changes reach the
/// sync states.
fn moves_from(
    server: &mut TundraServer,
    scene: &mut Scene,
    source: ChangeSource,
    entities: &[EntityId],
    x: f32,
) {
    for entity in entities {
        scene
            .edit_attribute(
                source,
                *entity,
                ComponentId(1),
                0,
                super::tests::transform(x),
            )
            .unwrap();
    }
    settle(server, scene);
}

/// The node moves every one of `entities` to `x`.
fn node_moves_all(server: &mut TundraServer, scene: &mut Scene, entities: &[EntityId], x: f32) {
    moves_from(server, scene, ChangeSource::Node, entities, x);
}

#[test]
fn a_client_gets_an_edit_without_waiting_for_the_tick() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    let now = Time::from_millis(60);
    writer_moves(&mut server, &mut scene, entity, 2.0, now);
    assert_eq!(server.poll_timeout(), Some(Time::ZERO), "due at once");
    let sent = write_due(&mut server, &scene, now, 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(2.0))])]
    );
    assert!(frames_of(&sent, WRITER).is_empty(), "no echo");
    assert_eq!(server.poll_timeout(), None, "nothing left waiting");
    assert_eq!(server.stats().early_writes, 1);
    // The tick has nothing more to say.
    assert!(tick(&mut server, &scene, Time::from_millis(100), &[]).is_empty());
}

#[test]
fn a_client_written_a_moment_ago_gets_the_next_edit_at_the_end_of_its_gap() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(60));
    write_due(&mut server, &scene, Time::from_millis(60), 0);
    // 1 ms later: within the 5 ms gap of a 20 Hz tick.
    writer_moves(&mut server, &mut scene, entity, 3.0, Time::from_millis(61));
    assert!(write_due(&mut server, &scene, Time::from_millis(61), 0).is_empty());
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
    writer_moves(&mut server, &mut scene, entity, 4.0, Time::from_millis(63));
    assert!(write_due(&mut server, &scene, Time::from_millis(64), 0).is_empty());
    // At the deadline, both moves go out as one frame of the latest value.
    let sent = write_due(&mut server, &scene, Time::from_millis(65), 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(4.0))])]
    );
    assert_eq!(server.poll_timeout(), None);
}

/// A peer link's packet moves `entity` to `x`.
fn peer_moves(server: &mut TundraServer, scene: &mut Scene, entity: EntityId, x: f32) {
    moves_from(server, scene, ChangeSource::Peer(1), &[entity], x);
}

#[test]
fn a_change_from_a_peer_waits_half_a_gap_not_for_the_boundary() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(60));
    write_due(&mut server, &scene, Time::from_millis(60), 0);
    // A local change 1 ms later waits for the boundary at 65 ms.
    writer_moves(&mut server, &mut scene, entity, 3.0, Time::from_millis(61));
    assert!(!server.has_fresh_peer_changes());
    assert!(write_due(&mut server, &scene, Time::from_millis(61), 0).is_empty());
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
    // A peer's packet then brings a change: looked at again at once, and
    // due half a gap after the last write.
    peer_moves(&mut server, &mut scene, entity, 4.0);
    assert!(server.has_fresh_peer_changes());
    assert_eq!(server.poll_timeout(), Some(Time::ZERO));
    let sent = write_due(&mut server, &scene, Time::from_millis(61), 0);
    // The writer, not written since the tick at 0 ms, gets the peer's
    // value (not its own edit) at once; the observer at 62.5 ms.
    assert_eq!(
        frames_of(&sent, WRITER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(4.0))])]
    );
    assert!(frames_of(&sent, OBSERVER).is_empty());
    assert!(!server.has_fresh_peer_changes());
    assert_eq!(server.poll_timeout(), Some(Time::from_micros(62_500)));
    let sent = write_due(&mut server, &scene, Time::from_micros(62_500), 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(4.0))])]
    );
    assert_eq!(server.poll_timeout(), None);
    // The next local change waits for the boundary again (65 ms).
    writer_moves(&mut server, &mut scene, entity, 5.0, Time::from_millis(63));
    assert!(frames_of(
        &write_due(&mut server, &scene, Time::from_millis(63), 0),
        OBSERVER
    )
    .is_empty());
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
}

#[test]
fn a_tick_with_nothing_waiting_does_not_delay_the_next_change() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    // The tick at 100 ms finds nothing waiting for anyone.
    assert!(tick(&mut server, &scene, Time::from_millis(100), &[]).is_empty());
    // A move 1 ms later is written at once, not at the boundary of 105 ms.
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(101));
    let sent = write_due(&mut server, &scene, Time::from_millis(101), 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(2.0))])]
    );
}

#[test]
fn a_busy_client_is_written_once_per_gap_not_at_the_tick() {
    // 200 entities moved every millisecond from 51 ms to 72 ms: the old
    // rule called this client busy and left it to the tick at 100 ms.
    let (mut scene, _) = scene();
    let entities = add_entities(&mut scene, 200);
    let mut server = two_clients(&mut scene);
    let mut writes = Vec::new();
    for ms in 51..=72u64 {
        let now = Time::from_millis(ms);
        node_moves_all(&mut server, &mut scene, &entities, ms as f32);
        if server.poll_timeout().is_some_and(|at| at <= now) {
            let sent = write_due(&mut server, &scene, now, 0);
            if !frames_of(&sent, OBSERVER).is_empty() {
                writes.push((ms, frames_of(&sent, OBSERVER).len()));
            }
        }
    }
    // Written at once, then at every 5 ms boundary, each write one frame
    // per entity with its latest position (its earlier moves of the gap
    // coalesced away).
    assert_eq!(
        writes,
        [(51, 200), (55, 200), (60, 200), (65, 200), (70, 200)],
        "one write per gap"
    );
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(75)));
    let sent = write_due(&mut server, &scene, Time::from_millis(75), 0);
    let last = frames_of(&sent, OBSERVER);
    assert_eq!(last.len(), 200);
    assert_eq!(
        last[0],
        expected_edit(&scene, entities[0], &[(1, PLACEABLE, moved(72.0))])
    );
    // Both clients came due together, in one pass.
    assert_eq!(frames_of(&sent, WRITER).len(), 200);
}

#[test]
fn clients_written_at_different_moments_come_due_at_the_same_boundary() {
    // The writer creates an entity at 61 ms: the observer is written at
    // once. The node moves another at 63 ms: the writer (idle) is written
    // at once too. Both are then busy: their next writes are not 5 ms
    // after their own last ones (66 and 68 ms) but at the shared boundary,
    // 65 ms, in one pass that builds each EditAttributes frame once.
    let (mut scene, entity) = scene();
    let others = add_entities(&mut scene, 1);
    let mut server = two_clients(&mut scene);
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(61));
    let first = write_due(&mut server, &scene, Time::from_millis(61), 0);
    assert_eq!(frames_of(&first, OBSERVER).len(), 1);
    assert!(frames_of(&first, WRITER).is_empty());
    node_moves_all(&mut server, &mut scene, &others, 3.0);
    let second = write_due(&mut server, &scene, Time::from_millis(63), 0);
    assert_eq!(frames_of(&second, WRITER).len(), 1, "the writer was idle");
    assert!(frames_of(&second, OBSERVER).is_empty(), "written at 61 ms");
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
    // Both busy now.
    node_moves_all(&mut server, &mut scene, &others, 4.0);
    assert_eq!(server.poll_timeout(), Some(Time::ZERO));
    assert!(write_due(&mut server, &scene, Time::from_millis(64), 0).is_empty());
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
    let together = write_due(&mut server, &scene, Time::from_millis(65), 0);
    let to_writer = frames_of(&together, WRITER);
    let to_observer = frames_of(&together, OBSERVER);
    assert_eq!(to_writer.len(), 1);
    assert_eq!(to_observer, to_writer);
    assert_eq!(
        to_observer[0].as_ptr(),
        to_writer[0].as_ptr(),
        "one frame, built once and shared"
    );
    assert_eq!(
        to_observer[0],
        expected_edit(&scene, others[0], &[(1, PLACEABLE, moved(4.0))])
    );
}

#[test]
fn a_held_client_keeps_only_the_latest_state_and_gets_it_once_drained() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    let held = WRITE_MAX_BACKLOG_BYTES + 1;
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(60));
    assert!(write_due(&mut server, &scene, Time::from_millis(60), held).is_empty());
    // Looked at again after the gap, then after waits as long as it has
    // been held: 5 ms, 5 ms, 10 ms, 20 ms, then a tick at most.
    let mut looks = vec![60];
    let mut x = 3.0;
    while looks.len() < 7 {
        let at = server
            .poll_timeout()
            .expect("a held client is looked at again");
        let ms = (at - Time::ZERO).as_millis() as u64;
        writer_moves(&mut server, &mut scene, entity, x, at);
        x += 1.0;
        assert!(write_due(&mut server, &scene, at, held).is_empty());
        looks.push(ms);
    }
    assert_eq!(looks, [60, 65, 70, 80, 100, 140, 190]);
    // The tick does not queue more for it either.
    let at_tick = tick(
        &mut server,
        &scene,
        Time::from_millis(200),
        &[WRITER, OBSERVER],
    );
    assert!(at_tick.is_empty(), "{at_tick:?}");
    // Drained: one frame, the latest value of all those moves.
    let at = server.poll_timeout().unwrap();
    let sent = write_due(&mut server, &scene, at, 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(
            &scene,
            entity,
            &[(1, PLACEABLE, moved(x - 1.0))]
        )]
    );
    assert_eq!(server.poll_timeout(), None);
}

#[test]
fn a_slow_clients_queue_is_bounded_by_the_scene_not_by_the_changes() {
    // 500 entities (a write of them is over the backlog threshold) move
    // every millisecond for a second; the observer's transport takes what
    // it was given only every 30 ms. Each write is at most one frame per
    // entity, and nothing is queued while its last write has not drained.
    let (mut scene, _) = scene();
    let entities = add_entities(&mut scene, 500);
    let mut server = two_clients(&mut scene);
    let mut unsent = 0usize;
    let mut drained_at = Time::ZERO;
    let mut writes = 0;
    for ms in 1..=1000u64 {
        let now = Time::from_millis(ms);
        if now >= drained_at + Duration::from_millis(30) {
            unsent = 0;
            drained_at = now;
        }
        node_moves_all(&mut server, &mut scene, &entities, ms as f32);
        let backlog = |c: ClientId| if c == OBSERVER { unsent } else { 0 };
        if server.poll_timeout().is_some_and(|at| at <= now) {
            server.handle_due_writes(&scene, now, &backlog);
        }
        if ms % 50 == 0 {
            server.handle_tick(&scene, now, &backlog);
        }
        let sent: Vec<(ClientId, Bytes)> = std::iter::from_fn(|| server.poll_transmit()).collect();
        let frames = frames_of(&sent, OBSERVER);
        if !frames.is_empty() {
            assert!(frames.len() <= entities.len(), "{} frames", frames.len());
            assert!(
                unsent <= WRITE_MAX_BACKLOG_BYTES,
                "written over a backlog of {unsent}"
            );
            unsent += frames.iter().map(Bytes::len).sum::<usize>();
            writes += 1;
        }
    }
    // It got a write per drain (every 30 ms), not per gap or per change.
    assert!((30..=36).contains(&writes), "{writes} writes");
    assert!(server.client(OBSERVER).is_some(), "slow, not closed");
}

#[test]
fn a_client_that_stops_reading_is_closed_one_that_reads_slowly_is_not() {
    let (mut scene, entity) = scene();
    let mut config = ServerConfig::default();
    config.limits.max_client_stall_secs = 1;
    let mut server = TundraServer::new(config);
    connect(&mut server, &mut scene, WRITER, 3);
    connect(&mut server, &mut scene, OBSERVER, 3);
    tick(&mut server, &scene, Time::ZERO, &[]);
    // The observer's backlog never shrinks; the writer's shrinks a little
    // at every tick.
    let mut writer_backlog = 1 << 20;
    let mut closed = None;
    for n in 1..=30u64 {
        let now = Time::from_millis(50 * n);
        writer_moves(&mut server, &mut scene, entity, n as f32, now);
        writer_backlog -= 1000;
        let backlog = |c: ClientId| {
            if c == OBSERVER {
                100_000
            } else {
                writer_backlog
            }
        };
        server.handle_tick(&scene, now, &backlog);
        while let Some((client, reason)) = server.poll_close() {
            closed.get_or_insert((client, now, reason));
        }
    }
    let (client, at, reason) = closed.expect("the client not reading is closed");
    assert_eq!(client, OBSERVER);
    assert_eq!(at, Time::from_millis(1050), "a second after it was held");
    assert!(reason.starts_with("not reading"), "{reason}");
}

#[test]
fn an_action_leaves_before_the_tick() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    server.deliver_action(crate::tundra::messages::EntityAction {
        entity_id: entity,
        name: "Ping".into(),
        execution_type: 1,
        parameters: Vec::new(),
    });
    let sent = write_due(&mut server, &scene, Time::from_millis(10), 0);
    assert_eq!(frames_of(&sent, OBSERVER).len(), 1);
    assert_eq!(frames_of(&sent, WRITER).len(), 1);
}

#[test]
fn a_new_client_gets_the_scene_right_after_its_login_reply() {
    let (mut scene, entity) = scene();
    let mut server = server();
    server.handle_connect(OBSERVER, Time::ZERO, crate::tundra::LoginDialect::Json);
    let login = Message::Login(crate::tundra::messages::Login {
        login_data: "{\"username\":\"t\"}".into(),
        protocol_version: Some(3),
    });
    let now = Time::from_millis(7);
    server.handle_frame(
        &mut scene,
        OBSERVER,
        now,
        &login.encode_frame(ProtocolVersion(1)).unwrap(),
    );
    assert_eq!(server.poll_timeout(), Some(Time::ZERO));
    server.handle_due_writes(&scene, now, &|_| 0);
    let registry = Registry::builtin();
    let context = crate::tundra::DecodeContext {
        protocol_version: ProtocolVersion(3),
        registry: &registry,
    };
    let messages: Vec<Message> = std::iter::from_fn(|| server.poll_transmit())
        .map(|(_, frame)| Message::decode_frame(&frame, &context).unwrap())
        .collect();
    let reply = messages
        .iter()
        .position(|m| matches!(m, Message::LoginReply(_)));
    let created = messages
        .iter()
        .position(|m| matches!(m, Message::CreateEntity(c) if c.entity_id == entity));
    assert!(
        matches!((reply, created), (Some(r), Some(c)) if r < c),
        "{messages:?}"
    );
}
