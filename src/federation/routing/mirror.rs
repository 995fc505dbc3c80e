//! What a peer presents on one link: its entity and component objects with
//! their latest values, kept whether or not this node presents that copy, so
//! switching to another route needs no round trip.

use foldhash::HashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use crate::federation::export_policy::origin_policy::OriginPolicy;
use crate::federation::ids::GlobalId;
use crate::federation::wire::mapping::{component, entity};
use crate::less::ids::{ComponentId, ComponentPath, ObjectId, PropertyId, PropertyKey, Remote};
use crate::less::property_list::PropertyValue;
use crate::less::property_map::PropertyMap;
use crate::less::schema::TypeSchema;
use crate::less::value::Value;

/// How a component object's type maps to Tundra.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentKind {
    /// A registry type with static attributes (static or custom).
    Static { type_id: u32 },
    /// DynamicComponent: slots with a layout.
    Dynamic { type_id: u32 },
    /// Unknown to the sender: the block byte for byte.
    Opaque { type_id: u32 },
}

impl ComponentKind {
    pub fn type_id(&self) -> u32 {
        match self {
            ComponentKind::Static { type_id }
            | ComponentKind::Dynamic { type_id }
            | ComponentKind::Opaque { type_id } => *type_id,
        }
    }
}

/// An entity object. Its component set is kept by the [`Mirror`] that holds
/// it: the component objects that name it as owner.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorEntity {
    pub global: GlobalId,
    pub path: Vec<Uuid>,
    pub temporary: bool,
    /// The parent entity object, if any.
    pub parent: Option<ObjectId<Remote>>,
    /// The origin's export policy as this copy carries it (none: unstated).
    pub policy: Option<Arc<OriginPolicy>>,
    /// The authority and epoch this copy is known to carry
    /// (docs/federation.md §7): `None` is the origin, as a peer that does
    /// not hand entities over sends it.
    pub authority: Option<uuid::Uuid>,
    pub epoch: u64,
    /// A newer authority and epoch the peer sent, held until every packet
    /// the peer sent before it has arrived (`handover.rs`).
    pub announced: Option<(Option<uuid::Uuid>, u64)>,
    components: BTreeSet<ObjectId<Remote>>,
}

impl MirrorEntity {
    /// The node simulating the entity, as this copy tells it.
    #[inline]
    pub fn authority(&self) -> uuid::Uuid {
        self.authority.unwrap_or(self.global.origin)
    }

    /// Whether the copy comes from its authority itself (its path starts
    /// there), not from a node that handed it over and relays it until it
    /// hears from the new one.
    #[inline]
    pub fn from_authority(&self) -> bool {
        self.path.first() == Some(&self.authority())
    }

    /// The component objects that name this entity as owner.
    #[inline]
    pub fn components(&self) -> &BTreeSet<ObjectId<Remote>> {
        &self.components
    }
}

/// A component object.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorComponent {
    pub kind: ComponentKind,
    pub owner: Option<ObjectId<Remote>>,
    pub name: String,
    /// The LESS type's schema: values are kept by its property indices.
    pub schema: Arc<TypeSchema>,
    values: PropertyMap<Value>,
}

impl MirrorComponent {
    /// Reads the parts an update reads and writes (schema, first value), so
    /// that a read-ahead brings them into the cache.
    pub fn warm(&self) {
        std::hint::black_box((
            Arc::as_ptr(&self.schema),
            &self.kind,
            self.values.values().next().map(std::mem::discriminant),
        ));
    }

    /// A component object of `kind` with no values yet.
    pub fn new(kind: ComponentKind, schema: Arc<TypeSchema>) -> MirrorComponent {
        MirrorComponent {
            kind,
            owner: None,
            name: String::new(),
            values: PropertyMap::with_capacity(schema.property_count()),
            schema,
        }
    }

    /// The latest value of property `key`.
    #[inline]
    pub fn value(&self, key: &PropertyKey) -> Option<&Value> {
        self.values.get(self.schema.property_index(key)?)
    }

    /// Whether the object holds what presenting it needs. An object larger
    /// than one packet is introduced with the properties that fit, lowest
    /// first, and the rest follow as updates (docs/less-wire.md §11): a
    /// DynamicComponent whose attribute values came without its layout
    /// (component 3, their types and names) is not complete yet, and
    /// presented now its attributes would be created again once the layout
    /// came. One with neither is presented as it is (empty).
    pub fn is_presentable(&self) -> bool {
        if !matches!(self.kind, ComponentKind::Dynamic { .. }) {
            return true;
        }
        let list = |property| match self.value(&PropertyKey::new(component::LAYOUT, property)) {
            Some(Value::List(_, items)) => Some(items.len()),
            _ => None,
        };
        let types = list(component::LAYOUT_TYPES);
        let names = list(component::LAYOUT_NAMES);
        let attributes = ComponentPath::top(ComponentId(component::ATTRIBUTES));
        match (types, names) {
            (Some(types), Some(names)) => types == names,
            (None, None) => !self.values.iter().any(|(index, _)| {
                self.schema
                    .property_at(index)
                    .is_some_and(|(key, _)| key.component == attributes)
            }),
            _ => false,
        }
    }
}

