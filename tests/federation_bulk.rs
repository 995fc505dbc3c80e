//! Bulk packets across a federation link (docs/less-wire.md §16.5): a node
//! with a large world meets a peer; when both offer `bulk:zstd/1` the
//! world's introductions cross in compressed bulk packets, otherwise in
//! datagrams, and the peer ends up with every entity, name and position
//! either way.

mod sim;

use std::fmt::Write;
use std::time::Duration;

use lessgate::less::bulk::BULK_FEATURE;
use lessgate::tundra::{AttributeValue, Registry};
use sim::{LinkModel, Sim};

const ENTITIES: usize = 1_500;

/// A TXML world of `count` named, placed entities.
fn world(count: usize) -> String {
    let mut text = String::from("<scene>\n");
    for i in 1..=count {
        let _ = write!(
            text,
            r#" <entity id="{i}" sync="true">
  <component typeId="20" type="Placeable" sync="true">
   <attribute value="{},{},{},0,{},0,1,1,1" type="Transform" id="transform" name="Transform"/>
  </component>
  <component typeId="26" type="Name" sync="true">
   <attribute value="object-{i}" type="string" id="name" name="Name"/>
  </component>
 </entity>
"#,
            i % 100,
            i / 100,
            (i * 7) % 13,
            (i * 37) % 360,
        );
    }
    text.push_str("</scene>\n");
    text
}

/// Connects a node holding the world to an empty one; returns the bulk
/// packets the world's node sent and the bytes it sent on the link.
fn run(features_0: &[String], features_1: &[String], model: LinkModel) -> (u64, usize) {
    let mut sim = Sim::new(2, 11);
    let file = lessgate::tundra::txml::load(&world(ENTITIES), &Registry::builtin()).unwrap();
    sim.nodes[0].scene_mut().import_txml(&file);
    let (link, _) = sim.connect_with(0, 1, model, features_0, features_1);
    sim.run(Duration::from_secs(10));
    let names: std::collections::BTreeSet<String> = sim.nodes[1]
        .scene()
        .entities()
        .filter_map(|e| match e.component_of_type(26)?.attribute(0)?.value {
            AttributeValue::String(ref name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(names.len(), ENTITIES, "every entity crossed with its name");
    assert!(names.contains("object-1") && names.contains(&format!("object-{ENTITIES}")));
    let bulk = sim.nodes[0]
        .federation()
        .link(link)
        .map(|l| l.session.stats().bulk_packets_sent)
        .unwrap();
    (bulk, sim.bytes_sent[&(0, link)])
}

#[test]
fn a_large_world_crosses_in_bulk_packets_when_both_offer_them() {
    let both = [BULK_FEATURE.to_owned()];
    let (bulk, bulk_bytes) = run(&both, &both, LinkModel::CLEAN);
    assert!(bulk > 0, "bulk packets sent: {bulk}");
    let (plain, plain_bytes) = run(&both, &[], LinkModel::CLEAN);
    assert_eq!(plain, 0, "one side did not offer bulk:zstd/1");
    assert!(
        bulk_bytes * 2 < plain_bytes,
        "bulk {bulk_bytes} bytes, datagrams {plain_bytes}"
    );
}

#[test]
fn bulk_packets_cross_a_lossy_link() {
    let both = [BULK_FEATURE.to_owned()];
    let (bulk, _) = run(&both, &both, LinkModel::LOSSY);
    assert!(bulk > 0);
}
