//! The authority room: who simulates each entity and how that moves
//! (docs/federation.md §5 and §7).
//!
//! State and rules (no `Federation`): `handover_types` (reasons, policy,
//! limits), `request` (what a call asks), `call_order` (one entity's calls
//! in order across route changes), `own_edits` (this node's edits that may
//! come back), `take_authority` (method 102's arguments), `departure` (the
//! departure's state machine), `zones` (regions and their trigger).
//! Behaviour (`impl Federation`): `edits` (tweaks toward the authority),
//! `calls` (method calls toward it and their answers), `handover` (grant,
//! take over, take back), `departure_link` (the offer on the wire).

pub mod call_order;
mod calls;
pub mod departure;
mod departure_link;
mod edits;
pub mod handover;
pub mod handover_types;
pub mod own_edits;
pub mod request;
pub mod take_authority;
pub mod zones;
