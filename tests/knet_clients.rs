//! Native (kNet) Tundra clients of an in-process node on 127.0.0.1, beside
//! WebSocket clients: UDP and TCP clients log in with XML login data and
//! share one scene with WebSocket clients in both directions (creation,
//! moves, removal); `required_login` holds for every transport; an entity
//! larger than a datagram reaches a UDP client whole; garbage from a
//! connected endpoint ends that connection only; connection attempts beyond
//! `[limits] max_half_open_per_address` get no answer until the half-open
//! ones answer or time out; a node that stops tells its native clients.
//!
//! Nothing passes on timing: every wait is for a condition, with a generous
//! deadline that only fails.

mod common;
mod net_common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use common::PATIENCE;
use lessgate::clock::Time;
use lessgate::config::NodeConfig;
use lessgate::knet::udp::{Role, UdpConfig, UdpConnection, UdpEvent};
use lessgate::tundra::messages::{CreateEntity, Login, RemoveEntity};
use lessgate::tundra::{
    AttributeValue, ComponentData, ComponentId, EntityId, Message, ProtocolVersion, Registry,
};
use net_common::{capture, wait_observers, LiveNode, Observed, Observer};
use tokio::net::UdpSocket;

/// A node with WebSocket and kNet (UDP and TCP) listeners on free ports,
/// plus `tundra_extra` lines of its `[tundra]` section and further
/// `sections`.
async fn node(name: &str, tundra_extra: &str, sections: &str) -> LiveNode {
    let text = format!(
        "[node]\nname = \"{name}\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         {tundra_extra}\n{sections}"
    );
    let config = NodeConfig::parse(Path::new("knet-clients.toml"), &text).expect("node config");
    LiveNode::start_knet(name, config).await
}

/// Whether the entity named `name` is seen, at `x` when given.
fn sees(observed: &Observed, name: &str, x: Option<f32>) -> bool {
    match observed.view.find(name) {
        Some((_, seen)) => x.is_none() || seen.x == x,
        None => false,
    }
}

