//! Connection tests: the captured session replayed byte for byte, the
//! client's connect phase, close paths and protocol errors.

use super::*;
use crate::knet::datagram::MAX_RECEIVE_DATAGRAM;

const LOGIN_SESSION: &str =
    include_str!("../../../tests/data/knet/udp-login-ping-disconnect.jsonl");

fn ms(v: f64) -> Time {
    Time::from_micros((v * 1000.0) as u64)
}

/// Runs every timer from `from` up to `until` and collects the datagrams
/// sent. Deadlines in the past are handled at `from`.
fn drive(c: &mut UdpConnection, from: Time, until: Time, sent: &mut Vec<Vec<u8>>) {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let Some(at) = c.poll_timeout() else { return };
        if at > until {
            return;
        }
        let at = at.max(from);
        c.handle_timeout(at);
        let mut any = false;
        while c.poll_transmit(at, &mut out) {
            sent.push(out.clone());
            any = true;
        }
        if !any && c.poll_timeout() == Some(at) {
            panic!("poll_timeout stuck at {at}");
        }
    }
    panic!("too many steps");
}

fn rows(capture: &str) -> Vec<(f64, String, Vec<u8>)> {
    capture
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["t_ms"].as_f64().unwrap(),
                v["dir"].as_str().unwrap().to_string(),
                hex::decode(v["hex"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn server_first_datagram_is_u2() {
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
    let mut out = Vec::new();
    assert!(s.poll_transmit(Time::ZERO, &mut out));
    assert_eq!(hex::encode(&out), "8100000220010102200102");
    assert!(!s.poll_transmit(Time::ZERO, &mut out));
    assert!(out.is_empty());
}

#[test]
fn server_replays_the_captured_login_session_byte_for_byte() {
    let rows = rows(LOGIN_SESSION);
    // The server answers the connect datagram 51.5 ms later (U2).
    let start = ms(rows[1].0);
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), start);
    let mut sent = Vec::new();
    let mut replied = false;
    let mut prev = start;
    for (t, dir, bytes) in rows.iter().skip(1) {
        let now = ms(*t);
        drive(&mut s, prev, now, &mut sent);
        prev = now;
        if dir != "c2s" {
            continue;
        }
        s.handle_datagram(now, bytes);
        while let Some(event) = s.poll_event() {
            if let UdpEvent::Message { id, .. } = event {
                // Login (U5) → ClientJoined + LoginReply as captured (U6).
                assert_eq!(id, MessageId(100));
                let u6 = &rows[6].2;
                s.send(OutMessage::tundra(102, Bytes::copy_from_slice(&u6[9..18])));
                s.send(OutMessage::tundra(101, Bytes::copy_from_slice(&u6[22..])));
                replied = true;
            } else if let UdpEvent::Closed { reason } = event {
                panic!("closed early: {reason:?}");
            }
        }
        drive(&mut s, now, now, &mut sent);
    }
    assert!(replied);
    let expected: Vec<&Vec<u8>> = rows
        .iter()
        .filter(|(_, dir, _)| dir == "s2c")
        .map(|(_, _, b)| b)
        .collect();
    let sent_hex: Vec<String> = sent.iter().map(hex::encode).collect();
    let expected_hex: Vec<String> = expected.iter().map(hex::encode).collect();
    assert_eq!(sent_hex, expected_hex);
    assert_eq!(
        s.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::PeerDisconnected
        })
    );
    assert!(s.is_closed());
    assert_eq!(s.stats().acks_received, 1);
    assert!(s.stats().rtt.is_some());
}

