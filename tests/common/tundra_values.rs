//! The Tundra values tests build and read: a Placeable transform on the x
//! axis, Placeable and Name components, a client-created box, a client's
//! edit of one attribute (a move, a rename), the x an edit carries, and the
//! entity a scene holds under a Name. Pure values: no node, socket or clock.

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

/// A Placeable component under unacked id `id` placed by `placement` (a
/// transform).
pub fn placeable_component(id: u32, placement: AttributeValue) -> ComponentData {
    let schema = builtin().get(PLACEABLE).expect("Placeable is built in");
    let mut values = schema.default_values();
    values[0] = placement;
    ComponentData::with_values(ComponentId(0x4000_0000 | id), schema, values)
}

/// A client-created box placed by `placement` (a Placeable transform):
/// Placeable (unacked component 1) and Name (unacked component 2).
pub fn named_box_with(name: &str, placement: AttributeValue) -> Vec<ComponentData> {
    vec![placeable_component(1, placement), name_component(2, name)]
}

/// A client-created box at `x`.
pub fn named_box_at(name: &str, x: f32) -> Vec<ComponentData> {
    named_box_with(name, transform(x))
}

/// A client-created box at the origin.
pub fn named_box(name: &str) -> Vec<ComponentData> {
    named_box_at(name, 0.0)
}

/// A client's edit of one attribute: `value` at `index` of `component`, a
/// built-in component of type `type_id`.
pub fn attribute_edit(
    entity: EntityId,
    component: ComponentId,
    type_id: u32,
    index: u8,
    value: AttributeValue,
) -> Message {
    let slots = builtin()
        .get(type_id)
        .expect("a built-in type")
        .slot_types();
    let edit = AttributeEdit { index, value };
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: entity,
        blocks: vec![EditAttributesBlock::encode(component, &[edit], &slots).unwrap()],
    })
}

/// A client's edit moving a box's Placeable `component` to `x`.
pub fn move_to(entity: EntityId, component: ComponentId, x: f32) -> Message {
    attribute_edit(entity, component, PLACEABLE, 0, transform(x))
}

/// A client's edit setting a Name `component`'s attribute `index` (0: the
/// name, 1: the description) to `text`.
pub fn name_edit(entity: EntityId, component: ComponentId, index: u8, text: &str) -> Message {
    attribute_edit(
        entity,
        component,
        NAME,
        index,
        AttributeValue::String(text.to_owned()),
    )
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
