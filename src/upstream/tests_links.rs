//! Scripted link events: a world server that never answers the login, a
//! native (kNet) login, and a peer link replaced under the bridge (removals
//! held, then resumed).

use std::time::Duration;

use super::tests::{ack, bridge, created, edit_first_attribute, frame, logged_in, named, sent};
use super::*;
use crate::clock::Time;
use crate::federation::GlobalId;
use crate::scene::{ChangeSource, Origin, Scene};
use crate::test_log::{capture, LogLine};
use crate::tundra::asset_storage::AssetStorages;
use crate::tundra::messages::{LoginReply, RemoveEntity};
use crate::tundra::{
    AttributeValue, ClientTransport, ComponentId, EntityId, Message, Registry, UserId,
};

#[test]
fn a_native_bridge_logs_in_with_xml_and_takes_an_xml_reply() {
    let mut settings = bridge().settings.clone();
    settings.login.transport = crate::tundra::ClientTransport::KnetUdp;
    let (mut b, mut scene) = (Bridge::new(settings), Scene::new(Registry::builtin()));
    let t0 = Time::from_millis(1_000);
    b.handle_connected(t0);
    let login = b.poll_transmit().unwrap();
    let xml = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"gw\" />\n\
               \t<password value=\"\" />\n\t<protocol value=\"udp\" />\n</login>\n";
    let mut expected = vec![0x64, 0x00];
    expected.extend_from_slice(&u16::try_from(xml.len()).unwrap().to_le_bytes());
    expected.extend_from_slice(xml.as_bytes());
    expected.push(0x03);
    assert_eq!(login, expected);
    // The reply of a real server to a native client (docs/knet-wire.md §5.4).
    let reply = frame(Message::LoginReply(LoginReply {
        success: true,
        user_id: UserId(1),
        reply_data:
            "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n"
                .into(),
        protocol_version: Some(4),
    }));
    b.handle_frame(t0, &reply, &mut scene);
    assert_eq!(b.poll_link_command(), Some(LinkCommand::LoggedIn));
    assert!(matches!(b.state(), LinkState::Syncing { session, .. }
        if session.user == UserId(1) && session.protocol.0 == 3));
}

#[test]
fn a_login_without_reply_is_closed_after_the_timeout_once_and_redialled() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    let t0 = Time::from_millis(1_000);
    b.handle_connected(t0);
    assert!(b.poll_transmit().is_some(), "Login sent");
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    b.handle_timeout(t0 + Duration::from_millis(4_999), &mut scene);
    assert_eq!(b.poll_link_command(), None, "still within the timeout");
    b.handle_timeout(t0 + Duration::from_secs(5), &mut scene);
    let Some(LinkCommand::Close(reason)) = b.poll_link_command() else {
        panic!("the connection is closed");
    };
    assert!(reason.contains("upstream.login_timeout_ms"), "{reason}");
    assert!(matches!(b.state(), LinkState::Down { .. }));
    b.handle_timeout(t0 + Duration::from_secs(6), &mut scene);
    assert_eq!(b.poll_link_command(), None, "closed once");

    // A late LoginReply on the closed connection changes nothing.
    let reply = frame(Message::LoginReply(LoginReply {
        success: true,
        user_id: UserId(3),
        reply_data: "{}".into(),
        protocol_version: Some(3),
    }));
    b.handle_frame(t0 + Duration::from_secs(6), &reply, &mut scene);
    assert!(matches!(b.state(), LinkState::Down { .. }));

    // The driver redials: a fresh Login, and a reply that comes in time
    // resets the backoff.
    b.handle_disconnected(t0 + Duration::from_secs(6), "closed by the world server");
    b.handle_connected(t0 + Duration::from_secs(7));
    assert!(b.poll_transmit().is_some(), "Login sent again");
    b.handle_frame(t0 + Duration::from_secs(7), &reply, &mut scene);
    assert_eq!(b.poll_link_command(), Some(LinkCommand::LoggedIn));
    assert!(matches!(b.state(), LinkState::Syncing { .. }));
}

#[test]
fn the_grace_period_runs_on_through_unanswered_logins() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    b.handle_disconnected(Time::from_millis(1_000), "closed by the world server");
    // Reconnected at 2 s to a server that hangs; closed at 7 s.
    b.handle_connected(Time::from_millis(2_000));
    assert_eq!(b.poll_timeout(), Some(Time::from_millis(7_000)));
    b.handle_timeout(Time::from_millis(7_000), &mut scene);
    b.handle_disconnected(Time::from_millis(7_000), "closed by the world server");
    b.handle_connected(Time::from_millis(8_000));
    // Lost at 1 s with 10 s of grace: its entities leave at 11 s, not later.
    assert_eq!(b.poll_timeout(), Some(Time::from_millis(11_000)));
    assert_eq!(scene.len(), 1);
    b.handle_timeout(Time::from_millis(11_000), &mut scene);
    assert!(scene.is_empty());
    assert!(matches!(
        b.state(),
        LinkState::LoggingIn {
            down_since: None,
            ..
        }
    ));
}

