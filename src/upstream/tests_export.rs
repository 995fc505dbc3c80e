//! Scripted exchanges for what the bridge sends the world server beyond
//! plain creation: entities of this node's own clients, parent changes,
//! entity references and custom component types.

use super::tests::{
    ack, bridge, created, edit_first_attribute, entity, frame, logged_in, named, sent,
};
use super::*;
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::messages::{
    CreateEntity, EditAttributes, EditAttributesBlock, RemoveEntity, SetEntityParent,
};
use crate::tundra::registry::CustomAttribute;
use crate::tundra::{
    AttributeEdit, AttributeType, AttributeValue, ComponentData, ComponentId, DecodeContext,
    EntityId, Message, Registry,
};

fn journal(b: &mut Bridge, scene: &mut Scene) {
    let changes = scene.take_journal();
    b.handle_scene_changes(scene, &changes);
}

#[test]
fn entities_of_this_nodes_own_clients_are_created_upstream_kept_current_and_removed() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let client = ChangeSource::Client(ClientId(1));
    let mine = entity(&mut scene, client, Origin::Local, "mine");
    journal(&mut b, &mut scene);
    let create = created(&mut b);
    assert!(create.entity_id.wire() > 0, "an unacked id, masked");
    assert_eq!(create.components.len(), 2);
    ack(&mut b, &mut scene, &create, 60, 1);
    assert_eq!(
        b.ids().resolve(EntityId(60)),
        ids::UpstreamEntity::Exported(mine)
    );

    // The world server's feed carrying it back is not imported.
    let echo = frame(Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(60),
        temporary: false,
        parent: Some(EntityId(0)),
        components: named(1, "mine", 3),
    }));
    b.handle_frame(Time::ZERO, &echo, &mut scene);
    assert_eq!(scene.len(), 2, "box and mine, no third copy");

    // The client edits it: the world server gets the edit under its ids.
    let component = scene
        .entity(mine)
        .unwrap()
        .component_of_type(25)
        .unwrap()
        .id;
    scene
        .edit_attribute(client, mine, component, 0, AttributeValue::Int(8))
        .unwrap();
    journal(&mut b, &mut scene);
    let out = sent(&mut b);
    let [Message::EditAttributes(edit)] = out.as_slice() else {
        panic!("one EditAttributes: {out:?}");
    };
    assert_eq!(edit.entity_id, EntityId(60));
    assert_eq!(edit.blocks[0].component_id, ComponentId(2));

    // A world-server client edits it: this node is its authority, the edit
    // is asked for, and the same value arriving in the scene is not echoed.
    let slots = scene
        .entity(mine)
        .unwrap()
        .component_of_type(25)
        .unwrap()
        .slot_types();
    let block = EditAttributesBlock::encode(
        ComponentId(2),
        &[AttributeEdit {
            index: 0,
            value: AttributeValue::Int(4),
        }],
        &slots,
    )
    .unwrap();
    let world_edit = frame(Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(60),
        blocks: vec![block],
    }));
    b.handle_frame(Time::ZERO, &world_edit, &mut scene);
    assert!(matches!(
        b.poll_event(),
        Some(BridgeEvent::EditToAuthority { entity, value: AttributeValue::Int(4), .. }) if entity == mine
    ));
    scene
        .edit_attribute(
            ChangeSource::Node,
            mine,
            component,
            0,
            AttributeValue::Int(4),
        )
        .unwrap();
    journal(&mut b, &mut scene);
    assert!(sent(&mut b).is_empty(), "not echoed");

    // The client removes it (or leaves): it leaves the world server.
    scene.remove_entity(client, mine).unwrap();
    journal(&mut b, &mut scene);
    assert_eq!(
        sent(&mut b),
        vec![Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(60)
        })]
    );
}

