//! The asset storages a login is told of: each client in its own dialect
//! (WebSocket JSON, native XML), from one set of storages, whether given at
//! start or later (the world server's, in upstream mode). A server without
//! storages keeps the replies `login_tests` checks.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::core::{ServerConfig, TundraServer};
use super::tests::scene;
use crate::clock::Time;
use crate::scene::{ClientId, Scene};
use crate::tundra::asset_storage::{AssetStorage, AssetStorages};
use crate::tundra::login_xml::login_xml;
use crate::tundra::messages::Login;
use crate::tundra::{DecodeContext, LoginDialect, Message, ProtocolVersion};

fn world_storages() -> AssetStorages {
    let scene =
        AssetStorage::parse("type=HttpAssetStorage;name=Scene;src=http://world.example/assets/")
            .unwrap();
    let textures =
        AssetStorage::parse("type=HttpAssetStorage;name=Textures;src=http://cdn.example/t/")
            .unwrap();
    AssetStorages::new(vec![scene, textures], Some("Scene".into())).unwrap()
}

/// Logs `client` in as `username` in `dialect` from this host; the data of
/// its LoginReply.
fn reply_data(
    server: &mut TundraServer,
    scene: &mut Scene,
    client: ClientId,
    dialect: LoginDialect,
    username: &str,
) -> String {
    let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
    reply_data_from(server, scene, (client, here), dialect, username)
}

/// As [`reply_data`], for a client connected from `address`.
fn reply_data_from(
    server: &mut TundraServer,
    scene: &mut Scene,
    (client, address): (ClientId, IpAddr),
    dialect: LoginDialect,
    username: &str,
) -> String {
    let login_data = match dialect {
        LoginDialect::Json => format!(r#"{{"username":"{username}"}}"#),
        LoginDialect::Xml => login_xml(&[("username", username)]),
    };
    let frame = Message::Login(Login {
        login_data,
        protocol_version: Some(4),
    })
    .encode_frame(ProtocolVersion(1))
    .unwrap();
    assert!(server.handle_connect_from(client, Time::ZERO, dialect, address));
    server.handle_frame(scene, client, Time::ZERO, &frame);
    let context = DecodeContext {
        protocol_version: ProtocolVersion(4),
        registry: scene.registry(),
    };
    let replies: Vec<String> = std::iter::from_fn(|| server.poll_transmit())
        .filter(|(c, _)| *c == client)
        .filter_map(|(_, frame)| match Message::decode_frame(&frame, &context) {
            Ok(Message::LoginReply(reply)) if reply.success => Some(reply.reply_data),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 1, "one successful LoginReply: {replies:?}");
    replies.into_iter().next().unwrap_or_default()
}

#[test]
fn websocket_clients_get_the_default_storage_as_json() {
    let (mut scene, _) = scene();
    let mut server = TundraServer::new(ServerConfig {
        asset_storages: world_storages(),
        ..ServerConfig::default()
    });
    let data = reply_data(
        &mut server,
        &mut scene,
        ClientId(1),
        LoginDialect::Json,
        "web",
    );
    assert_eq!(
        data,
        r#"{"storage":{"default":true,"name":"Scene","src":"http://world.example/assets/","type":"HttpAssetStorage"}}"#
    );
}

#[test]
fn native_clients_get_every_storage_as_xml() {
    let (mut scene, _) = scene();
    let mut server = TundraServer::new(ServerConfig {
        asset_storages: world_storages(),
        ..ServerConfig::default()
    });
    let data = reply_data(
        &mut server,
        &mut scene,
        ClientId(1),
        LoginDialect::Xml,
        "native",
    );
    assert_eq!(
        data,
        "<?xml version=\"1.0\"?>\n<asset>\n\
         \t<storage data=\"type=HttpAssetStorage;name=Scene;src=http://world.example/assets/\" />\n\
         \t<storage data=\"type=HttpAssetStorage;name=Textures;src=http://cdn.example/t/\" />\n\
         \t<defaultStorage name=\"Scene\" />\n</asset>\n"
    );
    assert_eq!(AssetStorages::parse_xml(&data).unwrap(), world_storages());
}

#[test]
fn storages_set_later_reach_the_logins_after_them() {
    let (mut scene, _) = scene();
    let mut server = TundraServer::new(ServerConfig::default());
    let before = [
        reply_data(
            &mut server,
            &mut scene,
            ClientId(1),
            LoginDialect::Json,
            "a",
        ),
        reply_data(&mut server, &mut scene, ClientId(2), LoginDialect::Xml, "b"),
    ];
    assert_eq!(
        before,
        [
            r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#.to_owned(),
            "<?xml version=\"1.0\"?>\n<asset />\n".to_owned()
        ]
    );
    server.set_asset_storages(world_storages());
    assert_eq!(server.asset_storages(), &world_storages());
    let json = reply_data(
        &mut server,
        &mut scene,
        ClientId(3),
        LoginDialect::Json,
        "c",
    );
    let xml = reply_data(&mut server, &mut scene, ClientId(4), LoginDialect::Xml, "d");
    assert_eq!(json, world_storages().to_json());
    assert_eq!(xml, world_storages().to_xml());
    // Back to none (the world stopped naming one): today's replies again.
    server.set_asset_storages(AssetStorages::none());
    let json = reply_data(
        &mut server,
        &mut scene,
        ClientId(5),
        LoginDialect::Json,
        "e",
    );
    let xml = reply_data(&mut server, &mut scene, ClientId(6), LoginDialect::Xml, "f");
    assert_eq!([json, xml], before);
}

#[test]
fn local_storages_are_told_only_to_clients_on_this_host() {
    let (mut scene, _) = scene();
    let local = AssetStorage::parse("type=LocalAssetStorage;name=Scene;src=/srv/world/").unwrap();
    let web = AssetStorage::parse("type=HttpAssetStorage;name=Web;src=http://w/").unwrap();
    let storages = AssetStorages::new(vec![local, web], Some("Scene".into())).unwrap();
    let mut server = TundraServer::new(ServerConfig {
        asset_storages: storages.clone(),
        ..ServerConfig::default()
    });
    let remote = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    let mapped_loopback = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
    let native = |server: &mut TundraServer, scene: &mut Scene, id, address| {
        reply_data_from(
            server,
            scene,
            (ClientId(id), address),
            LoginDialect::Xml,
            "n",
        )
    };
    assert_eq!(
        native(&mut server, &mut scene, 1, remote),
        "<?xml version=\"1.0\"?>\n<asset>\n\t<storage data=\"type=HttpAssetStorage;name=Web;src=http://w/\" />\n</asset>\n"
    );
    for (id, here) in [
        (2, IpAddr::V6(Ipv6Addr::LOCALHOST)),
        (3, mapped_loopback),
        (4, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9))),
    ] {
        assert_eq!(native(&mut server, &mut scene, id, here), storages.to_xml());
    }
    let web_client = reply_data_from(
        &mut server,
        &mut scene,
        (ClientId(5), remote),
        LoginDialect::Json,
        "w",
    );
    assert_eq!(
        web_client, r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#,
        "the local default is not offered to another host"
    );
}
