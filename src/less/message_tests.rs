//! Hex fixtures for every message, written by hand from draft section 3.

use super::*;
use crate::less::ids::{ComponentId, ComponentPath, Local, Remote};
use crate::less::schema::SchemaRegistry;
use crate::less::schema_toml::types_from_toml;

struct TestContext {
    registry: SchemaRegistry,
    connection: ConnectionSchema,
}

impl TestContext {
    fn new() -> TestContext {
        TestContext {
            registry: types_from_toml(include_str!("../../schemas/less/test-types.toml")).unwrap(),
            connection: ConnectionSchema::builtin(),
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
