//! The export policy applied: the policy this node attaches to its own
//! entities (what all its peer files allow, and more to the peers it
//! names), the policy a relayed entity carries on, and what a changed peer
//! file withdraws from or introduces on its link (docs/federation.md §4.1).

use std::sync::Arc;

use tracing::info;

use crate::federation::core::Federation;
use crate::federation::export_policy::filter::{may_export, TypeFilter};
use crate::federation::export_policy::origin_policy::OriginPolicy;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::withdraw;
use crate::federation::routing::object_values::type_name;
use crate::scene::Scene;
use crate::tundra::ComponentId;

impl Federation {
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
    pub(in crate::federation) fn refresh_own_policy(&mut self, scene: &Scene) {
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

    /// The export policy to send with `global`: this node's own for its
    /// entities; for a remote one, what the presented copy carries (the
    /// origin's), or the unstated policy if it carries none.
    pub(in crate::federation) fn outgoing_policy(&self, global: GlobalId) -> Arc<OriginPolicy> {
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
    pub(in crate::federation) fn relay_rule(&self, global: GlobalId) -> Option<Arc<OriginPolicy>> {
        let source = self.tracked.get(&global).is_some_and(|t| t.is_source());
        (!source).then(|| self.outgoing_policy(global))
    }

    /// The operator changed what may go out on `link_id` (a reload of its
    /// peer file): components the new filter refuses are withdrawn from
    /// the peer, those it now allows are introduced, and this node's own
    /// policy, which names every peer's filter (section 4.1), is sent
    /// again where it changed. The link's session stays up.
    pub fn set_link_export(&mut self, link_id: LinkId, export: TypeFilter, scene: &Scene) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        if link.policy.export == export {
            return;
        }
        info!(link = link_id.0, peer = %link.peer_name, "export filter changed");
        link.policy.export = export.clone();
        let peer = link.peer;
        self.known_exports.insert(peer, export);
        for global in self.export_order(scene) {
            self.withdraw_refused_components(global, link_id, scene);
            self.sync_component_exports(global, link_id, scene);
        }
        self.refresh_own_policy(scene);
    }

    /// Withdraws the components of `global` on `link_id` that the link's
    /// export filter or the origin's policy refuses.
    fn withdraw_refused_components(&mut self, global: GlobalId, link_id: LinkId, scene: &Scene) {
        let Some(scene_id) = self.tracked.get(&global).map(|t| t.scene()) else {
            return;
        };
        let rule = self.relay_rule(global);
        let (Some(link), Some(target)) = (self.links.get_mut(&link_id), scene.entity(scene_id))
        else {
            return;
        };
        let Some(exported) = link.exported.get(&scene_id) else {
            return;
        };
        let refused: Vec<ComponentId> = exported
            .components()
            .keys()
            .filter(|id| {
                target.components.get(id).is_some_and(|c| {
                    !may_export(&link.policy, link.peer, rule.as_deref(), &type_name(c))
                })
            })
            .copied()
            .collect();
        for id in refused {
            if let Some(object) = link.exported.remove_component(scene_id, id) {
                withdraw(link, object, &mut self.stats);
            }
        }
    }
}
