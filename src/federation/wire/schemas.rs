//! The LESS schema registry of a node: the entity type and one type per
//! Tundra component type, with a resolver for self-describing custom URIs.

use crate::federation::wire::mapping::{self, UriKind};
use crate::less::schema::{SchemaRegistry, TypeSchema};
use crate::tundra::registry::Registry;

/// Every type this node can introduce or understand.
pub fn schema_registry(registry: &Registry) -> SchemaRegistry {
    let mut schemas = SchemaRegistry::new();
    for entity in mapping::entity_schemas() {
        schemas.insert(entity);
    }
    for component in registry.iter() {
        schemas.insert(mapping::component_type_schema(component));
    }
    schemas.set_resolver(resolve);
    schemas.set_encoding_rules(crate::federation::wire::encodings::encoding_rules());
    schemas
}

/// Builds the schema of a custom or opaque URI from the URI itself.
fn resolve(uri: &str) -> Option<TypeSchema> {
    match mapping::parse_uri(uri)? {
        UriKind::Custom(name, attributes) => {
            let mut registry = Registry::new();
            let type_id = registry.register_custom(&name, attributes).type_id();
            Some(mapping::component_type_schema(registry.get(type_id)?))
        }
        UriKind::Opaque(type_id) => Some(mapping::opaque_schema(type_id)),
        _ => None,
    }
}
