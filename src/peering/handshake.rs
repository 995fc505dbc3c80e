//! The control-stream state machine of one connection: Hello exchange,
//! arbitration hook, Ready, then Goodbye or Refuse (docs/peer-link.md
//! section 6).
//!
//! Sans-IO in the quinn-proto manner: the driver feeds stream bytes to
//! [`Handshake::handle_bytes`], answers [`HandshakeEvent::PeerDeclared`]
//! with [`Handshake::commit`] or [`Handshake::refuse`], writes what
//! [`Handshake::poll_transmit`] gives, and acts on the events. It never
//! touches a stream, a clock or a random source; the driver's handshake
//! timer calls [`Handshake::handle_timeout`].
//!
//! ```text
//!   dialer                               listener
//!   Hello ───────────────────────────▶  check, arbitrate
//!   check, arbitrate  ◀───────────────  Hello (or Refuse)
//!   Ready ───────────────────────────▶  established
//!   established       ◀───────────────  Ready
//! ```

use std::collections::VecDeque;

use super::control::{ControlBuffer, ControlError, ControlMessage, PROTOCOL_VERSION};
use super::hello::Hello;
use super::keys::Role;
use super::negotiate::Negotiated;
use super::reason::{Reason, ReasonCode};

/// Which side ended the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    /// This node refused or said goodbye.
    Local,
    /// The peer did.
    Remote,
}

/// How a connection's control stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    pub reason: Reason,
    pub initiator: Initiator,
    /// The version in the envelope of the peer's Refuse or Goodbye.
    pub peer_version: Option<u16>,
    /// Whether the link had been established.
    pub was_established: bool,
}

/// What the driver must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeEvent {
    /// The peer's Hello is valid and compatible ([`Handshake::negotiated`]
    /// is set): arbitrate, then call `commit` or `refuse`.
    PeerDeclared,
    /// Both Readys are exchanged; LESS packets may flow.
    Established,
    /// The control stream is finished: flush `poll_transmit`, then close the
    /// QUIC connection with the reason's code.
    Closed(Closure),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the peer's Hello.
    AwaitHello,
    /// The peer's Hello is checked; waiting for the driver's decision.
    AwaitDecision,
    /// Committed; waiting for the peer's Ready.
    AwaitReady,
    Established,
    Closed,
}

/// One connection's control-stream protocol.
#[derive(Debug)]
pub struct Handshake {
    role: Role,
    local: Hello,
    state: State,
    buffer: ControlBuffer,
    negotiated: Option<Negotiated>,
    transmit: VecDeque<Vec<u8>>,
    events: VecDeque<HandshakeEvent>,
}

impl Handshake {
    /// Starts the protocol; the dialer's Hello is queued at once.
    pub fn new(role: Role, local: Hello) -> Handshake {
        let mut handshake = Handshake {
            role,
            local,
            state: State::AwaitHello,
            buffer: ControlBuffer::default(),
            negotiated: None,
            transmit: VecDeque::new(),
            events: VecDeque::new(),
        };
        if role == Role::Dialer {
            handshake.send(ControlMessage::Hello(handshake.local.clone()));
        }
        handshake
    }

