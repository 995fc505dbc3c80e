//! A hasher for the hot tables keyed by entity id (the scene's entities; a
//! client's sync state, rigid-body baselines and last-sent times; the shared
//! frames of a write) that keeps ids of one block of eight in neighbouring
//! slots.
//!
//! Entities created together get consecutive ids, and clients (Tundra's
//! sync among them) tend to move them together; a hash that scatters every
//! id puts each entity's record of a client on its own cache line, and at
//! 10 000 moving entities the node's time went to fetching those lines.
//! Each block of eight ids is placed by a seeded hash (so ids chosen by a
//! world file or a bridged server cannot be lined up into one chain), and
//! the id's place in its block goes into both the slot and the tag bits, so
//! the eight are neighbours and never mistaken for one another.

use std::hash::{BuildHasher, Hasher};

/// Ids per block kept together.
const BLOCK_BITS: u32 = 3;
const IN_BLOCK: u64 = (1 << BLOCK_BITS) - 1;
/// hashbrown takes a slot's tag from the top seven bits of the hash.
const TAG_SHIFT: u32 = 57;

/// Builds [`BlockHasher`]s from one process-seeded foldhash state.
#[derive(Debug, Clone, Default)]
pub struct EntityBlocks(foldhash::fast::RandomState);

impl BuildHasher for EntityBlocks {
    type Hasher = BlockHasher;

    fn build_hasher(&self) -> BlockHasher {
        BlockHasher {
            block: self.0.build_hasher(),
            place: 0,
        }
    }
}

/// See the module documentation.
pub struct BlockHasher {
    block: foldhash::fast::FoldHasher<'static>,
    place: u64,
}

impl Hasher for BlockHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.block.write(bytes);
    }

    fn write_u32(&mut self, id: u32) {
        self.block.write_u32(id >> BLOCK_BITS);
        self.place = u64::from(id) & IN_BLOCK;
    }

    fn finish(&self) -> u64 {
        let spread = self.block.finish() & !IN_BLOCK & !(IN_BLOCK << TAG_SHIFT);
        spread | self.place | (self.place << TAG_SHIFT)
    }
}

/// A map keyed by entity id with [`EntityBlocks`] hashing.
pub type EntityMap<V> = std::collections::HashMap<crate::tundra::EntityId, V, EntityBlocks>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::EntityId;

    #[test]
    fn ids_of_one_block_are_neighbours_with_distinct_tags() {
        let blocks = EntityBlocks::default();
        let first = blocks.hash_one(EntityId(8 * 1000));
        for place in 1..8u32 {
            let hash = blocks.hash_one(EntityId(8 * 1000 + place));
            assert_eq!(
                hash & !IN_BLOCK & !(IN_BLOCK << TAG_SHIFT),
                first & !IN_BLOCK & !(IN_BLOCK << TAG_SHIFT)
            );
            assert_eq!(hash & IN_BLOCK, u64::from(place));
            assert_ne!(hash >> TAG_SHIFT, first >> TAG_SHIFT);
        }
        // Other blocks land elsewhere.
        let other = blocks.hash_one(EntityId(8 * 1001));
        assert_ne!(other & !IN_BLOCK, first & !IN_BLOCK);
    }
}
