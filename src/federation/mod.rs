//! Federation: Tundra scenes across LESS peer links (docs/federation.md).
//!
//! Each node presents every entity of the federation once, from the copy with
//! the shortest path; exports what it presents to links that do not already
//! lie on the entity's path; and sends edits and actions of entities it does
//! not simulate to their authority. The core is pure: it drives
//! [`crate::less::session::Session`]s and mutates the [`crate::scene::Scene`].

mod authority;
mod call_order;
mod core;
pub mod encodings;
mod export;
pub mod exports;
mod flood;
pub mod ids;
mod import;
pub mod link;
pub mod mapping;
pub mod mirror;
pub mod origin_policy;
mod read_ahead;
pub mod refresh;
pub mod schemas;
pub mod stats;
mod tracked;
pub mod values;

pub use self::core::{Federation, FederationEvent};
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
