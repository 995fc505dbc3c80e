//! Compact encodings across a federation link (docs/less-wire.md §16): two
//! nodes that both offer them exchange transforms in `tundra-transform/1`
//! within its stated precision; a node that offers none gets every value
//! plain and exact, and both ends agree without any error.

mod sim;

use std::time::Duration;

use lessgate::less::encoding::link::{offered_features, UPDATE_PROPERTY_FEATURE};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::AttributeValue;
use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(2);

fn moving(step: u32) -> AttributeValue {
    let t = step as f32;
    AttributeValue::Transform(Transform {
        pos: Float3::new(10.0 + t * 0.37, 1.5, -20.0 + t * 0.11),
        rot: Float3::new(0.0, t * 7.3, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// Runs 40 transform edits at node 0 and returns (bytes node 0 sent on its
/// link, the last transform sent, the one node 1 holds).
fn run(features_0: &[String], features_1: &[String]) -> (usize, Transform, Transform) {
    let mut sim = Sim::new(2, 7);
    let (link, _) = sim.connect_with(0, 1, LinkModel::CLEAN, features_0, features_1);
    let a = sim.add_client(0);
    sim.create_box(0, a, 1, "crate", 5.0);
    sim.run(SETTLE);
    let entity = sim.find(0, a, "crate")[0];
    let before = sim.bytes_sent.get(&(0, link)).copied().unwrap_or(0);
    let mut last = moving(0);
    for step in 1..=40 {
        last = moving(step);
        sim.set_transform(0, a, entity, last.clone());
        sim.run(Duration::from_millis(100));
    }
    sim.run(SETTLE);
    let sent = sim.bytes_sent[&(0, link)] - before;
    let AttributeValue::Transform(last) = last else {
        unreachable!()
    };
    let remote = sim.nodes[1]
        .scene()
        .entities()
        .next()
        .map(|e| e.id)
        .unwrap();
    (sent, last, sim.scene_transform(1, remote).unwrap())
}

#[test]
fn both_offering_use_the_compact_encoding_within_its_precision() {
    let (compact, sent, received) = run(&offered_features(), &offered_features());
    let error = [
        sent.pos.x - received.pos.x,
        sent.pos.y - received.pos.y,
        sent.pos.z - received.pos.z,
    ];
    assert!(error.iter().all(|e| e.abs() <= 1.0 / 512.0), "{error:?}");
    assert_ne!(sent, received, "quantized, so not bit-exact");
    // Yaw only: the rotation is exact to half a 12-bit step, modulo 360.
    let yaw = (sent.rot.y - received.rot.y).rem_euclid(360.0);
    assert!(
        yaw.min(360.0 - yaw) <= 360.0 / 8192.0 + 1e-3,
        "{sent:?} {received:?}"
    );
    assert_eq!(received.scale, Float3::new(1.0, 1.0, 1.0));

    let (plain, sent, received) = run(&offered_features(), &[]);
    assert_eq!(sent, received, "plain values are exact");
    assert!(
        compact * 10 < plain * 9,
        "compact link sent {compact} bytes, plain {plain}"
    );
}

#[test]
fn a_node_knowing_no_encodings_interoperates_both_ways() {
    let (_, sent, received) = run(&[], &offered_features());
    assert_eq!(sent, received);
    let (_, sent, received) = run(&["enc:tundra-transform/9".into()], &offered_features());
    assert_eq!(sent, received, "an unknown encoding name agrees on nothing");
}

#[test]
fn keyed_updates_save_their_addressing_bytes_and_stay_exact() {
    let keyed = [UPDATE_PROPERTY_FEATURE.to_owned()];
    let (with_keys, sent, received) = run(&keyed, &keyed);
    assert_eq!(sent, received, "plain values in update-property are exact");
    let (without, sent, received) = run(&keyed, &[]);
    assert_eq!(sent, received, "one side offering it agrees on nothing");
    // Each of the 40 moves saves the 4-byte path of update-entity (16.8),
    // less what acknowledgements and packet headers blur.
    assert!(
        with_keys + 40 * 3 <= without,
        "keyed link sent {with_keys} bytes, update-entity link {without}"
    );
}
