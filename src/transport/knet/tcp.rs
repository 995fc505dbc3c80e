//! The kNet TCP driver (docs/knet-wire.md §3, whose sections are cited
//! below): one task per connection moves bytes between a
//! `TcpStream` and the sans-IO [`TcpConnection`], and Tundra frames between
//! the connection and its owner (the node for an accepted client, the
//! dialer's owner for [`run_client`]).
//!
//! The loop never blocks on one direction: reads, writes (`try_write` when
//! the socket is writable), the owner's frames and the connection's timer are
//! all waited on together, so a peer that does not read cannot stop us from
//! answering its pings, and two of our own ends cannot deadlock each other.
//! Frames are taken from the owner only while the bytes not yet written stay
//! under [`WRITE_HIGH_WATER`]; beyond it they wait in the owner's queue, where
//! the node sees them through `ClientHandle::queued_bytes`.
//!
//! Closing is a FIN (`shutdown`), after the queued bytes are written, within
//! [`CLOSE_GRACE`]; kNet sends no message on close (§3.2). When the peer
//! closes, we close our side at once too, as Tundra does.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, trace};

use super::{ClientCommand, ClientInbound};
use crate::clock::Time;
use crate::knet::ids::MessageId;
use crate::knet::tcp::{TcpConfig, TcpConnection, TcpEvent};
use crate::logging::RemoteText;
use crate::transport::client::{
    ClientEvent, ClientHandle, ClientOutbound, ClientTransport, ConnectionId, Outbound, CLOSE_GRACE,
};
use crate::transport::loop_timer::LoopTimer;
use crate::transport::message_budget::{BudgetConfig, MessageBudget};

/// Most bytes read from the socket at once: kNet's own receive buffer size
/// on accepted sockets, and what bounds the connection's inbound buffer
/// beyond one message.
const READ_CHUNK: usize = 64 * 1024;

/// Fewest bytes read at once while a client is near its message budget: a
/// kNet message takes at least 2 bytes (length and id), so a read of
/// `2 × available` bytes cannot overdraw the budget; this floor keeps large
/// messages moving, at the cost of a debt of at most 2,048 messages, paid
/// off before the next read.
const BUDGET_READ_FLOOR: usize = 4 * 1024;

/// Smallest kNet TCP message: a one-byte length and a one-byte id.
const MIN_MESSAGE_BYTES: usize = 2;

/// Unwritten bytes (in the connection and in this task) above which no more
/// frames are taken from the owner: one kNet send buffer (§3.1), enough to
/// keep the socket busy, small enough that backpressure reaches the owner.
pub const WRITE_HIGH_WATER: usize = 64 * 1024;

/// Most chunks handed to one vectored write.
const WRITE_SLICES: usize = 16;

/// Most frames in one delivery to the owner (as the WebSocket listener's
/// `READ_BATCH`): bounds the delay one busy client adds to the node loop.
const READ_BATCH: usize = 256;

/// Bytes after which a delivery is handed over even if more frames are ready
/// (a batch may end one frame past it); with the owner's bounded channel
/// this bounds the memory of frames waiting for it.
const READ_BATCH_BYTES: usize = 16 * 1024;

/// Serves one accepted kNet TCP client for the node until either side
/// closes; always ends with [`ClientEvent::Closed`] (unless the node is gone
/// before `Connected` could be delivered). The caller opens the span.
pub async fn serve_connection(
    stream: TcpStream,
    id: ConnectionId,
    addr: SocketAddr,
    config: TcpConfig,
    budget: BudgetConfig,
    events: mpsc::Sender<ClientEvent>,
) {
    // Tundra sets TCP_NODELAY on both ends (§3.1); sync messages are small.
    let _ = stream.set_nodelay(true);
    let (handle, outbound) = ClientHandle::pair();
    let connected = ClientEvent::Connected {
        id,
        addr,
        transport: ClientTransport::KnetTcp,
        handle,
    };
    if events.send(connected).await.is_err() {
        return;
    }
    debug!("connected");
    let mut owner = NodeOwner {
        id,
        events: events.clone(),
        outbound,
    };
    let reason = drive(stream, config, budget, &mut owner).await;
    debug!(reason = %RemoteText(&reason), "disconnected");
    if reason.starts_with(crate::knet::tcp::PROTOCOL_ERROR) {
        let _ = events
            .send(ClientEvent::Misbehaved {
                id,
                reason: reason.clone(),
            })
            .await;
    }
    let _ = events.send(ClientEvent::Closed { id, reason }).await;
}

