//! Hand-off on departure (docs/federation.md §7.8): a node leaving cleanly
//! offers its persistent entities to the peers its operator chose, in order
//! of preference, grants them all to the first that accepts, and waits a
//! bounded time for the grants to be acknowledged before it says goodbye.
//!
//! Pure: the caller starts it with the candidates (links that are up, in
//! the configured order) and the entities, feeds answers, link failures,
//! deliveries and time, and carries out the steps it polls: send an offer,
//! grant the entities. It decides nothing about the wire.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Time;

/// The least time one peer is given to answer an offer before the next is
/// asked. Each candidate gets an even share of the whole wait, never less
/// than this: on a lossy link the offer and its answer may each need a few
/// re-sends.
pub const MIN_OFFER_TIMEOUT: Duration = Duration::from_secs(1);

/// What the caller must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepartureStep<P, K> {
    /// Ask `peer` whether it takes `entities` persistent entities.
    Offer { peer: P, entities: usize },
    /// `peer` accepted: grant it every one of `entities` (reason
    /// "departure"), then report [`Departure::handle_delivered`] once the
    /// link has acknowledged the grants.
    Grant { peer: P, entities: Vec<K> },
}

/// How the departure ended: what the node logs before its goodbye.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepartureOutcome<P> {
    /// The node had no persistent entity of its own.
    NothingToHand,
    /// `peer` took `entities`; `delivered` says whether the link
    /// acknowledged the grants before the wait ran out (or the link fell).
    HandedOver {
        peer: P,
        entities: usize,
        delivered: bool,
    },
    /// Every candidate refused, did not answer or was not linked: the
    /// entities disappear with the node, as they do when it dies.
    NobodyAccepted { asked: usize },
    /// The wait ran out before any candidate accepted.
    TimedOut,
}