/// A component object's owner before and after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerChange {
    pub before: Option<ObjectId<Remote>>,
    pub after: Option<ObjectId<Remote>>,
}

impl OwnerChange {
    pub fn changed(&self) -> bool {
        self.before != self.after
    }
}

/// One link's view of the peer's objects. The maps are private so that they
/// stay consistent with each other:
/// - `by_global` is the inverse of the entities' identities (one object per
///   identity, one identity per object);
/// - every component object whose owner is here is in the owner's component
///   set, and only those are;
/// - every component object whose owner is not here (yet) waits in
///   `orphans` under that owner, and only those do;
/// - removing an entity object removes its component objects.
#[derive(Debug, Default)]
pub struct Mirror {
    entities: HashMap<ObjectId<Remote>, MirrorEntity>,
    components: HashMap<ObjectId<Remote>, MirrorComponent>,
    by_global: HashMap<GlobalId, ObjectId<Remote>>,
    /// Component objects whose owner entity object has not arrived yet, by
    /// owner: the entity takes them when it arrives. Kept so an arriving
    /// entity costs its own components, not a scan of all.
    orphans: HashMap<ObjectId<Remote>, Vec<ObjectId<Remote>>>,
}

impl Mirror {
    #[inline]
    pub fn entity(&self, object: ObjectId<Remote>) -> Option<&MirrorEntity> {
        self.entities.get(&object)
    }

    #[inline]
    pub fn component(&self, object: ObjectId<Remote>) -> Option<&MirrorComponent> {
        self.components.get(&object)
    }

    /// The entity object that is the peer's copy of `global`.
    #[inline]
    pub fn object_of(&self, global: GlobalId) -> Option<ObjectId<Remote>> {
        self.by_global.get(&global).copied()
    }

    /// The peer's copy of `global`.
    #[inline]
    pub fn copy_of(&self, global: GlobalId) -> Option<&MirrorEntity> {
        self.entities.get(self.by_global.get(&global)?)
    }

    /// The entity object a component object names as owner, if it is here.
    #[inline]
    pub fn owner_of(&self, component: &MirrorComponent) -> Option<&MirrorEntity> {
        self.entities.get(&component.owner?)
    }