/// Runs the client side of a dialed kNet TCP connection: frames from
/// `commands` go out, frames received go to `inbound`, which always ends
/// with [`ClientInbound::Closed`].
pub async fn run_client(
    stream: TcpStream,
    commands: mpsc::UnboundedReceiver<ClientCommand>,
    inbound: mpsc::Sender<ClientInbound>,
    config: TcpConfig,
) {
    let _ = stream.set_nodelay(true);
    let mut owner = DialerOwner {
        commands,
        inbound: inbound.clone(),
    };
    // A server we dialed is not budgeted.
    let reason = drive(stream, config, BudgetConfig::UNLIMITED, &mut owner).await;
    debug!(reason = %RemoteText(&reason), "disconnected");
    let _ = inbound.send(ClientInbound::Closed(reason)).await;
}

/// What the owner asks of the connection.
enum Command {
    Frame(Bytes),
    Close(String),
    /// The owner asked to close, and the close waits behind frames we are
    /// not taking: the close grace starts now.
    CloseAsked,
}

/// The two kinds of owner, as the loop needs them.
trait Owner {
    /// Hands received frames over; false if the owner is gone.
    async fn deliver(&mut self, frames: Vec<Bytes>) -> bool;
    /// The next command if `take`; otherwise resolves only when the owner
    /// asks to close past a queue we are not taking from (once), so that
    /// the close grace can start.
    async fn next(&mut self, take: bool, watch_close: bool) -> Command;
    /// A command that is ready now.
    fn try_next(&mut self) -> Option<Command>;
    /// `bytes` of frames left the owner's queue.
    fn taken(&self, bytes: usize);
}

/// The node, for an accepted client.
struct NodeOwner {
    id: ConnectionId,
    events: mpsc::Sender<ClientEvent>,
    outbound: ClientOutbound,
}

impl Owner for NodeOwner {
    async fn deliver(&mut self, frames: Vec<Bytes>) -> bool {
        let event = ClientEvent::Frames {
            id: self.id,
            frames,
        };
        self.events.send(event).await.is_ok()
    }

    async fn next(&mut self, take: bool, watch_close: bool) -> Command {
        if take {
            return match self.outbound.recv().await {
                Some(Outbound::Frame(frame)) => Command::Frame(frame),
                Some(Outbound::Close(reason)) => Command::Close(reason),
                None => Command::Close("node dropped the connection".to_owned()),
            };
        }
        if watch_close {
            self.outbound.closing().await;
            return Command::CloseAsked;
        }
        std::future::pending().await
    }

    fn try_next(&mut self) -> Option<Command> {
        match self.outbound.try_recv()? {
            Outbound::Frame(frame) => Some(Command::Frame(frame)),
            Outbound::Close(reason) => Some(Command::Close(reason)),
        }
    }

    fn taken(&self, bytes: usize) {
        self.outbound.taken(bytes);
    }
}

/// The owner of a dialed connection.
struct DialerOwner {
    commands: mpsc::UnboundedReceiver<ClientCommand>,
    inbound: mpsc::Sender<ClientInbound>,
}

impl DialerOwner {
    fn command(command: Option<ClientCommand>) -> Command {
        match command {
            Some(ClientCommand::Frame(frame)) => Command::Frame(frame),
            Some(ClientCommand::Close) => Command::Close("closed locally".to_owned()),
            None => Command::Close("owner dropped the connection".to_owned()),
        }
    }
}

impl Owner for DialerOwner {
    async fn deliver(&mut self, frames: Vec<Bytes>) -> bool {
        self.inbound
            .send(ClientInbound::Frames(frames))
            .await
            .is_ok()
    }

    async fn next(&mut self, take: bool, _watch_close: bool) -> Command {
        if take {
            return Self::command(self.commands.recv().await);
        }
        // No close signal besides the queue: a dialer's close waits its turn.
        std::future::pending().await
    }

    fn try_next(&mut self) -> Option<Command> {
        match self.commands.try_recv() {
            Ok(command) => Some(Self::command(Some(command))),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(Self::command(None)),
        }
    }

    fn taken(&self, _bytes: usize) {}
}

