//! Federation: Tundra scenes across LESS peer links (docs/federation.md).
//!
//! Each node presents every entity of the federation once, from the copy with
//! the shortest path; exports what it presents to links that do not already
//! lie on the entity's path; and sends edits and actions of entities it does
//! not simulate to their authority. The core is pure: it drives
//! [`crate::less::session::Session`]s and mutates the [`crate::scene::Scene`].
//!
//! Who keeps which state consistent (each behind methods, each with a
//! `check_invariants` the tests call; [`Federation::check_invariants`] runs
//! them all and the checks between them):
//! - `tracked.rs`: federation identity <-> scene entity, one bijection;
//! - [`mirror::Mirror`]: a link's view of the peer's objects, components
//!   filed under their owner entity (or waiting for it), one object per
//!   identity;
//! - [`exports::Exports`]: what this node exports on a link and the reverse
//!   index from object to scene entity;
//! - `call_order.rs`: calls waiting for a route change;
//! - `handover.rs`: authority hand-over (docs/federation.md §7): grants,
//!   the epoch barrier, taking over, taking back; `take_authority.rs`, the
//!   request's arguments and the reason it states;
//! - `own_edits.rs`: this node's edits sent as tweaks, so that one coming
//!   back after a later edit took another route is not applied over it.
//!
//! The federation takes its inputs through its own `handle_*` methods (a
//! client's edit or removal of a remote entity, its actions); it does not
//! know the Tundra server's events. Refusals it goes on from are counted in
//! [`FederationStats`]. `read_ahead.rs` reads ahead along the update paths'
//! own lookup chains.

mod accept;
mod authority;
mod call_order;
mod core;
pub mod departure;
mod departure_wire;
pub mod encodings;
mod export;
pub mod exports;
mod flood;
pub mod handover;
pub mod ids;
mod import;
pub mod link;
pub mod mapping;
pub mod mirror;
pub mod origin_policy;
mod own_edits;
mod read_ahead;
pub mod refresh;
pub mod schemas;
pub mod stats;
pub mod take_authority;
mod tracked;
pub mod values;
pub mod zones;

pub use self::core::{Federation, FederationEvent};
pub use handover::{HandoverError, HandoverPolicy, HandoverReason};
pub use ids::{GlobalId, LinkId};
pub use link::{Link, LinkPolicy, TypeFilter};
pub use stats::FederationStats;

#[cfg(test)]
mod mirror_tests;
#[cfg(test)]
mod read_ahead_tests;
#[cfg(test)]
mod test_pair;
#[cfg(test)]
mod tests;
