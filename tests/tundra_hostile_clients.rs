//! A corpus of hostile Tundra frames (tests/data/hostile_clients/), each sent
//! on its own connection to a real node: truncated frames, wrong lengths,
//! huge counts, unknown message and type ids, bad UTF-8, requests on unknown
//! entities and messages before login.
//!
//! A file is named `PHASE.EXPECT.WHAT.hex`: PHASE is `before` (sent before
//! Login) or `after` (sent by a logged-in protocol-3 client); EXPECT is
//! `close` (the frame does not decode: the node closes that connection and
//! logs why) or `kept` (it decodes, and the node refuses or ignores it as
//! Tundra does, keeping the connection: a later request is still served).
//! Either way a bystander client stays connected and keeps receiving
//! updates, and no hostile frame changes the scene.
//!
//! `write_corpus` (ignored) regenerates the files from the codec; it checks
//! every `close` frame fails to decode and every `kept` frame decodes.

mod common;
mod net_common;

use std::path::PathBuf;
use std::time::Duration;

use common::tundra_values::{name_component, name_edit};
use common::{TestNode, TundraClient};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{exec_type, CreateEntity, EntityAction, Login, RemoveEntity};
use lessgate::tundra::{
    ComponentId, DecodeContext, DecodeError, EntityId, Message, ProtocolVersion, Registry,
};
use net_common::{capture, Observer};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile_clients")
}

fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let registry = Registry::builtin();
    Message::decode_frame(
        frame,
        &DecodeContext {
            protocol_version: ProtocolVersion(3),
            registry: &registry,
        },
    )
}

struct Entry {
    file: String,
    before_login: bool,
    close: bool,
    frame: Vec<u8>,
}

fn load_corpus() -> Vec<Entry> {
    let mut entries: Vec<Entry> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "hex"))
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let parts: Vec<&str> = file.split('.').collect();
            assert_eq!(parts.len(), 4, "{file}: PHASE.EXPECT.WHAT.hex");
            let text = std::fs::read_to_string(&path).unwrap();
            let digits: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .flat_map(|l| l.chars())
                .filter(|c| !c.is_whitespace())
                .collect();
            Entry {
                before_login: match parts[0] {
                    "before" => true,
                    "after" => false,
                    other => panic!("{file}: phase {other}"),
                },
                close: match parts[1] {
                    "close" => true,
                    "kept" => false,
                    other => panic!("{file}: expectation {other}"),
                },
                frame: hex::decode(digits).unwrap_or_else(|e| panic!("{file}: {e}")),
                file,
            }
        })
        .collect();
    entries.sort_by(|a, b| a.file.cmp(&b.file));
    entries
}

#[test]
fn corpus_expectations_match_the_decoder() {
    let entries = load_corpus();
    assert!(entries.len() >= 15, "the corpus is there");
    for entry in &entries {
        assert_eq!(
            decode(&entry.frame).is_err(),
            entry.close,
            "{}: a `close` frame must fail to decode, a `kept` one decode",
            entry.file
        );
    }
}

fn create(name: &str) -> Message {
    Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0001),
        temporary: false,
        parent: None,
        components: vec![name_component(1, name)],
    })
}

fn frame(message: &Message) -> Vec<u8> {
    message.encode_frame(ProtocolVersion(3)).unwrap()
}

/// Frames with one byte set to 0xff that a length or count limit refuses.
fn over_limit(valid: &[u8]) -> Option<Vec<u8>> {
    (2..valid.len()).find_map(|i| {
        let mut bad = valid.to_vec();
        bad[i] = 0xff;
        matches!(decode(&bad), Err(DecodeError::LimitExceeded { .. })).then_some(bad)
    })
}

