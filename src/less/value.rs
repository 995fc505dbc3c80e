//! LESS values and their two encodings (docs/less-wire.md §3): the
//! CONTEXT-DEPENDENT-VARIANT (data only; the type comes from the schema) and
//! the STANDALONE-VARIANT (type description, size in bytes, data).
//!
//! This module owns value data and its bytes. It does not know schemas or
//! messages; callers pass the expected [`ValueType`].

use half::f16;
use tinyvec::TinyVec;
use uuid::Uuid;

use super::codec::{integer_len, write_count, write_integer, write_u64, DecodeError, Reader};
use super::limits::{MAX_BINARY_LEN, MAX_ELEMENTS, MAX_NESTING, MAX_STRING_BYTES};
use super::value_type::ValueType;

/// The floats of a [`Value::Floats`]: inline up to a Tundra Transform's
/// nine, so a value is copied (for a re-send, into a mirror) without a
/// loop or an allocation.
pub type FloatVector = TinyVec<[f32; 9]>;

/// A LESS value.
///
/// An `ObjectId` inside a value names an object in the id space of the objects
/// the *sending* peer presents (decision, docs/less-wire.md "Object ids inside
/// values"); it is kept as the raw 64 bits because a value has no direction of
/// its own, and the forwarding layer renumbers it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    ObjectId(u64),
    Integer(i64),
    String(String),
    Float16(f16),
    Float32(f32),
    Float64(f64),
    /// Element type (needed to describe an empty list) and elements.
    List(ValueType, Vec<Value>),
    /// Element type and elements; the count is the number of elements.
    /// Never FLOAT32 elements: those are [`Value::Floats`].
    Vector(ValueType, Vec<Value>),
    /// A VECTOR of FLOAT32, the one form such a vector takes (a transform,
    /// a position, a colour): the floats inline, not a `Value` each, since
    /// these are the values that move every tick.
    Floats(FloatVector),
    /// A value that carries its own type on the wire.
    Standalone(Box<Value>),
    VariableBinary(Vec<u8>),
    FixedBinary(Vec<u8>),
    Uuid(Uuid),
}

impl Value {
    /// A VECTOR of FLOAT32.
    pub fn floats(values: &[f32]) -> Value {
        Value::Floats(FloatVector::from(values))
    }

    /// A VECTOR of `element`, in its one form: FLOAT32 elements become
    /// [`Value::Floats`] (so values compare equal however they were made).
    pub fn vector(element: ValueType, items: Vec<Value>) -> Value {
        if element == ValueType::Float32 {
            let floats: Option<FloatVector> = items
                .iter()
                .map(|item| match item {
                    Value::Float32(v) => Some(*v),
                    _ => None,
                })
                .collect();
            if let Some(floats) = floats {
                return Value::Floats(floats);
            }
        }
        Value::Vector(element, items)
    }