#[test]
fn parent_changes_are_sent_in_world_server_ids() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let world_box = b.ids().mirrored(EntityId(5)).unwrap().local;
    let visitor = entity(&mut scene, ChangeSource::Peer(1), Origin::Remote, "visitor");
    journal(&mut b, &mut scene);
    let create = created(&mut b);
    assert_eq!(create.parent, Some(EntityId(0)));
    ack(&mut b, &mut scene, &create, 50, 1);

    scene
        .set_parent(ChangeSource::Peer(1), visitor, Some(world_box))
        .unwrap();
    journal(&mut b, &mut scene);
    assert_eq!(
        sent(&mut b),
        vec![Message::SetEntityParent(SetEntityParent {
            scene_id: 0,
            entity_id: EntityId(50),
            parent_id: EntityId(5),
        })],
        "the world server's ids for both"
    );
    scene
        .set_parent(ChangeSource::Peer(1), visitor, None)
        .unwrap();
    journal(&mut b, &mut scene);
    assert_eq!(
        sent(&mut b),
        vec![Message::SetEntityParent(SetEntityParent {
            scene_id: 0,
            entity_id: EntityId(50),
            parent_id: EntityId(0),
        })],
        "unparented"
    );
}

#[test]
fn a_parent_without_a_world_server_id_yet_follows_its_reply() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let parent = entity(&mut scene, ChangeSource::Peer(1), Origin::Remote, "parent");
    journal(&mut b, &mut scene);
    let parent_create = created(&mut b);
    let child = entity(&mut scene, ChangeSource::Peer(1), Origin::Remote, "child");
    scene
        .set_parent(ChangeSource::Peer(1), child, Some(parent))
        .unwrap();
    journal(&mut b, &mut scene);
    let child_create = created(&mut b);
    assert_eq!(
        child_create.parent,
        Some(EntityId(0)),
        "no id of the parent to give yet"
    );
    ack(&mut b, &mut scene, &child_create, 51, 3);
    assert!(sent(&mut b).is_empty(), "the parent is still unacked");
    ack(&mut b, &mut scene, &parent_create, 50, 1);
    assert_eq!(
        sent(&mut b),
        vec![Message::SetEntityParent(SetEntityParent {
            scene_id: 0,
            entity_id: EntityId(51),
            parent_id: EntityId(50),
        })]
    );
}

/// A Placeable (type 20) with `parentRef` (attribute 4) naming `reference`.
fn placeable(reference: &str) -> Vec<ComponentData> {
    let registry = Registry::builtin();
    let schema = registry.get(20).unwrap();
    let mut values = schema.default_values();
    values[4] = AttributeValue::EntityReference(reference.to_owned());
    vec![ComponentData::with_values(
        ComponentId(0x4000_0001),
        schema,
        values,
    )]
}

#[test]
fn entity_references_are_renumbered_into_world_server_ids() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let world_box = b.ids().mirrored(EntityId(5)).unwrap().local;
    assert_ne!(world_box, EntityId(5), "the node numbers its copy itself");
    let lamp = scene
        .create_entity(
            ChangeSource::Peer(1),
            None,
            Origin::Remote,
            false,
            None,
            placeable(&world_box.0.to_string()),
        )
        .unwrap()
        .id;
    journal(&mut b, &mut scene);
    let create = created(&mut b);
    let crate::tundra::ComponentBody::Attributes(block) = &create.components[0].body else {
        panic!("attributes");
    };
    assert_eq!(
        block.values[4],
        AttributeValue::EntityReference("5".into()),
        "parentRef in the world server's ids at creation"
    );
    ack(&mut b, &mut scene, &create, 50, 1);

    // parentRef changed later: by name it travels as it is, by id renumbered.
    let component = scene
        .entity(lamp)
        .unwrap()
        .component_of_type(20)
        .unwrap()
        .id;
    for (text, expected) in [("box", "box"), (world_box.0.to_string().as_str(), "5")] {
        scene
            .edit_attribute(
                ChangeSource::Peer(1),
                lamp,
                component,
                4,
                AttributeValue::EntityReference(text.to_owned()),
            )
            .unwrap();
        journal(&mut b, &mut scene);
        let out = sent(&mut b);
        let [Message::EditAttributes(edit)] = out.as_slice() else {
            panic!("one EditAttributes: {out:?}");
        };
        let slots = Registry::builtin().get(20).unwrap().slot_types();
        let decoded = edit.blocks[0].decode(&slots).unwrap();
        assert_eq!(
            decoded.edits,
            vec![AttributeEdit {
                index: 4,
                value: AttributeValue::EntityReference(expected.into())
            }]
        );
    }
}

