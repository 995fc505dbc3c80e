//! `lessgate inspect knet` as an operator runs it, on the real captures in
//! `tests/data/knet/` and on a pcap built from them: everything decodes
//! without an error, the native login XML and the fragmented CreateEntity
//! come out decoded, a pcap of two viewers is read per connection (edits
//! named, RigidBodyUpdate in metres and degrees), and a malformed datagram
//! is reported, not a crash.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use etherparse::PacketBuilder;
use lessgate::knet::datagram::{write_datagram, BlockOut, FragmentInfo};
use lessgate::knet::ids::{MessageId, PacketId};
use lessgate::tundra::messages::{EditAttributes, EditAttributesBlock};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentId, EntityId, Message, ProtocolVersion, Registry,
};
use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde_json::Value;

const PORT: u16 = 2345;
const CLIENT: ([u8; 4], u16) = ([127, 0, 0, 1], 41234);
const SERVER: ([u8; 4], u16) = ([127, 0, 0, 1], PORT);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/knet")
        .join(name)
}

fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lessgate"))
        .args(["inspect", "knet"])
        .args(args)
        .output()
        .unwrap()
}

/// Runs the inspector, expects success, returns the JSON lines.
fn lines(args: &[&str]) -> Vec<Value> {
    let output = inspect(args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_capture_decodes_without_an_error() {
    for name in [
        "udp-login-ping-disconnect.jsonl",
        "udp-fragmented-createentity.jsonl",
        "udp-noack-retransmit.jsonl",
        "udp-server-disconnect.jsonl",
        "tcp-login-ping-close.jsonl",
    ] {
        let path = fixture(name);
        let lines = lines(&[path.to_str().unwrap()]);
        assert!(lines.len() >= 10, "{name}");
        for line in &lines {
            assert!(line.get("error").is_none(), "{name}: {line}");
            assert!(!line.to_string().contains("\"error\""), "{name}: {line}");
        }
        // The first UDP row is the connect datagram, shown as such.
        if name.starts_with("udp") {
            assert_eq!(lines[0]["connect"], true, "{name}");
        }
    }
}

#[test]
fn the_native_login_xml_is_shown_as_text() {
    let path = fixture("udp-login-ping-disconnect.jsonl");
    let lines = lines(&[path.to_str().unwrap()]);
    let login = lines
        .iter()
        .flat_map(|l| l["blocks"].as_array().cloned().unwrap_or_default())
        .find(|b| b["name"] == "Login")
        .unwrap();
    let xml = login["tundra"]["Login"]["login_data"].as_str().unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />"));
    assert!(xml.contains("<protocol value=\"udp\" />"));
    assert_eq!(login["tundra"]["Login"]["protocol_version"], 4);
    assert_eq!(login["reliable_number"], 0);
    // And read: the properties the XML carries.
    assert_eq!(login["readable"]["login"]["username"], "tester", "{login}");
    assert_eq!(login["readable"]["login"]["protocol"], "udp");
}

#[test]
fn the_fragmented_create_entity_is_reassembled_and_decoded() {
    let path = fixture("udp-fragmented-createentity.jsonl");
    let lines = lines(&[path.to_str().unwrap()]);
    let whole: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l["blocks"].as_array())
        .flatten()
        .filter_map(|b| b.get("reassembled"))
        .collect();
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0]["name"], "CreateEntity");
    assert_eq!(whole[0]["payload_len"], 2022);
    let text = whole[0]["tundra"].to_string();
    assert!(text.contains("0000|0001|0002|"), "{text}");
    assert!(text.contains("0398|0399|"));
    // Read with the layouts: each component's type and attributes named.
    let components = whole[0]["readable"]["components"].as_array().unwrap();
    assert!(!components.is_empty(), "{}", whole[0]);
    for component in components {
        assert!(component["type"].is_string(), "{component}");
        assert!(component["attributes"][0]["id"].is_string(), "{component}");
    }
    // The client's ack for packets 3-6 (F5).
    let acks: Vec<&Value> = lines
        .iter()
        .filter(|l| l["dir"] == "c2s")
        .filter_map(|l| l["blocks"].as_array())
        .flatten()
        .filter_map(|b| b.get("acked"))
        .collect();
    assert!(acks.iter().any(|a| **a == serde_json::json!([3, 4, 5, 6])));
}

