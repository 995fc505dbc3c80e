//! The Tundra-to-LESS type mapping of docs/federation.md §2: LESS type
//! schemas derived from the Tundra component registry, and the URIs that name
//! them. The mapping is a rule over the registry's data (`schemas/tundra/`),
//! so a component type added there federates with no code change.

use crate::less::ids::{ComponentId as LessComponentId, PropertyId, PropertyKey};
use crate::less::schema::{
    ComponentSchema as LessComponent, Member, MemberKind, MethodSchema, TypeSchema,
};
use crate::less::value_type::ValueType;
use crate::tundra::registry::{CustomAttribute, DYNAMIC_COMPONENT_TYPE_ID};
use crate::tundra::{AttributeType, ComponentSchema};

/// The entity type, version 1 as first published (section 2.1): origin,
/// serial, path, temporary, parent; methods action and remove.
pub const ENTITY_URI_V1: &str = "urn:lessgate:tundra:entity:1";
/// The entity type, version 2: version 1 with the export policy, authority
/// and epoch, and the take-authority method.
pub const ENTITY_URI: &str = "urn:lessgate:tundra:entity:2";
/// The Hello feature both ends list to use version 2 on a link
/// (docs/peer-link.md §5.2); without it a link carries version 1.
pub const ENTITY_V2_FEATURE: &str = "schema:tundra-entity/2";
/// Both versions, as shipped.
const ENTITY_TYPES: &str = include_str!("../../../schemas/less/tundra-entity.toml");
/// Prefix of the URIs of static Tundra component types.
pub const COMPONENT_URI: &str = "urn:lessgate:tundra:component:";
/// Prefix of the self-describing URIs of custom component types.
pub const CUSTOM_URI: &str = "urn:lessgate:tundra:custom:";
const OPAQUE_URI: &str = "urn:lessgate:tundra:opaque:";

/// Entity object properties (component 1) and the action method.
pub mod entity {
    pub const COMPONENT: u64 = 1;
    pub const ORIGIN: u64 = 1;
    pub const SERIAL: u64 = 2;
    pub const PATH: u64 = 3;
    pub const TEMPORARY: u64 = 4;
    pub const PARENT: u64 = 5;
    /// The origin's export policy (`origin_policy.rs`, section 4.1).
    pub const EXPORT: u64 = 6;
    /// The node simulating the entity now (absent: the origin).
    pub const AUTHORITY: u64 = 7;
    /// Hand-overs so far: 0 at creation, +1 per change of authority.
    pub const EPOCH: u64 = 8;
    pub const ACTION: u64 = 100;
    /// Method: remove the entity (a client elsewhere removed it).
    pub const REMOVE: u64 = 101;
    /// Method: hand the entity to the requester (`handover.rs`).
    pub const TAKE_AUTHORITY: u64 = 102;
}

/// Component object properties.
pub mod component {
    /// Component 1 `owner`: entity object and instance name.
    pub const OWNER: u64 = 1;
    pub const ENTITY: u64 = 1;
    pub const NAME: u64 = 2;
    /// Method of component 1: remove the component from its entity.
    pub const REMOVE: u64 = 100;
    /// Component 2 `attributes`: property i = attribute index i.
    pub const ATTRIBUTES: u64 = 2;
    /// Component 3 `layout` (DynamicComponent): slot types and names.
    pub const LAYOUT: u64 = 3;
    pub const LAYOUT_TYPES: u64 = 1;
    pub const LAYOUT_NAMES: u64 = 2;
    /// Opaque components: the attribute block, property 0 of component 2.
    pub const OPAQUE_BLOCK: u64 = 0;
}

/// What a URI names.
#[derive(Debug, Clone, PartialEq)]
pub enum UriKind {
    Entity,
    /// A static Tundra component type, by name.
    Component(String),
    /// A self-describing custom type: name and static attributes.
    Custom(String, Vec<CustomAttribute>),
    /// A type the sender does not know, by type id.
    Opaque(u32),
}

fn property(id: u64, name: &str, value_type: ValueType) -> Member {
    Member {
        id: PropertyId(id),
        name: name.to_owned(),
        kind: MemberKind::Property(value_type),
    }
}

fn component_schema(id: u64, name: &str, members: Vec<Member>) -> LessComponent {
    LessComponent {
        id: LessComponentId(id),
        name: name.to_owned(),
        members,
    }
}

/// The LESS form of each Tundra attribute type (section 2.4).
pub fn attribute_value_type(ty: AttributeType) -> ValueType {
    let floats = |n| ValueType::Vector(n, Box::new(ValueType::Float32));
    match ty {
        AttributeType::String | AttributeType::AssetReference | AttributeType::Variant => {
            ValueType::String
        }
        AttributeType::Int | AttributeType::UInt | AttributeType::Bool => ValueType::Integer,
        AttributeType::Real => ValueType::Float32,
        AttributeType::Float2 => floats(2),
        AttributeType::Float3 => floats(3),
        AttributeType::Float4 | AttributeType::Color | AttributeType::Quat => floats(4),
        AttributeType::Transform => floats(9),
        AttributeType::Point => ValueType::Vector(2, Box::new(ValueType::Integer)),
        AttributeType::AssetReferenceList | AttributeType::VariantList => {
            ValueType::List(Box::new(ValueType::String))
        }
        AttributeType::EntityReference => ValueType::StandaloneVariant,
    }
}

