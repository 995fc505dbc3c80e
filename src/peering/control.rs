//! Control-stream messages and their envelope (docs/peer-link.md §5).
//!
//! Every control message starts with a versioned header: an 8-byte
//! magic, a u16 protocol version and a flags byte; then a kind byte and a
//! u32 body length. The envelope and the Refuse body are frozen across
//! versions so that a node can always read why another refused it. This
//! module owns the bytes; the handshake state machine decides what to send.

use super::bytes::{put_long_str, truncate_utf8, Cursor, Malformed};
use super::hello::Hello;
use super::reason::{Reason, ReasonCode};

/// The peer-link magic, "LESSPEER" in ASCII.
pub const MAGIC: [u8; 8] = *b"LESSPEER";
/// The peer-link protocol version this node speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// Envelope size: magic 8, version 2, flags 1, kind 1, body length 4.
pub const ENVELOPE_LEN: usize = 16;
/// Largest body. The largest version-1 Hello body is 3 225 bytes (a 1 KiB
/// schema URI and 32 features of 64 bytes); 16 KiB leaves room for later
/// versions without letting a peer make the receiver buffer much.
pub const MAX_BODY_LEN: usize = 16 * 1024;
/// Longest reason text in a Refuse or Goodbye; a sentence, not a log.
pub const MAX_REASON_TEXT: usize = 1024;
/// Flags bit 0: the body is compressed (docs/peer-link.md §5.1). Version 1 defines no
/// compression, so it is never set; the other bits are reserved.
pub const FLAG_COMPRESSED: u8 = 0x01;

/// Message kinds.
pub mod kind {
    pub const HELLO: u8 = 0x01;
    pub const READY: u8 = 0x02;
    pub const REFUSE: u8 = 0x03;
    pub const GOODBYE: u8 = 0x04;
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlMessage {
    /// The sender's declaration.
    Hello(Hello),
    /// The sender accepts the peer's Hello and is ready for LESS packets.
    Ready,
    /// The sender refuses the link; it closes the connection next.
    Refuse(Reason),
    /// The sender ends an established link; it closes the connection next.
    Goodbye(Reason),
}

impl ControlMessage {
    /// The full message with its envelope, at this node's version.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let kind = match self {
            ControlMessage::Hello(hello) => {
                hello.encode(&mut body);
                kind::HELLO
            }
            ControlMessage::Ready => kind::READY,
            ControlMessage::Refuse(reason) => {
                encode_reason(reason, &mut body);
                kind::REFUSE
            }
            ControlMessage::Goodbye(reason) => {
                encode_reason(reason, &mut body);
                kind::GOODBYE
            }
        };
        let mut out = Vec::with_capacity(ENVELOPE_LEN + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        out.push(0); // flags: no compression in version 1
        out.push(kind);
        // Bodies this node builds are bounded far below u32::MAX.
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

fn encode_reason(reason: &Reason, out: &mut Vec<u8>) {
    out.extend_from_slice(&reason.code.0.to_le_bytes());
    put_long_str(out, truncate_utf8(&reason.text, MAX_REASON_TEXT));
}

fn decode_reason(body: &[u8]) -> Result<Reason, Malformed> {
    let mut cursor = Cursor::new(body);
    let code = ReasonCode(cursor.u16("reason code")?);
    let text = cursor.long_str(MAX_REASON_TEXT, "reason text")?;
    // Later versions may append fields to Refuse; version 1 reads the frozen
    // prefix and ignores the rest (section 5.4), unlike every other body.
    Ok(Reason { code, text })
}

/// A decoded envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub version: u16,
    pub flags: u8,
    pub kind: u8,
    pub body_len: usize,
}

/// Why the control stream cannot be read; each maps to the reason code the
/// receiver sends in its Refuse or Goodbye.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("not a lessgate peer link (magic {0})")]
    BadMagic(String),
    #[error("peer speaks peer-link version {peer}, this node speaks {PROTOCOL_VERSION}")]
    VersionMismatch { peer: u16 },
    #[error("unsupported envelope flags 0x{0:02x}")]
    UnsupportedFlags(u8),
    #[error("control message body of {0} bytes exceeds {MAX_BODY_LEN}")]
    TooLong(usize),
    #[error("unknown control message kind 0x{0:02x}")]
    UnknownKind(u8),
    #[error(transparent)]
    Malformed(#[from] Malformed),
}

impl ControlError {
    /// The reason code a receiver sends back for this error.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            ControlError::BadMagic(_) => ReasonCode::BAD_MAGIC,
            ControlError::VersionMismatch { .. } => ReasonCode::VERSION_MISMATCH,
            ControlError::UnsupportedFlags(_) => ReasonCode::UNSUPPORTED_FLAGS,
            ControlError::TooLong(_)
            | ControlError::UnknownKind(_)
            | ControlError::Malformed(_) => ReasonCode::MALFORMED,
        }
    }
}

