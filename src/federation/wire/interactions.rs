//! The interactions of the connection schema and its extensions
//! (schemas/less/connection*.toml, docs/less-wire.md §12; docs/federation.md
//! §5 and §7.8): their ids, and their fields written and
//! read. What the federation does with one is its rooms' business.

use uuid::Uuid;

use crate::federation::ids::GlobalId;
use crate::less::ids::{InteractionId, PropertyId};
use crate::less::property_list::FieldValue;
use crate::less::value::Value;
use crate::less::value_type::ValueType;

/// `entity-action`: an EntityAction with the Peers bit, flooded.
pub const ENTITY_ACTION: InteractionId = InteractionId(2);
/// `departure-offer`: property 1 `entities` INTEGER.
pub const DEPARTURE_OFFER: InteractionId = InteractionId(3);
/// `departure-answer`: property 1 `accepted` INTEGER (0 or 1).
pub const DEPARTURE_ANSWER: InteractionId = InteractionId(4);

fn field(id: u64, value: Value) -> FieldValue {
    FieldValue {
        id: PropertyId(id),
        value,
    }
}

fn get(values: &[FieldValue], id: u64) -> Option<&Value> {
    values
        .iter()
        .find(|f| f.id == PropertyId(id))
        .map(|f| &f.value)
}

/// One flooded EntityAction: the entity by its federation identity, the
/// action, and the flood's key (`sender`, `sequence`).
#[derive(Debug, Clone, PartialEq)]
pub struct FloodedAction {
    pub entity: GlobalId,
    pub name: String,
    pub parameters: Vec<String>,
    pub sender: Uuid,
    pub sequence: u64,
}

impl FloodedAction {
    /// The interaction's fields.
    pub fn to_fields(&self) -> Vec<FieldValue> {
        vec![
            field(1, Value::Uuid(self.entity.origin)),
            field(2, Value::Integer(self.entity.serial as i64)),
            field(3, Value::String(self.name.clone())),
            field(
                4,
                Value::List(
                    ValueType::String,
                    self.parameters.iter().cloned().map(Value::String).collect(),
                ),
            ),
            field(5, Value::Uuid(self.sender)),
            field(6, Value::Integer(self.sequence as i64)),
        ]
    }

    /// The action the fields carry; `None` when one is missing or of
    /// another type.
    pub fn from_fields(values: &[FieldValue]) -> Option<FloodedAction> {
        let (
            Some(Value::Uuid(origin)),
            Some(Value::Integer(serial)),
            Some(Value::String(name)),
            Some(Value::List(_, parameters)),
            Some(Value::Uuid(sender)),
            Some(Value::Integer(sequence)),
        ) = (
            get(values, 1),
            get(values, 2),
            get(values, 3),
            get(values, 4),
            get(values, 5),
            get(values, 6),
        )
        else {
            return None;
        };
        Some(FloodedAction {
            entity: GlobalId {
                origin: *origin,
                serial: *serial as u64,
            },
            name: name.clone(),
            parameters: parameters
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            sender: *sender,
            sequence: *sequence as u64,
        })
    }
}

/// The one INTEGER field (id 1) of a departure interaction.
pub fn integer_field(values: &[FieldValue]) -> Option<i64> {
    match get(values, 1)? {
        Value::Integer(value) => Some(*value),
        _ => None,
    }
}

/// A departure interaction's fields: property 1 = `value`.
pub fn integer_fields(value: i64) -> Vec<FieldValue> {
    vec![field(1, Value::Integer(value))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooded_action_reads_back_from_its_fields() {
        let action = FloodedAction {
            entity: GlobalId {
                origin: Uuid::from_u128(3),
                serial: 9,
            },
            name: "Ping".into(),
            parameters: vec!["a".into(), "b".into()],
            sender: Uuid::from_u128(4),
            sequence: 12,
        };
        assert_eq!(
            FloodedAction::from_fields(&action.to_fields()),
            Some(action.clone())
        );
        let mut missing = action.to_fields();
        missing.remove(4);
        assert_eq!(FloodedAction::from_fields(&missing), None);
    }

    #[test]
    fn departure_fields_carry_one_integer() {
        assert_eq!(integer_field(&integer_fields(17)), Some(17));
        assert_eq!(integer_field(&[]), None);
    }
}
