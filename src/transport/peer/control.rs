//! The control stream of one connection as the driver sees it: the
//! handshake state machine with its stream halves, reading into it,
//! flushing what it queues, and ending the connection the way
//! docs/peer-link.md §8.3 prescribes.

use super::CLOSE_LINGER;
use crate::peering::handshake::{Closure, Handshake, Initiator};
use crate::peering::reason::{Reason, ReasonCode};

/// The control stream and its state machine, kept across both phases.
pub(super) struct Control {
    pub(super) handshake: Handshake,
    pub(super) send: quinn::SendStream,
    pub(super) recv: quinn::RecvStream,
    pub(super) buffer: Vec<u8>,
}

impl Control {
    /// Writes everything the state machine queued.
    pub(super) async fn flush(&mut self) -> Result<(), quinn::WriteError> {
        while let Some(bytes) = self.handshake.poll_transmit() {
            self.send.write_all(&bytes).await?;
        }
        Ok(())
    }

    /// Reads one chunk into the state machine.
    pub(super) fn handle_read(
        &mut self,
        read: Result<Option<usize>, quinn::ReadError>,
    ) -> Result<(), Reason> {
        match read {
            Ok(Some(len)) => {
                let chunk = self.buffer[..len].to_vec();
                self.handshake.handle_bytes(&chunk);
                Ok(())
            }
            Ok(None) => {
                self.handshake.handle_stream_end();
                Ok(())
            }
            Err(quinn::ReadError::ConnectionLost(error)) => Err(lost_reason(&error)),
            Err(error) => Err(Reason::new(
                ReasonCode::UNEXPECTED_MESSAGE,
                format!("control stream failed: {error}"),
            )),
        }
    }
}

/// The reason behind a lost connection: the peer's close code and text when
/// it closed on purpose (a Refuse or Goodbye we did not get to read).
pub(super) fn lost_reason(error: &quinn::ConnectionError) -> Reason {
    match error {
        quinn::ConnectionError::ApplicationClosed(close) => Reason::new(
            ReasonCode(u16::try_from(close.error_code.into_inner()).unwrap_or(u16::MAX)),
            String::from_utf8_lossy(&close.reason).into_owned(),
        ),
        quinn::ConnectionError::TimedOut => {
            Reason::new(ReasonCode::LIVENESS_TIMEOUT, "control connection timed out")
        }
        // TLS 1.3 lets a client finish its handshake before the server has
        // checked the client certificate, so a pin refusal by the listener
        // reaches a dialer here, as a QUIC transport close.
        quinn::ConnectionError::ConnectionClosed(close) => Reason::new(
            ReasonCode::NONE,
            format!("peer aborted the connection: {close}"),
        ),
        other => Reason::new(ReasonCode::INTERNAL, format!("connection lost: {other}")),
    }
}

/// Ends the control stream per docs/peer-link.md §8.3: after our Refuse or Goodbye,
/// finish the stream and give the peer a moment to close first; after the
/// peer's, close at once with its code.
pub(super) async fn finish_control(
    control: &mut Control,
    connection: &quinn::Connection,
    closure: &Closure,
) {
    let code = quinn::VarInt::from_u32(u32::from(closure.reason.code.0));
    match closure.initiator {
        Initiator::Local => {
            let _ = control.send.finish();
            let _ = tokio::time::timeout(CLOSE_LINGER, connection.closed()).await;
            connection.close(code, closure.reason.text.as_bytes());
        }
        Initiator::Remote => connection.close(code, b""),
    }
}
