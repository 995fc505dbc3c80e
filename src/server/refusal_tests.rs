//! Refused requests through the pure core, with a tracing subscriber in
//! this thread: what reaches the log stays bounded however many requests
//! are refused, refusals in bulk close only their client, and the entities
//! clients create are bounded per node and per address across reconnects.

use std::net::IpAddr;

use super::core::{ServerConfig, TundraServer};
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Scene};
use crate::test_log::{capture, LogLine};
use crate::tundra::messages::{CreateEntity, EntityAction, Login, RemoveEntity};
use crate::tundra::LoginDialect;
use crate::tundra::{EntityId, Message, ProtocolVersion, Registry};

fn log_in(server: &mut TundraServer, scene: &mut Scene, client: ClientId, now: Time) {
    log_in_from(server, scene, client, now, IpAddr::from([127, 0, 0, 1]));
}

fn log_in_from(
    server: &mut TundraServer,
    scene: &mut Scene,
    client: ClientId,
    now: Time,
    address: IpAddr,
) {
    server.handle_connect_from(client, now, LoginDialect::Json, address);
    let login = Message::Login(Login {
        login_data: "{\"username\":\"t\"}".into(),
        protocol_version: Some(3),
    });
    let frame = login.encode_frame(ProtocolVersion(1)).unwrap();
    server.handle_frame(scene, client, now, &frame);
    while server.poll_transmit().is_some() {}
    while server.poll_event().is_some() {}
}

fn frame(message: &Message) -> Vec<u8> {
    message.encode_frame(ProtocolVersion(3)).unwrap()
}

#[test]
fn ten_clients_refused_in_bulk_write_a_bounded_number_of_lines_that_carry_the_counts() {
    let ((clients, refused), lines) = capture(|| {
        let mut scene = Scene::new(Registry::builtin());
        let mut server = TundraServer::new(ServerConfig::default());
        let clients: Vec<ClientId> = (1..=10).map(ClientId).collect();
        for client in &clients {
            log_in(&mut server, &mut scene, *client, Time::ZERO);
        }
        // Two kinds of refused request, each of an entity that does not
        // exist: 100 of each per client every 50 ms tick for 30 s, just
        // under the bulk limit (100,000 a minute).
        let remove = frame(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(77),
        }));
        let action = frame(&Message::EntityAction(EntityAction {
            entity_id: EntityId(77),
            name: "Spam".into(),
            execution_type: 2,
            parameters: vec![],
        }));
        // RemoveEntity of an unknown id is ignored as Tundra ignores it;
        // an unknown entity's action is refused.
        let mut refused = 0u64;
        for tick in 0..600u64 {
            let now = Time::from_millis(tick * 50);
            for client in &clients {
                for _ in 0..100 {
                    server.handle_frame(&mut scene, *client, now, &action);
                    server.handle_frame(&mut scene, *client, now, &remove);
                    refused += 1;
                }
            }
            server.handle_tick(&scene, now, &|_| 0);
            while server.poll_transmit().is_some() {}
        }
        assert!(
            server.poll_close().is_none(),
            "under the bulk limit nobody is closed"
        );
        for client in &clients {
            server.handle_disconnect(*client, "done");
        }
        assert_eq!(server.stats().refused_messages, refused);
        (clients, refused)
    });
    let refusal_lines: Vec<&LogLine> = lines
        .iter()
        .filter(|l| l.level == tracing::Level::WARN && l.message.contains("refused"))
        .collect();
    // One kind per client: one line in full, then at most one per 10 s
    // interval (three in 30 s) and one when the client leaves.
    let bound = clients.len() * (1 + 3 + 1);
    assert!(
        refusal_lines.len() <= bound,
        "{} lines for {refused} refusals (bound {bound})",
        refusal_lines.len()
    );
    let full = refusal_lines
        .iter()
        .filter(|l| l.number("count").is_none())
        .count();
    let summarised: u64 = refusal_lines.iter().filter_map(|l| l.number("count")).sum();
    assert_eq!(full, clients.len());
    assert_eq!(
        summarised + full as u64,
        refused,
        "every refusal is counted in a line"
    );
}

#[test]
fn refusals_in_bulk_close_only_their_client() {
    let mut scene = Scene::new(Registry::builtin());
    let mut config = ServerConfig::default();
    config.limits.max_refused_requests_per_minute = 50;
    let mut server = TundraServer::new(config);
    let (hostile, calm) = (ClientId(1), ClientId(2));
    log_in(&mut server, &mut scene, hostile, Time::ZERO);
    log_in(&mut server, &mut scene, calm, Time::ZERO);
    let action = frame(&Message::EntityAction(EntityAction {
        entity_id: EntityId(77),
        name: "Spam".into(),
        execution_type: 2,
        parameters: vec![],
    }));
    for _ in 0..50 {
        server.handle_frame(&mut scene, hostile, Time::ZERO, &action);
        server.handle_frame(&mut scene, calm, Time::ZERO, &action);
    }
    assert!(server.poll_close().is_none(), "50 in a minute is not bulk");
    server.handle_frame(&mut scene, hostile, Time::ZERO, &action);
    let (closed, reason) = server.poll_close().expect("the 51st closes");
    assert_eq!(closed, hostile);
    assert!(
        reason.contains("limits.max_refused_requests_per_minute"),
        "{reason}"
    );
    assert!(server.poll_close().is_none());
    // A minute later the calm client's count starts again.
    server.handle_frame(&mut scene, calm, Time::from_millis(60_000), &action);
    assert!(server.poll_close().is_none());
}

fn create(unacked: u32) -> Vec<u8> {
    frame(&Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0000 | unacked),
        temporary: false,
        parent: None,
        components: vec![],
    }))
}

