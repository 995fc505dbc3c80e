//! Entity ids inside values, renumbered on every hop (docs/federation.md
//! §3): an EntityReference's scene id becomes the OBJECT-ID this node
//! exports it under on a link, and an OBJECT-ID the peer sent becomes the
//! scene id of the entity presenting it here.

use crate::federation::routing::link::Link;
use crate::federation::routing::tracked::TrackedEntities;
use crate::less::ids::ObjectId;
use crate::less::value::Value;
use crate::tundra::EntityId;

/// The value an EntityReference's text takes on `link`.
pub(in crate::federation) fn reference_out(link: &Link, text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    match text.trim().parse::<u32>() {
        Ok(id) => link
            .exported
            .object_of(EntityId(id))
            .map_or(Value::Null, |object| Value::ObjectId(object.get())),
        // A name travels as it is.
        Err(_) => Value::String(text.to_owned()),
    }
}

/// The scene id text an OBJECT-ID of `link` stands for ("" when unknown).
pub(in crate::federation) fn reference_in(
    tracked: &TrackedEntities,
    link: &Link,
    value: &Value,
) -> String {
    match value {
        Value::ObjectId(raw) => link
            .mirror
            .entity(ObjectId::new(*raw))
            .and_then(|e| tracked.get(&e.global))
            .map_or_else(String::new, |t| t.scene().0.to_string()),
        Value::String(name) => name.clone(),
        _ => String::new(),
    }
}
