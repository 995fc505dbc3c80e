//! LESS value types: the type codes 0-12 of docs/less-wire.md §3, the type
//! description a STANDALONE-VARIANT carries, and the text form schemas use.
//!
//! Type description (decision, see docs/less-wire.md "Type descriptions"):
//! `type-code` as INTEGER, followed for LIST (7) by the element's type
//! description, for VECTOR (8) by the count as INTEGER and then the element's
//! type description, and for FIXED-BINARY (11) by the byte length as INTEGER.
//! All other codes stand alone. This module owns types, not values.

use std::fmt;

use super::codec::{write_count, write_integer, DecodeError, Reader};
use super::limits::{MAX_BINARY_LEN, MAX_ELEMENTS, MAX_NESTING};

/// The type of a LESS value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// 0: no data.
    Null,
    /// 1: an object id, encoded as INTEGER.
    ObjectId,
    /// 2: a signed 64-bit INTEGER.
    Integer,
    /// 3: UTF-8 text.
    String,
    /// 4: IEEE half precision, little-endian.
    Float16,
    /// 5: IEEE single precision, little-endian.
    Float32,
    /// 6: IEEE double precision, little-endian.
    Float64,
    /// 7: a counted sequence of the element type.
    List(Box<ValueType>),
    /// 8: exactly `count` elements of the element type, no count on the wire.
    Vector(usize, Box<ValueType>),
    /// 9: a self-describing value (type description, size, data).
    StandaloneVariant,
    /// 10: counted bytes.
    VariableBinary,
    /// 11: exactly this many bytes.
    FixedBinary(usize),
    /// 12: 16 bytes, big-endian.
    Uuid,
}

/// The type codes of docs/less-wire.md §3.
pub mod code {
    pub const NULL: i64 = 0;
    pub const OBJECT_ID: i64 = 1;
    pub const INTEGER: i64 = 2;
    pub const STRING: i64 = 3;
    pub const FLOAT16: i64 = 4;
    pub const FLOAT32: i64 = 5;
    pub const FLOAT64: i64 = 6;
    pub const LIST: i64 = 7;
    pub const VECTOR: i64 = 8;
    pub const STANDALONE_VARIANT: i64 = 9;
    pub const VARIABLE_BINARY: i64 = 10;
    pub const FIXED_BINARY: i64 = 11;
    pub const UUID: i64 = 12;
}

impl ValueType {
    /// This type's code.
    pub fn code(&self) -> i64 {
        match self {
            ValueType::Null => code::NULL,
            ValueType::ObjectId => code::OBJECT_ID,
            ValueType::Integer => code::INTEGER,
            ValueType::String => code::STRING,
            ValueType::Float16 => code::FLOAT16,
            ValueType::Float32 => code::FLOAT32,
            ValueType::Float64 => code::FLOAT64,
            ValueType::List(_) => code::LIST,
            ValueType::Vector(..) => code::VECTOR,
            ValueType::StandaloneVariant => code::STANDALONE_VARIANT,
            ValueType::VariableBinary => code::VARIABLE_BINARY,
            ValueType::FixedBinary(_) => code::FIXED_BINARY,
            ValueType::Uuid => code::UUID,
        }
    }

    /// The fewest bytes a value of this type encodes to (CONTEXT-DEPENDENT-VARIANT).
    pub fn min_encoded_len(&self) -> usize {
        match self {
            ValueType::Null => 0,
            ValueType::ObjectId
            | ValueType::Integer
            | ValueType::String
            | ValueType::List(_)
            | ValueType::VariableBinary => 1,
            ValueType::Float16 => 2,
            ValueType::Float32 => 4,
            ValueType::Float64 => 8,
            ValueType::Vector(count, element) => count.saturating_mul(element.min_encoded_len()),
            ValueType::StandaloneVariant => 2,
            ValueType::FixedBinary(len) => *len,
            ValueType::Uuid => 16,
        }
    }

    /// True if this type may be used: no LIST or VECTOR, at any depth, has
    /// elements that can encode to zero bytes (decision: a collection of
    /// NULLs carries nothing but its count, and zero-size elements would let
    /// a few input bytes decode into millions of values).
    pub fn is_valid(&self) -> bool {
        match self {
            ValueType::List(element) | ValueType::Vector(_, element) => {
                element.min_encoded_len() > 0 && element.is_valid()
            }
            _ => true,
        }
    }

    /// Nesting depth: 1 for a scalar, 1 + the element's depth for LIST/VECTOR.
    pub fn depth(&self) -> usize {
        match self {
            ValueType::List(element) | ValueType::Vector(_, element) => 1 + element.depth(),
            _ => 1,
        }
    }

