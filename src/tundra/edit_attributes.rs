//! EditAttributes blocks (docs/tundra-wire.md §4.9): the per-component bit stream that
//! says which attributes changed and carries their new values.
//!
//! A block starts with one bit: 0 = index list (`u8 count`, then `u8 index,
//! value` per change), 1 = bitmask (for every attribute slot a changed bit,
//! directly followed by the value when set; values are not byte aligned).
//! Tundra's writer picks indices when `changed*8 + 8 <= slots`, else the
//! bitmask ([`choose_method`]). Decoding needs the component's current slot
//! types (static attributes plus dynamic ones, `None` for an empty slot);
//! the decoder stops where Tundra's reader stops ("skipping to next
//! component": an index out of range or an empty slot; for the bitmask the
//! end of the block), keeping what it read up to there.

use serde::{Deserialize, Serialize};

use super::attribute::{AttributeType, AttributeValue};
use super::bits::{BitReader, BitWriter};
use super::component::MAX_ATTRIBUTE_BLOCK_BYTES;
use super::error::{DecodeError, EncodeError};
use super::registry::MAX_ATTRIBUTES_PER_COMPONENT;

/// How a block names its changed attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexingMethod {
    /// First bit 0: `u8 count` then `(u8 index, value)` pairs.
    Indices,
    /// First bit 1: a changed bit per slot, each followed by its value.
    Bitmask,
}

/// One changed attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeEdit {
    pub index: u8,
    pub value: AttributeValue,
}

/// A decoded EditAttributes block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeEdits {
    pub method: IndexingMethod,
    pub edits: Vec<AttributeEdit>,
}

/// Tundra's choice (`bitsMethod1 = n*8 + 8; bitsMethod2 = attrs.size();`
/// indices if `bitsMethod1 <= bitsMethod2`).
pub fn choose_method(changed: usize, slot_count: usize) -> IndexingMethod {
    if changed * 8 + 8 <= slot_count {
        IndexingMethod::Indices
    } else {
        IndexingMethod::Bitmask
    }
}

/// The method bit of a block, if it has one.
pub fn block_method(data: &[u8]) -> Option<IndexingMethod> {
    data.first().map(|b| {
        if b & 1 == 0 {
            IndexingMethod::Indices
        } else {
            IndexingMethod::Bitmask
        }
    })
}

/// A component's attribute slot types, however the caller holds them (a
/// list of types, or the scene's slots read in place): decoding and
/// encoding a block only ask for one slot at a time.
pub trait SlotTypes {
    /// Number of slots, static and dynamic, holes included.
    fn slot_count(&self) -> usize;
    /// The type in slot `index`: `None` past the end, `Some(None)` for an
    /// empty slot.
    fn slot_type(&self, index: usize) -> Option<Option<AttributeType>>;
}

impl SlotTypes for [Option<AttributeType>] {
    fn slot_count(&self) -> usize {
        self.len()
    }

    fn slot_type(&self, index: usize) -> Option<Option<AttributeType>> {
        self.get(index).copied()
    }
}

/// Decodes a block against the component's attribute slots.
pub fn decode_block(
    data: &[u8],
    slots: &[Option<AttributeType>],
) -> Result<AttributeEdits, DecodeError> {
    let mut edits = Vec::new();
    let method = decode_block_each(data, slots, |index, value| {
        edits.push(AttributeEdit { index, value })
    })?;
    Ok(AttributeEdits { method, edits })
}

/// Decodes a block, handing each change to `each` as it is read, so no
/// list is built. On an error, the changes handed out before it came from
/// a block that is then invalid: a caller that must not apply part of a
/// block collects them and drops them on the error.
pub fn decode_block_each<S: SlotTypes + ?Sized>(
    data: &[u8],
    slots: &S,
    mut each: impl FnMut(u8, AttributeValue),
) -> Result<IndexingMethod, DecodeError> {
    if data.len() > MAX_ATTRIBUTE_BLOCK_BYTES {
        return Err(DecodeError::LimitExceeded {
            what: "EditAttributes block bytes",
            value: data.len(),
            limit: MAX_ATTRIBUTE_BLOCK_BYTES,
        });
    }
    let mut r = BitReader::new(data);
    if !r.bit("indexing method")? {
        let count = r.u8("changed attribute count")?;
        for _ in 0..count {
            let index = r.u8("attribute index")?;
            // "Out of bounds attribute index" / "Nonexistent attribute":
            // Tundra skips the rest of this component's block.
            let Some(Some(ty)) = slots.slot_type(usize::from(index)) else {
                break;
            };
            each(index, AttributeValue::read(ty, &mut r)?);
        }
        Ok(IndexingMethod::Indices)
    } else {
        let slot_count = slots.slot_count().min(MAX_ATTRIBUTES_PER_COMPONENT);
        for i in 0..slot_count {
            // A shorter block from an older peer ends the list (§4.9).
            if r.bits_left() == 0 {
                break;
            }
            if !r.bit("attribute changed flag")? {
                continue;
            }
            let Some(Some(ty)) = slots.slot_type(i) else {
                break;
            };
            // i < MAX_ATTRIBUTES_PER_COMPONENT (256), so it fits a u8.
            each(i as u8, AttributeValue::read(ty, &mut r)?);
        }
        Ok(IndexingMethod::Bitmask)
    }
}

