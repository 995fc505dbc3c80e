//! The space room: where each world lies in the federation's shared space
//! (docs/federation.md §2.7). `placement` translates between a world's own
//! coordinates and federation coordinates; `position` says which values are
//! positions that move with it. Rules only: the routing room applies them
//! where values cross a link.

pub mod placement;
pub mod position;
