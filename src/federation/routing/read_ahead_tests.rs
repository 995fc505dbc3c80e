//! The read-ahead reads what the update paths then write: recorded side by
//! side over a real link (`test_pair.rs`).

use std::collections::BTreeSet;

use crate::federation::test_pair::TestPair;
use crate::less::session::Event;
use crate::scene::{Change, ChangeKind, ChangeSource};
use crate::tundra::{AttributeValue, ComponentId, EntityId};

const SETTLE_MS: u64 = 600;

/// Entities of A's with a Name and a Placeable, presented at B.
fn presented_pair(count: usize) -> (TestPair, Vec<EntityId>) {
    let mut pair = TestPair::new();
    let entities = (0..count)
        .map(|_| pair.nodes[0].create(&["Name", "Placeable"]))
        .collect();
    pair.run(SETTLE_MS);
    (pair, entities)
}

/// Edits the `name` attribute of the Name component of each entity at A.
fn rename(pair: &mut TestPair, entities: &[EntityId]) -> Vec<(EntityId, ComponentId)> {
    let a = &mut pair.nodes[0];
    let name_type = a.scene.registry().get_by_name("Name").unwrap().type_id;
    let mut edited = Vec::new();
    for (n, entity) in entities.iter().enumerate() {
        let component = a
            .scene
            .entity(*entity)
            .and_then(|e| e.component_of_type(name_type))
            .map(|c| c.id)
            .unwrap();
        let value = AttributeValue::String(format!("renamed {n}"));
        a.scene
            .edit_attribute(ChangeSource::Node, *entity, component, 0, value)
            .unwrap();
        edited.push((*entity, component));
    }
    edited
}

#[test]
fn the_update_read_ahead_reads_the_components_the_updates_change() {
    let (mut pair, entities) = presented_pair(4);
    // Two of four: the others' records must not be in the read-ahead.
    rename(&mut pair, &[entities[0], entities[2]]);
    pair.deliver(0);

    let b = &mut pair.nodes[1];
    let read_ahead: BTreeSet<(EntityId, ComponentId)> = b
        .federation
        .pending_update_targets(b.link)
        .filter_map(|target| target.scene)
        .collect();
    let mut journal: Vec<Change> = Vec::new();
    b.scene.take_journal_into(&mut journal);
    assert!(b
        .federation
        .handle_link_events(b.link, &mut b.scene)
        .is_none());
    b.scene.take_journal_into(&mut journal);
    let updated: BTreeSet<(EntityId, ComponentId)> = journal
        .iter()
        .filter_map(|change| match change.kind {
            ChangeKind::AttributeChanged(entity, component, _) => Some((entity, component)),
            _ => None,
        })
        .collect();
    assert_eq!(updated.len(), 2, "both renames applied: {journal:?}");
    assert_eq!(read_ahead, updated);
}

#[test]
fn the_edit_read_ahead_reads_the_objects_the_export_updates() {
    let (mut pair, entities) = presented_pair(3);
    let edited = rename(&mut pair, &[entities[1]]);
    let (entity, component) = edited[0];
    let a = &pair.nodes[0];
    let read_ahead: BTreeSet<u64> = a
        .federation
        .export_targets(entity, component)
        .map(|(_, object)| object.get())
        .collect();
    assert_eq!(read_ahead.len(), 1, "one link exports the component");

    // A's glue exports the edit; B's session receives what was updated.
    pair.deliver(0);
    let b = &pair.nodes[1];
    let updated: BTreeSet<u64> = b
        .federation
        .link(b.link)
        .unwrap()
        .session
        .pending_events()
        .filter_map(|event| match event {
            Event::EntityUpdated { entity, .. } => Some(entity.get()),
            _ => None,
        })
        .collect();
    assert_eq!(read_ahead, updated);
}
