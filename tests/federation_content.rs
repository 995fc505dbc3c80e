//! Federation of the less common content, in simulation (fake time): custom
//! component types registered by a client, opaque components of types no
//! node knows, a parent set after creation, and the answer of an
//! EntityAction routed back to the node that sent it.

mod sim;

use std::time::Duration;

use lessgate::scene::ComponentContent;
use lessgate::tundra::messages::{
    exec_type, CreateEntity, EditAttributes, EditAttributesBlock, EntityAction,
    RegisterComponentType, RegisteredAttribute, SetEntityParent,
};
use lessgate::tundra::{
    AttributeEdit, AttributeType, AttributeValue, ComponentBody, ComponentData, ComponentId,
    EntityId, Message, Registry,
};
use sim::tundra_values::{entity_named, name_component};
use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(2);

/// A chain A - B - C with one client on A and one on C.
fn chain(seed: u64) -> (Sim, lessgate::scene::ClientId, lessgate::scene::ClientId) {
    let mut sim = Sim::new(3, seed);
    sim.connect(0, 1, LinkModel::CLEAN);
    sim.connect(1, 2, LinkModel::CLEAN);
    let a = sim.add_client(0);
    let c = sim.add_client(2);
    (sim, a, c)
}

#[test]
fn custom_component_types_federate_with_their_values_and_edits() {
    let (mut sim, a, c) = chain(21);
    // A's client creates with raw messages; the node's scene is checked.
    let register = RegisterComponentType {
        type_id: lessgate::tundra::registry::custom_type_id("EC_Thermostat"),
        type_name: "EC_Thermostat".into(),
        attributes: vec![
            RegisteredAttribute {
                ty: AttributeType::Real,
                id: "temperature".into(),
                name: "Temperature".into(),
            },
            RegisteredAttribute {
                ty: AttributeType::String,
                id: "mode".into(),
                name: "Mode".into(),
            },
        ],
    };
    sim.send(0, a, &Message::RegisterComponentType(register.clone()));
    let mut registry = Registry::builtin();
    register.register(&mut registry);
    let thermostat = registry.get(register.type_id).unwrap().clone();
    let components = vec![
        name_component(1, "boiler"),
        ComponentData::with_values(
            ComponentId(0x4000_0002),
            &thermostat,
            vec![
                AttributeValue::Real(21.5),
                AttributeValue::String("eco".into()),
            ],
        ),
    ];
    sim.send(
        0,
        a,
        &Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0001),
            temporary: false,
            parent: None,
            components,
        }),
    );
    sim.run(SETTLE);

    // C's client was told the type before the entity, and sees its values.
    let client_c = &sim.clients[2][&c];
    let known = client_c
        .registry
        .get(register.type_id)
        .expect("RegisterComponentType reached the client on C");
    assert_eq!(known.attributes.len(), 2);
    let boiler = sim.find(2, c, "boiler");
    assert_eq!(boiler.len(), 1, "seen once");
    let view = &sim.view(2, c).entities[&boiler[0]];
    let (component, (_, values)) = view
        .iter()
        .find(|(_, (t, _))| *t == register.type_id)
        .expect("the custom component");
    assert_eq!(
        values,
        &vec![
            AttributeValue::Real(21.5),
            AttributeValue::String("eco".into())
        ]
    );

    // C's client edits it: the tweak goes to A, which applies it and sends
    // the new state to everyone.
    let slots = thermostat.slot_types();
    let edit = EditAttributesBlock::encode(
        *component,
        &[AttributeEdit {
            index: 0,
            value: AttributeValue::Real(18.0),
        }],
        &slots,
    )
    .unwrap();
    sim.send(
        2,
        c,
        &Message::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: boiler[0],
            blocks: vec![edit],
        }),
    );
    sim.run(SETTLE);
    let entity_a = sim.nodes[0]
        .scene()
        .entities()
        .find(|e| e.component_of_type(register.type_id).is_some())
        .expect("A holds the boiler");
    assert_eq!(
        entity_a
            .component_of_type(register.type_id)
            .unwrap()
            .attribute(0)
            .unwrap()
            .value,
        AttributeValue::Real(18.0),
        "applied by A, the authority"
    );
    let view = &sim.view(2, c).entities[&boiler[0]];
    let (_, values) = view.values().find(|(t, _)| *t == register.type_id).unwrap();
    assert_eq!(values[0], AttributeValue::Real(18.0), "and came back to C");
}

#[test]
fn opaque_components_cross_every_hop_byte_for_byte() {
    let (mut sim, a, c) = chain(22);
    let registry = Registry::builtin();
    // A type no node's registry knows: carried as its attribute block.
    let unknown_type = 987_654;
    assert!(registry.get(unknown_type).is_none());
    let bytes = vec![0x03, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x7f];
    sim.send(
        0,
        a,
        &Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0001),
            temporary: false,
            parent: None,
            components: vec![
                name_component(1, "mystery"),
                ComponentData {
                    id: ComponentId(0x4000_0002),
                    type_id: unknown_type,
                    name: "blob".into(),
                    body: ComponentBody::Opaque(bytes.clone()),
                },
            ],
        }),
    );
    sim.run(SETTLE);
    let found = sim.find(2, c, "mystery");
    assert_eq!(found.len(), 1);
    let entity = sim.nodes[2].scene().entity(found[0]).unwrap();
    let component = entity
        .component_of_type(unknown_type)
        .expect("the opaque component reached C");
    assert_eq!(component.name, "blob");
    assert_eq!(component.content, ComponentContent::Opaque(bytes));
    assert!(
        sim.view(2, c).entities[&found[0]]
            .values()
            .any(|(t, _)| *t == unknown_type),
        "and C's client was sent it"
    );
}

