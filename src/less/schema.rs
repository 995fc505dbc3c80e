//! Schema types: what a type URI means (components, possibly nested, with
//! properties, nested components and methods), and the connection schema
//! (connection-control properties and interaction kinds).
//!
//! docs/less-wire.md §10, quoting the draft: "The schema for the type of an object must be introduced
//! into the state stream" by URI; both ends look the URI up in their own
//! registry. Decoding a CONTEXT-DEPENDENT-VARIANT needs the property's value
//! type, which only the schema gives. This module owns the model and lookups;
//! loading from TOML lives in `schema_toml`.

use std::collections::HashMap;
use std::sync::Arc;

use super::encoding::EncodingRule;
use super::ids::{ComponentId, ComponentPath, InteractionId, PropertyId, PropertyKey};
use super::value_type::ValueType;

/// A type: a URI and its top-level components. Built with
/// [`TypeSchema::new`], which also builds its property table.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeSchema {
    pub uri: String,
    pub components: Vec<ComponentSchema>,
    /// Every value property (nested ones included) with its type, ascending
    /// by key: a property's position here is its [`PropertyIndex`]. Built
    /// once, so that per-update lookups are one search over keys and the
    /// per-object state can be kept by index.
    table: Vec<(PropertyKey, ValueType)>,
    /// The table's top-level properties as (component, property, index),
    /// ascending: how every Tundra component type's properties are found,
    /// comparing integers instead of paths.
    top: Vec<(u64, u64, u32)>,
}

/// A value property's position in its type's property table
/// ([`TypeSchema::property_index`]). Indices ascend with keys, so state kept
/// by index walks in key order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PropertyIndex(pub u32);

impl PropertyIndex {
    /// The index as a position.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// A component: members share one id space (the draft's property-id).
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentSchema {
    pub id: ComponentId,
    pub name: String,
    pub members: Vec<Member>,
}

/// One member of a component.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub id: PropertyId,
    pub name: String,
    pub kind: MemberKind,
}

/// What a member is.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberKind {
    /// A property holding a value of this type.
    Property(ValueType),
    /// A nested component. Draft: "The value for a property of type component
    /// is in turn a property-value-list". Its `id` equals the member id.
    Component(ComponentSchema),
    /// A method, invoked with method-invocation. Argument and return types
    /// are checked when declared.
    Method(MethodSchema),
}

/// A method's declared signature.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MethodSchema {
    pub arguments: Option<Vec<ValueType>>,
    pub returns: Option<ValueType>,
}

impl ComponentSchema {
    /// The member with id `id`.
    pub fn member(&self, id: PropertyId) -> Option<&Member> {
        self.members.iter().find(|member| member.id == id)
    }

    fn collect_properties<'a>(
        &'a self,
        path: &ComponentPath,
        out: &mut Vec<(PropertyKey, &'a ValueType)>,
    ) {
        for member in &self.members {
            match &member.kind {
                MemberKind::Property(value_type) => out.push((
                    PropertyKey {
                        component: path.clone(),
                        property: member.id,
                    },
                    value_type,
                )),
                MemberKind::Component(nested) => {
                    if let Some(child) = path.child(nested.id) {
                        nested.collect_properties(&child, out);
                    }
                }
                MemberKind::Method(_) => {}
            }
        }
    }
}

impl TypeSchema {
    /// A type and its property table.
    pub fn new(uri: impl Into<String>, components: Vec<ComponentSchema>) -> TypeSchema {
        let mut schema = TypeSchema {
            uri: uri.into(),
            components,
            table: Vec::new(),
            top: Vec::new(),
        };
        let mut table: Vec<(PropertyKey, ValueType)> = schema
            .properties()
            .into_iter()
            .map(|(key, value_type)| (key, value_type.clone()))
            .collect();
        table.sort_by(|a, b| a.0.cmp(&b.0));
        // A key twice (ids are checked unique where schemas are loaded)
        // keeps its first declaration, as `member` finds it.
        table.dedup_by(|later, earlier| later.0 == earlier.0);
        // Keys with one-element paths order as (component, property) do.
        schema.top = table
            .iter()
            .enumerate()
            .filter_map(|(index, (key, _))| match key.component.elements() {
                [component] => Some((component.0, key.property.0, index as u32)),
                _ => None,
            })
            .collect();
        schema.table = table;
        schema
    }

    /// The index of the value property `key` names.
    pub fn property_index(&self, key: &PropertyKey) -> Option<PropertyIndex> {
        if let [component] = key.component.elements() {
            let wanted = (component.0, key.property.0);
            let position = self
                .top
                .binary_search_by(|(c, p, _)| (*c, *p).cmp(&wanted))
                .ok()?;
            return Some(PropertyIndex(self.top[position].2));
        }
        let position = self.table.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        Some(PropertyIndex(position as u32))
    }

