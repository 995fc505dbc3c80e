//! The world server's asset storages reach every kind of client of a bridge
//! node (docs/upstream.md §3), with real sockets on 127.0.0.1: the world
//! server is scripted down to its login (it answers Login with the storages
//! a real server advertises, then sends nothing: an empty scene), over
//! native kNet TCP and UDP with the XML a native login gets, and over
//! WebSocket with the JSON a WebSocket login gets. The bridge node's WebSocket client
//! must get the world's default storage as JSON and its native clients
//! (kNet UDP and TCP) every storage as XML, whichever form the world sent.

mod common;
mod net_common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use lessgate::clock::Time;
use lessgate::config::NodeConfig;
use lessgate::knet::tcp::{TcpConfig, TcpConnection, TcpEvent};
use lessgate::knet::udp::{tundra_frame, Role, UdpConfig, UdpConnection, UdpEvent};
use lessgate::tundra::messages::LoginReply;
use lessgate::tundra::{DecodeContext, Message, ProtocolVersion, Registry, UserId};
use net_common::{capture as logs, wait_status, LiveNode, Observer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// A failure bound only: the bridge logs in and settles in well under a
/// second.
const BOUND: Duration = Duration::from_secs(30);

/// What a real server with an HTTP storage for its scene and one for its
/// textures tells a native client (docs/knet-wire.md §5.4).
const WORLD_XML: &str = "<?xml version=\"1.0\"?>\n<asset>\n\
    \t<storage data=\"type=HttpAssetStorage;name=Scene;src=http://world.example/assets/\" />\n\
    \t<storage data=\"type=HttpAssetStorage;name=Textures;src=http://cdn.example/t/\" />\n\
    \t<defaultStorage name=\"Scene\" />\n</asset>\n";

/// What a real server tells a WebSocket client: its default storage only
/// (docs/tundra-wire.md §4.2), with a key a server script added for the
/// connection it answers (never passed on).
const WORLD_JSON: &str = r#"{"session":"for-the-bridge-only","storage":{"default":true,"name":"Scene","src":"http://world.example/assets/","type":"HttpAssetStorage"}}"#;

/// The default storage as the bridge's WebSocket clients get it.
const SCENE_JSON: &str = r#"{"storage":{"default":true,"name":"Scene","src":"http://world.example/assets/","type":"HttpAssetStorage"}}"#;

/// The same storage for the bridge's native clients, from the JSON form.
const SCENE_XML: &str = "<?xml version=\"1.0\"?>\n<asset>\n\
    \t<storage data=\"type=HttpAssetStorage;name=Scene;src=http://world.example/assets/\" />\n\
    \t<defaultStorage name=\"Scene\" />\n</asset>\n";

/// A bridge node to `url` that serves WebSocket and native clients.
fn bridge(url: &str) -> NodeConfig {
    let text = format!(
        "[node]\nname = \"bridge\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         [upstream]\nurl = \"{url}\"\nreconnect_min_ms = 100\nreconnect_max_ms = 500\n\
         settle_ms = 200\n[upstream.login]\nusername = \"bridge\"\n"
    );
    NodeConfig::parse(Path::new("bridge.toml"), &text).expect("bridge config")
}

/// The LoginReply a world server sends for `frame` when it is a Login.
fn answer(frame: &[u8], reply_data: &str) -> Option<Vec<u8>> {
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: ProtocolVersion(1),
        registry: &registry,
    };
    let Ok(Message::Login(login)) = Message::decode_frame(frame, &context) else {
        return None;
    };
    let reply = Message::LoginReply(LoginReply {
        success: true,
        user_id: UserId(1),
        reply_data: reply_data.to_owned(),
        protocol_version: Some(login.protocol_version.unwrap_or(1).min(4)),
    });
    Some(reply.encode_frame(ProtocolVersion(1)).expect("encodes"))
}

/// A native world server over kNet TCP, reduced to its login; answers
/// every connection (the bridge may dial again).
async fn knet_tcp_world(reply_data: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve_knet(socket, reply_data));
        }
    });
    address
}

