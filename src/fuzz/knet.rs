//! Fuzz entry points for the kNet codecs. The cargo-fuzz targets in
//! `tests/fuzz/fuzz_targets/` are one-liners calling these, so a saved
//! corpus replays through the same code in a normal test on stable Rust
//! (`tests/knet_fuzz_corpus.rs`).
//!
//! Each must return for any input. Besides "no panic, no hang" they check
//! the codec's own promises: whatever parses re-encodes, and the re-encoded
//! bytes parse back to the same thing.

use crate::knet::datagram::{parse_datagram, write_datagram, BlockOut, FragmentInfo};
use crate::knet::error::KnetError;
use crate::knet::ids::MessageId;
use crate::knet::message::PacketAck;
use crate::knet::stream::{write_stream_message, StreamDecoder, MAX_STREAM_MESSAGE};

/// A small stream limit, so the fuzzer also reaches the "too large" path.
const SMALL_STREAM_LIMIT: usize = 512;

/// Parses one UDP datagram with all its blocks; splits the id off every
/// Whole and Start block; decodes PacketAck payloads; re-encodes what
/// parsed and checks it parses back equal.
pub fn fuzz_datagram(data: &[u8]) {
    let Ok((header, blocks)) = parse_datagram(data) else {
        return;
    };
    let mut outs = Vec::new();
    for block in blocks {
        let Ok(out) = block.and_then(|b| b.to_out()) else {
            return;
        };
        if out.fragment == FragmentInfo::Whole && out.message_id == Some(MessageId::PACKET_ACK) {
            check_packet_ack(out.payload);
        }
        outs.push(out);
    }
    let mut bytes = Vec::new();
    match write_datagram(&mut bytes, header.packet_id, &outs) {
        Ok(()) => {}
        // A base of 0x7FFFFFFF plus a delta parses, but kNet's sender asserts
        // base < 2^31, and so does the writer: the one input that cannot be
        // re-encoded.
        Err(KnetError::OutOfRange {
            what: "reliable base",
            ..
        }) => return,
        Err(error) => panic!("parsed blocks must re-encode: {error}"),
    }
    let (again_header, again) = parse_datagram(&bytes).expect("re-encoded header parses");
    assert_eq!(again_header.packet_id, header.packet_id);
    assert_eq!(
        again_header.reliable,
        outs.iter().any(|b| b.reliable_number.is_some())
    );
    let again: Vec<BlockOut> = again
        .map(|b| b.and_then(|b| b.to_out()))
        .collect::<Result<_, _>>()
        .expect("re-encoded blocks parse");
    assert_eq!(again, outs);
}

/// A PacketAck payload decodes only at 7 bytes and re-encodes unchanged
/// unless its two ignored top bits were set.
fn check_packet_ack(payload: &[u8]) {
    match PacketAck::decode(payload) {
        Ok(ack) => {
            if payload[2] & 0xC0 == 0 {
                assert_eq!(&ack.encode()[..], payload);
            }
            assert!(ack.acked().count() <= 33);
        }
        Err(error) => assert_eq!(error, KnetError::PacketAckSize(payload.len())),
    }
}

/// Feeds a TCP stream to two decoders (the kNet limit and a small one) in
/// chunks whose sizes come from the first bytes of the input, and decodes
/// until more bytes are needed or an error. Every message re-frames and
/// decodes back equal; the buffer stays bounded.
pub fn fuzz_stream(data: &[u8]) {
    let (pattern, stream) = data.split_at(data.len().min(4));
    for limit in [MAX_STREAM_MESSAGE, SMALL_STREAM_LIMIT] {
        let mut decoder = StreamDecoder::new(limit);
        let mut rest = stream;
        let mut sizes = pattern.iter().cycle();
        while !rest.is_empty() {
            let size = sizes.next().map_or(rest.len(), |&b| usize::from(b) + 1);
            let (chunk, tail) = rest.split_at(size.min(rest.len()));
            rest = tail;
            decoder.push(chunk);
            if !drain(&mut decoder, limit) {
                break;
            }
        }
    }
}

/// Decodes until `None` (returns true) or an error (false).
fn drain(decoder: &mut StreamDecoder, limit: usize) -> bool {
    loop {
        match decoder.next_message() {
            Ok(Some((id, payload))) => {
                let mut framed = Vec::new();
                write_stream_message(&mut framed, id, &payload);
                let mut check = StreamDecoder::new(limit);
                check.push(&framed);
                assert_eq!(check.next_message(), Ok(Some((id, payload))));
                assert_eq!(check.buffered(), 0);
            }
            Ok(None) => {
                // At most an incomplete length VLE (< 4 bytes) plus a block
                // the limit allowed.
                assert!(decoder.buffered() < 4 + limit);
                return true;
            }
            Err(_) => return false,
        }
    }
}