const KEY: GlobalId = GlobalId {
    origin: uuid::Uuid::from_u128(0xF),
    serial: 7,
};

/// Applies the journal with `entity` known to the federation as [`KEY`].
fn journal_as(b: &mut Bridge, scene: &mut Scene, entity: Option<EntityId>) {
    let changes = scene.take_journal();
    b.handle_scene_changes_with(scene, &changes, &|e| (Some(e) == entity).then_some(KEY));
}

fn visitor(scene: &mut Scene, value: i32) -> EntityId {
    scene
        .create_entity(
            ChangeSource::Peer(1),
            None,
            Origin::Remote,
            false,
            None,
            named(0x4000_0001, "visitor", value),
        )
        .unwrap()
        .id
}

/// A federation entity created and acked as world entity 50.
fn exported(b: &mut Bridge, scene: &mut Scene) -> EntityId {
    let first = visitor(scene, 3);
    journal_as(b, scene, Some(first));
    let create = created(b);
    ack(b, scene, &create, 50, 1);
    first
}

/// The peer link carrying it goes away: the federation removes it.
fn link_lost(b: &mut Bridge, scene: &mut Scene, entity: EntityId) {
    b.set_holding_removals(true);
    scene.remove_entity(ChangeSource::Peer(1), entity).unwrap();
    journal_as(b, scene, None);
    b.set_holding_removals(false);
}

#[test]
fn an_entity_back_through_a_replacing_link_keeps_its_world_server_copy() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let first = exported(&mut b, &mut scene);
    link_lost(&mut b, &mut scene, first);
    assert!(sent(&mut b).is_empty(), "no RemoveEntity while held");
    assert_eq!(b.held_removals(), vec![first]);

    // The replacing link presents it again, under a new node id, with a
    // value that changed meanwhile.
    let again = visitor(&mut scene, 9);
    assert_ne!(again, first);
    journal_as(&mut b, &mut scene, Some(again));
    let out = sent(&mut b);
    let [Message::EditAttributes(edit)] = out.as_slice() else {
        panic!("only the difference is sent: {out:?}");
    };
    assert_eq!(edit.entity_id, EntityId(50), "the same world entity");
    assert_eq!(edit.blocks[0].component_id, ComponentId(2));
    assert_eq!(
        b.ids().resolve(EntityId(50)),
        ids::UpstreamEntity::Exported(again)
    );
    assert!(b.held_removals().is_empty());
    edit_first_attribute(&mut scene, again, 25, AttributeValue::Int(2));
    journal_as(&mut b, &mut scene, Some(again));
    assert!(
        matches!(sent(&mut b).as_slice(), [Message::EditAttributes(e)] if e.entity_id == EntityId(50)),
        "kept current under its new node id"
    );
}

#[test]
fn a_held_removal_that_does_not_come_back_is_sent_after_the_grace_period() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let first = exported(&mut b, &mut scene);
    link_lost(&mut b, &mut scene, first);
    // Held from the bridge's latest time (the CreateEntityReply at 0) for
    // the 10 s grace period.
    let due = Time::ZERO + Duration::from_secs(10);
    assert_eq!(b.poll_timeout(), Some(due));
    b.handle_timeout(due - Duration::from_millis(1), &mut scene);
    assert!(sent(&mut b).is_empty());
    b.handle_timeout(due, &mut scene);
    assert_eq!(
        sent(&mut b),
        vec![Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(50)
        })]
    );
    assert_eq!(b.poll_timeout(), None);
    // Another entity with the same identity now is a new creation.
    let again = visitor(&mut scene, 3);
    journal_as(&mut b, &mut scene, Some(again));
    assert!(matches!(
        sent(&mut b).as_slice(),
        [Message::CreateEntity(_)]
    ));
}

/// The INFO lines' messages among `lines`.
fn info_messages(lines: &[LogLine]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.level == tracing::Level::INFO)
        .map(|l| l.message.clone())
        .collect()
}

#[test]
fn one_info_line_per_outage_not_per_redial() {
    let ((), lines) = capture(|| {
        let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
        logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
        // The world server goes away; ten redials fail (refused, or
        // connected and dropped before a LoginReply).
        let mut now = Time::from_millis(1_000);
        b.handle_disconnected(now, "closed by the world server");
        for attempt in 0..10 {
            now += Duration::from_millis(500);
            if attempt % 2 == 0 {
                b.handle_connected(now);
            }
            b.handle_disconnected(now, "Connection refused (os error 111)");
        }
        // Back: a login ends the outage; the next loss is a new one.
        logged_in(
            &mut b,
            &mut scene,
            now + Duration::from_secs(1),
            &[(5, "box", 1)],
        );
        b.handle_disconnected(now + Duration::from_secs(5), "closed by the world server");
        b.handle_disconnected(
            now + Duration::from_secs(6),
            "Connection refused (os error 111)",
        );
    });
    let lost: Vec<String> = info_messages(&lines)
        .into_iter()
        .filter(|m| m.contains("connection lost"))
        .collect();
    assert_eq!(lost.len(), 2, "one per outage: {lost:?}");
}

