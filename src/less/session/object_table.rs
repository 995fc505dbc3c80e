//! Our objects by id. Every update looks its object up several times, so
//! the lookups are hashed; the walks that must not depend on hashing (the
//! introductions a subscription queues, the refresh lap) go through an
//! ordered index of the ids, kept beside the map.

use std::collections::BTreeSet;
use std::ops::RangeBounds;

use foldhash::{HashMap, HashMapExt};

use crate::less::ids::{Local, ObjectId};

#[derive(Clone, Debug)]
pub(super) struct ObjectTable<V> {
    map: HashMap<ObjectId<Local>, V>,
    order: BTreeSet<ObjectId<Local>>,
}

impl<V> Default for ObjectTable<V> {
    fn default() -> Self {
        ObjectTable {
            map: HashMap::new(),
            order: BTreeSet::new(),
        }
    }
}

impl<V> ObjectTable<V> {
    pub fn get(&self, id: &ObjectId<Local>) -> Option<&V> {
        self.map.get(id)
    }

    pub fn get_mut(&mut self, id: &ObjectId<Local>) -> Option<&mut V> {
        self.map.get_mut(id)
    }

    pub fn contains_key(&self, id: &ObjectId<Local>) -> bool {
        self.map.contains_key(id)
    }

    pub fn insert(&mut self, id: ObjectId<Local>, value: V) -> Option<V> {
        self.order.insert(id);
        self.map.insert(id, value)
    }

    pub fn remove(&mut self, id: &ObjectId<Local>) -> Option<V> {
        self.order.remove(id);
        self.map.remove(id)
    }

    /// Objects in ascending id order.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectId<Local>, &V)> + '_ {
        self.order
            .iter()
            .filter_map(|id| Some((id, self.map.get(id)?)))
    }

    /// Ids in ascending order within `range`.
    pub fn ids_in(
        &self,
        range: impl RangeBounds<ObjectId<Local>>,
    ) -> impl Iterator<Item = ObjectId<Local>> + '_ {
        self.order.range(range).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_are_in_id_order_whatever_the_insertion_order() {
        let mut table = ObjectTable::default();
        for id in [907u64, 3, 55, 1_000_000, 12] {
            table.insert(ObjectId::new(id), id * 2);
        }
        table.remove(&ObjectId::new(55));
        let ids: Vec<u64> = table.iter().map(|(id, _)| id.get()).collect();
        assert_eq!(ids, [3, 12, 907, 1_000_000]);
        assert!(table.iter().all(|(id, v)| *v == id.get() * 2));
        let from: Vec<u64> = table
            .ids_in(ObjectId::new(12)..)
            .map(|id| id.get())
            .collect();
        assert_eq!(from, [12, 907, 1_000_000]);
        assert_eq!(table.iter().count(), 4);
        assert_eq!(table.get(&ObjectId::new(55)), None);
    }
}