/// The entity type's schemas, versions 1 and 2
/// (schemas/less/tundra-entity.toml).
pub fn entity_schemas() -> [TypeSchema; 2] {
    // The shipped file is parsed by a unit test, so this cannot fail.
    let types = crate::less::schema_toml::types_from_toml(ENTITY_TYPES)
        .expect("schemas/less/tundra-entity.toml is valid (checked by tests)");
    [ENTITY_URI_V1, ENTITY_URI].map(|uri| {
        types
            .get(uri)
            .map(|schema| schema.as_ref().clone())
            .expect("schemas/less/tundra-entity.toml declares both versions (checked by tests)")
    })
}

/// The entity type a link carries: version 2 where both Hellos listed
/// [`ENTITY_V2_FEATURE`].
pub fn entity_uri(version_2: bool) -> &'static str {
    if version_2 {
        ENTITY_URI
    } else {
        ENTITY_URI_V1
    }
}

/// A method without arguments that removes its object at the authority.
fn remove_method(id: u64) -> Member {
    Member {
        id: PropertyId(id),
        name: "remove".to_owned(),
        kind: MemberKind::Method(MethodSchema {
            arguments: Some(Vec::new()),
            returns: None,
        }),
    }
}

fn owner_component() -> LessComponent {
    component_schema(
        component::OWNER,
        "owner",
        vec![
            property(component::ENTITY, "entity", ValueType::ObjectId),
            property(component::NAME, "name", ValueType::String),
            remove_method(component::REMOVE),
        ],
    )
}

/// The URI of a Tundra component type.
pub fn component_uri(schema: &ComponentSchema) -> String {
    if schema.custom {
        let mut uri = format!("{CUSTOM_URI}{}", escape(&schema.name));
        for attribute in &schema.attributes {
            uri.push(';');
            uri.push_str(attribute.ty.tundra_name());
            uri.push(':');
            uri.push_str(&escape(&attribute.id));
            uri.push(':');
            uri.push_str(&escape(&attribute.name));
        }
        uri
    } else {
        format!("{COMPONENT_URI}{}", schema.name)
    }
}

/// The URI of an opaque (unknown) component type.
pub fn opaque_uri(type_id: u32) -> String {
    format!("{OPAQUE_URI}{type_id}")
}

/// The LESS schema of a Tundra component type.
pub fn component_type_schema(schema: &ComponentSchema) -> TypeSchema {
    let uri = component_uri(schema);
    if schema.type_id == DYNAMIC_COMPONENT_TYPE_ID || schema.dynamic_attributes {
        return dynamic_schema(uri);
    }
    let attributes = schema
        .attributes
        .iter()
        .enumerate()
        .map(|(index, a)| property(index as u64, &a.id, attribute_value_type(a.ty)))
        .collect();
    TypeSchema::new(
        uri,
        vec![
            owner_component(),
            component_schema(component::ATTRIBUTES, "attributes", attributes),
        ],
    )
}

fn dynamic_schema(uri: String) -> TypeSchema {
    let slots = (0..=255u64)
        .map(|i| property(i, &format!("slot{i}"), ValueType::StandaloneVariant))
        .collect();
    TypeSchema::new(
        uri,
        vec![
            owner_component(),
            component_schema(component::ATTRIBUTES, "attributes", slots),
            component_schema(
                component::LAYOUT,
                "layout",
                vec![
                    property(
                        component::LAYOUT_TYPES,
                        "types",
                        ValueType::List(Box::new(ValueType::Integer)),
                    ),
                    property(
                        component::LAYOUT_NAMES,
                        "names",
                        ValueType::List(Box::new(ValueType::String)),
                    ),
                ],
            ),
        ],
    )
}

/// The schema of an opaque component type.
pub fn opaque_schema(type_id: u32) -> TypeSchema {
    TypeSchema::new(
        opaque_uri(type_id),
        vec![
            owner_component(),
            component_schema(
                component::ATTRIBUTES,
                "attributes",
                vec![property(
                    component::OPAQUE_BLOCK,
                    "block",
                    ValueType::VariableBinary,
                )],
            ),
        ],
    )
}

/// Reads a URI of section 2; `None` for URIs this mapping does not define.
pub fn parse_uri(uri: &str) -> Option<UriKind> {
    if uri == ENTITY_URI || uri == ENTITY_URI_V1 {
        return Some(UriKind::Entity);
    }
    if let Some(name) = uri.strip_prefix(COMPONENT_URI) {
        return Some(UriKind::Component(name.to_owned()));
    }
    if let Some(id) = uri.strip_prefix(OPAQUE_URI) {
        return id.parse().ok().map(UriKind::Opaque);
    }
    let rest = uri.strip_prefix(CUSTOM_URI)?;
    let mut parts = rest.split(';');
    let name = unescape(parts.next()?)?;
    if name.is_empty() {
        return None;
    }
    let mut attributes = Vec::new();
    for part in parts {
        let mut fields = part.split(':');
        let ty = AttributeType::from_name(fields.next()?)?;
        let id = unescape(fields.next()?)?;
        let name = unescape(fields.next()?)?;
        if fields.next().is_some() {
            return None;
        }
        attributes.push(CustomAttribute { ty, id, name });
    }
    Some(UriKind::Custom(name, attributes))
}

