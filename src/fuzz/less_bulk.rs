//! Entry point for the fuzz target `less_bulk` in `tests/fuzz`: bulk
//! packets (zstd-compressed stream datagrams, docs/less-wire.md §16.5),
//! sealed and opened directly and fed to a session that agreed them. Kept in
//! the library so `tests/less_fuzz_corpus.rs` replays the saved corpus on
//! stable Rust. The function must return for any input; a panic is a bug.

use std::time::Duration;

use super::less::{drain, subscribe_to_all};
use super::less_encodings::{decode_encoded, encoded_fixtures, encoded_messages, CRATE, PLACEABLE};
use crate::clock::Time;
use crate::less::bulk::{
    open_formed_stream_datagram, seal_bulk, seal_plain_formed, FormedPacket, COMPRESSION_LEVEL,
};
use crate::less::codec::{write_count, write_u64};
use crate::less::ids::{Local, Remote, TypeId};
use crate::less::message::Message;
use crate::less::packet::{write_body, DatagramFraming, OpenedPacket};
use crate::less::session::{FramingMode, Session, SessionConfig};
use crate::less::signature::{LinkRole, MacKey, SessionKeys, SIGNATURE_LEN};

const SECRET: [u8; 32] = [0x5e; 32];
/// The initiator's first sequence number as the acceptor session expects it.
const REMOTE_FIRST_SEQUENCE: u8 = 200;

/// A form-`01` stream datagram around an arbitrary payload (what a peer
/// could send as "compressed" bytes), validly signed.
fn seal_raw_zstd(key: &MacKey, framing: &DatagramFraming, payload: &[u8]) -> Vec<u8> {
    let mut inner = vec![1u8, framing.sequence, framing.ack_last];
    write_u64(&mut inner, framing.ack_bits);
    let offset = inner.len();
    inner.extend_from_slice(&[0; SIGNATURE_LEN]);
    inner.extend_from_slice(payload);
    let mut frame = Vec::with_capacity(inner.len() + 4);
    write_count(&mut frame, inner.len());
    let offset = offset + frame.len();
    frame.extend_from_slice(&inner);
    key.write_signature(&mut frame, offset);
    frame
}

fn same_packet(opened: &OpenedPacket<'_>, timestamp: i64, count: usize, messages: &[u8]) {
    assert_eq!(opened.timestamp, timestamp, "timestamp survives");
    assert_eq!(opened.message_count, count, "message count survives");
    assert_eq!(opened.messages, messages, "messages survive");
}

/// One frame of `bulk_session`: the header byte's bit 2 picks a raw zstd
/// payload (set) or a body the harness seals (clear; bit 3 then picks the
/// compressed form when it is smaller, or the plain form). A body is a
/// message count byte and the messages.
fn frame_for(key: &MacKey, header: u8, sequence: u8, bytes: &[u8]) -> Vec<u8> {
    let framing = DatagramFraming {
        sequence,
        ack_last: 6,
        ack_bits: 0,
    };
    if header & 4 != 0 {
        return seal_raw_zstd(key, &framing, bytes);
    }
    let (count, messages) = bytes.split_first().map_or((0, &[][..]), |(c, m)| (*c, m));
    if header & 8 != 0 {
        seal_bulk(key, &framing, 0, usize::from(count), messages).bytes
    } else {
        seal_plain_formed(key, &framing, 0, usize::from(count), messages)
    }
}

/// `less_bulk`: the first byte picks the mode.
///
/// Even, below 128: the rest is a message count byte and messages; sealed as
/// a bulk packet it must open to exactly that body. Odd, below 128: the rest is the
/// payload of a form-`01` datagram, opened as a receiver would. 128 and up:
/// an acceptor session that agreed bulk packets and every encoding, fed
/// operations (byte: low 2 bits 0 a frame, 1 a timer, 2 subscribe to every
/// introduced type, 3 a frame on the next sequence number; then for frames
/// a length byte and that many bytes, see [`frame_for`]).
///
/// Returns the bulk packets the session received, so tests can check the
/// seeds reach past the signature and the decompressor.
pub fn bulk(data: &[u8]) -> u64 {
    let Some((&mode, rest)) = data.split_first() else {
        return 0;
    };
    let key = SessionKeys::derive(&SECRET, LinkRole::Initiator).send;
    let framing = DatagramFraming {
        sequence: mode,
        ack_last: 0,
        ack_bits: u64::from(mode),
    };
    if mode >= 128 {
        return session(&key, rest);
    }
    if mode & 1 == 0 {
        let (count, messages) = rest.split_first().map_or((0, &[][..]), |(c, m)| (*c, m));
        let sealed = seal_bulk(
            &key,
            &framing,
            i64::from(mode),
            usize::from(count),
            messages,
        );
        let opened = open_formed_stream_datagram(&key, &sealed.bytes);
        // A count above the bytes left is refused (every message takes one).
        let Ok((opened_framing, packet)) = opened else {
            assert!(
                usize::from(count) > messages.len(),
                "a sealed bulk packet opens"
            );
            return 0;
        };
        assert_eq!(opened_framing, framing);
        match &packet {
            FormedPacket::Plain(opened) => {
                same_packet(opened, i64::from(mode), usize::from(count), messages)
            }
            FormedPacket::Bulk(body) => {
                assert_eq!(body.compressed_len, sealed.payload_len);
                same_packet(
                    &body.packet(),
                    i64::from(mode),
                    usize::from(count),
                    messages,
                )
            }
        }
        return 0;
    }
    let frame = seal_raw_zstd(&key, &framing, rest);
    if let Ok((_, FormedPacket::Bulk(body))) = open_formed_stream_datagram(&key, &frame) {
        assert!(body.body_len() <= crate::less::bulk::MAX_BULK_BODY_LEN);
        let packet = body.packet();
        decode_encoded(packet.message_count, packet.messages);
    }
    0
}