/// Bytes handed out by the connection and not yet written.
#[derive(Default)]
struct Unwritten {
    chunks: VecDeque<Bytes>,
    len: usize,
}

impl Unwritten {
    fn take_from(&mut self, conn: &mut TcpConnection) {
        while let Some(chunk) = conn.poll_transmit() {
            self.len += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes what the socket takes without waiting.
    fn try_write(&mut self, stream: &TcpStream) -> std::io::Result<()> {
        let slices: Vec<IoSlice<'_>> = self
            .chunks
            .iter()
            .take(WRITE_SLICES)
            .map(|chunk| IoSlice::new(chunk))
            .collect();
        let mut written = match stream.try_write_vectored(&slices) {
            Ok(written) => written,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(error) => return Err(error),
        };
        self.len -= written;
        while written > 0 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let step = written.min(front.len());
            front.advance(step);
            written -= step;
            if front.is_empty() {
                self.chunks.pop_front();
            }
        }
        Ok(())
    }

    /// Writes everything, waiting for the socket.
    async fn write_all(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        while let Some(chunk) = self.chunks.pop_front() {
            self.len -= chunk.len();
            stream.write_all(&chunk).await?;
        }
        Ok(())
    }
}

/// The per-connection protocol clock: microseconds since the task started.
struct Clock(Instant);

impl Clock {
    fn now(&self) -> Time {
        Time::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn instant(&self, time: Time) -> Instant {
        // Halved so that a far-future timer cannot overflow `Instant`.
        self.0 + Duration::from_micros(time.as_micros().min(u64::MAX / 2))
    }
}

/// The loop shared by both roles; returns why the connection ended.
async fn drive<O: Owner>(
    stream: TcpStream,
    config: TcpConfig,
    budget: BudgetConfig,
    owner: &mut O,
) -> String {
    let clock = Clock(Instant::now());
    let mut budget = MessageBudget::new(budget, clock.now());
    let mut conn = TcpConnection::new(config, clock.now());
    // The first PingRequest leaves before anything else (§3.2: "first one
    // immediately at connection start").
    conn.handle_timeout(clock.now());
    let mut unwritten = Unwritten::default();
    let mut read_buf = vec![0u8; READ_CHUNK];
    // Set once the owner asked to close past frames still queued.
    let mut close_deadline: Option<Instant> = None;
    let mut timer = LoopTimer::new();
    let mut close_timer = LoopTimer::new();
    loop {
        // Everything the last step produced: received frames, then bytes.
        if let Some(reason) = deliver_events(&mut conn, owner, &mut budget, clock.now()).await {
            return finish(stream, &mut conn, &mut unwritten, reason).await;
        }
        unwritten.take_from(&mut conn);
        let take = unwritten.len + conn.unsent_bytes() < WRITE_HIGH_WATER;
        timer.set(conn.poll_timeout().map(|at| clock.instant(at)));
        close_timer.set(close_deadline);
        // Over its message budget the peer is not read: TCP slows it.
        let read_wait = budget.wait(clock.now());
        let read_len = budget
            .available(clock.now())
            .saturating_mul(MIN_MESSAGE_BYTES)
            .clamp(BUDGET_READ_FLOOR, READ_CHUNK);
        tokio::select! {
            () = tokio::time::sleep(read_wait.unwrap_or_default()), if read_wait.is_some() => {}
            ready = stream.readable(), if read_wait.is_none() => {
                if let Err(error) = ready {
                    return format!("receive failed: {error}");
                }
                match stream.try_read(&mut read_buf[..read_len]) {
                    Ok(0) => conn.handle_eof(),
                    Ok(n) => {
                        trace!(bytes = n, "received");
                        conn.handle_bytes(clock.now(), &read_buf[..n]);
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(error) => return format!("receive failed: {error}"),
                }
            }
            ready = stream.writable(), if !unwritten.is_empty() => {
                if let Err(error) = ready.and_then(|()| unwritten.try_write(&stream)) {
                    return format!("send failed: {error}");
                }
            }
            command = owner.next(take, close_deadline.is_none()) => match command {
                Command::CloseAsked => {
                    close_deadline = Some(Instant::now() + CLOSE_GRACE);
                }
                Command::Frame(frame) => {
                    let mut taken = frame.len();
                    queue_frame(&mut conn, &frame);
                    let mut close = None;
                    while unwritten.len + conn.unsent_bytes() < WRITE_HIGH_WATER {
                        match owner.try_next() {
                            Some(Command::Frame(frame)) => {
                                taken += frame.len();
                                queue_frame(&mut conn, &frame);
                            }
                            Some(Command::Close(reason)) => {
                                close = Some(reason);
                                break;
                            }
                            Some(Command::CloseAsked) | None => break,
                        }
                    }
                    owner.taken(taken);
                    if let Some(reason) = close {
                        conn.close();
                        return finish(stream, &mut conn, &mut unwritten, reason).await;
                    }
                }
                Command::Close(reason) => {
                    conn.close();
                    return finish(stream, &mut conn, &mut unwritten, reason).await;
                }
            },
            () = timer.fired() => conn.handle_timeout(clock.now()),
            () = close_timer.fired() => {
                return "closed by the owner; peer not reading".to_owned();
            }
        }
    }
}

/// Queues one outbound Tundra frame; a frame the wire cannot carry is
/// dropped (the node never builds one; a log line says if it did).
fn queue_frame(conn: &mut TcpConnection, frame: &[u8]) {
    if let Err(error) = conn.send_tundra(frame) {
        debug!(%error, len = frame.len(), "outbound frame dropped");
    }
}

/// Hands every received message to the owner as Tundra frames, in batches;
/// returns the close reason if the connection reported its end.
/// Every message delivered spends the budget.
async fn deliver_events<O: Owner>(
    conn: &mut TcpConnection,
    owner: &mut O,
    budget: &mut MessageBudget,
    now: Time,
) -> Option<String> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    let mut closed = None;
    while let Some(event) = conn.poll_event() {
        match event {
            TcpEvent::Message { id, payload } => {
                budget.spend(now, 1);
                match tundra_frame(id, &payload) {
                    Some(frame) => {
                        bytes += frame.len();
                        batch.push(frame);
                    }
                    None => debug!(%id, len = payload.len(), "non-Tundra message dropped"),
                }
            }
            TcpEvent::Closed { reason } => {
                closed = Some(reason);
                break;
            }
        }
        if batch.len() >= READ_BATCH || bytes >= READ_BATCH_BYTES {
            if !owner.deliver(std::mem::take(&mut batch)).await {
                conn.close();
                return Some("owner stopping".to_owned());
            }
            bytes = 0;
        }
    }
    if !batch.is_empty() && !owner.deliver(batch).await {
        conn.close();
        return Some("owner stopping".to_owned());
    }
    closed
}

/// A kNet message as a Tundra frame (u16 LE id + payload); `None` for ids
/// that are no Tundra message: above u16, or kNet's internal ids, which a
/// TCP peer should never send (§3.2).
fn tundra_frame(id: MessageId, payload: &[u8]) -> Option<Bytes> {
    let short = u16::try_from(id.0).ok()?;
    if id.is_transport_internal() {
        return None;
    }
    let mut frame = Vec::with_capacity(2 + payload.len());
    frame.extend_from_slice(&short.to_le_bytes());
    frame.extend_from_slice(payload);
    Some(Bytes::from(frame))
}

/// Writes what is queued, then sends FIN, within [`CLOSE_GRACE`].
async fn finish(
    mut stream: TcpStream,
    conn: &mut TcpConnection,
    unwritten: &mut Unwritten,
    reason: String,
) -> String {
    unwritten.take_from(conn);
    let flush = async {
        unwritten.write_all(&mut stream).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout(CLOSE_GRACE, flush).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => debug!(%error, "close: write failed"),
        Err(_) => debug!(bytes = unwritten.len, "close: peer not reading; dropped"),
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tundra_frames_from_messages() {
        assert_eq!(
            tundra_frame(MessageId(100), &[0xaa]).as_deref(),
            Some(&[0x64, 0x00, 0xaa][..])
        );
        assert_eq!(
            tundra_frame(MessageId(0xFFFF), &[]).as_deref(),
            Some(&[0xff, 0xff][..])
        );
        assert_eq!(tundra_frame(MessageId(0x1_0000), &[]), None);
        assert_eq!(tundra_frame(MessageId(4), &[]), None);
        assert_eq!(tundra_frame(MessageId::DISCONNECT, &[]), None);
    }
}
