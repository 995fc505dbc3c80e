//! Which properties of a link travel in which compact encoding
//! (docs/less-wire.md §16.1).
//!
//! Both ends derive the same table from two inputs they share: the
//! encodings both offered at link set-up (Hello features `enc:<name>`,
//! docs/peer-link.md §5.2) and the application's rules, which name
//! properties by type URI prefix, top-level component and value type. A
//! property no agreed rule names, or whose rule names an encoding the peer
//! did not offer, travels plain: a node that knows no encodings simply
//! offers none, and both ends fall back to the plain encoding.

use super::EncodingId;
use crate::less::codec::{DecodeError, Reader};
use crate::less::ids::{ComponentId, PropertyKey};
use crate::less::schema::{PropertyIndex, TypeSchema};
use crate::less::value::Value;
use crate::less::value_type::ValueType;

/// Prefix of the Hello feature that offers an encoding: `enc:` + its name.
pub const FEATURE_PREFIX: &str = "enc:";

/// The Hello feature that offers the keyed update message, update-property
/// (docs/less-wire.md §16.8).
pub const UPDATE_PROPERTY_FEATURE: &str = "msg:update-property/1";

/// The no-encodings table (what a session without encodings uses).
pub static PLAIN: LinkEncodings = LinkEncodings {
    agreed: Vec::new(),
    rules: Vec::new(),
    update_property: false,
};

/// Properties of types whose URI starts with `uri_prefix`, in top-level
/// component `component`, of type `value_type`, use `encoding`.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodingRule {
    pub uri_prefix: String,
    pub component: ComponentId,
    pub value_type: ValueType,
    pub encoding: EncodingId,
}

/// The encodings a link agreed on and the rules that apply them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkEncodings {
    agreed: Vec<EncodingId>,
    rules: Vec<EncodingRule>,
    /// Both ends offered the keyed update message (16.8).
    update_property: bool,
}

/// The Hello features offering every encoding this implementation knows,
/// and the keyed update message.
pub fn offered_features() -> Vec<String> {
    EncodingId::ALL
        .iter()
        .map(|id| format!("{FEATURE_PREFIX}{}", id.name()))
        .chain([UPDATE_PROPERTY_FEATURE.to_owned()])
        .collect()
}

impl LinkEncodings {
    /// No encodings: every value plain.
    pub fn plain() -> LinkEncodings {
        LinkEncodings::default()
    }

    /// The table of a link whose negotiated features (those both Hellos
    /// declared) are `features`. Features that are not encodings, and
    /// encodings this implementation does not know, are ignored.
    pub fn from_features(features: &[String], rules: Vec<EncodingRule>) -> LinkEncodings {
        let agreed = features
            .iter()
            .filter_map(|f| f.strip_prefix(FEATURE_PREFIX))
            .filter_map(EncodingId::from_name)
            .collect();
        let update_property = features.iter().any(|f| f == UPDATE_PROPERTY_FEATURE);
        LinkEncodings {
            agreed,
            rules,
            update_property,
        }
    }

    /// True when the link may carry update-property (code 13) messages.
    pub fn update_property(&self) -> bool {
        self.update_property
    }

    /// The agreed encodings.
    pub fn agreed(&self) -> &[EncodingId] {
        &self.agreed
    }

    /// True when no property can be encoded.
    pub fn is_plain(&self) -> bool {
        self.agreed.is_empty() || self.rules.is_empty()
    }

    /// The encoding of a property of `schema` on this link, if any: the
    /// first rule that names it and whose encoding was agreed.
    pub fn for_property(&self, schema: &TypeSchema, key: &PropertyKey) -> Option<EncodingId> {
        if self.is_plain() {
            return None;
        }
        let [component] = key.component.elements() else {
            return None;
        };
        let value_type = schema.property_type(key)?;
        self.rules
            .iter()
            .find(|rule| {
                rule.component == *component
                    && rule.value_type == *value_type
                    && rule.encoding.value_type() == *value_type
                    && schema.uri.starts_with(&rule.uri_prefix)
                    && self.agreed.contains(&rule.encoding)
            })
            .map(|rule| rule.encoding)
    }

