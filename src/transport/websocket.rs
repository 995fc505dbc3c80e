//! WebSocket listener for Tundra clients (docs/tundra-wire.md §2.1).
//!
//! One Tundra message per binary WebSocket message; text and empty binary
//! messages are ignored as Tundra ignores them; any path, no subprotocol.
//! Every message read, whatever its kind, spends the client's
//! [`MessageBudget`]: above it the client is slowed, never closed. A client
//! that breaks the WebSocket protocol (oversize message, bad framing) is
//! closed with the close code for it (1009, 1002, 1007) and reported to the
//! node as misbehaving.
//! Frames go to the node as [`ClientEvent`]s; the node answers through a
//! [`ClientHandle`], whose queued byte count lets it stop building updates for
//! a client that does not read (its sync state then coalesces instead).

use std::net::SocketAddr;
use std::time::Duration;

use crate::logging::RemoteText;
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info, info_span, Instrument};

use super::guarded_listener::{EventLog, GuardedListener};

// The client model is shared by every transport; these names stay here too
// so code written against the WebSocket listener keeps compiling.
pub use super::client::{
    ClientEvent, ClientHandle, ClientOutbound, ClientTransport, ConnectionId, ConnectionIds,
    Outbound, CLOSE_GRACE,
};
use super::message_budget::{BudgetConfig, MessageBudget};
use crate::clock::Time;

/// Most frames, and bytes, written to a client before one flush: bounds
/// the latency a long queue adds to its first frame and the memory of one
/// batch. A write of a busy client's changes (a gap's worth: 1 000 entity
/// updates, 46 KB, at 10 000 x 20 Hz) goes out in one system call; 256
/// frames a batch had cut it into four.
const WRITE_BATCH: usize = 4096;
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Most frames read from a client into one [`ClientEvent::Frames`]: the
/// node handles a batch before it flushes its peer links, so this bounds
/// the delay one busy client adds to everything else.
pub const READ_BATCH: usize = 256;

/// Bytes after which a read batch is handed over even if more frames are
/// ready (a batch may end one frame past it): with the bounded event
/// channel this bounds the memory of frames waiting for the node.
const READ_BATCH_BYTES: usize = 16 * 1024;

/// Capacity of a WebSocket's read buffer. tungstenite zeroes the buffer's
/// free capacity before every read, the one that finds nothing included,
/// so its default of 128 KiB cost a 128 KiB memset per wake-up (7 % of a
/// node's time at 100 x 20 Hz); larger frames still read whole, the buffer
/// grows for them.
pub const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Listener settings.
#[derive(Clone)]
pub struct ListenerOptions {
    pub tls: Option<TlsAcceptor>,
    pub max_frame_bytes: usize,
    /// Time for the TLS and WebSocket handshakes together
    /// (`[limits] handshake_timeout_secs`): a connection that has not
    /// finished them by then is closed and gives its socket back.
    pub handshake_timeout: Duration,
    /// How fast each client's messages are read (it is slowed above it).
    pub budget: BudgetConfig,
}

