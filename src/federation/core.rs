//! The federation core: which entities this node presents and exports, and
//! through which link (docs/federation.md §1, §4 and §5). Pure: LESS
//! sessions in, scene changes and session commands out.

use foldhash::{HashSet, HashSetExt};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use uuid::Uuid;

use super::export_policy::origin_policy::OriginPolicy;
use super::ids::{GlobalId, LinkId};
use super::routing::link::{Link, TypeFilter};
use super::routing::tracked::TrackedEntities;
use super::stats::FederationStats;
use crate::tundra::messages::EntityAction;
use crate::tundra::EntityId;

/// What the federation tells the node.
#[derive(Debug, Clone, PartialEq)]
pub enum FederationEvent {
    /// A peer registered a custom component type this node now knows; its
    /// clients must be sent RegisterComponentType.
    TypeRegistered(u32),
    /// An EntityAction for one of this node's own entities arrived from a
    /// peer (a method invocation): this node is its authority.
    ActionForAuthority {
        entity: EntityId,
        action: EntityAction,
    },
    /// An EntityAction with the Peers bit from a client on another node:
    /// deliver it to this node's clients as Local.
    ActionForClients(EntityAction),
    /// The authority answered an EntityAction that one of this node's
    /// clients sent to a remote entity (the method-result came back).
    ActionAnswered {
        status: crate::less::message::MethodStatus,
        detail: crate::less::value::Value,
    },
    /// The entity's authority changed at this node (docs/federation.md §7):
    /// this node handed it over, took it over, or yielded it.
    AuthorityChanged {
        entity: EntityId,
        authority: Uuid,
        epoch: u64,
    },
    /// The authority refused this node's take-authority request (409:
    /// another node won that epoch, `detail` its UUID; 403: its policy).
    AuthorityRefused {
        entity: EntityId,
        status: crate::less::message::MethodStatus,
        detail: crate::less::value::Value,
    },
    /// A leaving peer offers this node its persistent entities
    /// (docs/federation.md §7.8): answer with `send_departure_answer`.
    DepartureOffered {
        link: LinkId,
        peer: Uuid,
        entities: u64,
    },
    /// A peer answered this node's departure offer.
    DepartureAnswered { peer: Uuid, accepted: bool },
}

/// Federation state of one node.
#[derive(Debug)]
pub struct Federation {
    pub(super) node: Uuid,
    pub(super) links: BTreeMap<LinkId, Link>,
    /// Every tracked identity and the scene entity that presents it.
    pub(super) tracked: TrackedEntities,
    /// Presented entities whose parent reference may not be applied yet
    /// (their parent not presented, or withdrawn): the only ones
    /// `resolve_references` visits, so an arriving entity does not cost a
    /// scan of every entity (quadratic set-up at 100 000 entities).
    pub(super) awaiting_parent: HashSet<GlobalId>,
    pub(super) next_serial: u64,
    pub(super) events: VecDeque<FederationEvent>,
    pub(super) floods: super::flood::FloodMemory,
    /// Background refresh budget per link, bytes per second (0: off).
    pub(super) refresh_rate: u32,
    /// Per-entity order of method calls across route changes.
    pub(super) calls: super::authority::call_order::CallOrder,
    /// Export filters of every peer file (section 4.1: strangers get what
    /// all of them allow).
    pub(super) configured_exports: Vec<TypeFilter>,
    /// Export filter per peer node this node has linked with.
    pub(super) known_exports: BTreeMap<Uuid, TypeFilter>,
    /// The policy this node attaches to its own entities.
    pub(super) own_policy: Arc<OriginPolicy>,
    /// Refusals handled by going on (`stats.rs`).
    pub(super) stats: FederationStats,
    /// Which take-authority calls this node grants (`handover.rs`).
    pub(super) handover_policy: super::authority::handover_types::HandoverPolicy,
    /// In upstream mode, whether the world server's entities (proxied in
    /// the scene) can be handed out now: only while its session is ready.
    pub(super) world_server_ready: bool,
    /// Edits of entities this node handed over, waiting for the new
    /// authority's copy.
    pub(super) waiting_edits:
        std::collections::HashMap<GlobalId, Vec<super::authority::handover_types::WaitingEdit>>,
    /// When this node takes back entities it handed over (`handover.rs`).
    pub(super) handover_deadlines: std::collections::HashMap<GlobalId, crate::clock::Time>,
    /// Entities this node handed over whose new authority's copy arrived
    /// without a component this node presents, with the time after which
    /// that copy is presented anyway (set by the first tick that sees it;
    /// `handover.rs`).
    pub(super) incomplete_copies: std::collections::HashMap<GlobalId, Option<crate::clock::Time>>,
    /// Of those, the ones whose wait is over: the next route choice takes
    /// the new authority's copy as it is.
    pub(super) overdue_copies: HashSet<GlobalId>,
    /// Where this node's world lies in the federation's space
    /// (`space/placement.rs`).
    pub(super) placement: super::space::placement::Placement,
    /// Per entity handed over, the links whose packet carrying the grant is
    /// not acknowledged yet, with the send mark it is at or above: the
    /// take-back clock starts once none is left.
    pub(super) grant_marks: std::collections::HashMap<GlobalId, Vec<(LinkId, u64)>>,
    /// This node's own edits sent as tweaks that may come back
    /// (`own_edits.rs`).
    pub(super) own_edits: super::authority::own_edits::OwnEdits,
    /// This node's own take-authority calls in flight.
    pub(super) authority_requests:
        std::collections::HashSet<(LinkId, crate::less::ids::RequestId<crate::less::ids::Local>)>,
    /// The epoch and reason of this node's own latest take-authority
    /// request per entity, so that the grant is counted under that reason
    /// (`handover.rs`).
    pub(super) pending_takes: std::collections::HashMap<
        GlobalId,
        (u64, super::authority::handover_types::HandoverReason),
    >,
    /// What each link routes by place, and this node's own interest
    /// (docs/federation.md §8).
    pub(super) interest: super::interest::table::InterestTable,
}

