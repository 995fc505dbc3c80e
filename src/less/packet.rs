//! Packet framing (docs/less-wire.md §5 and §6) and the signature check.
//!
//! Three frame shapes exist (docs/less-wire.md "Framing"):
//! - datagram: `sequence-number(BYTE) ack-last(BYTE) ack-bitmask(INTEGER) packet`;
//! - stream packet (stream mode): `packet-length(INTEGER) packet`;
//! - stream datagram (a datagram-mode packet too large for the MTU, sent on
//!   the link's reliable stream): `length(INTEGER) sequence-number ack-last
//!   ack-bitmask packet`;
//!
//! where `packet = signature(8 bytes) timestamp(INTEGER) message-count(INTEGER)
//! message*`. The signature covers every byte of the frame, length prefix and
//! UDP framing included, with its own 8 bytes zeroed. Opening a frame parses
//! only the bounded fields in front of the signature, verifies it, and only
//! then reads anything else. This module owns frames; it does not decode
//! messages.

use super::codec::{write_count, write_integer, write_u64, DecodeError, Reader};
use super::limits::{INTEGER_MAX_LEN, MAX_FRAME_LEN, MAX_MESSAGES};
use super::signature::{MacKey, SIGNATURE_LEN};

/// The UDP framing fields (docs/less-wire.md §6, "physical framing of packets over UDP").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramFraming {
    /// This packet's sequence number, modulo 256.
    pub sequence: u8,
    /// The highest sequence number received from the peer, modulo 256.
    pub ack_last: u8,
    /// Bit i acknowledges sequence `ack_last - 1 - i`.
    pub ack_bits: u64,
}

/// A verified packet: header fields and the undecoded message bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenedPacket<'a> {
    pub timestamp: i64,
    pub message_count: usize,
    pub messages: &'a [u8],
}

/// Why a frame was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The bytes in front of the signature do not parse. Nothing about the
    /// sender is known: anyone can send such bytes.
    #[error("malformed frame: {0}")]
    Malformed(DecodeError),
    /// The signature does not match.
    #[error("bad signature")]
    BadSignature,
    /// The signature matched but the header after it is malformed: the
    /// authenticated peer broke the framing rules (docs/less-wire.md §12).
    #[error("framing error: {0}")]
    Framing(DecodeError),
}

/// Most bytes the UDP framing takes: two BYTEs and a 10-byte INTEGER.
pub const DATAGRAM_FRAMING_MAX_LEN: usize = 2 + INTEGER_MAX_LEN;

/// Most bytes a packet header takes: signature, timestamp, message count.
pub const PACKET_HEADER_MAX_LEN: usize = SIGNATURE_LEN + 2 * INTEGER_MAX_LEN;

fn build(
    key: &MacKey,
    length_prefix: bool,
    framing: Option<&DatagramFraming>,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> Vec<u8> {
    let mut inner =
        Vec::with_capacity(DATAGRAM_FRAMING_MAX_LEN + PACKET_HEADER_MAX_LEN + messages.len());
    if let Some(framing) = framing {
        write_framing(&mut inner, framing);
    }
    let mut offset = inner.len();
    inner.extend_from_slice(&[0u8; SIGNATURE_LEN]);
    write_body(&mut inner, timestamp, message_count, messages);
    let mut frame = if length_prefix {
        let mut frame = Vec::with_capacity(INTEGER_MAX_LEN + inner.len());
        write_count(&mut frame, inner.len());
        offset += frame.len();
        frame.extend_from_slice(&inner);
        frame
    } else {
        inner
    };
    key.write_signature(&mut frame, offset);
    frame
}

/// Appends the UDP framing fields.
pub(crate) fn write_framing(out: &mut Vec<u8>, framing: &DatagramFraming) {
    out.push(framing.sequence);
    out.push(framing.ack_last);
    write_u64(out, framing.ack_bits);
}

/// Reads the UDP framing fields (a bounded, total parse: two bytes and one
/// INTEGER).
pub(crate) fn read_framing(reader: &mut Reader<'_>) -> Result<DatagramFraming, DecodeError> {
    Ok(DatagramFraming {
        sequence: reader.read_u8()?,
        ack_last: reader.read_u8()?,
        ack_bits: reader.read_u64()?,
    })
}

/// Appends what follows the signature: timestamp, message count, messages.
pub(crate) fn write_body(out: &mut Vec<u8>, timestamp: i64, message_count: usize, messages: &[u8]) {
    write_integer(out, timestamp);
    write_count(out, message_count);
    out.extend_from_slice(messages);
}

/// Reads what follows the signature (only ever after it verified).
pub(crate) fn read_body<'a>(reader: &mut Reader<'a>) -> Result<OpenedPacket<'a>, DecodeError> {
    let timestamp = reader.read_integer()?;
    // Every message takes at least one byte.
    let message_count = reader.read_count("message count", MAX_MESSAGES.min(reader.remaining()))?;
    Ok(OpenedPacket {
        timestamp,
        message_count,
        messages: reader.rest(),
    })
}

