//! The kNet codecs against real captures (`tests/data/knet/*.jsonl`, between
//! a real tundra-urho3d server and real or test clients; docs/knet-wire.md
//! §6): every UDP datagram parses with all its blocks and re-encodes byte
//! for byte; every TCP direction decodes to whole messages and re-frames
//! byte for byte; the Login, the fragmented CreateEntity and the
//! retransmissions carry what docs/knet-wire.md says.

use std::path::PathBuf;

use lessgate::knet::datagram::{
    parse_datagram, write_datagram, Block, BlockOut, DatagramHeader, FragmentInfo,
    MAX_SEND_DATAGRAM,
};
use lessgate::knet::ids::{MessageId, PacketId, ReliableNumber, TransferId};
use lessgate::knet::message::PacketAck;
use lessgate::knet::stream::{write_stream_message, StreamDecoder, MAX_STREAM_MESSAGE};
use lessgate::tundra::{DecodeContext, Message, ProtocolVersion, Registry};

/// One captured datagram or TCP segment.
struct Row {
    dir: String,
    bytes: Vec<u8>,
}

fn capture(name: &str) -> Vec<Row> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/knet")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).unwrap();
            Row {
                dir: json["dir"].as_str().unwrap().to_owned(),
                bytes: hex::decode(json["hex"].as_str().unwrap()).unwrap(),
            }
        })
        .collect()
}

const UDP_CAPTURES: [&str; 4] = [
    "udp-login-ping-disconnect.jsonl",
    "udp-fragmented-createentity.jsonl",
    "udp-noack-retransmit.jsonl",
    "udp-server-disconnect.jsonl",
];

/// The connect datagram (§4.8): 8 zero bytes, not a kNet datagram.
const CONNECT_DATAGRAM: [u8; 8] = [0; 8];

/// The kNet datagrams of a UDP capture, connect datagram left out.
fn datagrams(name: &str) -> Vec<Row> {
    let rows = capture(name);
    assert_eq!(
        rows[0].bytes, CONNECT_DATAGRAM,
        "{name} starts with a connect"
    );
    rows.into_iter().skip(1).collect()
}

fn parse(bytes: &[u8]) -> (DatagramHeader, Vec<Block<'_>>) {
    let (header, blocks) = parse_datagram(bytes).unwrap();
    let blocks = blocks
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", hex::encode(bytes)));
    (header, blocks)
}

#[test]
fn every_udp_datagram_parses_and_re_encodes_identically() {
    let mut count = 0;
    for name in UDP_CAPTURES {
        for row in datagrams(name) {
            assert!(row.bytes.len() <= MAX_SEND_DATAGRAM, "{name}");
            let (header, blocks) = parse(&row.bytes);
            assert!(!blocks.is_empty(), "{name}: {}", hex::encode(&row.bytes));
            let outs: Vec<BlockOut> = blocks.iter().map(|b| b.to_out().unwrap()).collect();
            for out in &outs {
                if out.message_id == Some(MessageId::PACKET_ACK) {
                    PacketAck::decode(out.payload).unwrap();
                }
            }
            // The captures come from kNet's own encoder: same header flags
            // (any reliable / any inOrder), same base (smallest number),
            // both fragment bits on a start, bit 11 clear, canonical VLEs.
            let mut again = Vec::new();
            write_datagram(&mut again, header.packet_id, &outs).unwrap();
            assert_eq!(hex::encode(&again), hex::encode(&row.bytes), "{name}");
            count += 1;
        }
    }
    assert_eq!(count, 31 + 25 + 32 + 11);
}

#[test]
fn every_tcp_direction_decodes_to_whole_messages() {
    let rows = capture("tcp-login-ping-close.jsonl");
    for dir in ["c2s", "s2c"] {
        let stream: Vec<u8> = rows
            .iter()
            .filter(|r| r.dir == dir)
            .flat_map(|r| r.bytes.iter().copied())
            .collect();
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&stream);
        let mut messages = Vec::new();
        while let Some(message) = decoder.next_message().unwrap() {
            messages.push(message);
        }
        assert_eq!(decoder.buffered(), 0, "{dir} ends on a message boundary");
        let mut again = Vec::new();
        for (id, payload) in &messages {
            write_stream_message(&mut again, *id, payload);
        }
        assert_eq!(again, stream, "{dir} re-frames byte for byte");
        let ids: Vec<u32> = messages.iter().map(|m| m.0 .0).collect();
        // 8 pings each way, each answered; the login exchange.
        let tundra: Vec<u32> = ids.iter().copied().filter(|&id| id >= 100).collect();
        assert_eq!(ids.iter().filter(|&&id| id <= 2).count(), 16, "{dir}");
        let expected = if dir == "c2s" {
            vec![100]
        } else {
            vec![102, 101]
        };
        assert_eq!(tundra, expected);
        // Only pings on TCP (§3.2): never ids 3, 4 or the disconnect ids.
        assert!(ids.iter().all(|&id| id == 1 || id == 2 || id >= 100));
    }
}

