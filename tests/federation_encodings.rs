//! Compact encodings across a federation link (docs/less-wire.md §16): two
//! nodes that both offer them exchange transforms in `tundra-transform/2`
//! within its stated precision, Euler angles as the origin wrote them; a
//! node that offers none gets every value plain and exact, and both ends
//! agree without any error.

mod sim;

use std::time::Duration;

use lessgate::less::encoding::link::{offered_features, UPDATE_PROPERTY_FEATURE};
use lessgate::less::encoding::rotation::{angle_max_error_degrees, ANGLE_BITS};
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
    // Yaw only: the angle as written, to half a 13-bit step of 720°.
    assert!(
        (sent.rot.y - received.rot.y).abs() <= 720.0 / 16384.0 + 1e-3,
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

/// Node 0's client writes `rotation` on its box; what node 1's client then
/// reads (the transform node 1 sent it).
fn rotation_seen_across(features: &[String], rotation: Float3) -> Float3 {
    let mut sim = Sim::new(2, 11);
    sim.connect_with(0, 1, LinkModel::CLEAN, features, features);
    let a = sim.add_client(0);
    let b = sim.add_client(1);
    sim.create_box(0, a, 1, "statue", 5.0);
    sim.run(SETTLE);
    let entity = sim.find(0, a, "statue")[0];
    let written = AttributeValue::Transform(Transform {
        pos: Float3::new(5.0, 0.0, 0.0),
        rot: rotation,
        scale: Float3::new(1.0, 1.0, 1.0),
    });
    sim.set_transform(0, a, entity, written);
    sim.run(SETTLE);
    let at_b = sim.find(1, b, "statue")[0];
    let components = &sim.view(1, b).entities[&at_b];
    let (_, (_, values)) = components
        .iter()
        .find(|(_, (type_id, _))| *type_id == 20)
        .expect("node 1's client has the Placeable");
    let AttributeValue::Transform(seen) = values[0] else {
        panic!("a transform: {values:?}")
    };
    seen.rot
}

#[test]
fn euler_angles_reach_other_nodes_clients_as_the_origin_wrote_them() {
    let written = Float3::new(-14.7, -221.7, 0.0);
    let seen = rotation_seen_across(&offered_features(), written);
    let bound = angle_max_error_degrees(ANGLE_BITS) as f32;
    for (w, s) in [
        (written.x, seen.x),
        (written.y, seen.y),
        (written.z, seen.z),
    ] {
        assert!(
            (w - s).abs() <= bound + 1e-4,
            "wrote {written:?}, node 1's client reads {seen:?}"
        );
    }
    // A link to a node that knows only the first layout still carries the
    // orientation, written with other angles (docs/less-wire.md §16.4).
    let older = rotation_seen_across(&["enc:tundra-transform/1".to_owned()], written);
    assert!((older.y - written.y).abs() > 90.0, "{older:?}");
}