/// The grace period ends once per outage: redials that fail after it
/// (connected and dropped, or refused) start no new one, so its INFO line
/// is written once, however long the world server stays away.
#[test]
fn the_grace_period_ends_once_per_outage() {
    let ((), lines) = capture(|| {
        let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
        logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
        let mut now = Time::from_millis(1_000);
        b.handle_disconnected(now, "closed by the world server");
        // A minute of redials, every timer run when it is due: connections
        // that open and drop before a LoginReply, and refused dials.
        for attempt in 0..120 {
            now += Duration::from_millis(500);
            while let Some(due) = b.poll_timeout().filter(|due| *due <= now) {
                b.handle_timeout(due, &mut scene);
            }
            if attempt % 3 == 0 {
                b.handle_connected(now);
                while b.poll_transmit().is_some() {}
            }
            b.handle_disconnected(now, "Connection refused (os error 111)");
        }
        assert_eq!(scene.entities().count(), 0, "the world's entities left");
    });
    let ended: Vec<String> = info_messages(&lines)
        .into_iter()
        .filter(|m| m.contains("past the grace period"))
        .collect();
    assert_eq!(ended.len(), 1, "one per outage: {ended:?}");
}

/// Logs `b` in at `now` with a LoginReply carrying `data`; returns the
/// asset storages it told the node of.
fn log_in_with(b: &mut Bridge, scene: &mut Scene, now: Time, data: &str) -> Vec<AssetStorages> {
    b.handle_connected(now);
    while b.poll_transmit().is_some() {}
    let reply = frame(Message::LoginReply(LoginReply {
        success: true,
        user_id: UserId(2),
        reply_data: data.into(),
        protocol_version: Some(3),
    }));
    b.handle_frame(now, &reply, scene);
    std::iter::from_fn(|| b.poll_event())
        .filter_map(|e| match e {
            BridgeEvent::WorldAssetStorages(storages) => Some(storages),
            _ => None,
        })
        .collect()
}

#[test]
fn the_world_servers_asset_storages_are_passed_to_the_node_from_either_form() {
    let login = |transport: ClientTransport, data: &str| {
        let mut settings = bridge().settings.clone();
        settings.login.transport = transport;
        let (mut b, mut scene) = (Bridge::new(settings), Scene::new(Registry::builtin()));
        log_in_with(&mut b, &mut scene, Time::ZERO, data)
    };
    let json = r#"{"storage":{"default":true,"name":"Scene","src":"http://world/","type":"HttpAssetStorage"}}"#;
    let xml = "<?xml version=\"1.0\"?>\n<asset>\n\t<storage data=\"type=HttpAssetStorage;name=Scene;src=http://world/\" />\n\t<defaultStorage name=\"Scene\" />\n</asset>\n";
    let from_json = login(ClientTransport::WebSocket, json);
    let from_xml = login(ClientTransport::KnetUdp, xml);
    assert_eq!(from_json, from_xml, "one model from either form");
    assert_eq!(from_json.len(), 1, "once per login that changes them");
    assert_eq!(from_json[0].to_json(), json);
    assert_eq!(from_xml[0].to_xml(), xml);
    // Each transport reads its own form only; a reply without storages, or
    // one that does not parse, is no storage: nothing to tell a node that
    // has none.
    for (transport, data) in [
        (ClientTransport::WebSocket, "{}"),
        (ClientTransport::WebSocket, "<asset />"),
        (ClientTransport::WebSocket, r#"{"storage":"x"}"#),
        (ClientTransport::WebSocket, xml),
        (ClientTransport::KnetTcp, json),
        (ClientTransport::KnetTcp, "<asset />"),
        (ClientTransport::KnetTcp, "<!DOCTYPE a []><asset/>"),
    ] {
        assert_eq!(login(transport, data), vec![], "{transport:?} {data}");
    }
}

#[test]
fn each_login_that_changes_the_world_storages_tells_the_node_once() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    let mut login = |t: u64, data: &str| {
        let now = Time::from_millis(t);
        let told = log_in_with(&mut b, &mut scene, now, data);
        b.handle_disconnected(now, "test");
        while b.poll_transmit().is_some() {}
        told
    };
    let scene_storage = r#"{"storage":{"default":true,"name":"Scene","src":"http://world/","type":"HttpAssetStorage"}}"#;
    let moved = r#"{"storage":{"default":true,"name":"Scene","src":"http://new-world/","type":"HttpAssetStorage"}}"#;
    let told = login(1_000, scene_storage);
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].default_storage().unwrap().src(), "http://world/");
    assert!(login(2_000, scene_storage).is_empty(), "unchanged: nothing");
    let told = login(3_000, moved);
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0].default_storage().unwrap().src(),
        "http://new-world/"
    );
    // The world stops naming a storage: the node goes back to none.
    assert_eq!(login(4_000, "{}"), vec![AssetStorages::none()]);
}
