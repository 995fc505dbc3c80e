//! The federation core: which entities this node presents and exports, and
//! through which link (docs/federation.md §1, §4 and §5). Pure: LESS
//! sessions in, scene changes and session commands out.

use foldhash::{HashSet, HashSetExt};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tracing::{debug, info, warn};
use uuid::Uuid;

use super::ids::{GlobalId, LinkId};
use super::link::{Link, TypeFilter};
use super::origin_policy::OriginPolicy;
use super::stats::FederationStats;
use super::tracked::TrackedEntities;
use crate::scene::{ChangeSource, Origin, Scene};
use crate::tundra::messages::EntityAction;
use crate::tundra::{ComponentId, EntityId};

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
    pub(super) calls: super::call_order::CallOrder,
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
    pub(super) handover_policy: super::handover::HandoverPolicy,
    /// In upstream mode, whether the world server's entities (proxied in
    /// the scene) can be handed out now: only while its session is ready.
    pub(super) world_server_ready: bool,
    /// Edits of entities this node handed over, waiting for the new
    /// authority's copy.
    pub(super) waiting_edits:
        std::collections::HashMap<GlobalId, Vec<super::handover::WaitingEdit>>,
    /// When this node takes back entities it handed over (`handover.rs`).
    pub(super) handover_deadlines: std::collections::HashMap<GlobalId, crate::clock::Time>,
    /// Per entity handed over, the links whose packet carrying the grant is
    /// not acknowledged yet, with the send mark it is at or above: the
    /// take-back clock starts once none is left.
    pub(super) grant_marks: std::collections::HashMap<GlobalId, Vec<(LinkId, u64)>>,
    /// This node's own edits sent as tweaks that may come back
    /// (`own_edits.rs`).
    pub(super) own_edits: super::own_edits::OwnEdits,
    /// This node's own take-authority calls in flight.
    pub(super) authority_requests:
        std::collections::HashSet<(LinkId, crate::less::ids::RequestId<crate::less::ids::Local>)>,
    /// The epoch and reason of this node's own latest take-authority
    /// request per entity, so that the grant is counted under that reason
    /// (`handover.rs`).
    pub(super) pending_takes:
        std::collections::HashMap<GlobalId, (u64, super::handover::HandoverReason)>,
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
            grant_marks: Default::default(),
            own_edits: Default::default(),
            authority_requests: Default::default(),
            pending_takes: Default::default(),
        }
    }

    /// The export filters of every peer file, linked or not: what nodes
    /// this node names in no policy may receive of its entities through
    /// relays is what all of them allow (docs/federation.md §4.1).
    pub fn set_configured_exports(&mut self, filters: Vec<TypeFilter>, scene: &Scene) {
        self.configured_exports = filters;
        self.refresh_own_policy(scene);
    }

    /// The export policy this node attaches to its own entities.
    pub fn own_policy(&self) -> &OriginPolicy {
        &self.own_policy
    }

    /// Recomputes the own policy; on a change, sends it with every own
    /// entity on every link.
    pub(super) fn refresh_own_policy(&mut self, scene: &Scene) {
        let policy = OriginPolicy::of_origin(&self.configured_exports, &self.known_exports);
        if *self.own_policy == policy {
            return;
        }
        self.own_policy = Arc::new(policy);
        let own: Vec<GlobalId> = self
            .tracked
            .iter()
            .filter(|(_, tracked)| tracked.is_source())
            .map(|(global, _)| *global)
            .collect();
        for global in own {
            self.sync_all_links(global, scene);
        }
    }

    /// The link whose copy of `global` this node presents, and its peer.
    pub fn route_of(&self, global: GlobalId) -> Option<(LinkId, Uuid)> {
        let link = self.tracked.get(&global)?.selected?;
        Some((link, self.links.get(&link)?.peer))
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

    /// A link came up: its session is ready. Exports everything it should
    /// carry.
    pub fn add_link(&mut self, link: Link, scene: &Scene) {
        let id = link.id;
        info!(link = id.0, peer = %link.peer_name, "federation link added");
        self.known_exports
            .insert(link.peer, link.policy.export.clone());
        self.links.insert(id, link);
        self.track_local_entities(scene);
        self.refresh_own_policy(scene);
        let globals: Vec<GlobalId> = self.export_order(scene);
        for global in &globals {
            self.sync_entity_export(*global, id, scene);
        }
        for global in &globals {
            self.sync_component_exports(*global, id, scene);
        }
    }

    /// A link went down: every copy it carried is withdrawn; entities reachable
    /// only through it leave the scene.
    pub fn remove_link(&mut self, id: LinkId, scene: &mut Scene) {
        let Some(mut link) = self.links.remove(&id) else {
            return;
        };
        info!(link = id.0, peer = %link.peer_name, "federation link removed");
        self.take_orphaned_grants(&mut link, scene);
        let affected: Vec<GlobalId> = link.mirror.globals().collect();
        for global in affected {
            self.reroute(global, scene);
        }
        // Calls on the lost link will never be answered from there: answer
        // those made on behalf of another link, and let calls that waited
        // behind them go on the new route.
        for (_, on_behalf_of) in link.forwarded_calls.into_values() {
            let Some(call) = on_behalf_of else { continue };
            if let Some(from) = self.links.get_mut(&call.from) {
                let sent = from.session.send_method_result(
                    call.request,
                    crate::less::message::MethodStatus::NOT_FOUND,
                    crate::less::value::Value::String(
                        "route to the entity's authority lost".into(),
                    ),
                );
                self.stats.session(sent, "lost-route answer not sent");
            }
        }
        for (_, calls) in self.calls.link_gone(id) {
            self.release_calls(calls, scene);
        }
        if !self.links.values().any(|l| l.peer == link.peer) {
            self.reclaim_unanswered(link.peer, scene);
        }
    }

    /// Gives every replicated local entity a federation identity.
    fn track_local_entities(&mut self, scene: &Scene) {
        let new: Vec<EntityId> = scene
            .entities()
            .filter(|e| {
                e.is_replicated()
                    && e.origin == Origin::Local
                    && !self.tracked.is_tracked_scene(e.id)
            })
            .map(|e| e.id)
            .collect();
        for id in new {
            self.track_local(id);
        }
    }

    pub(super) fn track_local(&mut self, id: EntityId) -> GlobalId {
        let global = GlobalId {
            origin: self.node,
            serial: self.next_serial,
        };
        self.next_serial += 1;
        // A fresh serial is never tracked, and callers track only scene
        // entities without an identity: the pair cannot be refused.
        if let Err(error) = self.tracked.insert_local(global, id) {
            warn!(entity = %id, %error, "own entity not tracked");
        }
        global
    }

    /// Tracked entities with parents before children.
    pub(super) fn export_order(&self, scene: &Scene) -> Vec<GlobalId> {
        let mut order = Vec::with_capacity(self.tracked.len());
        let mut placed = std::collections::HashSet::new();
        for entity in scene.entities() {
            let mut chain = Vec::new();
            let mut cursor = Some(entity.id);
            while let Some(id) = cursor {
                if placed.contains(&id) || chain.contains(&id) || chain.len() > 64 {
                    break;
                }
                chain.push(id);
                cursor = scene.entity(id).and_then(|e| e.parent);
            }
            for id in chain.into_iter().rev() {
                if placed.insert(id) {
                    if let Some(global) = self.tracked.global_of(id) {
                        order.push(global);
                    }
                }
            }
        }
        order
    }

    /// The path to put on the copy of `global` this node sends: the path it
    /// received (or none for its own), with itself appended.
    pub(super) fn outgoing_path(&self, global: GlobalId) -> Vec<Uuid> {
        let mut path = self
            .tracked
            .get(&global)
            .and_then(|t| t.selected)
            .and_then(|link| {
                let link = self.links.get(&link)?;
                Some(link.mirror.copy_of(global)?.path.clone())
            })
            .unwrap_or_default();
        path.push(self.node);
        path
    }

    /// The export policy to send with `global`: this node's own for its
    /// entities; for a remote one, what the presented copy carries (the
    /// origin's), or the unstated policy if it carries none.
    pub(super) fn outgoing_policy(&self, global: GlobalId) -> Arc<OriginPolicy> {
        let Some(tracked) = self.tracked.get(&global) else {
            return Arc::new(OriginPolicy::unstated());
        };
        if tracked.is_source() {
            return self.own_policy.clone();
        }
        tracked
            .selected
            .and_then(|link| {
                let link = self.links.get(&link)?;
                link.mirror.copy_of(global)?.policy.clone()
            })
            .unwrap_or_else(|| Arc::new(OriginPolicy::unstated()))
    }

    /// The origin's policy a relay must apply to `global` (none for this
    /// node's own entities: its link filters say it all).
    pub(super) fn relay_rule(&self, global: GlobalId) -> Option<Arc<OriginPolicy>> {
        let source = self.tracked.get(&global).is_some_and(|t| t.is_source());
        (!source).then(|| self.outgoing_policy(global))
    }

    /// Whether `global` should be exported on `link` (section 4).
    pub(super) fn should_export(&self, global: GlobalId, link: LinkId) -> bool {
        let (Some(tracked), Some(target)) = (self.tracked.get(&global), self.links.get(&link))
        else {
            return false;
        };
        if tracked.is_source() {
            return true;
        }
        if tracked.selected == Some(link) || tracked.selected.is_none() {
            return false;
        }
        !self.outgoing_path(global).contains(&target.peer)
    }

    /// Re-chooses the copy of `global` to present (section 4) and applies
    /// the change to the scene and to every link's exports.
    pub(super) fn reroute(&mut self, global: GlobalId, scene: &mut Scene) {
        let tracked = self.tracked.get(&global);
        if tracked.is_none() && global.origin == self.node {
            return; // our own entity came back: never presented twice
        }
        // Copies by highest epoch, then those from the authority itself
        // over those a node that handed it over relays, then the shortest
        // path (docs/federation.md §7.3).
        let mut candidates: Vec<(std::cmp::Reverse<u64>, bool, usize, Uuid, LinkId)> = self
            .links
            .values()
            .filter_map(|link| {
                let entity = link.mirror.copy_of(global)?;
                (!entity.path.contains(&self.node)).then_some((
                    std::cmp::Reverse(entity.epoch),
                    !entity.from_authority(),
                    entity.path.len(),
                    link.peer,
                    link.id,
                ))
            })
            .collect();
        candidates.sort();
        let newest = candidates.first().map(|c| {
            let copy = self.links[&c.4].mirror.copy_of(global);
            (c.0 .0, copy.map_or(global.origin, |c| c.authority()))
        });
        let own_epoch = tracked.map_or(0, |t| t.epoch);
        let is_local = tracked.is_some_and(|t| t.is_local());
        let presented = tracked.and_then(|t| t.selected);
        if let Some((epoch, authority)) = newest {
            if authority == self.node && !is_local && epoch > own_epoch {
                // The grant to this node, accepted after the state sent
                // before it: that copy's state becomes this node's own.
                let granting = candidates[0].4;
                match presented {
                    None => self.present(global, granting, scene),
                    Some(link) if link != granting => self.switch_route(global, granting, scene),
                    Some(_) => {}
                }
                let from = self
                    .links
                    .get(&granting)
                    .and_then(|l| l.mirror.copy_of(global))
                    .and_then(|c| c.path.first().copied())
                    .unwrap_or(global.origin);
                self.take_over(global, epoch, from, scene);
                return;
            }
            // At equal epochs (a reclaim racing a second hand-over) the
            // lower UUID keeps it.
            let outranked = epoch > own_epoch || (epoch == own_epoch && authority < self.node);
            if is_local && outranked && authority != self.node {
                self.step_down(global, authority, epoch, scene);
            }
        }
        if self.tracked.get(&global).is_some_and(|t| t.is_local()) {
            return;
        }
        // Copies older than an epoch this node has stated are stale.
        let floor = self
            .tracked
            .get(&global)
            .filter(|t| t.handed_to.is_some())
            .map_or(0, |t| t.epoch);
        candidates.retain(|c| c.0 .0 >= floor);
        let best = candidates.first().map(|c| c.4);
        let current = self.tracked.get(&global).and_then(|t| t.selected);
        let current_usable = current.is_some_and(|c| candidates.iter().any(|c2| c2.4 == c));
        let handed = self
            .tracked
            .get(&global)
            .is_some_and(|t| t.handed_to.is_some());
        match (current, best) {
            (None, None) => {}
            (Some(_), None) => self.unpresent(global, scene),
            (None, Some(link)) if handed => {
                if self.copy_covers(global, link, scene) {
                    debug!(entity = %global, link = link.0, "new authority's copy presented");
                    if let Some(t) = self.tracked.get_mut(&global) {
                        t.handed_to = None;
                    }
                    self.switch_route(global, link, scene);
                    self.adopted(global, scene);
                } else {
                    debug!(entity = %global, "handed entity waits for the new copy's components");
                }
            }
            (None, Some(link)) => self.present(global, link, scene),
            // A shorter route whose copy has not yet brought every component
            // the presented copy has (its entity object arrives before its
            // component objects): stay on the working route until it has,
            // so the switch keeps every component and its id (`switch_route`).
            // A route that is gone is left at once.
            (Some(old), Some(new))
                if old != new && current_usable && !self.copy_covers(global, new, scene) =>
            {
                debug!(entity = %global, from = %old, to = %new, "route change waits for the new copy's components");
            }
            (Some(old), Some(new)) if old != new => {
                debug!(entity = %global, from = %old, to = %new, "route changed");
                self.switch_route(global, new, scene);
            }
            (Some(_), Some(_)) => {}
        }
        self.sync_all_links(global, scene);
    }

    /// Whether the copy of `global` on `link` has a component object for
    /// every component presented now (same type and name).
    fn copy_covers(&self, global: GlobalId, link: LinkId, scene: &Scene) -> bool {
        let (Some(tracked), Some(link)) = (self.tracked.get(&global), self.links.get(&link)) else {
            return false;
        };
        let Some(copy) = link.mirror.copy_of(global) else {
            return false;
        };
        let Some(entity) = scene.entity(tracked.scene()) else {
            return true;
        };
        let presented: Vec<ComponentId> = if tracked.selected.is_none() {
            // Handed over: the scene's own components.
            entity.replicated_components().map(|c| c.id).collect()
        } else {
            tracked.components.values().copied().collect()
        };
        presented.iter().all(|id| {
            let Some(presented) = entity.components.get(id) else {
                return true;
            };
            copy.components().iter().any(|object| {
                link.mirror.component(*object).is_some_and(|c| {
                    c.kind.type_id() == presented.type_id && c.name == presented.name
                })
            })
        })
    }

    /// Brings every link's export of `global` in line with `should_export`.
    pub(super) fn sync_all_links(&mut self, global: GlobalId, scene: &Scene) {
        let links: Vec<LinkId> = self.links.keys().copied().collect();
        for link in links {
            self.sync_entity_export(global, link, scene);
            self.sync_component_exports(global, link, scene);
        }
    }

    /// Removes a remote entity from the scene: no route left.
    fn unpresent(&mut self, global: GlobalId, scene: &mut Scene) {
        let Some(tracked) = self.tracked.remove(&global) else {
            return;
        };
        let source = ChangeSource::Peer(tracked.selected.map_or(0, |l| l.0));
        // Children are other entities with routes of their own: keep them.
        let children: Vec<EntityId> = scene
            .entities()
            .filter(|e| e.parent == Some(tracked.scene()))
            .map(|e| e.id)
            .collect();
        for child in children {
            let orphaned = scene.set_parent(source, child, None);
            self.stats
                .scene(orphaned, "child of a withdrawn entity not detached");
            if let Some(child) = self.tracked.global_of(child) {
                self.awaiting_parent.insert(child);
            }
        }
        let removed = scene.remove_entity(source, tracked.scene());
        self.stats.scene(removed, "withdrawn entity not removed");
        for link in self.links.values_mut() {
            super::export::unexport_entity(link, tracked.scene(), &mut self.stats);
        }
        debug!(entity = %global, "entity withdrawn");
    }
}
