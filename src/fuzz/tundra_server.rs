//! Entry point for the fuzz target `tundra_server_frames` in `tests/fuzz`:
//! a node with a loaded scene (the demo's beta world) and logged-in
//! clients, fed arbitrary client frames, ticks and reconnects with explicit
//! time. Kept in the library so `tests/tundra_server_fuzz_corpus.rs`
//! replays the saved corpus on stable Rust. The function must return for
//! any input; a panic is a bug.

use std::sync::OnceLock;
use std::time::Duration;

use uuid::Uuid;

use crate::clock::Time;
use crate::node::{Event, Node, Transmit};
use crate::scene::{ClientId, Scene};
use crate::server::{ServerConfig, TundraServer};
use crate::tundra::messages::{DecodeContext, Login};
use crate::tundra::ClientTransport;
use crate::tundra::{txml, Message, ProtocolVersion, Registry};

/// Entities one client may create here: small, so the bound is reached.
const MAX_ENTITIES_PER_CLIENT: usize = 16;

/// What [`frames`] did, for tests that check the seeds reach the server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FramesOutcome {
    /// Frames the server received from logged-in clients.
    pub frames_in: u64,
    /// Frames the server sent.
    pub frames_out: u64,
    /// Entities in the scene at the end, and at the start.
    pub entities: usize,
    pub entities_at_start: usize,
}

/// The demo's beta world (a plane and parts, five entities): small, so an
/// input costs its frames rather than the scene's import. Parsed once.
fn loaded_scene() -> Scene {
    static FILE: OnceLock<txml::Scene> = OnceLock::new();
    let mut scene = Scene::new(Registry::builtin());
    let file = FILE.get_or_init(|| {
        let world = &crate::demo::worlds::WORLDS[1];
        txml::load(world.txml, &Registry::builtin()).expect("the demo world loads")
    });
    scene.import_txml(file);
    scene.take_journal();
    scene
}

fn log_in(node: &mut Node, client: ClientId, now: Time, protocol: u32) {
    node.handle_client_connect(client, now, ClientTransport::WebSocket);
    let login = Message::Login(Login {
        login_data: "{\"username\":\"fuzz\"}".into(),
        protocol_version: Some(protocol),
    });
    let frame = login
        .encode_frame(ProtocolVersion(1))
        .expect("a login encodes");
    node.handle_client_frame(client, now, &frame);
}

/// Checks every frame the server sent decodes for the client it went to,
/// closes the connections the server closed, and drops what the driver
/// would log. Returns the frames sent.
fn drain(node: &mut Node, now: Time) -> u64 {
    let mut sent = 0;
    while let Some(transmit) = node.poll_transmit(now) {
        let Transmit::Client(client, frame) = transmit else {
            continue;
        };
        sent += 1;
        let Some(state) = node.server().client(client) else {
            continue;
        };
        let ctx = DecodeContext {
            protocol_version: state.protocol,
            registry: node.scene().registry(),
        };
        if let Err(error) = Message::decode_frame(&frame, &ctx) {
            panic!(
                "the server sent {client:?} an undecodable frame ({error}): {}",
                hex::encode(&frame)
            );
        }
    }
    while let Some(event) = node.poll_event() {
        if let Event::CloseClient(client, reason) = event {
            node.handle_client_disconnect(client, &reason);
        }
    }
    sent
}

