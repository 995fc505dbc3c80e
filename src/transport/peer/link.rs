//! The federation's handle on one established peer link.
//!
//! The link's driver task owns the transport; the LESS [`Session`] sits
//! behind a mutex shared with this handle, so the federation calls the
//! session's own commands (and gets their return values: type ids, object
//! ids, request ids, refusals) synchronously, and the driver is woken to
//! transmit what they queued. Events flow the other way through the node's
//! event channel. No lock is held across an await.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::less::session::{CloseReason, Stats, Transmit};
use crate::peering::hello::{Hello, NodeId};
use crate::peering::keys::Role;
use crate::peering::link_settings::LinkSettings;
use crate::peering::negotiate::LinkFraming;
use crate::peering::peer_file::{PeerConfig, PeerName};
use crate::peering::reason::{Reason, ReasonCode};

pub use crate::link_id::LinkId;

/// A command on a link that has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the peer link has ended")]
pub struct LinkClosed;

/// A LESS frame received on a link, for the application's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A UDP datagram: `Session::handle_datagram`.
    Datagram(Vec<u8>),
    /// A complete length-prefixed frame from the peer's data stream:
    /// `Session::handle_stream_frame`.
    Stream(Vec<u8>),
}

/// Traffic the driver moved, for the stats line.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Traffic {
    pub(super) packets_sent: u64,
    pub(super) bytes_sent: u64,
    pub(super) packets_received: u64,
    pub(super) bytes_received: u64,
}

/// State shared by the handle and the driver.
#[derive(Debug)]
pub(super) struct LinkShared {
    /// The settings the application's session is built from.
    pub(super) handed: Mutex<Option<LinkSettings>>,
    /// The session's idle timeout (the link's liveness timeout), for the
    /// reason a link ends with when its session timed out.
    pub(super) idle_timeout: std::time::Duration,
    /// Frames the application's session asked to send.
    pub(super) outbox: Mutex<VecDeque<Transmit>>,
    /// Session counters an application reports for the stats line.
    pub(super) reported: Mutex<Option<Stats>>,
    pub(super) traffic: Mutex<Traffic>,
    /// Wakes the driver after a command.
    pub(super) wake: Notify,
    /// Set by the driver when the link ends.
    pub(super) ended: AtomicBool,
    /// A close the federation asked for.
    pub(super) close_request: Mutex<Option<Reason>>,
    /// Entity counts the federation reports for the stats line.
    pub(super) entities_out: AtomicU64,
    pub(super) entities_in: AtomicU64,
}

/// Locks a mutex whose holder cannot leave it inconsistent (every critical
/// section here is a single assignment or a call into a session that does
/// not panic on remote input), so a poisoned lock is simply taken back.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LinkShared {
    /// State for a link whose session is built from `settings`.
    pub(super) fn new(settings: LinkSettings) -> LinkShared {
        LinkShared {
            idle_timeout: settings.session.idle_timeout,
            handed: Mutex::new(Some(settings)),
            outbox: Mutex::new(VecDeque::new()),
            reported: Mutex::new(None),
            traffic: Mutex::new(Traffic::default()),
            wake: Notify::new(),
            ended: AtomicBool::new(false),
            close_request: Mutex::new(None),
            entities_out: AtomicU64::new(0),
            entities_in: AtomicU64::new(0),
        }
    }
}

/// An established link: who the peer is and access to its LESS session.
#[derive(Debug, Clone)]
pub struct PeerLink {
    pub(super) id: LinkId,
    pub(super) peer: PeerName,
    pub(super) config: Arc<PeerConfig>,
    pub(super) hello: Arc<Hello>,
    pub(super) framing: LinkFraming,
    pub(super) role: Role,
    pub(super) shared: Arc<LinkShared>,
}

impl PeerLink {
    /// This connection's id.
    pub fn id(&self) -> LinkId {
        self.id
    }

    /// The peer's name in this node's peer files.
    pub fn peer(&self) -> &PeerName {
        &self.peer
    }

    /// The peer's file: what may be exported to it and accepted from it.
    pub fn peer_config(&self) -> &PeerConfig {
        &self.config
    }

    /// The peer's node UUID.
    pub fn peer_node(&self) -> NodeId {
        self.hello.node
    }

    /// The peer's Hello as received (its name, tick rate, quantum, features).
    pub fn peer_hello(&self) -> &Hello {
        &self.hello
    }

    /// How LESS packets travel on this link.
    pub fn framing(&self) -> LinkFraming {
        self.framing
    }

    /// Whether this node dialled the connection or accepted it.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether the link has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.ended.load(Ordering::Acquire)
    }

    /// The link's settings from its handshake (the session's keys, first
    /// sequence numbers, framing, MTU and timers; the agreed features),
    /// once. Build the link's session with `Session::new(settings.session,
    /// now)` on the application's clock.
    pub fn take_link_settings(&self) -> Option<LinkSettings> {
        lock(&self.shared.handed).take()
    }

    /// Sends a frame the link's session produced (`poll_transmit`).
    pub fn transmit(&self, transmit: Transmit) -> Result<(), LinkClosed> {
        if self.is_closed() {
            return Err(LinkClosed);
        }
        lock(&self.shared.outbox).push_back(transmit);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Hands the driver the session's counters (RTT, loss)
    /// for the periodic stats line.
    pub fn report_stats(&self, stats: Stats) {
        *lock(&self.shared.reported) = Some(stats);
    }

    /// Ends the link with a Goodbye carrying `reason` (an application whose
    /// session closed passes `liveness-timeout` or `protocol-error`).
    pub fn close(&self, reason: Reason) {
        *lock(&self.shared.close_request) = Some(reason);
        self.shared.wake.notify_one();
    }

    /// Ends the link because its session closed, with the Goodbye reason
    /// the session's end calls for: an idle timeout is a liveness timeout, a
    /// local close a shutdown, anything else the peer's protocol error.
    pub fn close_for_session(&self, reason: &CloseReason) {
        let reason = match reason {
            CloseReason::Local => Reason::new(ReasonCode::SHUTDOWN, "session closed locally"),
            CloseReason::IdleTimeout => Reason::new(
                ReasonCode::LIVENESS_TIMEOUT,
                format!(
                    "no valid packet for {} ms",
                    self.shared.idle_timeout.as_millis()
                ),
            ),
            other => Reason::new(ReasonCode::PROTOCOL_ERROR, other.to_string()),
        };
        self.close(reason);
    }

    /// Reports how many entities cross the link each way (shown on the
    /// periodic stats line).
    pub fn set_entity_counts(&self, sent: u64, received: u64) {
        self.shared.entities_out.store(sent, Ordering::Relaxed);
        self.shared.entities_in.store(received, Ordering::Relaxed);
    }
}
