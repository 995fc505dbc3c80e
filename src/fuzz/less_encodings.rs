//! Entry points for the fuzz targets `less_encodings` and
//! `less_keyed_update` in `tests/fuzz`: the compact encodings (docs/less-wire.md
//! §16) and the messages that carry them, decoded on a link
//! that agreed every encoding and the keyed update message. Kept in the
//! library so `tests/less_fuzz_corpus.rs` replays the saved corpora on
//! stable Rust. Each function must return for any input; a panic is a bug.

use std::sync::{Arc, OnceLock};

use crate::federation::encodings::encoding_rules;
use crate::federation::mapping::attribute_key;
use crate::federation::schemas::schema_registry;
use crate::less::codec::Reader;
use crate::less::encoding::link::offered_features;
use crate::less::encoding::rotation::{
    angle_code, angle_max_error_degrees, ANGLE_BITS, YAW_ANGLE_BITS,
};
use crate::less::encoding::{EncodingId, EncodingRule, LinkEncodings};
use crate::less::ids::{ComponentId, Local, ObjectId, PropertyKey, Remote, TypeId};
use crate::less::message::{encode_introduce, encode_update, DecodeContext, Message};
use crate::less::property_list::{PropertyValue, WireValue};
use crate::less::schema::{ConnectionSchema, SchemaRegistry, TypeSchema};
use crate::less::schema_toml::types_from_toml;
use crate::less::value::Value;
use crate::less::value_type::ValueType;

const TEST_TYPES: &str = include_str!("../../schemas/less/test-types.toml");
pub(crate) const CRATE: &str = "urn:lessgate:test:crate";
pub(crate) const PLACEABLE: &str = "urn:lessgate:tundra:component:Placeable";

/// The test crate type, whose transform component (1) has a position and an
/// orientation, and the Tundra Placeable, whose Transform attribute the
/// federation sends as `tundra-transform/1`.
pub(crate) struct EncodedFixtures {
    pub(crate) registry: Arc<SchemaRegistry>,
    pub(crate) connection: Arc<ConnectionSchema>,
    pub(crate) crate_type: Arc<TypeSchema>,
    pub(crate) placeable: Arc<TypeSchema>,
    /// Every encoding agreed, the keyed update message, and rules that
    /// reach every encoding.
    pub(crate) encodings: Arc<LinkEncodings>,
    placeable_table: Arc<[Option<EncodingId>]>,
    crate_table: Arc<[Option<EncodingId>]>,
}

pub(crate) fn encoded_fixtures() -> &'static EncodedFixtures {
    static FIXTURES: OnceLock<EncodedFixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let mut registry = types_from_toml(TEST_TYPES).expect("test-types.toml parses");
        let tundra = schema_registry(&crate::tundra::Registry::builtin());
        for uri in tundra.uris() {
            registry.insert(TypeSchema::clone(tundra.get(uri).expect("listed uri")));
        }
        let crate_type = registry.get(CRATE).expect("crate type exists").clone();
        let placeable = registry.get(PLACEABLE).expect("Placeable exists").clone();
        let floats = |n| ValueType::Vector(n, Box::new(ValueType::Float32));
        let mut rules = encoding_rules();
        for (value_type, encoding) in [
            (floats(3), EncodingId::FixedPointPosition),
            (floats(4), EncodingId::QuatSmallestThree),
        ] {
            rules.push(EncodingRule {
                uri_prefix: CRATE.to_owned(),
                component: ComponentId(1),
                value_type,
                encoding,
            });
        }
        let encodings = LinkEncodings::from_features(&offered_features(), rules);
        EncodedFixtures {
            placeable_table: encodings.table(&placeable),
            crate_table: encodings.table(&crate_type),
            registry: Arc::new(registry),
            connection: Arc::new(ConnectionSchema::builtin()),
            crate_type,
            placeable,
            encodings: Arc::new(encodings),
        }
    })
}

