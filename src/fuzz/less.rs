//! Entry points for the fuzz targets in `tests/fuzz` (`less_packet`,
//! `less_session`), kept in the library so that `tests/less_fuzz_corpus.rs`
//! replays the same inputs on stable Rust. Each function must return for any
//! input; a panic is a bug. Not part of the API other modules use.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::clock::Time;
use crate::less::bulk::{decompress_bounded, open_formed_stream_datagram, MAX_BULK_BODY_LEN};
use crate::less::codec::Reader;
use crate::less::encoding::link::offered_features;
use crate::less::encoding::LinkEncodings;
use crate::less::ids::{Local, ObjectId, Remote, TypeId};
use crate::less::message::{DecodeContext, Message};
use crate::less::packet::{
    open_datagram, open_stream_datagram, open_stream_packet, StreamDeframer,
};
use crate::less::schema::{ConnectionSchema, SchemaRegistry, TypeSchema};
use crate::less::schema_toml::types_from_toml;
use crate::less::session::{FramingMode, Session, SessionConfig};
use crate::less::signature::{LinkRole, MacKey, SessionKeys, SIGNATURE_LEN};

const TEST_TYPES: &str = include_str!("../../schemas/less/test-types.toml");
const CRATE: &str = "urn:lessgate:test:crate";
const SECRET: [u8; 32] = [0x5e; 32];

struct Fixtures {
    registry: Arc<SchemaRegistry>,
    connection: Arc<ConnectionSchema>,
    crate_type: Arc<TypeSchema>,
    /// Every feature offered, so the keyed update codes are decoded too.
    encodings: LinkEncodings,
}

fn fixtures() -> &'static Fixtures {
    static FIXTURES: OnceLock<Fixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        // The shipped test schema is checked by unit tests.
        let registry = types_from_toml(TEST_TYPES).expect("test-types.toml parses");
        let crate_type = registry.get(CRATE).expect("crate type exists").clone();
        Fixtures {
            registry: Arc::new(registry),
            connection: Arc::new(ConnectionSchema::builtin()),
            crate_type,
            encodings: LinkEncodings::from_features(&offered_features(), Vec::new()),
        }
    })
}

/// Every id of type 1, entity 1 and receiver entity 1 resolves to the crate type.
struct FixedContext;

impl DecodeContext<Remote, Local> for FixedContext {
    fn sender_type(&self, type_id: TypeId<Remote>) -> Option<Arc<TypeSchema>> {
        (type_id.get() == 1).then(|| fixtures().crate_type.clone())
    }
    fn sender_entity_type(&self, entity: ObjectId<Remote>) -> Option<Arc<TypeSchema>> {
        (entity.get() == 1).then(|| fixtures().crate_type.clone())
    }
    fn receiver_entity_type(&self, entity: ObjectId<Local>) -> Option<Arc<TypeSchema>> {
        (entity.get() == 1).then(|| fixtures().crate_type.clone())
    }
    fn connection(&self) -> &ConnectionSchema {
        &fixtures().connection
    }
    fn encodings(&self) -> &LinkEncodings {
        &fixtures().encodings
    }
}

/// Decodes messages and checks that re-encoding is stable.
fn decode_messages(count: usize, bytes: &[u8]) {
    let mut reader = Reader::new(bytes);
    for _ in 0..count {
        let Ok(message) = Message::<Remote, Local>::decode(&mut reader, &FixedContext) else {
            return;
        };
        let encoded = message.to_bytes();
        let again = Message::<Remote, Local>::decode(&mut Reader::new(&encoded), &FixedContext)
            .expect("a decoded message re-encodes to something decodable");
        assert_eq!(again.to_bytes(), encoded, "re-encoding is stable");
    }
}

/// `less_packet`: datagram and stream decoding, with and without the MAC.
pub fn packet(data: &[u8]) {
    let key = MacKey::new(SECRET);
    let _ = open_datagram(&key, data);
    let _ = open_stream_packet(&key, data);
    let _ = open_stream_datagram(&key, data);
    let _ = open_formed_stream_datagram(&key, data);
    // What a bulk packet's payload reaches once its signature verified.
    let _ = decompress_bounded(data, MAX_BULK_BODY_LEN);
    let mut deframer = StreamDeframer::new();
    deframer.push(data);
    while let Ok(Some(_)) = deframer.next_frame() {}
    // The same parse as open_datagram, past an unchecked signature.
    let mut reader = Reader::new(data);
    let header = (|| {
        reader.read_u8()?;
        reader.read_u8()?;
        reader.read_u64()?;
        reader.read_bytes(SIGNATURE_LEN)?;
        reader.read_integer()?;
        reader.read_count("message count", reader.remaining())
    })();
    if let Ok(count) = header {
        decode_messages(count, reader.rest());
    }
}