#[test]
fn hex_arguments_and_malformed_input() {
    let value: Value =
        serde_json::from_slice(&inspect(&["c6000002000430 00ffffffff"]).stdout).unwrap();
    assert_eq!(value["header"]["packet_id"], 6);
    assert_eq!(value["blocks"][0]["name"], "Disconnect");
    let output = inspect(&["--tcp", "0a660106007465737465725365010100"]);
    assert!(output.status.success());
    let tcp: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tcp["messages"][0]["name"], "ClientJoined");
    assert_eq!(tcp["buffered"], 5, "the LoginReply is incomplete");
    // A 6-byte PacketAck (kNet closes the connection for it,
    // docs/knet-wire.md §4.11).
    let output = inspect(&["8400000720 04 030000000000"]);
    assert!(!output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("PacketAck payload of 6 bytes"), "{stdout}");
}

fn frame(
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    tcp_seq: Option<u32>,
    payload: &[u8],
) -> Vec<u8> {
    let builder = PacketBuilder::ethernet2([1; 6], [2; 6]).ipv4(src.0, dst.0, 64);
    let mut out = Vec::new();
    match tcp_seq {
        Some(seq) => {
            let builder = builder.tcp(src.1, dst.1, seq, 65535);
            builder.write(&mut out, payload).unwrap();
        }
        None => {
            let builder = builder.udp(src.1, dst.1);
            builder.write(&mut out, payload).unwrap();
        }
    }
    out
}

/// A pcap of `frames`, one millisecond apart, in a temporary directory.
fn pcap(frames: &[Vec<u8>]) -> (tempfile::TempDir, PathBuf) {
    let mut writer = PcapWriter::new(Vec::new()).unwrap();
    for (i, data) in frames.iter().enumerate() {
        let time = Duration::from_millis(1_700_000_000_000 + i as u64);
        let packet = PcapPacket::new(time, data.len() as u32, data);
        writer.write_packet(&packet).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("knet.pcap");
    std::fs::write(&path, writer.into_writer()).unwrap();
    (dir, path)
}

/// A kNet datagram carrying one whole Tundra frame (u16 id + payload).
fn datagram(packet: u32, frame: &[u8]) -> Vec<u8> {
    let id = u16::from_le_bytes([frame[0], frame[1]]);
    let block = BlockOut {
        in_order: true,
        reliable_number: None,
        fragment: FragmentInfo::Whole,
        message_id: Some(MessageId(u32::from(id))),
        payload: &frame[2..],
    };
    let mut out = Vec::new();
    write_datagram(&mut out, PacketId::new(packet), &[block]).unwrap();
    out
}

/// An EditAttributes frame setting the description (attribute 1) of the
/// Name component `component` of `entity`.
fn name_edit(entity: u32, component: u32, description: &str) -> Vec<u8> {
    let slots = Registry::builtin().get(26).unwrap().slot_types();
    let change = AttributeEdit {
        index: 1,
        value: AttributeValue::String(description.into()),
    };
    let block = EditAttributesBlock::encode(ComponentId(component), &[change], &slots).unwrap();
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(entity),
        blocks: vec![block],
    })
    .encode_frame(ProtocolVersion(4))
    .unwrap()
}

/// The rows of a fixture as (to the server?, bytes).
fn rows(name: &str) -> Vec<(bool, Vec<u8>)> {
    std::fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            let bytes = hex::decode(row["hex"].as_str().unwrap()).unwrap();
            (row["dir"] == "c2s", bytes)
        })
        .filter(|(_, bytes)| !bytes.is_empty())
        .collect()
}

