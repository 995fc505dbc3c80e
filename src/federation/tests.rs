//! Import, export, authority and link loss, between two federations over
//! one in-memory link (`test_pair.rs`).

use std::collections::BTreeSet;

use super::test_pair::TestPair;
use super::{GlobalId, LinkPolicy, TypeFilter};
use crate::scene::{Change, ChangeSource, Origin};
use crate::tundra::{AttributeValue, ComponentId};

/// Long enough for introductions, acknowledgements and re-sends to settle.
const SETTLE_MS: u64 = 600;

fn only(names: &[&str]) -> TypeFilter {
    TypeFilter::Only(
        names
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<_>>(),
    )
}

fn global_on_a(pair: &TestPair, entity: crate::tundra::EntityId) -> GlobalId {
    pair.nodes[0]
        .federation
        .global_of(entity)
        .expect("own entity has an identity")
}

/// A creates an entity with components of `types`, and the pair runs until
/// B has it: the entity at A and its identity.
fn shared_from_a(pair: &mut TestPair, types: &[&str]) -> (crate::tundra::EntityId, GlobalId) {
    let entity = pair.nodes[0].create(types);
    let global = global_on_a(pair, entity);
    pair.run(SETTLE_MS);
    (entity, global)
}

#[test]
fn an_entity_a_peer_introduces_is_imported_once_with_its_components() {
    let mut pair = TestPair::new();
    let entity = pair.nodes[0].create(&["Name", "Placeable"]);
    let global = global_on_a(&pair, entity);
    assert_eq!(global.origin, pair.nodes[0].federation.node_id());
    pair.run(SETTLE_MS);
    pair.check();

    let b = &pair.nodes[1];
    let presented = b.presented(global).expect("B presents A's entity");
    assert_eq!(b.remote_count(), 1);
    assert_eq!(b.federation.global_of(presented), Some(global));
    assert_eq!(b.component_types(presented), ["Name", "Placeable"]);
    assert_eq!(
        b.scene.entity(presented).map(|e| e.origin),
        Some(Origin::Remote)
    );
    let link = b.federation.link(b.link).expect("link");
    assert_eq!(link.mirror.entity_count(), 1);
    assert_eq!(link.mirror.component_count(), 2);
    // B does not send A's own entity back to it.
    assert!(b.federation.exported_objects(b.link, presented).is_none());

    // More time (keepalives, acknowledgements) presents nothing twice.
    pair.run(SETTLE_MS);
    pair.check();
    assert_eq!(pair.nodes[1].remote_count(), 1);
    assert_eq!(pair.nodes[1].presented(global), Some(presented));
}

#[test]
fn a_component_added_later_joins_the_imported_entity() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name"]);
    let a = &mut pair.nodes[0];
    let schema = a.scene.registry().get_by_name("Placeable").unwrap().clone();
    let values = schema
        .attributes
        .iter()
        .map(|x| x.default.clone())
        .collect();
    let data = crate::tundra::ComponentData::with_values(ComponentId(9), &schema, values);
    a.scene
        .create_components(ChangeSource::Node, entity, vec![data])
        .expect("component added");
    a.settle();
    pair.run(SETTLE_MS);
    pair.check();
    let b = &pair.nodes[1];
    let presented = b.presented(global).unwrap();
    assert_eq!(b.component_types(presented), ["Name", "Placeable"]);
}

#[test]
fn an_export_filter_leaves_out_the_types_it_does_not_name() {
    let export_names_only = LinkPolicy {
        export: only(&["Name"]),
        accept: TypeFilter::All,
    };
    let mut pair = TestPair::with_policies(export_names_only, LinkPolicy::default());
    let (entity, global) = shared_from_a(&mut pair, &["Name", "Placeable", "RigidBody"]);
    pair.check();

    let a = &pair.nodes[0];
    let (_, exported) = a.federation.exported_objects(a.link, entity).unwrap();
    assert_eq!(exported.len(), 1, "only the Name component goes out");
    let b = &pair.nodes[1];
    let presented = b.presented(global).expect("the entity itself goes out");
    assert_eq!(b.component_types(presented), ["Name"]);
}

#[test]
fn an_accept_filter_leaves_out_the_types_it_does_not_name() {
    let accept_names_only = LinkPolicy {
        export: TypeFilter::All,
        accept: only(&["EC_Name"]),
    };
    let mut pair = TestPair::with_policies(LinkPolicy::default(), accept_names_only);
    let (_, global) = shared_from_a(&mut pair, &["Name", "Placeable"]);
    pair.check();
    let b = &pair.nodes[1];
    let presented = b.presented(global).unwrap();
    assert_eq!(b.component_types(presented), ["Name"]);
}