/// Writes a valid signature into a frame whose bytes before the signature
/// parse (`datagram`: UDP framing first; `prefixed`: length prefix first).
fn sign(key: &MacKey, frame: &mut [u8], prefixed: bool, datagram: bool) {
    let mut reader = Reader::new(frame);
    let offset = (|| {
        if prefixed {
            reader.read_integer()?;
        }
        if datagram {
            reader.read_u8()?;
            reader.read_u8()?;
            reader.read_u64()?;
        }
        Ok::<usize, crate::less::codec::DecodeError>(reader.position())
    })();
    if let Ok(offset) = offset {
        if offset + SIGNATURE_LEN <= frame.len() {
            key.write_signature(frame, offset);
        }
    }
}

/// `less_session`: an acceptor session fed arbitrary input. The first byte
/// picks the framing mode; then each operation is a byte (low 2 bits: 0
/// datagram, 1 stream frame, 2 timer, 3 subscribe to every introduced type)
/// followed, for frames, by a length byte and that many bytes, which are
/// signed here with the initiator's key so the fuzzer reaches the decoders.
/// Returns the packets accepted and events produced, so tests can check that
/// inputs reach past the signature.
pub fn session(data: &[u8]) -> (u64, usize) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return (0, 0);
    };
    let mode = if mode & 1 == 0 {
        FramingMode::Datagram
    } else {
        FramingMode::Stream
    };
    let fixtures = fixtures();
    let mut config = SessionConfig::new(
        SessionKeys::derive(&SECRET, LinkRole::Acceptor),
        7,
        200,
        fixtures.registry.clone(),
        fixtures.connection.clone(),
    );
    config.mode = mode;
    let Ok(mut session) = Session::new(config, Time::ZERO) else {
        return (0, 0);
    };
    let mut events = 0usize;
    let peer_key = SessionKeys::derive(&SECRET, LinkRole::Initiator).send;
    let mut now = Time::ZERO;
    let mut introduced: Vec<TypeId<Remote>> = Vec::new();
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op & 3 {
            0 | 1 => {
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let len = usize::from(len).min(tail.len());
                let mut frame = tail[..len].to_vec();
                rest = &tail[len..];
                if op & 3 == 0 {
                    sign(&peer_key, &mut frame, false, true);
                    session.handle_datagram(now, &frame);
                } else {
                    sign(&peer_key, &mut frame, true, mode == FramingMode::Datagram);
                    session.handle_stream_frame(now, &frame);
                }
            }
            2 => {
                now += Duration::from_millis(u64::from(op >> 2) * 10);
                session.handle_timeout(now);
            }
            _ => {
                subscribe_to_all(&mut session, &introduced);
            }
        }
        events += drain(&mut session, now, &mut introduced);
        let _ = session.poll_timeout();
    }
    (session.stats().packets_received, events)
}

/// Subscribes to every property of every type the peer introduced.
pub(super) fn subscribe_to_all(session: &mut Session, introduced: &[TypeId<Remote>]) {
    for type_id in introduced {
        if let Some((_, Some(schema))) = session.remote_type(*type_id) {
            let keys: Vec<_> = schema
                .properties()
                .into_iter()
                .map(|(key, _)| key)
                .collect();
            let _ = session.subscribe_type(*type_id, &keys);
        }
    }
}

/// Sends what the session has to send (bounded) and takes its events,
/// noting the types the peer introduced; returns how many events.
pub(super) fn drain(
    session: &mut Session,
    now: Time,
    introduced: &mut Vec<TypeId<Remote>>,
) -> usize {
    for _ in 0..1000 {
        if session.poll_transmit(now).is_none() {
            break;
        }
    }
    let mut events = 0;
    while let Some(event) = session.poll_event() {
        events += 1;
        if let crate::less::session::Event::TypeIntroduced { type_id, .. } = event {
            introduced.push(type_id);
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_accept_edge_inputs() {
        for input in [&[][..], &[0], &[0xff; 64], &[0, 0, 5, 0, 0, 0xc0, 0, 1, 2]] {
            packet(input);
            session(input);
        }
    }
}
