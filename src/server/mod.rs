//! The Tundra server core: what a real Tundra server does for its clients
//! (docs/tundra-wire.md §2.1, §4 and §7), as a pure state machine.
//!
//! Frames and an explicit `now` go in; frames per client, connection closes
//! and events for the node come out. The node owns the [`Scene`] and passes
//! it in, so the federation layer can share it. Nothing here does I/O.
//!
//! [`Scene`]: crate::scene::Scene

mod backlog;
mod client;
mod core;
mod edit_frame;
mod entity_quota;
mod handlers;
mod interest;
mod limits;
mod login;
#[cfg(test)]
mod login_tests;
#[cfg(test)]
mod pending_login_tests;
mod pending_logins;
mod refusal;
mod refusal_log;
#[cfg(test)]
mod refusal_tests;
mod refusal_window;
mod rigid_body;
mod slots;
#[cfg(test)]
mod storage_login_tests;
mod sync_queue;
mod sync_state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tick_tests;
pub mod visibility;
mod write_schedule;
#[cfg(test)]
mod write_schedule_tests;
mod writer;

pub use self::core::{ServerConfig, ServerEvent, ServerStats, TundraServer};
pub use crate::tundra::LoginDialect;
pub use backlog::BacklogWatch;
pub use client::Client;
pub use limits::ServerLimits;
pub use refusal_log::{RefusalLog, Summary, Verdict, SUMMARY_INTERVAL};
pub use sync_state::{Presence, SlotSet, SyncState};
pub use write_schedule::{WriteRule, WriteTiming};
