//! Authority hand-over (docs/federation.md §7): an entity's authority moves
//! to another node and its identity stays, so every node keeps presenting
//! the same scene entity.
//!
//! The authority is the serialization point: it grants the first
//! take-authority call of an epoch and refuses the others, so exactly one
//! requester wins. The grant is the entity object's `authority` and `epoch`
//! changing, sent as an ordinary update on the routes the state takes. A
//! receiver makes a new epoch its own only once every packet its peer sent
//! before it has arrived (`Session::received_all_through`), so the state
//! sent before a grant is applied before it at every hop, whatever the
//! network reordered. The old authority goes on exporting its last state
//! as a relay would until the new authority's copy reaches it; edits and
//! calls that reach it meanwhile wait and then travel to the new one.

use std::collections::BTreeMap;

use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::federation::authority::handover_types::{
    HandoverError, HandoverPolicy, HandoverReason, WaitingEdit, HANDOVER_TIMEOUT,
    INCOMPLETE_COPY_WAIT, MAX_WAITING_EDITS, PUSHED,
};
use crate::federation::core::{Federation, FederationEvent};
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::TypeFilter;
use crate::federation::routing::positions::{in_world_here, placed};
use crate::federation::space::position::is_transform;
use crate::less::ids::{ObjectId, Remote};
use crate::less::message::MethodStatus;
use crate::less::value::Value;
use crate::scene::{Origin, Scene};
use crate::tundra::EntityId;

impl Federation {
    /// Which take-authority calls this node grants.
    pub fn set_handover_policy(&mut self, policy: HandoverPolicy) {
        self.handover_policy = policy;
    }

    /// Upstream mode: whether the world server's session is ready, so its
    /// entities (proxied in the scene) can be handed out: the bridge
    /// removes them there (docs/upstream.md §8).
    pub fn set_world_server_ready(&mut self, ready: bool) {
        self.world_server_ready = ready;
    }

    /// The authority of a scene entity and its epoch, as this node knows
    /// them.
    pub fn authority_of(&self, entity: EntityId) -> Option<(Uuid, u64)> {
        let global = self.tracked.global_of(entity)?;
        Some(self.outgoing_authority(global))
    }

    /// Entities presented here per authority node (for status pages).
    pub fn entities_by_authority(&self) -> BTreeMap<Uuid, usize> {
        let mut counts = BTreeMap::new();
        for (global, _) in self.tracked.iter() {
            *counts
                .entry(self.outgoing_authority(*global).0)
                .or_insert(0) += 1;
        }
        counts
    }

    /// The authority and epoch this node states for `global`: its own while
    /// it is the authority or has handed the entity over, else the
    /// presented copy's.
    pub(in crate::federation) fn outgoing_authority(&self, global: GlobalId) -> (Uuid, u64) {
        let Some(tracked) = self.tracked.get(&global) else {
            return (global.origin, 0);
        };
        if tracked.is_local() {
            return (self.node, tracked.epoch);
        }
        if let Some(to) = tracked.handed_to {
            return (to, tracked.epoch);
        }
        tracked
            .selected
            .and_then(|link| self.links.get(&link)?.mirror.copy_of(global))
            .map_or((global.origin, 0), |copy| (copy.authority(), copy.epoch))
    }

    /// Asks the authority of a remote entity to hand it to this node: a
    /// take-authority call routed hop by hop like an action, stating
    /// `reason` (a client's request, a zone, an operator). The answer
    /// comes back as [`FederationEvent::AuthorityRefused`] or, when
    /// granted, as [`FederationEvent::AuthorityChanged`] once the grant
    /// arrived here.
    pub fn request_authority(
        &mut self,
        entity: EntityId,
        reason: HandoverReason,
        scene: &Scene,
    ) -> Result<(), HandoverError> {
        let global = self
            .tracked
            .global_of(entity)
            .ok_or(HandoverError::Unknown(entity))?;
        if scene.entity(entity).map(|e| e.origin) == Some(Origin::Local) {
            return Err(HandoverError::AlreadyAuthority(entity));
        }
        let (_, epoch) = self.outgoing_authority(global);
        let request = crate::federation::authority::request::AuthorityRequest::TakeAuthority {
            requester: self.node,
            epoch,
            reason,
        };
        if !self.forward_request(entity, request, None) {
            return Err(HandoverError::NoRoute(entity));
        }
        // A grant of the next epoch answers this request (`take_over`).
        self.pending_takes.insert(global, (epoch, reason));
        info!(%entity, identity = %global, epoch, reason = reason.as_str(), "authority requested");
        Ok(())
    }

