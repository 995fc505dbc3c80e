//! Client areas (docs/federation.md §8.4): in spatial interest, a client is
//! shown another world's entity only while its tree lies within `radius`
//! of the client's anchor, and is told it left (RemoveEntity) once every
//! member of the tree is farther than `radius + hysteresis`; it comes back
//! whole (CreateEntity, current state) when it re-enters. The node's own
//! entities, trees holding one, and trees without a Placeable are always
//! shown. A client acts only on what it is shown: messages naming a hidden
//! entity are refused as naming an unknown one.
//!
//! The anchor is where the node drew the client's area (the node's own
//! interest, `node/interest.rs`): one anchor per client for both, so what
//! the node subscribes covers what its clients are shown. A client without
//! an anchor yet is shown only the node's own world.

use foldhash::{HashSet, HashSetExt};
use tracing::debug;

use super::TundraServer;
use crate::scene::position::{world_position, PLACEABLE};
use crate::scene::tree::{root_of, tree_members};
use crate::scene::{Change, ChangeKind, ChangeSource, ClientId, Origin, Scene};
use crate::tundra::values::Float3;
use crate::tundra::{EntityId, Message};

/// The clients' areas: metres around each client's anchor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientAreas {
    pub radius: f32,
    /// How much farther a shown tree may go before it is removed.
    pub hysteresis: f32,
}

/// What one client is not shown.
#[derive(Debug, Default)]
pub struct Visibility {
    /// Where its area is drawn, in this world's coordinates.
    anchor: Option<Float3>,
    /// Entities in the scene the client is not shown.
    hidden: HashSet<EntityId>,
}

impl Visibility {
    /// Whether `id` is kept from the client.
    #[inline]
    pub fn hides(&self, id: EntityId) -> bool {
        !self.hidden.is_empty() && self.hidden.contains(&id)
    }

    /// Entities kept from the client now.
    pub fn hidden(&self) -> usize {
        self.hidden.len()
    }

    /// The entity left the scene: nothing more to keep from the client.
    pub(super) fn forget(&mut self, id: EntityId) {
        if !self.hidden.is_empty() {
            self.hidden.remove(&id);
        }
    }
}

fn distance(a: Float3, b: Float3) -> f32 {
    let (dx, dy, dz) = (a.x - b.x, a.y - b.y, a.z - b.z);
    (dx * dx + dy * dy + dz * dz).sqrt()
}

/// Whether a client anchored at `anchor` is shown the tree of `members`;
/// `shown` says whether it is shown now (it then stays within the
/// hysteresis).
fn shows(
    scene: &Scene,
    members: &[EntityId],
    anchor: Option<Float3>,
    areas: ClientAreas,
    shown: bool,
) -> bool {
    let mut placed = false;
    let mut near = false;
    for member in members {
        let Some(entity) = scene.entity(*member) else {
            continue;
        };
        if entity.origin != Origin::Remote {
            return true; // this node's own world
        }
        if near {
            continue;
        }
        let Some(position) = world_position(scene, entity) else {
            continue;
        };
        placed = true;
        if let Some(anchor) = anchor {
            let d = distance(position, anchor);
            near = d <= areas.radius || (shown && d <= areas.radius + areas.hysteresis);
        }
    }
    near || !placed
}

/// Whether a change may move an entity into or out of a client's area.
fn moves(scene: &Scene, kind: ChangeKind) -> bool {
    let placeable = |e: EntityId, c| {
        scene
            .entity(e)
            .and_then(|e| e.components.get(&c))
            .is_some_and(|c| c.type_id == PLACEABLE)
    };
    match kind {
        ChangeKind::EntityCreated(_) | ChangeKind::ParentChanged(_) => true,
        ChangeKind::AttributeChanged(e, c, 0) => placeable(e, c),
        ChangeKind::ComponentCreated(e, c) => placeable(e, c),
        // The Placeable may be the one removed: it is gone from the scene.
        ChangeKind::ComponentRemoved(..) => true,
        _ => false,
    }
}

