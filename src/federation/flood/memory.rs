//! Which floods this node has already delivered, so that each is delivered
//! and forwarded once, and the sequence of this node's own.

use std::collections::{HashSet, VecDeque};

use uuid::Uuid;

/// Floods remembered for duplicate suppression; a flood crosses a mesh in
/// far fewer than this many later floods.
const REMEMBERED_FLOODS: usize = 4096;

/// A flood's key: its sender and the sender's sequence for it.
pub type FloodKey = (Uuid, u64);

/// Which floods this node has already delivered.
#[derive(Debug, Default)]
pub struct FloodMemory {
    seen: HashSet<FloodKey>,
    order: VecDeque<FloodKey>,
    next_sequence: u64,
}

impl FloodMemory {
    /// The key of a new flood `node` starts, recorded as seen.
    pub fn start(&mut self, node: Uuid) -> FloodKey {
        self.next_sequence += 1;
        let key = (node, self.next_sequence);
        self.first_time(key);
        key
    }

    /// Records a flood; false if it was seen before.
    pub fn first_time(&mut self, key: FloodKey) -> bool {
        if !self.seen.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED_FLOODS {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_first_seen_once_and_forgotten_after_the_memory() {
        let mut memory = FloodMemory::default();
        let sender = Uuid::from_u128(7);
        assert!(memory.first_time((sender, 1)));
        assert!(!memory.first_time((sender, 1)));
        for sequence in 2..=REMEMBERED_FLOODS as u64 + 1 {
            assert!(memory.first_time((sender, sequence)));
        }
        assert!(
            memory.first_time((sender, 1)),
            "the oldest key was forgotten"
        );
    }

    #[test]
    fn own_floods_count_up_and_are_already_seen() {
        let mut memory = FloodMemory::default();
        let node = Uuid::from_u128(1);
        assert_eq!(memory.start(node), (node, 1));
        assert_eq!(memory.start(node), (node, 2));
        assert!(!memory.first_time((node, 2)));
    }
}