/// Decodes one message from its envelope and body. A Refuse is read at any
/// version (its layout is frozen); any other kind needs this node's version.
pub fn decode_message(envelope: &Envelope, body: &[u8]) -> Result<ControlMessage, ControlError> {
    if envelope.kind == kind::REFUSE {
        return Ok(ControlMessage::Refuse(decode_reason(body)?));
    }
    if envelope.version != PROTOCOL_VERSION {
        return Err(ControlError::VersionMismatch {
            peer: envelope.version,
        });
    }
    if envelope.flags != 0 {
        return Err(ControlError::UnsupportedFlags(envelope.flags));
    }
    match envelope.kind {
        kind::HELLO => Ok(ControlMessage::Hello(Hello::decode(body)?)),
        kind::READY => {
            Cursor::new(body).finish("ready")?;
            Ok(ControlMessage::Ready)
        }
        kind::GOODBYE => Ok(ControlMessage::Goodbye(decode_reason(body)?)),
        other => Err(ControlError::UnknownKind(other)),
    }
}

/// Reassembles control messages from stream chunks. Holds at most one
/// envelope plus [`MAX_BODY_LEN`] bytes beyond what the caller pushes at once.
#[derive(Debug, Default)]
pub struct ControlBuffer {
    buffer: Vec<u8>,
}

