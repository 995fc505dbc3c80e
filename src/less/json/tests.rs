//! Hex fixtures for the JSON view, from docs/less-wire.md and
//! `less::message_tests`.

use super::message::SpaceKnowledge;
use super::*;
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::schema_toml::types_from_toml;
use crate::less::signature::{MacKey, KEY_LEN};

const CRATE: &str = "urn:lessgate:test:crate";

struct Fixture {
    types: SchemaRegistry,
    connection: ConnectionSchema,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            types: types_from_toml(include_str!("../../../schemas/less/test-types.toml")).unwrap(),
            connection: ConnectionSchema::builtin(),
        }
    }

    fn schemas(&self) -> Schemas<'_> {
        Schemas {
            types: &self.types,
            connection: &self.connection,
            link: None,
        }
    }

    /// Decodes with sender type 5 and entity 300 and receiver entity 9 known
    /// as crates (the context of `less::message_tests`).
    fn decode(&self, frame: &[u8], framing: Framing, keys: &[MacKey]) -> PacketJson {
        let mut sender = crate_knowledge(300);
        decode_frame(
            frame,
            framing,
            keys,
            self.schemas(),
            &mut sender,
            &crate_knowledge(9),
        )
        .unwrap()
    }
}

fn crate_knowledge(entity: u64) -> SpaceKnowledge {
    let mut knowledge = SpaceKnowledge::default();
    knowledge.types.insert(5, CRATE.to_owned());
    knowledge.entities.insert(entity, 5);
    knowledge
}

fn key() -> MacKey {
    MacKey::new([0x42; KEY_LEN])
}

/// docs/less-wire.md §15, with the signature worked out from its
/// definition: keyed BLAKE3 of the frame with the signature zeroed.
fn section_15_datagram() -> Vec<u8> {
    let zeroed = hex::decode("10ffc0000000000000000000a80f010505").unwrap();
    let hash = blake3::keyed_hash(&[0x42; KEY_LEN], &zeroed);
    let mut frame = zeroed;
    frame[4..12].copy_from_slice(&hash.as_bytes()[..8]);
    frame
}

/// Stream-mode frame around one packet's messages, signed with [`key`].
fn stream_frame(message_count: u8, messages: &str) -> Vec<u8> {
    let mut inner = vec![0u8; 8];
    inner.push(0x07); // timestamp 7
    inner.push(message_count);
    inner.extend(hex::decode(messages).unwrap());
    let mut frame = vec![inner.len() as u8];
    frame.extend(inner);
    key().write_signature(&mut frame, 1);
    frame
}

fn assert_round_trip(fixture: &Fixture, frame: &[u8], framing: Framing) -> PacketJson {
    let json = fixture.decode(frame, framing, &[key()]);
    let text = serde_json::to_string_pretty(&json).unwrap();
    let back: PacketJson = serde_json::from_str(&text).unwrap();
    assert_eq!(back, json, "{text}");
    let encoded = encode_frame(&back, Some(&key())).unwrap();
    assert_eq!(hex::encode(&encoded), hex::encode(frame), "{text}");
    assert_eq!(fixture.decode(&encoded, framing, &[key()]), json);
    // Without a key the given signature bytes are written back.
    assert_eq!(encode_frame(&back, None).unwrap(), frame);
    json
}