/// Accepts connections until `events` is closed by the node. Connection ids
/// come from `ids`, shared with the node's other listeners.
pub async fn serve(
    mut listener: GuardedListener,
    options: ListenerOptions,
    ids: ConnectionIds,
    events: mpsc::Sender<ClientEvent>,
) {
    // A stranger can fail handshakes at will: a few lines per flood.
    let timeouts = EventLog::new();
    let failures = EventLog::new();
    loop {
        let (tcp, addr, slot) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = events.closed() => return,
        };
        let id = ids.next();
        // Tundra's server sets TCP_NODELAY; small sync messages must not wait.
        let _ = tcp.set_nodelay(true);
        let options = options.clone();
        let events = events.clone();
        let timeouts = timeouts.clone();
        let failures = failures.clone();
        let span = info_span!("client", conn = %id, %addr);
        tokio::spawn(
            async move {
                // Held until the connection ends: its place in the count of
                // connections from its address.
                let _slot = slot;
                let deadline = options.handshake_timeout;
                let handshake = tokio::time::timeout(deadline, handshake(tcp, &options, &failures)).await;
                match handshake {
                    Ok(Some(socket)) => run_connection(socket, id, addr, options.budget, events).await,
                    Ok(None) => {}
                    Err(_) => {
                        if let Some(left_out) = timeouts.occurrence() {
                            info!(
                                timeout_secs = deadline.as_secs(),
                                left_out,
                                "connection closed: no websocket handshake within limits.handshake_timeout_secs"
                            );
                        }
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// A WebSocket over TLS or plain TCP.
trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> ClientStream for S {}

/// The TLS handshake (when configured) and the WebSocket upgrade; `None`
/// when either fails (logged here, within `failures`' budget).
async fn handshake(
    tcp: TcpStream,
    options: &ListenerOptions,
    failures: &EventLog,
) -> Option<WebSocketStream<Box<dyn ClientStream>>> {
    let stream: Box<dyn ClientStream> = match options.tls.clone() {
        Some(acceptor) => match acceptor.accept(tcp).await {
            Ok(stream) => Box::new(stream),
            Err(error) => {
                match failures.occurrence() {
                    Some(left_out) => info!(%error, left_out, "tls handshake failed"),
                    None => debug!(%error, left_out = 0_u64, "tls handshake failed"),
                }
                return None;
            }
        },
        None => Box::new(tcp),
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(options.max_frame_bytes))
        .max_frame_size(Some(options.max_frame_bytes));
    match tokio_tungstenite::accept_async_with_config(stream, Some(config)).await {
        Ok(socket) => Some(socket),
        Err(error) => {
            match failures.occurrence() {
                Some(left_out) => info!(%error, left_out, "websocket handshake failed"),
                None => debug!(%error, left_out = 0_u64, "websocket handshake failed"),
            }
            None
        }
    }
}

async fn run_connection<S>(
    mut socket: WebSocketStream<S>,
    id: ConnectionId,
    addr: SocketAddr,
    budget: BudgetConfig,
    events: mpsc::Sender<ClientEvent>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // One task reads and writes the socket, one at a time, so the stream is
    // not split (a split stream takes a lock for every read and write).
    let (handle, mut outbound_rx) = ClientHandle::pair();
    // Armed once the node asks to close: bounds how long a send may block.
    let closing = outbound_rx.closing();
    let close_deadline = async {
        closing.await;
        tokio::time::sleep(CLOSE_GRACE).await;
    };
    tokio::pin!(close_deadline);
    debug!("connected");
    if events
        .send(ClientEvent::Connected {
            id,
            addr,
            transport: ClientTransport::WebSocket,
            handle,
        })
        .await
        .is_err()
    {
        return;
    }
    // The budget's clock: this connection's own origin.
    let origin = tokio::time::Instant::now();
    let now = || Time::from_micros(u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX));
    let mut budget = MessageBudget::new(budget, now());
    // Set when the client broke the WebSocket protocol: closed with a code.
    let mut violation: Option<(CloseCode, String)> = None;
    let reason = loop {
        // Over its budget the client is not read until tokens come back:
        // TCP backpressure slows it, and nobody else waits.
        let wait = budget.wait(now());
        tokio::select! {
            inbound = socket.next(), if wait.is_none() => {
                // Whatever else has already arrived joins this message's
                // batch (as far as the budget allows); an end of the
                // connection found meanwhile takes effect after the batch
                // is handed over, so frames keep their order before Closed.
                let allowed = budget.available(now()).clamp(1, READ_BATCH);
                let mut batch = Vec::new();
                let mut read = 0;
                let mut ended = None;
                let mut next = Some(inbound);
                let mut bytes = 0;
                while let Some(inbound) = next.take() {
                    // Every message counts, text and pings too.
                    read += 1;
                    match Inbound::from(inbound) {
                        Inbound::Frame(frame) => {
                            bytes += frame.len();
                            batch.push(frame);
                        }
                        Inbound::Ignored => {}
                        Inbound::End(reason) => {
                            ended = Some(reason);
                            break;
                        }
                        Inbound::Violation { code, reason } => {
                            ended = Some(reason.clone());
                            violation = Some((code, reason));
                            break;
                        }
                    }
                    if read < allowed && bytes < READ_BATCH_BYTES {
                        next = socket.next().now_or_never();
                    }
                }
                budget.spend(now(), read);
                if !batch.is_empty()
                    && events.send(ClientEvent::Frames { id, frames: batch }).await.is_err()
                {
                    break "node stopping".to_owned();
                }
                if let Some(reason) = ended {
                    break reason;
                }
            },
            () = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {},
            outbound = outbound_rx.recv() => match outbound {
                Some(Outbound::Frame(frame)) => {
                    // Feed every frame already queued (up to WRITE_BATCH and
                    // WRITE_BATCH_BYTES) and flush once: one write system
                    // call per batch instead of one per frame, which
                    // dominated the fan-out to clients.
                    let mut len = frame.len();
                    let mut batch = vec![frame];
                    let mut close = None;
                    while batch.len() < WRITE_BATCH && len < WRITE_BATCH_BYTES {
                        match outbound_rx.try_recv() {
                            Some(Outbound::Frame(more)) => {
                                len += more.len();
                                batch.push(more);
                            }
                            Some(Outbound::Close(reason)) => {
                                close = Some(reason);
                                break;
                            }
                            None => break,
                        }
                    }
                    let sent = tokio::select! {
                        sent = write_batch(&mut socket, batch) => sent,
                        _ = &mut close_deadline => break "closed by the node; client not reading".to_owned(),
                    };
                    outbound_rx.taken(len);
                    if let Err(error) = sent {
                        break format!("send failed: {error}");
                    }
                    if let Some(reason) = close {
                        send_close(&mut socket, &reason, &mut close_deadline).await;
                        break reason;
                    }
                }
                Some(Outbound::Close(reason)) => {
                    send_close(&mut socket, &reason, &mut close_deadline).await;
                    break reason;
                }
                None => break "node dropped the connection".to_owned(),
            },
        }
    };
    if let Some((code, violation)) = violation {
        // Said to the node (counted, logged at WARN once per connection)
        // and to the client with the close code for what it did.
        let _ = events
            .send(ClientEvent::Misbehaved {
                id,
                reason: violation.clone(),
            })
            .await;
        let frame = CloseFrame {
            code,
            reason: truncate(&violation).into(),
        };
        let _ = tokio::time::timeout(CLOSE_GRACE, socket.send(Message::Close(Some(frame)))).await;
    }
    debug!(reason = %RemoteText(&reason), "disconnected");
    let _ = events.send(ClientEvent::Closed { id, reason }).await;
}

/// One message read from a client, as the node is to see it.
enum Inbound {
    /// A non-empty binary message.
    Frame(Bytes),
    /// Text, empty binary, ping or pong: Tundra ignores them.
    Ignored,
    /// The connection ended, and why.
    End(String),
    /// The client broke the WebSocket protocol: it is closed with `code`.
    Violation { code: CloseCode, reason: String },
}

impl From<Option<Result<Message, tokio_tungstenite::tungstenite::Error>>> for Inbound {
    fn from(inbound: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>) -> Self {
        match inbound {
            None => Inbound::End("closed by client".to_owned()),
            Some(Err(WsError::Capacity(error))) => Inbound::Violation {
                code: CloseCode::Size,
                reason: format!("websocket message too big (limits.max_frame_bytes): {error}"),
            },
            // A client that exits or loses its network ends this way: a
            // departure, not misbehaviour.
            Some(Err(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake))) => {
                Inbound::End("connection reset by client".to_owned())
            }
            Some(Err(WsError::Protocol(error))) => Inbound::Violation {
                code: CloseCode::Protocol,
                reason: format!("websocket protocol violation: {error}"),
            },
            Some(Err(WsError::Utf8)) => Inbound::Violation {
                code: CloseCode::Invalid,
                reason: "websocket text message is not UTF-8".to_owned(),
            },
            Some(Err(error)) => Inbound::End(format!("websocket error: {error}")),
            Some(Ok(Message::Binary(frame))) if frame.is_empty() => {
                debug!("empty binary message ignored");
                Inbound::Ignored
            }
            Some(Ok(Message::Binary(frame))) => Inbound::Frame(frame),
            Some(Ok(Message::Text(_))) => {
                debug!("text message ignored");
                Inbound::Ignored
            }
            Some(Ok(Message::Close(_))) => Inbound::End("closed by client".to_owned()),
            Some(Ok(_)) => Inbound::Ignored,
        }
    }
}

/// Writes `frames` with one flush at the end.
async fn write_batch<K>(sink: &mut K, frames: Vec<Bytes>) -> Result<(), K::Error>
where
    K: futures_util::Sink<Message> + Unpin,
{
    for frame in frames {
        sink.feed(Message::Binary(frame)).await?;
    }
    sink.flush().await
}

/// Sends a close frame with `reason`, giving up when the grace runs out.
async fn send_close<K, D>(sink: &mut K, reason: &str, deadline: &mut std::pin::Pin<&mut D>)
where
    K: futures_util::Sink<Message> + Unpin,
    D: std::future::Future<Output = ()>,
{
    let frame = CloseFrame {
        code: CloseCode::Policy,
        reason: truncate(reason).into(),
    };
    tokio::select! {
        _ = sink.send(Message::Close(Some(frame))) => {}
        _ = deadline.as_mut() => {}
    }
}

/// A close reason must fit a control frame (125 bytes, 2 of them the code).
fn truncate(reason: &str) -> String {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_is_a_departure_and_bad_framing_a_violation() {
        let reset = Inbound::from(Some(Err(WsError::Protocol(
            ProtocolError::ResetWithoutClosingHandshake,
        ))));
        assert!(matches!(reset, Inbound::End(_)));
        let masked = Inbound::from(Some(Err(WsError::Protocol(
            ProtocolError::UnmaskedFrameFromClient,
        ))));
        assert!(matches!(
            masked,
            Inbound::Violation {
                code: CloseCode::Protocol,
                ..
            }
        ));
    }
}