    /// The type that describes this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Null => ValueType::Null,
            Value::ObjectId(_) => ValueType::ObjectId,
            Value::Integer(_) => ValueType::Integer,
            Value::String(_) => ValueType::String,
            Value::Float16(_) => ValueType::Float16,
            Value::Float32(_) => ValueType::Float32,
            Value::Float64(_) => ValueType::Float64,
            Value::List(element, _) => ValueType::List(Box::new(element.clone())),
            Value::Vector(element, items) => {
                ValueType::Vector(items.len(), Box::new(element.clone()))
            }
            Value::Floats(floats) => ValueType::Vector(floats.len(), Box::new(ValueType::Float32)),
            Value::Standalone(_) => ValueType::StandaloneVariant,
            Value::VariableBinary(_) => ValueType::VariableBinary,
            Value::FixedBinary(bytes) => ValueType::FixedBinary(bytes.len()),
            Value::Uuid(_) => ValueType::Uuid,
        }
    }

    /// True if this value can be encoded as `expected` and read back equal:
    /// the types match, strings have no NUL and fit the limit, collections
    /// respect the limits and nesting depth.
    pub fn conforms_to(&self, expected: &ValueType) -> bool {
        self.conforms_at(expected, 0)
    }

    fn conforms_at(&self, expected: &ValueType, depth: usize) -> bool {
        if depth >= MAX_NESTING || !expected.is_valid() {
            return false;
        }
        match (self, expected) {
            _ if self.is_scalar_of(expected) => true,
            (Value::String(text), ValueType::String) => {
                text.len() <= MAX_STRING_BYTES && !text.as_bytes().contains(&0)
            }
            (Value::VariableBinary(bytes), ValueType::VariableBinary) => {
                bytes.len() <= MAX_BINARY_LEN
            }
            (Value::FixedBinary(bytes), ValueType::FixedBinary(len)) => bytes.len() == *len,
            (Value::List(element, items), ValueType::List(expected_element)) => {
                element == expected_element.as_ref()
                    && items.len() <= MAX_ELEMENTS
                    && items
                        .iter()
                        .all(|item| item.conforms_at(element, depth + 1))
            }
            (Value::Floats(floats), ValueType::Vector(count, element)) => {
                // Elements sit one level deeper, as any vector's do.
                floats.len() == *count
                    && **element == ValueType::Float32
                    && (floats.is_empty() || depth + 1 < MAX_NESTING)
            }
            (Value::Vector(element, items), ValueType::Vector(count, expected_element)) => {
                *element != ValueType::Float32
                    && element == expected_element.as_ref()
                    && items.len() == *count
                    && items.iter().all(|item| {
                        // Fixed-size scalars (a transform's nine floats)
                        // conform by their variant alone.
                        (depth + 1 < MAX_NESTING && item.is_scalar_of(element))
                            || item.conforms_at(element, depth + 1)
                    })
            }
            (Value::Standalone(inner), ValueType::StandaloneVariant) => {
                inner.conforms_at(&inner.value_type(), depth + 1)
                    && inner.value_type().depth() + depth < MAX_NESTING
            }
            _ => false,
        }
    }

    /// A fixed-size scalar of exactly this type.
    fn is_scalar_of(&self, expected: &ValueType) -> bool {
        matches!(
            (self, expected),
            (Value::Null, ValueType::Null)
                | (Value::ObjectId(_), ValueType::ObjectId)
                | (Value::Integer(_), ValueType::Integer)
                | (Value::Float16(_), ValueType::Float16)
                | (Value::Float32(_), ValueType::Float32)
                | (Value::Float64(_), ValueType::Float64)
                | (Value::Uuid(_), ValueType::Uuid)
        )
    }

    /// Appends the CONTEXT-DEPENDENT-VARIANT encoding: data only.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => {}
            Value::ObjectId(id) => write_u64(out, *id),
            Value::Integer(value) => write_integer(out, *value),
            Value::String(text) => encode_string(out, text),
            Value::Float16(value) => out.extend_from_slice(&value.to_le_bytes()),
            Value::Float32(value) => out.extend_from_slice(&value.to_le_bytes()),
            Value::Float64(value) => out.extend_from_slice(&value.to_le_bytes()),
            Value::List(_, items) => {
                write_count(out, items.len());
                items.iter().for_each(|item| item.encode(out));
            }
            Value::Vector(_, items) => items.iter().for_each(|item| item.encode(out)),
            Value::Floats(floats) => floats
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
            Value::Standalone(inner) => inner.encode_standalone(out),
            Value::VariableBinary(bytes) => {
                write_count(out, bytes.len());
                out.extend_from_slice(bytes);
            }
            Value::FixedBinary(bytes) => out.extend_from_slice(bytes),
            Value::Uuid(uuid) => out.extend_from_slice(uuid.as_bytes()),
        }
    }

    /// Appends the STANDALONE-VARIANT encoding: type description, size of the
    /// data in bytes as INTEGER, data.
    pub fn encode_standalone(&self, out: &mut Vec<u8>) {
        self.value_type().encode(out);
        write_count(out, self.encoded_len());
        self.encode(out);
    }

    /// Reads a CONTEXT-DEPENDENT-VARIANT of type `expected`.
    pub fn decode(reader: &mut Reader<'_>, expected: &ValueType) -> Result<Value, DecodeError> {
        decode_at(reader, expected, 0)
    }

    /// Reads a STANDALONE-VARIANT. The size must match the data exactly.
    pub fn decode_standalone(reader: &mut Reader<'_>) -> Result<Value, DecodeError> {
        decode_standalone_at(reader, 0)
    }

    /// Length of the CONTEXT-DEPENDENT-VARIANT encoding.
    /// Counted, not encoded: checks and packet budgets ask it per update.
    pub fn encoded_len(&self) -> usize {
        match self {
            Value::Null => 0,
            Value::ObjectId(id) => integer_len(*id as i64),
            Value::Integer(value) => integer_len(*value),
            Value::String(text) => {
                integer_len(text.len() as i64)
                    + text
                        .bytes()
                        .map(|byte| integer_len(i64::from(byte)))
                        .sum::<usize>()
            }
            Value::Float16(_) => 2,
            Value::Float32(_) => 4,
            Value::Float64(_) => 8,
            Value::List(_, items) => {
                integer_len(items.len() as i64)
                    + items.iter().map(Value::encoded_len).sum::<usize>()
            }
            Value::Vector(_, items) => items.iter().map(Value::encoded_len).sum(),
            Value::Floats(floats) => 4 * floats.len(),
            Value::Standalone(inner) => {
                let mut description = Vec::new();
                inner.value_type().encode(&mut description);
                let data = inner.encoded_len();
                description.len() + integer_len(data as i64) + data
            }
            Value::VariableBinary(bytes) => integer_len(bytes.len() as i64) + bytes.len(),
            Value::FixedBinary(bytes) => bytes.len(),
            Value::Uuid(_) => 16,
        }
    }
}