    /// The key and value type of the property at `index`.
    pub fn property_at(&self, index: PropertyIndex) -> Option<(&PropertyKey, &ValueType)> {
        self.table.get(index.get()).map(|(key, ty)| (key, ty))
    }

    /// Number of value properties (one past the largest index).
    pub fn property_count(&self) -> usize {
        self.table.len()
    }

    /// The component a path names, following nested components.
    pub fn component(&self, path: &ComponentPath) -> Option<&ComponentSchema> {
        let (first, rest) = path.elements().split_first()?;
        let mut component = self.components.iter().find(|c| c.id == *first)?;
        for nested_id in rest {
            match &component.member(PropertyId(nested_id.0))?.kind {
                MemberKind::Component(nested) => component = nested,
                _ => return None,
            }
        }
        Some(component)
    }

    /// The member a key names.
    pub fn member(&self, key: &PropertyKey) -> Option<&Member> {
        self.component(&key.component)?.member(key.property)
    }

    /// The value type of the property a key names (`None` for methods,
    /// nested components and unknown keys).
    pub fn property_type(&self, key: &PropertyKey) -> Option<&ValueType> {
        match &self.member(key)?.kind {
            MemberKind::Property(value_type) => Some(value_type),
            _ => None,
        }
    }

    /// The method a key names.
    pub fn method(&self, key: &PropertyKey) -> Option<&MethodSchema> {
        match &self.member(key)?.kind {
            MemberKind::Method(method) => Some(method),
            _ => None,
        }
    }

    /// Every value property, nested ones included, in schema order.
    pub fn properties(&self) -> Vec<(PropertyKey, &ValueType)> {
        let mut out = Vec::new();
        for component in &self.components {
            component.collect_properties(&ComponentPath::top(component.id), &mut out);
        }
        out
    }

    /// The key of a member named by component names (outermost first) and a
    /// member name: how applications refer to schema items.
    pub fn key_by_name(&self, components: &[&str], member: &str) -> Option<PropertyKey> {
        let (first, rest) = components.split_first()?;
        let mut component = self.components.iter().find(|c| c.name == *first)?;
        let mut path = vec![component.id];
        for name in rest {
            let nested = component.members.iter().find_map(|m| match &m.kind {
                MemberKind::Component(nested) if m.name == *name => Some(nested),
                _ => None,
            })?;
            path.push(nested.id);
            component = nested;
        }
        let property = component.members.iter().find(|m| m.name == member)?.id;
        Some(PropertyKey {
            component: ComponentPath::new(path)?,
            property,
        })
    }
}

/// Builds the schema of a self-describing URI the registry does not hold.
pub type SchemaResolver = fn(&str) -> Option<TypeSchema>;

/// Type schemas by URI, with an optional resolver for URIs that describe
/// their own layout (docs/federation.md, custom component types).
#[derive(Clone, Debug, Default)]
pub struct SchemaRegistry {
    types: HashMap<String, Arc<TypeSchema>>,
    resolver: Option<SchemaResolver>,
    encoding_rules: Vec<EncodingRule>,
}

impl SchemaRegistry {
    /// An empty registry.
    pub fn new() -> SchemaRegistry {
        SchemaRegistry::default()
    }

    /// Adds (or replaces) a type.
    pub fn insert(&mut self, schema: TypeSchema) {
        self.types.insert(schema.uri.clone(), Arc::new(schema));
    }

    /// The type with this URI.
    pub fn get(&self, uri: &str) -> Option<&Arc<TypeSchema>> {
        self.types.get(uri)
    }

    /// Sets the rules that pick a compact encoding for properties of these
    /// types on links that agree on it (docs/less-wire.md §16.1).
    pub fn set_encoding_rules(&mut self, rules: Vec<EncodingRule>) {
        self.encoding_rules = rules;
    }

    /// The compact-encoding rules of these types.
    pub fn encoding_rules(&self) -> &[EncodingRule] {
        &self.encoding_rules
    }

    /// Sets the resolver consulted by [`Self::resolve`] for unknown URIs.
    pub fn set_resolver(&mut self, resolver: SchemaResolver) {
        self.resolver = Some(resolver);
    }

    /// The type with this URI, or the one its resolver builds from it.
    pub fn resolve(&self, uri: &str) -> Option<Arc<TypeSchema>> {
        if let Some(schema) = self.types.get(uri) {
            return Some(schema.clone());
        }
        let schema = (self.resolver?)(uri)?;
        (schema.uri == uri).then(|| Arc::new(schema))
    }

    /// Every URI, sorted.
    pub fn uris(&self) -> Vec<&str> {
        let mut uris: Vec<&str> = self.types.keys().map(String::as_str).collect();
        uris.sort_unstable();
        uris
    }
}

