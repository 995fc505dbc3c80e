//! Unit tests of `tcp.rs`: the captured TCP session of docs/knet-wire.md §6.2
//! (T1-T4) and D5/D6 of §6.3, reads split every way, each framing error of
//! §3.1, and the ping cadence and silence timeout under fake time.

use super::*;

/// The login XML of T2 (§6.2): the §5.3 capture with protocol "tcp", port 41235.
const LOGIN_XML: &str = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n\t<password value=\"\" />\n\t<protocol value=\"tcp\" />\n\t<address value=\"127.0.0.1\" />\n\t<port value=\"41235\" />\n\t<client-version value=\"2.5.4.1\" />\n\t<client-name value=\"Name\" />\n\t<client-organization value=\"Org\" />\n</login>\n";
/// The LoginReply XML of T4 (§5.4).
const REPLY_XML: &str =
    "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n";

fn h(text: &str) -> Vec<u8> {
    hex::decode(text.replace(' ', "")).expect("test hex")
}

fn t(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// T2: Login, contentLength 279 (`97 02`), id 100, u16 275, XML, version 4.
fn t2() -> Vec<u8> {
    let mut bytes = h("97 02 64 13 01");
    bytes.extend_from_slice(LOGIN_XML.as_bytes());
    bytes.push(0x04);
    bytes
}

fn login_payload() -> Vec<u8> {
    t2()[3..].to_vec()
}

fn connection() -> TcpConnection {
    TcpConnection::new(TcpConfig::default(), t(0))
}

fn transmitted(conn: &mut TcpConnection) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(bytes) = conn.poll_transmit() {
        out.extend_from_slice(&bytes);
    }
    out
}

fn events(conn: &mut TcpConnection) -> Vec<TcpEvent> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

fn message(id: u32, payload: &[u8]) -> TcpEvent {
    TcpEvent::Message {
        id: MessageId(id),
        payload: Bytes::copy_from_slice(payload),
    }
}

fn closed_reason(events: &[TcpEvent]) -> &str {
    match events.last() {
        Some(TcpEvent::Closed { reason }) => reason,
        other => panic!("expected Closed last, got {other:?}"),
    }
}

#[test]
fn captured_session_server_side() {
    let mut conn = connection();
    assert_eq!(t2().len(), 281);
    // T1 and T2 arrive before the server's first update.
    conn.handle_bytes(t(51), &h("02 01 01"));
    conn.handle_bytes(t(51), &t2());
    assert_eq!(conn.poll_timeout(), Some(t(0)));
    conn.handle_timeout(t(65));
    // T3: PingReply(1) + PingRequest(1) in one segment.
    assert_eq!(transmitted(&mut conn), h("02 02 01 02 01 01"));
    assert_eq!(events(&mut conn), vec![message(100, &login_payload())]);
    // T4: ClientJoined then LoginReply, coalesced.
    conn.send_tundra(&h("6600 01 06 00 74 65 73 74 65 72"))
        .unwrap();
    let mut reply = h("6500 01 01 4d 00");
    reply.extend_from_slice(REPLY_XML.as_bytes());
    reply.push(0x04);
    conn.send_tundra(&reply).unwrap();
    let mut t4 = h("0a 66 01 06 00 74 65 73 74 65 72 53 65 01 01 4d 00");
    t4.extend_from_slice(REPLY_XML.as_bytes());
    t4.push(0x04);
    assert_eq!(t4.len(), 95);
    assert_eq!(conn.unsent_bytes(), 95);
    assert_eq!(transmitted(&mut conn), t4);
    assert_eq!(conn.unsent_bytes(), 0);
    // The client's PingReply(1) times our ping.
    conn.handle_bytes(t(66), &h("02 02 01"));
    assert_eq!(conn.rtt(), Some(Duration::from_millis(1)));
    assert!(events(&mut conn).is_empty());
}

#[test]
fn client_side_sends_ping_then_login() {
    let mut conn = connection();
    conn.handle_timeout(t(0));
    conn.send(MessageId(100), &login_payload()).unwrap();
    let mut expected = h("02 01 01");
    expected.extend_from_slice(&t2());
    assert_eq!(transmitted(&mut conn), expected);
}

