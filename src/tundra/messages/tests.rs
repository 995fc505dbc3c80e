//! Frame fixtures for every message 100-124, written by hand from the
//! layouts of docs/tundra-wire.md §4 and §6, and the codec's behaviour on them.

use super::*;
use crate::tundra::attribute::{AttributeType, AttributeValue};
use crate::tundra::component::ComponentBody;
use crate::tundra::edit_attributes::IndexingMethod;
use crate::tundra::ids::{EntityId, UserId};
use crate::tundra::rigid_body::{DirectionCode, RigidBodyEntityUpdate, VectorCode, VelocityUpdate};

/// (name, protocol, frame hex). Spaces separate fields for reading.
pub(crate) const FIXTURES: &[(&str, u32, &str)] = &[
    (
        "Login with version",
        4,
        "6400 1000 7b22757365726e616d65223a2261227d 04",
    ),
    ("Login without version", 1, "6400 0200 7b7d"),
    ("LoginReply success", 4, "6500 01 01 0200 7b7d 04"),
    ("LoginReply failure", 4, "6500 00 00 0600 64656e696564"),
    ("ClientJoined tundra", 4, "6600 05"),
    ("ClientJoined urho", 4, "6600 05 0300 626f62"),
    ("ClientLeft", 4, "6700 05"),
    (
        "ObserverPosition",
        4,
        "6900 00 0b 0000803f 00000040 00004040 0000",
    ),
    ("EditEntityProperties", 4, "6d00 00 05 01"),
    (
        "CreateEntity protocol 4",
        4,
        "6e00 00 05 00 00000000 01 011a0007 01006100000000",
    ),
    (
        "CreateEntity protocol 1",
        1,
        "6e00 00 05 00 01 011a0007 01006100000000",
    ),
    ("CreateComponents", 4, "6f00 00 05 021a0007 01006100000000"),
    ("CreateAttributes", 4, "7000 00 05 03 00 08 026f6e 01"),
    ("EditAttributes", 4, "7100 00 05 02 02 0900"),
    ("RemoveAttributes", 4, "7200 00 05 03 00"),
    ("RemoveComponents", 4, "7300 00 05 02 03"),
    ("RemoveEntity", 4, "7400 00 05"),
    ("CreateEntityReply", 4, "7500 00 01 64 02 0101 0202"),
    ("CreateComponentsReply", 4, "7600 00 05 01 0307"),
    ("RigidBodyUpdate", 4, "7700 050200f9ff7f"),
    ("EntityAction", 4, "7800 05000000 02 4869 02 01 0178"),
    ("AssetDiscovery", 4, "7900 0161 0162"),
    ("AssetDeleted", 4, "7a00 0161"),
    (
        "RegisterComponentType",
        4,
        "7b00 d1a20400 0e 45435f4d79436f6d706f6e656e74 01 01 0173 0173",
    ),
    ("SetEntityParent", 4, "7c00 00 01000040 05000000"),
    ("Unknown id", 4, "c800 deadbeef"),
];

pub(crate) fn bytes(hex_text: &str) -> Vec<u8> {
    hex::decode(hex_text.replace(' ', "")).unwrap()
}

fn decode(frame: &[u8], protocol: u32) -> Message {
    let registry = Registry::builtin();
    let ctx = DecodeContext {
        protocol_version: ProtocolVersion(protocol),
        registry: &registry,
    };
    Message::decode_frame(frame, &ctx).unwrap()
}

#[test]
fn every_fixture_round_trips_byte_for_byte() {
    let mut ids: Vec<u16> = Vec::new();
    for &(name, protocol, hex_text) in FIXTURES {
        let frame = bytes(hex_text);
        let message = decode(&frame, protocol);
        assert_eq!(
            message.encode_frame(ProtocolVersion(protocol)).unwrap(),
            frame,
            "{name}"
        );
        ids.push(message.id());
    }
    // Every message real peers send, 100-124 (104 and 106-108 do not exist).
    for id in [
        100u16, 101, 102, 103, 105, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120,
        121, 122, 123, 124,
    ] {
        assert!(ids.contains(&id), "fixture for {id}");
    }
}

