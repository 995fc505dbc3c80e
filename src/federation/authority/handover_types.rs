//! The hand-over's vocabulary (docs/federation.md §7): why authority moves,
//! which requests a node grants, why a request was not started, what waits
//! for a new authority, and the limits and timeouts that bound it. Data
//! only: `handover.rs` and the other authority files act on it.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::peering::peer_file::TypeFilter;
use crate::tundra::{AttributeValue, ComponentId, EntityId};

/// The EntityAction a Tundra client sends (exec type Server, no
/// parameters) to ask for the entity it names.
pub const TAKE_AUTHORITY_ACTION: &str = "TakeAuthority";

/// Edits of one entity that wait at a node that handed it over, until the
/// new authority's copy arrives; beyond it an edit is refused and counted.
pub const MAX_WAITING_EDITS: usize = 1024;

/// How long a node that handed an entity over waits for the new
/// authority's copy, from when every link acknowledged the packet carrying
/// the grant, before it takes the entity back (the new authority died, or
/// every route to it): six times a hand-over's p99 on a 20 % lossy link
/// (BENCHMARKS.md, "Authority hand-over"), well below a user's patience.
pub const HANDOVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a node that handed an entity over waits for the new
/// authority's copy to bring every component it presents, from the first
/// tick that sees the copy, before it presents that copy as it is: the
/// component objects follow their entity object within a few re-sends,
/// and a component the new authority cannot hold never comes.
pub const INCOMPLETE_COPY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How a node that took an entity over counts a grant it had not asked
/// for (a departure, an operator's give, the authority's own choice).
pub const PUSHED: &str = "push";

/// Why authority moved (counted per peer in [`crate::federation::FederationStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HandoverReason {
    /// A take-authority call from a client's TakeAuthority, or one that
    /// stated no reason (or one this node does not know).
    Request,
    /// The entity settled in the zone of the node it was handed to, which
    /// asked for it.
    Zone,
    /// This node left the federation and handed its entities on.
    Departure,
    /// This node took back an entity whose new authority never took it (the
    /// link to it failed first).
    Reclaim,
    /// An operator handed it at the authority, or asked for it at the
    /// node it was handed to.
    Operator,
}

impl HandoverReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HandoverReason::Request => "request",
            HandoverReason::Zone => "zone",
            HandoverReason::Departure => "departure",
            HandoverReason::Reclaim => "reclaim",
            HandoverReason::Operator => "operator",
        }
    }
}

/// Which take-authority calls this node grants for its entities.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoverPolicy {
    /// Grants at all (default: yes).
    pub grant: bool,
    /// Entities with at least one component of these types (default: all).
    pub types: TypeFilter,
    /// Requesting nodes (default: `None`, every node).
    pub peers: Option<BTreeSet<Uuid>>,
}

impl Default for HandoverPolicy {
    fn default() -> HandoverPolicy {
        HandoverPolicy {
            grant: true,
            types: TypeFilter::All,
            peers: None,
        }
    }
}

/// Why a request or hand-over was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoverError {
    #[error("entity {0} is not federated")]
    Unknown(EntityId),
    #[error("this node is already the authority of entity {0}")]
    AlreadyAuthority(EntityId),
    #[error("this node is not the authority of entity {0}")]
    NotAuthority(EntityId),
    #[error("no route to the authority of entity {0}")]
    NoRoute(EntityId),
    #[error("entity {0} cannot be handed to this node itself")]
    ToSelf(EntityId),
    #[error("entity {0} belongs to this node's world server and cannot leave it now: {1}")]
    WorldServer(EntityId, &'static str),
}

/// An edit that waits for the new authority's copy.
#[derive(Debug, Clone)]
pub struct WaitingEdit {
    pub component: ComponentId,
    pub index: u8,
    pub value: AttributeValue,
    /// This node's own edit (a client's), not one it relays.
    pub own: bool,
}
