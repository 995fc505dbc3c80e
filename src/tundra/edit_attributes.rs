//! EditAttributes blocks (reference §4.9): the per-component bit stream that
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

/// Decodes a block against the component's attribute slots.
pub fn decode_block(
    data: &[u8],
    slots: &[Option<AttributeType>],
) -> Result<AttributeEdits, DecodeError> {
    if data.len() > MAX_ATTRIBUTE_BLOCK_BYTES {
        return Err(DecodeError::LimitExceeded {
            what: "EditAttributes block bytes",
            value: data.len(),
            limit: MAX_ATTRIBUTE_BLOCK_BYTES,
        });
    }
    let mut r = BitReader::new(data);
    let mut edits = Vec::new();
    if !r.bit("indexing method")? {
        let count = r.u8("changed attribute count")?;
        for _ in 0..count {
            let index = r.u8("attribute index")?;
            // "Out of bounds attribute index" / "Nonexistent attribute":
            // Tundra skips the rest of this component's block.
            let Some(Some(ty)) = slots.get(usize::from(index)) else {
                break;
            };
            edits.push(AttributeEdit {
                index,
                value: AttributeValue::read(*ty, &mut r)?,
            });
        }
        Ok(AttributeEdits {
            method: IndexingMethod::Indices,
            edits,
        })
    } else {
        for (i, slot) in slots.iter().enumerate().take(MAX_ATTRIBUTES_PER_COMPONENT) {
            // A shorter block from an older peer ends the list (§4.9).
            if r.bits_left() == 0 {
                break;
            }
            if !r.bit("attribute changed flag")? {
                continue;
            }
            let Some(ty) = slot else { break };
            edits.push(AttributeEdit {
                index: i as u8,
                value: AttributeValue::read(*ty, &mut r)?,
            });
        }
        Ok(AttributeEdits {
            method: IndexingMethod::Bitmask,
            edits,
        })
    }
}

/// Encodes changes the way Tundra's server does: ascending indices, method
/// by [`choose_method`]. Duplicate indices keep the last value.
pub fn encode_block(
    edits: &[AttributeEdit],
    slots: &[Option<AttributeType>],
) -> Result<Vec<u8>, EncodeError> {
    let mut sorted: Vec<AttributeEdit> = Vec::with_capacity(edits.len());
    for edit in edits {
        match sorted.binary_search_by_key(&edit.index, |e| e.index) {
            Ok(at) => sorted[at] = edit.clone(),
            Err(at) => sorted.insert(at, edit.clone()),
        }
    }
    let method = choose_method(sorted.len(), slots.len());
    encode_block_with(
        &AttributeEdits {
            method,
            edits: sorted,
        },
        slots,
    )
}

/// Encodes a block with the given method and order (re-encoding a decoded
/// block gives its bytes back).
pub fn encode_block_with(
    edits: &AttributeEdits,
    slots: &[Option<AttributeType>],
) -> Result<Vec<u8>, EncodeError> {
    if slots.len() > MAX_ATTRIBUTES_PER_COMPONENT {
        return Err(EncodeError::TooLong {
            what: "attribute slots",
            len: slots.len(),
            limit: MAX_ATTRIBUTES_PER_COMPONENT,
        });
    }
    for edit in &edits.edits {
        let slot = slots.get(usize::from(edit.index)).copied().flatten();
        if slot != Some(edit.value.attribute_type()) {
            return Err(EncodeError::Mismatch(format!(
                "attribute {} is {:?}, the slot holds {:?}",
                edit.index,
                edit.value.attribute_type(),
                slot
            )));
        }
    }
    let mut w = BitWriter::with_capacity(block_len(edits, slots.len()));
    match edits.method {
        IndexingMethod::Indices => {
            w.bit(false);
            let count = u8::try_from(edits.edits.len()).map_err(|_| EncodeError::TooLong {
                what: "changed attributes",
                len: edits.edits.len(),
                limit: 255,
            })?;
            w.u8(count);
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
    if bytes.len() > MAX_ATTRIBUTE_BLOCK_BYTES {
        return Err(EncodeError::TooLong {
            what: "EditAttributes block",
            len: bytes.len(),
            limit: MAX_ATTRIBUTE_BLOCK_BYTES,
        });
    }
    Ok(bytes)
}

/// The encoded block's size in bytes (method bit, count or flags, indices
/// and values), to size its buffer once.
fn block_len(edits: &AttributeEdits, slot_count: usize) -> usize {
    let values: usize = edits.edits.iter().map(|e| e.value.binary_len()).sum();
    let bits = match edits.method {
        IndexingMethod::Indices => 1 + 8 + edits.edits.len() * 8,
        IndexingMethod::Bitmask => 1 + slot_count,
    };
    bits.div_ceil(8) + values
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