/// The `name` attribute of the Name component of `entity` on node `index`.
fn name_of(pair: &TestPair, index: usize, entity: crate::tundra::EntityId) -> Option<String> {
    let node = &pair.nodes[index];
    let name_type = node.scene.registry().get_by_name("Name")?.type_id;
    let component = node.scene.entity(entity)?.component_of_type(name_type)?;
    match &component.attribute(0)?.value {
        AttributeValue::String(text) => Some(text.clone()),
        _ => None,
    }
}

#[test]
fn an_edit_of_a_remote_entity_becomes_a_tweak_its_authority_applies() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name"]);
    let b = &mut pair.nodes[1];
    let presented = b.presented(global).unwrap();
    let name_type = b.scene.registry().get_by_name("Name").unwrap().type_id;
    let component = b
        .scene
        .entity(presented)
        .and_then(|e| e.component_of_type(name_type))
        .map(|c| c.id)
        .unwrap();
    let renamed = AttributeValue::String("renamed at B".into());
    b.federation
        .handle_remote_edit(presented, component, 0, renamed, &b.scene);
    // B's copy waits for the authority: nothing changed here yet.
    let mut journal: Vec<Change> = Vec::new();
    b.scene.take_journal_into(&mut journal);
    assert!(journal.is_empty(), "B applied the edit itself: {journal:?}");
    assert_eq!(name_of(&pair, 1, presented).as_deref(), Some(""));

    // A, the authority, applies it as a change from its link to B; its
    // update brings B's copy along.
    pair.run(SETTLE_MS);
    pair.check();
    assert_eq!(name_of(&pair, 0, entity).as_deref(), Some("renamed at B"));
    assert_eq!(
        name_of(&pair, 1, presented).as_deref(),
        Some("renamed at B")
    );
    assert_eq!(pair.nodes[0].federation.stats().scene_refusals, 0);
}

#[test]
fn removing_a_remote_entity_asks_its_authority() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name"]);
    let b = &mut pair.nodes[1];
    let presented = b.presented(global).unwrap();
    b.federation.handle_remote_remove(presented, None);
    // Still here until the authority removes it.
    assert!(b.scene.entity(presented).is_some());
    pair.run(SETTLE_MS);
    pair.check();
    assert!(pair.nodes[0].scene.entity(entity).is_none(), "A removed it");
    assert!(
        pair.nodes[1].scene.entity(presented).is_none(),
        "and B's copy left"
    );
    assert!(pair.nodes[1].presented(global).is_none());
    let link = pair.nodes[1].federation.link(pair.nodes[1].link).unwrap();
    assert_eq!(link.mirror.entity_count(), 0);
    assert_eq!(link.mirror.component_count(), 0);
}

#[test]
fn a_link_going_down_withdraws_what_it_mirrored() {
    let mut pair = TestPair::new();
    let first = pair.nodes[0].create(&["Name", "Placeable"]);
    let second = pair.nodes[0].create(&["Name"]);
    let own_b = pair.nodes[1].create(&["Name"]);
    pair.run(SETTLE_MS);
    assert_eq!(pair.nodes[1].remote_count(), 2);
    assert_eq!(pair.nodes[0].remote_count(), 1);

    pair.link_down(1);
    pair.check();
    let b = &pair.nodes[1];
    assert_eq!(
        b.remote_count(),
        0,
        "entities reachable only through the link left"
    );
    for entity in [first, second] {
        assert!(b.presented(global_on_a(&pair, entity)).is_none());
    }
    assert!(b.scene.entity(own_b).is_some(), "B's own entity stays");
    assert!(b.federation.link(b.link).is_none());

    pair.link_down(0);
    pair.check();
    assert_eq!(pair.nodes[0].remote_count(), 0);
    assert!(pair.nodes[0].scene.entity(first).is_some());
}

#[test]
fn an_own_entity_removed_leaves_the_peer_and_the_identity_maps() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name"]);
    let a = &mut pair.nodes[0];
    a.scene
        .remove_entity(ChangeSource::Node, entity)
        .expect("removed");
    a.settle();
    assert_eq!(a.federation.global_of(entity), None);
    assert!(a.federation.exported_objects(a.link, entity).is_none());
    pair.run(SETTLE_MS);
    pair.check();
    assert!(pair.nodes[1].presented(global).is_none());
    assert_eq!(pair.nodes[1].remote_count(), 0);
}