#[test]
fn byte_by_byte_and_coalesced_reads_agree() {
    let mut stream = h("02 01 01");
    stream.extend_from_slice(&t2());
    // D5: id 113 with a 200-byte payload, contentLength 201 = `c9 01`.
    let d5_payload = vec![0xab; 200];
    let d5_start = stream.len();
    stream.extend_from_slice(&h("c9 01 71"));
    stream.extend_from_slice(&d5_payload);
    assert_eq!(stream.len() - d5_start, 203);
    let expected = vec![message(100, &login_payload()), message(113, &d5_payload)];

    let mut whole = connection();
    whole.handle_bytes(t(1), &stream);
    assert_eq!(events(&mut whole), expected);
    assert_eq!(transmitted(&mut whole), h("02 02 01"));

    let mut bytewise = connection();
    for byte in &stream {
        bytewise.handle_bytes(t(1), std::slice::from_ref(byte));
    }
    assert_eq!(events(&mut bytewise), expected);
    assert_eq!(bytewise.buffered_bytes(), 0);
    assert_eq!(transmitted(&mut bytewise), h("02 02 01"));
}

#[test]
fn sixteen_kib_content_length_uses_the_four_byte_vle() {
    // D6: `80 80 01 00` = 16384, here as a content length (id 7 + 16383).
    let payload = vec![0x11; 16383];
    let mut conn = connection();
    conn.send(MessageId(7), &payload).unwrap();
    let out = transmitted(&mut conn);
    assert_eq!(out[..5], h("80 80 01 00 07")[..]);
    assert_eq!(out.len(), 4 + 16384);
    let mut peer = connection();
    peer.handle_bytes(t(0), &out);
    assert_eq!(events(&mut peer), vec![message(7, &payload)]);
}