/// The entity a client message names, where it names one the client must
/// be shown to act on.
pub(super) fn named_entity(message: &Message) -> Option<EntityId> {
    match message {
        Message::EditEntityProperties(m) => Some(m.entity_id),
        Message::CreateComponents(m) => Some(m.entity_id),
        Message::CreateAttributes(m) => Some(m.entity_id),
        Message::EditAttributes(m) => Some(m.entity_id),
        Message::RemoveAttributes(m) => Some(m.entity_id),
        Message::RemoveComponents(m) => Some(m.entity_id),
        Message::RemoveEntity(m) => Some(m.entity_id),
        Message::SetEntityParent(m) => Some(m.entity_id),
        Message::EntityAction(m) => Some(m.entity_id),
        _ => None,
    }
}

impl TundraServer {
    /// Turns client areas on (spatial interest) or off (every client is
    /// shown everything): every client's view is brought in line.
    pub fn set_client_areas(&mut self, areas: Option<ClientAreas>, scene: &Scene) {
        if self.areas == areas {
            return;
        }
        self.areas = areas;
        let clients: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        for client in clients {
            self.review_client(client, scene);
        }
    }

    /// The node drew `client`'s area about `anchor` (this world's
    /// coordinates): what it is shown follows.
    pub fn set_client_anchor(&mut self, client: ClientId, anchor: Float3, scene: &Scene) {
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        if state.visibility.anchor == Some(anchor) {
            return;
        }
        state.visibility.anchor = Some(anchor);
        self.review_client(client, scene);
    }

    /// Decides every tree of the scene anew for one client.
    pub(super) fn review_client(&mut self, client: ClientId, scene: &Scene) {
        let roots: Vec<EntityId> = scene
            .entities()
            .filter(|e| e.parent.map_or(true, |p| scene.entity(p).is_none()))
            .map(|e| e.id)
            .collect();
        for root in roots {
            let Some(members) = tree_members(scene, root) else {
                continue;
            };
            self.decide(client, scene, &members);
        }
    }

    /// After the scene's changes were applied to every client's state:
    /// the trees that moved, or gained members, are decided anew for every
    /// client.
    pub fn follow_client_areas(&mut self, scene: &Scene, changes: &[Change]) {
        // Without areas nothing is hidden: `set_client_areas` showed all.
        if self.areas.is_none() {
            return;
        }
        let mut roots = HashSet::new();
        for change in changes {
            if change.kind.entity().is_local() || !moves(scene, change.kind) {
                continue;
            }
            if let ChangeSource::Client(_) = change.source {
                // A client moves only this node's own entities.
                if scene
                    .entity(change.kind.entity())
                    .is_some_and(|e| e.origin != Origin::Remote)
                {
                    continue;
                }
            }
            roots.insert(root_of(scene, change.kind.entity()));
        }
        if roots.is_empty() {
            return;
        }
        let clients: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        for root in roots {
            if scene.entity(root).is_none() {
                continue;
            }
            let Some(members) = tree_members(scene, root) else {
                continue;
            };
            for client in &clients {
                self.decide(*client, scene, &members);
            }
        }
    }

    /// Shows or hides one tree to one client.
    fn decide(&mut self, client: ClientId, scene: &Scene, members: &[EntityId]) {
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        let root = members[0];
        let shown = !state.visibility.hides(root);
        let show = match self.areas {
            None => true,
            Some(areas) => shows(scene, members, state.visibility.anchor, areas, shown),
        };
        let me = state.id;
        let before = state.sync.pending();
        if show {
            // Parents first: a child arrives under a parent the client has.
            for id in members {
                if state.visibility.hidden.remove(id) {
                    state
                        .sync
                        .apply(me, ChangeSource::Node, ChangeKind::EntityCreated(*id));
                }
            }
        } else {
            // Children first.
            let mut any = false;
            for id in members.iter().rev() {
                if id.is_local() || !state.visibility.hidden.insert(*id) {
                    continue;
                }
                any = true;
                state
                    .sync
                    .apply(me, ChangeSource::Node, ChangeKind::EntityRemoved(*id));
            }
            if any {
                debug!(%client, entity = %root, "entity tree left the client's area");
            }
        }
        // What was queued is written on the client's write schedule, as
        // any change is.
        if state.sync.pending() > before && !state.write_scheduled {
            state.write_scheduled = true;
            self.schedule.handle_changed(client, false);
        }
    }

    /// Whether `client` is shown `id` (its messages may name it).
    pub(super) fn shown_to(&self, client: ClientId, id: EntityId) -> bool {
        self.clients
            .get(&client)
            .map_or(true, |c| !c.visibility.hides(id))
    }
}
