//! One peer link as the federation sees it: the LESS session, the types
//! introduced each way, what this node exports on it, and the mirror of what
//! the peer presents.

use foldhash::{HashMap, HashMapExt};

use uuid::Uuid;

use crate::federation::ids::LinkId;
use crate::federation::routing::exports::Exports;
use crate::federation::routing::mirror::{ComponentKind, Mirror};
use crate::federation::stats::FederationStats;
use crate::federation::wire::features::LinkFeatures;
use crate::less::ids::{Local, ObjectId, Remote, RequestId, TypeId};
use crate::less::session::Session;
use crate::tundra::{ComponentId, EntityId};

pub use crate::federation::export_policy::filter::{LinkPolicy, TypeFilter};

/// A type the peer introduced, as this node understood it.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteType {
    Entity,
    Component(ComponentKind),
    /// Not presentable here (unknown or not accepted): not subscribed.
    Ignored,
}

/// A method call this node forwarded on behalf of another link.
#[derive(Debug, Clone, Copy)]
pub struct ForwardedCall {
    pub from: LinkId,
    pub request: RequestId<Remote>,
}

#[derive(Debug)]
pub struct Link {
    pub id: LinkId,
    pub peer: Uuid,
    pub peer_name: String,
    pub policy: LinkPolicy,
    pub session: Session,
    /// Types this node introduced, by URI (kept with the session by
    /// `type_for`), with the send mark of the packet that introduced each.
    local_types: HashMap<String, (TypeId<Local>, u64)>,
    /// Entities whose objects wait for the peer to answer the introduction
    /// of a component type they carry (`export.rs`, `entity_waits`).
    pub(in crate::federation) deferred: std::collections::BTreeSet<EntityId>,
    /// Types the peer introduced, as this node understood them.
    pub(in crate::federation) remote_types: HashMap<TypeId<Remote>, RemoteType>,
    /// What this node exports on the link.
    pub exported: Exports,
    /// What the peer presents on the link.
    pub mirror: Mirror,
    /// Calls this node invoked on the peer: the entity called, and whom to
    /// answer (none: one of this node's clients).
    pub(in crate::federation) forwarded_calls:
        HashMap<RequestId<Local>, (crate::federation::ids::GlobalId, Option<ForwardedCall>)>,
    /// Background refresh position and budget (`refresh.rs`).
    pub refresh: crate::federation::routing::refresh::RefreshCursor,
    /// Entity objects whose new authority and epoch wait until every
    /// packet the peer sent before them has arrived, with the receive mark
    /// to wait for (`handover.rs`).
    pub(in crate::federation) epoch_barriers: Vec<(ObjectId<Remote>, u64)>,
    /// The federation features both Hellos listed: none, as for a peer
    /// that lists no features, until the driver says otherwise.
    pub features: LinkFeatures,
}

impl Link {
    pub fn new(
        id: LinkId,
        peer: Uuid,
        peer_name: String,
        policy: LinkPolicy,
        session: Session,
    ) -> Link {
        Link {
            id,
            peer,
            peer_name,
            policy,
            session,
            local_types: HashMap::new(),
            deferred: Default::default(),
            remote_types: HashMap::new(),
            exported: Exports::new(),
            mirror: Mirror::default(),
            forwarded_calls: HashMap::new(),
            refresh: Default::default(),
            epoch_barriers: Vec::new(),
            features: LinkFeatures::default(),
        }
    }

    /// The local type id for a URI, introducing the type on first use.
    pub fn type_for(&mut self, uri: &str) -> Option<TypeId<Local>> {
        if let Some((id, _)) = self.local_types.get(uri) {
            return Some(*id);
        }
        let mark = self.session.send_mark();
        let id = self.session.introduce_type(uri).ok()?;
        self.local_types.insert(uri.to_owned(), (id, mark));
        Some(id)
    }

    /// Whether the peer may still subscribe to the type of `uri`: this node
    /// introduced it and the peer has neither subscribed nor acknowledged
    /// the packet that introduced it (having read the introduction without
    /// subscribing, it wants none). A stream link acknowledges nothing:
    /// nothing is awaited there.
    pub fn awaits_subscription(&self, uri: &str) -> bool {
        self.local_types
            .get(uri)
            .is_some_and(|(id, mark)| self.awaited(*id, *mark))
    }

    /// Whether the peer may still subscribe to any type this node
    /// introduced (see [`Link::awaits_subscription`]).
    pub fn awaits_any_subscription(&self) -> bool {
        self.local_types
            .values()
            .any(|(id, mark)| self.awaited(*id, *mark))
    }

    fn awaited(&self, id: TypeId<Local>, mark: u64) -> bool {
        self.session.peer_subscription(id).is_none() && !self.session.acknowledged_through(mark)
    }

    /// The object exported for an entity's component, if any.
    #[inline]
    pub fn exported_component(
        &self,
        entity: EntityId,
        component: ComponentId,
    ) -> Option<ObjectId<Local>> {
        self.exported.component_object(entity, component)
    }
}

/// Removes an entity's objects from a link: components first.
pub fn unexport_entity(link: &mut Link, entity: EntityId, stats: &mut FederationStats) {
    link.deferred.remove(&entity);
    let Some(exported) = link.exported.remove_entity(entity) else {
        return;
    };
    for object in exported.components().values() {
        withdraw(link, *object, stats);
    }
    withdraw(link, exported.object, stats);
}

/// Removes one exported object from the peer. The session refuses only
/// when it is closing or never had the object; either way nothing is left
/// to withdraw, so the refusal is only counted.
pub fn withdraw(link: &mut Link, object: ObjectId<Local>, stats: &mut FederationStats) {
    let removed = link.session.remove_entity(object);
    stats.session(removed, "exported object not withdrawn");
}
