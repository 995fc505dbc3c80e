//! Interest on the links (docs/federation.md §8): a link carries an entity
//! only while its tree lies in the regions the link routes, entities
//! without a Placeable always; the tree is brought in line when it moves,
//! and every entity when what a link routes changes. The regions and routes
//! themselves are the interest room's (`federation::interest`).

use tracing::{debug, warn};

use crate::clock::Time;
use crate::federation::core::Federation;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::interest::entry::{InterestEntry, INTEREST};
use crate::federation::interest::region::Region;
use crate::federation::interest::table::LinkInterest;
use crate::less::property_list::FieldValue;
use crate::logging::RemoteText;
use crate::scene::position::world_position;
use crate::scene::tree::{root_of, tree_members as tree};
use crate::scene::Scene;
use crate::tundra::EntityId;

impl Federation {
    /// Whether `link` should carry `id` as far as interest goes: its tree
    /// has a member in the link's regions (within their margins while the
    /// tree is carried), or no member with a Placeable.
    pub(in crate::federation) fn interest_admits(
        &self,
        link_id: LinkId,
        id: EntityId,
        scene: &Scene,
    ) -> bool {
        // The link the entity arrived on, if this node does not simulate
        // it: what goes on from there is decided per upstream link.
        let upstream = self
            .tracked
            .global_of(id)
            .and_then(|g| self.tracked.get(&g))
            .filter(|t| !t.is_source())
            .and_then(|t| t.selected);
        let Some(routed) = self.interest.routed_for(link_id, upstream) else {
            return true;
        };
        if routed.is_everywhere() {
            return true;
        }
        let root = root_of(scene, id);
        let Some(members) = tree(scene, root) else {
            return true;
        };
        let carried = self
            .links
            .get(&link_id)
            .is_some_and(|l| l.exported.contains(&id) || l.exported.contains(&root));
        let mut placed = false;
        for member in members {
            let Some(position) = scene.entity(member).and_then(|e| world_position(scene, e)) else {
                continue;
            };
            placed = true;
            let position = self.placement.to_federation(position);
            if routed.admits(position) || (carried && routed.keeps(position)) {
                return true;
            }
        }
        !placed
    }

    /// `id` moved (or gained or lost a Placeable or a parent): its tree is
    /// introduced on, or withdrawn from, the links whose regions it
    /// entered or left.
    pub(in crate::federation) fn follow_interest(&mut self, id: EntityId, scene: &Scene) {
        if self.interest.all_everywhere() {
            return;
        }
        let Some(members) = tree(scene, root_of(scene, id)) else {
            return;
        };
        let links: Vec<LinkId> = self
            .links
            .keys()
            .filter(|l| {
                self.interest
                    .routed(**l)
                    .is_some_and(|r| !r.is_everywhere())
            })
            .copied()
            .collect();
        for link in links {
            for member in &members {
                let Some(global) = self.tracked.global_of(*member) else {
                    continue;
                };
                let have = self
                    .links
                    .get(&link)
                    .is_some_and(|l| l.exported.contains(member) || l.deferred.contains(member));
                let want =
                    self.should_export(global, link) && self.interest_admits(link, *member, scene);
                if want != have {
                    self.count_interest_change(link, want);
                    self.sync_entity_export(global, link, scene);
                    self.sync_component_exports(global, link, scene);
                }
            }
        }
    }

    fn count_interest_change(&mut self, link: LinkId, entered: bool) {
        if entered {
            self.stats.interest_entered += 1;
        } else {
            self.stats.interest_left += 1;
        }
        debug!(
            link = link.0,
            entered, "entity tree crossed a link's interest"
        );
    }

    /// What `links` route changed: every entity is brought in line on them.
    pub(in crate::federation) fn reapply_interest(&mut self, links: &[LinkId], scene: &Scene) {
        if links.is_empty() {
            return;
        }
        let order: Vec<GlobalId> = self.export_order(scene);
        for link in links {
            if !self.links.contains_key(link) {
                continue;
            }
            for global in &order {
                self.sync_entity_export(*global, *link, scene);
            }
            for global in &order {
                self.sync_component_exports(*global, *link, scene);
            }
        }
    }