/// `tundra_server_frames`: the first byte picks the two clients' protocol
/// versions (bits 0-1 and 2-3, versions 1-4). Then operations: a byte whose
/// low 2 bits are 0 or 1 sends a frame from client slot 0 or 1 (then a u16
/// LE length and that many bytes: message id and payload); 2 advances the
/// time by `op >> 2` times 10 ms and runs the node's timers (the tick, when
/// one is due: every 50 ms); 3 disconnects slot `op >> 2 & 1` and logs a new
/// client in its place.
///
/// Invariants: every frame the server sends decodes under the receiving
/// client's protocol version; no client creates more entities than its
/// limit, so the scene grows by at most the limit per client that logged in.
pub fn frames(data: &[u8]) -> FramesOutcome {
    let Some((&versions, mut rest)) = data.split_first() else {
        return FramesOutcome::default();
    };
    let mut config = ServerConfig::default();
    config.limits.max_entities_per_client = MAX_ENTITIES_PER_CLIENT;
    let mut node = Node::new(
        loaded_scene(),
        TundraServer::new(config),
        Uuid::from_u128(1),
    );
    let entities_at_start = node.scene().len();
    let protocols = [
        u32::from(versions & 3) + 1,
        u32::from(versions >> 2 & 3) + 1,
    ];
    let mut now = Time::ZERO;
    let mut slots = [ClientId(1), ClientId(2)];
    let mut logins = 2usize;
    for (slot, protocol) in slots.iter().zip(protocols) {
        log_in(&mut node, *slot, now, protocol);
    }
    let mut frames_out = drain(&mut node, now);
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op & 3 {
            slot @ (0 | 1) => {
                let Some((len, tail)) = rest.split_first_chunk::<2>() else {
                    break;
                };
                let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
                let (frame, tail) = tail.split_at(len);
                rest = tail;
                node.handle_client_frame(slots[usize::from(slot)], now, frame);
            }
            2 => {
                now += Duration::from_millis(u64::from(op >> 2) * 10);
                node.handle_timeout(now, &|_| 0);
            }
            _ => {
                let slot = usize::from(op >> 2 & 1);
                node.handle_client_disconnect(slots[slot], "fuzz reconnect");
                logins += 1;
                slots[slot] = ClientId(logins as u64);
                log_in(&mut node, slots[slot], now, protocols[slot]);
            }
        }
        frames_out += drain(&mut node, now);
        for client in node.server().authenticated_clients() {
            assert!(
                client.entities_created <= MAX_ENTITIES_PER_CLIENT,
                "{:?} created {} entities",
                client.id,
                client.entities_created
            );
        }
        assert!(
            node.scene().len() <= entities_at_start + logins * MAX_ENTITIES_PER_CLIENT,
            "scene grew to {} entities from {entities_at_start} with {logins} logins",
            node.scene().len()
        );
    }
    FramesOutcome {
        frames_in: node.server().stats().frames_in,
        frames_out,
        entities: node.scene().len(),
        entities_at_start,
    }
}

/// A client frame operation of [`frames`] for client slot `slot`.
fn frame_op(slot: u8, frame: &[u8]) -> Vec<u8> {
    let len = u16::try_from(frame.len()).expect("seed frames are small");
    [&[slot][..], &len.to_le_bytes(), frame].concat()
}

/// Seed inputs for `tundra_server_frames`: both clients on protocol 3 edit
/// the Transform of every Placeable in the loaded scene, with ticks and a
/// reconnect between.
pub fn frames_seeds() -> Vec<(String, Vec<u8>)> {
    use crate::tundra::messages::{EditAttributes, EditAttributesBlock};
    use crate::tundra::values::{Float3, Transform};
    use crate::tundra::{AttributeEdit, AttributeValue};

    const PLACEABLE: u32 = 20;
    let scene = loaded_scene();
    let schema = scene
        .registry()
        .get(PLACEABLE)
        .expect("Placeable is built in");
    let slots = schema.slot_types();
    let mut edits = vec![0x0a];
    for (step, entity) in scene.entities().enumerate() {
        for (id, component) in entity.components.iter() {
            if component.type_id != PLACEABLE {
                continue;
            }
            let edit = AttributeEdit {
                index: 0,
                value: AttributeValue::Transform(Transform {
                    pos: Float3::new(step as f32, 1.0, 0.0),
                    rot: Float3::new(0.0, 90.0, 0.0),
                    scale: Float3::new(1.0, 1.0, 1.0),
                }),
            };
            let block = EditAttributesBlock::encode(*id, &[edit], &slots).expect("encodes");
            let frame = Message::EditAttributes(EditAttributes {
                scene_id: 0,
                entity_id: entity.id,
                blocks: vec![block],
            })
            .encode_frame(ProtocolVersion(3))
            .expect("encodes");
            edits.extend(frame_op((step % 2) as u8, &frame));
            edits.push(0x06);
        }
    }
    edits.push(0x03);
    edits.push(0x0a);
    vec![("seed-edit-placeables".to_owned(), edits)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_accepts_edge_inputs() {
        for input in [&[][..], &[0], &[0xff; 64], &[5, 0, 2, 0, 1, 0, 2, 3, 7]] {
            frames(input);
        }
    }

    #[test]
    fn logged_in_clients_are_sent_the_scene_at_the_first_tick() {
        let outcome = frames(&[0x0f, 0x0a]);
        assert!(outcome.entities_at_start > 0);
        assert!(outcome.frames_out > 2, "{outcome:?}");
    }

    #[test]
    fn seed_edits_reach_the_scene() {
        for (name, seed) in frames_seeds() {
            let outcome = frames(&seed);
            assert!(outcome.frames_in > 4, "{name}: {outcome:?}");
        }
    }
}
