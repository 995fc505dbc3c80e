//! `/schema.json`: the node's component registry as JSON, so the viewer can
//! decode every component generically (type id -> name and static attribute
//! layout, docs/tundra-wire.md §9) instead of carrying its own copy of the layouts.
//!
//! Built from a [`Registry`] when the runtime notices the registry changed;
//! requests only serialize the last document. Owns no registry.

use std::sync::Arc;

use serde::Serialize;

use crate::tundra::{AttributeType, Registry};

/// One static attribute of a component type.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttributeDoc {
    /// Index on the wire (EditAttributes, §4.9).
    pub index: usize,
    /// C++ member name (TXML `id=`).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Attribute type id (§5.2).
    #[serde(rename = "type")]
    pub type_id: u8,
    /// Tundra's name of that type.
    pub type_name: &'static str,
}

/// One component type.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ComponentDoc {
    pub type_id: u32,
    /// Without the `EC_` prefix.
    pub name: String,
    /// True when instances carry dynamic attributes after the static ones.
    pub dynamic_attributes: bool,
    /// Learnt at run time (RegisterComponentType, TXML placeholders).
    pub custom: bool,
    pub attributes: Vec<AttributeDoc>,
}

/// Everything `/schema.json` shows.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SchemaDoc {
    /// Attribute type id -> Tundra type name, for dynamic attributes.
    pub attribute_types: Vec<(u8, &'static str)>,
    /// Component types in id order.
    pub components: Vec<ComponentDoc>,
}

impl SchemaDoc {
    /// The document of a registry.
    pub fn from_registry(registry: &Registry) -> SchemaDoc {
        SchemaDoc {
            attribute_types: AttributeType::ALL
                .iter()
                .map(|t| (t.id(), t.tundra_name()))
                .collect(),
            components: registry
                .iter()
                .map(|schema| ComponentDoc {
                    type_id: schema.type_id,
                    name: schema.name.clone(),
                    dynamic_attributes: schema.dynamic_attributes,
                    custom: schema.custom,
                    attributes: schema
                        .attributes
                        .iter()
                        .enumerate()
                        .map(|(index, a)| AttributeDoc {
                            index,
                            id: a.id.clone(),
                            name: a.name.clone(),
                            type_id: a.ty.id(),
                            type_name: a.ty.tundra_name(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Rebuilds the schema document only when the registry changed, so the
/// runtime's status tick stays cheap while nothing registers types.
#[derive(Debug, Default)]
pub struct SchemaCache {
    fingerprint: Option<(usize, usize)>,
    doc: Arc<SchemaDoc>,
}

impl SchemaCache {
    /// The document for `registry`, rebuilt if types were added or replaced.
    pub fn refresh(&mut self, registry: &Registry) -> Arc<SchemaDoc> {
        // Types are only ever added or (custom ones) replaced; the number of
        // types and of custom attributes changes with every such event that
        // matters to a decoder, short of a replacement with the same count
        // of attributes, which the page also learns from RegisterComponentType.
        let fingerprint = (
            registry.len(),
            registry
                .custom_types()
                .map(|s| s.attributes.len() + 1)
                .sum(),
        );
        if self.fingerprint != Some(fingerprint) {
            self.fingerprint = Some(fingerprint);
            self.doc = Arc::new(SchemaDoc::from_registry(registry));
        }
        self.doc.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::registry::CustomAttribute;

    #[test]
    fn placeable_and_name_are_described_with_their_attribute_types() {
        let doc = SchemaDoc::from_registry(&Registry::builtin());
        let placeable = doc.components.iter().find(|c| c.type_id == 20).unwrap();
        assert_eq!(placeable.name, "Placeable");
        assert_eq!(placeable.attributes[0].id, "transform");
        assert_eq!(placeable.attributes[0].type_id, 16);
        assert_eq!(placeable.attributes[0].type_name, "Transform");
        let name = doc.components.iter().find(|c| c.type_id == 26).unwrap();
        assert_eq!(name.attributes[0].type_id, 1);
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(
            json["attribute_types"][15],
            serde_json::json!([16, "Transform"])
        );
        assert_eq!(json["components"][0]["attributes"][0]["type"], 11);
    }

    #[test]
    fn the_cache_rebuilds_when_a_custom_type_arrives() {
        let mut registry = Registry::builtin();
        let mut cache = SchemaCache::default();
        let first = cache.refresh(&registry);
        assert!(Arc::ptr_eq(&first, &cache.refresh(&registry)));
        registry.register_custom(
            "MyComponent",
            vec![CustomAttribute {
                ty: AttributeType::Int,
                id: "myInteger".into(),
                name: "myInteger".into(),
            }],
        );
        let second = cache.refresh(&registry);
        assert!(!Arc::ptr_eq(&first, &second));
        let custom = second.components.iter().find(|c| c.custom).unwrap();
        assert_eq!(custom.type_id, 69969);
        assert_eq!(custom.attributes[0].type_name, "int");
    }
}
