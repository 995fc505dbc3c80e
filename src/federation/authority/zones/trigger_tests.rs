//! The zone trigger: unit scripts, and property tests of its guarantees
//! over several nodes whose requests and authority changes travel with
//! random delays.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::federation::zones::Zone;

const KEY: u32 = 7;

/// x >= 0: the zone of "B" in the scripts.
fn east() -> ZoneSet {
    ZoneSet::new(vec![Zone::new_half_space([1.0, 0.0, 0.0], 0.0).unwrap()]).unwrap()
}

fn trigger(time_ms: u64, distance: f64) -> ZoneTrigger<u32> {
    let mut trigger = ZoneTrigger::new(
        east(),
        Hysteresis {
            time: Duration::from_millis(time_ms),
            distance,
        },
    );
    trigger.handle_authority(Time::ZERO, KEY, Some([-10.0, 0.0, 0.0]));
    trigger
}

fn at(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// Runs the trigger's timer up to `now` and returns what it requested.
fn run_to(trigger: &mut ZoneTrigger<u32>, now: Time) -> Vec<u32> {
    while trigger.poll_timeout().is_some_and(|due| due <= now) {
        let due = trigger.poll_timeout().unwrap();
        trigger.handle_timeout(due);
    }
    trigger.check_invariants();
    std::iter::from_fn(|| trigger.poll_request()).collect()
}

#[test]
fn an_entity_settled_deep_enough_for_long_enough_is_requested_once() {
    let mut trigger = trigger(1000, 2.0);
    trigger.handle_position(at(100), KEY, [1.0, 0.0, 0.0]); // inside, too shallow
    assert_eq!(trigger.poll_timeout(), None);
    trigger.handle_position(at(200), KEY, [2.5, 0.0, 0.0]); // settled from here
    assert_eq!(trigger.poll_timeout(), Some(at(1200)));
    trigger.handle_position(at(700), KEY, [4.0, 0.0, 0.0]); // still settled
    assert!(run_to(&mut trigger, at(1199)).is_empty());
    assert_eq!(run_to(&mut trigger, at(1200)), vec![KEY]);
    assert!(trigger.is_requested(KEY));
    // Waiting for the answer: no second request, however long it takes
    // (up to the request timeout).
    trigger.handle_position(at(1500), KEY, [5.0, 0.0, 0.0]);
    assert!(run_to(&mut trigger, at(5000)).is_empty());
    // Granted: this node is the authority now and stops watching.
    trigger.handle_unwatched(KEY);
    assert_eq!(trigger.watched(), 0);
    assert_eq!(trigger.poll_timeout(), None);
}

#[test]
fn a_shallow_sample_restarts_the_clock() {
    let mut trigger = trigger(1000, 2.0);
    trigger.handle_position(at(0), KEY, [3.0, 0.0, 0.0]);
    trigger.handle_position(at(900), KEY, [1.9, 0.0, 0.0]);
    assert!(run_to(&mut trigger, at(1500)).is_empty());
    trigger.handle_position(at(1500), KEY, [3.0, 0.0, 0.0]);
    assert!(run_to(&mut trigger, at(2499)).is_empty());
    assert_eq!(run_to(&mut trigger, at(2500)), vec![KEY]);
}

#[test]
fn an_entity_oscillating_across_the_border_at_10_hz_is_never_requested() {
    let mut trigger = trigger(500, 0.5);
    // 10 Hz, 3 m either side of the border, sampled at 100 Hz for a minute.
    let mut requests = Vec::new();
    for step in 0..6000u64 {
        let now = at(step * 10);
        requests.extend(run_to(&mut trigger, now));
        let phase = 2.0 * std::f64::consts::PI * 10.0 * (step as f64 * 0.01);
        trigger.handle_position(now, KEY, [(3.0 * phase.sin()) as f32, 0.0, 0.0]);
    }
    assert!(requests.is_empty(), "{requests:?}");
}

#[test]
fn a_refusal_waits_a_whole_hysteresis_time_before_asking_again() {
    let mut trigger = trigger(1000, 1.0);
    trigger.handle_position(at(0), KEY, [5.0, 0.0, 0.0]);
    assert_eq!(run_to(&mut trigger, at(1000)), vec![KEY]);
    trigger.handle_refused(at(1300), KEY);
    assert!(!trigger.is_requested(KEY));
    // The entity has not moved: its known position counts from the refusal.
    assert!(run_to(&mut trigger, at(2299)).is_empty());
    assert_eq!(run_to(&mut trigger, at(2300)), vec![KEY]);
    // A refusal that is not for an outstanding request changes nothing.
    trigger.handle_authority(at(2400), KEY, None);
    trigger.handle_refused(at(2500), KEY);
    assert_eq!(trigger.poll_timeout(), Some(at(3400)));
}

#[test]
fn an_unanswered_request_is_counted_refused_after_the_request_timeout() {
    let mut trigger = trigger(1000, 1.0);
    trigger.handle_position(at(0), KEY, [5.0, 0.0, 0.0]);
    assert_eq!(run_to(&mut trigger, at(1000)), vec![KEY]);
    let timeout = at(1000) + REQUEST_TIMEOUT;
    assert!(run_to(&mut trigger, timeout - Duration::from_millis(1)).is_empty());
    // Counted refused at the timeout; asked again a hysteresis time later.
    assert!(run_to(&mut trigger, timeout).is_empty());
    assert_eq!(
        run_to(&mut trigger, timeout + Duration::from_millis(1000)),
        vec![KEY]
    );
}

#[test]
fn an_authority_change_restarts_the_clock_from_the_position_it_names() {
    let mut trigger = trigger(1000, 1.0);
    trigger.handle_position(at(0), KEY, [5.0, 0.0, 0.0]);
    // Another node took it first: the clock starts again at the change,
    // and the entity need not move to be asked for later.
    trigger.handle_authority(at(800), KEY, None);
    assert!(run_to(&mut trigger, at(1799)).is_empty());
    assert_eq!(run_to(&mut trigger, at(1800)), vec![KEY]);
    // Changed again, and now it stands outside.
    trigger.handle_authority(at(2000), KEY, Some([-5.0, 0.0, 0.0]));
    assert!(run_to(&mut trigger, at(10_000)).is_empty());
}

#[test]
fn entities_not_watched_and_nodes_without_zones_request_nothing() {
    let mut trigger = trigger(100, 0.0);
    trigger.handle_position(at(0), 99, [5.0, 0.0, 0.0]);
    assert!(run_to(&mut trigger, at(1000)).is_empty());
    let mut zoneless: ZoneTrigger<u32> = ZoneTrigger::new(
        ZoneSet::default(),
        Hysteresis {
            time: Duration::from_millis(100),
            distance: 0.0,
        },
    );
    zoneless.handle_authority(at(0), KEY, Some([5.0, 0.0, 0.0]));
    assert_eq!(zoneless.watched(), 0);
    assert_eq!(zoneless.poll_timeout(), None);
}

#[test]
fn a_non_finite_position_unsettles() {
    let mut trigger = trigger(1000, 1.0);
    trigger.handle_position(at(0), KEY, [5.0, 0.0, 0.0]);
    trigger.handle_position(at(500), KEY, [f32::NAN, 0.0, 0.0]);
    assert_eq!(trigger.poll_timeout(), None);
}

// ----- several nodes, delays, and the guarantees -----

/// A message between the model's nodes, delivered at a time.
#[derive(Debug, Clone, Copy)]
enum Message {
    /// `node` asks the authority for the entity, knowing `epoch`.
    Request { node: usize, epoch: u64 },
    /// `node` was refused.
    Refused { node: usize },
    /// `node` learns that `authority` holds the entity from `epoch` on.
    Changed {
        node: usize,
        authority: usize,
        epoch: u64,
    },
}

/// How the entity moves: a sum of an oscillation on x and one on y.
#[derive(Debug, Clone, Copy)]
struct Motion {
    centre: [f64; 2],
    amplitude: [f64; 2],
    hertz: [f64; 2],
}

impl Motion {
    fn at(&self, seconds: f64) -> Position {
        let axis = |i: usize| {
            self.centre[i]
                + self.amplitude[i] * (2.0 * std::f64::consts::PI * self.hertz[i] * seconds).sin()
        };
        [axis(0) as f32, axis(1) as f32, 0.0]
    }
}

/// Three nodes: A owns x <= 0, B owns x >= 0, C owns y >= 3 (overlapping
/// both). Returns the grants as (time, new authority) and the requests
/// granted as (request time, node), after `seconds` of motion.
struct Outcome {
    grants: Vec<(Time, usize)>,
    granted_requests: Vec<(Time, usize)>,
    samples: Vec<(Time, Position)>,
    zones: Vec<ZoneSet>,
}

fn run_model(
    motion: Motion,
    hysteresis: Hysteresis,
    sample_ms: u64,
    delays_ms: &[u64],
    seconds: u64,
) -> Outcome {
    let zones = vec![
        ZoneSet::new(vec![Zone::new_half_space([-1.0, 0.0, 0.0], 0.0).unwrap()]).unwrap(),
        east(),
        ZoneSet::new(vec![
            Zone::new_box([-50.0, 3.0, -50.0], [50.0, 50.0, 50.0]).unwrap()
        ])
        .unwrap(),
    ];
    let mut triggers: Vec<ZoneTrigger<u32>> = zones
        .iter()
        .map(|zones| ZoneTrigger::new(zones.clone(), hysteresis))
        .collect();
    let mut authority = 0;
    let mut epoch = 0;
    let mut known_epoch = [0u64; 3];
    for (node, trigger) in triggers.iter_mut().enumerate() {
        if node != authority {
            trigger.handle_authority(Time::ZERO, KEY, Some(motion.at(0.0)));
        }
    }
    let mut delay_index = 0;
    let mut next_delay = || {
        delay_index += 1;
        Duration::from_millis(delays_ms[delay_index % delays_ms.len()])
    };
    let mut queue: BTreeMap<(Time, u64), Message> = BTreeMap::new();
    let mut sequence = 0u64;
    let mut outcome = Outcome {
        grants: Vec::new(),
        granted_requests: Vec::new(),
        samples: Vec::new(),
        zones: zones.clone(),
    };
    let mut requested_at = [Time::ZERO; 3];
    let end = Time::from_millis(seconds * 1000);
    let mut now = Time::ZERO;
    while now <= end {
        // Messages due now, in the order they were sent.
        while let Some((&(due, key), &message)) = queue.first_key_value() {
            if due > now {
                break;
            }
            queue.remove(&(due, key));
            match message {
                Message::Request { node, epoch: seen } => {
                    if seen == epoch && node != authority {
                        epoch += 1;
                        let old = authority;
                        authority = node;
                        outcome.grants.push((now, node));
                        outcome.granted_requests.push((requested_at[node], node));
                        // The old authority knows at once; everyone else
                        // (the winner included) after a delay.
                        known_epoch[old] = epoch;
                        let position = outcome.samples.last().map(|(_, p)| *p);
                        triggers[old].handle_authority(now, KEY, position);
                        for other in (0..3).filter(|&other| other != old) {
                            sequence += 1;
                            let message = Message::Changed {
                                node: other,
                                authority: node,
                                epoch,
                            };
                            queue.insert((now + next_delay(), sequence), message);
                        }
                    } else {
                        sequence += 1;
                        queue.insert((now + next_delay(), sequence), Message::Refused { node });
                    }
                }
                Message::Refused { node } => triggers[node].handle_refused(now, KEY),
                Message::Changed {
                    node,
                    authority: holder,
                    epoch: changed,
                } => {
                    // Highest epoch wins; an older change is stale.
                    if changed > known_epoch[node] {
                        known_epoch[node] = changed;
                        if holder == node {
                            triggers[node].handle_unwatched(KEY);
                        } else {
                            triggers[node].handle_authority(now, KEY, None);
                        }
                    }
                }
            }
        }
        if now.as_micros() % (sample_ms * 1000) == 0 {
            let position = motion.at(now.as_micros() as f64 / 1e6);
            outcome.samples.push((now, position));
            for trigger in &mut triggers {
                trigger.handle_position(now, KEY, position);
            }
        }
        for (node, trigger) in triggers.iter_mut().enumerate() {
            if trigger.poll_timeout().is_some_and(|due| due <= now) {
                trigger.handle_timeout(now);
            }
            trigger.check_invariants();
            while let Some(key) = trigger.poll_request() {
                assert_eq!(key, KEY);
                requested_at[node] = now;
                sequence += 1;
                let message = Message::Request {
                    node,
                    epoch: known_epoch[node],
                };
                queue.insert((now + next_delay(), sequence), message);
            }
        }
        now += Duration::from_millis(1);
    }
    outcome
}

fn motion() -> impl Strategy<Value = Motion> {
    (
        -6.0..6.0f64,
        -2.0..6.0f64,
        0.0..8.0f64,
        0.0..4.0f64,
        0.1..10.0f64,
        0.1..10.0f64,
    )
        .prop_map(|(cx, cy, ax, ay, fx, fy)| Motion {
            centre: [cx, cy],
            amplitude: [ax, ay],
            hertz: [fx, fy],
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// However the entity moves (up to 10 Hz on each axis) and however the
    /// messages are delayed, its authority changes at most once per
    /// hysteresis time, and every granted request rests on samples that
    /// kept it at least the hysteresis distance deep in the winner's zones
    /// for the whole hysteresis time before the request.
    #[test]
    fn authority_changes_at_most_once_per_hysteresis_time(
        motion in motion(),
        time_ms in 50u64..1500,
        distance in 0.0..2.0f64,
        sample_ms in prop::sample::select(vec![5u64, 10, 20, 33, 50, 100]),
        delays_ms in prop::collection::vec(0u64..400, 1..16),
    ) {
        let hysteresis = Hysteresis { time: Duration::from_millis(time_ms), distance };
        let outcome = run_model(motion, hysteresis, sample_ms, &delays_ms, 12);
        for pair in outcome.grants.windows(2) {
            prop_assert!(
                pair[1].0 - pair[0].0 >= hysteresis.time,
                "grants {:?} closer than {:?}", pair, hysteresis.time
            );
        }
        for &(requested, node) in &outcome.granted_requests {
            let from = requested - hysteresis.time;
            // The sample in force at `from`, and every later one.
            let first = outcome.samples.iter().rposition(|(t, _)| *t <= from).unwrap_or(0);
            for (t, position) in outcome.samples[first..].iter().take_while(|(t, _)| *t <= requested) {
                prop_assert!(
                    outcome.zones[node].holds(*position, distance),
                    "node {node} requested at {requested:?} but at {t:?} the entity was at {position:?}"
                );
            }
        }
    }

    /// An entity that comes to rest deep in a zone is handed to that zone's
    /// owner: the hysteresis delays a hand-over, it never prevents one.
    #[test]
    fn an_entity_at_rest_in_a_zone_ends_with_its_owner(
        x in 1.0..20.0f64,
        time_ms in 50u64..1500,
        delays_ms in prop::collection::vec(0u64..400, 1..16),
    ) {
        let motion = Motion { centre: [x, 0.0], amplitude: [0.0, 0.0], hertz: [1.0, 1.0] };
        let hysteresis = Hysteresis { time: Duration::from_millis(time_ms), distance: 0.5 };
        let outcome = run_model(motion, hysteresis, 20, &delays_ms, 6);
        prop_assert_eq!(outcome.grants.len(), 1);
        prop_assert_eq!(outcome.grants[0].1, 1);
    }
}

#[test]
fn an_entity_walking_back_and_forth_changes_hands_on_each_crossing() {
    // A 20 s period, 8 m either side of the border between A and B, well
    // below C's zone: each half period is long enough to settle.
    let motion = Motion {
        centre: [0.0, -10.0],
        amplitude: [8.0, 0.0],
        hertz: [0.05, 0.05],
    };
    let hysteresis = Hysteresis {
        time: Duration::from_millis(1000),
        distance: 1.0,
    };
    let outcome = run_model(motion, hysteresis, 50, &[30, 120, 75], 60);
    let holders: Vec<usize> = outcome.grants.iter().map(|(_, node)| *node).collect();
    // Starts with A at x = 0, B from the first quarter period, then A, B...
    assert_eq!(holders, vec![1, 0, 1, 0, 1, 0], "{:?}", outcome.grants);
}