impl ControlBuffer {
    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Takes the next complete message, if one is buffered. The magic is
    /// checked as soon as its first bytes arrive, so a stranger speaking
    /// another protocol is refused without waiting for more input.
    pub fn next_message(&mut self) -> Result<Option<(Envelope, ControlMessage)>, ControlError> {
        let seen = self.buffer.len().min(MAGIC.len());
        if self.buffer[..seen] != MAGIC[..seen] {
            return Err(ControlError::BadMagic(hex::encode(&self.buffer[..seen])));
        }
        if self.buffer.len() < ENVELOPE_LEN {
            return Ok(None);
        }
        let mut cursor = Cursor::new(&self.buffer[MAGIC.len()..ENVELOPE_LEN]);
        let version = cursor.u16("envelope version")?;
        let flags = cursor.u8("envelope flags")?;
        let kind = cursor.u8("envelope kind")?;
        let body_len = cursor.u32("envelope length")? as usize;
        if body_len > MAX_BODY_LEN {
            return Err(ControlError::TooLong(body_len));
        }
        if self.buffer.len() < ENVELOPE_LEN + body_len {
            return Ok(None);
        }
        let envelope = Envelope {
            version,
            flags,
            kind,
            body_len,
        };
        let frame: Vec<u8> = self.buffer.drain(..ENVELOPE_LEN + body_len).collect();
        let message = decode_message(&envelope, &frame[ENVELOPE_LEN..])?;
        Ok(Some((envelope, message)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peering::hello::tests::{example, EXAMPLE_HEX};

    fn decode_all(bytes: &[u8]) -> Result<Option<(Envelope, ControlMessage)>, ControlError> {
        let mut buffer = ControlBuffer::default();
        buffer.push(bytes);
        buffer.next_message()
    }

    #[test]
    fn ready_fixture() {
        let bytes = ControlMessage::Ready.to_bytes();
        assert_eq!(hex::encode(&bytes), "4c455353504545520100000200000000");
        let (envelope, message) = decode_all(&bytes).unwrap().unwrap();
        assert_eq!(envelope.version, 1);
        assert_eq!(message, ControlMessage::Ready);
    }

    #[test]
    fn hello_fixture_has_the_envelope_before_the_body() {
        let bytes = ControlMessage::Hello(example()).to_bytes();
        let body_len = EXAMPLE_HEX.len() / 2;
        let expected = format!(
            "4c4553535045455201000001{}{EXAMPLE_HEX}",
            hex::encode((body_len as u32).to_le_bytes())
        );
        assert_eq!(hex::encode(&bytes), expected);
        let (_, message) = decode_all(&bytes).unwrap().unwrap();
        assert_eq!(message, ControlMessage::Hello(example()));
    }

    #[test]
    fn refuse_and_goodbye_fixtures() {
        let refuse = ControlMessage::Refuse(Reason::new(ReasonCode::VERSION_MISMATCH, "v1"));
        assert_eq!(
            hex::encode(refuse.to_bytes()),
            "4c4553535045455201000003060000000200020076 31".replace(' ', "")
        );
        let goodbye = ControlMessage::Goodbye(Reason::new(ReasonCode::SHUTDOWN, ""));
        assert_eq!(
            hex::encode(goodbye.to_bytes()),
            "4c45535350454552010000040400000001000000"
        );
        assert_eq!(decode_all(&goodbye.to_bytes()).unwrap().unwrap().1, goodbye);
    }

    #[test]
    fn refuse_from_a_later_version_is_still_read() {
        // Version 2 refuse with an extra trailing field version 1 ignores.
        let bytes = hex::decode("4c455353504545520200000308000000020002007631ffff").unwrap();
        let (envelope, message) = decode_all(&bytes).unwrap().unwrap();
        assert_eq!(envelope.version, 2);
        assert_eq!(
            message,
            ControlMessage::Refuse(Reason::new(ReasonCode::VERSION_MISMATCH, "v1"))
        );
    }

    #[test]
    fn hello_from_another_version_is_a_version_mismatch() {
        let mut bytes = ControlMessage::Hello(example()).to_bytes();
        bytes[8] = 2;
        let error = decode_all(&bytes).unwrap_err();
        assert_eq!(error, ControlError::VersionMismatch { peer: 2 });
        assert_eq!(error.reason_code(), ReasonCode::VERSION_MISMATCH);
        assert_eq!(
            error.to_string(),
            "peer speaks peer-link version 2, this node speaks 1"
        );
    }

    #[test]
    fn bad_magic_is_caught_on_the_first_wrong_byte() {
        let error = decode_all(b"GET").unwrap_err();
        assert_eq!(error.reason_code(), ReasonCode::BAD_MAGIC);
        assert_eq!(decode_all(b"LESS").unwrap(), None);
    }

    #[test]
    fn flags_kind_and_length_limits() {
        let mut flagged = ControlMessage::Ready.to_bytes();
        flagged[10] = FLAG_COMPRESSED;
        assert_eq!(
            decode_all(&flagged).unwrap_err(),
            ControlError::UnsupportedFlags(1)
        );
        let mut unknown = ControlMessage::Ready.to_bytes();
        unknown[11] = 0x7f;
        assert_eq!(
            decode_all(&unknown).unwrap_err(),
            ControlError::UnknownKind(0x7f)
        );
        let huge = hex::decode("4c4553535045455201000001ffffffff").unwrap();
        assert_eq!(
            decode_all(&huge).unwrap_err(),
            ControlError::TooLong(0xffff_ffff)
        );
    }

    proptest::proptest! {
        /// The decoder is total: any bytes give messages or an error.
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let mut buffer = ControlBuffer::default();
            buffer.push(&bytes);
            while let Ok(Some(_)) = buffer.next_message() {}
        }

        /// Any bytes after a valid envelope decode without panic too.
        #[test]
        fn any_body_decodes_without_panic(
            kind in 0u8..6,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
            bytes.push(0);
            bytes.push(kind);
            bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&body);
            let _ = decode_all(&bytes);
        }
    }

    #[test]
    fn messages_split_across_chunks_reassemble() {
        let mut stream = ControlMessage::Hello(example()).to_bytes();
        stream.extend(ControlMessage::Ready.to_bytes());
        let mut buffer = ControlBuffer::default();
        let mut messages = Vec::new();
        for chunk in stream.chunks(7) {
            buffer.push(chunk);
            while let Some((_, message)) = buffer.next_message().unwrap() {
                messages.push(message);
            }
        }
        assert_eq!(
            messages,
            vec![ControlMessage::Hello(example()), ControlMessage::Ready]
        );
    }
}
