//! The Tundra values tests build and read: a Placeable transform on the x
//! axis, a client-created box (Placeable and Name), the edit that moves it,
//! the x an edit carries, and the entity a scene holds under a Name. Pure
//! values: no node, socket or clock.

use std::sync::OnceLock;

use lessgate::scene::Scene;
use lessgate::tundra::messages::{EditAttributes, EditAttributesBlock};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, EntityId, Message, Registry,
};

/// Built-in type ids (schemas/tundra): Placeable and Name.
pub const PLACEABLE: u32 = 20;
pub const NAME: u32 = 26;

/// The built-in registry, parsed once per test binary.
pub fn builtin() -> &'static Registry {
    static BUILTIN: OnceLock<Registry> = OnceLock::new();
    BUILTIN.get_or_init(Registry::builtin)
}

/// A Placeable transform at `x` on the x axis.
pub fn transform(x: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, 0.0, 0.0),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// A Name component under unacked id `id` holding `text`.
pub fn name_component(id: u32, text: &str) -> ComponentData {
    let schema = builtin().get(NAME).expect("Name is a built-in type");
    let mut values = schema.default_values();
    values[0] = AttributeValue::String(text.to_owned());
    ComponentData::with_values(ComponentId(0x4000_0000 | id), schema, values)
}

/// A client-created box placed by `placement` (a Placeable transform):
/// Placeable (unacked component 1) and Name (unacked component 2).
pub fn named_box_with(name: &str, placement: AttributeValue) -> Vec<ComponentData> {
    let placeable = builtin().get(PLACEABLE).expect("Placeable is built in");
    let mut values = placeable.default_values();
    values[0] = placement;
    vec![
        ComponentData::with_values(ComponentId(0x4000_0001), placeable, values),
        name_component(2, name),
    ]
}

/// A client-created box at `x`.
pub fn named_box_at(name: &str, x: f32) -> Vec<ComponentData> {
    named_box_with(name, transform(x))
}

/// A client-created box at the origin.
pub fn named_box(name: &str) -> Vec<ComponentData> {
    named_box_at(name, 0.0)
}

/// A client's edit moving a box's Placeable `component` to `x`.
pub fn move_to(entity: EntityId, component: ComponentId, x: f32) -> Message {
    let slots = builtin().get(PLACEABLE).unwrap().slot_types();
    let edit = AttributeEdit {
        index: 0,
        value: transform(x),
    };
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: entity,
        blocks: vec![EditAttributesBlock::encode(component, &[edit], &slots).unwrap()],
    })
}

/// The Placeable x an EditAttributes for `entity` sets, if it is one.
pub fn edited_x(message: &Message, entity: EntityId) -> Option<f32> {
    let Message::EditAttributes(edit) = message else {
        return None;
    };
    if edit.entity_id != entity {
        return None;
    }
    let slots = builtin().get(PLACEABLE)?.slot_types();
    let decoded = edit.blocks.first()?.decode(&slots).ok()?;
    decoded.edits.iter().find_map(|e| match &e.value {
        AttributeValue::Transform(t) if e.index == 0 => Some(t.pos.x),
        _ => None,
    })
}

/// The entity in `scene` whose Name is `name` (the first, when several are).
pub fn entity_named(scene: &Scene, name: &str) -> Option<EntityId> {
    scene
        .entities()
        .find(|e| {
            e.component_of_type(NAME)
                .and_then(|c| c.attribute(0))
                .is_some_and(|a| a.value == AttributeValue::String(name.into()))
        })
        .map(|e| e.id)
}
