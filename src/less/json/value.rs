//! JSON form of LESS values for the inspector: each [`Value`] maps to a JSON
//! value given its [`ValueType`], and back without loss.
//!
//! | type | JSON |
//! |---|---|
//! | null | `null` |
//! | object-id | number (the id's 64 bits, unsigned) |
//! | integer | number |
//! | string | string |
//! | float16/32/64 | number, the shortest decimal that reads back to the same bits; non-finite values as a `"0x…"` bit string |
//! | list(T), vector(N, T) | array |
//! | standalone-variant | `{"type": "…", "value": …}` (a [`TypedValue`]) |
//! | variable-binary, fixed-binary(N) | lowercase hex string |
//! | uuid | hyphenated string |
//!
//! This module owns the mapping only; the bytes are `value`'s.

use half::f16;
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value as Json};
use uuid::Uuid;

use crate::less::limits::{MAX_ELEMENTS, MAX_NESTING};
use crate::less::value::Value;
use crate::less::value_type::ValueType;

/// A value with its type written out, as the inspector shows every value:
/// `{"type": "vector(3, float32)", "value": [1, 0, -1]}`. The type uses the
/// schema text form (docs/less-wire.md §14).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypedValue {
    #[serde(rename = "type")]
    pub value_type: String,
    pub value: Json,
}

impl TypedValue {
    /// The JSON form of `value`, typed as `value_type`.
    pub fn new(value: &Value, value_type: &ValueType) -> TypedValue {
        TypedValue {
            value_type: value_type.to_string(),
            value: to_json(value),
        }
    }

    /// The JSON form of a value that carries its own type (a standalone variant).
    pub fn of(value: &Value) -> TypedValue {
        TypedValue::new(value, &value.value_type())
    }

    /// The value and its type, checked to encode and read back equal.
    pub fn to_value(&self) -> Result<(Value, ValueType), String> {
        let value_type = ValueType::parse(&self.value_type)?;
        let value = from_json(&self.value, &value_type, 0)?;
        if !value.conforms_to(&value_type) {
            return Err(format!(
                "value does not fit type {} (limits, NUL in a string, or nesting)",
                self.value_type
            ));
        }
        Ok((value, value_type))
    }
}

/// The JSON form of a value (its type is implied by the context).
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::ObjectId(id) => Json::from(*id),
        Value::Integer(value) => Json::from(*value),
        Value::String(text) => Json::from(text.as_str()),
        Value::Float16(value) => float_json(
            value.is_finite(),
            value.to_f32().to_string(),
            format!("{:#06x}", value.to_bits()),
        ),
        Value::Float32(value) => float_json(
            value.is_finite(),
            value.to_string(),
            format!("{:#010x}", value.to_bits()),
        ),
        Value::Float64(value) => float_json(
            value.is_finite(),
            value.to_string(),
            format!("{:#018x}", value.to_bits()),
        ),
        Value::List(_, items) | Value::Vector(_, items) => {
            Json::Array(items.iter().map(to_json).collect())
        }
        Value::Floats(floats) => Json::Array(
            floats
                .iter()
                .map(|v| to_json(&Value::Float32(*v)))
                .collect(),
        ),
        Value::Standalone(inner) => {
            serde_json::to_value(TypedValue::of(inner)).unwrap_or(Json::Null)
        }
        Value::VariableBinary(bytes) | Value::FixedBinary(bytes) => Json::from(hex::encode(bytes)),
        Value::Uuid(uuid) => Json::from(uuid.hyphenated().to_string()),
    }
}

/// A finite float as the JSON number of its shortest round-trip decimal
/// (`shortest`, from the float's own `Display`), otherwise its bit string.
fn float_json(finite: bool, shortest: String, bits: String) -> Json {
    // Display of a finite float is a plain decimal that f64 parses.
    match shortest.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(number) if finite => Json::Number(number),
        _ => Json::from(bits),
    }
}