    /// This node's own interest, in federation coordinates: it is sent to
    /// every peer that agreed interest (rate-limited, see
    /// [`Federation::handle_interest_timeout`]).
    pub fn set_interest(&mut self, regions: Vec<Region>, margin: f32) {
        self.interest.set_own(regions, margin);
    }

    /// This node's own interest.
    pub fn own_interest(&self) -> &[Region] {
        self.interest.own()
    }

    /// Each link's interest, for status pages.
    pub fn link_interest(&self) -> Vec<LinkInterest> {
        self.interest.links()
    }

    /// Entities `link` would carry but for interest (a scan: for status
    /// pages, twice a second).
    pub fn withheld(&self, link_id: LinkId) -> usize {
        let Some(link) = self.links.get(&link_id) else {
            return 0;
        };
        if self
            .interest
            .routed(link_id)
            .map_or(true, |r| r.is_everywhere())
        {
            return 0;
        }
        self.tracked
            .iter()
            .filter(|(global, tracked)| {
                let id = tracked.scene();
                !link.exported.contains(&id)
                    && !link.deferred.contains(&id)
                    && self.should_export(**global, link_id)
            })
            .count()
    }

    /// When interest entries are next due on a link.
    pub fn interest_timeout(&self) -> Option<Time> {
        self.interest.poll_timeout()
    }

    /// Sends the interest entries due at `now`.
    pub fn handle_interest_timeout(&mut self, now: Time) {
        let due = self.interest.poll_send(now);
        self.send_interest_entries(due);
    }

    /// Sends a new link's peer this node's entries at once.
    pub(in crate::federation) fn send_first_interest(&mut self, link: LinkId) {
        let first = self.interest.first_entries(link);
        self.send_interest_entries(first);
    }

    fn send_interest_entries(&mut self, entries: Vec<(LinkId, InterestEntry)>) {
        for (link_id, entry) in entries {
            let Some(link) = self.links.get_mut(&link_id) else {
                continue;
            };
            if let Err(error) = link.session.send_interaction(INTEREST, entry.to_fields()) {
                warn!(link = link_id.0, error = %RemoteText(&error), "cannot send interest entry");
            }
        }
    }

    /// An `interest` interaction from a peer: taken into the table, and the
    /// links whose routes changed brought in line. A malformed or refused
    /// one is logged and dropped (the link goes on as before).
    pub(in crate::federation) fn handle_interest_interaction(
        &mut self,
        link_id: LinkId,
        values: &[FieldValue],
        scene: &Scene,
    ) {
        let taken = InterestEntry::from_fields(values)
            .map_err(Into::into)
            .and_then(|entry| {
                let origin = entry.origin;
                let regions = entry.regions.len();
                self.interest
                    .handle_entry(link_id, entry)
                    .map(|changed| (origin, regions, changed))
            });
        match taken {
            Ok((origin, regions, changed)) => {
                if !changed.is_empty() {
                    debug!(link = link_id.0, %origin, regions, "link interest changed");
                }
                self.reapply_interest(&changed, scene);
            }
            Err(refusal) => {
                self.stats.interest_refused += 1;
                warn!(link = link_id.0, reason = %refusal, "interest entry refused");
            }
        }
    }
}

/// Half the side of the box a node wants around an entity whose new
/// authority's copy it waits for, metres.
const AWAITED_BOX: f32 = 16.0;

impl Federation {
    /// Boxes around the entities whose copy this node waits for from
    /// another node (it handed them over, or asked for them): wherever
    /// its clients look, that copy must reach it (federation coordinates).
    pub fn awaited_regions(&self, scene: &Scene) -> Vec<Region> {
        let awaited = self
            .handover_deadlines
            .keys()
            .chain(self.waiting_edits.keys())
            .chain(self.incomplete_copies.keys())
            .chain(self.pending_takes.keys());
        let mut regions: Vec<Region> = awaited
            .filter_map(|global| self.tracked.get(global))
            .filter_map(|tracked| scene.entity(tracked.scene()))
            .filter_map(|entity| world_position(scene, entity))
            .map(|p| Region::around(self.placement.to_federation(p), AWAITED_BOX))
            .collect();
        regions.dedup();
        regions
    }
}
