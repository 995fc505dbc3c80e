//! Sending before the tick: when a client's pending scene changes leave.
//!
//! Tundra writes every client's changes at the network tick
//! (docs/tundra-wire.md §7.2, step 5), so a lone edit waits up to a whole tick (50 ms at
//! 20 Hz) for nothing. Here a client whose connection is idle gets its
//! changes as soon as they are applied; a busy one stays on the tick, where
//! its changes are coalesced to the latest state per entity and batched.
//!
//! The rule ([`EarlySendRule::decide`]), for a client with changes waiting:
//! - its transport holds more than [`EARLY_MAX_BACKLOG_BYTES`] unsent: busy,
//!   the tick (its queue has not drained; adding to it only adds delay);
//! - more than [`EARLY_MAX_PENDING_ENTITIES`] entities are waiting: busy,
//!   the tick (a load at which coalescing and batching pay);
//! - its changes were last written less than the minimum gap ago (a tenth
//!   of the tick, at least [`EARLY_MIN_GAP_FLOOR`]): at the end of the gap,
//!   a deadline ([`TundraServer::poll_timeout`]);
//! - otherwise: now.
//!
//! The gap is the send budget: at most ten early writes per tick per client,
//! each carrying every change of the gap coalesced, so frames per update
//! never exceed the tick's. The core only decides: [`TundraServer::poll_timeout`]
//! is due at once when a client has fresh changes and at the end of a gap
//! otherwise, and the node then calls [`TundraServer::handle_send_early`]
//! with each client's unsent bytes (from its `handle_timeout`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::core::TundraServer;
use crate::clock::Time;
use crate::scene::{ClientId, Scene};

/// Unsent bytes above which a client's connection counts as busy: a few
/// frames' worth, so only a queue its transport has nearly drained takes
/// early writes.
pub const EARLY_MAX_BACKLOG_BYTES: usize = 16 * 1024;

/// Waiting entities above which a client counts as busy: past this the
/// changes arrive faster than one entity per 80 µs at the 5 ms gap, and the
/// tick's coalescing is worth its wait.
pub const EARLY_MAX_PENDING_ENTITIES: usize = 64;

/// The shortest gap between two writes of a client's changes, whatever the
/// tick.
pub const EARLY_MIN_GAP_FLOOR: Duration = Duration::from_millis(1);

/// Early writes per tick at most (the gap is the tick divided by this).
const EARLY_WRITES_PER_TICK: u32 = 10;

/// When a client's waiting changes should be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTiming {
    /// Its connection is idle: write now.
    Now,
    /// Idle, but written very recently: write at this time.
    At(Time),
    /// Busy: leave it to the tick.
    Tick,
}

/// The early-send rule, with its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlySendRule {
    pub max_backlog_bytes: usize,
    pub max_pending_entities: usize,
    pub min_gap: Duration,
}

impl EarlySendRule {
    /// The rule for a node ticking every `tick`.
    pub fn for_tick(tick: Duration) -> EarlySendRule {
        EarlySendRule {
            max_backlog_bytes: EARLY_MAX_BACKLOG_BYTES,
            max_pending_entities: EARLY_MAX_PENDING_ENTITIES,
            min_gap: (tick / EARLY_WRITES_PER_TICK).max(EARLY_MIN_GAP_FLOOR),
        }
    }

    /// When to write a client with `pending` entities waiting, `backlog`
    /// bytes unsent by its transport, whose changes were last written at
    /// `last_write` (`None`: never).
    pub fn decide(
        &self,
        now: Time,
        last_write: Option<Time>,
        pending: usize,
        backlog: usize,
    ) -> SendTiming {
        if backlog > self.max_backlog_bytes || pending > self.max_pending_entities {
            return SendTiming::Tick;
        }
        match last_write {
            Some(last) if now < last + self.min_gap => SendTiming::At(last + self.min_gap),
            _ => SendTiming::Now,
        }
    }
}

/// Which clients may be written before the tick.
#[derive(Debug, Default)]
pub(super) struct EarlySends {
    /// Clients given new changes since they were last considered.
    fresh: BTreeSet<ClientId>,
    /// Clients to write at a time (the end of their gap).
    waiting: BTreeMap<ClientId, Time>,
}

impl EarlySends {
    /// `client` has new changes or actions waiting.
    pub(super) fn handle_changed(&mut self, client: ClientId) {
        self.fresh.insert(client);
    }

    /// `client` was written, or left: nothing of it waits any more.
    pub(super) fn forget(&mut self, client: ClientId) {
        self.fresh.remove(&client);
        self.waiting.remove(&client);
    }