#[test]
fn client_sends_the_connect_datagram_then_waits() {
    let mut c = UdpConnection::new(Role::Client, UdpConfig::default(), Time::ZERO);
    c.send(OutMessage::tundra(100, Bytes::from_static(b"login")));
    let mut out = Vec::new();
    assert_eq!(c.poll_timeout(), Some(Time::ZERO));
    assert!(c.poll_transmit(Time::ZERO, &mut out));
    assert_eq!(out, [0; 8]);
    // Nothing more (no ping, no Login) before the server speaks.
    let mut sent = Vec::new();
    drive(&mut c, ms(4.0), ms(4.0), &mut sent);
    assert!(sent.is_empty());
    // U2 arrives: connected; ping replies, our ping and the Login go out.
    c.handle_datagram(ms(5.0), &hex::decode("8100000220010102200102").unwrap());
    assert_eq!(c.poll_event(), Some(UdpEvent::Connected));
    drive(&mut c, ms(5.0), ms(5.0), &mut sent);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        hex::encode(&sent[0]),
        [
            "c100000000",
            "02200201",
            "02200202",
            "02200101",
            "063000646c6f67696e"
        ]
        .concat()
    );
}

#[test]
fn client_gives_up_after_the_connect_timeout() {
    let mut c = UdpConnection::new(Role::Client, UdpConfig::default(), Time::ZERO);
    let mut sent = Vec::new();
    drive(&mut c, Time::ZERO, ms(10_000.0), &mut sent);
    assert_eq!(sent, [vec![0u8; 8]]);
    assert_eq!(
        c.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::ConnectFailed
        })
    );
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn server_close_sends_disconnect_and_waits_for_the_ack() {
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
    let mut sent = Vec::new();
    drive(&mut s, Time::ZERO, Time::ZERO, &mut sent);
    s.close(ms(1.0));
    drive(&mut s, ms(1.0), ms(1.0), &mut sent);
    // U12 shape: reliable, base 0, Disconnect (hdr 0x3004, id 3FFFFFFF).
    assert_eq!(hex::encode(&sent[1]), "c200000000043000ffffffff");
    s.send(OutMessage::tundra(120, Bytes::from_static(b"x")));
    assert_eq!(s.stats().messages_refused, 1);
    // U11 from the peer closes it.
    s.handle_datagram(ms(3.0), &hex::decode("9300000420feffffff").unwrap());
    assert_eq!(
        s.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::LocalDisconnect
        })
    );
    // Without an ack: closed after the linger.
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
    s.close(Time::ZERO);
    drive(&mut s, Time::ZERO, ms(499.0), &mut sent);
    assert!(!s.is_closed());
    drive(&mut s, ms(499.0), ms(500.0), &mut sent);
    assert!(s.is_closed());
}

#[test]
fn malformed_datagrams_close_with_a_protocol_error() {
    for bad in [
        "8100",
        "81000000",
        "8100000020",
        "810000072004030000000000",
        "810000ff27",
    ] {
        let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
        s.handle_datagram(Time::ZERO, &hex::decode(bad).unwrap());
        assert!(
            matches!(
                s.poll_event(),
                Some(UdpEvent::Closed {
                    reason: CloseReason::ProtocolError(_)
                })
            ),
            "{bad}"
        );
        let mut out = Vec::new();
        assert!(
            !s.poll_transmit(Time::ZERO, &mut out),
            "nothing sent after an error"
        );
    }
}

#[test]
fn oversized_datagrams_are_dropped_and_duplicates_reacked() {
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
    s.handle_datagram(Time::ZERO, &[0x81; MAX_RECEIVE_DATAGRAM + 1]);
    assert_eq!(s.stats().oversized_dropped, 1);
    assert!(s.poll_event().is_none());
    let mut sent = Vec::new();
    drive(&mut s, Time::ZERO, Time::ZERO, &mut sent);
    // A reliable EntityAction, twice: delivered once, acked twice.
    let d = hex::decode("c30000000004300078616263").unwrap();
    s.handle_datagram(ms(1.0), &d);
    assert!(matches!(
        s.poll_event(),
        Some(UdpEvent::Message { reliable: true, .. })
    ));
    drive(&mut s, ms(1.0), ms(40.0), &mut sent);
    assert_eq!(
        hex::encode(sent.last().unwrap()),
        "82000008200403000000000000"
    );
    s.handle_datagram(ms(50.0), &d);
    assert!(s.poll_event().is_none());
    assert_eq!(s.stats().duplicate_datagrams, 1);
    drive(&mut s, ms(50.0), ms(100.0), &mut sent);
    assert_eq!(
        hex::encode(sent.last().unwrap()),
        "83000008200403000000000000"
    );
}

