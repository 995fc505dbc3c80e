//! The interest room: which entities each link carries, by where they are
//! and where the nodes behind it look (docs/federation.md §8).
//!
//! State and rules (no `Federation`): `region` (boxes in the federation's
//! space), `own` (what this node wants, from its clients), `entry` (one
//! entry of a subscription on the wire), `table` (what each peer
//! subscribed, the best route to each interested node, what each link
//! carries, what each peer is owed).

pub mod entry;
pub mod own;
pub mod region;
pub mod table;

/// Regions a node sends of its own interest: merged to this many.
pub const SENT_REGIONS: usize = 16;