/// Sender type 1 and entities 1 and 3 are crates, type 2 and entity 2 a
/// Placeable; entities 2 and 3 come with their per-type encoding table (as
/// a session passes it), entity 1 without (the rules are looked up).
struct EncodedContext;

impl EncodedContext {
    fn schema_of(entity: u64) -> Option<Arc<TypeSchema>> {
        let fixtures = encoded_fixtures();
        match entity {
            1 | 3 => Some(fixtures.crate_type.clone()),
            2 => Some(fixtures.placeable.clone()),
            _ => None,
        }
    }

    fn table_of(entity: u64) -> Option<Arc<[Option<EncodingId>]>> {
        let fixtures = encoded_fixtures();
        match entity {
            2 => Some(fixtures.placeable_table.clone()),
            3 => Some(fixtures.crate_table.clone()),
            _ => None,
        }
    }
}

impl DecodeContext<Remote, Local> for EncodedContext {
    fn sender_type(&self, type_id: TypeId<Remote>) -> Option<Arc<TypeSchema>> {
        match type_id.get() {
            1 => Self::schema_of(1),
            2 => Self::schema_of(2),
            _ => None,
        }
    }
    fn sender_type_encodings(&self, type_id: TypeId<Remote>) -> Option<Arc<[Option<EncodingId>]>> {
        match type_id.get() {
            1 => Self::table_of(3),
            2 => Self::table_of(2),
            _ => None,
        }
    }
    fn sender_entity_type(&self, entity: ObjectId<Remote>) -> Option<Arc<TypeSchema>> {
        Self::schema_of(entity.get())
    }
    fn sender_entity_encodings(
        &self,
        entity: ObjectId<Remote>,
    ) -> Option<Arc<[Option<EncodingId>]>> {
        Self::table_of(entity.get())
    }
    fn receiver_entity_type(&self, entity: ObjectId<Local>) -> Option<Arc<TypeSchema>> {
        (entity.get() == 1).then(|| encoded_fixtures().crate_type.clone())
    }
    fn connection(&self) -> &ConnectionSchema {
        &encoded_fixtures().connection
    }
    fn encodings(&self) -> &LinkEncodings {
        &encoded_fixtures().encodings
    }
}

/// `values` with the encoding the link agreed for each.
fn wire_values<'a>(
    values: &'a [PropertyValue],
    schema: Option<&TypeSchema>,
    encodings: &LinkEncodings,
) -> Vec<WireValue<'a>> {
    values
        .iter()
        .map(|v| WireValue {
            key: &v.key,
            value: &v.value,
            encoding: schema.and_then(|s| encodings.for_property(s, &v.key)),
        })
        .collect()
}

/// The message as the link carries it: entity values in their agreed
/// encoding, a single-property update in the keyed form.
fn encode_on_link(message: &Message<Remote, Local>, schema: Option<&TypeSchema>) -> Vec<u8> {
    let encodings = &encoded_fixtures().encodings;
    let mut out = Vec::new();
    match message {
        Message::UpdateEntity { entity, values } => {
            let wires = wire_values(values, schema, encodings);
            encode_update(&mut out, *entity, &wires, encodings);
        }
        Message::IntroduceEntity {
            type_id,
            entity,
            values,
        } => {
            let wires = wire_values(values, schema, encodings);
            encode_introduce(&mut out, *type_id, *entity, &wires);
        }
        other => other.encode(&mut out),
    }
    out
}

/// The schema a message's values belong to, if it carries entity values.
fn message_schema(message: &Message<Remote, Local>) -> Option<Arc<TypeSchema>> {
    match message {
        Message::UpdateEntity { entity, .. } => EncodedContext::schema_of(entity.get()),
        Message::IntroduceEntity { type_id, .. } => EncodedContext.sender_type(*type_id),
        _ => None,
    }
}

