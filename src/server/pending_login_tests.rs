//! Connections that never log in: they wait within their own budgets
//! (total and per address), never take the seats of `max_clients`, and are
//! closed once `login_timeout_secs` passes.

use std::net::IpAddr;
use std::time::Duration;

use super::core::{ServerConfig, TundraServer};
use super::tests::scene;
use crate::clock::Time;
use crate::scene::ClientId;
use crate::tundra::messages::Login;
use crate::tundra::LoginDialect;
use crate::tundra::{DecodeContext, Message, ProtocolVersion};

fn server() -> TundraServer {
    let mut config = ServerConfig::default();
    config.limits.max_clients = 2;
    config.limits.max_pending_logins = 3;
    config.limits.max_pending_logins_per_address = 2;
    config.limits.login_timeout_secs = 5;
    TundraServer::new(config)
}

fn host(last: u8) -> IpAddr {
    IpAddr::from([198, 51, 100, last])
}

fn login_frame() -> Vec<u8> {
    Message::Login(Login {
        login_data: "{\"username\":\"u\"}".to_owned(),
        protocol_version: Some(4),
    })
    .encode_frame(ProtocolVersion(1))
    .unwrap()
}

/// The LoginReply `client` got since the last call, if any: `Some(success)`.
fn login_reply(
    server: &mut TundraServer,
    scene: &crate::scene::Scene,
    client: ClientId,
) -> Option<bool> {
    let context = DecodeContext {
        protocol_version: ProtocolVersion(4),
        registry: scene.registry(),
    };
    let mut reply = None;
    while let Some((to, frame)) = server.poll_transmit() {
        if to == client {
            if let Ok(Message::LoginReply(r)) = Message::decode_frame(&frame, &context) {
                reply = Some(r.success);
            }
        }
    }
    reply
}

fn closes(server: &mut TundraServer) -> Vec<(ClientId, String)> {
    std::iter::from_fn(|| server.poll_close()).collect()
}

#[test]
fn silent_connections_do_not_take_the_seats_of_clients_that_log_in() {
    let (mut scene, _) = scene();
    let mut server = server();
    let now = Time::ZERO;
    // Two silent connections from one host: its per-address budget is spent.
    assert!(server.handle_connect_from(ClientId(1), now, LoginDialect::Json, host(1)));
    assert!(server.handle_connect_from(ClientId(2), now, LoginDialect::Json, host(1)));
    assert!(!server.handle_connect_from(ClientId(3), now, LoginDialect::Json, host(1)));
    let refused = closes(&mut server);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, ClientId(3));
    assert!(refused[0]
        .1
        .contains("limits.max_pending_logins_per_address"));
    // max_clients is 2 and two connections are open, yet two real clients
    // from other hosts connect and log in.
    for (id, last) in [(10, 2), (11, 3)] {
        let client = ClientId(id);
        assert!(server.handle_connect_from(client, now, LoginDialect::Json, host(last)));
        server.handle_frame(&mut scene, client, now, &login_frame());
        assert_eq!(login_reply(&mut server, &scene, client), Some(true));
    }
    assert_eq!(server.authenticated_clients().count(), 2);
    assert_eq!(server.pending_logins(), 2);
    // One more may wait (3 in total), a fourth finds the total spent.
    assert!(server.handle_connect_from(ClientId(12), now, LoginDialect::Json, host(4)));
    assert!(!server.handle_connect_from(ClientId(13), now, LoginDialect::Json, host(5)));
    let refused = closes(&mut server);
    assert_eq!(refused[0].0, ClientId(13));
    assert!(refused[0].1.contains("limits.max_pending_logins)"));
    // The seats are taken now: a login is refused with the reason.
    server.handle_frame(&mut scene, ClientId(12), now, &login_frame());
    assert_eq!(login_reply(&mut server, &scene, ClientId(12)), Some(false));
}

#[test]
fn connections_that_do_not_log_in_in_time_are_closed_and_free_their_place() {
    let (scene, _) = scene();
    let mut server = server();
    let host = host(1);
    assert!(server.handle_connect_from(ClientId(1), Time::ZERO, LoginDialect::Json, host));
    let later = Time::ZERO + Duration::from_secs(2);
    assert!(server.handle_connect_from(ClientId(2), later, LoginDialect::Xml, host));
    server.handle_tick(&scene, Time::ZERO + Duration::from_millis(4_999), &|_| 0);
    assert!(closes(&mut server).is_empty());
    server.handle_tick(&scene, Time::ZERO + Duration::from_secs(5), &|_| 0);
    let closed = closes(&mut server);
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].0, ClientId(1));
    assert!(
        closed[0].1.contains("limits.login_timeout_secs"),
        "{}",
        closed[0].1
    );
    // The transport reports the close: the address may wait again.
    server.handle_disconnect(ClientId(1), &closed[0].1);
    assert_eq!(server.pending_logins(), 1);
    assert!(server.handle_connect_from(ClientId(3), later, LoginDialect::Json, host));
    server.handle_tick(&scene, later + Duration::from_secs(5), &|_| 0);
    let closed: Vec<ClientId> = closes(&mut server).into_iter().map(|(c, _)| c).collect();
    assert_eq!(closed, [ClientId(2), ClientId(3)]);
}
