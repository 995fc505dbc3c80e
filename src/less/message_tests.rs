//! Hex fixtures for every message, written by hand from docs/less-wire.md §4.

use super::*;
use crate::less::ids::{ComponentId, ComponentPath, Local, Remote};
use crate::less::schema::SchemaRegistry;
use crate::less::schema_toml::types_from_toml;

struct TestContext {
    registry: SchemaRegistry,
    connection: ConnectionSchema,
    encodings: LinkEncodings,
}

impl TestContext {
    fn new() -> TestContext {
        TestContext {
            registry: types_from_toml(include_str!("../../schemas/less/test-types.toml")).unwrap(),
            connection: ConnectionSchema::builtin(),
            encodings: LinkEncodings::plain(),
        }
    }
    /// A link that agreed the keyed update message and no value encodings.
    fn keyed() -> TestContext {
        TestContext {
            encodings: keyed_link(),
            ..TestContext::new()
        }
    }
    fn crate_type(&self) -> Arc<TypeSchema> {
        self.registry
            .get("urn:lessgate:test:crate")
            .unwrap()
            .clone()
    }
}

/// Sender type 5 and sender entity 300 are crates; receiver entity 9 is a crate.
impl<S: Space, D: Space> DecodeContext<S, D> for TestContext {
    fn sender_type(&self, type_id: TypeId<S>) -> Option<Arc<TypeSchema>> {
        (type_id.get() == 5).then(|| self.crate_type())
    }
    fn sender_entity_type(&self, entity: ObjectId<S>) -> Option<Arc<TypeSchema>> {
        (entity.get() == 300).then(|| self.crate_type())
    }
    fn receiver_entity_type(&self, entity: ObjectId<D>) -> Option<Arc<TypeSchema>> {
        (entity.get() == 9).then(|| self.crate_type())
    }
    fn connection(&self) -> &ConnectionSchema {
        &self.connection
    }
    fn encodings(&self) -> &LinkEncodings {
        &self.encodings
    }
}

fn keyed_link() -> LinkEncodings {
    LinkEncodings::from_features(
        &[crate::less::encoding::link::UPDATE_PROPERTY_FEATURE.to_owned()],
        Vec::new(),
    )
}

type Outgoing = Message<Local, Remote>;

fn fixtures() -> Vec<(Outgoing, &'static str)> {
    vec![
        (
            Message::IntroduceType {
                type_id: TypeId::new(5),
                uri: "urn:x".into(),
            },
            concat!("01", "05", "05", "75726e3a78"),
        ),
        (
            Message::SubscribeType {
                type_id: TypeId::new(5),
                components: vec![ComponentSubscription {
                    component: ComponentPath::top(ComponentId(1)),
                    properties: vec![PropertyId(1), PropertyId(3)],
                }],
            },
            concat!("02", "05", "01", "0101", "020103"),
        ),
        (
            Message::UnsubscribeType {
                type_id: TypeId::new(5),
            },
            "0305",
        ),
        (
            Message::IntroduceEntity {
                type_id: TypeId::new(5),
                entity: ObjectId::new(300),
                values: vec![PropertyValue {
                    key: PropertyKey::new(1, 3),
                    value: Value::Float64(1.0),
                }],
            },
            concat!(
                "04",
                "05",
                "ac04",
                "01",
                "01",
                "01",
                "03",
                "000000000000f03f"
            ),
        ),
        (
            Message::RemoveEntity {
                entity: ObjectId::new(300),
            },
            "05ac04",
        ),
        (
            Message::UpdateEntity {
                entity: ObjectId::new(300),
                values: vec![PropertyValue {
                    key: PropertyKey::new(2, 2),
                    value: Value::Integer(-1),
                }],
            },
            concat!("06", "ac04", "01", "02", "01", "02", "c000"),
        ),
        (
            Message::RequestEntity {
                entity: ObjectId::new(9),
            },
            "0709",
        ),
        (
            Message::MethodInvocation {
                request: RequestId::new(1),
                entity: ObjectId::new(9),
                method: PropertyKey::new(2, 8),
                arguments: vec![Value::Integer(7), Value::String("ok".into())],
            },
            concat!("08", "01", "09", "0102", "08", "02", "020107", "0303026f6b"),
        ),
        (
            Message::MethodResult {
                request: RequestId::new(1),
                status: MethodStatus::SUCCESS,
                value: Value::Integer(42),
            },
            concat!("09", "01", "00", "02012a"),
        ),
        (
            Message::MethodResult {
                request: RequestId::new(2),
                status: MethodStatus::FORBIDDEN,
                value: Value::String("no".into()),
            },
            // 403 -> 0x80|(403&63=19) = 93, 403>>6 = 6.
            concat!("09", "02", "9306", "0303026e6f"),
        ),
        (
            Message::Interaction {
                interaction: InteractionId(1),
                values: vec![FieldValue {
                    id: PropertyId(1),
                    value: Value::ObjectId(300),
                }],
            },
            concat!("0a", "01", "01", "01", "ac04"),
        ),
        (
            Message::TweakEntity {
                entity: ObjectId::new(9),
                property: PropertyKey::new(2, 1),
                value: Value::String("a".into()),
            },
            concat!("0b", "09", "0102", "01", "0161"),
        ),
        (
            Message::ConnectionControl {
                values: vec![FieldValue {
                    id: PropertyId(1),
                    value: Value::Integer(30),
                }],
            },
            concat!("0c", "01", "01", "1e"),
        ),
    ]
}

