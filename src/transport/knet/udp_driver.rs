//! The loop around one sans-IO [`UdpConnection`]: datagrams in, the
//! connection's timer, frames from its owner (the node or a client user),
//! datagrams out. Shared by the listener's connections and the client.
//!
//! Backpressure: frames are taken from the owner only while the
//! connection's own unsent queue is short, so a native client that cannot
//! keep up (or the pacing rate) shows in the owner's queued bytes, where the
//! node's sync state coalesces, exactly as for a WebSocket client.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, trace};

use super::batch_socket::{BatchSocket, MAX_SEND_BYTES};
use super::{ClientCommand, ClientInbound};
use crate::clock::Time;
use crate::knet::udp::{CloseReason, Role, UdpConfig, UdpConnection, UdpEvent};
use crate::logging::RemoteText;
use crate::transport::client::{ClientEvent, ClientOutbound, ConnectionId, Outbound};
use crate::transport::loop_timer::LoopTimer;
use crate::transport::message_budget::{BudgetConfig, MessageBudget};
use crate::transport::websocket::{CLOSE_GRACE, READ_BATCH};

/// Datagrams handled before the frames they carried are handed over, so one
/// busy client's batch stays bounded like a WebSocket read batch.
const DATAGRAM_BATCH: usize = 64;

/// Why a driver loop ended.
#[derive(Debug)]
pub enum DriverEnd {
    /// The kNet connection closed (peer, local close, timeout, error).
    Closed(CloseReason),
    /// The endpoint never answered the node's first datagram.
    HalfOpenTimeout,
    /// The owner went away (node stopping, client dropped).
    NodeStopped,
}

impl DriverEnd {
    /// Whether the remote party broke the protocol.
    pub fn is_protocol_error(&self) -> bool {
        matches!(self, DriverEnd::Closed(CloseReason::ProtocolError(_)))
    }
}

impl fmt::Display for DriverEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverEnd::Closed(reason) => match reason {
                CloseReason::PeerDisconnected => f.write_str("disconnected by the peer"),
                CloseReason::LocalDisconnect => f.write_str("disconnected"),
                CloseReason::TimedOut => f.write_str("timed out: nothing heard for 15 s"),
                CloseReason::ProtocolError(error) => write!(f, "protocol error: {error}"),
                CloseReason::ConnectFailed => {
                    f.write_str("connect failed: the server did not answer")
                }
                CloseReason::Refused { count, over } => write!(
                    f,
                    "connection refused: the peer's port refused {count} datagram(s) over {} ms, nothing heard meanwhile (nothing listens there)",
                    over.as_millis()
                ),
            },
            DriverEnd::HalfOpenTimeout => f.write_str("no answer to the first datagram"),
            DriverEnd::NodeStopped => f.write_str("node stopping"),
        }
    }
}

/// Where a connection's datagrams go.
enum Socket {
    /// The listener's socket, shared by every client, and this client's
    /// address: runs of equal-sized datagrams leave in one send.
    Listener(Arc<BatchSocket>, SocketAddr),
    /// A client's own connected socket.
    Connected(Arc<UdpSocket>),
}

/// A connection with its socket, its peer and its clock.
pub struct UdpDriver {
    socket: Socket,
    connection: UdpConnection,
    config: UdpConfig,
    origin: Instant,
    datagram: Vec<u8>,
    /// Datagrams of equal size gathered for one send on the listener.
    run: Vec<u8>,
    /// Frames received and not yet handed over.
    frames: Vec<Bytes>,
    /// Why the connection ended, once its Closed event was collected.
    close_reason: Option<CloseReason>,
}

impl UdpDriver {
    /// The node's side of an endpoint that sent a connection attempt.
    pub fn server(socket: Arc<BatchSocket>, peer: SocketAddr, config: UdpConfig) -> Self {
        Self::new(Socket::Listener(socket, peer), Role::Server, config)
    }