/// A signed datagram.
pub fn seal_datagram(
    key: &MacKey,
    framing: &DatagramFraming,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> Vec<u8> {
    build(
        key,
        false,
        Some(framing),
        timestamp,
        message_count,
        messages,
    )
}

/// A signed stream-mode frame: `packet-length packet`.
pub fn seal_stream_packet(
    key: &MacKey,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> Vec<u8> {
    build(key, true, None, timestamp, message_count, messages)
}

/// A signed stream datagram: `length` followed by datagram framing and packet.
pub fn seal_stream_datagram(
    key: &MacKey,
    framing: &DatagramFraming,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> Vec<u8> {
    build(key, true, Some(framing), timestamp, message_count, messages)
}

/// Opens a datagram: framing, signature check, header.
pub fn open_datagram<'a>(
    key: &MacKey,
    frame: &'a [u8],
) -> Result<(DatagramFraming, OpenedPacket<'a>), OpenError> {
    open(key, frame, 0, true).map(|(framing, packet)| (framing.unwrap_or(NO_FRAMING), packet))
}

/// Opens a stream-mode frame (length prefix included in `frame`).
pub fn open_stream_packet<'a>(
    key: &MacKey,
    frame: &'a [u8],
) -> Result<OpenedPacket<'a>, OpenError> {
    let start = stream_payload_start(frame)?;
    open(key, frame, start, false).map(|(_, packet)| packet)
}

/// Opens a stream datagram (length prefix included in `frame`).
pub fn open_stream_datagram<'a>(
    key: &MacKey,
    frame: &'a [u8],
) -> Result<(DatagramFraming, OpenedPacket<'a>), OpenError> {
    let start = stream_payload_start(frame)?;
    open(key, frame, start, true).map(|(framing, packet)| (framing.unwrap_or(NO_FRAMING), packet))
}

const NO_FRAMING: DatagramFraming = DatagramFraming {
    sequence: 0,
    ack_last: 0,
    ack_bits: 0,
};

/// Checks the length prefix against the frame and returns where the payload starts.
pub(crate) fn stream_payload_start(frame: &[u8]) -> Result<usize, OpenError> {
    let mut reader = Reader::new(frame);
    let length = reader
        .read_count("frame length", MAX_FRAME_LEN)
        .map_err(OpenError::Malformed)?;
    if reader.remaining() != length {
        return Err(OpenError::Malformed(DecodeError::Invalid(
            "frame length does not match the frame",
        )));
    }
    Ok(reader.position())
}

fn open<'a>(
    key: &MacKey,
    frame: &'a [u8],
    start: usize,
    datagram: bool,
) -> Result<(Option<DatagramFraming>, OpenedPacket<'a>), OpenError> {
    let mut reader = Reader::new(&frame[start..]);
    let framing = if datagram {
        Some(read_framing(&mut reader).map_err(OpenError::Malformed)?)
    } else {
        None
    };
    authenticate(key, frame, start, &mut reader)?;
    let packet = read_body(&mut reader).map_err(OpenError::Framing)?;
    Ok((framing, packet))
}

/// Verifies the signature at `reader`'s position (`reader` reads `frame`
/// from byte `start`) and steps past it. Nothing after the signature is
/// read before this succeeds.
pub(super) fn authenticate(
    key: &MacKey,
    frame: &[u8],
    start: usize,
    reader: &mut Reader<'_>,
) -> Result<(), OpenError> {
    let offset = start + reader.position();
    if reader.remaining() < SIGNATURE_LEN {
        return Err(OpenError::Malformed(DecodeError::Truncated));
    }
    if !key.verify(frame, offset) {
        return Err(OpenError::BadSignature);
    }
    // Authenticated from here on: errors are the peer's framing errors.
    reader
        .read_bytes(SIGNATURE_LEN)
        .map_err(OpenError::Framing)?;
    Ok(())
}

/// Splits a reliable byte stream into frames (`INTEGER length` + that many
/// bytes), each returned whole, length prefix included, for
/// [`open_stream_packet`] / [`open_stream_datagram`].
#[derive(Debug, Default)]
pub struct StreamDeframer {
    buffer: Vec<u8>,
}

