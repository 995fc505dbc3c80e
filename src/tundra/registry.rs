//! The component registry: every component type the node knows, by type id
//! and by name, with its static attribute layout (docs/tundra-wire.md §9).
//!
//! Layouts are data, not code: they are read from TOML files
//! (`schemas/tundra/*.toml`, embedded at build time for [`Registry::builtin`],
//! or a directory given at run time for [`Registry::from_dir`]; the file
//! format is in `schema_file`). Adding a
//! component type is adding a `[[component]]` table. Custom types announced
//! by RegisterComponentType (§4.17) join at run time through
//! [`Registry::register_custom`], with the name-hash type id Tundra uses.
//!
//! The registry only describes types; component instances, their dynamic
//! attributes and their values belong to the scene.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::attribute::{AttributeType, AttributeValue};

/// Attribute indices are a u8 on the wire (EditAttributes, CreateAttributes),
/// so a component has at most 256 attribute slots.
pub const MAX_ATTRIBUTES_PER_COMPONENT: usize = 256;

/// Static type ids are below this; custom ids are `hash & 0xFFFF | 0x10000`.
pub const FIRST_CUSTOM_TYPE_ID: u32 = 0x1_0000;

/// The type id of DynamicComponent, whose attributes are all dynamic.
pub const DYNAMIC_COMPONENT_TYPE_ID: u32 = 25;

/// One static attribute of a component type.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributeSchema {
    /// C++ member name (TXML `id=`).
    pub id: String,
    /// Human-readable name (TXML `name=`).
    pub name: String,
    /// Value type.
    pub ty: AttributeType,
    /// Value of a newly created component.
    pub default: AttributeValue,
}

/// A component type: id, name and static attribute layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentSchema {
    /// Wire type id.
    pub type_id: u32,
    /// Type name without the `EC_` prefix (TXML writers omit it too).
    pub name: String,
    /// Static attributes in index order.
    pub attributes: Vec<AttributeSchema>,
    /// True when instances carry dynamic attributes after the static ones
    /// (DynamicComponent); others ignore trailing block bytes (§5.1).
    pub dynamic_attributes: bool,
    /// True for types learnt from RegisterComponentType or declared at run
    /// time (Tundra "placeholder" components).
    pub custom: bool,
}

impl ComponentSchema {
    /// `EC_` + name, as tundra's `TypeName()` and its RegisterComponentType.
    pub fn prefixed_name(&self) -> String {
        format!("EC_{}", self.name)
    }

    /// Slot types of a fresh instance, for decoding EditAttributes blocks.
    pub fn slot_types(&self) -> Vec<Option<AttributeType>> {
        self.attributes.iter().map(|a| Some(a.ty)).collect()
    }

    /// Index of the attribute a TXML `<attribute>` means: by `id` when
    /// given, else by `name`, both case-insensitive (§10.1).
    pub fn find_attribute(&self, id: Option<&str>, name: Option<&str>) -> Option<usize> {
        let by_id = id.and_then(|id| {
            self.attributes
                .iter()
                .position(|a| a.id.eq_ignore_ascii_case(id))
        });
        by_id.or_else(|| {
            name.and_then(|name| {
                self.attributes
                    .iter()
                    .position(|a| a.name.eq_ignore_ascii_case(name))
            })
        })
    }

    /// Default values of all static attributes.
    pub fn default_values(&self) -> Vec<AttributeValue> {
        self.attributes.iter().map(|a| a.default.clone()).collect()
    }
}

/// One attribute of a custom type, as RegisterComponentType carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomAttribute {
    pub ty: AttributeType,
    pub id: String,
    pub name: String,
}

/// What [`Registry::register_custom`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomRegistration {
    /// A new custom type was added under this id.
    Added(u32),
    /// A custom type of the same id was replaced.
    Replaced(u32),
    /// A static type of that name exists; Tundra ignores the announcement
    /// when a real factory exists (§4.17).
    IgnoredStatic(u32),
}