    /// Appends the type description.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_integer(out, self.code());
        match self {
            ValueType::List(element) => element.encode(out),
            ValueType::Vector(count, element) => {
                write_count(out, *count);
                element.encode(out);
            }
            ValueType::FixedBinary(len) => write_count(out, *len),
            _ => {}
        }
    }

    /// Reads a type description, at most [`MAX_NESTING`] levels deep.
    pub fn decode(reader: &mut Reader<'_>) -> Result<ValueType, DecodeError> {
        Self::decode_at(reader, 0)
    }

    fn decode_at(reader: &mut Reader<'_>, depth: usize) -> Result<ValueType, DecodeError> {
        if depth >= MAX_NESTING {
            return Err(DecodeError::TooDeep);
        }
        let type_code = reader.read_integer()?;
        Ok(match type_code {
            code::NULL => ValueType::Null,
            code::OBJECT_ID => ValueType::ObjectId,
            code::INTEGER => ValueType::Integer,
            code::STRING => ValueType::String,
            code::FLOAT16 => ValueType::Float16,
            code::FLOAT32 => ValueType::Float32,
            code::FLOAT64 => ValueType::Float64,
            code::LIST => ValueType::List(Box::new(Self::decode_element(reader, depth)?)),
            code::VECTOR => {
                let count = reader.read_count("vector count", MAX_ELEMENTS)?;
                ValueType::Vector(count, Box::new(Self::decode_element(reader, depth)?))
            }
            code::STANDALONE_VARIANT => ValueType::StandaloneVariant,
            code::VARIABLE_BINARY => ValueType::VariableBinary,
            code::FIXED_BINARY => {
                ValueType::FixedBinary(reader.read_count("fixed-binary length", MAX_BINARY_LEN)?)
            }
            code::UUID => ValueType::Uuid,
            other => return Err(DecodeError::UnknownTypeCode(other)),
        })
    }

    fn decode_element(reader: &mut Reader<'_>, depth: usize) -> Result<ValueType, DecodeError> {
        let element = Self::decode_at(reader, depth + 1)?;
        if element.min_encoded_len() == 0 {
            return Err(DecodeError::Invalid("collection of zero-size elements"));
        }
        Ok(element)
    }

    /// Parses the schema text form: `null`, `object-id`, `integer`, `string`,
    /// `float16`, `float32`, `float64`, `list(T)`, `vector(N, T)`,
    /// `standalone-variant`, `variable-binary`, `fixed-binary(N)`, `uuid`.
    pub fn parse(text: &str) -> Result<ValueType, String> {
        let mut parser = TextParser { text, position: 0 };
        let parsed = parser.parse_type(0)?;
        if !parsed.is_valid() {
            return Err(format!("{text:?}: collection of zero-size elements"));
        }
        parser.skip_spaces();
        if parser.position != text.len() {
            return Err(format!("unexpected text after type in {text:?}"));
        }
        Ok(parsed)
    }
}

struct TextParser<'a> {
    text: &'a str,
    position: usize,
}

