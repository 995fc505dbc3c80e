//! When a client's waiting scene changes are written.
//!
//! Tundra writes every client's changes at the network tick
//! (docs/tundra-wire.md §7.2, step 5), so a change waits up to a whole tick (50 ms at
//! 20 Hz) for nothing, however little or much is going on. Here a client is
//! written whenever it has something waiting and its connection has taken
//! what it was last given, at most once per *gap* (a tenth of the tick, at
//! least [`WRITE_MIN_GAP_FLOOR`]). Gaps end on *boundaries*, the multiples
//! of the gap on the node's clock, the same for every client. The rule
//! ([`WriteRule::decide`]), for a client with changes waiting:
//! - its transport holds more than [`WRITE_MAX_BACKLOG_BYTES`] unsent: held.
//!   Nothing more is queued for it; its sync state keeps coalescing to the
//!   latest state of each entity (never a queue of stale ones), and it is
//!   looked at again after a wait as long as it has been held (the gap,
//!   then doubling, at most the tick). The tick writes it only once drained.
//! - no boundary has passed since its changes were last written: at the
//!   next boundary, a deadline ([`TundraServer::poll_timeout`]), or half a
//!   gap after that write if sooner when some of its changes came in a
//!   peer's packet (that link gathered a gap's changes already, on its
//!   own clock: waiting again for this node's boundary would double the
//!   wait across a hop, while half a gap still bounds the writes);
//! - otherwise: now.
//!
//! Under load every client with a steady stream of changes is written once
//! per gap, at its boundary, each write carrying the gap's changes
//! coalesced: an entity moved once per tick costs one frame either way, so
//! frames and bytes per update are the tick's. Because the boundaries are
//! shared, all busy clients come due at the same instant and are written in
//! one pass: one wake-up for all of them, and EditAttributes frames built
//! once and shared (`edit_frame.rs`) as at the tick. A quiet client's
//! first change still leaves at once; what follows it within the gap waits
//! for the next boundary (half a gap on average, not a whole one). The core only decides: the
//! node calls [`TundraServer::handle_due_writes`] (from its
//! `handle_timeout`) when [`TundraServer::poll_timeout`] says, with each
//! client's unsent bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::core::TundraServer;
use crate::clock::Time;
use crate::scene::{ClientId, Scene};

/// Unsent bytes above which a client's connection has not drained: a few
/// frames' worth, so a client is written again only once its transport has
/// nearly caught up (a write of one gap's changes is queued behind at most
/// this much).
pub const WRITE_MAX_BACKLOG_BYTES: usize = 16 * 1024;

/// The shortest gap between two writes of a client's changes, whatever the
/// tick.
pub const WRITE_MIN_GAP_FLOOR: Duration = Duration::from_millis(1);

/// Writes per tick at most (the gap is the tick divided by this).
const WRITES_PER_TICK: u32 = 10;

/// When a client's waiting changes should be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteTiming {
    /// Write now.
    Now,
    /// Look at it again at this time (the end of its gap, or of the wait
    /// of a held client).
    At(Time),
}

/// The write rule, with its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRule {
    /// Unsent bytes over which a client is held.
    pub max_backlog_bytes: usize,
    /// The shortest time between two writes of one client.
    pub min_gap: Duration,
    /// The longest wait before a held client is looked at again.
    pub max_hold: Duration,
}

impl WriteRule {
    /// The rule for a node ticking every `tick`.
    pub fn for_tick(tick: Duration) -> WriteRule {
        WriteRule {
            max_backlog_bytes: WRITE_MAX_BACKLOG_BYTES,
            min_gap: (tick / WRITES_PER_TICK).max(WRITE_MIN_GAP_FLOOR),
            max_hold: tick.max(WRITE_MIN_GAP_FLOOR),
        }
    }

    /// The rule holding a client already at `limit` unsent bytes
    /// (`limits.max_client_backlog_bytes`) when that is the lower.
    pub fn with_backlog_limit(mut self, limit: usize) -> WriteRule {
        self.max_backlog_bytes = self.max_backlog_bytes.min(limit);
        self
    }

    /// When to write a client whose changes were last written at
    /// `last_write` (`None`: never) and which has been held for `held`
    /// (`None`: its connection has drained).
    pub fn decide(
        &self,
        now: Time,
        last_write: Option<Time>,
        held: Option<Duration>,
        from_peer: bool,
    ) -> WriteTiming {
        if let Some(held) = held {
            return WriteTiming::At(now + held.clamp(self.min_gap, self.max_hold));
        }
        let Some(last) = last_write else {
            return WriteTiming::Now;
        };
        let mut due = self.next_slot(last);
        if from_peer {
            // The peer's link gathered a gap of changes into its packet
            // already (its send gap is this gap, on its own clock): a second
            // wait for a boundary here would double the delay across a
            // hop. Half a gap after the last write bounds the extra writes.
            due = due.min(last + self.min_gap / 2);
        }
        if now < due {
            WriteTiming::At(due)
        } else {
            WriteTiming::Now
        }
    }

