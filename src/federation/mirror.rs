//! What a peer presents on one link: its entity and component objects with
//! their latest values, kept whether or not this node presents that copy, so
//! switching to another route needs no round trip.

use foldhash::HashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::ids::GlobalId;
use super::mapping::{component, entity};
use super::origin_policy::OriginPolicy;
use crate::less::ids::{ComponentId, ObjectId, PropertyId, PropertyKey, Remote};
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

/// An entity object.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorEntity {
    pub global: GlobalId,
    pub path: Vec<Uuid>,
    pub temporary: bool,
    /// The parent entity object, if any.
    pub parent: Option<ObjectId<Remote>>,
    /// The origin's export policy as this copy carries it (none: unstated).
    pub policy: Option<Arc<OriginPolicy>>,
    pub components: BTreeSet<ObjectId<Remote>>,
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
    pub fn value(&self, key: &PropertyKey) -> Option<&Value> {
        self.values.get(self.schema.property_index(key)?)
    }
}

/// One link's view of the peer's objects.
#[derive(Debug, Default)]
pub struct Mirror {
    pub entities: HashMap<ObjectId<Remote>, MirrorEntity>,
    pub components: HashMap<ObjectId<Remote>, MirrorComponent>,
    pub by_global: HashMap<GlobalId, ObjectId<Remote>>,
    /// Component objects whose owner entity object has not arrived yet, by
    /// owner: the entity takes them when it arrives. Entries may be stale
    /// (the component since removed or re-owned); the taker checks. Kept so
    /// an arriving entity costs its own components, not a scan of all.
    pub orphans: HashMap<ObjectId<Remote>, Vec<ObjectId<Remote>>>,
}

impl Mirror {
    /// Notes a component whose owner entity object is not here yet.
    pub fn wait_for_owner(&mut self, owner: ObjectId<Remote>, component: ObjectId<Remote>) {
        self.orphans.entry(owner).or_default().push(component);
    }

    /// A waiting component was removed before its owner arrived.
    pub fn forget_orphan(&mut self, owner: ObjectId<Remote>, component: ObjectId<Remote>) {
        if let Some(waiting) = self.orphans.get_mut(&owner) {
            waiting.retain(|c| *c != component);
            if waiting.is_empty() {
                self.orphans.remove(&owner);
            }
        }
    }

    /// The components waiting for `entity` that still name it as owner.
    pub fn take_orphans(&mut self, entity: ObjectId<Remote>) -> BTreeSet<ObjectId<Remote>> {
        let waiting = self.orphans.remove(&entity).unwrap_or_default();
        waiting
            .into_iter()
            .filter(|c| {
                self.components
                    .get(c)
                    .is_some_and(|c| c.owner == Some(entity))
            })
            .collect()
    }
}

/// Why an entity object's values were refused (a protocol violation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("entity object without origin and serial")]
    MissingIdentity,
    #[error("property {0} has the wrong shape")]
    BadValue(PropertyKey),
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
        components: BTreeSet::new(),
    };
    apply_entity_values(&mut entity, values)?;
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