    /// This node's role on the connection.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The combined parameters, once the peer's Hello is accepted.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// Whether both Readys were exchanged and no Goodbye yet.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the control stream is finished.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Bytes read from the control stream.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        self.buffer.push(bytes);
        loop {
            match self.buffer.next_message() {
                Ok(Some((envelope, message))) => self.handle_message(envelope.version, message),
                Ok(None) => return,
                Err(error) => return self.refuse_for(&error),
            }
            if self.state == State::Closed {
                return;
            }
        }
    }

    /// The peer finished its side of the control stream without a Refuse
    /// or Goodbye (section 6.1: answered with `unexpected-message`).
    pub fn handle_stream_end(&mut self) {
        self.refuse(Reason::new(
            ReasonCode::UNEXPECTED_MESSAGE,
            "peer ended the control stream",
        ));
    }

    /// The driver's handshake timer fired; ends the connection unless it is
    /// already established or closed.
    pub fn handle_timeout(&mut self) {
        if matches!(self.state, State::Established | State::Closed) {
            return;
        }
        self.refuse(Reason::new(
            ReasonCode::HANDSHAKE_TIMEOUT,
            "handshake did not finish in time",
        ));
    }

    /// Accepts the peer's Hello after arbitration: the listener answers with
    /// its own Hello, the dialer with Ready.
    pub fn commit(&mut self) {
        if self.state != State::AwaitDecision {
            return;
        }
        let message = match self.role {
            Role::Listener => ControlMessage::Hello(self.local.clone()),
            Role::Dialer => ControlMessage::Ready,
        };
        self.send(message);
        self.state = State::AwaitReady;
    }

    /// Refuses the connection before it is established (or, once it is,
    /// says goodbye) with `reason`.
    pub fn refuse(&mut self, reason: Reason) {
        match self.state {
            State::Closed => {}
            State::Established => self.goodbye(reason),
            _ => {
                self.send(ControlMessage::Refuse(reason.clone()));
                self.finish(reason, Initiator::Local, None);
            }
        }
    }

    /// Ends the link with a Goodbye (before establishment, a Refuse).
    pub fn goodbye(&mut self, reason: Reason) {
        match self.state {
            State::Closed => {}
            State::Established => {
                self.send(ControlMessage::Goodbye(reason.clone()));
                self.finish(reason, Initiator::Local, None);
            }
            _ => self.refuse(reason),
        }
    }

    /// The next bytes to write on the control stream.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmit.pop_front()
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<HandshakeEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, message: ControlMessage) {
        self.transmit.push_back(message.to_bytes());
    }

    fn finish(&mut self, reason: Reason, initiator: Initiator, peer_version: Option<u16>) {
        let was_established = self.state == State::Established;
        self.state = State::Closed;
        self.events.push_back(HandshakeEvent::Closed(Closure {
            reason,
            initiator,
            peer_version,
            was_established,
        }));
    }

    fn refuse_for(&mut self, error: &ControlError) {
        let text = match error {
            ControlError::VersionMismatch { peer } => format!(
                "peer speaks peer-link version {peer}, this node speaks {PROTOCOL_VERSION}: \
                 upgrade the node with the older version"
            ),
            other => other.to_string(),
        };
        self.refuse(Reason::new(error.reason_code(), text));
    }

    fn handle_message(&mut self, version: u16, message: ControlMessage) {
        match (self.state, message) {
            (_, ControlMessage::Refuse(reason)) | (_, ControlMessage::Goodbye(reason)) => {
                self.finish(reason, Initiator::Remote, Some(version));
            }
            (State::AwaitHello, ControlMessage::Hello(peer)) => self.handle_hello(peer),
            (State::AwaitReady, ControlMessage::Ready) => {
                if self.role == Role::Listener {
                    self.send(ControlMessage::Ready);
                }
                self.state = State::Established;
                self.events.push_back(HandshakeEvent::Established);
            }
            (state, message) => {
                let name = match message {
                    ControlMessage::Hello(_) => "Hello",
                    ControlMessage::Ready => "Ready",
                    _ => "message",
                };
                self.refuse(Reason::new(
                    ReasonCode::UNEXPECTED_MESSAGE,
                    format!("{name} is not allowed in state {state:?}"),
                ));
            }
        }
    }

    fn handle_hello(&mut self, peer: Hello) {
        if let Err(problem) = peer.check() {
            return self.refuse(Reason::new(ReasonCode::INCOMPATIBLE, problem));
        }
        if peer.node == self.local.node {
            return self.refuse(Reason::new(
                ReasonCode::SELF_CONNECTION,
                format!("peer has this node's own uuid {}", peer.node),
            ));
        }
        match Negotiated::new(&self.local, &peer) {
            Ok(negotiated) => {
                self.negotiated = Some(negotiated);
                self.state = State::AwaitDecision;
                self.events.push_back(HandshakeEvent::PeerDeclared);
            }
            Err(problem) => self.refuse(Reason::new(ReasonCode::INCOMPATIBLE, problem)),
        }
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