    /// Hands an entity this node is the authority of to node `to` (a zone,
    /// a departure, an operator). The grant travels as the entity's state
    /// does; `to` takes the entity over when it arrives there.
    pub fn hand_over(
        &mut self,
        entity: EntityId,
        to: Uuid,
        reason: HandoverReason,
        scene: &mut Scene,
    ) -> Result<(), HandoverError> {
        let global = self
            .tracked
            .global_of(entity)
            .ok_or(HandoverError::Unknown(entity))?;
        if !self.tracked.get(&global).is_some_and(|t| t.is_local()) {
            return Err(HandoverError::NotAuthority(entity));
        }
        if to == self.node {
            return Err(HandoverError::ToSelf(entity));
        }
        if let Some(why) = self.world_server_keeps(entity, scene) {
            return Err(HandoverError::WorldServer(entity, why));
        }
        self.grant(global, to, reason, scene);
        Ok(())
    }

    /// Gives `global` (this node's) to `to` at the next epoch: from now on
    /// this node's clients' edits are tweaks toward `to`.
    fn grant(&mut self, global: GlobalId, to: Uuid, reason: HandoverReason, scene: &mut Scene) {
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        let epoch = tracked.epoch + 1;
        let entity = tracked.scene();
        tracked.hand_to(to, epoch);
        // The grant leaves in the next packet of each link.
        let marks = self
            .links
            .iter()
            .map(|(id, link)| (*id, link.session.send_mark()))
            .collect();
        self.grant_marks.insert(global, marks);
        let set = scene.set_origin(entity, Origin::Remote);
        self.stats.scene(set, "handed entity not made remote");
        *self
            .stats
            .handed_over
            .entry((to, reason.as_str()))
            .or_insert(0) += 1;
        info!(%entity, identity = %global, %to, epoch, reason = reason.as_str(), "authority handed over");
        self.events.push_back(FederationEvent::AuthorityChanged {
            entity,
            authority: to,
            epoch,
        });
        self.sync_all_links(global, scene);
    }

