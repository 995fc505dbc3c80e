//! `lessgate inspect less` as an operator runs it: a pcap capture of the
//! data port holding a real signed datagram made by the LESS session code,
//! decoded to JSON lines, checked with the key, and encoded back.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use etherparse::PacketBuilder;
use lessgate::clock::Time;
use lessgate::federation::mapping::ENTITY_URI;
use lessgate::federation::schemas::schema_registry;
use lessgate::less::ids::{InteractionId, PropertyId};
use lessgate::less::property_list::FieldValue;
use lessgate::less::schema::ConnectionSchema;
use lessgate::less::session::{Path, Session, SessionConfig};
use lessgate::less::signature::{LinkRole, SessionKeys};
use lessgate::less::value::Value;
use lessgate::tundra::registry::Registry;
use pcap_file::pcap::{PcapPacket, PcapWriter};

const SECRET: [u8; 32] = [7; 32];
const DATA_PORT: u16 = 7000;

/// The first datagram an initiator session sends after introducing the
/// entity type and reporting a collision.
fn session_datagram() -> Vec<u8> {
    let config = SessionConfig::new(
        SessionKeys::derive(&SECRET, LinkRole::Initiator),
        10,
        20,
        Arc::new(schema_registry(&Registry::builtin())),
        Arc::new(ConnectionSchema::builtin()),
    );
    let mut session = Session::new(config, Time::ZERO).unwrap();
    session.introduce_type(ENTITY_URI).unwrap();
    let collision = vec![
        FieldValue {
            id: PropertyId(1),
            value: Value::ObjectId(3),
        },
        FieldValue {
            id: PropertyId(3),
            value: Value::floats(&[0.5, 0.0, -2.0]),
        },
    ];
    session
        .send_interaction(InteractionId(1), collision)
        .unwrap();
    let transmit = session.poll_transmit(Time::from_millis(5)).unwrap();
    assert_eq!(transmit.path, Path::Datagram);
    transmit.bytes
}

fn udp(src: ([u8; 4], u16), dst: ([u8; 4], u16), payload: &[u8]) -> Vec<u8> {
    let builder = PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4(src.0, dst.0, 64)
        .udp(src.1, dst.1);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut frame, payload).unwrap();
    frame
}

fn write_capture(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut writer = PcapWriter::new(Vec::new()).unwrap();
    for (i, frame) in frames.iter().enumerate() {
        let time = Duration::from_millis(1_700_000_000_000 + i as u64);
        let packet = PcapPacket::new(time, frame.len() as u32, frame);
        writer.write_packet(&packet).unwrap();
    }
    std::fs::write(path, writer.into_writer()).unwrap();
}

fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessgate"))
        .arg("inspect")
        .arg("less")
        .args(args)
        .output()
        .unwrap()
}

fn stdout_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_captured_session_datagram_decodes_verifies_and_encodes_back() {
    let dir = tempfile::tempdir().unwrap();
    let datagram = session_datagram();
    let node = ([10, 0, 0, 1], DATA_PORT);
    let peer = ([10, 0, 0, 2], 40_000);
    let capture = dir.path().join("link.pcap");
    write_capture(
        &capture,
        &[
            udp(peer, node, &datagram),
            udp(([10, 0, 0, 9], 5353), ([10, 0, 0, 1], 5353), b"not ours"),
        ],
    );
    let key = hex::encode(blake3::derive_key(
        "lessgate LESS 1 packet MAC initiator to acceptor",
        &SECRET,
    ));
    let capture_arg = capture.to_str().unwrap();
    let port = DATA_PORT.to_string();
    let output = inspect(&["--pcap", capture_arg, "--port", &port, "--key", &key]);
    assert!(output.status.success(), "{output:?}");
    let lines = stdout_lines(&output);
    assert_eq!(lines.len(), 1, "only the data port's datagrams: {lines:?}");
    let line = &lines[0];
    assert_eq!(line["src"], "10.0.0.2:40000");
    assert_eq!(line["dst"], "10.0.0.1:7000");
    assert_eq!(line["time"], 1_700_000_000.0);
    let packet = &line["packet"];
    assert_eq!(packet["signature"], "valid", "{packet}");
    assert_eq!(packet["framing"], "datagram");
    assert_eq!(packet["sequence"], 10);
    assert_eq!(packet["ack_last"], 19, "nothing received: first - 1");
    assert_eq!(packet["ack_bitmask"], "0xffffffffffffffff");
    let messages = packet["messages"].as_array().unwrap();
    assert_eq!(messages[0]["kind"], "introduce-type");
    assert_eq!(messages[0]["uri"], ENTITY_URI);
    assert_eq!(messages[1]["kind"], "interaction");
    assert_eq!(messages[1]["name"], "collision");
    let impulse = &messages[1]["properties"][1];
    assert_eq!(impulse["name"], "impulse");
    assert_eq!(impulse["type"], "vector(3, float32)");
    assert_eq!(impulse["value"].to_string(), "[0.5,0.0,-2.0]");
    assert!(packet.get("undecoded").is_none(), "{packet}");

    // The JSON encodes back into the captured bytes, signed with the key.
    let json = packet.to_string();
    let encoded = inspect(&["--encode", &json, "--key", &key]);
    assert!(encoded.status.success(), "{encoded:?}");
    let text = String::from_utf8(encoded.stdout).unwrap();
    assert_eq!(text.trim(), hex::encode(&datagram));

    // The other direction's key does not verify it; no key does not check.
    let wrong = hex::encode(blake3::derive_key(
        "lessgate LESS 1 packet MAC acceptor to initiator",
        &SECRET,
    ));
    let output = inspect(&["--pcap", capture_arg, "--port", &port, "--key", &wrong]);
    assert_eq!(stdout_lines(&output)[0]["packet"]["signature"], "invalid");
    let output = inspect(&[&hex::encode(&datagram)]);
    assert!(output.status.success());
    let single: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(single["signature"], "unchecked");
}

#[test]
fn truncated_and_corrupt_datagrams_give_the_offset_and_fail() {
    let datagram = session_datagram();
    // Cut inside the signature: a header error, no JSON.
    let output = inspect(&[&hex::encode(&datagram[..7])]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("at byte 4: input ends inside a field"),
        "{stderr}"
    );
    // Cut inside the messages: what decoded is shown, then the raw rest.
    let cut = &datagram[..datagram.len() - 3];
    let output = inspect(&[&hex::encode(cut)]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["messages"][0]["kind"], "introduce-type");
    let undecoded = &json["undecoded"];
    assert_eq!(undecoded["kind"], "interaction");
    assert_eq!(undecoded["needs_context"], false);
    assert_eq!(undecoded["error"], "input ends inside a field");
    assert!(undecoded["error_offset"].as_u64().unwrap() <= cut.len() as u64);
    // A capture with a corrupt datagram: an error line with the offset.
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("bad.pcap");
    let node = ([10, 0, 0, 1], DATA_PORT);
    write_capture(
        &capture,
        &[udp(([10, 0, 0, 2], 40_000), node, &[0x01, 0x02, 0x80])],
    );
    let port = DATA_PORT.to_string();
    let output = inspect(&["--pcap", capture.to_str().unwrap(), "--port", &port]);
    assert_eq!(output.status.code(), Some(1));
    let lines = stdout_lines(&output);
    assert_eq!(lines[0]["error"]["offset"], 3);
    assert_eq!(lines[0]["bytes"], "010280");
}
