//! World-server edits of a federation entity on their way to its authority
//! (docs/upstream.md §5). A world-server client's edit reaches the bridge
//! first; the bridge sends it to the entity's authority and the world
//! server already holds it, but the node's scene keeps the authority's
//! previous value until the authority's update comes back. Bringing the
//! entity up to date meanwhile (another of its attributes changed) must not
//! write that previous value back to the world server: its clients would
//! see their edit undone and redone.
//!
//! Per attribute the bridge remembers the value the node held when the
//! first unanswered edit arrived and the world's values in the order they
//! were forwarded. While the node still holds that old value, or an
//! earlier forwarded value with later ones still to come, nothing is sent
//! for the attribute. Anything else is settled: the last forwarded value
//! came back (equal to what the world has), or the authority decided
//! otherwise (a real change, sent as usual). An authority that never
//! answers (it refused, or its link is gone) is given up on after
//! [`FORWARDED_EDIT_WAIT`], and the world server is brought back to the
//! authority's value.
//!
//! Pure: values and an explicit `now`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Time;
use crate::federation::encodings::is_link_copy;
use crate::tundra::AttributeValue;

/// How long the bridge waits for an entity's authority to take a world
/// server's edit before it treats the edit as refused. A peer link's round
/// trip is milliseconds; this covers re-sends on a lossy link.
pub const FORWARDED_EDIT_WAIT: Duration = Duration::from_secs(5);

/// Unanswered world values remembered per attribute: a world client that
/// edits faster than the authority answers keeps the latest ones.
const MAX_FORWARDED: usize = 16;

/// The world server's edits of one attribute, forwarded and not yet
/// answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Forwarded {
    /// What the node holds while the authority has not answered: its value
    /// before the first edit, then each answered one.
    held: AttributeValue,
    /// The world's values still to come back, oldest first.
    pending: VecDeque<AttributeValue>,
    /// When the authority is given up on.
    until: Time,
}

/// Whether `current` is `value` as the node may hold it: the same, or the
/// value read back through a lossy link (a quantized transform).
fn same(current: &AttributeValue, value: &AttributeValue) -> bool {
    current == value || is_link_copy(value, current)
}

impl Forwarded {
    /// The first unanswered edit: the node held `held`, the world server
    /// now holds `value`.
    pub fn new(held: AttributeValue, value: AttributeValue, until: Time) -> Forwarded {
        Forwarded {
            held,
            pending: VecDeque::from([value]),
            until,
        }
    }

    /// Another edit of the same attribute, forwarded at once after.
    pub fn push(&mut self, value: AttributeValue, until: Time) {
        if self.pending.len() >= MAX_FORWARDED {
            self.pending.pop_front();
        }
        self.pending.push_back(value);
        self.until = until;
    }

    /// When the authority is given up on.
    pub fn until(&self) -> Time {
        self.until
    }

    /// Whether the node's value `current` must not be sent to the world
    /// server at `now`: it is the authority's old value, or a forwarded
    /// value with later ones still to come back. `false` means settled:
    /// the entry is to be dropped and `current` compared as usual.
    pub fn holds_back(&mut self, current: &AttributeValue, now: Time) -> bool {
        if now >= self.until {
            return false;
        }
        if same(current, &self.held) {
            return true;
        }
        match self.pending.iter().position(|v| same(current, v)) {
            Some(answered) => {
                self.held = current.clone();
                self.pending.drain(..=answered);
                !self.pending.is_empty()
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Time = Time::from_millis(1_000);

    fn int(v: i32) -> AttributeValue {
        AttributeValue::Int(v)
    }

    #[test]
    fn the_old_value_is_held_back_until_the_answer() {
        let mut f = Forwarded::new(int(2), int(3), T + FORWARDED_EDIT_WAIT);
        assert!(f.holds_back(&int(2), T), "the authority's old value");
        assert!(!f.holds_back(&int(3), T), "answered: settled");
    }

    #[test]
    fn answers_to_earlier_edits_are_held_back_until_the_last() {
        let mut f = Forwarded::new(int(2), int(3), T + FORWARDED_EDIT_WAIT);
        f.push(int(4), T + FORWARDED_EDIT_WAIT);
        assert!(f.holds_back(&int(2), T));
        assert!(f.holds_back(&int(3), T), "4 is still coming");
        assert!(f.holds_back(&int(3), T), "and stays held");
        assert!(!f.holds_back(&int(4), T));
    }

    #[test]
    fn another_value_is_a_real_change() {
        let mut f = Forwarded::new(int(2), int(3), T + FORWARDED_EDIT_WAIT);
        assert!(!f.holds_back(&int(7), T));
    }

    #[test]
    fn an_authority_that_never_answers_is_given_up_on() {
        let mut f = Forwarded::new(int(2), int(3), T + FORWARDED_EDIT_WAIT);
        assert!(f.holds_back(&int(2), T + FORWARDED_EDIT_WAIT / 2));
        assert!(!f.holds_back(&int(2), T + FORWARDED_EDIT_WAIT));
    }

    #[test]
    fn at_most_the_latest_edits_are_remembered() {
        let mut f = Forwarded::new(int(0), int(1), T + FORWARDED_EDIT_WAIT);
        for v in 2..=40 {
            f.push(int(v), T + FORWARDED_EDIT_WAIT);
        }
        assert_eq!(f.pending.len(), MAX_FORWARDED);
        assert!(!f.holds_back(&int(1), T), "forgotten: a change");
    }
}