#[test]
fn client_entities_are_bounded_per_address_across_reconnects_and_per_node_across_addresses() {
    let mut scene = Scene::new(Registry::builtin());
    let mut config = ServerConfig::default();
    config.limits.max_entities_per_address = 100;
    config.limits.max_client_entities = 250;
    let mut server = TundraServer::new(config);
    let mut next = 0u64;
    let mut connect = |server: &mut TundraServer, scene: &mut Scene, last: u8| {
        next += 1;
        let client = ClientId(next);
        log_in_from(
            server,
            scene,
            client,
            Time::ZERO,
            IpAddr::from([10, 0, 0, last]),
        );
        client
    };
    // Three reconnect rounds of 1,000 creations from one address.
    for _ in 0..3 {
        let client = connect(&mut server, &mut scene, 1);
        for unacked in 1..=1_000 {
            server.handle_frame(&mut scene, client, Time::ZERO, &create(unacked));
        }
        server.handle_disconnect(client, "gone");
    }
    assert_eq!(
        scene.len(),
        100,
        "the per-address bound holds across reconnects"
    );
    // Other addresses fill the node up to its own bound, no further.
    for last in 2..=5 {
        let client = connect(&mut server, &mut scene, last);
        for unacked in 1..=1_000 {
            server.handle_frame(&mut scene, client, Time::ZERO, &create(unacked));
        }
    }
    assert_eq!(
        scene.len(),
        250,
        "the node-wide bound holds across addresses"
    );
    // Removing entities gives their address room again.
    let first = scene.entities().next().map(|e| e.id).unwrap();
    scene.remove_entity(ChangeSource::Node, first).unwrap();
    server.handle_scene_changes(&scene.take_journal());
    assert_eq!(server.client_entities(None).0, 249);
    let client = connect(&mut server, &mut scene, 6);
    server.handle_frame(&mut scene, client, Time::ZERO, &create(1));
    assert_eq!(scene.len(), 250);
}

/// A DynamicComponent with two attributes, as a CreateEntity carries it.
fn settings(id: u32) -> crate::tundra::ComponentData {
    use crate::tundra::{AttributeBlock, AttributeValue, ComponentBody, DynamicAttribute};
    crate::tundra::ComponentData {
        id: crate::tundra::ComponentId(id),
        type_id: 25,
        name: "settings".into(),
        body: ComponentBody::Attributes(AttributeBlock {
            values: Vec::new(),
            dynamic: vec![
                DynamicAttribute {
                    index: 0,
                    name: "speed".into(),
                    value: AttributeValue::Real(2.5),
                },
                DynamicAttribute {
                    index: 1,
                    name: "label".into(),
                    value: AttributeValue::String("fast".into()),
                },
            ],
            trailing: Vec::new(),
        }),
    }
}

/// What a real native client sends back for a DynamicComponent it was
/// given (docs/tundra-wire.md §4.8): its attributes, as CreateAttributes,
/// `label` under the name `name`.
fn echo_of(
    entity: EntityId,
    component: crate::tundra::ComponentId,
    name: &str,
    label: &str,
) -> Vec<u8> {
    use crate::tundra::messages::{CreateAttributes, NewAttribute};
    use crate::tundra::AttributeValue;
    frame(&Message::CreateAttributes(CreateAttributes {
        scene_id: 0,
        entity_id: entity,
        attributes: vec![
            NewAttribute {
                component_id: component,
                index: 0,
                name: "speed".into(),
                value: AttributeValue::Real(2.5),
            },
            NewAttribute {
                component_id: component,
                index: 1,
                name: name.into(),
                value: AttributeValue::String(label.into()),
            },
        ],
    }))
}

#[test]
fn a_native_clients_echo_of_what_it_was_sent_is_not_refused() {
    use crate::scene::Origin;
    let warnings = |lines: &[LogLine]| {
        lines
            .iter()
            .filter(|l| l.level == tracing::Level::WARN)
            .count()
    };
    let mut scene = Scene::new(Registry::builtin());
    let mut server = TundraServer::new(ServerConfig::default());
    let client = ClientId(1);
    let mut ids = Vec::new();
    let ((), lines) = capture(|| {
        log_in(&mut server, &mut scene, client, Time::ZERO);
        // A peer's entity (read-only here) and one of the node's own.
        for origin in [Origin::Remote, Origin::Local] {
            let created = scene
                .create_entity(
                    ChangeSource::Node,
                    None,
                    origin,
                    false,
                    None,
                    vec![settings(1)],
                )
                .unwrap();
            ids.push((created.id, created.components[0].1));
        }
        let before: Vec<_> = ids.iter().map(|(e, _)| scene.entity(*e).cloned()).collect();
        scene.take_journal();
        // The values the client held: the node's, or older ones.
        for (entity, component) in &ids {
            for label in ["fast", "slow"] {
                let echo = echo_of(*entity, *component, "label", label);
                server.handle_frame(&mut scene, client, Time::ZERO, &echo);
            }
        }
        assert_eq!(server.stats().refused_messages, 0);
        assert!(scene.take_journal().is_empty(), "an echo changes nothing");
        let after: Vec<_> = ids.iter().map(|(e, _)| scene.entity(*e).cloned()).collect();
        assert_eq!(after, before);
    });
    assert_eq!(warnings(&lines), 0, "{lines:?}");
    // Other attributes under those indices are still refused.
    let (remote, component) = ids[0];
    let other = echo_of(remote, component, "colour", "red");
    let ((), lines) = capture(|| server.handle_frame(&mut scene, client, Time::ZERO, &other));
    assert_eq!(server.stats().refused_messages, 1);
    assert_eq!(warnings(&lines), 1, "{lines:?}");
}
