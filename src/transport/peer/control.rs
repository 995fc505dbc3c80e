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

/// The reason behind a failed control write: the connection's own end when
/// it was lost (a refusal by the listener often lands here, while the dialer
/// is still writing its Hello), else an internal failure.
pub(super) fn write_failed_reason(error: &quinn::WriteError) -> Reason {
    match error {
        quinn::WriteError::ConnectionLost(lost) => lost_reason(lost),
        other => Reason::new(
            ReasonCode::INTERNAL,
            format!("control write failed: {other}"),
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_cut_by_the_peers_close_reports_the_peers_reason() {
        let close = quinn::ApplicationClose {
            error_code: quinn::VarInt::from_u32(u32::from(ReasonCode::VERSION_MISMATCH.0)),
            reason: bytes::Bytes::from_static(b"this node speaks peer-link version 2 only"),
        };
        let error =
            quinn::WriteError::ConnectionLost(quinn::ConnectionError::ApplicationClosed(close));
        let reason = write_failed_reason(&error);
        assert_eq!(reason.code, ReasonCode::VERSION_MISMATCH);
        assert_eq!(reason.text, "this node speaks peer-link version 2 only");
    }

    #[test]
    fn a_write_to_a_stream_the_peer_stopped_is_internal() {
        let error = quinn::WriteError::Stopped(quinn::VarInt::from_u32(0));
        let reason = write_failed_reason(&error);
        assert_eq!(reason.code, ReasonCode::INTERNAL);
        assert!(reason.text.starts_with("control write failed"), "{reason}");
    }
}
