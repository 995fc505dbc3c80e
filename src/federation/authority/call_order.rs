//! Method calls to one entity's authority leave this node in the order they
//! were made, also when the route to the authority changes
//! (docs/federation.md §5: an action is executed once, and the calls
//! of one caller in order).
//!
//! One LESS session applies method invocations in sequence order, so calls
//! that all travel one link arrive in order. In a triangle the route to an
//! entity can change while calls are on their way (the direct copy arrives
//! after the two-hop one, or a link fails): a call sent on the new, shorter
//! route could then overtake calls still travelling the old one. So while
//! calls to an entity are unanswered on one link, later calls to it that
//! would take another link wait here, and leave once every earlier call has
//! been answered (or its link is gone, when no answer can come). This module
//! owns only that bookkeeping; sending is `authority.rs`'s.

use std::collections::{HashMap, VecDeque};

use crate::federation::authority::request::AuthorityRequest;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::ForwardedCall;
use crate::tundra::EntityId;

/// Calls to one entity that may wait for a route change to settle. A client
/// sending faster than a lossy old route answers is bounded here; beyond
/// it a call is refused (the caller is answered, or the action dropped and
/// logged), as when there is no route.
pub const MAX_WAITING_CALLS: usize = 1024;

/// A call held back until the calls before it are answered.
#[derive(Debug, Clone)]
pub(in crate::federation) struct WaitingCall {
    pub entity: EntityId,
    pub request: AuthorityRequest,
    pub on_behalf_of: Option<ForwardedCall>,
}

/// Per entity: where its unanswered calls went, and the calls waiting.
#[derive(Debug, Default)]
pub(in crate::federation) struct CallOrder {
    /// The link carrying an entity's unanswered calls, and how many.
    outstanding: HashMap<GlobalId, (LinkId, usize)>,
    waiting: HashMap<GlobalId, VecDeque<WaitingCall>>,
}

/// What to do with a new call.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::federation) enum Admission {
    Send,
    Wait,
    /// The waiting queue is full.
    Refuse,
}

impl CallOrder {
    /// Whether a call to `global` may leave on `link` now.
    pub fn admit(&self, global: GlobalId, link: LinkId) -> Admission {
        let queued = self.waiting.get(&global).map_or(0, VecDeque::len);
        let elsewhere = self
            .outstanding
            .get(&global)
            .is_some_and(|(on, count)| *on != link && *count > 0);
        match (queued, elsewhere) {
            (0, false) => Admission::Send,
            (n, _) if n >= MAX_WAITING_CALLS => Admission::Refuse,
            _ => Admission::Wait,
        }
    }

    /// Whether a call to `global` that arrived from `from` (none: one of
    /// this node's clients) must wait before this node, now its authority,
    /// executes it: calls made earlier are unanswered on another link (the
    /// old authority sends them back here) or wait already. Calls arriving
    /// on the link the earlier ones went out on are those coming back, and
    /// go first (`handover.rs`).
    pub fn busy_elsewhere(&self, global: GlobalId, from: Option<LinkId>) -> bool {
        match self.outstanding.get(&global) {
            Some((on, count)) if *count > 0 => Some(*on) != from,
            _ => self.waiting_len(global) > 0,
        }
    }

    /// How many calls to `global` wait.
    pub fn waiting_len(&self, global: GlobalId) -> usize {
        self.waiting.get(&global).map_or(0, VecDeque::len)
    }