#[test]
fn a_pcap_with_udp_and_tcp_on_the_knet_port() {
    let mut frames = Vec::new();
    for (to_server, bytes) in rows("udp-login-ping-disconnect.jsonl") {
        let (src, dst) = if to_server {
            (CLIENT, SERVER)
        } else {
            (SERVER, CLIENT)
        };
        frames.push(frame(src, dst, None, &bytes));
    }
    let tcp_client = ([127, 0, 0, 1], 41235);
    let mut seq = [1000u32, 5000u32];
    for (i, (to_server, bytes)) in rows("tcp-login-ping-close.jsonl").into_iter().enumerate() {
        let (src, dst, side) = if to_server {
            (tcp_client, SERVER, 0)
        } else {
            (SERVER, tcp_client, 1)
        };
        frames.push(frame(src, dst, Some(seq[side]), &bytes));
        // Capture the login segment twice, as a retransmission would be.
        if i == 1 {
            frames.push(frame(src, dst, Some(seq[side]), &bytes));
        }
        seq[side] += bytes.len() as u32;
    }
    let (_dir, path) = pcap(&frames);

    let port = PORT.to_string();
    let lines = lines(&[path.to_str().unwrap(), "--port", &port]);
    assert!(lines.iter().all(|l| l.get("error").is_none()));
    assert_eq!(lines[0]["connect"], true);
    assert_eq!(lines[0]["src"], "127.0.0.1:41234");
    let text = serde_json::to_string(&lines).unwrap();
    assert_eq!(
        text.matches("\"name\":\"Login\"").count(),
        2,
        "one UDP, one TCP login"
    );
    assert_eq!(text.matches("\"name\":\"LoginReply\"").count(), 2);
    assert!(text.contains("<protocol value=\\\"tcp\\\" />"));
    let tcp_lines = lines.iter().filter(|l| l.get("messages").is_some()).count();
    assert_eq!(tcp_lines, 33, "the repeated segment adds nothing");
    // Without --port a capture cannot be read.
    assert!(!inspect(&[path.to_str().unwrap()]).status.success());
}

#[test]
fn a_pcap_of_two_native_viewers_is_read_per_connection() {
    let viewer_a = ([127, 0, 0, 1], 41301);
    let viewer_b = ([127, 0, 0, 1], 41302);
    // CreateEntity 5 with component 3 a Name "a" (to viewer a only), an
    // edit of that component to each viewer, a RigidBodyUpdate to viewer b.
    let create = hex::decode("6e000005000000000001031a000701006100000000").unwrap();
    let rigid = hex::decode("7700075a800a04082030ff0000").unwrap();
    let frames = [
        frame(viewer_a, SERVER, None, &[0; 8]),
        frame(viewer_b, SERVER, None, &[0; 8]),
        frame(SERVER, viewer_a, None, &datagram(1, &create)),
        frame(
            SERVER,
            viewer_b,
            None,
            &datagram(1, &name_edit(5, 3, "lamp")),
        ),
        frame(
            SERVER,
            viewer_a,
            None,
            &datagram(2, &name_edit(5, 3, "lamp")),
        ),
        frame(SERVER, viewer_b, None, &datagram(2, &rigid)),
    ];
    let (_dir, path) = pcap(&frames);
    let path = path.to_str().unwrap();
    let port = PORT.to_string();

    let read = lines(&[path, "--port", &port]);
    assert_eq!(read.len(), 6, "{read:?}");
    assert_eq!(read[0]["connect"], true);
    assert_eq!(read[1]["connect"], true);
    let created = &read[2]["blocks"][0]["readable"];
    assert_eq!(created["components"][0]["type"], "Name", "{created}");
    // Viewer b's connection never saw the CreateEntity: its edit cannot be
    // named, and the note says how to name it.
    let unnamed = &read[3]["blocks"][0]["readable"]["blocks"][0];
    assert_eq!(unnamed["type"], Value::Null, "{unnamed}");
    assert!(
        unnamed["note"]
            .as_str()
            .unwrap()
            .contains("--component ID=TYPE"),
        "{unnamed}"
    );
    // Viewer a's edit is named from the CreateEntity on its connection.
    let named = &read[4]["blocks"][0]["readable"]["blocks"][0];
    assert_eq!(named["type"], "Name", "{named}");
    assert_eq!(named["attributes"][0]["id"], "description");
    assert_eq!(named["attributes"][0]["value"], "lamp");
    // Metres and degrees.
    let record = &read[5]["blocks"][0]["readable"]["entities"][0];
    assert_eq!(record["entity_id"], 7, "{record}");
    assert_eq!(record["position_m"], serde_json::json!([10.5, 1.0, -3.25]));
    assert_eq!(record["rotation_deg"][1], -90.0);

    // A component created before the capture began, named by the operator.
    let given = lines(&[path, "--port", &port, "--component", "3=Name"]);
    let named = &given[3]["blocks"][0]["readable"]["blocks"][0];
    assert_eq!(named["type"], "Name", "{named}");
    assert_eq!(named["attributes"][0]["value"], "lamp");
    // A type the registry does not know is refused, not guessed.
    assert!(
        !inspect(&[path, "--port", &port, "--component", "3=NoSuchType"])
            .status
            .success()
    );
}