/// One kNet TCP connection of the scripted world: the library's sans-IO
/// connection keeps the framing and the pings; Login gets its reply.
async fn serve_knet(mut socket: TcpStream, reply_data: &'static str) {
    let origin = tokio::time::Instant::now();
    let now = move || Time::from_micros(origin.elapsed().as_micros() as u64);
    let mut connection = TcpConnection::new(TcpConfig::default(), now());
    let mut buffer = vec![0; 64 * 1024];
    loop {
        while let Some(event) = connection.poll_event() {
            match event {
                TcpEvent::Message { id, payload } => {
                    let reply = tundra_frame(id, &payload).and_then(|f| answer(&f, reply_data));
                    if let Some(reply) = reply {
                        connection.send_tundra(&reply).expect("reply queued");
                    }
                }
                TcpEvent::Closed { .. } => return,
            }
        }
        while let Some(bytes) = connection.poll_transmit() {
            if socket.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let wake = connection
            .poll_timeout()
            .map_or(Duration::from_secs(1), |at| {
                at.saturating_duration_since(now())
            });
        tokio::select! {
            read = socket.read(&mut buffer) => match read {
                Ok(0) | Err(_) => connection.handle_eof(),
                Ok(n) => connection.handle_bytes(now(), &buffer[..n]),
            },
            () = tokio::time::sleep(wake) => connection.handle_timeout(now()),
        }
    }
}

/// A native world server over kNet UDP, reduced to its login. One peer at
/// a time: a datagram from a new address is a new connection (the bridge
/// dials again from a new port), as a real server takes it.
async fn knet_udp_world(reply_data: &'static str) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    tokio::spawn(serve_knet_udp(socket, reply_data));
    address
}

/// The scripted world's kNet UDP connection: the library's sans-IO
/// connection in the server role keeps acks, pings and pacing.
async fn serve_knet_udp(socket: UdpSocket, reply_data: &'static str) {
    let origin = tokio::time::Instant::now();
    let now = move || Time::from_micros(origin.elapsed().as_micros() as u64);
    let mut peer: Option<(SocketAddr, UdpConnection)> = None;
    let (mut buffer, mut out) = (vec![0; 64 * 1024], Vec::new());
    loop {
        if let Some((address, connection)) = &mut peer {
            while let Some(event) = connection.poll_event() {
                if let UdpEvent::Message { id, payload, .. } = event {
                    let reply = tundra_frame(id, &payload).and_then(|f| answer(&f, reply_data));
                    if let Some(reply) = reply {
                        connection.send_tundra(&reply);
                    }
                }
            }
            while connection.poll_transmit(now(), &mut out) {
                let _ = socket.send_to(&out, *address).await;
            }
        }
        let wake = peer
            .as_ref()
            .and_then(|(_, c)| c.poll_timeout())
            .map_or(Duration::from_secs(1), |at| {
                at.saturating_duration_since(now())
            });
        tokio::select! {
            received = socket.recv_from(&mut buffer) => {
                let Ok((length, from)) = received else { return };
                match &mut peer {
                    Some((address, connection)) if *address == from => {
                        connection.handle_datagram(now(), &buffer[..length]);
                    }
                    // The connect datagram opens the connection and is not
                    // fed to it (docs/knet-wire.md §4.8): the server talks first.
                    _ => {
                        let connection =
                            UdpConnection::new(Role::Server, UdpConfig::default(), now());
                        peer = Some((from, connection));
                    }
                }
            }
            () = tokio::time::sleep(wake) => {
                if let Some((_, connection)) = &mut peer {
                    connection.handle_timeout(now());
                }
            }
        }
    }
}

/// A world server over WebSocket, reduced to its login.
async fn websocket_world(reply_data: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(socket).await else {
                    return;
                };
                while let Some(Ok(message)) = socket.next().await {
                    let WsMessage::Binary(frame) = message else {
                        continue;
                    };
                    if let Some(reply) = answer(&frame, reply_data) {
                        if socket.send(WsMessage::Binary(reply.into())).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    address
}

/// Starts a bridge to `url`, waits until its session to the world is ready,
/// and logs in one client of each kind; their LoginReply data.
async fn replies_at_bridge(url: &str) -> [String; 3] {
    logs::install();
    let bridge = LiveNode::start_knet("bridge", bridge(url)).await;
    wait_status(&[&bridge], BOUND, "the bridge's world session", |s| {
        s.upstream == Some("ready")
    })
    .await;
    let web = Observer::join(&bridge.url, "web").await;
    let udp = Observer::join(&bridge.knet_url("udp"), "viewer-udp").await;
    let tcp = Observer::join(&bridge.knet_url("tcp"), "viewer-tcp").await;
    let replies = [
        web.reply_data.clone(),
        udp.reply_data.clone(),
        tcp.reply_data.clone(),
    ];
    drop((web, udp, tcp));
    bridge.stop().await;
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knet_tcp_world_servers_xml_storages_reach_websocket_and_native_clients() {
    let world = knet_tcp_world(WORLD_XML).await;
    let [web, udp, tcp] = replies_at_bridge(&format!("knet+tcp://{world}")).await;
    assert_eq!(web, SCENE_JSON, "the default storage, as JSON");
    assert_eq!(udp, WORLD_XML, "every storage, as the world wrote them");
    assert_eq!(tcp, WORLD_XML);
    let read = logs::lines("world server's asset storages");
    assert!(
        read.iter().any(|l| l.field("storages") == Some("2")
            && l.field("default") == Some("Scene")
            && l.field("default_src") == Some("http://world.example/assets/")),
        "{read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knet_udp_world_servers_xml_storages_reach_websocket_and_native_clients() {
    let world = knet_udp_world(WORLD_XML).await;
    let [web, udp, tcp] = replies_at_bridge(&format!("knet+udp://{world}")).await;
    assert_eq!(web, SCENE_JSON);
    assert_eq!(udp, WORLD_XML);
    assert_eq!(tcp, WORLD_XML);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_world_servers_json_storage_reaches_websocket_and_native_clients() {
    let world = websocket_world(WORLD_JSON).await;
    let [web, udp, tcp] = replies_at_bridge(&format!("ws://{world}")).await;
    assert_eq!(web, SCENE_JSON, "the storage only, not the script's key");
    assert_eq!(udp, SCENE_XML, "the same storage, as XML");
    assert_eq!(tcp, SCENE_XML);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_reply_that_does_not_parse_leaves_the_nodes_own_replies() {
    // A DTD is refused (it could define entities): no storage is passed on.
    let hostile = "<!DOCTYPE asset [<!ENTITY e 'src=http://evil/'>]>\
                   <asset><storage data='&e;'/><defaultStorage name='x'/></asset>";
    let world = knet_tcp_world(hostile).await;
    let [web, udp, tcp] = replies_at_bridge(&format!("knet+tcp://{world}")).await;
    assert_eq!(
        web,
        r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#
    );
    assert_eq!(udp, "<?xml version=\"1.0\"?>\n<asset />\n");
    assert_eq!(tcp, udp);
    // The operator is told what was refused and why.
    let refused = logs::lines("world server's asset storages not understood; none passed on");
    assert!(
        refused.iter().any(|l| l
            .field("error")
            .is_some_and(|e| e.contains("not valid XML"))),
        "{refused:?}"
    );
}
