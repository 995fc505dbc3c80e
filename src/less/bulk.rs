//! Bulk packets: zstd-compressed stream datagrams for large initial
//! introductions (docs/less-wire.md §16.5).
//!
//! On a datagram-mode link whose Hellos both list [`BULK_FEATURE`], every
//! stream datagram carries a form byte after its length:
//!
//! ```text
//! stream-datagram = length(INTEGER) form(BYTE) sequence-number ack-last
//!                   ack-previous-bitmask signature payload
//! form 00: payload = timestamp(INTEGER) message-count(INTEGER) message*
//! form 01: payload = one zstd frame (RFC 8878) declaring its content size,
//!          whose content is timestamp(INTEGER) message-count(INTEGER) message*
//! ```
//!
//! The signature covers the frame as sent (compressed bytes included) and is
//! verified before a single byte reaches the decompressor. Decompression is
//! bounded by [`MAX_BULK_BODY_LEN`]: the frame must declare its content size,
//! the size is checked against the limit before anything is allocated, and
//! the decompressor writes into a buffer of exactly that size. This module
//! owns the bulk frame; it does not decide when to send one.

use super::codec::{write_count, DecodeError, Reader};
use super::limits::MAX_FRAME_LEN;
use super::packet::{
    authenticate, read_body, read_framing, stream_payload_start, write_body, write_framing,
    DatagramFraming, OpenError, OpenedPacket,
};
use super::signature::{MacKey, SIGNATURE_LEN};

/// The Hello feature offering bulk packets (docs/peer-link.md §5.2).
pub const BULK_FEATURE: &str = "bulk:zstd/1";

/// Largest decompressed payload (timestamp, count, messages) of a bulk
/// packet: the stream frame limit of docs/less-wire.md §13, so a bulk
/// packet never carries more than a plain stream datagram could, and a
/// receiver never allocates more for one.
pub const MAX_BULK_BODY_LEN: usize = MAX_FRAME_LEN;

/// zstd level used by senders: zstd's default, which compresses a 256 KiB
/// body in about a millisecond while getting most of the ratio of higher levels.
pub const COMPRESSION_LEVEL: i32 = 3;

/// The form byte of a stream datagram on a link that agreed [`BULK_FEATURE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `00`: the payload is a plain packet body.
    Plain = 0,
    /// `01`: the payload is a zstd frame holding the packet body.
    Zstd = 1,
}

/// A sealed stream datagram with a form byte, and what compression did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedBulk {
    pub bytes: Vec<u8>,
    pub form: Form,
    /// Bytes of the uncompressed body (timestamp, count, messages).
    pub body_len: usize,
    /// Bytes of the payload as sent (equal to `body_len` for [`Form::Plain`]).
    pub payload_len: usize,
}

fn seal_form(key: &MacKey, form: Form, framing: &DatagramFraming, payload: &[u8]) -> Vec<u8> {
    let mut inner = Vec::with_capacity(1 + 12 + SIGNATURE_LEN + payload.len());
    inner.push(form as u8);
    write_framing(&mut inner, framing);
    let offset = inner.len();
    inner.extend_from_slice(&[0u8; SIGNATURE_LEN]);
    inner.extend_from_slice(payload);
    let mut frame = Vec::with_capacity(10 + inner.len());
    write_count(&mut frame, inner.len());
    let offset = offset + frame.len();
    frame.extend_from_slice(&inner);
    key.write_signature(&mut frame, offset);
    frame
}

