//! An entity's components by id.
//!
//! Entities hold a handful of components, so they are kept in a vector
//! sorted by id: one allocation of exactly their size, searched within a
//! cache line or two. A B-tree node is sized for eleven entries (about
//! 750 bytes per entity here) and puts keys and values in different lines.

use super::entity::Component;
use crate::tundra::ComponentId;

/// Components in ascending id order, the order Tundra's `std::map` gives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComponentMap {
    items: Vec<Component>,
}

impl ComponentMap {
    /// An empty map.
    pub fn new() -> ComponentMap {
        ComponentMap::default()
    }

    fn position(&self, id: &ComponentId) -> Result<usize, usize> {
        self.items.binary_search_by(|c| c.id.cmp(id))
    }

    pub fn get(&self, id: &ComponentId) -> Option<&Component> {
        self.position(id).ok().map(|i| &self.items[i])
    }

    pub fn get_mut(&mut self, id: &ComponentId) -> Option<&mut Component> {
        self.position(id).ok().map(|i| &mut self.items[i])
    }

    pub fn contains_key(&self, id: &ComponentId) -> bool {
        self.position(id).is_ok()
    }

    /// Puts `component` under `id` (its own id); returns the one it replaced.
    pub fn insert(&mut self, id: ComponentId, component: Component) -> Option<Component> {
        debug_assert_eq!(id, component.id, "a component is keyed by its id");
        match self.position(&id) {
            Ok(i) => Some(std::mem::replace(&mut self.items[i], component)),
            Err(i) => {
                self.items.insert(i, component);
                None
            }
        }
    }

    pub fn remove(&mut self, id: &ComponentId) -> Option<Component> {
        let i = self.position(id).ok()?;
        Some(self.items.remove(i))
    }

    /// Keeps the components `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&ComponentId, &mut Component) -> bool) {
        self.items.retain_mut(|c| {
            let id = c.id;
            keep(&id, c)
        });
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `(id, component)` in ascending id order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&ComponentId, &Component)> + '_ {
        self.items.iter().map(|c| (&c.id, c))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &ComponentId> + '_ {
        self.items.iter().map(|c| &c.id)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Component> + '_ {
        self.items.iter()
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Component> + '_ {
        self.items.iter_mut()
    }
}

impl<'a> IntoIterator for &'a ComponentMap {
    type Item = (&'a ComponentId, &'a Component);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, Component>,
        fn(&'a Component) -> (&'a ComponentId, &'a Component),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter().map(|c| (&c.id, c))
    }
}

impl FromIterator<(ComponentId, Component)> for ComponentMap {
    fn from_iter<I: IntoIterator<Item = (ComponentId, Component)>>(iter: I) -> Self {
        let mut map = ComponentMap::new();
        map.extend(iter);
        map
    }
}

impl Extend<(ComponentId, Component)> for ComponentMap {
    fn extend<I: IntoIterator<Item = (ComponentId, Component)>>(&mut self, iter: I) {
        for (id, component) in iter {
            self.insert(id, component);
        }
    }
}

impl std::ops::Index<&ComponentId> for ComponentMap {
    type Output = Component;

    /// The component `id`; panics if there is none, as a map's index does.
    fn index(&self, id: &ComponentId) -> &Component {
        self.get(id).expect("no component with this id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::ComponentContent;

    fn component(id: u32, name: &str) -> Component {
        Component {
            id: ComponentId(id),
            type_id: 20,
            name: name.into(),
            content: ComponentContent::Opaque(Vec::new()),
        }
    }

    #[test]
    fn components_stay_in_ascending_id_order_through_inserts_and_removals() {
        let mut map: ComponentMap = [5, 1, 3]
            .map(|i| (ComponentId(i), component(i, "")))
            .into_iter()
            .collect();
        assert_eq!(map.keys().map(|k| k.0).collect::<Vec<_>>(), [1, 3, 5]);
        let replaced = map.insert(ComponentId(3), component(3, "new"));
        assert_eq!(replaced.map(|c| c.name), Some(String::new()));
        assert_eq!(
            map.get(&ComponentId(3)).map(|c| c.name.as_str()),
            Some("new")
        );
        assert_eq!(map.len(), 3);
        assert!(map.remove(&ComponentId(1)).is_some() && map.remove(&ComponentId(1)).is_none());
        map.insert(ComponentId(4), component(4, ""));
        map.retain(|id, _| id.0 != 5);
        let walked: Vec<u32> = (&map)
            .into_iter()
            .map(|(id, c)| {
                assert_eq!(*id, c.id);
                id.0
            })
            .collect();
        assert_eq!(walked, [3, 4]);
        assert!(!map.contains_key(&ComponentId(5)) && map.contains_key(&ComponentId(4)));
    }
}
