//! One peer link as the federation sees it: the LESS session, the types
//! introduced each way, what this node exports on it, and the mirror of what
//! the peer presents.

use foldhash::{HashMap, HashMapExt};
use smallvec::SmallVec;

use uuid::Uuid;

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

/// The component objects of an exported entity, by component id: an entity
/// has a handful, kept inline in its record (a hash table of its own cost
/// a cache miss per attribute change exported).
#[derive(Debug, Default)]
pub struct ComponentObjects(SmallVec<[(ComponentId, ObjectId<Local>); 4]>);

impl ComponentObjects {
    pub fn get(&self, component: &ComponentId) -> Option<&ObjectId<Local>> {
        self.0.iter().find(|(c, _)| c == component).map(|(_, o)| o)
    }

    pub fn contains_key(&self, component: &ComponentId) -> bool {
        self.get(component).is_some()
    }

    /// Sets the object of `component`.
    pub fn insert(&mut self, component: ComponentId, object: ObjectId<Local>) {
        match self.0.iter_mut().find(|(c, _)| *c == component) {
            Some(entry) => entry.1 = object,
            None => self.0.push((component, object)),
        }
    }

    pub fn remove(&mut self, component: &ComponentId) -> Option<ObjectId<Local>> {
        let position = self.0.iter().position(|(c, _)| c == component)?;
        Some(self.0.remove(position).1)
    }

    /// Component ids, in export order.
    pub fn keys(&self) -> impl Iterator<Item = &ComponentId> {
        self.0.iter().map(|(c, _)| c)
    }

    /// Objects, in export order.
    pub fn values(&self) -> impl Iterator<Item = &ObjectId<Local>> {
        self.0.iter().map(|(_, o)| o)
    }
}

/// An entity this node exports on the link.
#[derive(Debug, Default)]
pub struct ExportedEntity {
    pub object: Option<ObjectId<Local>>,
    pub components: ComponentObjects,
    /// The path last sent for the entity object: it is sent again only when
    /// it changes. Re-sending an unchanged path makes the peer re-route and
    /// answer with its own unchanged path, so two nodes that export the same
    /// entity to each other (a triangle) would echo paths without end.
    pub path: Vec<Uuid>,
    /// The origin's export policy last sent for the entity object (sent
    /// again only when it changes, as the path).
    pub policy: Option<std::sync::Arc<super::origin_policy::OriginPolicy>>,
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
    pub local_types: HashMap<String, TypeId<Local>>,
    pub remote_types: HashMap<TypeId<Remote>, RemoteType>,
    pub exported: HashMap<EntityId, ExportedEntity>,
    /// Reverse of `exported`: object → (entity, component or the entity).
    pub export_owner: HashMap<ObjectId<Local>, (EntityId, Option<ComponentId>)>,
    pub mirror: Mirror,
    /// Calls this node invoked on the peer: the entity called, and whom to
    /// answer (none: one of this node's clients).
    pub forwarded_calls: HashMap<RequestId<Local>, (super::ids::GlobalId, Option<ForwardedCall>)>,
    /// Background refresh position and budget (`refresh.rs`).
    pub refresh: super::refresh::RefreshCursor,
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
            remote_types: HashMap::new(),
            exported: HashMap::new(),
            export_owner: HashMap::new(),
            mirror: Mirror::default(),
            forwarded_calls: HashMap::new(),
            refresh: Default::default(),
        }
    }

    /// The local type id for a URI, introducing the type on first use.
    pub fn type_for(&mut self, uri: &str) -> Option<TypeId<Local>> {
        if let Some(id) = self.local_types.get(uri) {
            return Some(*id);
        }
        let id = self.session.introduce_type(uri).ok()?;
        self.local_types.insert(uri.to_owned(), id);
        Some(id)
    }

    /// The object exported for an entity's component, if any.
    pub fn exported_component(
        &self,
        entity: EntityId,
        component: ComponentId,
    ) -> Option<ObjectId<Local>> {
        self.exported
            .get(&entity)?
            .components
            .get(&component)
            .copied()
    }
}
