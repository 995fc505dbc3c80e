//! Loading LESS schemas from TOML text (format: docs/less-wire.md "Schemas").
//!
//! Parse, don't validate: the result is a checked [`SchemaRegistry`] or
//! [`ConnectionSchema`]; duplicate ids, bad value types and over-deep nesting
//! are reported with the URI and component they occur in. This module reads
//! text only; the caller reads files.

use std::collections::HashSet;

use serde::Deserialize;

use super::ids::{ComponentId, InteractionId, PropertyId};
use super::limits::MAX_PATH_LEN;
use super::schema::{
    ComponentSchema, ConnectionExtension, ConnectionSchema, FieldSchema, InteractionSchema, Member,
    MemberKind, MethodSchema, SchemaRegistry, TypeSchema,
};
use super::value_type::ValueType;

/// A schema file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("schema TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("schema {uri}: {detail}")]
    Invalid { uri: String, detail: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypesFile {
    #[serde(default, rename = "type")]
    types: Vec<TypeDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeDef {
    uri: String,
    #[serde(default)]
    component: Vec<ComponentDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ComponentDef {
    id: u64,
    name: String,
    #[serde(default)]
    property: Vec<FieldDef>,
    #[serde(default)]
    component: Vec<ComponentDef>,
    #[serde(default)]
    method: Vec<MethodDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldDef {
    id: u64,
    name: String,
    #[serde(rename = "type")]
    value_type: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MethodDef {
    id: u64,
    name: String,
    arguments: Option<Vec<String>>,
    returns: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionFile {
    uri: String,
    #[serde(default)]
    control: Vec<FieldDef>,
    #[serde(default)]
    interaction: Vec<InteractionDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionFile {
    extends: String,
    feature: String,
    #[serde(default)]
    control: Vec<FieldDef>,
    #[serde(default)]
    interaction: Vec<InteractionDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InteractionDef {
    id: u64,
    name: String,
    #[serde(default)]
    property: Vec<FieldDef>,
}

struct Context<'a> {
    uri: &'a str,
}

impl Context<'_> {
    fn error(&self, detail: String) -> SchemaError {
        SchemaError::Invalid {
            uri: self.uri.to_string(),
            detail,
        }
    }

    fn value_type(&self, where_: &str, text: &str) -> Result<ValueType, SchemaError> {
        ValueType::parse(text).map_err(|detail| self.error(format!("{where_}: {detail}")))
    }

    fn field(&self, where_: &str, def: &FieldDef) -> Result<FieldSchema, SchemaError> {
        Ok(FieldSchema {
            id: PropertyId(def.id),
            name: def.name.clone(),
            value_type: self.value_type(&format!("{where_}.{}", def.name), &def.value_type)?,
        })
    }

    fn component(
        &self,
        def: &ComponentDef,
        depth: usize,
        where_: &str,
    ) -> Result<ComponentSchema, SchemaError> {
        let where_ = format!("{where_}{}", def.name);
        if depth > MAX_PATH_LEN {
            return Err(self.error(format!(
                "{where_}: components nest deeper than {MAX_PATH_LEN}"
            )));
        }
        let mut members = Vec::new();
        for property in &def.property {
            let field = self.field(&where_, property)?;
            members.push(Member {
                id: field.id,
                name: field.name,
                kind: MemberKind::Property(field.value_type),
            });
        }
        for nested in &def.component {
            members.push(Member {
                id: PropertyId(nested.id),
                name: nested.name.clone(),
                kind: MemberKind::Component(self.component(
                    nested,
                    depth + 1,
                    &format!("{where_}/"),
                )?),
            });
        }
        for method in &def.method {
            let method_where = format!("{where_}.{}", method.name);
            let arguments = match &method.arguments {
                Some(list) => Some(
                    list.iter()
                        .map(|text| self.value_type(&method_where, text))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                None => None,
            };
            let returns = match &method.returns {
                Some(text) => Some(self.value_type(&method_where, text)?),
                None => None,
            };
            members.push(Member {
                id: PropertyId(method.id),
                name: method.name.clone(),
                kind: MemberKind::Method(MethodSchema { arguments, returns }),
            });
        }
        unique(members.iter().map(|m| m.id.0), || {
            self.error(format!("{where_}: duplicate member id"))
        })?;
        Ok(ComponentSchema {
            id: ComponentId(def.id),
            name: def.name.clone(),
            members,
        })
    }
}

fn unique(
    ids: impl Iterator<Item = u64>,
    error: impl FnOnce() -> SchemaError,
) -> Result<(), SchemaError> {
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(error());
        }
    }
    Ok(())
}

/// Parses a file of `[[type]]` tables into a registry.
pub fn types_from_toml(text: &str) -> Result<SchemaRegistry, SchemaError> {
    let file: TypesFile = toml::from_str(text)?;
    let mut registry = SchemaRegistry::new();
    for def in &file.types {
        let context = Context { uri: &def.uri };
        if registry.get(&def.uri).is_some() {
            return Err(context.error("defined twice".into()));
        }
        let components = def
            .component
            .iter()
            .map(|component| context.component(component, 1, ""))
            .collect::<Result<Vec<_>, _>>()?;
        unique(components.iter().map(|c| c.id.0), || {
            context.error("duplicate component id".into())
        })?;
        registry.insert(TypeSchema::new(def.uri.clone(), components));
    }
    Ok(registry)
}

/// Parses a connection schema.
pub fn connection_from_toml(text: &str) -> Result<ConnectionSchema, SchemaError> {
    let file: ConnectionFile = toml::from_str(text)?;
    let context = Context { uri: &file.uri };
    let (control, interactions) = context.connection_parts(&file.control, &file.interaction)?;
    Ok(ConnectionSchema {
        uri: file.uri,
        control,
        interactions,
    })
}

/// Parses a connection schema extension (docs/less-wire.md §12): the base
/// URI it `extends`, the Hello `feature` that turns it on, and its control
/// properties and interactions, in the connection schema's format.
pub fn connection_extension_from_toml(text: &str) -> Result<ConnectionExtension, SchemaError> {
    let file: ExtensionFile = toml::from_str(text)?;
    let context = Context { uri: &file.extends };
    if file.feature.is_empty() {
        return Err(context.error("extension without a feature".into()));
    }
    let (control, interactions) = context.connection_parts(&file.control, &file.interaction)?;
    Ok(ConnectionExtension {
        extends: file.extends,
        feature: file.feature,
        control,
        interactions,
    })
}

impl Context<'_> {
    /// Control properties and interactions, ids unique within each.
    fn connection_parts(
        &self,
        control: &[FieldDef],
        interaction: &[InteractionDef],
    ) -> Result<(Vec<FieldSchema>, Vec<InteractionSchema>), SchemaError> {
        let control = control
            .iter()
            .map(|def| self.field("control", def))
            .collect::<Result<Vec<_>, _>>()?;
        unique(control.iter().map(|f| f.id.0), || {
            self.error("duplicate control id".into())
        })?;
        let mut interactions = Vec::new();
        for def in interaction {
            let properties = def
                .property
                .iter()
                .map(|field| self.field(&def.name, field))
                .collect::<Result<Vec<_>, _>>()?;
            unique(properties.iter().map(|f| f.id.0), || {
                self.error(format!("interaction {}: duplicate property id", def.name))
            })?;
            interactions.push(InteractionSchema {
                id: InteractionId(def.id),
                name: def.name.clone(),
                properties,
                feature: None,
            });
        }
        unique(interactions.iter().map(|i| i.id.0), || {
            self.error("duplicate interaction id".into())
        })?;
        Ok((control, interactions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::ids::PropertyKey;

    const TEST_TYPES: &str = include_str!("../../schemas/less/test-types.toml");

    #[test]
    fn loads_the_shipped_test_types() {
        let registry = types_from_toml(TEST_TYPES).unwrap();
        assert_eq!(
            registry.uris(),
            ["urn:lessgate:test:crate", "urn:lessgate:test:lamp"]
        );
        let crate_type = registry.get("urn:lessgate:test:crate").unwrap();
        let colour = crate_type
            .key_by_name(&["info", "appearance"], "colour")
            .unwrap();
        assert_eq!(
            crate_type.property_type(&colour),
            Some(&ValueType::FixedBinary(4))
        );
        let poke = crate_type.method(&PropertyKey::new(2, 8)).unwrap();
        assert_eq!(poke.arguments.as_ref().unwrap().len(), 2);
        assert_eq!(crate_type.properties().len(), 11);
    }

    #[test]
    fn rejects_duplicates_and_bad_types_with_context() {
        let duplicate = "[[type]]\nuri='u'\n[[type.component]]\nid=1\nname='a'\n[[type.component]]\nid=1\nname='b'\n";
        let error = types_from_toml(duplicate).unwrap_err().to_string();
        assert!(
            error.contains("schema u: duplicate component id"),
            "{error}"
        );
        let bad = "[[type]]\nuri='u'\n[[type.component]]\nid=1\nname='a'\n[[type.component.property]]\nid=1\nname='p'\ntype='quux'\n";
        let error = types_from_toml(bad).unwrap_err().to_string();
        assert!(error.contains("a.p") && error.contains("quux"), "{error}");
        let unknown_key = "[[type]]\nuri='u'\ncolour=1\n";
        assert!(matches!(
            types_from_toml(unknown_key),
            Err(SchemaError::Toml(_))
        ));
    }

    #[test]
    fn loads_connection_schema() {
        let schema = connection_from_toml(crate::less::schema::BUILTIN_CONNECTION_SCHEMA).unwrap();
        assert_eq!(schema.uri, "urn:lessgate:less:connection:1");
        let collision = schema.interaction(InteractionId(1)).unwrap();
        assert_eq!(collision.properties.len(), 3);
    }
}
