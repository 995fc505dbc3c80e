//! The mirror keeps component objects filed under their owner: unit cases
//! and a property test over any sequence of introductions, updates and
//! removals.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use uuid::Uuid;

use crate::federation::ids::GlobalId;
use crate::federation::routing::mirror::{
    entity_from_values, ComponentKind, Mirror, MirrorComponent, MirrorError,
};
use crate::federation::wire::mapping::{self, component};
use crate::less::ids::{ObjectId, PropertyKey, Remote};
use crate::less::property_list::PropertyValue;
use crate::less::value::Value;
use crate::tundra::Registry;

fn object(raw: u64) -> ObjectId<Remote> {
    ObjectId::new(raw)
}

fn global(serial: u64) -> GlobalId {
    GlobalId {
        origin: Uuid::from_u128(0xa),
        serial,
    }
}

/// An entity object of identity `serial`, as introduced.
fn entity(serial: u64) -> crate::federation::routing::mirror::MirrorEntity {
    let values = [
        (mapping::entity::ORIGIN, Value::Uuid(Uuid::from_u128(0xa))),
        (mapping::entity::SERIAL, Value::Integer(serial as i64)),
    ]
    .map(|(property, value)| PropertyValue {
        key: PropertyKey::new(mapping::entity::COMPONENT, property),
        value,
    });
    entity_from_values(&values).expect("identity present")
}

fn owner_value(owner: u64) -> PropertyValue {
    PropertyValue {
        key: PropertyKey::new(component::OWNER, component::ENTITY),
        value: Value::ObjectId(owner),
    }
}

/// A Name component object owned by `owner` (none: no owner yet).
fn name_component(owner: Option<u64>) -> MirrorComponent {
    let registry = Registry::builtin();
    let schema = registry.get_by_name("Name").expect("builtin");
    let mut c = MirrorComponent::new(
        ComponentKind::Static {
            type_id: schema.type_id,
        },
        Arc::new(mapping::component_type_schema(schema)),
    );
    if let Some(owner) = owner {
        crate::federation::routing::mirror::apply_component_values(
            &mut c,
            vec![owner_value(owner)],
        )
        .unwrap();
    }
    c
}

fn components_of(mirror: &Mirror, entity: u64) -> Vec<u64> {
    mirror
        .entity(object(entity))
        .map(|e| e.components().iter().map(|c| c.get()).collect())
        .unwrap_or_default()
}

#[test]
fn a_component_before_its_entity_joins_it_when_the_entity_arrives() {
    let mut mirror = Mirror::default();
    mirror.insert_component(object(11), name_component(Some(1)));
    mirror.check_invariants().unwrap();
    mirror.insert_entity(object(1), entity(5)).unwrap();
    mirror.check_invariants().unwrap();
    assert_eq!(components_of(&mirror, 1), [11]);
    assert_eq!(mirror.object_of(global(5)), Some(object(1)));
}

#[test]
fn an_owner_arriving_in_an_update_files_the_component() {
    let mut mirror = Mirror::default();
    mirror.insert_entity(object(1), entity(5)).unwrap();
    mirror.insert_entity(object(2), entity(6)).unwrap();
    mirror.insert_component(object(11), name_component(None));
    assert!(components_of(&mirror, 1).is_empty());
    let (change, applied) = mirror
        .update_component(object(11), vec![owner_value(1)])
        .unwrap();
    assert_eq!(applied, Ok(()));
    assert!(change.changed());
    assert_eq!(components_of(&mirror, 1), [11]);
    // Re-owned: it moves.
    let (change, _) = mirror
        .update_component(object(11), vec![owner_value(2)])
        .unwrap();
    assert_eq!(change.before, Some(object(1)));
    assert!(components_of(&mirror, 1).is_empty());
    assert_eq!(components_of(&mirror, 2), [11]);
    mirror.check_invariants().unwrap();
}

#[test]
fn removing_an_entity_removes_its_components_and_identity() {
    let mut mirror = Mirror::default();
    mirror.insert_entity(object(1), entity(5)).unwrap();
    mirror.insert_component(object(11), name_component(Some(1)));
    mirror.insert_component(object(12), name_component(Some(1)));
    let removed = mirror.remove_entity(object(1)).unwrap();
    assert_eq!(removed.global, global(5));
    assert_eq!(mirror.component_count(), 0);
    assert_eq!(mirror.object_of(global(5)), None);
    mirror.check_invariants().unwrap();
}