/// The properties a message carries, sorted: what a lossy encoding keeps.
/// The encoder groups values by component, so nested components may come
/// back in another order.
fn carried_keys(message: &Message<Remote, Local>) -> Vec<String> {
    match message {
        Message::UpdateEntity { values, .. } | Message::IntroduceEntity { values, .. } => {
            let mut keys: Vec<String> = values.iter().map(|v| v.key.to_string()).collect();
            keys.sort();
            keys
        }
        _ => Vec::new(),
    }
}

/// `less_keyed_update`: the first byte bounds the message count; the rest
/// is messages (keyed update-property codes 16-127 included) decoded on a
/// link with every encoding agreed. A decoded message re-encoded as the
/// link carries it must decode again, whole, to the same properties.
/// Returns how many messages decoded, so tests can check the seeds reach
/// the decoders.
pub fn keyed_update(data: &[u8]) -> usize {
    let Some((&count, messages)) = data.split_first() else {
        return 0;
    };
    decode_encoded(usize::from(count), messages)
}

/// Decodes up to `count` messages as [`keyed_update`] does, checking each
/// re-encodes; returns how many decoded.
pub(crate) fn decode_encoded(count: usize, messages: &[u8]) -> usize {
    let mut reader = Reader::new(messages);
    let mut decoded = 0;
    for _ in 0..count {
        let Ok(message) = Message::<Remote, Local>::decode(&mut reader, &EncodedContext) else {
            break;
        };
        decoded += 1;
        let schema = message_schema(&message);
        let bytes = encode_on_link(&message, schema.as_deref());
        let mut again_reader = Reader::new(&bytes);
        let again = Message::<Remote, Local>::decode(&mut again_reader, &EncodedContext)
            .unwrap_or_else(|e| panic!("{} re-encoded does not decode: {e}", hex::encode(&bytes)));
        assert!(again_reader.is_empty(), "re-encoding decodes whole");
        assert_eq!(again.code(), message.code(), "same message");
        assert_eq!(carried_keys(&again), carried_keys(&message), "same keys");
    }
    decoded
}

/// How many floats the values of `encoding` have.
fn float_count(encoding: EncodingId) -> usize {
    match encoding.value_type() {
        ValueType::Vector(n, _) => n,
        _ => unreachable!("every encoding is of float vectors"),
    }
}

/// Encodes `value`, decodes it back, and checks the encoding is
/// self-delimiting; returns the decoded value.
fn encode_and_decode(encoding: EncodingId, value: &Value) -> (Vec<u8>, Value) {
    let bytes = encoding
        .encode(value)
        .expect("a value of the encoding's type encodes");
    let mut reader = Reader::new(&bytes);
    let back = encoding
        .decode(&mut reader)
        .unwrap_or_else(|e| panic!("{encoding:?} {} does not decode: {e}", hex::encode(&bytes)));
    assert!(
        reader.is_empty(),
        "{encoding:?}: the value is self-delimiting"
    );
    assert!(back.conforms_to(&encoding.value_type()));
    (bytes, back)
}

fn floats_of(value: &Value) -> Vec<f32> {
    match value {
        Value::Floats(floats) => floats.as_slice().to_vec(),
        other => panic!("not floats: {other:?}"),
    }
}

/// The encoding a selector byte picks: bits 0-1, and bit 3 for the fifth
/// and later (bit 2 is the direction).
fn encoding_index(selector: u8) -> usize {
    usize::from((selector & 3) | (selector >> 1 & 4)) % EncodingId::ALL.len()
}