#[test]
fn every_message_matches_its_fixture_and_round_trips() {
    let context = TestContext::new();
    let fixtures = fixtures();
    let codes: std::collections::BTreeSet<i64> = fixtures.iter().map(|(m, _)| m.code()).collect();
    assert_eq!(codes.len(), 12, "all twelve message kinds are covered");
    for (message, expected) in fixtures {
        assert_eq!(hex::encode(message.to_bytes()), expected, "{message:?}");
        let bytes = hex::decode(expected).unwrap();
        let mut reader = Reader::new(&bytes);
        let decoded = Outgoing::decode(&mut reader, &context).unwrap();
        assert!(reader.is_empty());
        assert_eq!(decoded, message);
    }
}

fn decode_hex(text: &str) -> Result<Outgoing, DecodeError> {
    let bytes = hex::decode(text).unwrap();
    Outgoing::decode(&mut Reader::new(&bytes), &TestContext::new())
}

#[test]
fn missing_context_is_unresolved() {
    assert_eq!(
        decode_hex("040601" /* type 6 unknown */),
        Err(DecodeError::Unresolved(Unresolved::SenderType(6)))
    );
    assert_eq!(
        decode_hex("060100"),
        Err(DecodeError::Unresolved(Unresolved::SenderEntity(1)))
    );
    assert_eq!(
        decode_hex("0b0101020101"),
        Err(DecodeError::Unresolved(Unresolved::ReceiverEntity(1)))
    );
    assert_eq!(
        decode_hex("0a6300"),
        Err(DecodeError::Unresolved(Unresolved::Interaction(99)))
    );
}

#[test]
fn malformed_messages_are_errors() {
    assert_eq!(decode_hex("0d"), Err(DecodeError::UnknownMessageCode(13)));
    assert_eq!(decode_hex("00"), Err(DecodeError::UnknownMessageCode(0)));
    assert_eq!(decode_hex("090105"), Err(DecodeError::Truncated));
    // A failure status must carry a STRING: request 1, status 5, INTEGER 42.
    assert_eq!(
        decode_hex(concat!("09", "01", "05", "02012a")),
        Err(DecodeError::Invalid(
            "failed method-result without a STRING"
        ))
    );
    // Tweak of a method id: not a property.
    assert!(matches!(
        decode_hex("0b09010208"),
        Err(DecodeError::UndeclaredProperty(_))
    ));
    // Control property 2 is not in the connection schema.
    assert!(matches!(
        decode_hex("0c010201"),
        Err(DecodeError::UndeclaredProperty(_))
    ));
    // Negative argument count.
    assert!(matches!(
        decode_hex(concat!("08", "01", "09", "0102", "08", "c000")),
        Err(DecodeError::Negative { .. })
    ));
}

