//! Loading a TXML scene file into the node's scene.
//!
//! Entities keep the ids the file gives when they are free (Tundra's
//! `useEntityIDsFromFile`), `sync="false"` entities and components become
//! local (never replicated), nested entities get their parent, and a
//! component type the registry does not know but whose attributes all carry
//! types is registered as a custom (placeholder) type, as Tundra's
//! `RegisterPlaceholderComponentType` does. Anything else that cannot be
//! presented is reported, never silently changed.

use super::change::ChangeSource;
use super::entity::Origin;
use super::store::Scene;
use crate::tundra::attribute_text::parse_text;
use crate::tundra::registry::CustomAttribute;
use crate::tundra::txml::{self, SceneComponent};
use crate::tundra::{
    AttributeBlock, AttributeType, ComponentBody, ComponentData, ComponentId, EntityId,
};

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    pub entities: usize,
    pub components: usize,
    /// Components left out, with the reason.
    pub skipped: Vec<String>,
    /// Custom types registered from the file.
    pub registered_types: Vec<u32>,
}

impl Scene {
    /// Adds every entity of a loaded TXML file as this node's own content.
    pub fn import_txml(&mut self, file: &txml::Scene) -> ImportReport {
        let mut report = ImportReport::default();
        let flat = file.flatten();
        let mut assigned: Vec<Option<EntityId>> = Vec::with_capacity(flat.len());
        for (parent_index, entity) in &flat {
            let parent = parent_index.and_then(|i| assigned.get(i).copied().flatten());
            let id = match (entity.sync, entity.id) {
                (false, _) => self.allocate_entity_id(true).ok(),
                (true, Some(id)) if id.is_replicated() && self.entity(id).is_none() => Some(id),
                (true, _) => None,
            };
            let mut components = Vec::with_capacity(entity.components.len());
            for (index, component) in entity.components.iter().enumerate() {
                // Ids are replaced by the scene; only local-vs-replicated matters.
                let id = if component.sync {
                    ComponentId(index as u32 + 1)
                } else {
                    ComponentId(crate::tundra::ids::FIRST_LOCAL_ID + index as u32)
                };
                match self.component_from_txml(component, id, &mut report) {
                    Some(data) => components.push(data),
                    None => continue,
                }
            }
            let count = components.len();
            match self.create_entity(
                ChangeSource::Node,
                id,
                Origin::Local,
                entity.temporary,
                parent,
                components,
            ) {
                Ok(created) => {
                    report.entities += 1;
                    report.components += count;
                    assigned.push(Some(created.id));
                }
                Err(error) => {
                    report.skipped.push(format!("entity: {error}"));
                    assigned.push(None);
                }
            }
        }
        report
    }

    fn component_from_txml(
        &mut self,
        component: &SceneComponent,
        id: ComponentId,
        report: &mut ImportReport,
    ) -> Option<ComponentData> {
        if let Some(data) = component.to_full_update(id) {
            return Some(data);
        }
        // An unknown type: register it when every attribute has a type.
        let typed: Option<Vec<(CustomAttribute, &str)>> = component
            .raw
            .iter()
            .map(|raw| {
                let ty = AttributeType::from_name(raw.type_name.as_deref()?)?;
                let id = raw.id.clone().or_else(|| raw.name.clone())?;
                let name = raw.name.clone().unwrap_or_else(|| id.clone());
                Some((CustomAttribute { ty, id, name }, raw.value.as_str()))
            })
            .collect();
        let Some(typed) = typed.filter(|t| !t.is_empty()) else {
            report.skipped.push(format!(
                "component {}: unknown type without attribute types",
                component.type_name
            ));
            return None;
        };
        let values = typed
            .iter()
            .map(|(a, text)| parse_text(a.ty, text))
            .collect();
        let attributes = typed.into_iter().map(|(a, _)| a).collect();
        let type_id = self
            .registry_mut()
            .register_custom(&component.type_name, attributes)
            .type_id();
        report.registered_types.push(type_id);
        Some(ComponentData {
            id,
            type_id,
            name: component.name.clone(),
            body: ComponentBody::Attributes(AttributeBlock {
                values,
                dynamic: Vec::new(),
                trailing: Vec::new(),
            }),
        })
    }
}
