//! When a node asks for an entity that entered its zones: the hysteresis
//! in time and depth that keeps an entity on a border from changing hands
//! on every step (docs/federation.md §7.7).
//!
//! Per watched entity the trigger keeps the last position it was told and
//! since when the entity has been *settled*: at least
//! [`Hysteresis::distance`] deep in one of the node's zones on every sample
//! since then. A sample that is not settled clears it. Once an entity has
//! been settled for [`Hysteresis::time`], the trigger hands it out of
//! [`ZoneTrigger::poll_request`] once, and waits for the answer.
//!
//! The clock restarts whenever the entity's authority changes (the node
//! learns it through [`ZoneTrigger::handle_authority`]), so no request
//! rests on samples older than the current authority's tenure: an entity's
//! authority changes through zones at most once per hysteresis time,
//! however fast it oscillates across a border.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::zone::{Position, ZoneSet};
use crate::clock::Time;

/// How long a request may stay unanswered before the trigger counts it as
/// refused and starts over: the hand-over answers every request (granted,
/// refused or failed with its link), so this only bounds a lost answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The two thresholds an entity must pass before its zone's owner asks for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hysteresis {
    /// How long the entity must have stayed settled.
    pub time: Duration,
    /// How deep inside a zone (in scene units) every sample must lie.
    pub distance: f64,
}

/// What the trigger knows of one entity it watches.
#[derive(Debug, Clone, Copy)]
struct Watch {
    /// The last position it was told, `None` before the first.
    position: Option<Position>,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The last sample was not settled.
    Unsettled,
    /// Every sample since `since` was settled; due at `since + time`.
    Settled { since: Time },
    /// Requested at `at`; waiting for the authority to change or the
    /// request to be refused.
    Requested { at: Time },
}

/// The zone trigger of one node over the entities it watches, keyed by
/// `K` (the federation identity in the node).
#[derive(Debug, Clone)]
pub struct ZoneTrigger<K> {
    zones: ZoneSet,
    hysteresis: Hysteresis,
    watches: BTreeMap<K, Watch>,
    /// Due times of settled and requested entities: when to look again.
    due: BTreeSet<(Time, K)>,
    /// Entities to request, in the order they became due.
    requests: Vec<K>,
}

impl<K: Ord + Copy> ZoneTrigger<K> {
    pub fn new(zones: ZoneSet, hysteresis: Hysteresis) -> ZoneTrigger<K> {
        ZoneTrigger {
            zones,
            hysteresis,
            watches: BTreeMap::new(),
            due: BTreeSet::new(),
            requests: Vec::new(),
        }
    }

    pub fn zones(&self) -> &ZoneSet {
        &self.zones
    }

    pub fn hysteresis(&self) -> Hysteresis {
        self.hysteresis
    }

    /// Entities watched now.
    pub fn watched(&self) -> usize {
        self.watches.len()
    }

    /// Whether `key` is watched and has a request outstanding.
    pub fn is_requested(&self, key: K) -> bool {
        self.watches
            .get(&key)
            .is_some_and(|watch| matches!(watch.state, State::Requested { .. }))
    }

    /// `key`'s authority is now another node (or the entity appeared with
    /// another node's authority): watch it from `now`, at `position` (the
    /// scene's, when known) or else its last known one, taken as a fresh
    /// sample. An outstanding request ends: this change answered it.
    pub fn handle_authority(&mut self, now: Time, key: K, position: Option<Position>) {
        if self.zones.is_empty() {
            return;
        }
        let known = self.forget(key).and_then(|watch| watch.position);
        let position = position.or(known);
        self.watches.insert(
            key,
            Watch {
                position: None,
                state: State::Unsettled,
            },
        );
        if let Some(position) = position {
            self.handle_position(now, key, position);
        }
    }

    /// `key` is no longer watched: this node became its authority, or it
    /// left the scene.
    pub fn handle_unwatched(&mut self, key: K) {
        self.forget(key);
    }

    /// A new position of a watched entity (ignored for others).
    pub fn handle_position(&mut self, now: Time, key: K, position: Position) {
        let settled = self.zones.holds(position, self.hysteresis.distance);
        let Some(watch) = self.watches.get_mut(&key) else {
            return;
        };
        watch.position = Some(position);
        let next = match (watch.state, settled) {
            // The answer to a request decides what happens next.
            (state @ State::Requested { .. }, _) => state,
            (state @ State::Settled { .. }, true) => state,
            (State::Unsettled, true) => State::Settled { since: now },
            (_, false) => State::Unsettled,
        };
        let previous = std::mem::replace(&mut watch.state, next);
        if previous != next {
            self.reschedule(key, previous, next);
        }
    }

    /// The request for `key` was refused (or failed): the entity must stay
    /// settled for a whole hysteresis time from `now` before it is asked
    /// for again.
    pub fn handle_refused(&mut self, now: Time, key: K) {
        if self.is_requested(key) {
            self.handle_authority(now, key, None);
        }
    }

    /// When [`ZoneTrigger::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Moves every entity due at `now` to the requests; counts requests
    /// that stayed unanswered past [`REQUEST_TIMEOUT`] as refused.
    pub fn handle_timeout(&mut self, now: Time) {
        while let Some(&(at, key)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.pop_first();
            let Some(watch) = self.watches.get_mut(&key) else {
                continue;
            };
            match watch.state {
                State::Settled { .. } => {
                    watch.state = State::Requested { at: now };
                    self.due.insert((now + REQUEST_TIMEOUT, key));
                    self.requests.push(key);
                }
                State::Requested { .. } => self.handle_authority(now, key, None),
                State::Unsettled => {}
            }
        }
    }

    /// The next entity to ask authority for.
    pub fn poll_request(&mut self) -> Option<K> {
        if self.requests.is_empty() {
            None
        } else {
            Some(self.requests.remove(0))
        }
    }

    fn forget(&mut self, key: K) -> Option<Watch> {
        let watch = self.watches.remove(&key)?;
        if let Some(at) = due_time(watch.state, self.hysteresis) {
            self.due.remove(&(at, key));
        }
        self.requests.retain(|queued| *queued != key);
        Some(watch)
    }

    fn reschedule(&mut self, key: K, previous: State, next: State) {
        if let Some(at) = due_time(previous, self.hysteresis) {
            self.due.remove(&(at, key));
        }
        if let Some(at) = due_time(next, self.hysteresis) {
            self.due.insert((at, key));
        }
    }

    /// Checks the due set against the watches (tests).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let expected: BTreeSet<(Time, K)> = self
            .watches
            .iter()
            .filter_map(|(key, watch)| Some((due_time(watch.state, self.hysteresis)?, *key)))
            .collect();
        assert!(expected == self.due, "due set out of step with the watches");
    }
}

fn due_time(state: State, hysteresis: Hysteresis) -> Option<Time> {
    match state {
        State::Unsettled => None,
        State::Settled { since } => Some(since + hysteresis.time),
        State::Requested { at } => Some(at + REQUEST_TIMEOUT),
    }
}

#[cfg(test)]
#[path = "trigger_tests.rs"]
mod tests;
