//! Every fixture scene loads with the entity and component counts of the
//! fixture table of docs/tundra-wire.md §10.2, and its known components turn
//! into ComponentFullUpdates that survive the binary codec.

use std::path::PathBuf;
use std::time::Instant;

use lessgate::tundra::bits::{BitReader, BitWriter};
use lessgate::tundra::ids::ComponentId;
use lessgate::tundra::txml::{self, Scene};
use lessgate::tundra::{AttributeValue, ComponentData, Registry};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/txml")
        .join(name)
}

fn load(name: &str) -> Scene {
    txml::load_file(&fixture(name), &Registry::builtin()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (file, entities, components) from docs/tundra-wire.md §10.2. The WebTundra file is
/// not in that table; its counts are those of the file itself.
const TABLE: &[(&str, usize, usize)] = &[
    ("tundra-Tests-ReplicationTest.txml", 5, 17),
    ("tundra-Tests-PlaceableTest-placeabletest.txml", 1, 2),
    ("tundra-Tests-EntityMoveTest.txml", 3, 14),
    ("tundra-Avatar.txml", 7, 19),
    ("tundra-Physics.txml", 91, 365),
    ("tundra-Physics2.txml", 565, 2258),
    ("tundra-CompositeScene.txml", 5, 17),
    ("tundra-Canvas.txml", 5, 25),
    ("tundra-VolumeTrigger.txml", 2, 11),
    ("tundra-CustomComponent.txml", 2, 5),
    ("tundra-ChildEntity.txml", 2, 5),
    ("urho-Avatar.txml", 5, 15),
    ("urho-Test.txml", 2, 6),
    ("webtundra-rotating-cube.txml", 4, 11),
];

#[test]
fn every_fixture_loads_with_the_reference_counts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/txml");
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "txml")
        })
        .count();
    assert_eq!(on_disk, TABLE.len(), "every fixture file is in the table");
    for &(name, entities, components) in TABLE {
        let scene = load(name);
        assert_eq!(scene.entity_count(), entities, "{name} entities");
        assert_eq!(scene.component_count(), components, "{name} components");
        for (_, entity) in scene.flatten() {
            for c in &entity.components {
                assert!(
                    c.known,
                    "{name}: component type {} {:?} is known",
                    c.type_name, c.type_id
                );
            }
        }
    }
}

#[test]
fn modern_form_reads_ids_and_types() {
    let scene = load("tundra-Physics.txml");
    let flat = scene.flatten();
    let rigid = flat
        .iter()
        .flat_map(|(_, e)| &e.components)
        .find(|c| c.type_id == Some(23))
        .unwrap();
    assert_eq!(rigid.values.len(), 19);
    let urho = load("urho-Test.txml");
    assert!(urho
        .entities
        .iter()
        .flat_map(|e| &e.components)
        .any(|c| c.type_name == "Placeable"));
}

#[test]
fn dynamic_component_attributes_keep_their_types() {
    let scene = load("tundra-VolumeTrigger.txml");
    let dynamic: Vec<_> = scene
        .flatten()
        .into_iter()
        .flat_map(|(_, e)| e.components.iter())
        .filter(|c| c.type_id == Some(25))
        .collect();
    assert!(!dynamic.is_empty());
    assert!(dynamic
        .iter()
        .any(|c| c.name == "ControlSettings" && !c.dynamic.is_empty()));
}

#[test]
fn old_names_match_and_obsolete_ones_warn() {
    let scene = load("tundra-CustomComponent.txml");
    let env = &scene.entities[1].components[1];
    assert_eq!(env.type_name, "EnvironmentLight");
    // "Sunlight diffuse color" is not an attribute any more (§10.1).
    assert!(scene
        .warnings
        .iter()
        .any(|w| w.contains("Sunlight diffuse color")));
    let sky = &scene.entities[1].components[2];
    assert_eq!(sky.values[2], AttributeValue::Real(50.0));
}

#[test]
fn scene_components_encode_as_full_updates() {
    let registry = Registry::builtin();
    for &(name, _, _) in TABLE {
        let scene = load(name);
        for (_, entity) in scene.flatten() {
            for (i, c) in entity.components.iter().enumerate() {
                let update = c.to_full_update(ComponentId(i as u32 + 1)).unwrap();
                let mut w = BitWriter::new();
                update.write(&mut w).unwrap();
                let bytes = w.finish();
                let back = ComponentData::read(&mut BitReader::new(&bytes), &registry).unwrap();
                assert_eq!(back, update, "{name}");
            }
        }
    }
}

/// Not a pass/fail timing: prints how long the 1 MB Physics2 scene takes.
/// Run `cargo test --release --test tundra_txml -- --nocapture physics2`.
#[test]
fn physics2_load_time_is_reported() {
    let text = std::fs::read_to_string(fixture("tundra-Physics2.txml")).unwrap();
    let registry = Registry::builtin();
    let runs = 5;
    let start = Instant::now();
    let mut entities = 0;
    for _ in 0..runs {
        entities = txml::load(&text, &registry).unwrap().entity_count();
    }
    let per_load = start.elapsed() / runs;
    eprintln!(
        "physics2: {} bytes, {entities} entities, {per_load:?} per load",
        text.len()
    );
    assert_eq!(entities, 565);
}
