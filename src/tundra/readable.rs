//! What a Tundra message means, for the inspector's `readable` field
//! (docs/inspect.md "Tundra frames"): the message itself keeps the raw
//! codes so that it encodes back to its bytes; this view says them in
//! units and names. RigidBodyUpdate records as metres, degrees (Euler xyz,
//! as Transform holds them), quaternions, metres per second and degrees per
//! second, decoded as Tundra's client decodes them
//! (`rigid_body_receiver`); components by type name and attributes by the
//! names of the type's layout (`registry`); EditAttributes blocks decoded
//! against the layout of their component's type, when an earlier
//! CreateEntity or CreateComponents (or the operator) said which type the
//! component has.

use std::collections::HashMap;

use serde_json::{json, Value as Json};

use super::attribute::AttributeValue;
use super::component::{ComponentBody, ComponentData};
use super::ids::{ComponentId, EntityId};
use super::messages::Message;
use super::orientation::transform_quat;
use super::registry::{ComponentSchema, Registry};
use super::rigid_body::{PositionUpdate, RigidBodyEntityUpdate, RotationUpdate, ScaleUpdate};
use super::rigid_body_receiver::receive;
use super::values::{Float3, Quat, Transform};

/// Which type each component has, as far as the reader has been told.
#[derive(Debug, Clone, Default)]
pub struct ComponentTypes {
    /// Learnt from CreateEntity and CreateComponents, per entity.
    pub created: HashMap<(EntityId, ComponentId), u32>,
    /// Given by the operator for a component id in any entity.
    pub given: HashMap<ComponentId, u32>,
}

impl ComponentTypes {
    fn type_of(&self, entity: EntityId, component: ComponentId) -> Option<u32> {
        self.created
            .get(&(entity, component))
            .or_else(|| self.given.get(&component))
            .copied()
    }

    fn learn(&mut self, entity: EntityId, components: &[ComponentData]) {
        for component in components {
            self.created
                .insert((entity, component.id), component.type_id);
        }
    }
}

/// The readable view of `message`, if it has fields worth saying in units or
/// names; learns the component types it creates into `types`.
pub fn readable(
    message: &Message,
    registry: &Registry,
    types: &mut ComponentTypes,
) -> Option<Json> {
    match message {
        Message::RigidBodyUpdate(update) => Some(json!({
            "entities": update.entities.iter().map(rigid_body_record).collect::<Vec<_>>(),
        })),
        Message::CreateEntity(create) => {
            types.learn(create.entity_id, &create.components);
            Some(json!({
                "entity_id": create.entity_id.0,
                "components": components(&create.components, registry),
            }))
        }
        Message::CreateComponents(create) => {
            types.learn(create.entity_id, &create.components);
            Some(json!({
                "entity_id": create.entity_id.0,
                "components": components(&create.components, registry),
            }))
        }
        Message::EditAttributes(edit) => {
            let blocks = edit.blocks.iter().map(|block| {
                let type_id = types.type_of(edit.entity_id, block.component_id);
                let schema = type_id.and_then(|id| registry.get(id));
                let Some(schema) = schema else {
                    return json!({
                        "component": block.component_id.0,
                        "type": Json::Null,
                        "note": "component type unknown: no CreateEntity or CreateComponents before it in this input named it (give --component ID=TYPE)",
                    });
                };
                match block.decode(&schema.slot_types()) {
                    Ok(edits) => json!({
                        "component": block.component_id.0,
                        "type": schema.name,
                        "attributes": edits.edits.iter()
                            .map(|edit| attribute(schema, usize::from(edit.index), &edit.value))
                            .collect::<Vec<_>>(),
                    }),
                    Err(error) => json!({
                        "component": block.component_id.0,
                        "type": schema.name,
                        "error": error.to_string(),
                    }),
                }
            });
            Some(json!({
                "entity_id": edit.entity_id.0,
                "blocks": blocks.collect::<Vec<_>>(),
            }))
        }
        _ => None,
    }
}

