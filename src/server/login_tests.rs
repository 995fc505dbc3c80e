//! Login tests for both dialects: a native (kNet) client logs in with the
//! captured XML of docs/knet-wire.md §5.3 and is then treated exactly as a
//! WebSocket client; `required_login` applies to both alike; malformed XML
//! is refused with its reason.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::core::{ServerConfig, TundraServer};
use super::tests::scene;
use crate::clock::Time;
use crate::scene::{ClientId, Scene};
use crate::tundra::login_xml::{login_reply_xml, login_xml, CAPTURED_LOGIN_HEX};
use crate::tundra::messages::{ClientJoined, Login, LoginReply};
use crate::tundra::LoginDialect;
use crate::tundra::{DecodeContext, Message, ProtocolVersion, UserId};

fn server(required: &[(&str, &str)]) -> TundraServer {
    TundraServer::new(ServerConfig {
        required_login: required
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..ServerConfig::default()
    })
}

/// The captured native Login as a Tundra frame: id 100 (`64 00`), the
/// u16 XML length (`13 01` = 275), the XML, protocol version VLE `04`.
fn captured_login_frame() -> Vec<u8> {
    hex::decode(format!("64001301{CAPTURED_LOGIN_HEX}04")).unwrap()
}

fn login_frame(data: &str) -> Vec<u8> {
    Message::Login(Login {
        login_data: data.to_owned(),
        protocol_version: Some(4),
    })
    .encode_frame(ProtocolVersion(1))
    .unwrap()
}

/// Connects `client` in `dialect`, sends `frame`; returns what it was sent.
fn log_in(
    server: &mut TundraServer,
    scene: &mut Scene,
    client: ClientId,
    dialect: LoginDialect,
    frame: &[u8],
) -> Vec<Message> {
    assert!(server.handle_connect(client, Time::ZERO, dialect));
    server.handle_frame(scene, client, Time::ZERO, frame);
    let context = DecodeContext {
        protocol_version: ProtocolVersion(4),
        registry: scene.registry(),
    };
    std::iter::from_fn(|| server.poll_transmit())
        .filter(|(c, _)| *c == client)
        .map(|(_, frame)| Message::decode_frame(&frame, &context).unwrap())
        .collect()
}

fn tick_frames(server: &mut TundraServer, scene: &Scene, client: ClientId) -> Vec<Bytes> {
    server.handle_tick(scene, Time::from_millis(50), &|_| 0);
    std::iter::from_fn(|| server.poll_transmit())
        .filter(|(c, _)| *c == client)
        .map(|(_, frame)| frame)
        .collect()
}

fn failure(reason: &str) -> Message {
    Message::LoginReply(LoginReply {
        success: false,
        user_id: UserId(0),
        reply_data: reason.to_owned(),
        protocol_version: None,
    })
}