    /// The encoding of every property of `schema` on this link, by
    /// property index: looked up once per type rather than once per value.
    pub fn table(&self, schema: &TypeSchema) -> std::sync::Arc<[Option<EncodingId>]> {
        (0..schema.property_count())
            .map(|i| {
                let (key, _) = schema.property_at(PropertyIndex(i as u32))?;
                self.for_property(schema, key)
            })
            .collect()
    }

    /// The value as it goes on the wire: for an encoded property, its
    /// encoded bytes as a FIXED-BINARY (written without a length, as the
    /// encoding is self-delimiting); otherwise the value itself.
    pub fn to_wire(&self, schema: &TypeSchema, key: &PropertyKey, value: &Value) -> Value {
        Self::to_wire_as(self.for_property(schema, key), value)
    }

    /// [`Self::to_wire`] with the property's encoding already looked up
    /// (a sender keeps it with each property it sends).
    pub fn to_wire_as(encoding: Option<EncodingId>, value: &Value) -> Value {
        encoding
            .and_then(|encoding| encoding.encode(value))
            .map_or_else(|| value.clone(), Value::FixedBinary)
    }

    /// Reads a property value as the link carries it.
    pub fn decode_value(
        &self,
        reader: &mut Reader<'_>,
        schema: &TypeSchema,
        key: &PropertyKey,
        value_type: &ValueType,
    ) -> Result<Value, DecodeError> {
        Self::read_value(reader, self.for_property(schema, key), value_type)
    }

    /// Reads a property value in `encoding` (from [`Self::table`]), or
    /// plain.
    pub fn read_value(
        reader: &mut Reader<'_>,
        encoding: Option<EncodingId>,
        value_type: &ValueType,
    ) -> Result<Value, DecodeError> {
        match encoding {
            Some(encoding) => encoding.decode(reader),
            None => Value::decode(reader, value_type),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::ids::PropertyId;
    use crate::less::schema::{ComponentSchema, Member, MemberKind};

    fn schema() -> TypeSchema {
        let nine = ValueType::Vector(9, Box::new(ValueType::Float32));
        TypeSchema::new(
            "urn:test:thing",
            vec![ComponentSchema {
                id: ComponentId(2),
                name: "attributes".into(),
                members: vec![
                    Member {
                        id: PropertyId(0),
                        name: "transform".into(),
                        kind: MemberKind::Property(nine),
                    },
                    Member {
                        id: PropertyId(1),
                        name: "visible".into(),
                        kind: MemberKind::Property(ValueType::Integer),
                    },
                ],
            }],
        )
    }

    fn rules() -> Vec<EncodingRule> {
        vec![EncodingRule {
            uri_prefix: "urn:test:".into(),
            component: ComponentId(2),
            value_type: ValueType::Vector(9, Box::new(ValueType::Float32)),
            encoding: EncodingId::TundraTransform,
        }]
    }

    #[test]
    fn only_agreed_encodings_apply() {
        let schema = schema();
        let key = PropertyKey::new(2, 0);
        let both = LinkEncodings::from_features(
            &["enc:tundra-transform/1".into(), "other".into()],
            rules(),
        );
        assert_eq!(
            both.for_property(&schema, &key),
            Some(EncodingId::TundraTransform)
        );
        assert_eq!(both.for_property(&schema, &PropertyKey::new(2, 1)), None);
        let unknown = LinkEncodings::from_features(&["enc:tundra-transform/9".into()], rules());
        assert_eq!(unknown.for_property(&schema, &key), None);
        assert!(LinkEncodings::plain().for_property(&schema, &key).is_none());
        let value = Value::floats(&[0.0; 9]);
        assert_eq!(unknown.to_wire(&schema, &key, &value), value);
        assert!(matches!(
            both.to_wire(&schema, &key, &value),
            Value::FixedBinary(bytes) if bytes.len() == 12
        ));
    }

    #[test]
    fn offered_features_are_valid_tokens() {
        for feature in offered_features() {
            assert!(feature.len() <= 64);
            assert!(feature
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"./-_:".contains(&b)));
        }
    }
}