    /// The identities of every entity object.
    pub fn globals(&self) -> impl Iterator<Item = GlobalId> + '_ {
        self.by_global.keys().copied()
    }

    pub fn entity_count(&self) -> usize {
        self.entities.len()
    }

    pub fn component_count(&self) -> usize {
        self.components.len()
    }

    /// Adds an introduced entity object; it takes the component objects
    /// that arrived before it. Refused when the object or its identity is
    /// already here (a peer may not present one entity twice on a link).
    pub fn insert_entity(
        &mut self,
        object: ObjectId<Remote>,
        mut entity: MirrorEntity,
    ) -> Result<(), MirrorError> {
        if self.entities.contains_key(&object) || self.by_global.contains_key(&entity.global) {
            return Err(MirrorError::Duplicate(entity.global));
        }
        entity.components = self
            .orphans
            .remove(&object)
            .unwrap_or_default()
            .into_iter()
            .collect();
        self.by_global.insert(entity.global, object);
        self.entities.insert(object, entity);
        Ok(())
    }

    /// Applies an update of an entity object's values; the identity it
    /// returns never changes. `None` when the object is not here.
    pub fn update_entity(
        &mut self,
        object: ObjectId<Remote>,
        values: &[PropertyValue],
    ) -> Option<Result<GlobalId, MirrorError>> {
        let entity = self.entities.get_mut(&object)?;
        Some(apply_entity_values(entity, values).map(|()| entity.global))
    }

    /// An entity object's announced authority and epoch become the ones
    /// it carries (the packets before them have arrived, `handover.rs`).
    /// Returns its identity.
    pub fn accept_announced(&mut self, object: ObjectId<Remote>) -> Option<GlobalId> {
        let entity = self.entities.get_mut(&object)?;
        let (authority, epoch) = entity.announced.take()?;
        entity.authority = authority;
        entity.epoch = epoch;
        Some(entity.global)
    }

    /// Forgets an entity object's announced authority and epoch (stale, or
    /// the same as it carries).
    pub fn drop_announced(&mut self, object: ObjectId<Remote>) {
        if let Some(entity) = self.entities.get_mut(&object) {
            entity.announced = None;
        }
    }

    /// Removes an entity object and the component objects it owns.
    pub fn remove_entity(&mut self, object: ObjectId<Remote>) -> Option<MirrorEntity> {
        let entity = self.entities.remove(&object)?;
        self.by_global.remove(&entity.global);
        for component in &entity.components {
            self.components.remove(component);
        }
        Some(entity)
    }

    /// Adds an introduced component object (replacing one with the same
    /// id), under its owner or waiting for it.
    pub fn insert_component(&mut self, object: ObjectId<Remote>, component: MirrorComponent) {
        self.remove_component(object);
        let owner = component.owner;
        self.components.insert(object, component);
        self.attach(object, owner);
    }

    /// Applies an update of a component object's values and files it under
    /// its owner if the update changed it (an owner may arrive in an update:
    /// a re-send carries only values no later packet carried). The owner
    /// change stands even when a later value was bad. `None` when the
    /// object is not here.
    #[inline]
    pub fn update_component(
        &mut self,
        object: ObjectId<Remote>,
        values: Vec<PropertyValue>,
    ) -> Option<(OwnerChange, Result<(), MirrorError>)> {
        let component = self.components.get_mut(&object)?;
        let before = component.owner;
        // Values before a bad one are applied: the owner stays filed right.
        let applied = apply_component_values(component, values);
        let after = component.owner;
        if before != after {
            self.detach(object, before);
            self.attach(object, after);
        }
        Some((OwnerChange { before, after }, applied))
    }

    /// Removes a component object from the mirror and from its owner.
    pub fn remove_component(&mut self, object: ObjectId<Remote>) -> Option<MirrorComponent> {
        let component = self.components.remove(&object)?;
        self.detach(object, component.owner);
        Some(component)
    }

    fn attach(&mut self, component: ObjectId<Remote>, owner: Option<ObjectId<Remote>>) {
        let Some(owner) = owner else { return };
        match self.entities.get_mut(&owner) {
            Some(entity) => {
                entity.components.insert(component);
            }
            None => self.orphans.entry(owner).or_default().push(component),
        }
    }

    fn detach(&mut self, component: ObjectId<Remote>, owner: Option<ObjectId<Remote>>) {
        let Some(owner) = owner else { return };
        if let Some(entity) = self.entities.get_mut(&owner) {
            entity.components.remove(&component);
        } else if let Some(waiting) = self.orphans.get_mut(&owner) {
            waiting.retain(|c| *c != component);
            if waiting.is_empty() {
                self.orphans.remove(&owner);
            }
        }
    }

    /// Checks that the maps agree with each other (see [`Mirror`]); the
    /// first disagreement found, for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.by_global.len() != self.entities.len() {
            return Err(format!(
                "{} identities for {} entity objects",
                self.by_global.len(),
                self.entities.len()
            ));
        }
        for (global, object) in &self.by_global {
            match self.entities.get(object) {
                Some(entity) if entity.global == *global => {}
                _ => return Err(format!("identity {global} names object {object:?}")),
            }
        }
        for (object, entity) in &self.entities {
            for component in &entity.components {
                let owner = self.components.get(component).and_then(|c| c.owner);
                if owner != Some(*object) {
                    return Err(format!("{object:?} lists {component:?} it does not own"));
                }
            }
        }
        for (owner, waiting) in &self.orphans {
            if self.entities.contains_key(owner) || waiting.is_empty() {
                return Err(format!(
                    "orphans wait for {owner:?}, which is here or empty"
                ));
            }
            for component in waiting {
                if self.components.get(component).and_then(|c| c.owner) != Some(*owner) {
                    return Err(format!(
                        "{component:?} waits for {owner:?} it does not name"
                    ));
                }
            }
        }
        for (object, component) in &self.components {
            let Some(owner) = component.owner else {
                continue;
            };
            let filed = match self.entities.get(&owner) {
                Some(entity) => entity.components.contains(object),
                None => self
                    .orphans
                    .get(&owner)
                    .is_some_and(|waiting| waiting.iter().filter(|c| *c == object).count() == 1),
            };
            if !filed {
                return Err(format!("{object:?} is not filed under its owner {owner:?}"));
            }
        }
        Ok(())
    }
}

/// Why an entity object's values were refused (a protocol violation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("entity object without origin and serial")]
    MissingIdentity,
    #[error("property {0} has the wrong shape")]
    BadValue(PropertyKey),
    #[error("entity {0} is already presented on this link")]
    Duplicate(GlobalId),
}

fn key(c: u64, p: u64) -> PropertyKey {
    PropertyKey::new(c, p)
}

