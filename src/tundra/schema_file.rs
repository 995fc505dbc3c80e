//! The component schema files (`schemas/tundra/*.toml`, docs/tundra-wire.md §9): their
//! TOML format, validation, the embedded default and loading a directory.
//!
//! One `[[component]]` table per type: `type_id`, `name` (with or without
//! `EC_`), optional `dynamic_attributes`, `source`, and `attributes`, each
//! with `id`, `name`, `type` (a Tundra or urho type name) and an optional
//! `default` in TXML text form, parsed strictly so a typo fails the load.

use std::path::Path;

use serde::Deserialize;

use super::attribute::{AttributeType, AttributeValue};
use super::attribute_text::parse_text_strict;
use super::registry::{
    strip_prefix, AttributeSchema, ComponentSchema, Registry, FIRST_CUSTOM_TYPE_ID,
    MAX_ATTRIBUTES_PER_COMPONENT,
};

/// The embedded default schema file.
pub const BUILTIN_SCHEMA: &str = include_str!("../../schemas/tundra/components.toml");

/// Errors loading schema files.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("{origin}: {source}")]
    Io {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {source}")]
    Toml {
        origin: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
}

impl Registry {
    /// The registry of the embedded `schemas/tundra/components.toml`.
    pub fn builtin() -> Self {
        let mut registry = Registry::new();
        // The embedded file is checked by the unit test
        // `builtin_schema_loads`, so it always parses.
        #[allow(clippy::expect_used)]
        registry
            .load_toml_str(BUILTIN_SCHEMA, "embedded components.toml")
            .expect("embedded component schema is valid");
        registry
    }

    /// Loads every `*.toml` file of `dir`, in name order.
    pub fn from_dir(dir: &Path) -> Result<Self, SchemaError> {
        let origin = dir.display().to_string();
        let entries = std::fs::read_dir(dir).map_err(|source| SchemaError::Io {
            origin: origin.clone(),
            source,
        })?;
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| SchemaError::Io {
                origin: origin.clone(),
                source,
            })?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
        let mut registry = Registry::new();
        for path in paths {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|source| SchemaError::Io {
                origin: origin.clone(),
                source,
            })?;
            registry.load_toml_str(&text, &origin)?;
        }
        Ok(registry)
    }

    /// Adds the `[[component]]` tables of one TOML document; returns how
    /// many types were added.
    pub fn load_toml_str(&mut self, text: &str, origin: &str) -> Result<usize, SchemaError> {
        let file: SchemaFile = toml::from_str(text).map_err(|source| SchemaError::Toml {
            origin: origin.to_string(),
            source,
        })?;
        let count = file.component.len();
        for component in file.component {
            let schema = component
                .into_schema()
                .map_err(|message| SchemaError::Invalid {
                    origin: origin.to_string(),
                    message,
                })?;
            self.insert(schema)
                .map_err(|message| SchemaError::Invalid {
                    origin: origin.to_string(),
                    message,
                })?;
        }
        Ok(count)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaFile {
    #[serde(default)]
    component: Vec<ComponentToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ComponentToml {
    type_id: u32,
    name: String,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    dynamic_attributes: bool,
    #[serde(default)]
    attributes: Vec<AttributeToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttributeToml {
    id: String,
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    default: Option<String>,
}

impl ComponentToml {
    fn into_schema(self) -> Result<ComponentSchema, String> {
        let _ = self.source;
        let name = strip_prefix(self.name.trim()).to_string();
        if self.type_id == 0 || self.type_id >= FIRST_CUSTOM_TYPE_ID {
            return Err(format!(
                "{name}: type_id {} is outside 1..=0xFFFF",
                self.type_id
            ));
        }
        if name.is_empty() {
            return Err(format!("type {}: empty name", self.type_id));
        }
        if self.attributes.len() > MAX_ATTRIBUTES_PER_COMPONENT {
            return Err(format!(
                "{name}: more than {MAX_ATTRIBUTES_PER_COMPONENT} attributes"
            ));
        }
        let mut attributes = Vec::with_capacity(self.attributes.len());
        for a in self.attributes {
            let ty = AttributeType::from_name(&a.ty)
                .ok_or_else(|| format!("{name}.{}: unknown attribute type {:?}", a.id, a.ty))?;
            let default = match a.default {
                Some(text) => parse_text_strict(ty, &text)
                    .map_err(|e| format!("{name}.{}: default: {e}", a.id))?,
                None => AttributeValue::default_for(ty),
            };
            if attributes
                .iter()
                .any(|x: &AttributeSchema| x.id.eq_ignore_ascii_case(&a.id))
            {
                return Err(format!("{name}: attribute id {} appears twice", a.id));
            }
            attributes.push(AttributeSchema {
                id: a.id,
                name: a.name,
                ty,
                default,
            });
        }
        Ok(ComponentSchema {
            type_id: self.type_id,
            name,
            attributes,
            dynamic_attributes: self.dynamic_attributes,
            custom: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_schema_loads() {
        let mut registry = Registry::new();
        let count = registry.load_toml_str(BUILTIN_SCHEMA, "embedded").unwrap();
        assert_eq!(count, 40);
        assert_eq!(Registry::builtin().len(), 40);
    }

    #[test]
    fn bad_schema_files_are_rejected() {
        let mut r = Registry::new();
        let bad_default = "[[component]]\ntype_id = 900\nname = \"X\"\nattributes = [{ id = \"a\", name = \"A\", type = \"float3\", default = \"1 2\" }]\n";
        assert!(r.load_toml_str(bad_default, "t").is_err());
        let bad_type = "[[component]]\ntype_id = 901\nname = \"Y\"\nattributes = [{ id = \"a\", name = \"A\", type = \"vec9\" }]\n";
        assert!(r.load_toml_str(bad_type, "t").is_err());
        let mut r = Registry::builtin();
        let duplicate = "[[component]]\ntype_id = 20\nname = \"Other\"\n";
        assert!(r.load_toml_str(duplicate, "t").is_err());
    }
}