#[test]
fn decoded_fields() {
    let m = decode(&bytes(FIXTURES[0].2), 4);
    assert_eq!(
        m,
        Message::Login(Login {
            login_data: "{\"username\":\"a\"}".into(),
            protocol_version: Some(4)
        })
    );
    let Message::LoginReply(r) = decode(&bytes("6500 00 00 0600 64656e696564"), 4) else {
        panic!()
    };
    assert!(!r.success && r.protocol_version.is_none() && r.reply_data == "denied");
    let Message::ClientJoined(j) = decode(&bytes("6600 05 0300 626f62"), 4) else {
        panic!()
    };
    assert_eq!((j.user_id, j.username.as_deref()), (UserId(5), Some("bob")));
    let Message::CreateEntity(e) = decode(&bytes(FIXTURES[9].2), 4) else {
        panic!()
    };
    assert_eq!(
        (e.entity_id, e.parent, e.components.len()),
        (EntityId(5), Some(EntityId(0)), 1)
    );
    let ComponentBody::Attributes(block) = &e.components[0].body else {
        panic!()
    };
    assert_eq!(block.values[0], AttributeValue::String("a".into()));
    let Message::CreateEntity(e) = decode(&bytes(FIXTURES[10].2), 1) else {
        panic!()
    };
    assert_eq!(e.parent, None);
    let Message::SetEntityParent(p) = decode(&bytes("7c00 00 01000040 05000000"), 4) else {
        panic!()
    };
    assert!(p.entity_id.is_unacked());
    let Message::RegisterComponentType(t) = decode(&bytes(FIXTURES[23].2), 4) else {
        panic!()
    };
    assert_eq!((t.type_id, t.type_name.as_str()), (69969, "EC_MyComponent"));
    let Message::EntityAction(a) = decode(&bytes(FIXTURES[20].2), 4) else {
        panic!()
    };
    assert_eq!(
        (a.name.as_str(), a.execution_type, a.parameters),
        ("Hi", exec_type::SERVER, vec!["x".to_string()])
    );
    let Message::RigidBodyUpdate(u) = decode(&bytes(FIXTURES[19].2), 4) else {
        panic!()
    };
    let expected = RigidBodyEntityUpdate {
        entity_id: EntityId(5),
        position: Default::default(),
        rotation: Default::default(),
        scale: Default::default(),
        velocity: VelocityUpdate::Short(VectorCode {
            magnitude: 256,
            direction: Some(DirectionCode {
                yaw: 2047,
                pitch: 511,
            }),
        }),
        angular_velocity: None,
    };
    assert_eq!(u.entities, vec![expected]);
}

#[test]
fn edit_attributes_block_decodes_with_slots() {
    let Message::EditAttributes(m) = decode(&bytes(FIXTURES[13].2), 4) else {
        panic!()
    };
    let slots = Registry::builtin().get(20).unwrap().slot_types();
    let edits = m.blocks[0].decode(&slots).unwrap();
    assert_eq!(edits.method, IndexingMethod::Bitmask);
    assert_eq!(
        (edits.edits[0].index, &edits.edits[0].value),
        (2, &AttributeValue::Bool(false))
    );
}

#[test]
fn ids_are_masked_and_non_canonical_vles_normalized() {
    let m = decode(&bytes("7400 00 81800000"), 4);
    assert_eq!(
        m,
        Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(1)
        })
    );
    assert_eq!(
        m.encode_frame(ProtocolVersion::HIGHEST).unwrap(),
        bytes("7400 00 01")
    );
    let unacked = Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0005),
    });
    assert_eq!(
        unacked.encode_frame(ProtocolVersion::HIGHEST).unwrap(),
        bytes("7400 00 05")
    );
}

#[test]
fn parent_field_follows_the_receiver_protocol() {
    let Message::CreateEntity(mut e) = decode(&bytes(FIXTURES[9].2), 4) else {
        panic!()
    };
    e.parent = Some(EntityId(7));
    let m = Message::CreateEntity(e);
    assert_eq!(
        m.encode_frame(ProtocolVersion(2)).unwrap(),
        bytes(FIXTURES[10].2)
    );
    assert_eq!(
        m.encode_frame(ProtocolVersion(3)).unwrap(),
        bytes("6e00 00 05 00 07000000 01 011a0007 01006100000000")
    );
}

#[test]
fn malformed_frames_are_errors_not_panics() {
    let registry = Registry::builtin();
    let ctx = DecodeContext {
        protocol_version: ProtocolVersion::HIGHEST,
        registry: &registry,
    };
    for bad in [
        "",
        "64",
        "6400 0500 7b",
        "6e00 00 05 00 00000000 ff",
        "6e00 00 05 00 00000000 7f",
        "7100 00 05 02 ffff03",
        "7800 05000000 02 48",
        "7b00 01 00 05 09",
    ] {
        assert!(Message::decode_frame(&bytes(bad), &ctx).is_err(), "{bad:?}");
    }
}

#[test]
fn tolerated_extras() {
    // Trailing bytes after a RemoveEntity are ignored, as Tundra ignores them.
    let m = decode(&bytes("7400 00 05 ffff"), 4);
    assert_eq!(
        m.encode_frame(ProtocolVersion::HIGHEST).unwrap(),
        bytes("7400 00 05")
    );
    // CreateAttributes stops at an unknown attribute type.
    let Message::CreateAttributes(c) =
        decode(&bytes("7000 00 05 03 00 08 026f6e 01 03 01 63 00"), 4)
    else {
        panic!()
    };
    assert_eq!(c.attributes.len(), 1);
    assert_eq!(c.attributes[0].value.attribute_type(), AttributeType::Bool);
}

#[test]
fn edit_attributes_target_reads_only_the_ids() {
    let frame = bytes(FIXTURES[13].2);
    assert_eq!(FIXTURES[13].0, "EditAttributes");
    assert_eq!(
        edit_attributes_target(&frame),
        Some((EntityId(5), ComponentId(2)))
    );
    // Cut after the scene id: no entity to name.
    assert_eq!(edit_attributes_target(&frame[..3]), None);
    assert_eq!(edit_attributes_target(&bytes(FIXTURES[0].2)), None);
}