impl StreamDeframer {
    /// An empty deframer.
    pub fn new() -> StreamDeframer {
        StreamDeframer::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or an
    /// error if the stream is corrupt (a bad or oversized length prefix);
    /// after an error the stream cannot be resynchronised and must be closed.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        let mut reader = Reader::new(&self.buffer);
        let length = match reader.read_count("frame length", MAX_FRAME_LEN) {
            Ok(length) => length,
            Err(DecodeError::Truncated) => return Ok(None),
            Err(error) => return Err(error),
        };
        let end = reader.position() + length;
        if self.buffer.len() < end {
            return Ok(None);
        }
        let rest = self.buffer.split_off(end);
        Ok(Some(std::mem::replace(&mut self.buffer, rest)))
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::signature::KEY_LEN;

    fn key() -> MacKey {
        MacKey::new([0x42; KEY_LEN])
    }

    fn expected_signature(frame: &[u8], offset: usize) -> Vec<u8> {
        let mut zeroed = frame.to_vec();
        zeroed[offset..offset + 8].fill(0);
        blake3::keyed_hash(&[0x42; KEY_LEN], &zeroed).as_bytes()[..8].to_vec()
    }

    #[test]
    fn datagram_layout_matches_fixture() {
        let framing = DatagramFraming {
            sequence: 0x10,
            ack_last: 0xff,
            ack_bits: u64::MAX,
        };
        // One message: remove-entity 5.
        let frame = seal_datagram(&key(), &framing, 1000, 1, &[0x05, 0x05]);
        // 10 ff | c000 | sig(8) | 1000 = a8 0f | 01 | 05 05
        let signature = expected_signature(&frame, 4);
        let expected = format!("10ffc000{}a80f010505", hex::encode(&signature));
        assert_eq!(hex::encode(&frame), expected);
        let (opened_framing, packet) = open_datagram(&key(), &frame).unwrap();
        assert_eq!(opened_framing, framing);
        assert_eq!(packet.timestamp, 1000);
        assert_eq!(packet.message_count, 1);
        assert_eq!(packet.messages, &[0x05, 0x05]);
    }

    #[test]
    fn stream_layouts_match_fixtures() {
        let frame = seal_stream_packet(&key(), 0, 0, &[]);
        // length 10 | sig(8) | ts 00 | count 00
        assert_eq!(
            hex::encode(&frame),
            format!("0a{}0000", hex::encode(expected_signature(&frame, 1)))
        );
        let packet = open_stream_packet(&key(), &frame).unwrap();
        assert_eq!((packet.timestamp, packet.message_count), (0, 0));

        let framing = DatagramFraming {
            sequence: 1,
            ack_last: 0,
            ack_bits: 1,
        };
        let frame = seal_stream_datagram(&key(), &framing, 5, 0, &[]);
        // length 13 | 01 00 01 | sig(8) | 05 | 00
        let signature = hex::encode(expected_signature(&frame, 4));
        assert_eq!(hex::encode(&frame), format!("0d010001{signature}0500"));
        assert_eq!(open_stream_datagram(&key(), &frame).unwrap().0, framing);
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let framing = DatagramFraming {
            sequence: 3,
            ack_last: 2,
            ack_bits: 0x8000_0000_0000_0001,
        };
        let frame = seal_datagram(&key(), &framing, 123_456, 2, &[0x07, 0x01, 0x05, 0x02]);
        for bit in 0..frame.len() * 8 {
            let mut tampered = frame.clone();
            tampered[bit / 8] ^= 1 << (bit % 8);
            assert!(open_datagram(&key(), &tampered).is_err(), "bit {bit}");
        }
        for len in 0..frame.len() {
            assert!(
                open_datagram(&key(), &frame[..len]).is_err(),
                "truncated to {len}"
            );
        }
    }

    #[test]
    fn errors_are_classified_by_what_is_known() {
        assert_eq!(
            open_datagram(&key(), &[1, 2]),
            Err(OpenError::Malformed(DecodeError::Truncated))
        );
        let frame = seal_datagram(&MacKey::new([1; KEY_LEN]), &NO_FRAMING, 1, 0, &[]);
        assert_eq!(open_datagram(&key(), &frame), Err(OpenError::BadSignature));
        // Signed, but the message count exceeds the remaining bytes.
        let mut frame = seal_datagram(&key(), &NO_FRAMING, 1, 0, &[]);
        let last = frame.len() - 1;
        frame[last] = 5;
        key().write_signature(&mut frame, 3);
        assert!(matches!(
            open_datagram(&key(), &frame),
            Err(OpenError::Framing(_))
        ));
        // Stream length prefix that disagrees with the frame.
        let mut frame = seal_stream_packet(&key(), 0, 0, &[]);
        frame.push(0);
        assert!(matches!(
            open_stream_packet(&key(), &frame),
            Err(OpenError::Malformed(_))
        ));
    }

    #[test]
    fn deframer_reassembles_split_frames() {
        let first = seal_stream_packet(&key(), 1, 0, &[]);
        let second = seal_stream_packet(&key(), 2, 1, &[0x05, 0x01]);
        let mut stream = first.clone();
        stream.extend_from_slice(&second);
        let mut deframer = StreamDeframer::new();
        let mut frames = Vec::new();
        for byte in stream {
            deframer.push(&[byte]);
            while let Some(frame) = deframer.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, vec![first, second]);
        assert_eq!(deframer.buffered(), 0);
        let mut corrupt = StreamDeframer::new();
        corrupt.push(&[0xc0, 0x00]);
        assert!(corrupt.next_frame().is_err());
    }
}
