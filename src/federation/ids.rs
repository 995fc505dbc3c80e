//! Federation identities: links, nodes and entities.

use std::fmt;

use uuid::Uuid;

pub use crate::link_id::LinkId;

/// An entity's identity across the federation: its origin node and the
/// origin's serial for it (docs/federation.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalId {
    pub origin: Uuid,
    pub serial: u64,
}

impl fmt::Display for GlobalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = self.origin.simple().to_string();
        write!(f, "{}/{}", &origin[..8], self.serial)
    }
}
