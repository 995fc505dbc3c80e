//! One Tundra client connection as the node sees it, whatever carries it
//! (WebSocket, kNet over UDP, kNet over TCP).
//!
//! Owns the connection ids shared by every listener of a node, the events a
//! transport hands the node ([`ClientEvent`]), and the queue between them
//! ([`ClientHandle`] on the node's side, [`ClientOutbound`] on the
//! transport's). Frames in both directions are WebSocket-style Tundra frames
//! (u16 LE message id + payload) for every transport; a transport converts
//! its own framing at its edge. Nothing here touches a socket.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

pub use crate::tundra::ClientTransport;

/// How long a closing connection may take to flush what is queued.
pub const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Identifies one client connection for the lifetime of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

impl std::fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Hands out [`ConnectionId`]s: one counter shared (cloned) by every
/// listener of a node, so ids are unique across transports.
#[derive(Debug, Clone, Default)]
pub struct ConnectionIds(Arc<AtomicU64>);

impl ConnectionIds {
    /// The next id: from 1, never reused.
    pub fn next(&self) -> ConnectionId {
        ConnectionId(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// What a listener tells the node.
#[derive(Debug)]
pub enum ClientEvent {
    Connected {
        id: ConnectionId,
        addr: SocketAddr,
        transport: ClientTransport,
        handle: ClientHandle,
    },
    /// Tundra frames (each u16 LE message id + payload) that arrived
    /// together, in order: one event, so the channel and the node loop's
    /// wake-up are paid per batch, not per frame.
    Frames {
        id: ConnectionId,
        frames: Vec<Bytes>,
    },
    /// The transport closed the connection because the remote party broke
    /// its protocol (a malformed kNet datagram or stream); a `Closed`
    /// follows. Counted and logged as misbehaviour.
    Misbehaved {
        id: ConnectionId,
        reason: String,
    },
    Closed {
        id: ConnectionId,
        reason: String,
    },
}

/// What the node asks a transport to do with a connection, in order.
#[derive(Debug)]
pub enum Outbound {
    /// One Tundra frame (u16 LE message id + payload).
    Frame(Bytes),
    /// Close after the frames before it, with this reason.
    Close(String),
}

/// What crosses the channel: the frames of one write together, so a
/// client written 150 frames at once costs one channel operation and one
/// wake-up of its connection task, not 150.
#[derive(Debug)]
enum Queued {
    Frames(Vec<Bytes>),
    Close(String),
}

/// Set once the node asked to close; wakes every waiter.
#[derive(Debug, Default)]
struct Closing {
    asked: AtomicBool,
    notify: Notify,
}

/// The node's side of one client connection.
#[derive(Debug, Clone)]
pub struct ClientHandle {
    outbound: mpsc::UnboundedSender<Queued>,
    queued: Arc<AtomicUsize>,
    closing: Arc<Closing>,
}

/// The transport's side of one client connection: the frames the node
/// queued, and the byte count the transport gives back as it takes them.
#[derive(Debug)]
pub struct ClientOutbound {
    outbound: mpsc::UnboundedReceiver<Queued>,
    /// The rest of the last batch taken off the channel.
    batch: VecDeque<Bytes>,
    /// A close that arrived behind the batch.
    close: Option<String>,
    queued: Arc<AtomicUsize>,
    closing: Arc<Closing>,
}

impl ClientHandle {
    /// A connected pair: the handle goes to the node (in
    /// [`ClientEvent::Connected`]), the outbound end stays with the transport.
    pub fn pair() -> (ClientHandle, ClientOutbound) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let closing = Arc::new(Closing::default());
        let handle = ClientHandle {
            outbound: sender,
            queued: queued.clone(),
            closing: closing.clone(),
        };
        let outbound = ClientOutbound {
            outbound: receiver,
            batch: VecDeque::new(),
            close: None,
            queued,
            closing,
        };
        (handle, outbound)
    }

    /// Queues one frame. The queue is unbounded by design: the node bounds it
    /// by checking [`ClientHandle::queued_bytes`] before building more.
    pub fn send(&self, frame: Bytes) {
        self.send_all(vec![frame]);
    }

    /// Queues frames to go out in this order, handed over at once.
    pub fn send_all(&self, frames: Vec<Bytes>) {
        if frames.is_empty() {
            return;
        }
        let bytes = frames.iter().map(Bytes::len).sum();
        self.queued.fetch_add(bytes, Ordering::Relaxed);
        if self.outbound.send(Queued::Frames(frames)).is_err() {
            // The connection task has ended; its Closed event is on its way.
        }
    }

    /// Bytes handed to [`ClientHandle::send`] that the transport has not
    /// taken yet (see [`ClientOutbound::taken`]).
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Closes the connection after the frames already queued; a client that
    /// is not reading gets [`CLOSE_GRACE`] to take them, then is dropped.
    pub fn close(&self, reason: impl Into<String>) {
        let _ = self.outbound.send(Queued::Close(reason.into()));
        self.closing.asked.store(true, Ordering::Release);
        self.closing.notify.notify_waiters();
    }
}

impl ClientOutbound {
    /// The next thing the node asked for; `None` once the node dropped the
    /// handle (every clone of it) and everything queued was taken.
    /// Cancel safe: a batch taken off the channel is kept before the
    /// future can be dropped.
    pub async fn recv(&mut self) -> Option<Outbound> {
        if let Some(next) = self.next_taken() {
            return Some(next);
        }
        let queued = self.outbound.recv().await?;
        self.take(queued);
        self.next_taken()
    }

    /// [`ClientOutbound::recv`] without waiting: `None` if nothing is queued
    /// right now (or the node dropped the handle).
    pub fn try_recv(&mut self) -> Option<Outbound> {
        if let Some(next) = self.next_taken() {
            return Some(next);
        }
        let queued = self.outbound.try_recv().ok()?;
        self.take(queued);
        self.next_taken()
    }

    fn take(&mut self, queued: Queued) {
        match queued {
            Queued::Frames(frames) => self.batch.extend(frames),
            Queued::Close(reason) => self.close = Some(reason),
        }
    }

    /// The next frame of the batch taken, then the close behind it.
    fn next_taken(&mut self) -> Option<Outbound> {
        match self.batch.pop_front() {
            Some(frame) => Some(Outbound::Frame(frame)),
            None => self.close.take().map(Outbound::Close),
        }
    }

    /// The transport took `bytes` of frames off the queue (written, or handed
    /// to its own bounded queue): the node's view of the backlog drops by as
    /// much. Saturates at zero, so a miscount cannot wrap into a huge backlog.
    pub fn taken(&self, bytes: usize) {
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |queued| {
                Some(queued.saturating_sub(bytes))
            });
    }

    /// Whether the node has asked to close.
    pub fn is_closing(&self) -> bool {
        self.closing.asked.load(Ordering::Acquire)
    }

    /// Resolves once the node asked to close (at once if it already has), for
    /// a grace deadline. Owns what it needs, so it may be held (pinned) while
    /// [`ClientOutbound::recv`] is called; it may be called any number of
    /// times and every future resolves.
    pub fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let closing = self.closing.clone();
        async move {
            loop {
                let notified = closing.notify.notified();
                tokio::pin!(notified);
                // Registered before the flag is read, so a close in between
                // is not missed.
                notified.as_mut().enable();
                if closing.asked.load(Ordering::Acquire) {
                    return;
                }
                notified.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn ids_are_shared_unique_and_start_at_one() {
        let ids = ConnectionIds::default();
        let other_listener = ids.clone();
        assert_eq!(ids.next(), ConnectionId(1));
        assert_eq!(other_listener.next(), ConnectionId(2));
        assert_eq!(ids.next(), ConnectionId(3));
        assert_eq!(ConnectionId(3).to_string(), "c3");
    }

    #[test]
    fn frames_then_close_arrive_in_order_and_count_as_queued_until_taken() {
        let (handle, mut outbound) = ClientHandle::pair();
        handle.send(Bytes::from_static(&[0x64, 0x00, 0x01]));
        handle.send(Bytes::from_static(&[0x65, 0x00]));
        assert_eq!(handle.queued_bytes(), 5);
        handle.close("bye");
        assert!(matches!(outbound.try_recv(), Some(Outbound::Frame(f)) if f.len() == 3));
        outbound.taken(3);
        assert_eq!(handle.queued_bytes(), 2);
        assert!(matches!(outbound.try_recv(), Some(Outbound::Frame(f)) if f.len() == 2));
        outbound.taken(2);
        assert!(matches!(outbound.try_recv(), Some(Outbound::Close(r)) if r == "bye"));
        assert!(outbound.try_recv().is_none());
        assert_eq!(handle.queued_bytes(), 0);
        outbound.taken(10);
        assert_eq!(handle.queued_bytes(), 0, "saturates instead of wrapping");
    }

    #[test]
    fn a_batch_arrives_frame_by_frame_in_order_before_what_follows_it() {
        let (handle, mut outbound) = ClientHandle::pair();
        handle.send_all(vec![
            Bytes::from_static(b"a"),
            Bytes::from_static(b"bb"),
            Bytes::from_static(b"ccc"),
        ]);
        handle.send_all(Vec::new());
        handle.send(Bytes::from_static(b"dddd"));
        handle.close("bye");
        assert_eq!(handle.queued_bytes(), 10);
        let mut seen = Vec::new();
        while let Some(next) = outbound.try_recv() {
            match next {
                Outbound::Frame(frame) => seen.push(frame.len().to_string()),
                Outbound::Close(reason) => seen.push(reason),
            }
        }
        assert_eq!(seen, ["1", "2", "3", "4", "bye"]);
    }

    #[tokio::test]
    async fn recv_dropped_mid_wait_loses_nothing() {
        let (handle, mut outbound) = ClientHandle::pair();
        // A recv that is polled once, finds nothing and is dropped, as in a
        // select! whose other branch won.
        assert!(outbound.recv().now_or_never().is_none());
        handle.send_all(vec![Bytes::from_static(b"x"), Bytes::from_static(b"yy")]);
        assert!(matches!(outbound.recv().await, Some(Outbound::Frame(f)) if f.len() == 1));
        assert!(
            matches!(outbound.recv().now_or_never(), Some(Some(Outbound::Frame(f))) if f.len() == 2)
        );
    }

    #[test]
    fn closing_resolves_for_every_waiter_once_asked() {
        let (handle, outbound) = ClientHandle::pair();
        let mut early = Box::pin(outbound.closing());
        assert!(early.as_mut().now_or_never().is_none());
        assert!(!outbound.is_closing());
        handle.close("done");
        assert!(outbound.is_closing());
        assert!(early.now_or_never().is_some());
        // A waiter that starts later resolves at once, as often as asked.
        assert!(outbound.closing().now_or_never().is_some());
        assert!(outbound.closing().now_or_never().is_some());
    }

    #[tokio::test]
    async fn recv_ends_when_the_node_drops_the_handle() {
        let (handle, mut outbound) = ClientHandle::pair();
        let clone = handle.clone();
        handle.send(Bytes::from_static(b"ab"));
        drop(handle);
        drop(clone);
        assert!(matches!(outbound.recv().await, Some(Outbound::Frame(_))));
        assert!(outbound.recv().await.is_none());
    }
}