fn session(key: &MacKey, mut rest: &[u8]) -> u64 {
    let fixtures = encoded_fixtures();
    let mut config = SessionConfig::new(
        SessionKeys::derive(&SECRET, LinkRole::Acceptor),
        7,
        REMOTE_FIRST_SEQUENCE,
        fixtures.registry.clone(),
        fixtures.connection.clone(),
    );
    config.mode = FramingMode::Datagram;
    config.bulk_packets = true;
    config.encodings = fixtures.encodings.clone();
    let Ok(mut session) = Session::new(config, Time::ZERO) else {
        return 0;
    };
    let mut now = Time::ZERO;
    let mut sequence = REMOTE_FIRST_SEQUENCE;
    let mut introduced: Vec<TypeId<Remote>> = Vec::new();
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op & 3 {
            0 | 3 => {
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let len = usize::from(len).min(tail.len());
                if op & 3 == 3 {
                    sequence = sequence.wrapping_add(1);
                }
                let frame = frame_for(key, op, sequence, &tail[..len]);
                rest = &tail[len..];
                session.handle_stream_frame(now, &frame);
            }
            1 => {
                now += Duration::from_millis(u64::from(op >> 2) * 10);
                session.handle_timeout(now);
            }
            _ => {
                subscribe_to_all(&mut session, &introduced);
            }
        }
        drain(&mut session, now, &mut introduced);
        let _ = session.poll_timeout();
    }
    session.stats().bulk_packets_received
}

/// A message count byte and the messages: what `frame_for` seals.
fn body(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![messages.len() as u8];
    messages.iter().for_each(|m| body.extend_from_slice(m));
    body
}

/// An operation of the session mode that sends `body` in a frame.
fn frame_op(header: u8, body: &[u8]) -> Vec<u8> {
    let len = u8::try_from(body.len()).expect("seed bodies fit a length byte");
    [&[header, len][..], body].concat()
}

/// Seed inputs for `less_bulk`: a body of every encoded message sealed and
/// opened, the same body as a raw zstd payload, and session runs that
/// introduce a crate and a Placeable in a compressed bulk packet and
/// update them in later ones.
pub fn bulk_seeds() -> Vec<(String, Vec<u8>)> {
    let encoded = encoded_messages();
    let all = body(&encoded);
    let mut raw_body = Vec::new();
    write_body(&mut raw_body, 0, encoded.len(), &all[1..]);
    let compressed = zstd::bulk::compress(&raw_body, COMPRESSION_LEVEL).expect("zstd compresses");
    let introduce = |type_id: u64, uri: &str| {
        Message::<Remote, Local>::IntroduceType {
            type_id: TypeId::new(type_id),
            uri: uri.to_owned(),
        }
        .to_bytes()
    };
    let introductions = body(&[
        introduce(1, CRATE),
        introduce(2, PLACEABLE),
        encoded[4].clone(),
        encoded[5].clone(),
    ]);
    let updates = body(&[encoded[1].clone(), encoded[2].clone()]);
    // Compressed introductions on the first sequence number, a
    // subscription, then updates compressed, plain and as a raw payload.
    let mut session = vec![0x80];
    session.extend(frame_op(0x08, &introductions));
    session.push(0x02);
    session.extend(frame_op(0x0b, &updates));
    session.push(0x05);
    session.extend(frame_op(0x03, &updates));
    session.push(0x09);
    let mut plain_session = vec![0x80];
    plain_session.extend(frame_op(0x00, &introductions));
    plain_session.extend(frame_op(0x07, &compressed));
    vec![
        ("seed-sealed".to_owned(), [&[0u8][..], &all].concat()),
        (
            "seed-raw-zstd".to_owned(),
            [&[1u8][..], &compressed].concat(),
        ),
        ("seed-session".to_owned(), session),
        ("seed-session-plain".to_owned(), plain_session),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_accepts_edge_inputs() {
        for input in [
            &[][..],
            &[0],
            &[1],
            &[0x80],
            &[0x81, 0, 5, 1, 2],
            &[0xff; 64],
        ] {
            bulk(input);
        }
    }

    #[test]
    fn a_compressed_frame_reaches_the_session() {
        // One compressible body (a count of zero and padding the session
        // refuses after decompressing) on the first sequence number.
        let mut input = vec![0x80, 0x08, 200, 0];
        input.extend_from_slice(&[0; 199]);
        assert_eq!(bulk(&input), 1);
    }

    #[test]
    fn session_seeds_deliver_bulk_packets() {
        for (name, seed) in bulk_seeds() {
            let received = bulk(&seed);
            if name == "seed-session" {
                assert!(received >= 1, "{name}: {received}");
            }
        }
    }
}
