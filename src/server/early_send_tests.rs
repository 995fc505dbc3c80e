//! Sending before the tick through the server core: an idle client gets an
//! edit as soon as it is applied, one written a moment ago gets it at the
//! end of its gap, and a busy one (a backlog, many entities waiting) gets
//! it at the tick, coalesced to the latest value.

use bytes::Bytes;

use super::core::TundraServer;
use super::early_send::{EARLY_MAX_BACKLOG_BYTES, EARLY_MAX_PENDING_ENTITIES};
use super::tests::{
    block, connect, edit_frame, expected_edit, frames_of, moved, scene, server, settle, tick,
    PLACEABLE,
};
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::{ComponentData, ComponentId, EntityId};

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

/// Runs the early-send pass with every client reporting `backlog` unsent
/// bytes; returns what it wrote.
fn send_early(
    server: &mut TundraServer,
    scene: &Scene,
    now: Time,
    backlog: usize,
) -> Vec<(ClientId, Bytes)> {
    server.handle_send_early(scene, now, &|_| backlog);
    std::iter::from_fn(|| server.poll_transmit()).collect()
}

#[test]
fn an_idle_client_gets_an_edit_without_waiting_for_the_tick() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    let now = Time::from_millis(60);
    writer_moves(&mut server, &mut scene, entity, 2.0, now);
    let sent = send_early(&mut server, &scene, now, 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(2.0))])]
    );
    assert!(frames_of(&sent, WRITER).is_empty(), "no echo");
    assert_eq!(server.poll_timeout(), None, "nothing left waiting");
    // The tick has nothing more to say.
    assert!(tick(&mut server, &scene, Time::from_millis(100), &[]).is_empty());
}

#[test]
fn a_client_written_a_moment_ago_gets_the_next_edit_at_the_end_of_its_gap() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(60));
    send_early(&mut server, &scene, Time::from_millis(60), 0);
    // 1 ms later: within the 5 ms gap of a 20 Hz tick.
    writer_moves(&mut server, &mut scene, entity, 3.0, Time::from_millis(61));
    assert!(send_early(&mut server, &scene, Time::from_millis(61), 0).is_empty());
    assert_eq!(server.poll_timeout(), Some(Time::from_millis(65)));
    writer_moves(&mut server, &mut scene, entity, 4.0, Time::from_millis(63));
    assert!(send_early(&mut server, &scene, Time::from_millis(64), 0).is_empty());
    // At the deadline, both moves go out as one frame of the latest value.
    let sent = send_early(&mut server, &scene, Time::from_millis(65), 0);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(4.0))])]
    );
    assert_eq!(server.poll_timeout(), None);
}

#[test]
fn a_client_with_a_backlog_gets_its_edits_at_the_tick_coalesced() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    let busy = EARLY_MAX_BACKLOG_BYTES + 1;
    writer_moves(&mut server, &mut scene, entity, 2.0, Time::from_millis(60));
    assert!(send_early(&mut server, &scene, Time::from_millis(60), busy).is_empty());
    writer_moves(&mut server, &mut scene, entity, 3.0, Time::from_millis(70));
    assert!(send_early(&mut server, &scene, Time::from_millis(70), busy).is_empty());
    assert_eq!(server.poll_timeout(), None, "no deadline: the tick");
    let sent = tick(&mut server, &scene, Time::from_millis(100), &[]);
    assert_eq!(
        frames_of(&sent, OBSERVER),
        [expected_edit(&scene, entity, &[(1, PLACEABLE, moved(3.0))])]
    );
}

#[test]
fn a_client_with_many_entities_waiting_gets_them_at_the_tick() {
    let (mut scene, _) = scene();
    let placeable = scene.registry().get(PLACEABLE).unwrap().clone();
    let many = EARLY_MAX_PENDING_ENTITIES + 1;
    let entities: Vec<EntityId> = (0..many)
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
    let mut server = two_clients(&mut scene);
    let now = Time::from_millis(60);
    for (i, entity) in entities.iter().enumerate() {
        scene
            .edit_attribute(
                ChangeSource::Node,
                *entity,
                ComponentId(1),
                0,
                super::tests::transform(i as f32 + 1.0),
            )
            .unwrap();
    }
    settle(&mut server, &mut scene);
    assert!(send_early(&mut server, &scene, now, 0).is_empty());
    let sent = tick(&mut server, &scene, Time::from_millis(100), &[]);
    assert_eq!(frames_of(&sent, OBSERVER).len(), many);
    assert_eq!(frames_of(&sent, WRITER).len(), many);
}

#[test]
fn an_action_for_an_idle_client_leaves_before_the_tick() {
    let (mut scene, entity) = scene();
    let mut server = two_clients(&mut scene);
    server.deliver_action(crate::tundra::messages::EntityAction {
        entity_id: entity,
        name: "Ping".into(),
        execution_type: 1,
        parameters: Vec::new(),
    });
    let sent = send_early(&mut server, &scene, Time::from_millis(10), 0);
    assert_eq!(frames_of(&sent, OBSERVER).len(), 1);
    assert_eq!(frames_of(&sent, WRITER).len(), 1);
}