#[test]
fn captured_native_login_joins_and_gets_the_scene_a_websocket_client_gets() {
    let (mut scene, _) = scene();
    let mut native_server = server(&[]);
    let native = ClientId(1);
    let sent = log_in(
        &mut native_server,
        &mut scene,
        native,
        LoginDialect::Xml,
        &captured_login_frame(),
    );
    assert_eq!(
        sent,
        [
            Message::ClientJoined(ClientJoined {
                user_id: UserId(1),
                username: Some("tester".into()),
            }),
            Message::LoginReply(LoginReply {
                success: true,
                user_id: UserId(1),
                reply_data: login_reply_xml(),
                protocol_version: Some(4),
            }),
        ]
    );
    let properties = &native_server.client(native).unwrap().properties;
    assert_eq!(properties["client-organization"], "Org");
    assert_eq!(properties["protocol"], "udp");

    // The same user on WebSocket, on a server with the same scene.
    let mut web_server = server(&[]);
    let web = ClientId(1);
    let sent = log_in(
        &mut web_server,
        &mut scene,
        web,
        LoginDialect::Json,
        &login_frame(r#"{"username":"tester"}"#),
    );
    // The real server's shape: its default storage, here with empty values
    // (docs/tundra-wire.md §4.2).
    let Message::LoginReply(reply) = &sent[1] else {
        panic!("LoginReply second: {sent:?}")
    };
    assert!(reply.success);
    assert_eq!(
        reply.reply_data,
        r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#
    );
    let json: serde_json::Value = serde_json::from_str(&reply.reply_data).unwrap();
    assert_eq!(json["storage"]["default"], true);

    let to_native = tick_frames(&mut native_server, &scene, native);
    let to_web = tick_frames(&mut web_server, &scene, web);
    assert!(!to_native.is_empty());
    assert_eq!(&to_native[0][..2], &110u16.to_le_bytes(), "CreateEntity");
    assert_eq!(to_native, to_web);
}

#[test]
fn native_and_websocket_clients_share_one_server() {
    let (mut scene, _) = scene();
    let mut server = server(&[]);
    let (web, native) = (ClientId(1), ClientId(2));
    log_in(
        &mut server,
        &mut scene,
        web,
        LoginDialect::Json,
        &login_frame(r#"{"username":"web"}"#),
    );
    let sent = log_in(
        &mut server,
        &mut scene,
        native,
        LoginDialect::Xml,
        &login_frame(&login_xml(&[("username", "native")])),
    );
    // The native user is told of the WebSocket one, as any client is.
    assert!(sent.contains(&Message::ClientJoined(ClientJoined {
        user_id: UserId(1),
        username: Some("web".into()),
    })));
    assert!(matches!(sent.last(), Some(Message::LoginReply(r)) if r.user_id == UserId(2)));
    let usernames: Vec<_> = server
        .authenticated_clients()
        .map(|c| c.username.clone())
        .collect();
    assert_eq!(usernames, ["web", "native"]);
}

#[test]
fn required_login_applies_to_native_clients_as_to_websocket_ones() {
    let (mut scene, _) = scene();
    // The captured login has an empty password: refused, with the same
    // reason a WebSocket client gets.
    let mut s = server(&[("password", "secret")]);
    let native = log_in(
        &mut s,
        &mut scene,
        ClientId(1),
        LoginDialect::Xml,
        &captured_login_frame(),
    );
    let web = log_in(
        &mut s,
        &mut scene,
        ClientId(2),
        LoginDialect::Json,
        &login_frame(r#"{"username":"t","password":""}"#),
    );
    let not_accepted = failure(
        "login property 'password' is not accepted: check its value with the server's operator",
    );
    assert_eq!(native, web);
    assert_eq!(web, [not_accepted]);

    // A property the captured login lacks: required.
    let mut s = server(&[("token", "t1")]);
    let sent = log_in(
        &mut s,
        &mut scene,
        ClientId(1),
        LoginDialect::Xml,
        &captured_login_frame(),
    );
    assert_eq!(
        sent,
        [failure(
            "login property 'token' is required: add it to the login data (ask the server's operator for the value)"
        )]
    );

    // With it, the native client is in.
    let mut s = server(&[("token", "t1")]);
    let xml = login_xml(&[("username", "tester"), ("token", "t1")]);
    let sent = log_in(
        &mut s,
        &mut scene,
        ClientId(1),
        LoginDialect::Xml,
        &login_frame(&xml),
    );
    assert!(matches!(sent.last(), Some(Message::LoginReply(r)) if r.success));
    assert!(s.client(ClientId(1)).unwrap().is_authenticated());
}

#[test]
fn malformed_xml_gets_a_failed_reply_then_a_close() {
    let (mut scene, _) = scene();
    let mut s = server(&[]);
    let client = ClientId(1);
    let sent = log_in(
        &mut s,
        &mut scene,
        client,
        LoginDialect::Xml,
        &login_frame(r#"{"username":"json to a native server"}"#),
    );
    let [Message::LoginReply(reply)] = &sent[..] else {
        panic!("one LoginReply expected: {sent:?}");
    };
    assert!(!reply.success);
    assert_eq!(reply.protocol_version, None);
    assert!(
        reply
            .reply_data
            .starts_with("login data is not valid XML: "),
        "{}",
        reply.reply_data
    );
    assert!(!s.client(client).unwrap().is_authenticated());
    // Closed as a refused login is: after the reply has had time to arrive.
    s.handle_tick(&scene, Time::from_millis(999), &|_| 0);
    assert!(s.poll_close().is_none());
    s.handle_tick(&scene, Time::from_millis(1_000), &|_| 0);
    assert_eq!(s.poll_close(), Some((client, "login refused".to_owned())));
}

#[test]
fn xml_from_a_websocket_client_gets_a_failed_reply_saying_why() {
    let (mut scene, _) = scene();
    let mut s = server(&[]);
    let client = ClientId(1);
    let sent = log_in(
        &mut s,
        &mut scene,
        client,
        LoginDialect::Json,
        &captured_login_frame(),
    );
    // Tundra sends nothing (section 4.1) and leaves the client waiting;
    // this node says what is wrong, then closes as for any refused login.
    match sent.as_slice() {
        [Message::LoginReply(reply)] => {
            assert!(!reply.success);
            assert!(
                reply.reply_data.contains("not a JSON object"),
                "{}",
                reply.reply_data
            );
        }
        other => panic!("one failed LoginReply, not {other:?}"),
    }
    assert!(!s.client(client).unwrap().is_authenticated());
    s.handle_tick(&scene, Time::from_millis(1_000), &|_| 0);
    assert_eq!(s.poll_close(), Some((client, "login refused".to_owned())));
}