    /// The first gap boundary after `last`: boundaries are multiples of
    /// the gap on the node's clock, the same for every client, so busy
    /// clients come due together and are written in one pass (sharing
    /// their EditAttributes frames, one wake-up for all) instead of each
    /// on its own phase.
    pub fn next_slot(&self, last: Time) -> Time {
        last.next_boundary(self.min_gap)
    }
}

/// The clients with changes waiting, and when each is due.
#[derive(Debug, Default)]
pub(super) struct WriteSchedule {
    /// Clients given new changes since they were last considered.
    fresh: BTreeSet<ClientId>,
    /// Whether one of `fresh` got changes a peer's packet brought.
    fresh_from_peer: bool,
    /// Clients to look at again at a time.
    waiting: BTreeMap<ClientId, Time>,
}

impl WriteSchedule {
    /// `client` has new changes or actions waiting.
    pub(super) fn handle_changed(&mut self, client: ClientId, from_peer: bool) {
        self.fresh.insert(client);
        self.fresh_from_peer |= from_peer;
    }

    /// `client` was written, or left: nothing of it waits any more.
    pub(super) fn forget(&mut self, client: ClientId) {
        self.fresh.remove(&client);
        self.waiting.remove(&client);
    }

    /// The next time a client is due: at once when one has fresh changes,
    /// else the earliest of the waiting ones.
    pub(super) fn poll_timeout(&self) -> Option<Time> {
        if !self.fresh.is_empty() {
            return Some(Time::ZERO);
        }
        self.waiting.values().min().copied()
    }

    /// Takes the clients to decide on at `now`: the fresh ones and those
    /// whose time has come, in id order.
    fn take_due(&mut self, now: Time) -> Vec<ClientId> {
        self.fresh_from_peer = false;
        let mut due: Vec<ClientId> = std::mem::take(&mut self.fresh).into_iter().collect();
        self.waiting.retain(|client, at| {
            if *at <= now {
                due.push(*client);
                false
            } else {
                true
            }
        });
        due.sort_unstable();
        due.dedup();
        due
    }

    fn wait_until(&mut self, client: ClientId, at: Time) {
        self.waiting.insert(client, at);
    }
}

impl TundraServer {
    /// Writes the waiting changes of every client that is due and whose
    /// connection has drained (see the module doc); a client not yet due,
    /// or held, gets its next time. `backlog` reports each client's unsent
    /// bytes.
    pub fn handle_due_writes(
        &mut self,
        scene: &Scene,
        now: Time,
        backlog: &dyn Fn(ClientId) -> usize,
    ) {
        let due = self.schedule.take_due(now);
        if due.is_empty() {
            return;
        }
        self.now = now;
        let rule = self.write_rule;
        let mut to_write = Vec::new();
        for id in due {
            let Some(client) = self.clients.get_mut(&id).filter(|c| c.is_authenticated()) else {
                continue;
            };
            client.write_scheduled = false;
            if !client.has_waiting() {
                // A peer's change that left nothing to write (of an entity
                // the client does not have): its later ones are not sooner.
                client.peer_changes_waiting = false;
                continue;
            }
            client
                .backlog
                .observe(now, backlog(id), rule.max_backlog_bytes);
            let last = client.last_sync_write;
            let held = client.backlog.held_for(now);
            match rule.decide(now, last, held, client.peer_changes_waiting) {
                WriteTiming::Now => to_write.push(id),
                WriteTiming::At(at) => {
                    client.write_scheduled = true;
                    self.schedule.wait_until(id, at);
                }
            }
        }
        if to_write.is_empty() {
            return;
        }
        self.stats.early_writes += to_write.len() as u64;
        self.edit_frames.start_tick(to_write.len());
        self.current_bodies.start_pass(to_write.len());
        for id in to_write {
            self.write_client(scene, id, now);
        }
        self.edit_frames.finish_tick();
        self.current_bodies.finish_pass();
    }

