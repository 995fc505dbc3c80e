//! JSON form of whole LESS frames (docs/less-wire.md §5 and §6) for
//! the inspector: framing fields, the signature and its check, the packet
//! header, each message, and the bytes that could not be shown.
//!
//! Unlike `less::packet`, which refuses to read past a bad signature, this
//! view decodes every frame and reports the check (`valid`, `invalid`, or
//! `unchecked` without a key): an operator reads hostile or mis-keyed
//! packets too. Decoding is total: header failures are a [`FrameError`]
//! with the byte offset; failures inside the messages keep what was read and
//! put the rest in [`Undecoded`]. This module owns the frame view, not the
//! session's rules.

use serde::{Deserialize, Serialize};

use super::message::{decode_message, encode_message, MessageJson, Schemas, SpaceKnowledge};
use super::message::{Stop, Trail};
use crate::less::bulk::{decompress_bounded, COMPRESSION_LEVEL, MAX_BULK_BODY_LEN};
use crate::less::codec::{write_count, write_integer, write_u64, DecodeError, Reader};
use crate::less::limits::{MAX_FRAME_LEN, MAX_MESSAGES};
use crate::less::signature::{MacKey, SIGNATURE_LEN};

/// Which of the three frame shapes the bytes are (section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    /// A UDP datagram: sequence, ack-last, ack bitmask, packet.
    Datagram,
    /// Stream mode: packet-length, packet.
    StreamPacket,
    /// A datagram-mode packet sent on the stream: length, datagram.
    StreamDatagram,
}

/// The form byte of a stream datagram on a link that agreed bulk packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// `00`: the body as in any packet.
    Plain = 0,
    /// `01`: the body is one zstd frame.
    Zstd = 1,
}

/// The outcome of checking the signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureCheck {
    /// One of the given keys produces the signature.
    Valid,
    /// No given key produces it.
    Invalid,
    /// No key was given.
    Unchecked,
}

/// One frame as the inspector shows it. Fields marked informative are
/// recomputed when encoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PacketJson {
    pub framing: Framing,
    /// Stream frames: the length prefix (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
    /// Stream datagrams of a link that agreed bulk packets: the form byte
    /// (docs/less-wire.md §16.5). For `zstd` the body is shown decompressed
    /// and message offsets count from the start of that body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Form>,
    /// Datagram framing: this packet's sequence number modulo 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u8>,
    /// Datagram framing: the highest sequence received from the peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_last: Option<u8>,
    /// Datagram framing: bit i acknowledges `ack_last - 1 - i`, as `0x` and
    /// 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_bitmask: Option<String>,
    /// The wire sequence numbers the ack fields acknowledge (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<Vec<u8>>,
    /// The signature check (informative).
    pub signature: SignatureCheck,
    /// The 8 signature bytes as hex; used when encoding without a key.
    pub signature_bytes: String,
    /// Packet timestamp, in the sender's quanta.
    pub timestamp: i64,
    /// The message count field as sent.
    pub message_count: usize,
    pub messages: Vec<MessageJson>,
    /// The bytes from the first message that could not be shown, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecoded: Option<Undecoded>,
}

/// The rest of a packet from the first message that could not be shown.
/// Encoding appends `bytes` unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Undecoded {
    /// Where these bytes start in the frame (the start of the message).
    pub offset: usize,
    /// The bytes, as hex.
    pub bytes: String,
    /// Why they could not be shown.
    pub error: String,
    /// Where in the frame decoding stopped.
    pub error_offset: usize,
    /// True when the bytes may be fine but their types depend on earlier
    /// packets (give `--type`, `--entity` or `--schema`); false when they
    /// break the wire format.
    pub needs_context: bool,
    /// The message being read, if its code was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The property being read (`component/path.property`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
}

/// A frame whose header cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {error}")]
pub struct FrameError {
    pub offset: usize,
    pub error: DecodeError,
}

