//! The upstream driver: one client connection to a Tundra world server at a
//! time, over WebSocket (`ws://`, `wss://`) or native kNet (`knet+udp://`,
//! `knet+tcp://`), redialled with backoff (docs/upstream.md §5).
//!
//! It only moves bytes: binary frames in become [`UpstreamEvent::Frame`],
//! frames the bridge core produced go out through the sender handed over
//! with [`UpstreamEvent::Connected`]. Text frames are ignored, as Tundra's
//! server ignores them (docs/tundra-wire.md §2.1). Login, mapping and
//! reconciliation are the core's (`crate::upstream`).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tracing::debug;

use super::knet::client::{connect as knet_connect, KnetClient, KnetClientConfig};
use super::knet::{parse_knet_url, ClientInbound, KnetTransport};
use super::websocket::READ_BUFFER_BYTES;
use crate::logging::RemoteText;
use crate::peering::backoff::Backoff;
use crate::tundra::messages::MAX_PAYLOAD_BYTES;

/// Frames queued toward the node before the reader waits for it.
const EVENT_QUEUE: usize = 1024;

/// What the node asks of the open connection.
#[derive(Debug)]
pub enum UpstreamCommand {
    /// One binary frame for the world server.
    Frame(Vec<u8>),
    /// The login succeeded: the next redial starts from the shortest delay.
    LoggedIn,
    /// Close the connection and redial with backoff (a login that timed
    /// out, for example); the reason is logged and reported.
    Close(String),
}

/// What the driver reports.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// A connection is open; commands for it go into this sender (dropped
    /// when the connection ends, so nothing reaches a later connection).
    Connected(mpsc::UnboundedSender<UpstreamCommand>),
    /// One binary message from the world server.
    Frame(Vec<u8>),
    /// The connection ended or a dial failed; the driver redials.
    Disconnected { reason: String },
}

/// Dialling settings.
#[derive(Debug, Clone)]
pub struct UpstreamDial {
    pub url: String,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// Seeds the backoff jitter.
    pub seed: u64,
}

/// Starts the driver task; it runs until the receiver is dropped.
pub fn spawn(dial: UpstreamDial) -> mpsc::Receiver<UpstreamEvent> {
    let (events, receiver) = mpsc::channel(EVENT_QUEUE);
    tokio::spawn(run(dial, events));
    receiver
}

async fn run(dial: UpstreamDial, events: mpsc::Sender<UpstreamEvent>) {
    let mut backoff = Backoff::new(dial.reconnect_min, dial.reconnect_max, dial.seed);
    let mut config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
    // A world server's CreateEntity may be large; kNet's own cap (section 2.2).
    config.max_message_size = Some(MAX_PAYLOAD_BYTES);
    config.max_frame_size = Some(MAX_PAYLOAD_BYTES);
    let knet = parse_knet_url(&dial.url).map(|(transport, addr)| (transport, addr.to_owned()));
    loop {
        let reason = if let Some((transport, addr)) = &knet {
            match run_knet(addr, *transport, &dial, &events, &mut backoff).await {
                Ok(reason) => reason,
                Err(Stopped) => return,
            }
        } else {
            match tokio_tungstenite::connect_async_with_config(
                dial.url.as_str(),
                Some(config),
                true,
            )
            .await
            {
                Ok((socket, _)) => {
                    // The backoff starts over only once the login succeeded: a
                    // server that accepts connections but refuses or ignores
                    // the login is redialled ever more slowly.
                    debug!(url = %dial.url, "connected to the world server");
                    let (mut sink, mut stream) = socket.split();
                    let (out, mut outgoing) = mpsc::unbounded_channel::<UpstreamCommand>();
                    if events.send(UpstreamEvent::Connected(out)).await.is_err() {
                        return;
                    }
                    loop {
                        tokio::select! {
                            command = outgoing.recv() => match command {
                                Some(UpstreamCommand::Frame(frame)) => {
                                    if let Err(error) = sink.send(WsMessage::Binary(frame.into())).await {
                                        break error.to_string();
                                    }
                                }
                                Some(UpstreamCommand::LoggedIn) => backoff.reset(),
                                Some(UpstreamCommand::Close(reason)) => {
                                    let _ = sink.send(WsMessage::Close(None)).await;
                                    break reason;
                                }
                                None => break "node released the connection".to_owned(),
                            },
                            message = stream.next() => match message {
                                Some(Ok(WsMessage::Binary(bytes))) => {
                                    if events.send(UpstreamEvent::Frame(bytes.to_vec())).await.is_err() {
                                        return;
                                    }
                                }
                                Some(Ok(WsMessage::Close(_))) | None => break "closed by the world server".to_owned(),
                                Some(Ok(other)) => debug!(
                                    kind = match other {
                                        WsMessage::Text(_) => "text",
                                        WsMessage::Ping(_) => "ping",
                                        WsMessage::Pong(_) => "pong",
                                        _ => "other",
                                    },
                                    "non-binary frame from the world server ignored"
                                ),
                                Some(Err(error)) => break error.to_string(),
                            },
                        }
                    }
                }
                Err(error) => error.to_string(),
            }
        };
        if events
            .send(UpstreamEvent::Disconnected {
                reason: reason.clone(),
            })
            .await
            .is_err()
        {
            return;
        }
        let delay = backoff.next_delay();
        // Per redial at DEBUG: the bridge writes one INFO line per outage.
        debug!(url = %dial.url, reason = %RemoteText(&reason), delay_ms = delay.as_millis() as u64, "world server link down; redialling");
        tokio::time::sleep(delay).await;
    }
}