fn components(components: &[ComponentData], registry: &Registry) -> Vec<Json> {
    components
        .iter()
        .map(|component| {
            let schema = registry.get(component.type_id);
            let type_name = schema.map(|s| s.name.as_str());
            match (&component.body, schema) {
                (ComponentBody::Attributes(block), Some(schema)) => {
                    let mut attributes: Vec<Json> = block
                        .values
                        .iter()
                        .enumerate()
                        .map(|(index, value)| attribute(schema, index, value))
                        .collect();
                    attributes.extend(block.dynamic.iter().map(|dynamic| {
                        json!({"index": dynamic.index, "name": dynamic.name, "value": value(&dynamic.value)})
                    }));
                    json!({"id": component.id.0, "type": type_name, "attributes": attributes})
                }
                _ => json!({
                    "id": component.id.0,
                    "type_id": component.type_id,
                    "type": type_name,
                    "note": "attributes not decoded: the type is not in the registry",
                }),
            }
        })
        .collect()
}

/// One attribute named by the layout of its type.
fn attribute(schema: &ComponentSchema, index: usize, attribute_value: &AttributeValue) -> Json {
    match schema.attributes.get(index) {
        Some(declared) => json!({
            "index": index, "id": declared.id, "name": declared.name,
            "value": value(attribute_value),
        }),
        None => json!({"index": index, "value": value(attribute_value)}),
    }
}

/// An attribute value in plain units: a Transform as position (metres),
/// rotation (Euler degrees) and scale; others as their JSON value.
fn value(attribute_value: &AttributeValue) -> Json {
    match attribute_value {
        AttributeValue::Transform(transform) => transform_json(transform),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|json| json.get("value").cloned())
            .unwrap_or(Json::Null),
    }
}

fn transform_json(transform: &Transform) -> Json {
    json!({
        "position_m": float3(transform.pos),
        "rotation_deg": float3(transform.rot),
        "rotation_quat": quat(transform_quat(transform.rot)),
        "scale": float3(transform.scale),
    })
}

/// One RigidBodyUpdate record: only the parts it carries.
fn rigid_body_record(record: &RigidBodyEntityUpdate) -> Json {
    let received = receive(record, Transform::default());
    let mut out = json!({"entity_id": record.entity_id.0});
    if let Some(transform) = received.transform {
        if record.position != PositionUpdate::None {
            out["position_m"] = float3(transform.pos);
        }
        if record.rotation != RotationUpdate::None {
            out["rotation_deg"] = float3(transform.rot);
            // The axis-angle form is a quaternion; the direction forms are
            // the rotation that looks along the sent forward vector.
            let rotation = record
                .rotation
                .quat()
                .unwrap_or_else(|| transform_quat(transform.rot));
            out["rotation_quat"] = quat(rotation);
            if let Some(forward) = record.rotation.forward() {
                out["forward"] = float3(forward);
            }
        }
        if record.scale != ScaleUpdate::None {
            out["scale"] = float3(transform.scale);
        }
    }
    if let Some(velocity) = received.linear_velocity {
        out["velocity_m_s"] = float3(velocity);
    }
    if let Some(angular) = received.angular_velocity {
        out["angular_velocity_deg_s"] = float3(angular);
    }
    out
}

/// An f32 as the shortest decimal that reads back to it (non-finite values
/// as strings: JSON has no numbers for them).
fn number(value: f32) -> Json {
    if value.is_finite() {
        serde_json::from_str(&format!("{value:?}")).unwrap_or(Json::Null)
    } else {
        Json::String(format!("{value}"))
    }
}

fn float3(v: Float3) -> Json {
    json!([number(v.x), number(v.y), number(v.z)])
}

