//! The one name of a peer link inside a node: the transport numbers each
//! link it establishes, and the federation, the node core, the status and
//! the HTTP pages all use that number. A link that ends is never renumbered,
//! so a replacing link to the same peer has a different id.

use std::fmt;

/// Identifies one peer link of this node (unique per node process; also the
/// source of the scene changes it causes, `ChangeSource::Peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u64);

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_link_and_number() {
        assert_eq!(LinkId(7).to_string(), "link7");
        assert_eq!(LinkId(u64::MAX).to_string(), format!("link{}", u64::MAX));
    }
}