/// Reads the entity properties present in `values` into `target`.
pub fn apply_entity_values(
    target: &mut MirrorEntity,
    values: &[PropertyValue],
) -> Result<(), MirrorError> {
    for PropertyValue { key: k, value } in values {
        if *k == key(entity::COMPONENT, entity::PATH) {
            let Value::List(_, items) = value else {
                return Err(MirrorError::BadValue(k.clone()));
            };
            target.path = items
                .iter()
                .map(|item| match item {
                    Value::Uuid(u) => Ok(*u),
                    _ => Err(MirrorError::BadValue(k.clone())),
                })
                .collect::<Result<_, _>>()?;
        } else if *k == key(entity::COMPONENT, entity::EXPORT) {
            let policy =
                OriginPolicy::from_value(value).map_err(|_| MirrorError::BadValue(k.clone()))?;
            if target.policy.as_deref() != Some(&policy) {
                target.policy = Some(Arc::new(policy));
            }
        } else if *k == key(entity::COMPONENT, entity::AUTHORITY) {
            let Value::Uuid(authority) = value else {
                return Err(MirrorError::BadValue(k.clone()));
            };
            let (_, epoch) = target.announced.unwrap_or((target.authority, target.epoch));
            target.announced = Some((Some(*authority), epoch));
        } else if *k == key(entity::COMPONENT, entity::EPOCH) {
            let epoch = match value {
                Value::Integer(e) => {
                    u64::try_from(*e).map_err(|_| MirrorError::BadValue(k.clone()))?
                }
                _ => return Err(MirrorError::BadValue(k.clone())),
            };
            let (authority, _) = target.announced.unwrap_or((target.authority, target.epoch));
            target.announced = Some((authority, epoch));
        } else if *k == key(entity::COMPONENT, entity::TEMPORARY) {
            match value {
                Value::Integer(v) => target.temporary = *v != 0,
                _ => return Err(MirrorError::BadValue(k.clone())),
            }
        } else if *k == key(entity::COMPONENT, entity::PARENT) {
            target.parent = match value {
                Value::Standalone(inner) => match inner.as_ref() {
                    Value::ObjectId(id) => Some(ObjectId::new(*id)),
                    Value::Null => None,
                    _ => return Err(MirrorError::BadValue(k.clone())),
                },
                _ => return Err(MirrorError::BadValue(k.clone())),
            };
        }
    }
    Ok(())
}

/// A new entity object from its introduction values.
pub fn entity_from_values(values: &[PropertyValue]) -> Result<MirrorEntity, MirrorError> {
    let mut origin = None;
    let mut serial = None;
    for PropertyValue { key: k, value } in values {
        if *k == key(entity::COMPONENT, entity::ORIGIN) {
            if let Value::Uuid(u) = value {
                origin = Some(*u);
            }
        } else if *k == key(entity::COMPONENT, entity::SERIAL) {
            if let Value::Integer(s) = value {
                serial = u64::try_from(*s).ok();
            }
        }
    }
    let (Some(origin), Some(serial)) = (origin, serial) else {
        return Err(MirrorError::MissingIdentity);
    };
    let mut entity = MirrorEntity {
        global: GlobalId { origin, serial },
        path: Vec::new(),
        temporary: false,
        parent: None,
        policy: None,
        authority: None,
        epoch: 0,
        announced: None,
        components: BTreeSet::new(),
    };
    apply_entity_values(&mut entity, values)?;
    // A new object: nothing the peer sent before it concerns it.
    if let Some((authority, epoch)) = entity.announced.take() {
        entity.authority = authority;
        entity.epoch = epoch;
    }
    Ok(entity)
}

/// Reads owner and name, and stores every value (moved: a transform is
/// nine values, and copying it was a tenth of applying an update).
pub fn apply_component_values(
    target: &mut MirrorComponent,
    values: Vec<PropertyValue>,
) -> Result<(), MirrorError> {
    for PropertyValue { key: k, value } in values {
        let owner_property = k.component.elements() == [ComponentId(component::OWNER)];
        if owner_property && k.property == PropertyId(component::ENTITY) {
            match value {
                Value::ObjectId(id) => target.owner = Some(ObjectId::new(id)),
                _ => return Err(MirrorError::BadValue(k)),
            }
        } else if owner_property && k.property == PropertyId(component::NAME) {
            match value {
                Value::String(name) => target.name = name,
                _ => return Err(MirrorError::BadValue(k)),
            }
        } else {
            // Values were decoded against this schema: every key has an index.
            let index = target
                .schema
                .property_index(&k)
                .ok_or(MirrorError::BadValue(k))?;
            target.values.insert(index, value);
        }
    }
    Ok(())
}
