//! Regression tests: two sessions that both see a gap in the other's
//! sequence must not answer each other's packets without messages, and a
//! duplicate is not answered at once.
//!
//! The sessions are wired back to back with instant delivery, as on a
//! loopback socket where the driver flushes after every received datagram:
//! whatever one transmits is handed to the other before time moves on. Each
//! side refuses every transmission of one of the other's sequences for a
//! while (a lost packet, or one refused without being inserted), so both
//! hold a gap. Before the fix every packet without messages was answered at
//! once while a gap existed, so the pair exchanged packets without end at a
//! single instant (docs/less-wire.md §7, "Acknowledging").

mod less_harness;

use less_harness::{config, CRATE, LAMP};
use lessgate::clock::Time;
use lessgate::less::packet::open_datagram;
use lessgate::less::session::{Event, FramingMode, Path, Session};
use lessgate::less::signature::{LinkRole, MacKey, SessionKeys};

/// Packets exchanged at one instant before the harness calls it a storm
/// (bounds the test's own run time when the defect is present).
const STORM: usize = 1000;
/// A step of fake time between exchanges: faster than any timer, as a
/// loopback round trip is.
const STEP_MICROS: u64 = 50;

struct End {
    session: Session,
    /// The key that opens what this end sends (the peer's receive key).
    peer_key: MacKey,
    /// Sequence of this end whose transmissions are dropped until `heal`.
    dropped: Option<u8>,
    sent: usize,
    types_seen: usize,
}

/// One end with the harness's keys and first sequences (initiator 200,
/// acceptor 17).
fn end(role: LinkRole) -> End {
    let peer_role = match role {
        LinkRole::Initiator => LinkRole::Acceptor,
        LinkRole::Acceptor => LinkRole::Initiator,
    };
    End {
        session: Session::new(config(role, FramingMode::Datagram), Time::ZERO)
            .expect("a valid config"),
        peer_key: SessionKeys::derive(&[9u8; 32], peer_role).receive,
        dropped: None,
        sent: 0,
        types_seen: 0,
    }
}

/// Moves everything `from` transmits at `now` into `to`, dropping the
/// transmissions of `from.dropped` while `refusing`; returns how many
/// datagrams were transmitted.
fn pass(from: &mut End, to: &mut End, now: Time, refusing: bool) -> usize {
    let mut moved = 0;
    while let Some(transmit) = from.session.poll_transmit(now) {
        assert_eq!(transmit.path, Path::Datagram);
        moved += 1;
        from.sent += 1;
        let (framing, _) = open_datagram(&from.peer_key, &transmit.bytes).expect("authentic");
        if refusing && Some(framing.sequence) == from.dropped {
            continue;
        }
        to.session.handle_datagram(now, &transmit.bytes);
        while let Some(event) = to.session.poll_event() {
            if matches!(event, Event::TypeIntroduced { .. }) {
                to.types_seen += 1;
            }
        }
    }
    moved
}

/// Runs both ends until `until`, refusing the dropped sequences before
/// `heal`. Returns false if the pair stormed (exchanged [`STORM`] packets
/// without time being able to move on).
fn run(a: &mut End, b: &mut End, until: Time, heal: Time) -> bool {
    let mut now = Time::ZERO;
    while now < until {
        for end in [&mut *a, &mut *b] {
            if end.session.poll_timeout().is_some_and(|t| t <= now) {
                end.session.handle_timeout(now);
            }
        }
        // Instant delivery: keep exchanging at `now` while anything moves.
        let mut at_once = 0;
        loop {
            let refusing = now < heal;
            let moved = pass(a, b, now, refusing) + pass(b, a, now, refusing);
            if moved == 0 {
                break;
            }
            at_once += moved;
            if at_once >= STORM {
                return false;
            }
        }
        now = Time::from_micros(now.as_micros() + STEP_MICROS);
    }
    true
}

#[test]
fn two_ends_with_gaps_do_not_answer_each_others_empty_packets() {
    let mut a = end(LinkRole::Initiator);
    let mut b = end(LinkRole::Acceptor);
    // Each end's first packet (an introduce-type) is refused for 300 ms;
    // its second one arrives, so both ends hold a gap.
    a.dropped = Some(200);
    b.dropped = Some(17);
    a.session.introduce_type(CRATE).unwrap();
    b.session.introduce_type(CRATE).unwrap();
    assert_eq!(pass(&mut a, &mut b, Time::ZERO, true), 1);
    assert_eq!(pass(&mut b, &mut a, Time::ZERO, true), 1);
    a.session.introduce_type(LAMP).unwrap();
    b.session.introduce_type(LAMP).unwrap();

    let quiet = run(
        &mut a,
        &mut b,
        Time::from_millis(3000),
        Time::from_millis(300),
    );
    assert!(
        quiet,
        "ping-pong: {} + {} packets at one instant",
        a.sent, b.sent
    );
    // Both gaps filled once the refusal ended: every type arrived.
    assert_eq!((a.types_seen, b.types_seen), (2, 2));
    // Each side: 2 packets with messages, re-sends of the refused one with
    // a doubling timeout (10 ms floor: at most 6 within 300 ms, and one
    // after), one acknowledgement per packet with messages received (at
    // most 2 + 7), keepalives (one a second: 3). Far below a storm.
    assert!(a.sent <= 24 && b.sent <= 24, "sent {} / {}", a.sent, b.sent);
    assert!(!a.session.is_closed() && !b.session.is_closed());
}

#[test]
fn an_idle_link_exchanges_only_keepalives() {
    let mut a = end(LinkRole::Initiator);
    let mut b = end(LinkRole::Acceptor);
    a.session.introduce_type(CRATE).unwrap();
    assert!(run(&mut a, &mut b, Time::from_millis(10_000), Time::ZERO));
    assert_eq!(b.types_seen, 1);
    // a: the type, then a keepalive a second; b: one acknowledgement, then
    // a keepalive a second.
    assert!(a.sent <= 11 && b.sent <= 11, "sent {} / {}", a.sent, b.sent);
}

#[test]
fn a_duplicate_with_messages_is_acknowledged_within_the_ack_delay_not_at_once() {
    // A sender with a full window carries its acks on a re-send, which the
    // peer sees as a duplicate with messages; if that were answered at once
    // (by a re-send, the peer's window being full too), two such ends would
    // exchange re-sends without pause (docs/less-wire.md §7).
    let mut a = end(LinkRole::Initiator);
    let mut b = end(LinkRole::Acceptor);
    let delay = config(LinkRole::Acceptor, FramingMode::Datagram).max_ack_delay;
    a.session.introduce_type(CRATE).unwrap();
    let packet = a.session.poll_transmit(Time::ZERO).expect("the type");
    b.session.handle_datagram(Time::ZERO, &packet.bytes);
    // One packet with messages: acknowledged within the delay.
    assert!(b.session.poll_transmit(Time::ZERO).is_none());
    assert!(
        b.session.poll_transmit(Time::ZERO + delay).is_some(),
        "the ack"
    );
    // That acknowledgement is lost; the same packet arrives again.
    let again = Time::ZERO + delay * 2;
    b.session.handle_datagram(again, &packet.bytes);
    assert_eq!(b.session.stats().rejected_duplicate, 1);
    assert!(
        b.session.poll_transmit(again).is_none(),
        "a duplicate is not answered at once"
    );
    assert!(
        b.session.poll_timeout().is_some_and(|t| t <= again + delay),
        "the ack is due within the delay"
    );
    assert!(b.session.poll_transmit(again + delay).is_some(), "the ack");
}