fn remove(entity: EntityId) -> Message {
    Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: entity,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_udp_and_tcp_clients_share_a_scene_with_websocket_clients() {
    let node = node("shared", "", "").await;
    let web = Observer::join(&node.url, "web").await;
    let udp = Observer::join(&node.knet_url("udp"), "udp").await;
    let tcp = Observer::join(&node.knet_url("tcp"), "tcp").await;
    assert_eq!(
        udp.protocol,
        ProtocolVersion(4),
        "a native client asking for 4 gets 4"
    );

    // A WebSocket client's entity and its move reach both native clients
    // (the move as RigidBodyUpdate, which the view applies).
    let (crate_id, crate_placeable) = web.create(1, named_box("crate")).await;
    wait_observers(&[&udp, &tcp], PATIENCE, "natives see crate", |o| {
        o.iter().all(|o| sees(o, "crate", Some(0.0)))
    })
    .await;
    web.send(&move_to(crate_id, crate_placeable.unwrap(), 42.0))
        .await;
    wait_observers(&[&udp, &tcp], PATIENCE, "natives see crate move", |o| {
        o.iter().all(|o| sees(o, "crate", Some(42.0)))
    })
    .await;
    for native in [&udp, &tcp] {
        assert!(
            native.snapshot().rigid_body_updates > 0,
            "moves came as 119"
        );
    }

    // A UDP client's entity (unacked ids, CreateEntityReply) and its move
    // reach the WebSocket client and the TCP client.
    let (probe, probe_placeable) = udp.create(1, named_box("probe")).await;
    assert!(!probe.is_unacked(), "the node gives a real id: {probe:?}");
    wait_observers(&[&web, &tcp], PATIENCE, "probe seen", |o| {
        o.iter().all(|o| sees(o, "probe", Some(0.0)))
    })
    .await;
    udp.send(&move_to(probe, probe_placeable.unwrap(), 7.0))
        .await;
    wait_observers(&[&web, &tcp], PATIENCE, "probe move seen", |o| {
        o.iter().all(|o| sees(o, "probe", Some(7.0)))
    })
    .await;

    // And the TCP client's, the other way.
    let (anchor, anchor_placeable) = tcp.create(1, named_box("anchor")).await;
    tcp.send(&move_to(anchor, anchor_placeable.unwrap(), -3.0))
        .await;
    wait_observers(&[&web, &udp], PATIENCE, "anchor moved", |o| {
        o.iter().all(|o| sees(o, "anchor", Some(-3.0)))
    })
    .await;

    // Removal from either side reaches the others.
    udp.send(&remove(probe)).await;
    web.send(&remove(crate_id)).await;
    tcp.send(&remove(anchor)).await;
    wait_observers(&[&web, &udp, &tcp], PATIENCE, "all removed", |o| {
        o.iter().all(|o| {
            o.view.find("probe").is_none()
                && o.view.find("crate").is_none()
                && o.view.find("anchor").is_none()
        })
    })
    .await;
    for client in [&web, &udp, &tcp] {
        assert!(!client.closed(), "{:?}", client.snapshot().end);
    }
    assert_eq!(
        web.snapshot().rigid_body_updates,
        0,
        "a protocol 3 WebSocket client gets EditAttributes"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_login_applies_to_native_clients_as_to_websocket_ones() {
    let node = node("guarded", "required_login = { token = \"sesame\" }", "").await;
    for url in [node.url.clone(), node.knet_url("udp"), node.knet_url("tcp")] {
        let missing = Observer::join_with(&url, "nobody", &[]).await.err();
        assert_eq!(
            missing.as_deref(),
            Some("login property 'token' is required: add it to the login data (ask the server's operator for the value)"),
            "{url}"
        );
        let wrong = Observer::join_with(&url, "guesser", &[("token", "open")])
            .await
            .err();
        assert_eq!(
            wrong.as_deref(),
            Some("login property 'token' is not accepted: check its value with the server's operator"),
            "{url}"
        );
        let admitted = Observer::join_with(&url, "friend", &[("token", "sesame")]).await;
        let admitted = admitted.unwrap_or_else(|reason| panic!("{url}: refused: {reason}"));
        assert!(admitted.user > 0, "{url}");
    }
    node.stop().await;
}

/// `0000|0001|…|0399|`: 2000 bytes, as in the captured fragmented
/// CreateEntity (docs/knet-wire.md §6.1).
fn long_description() -> String {
    (0..400).map(|i| format!("{i:04}|")).collect()
}

/// A Name component with `name` and a long description.
fn big_name(name: &str, description: &str) -> ComponentData {
    let registry = Registry::builtin();
    let schema = registry.get(26).unwrap();
    let mut values = schema.default_values();
    values[0] = AttributeValue::String(name.to_owned());
    values[1] = AttributeValue::String(description.to_owned());
    ComponentData::with_values(ComponentId(0x4000_0001), schema, values)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_larger_than_a_datagram_reaches_a_udp_client_whole() {
    let node = node("big", "", "").await;
    let description = long_description();
    assert_eq!(description.len(), 2000);
    let components = vec![big_name("Big", &description)];
    // The payload kNet must fragment: more than 1368 bytes (section 4.7).
    let frame = Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(1),
        temporary: false,
        parent: None,
        components: components.clone(),
    })
    .encode_frame(ProtocolVersion(4))
    .unwrap();
    assert!(frame.len() - 2 > 1368, "payload {} bytes", frame.len() - 2);

    // One client watches it being created, one joins after (initial state).
    let early = Observer::join(&node.knet_url("udp"), "early").await;
    let web = Observer::join(&node.url, "maker").await;
    web.create(1, components).await;
    let late = Observer::join(&node.knet_url("udp"), "late").await;
    let seen = wait_observers(&[&early, &late], PATIENCE, "Big seen whole", |o| {
        o.iter().all(|o| {
            o.view
                .find("Big")
                .is_some_and(|(_, big)| big.description.as_deref() == Some(description.as_str()))
        })
    })
    .await;
    for client in &seen {
        let (_, big) = client.view.find("Big").unwrap();
        assert_eq!(big.description.as_deref(), Some(description.as_str()));
    }

    // And the other way: a UDP client's own big entity reaches a
    // WebSocket client whole (the node reassembles it).
    let maker = Observer::join(&node.knet_url("udp"), "native-maker").await;
    maker
        .create(1, vec![big_name("Bigger", &description)])
        .await;
    wait_observers(&[&web], PATIENCE, "Bigger seen", |o| {
        o[0].view
            .find("Bigger")
            .map(|(_, s)| s.description.as_deref())
            == Some(Some(description.as_str()))
    })
    .await;
    node.stop().await;
}

/// A hand-driven client connection on its own socket, so the test can
/// also send what a real client never would from the same endpoint.
struct RawClient {
    socket: UdpSocket,
    connection: UdpConnection,
    origin: tokio::time::Instant,
    buffer: Vec<u8>,
}

impl RawClient {
    async fn open(server: SocketAddr) -> RawClient {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.connect(server).await.unwrap();
        let mut client = RawClient {
            socket,
            connection: UdpConnection::new(Role::Client, UdpConfig::default(), Time::ZERO),
            origin: tokio::time::Instant::now(),
            buffer: vec![0u8; 2048],
        };
        client.flush().await;
        client
    }

    fn now(&self) -> Time {
        Time::from_micros(self.origin.elapsed().as_micros() as u64)
    }

    async fn flush(&mut self) {
        let now = self.now();
        let mut datagram = Vec::new();
        while self.connection.poll_transmit(now, &mut datagram) {
            self.socket.send(&datagram).await.unwrap();
        }
    }

    /// Runs the connection until an event matches `want` (panics after
    /// [`PATIENCE`] or if the connection closes first).
    async fn until(&mut self, mut want: impl FnMut(&UdpEvent) -> bool) -> UdpEvent {
        let give_up = tokio::time::Instant::now() + PATIENCE;
        loop {
            while let Some(event) = self.connection.poll_event() {
                if want(&event) {
                    return event;
                }
                assert!(
                    !matches!(event, UdpEvent::Closed { .. }),
                    "closed first: {event:?}"
                );
            }
            self.flush().await;
            let wake = self
                .connection
                .poll_timeout()
                .map(|at| self.origin + Duration::from_micros(at.as_micros()))
                .unwrap_or(give_up)
                .min(give_up);
            assert!(tokio::time::Instant::now() < give_up, "no matching event");
            tokio::select! {
                received = self.socket.recv(&mut self.buffer) => {
                    let len = received.unwrap();
                    let now = self.now();
                    self.connection.handle_datagram(now, &self.buffer[..len]);
                }
                _ = tokio::time::sleep_until(wake) => {
                    let now = self.now();
                    self.connection.handle_timeout(now);
                }
            }
        }
    }
}

fn login_frame(username: &str) -> Vec<u8> {
    Message::Login(Login {
        login_data: net_common::login_data("knet+udp://127.0.0.1:1", username, &[]),
        protocol_version: Some(4),
    })
    .encode_frame(ProtocolVersion(1))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_a_connected_endpoint_ends_that_connection_only() {
    capture::install();
    let node = node("garbage", "", "").await;
    let bystander = Observer::join(&node.knet_url("udp"), "bystander").await;

    // A well-behaved start: answer the server, log in.
    let mut hostile = RawClient::open(node.knet.unwrap()).await;
    hostile.connection.send_tundra(&login_frame("mallory"));
    let reply = hostile
        .until(|e| matches!(e, UdpEvent::Message { id, .. } if id.0 == 101))
        .await;
    let UdpEvent::Message { payload, .. } = reply else {
        unreachable!()
    };
    let mut frame = 101u16.to_le_bytes().to_vec();
    frame.extend_from_slice(&payload);
    let registry = Registry::builtin();
    let context = lessgate::tundra::DecodeContext {
        protocol_version: ProtocolVersion(1),
        registry: &registry,
    };
    let Message::LoginReply(reply) = Message::decode_frame(&frame, &context).unwrap() else {
        unreachable!()
    };
    assert!(reply.success, "{}", reply.reply_data);
    let mallory = reply.user_id.0;

    // Then, from the same source port, a datagram whose only message block
    // is empty (ContentLength 0 ends the connection: section 4.2).
    hostile
        .socket
        .send(&[0x05, 0x00, 0x00, 0x00, 0x00])
        .await
        .unwrap();

    // The node ends that connection with a reason; the other stays.
    wait_observers(&[&bystander], PATIENCE, "mallory leaves", |o| {
        o[0].left.contains(&mallory)
    })
    .await;
    let reasons: Vec<String> = capture::lines("client left")
        .iter()
        .filter(|l| l.field("user") == Some(mallory.to_string().as_str()))
        .filter_map(|l| l.field("reason").map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("protocol error")),
        "the node logs why: {reasons:?}"
    );
    let warned = capture::lines("client closed by its transport for a protocol violation");
    assert!(!warned.is_empty(), "logged as misbehaviour at WARN");
    net_common::wait_status(&[&node], PATIENCE, "counted as misbehaviour", |s| {
        s.server.clients_closed_for_misbehaviour == 1
    })
    .await;
    let web = Observer::join(&node.url, "web").await;
    web.create(1, named_box("after")).await;
    wait_observers(&[&bystander], PATIENCE, "bystander still served", |o| {
        o[0].view.find("after").is_some()
    })
    .await;
    assert!(!bystander.closed(), "{:?}", bystander.snapshot().end);
    node.stop().await;
}

/// The kNet connect datagram a real client sends (section 6.1 U1).
const CONNECT: [u8; 8] = [0; 8];

/// Whether `socket` receives a datagram within `wait` (a poll: the caller
/// retries; it never decides the test).
async fn answered(socket: &UdpSocket, wait: Duration) -> Option<Vec<u8>> {
    let mut buffer = vec![0u8; 2048];
    match tokio::time::timeout(wait, socket.recv(&mut buffer)).await {
        Ok(Ok(len)) => Some(buffer[..len].to_vec()),
        _ => None,
    }
}

/// Sends attempts from fresh sockets until `want` of one round of `want`
/// attempts are all answered; answered attempts answer back (so they stop
/// being half-open). Panics after [`PATIENCE`].
async fn until_round_answered(server: SocketAddr, want: usize) {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut clients = Vec::new();
        for _ in 0..want {
            clients.push(RawClient::open(server).await);
        }
        let mut all = true;
        for client in &mut clients {
            match answered(&client.socket, Duration::from_secs(1)).await {
                Some(datagram) => {
                    let now = client.now();
                    client.connection.handle_datagram(now, &datagram);
                    client.flush().await;
                }
                None => all = false,
            }
        }
        if all {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "{want} fresh attempts never all answered"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_beyond_the_half_open_limit_get_no_answer() {
    capture::install();
    const LIMIT: usize = 4;
    let node = node(
        "limited",
        "",
        &format!("[limits]\nmax_half_open_per_address = {LIMIT}\n"),
    )
    .await;
    let server = node.knet.unwrap();

    // LIMIT attempts, each answered; they never answer back.
    let mut silent = Vec::new();
    for _ in 0..LIMIT {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.send_to(&CONNECT, server).await.unwrap();
        assert!(
            answered(&socket, PATIENCE).await.is_some(),
            "an attempt within the limit is answered"
        );
        silent.push(socket);
    }
    // One more: refused. The listener reports it in its periodic summary,
    // after which no answer can come (it opened no connection).
    let refused = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    refused.send_to(&CONNECT, server).await.unwrap();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let counted = capture::lines("kNet UDP datagrams refused in the last period")
            .iter()
            .any(|l| {
                l.field("over_address_limit")
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n >= 1)
            });
        if counted {
            break;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the refusal is never reported"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut buffer = [0u8; 64];
    assert!(
        matches!(refused.try_recv_from(&mut buffer), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the attempt over the limit got no answer"
    );

    // The silent ones time out (5 s) and free their slots: a full round of
    // LIMIT new attempts is answered again.
    until_round_answered(server, LIMIT).await;
    // Those answered back, so they are connections, not half-open: another
    // full round is answered at once.
    until_round_answered(server, LIMIT).await;
    drop(silent);
    node.stop().await;
}

/// Stops the node and waits until a native client over `scheme` is told:
/// UDP by Disconnect (and DisconnectAck), TCP by FIN; not from kNet's 15 s
/// silence timeout, so the bound is below it.
async fn told_when_the_node_stops(scheme: &str) {
    let node = node("stopping", "", "").await;
    let client = Observer::join(&node.knet_url(scheme), scheme).await;
    node.stop().await;
    let limit = Duration::from_secs(10);
    let deadline = tokio::time::Instant::now() + limit;
    while !client.closed() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{scheme} client not told in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tcp_client_is_told_when_the_node_stops() {
    told_when_the_node_stops("tcp").await;
}

/// Fails about four runs in ten: a stopping node's UDP connection task can
/// see its datagram queue close (the listener's socket task ends with the
/// node) before it takes the node's close request, and then ends without
/// sending Disconnect (src/transport/knet/udp_driver.rs, `serve_node`,
/// `inbox.recv()` returning `None`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_native_udp_client_is_told_when_the_node_stops() {
    told_when_the_node_stops("udp").await;
}