/// A form-`00` stream datagram: what a link that agreed bulk packets sends
/// instead of the plain stream datagram of docs/less-wire.md §6.
pub fn seal_plain_formed(
    key: &MacKey,
    framing: &DatagramFraming,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> Vec<u8> {
    let mut body = Vec::with_capacity(20 + messages.len());
    write_body(&mut body, timestamp, message_count, messages);
    seal_form(key, Form::Plain, framing, &body)
}

/// A bulk packet: the body compressed (form `01`), or plain (form `00`)
/// when compression does not make it smaller.
pub fn seal_bulk(
    key: &MacKey,
    framing: &DatagramFraming,
    timestamp: i64,
    message_count: usize,
    messages: &[u8],
) -> SealedBulk {
    let mut body = Vec::with_capacity(20 + messages.len());
    write_body(&mut body, timestamp, message_count, messages);
    // zstd's bulk compressor writes the content size into the frame header,
    // which receivers require. It only fails on allocation failure; the
    // plain form is always correct.
    match zstd::bulk::compress(&body, COMPRESSION_LEVEL) {
        Ok(compressed) if compressed.len() < body.len() => SealedBulk {
            bytes: seal_form(key, Form::Zstd, framing, &compressed),
            form: Form::Zstd,
            body_len: body.len(),
            payload_len: compressed.len(),
        },
        _ => SealedBulk {
            bytes: seal_form(key, Form::Plain, framing, &body),
            form: Form::Plain,
            body_len: body.len(),
            payload_len: body.len(),
        },
    }
}

/// The decompressed body of an opened bulk packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BulkBody {
    body: Vec<u8>,
    timestamp: i64,
    message_count: usize,
    messages_start: usize,
    /// Bytes of the compressed payload as received.
    pub compressed_len: usize,
}

impl BulkBody {
    /// The packet inside, as [`super::packet::open_stream_datagram`] would
    /// have returned it.
    pub fn packet(&self) -> OpenedPacket<'_> {
        OpenedPacket {
            timestamp: self.timestamp,
            message_count: self.message_count,
            messages: &self.body[self.messages_start..],
        }
    }

    /// Bytes of the decompressed body.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }
}

/// An opened stream datagram of a link that agreed bulk packets.
#[derive(Debug, PartialEq, Eq)]
pub enum FormedPacket<'a> {
    Plain(OpenedPacket<'a>),
    Bulk(BulkBody),
}

/// Opens a stream datagram with a form byte (length prefix included in
/// `frame`): length, form and framing, then the signature, and only then the
/// payload, decompressing a form-`01` payload within [`MAX_BULK_BODY_LEN`].
pub fn open_formed_stream_datagram<'a>(
    key: &MacKey,
    frame: &'a [u8],
) -> Result<(DatagramFraming, FormedPacket<'a>), OpenError> {
    let start = stream_payload_start(frame)?;
    let mut reader = Reader::new(&frame[start..]);
    let prefix = |reader: &mut Reader<'_>| -> Result<(Form, DatagramFraming), DecodeError> {
        let form = match reader.read_u8()? {
            0 => Form::Plain,
            1 => Form::Zstd,
            _ => return Err(DecodeError::Invalid("unknown stream datagram form")),
        };
        Ok((form, read_framing(reader)?))
    };
    let (form, framing) = prefix(&mut reader).map_err(OpenError::Malformed)?;
    authenticate(key, frame, start, &mut reader)?;
    match form {
        Form::Plain => {
            let packet = read_body(&mut reader).map_err(OpenError::Framing)?;
            Ok((framing, FormedPacket::Plain(packet)))
        }
        Form::Zstd => {
            let compressed = reader.rest();
            let body =
                decompress_bounded(compressed, MAX_BULK_BODY_LEN).map_err(OpenError::Framing)?;
            let mut body_reader = Reader::new(&body);
            let packet = read_body(&mut body_reader).map_err(OpenError::Framing)?;
            let (timestamp, message_count) = (packet.timestamp, packet.message_count);
            let messages_start = body_reader.position();
            Ok((
                framing,
                FormedPacket::Bulk(BulkBody {
                    body,
                    timestamp,
                    message_count,
                    messages_start,
                    compressed_len: compressed.len(),
                }),
            ))
        }
    }
}