#[test]
#[ignore = "regenerates tests/data/hostile_clients; run explicitly"]
fn write_corpus() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut out: Vec<(&str, &str, String, Vec<u8>)> = Vec::new();
    let created = frame(&create("hostile"));
    for (what, cut) in [
        ("truncated-create-entity-last-byte", created.len() - 1),
        ("truncated-create-entity-half", created.len() / 2),
        ("truncated-create-entity-header", 4),
        ("truncated-message-id", 1),
    ] {
        out.push(("after", "close", what.into(), created[..cut].to_vec()));
    }
    let edit = frame(&name_edit(EntityId(1), ComponentId(1), 0, "hostile"));
    out.push((
        "after",
        "close",
        "truncated-edit-attributes".into(),
        edit[..edit.len() - 2].to_vec(),
    ));
    // CreateEntity claiming a 16 KiB+ attribute block that is not there.
    out.push((
        "after",
        "close",
        "wrong-length-attribute-block".into(),
        vec![
            110, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 20, 0, 0xFF, 0xFF, 0x03, 0x00,
        ],
    ));
    for (what, valid) in [
        ("huge-count-create-entity", created.clone()),
        ("huge-count-edit-attributes", edit.clone()),
        (
            "huge-count-entity-action",
            frame(&Message::EntityAction(EntityAction {
                entity_id: EntityId(1),
                name: "Go".into(),
                execution_type: exec_type::SERVER,
                parameters: vec!["a".into(), "b".into()],
            })),
        ),
    ] {
        // Not every message has a count a single byte can push over its
        // limit (EditAttributes' block is bounded by the frame itself).
        if let Some(bad) = over_limit(&valid) {
            out.push(("after", "close", what.into(), bad));
        }
    }
    // Unknown message ids decode as `Unknown` and are ignored, as Tundra
    // ignores messages no handler claims.
    out.push((
        "after",
        "kept",
        "unknown-message-id".into(),
        vec![0xe7, 0x03, 1, 2, 3],
    ));
    out.push(("after", "kept", "message-id-zero".into(), vec![0, 0]));
    // Login's data with bytes that are not UTF-8: decoded lossily, as
    // Tundra's QString does; the connection is kept.
    let mut login = frame(&Message::Login(Login {
        login_data: "{\"username\":\"XXXX\"}".into(),
        protocol_version: Some(3),
    }));
    let at = login.windows(4).position(|w| w == b"XXXX").unwrap();
    login[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
    out.push(("before", "kept", "bad-utf8-login".into(), login));
    let mut action = frame(&Message::EntityAction(EntityAction {
        entity_id: EntityId(0x7777),
        name: "XXXX".into(),
        execution_type: exec_type::SERVER,
        parameters: vec![],
    }));
    let at = action.windows(4).position(|w| w == b"XXXX").unwrap();
    action[at..at + 4].copy_from_slice(&[0xed, 0xa0, 0x80, 0xff]);
    out.push((
        "after",
        "kept",
        "bad-utf8-action-unknown-entity".into(),
        action,
    ));
    out.push((
        "after",
        "kept",
        "edit-unknown-entity".into(),
        frame(&name_edit(EntityId(0x7777), ComponentId(1), 0, "ghost")),
    ));
    out.push((
        "after",
        "kept",
        "remove-unknown-entity".into(),
        frame(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(0x7777),
        })),
    ));
    // Out of order: requests before Login are dropped (reference 2.1).
    out.push((
        "before",
        "kept",
        "create-before-login".into(),
        created.clone(),
    ));
    out.push(("before", "kept", "edit-before-login".into(), edit.clone()));
    out.push((
        "before",
        "kept",
        "remove-before-login".into(),
        frame(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: EntityId(1),
        })),
    ));
    assert!(
        out.iter()
            .any(|(_, _, what, _)| what.starts_with("huge-count")),
        "a huge count reaches a limit somewhere"
    );
    for (phase, expect, what, bytes) in out {
        let file = dir.join(format!("{phase}.{expect}.{what}.hex"));
        assert_eq!(
            decode(&bytes).is_err(),
            expect == "close",
            "{what}: {:?}",
            decode(&bytes)
        );
        let text = format!(
            "# {what}: {}\n{}\n",
            match decode(&bytes) {
                Err(e) => format!("does not decode ({e})"),
                Ok(m) => format!("decodes as {}", m.name()),
            },
            hex::encode(&bytes)
        );
        std::fs::write(file, text).unwrap();
    }
}