    /// A client on a connected socket.
    pub fn client(socket: Arc<UdpSocket>, config: UdpConfig) -> Self {
        Self::new(Socket::Connected(socket), Role::Client, config)
    }

    fn new(socket: Socket, role: Role, config: UdpConfig) -> Self {
        let origin = Instant::now();
        UdpDriver {
            socket,
            connection: UdpConnection::new(role, config.clone(), Time::ZERO),
            config,
            origin,
            datagram: Vec::with_capacity(crate::knet::datagram::MAX_SEND_DATAGRAM),
            run: Vec::new(),
            frames: Vec::new(),
            close_reason: None,
        }
    }

    fn now(&self) -> Time {
        Time::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn deadline(&self) -> Option<Instant> {
        self.connection
            .poll_timeout()
            .map(|at| self.origin + Duration::from_micros(at.as_micros()))
    }

    /// Sends every datagram the connection has ready.
    async fn flush(&mut self) {
        let now = self.now();
        let (socket, peer) = match &self.socket {
            Socket::Connected(socket) => {
                let socket = socket.clone();
                while self.connection.poll_transmit(now, &mut self.datagram) {
                    let sent = socket.send(&self.datagram).await.map(drop);
                    self.sent(now, sent);
                }
                return;
            }
            Socket::Listener(socket, peer) => (socket.clone(), *peer),
        };
        // A run: datagrams of the first one's size, and at most one shorter
        // to end it (what GSO can cut apart again).
        let mut segment = 0;
        loop {
            let more = self.connection.poll_transmit(now, &mut self.datagram);
            let fits = more
                && self.datagram.len() <= segment
                && self.run.len() / segment.max(1) < socket.max_segments()
                && self.run.len() + self.datagram.len() <= MAX_SEND_BYTES;
            if !fits && !self.run.is_empty() {
                let sent = socket.send(peer, &self.run, Some(segment)).await;
                self.sent(now, sent);
                self.run.clear();
            }
            if !more {
                return;
            }
            if self.run.is_empty() {
                segment = self.datagram.len();
            }
            let shorter = self.datagram.len() < segment;
            self.run.extend_from_slice(&self.datagram);
            if shorter {
                let sent = socket.send(peer, &self.run, Some(segment)).await;
                self.sent(now, sent);
                self.run.clear();
            }
        }
    }

    /// The connection's re-sends and timeout deal with a lost datagram; a
    /// refusal (an ICMP error the socket reports on the next call) counts
    /// toward the peer's loss.
    fn sent(&mut self, now: Time, sent: std::io::Result<()>) {
        if let Err(error) = sent {
            debug!(%error, "kNet datagram not sent");
            if error.kind() == std::io::ErrorKind::ConnectionRefused {
                self.connection.handle_unreachable(now);
            }
        }
    }

    /// Moves the connection's events into `frames`, and its close reason
    /// into `close_reason`. Run after every datagram, so a batch counts the
    /// messages it brought against the client's budget.
    fn collect(&mut self) {
        while let Some(event) = self.connection.poll_event() {
            match event {
                UdpEvent::Connected => debug!("server answered"),
                UdpEvent::Message { id, payload, .. } => match u16::try_from(id.0) {
                    // Tundra's ids are 100-124; any other u16 id goes on and
                    // the Tundra layer ignores or refuses it as it would over
                    // WebSocket.
                    Ok(short) => {
                        let mut frame = Vec::with_capacity(2 + payload.len());
                        frame.extend_from_slice(&short.to_le_bytes());
                        frame.extend_from_slice(&payload);
                        self.frames.push(Bytes::from(frame));
                    }
                    Err(_) => trace!(id = id.0, "message id beyond Tundra's range dropped"),
                },
                UdpEvent::Closed { reason } => {
                    self.close_reason.get_or_insert(reason);
                }
            }
        }
    }

    /// Moves the events into `frames`; the close reason once the
    /// connection is over. A closed connection has queued its Closed event;
    /// the fallback only guards against spinning if it ever did not.
    fn take_close_reason(&mut self) -> Option<CloseReason> {
        self.collect();
        self.close_reason.take().or_else(|| {
            self.connection
                .is_closed()
                .then_some(CloseReason::LocalDisconnect)
        })
    }

    fn handle(&mut self, datagram: &[u8]) {
        let now = self.now();
        self.connection.handle_datagram(now, datagram);
        self.collect();
    }

    /// Takes `first` and whatever else is queued, up to a batch or until
    /// `frame_limit` frames are waiting; returns how many frames it added
    /// (a datagram may carry several).
    fn handle_batch(
        &mut self,
        first: Bytes,
        inbox: &mut mpsc::Receiver<Bytes>,
        frame_limit: usize,
    ) -> usize {
        let before = self.frames.len();
        self.handle(&first);
        for _ in 1..DATAGRAM_BATCH {
            if self.frames.len() - before >= frame_limit.min(READ_BATCH) {
                break;
            }
            match inbox.try_recv() {
                Ok(more) => self.handle(&more),
                Err(_) => break,
            }
        }
        self.frames.len() - before
    }

    /// Sends the first datagram and waits for the endpoint's answer.
    pub async fn until_answered(
        &mut self,
        inbox: &mut mpsc::Receiver<Bytes>,
        limit: Duration,
    ) -> Result<(), DriverEnd> {
        let give_up = Instant::now() + limit;
        loop {
            self.flush().await;
            let deadline = self.deadline().unwrap_or(give_up).min(give_up);
            tokio::select! {
                datagram = inbox.recv() => match datagram {
                    Some(datagram) => {
                        self.handle(&datagram);
                        if self.connection.is_closed() {
                            let reason = self.close_reason.take();
                            return Err(reason.map_or(DriverEnd::NodeStopped, DriverEnd::Closed));
                        }
                        return Ok(());
                    }
                    None => return Err(DriverEnd::NodeStopped),
                },
                _ = tokio::time::sleep_until(deadline) => {
                    if Instant::now() >= give_up {
                        return Err(DriverEnd::HalfOpenTimeout);
                    }
                    let now = self.now();
                    self.connection.handle_timeout(now);
                }
            }
        }
    }

    /// Serves an answered connection for the node until it ends.
    pub async fn serve_node(
        &mut self,
        inbox: &mut mpsc::Receiver<Bytes>,
        mut outbound: ClientOutbound,
        id: ConnectionId,
        budget: BudgetConfig,
        events: &mpsc::Sender<ClientEvent>,
    ) -> DriverEnd {
        let mut budget = MessageBudget::new(budget, self.now());
        // Set once the node asked to close: queued frames go out first (a
        // refused login's reply must arrive), then Disconnect.
        let mut close_requested: Option<Instant> = None;
        let mut disconnecting = false;
        let mut timer = LoopTimer::new();
        loop {
            let closed = self.take_close_reason();
            if !self.frames.is_empty() {
                let frames = std::mem::take(&mut self.frames);
                if events
                    .send(ClientEvent::Frames { id, frames })
                    .await
                    .is_err()
                {
                    return DriverEnd::NodeStopped;
                }
            }
            if let Some(reason) = closed {
                self.flush().await;
                return DriverEnd::Closed(reason);
            }
            if let Some(since) = close_requested {
                if !disconnecting
                    && (self.connection.unsent_bytes() == 0 || since.elapsed() >= CLOSE_GRACE)
                {
                    let now = self.now();
                    self.connection.close(now);
                    disconnecting = true;
                }
            }
            self.flush().await;
            // Sending a DisconnectAck closes the connection: report it now.
            if self.connection.is_closed() {
                continue;
            }
            let room = close_requested.is_none()
                && self.connection.unsent_bytes() < self.config.max_unsent_bytes;
            timer.set(self.deadline());
            // Over its message budget the client's datagrams wait in its
            // bounded queue, and past it are dropped: kNet re-sends what
            // was reliable, and its flow control slows the client.
            let read_wait = budget.wait(self.now());
            tokio::select! {
                () = tokio::time::sleep(read_wait.unwrap_or_default()), if read_wait.is_some() => {}
                datagram = inbox.recv(), if read_wait.is_none() => match datagram {
                    Some(datagram) => {
                        let limit = budget.available(self.now()).max(1);
                        let frames = self.handle_batch(datagram, inbox, limit);
                        budget.spend(self.now(), frames);
                    }
                    None => {
                        // The listener stopped (the node is shutting down):
                        // say goodbye rather than leave the client to time out.
                        let now = self.now();
                        self.connection.close(now);
                        self.flush().await;
                        return DriverEnd::NodeStopped;
                    }
                },
                () = timer.fired() => {
                    let now = self.now();
                    self.connection.handle_timeout(now);
                }
                next = outbound.recv(), if room => match next {
                    Some(first) => {
                        let mut next = Some(first);
                        while let Some(item) = next.take() {
                            match item {
                                Outbound::Frame(frame) => {
                                    self.connection.send_tundra(&frame);
                                    outbound.taken(frame.len());
                                }
                                Outbound::Close(reason) => {
                                    debug!(reason = %RemoteText(&reason), "closing at the node's request");
                                    close_requested = Some(Instant::now());
                                    break;
                                }
                            }
                            if self.connection.unsent_bytes() < self.config.max_unsent_bytes {
                                next = outbound.try_recv();
                            }
                        }
                    }
                    None => return DriverEnd::NodeStopped,
                },
                _ = tokio::time::sleep(CLOSE_GRACE), if close_requested.is_some() => {}
            }
        }
    }

    /// Serves a client connection for its user until it ends. `refusals`
    /// carries the "connection refused" errors the socket reported.
    pub async fn serve_client(
        &mut self,
        inbox: &mut mpsc::Receiver<Bytes>,
        refusals: &mut mpsc::Receiver<()>,
        commands: &mut mpsc::UnboundedReceiver<ClientCommand>,
        inbound: &mpsc::Sender<ClientInbound>,
    ) -> DriverEnd {
        let mut commands_open = true;
        let mut timer = LoopTimer::new();
        loop {
            let closed = self.take_close_reason();
            if !self.frames.is_empty() {
                let frames = std::mem::take(&mut self.frames);
                if inbound.send(ClientInbound::Frames(frames)).await.is_err() {
                    return DriverEnd::NodeStopped;
                }
            }
            if let Some(reason) = closed {
                self.flush().await;
                return DriverEnd::Closed(reason);
            }
            self.flush().await;
            // Sending a DisconnectAck closes the connection: report it now.
            if self.connection.is_closed() {
                continue;
            }
            let room =
                commands_open && self.connection.unsent_bytes() < self.config.max_unsent_bytes;
            timer.set(self.deadline());
            tokio::select! {
                datagram = inbox.recv() => match datagram {
                    Some(datagram) => {
                        self.handle_batch(datagram, inbox, READ_BATCH);
                    }
                    None => return DriverEnd::NodeStopped,
                },
                Some(()) = refusals.recv() => {
                    let now = self.now();
                    self.connection.handle_unreachable(now);
                }
                () = timer.fired() => {
                    let now = self.now();
                    self.connection.handle_timeout(now);
                }
                command = commands.recv(), if room => match command {
                    Some(ClientCommand::Frame(frame)) => {
                        self.connection.send_tundra(&frame);
                        while self.connection.unsent_bytes() < self.config.max_unsent_bytes {
                            match commands.try_recv() {
                                Ok(ClientCommand::Frame(frame)) => self.connection.send_tundra(&frame),
                                Ok(ClientCommand::Close) => {
                                    let now = self.now();
                                    self.connection.close(now);
                                    commands_open = false;
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                    }
                    Some(ClientCommand::Close) | None => {
                        // A dropped sender is a close too: the user is gone.
                        let now = self.now();
                        self.connection.close(now);
                        commands_open = false;
                    }
                },
            }
        }
    }
}
