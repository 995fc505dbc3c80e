//! The loss a session reports is the link's real drop rate: counted from
//! the peer's acknowledgements, re-sends whose original arrived (the
//! acknowledgement was lost or late) are not losses.

mod less_harness;

use std::time::Duration;

use less_harness::*;
use lessgate::less::ids::{Local, ObjectId};
use lessgate::less::session::FramingMode;

const TICK: Duration = Duration::from_millis(33);

/// A updates `entity` every tick, for ticks `ticks`.
fn stream_updates(sim: &mut Sim, entity: ObjectId<Local>, ticks: std::ops::Range<i64>) {
    for tick in ticks {
        sim.a
            .session
            .update_entity(entity, entity_values(tick, tick as f32))
            .unwrap();
        sim.run_for(TICK);
    }
}

/// A streams 1 500 updates over `model` with `seed`; returns the session
/// pair and the real drop rate of A's datagrams, printing both figures.
fn lossy_run(seed: u64, model: LinkModel) -> (Sim, f64) {
    let mut sim = Sim::new(seed, model, FramingMode::Datagram);
    let entity = introduce_crate(&mut sim.a);
    stream_updates(&mut sim, entity, 1..1500);
    let stats = sim.a.session.stats();
    assert_eq!(sim.a.model.closed, None, "seed {seed}: A closed");
    let real = sim.datagrams_dropped[1] as f64 / sim.datagrams_offered[1] as f64;
    println!(
        "seed {seed}: offered {} dropped {} real {:.2} % reported {:.2} % \
         (lost {} of {} sent, {} re-sent)",
        sim.datagrams_offered[1],
        sim.datagrams_dropped[1],
        100.0 * real,
        100.0 * stats.loss_rate(),
        stats.packets_lost,
        stats.packets_sent,
        stats.packets_resent
    );
    (sim, real)
}

/// 18 % of datagrams dropped each way (acknowledgements too): A's reported
/// loss is the fraction of its datagrams the link dropped, not twice it.
#[test]
fn reported_loss_matches_the_real_drop_rate() {
    for seed in 0..3u64 {
        let mut model = LinkModel::PERFECT;
        model.latency = Duration::from_millis(30);
        model.loss = 0.18;
        let (sim, real) = lossy_run(seed, model);
        let stats = sim.a.session.stats();
        assert_eq!(stats.stream_frames_sent, 0, "seed {seed}: datagrams only");
        assert!(stats.packets_resent > 0, "seed {seed}: re-sends exercised");
        // The per-link figure (`loss_pct` = packets_lost / packets_sent) and
        // the session's rate agree here: every transmission is a datagram.
        let shown = stats.packets_lost as f64 / stats.packets_sent as f64;
        let reported = stats.loss_rate();
        assert_eq!(shown, reported, "seed {seed}");
        assert_eq!(stats.packets_sent, sim.datagrams_offered[1], "seed {seed}");
        assert!(
            (reported - real).abs() <= 0.02,
            "seed {seed}: reported {reported:.4}, real drop rate {real:.4}"
        );
    }
}

/// No datagram is dropped, but the latency jumps from 20 ms to 600 ms: the
/// retransmission timer fires before the acknowledgements come back and A
/// re-sends packets that had arrived. None of that is loss.
#[test]
fn spurious_re_sends_on_a_lossless_link_are_not_loss() {
    let mut sim = Sim::new(7, LinkModel::PERFECT, FramingMode::Datagram);
    let entity = introduce_crate(&mut sim.a);
    stream_updates(&mut sim, entity, 1..100);
    sim.model.latency = Duration::from_millis(600);
    stream_updates(&mut sim, entity, 100..400);
    let stats = sim.a.session.stats();
    assert_eq!(sim.a.model.closed, None);
    assert_eq!(sim.datagrams_dropped, [0, 0]);
    assert!(
        stats.packets_resent > 0,
        "the delay forced re-sends: {stats:?}"
    );
    println!(
        "re-sent {} of {} sent, lost {}",
        stats.packets_resent, stats.packets_sent, stats.packets_lost
    );
    assert_eq!(stats.packets_lost, 0, "{stats:?}");
    assert_eq!(stats.loss_rate(), 0.0);
}

/// 18 % of datagrams dropped each way on a link that reorders deeply (5 ms
/// plus up to 100 ms of jitter): originals often arrive after their re-send,
/// and the acknowledgement does not say which copy arrived. The reported
/// loss stays near the real drop rate instead of doubling.
#[test]
fn reported_loss_follows_the_drop_rate_on_a_deeply_reordering_link() {
    for seed in 0..3u64 {
        let mut model = LinkModel::PERFECT;
        model.latency = Duration::from_millis(5);
        model.jitter = Duration::from_millis(100);
        model.loss = 0.18;
        let (sim, real) = lossy_run(seed, model);
        let reported = sim.a.session.stats().loss_rate();
        assert!(
            (reported - real).abs() <= 0.04,
            "seed {seed}: reported {reported:.4}, real drop rate {real:.4}"
        );
    }
}