#[test]
fn an_attribute_change_at_the_origin_reaches_the_peer() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name"]);
    let a = &mut pair.nodes[0];
    let component = *a
        .scene
        .entity(entity)
        .unwrap()
        .components
        .keys()
        .next()
        .unwrap();
    a.scene
        .edit_attribute(
            ChangeSource::Node,
            entity,
            component,
            0,
            AttributeValue::String("moved".into()),
        )
        .unwrap();
    a.settle();
    pair.run(SETTLE_MS);
    pair.check();
    let presented = pair.nodes[1].presented(global).unwrap();
    assert_eq!(name_of(&pair, 1, presented).as_deref(), Some("moved"));
    assert_eq!(pair.nodes[1].remote_count(), 1);
}

#[test]
fn a_changed_export_filter_applies_to_the_live_link() {
    let mut pair = TestPair::new();
    let (entity, global) = shared_from_a(&mut pair, &["Name", "Placeable"]);
    let b_presents = |pair: &TestPair| {
        let b = &pair.nodes[1];
        b.component_types(b.presented(global).expect("the entity stays on B"))
    };
    assert_eq!(b_presents(&pair), ["Name", "Placeable"]);

    // Narrowed: Placeable is withdrawn from B, the entity and its Name stay.
    let a = &mut pair.nodes[0];
    a.federation
        .set_link_export(a.link, only(&["Name"]), &a.scene);
    pair.run(SETTLE_MS);
    pair.check();
    assert_eq!(b_presents(&pair), ["Name"]);
    let a = &pair.nodes[0];
    let (_, exported) = a.federation.exported_objects(a.link, entity).unwrap();
    assert_eq!(exported.len(), 1);
    // A's own policy names B's new filter (section 4.1).
    assert!(!a
        .federation
        .own_policy()
        .allows(uuid::Uuid::from_u128(0xb), "Placeable"));

    // Widened again: Placeable is introduced on the same link.
    let a = &mut pair.nodes[0];
    a.federation
        .set_link_export(a.link, TypeFilter::All, &a.scene);
    pair.run(SETTLE_MS);
    pair.check();
    assert_eq!(b_presents(&pair), ["Name", "Placeable"]);
    assert!(pair.up);
}

#[test]
fn a_narrowed_accept_filter_drops_the_refused_types_on_the_live_link() {
    let mut pair = TestPair::new();
    let (_, global) = shared_from_a(&mut pair, &["Name", "Placeable"]);
    let b = &pair.nodes[1];
    let presented = b.presented(global).unwrap();
    assert_eq!(b.component_types(presented), ["Name", "Placeable"]);

    let b = &mut pair.nodes[1];
    b.federation
        .narrow_link_accept(b.link, only(&["EC_Name"]), &mut b.scene);
    b.settle();
    let b = &pair.nodes[1];
    assert_eq!(b.component_types(presented), ["Name"]);
    pair.check();
    // The peer's later packets do not bring it back; the link stays up.
    pair.run(SETTLE_MS);
    pair.check();
    let b = &pair.nodes[1];
    assert_eq!(b.component_types(presented), ["Name"]);
    assert!(pair.up);
}

