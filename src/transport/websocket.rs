//! WebSocket listener for Tundra clients (reference section 2.1).
//!
//! One Tundra message per binary WebSocket message; text and empty binary
//! messages are ignored as Tundra ignores them; any path, no subprotocol.
//! Frames go to the node as [`ClientEvent`]s; the node answers through a
//! [`ClientHandle`], whose queued byte count lets it stop building updates for
//! a client that does not read (its sync state then coalesces instead).

use std::net::SocketAddr;

use crate::logging::RemoteText;
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tracing::{debug, info, info_span, warn, Instrument};

// The client model is shared by every transport; these names stay here too
// so code written against the WebSocket listener keeps compiling.
pub use super::client::{
    ClientEvent, ClientHandle, ClientOutbound, ClientTransport, ConnectionId, ConnectionIds,
    Outbound, CLOSE_GRACE,
};

/// Most frames written to a client before one flush: bounds the latency
/// a long queue adds to its first frame and the memory of one batch.
const WRITE_BATCH: usize = 256;

/// Most frames read from a client into one [`ClientEvent::Frames`]: the
/// node handles a batch before it flushes its peer links, so this bounds
/// the delay one busy client adds to everything else.
pub const READ_BATCH: usize = 256;

/// Bytes after which a read batch is handed over even if more frames are
/// ready (a batch may end one frame past it): with the bounded event
/// channel this bounds the memory of frames waiting for the node.
const READ_BATCH_BYTES: usize = 16 * 1024;

/// Listener settings.
#[derive(Clone)]
pub struct ListenerOptions {
    pub tls: Option<TlsAcceptor>,
    pub max_frame_bytes: usize,
}

/// Accepts connections until `events` is closed by the node. Connection ids
/// come from `ids`, shared with the node's other listeners.
pub async fn serve(
    listener: TcpListener,
    options: ListenerOptions,
    ids: ConnectionIds,
    events: mpsc::Sender<ClientEvent>,
) {
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Typically EMFILE; back off instead of spinning.
                    warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = events.closed() => return,
        };
        let id = ids.next();
        // Tundra's server sets TCP_NODELAY; small sync messages must not wait.
        let _ = tcp.set_nodelay(true);
        let options = options.clone();
        let events = events.clone();
        let span = info_span!("client", conn = %id, %addr);
        tokio::spawn(
            async move {
                match options.tls.clone() {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(stream) => run_connection(stream, id, addr, &options, events).await,
                        Err(error) => info!(error = %RemoteText(&error), "tls handshake failed"),
                    },
                    None => run_connection(tcp, id, addr, &options, events).await,
                }
            }
            .instrument(span),
        );
    }
}

async fn run_connection<S>(
    stream: S,
    id: ConnectionId,
    addr: SocketAddr,
    options: &ListenerOptions,
    events: mpsc::Sender<ClientEvent>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .max_message_size(Some(options.max_frame_bytes))
        .max_frame_size(Some(options.max_frame_bytes));
    let socket = match tokio_tungstenite::accept_async_with_config(stream, Some(config)).await {
        Ok(socket) => socket,
        Err(error) => {
            info!(error = %RemoteText(&error), "websocket handshake failed");
            return;
        }
    };
    let (mut sink, mut source) = socket.split();
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
    let reason = loop {
        tokio::select! {
            inbound = source.next() => {
                // Whatever else has already arrived joins this message's
                // batch; an end of the connection found meanwhile takes
                // effect after the batch is handed over, so frames keep
                // their order before Closed.
                let mut batch = Vec::new();
                let mut ended = None;
                let mut next = Some(inbound);
                let mut bytes = 0;
                while let Some(inbound) = next.take() {
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
                    }
                    if batch.len() < READ_BATCH && bytes < READ_BATCH_BYTES {
                        next = source.next().now_or_never();
                    }
                }
                if !batch.is_empty()
                    && events.send(ClientEvent::Frames { id, frames: batch }).await.is_err()
                {
                    break "node stopping".to_owned();
                }
                if let Some(reason) = ended {
                    break reason;
                }
            },
            outbound = outbound_rx.recv() => match outbound {
                Some(Outbound::Frame(frame)) => {
                    // Feed every frame already queued (up to WRITE_BATCH) and
                    // flush once: one write system call per batch instead of
                    // one per frame, which dominated the fan-out to clients.
                    let mut len = frame.len();
                    let mut batch = vec![frame];
                    let mut close = None;
                    while batch.len() < WRITE_BATCH {
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
                        sent = write_batch(&mut sink, batch) => sent,
                        _ = &mut close_deadline => break "closed by the node; client not reading".to_owned(),
                    };
                    outbound_rx.taken(len);
                    if let Err(error) = sent {
                        break format!("send failed: {error}");
                    }
                    if let Some(reason) = close {
                        send_close(&mut sink, &reason, &mut close_deadline).await;
                        break reason;
                    }
                }
                Some(Outbound::Close(reason)) => {
                    send_close(&mut sink, &reason, &mut close_deadline).await;
                    break reason;
                }
                None => break "node dropped the connection".to_owned(),
            },
        }
    };
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
}

impl From<Option<Result<Message, tokio_tungstenite::tungstenite::Error>>> for Inbound {
    fn from(inbound: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>) -> Self {
        match inbound {
            None => Inbound::End("closed by client".to_owned()),
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
