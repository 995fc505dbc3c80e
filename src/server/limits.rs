//! The budgets the server core enforces per client and node-wide.
//!
//! The node fills these from its configuration (`[limits]`); the core knows
//! only the numbers. Refusals still name the configuration key, so an
//! operator reading the log knows what to raise.

use std::time::Duration;

/// What the server core bounds; every refusal names the key it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Entities one client may create (`limits.max_entities_per_client`).
    pub max_entities_per_client: usize,
    /// Entities clients may have created in the scene, all together
    /// (`limits.max_client_entities`).
    pub max_client_entities: usize,
    /// Entities clients from one IP address may have created in the scene
    /// (`limits.max_entities_per_address`).
    pub max_entities_per_address: usize,
    /// Outbound bytes queued for a client that does not read; past this the
    /// client gets only coalesced state, past twice this (or for longer than
    /// `max_client_stall_secs`) it is dropped.
    pub max_client_backlog_bytes: usize,
    /// Seconds a client may stay over `max_client_backlog_bytes`.
    pub max_client_stall_secs: u64,
    /// Logged-in clients at once (`limits.max_clients`).
    pub max_clients: usize,
    /// Refused requests one client may send in a minute before it is closed.
    pub max_refused_requests_per_minute: u32,
    /// Clients connected but not yet logged in, from all addresses.
    pub max_pending_logins: usize,
    /// Clients connected but not yet logged in, from one IP address.
    pub max_pending_logins_per_address: usize,
    /// Seconds a connected client may take to send its Login.
    pub login_timeout_secs: u64,
}

impl ServerLimits {
    /// See [`ServerLimits::login_timeout_secs`].
    pub fn login_timeout(&self) -> Duration {
        Duration::from_secs(self.login_timeout_secs)
    }
}

impl Default for ServerLimits {
    /// The node's default configuration (`crate::config::Limits`, checked
    /// equal by a test there).
    fn default() -> Self {
        ServerLimits {
            max_entities_per_client: 10_000,
            max_client_entities: 100_000,
            max_entities_per_address: 20_000,
            max_client_backlog_bytes: 4 * 1024 * 1024,
            max_client_stall_secs: 10,
            max_clients: 1_000,
            max_refused_requests_per_minute: 100_000,
            max_pending_logins: 256,
            max_pending_logins_per_address: 16,
            login_timeout_secs: 10,
        }
    }
}