/// Sends Login on a raw connection and waits for the reply.
async fn log_in(client: &mut TundraClient, name: &str) {
    client
        .send(&Message::Login(Login {
            login_data: format!("{{\"username\":\"{name}\"}}"),
            protocol_version: Some(3),
        }))
        .await;
    login_reply(client).await;
}

/// Waits for the LoginReply and takes the protocol it names.
async fn login_reply(client: &mut TundraClient) {
    let reply = client.login_reply().await;
    assert!(reply.success);
    client.protocol = ProtocolVersion(reply.protocol_version.unwrap_or(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hostile_frame_costs_only_its_own_connection() {
    capture::install();
    let node = TestNode::start(NodeConfig::default()).await;
    let bystander = Observer::join(&node.url, "bystander").await;
    let (mut writer, _) = TundraClient::login(&node.url, "writer", 3).await;
    let lamp = writer
        .create_entity(1, vec![name_component(1, "lamp")])
        .await;
    let entries = load_corpus();
    let mut probes = 0u32;
    for (n, entry) in entries.iter().enumerate() {
        let mut hostile = TundraClient::connect(&node.url).await;
        if !entry.before_login {
            log_in(&mut hostile, "hostile").await;
        }
        hostile.send_raw(entry.frame.clone()).await;
        if entry.close {
            assert!(hostile.closed().await, "{}: connection closed", entry.file);
        } else {
            // Still served: (log in and) create a probe entity.
            if entry.before_login {
                if matches!(decode(&entry.frame), Ok(Message::Login(_))) {
                    // The hostile frame was a Login itself (lossy UTF-8).
                    login_reply(&mut hostile).await;
                } else {
                    log_in(&mut hostile, "late").await;
                }
            }
            probes += 1;
            let id = hostile
                .create_entity(probes, vec![name_component(1, &format!("probe{probes}"))])
                .await;
            assert!(
                id.is_replicated(),
                "{}: connection kept and served",
                entry.file
            );
        }
        // The bystander keeps receiving: the writer renames the lamp.
        writer
            .send(&name_edit(lamp, ComponentId(1), 0, &format!("lamp{n}")))
            .await;
        let want = format!("lamp{n}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let seen = bystander.snapshot();
            assert!(!seen.closed, "{}: bystander still connected", entry.file);
            if name_of(&seen, lamp).as_deref() == Some(want.as_str()) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: bystander got the update",
                entry.file
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        while writer.recv_within(Duration::from_millis(1)).await.is_some() {}
    }
    // Nothing hostile reached the scene: only the lamp and the probes.
    let seen = bystander.snapshot();
    let mut names: Vec<String> = seen
        .view
        .entities
        .values()
        .filter_map(|s| s.name.clone())
        .collect();
    names.sort();
    let mut want: Vec<String> = (1..=probes).map(|p| format!("probe{p}")).collect();
    want.push(format!("lamp{}", entries.len() - 1));
    want.sort();
    assert_eq!(
        names, want,
        "the scene holds only what well-behaved requests made"
    );
    // Every closed connection was logged with its reason.
    let closings = capture::lines("closing client");
    let closed = entries.iter().filter(|e| e.close).count();
    assert_eq!(
        closings.len(),
        closed,
        "one logged close per malformed frame"
    );
    for line in &closings {
        assert!(
            line.field("reason")
                .is_some_and(|r| r.starts_with("malformed message")),
            "{line:?}"
        );
    }
    println!(
        "{} hostile frames, {closed} closed, {probes} kept and served",
        entries.len()
    );
    node.stop().await;
}

/// The Name a client was told for an entity, from Name edits too.
fn name_of(seen: &net_common::Observed, entity: EntityId) -> Option<String> {
    seen.view.entities.get(&entity).and_then(|s| s.name.clone())
}