impl CustomRegistration {
    /// The type id the name now resolves to.
    pub fn type_id(self) -> u32 {
        match self {
            CustomRegistration::Added(id)
            | CustomRegistration::Replaced(id)
            | CustomRegistration::IgnoredStatic(id) => id,
        }
    }
}

/// Component types by id and by name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_id: BTreeMap<u32, Arc<ComponentSchema>>,
    by_name: HashMap<String, u32>,
}

/// Tundra `ComputeHash`: case-insensitive SDBM over UTF-16 units (§4.17).
pub fn compute_hash(name: &str) -> u32 {
    name.encode_utf16().fold(0u32, |h, c| {
        let lower = if c < 0x80 {
            u32::from((c as u8).to_ascii_lowercase())
        } else {
            u32::from(c)
        };
        lower
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// Type id of a custom type: `(ComputeHash(name without EC_) & 0xFFFF) | 0x10000`.
pub fn custom_type_id(type_name: &str) -> u32 {
    (compute_hash(strip_prefix(type_name)) & 0xFFFF) | FIRST_CUSTOM_TYPE_ID
}

/// The name without a leading `EC_`.
pub fn strip_prefix(type_name: &str) -> &str {
    type_name.strip_prefix("EC_").unwrap_or(type_name)
}

/// Lookup key: lowercase, without an `ec_` prefix in any case.
pub(crate) fn name_key(type_name: &str) -> String {
    let lower = type_name.trim().to_ascii_lowercase();
    match lower.strip_prefix("ec_") {
        Some(rest) => rest.to_string(),
        None => lower,
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a static type; a duplicate id or name is an error.
    pub fn insert(&mut self, schema: ComponentSchema) -> Result<(), String> {
        if self.by_id.contains_key(&schema.type_id) {
            return Err(format!("type id {} is defined twice", schema.type_id));
        }
        let key = name_key(&schema.name);
        if self.by_name.contains_key(&key) {
            return Err(format!("type name {} is defined twice", schema.name));
        }
        self.by_name.insert(key, schema.type_id);
        self.by_id.insert(schema.type_id, Arc::new(schema));
        Ok(())
    }

    /// The type with this id.
    pub fn get(&self, type_id: u32) -> Option<&Arc<ComponentSchema>> {
        self.by_id.get(&type_id)
    }

    /// The type with this name, with or without `EC_`, case-insensitive.
    pub fn get_by_name(&self, type_name: &str) -> Option<&Arc<ComponentSchema>> {
        self.by_name
            .get(&name_key(type_name))
            .and_then(|id| self.by_id.get(id))
    }

    /// Registers a custom (placeholder) type as RegisterComponentType
    /// announces it. All its attributes are static (§4.17).
    pub fn register_custom(
        &mut self,
        type_name: &str,
        attributes: Vec<CustomAttribute>,
    ) -> CustomRegistration {
        if let Some(existing) = self.get_by_name(type_name) {
            if !existing.custom {
                return CustomRegistration::IgnoredStatic(existing.type_id);
            }
        }
        let type_id = custom_type_id(type_name);
        let schema = ComponentSchema {
            type_id,
            name: strip_prefix(type_name.trim()).to_string(),
            attributes: attributes
                .into_iter()
                .take(MAX_ATTRIBUTES_PER_COMPONENT)
                .map(|a| AttributeSchema {
                    default: AttributeValue::default_for(a.ty),
                    id: a.id,
                    name: a.name,
                    ty: a.ty,
                })
                .collect(),
            dynamic_attributes: false,
            custom: true,
        };
        let replaced = self.by_id.remove(&type_id);
        if let Some(old) = &replaced {
            self.by_name.remove(&name_key(&old.name));
        }
        self.by_name.insert(name_key(&schema.name), type_id);
        self.by_id.insert(type_id, Arc::new(schema));
        match replaced {
            Some(_) => CustomRegistration::Replaced(type_id),
            None => CustomRegistration::Added(type_id),
        }
    }

    /// Custom types, in id order (sent to new clients of protocol >= 2).
    pub fn custom_types(&self) -> impl Iterator<Item = &Arc<ComponentSchema>> {
        self.by_id.values().filter(|s| s.custom)
    }

    /// All types in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ComponentSchema>> {
        self.by_id.values()
    }

    /// Number of types.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when no type is known.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::values::Color;

    #[test]
    fn layouts_of_reference_section_9() {
        let r = Registry::builtin();
        let expected: &[(u32, &str, usize)] = &[
            (1, "Avatar", 1),
            (12, "WaterPlane", 16),
            (17, "Mesh", 7),
            (20, "Placeable", 6),
            (23, "RigidBody", 19),
            (25, "DynamicComponent", 0),
            (29, "HoveringText", 19),
            (38, "SkyX", 18),
            (53, "PhysicsConstraint", 10),
        ];
        for &(id, name, attrs) in expected {
            let s = r.get(id).unwrap();
            assert_eq!(s.name, name);
            assert_eq!(s.attributes.len(), attrs, "{name}");
            assert_eq!(r.get_by_name(name).unwrap().type_id, id);
            assert_eq!(r.get_by_name(&format!("EC_{name}")).unwrap().type_id, id);
        }
        let rigid = r.get(23).unwrap();
        assert_eq!(rigid.attributes[13].id, "linearVelocity");
        assert_eq!(rigid.attributes[15].default, AttributeValue::Int(-1));
        let env = r.get(8).unwrap();
        let ambient = Color {
            r: 0.364,
            g: 0.364,
            b: 0.364,
            a: 1.0,
        };
        assert_eq!(env.attributes[1].default, AttributeValue::Color(ambient));
        assert!(r.get(25).unwrap().dynamic_attributes);
        assert_eq!(r.get_by_name("ec_placeable").unwrap().type_id, 20);
        assert!(r.get(22).is_none());
    }

    #[test]
    fn attribute_lookup_by_id_then_name() {
        let r = Registry::builtin();
        let placeable = r.get(20).unwrap();
        assert_eq!(placeable.find_attribute(Some("TRANSFORM"), None), Some(0));
        assert_eq!(
            placeable.find_attribute(None, Some("show bounding box")),
            Some(1)
        );
        assert_eq!(
            placeable.find_attribute(Some("nope"), Some("Visible")),
            Some(2)
        );
        assert_eq!(placeable.find_attribute(None, Some("nope")), None);
    }

    #[test]
    fn custom_type_ids_from_the_name_hash() {
        assert_eq!(custom_type_id("MyComponent"), 69969);
        assert_eq!(custom_type_id("EC_MyComponent"), 69969);
        assert_eq!(custom_type_id("mycomponent"), 0x11151);
    }

    #[test]
    fn register_custom_types_at_run_time() {
        let mut r = Registry::builtin();
        let attrs = vec![
            CustomAttribute {
                ty: AttributeType::String,
                id: "myString".into(),
                name: "myString".into(),
            },
            CustomAttribute {
                ty: AttributeType::Int,
                id: "myInteger".into(),
                name: "myInteger".into(),
            },
        ];
        assert_eq!(
            r.register_custom("EC_MyComponent", attrs.clone()),
            CustomRegistration::Added(69969)
        );
        assert_eq!(
            r.register_custom("MyComponent", attrs),
            CustomRegistration::Replaced(69969)
        );
        let s = r.get_by_name("MyComponent").unwrap();
        assert!(s.custom);
        assert_eq!(
            s.slot_types(),
            vec![Some(AttributeType::String), Some(AttributeType::Int)]
        );
        assert_eq!(r.custom_types().count(), 1);
        assert_eq!(
            r.register_custom("EC_Placeable", vec![]),
            CustomRegistration::IgnoredStatic(20)
        );
        assert_eq!(r.get(20).unwrap().attributes.len(), 6);
    }
}
