//! Per-object state kept by [`PropertyIndex`]: a sender's slots, a
//! receiver's timestamps, a mirror's values.
//!
//! Indices ascend with property keys, so walking a map visits properties in
//! key order, the order messages list them in. The indices are kept apart
//! from the items so a lookup searches a few packed integers instead of
//! comparing component paths across the items' memory, and an object that
//! holds every property of its type (the usual case) finds property `i` at
//! position `i` without searching.

use smallvec::SmallVec;

use super::schema::PropertyIndex;

/// A sorted map from property index to `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct PropertyMap<T> {
    indices: SmallVec<[u32; 12]>,
    items: Vec<T>,
}

impl<T> Default for PropertyMap<T> {
    fn default() -> Self {
        PropertyMap {
            indices: SmallVec::new(),
            items: Vec::new(),
        }
    }
}

impl<T> PropertyMap<T> {
    /// An empty map.
    pub fn new() -> PropertyMap<T> {
        PropertyMap::default()
    }

    /// An empty map with room for `n` properties: for an object whose
    /// properties arrive one at a time but whose count is known.
    pub fn with_capacity(n: usize) -> PropertyMap<T> {
        PropertyMap {
            indices: SmallVec::with_capacity(n),
            items: Vec::with_capacity(n),
        }
    }

    fn position(&self, index: PropertyIndex) -> Result<usize, usize> {
        // Dense objects hold property i at position i.
        if self.indices.get(index.get()) == Some(&index.0) {
            return Ok(index.get());
        }
        self.indices.binary_search(&index.0)
    }

    /// The item of property `index`.
    pub fn get(&self, index: PropertyIndex) -> Option<&T> {
        let position = self.position(index).ok()?;
        self.items.get(position)
    }

    /// The item of property `index`, mutably.
    pub fn get_mut(&mut self, index: PropertyIndex) -> Option<&mut T> {
        let position = self.position(index).ok()?;
        self.items.get_mut(position)
    }

    /// Sets the item of property `index`; returns the one it replaced.
    pub fn insert(&mut self, index: PropertyIndex, item: T) -> Option<T> {
        match self.position(index) {
            Ok(position) => Some(std::mem::replace(&mut self.items[position], item)),
            Err(position) => {
                self.indices.insert(position, index.0);
                self.items.insert(position, item);
                None
            }
        }
    }

    /// The item of property `index`, inserted by `make` if absent.
    pub fn get_or_insert_with(&mut self, index: PropertyIndex, make: impl FnOnce() -> T) -> &mut T {
        let position = match self.position(index) {
            Ok(position) => position,
            Err(position) => {
                self.indices.insert(position, index.0);
                self.items.insert(position, make());
                position
            }
        };
        &mut self.items[position]
    }

    /// Removes the item of property `index`.
    pub fn remove(&mut self, index: PropertyIndex) -> Option<T> {
        let position = self.position(index).ok()?;
        self.indices.remove(position);
        Some(self.items.remove(position))
    }

    /// Items in ascending index order.
    pub fn iter(&self) -> impl Iterator<Item = (PropertyIndex, &T)> {
        self.indices
            .iter()
            .map(|&i| PropertyIndex(i))
            .zip(self.items.iter())
    }

    /// Items in ascending index order, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (PropertyIndex, &mut T)> {
        self.indices
            .iter()
            .map(|&i| PropertyIndex(i))
            .zip(self.items.iter_mut())
    }

    /// Items in ascending index order, without their indices.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Number of properties held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when no property is held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<T> PropertyMap<T> {
    /// The indices held, ascending, without touching the items.
    pub fn indices(&self) -> impl Iterator<Item = PropertyIndex> + '_ {
        self.indices.iter().map(|&i| PropertyIndex(i))
    }
}

/// A set of property indices: which of an object's properties changed, or
/// which of a type's the peer subscribes to. One inline word covers every
/// type of up to 64 properties (each Tundra component type's); larger ones
/// spill. Finding an object's changed properties then reads a word instead
/// of every slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexSet {
    words: SmallVec<[u64; 1]>,
}

impl IndexSet {
    /// An empty set.
    pub fn new() -> IndexSet {
        IndexSet::default()
    }