/// Reads the JSON form of a value of type `expected`.
pub fn from_json(json: &Json, expected: &ValueType, depth: usize) -> Result<Value, String> {
    if depth >= MAX_NESTING {
        return Err("value nests too deeply".into());
    }
    let mismatch = || format!("expected a {expected} value, found {json}");
    Ok(match expected {
        ValueType::Null => match json {
            Json::Null => Value::Null,
            _ => return Err(mismatch()),
        },
        ValueType::ObjectId => Value::ObjectId(json.as_u64().ok_or_else(mismatch)?),
        ValueType::Integer => Value::Integer(json.as_i64().ok_or_else(mismatch)?),
        ValueType::String => Value::String(json.as_str().ok_or_else(mismatch)?.to_owned()),
        ValueType::Float16 => Value::Float16(match json {
            Json::String(text) => f16::from_bits(bits(text, 4)? as u16),
            _ => f16::from_f32(json.as_f64().ok_or_else(mismatch)? as f32),
        }),
        ValueType::Float32 => Value::Float32(match json {
            Json::String(text) => f32::from_bits(bits(text, 8)? as u32),
            _ => json.as_f64().ok_or_else(mismatch)? as f32,
        }),
        ValueType::Float64 => Value::Float64(match json {
            Json::String(text) => f64::from_bits(bits(text, 16)?),
            _ => json.as_f64().ok_or_else(mismatch)?,
        }),
        ValueType::List(element) | ValueType::Vector(_, element) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            if items.len() > MAX_ELEMENTS {
                return Err(format!("more than {MAX_ELEMENTS} elements"));
            }
            let values = items
                .iter()
                .map(|item| from_json(item, element, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            match expected {
                ValueType::Vector(count, _) if *count != values.len() => {
                    return Err(format!("{expected} needs {count} elements"))
                }
                ValueType::Vector(..) => Value::vector(element.as_ref().clone(), values),
                _ => Value::List(element.as_ref().clone(), values),
            }
        }
        ValueType::StandaloneVariant => {
            let typed: TypedValue = serde_json::from_value(json.clone())
                .map_err(|e| format!("standalone-variant: {e}"))?;
            let value_type = ValueType::parse(&typed.value_type)?;
            Value::Standalone(Box::new(from_json(&typed.value, &value_type, depth + 1)?))
        }
        ValueType::VariableBinary | ValueType::FixedBinary(_) => {
            let bytes = hex::decode(json.as_str().ok_or_else(mismatch)?)
                .map_err(|e| format!("{expected}: {e}"))?;
            match expected {
                ValueType::VariableBinary => Value::VariableBinary(bytes),
                _ => Value::FixedBinary(bytes),
            }
        }
        ValueType::Uuid => Value::Uuid(
            Uuid::parse_str(json.as_str().ok_or_else(mismatch)?).map_err(|e| e.to_string())?,
        ),
    })
}

/// Parses a `"0x…"` bit string of exactly `digits` hex digits.
fn bits(text: &str, digits: usize) -> Result<u64, String> {
    let bad = || format!("float bit pattern {text:?} must be 0x and {digits} hex digits");
    let hex_digits = text.strip_prefix("0x").ok_or_else(bad)?;
    if hex_digits.len() != digits {
        return Err(bad());
    }
    u64::from_str_radix(hex_digits, 16).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(value: Value) -> Json {
        let typed = TypedValue::of(&value);
        let text = serde_json::to_string(&typed).unwrap();
        let back: TypedValue = serde_json::from_str(&text).unwrap();
        let (decoded, _) = back.to_value().unwrap();
        // Compare encodings: NaN payloads are not equal under PartialEq.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        value.encode(&mut a);
        decoded.encode(&mut b);
        assert_eq!(hex::encode(a), hex::encode(b), "{text}");
        typed.value
    }

    #[test]
    fn every_type_survives_json() {
        assert_eq!(round_trip(Value::Null), Json::Null);
        assert_eq!(round_trip(Value::ObjectId(u64::MAX)), Json::from(u64::MAX));
        assert_eq!(round_trip(Value::Integer(i64::MIN)), Json::from(i64::MIN));
        assert_eq!(round_trip(Value::String("é\"x".into())), Json::from("é\"x"));
        assert_eq!(round_trip(Value::Float32(0.1)).to_string(), "0.1");
        assert_eq!(
            round_trip(Value::Float32(f32::from_bits(0x7fc0_0001))),
            Json::from("0x7fc00001")
        );
        round_trip(Value::Float16(f16::from_f32(0.333)));
        round_trip(Value::Float16(f16::from_bits(0x7e01)));
        round_trip(Value::Float64(-0.0));
        round_trip(Value::Float64(f64::NEG_INFINITY));
        let vector = Value::floats(&[1.0, 1.0e-45, -3.4028235e38]);
        assert_eq!(round_trip(vector).to_string(), "[1.0,1e-45,-3.4028235e+38]");
        round_trip(Value::List(ValueType::String, vec![]));
        let standalone = Value::Standalone(Box::new(Value::Integer(5)));
        assert_eq!(
            round_trip(standalone).to_string(),
            r#"{"type":"integer","value":5}"#
        );
        assert_eq!(
            round_trip(Value::FixedBinary(vec![1, 2, 0xff])),
            Json::from("0102ff")
        );
        round_trip(Value::VariableBinary(vec![]));
        let uuid = Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap();
        assert_eq!(
            round_trip(Value::Uuid(uuid)),
            Json::from("00112233-4455-6677-8899-aabbccddeeff")
        );
    }

    #[test]
    fn shortest_f32_decimals_read_back_exactly() {
        // Walk a spread of bit patterns, finite ones included at both ends.
        let mut bits = 1u32;
        for _ in 0..20_000 {
            for sign in [0, 0x8000_0000] {
                let x = f32::from_bits(bits | sign);
                let json = to_json(&Value::Float32(x));
                let back = from_json(&json, &ValueType::Float32, 0).unwrap();
                assert_eq!(back, Value::Float32(x), "{json}");
            }
            bits = bits.wrapping_mul(3).wrapping_add(7919) % 0x7f80_0000;
        }
    }

    #[test]
    fn mismatches_are_errors() {
        let typed = |t: &str, v: Json| TypedValue {
            value_type: t.into(),
            value: v,
        };
        assert!(typed("integer", Json::from("5")).to_value().is_err());
        assert!(typed("vector(2, integer)", Json::from(vec![1]))
            .to_value()
            .is_err());
        assert!(typed("string", Json::from("a\0b")).to_value().is_err());
        assert!(typed("fixed-binary(2)", Json::from("010203"))
            .to_value()
            .is_err());
        assert!(typed("float32", Json::from("0x7fc0")).to_value().is_err());
        assert!(typed("nosuch", Json::Null).to_value().is_err());
        assert!(typed("object-id", Json::from(-1)).to_value().is_err());
    }
}