    /// A take-authority call reached this node, the entity's authority:
    /// grants the first of an epoch that the policy allows, counted under
    /// the reason the request states; refuses others.
    pub(in crate::federation) fn answer_take_authority(
        &mut self,
        entity: EntityId,
        requester: Uuid,
        epoch: u64,
        reason: HandoverReason,
        scene: &mut Scene,
    ) -> (MethodStatus, Value) {
        let Some(global) = self.tracked.global_of(entity) else {
            return (
                MethodStatus::NOT_FOUND,
                Value::String("no such entity".into()),
            );
        };
        let (authority, current) = self.outgoing_authority(global);
        let refuse = |federation: &mut Federation, why: &'static str| {
            *federation.stats.handover_refusals.entry(why).or_insert(0) += 1;
            info!(%entity, identity = %global, %requester, epoch, current, reason = why, "authority request refused");
        };
        if epoch != current || authority == requester {
            refuse(self, "conflict");
            // A failure's value is text (docs/less-wire.md §12): the
            // winner's UUID, hyphenated.
            return (MethodStatus::CONFLICT, Value::String(authority.to_string()));
        }
        if let Some(why) = self.world_server_keeps(entity, scene) {
            refuse(self, "world-server");
            return (MethodStatus::FORBIDDEN, Value::String(why.into()));
        }
        if !self.policy_grants(entity, requester, scene) {
            refuse(self, "policy");
            return (
                MethodStatus::FORBIDDEN,
                Value::String("authority not granted by policy".into()),
            );
        }
        self.grant(global, requester, reason, scene);
        (MethodStatus::SUCCESS, Value::Null)
    }

    /// Why an entity of this node's world server (proxied in the scene)
    /// cannot be handed out now, if it cannot (docs/upstream.md §8):
    /// handing it out removes it from the world server, which cannot be
    /// told while its session is not ready, and whose RemoveEntity would
    /// take the entity's children in the world server with it.
    fn world_server_keeps(&self, entity: EntityId, scene: &Scene) -> Option<&'static str> {
        if !scene.is_proxied(entity) {
            return None;
        }
        if !self.world_server_ready {
            return Some("this node's world server, which has the entity, is unreachable");
        }
        let has_world_children = scene
            .entities()
            .any(|e| e.parent == Some(entity) && scene.is_proxied(e.id));
        has_world_children.then_some(
            "the entity has children in this node's world server, which would go with it",
        )
    }

    fn policy_grants(&self, entity: EntityId, requester: Uuid, scene: &Scene) -> bool {
        let policy = &self.handover_policy;
        if !policy.grant
            || policy
                .peers
                .as_ref()
                .is_some_and(|p| !p.contains(&requester))
        {
            return false;
        }
        match &policy.types {
            TypeFilter::All => true,
            filter => scene.entity(entity).is_some_and(|e| {
                e.replicated_components().any(|c| {
                    filter.allows(&crate::federation::routing::object_values::type_name(c))
                })
            }),
        }
    }

    /// An entity object update carried an authority or epoch: a newer epoch
    /// waits for the packets before it; an older one is refused.
    pub(in crate::federation) fn note_announced(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let Some(copy) = link.mirror.entity(object) else {
            return;
        };
        let Some((authority, epoch)) = copy.announced else {
            return;
        };
        if epoch > copy.epoch {
            let mark = link.session.receive_mark();
            link.epoch_barriers.retain(|(o, _)| *o != object);
            link.epoch_barriers.push((object, mark));
            return;
        }
        if epoch < copy.epoch || authority.unwrap_or(copy.global.origin) != copy.authority() {
            self.stats.stale_epochs += 1;
            warn!(link = link_id.0, entity = %copy.global, epoch, current = copy.epoch, "entity update with an older epoch refused");
        }
        link.mirror.drop_announced(object);
    }

    /// Makes each announced epoch of `link_id` whose earlier packets have
    /// all arrived the copy's own, and re-chooses the route.
    pub(in crate::federation) fn pass_epoch_barriers(
        &mut self,
        link_id: LinkId,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        if link.epoch_barriers.is_empty() {
            return;
        }
        let (passed, waiting): (Vec<_>, Vec<_>) = link
            .epoch_barriers
            .drain(..)
            .partition(|(_, mark)| link.session.received_all_through(*mark));
        link.epoch_barriers = waiting;
        let globals: Vec<GlobalId> = passed
            .into_iter()
            .filter_map(|(object, _)| link.mirror.accept_announced(object))
            .collect();
        for global in globals {
            debug!(link = link_id.0, entity = %global, "new epoch accepted");
            self.reroute(global, scene);
        }
    }

    /// A link went down with epochs still waiting for its earlier packets,
    /// which will not come: a grant to this node is taken with the state
    /// that did arrive (docs/federation.md §7.5).
    pub(in crate::federation) fn take_orphaned_grants(
        &mut self,
        link: &mut crate::federation::routing::link::Link,
        scene: &mut Scene,
    ) {
        for (object, _) in std::mem::take(&mut link.epoch_barriers) {
            let Some(global) = link.mirror.accept_announced(object) else {
                continue;
            };
            let Some(copy) = link.mirror.copy_of(global) else {
                continue;
            };
            let (authority, epoch) = (copy.authority(), copy.epoch);
            let presented = self
                .tracked
                .get(&global)
                .is_some_and(|t| t.selected == Some(link.id));
            if authority == self.node && presented {
                self.take_over(global, epoch, link.peer, scene);
            }
        }
    }

    /// This node becomes the authority of `global` at `epoch`, from the
    /// state its scene presents.
    pub(in crate::federation) fn take_over(
        &mut self,
        global: GlobalId,
        epoch: u64,
        from: Uuid,
        scene: &mut Scene,
    ) {
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        let entity = tracked.scene();
        tracked.become_authority(epoch);
        let set = scene.set_origin(entity, Origin::Local);
        self.stats.scene(set, "entity taken over not made local");
        // The grant names no reason: this node's own request of the epoch
        // before is answered by it, anything else was pushed.
        let reason = match self.pending_takes.remove(&global) {
            Some((asked, reason)) if asked.checked_add(1) == Some(epoch) => reason.as_str(),
            _ => PUSHED,
        };
        *self.stats.taken_over.entry((from, reason)).or_insert(0) += 1;
        info!(%entity, identity = %global, %from, epoch, reason, "authority taken over");
        self.events.push_back(FederationEvent::AuthorityChanged {
            entity,
            authority: self.node,
            epoch,
        });
        // Calls that waited for a route are this node's own now.
        let calls = self.calls.take_waiting(global);
        self.release_calls(calls, scene);
        self.flush_waiting_edits(global, scene);
        self.sync_all_links(global, scene);
    }

    /// This node, the authority of `global`, sees a copy with a newer epoch
    /// naming another node (it reclaimed an entity that its new authority
    /// had taken after all): it stops being the authority and presents
    /// that copy.
    pub(in crate::federation) fn step_down(
        &mut self,
        global: GlobalId,
        to: Uuid,
        epoch: u64,
        scene: &mut Scene,
    ) {
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        let entity = tracked.scene();
        tracked.hand_to(to, epoch);
        let set = scene.set_origin(entity, Origin::Remote);
        self.stats
            .scene(set, "entity stepped down from not made remote");
        warn!(%entity, identity = %global, %to, epoch, "authority yielded to a newer epoch");
        self.events.push_back(FederationEvent::AuthorityChanged {
            entity,
            authority: to,
            epoch,
        });
    }

    /// Takes back entities handed over longer than [`HANDOVER_TIMEOUT`] ago
    /// whose new authority's copy never arrived (called on the node's
    /// tick; the first tick that sees a hand-over starts its clock).
    pub fn handle_handover_deadlines(&mut self, now: crate::clock::Time, scene: &mut Scene) {
        self.own_edits.tick(now);
        self.present_incomplete_copies(now, scene);
        // Requests for entities gone, or already this node's, wait for no grant.
        let tracked = &self.tracked;
        self.pending_takes
            .retain(|global, _| tracked.get(global).is_some_and(|t| !t.is_local()));
        let handed: Vec<GlobalId> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.handed_to.is_some() && t.selected.is_none())
            .map(|(g, _)| *g)
            .collect();
        self.handover_deadlines.retain(|g, _| handed.contains(g));
        self.grant_marks.retain(|g, _| handed.contains(g));
        let mut expired = Vec::new();
        for global in handed {
            // The clock runs only once the grant has left: a first hop that
            // loses its packet several times is slow, not failed (a link
            // that fails is dropped from the wait, and ends the hand-over
            // at once if it led to the new authority).
            if let Some(marks) = self.grant_marks.get_mut(&global) {
                let links = &self.links;
                marks.retain(|(link, mark)| {
                    links
                        .get(link)
                        .is_some_and(|l| !l.session.acknowledged_through(*mark))
                });
                if !marks.is_empty() {
                    self.handover_deadlines.remove(&global);
                    continue;
                }
                self.grant_marks.remove(&global);
            }
            let deadline = *self
                .handover_deadlines
                .entry(global)
                .or_insert(now + HANDOVER_TIMEOUT);
            if deadline <= now {
                expired.push(global);
            }
        }
        if !expired.is_empty() {
            self.reclaim(expired, scene);
        }
    }

    /// The link to the node an entity was handed to failed before its copy
    /// arrived: this node takes the entity back (docs/federation.md §7.5).
    pub(in crate::federation) fn reclaim_unanswered(&mut self, peer: Uuid, scene: &mut Scene) {
        let stranded: Vec<GlobalId> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.handed_to == Some(peer) && t.selected.is_none())
            .map(|(g, _)| *g)
            .collect();
        self.reclaim(stranded, scene);
    }

    /// Takes back handed-over entities at the next epoch, unless a copy at
    /// their epoch has arrived meanwhile.
    fn reclaim(&mut self, stranded: Vec<GlobalId>, scene: &mut Scene) {
        for global in stranded {
            let Some(epoch) = self.tracked.get(&global).map(|t| t.epoch) else {
                continue;
            };
            self.handover_deadlines.remove(&global);
            let carried = self.links.values().any(|l| {
                l.mirror
                    .copy_of(global)
                    .is_some_and(|c| c.epoch >= epoch && !c.path.contains(&self.node))
            });
            if carried {
                continue;
            }
            let Some(tracked) = self.tracked.get_mut(&global) else {
                continue;
            };
            let entity = tracked.scene();
            tracked.become_authority(epoch + 1);
            let set = scene.set_origin(entity, Origin::Local);
            self.stats.scene(set, "reclaimed entity not made local");
            *self
                .stats
                .handed_over
                .entry((self.node, HandoverReason::Reclaim.as_str()))
                .or_insert(0) += 1;
            warn!(%entity, identity = %global, epoch = epoch + 1, "entity reclaimed: the node it was handed to never took it");
            self.events.push_back(FederationEvent::AuthorityChanged {
                entity,
                authority: self.node,
                epoch: epoch + 1,
            });
            let calls = self.calls.take_waiting(global);
            self.release_calls(calls, scene);
            self.flush_waiting_edits(global, scene);
            self.sync_all_links(global, scene);
        }
    }

    /// Holds a client's or peer's edit of an entity this node handed over
    /// until the new authority's copy arrives. False when the queue is full.
    pub(in crate::federation) fn wait_edit(&mut self, global: GlobalId, edit: WaitingEdit) -> bool {
        let queue = self.waiting_edits.entry(global).or_default();
        if queue.len() >= MAX_WAITING_EDITS {
            self.stats.handover_refusals_edit += 1;
            warn!(entity = %global, limit = MAX_WAITING_EDITS, "edit refused: too many waiting for the new authority");
            return false;
        }
        queue.push(edit);
        true
    }

    /// Sends (or, as the authority now, applies) the edits that waited.
    pub(in crate::federation) fn flush_waiting_edits(
        &mut self,
        global: GlobalId,
        scene: &mut Scene,
    ) {
        let Some(edits) = self.waiting_edits.remove(&global) else {
            return;
        };
        let Some(entity) = self.tracked.get(&global).map(|t| t.scene()) else {
            return;
        };
        let local = self.tracked.get(&global).is_some_and(|t| t.is_local());
        for edit in edits {
            if local {
                if edit.own {
                    self.own_edits
                        .edited_here((global, edit.component, edit.index));
                }
                // A relayed edit's placed transform is in federation
                // coordinates (`routing/positions.rs`).
                let placement = self.placement;
                let arrived_placed = !edit.own
                    && !placement.is_origin()
                    && scene.entity(entity).is_some_and(|e| {
                        e.components.get(&edit.component).is_some_and(|c| {
                            is_transform(c.type_id, edit.index) && in_world_here(e, c)
                        })
                    });
                let value = if arrived_placed {
                    placed(edit.value, |t| placement.transform_to_local(t))
                } else {
                    edit.value
                };
                let source = crate::scene::ChangeSource::Node;
                let applied =
                    scene.edit_attribute(source, entity, edit.component, edit.index, value);
                self.stats.scene(applied, "waiting edit not applied");
            } else {
                self.forward_edit(
                    entity,
                    edit.component,
                    edit.index,
                    edit.value,
                    edit.own,
                    scene,
                );
            }
        }
    }

    /// The new authority's copy is presented at a node that handed the
    /// entity over: what waited for it leaves.
    pub(in crate::federation) fn adopted(&mut self, global: GlobalId, scene: &mut Scene) {
        let calls = self.calls.take_waiting(global);
        self.release_calls(calls, scene);
        self.flush_waiting_edits(global, scene);
    }

    /// A new authority's copy that has not brought every component this
    /// node presents within [`INCOMPLETE_COPY_WAIT`] is presented as it is
    /// (docs/federation.md §7.3): waiting longer would leave the entity
    /// frozen here while its authority moves it.
    fn present_incomplete_copies(&mut self, now: crate::clock::Time, scene: &mut Scene) {
        if self.incomplete_copies.is_empty() {
            return;
        }
        let tracked = &self.tracked;
        self.incomplete_copies.retain(|global, _| {
            tracked
                .get(global)
                .is_some_and(|t| t.handed_to.is_some() && t.selected.is_none())
        });
        let mut overdue = Vec::new();
        for (global, deadline) in self.incomplete_copies.iter_mut() {
            let deadline = *deadline.get_or_insert(now + INCOMPLETE_COPY_WAIT);
            if deadline <= now {
                overdue.push(*global);
            }
        }
        for global in overdue {
            self.overdue_copies.insert(global);
            self.reroute(global, scene);
            self.overdue_copies.remove(&global);
        }
    }
}
