//! Links coming and going: a new link is sent everything it should carry,
//! a lost one takes its copies with it (entities reachable only through it
//! leave the scene) and answers the calls that were waiting on it; this
//! node's own entities get their federation identity here.

use tracing::{info, warn};

use crate::federation::core::Federation;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::Link;
use crate::scene::{Origin, Scene};
use crate::tundra::EntityId;

impl Federation {
    /// A link came up: its session is ready. Exports everything it should
    /// carry.
    pub fn add_link(&mut self, link: Link, scene: &Scene) {
        let id = link.id;
        info!(link = id.0, peer = %link.peer_name, "federation link added");
        self.known_exports
            .insert(link.peer, link.policy.export.clone());
        let routes_changed = self
            .interest
            .add_link(id, link.peer, link.features.interest);
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
        self.send_first_interest(id);
        let others: Vec<LinkId> = routes_changed.into_iter().filter(|l| *l != id).collect();
        self.reapply_interest(&others, scene);
    }

    /// A link went down: every copy it carried is withdrawn; entities reachable
    /// only through it leave the scene.
    pub fn remove_link(&mut self, id: LinkId, scene: &mut Scene) {
        let Some(mut link) = self.links.remove(&id) else {
            return;
        };
        info!(link = id.0, peer = %link.peer_name, "federation link removed");
        let routes_changed = self.interest.remove_link(id);
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
        // Another link may be the best way to a node that link led to.
        self.reapply_interest(&routes_changed, scene);
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

    pub(in crate::federation) fn track_local(&mut self, id: EntityId) -> GlobalId {
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
}
