//! Property tests of the Tundra codec: decoding never panics on any frame,
//! and whatever decodes re-encodes stably (`encode(decode(y)) == y` for the
//! canonical `y = encode(decode(x))`, compared as bytes so NaN payloads
//! count too). Inputs are random frames and mutations of the saved fuzz
//! corpus, which reach deep into valid messages.

mod fuzz_corpus;

use std::sync::OnceLock;

use lessgate::tundra::bits::{BitReader, BitWriter};
use lessgate::tundra::edit_attributes::{self, AttributeEdit, EditRef, IndexingMethod};
use lessgate::tundra::messages::{DecodeContext, Message};
use lessgate::tundra::{AttributeType, AttributeValue, ProtocolVersion, Registry};
use proptest::prelude::*;

/// The saved `tundra_frame` corpus, read once per test binary (every case
/// picks from it).
fn frames() -> &'static [Vec<u8>] {
    static FRAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FRAMES.get_or_init(|| {
        fuzz_corpus::corpus("tundra_frame")
            .into_iter()
            .map(|(_, bytes)| bytes)
            .collect()
    })
}

fn message_id() -> impl Strategy<Value = u16> {
    prop_oneof![4 => 100u16..=125, 1 => any::<u16>()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_frames_never_panic_and_are_stable(
        selector in 0u8..4,
        id in message_id(),
        payload in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut data = vec![selector];
        data.extend_from_slice(&id.to_le_bytes());
        data.extend_from_slice(&payload);
        lessgate::fuzz::tundra_frame::decode_frame(&data);
    }

    #[test]
    fn mutated_corpus_frames_never_panic_and_are_stable(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let corpus = frames();
        let mut data = pick.get(corpus).clone();
        for (at, byte) in edits {
            let len = data.len();
            if len > 3 {
                // Keep the selector and message id, mutate the payload.
                data[3 + at.index(len - 3)] = byte;
            }
        }
        if truncate && data.len() > 3 {
            let keep = 3 + cut.index(data.len() - 3);
            data.truncate(keep);
        }
        lessgate::fuzz::tundra_frame::decode_frame(&data);
    }

    #[test]
    fn canonical_frames_are_byte_identical(pick in any::<prop::sample::Index>(), protocol in 1u32..=4) {
        let registry = Registry::builtin();
        let corpus = frames();
        let data = pick.get(corpus);
        let ctx = DecodeContext { protocol_version: ProtocolVersion(protocol), registry: &registry };
        if let Ok(m) = Message::decode_frame(&data[1..], &ctx) {
            if let Ok(y) = m.encode_frame(ProtocolVersion(protocol)) {
                let again = Message::decode_frame(&y, &ctx).unwrap();
                // Compared as text: a NaN attribute (the grown corpus has
                // them) is unequal to itself; its bits are checked below.
                prop_assert_eq!(format!("{again:?}"), format!("{m:?}"));
                prop_assert_eq!(again.encode_frame(ProtocolVersion(protocol)).unwrap(), y);
            }
        }
    }

    #[test]
    fn vle_round_trips(value in 0u32..=0x3FFF_FFFF, lead in 0u32..8) {
        let mut w = BitWriter::new();
        w.bits(0, lead);
        w.vle(value).unwrap();
        let expected_bytes = if value < 0x80 { 1 } else if value < 0x4000 { 2 } else { 4 };
        prop_assert_eq!(w.bit_len(), lead as usize + 8 * expected_bytes);
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        r.bits(lead, "lead").unwrap();
        prop_assert_eq!(r.vle("v").unwrap(), value);
    }

    #[test]
    fn edit_blocks_round_trip(
        slot_types in proptest::collection::vec(prop::option::weighted(0.9, 1u8..=17), 1..40),
        changed in proptest::collection::vec((any::<prop::sample::Index>(), any::<i32>()), 0..8),
    ) {
        let slots: Vec<Option<AttributeType>> = slot_types.iter().map(|t| t.and_then(AttributeType::from_id)).collect();
        let mut edits = Vec::new();
        for (at, seed) in changed {
            let index = at.index(slots.len());
            if let Some(ty) = slots[index] {
                edits.push(AttributeEdit { index: index as u8, value: value_of(ty, seed) });
            }
        }
        let bytes = edit_attributes::encode_block(&edits, &slots).unwrap();
        let decoded = edit_attributes::decode_block(&bytes, &slots).unwrap();
        edits.sort_by_key(|e| e.index);
        edits.reverse();
        edits.dedup_by_key(|e| e.index);
        edits.reverse();
        let method = edit_attributes::choose_method(edits.len(), slots.len());
        prop_assert_eq!(decoded.method, method);
        // Values are compared through their bytes: seeds may make NaNs.
        let indices: Vec<u8> = decoded.edits.iter().map(|e| e.index).collect();
        prop_assert_eq!(indices, edits.iter().map(|e| e.index).collect::<Vec<_>>());
        let expected = edit_attributes::encode_block_with(
            &edit_attributes::AttributeEdits { method, edits: edits.clone() },
            &slots,
        ).unwrap();
        prop_assert_eq!(edit_attributes::encode_block_with(&decoded, &slots).unwrap(), expected.clone());
        prop_assert_eq!(expected, bytes.clone());
        // The by-reference writer the tick uses gives the same bytes, and
        // the size it predicts is exact.
        let refs: Vec<EditRef<'_>> = edits.iter().map(|e| EditRef { index: e.index, value: &e.value }).collect();
        let mut w = BitWriter::new();
        edit_attributes::write_block(&refs, slots.as_slice(), &mut w).unwrap();
        prop_assert_eq!(edit_attributes::sorted_block_len(&refs, slots.len()), bytes.len());
        prop_assert_eq!(w.finish(), bytes.clone());
        if method == IndexingMethod::Bitmask {
            prop_assert_eq!(bytes[0] & 1, 1);
        }
    }

    #[test]
    fn edit_blocks_decode_any_bytes(
        slot_types in proptest::collection::vec(prop::option::weighted(0.9, 1u8..=17), 0..40),
        data in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let slots: Vec<Option<AttributeType>> = slot_types.iter().map(|t| t.and_then(AttributeType::from_id)).collect();
        if let Ok(decoded) = edit_attributes::decode_block(&data, &slots) {
            let bytes = edit_attributes::encode_block_with(&decoded, &slots).unwrap();
            let again = edit_attributes::decode_block(&bytes, &slots).unwrap();
            prop_assert_eq!(edit_attributes::encode_block_with(&again, &slots).unwrap(), bytes);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// The in-place EditAttributes reader the server uses decodes exactly
    /// what the owned decoder does, and fails exactly where it fails.
    #[test]
    fn edit_attributes_view_equals_owned_decode(
        data in proptest::collection::vec(any::<u8>(), 0..96),
        block_bytes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..4),
    ) {
        let registry = Registry::builtin();
        let ctx = DecodeContext { protocol_version: ProtocolVersion(3), registry: &registry };
        // Random bytes, and well-formed headers around random blocks.
        let mut framed = vec![0u8, 0x2a];
        for (i, block) in block_bytes.iter().enumerate() {
            framed.push(i as u8 + 1);
            framed.push(block.len() as u8);
            framed.extend_from_slice(block);
        }
        for payload in [data, framed] {
            let owned = Message::decode(113, &payload, &ctx);
            let view = Message::decode_edit_attributes(&payload);
            match (&owned, &view) {
                (Ok(Message::EditAttributes(owned)), Ok(view)) => {
                    let owned_view = owned.view();
                    prop_assert_eq!(&owned_view, view);
                    prop_assert_eq!(view.scene_id, owned.scene_id);
                    prop_assert_eq!(view.entity_id, owned.entity_id);
                    let blocks: Vec<_> = view.blocks.iter().map(|b| (b.component_id, b.data.to_vec())).collect();
                    let expected: Vec<_> = owned.blocks.iter().map(|b| (b.component_id, b.data.clone())).collect();
                    prop_assert_eq!(blocks, expected);
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (a, b) => prop_assert!(false, "owned {:?}, view {:?}", a, b),
            }
        }
    }
}

/// A value of type `ty` derived from `seed`.
fn value_of(ty: AttributeType, seed: i32) -> AttributeValue {
    let text = format!("{}", seed.rem_euclid(1000));
    let f = seed as f32 / 7.0;
    match ty {
        AttributeType::String => AttributeValue::String(format!("s{seed}")),
        AttributeType::Int => AttributeValue::Int(seed),
        AttributeType::Real => AttributeValue::Real(f),
        AttributeType::Bool => AttributeValue::Bool(seed % 2 == 0),
        AttributeType::UInt => AttributeValue::UInt(seed as u32),
        AttributeType::AssetReference => AttributeValue::AssetReference(text),
        AttributeType::AssetReferenceList => {
            AttributeValue::AssetReferenceList(vec![text; (seed & 3) as usize])
        }
        AttributeType::EntityReference => AttributeValue::EntityReference(text),
        AttributeType::Variant => AttributeValue::Variant(text),
        AttributeType::VariantList => AttributeValue::VariantList(vec![text; (seed & 3) as usize]),
        other => {
            let default = AttributeValue::default_for(other);
            let mut w = BitWriter::new();
            default.write(&mut w).unwrap();
            // Fill the fixed-size value with bytes derived from the seed.
            let len = w.byte_len();
            let bytes: Vec<u8> = (0..len)
                .map(|i| (seed as u32).rotate_left(i as u32 * 3) as u8)
                .collect();
            AttributeValue::read(other, &mut BitReader::new(&bytes)).unwrap()
        }
    }
}