#[test]
fn silence_times_out() {
    let mut s = UdpConnection::new(Role::Server, UdpConfig::default(), Time::ZERO);
    let mut sent = Vec::new();
    drive(&mut s, Time::ZERO, ms(14_999.0), &mut sent);
    assert!(!s.is_closed());
    drive(&mut s, ms(14_999.0), ms(15_000.0), &mut sent);
    assert_eq!(
        s.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::TimedOut
        })
    );
}

#[test]
fn tundra_frames() {
    assert_eq!(
        tundra_frame(MessageId(110), b"ab").as_deref(),
        Some(&[110, 0, b'a', b'b'][..])
    );
    assert_eq!(tundra_frame(MessageId(70_000), b""), None);
}

/// A connected client: connect datagram sent, the server's first datagram
/// (U2) taken at `at`, whatever it answers sent.
fn connected_client(at: Time) -> UdpConnection {
    let mut c = UdpConnection::new(Role::Client, UdpConfig::default(), Time::ZERO);
    let mut out = Vec::new();
    assert!(c.poll_transmit(Time::ZERO, &mut out));
    c.handle_datagram(at, &hex::decode("8100000220010102200102").unwrap());
    drive(&mut c, at, at, &mut Vec::new());
    while c.poll_event().is_some() {}
    c
}

/// Whether `datagram` carries a PingRequest (a block `02 20 01 <id>`).
fn has_ping_request(datagram: &[u8]) -> bool {
    datagram.windows(3).any(|w| w == [0x02, 0x20, 0x01])
}

#[test]
fn a_steady_run_of_refusals_ends_the_connection_and_probes_meanwhile() {
    let mut c = connected_client(ms(1.0));
    let mut sent = Vec::new();
    let mut now = ms(100.0);
    c.handle_unreachable(now);
    // Each probe the connection sends is refused in turn.
    for _ in 0..10 {
        let Some(due) = c.poll_timeout() else { break };
        now = due;
        let before = sent.len();
        drive(&mut c, now, now, &mut sent);
        if sent[before..].iter().any(|d| has_ping_request(d)) {
            c.handle_unreachable(now);
        }
        if c.is_closed() {
            break;
        }
    }
    assert!(c.is_closed(), "lost after a second of refusals");
    assert_eq!(
        c.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::Refused {
                count: 5,
                over: Duration::from_millis(1_000)
            }
        })
    );
    assert_eq!(now, ms(1_100.0), "probed every 250 ms");
}

#[test]
fn a_stray_refusal_does_not_end_a_good_session() {
    let mut c = connected_client(ms(1.0));
    let mut sent = Vec::new();
    for round in 0..20u32 {
        let t = f64::from(round) * 1_000.0 + 100.0;
        c.handle_unreachable(ms(t));
        c.handle_unreachable(ms(t + 1.0));
        // The peer answers the probe: it is there.
        drive(&mut c, ms(t), ms(t + 300.0), &mut sent);
        // PingReply(3) in the peer's next datagram (packet ids 5, 6, ...).
        let answer = [0x80 | (5 + round as u8), 0, 0, 0x02, 0x20, 0x02, 0x03];
        c.handle_datagram(ms(t + 301.0), &answer);
    }
    drive(&mut c, ms(20_000.0), ms(20_500.0), &mut sent);
    assert!(!c.is_closed());
    assert!(sent.iter().any(|d| has_ping_request(d)), "probes went out");
}

#[test]
fn a_refused_connect_datagram_fails_the_dial_at_once() {
    let mut c = UdpConnection::new(Role::Client, UdpConfig::default(), Time::ZERO);
    let mut out = Vec::new();
    assert!(c.poll_transmit(Time::ZERO, &mut out));
    c.handle_unreachable(ms(1.0));
    assert_eq!(
        c.poll_event(),
        Some(UdpEvent::Closed {
            reason: CloseReason::Refused {
                count: 1,
                over: Duration::ZERO
            }
        })
    );
}