/// The authority reads take-authority's arguments itself (the method
/// declares no signature, as it takes two or three): a reason it does not
/// know, however long, is granted and counted as `request`; a known one is
/// counted as stated; a reason of the wrong type is answered 400 and
/// grants nothing (docs/federation.md §7.2).
#[test]
fn the_authority_reads_and_counts_the_reason_a_peer_states() {
    use super::authority::take_authority::take_authority_method;
    use crate::less::message::MethodStatus;
    use crate::less::session::Event;
    use crate::less::value::Value;

    let long = "z".repeat(60_000);
    let cases = [
        (
            Some(Value::String(long)),
            MethodStatus::SUCCESS,
            Some("request"),
        ),
        (
            Some(Value::String("operator".into())),
            MethodStatus::SUCCESS,
            Some("operator"),
        ),
        (None, MethodStatus::SUCCESS, Some("request")),
        (Some(Value::Integer(2)), MethodStatus::BAD_REQUEST, None),
    ];
    for (reason, status, counted) in cases {
        let mut pair = TestPair::new();
        let (_, global) = shared_from_a(&mut pair, &["Name"]);
        let requester = pair.nodes[1].federation.node_id();
        let mut arguments = vec![Value::Uuid(requester), Value::Integer(0)];
        arguments.extend(reason);
        let b = &mut pair.nodes[1];
        let link = b.federation.link_mut(b.link).unwrap();
        let object = link.mirror.object_of(global).unwrap();
        let call = link
            .session
            .invoke_method(object, take_authority_method(), arguments)
            .expect("the session checks no signature for take-authority");
        // B's call reaches A, which answers; B's session keeps the answer.
        let mut answer = None;
        for _ in 0..40 {
            pair.advance_and_deliver(5, 1);
            let a = &mut pair.nodes[0];
            let closed = a.federation.handle_link_events(a.link, &mut a.scene);
            assert!(closed.is_none(), "{closed:?}");
            a.settle();
            pair.advance_and_deliver(5, 0);
            let b = &mut pair.nodes[1];
            let session = &mut b.federation.link_mut(b.link).unwrap().session;
            while let Some(event) = session.poll_event() {
                if let Event::MethodResult {
                    request, status, ..
                } = event
                {
                    if request == call {
                        answer = Some(status);
                    }
                }
            }
            if answer.is_some() {
                break;
            }
        }
        assert_eq!(answer, Some(status), "{counted:?}");
        let given: Vec<_> = pair.nodes[0]
            .federation
            .stats()
            .handed_over
            .iter()
            .map(|((peer, reason), n)| (*peer, *reason, *n))
            .collect();
        let expected: Vec<_> = counted.map(|r| (requester, r, 1)).into_iter().collect();
        assert_eq!(given, expected);
    }
}

/// The entity type URI node `index` introduced on its link, as its peer
/// saw it.
fn entity_uri_from(pair: &TestPair, index: usize) -> Option<String> {
    let peer = &pair.nodes[1 - index];
    let link = peer.federation.link(peer.link)?;
    link.remote_types
        .iter()
        .filter(|(_, kind)| **kind == super::routing::link::RemoteType::Entity)
        .find_map(|(type_id, _)| Some(link.session.remote_type(*type_id)?.0.to_owned()))
}

#[test]
fn a_link_without_the_version_2_feature_carries_entity_type_1() {
    use super::wire::features::LinkFeatures;
    use super::wire::mapping::{ENTITY_URI, ENTITY_URI_V1};
    let mut old = TestPair::build(
        [LinkPolicy::default(), LinkPolicy::default()],
        LinkFeatures::default(),
        [None, None],
    );
    let (_, global) = shared_from_a(&mut old, &["Name"]);
    old.check();
    assert!(old.nodes[1].presented(global).is_some());
    assert_eq!(entity_uri_from(&old, 0).as_deref(), Some(ENTITY_URI_V1));

    let mut new = TestPair::new();
    let (_, global) = shared_from_a(&mut new, &["Name"]);
    assert!(new.nodes[1].presented(global).is_some());
    assert_eq!(entity_uri_from(&new, 0).as_deref(), Some(ENTITY_URI));
}

/// A peer built when version 1 of the entity type was documented with
/// properties 6-8 subscribes them: the link stays up and the peer is sent
/// what version 1 declares (docs/less-wire.md §10: undeclared ids in a
/// subscription are ignored).
#[test]
fn a_peer_subscribing_properties_version_1_lacks_keeps_its_link() {
    use super::wire::features::LinkFeatures;
    use super::wire::mapping::{entity_schemas, ENTITY_URI_V1};
    use super::wire::schemas::schema_registry;
    let [_, v2] = entity_schemas();
    let mut later = schema_registry(&crate::tundra::Registry::builtin());
    later.insert(crate::less::schema::TypeSchema::new(
        ENTITY_URI_V1,
        v2.components.clone(),
    ));
    let mut pair = TestPair::build(
        [LinkPolicy::default(), LinkPolicy::default()],
        LinkFeatures::default(),
        [None, Some(later)],
    );
    let (entity, global) = shared_from_a(&mut pair, &["Name", "Placeable"]);
    // `run` fails the test if either session closed.
    pair.run(SETTLE_MS);
    pair.check();
    let presented = pair.nodes[1].presented(global).expect("B presents it");
    assert_eq!(
        pair.nodes[1].component_types(presented),
        ["Name", "Placeable"]
    );
    let a = &mut pair.nodes[0];
    assert!(a.federation.exported_objects(a.link, entity).is_some());
    let link = a.federation.link_mut(a.link).unwrap();
    let entity_type = link.type_for(ENTITY_URI_V1).unwrap();
    let subscribed: Vec<u64> = link
        .session
        .peer_subscription(entity_type)
        .unwrap()
        .iter()
        .map(|key| key.property.0)
        .collect();
    assert_eq!(subscribed, [1, 2, 3, 4, 5], "6-8 ignored, the rest kept");
}

