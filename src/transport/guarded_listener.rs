//! A TCP listener as every remotely reachable port of the node uses it
//! (Tundra WebSocket, HTTP, kNet TCP): failed accepts back off
//! ([`AcceptBackoff`]) instead of spinning, and a connection from an address
//! that already holds `[limits] max_connections_per_address` sockets is
//! closed at once. What it refuses is logged, a few lines per flood
//! ([`EventLog`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::net::{TcpListener, TcpStream};
use tracing::warn;

use super::accept_backoff::AcceptBackoff;
use super::address_limits::{AddressLimits, AddressSlot};
use crate::clock::Time;
use crate::log_budget::LogBudget;

/// A [`LogBudget`] shared by the tasks of one listener, on its own clock.
#[derive(Debug, Clone)]
pub struct EventLog {
    budget: Arc<Mutex<LogBudget>>,
    origin: Instant,
}

impl EventLog {
    pub fn new() -> EventLog {
        EventLog {
            budget: Arc::default(),
            origin: Instant::now(),
        }
    }

    /// One more occurrence: `Some(left_out)` when it gets a log line.
    pub fn occurrence(&self) -> Option<u64> {
        let elapsed = self.origin.elapsed().as_micros();
        let now = Time::from_micros(u64::try_from(elapsed).unwrap_or(u64::MAX));
        self.budget
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handle_occurrence(now)
    }
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new()
    }
}

/// A listener that bounds what one address may hold and survives running
/// out of file descriptors.
#[derive(Debug)]
pub struct GuardedListener {
    listener: TcpListener,
    limits: AddressLimits,
    /// Names the port in log lines ("tundra", "http", "knet-tcp").
    name: &'static str,
    backoff: AcceptBackoff,
    failures: EventLog,
    refusals: EventLog,
}

impl GuardedListener {
    pub fn new(listener: TcpListener, limits: AddressLimits, name: &'static str) -> Self {
        GuardedListener {
            listener,
            limits,
            name,
            backoff: AcceptBackoff::default(),
            failures: EventLog::new(),
            refusals: EventLog::new(),
        }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection within its address's cap, with its place in the
    /// count (held until the connection closes). Cancel-safe.
    pub async fn accept(&mut self) -> (TcpStream, SocketAddr, AddressSlot) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(pair) => pair,
                Err(error) => {
                    let delay = self.backoff.handle_failure();
                    if let Some(left_out) = self.failures.occurrence() {
                        warn!(listener = self.name, %error, retry_in_ms = delay.as_millis() as u64, left_out, "accept failed (out of file descriptors?); backing off");
                    }
                    tokio::time::sleep(delay).await;
                    continue;
                }
            };
            self.backoff.handle_success();
            match self.limits.try_acquire(addr.ip()) {
                Some(slot) => return (stream, addr, slot),
                None => {
                    if let Some(left_out) = self.refusals.occurrence() {
                        warn!(
                            listener = self.name,
                            address = %addr.ip(),
                            limit = self.limits.max_per_address(),
                            left_out,
                            "connection refused: limits.max_connections_per_address reached"
                        );
                    }
                    // Dropping the stream closes it now.
                    drop(stream);
                }
            }
        }
    }
}
