//! Read-ahead: before a batch of updates is applied, the records each one
//! will touch are read back to back, so that their cache misses overlap (at
//! 10 000 entities every lookup chain is a run of dependent misses; inside
//! each update they are taken one after another).
//!
//! A read-ahead is only right while it reads what the update reads. So it
//! owns no lookup of its own: the chains here are the ones the update paths
//! call (`Federation::update_target` for a peer's update,
//! `Link::exported_component` for a change this node exports), and this
//! file only walks them early.

use crate::federation::core::Federation;
use crate::federation::ids::LinkId;
use crate::federation::routing::link::Link;
use crate::federation::routing::mirror::MirrorComponent;
use crate::less::ids::{Local, ObjectId, Remote};
use crate::less::session::Event;
use crate::scene::Scene;
use crate::tundra::{ComponentId, EntityId};

/// Where a peer's update of one component object lands.
pub(in crate::federation) struct UpdateTarget<'a> {
    pub mirrored: &'a MirrorComponent,
    /// The presented scene entity and component, when the object's copy is
    /// the one presented and the component is in the scene.
    pub scene: Option<(EntityId, ComponentId)>,
}

impl Federation {
    /// The chain an update of component object `object` on `link` follows:
    /// mirrored object, its owner, the owner's tracked record, and the
    /// scene component it presents. `None` when the object is not here;
    /// `scene` is `None` when this copy is not the presented one.
    #[inline]
    pub(in crate::federation) fn update_target<'a>(
        &'a self,
        link: &'a Link,
        object: ObjectId<Remote>,
    ) -> Option<UpdateTarget<'a>> {
        let mirrored = link.mirror.component(object)?;
        let scene = link
            .mirror
            .owner_of(mirrored)
            .and_then(|owner| self.tracked.get(&owner.global))
            .filter(|tracked| tracked.selected == Some(link.id))
            .and_then(|tracked| {
                let component = tracked.components.get(&object)?;
                Some((tracked.scene(), *component))
            });
        Some(UpdateTarget { mirrored, scene })
    }

    /// Where the updates queued on `link`'s session will land, in order.
    pub(in crate::federation) fn pending_update_targets(
        &self,
        link_id: LinkId,
    ) -> impl Iterator<Item = UpdateTarget<'_>> + '_ {
        let link = self.links.get(&link_id);
        link.into_iter().flat_map(move |link| {
            link.session
                .pending_events()
                .filter_map(move |event| match event {
                    Event::EntityUpdated { entity, .. } => self.update_target(link, *entity),
                    _ => None,
                })
        })
    }

    /// Reads every record the queued updates of a link will read, before
    /// any is applied.
    pub(in crate::federation) fn warm_updates(&self, link_id: LinkId, scene: &Scene) {
        for target in self.pending_update_targets(link_id) {
            if let Some((entity, component)) = target.scene {
                scene.warm(entity, component);
            }
            target.mirrored.warm();
        }
    }

    /// The objects an edit of `component` of scene entity `entity` updates,
    /// per link (the export path's own lookup).
    pub(in crate::federation) fn export_targets(
        &self,
        entity: EntityId,
        component: ComponentId,
    ) -> impl Iterator<Item = (&Link, ObjectId<Local>)> + '_ {
        self.links
            .values()
            .filter_map(move |link| Some((link, link.exported_component(entity, component)?)))
    }

    /// A client's edit of `component` of scene entity `entity` is coming:
    /// reads where the scene and every link's export will write. A node
    /// calls this for a whole batch of edits before applying the first.
    pub fn warm(&self, scene: &Scene, entity: EntityId, component: ComponentId) {
        scene.warm(entity, component);
        for (link, object) in self.export_targets(entity, component) {
            link.session.warm_object(object);
        }
    }
}
