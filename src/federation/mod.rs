//! Federation: Tundra scenes across LESS peer links (docs/federation.md).
//!
//! Each node presents every entity it receives once, from the best copy;
//! exports what it presents to links that do not already lie on the
//! entity's path; and sends edits and actions of entities it does not
//! simulate to their authority. The core is pure: it drives
//! [`crate::less::session::Session`]s and mutates the [`crate::scene::Scene`].
//!
//! One room per concern, each a directory; the files of a room hold either
//! state and rules (no [`Federation`]) or behaviour (`impl Federation`):
//!
//! ```text
//!  behaviour   routing/{links,route,present,import,export,accept}  authority/{edits,calls,handover,departure_link}
//!              export_policy/enforce   flood/relay
//!                  │ (impl Federation)
//!  core.rs     the Federation struct: every room's state, and accessors
//!                  │
//!  state       routing/{tracked,mirror,exports,link,refresh}  authority/{handover_types,request,call_order,own_edits,departure,zones}
//!              export_policy/{filter,origin_policy}  flood/memory  stats
//!                  │
//!  wire        wire/{mapping,values,schemas,encodings,interactions}   ids
//! ```
//!
//! A file uses only files below it or beside it in its layer, never one
//! above: the federation has no import cycle (`tests/architecture.rs`
//! checks it). Where to look:
//! - an update is **routed** in `routing/route.rs` (which copy is presented,
//!   which links an entity goes on);
//! - it is **filtered** in `export_policy/` (which components may go to
//!   which node);
//! - it is **applied** in `routing/import.rs` and `routing/present.rs` (a
//!   peer's objects into the scene) and sent in `routing/export.rs` (the
//!   scene's changes out);
//! - an edit of someone else's entity travels in `authority/edits.rs`, a
//!   call in `authority/calls.rs`, a hand-over in `authority/handover.rs`.
//!
//! Who keeps which state consistent (each behind methods, each with a
//! `check_invariants` the tests call; [`Federation::check_invariants`] runs
//! them all and the checks between them): `routing/tracked.rs` (federation
//! identity <-> scene entity, one bijection), [`routing::mirror::Mirror`]
//! (a link's view of the peer's objects, components filed under their
//! owner entity or waiting for it), [`routing::exports::Exports`] (what
//! this node exports on a link and the reverse index from object to scene
//! entity).
//!
//! The federation takes its inputs through its own `handle_*` methods (a
//! client's edit or removal of a remote entity, its actions); it does not
//! know the Tundra server's events. Refusals it goes on from are counted in
//! [`FederationStats`].

pub mod authority;
mod core;
pub mod export_policy;
mod flood;
pub mod ids;
pub mod interest;
pub mod routing;
pub mod space;
pub mod stats;
pub mod wire;

pub use self::authority::handover_types::{HandoverError, HandoverPolicy, HandoverReason};
pub use self::authority::{departure, handover, take_authority, zones};
pub use self::core::{Federation, FederationEvent};
pub use self::export_policy::filter::{LinkPolicy, TypeFilter};
pub use self::export_policy::origin_policy;
pub use self::routing::link::Link;
pub use self::routing::{exports, link, mirror, refresh};
pub use self::wire::{encodings, mapping, schemas, values};
pub use ids::{GlobalId, LinkId};
pub use stats::FederationStats;

#[cfg(test)]
mod test_pair;
#[cfg(test)]
mod tests;