/// Decompresses one zstd frame of at most `limit` bytes. The frame must
/// declare its content size; it is checked against `limit` before anything
/// is allocated, and the decompressor writes into a buffer of exactly that
/// size (a frame producing more, or a second frame, fails).
pub fn decompress_bounded(data: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let declared = match zstd::zstd_safe::get_frame_content_size(data) {
        Ok(Some(size)) => size,
        Ok(None) => {
            return Err(DecodeError::Invalid(
                "bulk packet zstd frame does not declare its content size",
            ))
        }
        Err(_) => return Err(DecodeError::Invalid("bulk packet is not a zstd frame")),
    };
    let size = usize::try_from(declared)
        .ok()
        .filter(|&size| size <= limit)
        .ok_or(DecodeError::LimitExceeded {
            what: "decompressed bulk body",
            value: declared,
            limit,
        })?;
    let mut out = Vec::with_capacity(size);
    let mut decompressor = zstd::bulk::Decompressor::new()
        .map_err(|_| DecodeError::Invalid("zstd decompressor unavailable"))?;
    decompressor
        .decompress_to_buffer(data, &mut out)
        .map_err(|_| DecodeError::Invalid("corrupt zstd data in a bulk packet"))?;
    if out.len() != size {
        return Err(DecodeError::Invalid(
            "bulk packet content size does not match its zstd frame",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::signature::KEY_LEN;

    fn key() -> MacKey {
        MacKey::new([0x42; KEY_LEN])
    }

    fn expected_signature(frame: &[u8], offset: usize) -> String {
        let mut zeroed = frame.to_vec();
        zeroed[offset..offset + SIGNATURE_LEN].fill(0);
        hex::encode(&blake3::keyed_hash(&[0x42; KEY_LEN], &zeroed).as_bytes()[..SIGNATURE_LEN])
    }

    const FRAMING: DatagramFraming = DatagramFraming {
        sequence: 1,
        ack_last: 0,
        ack_bits: 1,
    };

    /// A body that compresses well: 200 remove-entity messages.
    fn removals() -> (usize, Vec<u8>) {
        let messages: Vec<u8> = (0..200u8).flat_map(|_| [0x05, 0x07]).collect();
        (200, messages)
    }

    fn payload_offset(frame: &[u8]) -> usize {
        // length INTEGER, form, sequence, ack-last, ack-bitmask 01, signature.
        stream_payload_start(frame).unwrap() + 1 + 3 + SIGNATURE_LEN
    }

    #[test]
    fn bulk_frame_round_trips_compressed() {
        let (count, messages) = removals();
        let sealed = seal_bulk(&key(), &FRAMING, 77, count, &messages);
        assert_eq!(sealed.form, Form::Zstd);
        let mut body = Vec::new();
        write_body(&mut body, 77, count, &messages);
        assert_eq!(sealed.body_len, body.len());
        assert!(sealed.payload_len * 10 < sealed.body_len, "{sealed:?}");
        let (framing, opened) = open_formed_stream_datagram(&key(), &sealed.bytes).unwrap();
        assert_eq!(framing, FRAMING);
        let FormedPacket::Bulk(body) = opened else {
            panic!("expected a bulk packet");
        };
        assert_eq!(body.compressed_len, sealed.payload_len);
        assert_eq!(body.body_len(), sealed.body_len);
        let packet = body.packet();
        assert_eq!((packet.timestamp, packet.message_count), (77, count));
        assert_eq!(packet.messages, &messages[..]);
    }

    #[test]
    fn incompressible_body_goes_plain_with_form_zero() {
        // remove-entity 5: four bytes of body do not shrink.
        let sealed = seal_bulk(&key(), &FRAMING, 5, 1, &[0x05, 0x05]);
        assert_eq!(sealed.form, Form::Plain);
        // length 25 | form 00 | 01 00 01 | sig(8) | ts 05 | count 01 | 05 05
        let signature = expected_signature(&sealed.bytes, 5);
        assert_eq!(
            hex::encode(&sealed.bytes),
            format!("1000010001{signature}05010505")
        );
        assert_eq!(
            sealed.bytes,
            seal_plain_formed(&key(), &FRAMING, 5, 1, &[5, 5])
        );
        let (_, opened) = open_formed_stream_datagram(&key(), &sealed.bytes).unwrap();
        let FormedPacket::Plain(packet) = opened else {
            panic!("expected a plain packet");
        };
        assert_eq!((packet.timestamp, packet.messages), (5, &[5u8, 5][..]));
    }

    #[test]
    fn hand_written_bulk_frame_matches_fixture() {
        // RFC 8878 frame: magic, descriptor 20 (single segment, 1-byte
        // content size), content size 4, one raw last block of 4 bytes
        // (header (4 << 3) | 1 = 21 00 00), content ts 05, count 01,
        // remove-entity 5.
        let zstd_frame = hex::decode("28b52ffd200421000005010505").unwrap();
        let frame = seal_form(&key(), Form::Zstd, &FRAMING, &zstd_frame);
        let signature = expected_signature(&frame, 5);
        assert_eq!(
            hex::encode(&frame),
            format!("1901010001{signature}28b52ffd200421000005010505")
        );
        // docs/less-wire.md §16.5 shows this frame with its signature.
        assert_eq!(signature, "a1904a460e0b4359");
        let (_, opened) = open_formed_stream_datagram(&key(), &frame).unwrap();
        let FormedPacket::Bulk(body) = opened else {
            panic!("expected a bulk packet");
        };
        let packet = body.packet();
        assert_eq!(
            (packet.timestamp, packet.message_count, packet.messages),
            (5, 1, &[5u8, 5][..])
        );
        // The frame libzstd writes for the same body is stable too.
        let sealed = seal_bulk(&key(), &FRAMING, 77, 200, &removals().1);
        let payload = &sealed.bytes[payload_offset(&sealed.bytes)..];
        assert_eq!(&payload[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(payload).ok(),
            Some(Some(sealed.body_len as u64))
        );
    }

    #[test]
    fn tampered_compressed_byte_fails_the_signature() {
        let (count, messages) = removals();
        let sealed = seal_bulk(&key(), &FRAMING, 77, count, &messages);
        let start = payload_offset(&sealed.bytes);
        for index in start..sealed.bytes.len() {
            let mut tampered = sealed.bytes.clone();
            tampered[index] ^= 0x10;
            assert_eq!(
                open_formed_stream_datagram(&key(), &tampered),
                Err(OpenError::BadSignature),
                "byte {index}"
            );
        }
        // The form byte is signed too, and an unknown form is malformed.
        let mut tampered = sealed.bytes.clone();
        tampered[1] = 0;
        assert_eq!(
            open_formed_stream_datagram(&key(), &tampered),
            Err(OpenError::BadSignature)
        );
        tampered[1] = 2;
        assert!(matches!(
            open_formed_stream_datagram(&key(), &tampered),
            Err(OpenError::Malformed(_))
        ));
    }

    #[test]
    fn oversized_decompressed_body_is_a_framing_error() {
        // 1 MiB of zeros compresses to a few hundred bytes.
        let messages = vec![0u8; MAX_BULK_BODY_LEN];
        let sealed = seal_bulk(&key(), &FRAMING, 1, 1, &messages);
        assert_eq!(sealed.form, Form::Zstd);
        assert!(sealed.bytes.len() < 1024);
        assert_eq!(
            open_formed_stream_datagram(&key(), &sealed.bytes),
            Err(OpenError::Framing(DecodeError::LimitExceeded {
                what: "decompressed bulk body",
                value: MAX_BULK_BODY_LEN as u64 + 2,
                limit: MAX_BULK_BODY_LEN,
            }))
        );
        // A declared size of 2^40 is refused before anything is allocated.
        let huge = hex::decode("28b52ffde00000000000010000010000").unwrap();
        assert!(matches!(
            decompress_bounded(&huge, MAX_BULK_BODY_LEN),
            Err(DecodeError::LimitExceeded { value, .. }) if value == 1 << 40
        ));
    }

    #[test]
    fn corrupt_zstd_in_a_signed_frame_is_a_framing_error() {
        let (count, messages) = removals();
        let mut body = Vec::new();
        write_body(&mut body, 77, count, &messages);
        let mut compressed = zstd::bulk::compress(&body, COMPRESSION_LEVEL).unwrap();
        let middle = compressed.len() / 2;
        compressed[middle] ^= 0xff;
        compressed.truncate(compressed.len() - 1);
        let frame = seal_form(&key(), Form::Zstd, &FRAMING, &compressed);
        assert!(matches!(
            open_formed_stream_datagram(&key(), &frame),
            Err(OpenError::Framing(DecodeError::Invalid(_)))
        ));
        for payload in [
            // Not a zstd frame at all.
            hex::decode("05010505").unwrap(),
            // No content size: descriptor 00, window descriptor 00, raw block.
            hex::decode("28b52ffd000021000005010505").unwrap(),
            // Content size 4 but the block holds 5 bytes.
            hex::decode("28b52ffd20042900000501050505").unwrap(),
            // A second frame after the first.
            hex::decode("28b52ffd20042100000501050528b52ffd200421000005010505").unwrap(),
        ] {
            let frame = seal_form(&key(), Form::Zstd, &FRAMING, &payload);
            assert!(
                matches!(
                    open_formed_stream_datagram(&key(), &frame),
                    Err(OpenError::Framing(_))
                ),
                "{}",
                hex::encode(&payload)
            );
        }
    }
}
