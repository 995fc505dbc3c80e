//! Upstream mode: the node logs in to an existing Tundra world server as a
//! client and bridges its scene into the federation (docs/upstream.md).
//!
//! The world server stays the authority of its entities: the node copies
//! them into its scene (exported to peers as this node's own), and edits
//! that clients or peers ask for are sent to the world server instead of
//! being applied. Entities of other nodes are created in the world server
//! through the client path and kept current. The core is pure: frames,
//! connection events and an explicit `now` in; frames, timeouts and
//! [`BridgeEvent`]s out. `crate::transport::upstream` drives it.
//!
//! One concept per file: [`login`] (the client login), [`ids`] (id mapping
//! both directions), [`mirror`] (the world's entities into the scene),
//! [`rigid_body`] (RigidBodyUpdate moves of world entities), [`body_echo`]
//! (a 119 that repeats what the bridge holds), [`export`] (the
//! federation's entities into the world), [`echo`] (what is never sent
//! back), [`forwarded`] (world edits awaiting the authority's answer),
//! [`reconcile`] (reconnects), [`hold`] (removals held when a peer link is
//! replaced), [`timers`] (login timeout, grace periods), [`proxy`] (edits
//! and actions upstream), [`handover`] (authority hand-over out of and into
//! the world server), [`bridge`]
//! (state and interface).

mod body_echo;
mod bridge;
pub mod echo;
mod export;
mod forwarded;
mod handover;
mod hold;
pub mod ids;
pub mod login;
mod mirror;
mod proxy;
mod reconcile;
mod references;
mod rigid_body;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_export;
#[cfg(test)]
mod tests_links;
#[cfg(test)]
mod tests_owner_values;
#[cfg(test)]
mod tests_rigid_body;
mod timers;

pub use bridge::{Bridge, BridgeEvent, BridgeSettings, BridgeStats, LinkCommand, LinkState};
pub use login::{LoginError, LoginSettings, Session};
