//! The flood room: EntityActions with the Peers bit reach the clients of
//! every node once (docs/federation.md §5).

pub mod memory;
mod relay;

pub use memory::FloodMemory;