fn update(entity: u64, values: &[(u64, u64, Value)]) -> Outgoing {
    Message::UpdateEntity {
        entity: ObjectId::new(entity),
        values: values
            .iter()
            .map(|(component, property, value)| PropertyValue {
                key: PropertyKey::new(*component, *property),
                value: value.clone(),
            })
            .collect(),
    }
}

#[test]
fn one_property_update_goes_keyed_on_a_link_that_agreed_it() {
    let keyed = keyed_link();
    // info.counter = 5 on entity 300: key 2 << 3 | 2 = 18, code 16 + 18 = 0x22.
    let message = update(300, &[(2, 2, Value::Integer(5))]);
    let bytes = message.to_bytes_on(&keyed);
    assert_eq!(hex::encode(&bytes), "22ac0405");
    // Without the agreement it is the draft's update-entity.
    assert_eq!(
        hex::encode(message.to_bytes_on(&LinkEncodings::plain())),
        "06ac040102010205"
    );
    let mut reader = Reader::new(&bytes);
    assert_eq!(
        Outgoing::decode(&mut reader, &TestContext::keyed()),
        Ok(message)
    );
    assert!(reader.is_empty());
    // The last key, 111: component 13 property 7 (code 127).
    assert_eq!(
        update_property_key(&PropertyKey::new(13, 7)),
        Some(code::UPDATE_PROPERTY_LAST - code::UPDATE_PROPERTY_FIRST)
    );
}

#[test]
fn updates_without_a_key_keep_the_update_entity_form() {
    let keyed = keyed_link();
    for message in [
        // Two properties.
        update(
            300,
            &[(2, 2, Value::Integer(5)), (1, 3, Value::Float64(1.0))],
        ),
        // Property id 8 needs more than three bits.
        update(300, &[(2, 8, Value::Integer(5))]),
        // Component 14 is past the last key.
        update(300, &[(14, 0, Value::Integer(5))]),
    ] {
        assert_eq!(
            message.to_bytes_on(&keyed),
            message.to_bytes(),
            "{message:?}"
        );
    }
    // A nested property: path 2.7, property 1.
    let nested: Outgoing = Message::UpdateEntity {
        entity: ObjectId::new(300),
        values: vec![PropertyValue {
            key: PropertyKey {
                component: ComponentPath::new(vec![ComponentId(2), ComponentId(7)]).unwrap(),
                property: PropertyId(1),
            },
            value: Value::FixedBinary(vec![1, 2, 3, 4]),
        }],
    };
    assert_eq!(nested.to_bytes_on(&keyed)[0], 0x06);
}

#[test]
fn update_property_codes_are_refused_where_not_agreed_or_not_a_property() {
    // Not agreed: an unknown code, as before.
    assert_eq!(
        decode_hex("22ac0405"),
        Err(DecodeError::UnknownMessageCode(0x22))
    );
    let decode = |text: &str| {
        let bytes = hex::decode(text).unwrap();
        Outgoing::decode(&mut Reader::new(&bytes), &TestContext::keyed())
    };
    // Key 2 << 3 | 7 names the nested component "appearance".
    assert_eq!(
        decode("27ac0400"),
        Err(DecodeError::Invalid(
            "update-property key names a method or nested component"
        ))
    );
    // Component 2 has no property 0.
    assert!(matches!(
        decode("20ac0405"),
        Err(DecodeError::UndeclaredProperty(_))
    ));
    // An unknown entity needs its introduction first.
    assert_eq!(
        decode("220505"),
        Err(DecodeError::Unresolved(Unresolved::SenderEntity(5)))
    );
    // Codes past the one-byte range stay unknown.
    assert_eq!(decode("8002"), Err(DecodeError::UnknownMessageCode(128)));
    assert_eq!(decode("0d"), Err(DecodeError::UnknownMessageCode(13)));
}
