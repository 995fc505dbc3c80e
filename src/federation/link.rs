//! One peer link as the federation sees it: the LESS session, the types
//! introduced each way, what this node exports on it, and the mirror of what
//! the peer presents.

use foldhash::{HashMap, HashMapExt};

use uuid::Uuid;

use super::exports::Exports;
use super::ids::LinkId;
use super::mirror::{ComponentKind, Mirror};
use crate::less::ids::{Local, ObjectId, Remote, RequestId, TypeId};
use crate::less::session::Session;
use crate::tundra::{ComponentId, EntityId};

pub use crate::peering::peer_file::TypeFilter;

/// What the operator allows on a link (the peer file's export/accept lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkPolicy {
    pub export: TypeFilter,
    pub accept: TypeFilter,
}

impl LinkPolicy {
    /// Whether a component type (name without `EC_`) may be exported; peer
    /// files may name types with or without the prefix.
    pub fn exports(&self, type_name: &str) -> bool {
        allows(&self.export, type_name)
    }

    /// Whether a component type from the peer is accepted.
    pub fn accepts(&self, type_name: &str) -> bool {
        allows(&self.accept, type_name)
    }
}

fn allows(filter: &TypeFilter, type_name: &str) -> bool {
    filter.allows(type_name) || filter.allows(&format!("EC_{type_name}"))
}

impl Default for LinkPolicy {
    fn default() -> Self {
        LinkPolicy {
            export: TypeFilter::All,
            accept: TypeFilter::All,
        }
    }
}

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
    pub(super) deferred: std::collections::BTreeSet<EntityId>,
    /// Types the peer introduced, as this node understood them.
    pub(super) remote_types: HashMap<TypeId<Remote>, RemoteType>,
    /// What this node exports on the link.
    pub exported: Exports,
    /// What the peer presents on the link.
    pub mirror: Mirror,
    /// Calls this node invoked on the peer: the entity called, and whom to
    /// answer (none: one of this node's clients).
    pub(super) forwarded_calls:
        HashMap<RequestId<Local>, (super::ids::GlobalId, Option<ForwardedCall>)>,
    /// Background refresh position and budget (`refresh.rs`).
    pub refresh: super::refresh::RefreshCursor,
    /// Entity objects whose new authority and epoch wait until every
    /// packet the peer sent before them has arrived, with the receive mark
    /// to wait for (`handover.rs`).
    pub(super) epoch_barriers: Vec<(ObjectId<Remote>, u64)>,
    /// Both Hellos listed `handover:reason/1`: take-authority calls on the
    /// link state their reason (`take_authority.rs`). False, as for a peer
    /// that lists no features, until the driver says otherwise.
    pub take_authority_reason: bool,
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
            take_authority_reason: false,
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
