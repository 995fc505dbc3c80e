//! Shared helpers for integration tests: a node on an ephemeral port and a
//! Tundra WebSocket client written with the project's own codec. The
//! submodules hold one concept each, written once: tests/net_common uses
//! them from here (its binaries declare `mod common;` too), and the helper
//! modules whose binaries do not (tests/sim, tests/less_harness,
//! tests/peer_common) include the files they need with `#[path]`.
#![allow(dead_code)]

pub mod link_model;
pub mod patience;
pub mod process;
pub mod tundra_values;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{CreateEntity, Login, LoginReply};
use lessgate::tundra::{
    ComponentData, DecodeContext, EntityId, Message, ProtocolVersion, Registry,
};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use patience::PATIENCE;

/// A node running in this process on 127.0.0.1 with an ephemeral port.
pub struct TestNode {
    pub url: String,
    /// The node's status, as its HTTP `/status` would show it.
    pub status: tokio::sync::watch::Receiver<lessgate::runtime::status::NodeStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestNode {
    /// Starts `config` with the Tundra listener on an ephemeral port.
    pub async fn start(mut config: NodeConfig) -> TestNode {
        config.tundra.listen = "127.0.0.1:0".parse().unwrap();
        TestNode::start_as_configured(config).await
    }

    /// Starts `config` on the addresses it names.
    pub async fn start_as_configured(config: NodeConfig) -> TestNode {
        let running = lessgate::runtime::start(config).await.expect("node starts");
        let url = running.tundra_url();
        let status = running.status();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(running.run(async {
            let _ = stopped.await;
        }));
        TestNode {
            url,
            status,
            stop: Some(stop),
            task,
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// A Tundra WebSocket client.
pub struct TundraClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub protocol: ProtocolVersion,
    pub registry: Registry,
    pub user: u32,
}

impl TundraClient {
    /// A client on an open WebSocket, before login.
    fn on(socket: WebSocketStream<MaybeTlsStream<TcpStream>>) -> TundraClient {
        TundraClient {
            socket,
            protocol: ProtocolVersion::ORIGINAL,
            registry: tundra_values::builtin().clone(),
            user: 0,
        }
    }

    pub async fn connect(url: &str) -> TundraClient {
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("websocket connects");
        TundraClient::on(socket)
    }

    /// Connects from `source` (any 127.x.y.z address is local on Linux:
    /// a second host on one machine) to a `ws://ip:port` URL.
    pub async fn connect_from(url: &str, source: std::net::IpAddr) -> TundraClient {
        let server: std::net::SocketAddr = url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .parse()
            .expect("ws://ip:port");
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::new(source, 0))
            .expect("binds the source address");
        let stream = socket.connect(server).await.expect("tcp connects");
        let (socket, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
            .await
            .expect("websocket connects");
        TundraClient::on(socket)
    }

    /// [`TundraClient::login`] from `source` (see [`TundraClient::connect_from`]).
    pub async fn login_from(
        url: &str,
        source: std::net::IpAddr,
        username: &str,
        protocol: u32,
    ) -> (TundraClient, Vec<Message>) {
        let client = TundraClient::connect_from(url, source).await;
        client.log_in(username, protocol).await
    }

    /// Connects and logs in; returns the messages that came before and with
    /// the LoginReply.
    pub async fn login(url: &str, username: &str, protocol: u32) -> (TundraClient, Vec<Message>) {
        let client = TundraClient::connect(url).await;
        client.log_in(username, protocol).await
    }

    /// Logs in on an open connection.
    async fn log_in(self, username: &str, protocol: u32) -> (TundraClient, Vec<Message>) {
        let mut client = self;
        client
            .send(&Message::Login(Login {
                login_data: format!("{{\"username\":\"{username}\"}}"),
                protocol_version: Some(protocol),
            }))
            .await;
        let mut seen = Vec::new();
        loop {
            let message = client.recv().await.expect("login reply");
            if let Message::LoginReply(reply) = &message {
                assert!(reply.success, "login refused: {}", reply.reply_data);
                client.user = reply.user_id.0;
                client.protocol = ProtocolVersion(reply.protocol_version.unwrap_or(1));
                seen.push(message);
                return (client, seen);
            }
            seen.push(message);
        }
    }

    pub async fn send(&mut self, message: &Message) {
        let frame = message.encode_frame(self.protocol).expect("encodes");
        self.send_raw(frame).await;
    }

    pub async fn send_raw(&mut self, frame: Vec<u8>) {
        self.send_ws(WsMessage::Binary(frame.into())).await;
    }

    /// Sends any WebSocket message (text, ping...).
    pub async fn send_ws(&mut self, message: WsMessage) {
        self.socket.send(message).await.expect("sends");
    }

    /// The next Tundra message, or `None` when the connection closed.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            let next = tokio::time::timeout(PATIENCE, self.socket.next())
                .await
                .expect("a message arrives in time");
            match next? {
                Ok(WsMessage::Binary(frame)) => {
                    let context = DecodeContext {
                        protocol_version: self.protocol,
                        registry: &self.registry,
                    };
                    let message =
                        Message::decode_frame(&frame, &context).expect("server frames decode");
                    if let Message::RegisterComponentType(m) = &message {
                        m.register(&mut self.registry);
                    }
                    return Some(message);
                }
                Ok(WsMessage::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    /// The next message within `limit`, or `None` (also when closed).
    pub async fn recv_within(&mut self, limit: Duration) -> Option<Message> {
        tokio::time::timeout(limit, self.recv())
            .await
            .unwrap_or_default()
    }

    /// Receives until a message matches, returning it (others are skipped).
    pub async fn recv_until(&mut self, mut want: impl FnMut(&Message) -> bool) -> Message {
        loop {
            let message = self.recv().await.expect("connection stays open");
            if want(&message) {
                return message;
            }
        }
    }

    /// The next LoginReply (what comes before it is skipped).
    pub async fn login_reply(&mut self) -> LoginReply {
        match self
            .recv_until(|m| matches!(m, Message::LoginReply(_)))
            .await
        {
            Message::LoginReply(reply) => reply,
            _ => unreachable!("recv_until returns a LoginReply"),
        }
    }

    /// Whether the server closes this connection (reading until it does).
    pub async fn closed(&mut self) -> bool {
        loop {
            match tokio::time::timeout(PATIENCE, self.socket.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(WsMessage::Close(_)))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// Registers a custom type locally, as the client's own scene does.
    pub fn register_custom(&mut self, message: &lessgate::tundra::messages::RegisterComponentType) {
        message.register(&mut self.registry);
    }

    /// Sends a CreateEntity under an unacked id without waiting for a reply.
    pub async fn send_create(&mut self, unacked: u32, components: Vec<ComponentData>) {
        self.send(&Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0000 | unacked),
            temporary: false,
            parent: None,
            components,
        }))
        .await;
    }

    /// Creates an entity from components, as a client does: an unacked id.
    pub async fn create_entity(
        &mut self,
        unacked: u32,
        components: Vec<ComponentData>,
    ) -> EntityId {
        self.send_create(unacked, components).await;
        match self
            .recv_until(|m| matches!(m, Message::CreateEntityReply(_)))
            .await
        {
            Message::CreateEntityReply(reply) => {
                // Sent masked to 30 bits; the client ORs 0x40000000 back.
                assert_eq!(reply.sender_entity_id.wire(), unacked);
                reply.entity_id
            }
            _ => unreachable!(),
        }
    }
}