/// Percent-encodes the characters the custom URI uses as separators.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ';' => out.push_str("%3B"),
            ':' => out.push_str("%3A"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "3B" => ';',
            "3A" => ':',
            "25" => '%',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The key of static attribute `index` of a component object.
pub fn attribute_key(index: u8) -> PropertyKey {
    PropertyKey::new(component::ATTRIBUTES, u64::from(index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::Registry;

    #[test]
    fn every_registry_type_maps_and_its_uri_parses_back() {
        let registry = Registry::builtin();
        for schema in registry.iter() {
            let less = component_type_schema(schema);
            assert_eq!(
                parse_uri(&less.uri),
                Some(UriKind::Component(schema.name.clone()))
            );
            if !schema.dynamic_attributes {
                let attributes = &less.components[1].members;
                assert_eq!(attributes.len(), schema.attributes.len(), "{}", schema.name);
            }
        }
    }

    #[test]
    fn the_entity_schema_file_matches_the_property_ids_the_code_uses() {
        let [v1, v2] = entity_schemas();
        assert_eq!(
            (v1.uri.as_str(), v2.uri.as_str()),
            (ENTITY_URI_V1, ENTITY_URI)
        );
        let key = |id| PropertyKey::new(entity::COMPONENT, id);
        let names = [
            (entity::ORIGIN, "origin"),
            (entity::SERIAL, "serial"),
            (entity::PATH, "path"),
            (entity::TEMPORARY, "temporary"),
            (entity::PARENT, "parent"),
            (entity::ACTION, "action"),
            (entity::REMOVE, "remove"),
        ];
        let later = [
            (entity::EXPORT, "export"),
            (entity::AUTHORITY, "authority"),
            (entity::EPOCH, "epoch"),
            (entity::TAKE_AUTHORITY, "take-authority"),
        ];
        for (id, name) in names {
            assert_eq!(v1.member(&key(id)).map(|m| m.name.as_str()), Some(name));
            assert_eq!(v2.member(&key(id)).map(|m| m.name.as_str()), Some(name));
        }
        for (id, name) in later {
            assert!(v1.member(&key(id)).is_none(), "{name} is not in version 1");
            assert_eq!(v2.member(&key(id)).map(|m| m.name.as_str()), Some(name));
        }
        // Version 1's properties, unchanged since first published.
        let v1_properties: Vec<u64> = v1.properties().iter().map(|(k, _)| k.property.0).collect();
        assert_eq!(v1_properties, [1, 2, 3, 4, 5]);
        assert_eq!(parse_uri(ENTITY_URI_V1), Some(UriKind::Entity));
        assert_eq!(parse_uri(ENTITY_URI), Some(UriKind::Entity));
    }

    #[test]
    fn custom_uri_is_self_describing() {
        let mut registry = Registry::builtin();
        let attributes = vec![
            CustomAttribute {
                ty: AttributeType::String,
                id: "my;String".into(),
                name: "a:b%".into(),
            },
            CustomAttribute {
                ty: AttributeType::Int,
                id: "myInteger".into(),
                name: "myInteger".into(),
            },
        ];
        let id = registry
            .register_custom("MyComponent", attributes.clone())
            .type_id();
        let schema = registry.get(id).unwrap();
        let uri = component_uri(schema);
        assert_eq!(
            uri,
            "urn:lessgate:tundra:custom:MyComponent;string:my%3BString:a%3Ab%25;int:myInteger:myInteger"
        );
        assert_eq!(
            parse_uri(&uri),
            Some(UriKind::Custom("MyComponent".into(), attributes))
        );
    }

    #[test]
    fn malformed_uris_are_not_ours() {
        assert_eq!(parse_uri("urn:lessgate:tundra:custom:"), None);
        assert_eq!(
            parse_uri("urn:lessgate:tundra:custom:X;nosuchtype:a:b"),
            None
        );
        assert_eq!(parse_uri("urn:lessgate:tundra:custom:X;int:a%zz:b"), None);
        assert_eq!(parse_uri("urn:lessgate:tundra:opaque:abc"), None);
        assert_eq!(parse_uri("urn:other"), None);
    }

    proptest::proptest! {
        /// The escaping of custom URIs is a bijection: any text comes back
        /// from its escaped form, which never holds a separator.
        #[test]
        fn any_text_escapes_without_separators_and_back(text in ".{0,40}") {
            let escaped = escape(&text);
            proptest::prop_assert!(!escaped.contains(';') && !escaped.contains(':'));
            proptest::prop_assert_eq!(unescape(&escaped), Some(text));
        }
    }
}
