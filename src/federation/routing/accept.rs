//! Narrowing what a live link brings in (a reload of its peer file whose
//! `accept` list now refuses types it allowed): the refused types are
//! unsubscribed, and their components leave the mirror and the scene as if
//! the peer had removed them (docs/operations.md section 2.8). Widening
//! needs the peer's type introductions again, so the node re-establishes
//! the link instead.

use tracing::info;

use crate::federation::core::Federation;
use crate::federation::ids::LinkId;
use crate::federation::routing::link::{RemoteType, TypeFilter};
use crate::federation::routing::mirror::ComponentKind;
use crate::less::ids::{ObjectId, Remote, TypeId};
use crate::peering::peer_file::OPAQUE_TYPE_PREFIX;
use crate::scene::Scene;

impl Federation {
    /// Applies a narrower `accept` filter to `link_id`: types it refuses
    /// are no longer subscribed and their components are removed here.
    pub fn narrow_link_accept(&mut self, link_id: LinkId, accept: TypeFilter, scene: &mut Scene) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        link.policy.accept = accept;
        let name_of = |kind: &ComponentKind| match kind {
            ComponentKind::Opaque { type_id } => Some(format!("{OPAQUE_TYPE_PREFIX}{type_id}")),
            ComponentKind::Static { type_id } | ComponentKind::Dynamic { type_id } => {
                scene.registry().get(*type_id).map(|s| s.name.clone())
            }
        };
        let refused: Vec<(TypeId<Remote>, ComponentKind)> = link
            .remote_types
            .iter()
            .filter_map(|(type_id, remote)| match remote {
                RemoteType::Component(kind) => name_of(kind)
                    .filter(|name| !link.policy.accepts(name))
                    .map(|_| (*type_id, kind.clone())),
                _ => None,
            })
            .collect();
        if refused.is_empty() {
            return;
        }
        for (type_id, _) in &refused {
            link.remote_types.insert(*type_id, RemoteType::Ignored);
            let unsubscribed = link.session.unsubscribe_type(*type_id);
            self.stats
                .session(unsubscribed, "refused type not unsubscribed");
        }
        let objects: Vec<ObjectId<Remote>> = link
            .mirror
            .globals()
            .filter_map(|global| link.mirror.copy_of(global))
            .flat_map(|entity| entity.components().iter().copied())
            .filter(|object| {
                link.mirror
                    .component(*object)
                    .is_some_and(|c| refused.iter().any(|(_, kind)| *kind == c.kind))
            })
            .collect();
        info!(link = link_id.0, peer = %link.peer_name, types = refused.len(), components = objects.len(), "accept filter narrowed: refused components removed");
        for object in objects {
            self.handle_removed_object(link_id, object, scene);
        }
    }
}