/// Decodes one frame. `keys` are tried in turn for the signature; `sender`
/// learns what the frame introduces, `receiver` types tweaks.
pub fn decode_frame(
    frame: &[u8],
    framing: Framing,
    keys: &[MacKey],
    schemas: Schemas<'_>,
    sender: &mut SpaceKnowledge,
    receiver: &SpaceKnowledge,
) -> Result<PacketJson, FrameError> {
    let mut reader = Reader::new(frame);
    let fail = |reader: &Reader<'_>, error| FrameError {
        offset: reader.position(),
        error,
    };
    let mut packet = PacketJson {
        framing,
        length: None,
        form: None,
        sequence: None,
        ack_last: None,
        ack_bitmask: None,
        acked: None,
        signature: SignatureCheck::Unchecked,
        signature_bytes: String::new(),
        timestamp: 0,
        message_count: 0,
        messages: Vec::new(),
        undecoded: None,
    };
    if framing != Framing::Datagram {
        let length = reader
            .read_count("frame length", MAX_FRAME_LEN)
            .map_err(|e| fail(&reader, e))?;
        if reader.remaining() != length {
            let error = DecodeError::Invalid("frame length does not match the frame");
            return Err(fail(&reader, error));
        }
        packet.length = Some(length);
    }
    let bulk = framing == Framing::StreamDatagram && schemas.link.is_some_and(|link| link.bulk);
    if bulk {
        packet.form = Some(match reader.read_u8().map_err(|e| fail(&reader, e))? {
            0 => Form::Plain,
            1 => Form::Zstd,
            _ => {
                let error = DecodeError::Invalid("unknown stream datagram form");
                return Err(FrameError {
                    offset: reader.position() - 1,
                    error,
                });
            }
        });
    }
    if framing != Framing::StreamPacket {
        let sequence = reader.read_u8().map_err(|e| fail(&reader, e))?;
        let ack_last = reader.read_u8().map_err(|e| fail(&reader, e))?;
        let bits = reader.read_u64().map_err(|e| fail(&reader, e))?;
        packet.sequence = Some(sequence);
        packet.ack_last = Some(ack_last);
        packet.ack_bitmask = Some(format!("{bits:#018x}"));
        packet.acked = Some(acknowledged(ack_last, bits));
    }
    let signature_offset = reader.position();
    let signature = reader
        .read_bytes(SIGNATURE_LEN)
        .map_err(|e| fail(&reader, e))?;
    packet.signature_bytes = hex::encode(signature);
    packet.signature = match keys {
        [] => SignatureCheck::Unchecked,
        keys if keys.iter().any(|k| k.verify(frame, signature_offset)) => SignatureCheck::Valid,
        _ => SignatureCheck::Invalid,
    };
    // The body: the rest of the frame, or what its zstd frame holds.
    let (body, base) = if packet.form == Some(Form::Zstd) {
        let body =
            decompress_bounded(reader.rest(), MAX_BULK_BODY_LEN).map_err(|e| fail(&reader, e))?;
        (std::borrow::Cow::Owned(body), 0)
    } else {
        (std::borrow::Cow::Borrowed(reader.rest()), reader.position())
    };
    decode_body(&body, base, &mut packet, schemas, sender, receiver)?;
    Ok(packet)
}

/// Reads timestamp, message count and messages from `body`, which starts at
/// offset `base` of what the offsets count.
fn decode_body(
    body: &[u8],
    base: usize,
    packet: &mut PacketJson,
    schemas: Schemas<'_>,
    sender: &mut SpaceKnowledge,
    receiver: &SpaceKnowledge,
) -> Result<(), FrameError> {
    let mut reader = Reader::new(body);
    let fail = |reader: &Reader<'_>, error| FrameError {
        offset: base + reader.position(),
        error,
    };
    packet.timestamp = reader.read_integer().map_err(|e| fail(&reader, e))?;
    // Every message takes at least one byte (section 6, step 4).
    let limit = MAX_MESSAGES.min(reader.remaining());
    packet.message_count = reader
        .read_count("message count", limit)
        .map_err(|e| fail(&reader, e))?;
    for _ in 0..packet.message_count {
        let start = reader.position();
        let mut trail = Trail::default();
        match decode_message(&mut reader, schemas, sender, receiver, &mut trail) {
            Ok(body) => packet.messages.push(MessageJson {
                offset: base + start,
                body,
            }),
            Err(stop) => {
                let (error, needs_context) = match stop {
                    Stop::Malformed(error) => (error.to_string(), false),
                    Stop::NeedsContext(what) => (what, true),
                };
                packet.undecoded = Some(Undecoded {
                    offset: base + start,
                    bytes: hex::encode(&body[start..]),
                    error,
                    error_offset: base + reader.position(),
                    needs_context,
                    kind: trail.kind.map(str::to_owned),
                    property: trail.property,
                });
                return Ok(());
            }
        }
    }
    if !reader.is_empty() {
        let start = reader.position();
        packet.undecoded = Some(Undecoded {
            offset: base + start,
            bytes: hex::encode(reader.rest()),
            error: DecodeError::TrailingBytes(reader.remaining()).to_string(),
            error_offset: base + start,
            needs_context: false,
            kind: None,
            property: None,
        });
    }
    Ok(())
}