#[test]
fn section_15_datagram_decodes_and_round_trips() {
    let fixture = Fixture::new();
    let frame = section_15_datagram();
    let json = assert_round_trip(&fixture, &frame, Framing::Datagram);
    assert_eq!(json.signature, SignatureCheck::Valid);
    assert_eq!(json.sequence, Some(0x10));
    assert_eq!(json.ack_last, Some(0xff));
    assert_eq!(json.ack_bitmask.as_deref(), Some("0xffffffffffffffff"));
    let acked = json.acked.clone().unwrap();
    assert_eq!(
        (acked.len(), acked[0], acked[1], acked[64]),
        (65, 0xff, 0xfe, 0xbf)
    );
    assert_eq!((json.timestamp, json.message_count), (1000, 1));
    let text = serde_json::to_string(&json.messages).unwrap();
    assert_eq!(text, r#"[{"offset":15,"kind":"remove-entity","entity":5}]"#);
    let unchecked = fixture.decode(&frame, Framing::Datagram, &[]);
    assert_eq!(unchecked.signature, SignatureCheck::Unchecked);
    let wrong = fixture.decode(&frame, Framing::Datagram, &[MacKey::new([1; KEY_LEN])]);
    assert_eq!(wrong.signature, SignatureCheck::Invalid);
    let either = fixture.decode(
        &frame,
        Framing::Datagram,
        &[MacKey::new([1; KEY_LEN]), key()],
    );
    assert_eq!(either.signature, SignatureCheck::Valid);
}

/// The message fixtures of `less::message_tests`, one per kind.
const MESSAGES: &[(&str, &str)] = &[
    ("introduce-type", "01050575726e3a78"),
    ("subscribe-type", "0205010101020103"),
    ("unsubscribe-type", "0305"),
    ("introduce-entity", "0405ac04010101 03000000000000f03f"),
    ("remove-entity", "05ac04"),
    ("update-entity", "06ac0401020102c000"),
    ("request-entity", "0709"),
    ("method-invocation", "080109010208020201070303026f6b"),
    ("method-result", "090100 02012a"),
    ("method-result", "0902 9306 0303026e6f"),
    ("interaction", "0a010101ac04"),
    ("tweak-entity", "0b090102010161"),
    ("connection-control", "0c01011e"),
];

#[test]
fn every_message_fixture_round_trips() {
    let fixture = Fixture::new();
    for &(kind, hex_text) in MESSAGES {
        let frame = stream_frame(1, &hex_text.replace(' ', ""));
        let json = assert_round_trip(&fixture, &frame, Framing::StreamPacket);
        assert_eq!(json.undecoded, None, "{kind}");
        let message = serde_json::to_value(&json.messages[0]).unwrap();
        assert_eq!(message["kind"], kind, "{message}");
    }
    // All in one packet, but for the introduce-type: it would retype type 5
    // as "urn:x", which has no schema, and stop at the introduce-entity.
    let rest = &MESSAGES[1..];
    let all: String = rest.iter().map(|(_, h)| h.replace(' ', "")).collect();
    let frame = stream_frame(rest.len() as u8, &all);
    let json = assert_round_trip(&fixture, &frame, Framing::StreamPacket);
    assert_eq!(json.messages.len(), rest.len());
}

#[test]
fn values_are_shown_with_names_and_types() {
    let fixture = Fixture::new();
    // docs/less-wire.md §4: the crate example, in an update-entity.
    let body = "06ac04 02 0202 0205 07010101020304 0101 03000000000000e03f";
    let frame = stream_frame(1, &body.replace(' ', ""));
    let json = assert_round_trip(&fixture, &frame, Framing::StreamPacket);
    let message = serde_json::to_value(&json.messages[0]).unwrap();
    let expected = serde_json::json!({
        "offset": 11, "kind": "update-entity", "entity": 300, "uri": CRATE,
        "components": [
            {"component": 2, "name": "info", "properties": [
                {"property": 2, "name": "counter", "type": "integer", "value": 5},
                {"property": 7, "name": "appearance", "properties": [
                    {"property": 1, "name": "colour", "type": "fixed-binary(4)", "value": "01020304"}
                ]}
            ]},
            {"component": 1, "name": "transform", "properties": [
                {"property": 3, "name": "scale", "type": "float64", "value": 0.5}
            ]}
        ]
    });
    assert_eq!(message, expected);
    // Standalone values carry their own types.
    let frame = stream_frame(1, "080109010208020201070303026f6b");
    let json = fixture.decode(&frame, Framing::StreamPacket, &[]);
    let arguments = &serde_json::to_value(&json.messages[0]).unwrap()["arguments"];
    assert_eq!(
        arguments.to_string(),
        r#"[{"type":"integer","value":7},{"type":"string","value":"ok"}]"#
    );
}

#[test]
fn introductions_in_the_packet_type_later_messages() {
    let fixture = Fixture::new();
    // introduce-type 6 = crate, introduce-entity 6/301 with scale, then an
    // update of 301: nothing known beforehand.
    let uri_hex = hex::encode(CRATE);
    let uri: String = uri_hex
        .as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let messages = format!(
        "0106{:02x}{uri}0406ad0401010103000000000000f03f06ad04010201020a",
        CRATE.len()
    );
    let frame = stream_frame(3, &messages);
    let mut sender = SpaceKnowledge::default();
    let schemas = fixture.schemas();
    let empty = SpaceKnowledge::default();
    let json = decode_frame(
        &frame,
        Framing::StreamPacket,
        &[],
        schemas,
        &mut sender,
        &empty,
    )
    .unwrap();
    assert_eq!(json.undecoded, None, "{json:?}");
    assert_eq!(json.messages.len(), 3);
    assert_eq!(sender.types.get(&6).map(String::as_str), Some(CRATE));
    assert_eq!(sender.entities.get(&301), Some(&6));
}

#[test]
fn unknown_types_leave_raw_bytes_with_the_property_id() {
    let fixture = Fixture::new();
    // remove-entity 5, then update-entity 77 (never introduced): component
    // 2, one property, property 2 = INTEGER 5.
    let frame = stream_frame(2, "0505064d0102010205");
    let mut nobody = SpaceKnowledge::default();
    let json = decode_frame(
        &frame,
        Framing::StreamPacket,
        &[],
        fixture.schemas(),
        &mut nobody,
        &SpaceKnowledge::default(),
    )
    .unwrap();
    assert_eq!(json.messages.len(), 1);
    let undecoded = json.undecoded.clone().unwrap();
    assert!(undecoded.needs_context);
    assert_eq!(undecoded.kind.as_deref(), Some("update-entity"));
    assert_eq!(undecoded.property.as_deref(), Some("2.2"));
    assert_eq!(
        (undecoded.offset, undecoded.bytes.as_str()),
        (13, "064d0102010205")
    );
    assert_eq!(undecoded.error_offset, 19);
    assert!(
        undecoded.error.contains("--entity 77=TYPE"),
        "{}",
        undecoded.error
    );
    // The raw bytes are written back unchanged.
    assert_eq!(encode_frame(&json, None).unwrap(), frame);
}

#[test]
fn malformed_packets_report_offsets() {
    let fixture = Fixture::new();
    let frame = section_15_datagram();
    // Truncated inside the signature.
    let error = decode_frame(
        &frame[..9],
        Framing::Datagram,
        &[],
        fixture.schemas(),
        &mut SpaceKnowledge::default(),
        &SpaceKnowledge::default(),
    )
    .unwrap_err();
    assert_eq!(error.offset, 4);
    assert_eq!(error.to_string(), "at byte 4: input ends inside a field");
    // Stream length that disagrees with the frame.
    let mut stream = stream_frame(0, "");
    stream.push(0);
    let error = decode_frame(
        &stream,
        Framing::StreamPacket,
        &[],
        fixture.schemas(),
        &mut SpaceKnowledge::default(),
        &SpaceKnowledge::default(),
    )
    .unwrap_err();
    assert_eq!(error.offset, 1);
    // Unknown message code 13 after a good message; then trailing bytes.
    let json = fixture.decode(
        &stream_frame(2, "0505 0d".replace(' ', "").as_str()),
        Framing::StreamPacket,
        &[],
    );
    let undecoded = json.undecoded.unwrap();
    assert_eq!((undecoded.offset, undecoded.error_offset), (13, 14));
    assert_eq!(undecoded.error, "unknown message code 13");
    assert!(!undecoded.needs_context);
    let json = fixture.decode(&stream_frame(1, "0505ff"), Framing::StreamPacket, &[]);
    assert_eq!(
        json.undecoded.unwrap().error,
        "1 bytes left after the last field"
    );
}

#[test]
fn hostile_bytes_never_panic() {
    let fixture = Fixture::new();
    let all: String = MESSAGES.iter().map(|(_, h)| h.replace(' ', "")).collect();
    let frames = [
        section_15_datagram(),
        stream_frame(MESSAGES.len() as u8, &all),
    ];
    for frame in frames {
        for framing in [
            Framing::Datagram,
            Framing::StreamPacket,
            Framing::StreamDatagram,
        ] {
            for len in 0..=frame.len() {
                let _ = fixture_decode(&fixture, &frame[..len], framing);
            }
            for bit in 0..frame.len() * 8 {
                let mut flipped = frame.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                if let Ok(json) = fixture_decode(&fixture, &flipped, framing) {
                    // Whatever decodes encodes; after one pass (which makes
                    // non-canonical INTEGERs canonical) JSON and bytes are
                    // a fixed point.
                    let encoded = encode_frame(&json, None).unwrap();
                    let again = fixture_decode(&fixture, &encoded, framing).unwrap();
                    let reencoded = encode_frame(&again, None).unwrap();
                    assert_eq!(reencoded, encoded);
                    assert_eq!(
                        fixture_decode(&fixture, &reencoded, framing).unwrap(),
                        again
                    );
                }
            }
        }
    }
}

fn fixture_decode(
    fixture: &Fixture,
    frame: &[u8],
    framing: Framing,
) -> Result<PacketJson, FrameError> {
    let mut sender = crate_knowledge(300);
    decode_frame(
        frame,
        framing,
        &[],
        fixture.schemas(),
        &mut sender,
        &crate_knowledge(9),
    )
}

#[test]
fn bad_json_is_an_error() {
    let fixture = Fixture::new();
    let mut json = fixture.decode(&section_15_datagram(), Framing::Datagram, &[]);
    json.sequence = None;
    assert!(encode_frame(&json, None).unwrap_err().contains("sequence"));
    let mut json = fixture.decode(&section_15_datagram(), Framing::Datagram, &[]);
    json.signature_bytes = "00".into();
    assert!(encode_frame(&json, None).is_err());
    assert!(encode_frame(&json, Some(&key())).is_ok());
    assert!(serde_json::from_str::<PacketJson>(r#"{"framing":"nope"}"#).is_err());
}

/// What a link of two default nodes agrees, with one encoding rule for the
/// test crate: `transform.position` travels as `fixed-point-position/1`.
fn agreed(features: &str) -> LinkFeatures {
    use crate::less::encoding::{EncodingId, EncodingRule};
    use crate::less::ids::ComponentId;
    use crate::less::value_type::ValueType;
    let rule = EncodingRule {
        uri_prefix: "urn:lessgate:test:".into(),
        component: ComponentId(1),
        value_type: ValueType::Vector(3, Box::new(ValueType::Float32)),
        encoding: EncodingId::FixedPointPosition,
    };
    LinkFeatures::from_tokens(features::parse_tokens(features).unwrap(), vec![rule])
}

impl Fixture {
    fn decode_on(&self, frame: &[u8], framing: Framing, link: Option<&LinkFeatures>) -> PacketJson {
        let mut sender = crate_knowledge(300);
        let schemas = Schemas {
            link,
            ..self.schemas()
        };
        decode_frame(
            frame,
            framing,
            &[key()],
            schemas,
            &mut sender,
            &crate_knowledge(9),
        )
        .unwrap()
    }
}

/// `info.counter = 5` keyed (docs/less-wire.md §16.8), `transform.position
/// = (1, -1.5, 0)` keyed and compact (§16.3), and the same position in an
/// update-entity.
const DEFAULT_LINK_MESSAGES: &str = "22ac0405 19ac04000204f40f0040 06ac0401010101000204f40f0040";

#[test]
fn keyed_updates_and_compact_values_decode_and_encode_back() {
    let fixture = Fixture::new();
    let frame = stream_frame(3, &DEFAULT_LINK_MESSAGES.replace(' ', ""));
    let link = agreed("compact,keyed");
    let json = fixture.decode_on(&frame, Framing::StreamPacket, Some(&link));
    assert_eq!(json.undecoded, None);
    let text = serde_json::to_string(&json.messages).unwrap();
    assert_eq!(
        text,
        concat!(
            r#"[{"offset":11,"kind":"update-property","entity":300,"component":2,"property":2,"uri":"urn:lessgate:test:crate","name":"counter","value":{"type":"integer","value":5}},"#,
            r#"{"offset":15,"kind":"update-property","entity":300,"component":1,"property":1,"uri":"urn:lessgate:test:crate","name":"position","value":{"type":"vector(3, float32)","value":[1.0,-1.5,0.0]},"encoding":"fixed-point-position/1","encoded":"000204f40f0040"},"#,
            r#"{"offset":25,"kind":"update-entity","entity":300,"uri":"urn:lessgate:test:crate","components":[{"component":1,"name":"transform","properties":[{"property":1,"name":"position","type":"vector(3, float32)","value":[1.0,-1.5,0.0],"encoding":"fixed-point-position/1","encoded":"000204f40f0040"}]}]}]"#
        )
    );
    let back: PacketJson = serde_json::from_str(&serde_json::to_string(&json).unwrap()).unwrap();
    assert_eq!(back, json);
    assert_eq!(encode_frame(&back, Some(&key())).unwrap(), frame);
    // Without the bytes as sent, the value is encoded in the named encoding.
    let retyped = serde_json::to_string(&json)
        .unwrap()
        .replace(r#","encoded":"000204f40f0040""#, "");
    let retyped: PacketJson = serde_json::from_str(&retyped).unwrap();
    assert_eq!(encode_frame(&retyped, Some(&key())).unwrap(), frame);
}

#[test]
fn a_keyed_code_needs_the_features_or_breaks_a_plain_link() {
    let fixture = Fixture::new();
    let frame = stream_frame(1, "22ac0405");
    let unknown = fixture.decode_on(&frame, Framing::StreamPacket, None);
    let undecoded = unknown.undecoded.unwrap();
    assert!(undecoded.needs_context);
    assert!(
        undecoded.error.contains("--features"),
        "{}",
        undecoded.error
    );
    let plain = agreed("plain");
    let malformed = fixture.decode_on(&frame, Framing::StreamPacket, Some(&plain));
    assert!(!malformed.undecoded.unwrap().needs_context);
    // Keyed, but the entity was introduced earlier and nobody said how:
    // the key is shown, the value's length is unknown.
    let link = agreed("keyed");
    let mut nobody = SpaceKnowledge::default();
    let schemas = Schemas {
        link: Some(&link),
        ..fixture.schemas()
    };
    let packet = decode_frame(
        &frame,
        Framing::StreamPacket,
        &[],
        schemas,
        &mut nobody,
        &SpaceKnowledge::default(),
    )
    .unwrap();
    let undecoded = packet.undecoded.unwrap();
    assert!(undecoded.needs_context);
    assert_eq!(undecoded.kind.as_deref(), Some("update-property"));
    assert_eq!(undecoded.property.as_deref(), Some("2.2"));
}

#[test]
fn bulk_packets_decode_decompressed_and_encode_back() {
    use crate::less::bulk::{seal_bulk, Form as SealedForm};
    use crate::less::packet::DatagramFraming;
    let fixture = Fixture::new();
    // Many introductions of crates: compressible.
    let mut messages = String::new();
    for entity in 1000..1100u32 {
        let mut id = Vec::new();
        crate::less::codec::write_u64(&mut id, u64::from(entity));
        messages.push_str(&format!("0405{}00", hex::encode(id)));
    }
    let framing = DatagramFraming {
        sequence: 1,
        ack_last: 0,
        ack_bits: 1,
    };
    let sealed = seal_bulk(&key(), &framing, 5, 100, &hex::decode(&messages).unwrap());
    assert_eq!(sealed.form, SealedForm::Zstd);
    let link = agreed("default");
    let json = fixture.decode_on(&sealed.bytes, Framing::StreamDatagram, Some(&link));
    assert_eq!(json.form, Some(packet::Form::Zstd));
    assert_eq!(json.signature, SignatureCheck::Valid);
    assert_eq!((json.timestamp, json.messages.len()), (5, 100));
    assert_eq!(json.undecoded, None);
    assert!(matches!(
        json.messages[99].body,
        MessageBody::IntroduceEntity { entity: 1099, .. }
    ));
    let back: PacketJson = serde_json::from_str(&serde_json::to_string(&json).unwrap()).unwrap();
    assert_eq!(encode_frame(&back, Some(&key())).unwrap(), sealed.bytes);
}

/// Hostile frames on a link of default features: every truncation and every
/// single-byte change of a keyed, compact frame and of a bulk packet decodes
/// to a packet or an error, never a panic (compact values, keyed codes and
/// the decompressor see every byte value), and none passes as signed.
#[test]
fn damaged_default_link_frames_never_panic() {
    use crate::less::bulk::seal_bulk;
    use crate::less::packet::DatagramFraming;
    let fixture = Fixture::new();
    let link = agreed("default");
    let keyed = stream_frame(3, &DEFAULT_LINK_MESSAGES.replace(' ', ""));
    let framing = DatagramFraming {
        sequence: 1,
        ack_last: 0,
        ack_bits: 1,
    };
    let messages = hex::decode("0405ac0400".repeat(40)).unwrap();
    let bulk = seal_bulk(&key(), &framing, 5, 40, &messages).bytes;
    for (frame, framing) in [
        (keyed, Framing::StreamPacket),
        (bulk, Framing::StreamDatagram),
    ] {
        let mut damaged: Vec<Vec<u8>> = (0..frame.len()).map(|n| frame[..n].to_vec()).collect();
        for at in 0..frame.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff, frame[at] ^ 0x55] {
                let mut copy = frame.clone();
                copy[at] = value;
                damaged.push(copy);
            }
        }
        for bytes in damaged {
            let mut sender = crate_knowledge(300);
            let schemas = Schemas {
                link: Some(&link),
                ..fixture.schemas()
            };
            let decoded = decode_frame(
                &bytes,
                framing,
                &[key()],
                schemas,
                &mut sender,
                &crate_knowledge(9),
            );
            // Whatever decodes of a changed frame is reported as not signed.
            if let (Ok(packet), true) = (decoded, bytes != frame) {
                assert_ne!(
                    packet.signature,
                    SignatureCheck::Valid,
                    "{}",
                    hex::encode(&bytes)
                );
            }
        }
    }
}