/// A flat, typed field: a connection-control property or an interaction property.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldSchema {
    pub id: PropertyId,
    pub name: String,
    pub value_type: ValueType,
}

/// An interaction kind and its properties.
#[derive(Clone, Debug, PartialEq)]
pub struct InteractionSchema {
    pub id: InteractionId,
    pub name: String,
    pub properties: Vec<FieldSchema>,
    /// The Hello feature of the extension that declares it (docs/less-wire.md
    /// §12); `None` in the base schema.
    pub feature: Option<String>,
}

/// The connection schema (docs/less-wire.md §12): what connection-control messages
/// and interactions may carry. Both ends of a link agree on it at set-up.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionSchema {
    pub uri: String,
    pub control: Vec<FieldSchema>,
    pub interactions: Vec<InteractionSchema>,
}

/// Connection-control property 1, `update-rate`: the receiver of this
/// property asks its peer to send at most this many packets per second
/// (INTEGER, 0 = no limit). See docs/less-wire.md "Connection control".
pub const UPDATE_RATE: PropertyId = PropertyId(1);

/// Interactions (and control properties) a Hello feature adds to a base
/// connection schema (docs/less-wire.md §12): a node sends them only on a
/// link whose two Hellos list the feature.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionExtension {
    /// The URI of the base schema it extends.
    pub extends: String,
    /// The Hello feature that turns it on.
    pub feature: String,
    pub control: Vec<FieldSchema>,
    pub interactions: Vec<InteractionSchema>,
}

/// The connection schema this project ships (schemas/less/connection.toml).
pub const BUILTIN_CONNECTION_SCHEMA: &str = include_str!("../../schemas/less/connection.toml");

/// The extensions of it this project ships, one file each.
pub const BUILTIN_CONNECTION_EXTENSIONS: &[&str] = &[
    include_str!("../../schemas/less/connection-departure.toml"),
    include_str!("../../schemas/less/connection-interest.toml"),
];

impl ConnectionSchema {
    /// The control property with id `id`.
    pub fn control(&self, id: PropertyId) -> Option<&FieldSchema> {
        self.control.iter().find(|field| field.id == id)
    }

    /// The interaction kind with id `id`.
    pub fn interaction(&self, id: InteractionId) -> Option<&InteractionSchema> {
        self.interactions
            .iter()
            .find(|interaction| interaction.id == id)
    }

    /// The shipped base schema, without extensions: what a peer of version
    /// 1 knows.
    pub fn base() -> ConnectionSchema {
        // The shipped file is parsed by a unit test, so this cannot fail.
        super::schema_toml::connection_from_toml(BUILTIN_CONNECTION_SCHEMA)
            .expect("schemas/less/connection.toml is valid (checked by tests)")
    }

    /// The shipped schema with every shipped extension: what a lessgate
    /// session decodes (it sends an extension's interactions only where
    /// the link agreed its feature).
    pub fn builtin() -> ConnectionSchema {
        let mut schema = ConnectionSchema::base();
        for text in BUILTIN_CONNECTION_EXTENSIONS {
            // Parsed and merged by a unit test, so neither can fail.
            let extension = super::schema_toml::connection_extension_from_toml(text)
                .expect("shipped connection extensions are valid (checked by tests)");
            schema
                .extend(&extension)
                .expect("shipped connection extensions fit the base (checked by tests)");
        }
        schema
    }

    /// Adds an extension's control properties and interactions. Refused
    /// when it extends another schema or reuses an id.
    pub fn extend(&mut self, extension: &ConnectionExtension) -> Result<(), String> {
        if extension.extends != self.uri {
            return Err(format!(
                "extension {} extends {}, not {}",
                extension.feature, extension.extends, self.uri
            ));
        }
        if let Some(field) = extension
            .control
            .iter()
            .find(|field| self.control(field.id).is_some())
        {
            return Err(format!(
                "extension {}: control {} already declared",
                extension.feature, field.id
            ));
        }
        if let Some(interaction) = extension
            .interactions
            .iter()
            .find(|interaction| self.interaction(interaction.id).is_some())
        {
            return Err(format!(
                "extension {}: interaction {} already declared",
                extension.feature, interaction.id.0
            ));
        }
        self.control.extend(extension.control.iter().cloned());
        self.interactions
            .extend(extension.interactions.iter().map(|i| {
                let mut interaction = i.clone();
                interaction.feature = Some(extension.feature.clone());
                interaction
            }));
        Ok(())
    }
}