    /// The next time a client is due: at once when one has fresh changes,
    /// else when the first gap ends.
    pub(super) fn poll_timeout(&self) -> Option<Time> {
        if !self.fresh.is_empty() {
            return Some(Time::ZERO);
        }
        self.waiting.values().min().copied()
    }

    /// Takes the clients to decide on at `now`: the fresh ones and those
    /// whose time has come.
    fn take_due(&mut self, now: Time) -> Vec<ClientId> {
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
}

impl TundraServer {
    /// Writes the waiting changes of every client whose connection is idle
    /// (see the module doc). `backlog` reports each client's unsent bytes.
    /// Busy clients keep their changes for the tick.
    pub fn handle_send_early(
        &mut self,
        scene: &Scene,
        now: Time,
        backlog: &dyn Fn(ClientId) -> usize,
    ) {
        let due = self.early.take_due(now);
        if due.is_empty() {
            return;
        }
        self.now = now;
        let rule = self.early_rule;
        let mut to_write = Vec::new();
        for id in due {
            let Some(client) = self.clients.get(&id).filter(|c| c.is_authenticated()) else {
                continue;
            };
            let waiting = client.sync.pending() > 0
                || !client.pending_actions.is_empty()
                || !client.pending_types.is_empty();
            if !waiting {
                continue;
            }
            match rule.decide(
                now,
                client.last_sync_write,
                client.sync.pending(),
                backlog(id),
            ) {
                SendTiming::Now => to_write.push(id),
                SendTiming::At(at) => {
                    self.early.waiting.insert(id, at);
                }
                SendTiming::Tick => {}
            }
        }
        if to_write.is_empty() {
            return;
        }
        self.stats.early_writes += to_write.len() as u64;
        self.edit_frames.start_tick(to_write.len());
        for id in to_write {
            self.write_client(scene, id, now);
        }
        self.edit_frames.finish_tick();
    }

    /// When [`TundraServer::handle_send_early`] should next run: at once
    /// (`Time::ZERO`) when a client has fresh changes, at the end of the first
    /// gap a client waits out, `None` when none waits.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.early.poll_timeout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> EarlySendRule {
        EarlySendRule::for_tick(Duration::from_millis(50))
    }

    #[test]
    fn the_gap_is_a_tenth_of_the_tick_and_never_below_the_floor() {
        assert_eq!(rule().min_gap, Duration::from_millis(5));
        let fast = EarlySendRule::for_tick(Duration::from_millis(2));
        assert_eq!(fast.min_gap, EARLY_MIN_GAP_FLOOR);
    }

    #[test]
    fn an_idle_client_never_written_is_written_now() {
        assert_eq!(
            rule().decide(Time::from_millis(7), None, 1, 0),
            SendTiming::Now
        );
    }

    #[test]
    fn a_client_written_within_the_gap_waits_for_its_end_not_for_the_tick() {
        let last = Time::from_millis(100);
        assert_eq!(
            rule().decide(Time::from_millis(102), Some(last), 3, 0),
            SendTiming::At(Time::from_millis(105))
        );
        assert_eq!(
            rule().decide(Time::from_millis(105), Some(last), 3, 0),
            SendTiming::Now
        );
    }

    #[test]
    fn a_backlog_or_many_waiting_entities_leave_the_client_on_the_tick() {
        let r = rule();
        let now = Time::from_millis(500);
        let idle_since = Some(Time::from_millis(100));
        assert_eq!(
            r.decide(now, idle_since, 1, EARLY_MAX_BACKLOG_BYTES + 1),
            SendTiming::Tick
        );
        assert_eq!(
            r.decide(now, idle_since, EARLY_MAX_PENDING_ENTITIES + 1, 0),
            SendTiming::Tick
        );
        // At the thresholds themselves the client is still idle.
        assert_eq!(
            r.decide(
                now,
                idle_since,
                EARLY_MAX_PENDING_ENTITIES,
                EARLY_MAX_BACKLOG_BYTES
            ),
            SendTiming::Now
        );
    }

    #[test]
    fn waiting_clients_come_due_at_their_time_once() {
        let mut sends = EarlySends::default();
        sends.handle_changed(ClientId(2));
        sends.waiting.insert(ClientId(1), Time::from_millis(10));
        sends.waiting.insert(ClientId(3), Time::from_millis(20));
        // Fresh changes are due at once.
        assert_eq!(sends.poll_timeout(), Some(Time::ZERO));
        assert_eq!(
            sends.take_due(Time::from_millis(10)),
            [ClientId(1), ClientId(2)]
        );
        assert_eq!(sends.poll_timeout(), Some(Time::from_millis(20)));
        assert!(sends.take_due(Time::from_millis(15)).is_empty());
        sends.forget(ClientId(3));
        assert_eq!(sends.poll_timeout(), None);
    }
}