#[test]
fn a_parent_set_after_creation_is_renumbered_on_every_node() {
    let (mut sim, a, c) = chain(23);
    // Entities on C first, so C's ids differ from A's.
    sim.create_box(2, c, 7, "c-only", 0.0);
    sim.create_box(2, c, 8, "c-only-2", 0.0);
    sim.create_box(0, a, 1, "shelf", 0.0);
    sim.create_box(0, a, 2, "vase", 1.0);
    sim.run(SETTLE);
    let shelf_a = sim.find(0, a, "shelf")[0];
    let vase_a = sim.find(0, a, "vase")[0];
    sim.send(
        0,
        a,
        &Message::SetEntityParent(SetEntityParent {
            scene_id: 0,
            entity_id: vase_a,
            parent_id: shelf_a,
        }),
    );
    sim.run(SETTLE);
    assert_eq!(
        sim.nodes[0].scene().entity(vase_a).unwrap().parent,
        Some(shelf_a)
    );
    for node in [1, 2] {
        let scene = sim.nodes[node].scene();
        let by_name = |wanted: &str| entity_named(scene, wanted).unwrap();
        let (shelf, vase) = (by_name("shelf"), by_name("vase"));
        assert_eq!(
            scene.entity(vase).unwrap().parent,
            Some(shelf),
            "node {node} holds the parent in its own ids"
        );
        if node == 2 {
            assert_ne!(shelf, shelf_a, "the ids differ between A and C");
        }
    }
}

#[test]
fn the_answer_to_an_action_comes_back_to_the_sending_node_only() {
    let (mut sim, a, c) = chain(24);
    sim.create_box(0, a, 1, "lamp", 0.0);
    sim.run(SETTLE);
    let lamp = sim.find(2, c, "lamp")[0];
    for name in ["On", "Off"] {
        sim.send(
            2,
            c,
            &Message::EntityAction(EntityAction {
                entity_id: lamp,
                name: name.into(),
                execution_type: exec_type::SERVER,
                parameters: vec![],
            }),
        );
    }
    sim.run(SETTLE);
    let executed: Vec<String> = sim.executed_actions[0]
        .drain(..)
        .map(|(_, action)| action.name)
        .collect();
    assert_eq!(
        executed,
        vec!["On".to_owned(), "Off".to_owned()],
        "in order"
    );
    let answers: Vec<_> = sim.action_results[2].drain(..).collect();
    assert_eq!(answers.len(), 2, "one method-result per call, back at C");
    assert!(answers.iter().all(|(status, _)| status.0 == 0), "success");
    assert!(
        sim.action_results[1].is_empty() && sim.action_results[0].is_empty(),
        "the middle node forwards the answer, the authority only sends it"
    );
}

#[test]
fn a_client_removing_remote_content_asks_the_authority_which_removes_it_everywhere() {
    let (mut sim, a, c) = chain(25);
    sim.create_box(0, a, 1, "crate", 0.0);
    sim.create_box(0, a, 2, "barrel", 0.0);
    sim.run(SETTLE);
    let crate_c = sim.find(2, c, "crate")[0];
    let placeable_c = *sim.view(2, c).entities[&crate_c]
        .iter()
        .find(|(_, (t, _))| *t == 20)
        .unwrap()
        .0;
    sim.send(
        2,
        c,
        &Message::RemoveComponents(lessgate::tundra::messages::RemoveComponents {
            scene_id: 0,
            entity_id: crate_c,
            component_ids: vec![placeable_c],
        }),
    );
    sim.run(SETTLE);
    for node in 0..3 {
        let scene = sim.nodes[node].scene();
        let crate_here = entity_named(scene, "crate")
            .and_then(|id| scene.entity(id))
            .expect("the crate stays");
        assert!(
            crate_here.component_of_type(20).is_none(),
            "node {node}: the Placeable is gone"
        );
    }
    assert!(
        !sim.view(0, a).entities[&sim.find(0, a, "crate")[0]]
            .values()
            .any(|(t, _)| *t == 20),
        "A's client was told"
    );

    let barrel_c = sim.find(2, c, "barrel")[0];
    sim.remove_entity(2, c, barrel_c);
    sim.run(SETTLE);
    assert!(
        sim.find(0, a, "barrel").is_empty(),
        "removed at the authority"
    );
    for node in 0..3 {
        let names: Vec<_> = sim.nodes[node]
            .scene()
            .entities()
            .filter(|e| {
                e.component_of_type(26)
                    .and_then(|c| c.attribute(0))
                    .is_some_and(|a| a.value == AttributeValue::String("barrel".into()))
            })
            .collect();
        assert!(names.is_empty(), "node {node} no longer has the barrel");
    }
    assert_eq!(sim.find(2, c, "crate").len(), 1, "the rest is untouched");
}

#[test]
fn a_whole_world_crosses_a_triangle_once_per_entity() {
    let mut sim = Sim::new(3, 26);
    let world = &lessgate::demo::worlds::WORLDS[0];
    let file = lessgate::tundra::txml::load(world.txml, &Registry::builtin()).unwrap();
    sim.nodes[0].scene_mut().import_txml(&file);
    let replicated = sim.nodes[0]
        .scene()
        .entities()
        .filter(|e| e.is_replicated())
        .count();
    sim.connect(0, 1, LinkModel::CLEAN);
    sim.connect(1, 2, LinkModel::CLEAN);
    sim.connect(0, 2, LinkModel::CLEAN);
    sim.run(SETTLE * 3);
    for node in [1, 2] {
        assert_eq!(
            sim.nodes[node].scene().len(),
            replicated,
            "node {node} presents every replicated entity of the world"
        );
    }
}