#[test]
fn custom_types_are_announced_before_their_first_component_and_edits_follow() {
    let mut registry = Registry::builtin();
    registry.register_custom(
        "EC_Score",
        vec![CustomAttribute {
            ty: AttributeType::Int,
            id: "points".into(),
            name: "Points".into(),
        }],
    );
    let (mut b, mut scene) = (bridge(), Scene::new(registry.clone()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[]);
    let schema = registry.get_by_name("Score").unwrap().clone();
    let data = ComponentData::with_values(
        ComponentId(0x4000_0001),
        &schema,
        vec![AttributeValue::Int(1)],
    );
    let scorer = scene
        .create_entity(
            ChangeSource::Peer(1),
            None,
            Origin::Remote,
            false,
            None,
            vec![data],
        )
        .unwrap()
        .id;
    journal(&mut b, &mut scene);
    let context = DecodeContext {
        protocol_version: crate::tundra::ProtocolVersion(3),
        registry: &registry,
    };
    let decode = |b: &mut Bridge| -> Vec<Message> {
        std::iter::from_fn(|| b.poll_transmit())
            .map(|f| Message::decode_frame(&f, &context).unwrap())
            .collect()
    };
    let out = decode(&mut b);
    let [Message::RegisterComponentType(register), Message::CreateEntity(create)] = out.as_slice()
    else {
        panic!("RegisterComponentType, then CreateEntity: {out:?}");
    };
    assert_eq!(register.type_id, schema.type_id);
    ack(&mut b, &mut scene, create, 50, 1);
    edit_first_attribute(&mut scene, scorer, schema.type_id, AttributeValue::Int(7));
    journal(&mut b, &mut scene);
    let out = decode(&mut b);
    assert!(
        matches!(out.as_slice(), [Message::EditAttributes(e)] if e.entity_id == EntityId(50)),
        "announced once; the edit goes out: {out:?}"
    );
}

#[test]
fn entity_references_from_the_world_server_are_renumbered_into_node_ids() {
    let (mut b, mut scene) = (bridge(), Scene::new(Registry::builtin()));
    logged_in(&mut b, &mut scene, Time::ZERO, &[(5, "box", 1)]);
    let world_box = b.ids().mirrored(EntityId(5)).unwrap().local;
    assert_ne!(world_box, EntityId(5), "the node numbers its copy itself");
    let parent_ref = |scene: &Scene, entity: EntityId| {
        let entity = scene.entity(entity).unwrap();
        let placeable = entity.component_of_type(20).unwrap();
        placeable.attribute(4).unwrap().value.clone()
    };

    // A world entity whose Placeable names the box by the world's id.
    let lamp = CreateEntity {
        scene_id: 0,
        entity_id: EntityId(6),
        temporary: false,
        parent: None,
        components: placeable("5"),
    };
    b.handle_frame(Time::ZERO, &frame(Message::CreateEntity(lamp)), &mut scene);
    let lamp = b.ids().mirrored(EntityId(6)).unwrap().local;
    assert_eq!(
        parent_ref(&scene, lamp),
        AttributeValue::EntityReference(world_box.0.to_string()),
        "the node's copy names the node's copy of the box"
    );

    // Later edits: an id is renumbered, a name kept, an unknown id emptied.
    let slots = Registry::builtin().get(20).unwrap().slot_types();
    for (text, expected) in [
        ("box", "box".to_owned()),
        ("5", world_box.0.to_string()),
        ("77", String::new()),
    ] {
        let edit = EditAttributes {
            scene_id: 0,
            entity_id: EntityId(6),
            blocks: vec![EditAttributesBlock::encode(
                ComponentId(0x4000_0001),
                &[AttributeEdit {
                    index: 4,
                    value: AttributeValue::EntityReference(text.to_owned()),
                }],
                &slots,
            )
            .unwrap()],
        };
        b.handle_frame(
            Time::ZERO,
            &frame(Message::EditAttributes(edit)),
            &mut scene,
        );
        assert_eq!(
            parent_ref(&scene, lamp),
            AttributeValue::EntityReference(expected),
            "edit naming {text}"
        );
    }
}