impl TextParser<'_> {
    fn skip_spaces(&mut self) {
        while self.text[self.position..].starts_with(' ') {
            self.position += 1;
        }
    }

    fn word(&mut self) -> &str {
        self.skip_spaces();
        let rest = &self.text[self.position..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        self.position += len;
        &rest[..len]
    }

    fn expect(&mut self, symbol: char) -> Result<(), String> {
        self.skip_spaces();
        if self.text[self.position..].starts_with(symbol) {
            self.position += 1;
            Ok(())
        } else {
            Err(format!(
                "expected '{symbol}' at byte {} of {:?}",
                self.position, self.text
            ))
        }
    }

    fn number(&mut self, limit: usize) -> Result<usize, String> {
        let word = self.word().to_string();
        match word.parse::<usize>() {
            Ok(value) if value <= limit => Ok(value),
            _ => Err(format!("bad count {word:?} (at most {limit})")),
        }
    }

    fn parse_type(&mut self, depth: usize) -> Result<ValueType, String> {
        if depth >= MAX_NESTING {
            return Err("type nests too deeply".into());
        }
        let name = self.word().to_string();
        Ok(match name.as_str() {
            "null" => ValueType::Null,
            "object-id" => ValueType::ObjectId,
            "integer" => ValueType::Integer,
            "string" => ValueType::String,
            "float16" => ValueType::Float16,
            "float32" => ValueType::Float32,
            "float64" => ValueType::Float64,
            "standalone-variant" => ValueType::StandaloneVariant,
            "variable-binary" => ValueType::VariableBinary,
            "uuid" => ValueType::Uuid,
            "list" => {
                self.expect('(')?;
                let element = self.parse_type(depth + 1)?;
                self.expect(')')?;
                ValueType::List(Box::new(element))
            }
            "vector" => {
                self.expect('(')?;
                let count = self.number(MAX_ELEMENTS)?;
                self.expect(',')?;
                let element = self.parse_type(depth + 1)?;
                self.expect(')')?;
                ValueType::Vector(count, Box::new(element))
            }
            "fixed-binary" => {
                self.expect('(')?;
                let len = self.number(MAX_BINARY_LEN)?;
                self.expect(')')?;
                ValueType::FixedBinary(len)
            }
            other => return Err(format!("unknown value type {other:?}")),
        })
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Null => f.write_str("null"),
            ValueType::ObjectId => f.write_str("object-id"),
            ValueType::Integer => f.write_str("integer"),
            ValueType::String => f.write_str("string"),
            ValueType::Float16 => f.write_str("float16"),
            ValueType::Float32 => f.write_str("float32"),
            ValueType::Float64 => f.write_str("float64"),
            ValueType::List(element) => write!(f, "list({element})"),
            ValueType::Vector(count, element) => write!(f, "vector({count}, {element})"),
            ValueType::StandaloneVariant => f.write_str("standalone-variant"),
            ValueType::VariableBinary => f.write_str("variable-binary"),
            ValueType::FixedBinary(len) => write!(f, "fixed-binary({len})"),
            ValueType::Uuid => f.write_str("uuid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(value_type: &ValueType) -> String {
        let mut out = Vec::new();
        value_type.encode(&mut out);
        hex::encode(out)
    }

    #[test]
    fn type_descriptions_match_fixtures() {
        let vec3 = ValueType::Vector(3, Box::new(ValueType::Float32));
        let cases = [
            (ValueType::Null, "00"),
            (ValueType::ObjectId, "01"),
            (ValueType::Integer, "02"),
            (ValueType::String, "03"),
            (ValueType::Float16, "04"),
            (ValueType::Float32, "05"),
            (ValueType::Float64, "06"),
            (ValueType::List(Box::new(ValueType::Integer)), "0702"),
            (vec3.clone(), "080305"),
            (ValueType::List(Box::new(vec3)), "07080305"),
            (ValueType::StandaloneVariant, "09"),
            (ValueType::VariableBinary, "0a"),
            (ValueType::FixedBinary(200), "0b8803"), // 200 -> 0x80|8, 3
            (ValueType::Uuid, "0c"),
        ];
        for (value_type, bytes) in cases {
            assert_eq!(described(&value_type), bytes, "{value_type}");
            let raw = hex::decode(bytes).unwrap();
            let mut reader = Reader::new(&raw);
            assert_eq!(ValueType::decode(&mut reader), Ok(value_type.clone()));
            assert!(reader.is_empty());
            assert_eq!(ValueType::parse(&value_type.to_string()), Ok(value_type));
        }
    }

    #[test]
    fn rejects_unknown_codes_and_deep_nesting() {
        let mut reader = Reader::new(&[0x0d]);
        assert_eq!(
            ValueType::decode(&mut reader),
            Err(DecodeError::UnknownTypeCode(13))
        );
        let deep = vec![0x07; 40];
        assert_eq!(
            ValueType::decode(&mut Reader::new(&deep)),
            Err(DecodeError::TooDeep)
        );
        let huge_vector = [0x08, 0x80, 0x80, 0x80, 0x01, 0x00];
        assert!(matches!(
            ValueType::decode(&mut Reader::new(&huge_vector)),
            Err(DecodeError::LimitExceeded { .. })
        ));
    }

    #[test]
    fn collections_of_zero_size_elements_are_invalid() {
        for bytes in [
            &[0x07, 0x00][..],
            &[0x08, 0x03, 0x00],
            &[0x07, 0x0b, 0x00],
            &[0x07, 0x08, 0x00, 0x02],
        ] {
            assert_eq!(
                ValueType::decode(&mut Reader::new(bytes)),
                Err(DecodeError::Invalid("collection of zero-size elements")),
                "{bytes:?}"
            );
        }
        assert!(ValueType::parse("list(null)").is_err());
        assert!(ValueType::parse("vector(2, vector(0, integer))").is_err());
        assert!(ValueType::parse("vector(0, integer)").is_ok());
        assert_eq!(
            ValueType::parse("vector(3, float32)")
                .unwrap()
                .min_encoded_len(),
            12
        );
    }

    #[test]
    fn parses_text_forms() {
        assert_eq!(
            ValueType::parse("list( vector(4,float64) )"),
            Ok(ValueType::List(Box::new(ValueType::Vector(
                4,
                Box::new(ValueType::Float64)
            ))))
        );
        assert!(ValueType::parse("vector(3)").is_err());
        assert!(ValueType::parse("integer x").is_err());
        assert!(ValueType::parse("quaternion").is_err());
    }
}