    /// Takes every call to `global` that waits (its route appeared after a
    /// hand-over, `handover.rs`), in order.
    pub fn take_waiting(&mut self, global: GlobalId) -> Vec<WaitingCall> {
        self.waiting
            .remove(&global)
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// Queues a call behind the unanswered ones.
    pub fn wait(&mut self, global: GlobalId, call: WaitingCall) {
        self.waiting.entry(global).or_default().push_back(call);
    }

    /// A call to `global` left on `link`.
    pub fn sent(&mut self, global: GlobalId, link: LinkId) {
        let entry = self.outstanding.entry(global).or_insert((link, 0));
        if entry.0 != link {
            // Only reached when nothing was outstanding on the old link.
            *entry = (link, 0);
        }
        entry.1 += 1;
    }

    /// A call to `global` on `link` was answered. Returns the calls that
    /// may now leave, in order, when none is outstanding any more.
    pub fn answered(&mut self, global: GlobalId, link: LinkId) -> Vec<WaitingCall> {
        if let Some((on, count)) = self.outstanding.get_mut(&global) {
            if *on == link {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.outstanding.remove(&global);
                }
            }
        }
        if self.outstanding.contains_key(&global) {
            return Vec::new();
        }
        self.waiting
            .remove(&global)
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// `link` is gone: its calls will never be answered. Returns, per
    /// entity, the calls that may now leave.
    pub fn link_gone(&mut self, link: LinkId) -> Vec<(GlobalId, Vec<WaitingCall>)> {
        let freed: Vec<GlobalId> = self
            .outstanding
            .iter()
            .filter(|(_, (on, _))| *on == link)
            .map(|(global, _)| *global)
            .collect();
        let mut out = Vec::new();
        for global in freed {
            self.outstanding.remove(&global);
            if let Some(calls) = self.waiting.remove(&global) {
                out.push((global, Vec::from(calls)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::messages::EntityAction;

    const ENTITY: GlobalId = GlobalId {
        origin: uuid::Uuid::from_u128(7),
        serial: 1,
    };
    const OLD: LinkId = LinkId(1);
    const NEW: LinkId = LinkId(2);

    fn call(name: &str) -> WaitingCall {
        WaitingCall {
            entity: EntityId(5),
            request: AuthorityRequest::Action(EntityAction {
                entity_id: EntityId(5),
                name: name.into(),
                execution_type: 2,
                parameters: Vec::new(),
            }),
            on_behalf_of: None,
        }
    }

    fn names(calls: &[WaitingCall]) -> Vec<String> {
        calls
            .iter()
            .map(|c| match &c.request {
                AuthorityRequest::Action(a) => a.name.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn calls_on_one_link_never_wait() {
        let mut order = CallOrder::default();
        order.sent(ENTITY, OLD);
        order.sent(ENTITY, OLD);
        assert_eq!(order.admit(ENTITY, OLD), Admission::Send);
    }

    #[test]
    fn a_new_route_waits_until_the_old_one_is_answered() {
        let mut order = CallOrder::default();
        order.sent(ENTITY, OLD);
        order.sent(ENTITY, OLD);
        assert_eq!(order.admit(ENTITY, NEW), Admission::Wait);
        order.wait(ENTITY, call("2"));
        // Once one waits, every later call queues behind it, any link.
        assert_eq!(order.admit(ENTITY, OLD), Admission::Wait);
        order.wait(ENTITY, call("3"));
        assert!(order.answered(ENTITY, OLD).is_empty(), "one still out");
        assert_eq!(names(&order.answered(ENTITY, OLD)), ["2", "3"]);
        assert_eq!(order.admit(ENTITY, NEW), Admission::Send);
    }

    #[test]
    fn a_lost_link_releases_its_waiting_calls() {
        let mut order = CallOrder::default();
        order.sent(ENTITY, OLD);
        order.wait(ENTITY, call("1"));
        let released = order.link_gone(OLD);
        assert_eq!(released.len(), 1);
        assert_eq!(names(&released[0].1), ["1"]);
        assert_eq!(order.admit(ENTITY, NEW), Admission::Send);
    }

    #[test]
    fn the_waiting_queue_is_bounded() {
        let mut order = CallOrder::default();
        order.sent(ENTITY, OLD);
        for k in 0..MAX_WAITING_CALLS {
            order.wait(ENTITY, call(&k.to_string()));
        }
        assert_eq!(order.admit(ENTITY, NEW), Admission::Refuse);
    }
}