impl<P: std::fmt::Display> std::fmt::Display for DepartureOutcome<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DepartureOutcome::NothingToHand => f.write_str("nothing to hand over"),
            DepartureOutcome::HandedOver {
                peer,
                entities,
                delivered,
            } => write!(
                f,
                "{entities} entities handed to {peer} ({})",
                match delivered {
                    true => "delivered",
                    false => "not confirmed before the wait ran out",
                }
            ),
            DepartureOutcome::NobodyAccepted { asked } => {
                write!(f, "none of {asked} peers accepted")
            }
            DepartureOutcome::TimedOut => f.write_str("no peer accepted within the wait"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase<P> {
    Offering { peer: P, until: Time },
    Delivering { peer: P },
    Finished(DepartureOutcome<P>),
}

/// One departure, from the first offer to the outcome.
#[derive(Debug, Clone)]
pub struct Departure<P, K> {
    candidates: VecDeque<P>,
    entities: Vec<K>,
    deadline: Time,
    /// How long each candidate has to answer.
    offer_timeout: Duration,
    asked: usize,
    phase: Phase<P>,
    steps: VecDeque<DepartureStep<P, K>>,
}

impl<P: Copy + Eq, K: Clone> Departure<P, K> {
    /// Starts a departure at `now` that ends within `wait`: `candidates`
    /// are the peers to offer to, in order of preference (only those
    /// linked now), `entities` this node's persistent entities.
    pub fn start(now: Time, candidates: Vec<P>, entities: Vec<K>, wait: Duration) -> Self {
        let share = wait / u32::try_from(candidates.len().max(1)).unwrap_or(u32::MAX);
        let mut departure = Departure {
            candidates: candidates.into(),
            entities,
            deadline: now + wait,
            offer_timeout: share.max(MIN_OFFER_TIMEOUT),
            asked: 0,
            phase: Phase::Finished(DepartureOutcome::NothingToHand),
            steps: VecDeque::new(),
        };
        if !departure.entities.is_empty() {
            departure.offer_next(now);
        }
        departure
    }

    /// The outcome, once the departure is over.
    pub fn outcome(&self) -> Option<&DepartureOutcome<P>> {
        match &self.phase {
            Phase::Finished(outcome) => Some(outcome),
            _ => None,
        }
    }

    /// The next step to carry out.
    pub fn poll_step(&mut self) -> Option<DepartureStep<P, K>> {
        self.steps.pop_front()
    }

    /// When [`Departure::handle_timeout`] should run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Offering { until, .. } => Some((*until).min(self.deadline)),
            Phase::Delivering { .. } => Some(self.deadline),
            Phase::Finished(_) => None,
        }
    }

    /// `peer` answered the offer. Answers from others, or late ones, are
    /// ignored.
    pub fn handle_answer(&mut self, now: Time, peer: P, accepted: bool) {
        if !matches!(self.phase, Phase::Offering { peer: asked, .. } if asked == peer) {
            return;
        }
        if accepted {
            self.phase = Phase::Delivering { peer };
            self.steps.push_back(DepartureStep::Grant {
                peer,
                entities: self.entities.clone(),
            });
        } else {
            self.offer_next(now);
        }
    }

    /// The link to `peer` has acknowledged everything sent on it up to the
    /// grants.
    pub fn handle_delivered(&mut self, peer: P) {
        if self.phase == (Phase::Delivering { peer }) {
            self.finish_delivering(peer, true);
        }
    }

    /// The link to `peer` went down.
    pub fn handle_link_down(&mut self, now: Time, peer: P) {
        self.candidates.retain(|candidate| *candidate != peer);
        match self.phase {
            Phase::Offering { peer: asked, .. } if asked == peer => self.offer_next(now),
            // The grants may or may not have arrived: what did is the
            // peer's, the rest is lost with this node (never two authorities:
            // this node is leaving).
            Phase::Delivering { peer: target } if target == peer => {
                self.finish_delivering(peer, false)
            }
            _ => {}
        }
    }

    /// Runs the timers due at `now`: an unanswered offer moves on to the
    /// next candidate; the end of the wait ends the departure.
    pub fn handle_timeout(&mut self, now: Time) {
        match self.phase {
            Phase::Delivering { peer } if now >= self.deadline => {
                self.finish_delivering(peer, false)
            }
            Phase::Offering { .. } if now >= self.deadline => {
                self.phase = Phase::Finished(DepartureOutcome::TimedOut);
            }
            Phase::Offering { until, .. } if now >= until => self.offer_next(now),
            _ => {}
        }
    }

    fn offer_next(&mut self, now: Time) {
        match self.candidates.pop_front() {
            Some(peer) => {
                self.asked += 1;
                self.phase = Phase::Offering {
                    peer,
                    until: now + self.offer_timeout,
                };
                self.steps.push_back(DepartureStep::Offer {
                    peer,
                    entities: self.entities.len(),
                });
            }
            None => {
                self.phase = Phase::Finished(DepartureOutcome::NobodyAccepted { asked: self.asked })
            }
        }
    }

    fn finish_delivering(&mut self, peer: P, delivered: bool) {
        self.phase = Phase::Finished(DepartureOutcome::HandedOver {
            peer,
            entities: self.entities.len(),
            delivered,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn at(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    fn steps(departure: &mut Departure<char, u32>) -> Vec<DepartureStep<char, u32>> {
        std::iter::from_fn(|| departure.poll_step()).collect()
    }

    #[test]
    fn the_first_peer_that_accepts_gets_every_entity() {
        let mut departure = Departure::start(at(0), vec!['b', 'c'], vec![1, 2, 3], WAIT);
        assert_eq!(
            steps(&mut departure),
            vec![DepartureStep::Offer {
                peer: 'b',
                entities: 3
            }]
        );
        departure.handle_answer(at(10), 'b', false);
        assert_eq!(
            steps(&mut departure),
            vec![DepartureStep::Offer {
                peer: 'c',
                entities: 3
            }]
        );
        // A late answer from the peer that refused changes nothing.
        departure.handle_answer(at(15), 'b', true);
        departure.handle_answer(at(20), 'c', true);
        assert_eq!(
            steps(&mut departure),
            vec![DepartureStep::Grant {
                peer: 'c',
                entities: vec![1, 2, 3]
            }]
        );
        assert_eq!(departure.outcome(), None);
        assert_eq!(departure.poll_timeout(), Some(at(5000)));
        departure.handle_delivered('b');
        assert_eq!(departure.outcome(), None);
        departure.handle_delivered('c');
        assert_eq!(
            departure.outcome(),
            Some(&DepartureOutcome::HandedOver {
                peer: 'c',
                entities: 3,
                delivered: true
            })
        );
        assert_eq!(departure.poll_timeout(), None);
    }

    #[test]
    fn a_silent_peer_is_passed_over_after_its_share_of_the_wait() {
        let mut departure = Departure::start(at(0), vec!['b', 'c'], vec![1], WAIT);
        steps(&mut departure);
        assert_eq!(departure.poll_timeout(), Some(at(2500)));
        departure.handle_timeout(at(2499));
        assert!(steps(&mut departure).is_empty());
        departure.handle_timeout(at(2500));
        assert_eq!(
            steps(&mut departure),
            vec![DepartureStep::Offer {
                peer: 'c',
                entities: 1
            }]
        );
        departure.handle_link_down(at(2600), 'c');
        assert_eq!(
            departure.outcome(),
            Some(&DepartureOutcome::NobodyAccepted { asked: 2 })
        );
    }

    #[test]
    fn the_wait_bounds_everything() {
        let mut departure = Departure::start(at(0), vec!['b'], vec![1], Duration::from_millis(500));
        assert_eq!(departure.poll_timeout(), Some(at(500)));
        departure.handle_timeout(at(500));
        assert_eq!(departure.outcome(), Some(&DepartureOutcome::TimedOut));

        let mut departure = Departure::start(at(0), vec!['b'], vec![1], WAIT);
        departure.handle_answer(at(10), 'b', true);
        departure.handle_timeout(at(4999));
        assert_eq!(departure.outcome(), None);
        departure.handle_timeout(at(5000));
        assert_eq!(
            departure.outcome(),
            Some(&DepartureOutcome::HandedOver {
                peer: 'b',
                entities: 1,
                delivered: false
            })
        );
    }

    #[test]
    fn a_link_lost_while_delivering_ends_undelivered() {
        let mut departure = Departure::start(at(0), vec!['b', 'c'], vec![1], WAIT);
        departure.handle_answer(at(10), 'b', true);
        // A candidate not asked dropping out changes nothing.
        departure.handle_link_down(at(20), 'c');
        assert_eq!(departure.outcome(), None);
        departure.handle_link_down(at(30), 'b');
        assert_eq!(
            departure.outcome(),
            Some(&DepartureOutcome::HandedOver {
                peer: 'b',
                entities: 1,
                delivered: false
            })
        );
    }

    #[test]
    fn nothing_to_hand_or_nobody_to_ask_ends_at_once() {
        let mut departure: Departure<char, u32> = Departure::start(at(0), vec!['b'], vec![], WAIT);
        assert!(steps(&mut departure).is_empty());
        assert_eq!(departure.outcome(), Some(&DepartureOutcome::NothingToHand));
        let departure: Departure<char, u32> = Departure::start(at(0), vec![], vec![1], WAIT);
        assert_eq!(
            departure.outcome(),
            Some(&DepartureOutcome::NobodyAccepted { asked: 0 })
        );
    }
}