/// `less_encodings`: the first byte picks the encoding (bits 0, 1 and 3) and
/// whether the rest is encoded bytes to decode (bit 2 clear) or
/// little-endian `f32`s to encode (bit 2 set). A decoded value re-encodes
/// to bytes that decode; the exact encodings (fixed-point position, half
/// floats, the angles of `tundra-transform/2`) are stable after one round;
/// a position in the fixed-point range comes back within 1/512, and one
/// outside it exactly; so do `tundra-transform/2` angles within 0.088°.
pub fn encodings(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let encoding = EncodingId::ALL[encoding_index(selector)];
    if selector & 4 == 0 {
        let mut reader = Reader::new(rest);
        let Ok(value) = encoding.decode(&mut reader) else {
            return;
        };
        assert!(value.conforms_to(&encoding.value_type()));
        let (bytes, back) = encode_and_decode(encoding, &value);
        if matches!(
            encoding,
            EncodingId::FixedPointPosition | EncodingId::Float3Half
        ) {
            let (again, _) = encode_and_decode(encoding, &back);
            assert_eq!(again, bytes, "{encoding:?} is stable after one round");
        }
        if encoding == EncodingId::TundraTransformAngles {
            // The value is stable (the bytes may take a shorter form once
            // angles that quantize to 0 are 0): a second link changes
            // nothing.
            let (_, again) = encode_and_decode(encoding, &back);
            let bits = |v: &Value| floats_of(v).iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&again),
                bits(&back),
                "{encoding:?} is stable after one round"
            );
        }
        return;
    }
    let n = float_count(encoding);
    let mut floats = vec![0f32; n];
    for (float, chunk) in floats.iter_mut().zip(rest.chunks_exact(4)) {
        *float = f32::from_le_bytes(chunk.try_into().expect("chunks of 4"));
    }
    let (_, back) = encode_and_decode(encoding, &Value::floats(&floats));
    if encoding == EncodingId::TundraTransformAngles {
        // Angles in the code range come back as written within the bound;
        // any other rotation comes back exact.
        let got = floats_of(&back);
        let (sent, got) = (&floats[3..6], &got[3..6]);
        let yaw_only = sent[0] == 0.0 && sent[2] == 0.0;
        let code_bits = if yaw_only && angle_code(YAW_ANGLE_BITS, sent[1]).is_some() {
            Some(YAW_ANGLE_BITS)
        } else if sent.iter().all(|a| angle_code(ANGLE_BITS, *a).is_some()) {
            Some(ANGLE_BITS)
        } else {
            None
        };
        if let Some(code_bits) = code_bits {
            for (s, g) in sent.iter().zip(got) {
                let error = (f64::from(*s) - f64::from(*g)).abs();
                assert!(
                    error <= angle_max_error_degrees(code_bits),
                    "{s} came back as {g}"
                );
            }
        } else {
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(got), bits(sent), "out of range goes exact");
        }
    }
    if encoding == EncodingId::FixedPointPosition {
        let sent: [f32; 3] = floats.as_slice().try_into().expect("3 floats");
        let got = floats_of(&back);
        if crate::less::encoding::position::fits_fixed(sent) {
            for (s, g) in sent.iter().zip(&got) {
                let error = (f64::from(*s) - f64::from(*g)).abs();
                assert!(error <= 1.0 / 512.0, "{s} came back as {g}");
            }
        } else {
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&sent), "out of range goes exact");
        }
    }
}

fn crate_key(property: u64) -> PropertyKey {
    PropertyKey::new(1, property)
}

fn value(key: PropertyKey, value: Value) -> PropertyValue {
    PropertyValue { key, value }
}

