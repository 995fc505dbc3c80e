//! The routing room: which copy of each entity this node presents, and
//! what it exports on which link (docs/federation.md §3 and §4).
//!
//! State (no `Federation`): `tracked` (identity <-> scene entity), `mirror`
//! (a link's view of the peer's objects), `exports` (what goes out on a
//! link), `link` (one peer link), `refresh` (the background refresh lap);
//! values: `references` (ids inside values), `object_values` (an entity as
//! LESS values), `scene_values` (a copy as Tundra values).
//! Behaviour (`impl Federation`): `links` (links coming and going), `route`
//! (choosing the copy and where it goes), `present` (a copy into the
//! scene), `import` (a peer's events applied), `export` (the scene's
//! changes sent), `interest` (what a link's regions admit), `accept` (a narrowed accept list), `read_ahead`.

pub mod accept;
pub mod export;
pub mod exports;
pub mod import;
pub mod interest;
pub mod link;
pub mod links;
pub mod mirror;
pub mod object_values;
pub mod positions;
pub mod present;
pub mod read_ahead;
pub mod references;
pub mod refresh;
pub mod route;
pub mod scene_values;
pub mod tracked;

#[cfg(test)]
mod mirror_tests;
#[cfg(test)]
mod read_ahead_tests;