fn quat(q: Quat) -> Json {
    json!([number(q.x), number(q.y), number(q.z), number(q.w)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::ids::ProtocolVersion;
    use crate::tundra::messages::DecodeContext;

    fn decode(hex_text: &str) -> Message {
        let registry = Registry::builtin();
        let ctx = DecodeContext {
            protocol_version: ProtocolVersion(4),
            registry: &registry,
        };
        Message::decode_frame(&hex::decode(hex_text.replace(' ', "")).unwrap(), &ctx).unwrap()
    }

    #[test]
    fn rigid_body_positions_are_metres_and_rotations_degrees() {
        use crate::tundra::rigid_body::{AxisAngleCode, RigidBodyUpdate};
        let record = RigidBodyEntityUpdate {
            entity_id: EntityId(5),
            position: PositionUpdate::Full(Float3::new(1.5, -2.0, 0.25)),
            rotation: RotationUpdate::AxisAngle(AxisAngleCode {
                angle: 0,
                axis: None,
            }),
            scale: ScaleUpdate::Uniform(2.0),
            velocity: Default::default(),
            angular_velocity: None,
        };
        let message = Message::RigidBodyUpdate(RigidBodyUpdate {
            entities: vec![record],
        });
        let bytes = message.encode_frame(ProtocolVersion(4)).unwrap();
        let decoded = decode(&hex::encode(bytes));
        let view = readable(
            &decoded,
            &Registry::builtin(),
            &mut ComponentTypes::default(),
        )
        .unwrap();
        let entity = &view["entities"][0];
        assert_eq!(entity["entity_id"], 5);
        assert_eq!(entity["position_m"], json!([1.5, -2.0, 0.25]));
        assert_eq!(entity["rotation_deg"], json!([0.0, 0.0, 0.0]));
        assert_eq!(entity["rotation_quat"], json!([0.0, 0.0, 0.0, 1.0]));
        assert_eq!(entity["scale"], json!([2.0, 2.0, 2.0]));
        assert!(entity.get("velocity_m_s").is_none());
    }

    #[test]
    fn fixed_point_positions_are_decoded_as_the_client_does() {
        // Signed 11.8 fixed point, as the server writes it.
        let code = |metres: f32| crate::tundra::quantize::signed_fixed(11, 8, metres);
        let record = RigidBodyEntityUpdate {
            entity_id: EntityId(9),
            position: PositionUpdate::Fixed {
                x: code(10.5),
                y: code(0.0),
                z: code(-3.25),
            },
            rotation: RotationUpdate::None,
            scale: ScaleUpdate::None,
            velocity: Default::default(),
            angular_velocity: None,
        };
        let view = rigid_body_record(&record);
        assert_eq!(view["position_m"], json!([10.5, 0.0, -3.25]));
        assert!(view.get("rotation_deg").is_none() && view.get("scale").is_none());
    }

    #[test]
    fn components_and_edits_are_named_by_their_type() {
        let registry = Registry::builtin();
        let mut types = ComponentTypes::default();
        // CreateEntity 5 with a Name component (id 1, type 26) named "a".
        let create = decode("6e00 0005 00 00000000 01 011a0007 01006100000000");
        let view = readable(&create, &registry, &mut types).unwrap();
        let component = &view["components"][0];
        assert_eq!(component["type"], "Name");
        assert_eq!(component["attributes"][0]["id"], "name");
        assert_eq!(component["attributes"][0]["value"], "a");
        // EditAttributes of entity 5, component 1: known to be a Name now.
        let slots = registry.get(26).unwrap().slot_types();
        let change = crate::tundra::AttributeEdit {
            index: 0,
            value: AttributeValue::String("b".into()),
        };
        let block =
            crate::tundra::messages::EditAttributesBlock::encode(ComponentId(1), &[change], &slots)
                .unwrap();
        let edit = Message::EditAttributes(crate::tundra::messages::EditAttributes {
            scene_id: 0,
            entity_id: EntityId(5),
            blocks: vec![block],
        });
        let edit = decode(&hex::encode(edit.encode_frame(ProtocolVersion(4)).unwrap()));
        let view = readable(&edit, &registry, &mut types).unwrap();
        assert_eq!(view["blocks"][0]["type"], "Name", "{view}");
        assert_eq!(view["blocks"][0]["attributes"][0]["id"], "name");
        assert_eq!(view["blocks"][0]["attributes"][0]["value"], "b");
        // The same edit of an entity nobody described says so.
        let unknown = readable(&edit, &registry, &mut ComponentTypes::default()).unwrap();
        assert_eq!(unknown["blocks"][0]["type"], Json::Null);
    }
}