    fn place(index: PropertyIndex) -> (usize, u64) {
        (index.get() / 64, 1u64 << (index.0 % 64))
    }

    /// Adds `index`.
    pub fn insert(&mut self, index: PropertyIndex) {
        let (word, bit) = Self::place(index);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= bit;
    }

    /// Removes `index`.
    pub fn remove(&mut self, index: PropertyIndex) {
        let (word, bit) = Self::place(index);
        if let Some(w) = self.words.get_mut(word) {
            *w &= !bit;
        }
    }

    /// Whether `index` is in the set.
    pub fn contains(&self, index: PropertyIndex) -> bool {
        let (word, bit) = Self::place(index);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// True when no index is in the set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Removes every index.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// The indices in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = PropertyIndex> + '_ {
        self.words.iter().enumerate().flat_map(|(word, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(PropertyIndex(word as u32 * 64 + bit))
            })
        })
    }
}

impl FromIterator<PropertyIndex> for IndexSet {
    fn from_iter<I: IntoIterator<Item = PropertyIndex>>(iter: I) -> Self {
        let mut set = IndexSet::new();
        for index in iter {
            set.insert(index);
        }
        set
    }
}

impl<T> FromIterator<(PropertyIndex, T)> for PropertyMap<T> {
    fn from_iter<I: IntoIterator<Item = (PropertyIndex, T)>>(iter: I) -> Self {
        // Sized exactly up front: an object's map is built once and lives
        // as long as the object, so doubling growth would waste memory per
        // object.
        let iter = iter.into_iter();
        let mut map = PropertyMap {
            indices: SmallVec::with_capacity(iter.size_hint().0),
            items: Vec::with_capacity(iter.size_hint().0),
        };
        for (index, item) in iter {
            map.insert(index, item);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_sets_hold_small_and_spilled_indices_in_order() {
        let mut set: IndexSet = [3, 0, 63, 64, 259].map(PropertyIndex).into_iter().collect();
        assert!(set.contains(PropertyIndex(64)) && !set.contains(PropertyIndex(65)));
        set.remove(PropertyIndex(3));
        set.remove(PropertyIndex(1000));
        let walked: Vec<u32> = set.iter().map(|i| i.0).collect();
        assert_eq!(walked, [0, 63, 64, 259]);
        assert!(!set.is_empty());
        set.clear();
        assert!(set.is_empty() && set.iter().next().is_none());
        let mut small = IndexSet::new();
        small.insert(PropertyIndex(5));
        small.remove(PropertyIndex(5));
        assert!(small.is_empty());
    }

    #[test]
    fn keeps_indices_sorted_and_finds_dense_and_sparse_entries() {
        let mut map = PropertyMap::new();
        for i in [5u32, 0, 2, 1, 300] {
            assert_eq!(map.insert(PropertyIndex(i), i * 10), None);
        }
        assert_eq!(map.insert(PropertyIndex(2), 21), Some(20));
        let walked: Vec<(u32, u32)> = map.iter().map(|(i, v)| (i.0, *v)).collect();
        assert_eq!(walked, [(0, 0), (1, 10), (2, 21), (5, 50), (300, 3000)]);
        // Position 3 holds index 5: the dense guess misses and the search finds it.
        assert_eq!(map.get(PropertyIndex(5)), Some(&50));
        assert_eq!(map.get(PropertyIndex(3)), None);
        assert_eq!(map.get(PropertyIndex(301)), None);
        *map.get_or_insert_with(PropertyIndex(3), || 0) += 7;
        assert_eq!(map.get(PropertyIndex(3)), Some(&7));
        assert_eq!(map.remove(PropertyIndex(0)), Some(0));
        assert_eq!(map.get(PropertyIndex(1)), Some(&10));
        assert_eq!(map.len(), 5);
        let collected: PropertyMap<u32> = [(PropertyIndex(9), 1), (PropertyIndex(4), 2)]
            .into_iter()
            .collect();
        assert_eq!(
            collected.iter().map(|(i, _)| i.0).collect::<Vec<_>>(),
            [4, 9]
        );
    }
}
