//! `[limits]`: what one client, one address and all clients together may
//! cost the node; each refusal is logged with the limit's name.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Per-client limits; each refusal is logged with the limit's name.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest WebSocket message accepted from a client. Tundra caps an
    /// attribute block at 16 KiB; a CreateEntity with many blocks needs more.
    pub max_frame_bytes: usize,
    /// Entities one client may create.
    pub max_entities_per_client: usize,
    /// Messages per second read from one client (every message counts:
    /// binary, text, ping). Above it the client is slowed (its transport
    /// stops reading it), never closed for it.
    pub max_messages_per_second: u32,
    /// Messages read from one client at once after a quiet spell (the
    /// bucket's depth). Unset, it follows the rate: one second of
    /// `max_messages_per_second` (see [`Limits::message_burst`]).
    pub max_message_burst: Option<u32>,
    /// Refused requests (edits of unknown entities, creates over a limit,
    /// ...) one client may send in a minute before it is closed: a few
    /// are races any client meets, this many are not.
    pub max_refused_requests_per_minute: u32,
    /// Entities clients may have created in the scene, all together. They
    /// outlive their creator (as Tundra keeps them), so this bounds what
    /// reconnecting clients can pile up.
    pub max_client_entities: usize,
    /// Entities clients from one IP address may have created in the scene.
    pub max_entities_per_address: usize,
    /// Outbound bytes queued for a client that does not read; past this the
    /// client gets only coalesced state, and past twice this (or for longer
    /// than `max_client_stall_secs`) it is dropped.
    pub max_client_backlog_bytes: usize,
    /// Seconds a client may stay over `max_client_backlog_bytes` before it
    /// is disconnected.
    pub max_client_stall_secs: u64,
    /// Simultaneous Tundra clients.
    pub max_clients: usize,
    /// kNet UDP connections from one IP address that have not yet answered
    /// the node's first datagram. kNet has no handshake, so any datagram
    /// from a new endpoint opens a connection; a spoofed source never
    /// answers, and these bounds keep what it can open small.
    pub max_half_open_per_address: usize,
    /// kNet UDP connections not yet answered, from all addresses.
    pub max_half_open: usize,
    /// Seconds a TCP connection may take to finish its TLS and WebSocket
    /// handshake; on the HTTP port, to send a request's headers, and to stay
    /// idle between keep-alive requests.
    pub handshake_timeout_secs: u64,
    /// Seconds a connected client may take to send its Login (every
    /// transport); after that it is closed.
    pub login_timeout_secs: u64,
    /// TCP connections one IP address may hold open to the node, over all
    /// its listeners (Tundra WebSocket, HTTP, kNet TCP); more are closed at
    /// once.
    pub max_connections_per_address: usize,
    /// Clients connected but not yet logged in, from all addresses; they do
    /// not take the seats of `max_clients`, which counts logged-in clients.
    pub max_pending_logins: usize,
    /// Clients connected but not yet logged in, from one IP address.
    pub max_pending_logins_per_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 256 * 1024,
            max_entities_per_client: 10_000,
            max_messages_per_second: 200_000,
            max_message_burst: None,
            max_refused_requests_per_minute: 100_000,
            max_client_entities: 100_000,
            max_entities_per_address: 20_000,
            max_client_backlog_bytes: 4 * 1024 * 1024,
            max_client_stall_secs: 10,
            max_clients: 1_000,
            max_half_open_per_address: 8,
            max_half_open: 256,
            handshake_timeout_secs: 10,
            login_timeout_secs: 10,
            max_connections_per_address: 64,
            max_pending_logins: 256,
            max_pending_logins_per_address: 16,
        }
    }
}

/// Longest handshake or login deadline accepted: past an hour a deadline
/// no longer protects anything.
const MAX_CONNECTION_TIMEOUT_SECS: u64 = 3_600;

/// A burst of more than this many seconds of the rate is probably a rate
/// lowered without the burst: `lessgate check` and the node's start warn.
pub const BURST_WARNING_SECONDS: u32 = 10;

impl Limits {
    /// The burst each client's budget has: `max_message_burst` when set,
    /// else one second of `max_messages_per_second`, so lowering the rate
    /// lowers the burst with it.
    pub fn message_burst(&self) -> u32 {
        self.max_message_burst
            .unwrap_or(self.max_messages_per_second)
    }

    /// What to tell an operator whose burst is far above the rate: a client
    /// may send that many messages at once before it is slowed.
    pub fn burst_warning(&self) -> Option<String> {
        let burst = self.max_message_burst?;
        let rate = self.max_messages_per_second.max(1);
        let seconds = burst / rate;
        (seconds > BURST_WARNING_SECONDS).then(|| {
            format!(
                "limits.max_message_burst = {burst} is {seconds} s of limits.max_messages_per_second = {rate}: \
                 a client may send {burst} messages at once before it is slowed; \
                 remove max_message_burst to have it follow the rate (one second of it)"
            )
        })
    }

    /// The deadlines and per-address budgets of connections.
    pub(super) fn validate_connection_limits(
        &self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let timeouts = [
            ("limits.handshake_timeout_secs", self.handshake_timeout_secs),
            ("limits.login_timeout_secs", self.login_timeout_secs),
        ];
        for (key, secs) in timeouts {
            if secs == 0 || secs > MAX_CONNECTION_TIMEOUT_SECS {
                return Err(invalid(key, "must be between 1 and 3600"));
            }
        }
        let counts = [
            (
                "limits.max_connections_per_address",
                self.max_connections_per_address,
            ),
            ("limits.max_pending_logins", self.max_pending_logins),
            (
                "limits.max_pending_logins_per_address",
                self.max_pending_logins_per_address,
            ),
        ];
        for (key, count) in counts {
            if count == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// See [`Limits::handshake_timeout_secs`].
    pub fn handshake_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.handshake_timeout_secs)
    }

    /// See [`Limits::login_timeout_secs`].
    pub fn login_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.login_timeout_secs)
    }

    /// The budgets the server core enforces (the rest bound transports).
    pub fn server_limits(&self) -> crate::server::ServerLimits {
        crate::server::ServerLimits {
            max_entities_per_client: self.max_entities_per_client,
            max_client_entities: self.max_client_entities,
            max_entities_per_address: self.max_entities_per_address,
            max_client_backlog_bytes: self.max_client_backlog_bytes,
            max_client_stall_secs: self.max_client_stall_secs,
            max_clients: self.max_clients,
            max_refused_requests_per_minute: self.max_refused_requests_per_minute,
            max_pending_logins: self.max_pending_logins,
            max_pending_logins_per_address: self.max_pending_logins_per_address,
            login_timeout_secs: self.login_timeout_secs,
        }
    }
}
