//! Background refresh (docs/less-wire.md §16.7, `src/federation/routing/refresh.rs`): a final
//! update lost where no re-send repairs it heals without a request.
//!
//! The link runs in stream framing, where LESS re-sends nothing, and the
//! simulated network loses every frame of the origin while the entity makes
//! its last move. Without refresh the peer keeps the stale position for
//! good; with the suggested refresh budget it converges.

mod sim;

use std::time::Duration;

use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(2);

/// Where node 1 holds the crate after its final move was lost.
fn after_lost_final_update(refresh_rate: u32) -> (Option<f32>, u64) {
    let mut sim = Sim::new(2, 11);
    sim.stream_mode = true;
    let (link, _) = sim.connect(0, 1, LinkModel::CLEAN);
    sim.nodes[0].set_refresh_rate(refresh_rate);
    let a = sim.add_client(0);
    sim.create_box(0, a, 1, "crate", 5.0);
    sim.run(SETTLE);
    let entity = sim.find(0, a, "crate")[0];
    sim.move_entity(0, a, entity, 6.0);
    sim.run(SETTLE);
    let remote = sim.nodes[1]
        .scene()
        .entities()
        .next()
        .map(|e| e.id)
        .unwrap();
    assert_eq!(sim.scene_x(1, remote), Some(6.0), "the link works");

    // The final move is lost on the wire.
    sim.blackout = Some((0, sim.now, sim.now + Duration::from_millis(300)));
    sim.move_entity(0, a, entity, 42.0);
    sim.run(Duration::from_millis(300));
    assert_eq!(sim.scene_x(0, entity), Some(42.0));
    assert_eq!(sim.scene_x(1, remote), Some(6.0), "the update was lost");
    sim.run(Duration::from_secs(5));
    let refreshed = sim.nodes[0]
        .federation()
        .link(link)
        .unwrap()
        .refresh
        .refreshed;
    (sim.scene_x(1, remote), refreshed)
}

#[test]
fn a_lost_final_update_heals_by_refresh_alone() {
    let (x, refreshed) = after_lost_final_update(0);
    assert_eq!(x, Some(6.0), "nothing else repairs it");
    assert_eq!(refreshed, 0);
    let (x, refreshed) =
        after_lost_final_update(lessgate::config::DEFAULT_REFRESH_BYTES_PER_SECOND);
    assert_eq!(x, Some(42.0), "refresh re-sent the current value");
    assert!(refreshed > 0);
}
