//! Routing: which copy of an entity this node presents (highest epoch, the
//! authority's own, then the shortest path), and on which links it goes
//! (split horizon, never to a node already on its path)
//! (docs/federation.md §4, §7.3).

use tracing::{debug, info};
use uuid::Uuid;

use crate::federation::core::Federation;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::unexport_entity;
use crate::scene::{ChangeSource, Scene};
use crate::tundra::{ComponentId, EntityId};

impl Federation {
    /// The link whose copy of `global` this node presents, and its peer.
    pub fn route_of(&self, global: GlobalId) -> Option<(LinkId, Uuid)> {
        let link = self.tracked.get(&global)?.selected?;
        Some((link, self.links.get(&link)?.peer))
    }

    /// Tracked entities with parents before children.
    pub(in crate::federation) fn export_order(&self, scene: &Scene) -> Vec<GlobalId> {
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
    pub(in crate::federation) fn outgoing_path(&self, global: GlobalId) -> Vec<Uuid> {
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

    /// Whether `global` should be exported on `link` (section 4).
    pub(in crate::federation) fn should_export(&self, global: GlobalId, link: LinkId) -> bool {
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
    pub(in crate::federation) fn reroute(&mut self, global: GlobalId, scene: &mut Scene) {
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
                let overdue = self.overdue_copies.remove(&global);
                if self.copy_covers(global, link, scene) || overdue {
                    if overdue {
                        // The new authority does not hold every component
                        // (it cannot read one, or an export list kept it
                        // back): its copy is the entity now, and what it
                        // lacks leaves here too (docs/federation.md §7.3).
                        self.stats.incomplete_handovers += 1;
                        info!(entity = %global, link = link.0, "new authority's copy presented without the components it lacks");
                    } else {
                        debug!(entity = %global, link = link.0, "new authority's copy presented");
                    }
                    self.incomplete_copies.remove(&global);
                    if let Some(t) = self.tracked.get_mut(&global) {
                        t.handed_to = None;
                    }
                    self.switch_route(global, link, scene);
                    self.adopted(global, scene);
                } else {
                    debug!(entity = %global, "handed entity waits for the new copy's components");
                    self.incomplete_copies.entry(global).or_insert(None);
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
    pub(in crate::federation) fn sync_all_links(&mut self, global: GlobalId, scene: &Scene) {
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
            unexport_entity(link, tracked.scene(), &mut self.stats);
        }
        debug!(entity = %global, "entity withdrawn");
    }
}
