//! Loading Tundra scene files (TXML, docs/tundra-wire.md §10.1; tundra
//! `Scene::CreateEntityFromXml`, `IComponent::DeserializeFrom`) into a plain
//! scene description with typed attribute values.
//!
//! Both forms seen in real files load: the old one (`type="EC_Mesh"`,
//! attributes by human name) and the modern one (`type="Mesh" typeId="17"`,
//! attributes by `id`). A component matches by `typeId` first, else by type
//! name with or without `EC_`; WebTundra's lowercase `typeid` (ignored by
//! tundra) is used only when the name is unknown. Attributes match by `id`
//! (case-insensitive) when given, else by `name`; listed attributes override
//! the type's defaults, unmatched ones are reported as warnings, as Tundra
//! logs them. DynamicComponent attributes carry their `type`. Child
//! `<entity>` elements nest. Component types the registry does not know are
//! kept with their raw attribute texts.
//!
//! This module only reads files into values; building a live scene from
//! them is the server's job.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::attribute::{AttributeType, AttributeValue};
use super::attribute_text::parse_text;
use super::component::{AttributeBlock, ComponentBody, ComponentData, DynamicAttribute};
use super::ids::{ComponentId, EntityId};
use super::registry::{ComponentSchema, Registry};

/// Errors that stop a scene file from loading at all.
#[derive(Debug, thiserror::Error)]
pub enum TxmlError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("xml: {0}")]
    Xml(#[from] roxmltree::Error),
    #[error("root element is <{0}>, expected <scene>")]
    NotAScene(String),
}

/// An attribute of a component type the registry does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawAttribute {
    pub id: Option<String>,
    pub name: Option<String>,
    pub type_name: Option<String>,
    pub value: String,
}

/// One component of a scene entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneComponent {
    /// Type id, when given or known from the registry.
    pub type_id: Option<u32>,
    /// Type name as resolved (registry name without `EC_`), else as written.
    pub type_name: String,
    /// Instance name.
    pub name: String,
    /// Replicated (`sync`, default true).
    pub sync: bool,
    pub temporary: bool,
    /// True when the registry knows the type.
    pub known: bool,
    /// Every static attribute, defaults where the file lists none.
    pub values: Vec<AttributeValue>,
    /// DynamicComponent attributes, indexed in file order.
    pub dynamic: Vec<DynamicAttribute>,
    /// Attributes of an unknown type, as written.
    pub raw: Vec<RawAttribute>,
}

impl SceneComponent {
    /// The ComponentFullUpdate of this component under id `id` (known
    /// types only).
    pub fn to_full_update(&self, id: ComponentId) -> Option<ComponentData> {
        Some(ComponentData {
            id,
            type_id: self.type_id.filter(|_| self.known)?,
            name: self.name.clone(),
            body: ComponentBody::Attributes(AttributeBlock {
                values: self.values.clone(),
                dynamic: self.dynamic.clone(),
                trailing: Vec::new(),
            }),
        })
    }
}

/// One entity, with its nested children.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneEntity {
    pub id: Option<EntityId>,
    pub sync: bool,
    pub temporary: bool,
    pub components: Vec<SceneComponent>,
    pub children: Vec<SceneEntity>,
}

/// A loaded scene file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Scene {
    /// Top-level entities.
    pub entities: Vec<SceneEntity>,
    /// What Tundra would log as warnings (unmatched attributes and the like).
    pub warnings: Vec<String>,
}

impl Scene {
    /// All entities depth first, each with its parent's index in this list.
    pub fn flatten(&self) -> Vec<(Option<usize>, &SceneEntity)> {
        fn walk<'a>(
            e: &'a SceneEntity,
            parent: Option<usize>,
            out: &mut Vec<(Option<usize>, &'a SceneEntity)>,
        ) {
            let me = out.len();
            out.push((parent, e));
            for c in &e.children {
                walk(c, Some(me), out);
            }
        }
        let mut out = Vec::new();
        for e in &self.entities {
            walk(e, None, &mut out);
        }
        out
    }

    /// Number of entities, nested ones included.
    pub fn entity_count(&self) -> usize {
        self.flatten().len()
    }