    /// When [`TundraServer::handle_due_writes`] should next run: at once
    /// (`Time::ZERO`) when a client has fresh changes, else when the first
    /// waiting client is due; `None` when none waits.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.schedule.poll_timeout()
    }

    /// Whether a client has fresh changes that a peer's packet brought:
    /// they are looked at without the node's timer step (its link waited
    /// a gap for them already).
    pub fn has_fresh_peer_changes(&self) -> bool {
        self.schedule.fresh_from_peer
    }

    /// `client` has something new to write: it joins the schedule unless
    /// it is in it already (checked first: under load this runs for every
    /// change and every client).
    pub(super) fn schedule_write(&mut self, client: ClientId) {
        if let Some(c) = self.clients.get_mut(&client) {
            if !c.write_scheduled {
                c.write_scheduled = true;
                self.schedule.handle_changed(client, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> WriteRule {
        WriteRule::for_tick(Duration::from_millis(50))
    }

    #[test]
    fn the_gap_is_a_tenth_of_the_tick_and_never_below_the_floor() {
        assert_eq!(rule().min_gap, Duration::from_millis(5));
        assert_eq!(rule().max_hold, Duration::from_millis(50));
        let fast = WriteRule::for_tick(Duration::from_millis(2));
        assert_eq!(fast.min_gap, WRITE_MIN_GAP_FLOOR);
    }

    #[test]
    fn a_drained_client_never_written_is_written_now() {
        assert_eq!(
            rule().decide(Time::from_millis(7), None, None, false),
            WriteTiming::Now
        );
    }

    #[test]
    fn a_client_written_within_the_gap_waits_for_its_end_not_for_the_tick() {
        let last = Time::from_millis(100);
        assert_eq!(
            rule().decide(Time::from_millis(102), Some(last), None, false),
            WriteTiming::At(Time::from_millis(105))
        );
        assert_eq!(
            rule().decide(Time::from_millis(105), Some(last), None, false),
            WriteTiming::Now
        );
    }

    #[test]
    fn a_client_written_between_boundaries_is_next_due_at_the_boundary() {
        // Written at 102 ms (a quiet client's first change): due at the
        // boundary at 105 ms with every other busy client, not at 107 ms.
        let last = Some(Time::from_millis(102));
        assert_eq!(
            rule().decide(Time::from_millis(103), last, None, false),
            WriteTiming::At(Time::from_millis(105))
        );
        assert_eq!(
            rule().decide(Time::from_millis(105), last, None, false),
            WriteTiming::Now
        );
    }

    #[test]
    fn changes_from_a_peer_wait_half_a_gap_at_most_after_the_last_write() {
        let r = rule();
        // Written at 100 ms: the boundary is 105 ms, half a gap is 102.5.
        let last = Some(Time::from_millis(100));
        assert_eq!(
            r.decide(Time::from_millis(101), last, None, true),
            WriteTiming::At(Time::from_micros(102_500))
        );
        assert_eq!(
            r.decide(Time::from_micros(102_500), last, None, true),
            WriteTiming::Now
        );
        // Written at 104 ms: the boundary at 105 ms comes first.
        let late = Some(Time::from_millis(104));
        assert_eq!(
            r.decide(Time::from_micros(104_200), late, None, true),
            WriteTiming::At(Time::from_millis(105))
        );
        // A held client stays held, whatever brought its changes.
        assert_eq!(
            r.decide(Time::from_millis(101), last, Some(Duration::ZERO), true),
            WriteTiming::At(Time::from_millis(106))
        );
    }

    #[test]
    fn a_held_client_is_looked_at_again_after_as_long_as_it_was_held_at_most_a_tick() {
        let r = rule();
        let now = Time::from_millis(500);
        let written = Some(Time::from_millis(100));
        let again =
            |held_ms: u64| r.decide(now, written, Some(Duration::from_millis(held_ms)), false);
        // Just held: after the gap.
        assert_eq!(again(0), WriteTiming::At(Time::from_millis(505)));
        // Held for 12 ms: 12 ms more (so the waits double).
        assert_eq!(again(12), WriteTiming::At(Time::from_millis(512)));
        // Held for long: never more than a tick.
        assert_eq!(again(4_000), WriteTiming::At(Time::from_millis(550)));
    }

    #[test]
    fn waiting_clients_come_due_at_their_time_once() {
        let mut schedule = WriteSchedule::default();
        schedule.handle_changed(ClientId(2), false);
        schedule.wait_until(ClientId(1), Time::from_millis(10));
        schedule.wait_until(ClientId(3), Time::from_millis(20));
        // Fresh changes are due at once.
        assert_eq!(schedule.poll_timeout(), Some(Time::ZERO));
        assert_eq!(
            schedule.take_due(Time::from_millis(10)),
            [ClientId(1), ClientId(2)]
        );
        assert_eq!(schedule.poll_timeout(), Some(Time::from_millis(20)));
        assert!(schedule.take_due(Time::from_millis(15)).is_empty());
        schedule.forget(ClientId(3));
        assert_eq!(schedule.poll_timeout(), None);
    }
}