impl Federation {
    pub fn new(node: Uuid) -> Federation {
        Federation {
            node,
            links: BTreeMap::new(),
            tracked: TrackedEntities::default(),
            awaiting_parent: HashSet::new(),
            next_serial: 1,
            events: VecDeque::new(),
            floods: Default::default(),
            refresh_rate: 0,
            calls: Default::default(),
            configured_exports: Vec::new(),
            known_exports: BTreeMap::new(),
            own_policy: Arc::new(OriginPolicy::of_origin([], &BTreeMap::new())),
            stats: FederationStats::default(),
            handover_policy: Default::default(),
            world_server_ready: false,
            waiting_edits: Default::default(),
            handover_deadlines: Default::default(),
            incomplete_copies: Default::default(),
            overdue_copies: HashSet::new(),
            placement: super::space::placement::Placement::ORIGIN,
            grant_marks: Default::default(),
            own_edits: Default::default(),
            authority_requests: Default::default(),
            pending_takes: Default::default(),
            interest: super::interest::table::InterestTable::with_everything(node),
        }
    }

    /// What the federation counted.
    pub fn stats(&self) -> &FederationStats {
        &self.stats
    }

    pub fn node_id(&self) -> Uuid {
        self.node
    }

    pub fn link(&self, id: LinkId) -> Option<&Link> {
        self.links.get(&id)
    }

    pub fn link_mut(&mut self, id: LinkId) -> Option<&mut Link> {
        self.links.get_mut(&id)
    }

    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    pub fn links_mut(&mut self) -> impl Iterator<Item = &mut Link> {
        self.links.values_mut()
    }

    pub fn poll_event(&mut self) -> Option<FederationEvent> {
        self.events.pop_front()
    }

    /// Checks that the federation's maps agree with each other: every
    /// identity pairs with one scene entity and back, each link's mirror
    /// and exports are consistent, and a presented remote entity's copy is
    /// on the link it was selected from. The first disagreement, for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.tracked.check_invariants()?;
        for link in self.links.values() {
            link.mirror
                .check_invariants()
                .map_err(|e| format!("{} mirror: {e}", link.id))?;
            link.exported
                .check_invariants()
                .map_err(|e| format!("{} exports: {e}", link.id))?;
        }
        for (global, tracked) in self.tracked.iter() {
            let Some(link_id) = tracked.selected else {
                continue;
            };
            let Some(link) = self.links.get(&link_id) else {
                return Err(format!("{global} presented from {link_id}, which is gone"));
            };
            let Some(copy) = link.mirror.copy_of(*global) else {
                return Err(format!(
                    "{global} presented from {link_id}, which has no copy"
                ));
            };
            if let Some(object) = tracked
                .components
                .keys()
                .find(|object| !copy.components().contains(object))
            {
                return Err(format!("{global} presents {object:?}, not in its copy"));
            }
        }
        Ok(())
    }

    /// The federation identity of a scene entity, if it has one.
    pub fn global_of(&self, entity: EntityId) -> Option<GlobalId> {
        self.tracked.global_of(entity)
    }

    /// Entities presented here per origin node (for status pages).
    pub fn entities_by_origin(&self) -> BTreeMap<Uuid, usize> {
        let mut counts = BTreeMap::new();
        for (global, _) in self.tracked.iter() {
            *counts.entry(global.origin).or_insert(0) += 1;
        }
        counts
    }

    /// Sets the refresh budget per link in bytes per second (0, the
    /// default, turns background refresh off; a node sets it from its
    /// configuration).
    pub fn set_refresh_rate(&mut self, bytes_per_second: u32) {
        self.refresh_rate = bytes_per_second;
    }

    /// Spends each link's refresh budget accrued up to `now`
    /// (`routing/refresh.rs`).
    pub fn refresh(&mut self, now: crate::clock::Time) {
        let rate = f64::from(self.refresh_rate);
        if rate == 0.0 {
            return;
        }
        for link in self.links.values_mut() {
            link.refresh
                .spend(rate, now, &mut link.session, &link.exported);
        }
    }
}