    /// Number of components over all entities.
    pub fn component_count(&self) -> usize {
        self.flatten().iter().map(|(_, e)| e.components.len()).sum()
    }
}

/// Loads a scene file.
pub fn load_file(path: &Path, registry: &Registry) -> Result<Scene, TxmlError> {
    let text = std::fs::read_to_string(path).map_err(|source| TxmlError::Io {
        path: path.display().to_string(),
        source,
    })?;
    load(&text, registry)
}

/// Loads scene text.
pub fn load(text: &str, registry: &Registry) -> Result<Scene, TxmlError> {
    // Some files start with a byte order mark.
    let text = text.trim_start_matches('\u{feff}');
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, options)?;
    let root = doc.root_element();
    if !root.tag_name().name().eq_ignore_ascii_case("scene") {
        return Err(TxmlError::NotAScene(root.tag_name().name().to_string()));
    }
    let mut scene = Scene::default();
    for node in root.children().filter(|n| is_element(n, "entity")) {
        let entity = read_entity(node, registry, &mut scene.warnings);
        scene.entities.push(entity);
    }
    Ok(scene)
}

fn is_element(node: &roxmltree::Node<'_, '_>, name: &str) -> bool {
    node.is_element() && node.tag_name().name() == name
}

/// Tundra `ParseBool`: "1", "on", "true" (any case) are true.
fn parse_bool(text: Option<&str>, default: bool) -> bool {
    match text {
        None => default,
        Some(t) => matches!(t.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true"),
    }
}

fn read_entity(
    node: roxmltree::Node<'_, '_>,
    registry: &Registry,
    warnings: &mut Vec<String>,
) -> SceneEntity {
    let id = node
        .attribute("id")
        .and_then(|t| match t.trim().parse::<u32>() {
            Ok(v) => Some(EntityId(v)),
            Err(_) => {
                warnings.push(format!("entity id {t:?} is not a number"));
                None
            }
        });
    let mut entity = SceneEntity {
        id,
        sync: parse_bool(node.attribute("sync"), true),
        temporary: parse_bool(node.attribute("temporary"), false),
        components: Vec::new(),
        children: Vec::new(),
    };
    for child in node.children().filter(roxmltree::Node::is_element) {
        match child.tag_name().name() {
            "component" => {
                let component = read_component(child, registry, warnings);
                entity.components.push(component);
            }
            "entity" => {
                let nested = read_entity(child, registry, warnings);
                entity.children.push(nested);
            }
            _ => {}
        }
    }
    entity
}

fn resolve<'r>(
    node: roxmltree::Node<'_, '_>,
    registry: &'r Registry,
) -> Option<&'r ComponentSchema> {
    let by_id = |attr: &str| {
        node.attribute(attr)
            .and_then(|t| t.trim().parse::<u32>().ok())
            .and_then(|id| registry.get(id))
    };
    by_id("typeId")
        .or_else(|| node.attribute("type").and_then(|n| registry.get_by_name(n)))
        .or_else(|| by_id("typeid"))
        .map(|s| s.as_ref())
}

