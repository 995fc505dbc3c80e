//! The HTTP port's deadlines, kept by the connection's socket itself so
//! that no request, however slowly it is sent, and no idle keep-alive
//! connection holds a socket past `[limits] handshake_timeout_secs`:
//!
//! - a request must be read and answered within the deadline of its first
//!   byte (a client trickling its headers is cut off);
//! - after an answer, the connection may stay idle for the deadline; the
//!   next request's first byte starts a new one.
//!
//! Past the deadline the socket reports `TimedOut`, which ends hyper's
//! connection and closes the socket. The connection's place in its
//! address's count ([`AddressSlot`]) is given back when this is dropped.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tracing::info;

use crate::transport::address_limits::AddressSlot;
use crate::transport::guarded_listener::EventLog;

/// A socket with the HTTP deadlines.
#[derive(Debug)]
pub struct DeadlineIo<S> {
    inner: S,
    timeout: Duration,
    /// A request has started arriving and has not been answered yet.
    in_request: bool,
    deadline: Pin<Box<Sleep>>,
    timeouts: EventLog,
    _slot: AddressSlot,
}

impl<S> DeadlineIo<S> {
    /// `inner`, idle from now, closed after `timeout` without a request.
    pub fn new(inner: S, slot: AddressSlot, timeout: Duration, timeouts: EventLog) -> Self {
        DeadlineIo {
            inner,
            timeout,
            in_request: false,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeouts,
            _slot: slot,
        }
    }

    fn restart_deadline(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.timeout);
    }

    /// `Some(error)` once the deadline has passed (registers the waker
    /// otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.deadline.as_mut().poll(cx).is_ready().then(|| {
            let what = match self.in_request {
                true => "request not complete",
                false => "idle",
            };
            if let Some(left_out) = self.timeouts.occurrence() {
                info!(
                    what,
                    timeout_secs = self.timeout.as_secs(),
                    left_out,
                    "http connection closed: limits.handshake_timeout_secs passed"
                );
            }
            io::Error::new(io::ErrorKind::TimedOut, "http deadline passed")
        })
    }

    /// What a write returns: an answer leaving restarts the idle deadline
    /// from here; a client that does not read its answer is held to the
    /// same deadline.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(written)) => {
                if written > 0 {
                    self.in_request = false;
                    self.restart_deadline();
                }
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match self.expired(cx) {
                Some(error) => Poll::Ready(Err(error)),
                None => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for DeadlineIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && !this.in_request {
                    // The first byte of a request: its deadline starts.
                    this.in_request = true;
                    this.restart_deadline();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match this.expired(cx) {
                Some(error) => Poll::Ready(Err(error)),
                None => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for DeadlineIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after_write(cx, polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::address_limits::AddressLimits;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn wrapped(
        timeout: Duration,
    ) -> (
        DeadlineIo<tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        AddressLimits,
    ) {
        let limits = AddressLimits::new(4);
        let slot = limits.try_acquire("10.0.0.1".parse().unwrap()).unwrap();
        let (server, client) = tokio::io::duplex(1024);
        let io = DeadlineIo::new(server, slot, timeout, EventLog::new());
        (io, client, limits)
    }

    #[tokio::test]
    async fn an_idle_connection_times_out_and_gives_its_place_back() {
        let (mut io, _client, limits) = wrapped(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        let error = io.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(limits.open_from("10.0.0.1".parse().unwrap()), 1);
        drop(io);
        assert_eq!(limits.open_from("10.0.0.1".parse().unwrap()), 0);
    }

    #[tokio::test]
    async fn a_trickled_request_times_out_though_bytes_keep_coming() {
        let (mut io, mut client, _limits) = wrapped(Duration::from_millis(300));
        let request = b"GET / HTTP/1.1\r\nHost: x\r\n";
        let trickle = tokio::spawn(async move {
            // One byte every 50 ms: each byte comes well within the deadline,
            // the whole request far past it. Returns the bytes it got out.
            let mut sent = 0;
            for byte in request.iter() {
                if client.write_all(&[*byte]).await.is_err() {
                    return sent;
                }
                sent += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            sent
        });
        let mut buf = [0u8; 64];
        let outcome = loop {
            match io.read(&mut buf).await {
                Ok(0) => break Ok(()),
                Ok(_) => continue,
                Err(error) => break Err(error),
            }
        };
        assert_eq!(outcome.unwrap_err().kind(), io::ErrorKind::TimedOut);
        drop(io);
        let sent = trickle.await.unwrap();
        assert!(
            sent < request.len(),
            "cut off mid-request, after {sent} bytes"
        );
    }
}