#[test]
fn internal_ids_other_than_pings_are_application_messages() {
    let mut conn = connection();
    conn.handle_bytes(
        t(0),
        &h("01 03  01 04  04 ff ff ff ff  04 fe ff ff ff  01 00"),
    );
    let ids: Vec<_> = events(&mut conn)
        .into_iter()
        .map(|event| match event {
            TcpEvent::Message { id, .. } => id.0,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![3, 4, 0x3FFF_FFFF, 0x3FFF_FFFE, 0]);
    assert!(!conn.is_closed());
}

#[test]
fn malformed_and_unmatched_pings_are_ignored() {
    let mut conn = connection();
    conn.handle_timeout(t(0));
    transmitted(&mut conn);
    // Empty and 2-byte PingRequests, a PingReply for an id never sent.
    conn.handle_bytes(t(5), &h("01 01  03 01 07 08  02 02 09"));
    assert_eq!(transmitted(&mut conn), Vec::<u8>::new());
    assert_eq!(conn.rtt(), None);
    assert!(events(&mut conn).is_empty());
    assert!(!conn.is_closed());
}

#[test]
fn zero_content_length_closes() {
    let mut conn = connection();
    conn.handle_bytes(t(0), &h("02 01 01 00 02 01 02"));
    let events = events(&mut conn);
    assert_eq!(events.len(), 1);
    assert!(closed_reason(&events).contains("bad kNet stream"));
    assert!(conn.is_closed());
    assert_eq!(conn.poll_timeout(), None);
    // The ping before the bad block was answered; nothing after it is read.
    assert_eq!(transmitted(&mut conn), h("02 02 01"));
    conn.handle_bytes(t(1), &h("02 01 03"));
    assert_eq!(transmitted(&mut conn), Vec::<u8>::new());
}

#[test]
fn oversize_content_length_closes_before_the_body_arrives() {
    let config = TcpConfig {
        max_message_bytes: 16,
        ..TcpConfig::default()
    };
    let mut conn = TcpConnection::new(config.clone(), t(0));
    // 16 is accepted.
    let mut ok = vec![0x10, 0x07];
    ok.extend_from_slice(&[0; 15]);
    conn.handle_bytes(t(0), &ok);
    assert_eq!(events(&mut conn), vec![message(7, &[0; 15])]);
    // 17 is not, even with no body yet.
    conn.handle_bytes(t(0), &[0x11]);
    assert!(closed_reason(&events(&mut conn)).contains("bad kNet stream"));

    // The default limit is kNet's 10 MiB: 10 MiB + 1 is refused.
    let mut conn = connection();
    let mut header = Vec::new();
    crate::knet::reader::put_vle8_16_32(&mut header, 10 * 1024 * 1024 + 1);
    conn.handle_bytes(t(0), &header);
    assert!(conn.is_closed());
}

#[test]
fn bad_id_vle_closes() {
    // Content length 1, but the id's VLE needs 2 bytes.
    let mut conn = connection();
    conn.handle_bytes(t(0), &h("01 80 05"));
    assert!(closed_reason(&events(&mut conn)).contains("bad kNet stream"));
}

#[test]
fn messages_before_an_error_come_first() {
    let mut conn = connection();
    conn.handle_bytes(t(0), &h("03 64 aa bb 00"));
    let events = events(&mut conn);
    assert_eq!(events[0], message(100, &h("aa bb")));
    assert_eq!(events.len(), 2);
    closed_reason(&events);
}

#[test]
fn eof_reports_a_partial_message() {
    let mut conn = connection();
    conn.handle_eof();
    assert_eq!(closed_reason(&events(&mut conn)), "closed by peer");

    let mut conn = connection();
    conn.handle_bytes(t(0), &h("05 64 01"));
    conn.handle_eof();
    assert!(closed_reason(&events(&mut conn)).contains("3 bytes unread"));
    conn.handle_eof();
    assert!(events(&mut conn).is_empty(), "Closed is reported once");
}

#[test]
fn pings_every_interval_with_wrapping_ids() {
    let mut conn = connection();
    let mut now = t(0);
    for round in 0..=256u32 {
        assert_eq!(conn.poll_timeout(), Some(now));
        conn.handle_timeout(now);
        let id = (round + 1) as u8; // 1, 2, ..., 255, 0, 1
        assert_eq!(transmitted(&mut conn), vec![0x02, 0x01, id]);
        // Early timer calls send nothing.
        conn.handle_timeout(now + Duration::from_millis(3499));
        assert!(conn.poll_transmit().is_none());
        // The peer keeps talking, so the connection lives on.
        conn.handle_bytes(now + Duration::from_millis(10), &[0x02, 0x02, id]);
        assert_eq!(conn.rtt(), Some(Duration::from_millis(10)));
        now += PING_INTERVAL;
    }
    assert!(events(&mut conn).is_empty());
}

#[test]
fn fifteen_seconds_of_silence_close() {
    let mut conn = connection();
    conn.handle_timeout(t(0));
    conn.handle_bytes(t(2000), &h("02 02 01"));
    transmitted(&mut conn);
    // Pings at 3.5, 7, 10.5, 14 s; the timeout at 17 s comes before the next.
    let mut fired = Vec::new();
    while let Some(at) = conn.poll_timeout() {
        conn.handle_timeout(at);
        fired.push(at);
        assert!(fired.len() < 10, "timer loop did not end");
    }
    assert_eq!(fired, vec![t(3500), t(7000), t(10500), t(14000), t(17000)]);
    assert_eq!(
        transmitted(&mut conn),
        h("02 01 02 02 01 03 02 01 04 02 01 05")
    );
    let events = events(&mut conn);
    assert!(closed_reason(&events).contains("nothing received for 15.0 s"));
    assert!(conn.is_closed());
}

#[test]
fn send_refuses_what_the_wire_or_peer_cannot_take() {
    // A small inbound limit does not limit what we send.
    let config = TcpConfig {
        max_message_bytes: 8,
        ..TcpConfig::default()
    };
    let mut conn = TcpConnection::new(config, t(0));
    assert_eq!(
        conn.send(MessageId(0x4000_0000), &[]),
        Err(KnetError::MessageIdTooLarge(0x4000_0000))
    );
    for internal in [1, 2, 3, 4, 0x3FFF_FFFE] {
        assert!(conn.send(MessageId(internal), &[]).is_err(), "{internal}");
    }
    assert!(conn.send(MessageId(100), &[0; 8]).is_ok());
    // kNet's 10 MiB is the outbound limit: id 100 (1 byte) + payload.
    let mut big = vec![0u8; MAX_STREAM_MESSAGE];
    assert!(matches!(
        conn.send(MessageId(100), &big),
        Err(KnetError::TooLarge { len, max: MAX_STREAM_MESSAGE, .. }) if len == MAX_STREAM_MESSAGE + 1
    ));
    big.pop();
    assert!(conn.send(MessageId(100), &big).is_ok());
    assert!(conn.send_tundra(&[0x64]).is_err());
    let out = transmitted(&mut conn);
    // 10 MiB = 0xA0_0000 as a content length: `80 80 80 02`.
    assert_eq!(
        out[..15],
        h("09 64 00 00 00 00 00 00 00 00  80 80 80 02 64")[..]
    );
    assert_eq!(out.len(), 10 + 4 + MAX_STREAM_MESSAGE);
}

#[test]
fn close_stops_timers_but_keeps_queued_bytes() {
    let mut conn = connection();
    conn.send_tundra(&h("6700 01")).unwrap();
    conn.close();
    assert!(conn.is_closed());
    assert_eq!(conn.poll_timeout(), None);
    conn.handle_timeout(t(100_000));
    conn.send_tundra(&h("6700 02")).unwrap();
    assert_eq!(transmitted(&mut conn), h("02 67 01"));
    assert!(events(&mut conn).is_empty());
}