fn decode_standalone_at(reader: &mut Reader<'_>, depth: usize) -> Result<Value, DecodeError> {
    if depth >= MAX_NESTING {
        return Err(DecodeError::TooDeep);
    }
    let value_type = ValueType::decode(reader)?;
    if value_type.depth() + depth > MAX_NESTING {
        return Err(DecodeError::TooDeep);
    }
    let size = reader.read_count("standalone size", reader.remaining())?;
    reader.read_nested(size, |data| decode_at(data, &value_type, depth + 1))
}

fn decode_at(
    reader: &mut Reader<'_>,
    expected: &ValueType,
    depth: usize,
) -> Result<Value, DecodeError> {
    if depth >= MAX_NESTING {
        return Err(DecodeError::TooDeep);
    }
    // Only leaves are charged: a LIST or VECTOR with elements costs nothing
    // itself, and (element types never encode to zero bytes) every leaf
    // consumes input or sits behind an id or header byte, so valid input
    // never exhausts the budget.
    let container = matches!(expected, ValueType::List(_))
        || matches!(expected, ValueType::Vector(count, _) if *count > 0);
    if !container {
        reader.charge_value()?;
    }
    Ok(match expected {
        ValueType::Null => Value::Null,
        ValueType::ObjectId => Value::ObjectId(reader.read_u64()?),
        ValueType::Integer => Value::Integer(reader.read_integer()?),
        ValueType::String => Value::String(decode_string(reader)?),
        ValueType::Float16 => Value::Float16(f16::from_le_bytes(reader.read_array()?)),
        ValueType::Float32 => Value::Float32(f32::from_le_bytes(reader.read_array()?)),
        ValueType::Float64 => Value::Float64(f64::from_le_bytes(reader.read_array()?)),
        ValueType::List(element) => {
            let count = reader.read_count("list count", MAX_ELEMENTS)?;
            if count == 0 {
                reader.charge_value()?;
            }
            let mut items = Vec::with_capacity(count.min(reader.remaining()));
            for _ in 0..count {
                items.push(decode_at(reader, element, depth + 1)?);
            }
            Value::List(element.as_ref().clone(), items)
        }
        ValueType::Vector(count, element) if **element == ValueType::Float32 => {
            if *count > 0 && depth + 1 >= MAX_NESTING {
                return Err(DecodeError::TooDeep);
            }
            let mut floats = FloatVector::with_capacity((*count).min(reader.remaining()));
            for _ in 0..*count {
                // Charged per element, as any vector's leaves are.
                reader.charge_value()?;
                floats.push(f32::from_le_bytes(reader.read_array()?));
            }
            Value::Floats(floats)
        }
        ValueType::Vector(count, element) => {
            let mut items = Vec::with_capacity((*count).min(reader.remaining()));
            for _ in 0..*count {
                items.push(decode_at(reader, element, depth + 1)?);
            }
            Value::Vector(element.as_ref().clone(), items)
        }
        ValueType::StandaloneVariant => {
            Value::Standalone(Box::new(decode_standalone_at(reader, depth + 1)?))
        }
        ValueType::VariableBinary => {
            let len = reader.read_count("binary length", MAX_BINARY_LEN)?;
            Value::VariableBinary(reader.read_bytes(len)?.to_vec())
        }
        ValueType::FixedBinary(len) => Value::FixedBinary(reader.read_bytes(*len)?.to_vec()),
        ValueType::Uuid => Value::Uuid(Uuid::from_bytes(reader.read_array()?)),
    })
}