/// The node stopped listening to the driver.
struct Stopped;

/// One kNet connection to the world server, until it ends; the reason.
async fn run_knet(
    addr: &str,
    transport: KnetTransport,
    dial: &UpstreamDial,
    events: &mpsc::Sender<UpstreamEvent>,
    backoff: &mut Backoff,
) -> Result<String, Stopped> {
    let server = match tokio::net::lookup_host(addr).await.map(|mut a| a.next()) {
        Ok(Some(server)) => server,
        Ok(None) => return Ok(format!("{addr}: no address")),
        Err(error) => return Ok(format!("{addr}: {error}")),
    };
    let mut client = match knet_connect(server, transport, KnetClientConfig::default()).await {
        Ok(client) => client,
        Err(error) => return Ok(error.to_string()),
    };
    // kNet/UDP has no handshake: the connection counts as open now, and a
    // server that never answers ends it with "connect failed" (5 s).
    debug!(url = %dial.url, "connected to the world server");
    let (out, mut outgoing) = mpsc::unbounded_channel::<UpstreamCommand>();
    if events.send(UpstreamEvent::Connected(out)).await.is_err() {
        client.close();
        return Err(Stopped);
    }
    loop {
        tokio::select! {
            command = outgoing.recv() => match command {
                Some(UpstreamCommand::Frame(frame)) => {
                    if !client.send(frame.into()) {
                        return Ok(end_reason(&mut client).await);
                    }
                }
                Some(UpstreamCommand::LoggedIn) => backoff.reset(),
                Some(UpstreamCommand::Close(reason)) => {
                    client.close();
                    return Ok(reason);
                }
                None => {
                    client.close();
                    return Ok("node released the connection".to_owned());
                }
            },
            inbound = client.inbound.recv() => match inbound {
                Some(ClientInbound::Frames(frames)) => {
                    for frame in frames {
                        if events.send(UpstreamEvent::Frame(frame.to_vec())).await.is_err() {
                            client.close();
                            return Err(Stopped);
                        }
                    }
                }
                Some(ClientInbound::Closed(reason)) => return Ok(reason),
                None => return Ok(TASK_ENDED.to_owned()),
            },
        }
    }
}

/// Said when a kNet connection's task ended without saying why.
const TASK_ENDED: &str = "connection task ended";

/// Why the connection whose task has ended (a frame could not be handed
/// to it) ended: its last word, which may still wait behind frames that
/// no longer matter. Without this, an edit forwarded in the same instant
/// as the world server died hid the reason ("connection refused") behind
/// the failed hand-over.
async fn end_reason(client: &mut KnetClient) -> String {
    while let Some(inbound) = client.inbound.recv().await {
        if let ClientInbound::Closed(reason) = inbound {
            return reason;
        }
    }
    TASK_ENDED.to_owned()
}