fn read_component(
    node: roxmltree::Node<'_, '_>,
    registry: &Registry,
    warnings: &mut Vec<String>,
) -> SceneComponent {
    let schema = resolve(node, registry);
    let written_type = node.attribute("type").unwrap_or_default().to_string();
    let mut component = SceneComponent {
        type_id: schema
            .map(|s| s.type_id)
            .or_else(|| node.attribute("typeId").and_then(|t| t.trim().parse().ok())),
        type_name: schema.map_or(written_type, |s| s.name.clone()),
        name: node.attribute("name").unwrap_or_default().to_string(),
        sync: parse_bool(node.attribute("sync"), true),
        temporary: parse_bool(node.attribute("temporary"), false),
        known: schema.is_some(),
        values: schema
            .map(ComponentSchema::default_values)
            .unwrap_or_default(),
        dynamic: Vec::new(),
        raw: Vec::new(),
    };
    for attr in node.children().filter(|n| is_element(n, "attribute")) {
        let value_text = attr.attribute("value").unwrap_or_default();
        let id = attr.attribute("id");
        let name = attr.attribute("name");
        let type_name = attr.attribute("type");
        let Some(schema) = schema else {
            component.raw.push(RawAttribute {
                id: id.map(str::to_string),
                name: name.map(str::to_string),
                type_name: type_name.map(str::to_string),
                value: value_text.to_string(),
            });
            continue;
        };
        if let Some(index) = schema.find_attribute(id, name) {
            component.values[index] = parse_text(schema.attributes[index].ty, value_text);
        } else if schema.dynamic_attributes {
            let Some(ty) = type_name.and_then(AttributeType::from_name) else {
                warnings.push(format!(
                    "{}: dynamic attribute {:?} has no valid type",
                    schema.name,
                    id.or(name)
                ));
                continue;
            };
            let index = schema.attributes.len() + component.dynamic.len();
            let Ok(index) = u8::try_from(index) else {
                warnings.push(format!("{}: more than 256 attributes", schema.name));
                continue;
            };
            component.dynamic.push(DynamicAttribute {
                index,
                // "id falls back to name" (§10.1).
                name: id.or(name).unwrap_or_default().to_string(),
                value: parse_text(ty, value_text),
            });
        } else {
            warnings.push(format!(
                "{}: no attribute {:?}",
                schema.name,
                id.or(name).unwrap_or_default()
            ));
        }
    }
    component
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::values::Transform;

    const NESTED: &str = r#"<!DOCTYPE Scene>
<scene>
 <entity id="1" sync="1">
  <component type="EC_Placeable" sync="1">
   <attribute value="1,2,3,0,90,0,1,1,1" name="Transform"/>
   <attribute value="true" name="Show bounding box"/>
   <attribute value="x" name="Obsolete thing"/>
  </component>
  <component type="DynamicComponent" typeId="25" name="Settings">
   <attribute value="true" type="bool" name="spawningHammers"/>
   <attribute id="speed" value="2.5" type="real"/>
  </component>
  <entity id="2" sync="false" temporary="true">
   <component type="MyComponent" typeId="69969">
    <attribute id="myString" value="hi" type="string"/>
   </component>
  </entity>
 </entity>
</scene>"#;

    #[test]
    fn old_and_modern_forms_nested_children_and_dynamic_attributes() {
        let scene = load(NESTED, &Registry::builtin()).unwrap();
        assert_eq!(scene.entity_count(), 2);
        assert_eq!(scene.component_count(), 3);
        let e = &scene.entities[0];
        assert_eq!(e.id, Some(EntityId(1)));
        let placeable = &e.components[0];
        assert_eq!(
            (placeable.type_id, placeable.type_name.as_str()),
            (Some(20), "Placeable")
        );
        let AttributeValue::Transform(Transform { pos, rot, .. }) = placeable.values[0] else {
            panic!("transform")
        };
        assert_eq!((pos.z, rot.y), (3.0, 90.0));
        assert_eq!(placeable.values[1], AttributeValue::Bool(true));
        assert_eq!(
            placeable.values[2],
            AttributeValue::Bool(true),
            "default kept"
        );
        assert_eq!(scene.warnings.len(), 1);
        let dynamic = &e.components[1];
        assert_eq!(dynamic.name, "Settings");
        assert_eq!(dynamic.dynamic.len(), 2);
        assert_eq!(dynamic.dynamic[0].name, "spawningHammers");
        assert_eq!(dynamic.dynamic[1].value, AttributeValue::Real(2.5));
        assert_eq!(dynamic.dynamic[1].index, 1);
        let child = &e.children[0];
        assert!(!child.sync && child.temporary);
        let custom = &child.components[0];
        assert!(!custom.known);
        assert_eq!(custom.type_id, Some(69969));
        assert_eq!(custom.raw[0].value, "hi");
        assert!(custom.to_full_update(ComponentId(1)).is_none());
        assert!(placeable.to_full_update(ComponentId(1)).is_some());
        let flat = scene.flatten();
        assert_eq!(flat[1].0, Some(0));
    }

    #[test]
    fn not_a_scene() {
        assert!(matches!(
            load("<x/>", &Registry::builtin()),
            Err(TxmlError::NotAScene(_))
        ));
        assert!(load("<scene>", &Registry::builtin()).is_err());
    }
}
