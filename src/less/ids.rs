//! Identifier newtypes for a LESS link, with each message's id space in the type.
//!
//! The draft (section 2) gives every message an implicit direction: "Object id
//! 123 may mean something totally different when sent from peer A to peer B,
//! as opposed to when sent from peer B to peer A." Seen from one end of a link
//! there are exactly two spaces: [`Local`] (objects, types and requests this
//! node allocates) and [`Remote`] (those the peer allocates). Directional ids
//! carry the space as a marker type, so an id of one space cannot be passed
//! where the other is expected. This module owns the id types only.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use smallvec::{smallvec, SmallVec};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Local {}
    impl Sealed for super::Remote {}
}

/// An id space seen from one end of a link: [`Local`] or [`Remote`].
pub trait Space:
    sealed::Sealed + Copy + Eq + Ord + Hash + fmt::Debug + Default + Send + Sync + 'static
{
    /// Short name for logs and `Debug`.
    const NAME: &'static str;
}

/// The space of ids this node allocates: objects it presents, types it
/// introduces, requests it invokes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Local;

/// The space of ids the peer allocates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Remote;

impl Space for Local {
    const NAME: &'static str = "local";
}
impl Space for Remote {
    const NAME: &'static str = "remote";
}

macro_rules! directional_id {
    ($(#[$meta:meta])* $name:ident, $label:literal) => {
        $(#[$meta])*
        ///
        /// On the wire an INTEGER carrying the same 64 bits (ids at or above
        /// 2^63 therefore travel in the negative form).
        pub struct $name<S: Space>(u64, PhantomData<S>);

        impl<S: Space> $name<S> {
            /// The id with raw value `value` in space `S`.
            pub const fn new(value: u64) -> Self {
                $name(value, PhantomData)
            }
            /// The raw value.
            pub const fn get(self) -> u64 {
                self.0
            }
        }
        impl<S: Space> Clone for $name<S> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<S: Space> Copy for $name<S> {}
        impl<S: Space> PartialEq for $name<S> {
            fn eq(&self, other: &Self) -> bool {
                self.0 == other.0
            }
        }
        impl<S: Space> Eq for $name<S> {}
        impl<S: Space> PartialOrd for $name<S> {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl<S: Space> Ord for $name<S> {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.cmp(&other.0)
            }
        }
        impl<S: Space> Hash for $name<S> {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state)
            }
        }
        impl<S: Space> fmt::Debug for $name<S> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}:{}({})", S::NAME, $label, self.0)
            }
        }
        impl<S: Space> fmt::Display for $name<S> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}:{}", S::NAME, self.0)
            }
        }
    };
}

directional_id!(
    /// An OBJECT-ID naming an entity presented by the side that owns space `S`.
    ObjectId,
    "object"
);
directional_id!(
    /// A typeid introduced by the side that owns space `S`.
    TypeId,
    "type"
);
directional_id!(
    /// A method-invocation request-id allocated by the invoking side `S`.
    RequestId,
    "request"
);

macro_rules! plain_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

plain_id!(
    /// A component-id from a type schema. Schemas are named by URI and shared,
    /// so component ids have no direction.
    ComponentId
);
plain_id!(
    /// A property-id within a component (also names methods and nested
    /// components, which share the component's member id space).
    PropertyId
);
plain_id!(
    /// An interaction kind declared in the connection schema.
    InteractionId
);

/// A component-id-path: a top-level component, then nested components.
/// Never empty and at most [`super::limits::MAX_PATH_LEN`] long. Paths of
/// up to two elements (almost all) live inline: every property key of
/// every object holds one, and a heap allocation each cost memory per
/// entity and time per update.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentPath(SmallVec<[ComponentId; 2]>);

impl ComponentPath {
    /// A path of one top-level component.
    pub fn top(component: ComponentId) -> ComponentPath {
        ComponentPath(smallvec![component])
    }

    /// A path from its elements; `None` if empty or too long.
    pub fn new(elements: Vec<ComponentId>) -> Option<ComponentPath> {
        if elements.is_empty() || elements.len() > super::limits::MAX_PATH_LEN {
            None
        } else {
            Some(ComponentPath(SmallVec::from_vec(elements)))
        }
    }

    /// The path's elements, outermost first.
    pub fn elements(&self) -> &[ComponentId] {
        &self.0
    }

    /// The path extended by one nested component; `None` if too long.
    pub fn child(&self, nested: ComponentId) -> Option<ComponentPath> {
        if self.0.len() >= super::limits::MAX_PATH_LEN {
            return None;
        }
        let mut elements = self.0.clone();
        elements.push(nested);
        Some(ComponentPath(elements))
    }
}

impl fmt::Display for ComponentPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, element) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("/")?;
            }
            write!(f, "{element}")?;
        }
        Ok(())
    }
}

/// Where a property (or method) lives in a type: component path + property id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PropertyKey {
    pub component: ComponentPath,
    pub property: PropertyId,
}

impl PropertyKey {
    /// The property `property` of top-level component `component`.
    pub fn new(component: u64, property: u64) -> PropertyKey {
        PropertyKey {
            component: ComponentPath::top(ComponentId(component)),
            property: PropertyId(property),
        }
    }
}

impl fmt::Display for PropertyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.component, self.property)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_are_distinct_types_with_readable_names() {
        let local: ObjectId<Local> = ObjectId::new(7);
        let remote: ObjectId<Remote> = ObjectId::new(7);
        assert_eq!(local.get(), remote.get());
        assert_eq!(format!("{local:?}"), "local:object(7)");
        assert_eq!(remote.to_string(), "remote:7");
        assert_eq!(RequestId::<Local>::new(3).to_string(), "local:3");
    }

    #[test]
    fn paths_are_bounded_and_non_empty() {
        assert!(ComponentPath::new(vec![]).is_none());
        assert!(ComponentPath::new(vec![ComponentId(1); 9]).is_none());
        let path = ComponentPath::top(ComponentId(1))
            .child(ComponentId(4))
            .unwrap();
        assert_eq!(path.to_string(), "1/4");
        assert_eq!(PropertyKey::new(2, 3).to_string(), "2.3");
    }
}