#[test]
fn a_second_object_for_one_identity_is_refused() {
    let mut mirror = Mirror::default();
    mirror.insert_entity(object(1), entity(5)).unwrap();
    assert_eq!(
        mirror.insert_entity(object(2), entity(5)),
        Err(MirrorError::Duplicate(global(5)))
    );
    assert_eq!(mirror.entity_count(), 1);
    assert_eq!(mirror.object_of(global(5)), Some(object(1)));
    mirror.check_invariants().unwrap();
}

#[test]
fn a_removed_waiting_component_stops_waiting() {
    let mut mirror = Mirror::default();
    mirror.insert_component(object(11), name_component(Some(1)));
    mirror.remove_component(object(11)).unwrap();
    mirror.check_invariants().unwrap();
    mirror.insert_entity(object(1), entity(5)).unwrap();
    assert!(components_of(&mirror, 1).is_empty());
}

/// One step a peer's session can hand the mirror. Entity objects are 1..=5,
/// component objects 11..=16; owners may name entity objects never sent.
#[derive(Debug, Clone)]
enum Step {
    InsertEntity { object: u64, serial: u64 },
    RemoveEntity(u64),
    InsertComponent { object: u64, owner: Option<u64> },
    SetOwner { object: u64, owner: u64 },
    RemoveComponent(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u64..=5, 0u64..4).prop_map(|(object, serial)| Step::InsertEntity { object, serial }),
        (1u64..=5).prop_map(Step::RemoveEntity),
        (11u64..=16, proptest::option::of(1u64..=6))
            .prop_map(|(object, owner)| Step::InsertComponent { object, owner }),
        (11u64..=16, 1u64..=6).prop_map(|(object, owner)| Step::SetOwner { object, owner }),
        (11u64..=16).prop_map(Step::RemoveComponent),
    ]
}

proptest! {
    /// Whatever the order of introductions, owner changes and removals,
    /// the maps agree with each other and with a plain model: an entity
    /// holds exactly the present components that name it, one object per
    /// identity, and an entity's removal takes its components.
    #[test]
    fn any_sequence_keeps_components_filed_under_their_owner(
        steps in proptest::collection::vec(step(), 0..60)
    ) {
        let mut mirror = Mirror::default();
        let mut entities: BTreeMap<u64, u64> = BTreeMap::new();
        let mut owners: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        for step in steps {
            match step {
                Step::InsertEntity { object: o, serial } => {
                    let accepted = mirror.insert_entity(object(o), entity(serial)).is_ok();
                    let expected = !entities.contains_key(&o)
                        && !entities.values().any(|s| *s == serial);
                    prop_assert_eq!(accepted, expected);
                    if accepted {
                        entities.insert(o, serial);
                    }
                }
                Step::RemoveEntity(o) => {
                    let removed = mirror.remove_entity(object(o)).is_some();
                    prop_assert_eq!(removed, entities.remove(&o).is_some());
                    if removed {
                        owners.retain(|_, owner| *owner != Some(o));
                    }
                }
                Step::InsertComponent { object: o, owner } => {
                    mirror.insert_component(object(o), name_component(owner));
                    owners.insert(o, owner);
                }
                Step::SetOwner { object: o, owner } => {
                    let updated = mirror.update_component(object(o), vec![owner_value(owner)]);
                    prop_assert_eq!(updated.is_some(), owners.contains_key(&o));
                    if let Some(current) = owners.get_mut(&o) {
                        *current = Some(owner);
                    }
                }
                Step::RemoveComponent(o) => {
                    let removed = mirror.remove_component(object(o)).is_some();
                    prop_assert_eq!(removed, owners.remove(&o).is_some());
                }
            }
            prop_assert_eq!(mirror.check_invariants(), Ok(()));
            prop_assert_eq!(mirror.entity_count(), entities.len());
            prop_assert_eq!(mirror.component_count(), owners.len());
            for (o, serial) in &entities {
                prop_assert_eq!(mirror.object_of(global(*serial)), Some(object(*o)));
                let expected: BTreeSet<u64> = owners
                    .iter()
                    .filter(|(_, owner)| **owner == Some(*o))
                    .map(|(c, _)| *c)
                    .collect();
                let actual: BTreeSet<u64> = components_of(&mirror, *o).into_iter().collect();
                prop_assert_eq!(actual, expected);
            }
        }
    }
}
