//! Tundra attribute values to LESS values and back (docs/federation.md §2.4).
//!
//! EntityReference values carry ids, so they are renumbered on every hop:
//! the caller passes the translation in both directions.

use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::tundra::values::{Color, Float2, Float3, Float4, Point, Quat, Transform};
use crate::tundra::{AttributeType, AttributeValue};

fn floats(values: &[f32]) -> Value {
    Value::floats(values)
}

fn strings(values: &[String]) -> Value {
    Value::List(
        ValueType::String,
        values.iter().cloned().map(Value::String).collect(),
    )
}

/// The LESS value of an attribute. `reference` turns an EntityReference's
/// text into the value for this link (OBJECT-ID, STRING or NULL).
pub fn to_less(value: &AttributeValue, reference: &dyn Fn(&str) -> Value) -> Value {
    match value {
        AttributeValue::String(s)
        | AttributeValue::AssetReference(s)
        | AttributeValue::Variant(s) => Value::String(s.clone()),
        AttributeValue::Int(v) => Value::Integer(i64::from(*v)),
        AttributeValue::UInt(v) => Value::Integer(i64::from(*v)),
        AttributeValue::Bool(v) => Value::Integer(i64::from(*v)),
        AttributeValue::Real(v) => Value::Float32(*v),
        AttributeValue::Float2(v) => floats(&[v.x, v.y]),
        AttributeValue::Float3(v) => floats(&[v.x, v.y, v.z]),
        AttributeValue::Float4(v) => floats(&[v.x, v.y, v.z, v.w]),
        AttributeValue::Color(c) => floats(&[c.r, c.g, c.b, c.a]),
        AttributeValue::Quat(q) => floats(&[q.x, q.y, q.z, q.w]),
        AttributeValue::Transform(t) => floats(&[
            t.pos.x, t.pos.y, t.pos.z, t.rot.x, t.rot.y, t.rot.z, t.scale.x, t.scale.y, t.scale.z,
        ]),
        AttributeValue::Point(p) => Value::Vector(
            ValueType::Integer,
            vec![
                Value::Integer(i64::from(p.x)),
                Value::Integer(i64::from(p.y)),
            ],
        ),
        AttributeValue::AssetReferenceList(list) | AttributeValue::VariantList(list) => {
            strings(list)
        }
        AttributeValue::EntityReference(text) => Value::Standalone(Box::new(reference(text))),
    }
}

fn float_vector<const N: usize>(value: &Value) -> Option<[f32; N]> {
    let Value::Floats(floats) = value else {
        return None;
    };
    floats.as_slice().try_into().ok()
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    let Value::List(_, items) = value else {
        return None;
    };
    items
        .iter()
        .map(|item| match item {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// The attribute value of type `ty` a LESS value stands for; `None` when it
/// does not fit the type (a protocol violation by the sender). `reference`
/// turns the variant of an EntityReference into Tundra text.
pub fn from_less(
    ty: AttributeType,
    value: &Value,
    reference: &dyn Fn(&Value) -> String,
) -> Option<AttributeValue> {
    Some(match ty {
        AttributeType::String => AttributeValue::String(text(value)?),
        AttributeType::AssetReference => AttributeValue::AssetReference(text(value)?),
        AttributeType::Variant => AttributeValue::Variant(text(value)?),
        AttributeType::Int => AttributeValue::Int(i32::try_from(integer(value)?).ok()?),
        AttributeType::UInt => AttributeValue::UInt(u32::try_from(integer(value)?).ok()?),
        AttributeType::Bool => AttributeValue::Bool(integer(value)? != 0),
        AttributeType::Real => match value {
            Value::Float32(v) => AttributeValue::Real(*v),
            _ => return None,
        },
        AttributeType::Float2 => {
            let [x, y] = float_vector(value)?;
            AttributeValue::Float2(Float2 { x, y })
        }
        AttributeType::Float3 => {
            let [x, y, z] = float_vector(value)?;
            AttributeValue::Float3(Float3 { x, y, z })
        }
        AttributeType::Float4 => {
            let [x, y, z, w] = float_vector(value)?;
            AttributeValue::Float4(Float4 { x, y, z, w })
        }
        AttributeType::Color => {
            let [r, g, b, a] = float_vector(value)?;
            AttributeValue::Color(Color { r, g, b, a })
        }
        AttributeType::Quat => {
            let [x, y, z, w] = float_vector(value)?;
            AttributeValue::Quat(Quat { x, y, z, w })
        }
        AttributeType::Transform => {
            let [px, py, pz, rx, ry, rz, sx, sy, sz] = float_vector(value)?;
            AttributeValue::Transform(Transform {
                pos: Float3 {
                    x: px,
                    y: py,
                    z: pz,
                },
                rot: Float3 {
                    x: rx,
                    y: ry,
                    z: rz,
                },
                scale: Float3 {
                    x: sx,
                    y: sy,
                    z: sz,
                },
            })
        }
        AttributeType::Point => {
            let Value::Vector(_, items) = value else {
                return None;
            };
            match items.as_slice() {
                [Value::Integer(x), Value::Integer(y)] => AttributeValue::Point(Point {
                    x: i32::try_from(*x).ok()?,
                    y: i32::try_from(*y).ok()?,
                }),
                _ => return None,
            }
        }
        AttributeType::AssetReferenceList => {
            AttributeValue::AssetReferenceList(string_list(value)?)
        }
        AttributeType::VariantList => AttributeValue::VariantList(string_list(value)?),
        AttributeType::EntityReference => match value {
            Value::Standalone(inner) => AttributeValue::EntityReference(reference(inner)),
            _ => return None,
        },
    })
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Integer(v) => Some(*v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::mapping::attribute_value_type;

    #[test]
    fn every_type_round_trips_and_conforms() {
        for ty in AttributeType::ALL {
            let value = match ty {
                AttributeType::EntityReference => AttributeValue::EntityReference("door".into()),
                AttributeType::Transform => AttributeValue::Transform(Transform {
                    pos: Float3::new(1.0, -2.5, 3.0),
                    rot: Float3::new(0.0, 90.0, 0.0),
                    scale: Float3::new(1.0, 1.0, 2.0),
                }),
                AttributeType::Int => AttributeValue::Int(-7),
                AttributeType::UInt => AttributeValue::UInt(u32::MAX),
                AttributeType::Bool => AttributeValue::Bool(true),
                AttributeType::String => AttributeValue::String("héllo".into()),
                _ => AttributeValue::default_for(ty),
            };
            let less = to_less(&value, &|text: &str| Value::String(text.to_owned()));
            assert!(
                less.conforms_to(&attribute_value_type(ty)),
                "{ty:?}: {less:?}"
            );
            let back = from_less(ty, &less, &|v: &Value| match v {
                Value::String(s) => s.clone(),
                _ => String::new(),
            });
            assert_eq!(back, Some(value), "{ty:?}");
        }
    }

    #[test]
    fn wrong_shapes_are_refused() {
        assert_eq!(
            from_less(AttributeType::Int, &Value::Integer(1 << 40), &|_| {
                String::new()
            }),
            None
        );
        assert_eq!(
            from_less(AttributeType::Float3, &floats(&[1.0, 2.0]), &|_| {
                String::new()
            }),
            None
        );
        assert_eq!(
            from_less(AttributeType::Real, &Value::Integer(1), &|_| String::new()),
            None
        );
        assert_eq!(
            from_less(AttributeType::UInt, &Value::Integer(-1), &|_| String::new()),
            None
        );
    }
}