/// §5.3: the native client's login XML, for protocol "udp" and port 41234.
const LOGIN_XML: &str = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n\t<password value=\"\" />\n\t<protocol value=\"udp\" />\n\t<address value=\"127.0.0.1\" />\n\t<port value=\"41234\" />\n\t<client-version value=\"2.5.4.1\" />\n\t<client-name value=\"Name\" />\n\t<client-organization value=\"Org\" />\n</login>\n";

fn decode_tundra(id: MessageId, payload: &[u8]) -> Message {
    let registry = Registry::builtin();
    let ctx = DecodeContext {
        protocol_version: ProtocolVersion(4),
        registry: &registry,
    };
    let id = u16::try_from(id.0).unwrap();
    Message::decode(id, payload, &ctx).unwrap()
}

#[test]
fn the_login_u5_carries_the_xml_of_section_5_3() {
    let rows = datagrams("udp-login-ping-disconnect.jsonl");
    let login = rows
        .iter()
        .find(|r| r.dir == "c2s" && r.bytes[0] & 0x40 != 0)
        .unwrap();
    assert_eq!(login.bytes.len(), 287);
    let (header, blocks) = parse(&login.bytes);
    assert_eq!(header.packet_id, PacketId::new(3));
    assert_eq!(blocks[0].reliable_number, Some(ReliableNumber(0)));
    let (id, payload) = blocks[0].split_message_id().unwrap();
    assert_eq!(id, MessageId(100));
    match decode_tundra(id, payload) {
        Message::Login(login) => {
            assert_eq!(login.login_data, LOGIN_XML);
            assert_eq!(login.protocol_version, Some(4));
        }
        other => panic!("{other:?}"),
    }
}

/// §6.1 F-table: the 2000-byte description `0000|0001|…|0399|`.
fn description() -> Vec<u8> {
    (0..400)
        .flat_map(|i| format!("{i:04}|").into_bytes())
        .collect()
}

#[test]
fn the_seven_fragments_reassemble_to_the_create_entity() {
    let rows = datagrams("udp-fragmented-createentity.jsonl");
    let mut count = None;
    let mut chunks: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut message_id = None;
    for row in rows.iter().filter(|r| r.dir == "s2c") {
        let (_, blocks) = parse(&row.bytes);
        for block in blocks {
            match block.fragment {
                FragmentInfo::Whole => {}
                FragmentInfo::Start { count: n, transfer } => {
                    assert_eq!(transfer, TransferId(1));
                    count = Some(n);
                    let (id, chunk) = block.split_message_id().unwrap();
                    message_id = Some(id);
                    chunks.push((0, chunk.to_vec()));
                }
                FragmentInfo::Part { transfer, index } => {
                    assert_eq!(transfer, TransferId(1));
                    chunks.push((index, block.content.to_vec()));
                }
            }
            // Every fragment is reliable, numbered 2..=8 (§4.7).
            if block.fragment != FragmentInfo::Whole {
                assert!(block.reliable_number.is_some());
            }
        }
    }
    assert_eq!(count, Some(7));
    assert_eq!(chunks.len(), 7);
    chunks.sort_by_key(|c| c.0);
    let indices: Vec<u32> = chunks.iter().map(|c| c.0).collect();
    assert_eq!(indices, (0..7).collect::<Vec<_>>());
    let payload: Vec<u8> = chunks.into_iter().flat_map(|c| c.1).collect();
    assert_eq!(payload.len(), 2022);
    assert_eq!(hex::encode(&payload[..10]), "0001000000000001011a");
    // Name block: `00` name, `d9 0f` 2009 bytes, "Big", `d0 07` + 2000.
    assert_eq!(hex::encode(&payload[10..18]), "00d90f0300426967");
    assert_eq!(hex::encode(&payload[18..20]), "d007");
    assert_eq!(&payload[20..2020], &description()[..]);
    assert_eq!(&payload[2020..], &[0, 0]);
    let id = message_id.unwrap();
    assert_eq!(id, MessageId(110));
    assert!(matches!(
        decode_tundra(id, &payload),
        Message::CreateEntity(_)
    ));
}

#[test]
fn retransmissions_repeat_blocks_under_new_packet_ids() {
    let rows = datagrams("udp-noack-retransmit.jsonl");
    // ClientJoined + LoginReply (numbers 0 and 1), first sent as packet 2.
    let first = rows
        .iter()
        .find(|r| r.dir == "s2c" && r.bytes.len() == 270)
        .unwrap();
    let (_, blocks) = parse(&first.bytes);
    let outs: Vec<BlockOut> = blocks.iter().map(|b| b.to_out().unwrap()).collect();
    let resent: Vec<u32> = rows
        .iter()
        .filter(|r| r.bytes.len() == 270)
        .map(|r| {
            let (header, _) = parse(&r.bytes);
            let mut again = Vec::new();
            write_datagram(&mut again, header.packet_id, &outs).unwrap();
            assert_eq!(again, r.bytes, "same blocks, new packet id");
            header.packet_id.get()
        })
        .collect();
    assert_eq!(resent, vec![2, 7, 11, 16, 20, 25]);
    let numbers: Vec<_> = blocks.iter().map(|b| b.reliable_number).collect();
    assert_eq!(
        numbers,
        vec![Some(ReliableNumber(0)), Some(ReliableNumber(1))]
    );
}