#[test]
fn take_authority_is_not_sent_on_a_version_1_route() {
    use super::wire::features::LinkFeatures;
    let mut pair = TestPair::build(
        [LinkPolicy::default(), LinkPolicy::default()],
        LinkFeatures::default(),
        [None, None],
    );
    let (_, global) = shared_from_a(&mut pair, &["Name"]);
    let b = &mut pair.nodes[1];
    let presented = b.presented(global).unwrap();
    let asked = b
        .federation
        .request_authority(presented, super::HandoverReason::Request, &b.scene);
    assert_eq!(
        asked,
        Err(super::HandoverError::NoRoute(presented)),
        "version 1 has no take-authority method"
    );
    pair.run(SETTLE_MS);
    pair.check();
    let a = &pair.nodes[0];
    assert!(a.federation.tracked.get(&global).unwrap().is_local());
}

/// The placeable's transform of an entity in node `index`'s scene.
fn transform_at(
    pair: &TestPair,
    index: usize,
    entity: crate::tundra::EntityId,
) -> Option<AttributeValue> {
    let scene = &pair.nodes[index].scene;
    let placeable = scene.registry().get_by_name("Placeable")?.type_id;
    let component = scene.entity(entity)?.component_of_type(placeable)?;
    Some(component.attribute(0)?.value.clone())
}

/// A hand-over to a node that cannot hold one of the entity's components
/// (its accept list refuses it): the old authority presents the new
/// authority's copy without it once the wait is over, instead of freezing
/// the entity at its last state (docs/federation.md §7.3).
#[test]
fn a_handover_to_a_node_lacking_a_component_does_not_freeze_the_entity() {
    use super::wire::features::LinkFeatures;
    let accepting_placeable_only = LinkPolicy {
        export: TypeFilter::All,
        accept: only(&["Placeable"]),
    };
    let mut pair = TestPair::build(
        [LinkPolicy::default(), accepting_placeable_only],
        LinkFeatures::all(),
        [None, None],
    );
    let (entity, global) = shared_from_a(&mut pair, &["Name", "Placeable"]);
    let at_b = pair.nodes[1].presented(global).expect("B presents it");
    assert_eq!(pair.nodes[1].component_types(at_b), ["Placeable"]);
    let b_id = pair.nodes[1].federation.node_id();
    let a = &mut pair.nodes[0];
    a.federation
        .hand_over(entity, b_id, super::HandoverReason::Operator, &mut a.scene)
        .unwrap();
    pair.run(SETTLE_MS);
    assert!(pair.nodes[1]
        .federation
        .tracked
        .get(&global)
        .unwrap()
        .is_local());

    // B, the authority now, moves the entity.
    let moved = AttributeValue::Transform(crate::tundra::values::Transform {
        pos: crate::tundra::values::Float3::new(4.0, 5.0, 6.0),
        ..Default::default()
    });
    let b = &mut pair.nodes[1];
    let placeable = b.scene.registry().get_by_name("Placeable").unwrap().type_id;
    let component = b
        .scene
        .entity(at_b)
        .unwrap()
        .component_of_type(placeable)
        .unwrap()
        .id;
    b.scene
        .edit_attribute(ChangeSource::Node, at_b, component, 0, moved.clone())
        .unwrap();
    b.settle();
    let wait = super::authority::handover_types::INCOMPLETE_COPY_WAIT.as_millis() as u64;
    pair.run(wait + SETTLE_MS);
    pair.check();
    assert_eq!(transform_at(&pair, 0, entity), Some(moved), "A follows B");
    assert_eq!(pair.nodes[0].component_types(entity), ["Placeable"]);
    assert_eq!(pair.nodes[0].federation.stats().incomplete_handovers, 1);
    assert_eq!(
        pair.nodes[0]
            .federation
            .authority_of(entity)
            .map(|(a, _)| a),
        Some(b_id)
    );
}
