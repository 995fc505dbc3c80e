//! Which connection survives when a node has two with the same peer
//! (docs/peer-link.md §6.3).
//!
//! Both nodes apply the same rule to the same facts (who dialled each
//! connection, the peer's incarnation), so they keep the same connection
//! without talking about it. Pure: the driver holds the table of committed
//! connections and asks this module when it commits another.

use super::hello::NodeId;

/// What arbitration knows about one connection with a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkFacts {
    /// The node that opened the QUIC connection.
    pub dialer: NodeId,
    /// The incarnation the peer declared on this connection.
    pub peer_incarnation: u64,
}

/// The outcome for a newly committing connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The new connection survives; the existing one ends with `duplicate-link`.
    ReplaceExisting,
    /// The existing connection survives; the new one is refused with `duplicate-link`.
    KeepExisting,
}

/// Decides between a committed connection and one about to commit.
///
/// 1. Different peer incarnations: the peer restarted, and the existing
///    connection belongs to a process that is gone, so the new one wins.
/// 2. The same node dialled both: it dials again only after giving up the
///    first, so the new one wins.
/// 3. Otherwise the two nodes dialled each other at once: the connection
///    dialled by the node with the smaller UUID (compared as 16 big-endian
///    bytes) wins.
pub fn arbitrate(existing: &LinkFacts, candidate: &LinkFacts) -> Verdict {
    if existing.peer_incarnation != candidate.peer_incarnation
        || existing.dialer == candidate.dialer
        || candidate.dialer < existing.dialer
    {
        Verdict::ReplaceExisting
    } else {
        Verdict::KeepExisting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOW: NodeId = NodeId(uuid::Uuid::from_u128(0x0100));
    const HIGH: NodeId = NodeId(uuid::Uuid::from_u128(0xff00));

    fn facts(dialer: NodeId, peer_incarnation: u64) -> LinkFacts {
        LinkFacts {
            dialer,
            peer_incarnation,
        }
    }

    #[test]
    fn simultaneous_dials_keep_the_one_dialled_by_the_smaller_uuid_on_both_nodes() {
        // Whatever the order the two nodes commit in, the LOW-dialled one survives.
        let low_dialled = facts(LOW, 1);
        let high_dialled = facts(HIGH, 1);
        assert_eq!(
            arbitrate(&high_dialled, &low_dialled),
            Verdict::ReplaceExisting
        );
        assert_eq!(
            arbitrate(&low_dialled, &high_dialled),
            Verdict::KeepExisting
        );
    }

    #[test]
    fn a_restarted_peer_replaces_its_old_connection() {
        assert_eq!(
            arbitrate(&facts(LOW, 1), &facts(HIGH, 2)),
            Verdict::ReplaceExisting
        );
    }

    #[test]
    fn a_redial_by_the_same_node_replaces_its_old_connection() {
        assert_eq!(
            arbitrate(&facts(HIGH, 1), &facts(HIGH, 1)),
            Verdict::ReplaceExisting
        );
    }
}