/// One changed attribute by reference, for encoding values where they are
/// held (the scene) without copying them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EditRef<'a> {
    pub index: u8,
    pub value: &'a AttributeValue,
}

/// Encodes changes the way Tundra's server does: ascending indices, method
/// by [`choose_method`]. Duplicate indices keep the last value.
pub fn encode_block(
    edits: &[AttributeEdit],
    slots: &[Option<AttributeType>],
) -> Result<Vec<u8>, EncodeError> {
    let mut sorted: Vec<EditRef<'_>> = Vec::with_capacity(edits.len());
    for edit in edits {
        let edit = EditRef {
            index: edit.index,
            value: &edit.value,
        };
        match sorted.binary_search_by_key(&edit.index, |e| e.index) {
            Ok(at) => sorted[at] = edit,
            Err(at) => sorted.insert(at, edit),
        }
    }
    let mut w = BitWriter::with_capacity(sorted_block_len(&sorted, slots.len()));
    write_block(&sorted, slots, &mut w)?;
    Ok(w.finish())
}

/// Appends a block of `edits` (ascending, distinct indices) the way
/// Tundra's server does, method by [`choose_method`], at the writer's
/// position, which must be the start of a block: a fresh or cleared writer.
pub fn write_block<S: SlotTypes + ?Sized>(
    edits: &[EditRef<'_>],
    slots: &S,
    w: &mut BitWriter,
) -> Result<(), EncodeError> {
    let slot_count = slots.slot_count();
    check_slots(slot_count)?;
    for pair in edits.windows(2) {
        if pair[0].index >= pair[1].index {
            return Err(EncodeError::Mismatch(format!(
                "attribute {} follows {}: edits must be ascending",
                pair[1].index, pair[0].index
            )));
        }
    }
    for edit in edits {
        check_type(edit.index, edit.value, slots)?;
    }
    let start = w.byte_len();
    match choose_method(edits.len(), slot_count) {
        IndexingMethod::Indices => {
            w.bit(false);
            w.u8(changed_count(edits.len())?);
            for edit in edits {
                w.u8(edit.index);
                edit.value.write(w)?;
            }
        }
        IndexingMethod::Bitmask => {
            w.bit(true);
            // A changed flag per slot: the unchanged ones between edits are
            // runs of zero bits, written a run at a time. Every edit's slot
            // exists (types were checked), so the indices are below
            // `slot_count`.
            let mut next_slot = 0;
            for edit in edits {
                let index = usize::from(edit.index);
                w.zeros(index.saturating_sub(next_slot));
                w.bit(true);
                edit.value.write(w)?;
                next_slot = index + 1;
            }
            w.zeros(slot_count.saturating_sub(next_slot));
        }
    }
    check_block_len(w.byte_len() - start)
}

/// Encodes a block with the given method and order (re-encoding a decoded
/// block gives its bytes back).
pub fn encode_block_with(
    edits: &AttributeEdits,
    slots: &[Option<AttributeType>],
) -> Result<Vec<u8>, EncodeError> {
    check_slots(slots.len())?;
    for edit in &edits.edits {
        check_type(edit.index, &edit.value, slots)?;
    }
    let mut w = BitWriter::with_capacity(block_len(edits, slots.len()));
    match edits.method {
        IndexingMethod::Indices => {
            w.bit(false);
            w.u8(changed_count(edits.edits.len())?);
            for edit in &edits.edits {
                w.u8(edit.index);
                edit.value.write(&mut w)?;
            }
        }
        IndexingMethod::Bitmask => {
            w.bit(true);
            for i in 0..slots.len() {
                let changed = edits.edits.iter().rev().find(|e| usize::from(e.index) == i);
                w.bit(changed.is_some());
                if let Some(edit) = changed {
                    edit.value.write(&mut w)?;
                }
            }
        }
    }
    let bytes = w.finish();
    check_block_len(bytes.len())?;
    Ok(bytes)
}

fn check_slots(slot_count: usize) -> Result<(), EncodeError> {
    if slot_count > MAX_ATTRIBUTES_PER_COMPONENT {
        return Err(EncodeError::TooLong {
            what: "attribute slots",
            len: slot_count,
            limit: MAX_ATTRIBUTES_PER_COMPONENT,
        });
    }
    Ok(())
}

fn check_type<S: SlotTypes + ?Sized>(
    index: u8,
    value: &AttributeValue,
    slots: &S,
) -> Result<(), EncodeError> {
    let slot = slots.slot_type(usize::from(index)).flatten();
    if slot != Some(value.attribute_type()) {
        return Err(EncodeError::Mismatch(format!(
            "attribute {} is {:?}, the slot holds {:?}",
            index,
            value.attribute_type(),
            slot
        )));
    }
    Ok(())
}

fn changed_count(len: usize) -> Result<u8, EncodeError> {
    u8::try_from(len).map_err(|_| EncodeError::TooLong {
        what: "changed attributes",
        len,
        limit: 255,
    })
}

fn check_block_len(len: usize) -> Result<(), EncodeError> {
    if len > MAX_ATTRIBUTE_BLOCK_BYTES {
        return Err(EncodeError::TooLong {
            what: "EditAttributes block",
            len,
            limit: MAX_ATTRIBUTE_BLOCK_BYTES,
        });
    }
    Ok(())
}

/// The size in bytes of the block [`write_block`] writes for `edits`.
pub fn sorted_block_len(edits: &[EditRef<'_>], slot_count: usize) -> usize {
    let values: usize = edits.iter().map(|e| e.value.binary_len()).sum();
    header_bits(
        choose_method(edits.len(), slot_count),
        edits.len(),
        slot_count,
    )
    .div_ceil(8)
        + values
}

/// Bits of a block before and between its values: the method bit, then a
/// count and an index per change, or a flag per slot.
fn header_bits(method: IndexingMethod, changed: usize, slot_count: usize) -> usize {
    match method {
        IndexingMethod::Indices => 1 + 8 + changed * 8,
        IndexingMethod::Bitmask => 1 + slot_count,
    }
}

/// The encoded block's size in bytes (method bit, count or flags, indices
/// and values), to size its buffer once.
fn block_len(edits: &AttributeEdits, slot_count: usize) -> usize {
    let values: usize = edits.edits.iter().map(|e| e.value.binary_len()).sum();
    header_bits(edits.method, edits.edits.len(), slot_count).div_ceil(8) + values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::registry::Registry;
    use crate::tundra::values::Float3;

    fn placeable_slots() -> Vec<Option<AttributeType>> {
        Registry::builtin().get(20).unwrap().slot_types()
    }

    fn rigid_body_slots() -> Vec<Option<AttributeType>> {
        Registry::builtin().get(23).unwrap().slot_types()
    }

    #[test]
    fn method_choice_matches_tundra() {
        // Placeable (6 slots): any edit uses the bitmask.
        assert_eq!(choose_method(1, 6), IndexingMethod::Bitmask);
        // RigidBody (19 slots): 1 change -> indices (16 <= 19), 2 -> bitmask (24 > 19).
        assert_eq!(choose_method(1, 19), IndexingMethod::Indices);
        assert_eq!(choose_method(2, 19), IndexingMethod::Bitmask);
        assert_eq!(choose_method(0, 8), IndexingMethod::Indices);
    }

    #[test]
    fn bitmask_block_for_placeable_visible() {
        // bits: 1 (method), 0 0 (attrs 0,1), 1 (attr 2) + u8 0x00 (false), 0 0 0 (attrs 3..5).
        // byte0 = bit0 1, bit3 1, bits 4..7 = low 4 bits of 0x00 -> 0x09; byte1 = high 4 bits 0 then 3 zero flags.
        let edits = vec![AttributeEdit {
            index: 2,
            value: AttributeValue::Bool(false),
        }];
        let bytes = encode_block(&edits, &placeable_slots()).unwrap();
        assert_eq!(hex::encode(&bytes), "0900");
        let decoded = decode_block(&bytes, &placeable_slots()).unwrap();
        assert_eq!(decoded.method, IndexingMethod::Bitmask);
        assert_eq!(decoded.edits, edits);
        // With value true the value byte 0x01 sits at bits 4..11.
        let edits = vec![AttributeEdit {
            index: 2,
            value: AttributeValue::Bool(true),
        }];
        assert_eq!(
            hex::encode(encode_block(&edits, &placeable_slots()).unwrap()),
            "1900"
        );
    }

    #[test]
    fn index_block_for_rigid_body_linear_velocity() {
        // bit 0 (method), u8 count 1, u8 index 13, float3 (1, 0, 0): all shifted by one bit.
        let edits = vec![AttributeEdit {
            index: 13,
            value: AttributeValue::Float3(Float3::new(1.0, 0.0, 0.0)),
        }];
        let bytes = encode_block(&edits, &rigid_body_slots()).unwrap();
        assert_eq!(hex::encode(&bytes), "021a0000007f000000000000000000");
        let decoded = decode_block(&bytes, &rigid_body_slots()).unwrap();
        assert_eq!(decoded.method, IndexingMethod::Indices);
        assert_eq!(decoded.edits, edits);
    }

    #[test]
    fn reader_stops_where_tundra_stops() {
        let slots = vec![Some(AttributeType::Bool), None, Some(AttributeType::Bool)];
        // indices: count 2, index 0 = true, then index 5 (out of range): the rest is skipped.
        let mut w = BitWriter::new();
        w.bit(false);
        w.u8(2);
        w.u8(0);
        w.u8(1);
        w.u8(5);
        w.u8(1);
        let d = decode_block(&w.finish(), &slots).unwrap();
        assert_eq!(d.edits.len(), 1);
        // bitmask: a set flag for the empty slot 1 stops the block.
        let mut w = BitWriter::new();
        w.bit(true);
        w.bit(false);
        w.bit(true);
        w.bit(true);
        let d = decode_block(&w.finish(), &slots).unwrap();
        assert!(d.edits.is_empty());
        // a value cut short is an error.
        assert!(decode_block(&[0x02, 0x00, 0x00], &[Some(AttributeType::Int)]).is_err());
    }

    #[test]
    fn by_reference_writer_matches_the_fixtures_and_wants_ascending_edits() {
        let value = AttributeValue::Float3(Float3::new(1.0, 0.0, 0.0));
        let edit = EditRef {
            index: 13,
            value: &value,
        };
        let mut w = BitWriter::new();
        write_block(&[edit], rigid_body_slots().as_slice(), &mut w).unwrap();
        assert_eq!(hex::encode(w.finish()), "021a0000007f000000000000000000");
        let visible = AttributeValue::Bool(true);
        let edit = EditRef {
            index: 2,
            value: &visible,
        };
        let mut w = BitWriter::new();
        write_block(&[edit], placeable_slots().as_slice(), &mut w).unwrap();
        assert_eq!(hex::encode(w.finish()), "1900");
        let real = AttributeValue::Real(1.0);
        let unsorted = [
            EditRef {
                index: 13,
                value: &value,
            },
            EditRef {
                index: 0,
                value: &real,
            },
        ];
        let mut w = BitWriter::new();
        assert!(write_block(&unsorted, rigid_body_slots().as_slice(), &mut w).is_err());
        let mismatched = [EditRef {
            index: 13,
            value: &real,
        }];
        assert!(write_block(&mismatched, rigid_body_slots().as_slice(), &mut w).is_err());
    }

    #[test]
    fn decoding_in_place_hands_out_what_decode_block_lists() {
        let bytes = hex::decode("021a0000007f000000000000000000").unwrap();
        let slots = rigid_body_slots();
        let mut seen = Vec::new();
        let method = decode_block_each(&bytes, slots.as_slice(), |index, value| {
            seen.push(AttributeEdit { index, value })
        })
        .unwrap();
        let listed = decode_block(&bytes, &slots).unwrap();
        assert_eq!(method, listed.method);
        assert_eq!(seen, listed.edits);
    }

    #[test]
    fn re_encoding_keeps_method_and_order() {
        let slots = rigid_body_slots();
        let edits = AttributeEdits {
            method: IndexingMethod::Indices,
            edits: vec![
                AttributeEdit {
                    index: 14,
                    value: AttributeValue::Float3(Float3::default()),
                },
                AttributeEdit {
                    index: 0,
                    value: AttributeValue::Real(2.0),
                },
            ],
        };
        let bytes = encode_block_with(&edits, &slots).unwrap();
        assert_eq!(decode_block(&bytes, &slots).unwrap(), edits);
        let wrong = vec![AttributeEdit {
            index: 0,
            value: AttributeValue::Int(1),
        }];
        assert!(encode_block(&wrong, &slots).is_err());
    }
}