impl InteractionSchema {
    /// The property with id `id`.
    pub fn property(&self, id: PropertyId) -> Option<&FieldSchema> {
        self.properties.iter().find(|field| field.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_connection_schema_is_version_1_as_first_published() {
        let base = ConnectionSchema::base();
        assert_eq!(base.uri, "urn:lessgate:less:connection:1");
        let ids: Vec<u64> = base.interactions.iter().map(|i| i.id.0).collect();
        assert_eq!(ids, [1, 2]);
        assert!(base.control(UPDATE_RATE).is_some());
    }

    #[test]
    fn shipped_extensions_add_their_interactions_under_their_features() {
        let schema = ConnectionSchema::builtin();
        let feature = |id: u64| {
            schema
                .interaction(InteractionId(id))
                .map(|i| i.feature.clone())
        };
        assert_eq!(feature(2), Some(None));
        assert_eq!(feature(3), Some(Some("handover:departure/1".to_owned())));
        assert_eq!(feature(4), Some(Some("handover:departure/1".to_owned())));
        assert_eq!(feature(5), Some(Some("interest:regions/1".to_owned())));
        assert_eq!(schema.uri, ConnectionSchema::base().uri);
    }

    #[test]
    fn an_extension_that_reuses_an_id_or_extends_another_schema_is_refused() {
        let mut schema = ConnectionSchema::base();
        let clash = crate::less::schema_toml::connection_extension_from_toml(
            "extends = \"urn:lessgate:less:connection:1\"\nfeature = \"x/1\"\n[[interaction]]\nid = 2\nname = \"again\"\n",
        )
        .unwrap();
        assert!(schema.extend(&clash).unwrap_err().contains("interaction 2"));
        let elsewhere = crate::less::schema_toml::connection_extension_from_toml(
            "extends = \"urn:other\"\nfeature = \"x/1\"\n",
        )
        .unwrap();
        assert!(schema.extend(&elsewhere).is_err());
        assert_eq!(schema, ConnectionSchema::base());
    }

    fn sample() -> TypeSchema {
        TypeSchema::new(
            "urn:test",
            vec![ComponentSchema {
                id: ComponentId(1),
                name: "body".into(),
                members: vec![
                    Member {
                        id: PropertyId(1),
                        name: "mass".into(),
                        kind: MemberKind::Property(ValueType::Float32),
                    },
                    Member {
                        id: PropertyId(2),
                        name: "inner".into(),
                        kind: MemberKind::Component(ComponentSchema {
                            id: ComponentId(2),
                            name: "inner".into(),
                            members: vec![Member {
                                id: PropertyId(5),
                                name: "label".into(),
                                kind: MemberKind::Property(ValueType::String),
                            }],
                        }),
                    },
                    Member {
                        id: PropertyId(3),
                        name: "kick".into(),
                        kind: MemberKind::Method(MethodSchema::default()),
                    },
                ],
            }],
        )
    }

    #[test]
    fn lookups_follow_nested_paths() {
        let schema = sample();
        let nested = schema.key_by_name(&["body", "inner"], "label").unwrap();
        assert_eq!(nested.to_string(), "1/2.5");
        assert_eq!(schema.property_type(&nested), Some(&ValueType::String));
        assert_eq!(
            schema.property_type(&PropertyKey::new(1, 1)),
            Some(&ValueType::Float32)
        );
        assert_eq!(schema.property_type(&PropertyKey::new(1, 3)), None);
        assert!(schema.method(&PropertyKey::new(1, 3)).is_some());
        assert!(schema.member(&PropertyKey::new(9, 1)).is_none());
        let keys: Vec<String> = schema
            .properties()
            .iter()
            .map(|(k, _)| k.to_string())
            .collect();
        assert_eq!(keys, ["1.1", "1/2.5"]);
        // The table holds value properties only, ascending by key.
        assert_eq!(schema.property_count(), 2);
        let index = schema.property_index(&nested).unwrap();
        assert_eq!(index, PropertyIndex(1));
        assert_eq!(
            schema.property_at(index),
            Some((&nested, &ValueType::String))
        );
        assert_eq!(schema.property_index(&PropertyKey::new(1, 3)), None);
        assert_eq!(
            schema.property_index(&PropertyKey::new(1, 1)),
            Some(PropertyIndex(0))
        );
        // Every entry is found through whichever search its path takes.
        for position in 0..schema.property_count() {
            let index = PropertyIndex(position as u32);
            let (key, _) = schema.property_at(index).unwrap();
            assert_eq!(schema.property_index(key), Some(index));
        }
    }

    #[test]
    fn builtin_connection_schema_declares_update_rate() {
        let connection = ConnectionSchema::builtin();
        let rate = connection.control(UPDATE_RATE).unwrap();
        assert_eq!(rate.name, "update-rate");
        assert_eq!(rate.value_type, ValueType::Integer);
    }
}