/// Limits small enough that the fuzzer reaches every bound of the
/// reassembler: per message and per connection.
const SMALL_MESSAGE_LIMIT: usize = 4096;
const SMALL_BUFFER_LIMIT: usize = 16 * 1024;

/// Drives the fragment reassembler with operations read from `data`, both
/// directly and through a server [`crate::knet::udp::UdpConnection`] as
/// well-formed datagrams (so the fuzzer spends its time on fragment
/// logic, not on framing). Checks that the buffer never exceeds its cap,
/// that every assembled message respects the message cap, and that the
/// connection never panics whatever the order, duplication or
/// inconsistency of the fragments.
pub fn fuzz_reassembly(data: &[u8]) {
    use crate::clock::Time;
    use crate::knet::datagram::write_datagram;
    use crate::knet::ids::{PacketId, ReliableNumber, TransferId};
    use crate::knet::udp::reassembly::Reassembly;
    use crate::knet::udp::{Role, UdpConfig, UdpConnection};

    let mut reassembly = Reassembly::new(SMALL_MESSAGE_LIMIT, SMALL_BUFFER_LIMIT);
    let config = UdpConfig {
        max_message_bytes: SMALL_MESSAGE_LIMIT,
        max_reassembly_bytes: SMALL_BUFFER_LIMIT,
        ..UdpConfig::default()
    };
    let mut connection = UdpConnection::new(Role::Server, config, Time::ZERO);
    let mut now = Time::ZERO;
    let mut packet = PacketId::FIRST;
    let mut number = 0u32;
    let mut out = Vec::new();
    let mut rest = data;
    // Each operation: kind, transfer, u16 index-or-count, chunk length,
    // then that many payload bytes.
    while rest.len() >= 5 {
        let (head, tail) = rest.split_at(5);
        let kind = head[0];
        let transfer = TransferId(head[1]);
        let value = u32::from(u16::from_le_bytes([head[2], head[3]]));
        let len = usize::from(head[4]).min(tail.len());
        let (chunk, tail) = tail.split_at(len);
        rest = tail;
        let (fragment, id) = if kind & 1 == 0 {
            (
                FragmentInfo::Start {
                    count: value,
                    transfer,
                },
                Some(MessageId(u32::from(kind >> 1) + 100)),
            )
        } else {
            (
                FragmentInfo::Part {
                    transfer,
                    index: value,
                },
                None,
            )
        };
        let direct = match fragment {
            FragmentInfo::Start { count, .. } => {
                reassembly.handle_start(transfer, count, MessageId(100), chunk)
            }
            FragmentInfo::Part { index, .. } => reassembly.handle_part(transfer, index, chunk),
            FragmentInfo::Whole => Ok(None),
        };
        match direct {
            Ok(Some((_, message))) => assert!(message.len() <= SMALL_MESSAGE_LIMIT),
            Ok(None) => {}
            // An error ends the transfer; the connection would close.
            Err(_) => reassembly = Reassembly::new(SMALL_MESSAGE_LIMIT, SMALL_BUFFER_LIMIT),
        }
        assert!(reassembly.buffered() <= SMALL_BUFFER_LIMIT);
        // The same fragment as a datagram; the top bit of `kind` repeats
        // the previous reliable number (a duplicate).
        if kind & 0x80 == 0 {
            number = number.wrapping_add(1);
        }
        let block = BlockOut {
            in_order: true,
            reliable_number: Some(ReliableNumber(number % (1 << 30))),
            fragment,
            message_id: id,
            payload: chunk,
        };
        out.clear();
        if write_datagram(&mut out, packet, &[block]).is_ok() {
            connection.handle_datagram(now, &out);
        }
        packet = packet.next();
        now += std::time::Duration::from_millis(u64::from(head[4] & 0x0f));
        connection.handle_timeout(now);
        while connection.poll_transmit(now, &mut out) {}
        while connection.poll_event().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_vectors_and_junk_pass() {
        for text in [
            "81000002200101022001 02",
            "c30000000017310064",
            "ffffff409c01000330007400050330c80174 0006",
            "c6000006007270020106",
            "0000000000000000",
            "41ffffff 0230 ff ff 01 01",
            "",
            "ff",
        ] {
            let bytes = hex::decode(text.replace(' ', "")).unwrap();
            fuzz_datagram(&bytes);
            fuzz_stream(&bytes);
        }
    }

    #[test]
    fn a_base_at_the_vle16_32_maximum_parses_but_is_not_re_encoded() {
        // Base 0x7FFFFFFF, one reliable block with delta 1.
        let bytes = hex::decode("410000 ffffffff 0110 01 05".replace(' ', "")).unwrap();
        let (header, mut blocks) = parse_datagram(&bytes).unwrap();
        assert_eq!(header.reliable_base, Some(0x7FFF_FFFF));
        let block = blocks.next().unwrap().unwrap();
        assert_eq!(block.reliable_number.unwrap().0, 0x8000_0000);
        fuzz_datagram(&bytes);
    }
}