/// Appends a STRING: the UTF-8 byte count as INTEGER, then each byte as the
/// INTEGER of its unsigned value 1..=255 (docs/less-wire.md §3: bytes >= 128 take two
/// bytes). The caller guarantees no NUL (see [`Value::conforms_to`]); a NUL
/// would end the draft's `while (*str)` loop early, so it is never emitted.
pub fn encode_string(out: &mut Vec<u8>, text: &str) {
    write_count(out, text.len());
    for &byte in text.as_bytes() {
        write_integer(out, i64::from(byte));
    }
}

/// Reads a STRING. Each byte may be the unsigned value 1..=255 or the C
/// signed-char value -128..=-1 (meaning value + 256); 0 and anything else is
/// an error, as is invalid UTF-8 or a length above [`MAX_STRING_BYTES`].
pub fn decode_string(reader: &mut Reader<'_>) -> Result<String, DecodeError> {
    // Every encoded byte takes at least one input byte, so the remaining
    // input bounds the count before anything is allocated.
    let limit = MAX_STRING_BYTES.min(reader.remaining());
    let len = reader.read_count("string length", limit)?;
    let mut bytes = Vec::with_capacity(len);
    for _ in 0..len {
        let value = reader.read_integer()?;
        let byte = match value {
            1..=255 => value as u8,
            -128..=-1 => (value + 256) as u8,
            other => return Err(DecodeError::InvalidStringByte(other)),
        };
        bytes.push(byte);
    }
    String::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_hex(value: &Value) -> String {
        let mut out = Vec::new();
        value.encode(&mut out);
        hex::encode(out)
    }

    fn standalone_hex(value: &Value) -> String {
        let mut out = Vec::new();
        value.encode_standalone(&mut out);
        hex::encode(out)
    }

    fn round_trip(value: &Value) {
        let value_type = value.value_type();
        assert!(value.conforms_to(&value_type), "{value:?}");
        let mut out = Vec::new();
        value.encode(&mut out);
        assert_eq!(value.encoded_len(), out.len(), "{value:?}");
        let mut reader = Reader::new(&out);
        assert_eq!(&Value::decode(&mut reader, &value_type).unwrap(), value);
        assert!(reader.is_empty());
        let mut out = Vec::new();
        value.encode_standalone(&mut out);
        let standalone = Value::Standalone(Box::new(value.clone()));
        assert_eq!(standalone.encoded_len(), out.len(), "{value:?}");
        let mut reader = Reader::new(&out);
        assert_eq!(&Value::decode_standalone(&mut reader).unwrap(), value);
        assert!(reader.is_empty());
    }

    fn uuid_fixture() -> Uuid {
        Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap()
    }

    /// (value, data encoding, standalone encoding), by hand from docs/less-wire.md §3.
    fn fixtures() -> Vec<(Value, &'static str, &'static str)> {
        vec![
            (Value::Null, "", "0000"),
            (Value::ObjectId(300), "ac04", "0102ac04"),
            (Value::ObjectId(u64::MAX), "c000", "0102c000"),
            (Value::Integer(-1), "c000", "0202c000"),
            (Value::String("Hi".into()), "024869", "0303024869"),
            // "é" is C3 A9: 195 -> 83 03, 169 -> a9 02.
            (Value::String("é".into()), "028303a902", "0305028303a902"),
            (Value::Float16(f16::from_f32(1.0)), "003c", "0402003c"),
            (Value::Float32(1.0), "0000803f", "05040000803f"),
            (
                Value::Float64(-2.0),
                "00000000000000c0",
                "060800000000000000c0",
            ),
            (
                Value::List(
                    ValueType::Integer,
                    vec![Value::Integer(1), Value::Integer(128)],
                ),
                "02018002",
                "07020402018002",
            ),
            (Value::List(ValueType::String, vec![]), "00", "07030100"),
            (
                Value::floats(&[1.0, 0.0, -1.0]),
                "0000803f00000000000080bf",
                "0803050c0000803f00000000000080bf",
            ),
            (
                Value::Standalone(Box::new(Value::Integer(5))),
                "020105",
                "0903020105",
            ),
            (
                Value::VariableBinary(vec![0xde, 0xad]),
                "02dead",
                "0a0302dead",
            ),
            (Value::FixedBinary(vec![1, 2, 3]), "010203", "0b0303010203"),
            (
                Value::Uuid(uuid_fixture()),
                "00112233445566778899aabbccddeeff",
                "0c1000112233445566778899aabbccddeeff",
            ),
        ]
    }

    #[test]
    fn encodings_match_fixtures() {
        for (value, data, standalone) in fixtures() {
            assert_eq!(data_hex(&value), data, "data of {value:?}");
            assert_eq!(
                standalone_hex(&value),
                standalone,
                "standalone of {value:?}"
            );
            round_trip(&value);
        }
    }

    fn decode_string_hex(text: &str) -> Result<String, DecodeError> {
        let bytes = hex::decode(text).unwrap();
        let mut reader = Reader::new(&bytes);
        let decoded = decode_string(&mut reader)?;
        reader.expect_end()?;
        Ok(decoded)
    }

    #[test]
    fn strings_accept_signed_char_bytes_and_reject_nul_and_bad_utf8() {
        // C3 as signed char is -61 -> fc 00; A9 is -87 -> d6 01.
        assert_eq!(decode_string_hex("02fc00d601"), Ok("é".to_string()));
        assert_eq!(
            decode_string_hex("0100"),
            Err(DecodeError::InvalidStringByte(0))
        );
        assert_eq!(
            decode_string_hex("018004"),
            Err(DecodeError::InvalidStringByte(256))
        );
        assert_eq!(
            decode_string_hex("01c002"),
            Err(DecodeError::InvalidStringByte(-129))
        );
        assert_eq!(decode_string_hex("018002"), Err(DecodeError::InvalidUtf8)); // lone 0x80
                                                                                // A count larger than the remaining input is refused before allocating.
        assert!(matches!(
            decode_string_hex("bfff0141"),
            Err(DecodeError::LimitExceeded { .. })
        ));
        assert!(!Value::String("a\0b".into()).conforms_to(&ValueType::String));
    }

    #[test]
    fn standalone_size_must_match_exactly() {
        let mut reader = Reader::new(&[0x02, 0x02, 0x01, 0x00]);
        assert_eq!(
            Value::decode_standalone(&mut reader),
            Err(DecodeError::TrailingBytes(1))
        );
        let mut reader = Reader::new(&[0x02, 0x05, 0x05]);
        assert!(matches!(
            Value::decode_standalone(&mut reader),
            Err(DecodeError::LimitExceeded { .. })
        ));
        let mut reader = Reader::new(&[0x02, 0x00]);
        assert_eq!(
            Value::decode_standalone(&mut reader),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn zero_size_values_cannot_amplify() {
        // A list of empty lists: each inner list costs one byte and one value.
        let nested = ValueType::List(Box::new(ValueType::List(Box::new(ValueType::Integer))));
        let mut bytes = vec![0xbf, 0xff, 0x03]; // 32767 inner lists
        bytes.extend(std::iter::repeat(0x00).take(100));
        assert_eq!(
            Value::decode(&mut Reader::new(&bytes), &nested),
            Err(DecodeError::Truncated)
        );
        // NULL standalone values cost two bytes each, so a frame of them fits its budget.
        let many_nulls = vec![0x00; 20_000];
        let mut reader = Reader::new(&many_nulls);
        for _ in 0..10_000 {
            assert_eq!(Value::decode_standalone(&mut reader), Ok(Value::Null));
        }
        // A type with zero-size elements never conforms.
        let nulls = ValueType::List(Box::new(ValueType::Null));
        assert!(!Value::List(ValueType::Null, vec![Value::Null]).conforms_to(&nulls));
    }

    #[test]
    fn conformance_checks_types_and_shapes() {
        let vec2 = ValueType::Vector(2, Box::new(ValueType::Integer));
        assert!(!Value::Vector(ValueType::Integer, vec![Value::Integer(1)]).conforms_to(&vec2));
        assert!(!Value::Integer(1).conforms_to(&ValueType::ObjectId));
        assert!(!Value::FixedBinary(vec![1]).conforms_to(&ValueType::FixedBinary(2)));
        let mixed = Value::List(ValueType::Integer, vec![Value::Float32(1.0)]);
        assert!(!mixed.conforms_to(&mixed.value_type()));
    }
}