/// Messages of every encoded kind, as the link carries them: keyed updates
/// of a crate's position and orientation (rules looked up, and from the
/// type's table) and of a Placeable's Transform, introductions, a
/// two-value update, and a position outside the fixed-point range.
pub(crate) fn encoded_messages() -> Vec<Vec<u8>> {
    let fixtures = encoded_fixtures();
    let transform = || Value::floats(&[1.5, -2.0, 3.25, 0.0, 90.0, 45.0, 1.0, 1.0, 2.0]);
    let messages: Vec<Message<Remote, Local>> = vec![
        Message::UpdateEntity {
            entity: ObjectId::new(1),
            values: vec![value(crate_key(1), Value::floats(&[1.0, 2.0, 3.0]))],
        },
        Message::UpdateEntity {
            entity: ObjectId::new(3),
            values: vec![value(crate_key(2), Value::floats(&[0.0, 0.0, 0.0, 1.0]))],
        },
        Message::UpdateEntity {
            entity: ObjectId::new(2),
            values: vec![value(attribute_key(0), transform())],
        },
        Message::UpdateEntity {
            entity: ObjectId::new(1),
            values: vec![
                value(crate_key(1), Value::floats(&[1e6, -0.5, 0.25])),
                value(crate_key(3), Value::Float64(2.0)),
            ],
        },
        Message::IntroduceEntity {
            type_id: TypeId::new(1),
            entity: ObjectId::new(3),
            values: vec![
                value(crate_key(1), Value::floats(&[-511.0, 0.0, 511.0])),
                value(crate_key(2), Value::floats(&[0.5, 0.5, 0.5, 0.5])),
            ],
        },
        Message::IntroduceEntity {
            type_id: TypeId::new(2),
            entity: ObjectId::new(2),
            values: vec![value(attribute_key(0), transform())],
        },
    ];
    messages
        .iter()
        .map(|message| {
            let schema = message_schema(message);
            let bytes = encode_on_link(message, schema.as_deref());
            debug_assert!(fixtures.encodings.update_property());
            bytes
        })
        .collect()
}

/// Seed inputs for `less_keyed_update`: each encoded message alone, and
/// all of them in one input.
pub fn keyed_update_seeds() -> Vec<(String, Vec<u8>)> {
    let messages = encoded_messages();
    let mut seeds: Vec<(String, Vec<u8>)> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (format!("seed-message-{i}"), [&[1u8][..], m].concat()))
        .collect();
    let mut all = vec![messages.len() as u8];
    messages.iter().for_each(|m| all.extend_from_slice(m));
    seeds.push(("seed-all".to_owned(), all));
    seeds
}

/// Seed inputs for `less_encodings`: each encoding's bytes for a value in
/// its compact form and one in its exact fallback, and the floats of both.
pub fn encodings_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (index, encoding) in EncodingId::ALL.iter().enumerate() {
        let n = float_count(*encoding);
        let compact: Vec<f32> = match n {
            3 => vec![1.0, -2.5, 100.0],
            4 => vec![0.0, 0.0, 0.70710677, 0.70710677],
            _ => vec![1.0, 2.0, 3.0, 10.0, 90.0, -45.0, 1.0, 1.0, 1.0],
        };
        let fallback: Vec<f32> = compact.iter().map(|f| f * 1e4 + 0.1).collect();
        for (name, floats) in [("compact", compact), ("fallback", fallback)] {
            let encoded = encoding
                .encode(&Value::floats(&floats))
                .expect("floats of the encoding's type encode");
            let position = EncodingId::ALL
                .iter()
                .position(|e| e == encoding)
                .expect("listed") as u8;
            let selector = (position & 3) | (position & 4) << 1;
            assert_eq!(encoding_index(selector), usize::from(position));
            seeds.push((
                format!("seed-{index}-{name}-bytes"),
                [&[selector][..], &encoded].concat(),
            ));
            let mut raw = vec![selector | 4];
            floats
                .iter()
                .for_each(|f| raw.extend_from_slice(&f.to_le_bytes()));
            seeds.push((format!("seed-{index}-{name}-floats"), raw));
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_accept_edge_inputs() {
        for input in [
            &[][..],
            &[0],
            &[4],
            &[7, 0xff, 0xff, 0xff, 0x7f],
            &[0xff; 64],
        ] {
            encodings(input);
            keyed_update(input);
        }
    }

    #[test]
    fn seeds_reach_the_decoders() {
        for (name, seed) in keyed_update_seeds() {
            let expected = usize::from(seed[0]);
            assert_eq!(keyed_update(&seed), expected, "{name}");
        }
        for (_, seed) in encodings_seeds() {
            encodings(&seed);
        }
    }

    #[test]
    fn every_fixture_table_names_an_encoding() {
        let fixtures = encoded_fixtures();
        assert!(fixtures.placeable_table.iter().any(Option::is_some));
        assert_eq!(
            fixtures.crate_table.iter().filter(|e| e.is_some()).count(),
            2
        );
    }
}