/// Where the signature of a frame starts, reading only its framing (for
/// finding which of several keys signed it), or `None` if the frame is too
/// short to hold one. `formed`: a stream datagram with a form byte.
pub fn signature_offset(frame: &[u8], framing: Framing, formed: bool) -> Option<usize> {
    let mut reader = Reader::new(frame);
    if framing != Framing::Datagram {
        reader.read_count("frame length", MAX_FRAME_LEN).ok()?;
    }
    if framing == Framing::StreamDatagram && formed {
        reader.read_u8().ok()?;
    }
    if framing != Framing::StreamPacket {
        reader.read_u8().ok()?;
        reader.read_u8().ok()?;
        reader.read_u64().ok()?;
    }
    (reader.remaining() >= SIGNATURE_LEN).then(|| reader.position())
}

/// The wire sequences acknowledged by `ack_last` and its bitmask (section 7).
fn acknowledged(ack_last: u8, bits: u64) -> Vec<u8> {
    let mut acked = vec![ack_last];
    for i in 0..64u8 {
        if bits & (1 << i) != 0 {
            acked.push(ack_last.wrapping_sub(1).wrapping_sub(i));
        }
    }
    acked
}

/// Encodes the JSON form of a frame. With a key the signature is computed;
/// without one `signature_bytes` is written as given.
pub fn encode_frame(packet: &PacketJson, key: Option<&MacKey>) -> Result<Vec<u8>, String> {
    let mut inner = Vec::new();
    if let Some(form) = packet.form {
        if packet.framing != Framing::StreamDatagram {
            return Err("form is only for stream-datagram framing".into());
        }
        inner.push(form as u8);
    }
    if packet.framing != Framing::StreamPacket {
        let missing = |field| format!("{field} is required for {:?} framing", packet.framing);
        inner.push(packet.sequence.ok_or_else(|| missing("sequence"))?);
        inner.push(packet.ack_last.ok_or_else(|| missing("ack_last"))?);
        let bitmask = packet
            .ack_bitmask
            .as_deref()
            .ok_or_else(|| missing("ack_bitmask"))?;
        let digits = bitmask.strip_prefix("0x").unwrap_or(bitmask);
        let bits = u64::from_str_radix(digits, 16)
            .map_err(|_| format!("ack_bitmask {bitmask:?} is not 0x and hex digits"))?;
        write_u64(&mut inner, bits);
    }
    let mut signature_offset = inner.len();
    let given = hex::decode(&packet.signature_bytes)
        .map_err(|e| format!("signature_bytes: {e}"))
        .and_then(|bytes| {
            <[u8; SIGNATURE_LEN]>::try_from(bytes.as_slice())
                .map_err(|_| format!("signature_bytes must be {SIGNATURE_LEN} bytes"))
        });
    let signature = match (key, given) {
        (Some(_), _) => [0u8; SIGNATURE_LEN],
        (None, given) => given?,
    };
    inner.extend_from_slice(&signature);
    let mut body = Vec::new();
    write_integer(&mut body, packet.timestamp);
    write_count(&mut body, packet.message_count);
    for message in &packet.messages {
        encode_message(&mut body, &message.body)?;
    }
    if let Some(undecoded) = &packet.undecoded {
        let bytes = hex::decode(&undecoded.bytes).map_err(|e| format!("undecoded bytes: {e}"))?;
        body.extend_from_slice(&bytes);
    }
    if packet.form == Some(Form::Zstd) {
        // The node's own compression (src/less/bulk.rs), so a decoded bulk
        // packet encodes back to its bytes.
        body = zstd::bulk::compress(&body, COMPRESSION_LEVEL)
            .map_err(|e| format!("zstd compression failed: {e}"))?;
    }
    inner.extend_from_slice(&body);
    let mut frame = if packet.framing == Framing::Datagram {
        inner
    } else {
        if inner.len() > MAX_FRAME_LEN {
            return Err(format!("frame exceeds {MAX_FRAME_LEN} bytes"));
        }
        let mut frame = Vec::with_capacity(inner.len() + 4);
        write_count(&mut frame, inner.len());
        signature_offset += frame.len();
        frame.extend_from_slice(&inner);
        frame
    };
    if let Some(key) = key {
        key.write_signature(&mut frame, signature_offset);
    }
    Ok(frame)
}
