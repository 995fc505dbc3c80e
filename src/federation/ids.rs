//! Federation identities: links, nodes and entities.

use std::fmt;

use uuid::Uuid;

/// One peer link of this node (its index; also `ChangeSource::Peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

/// An entity's identity across the federation: its origin node and the
/// origin's serial for it (docs/federation.md section 1).
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
