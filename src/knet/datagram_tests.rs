//! Unit tests of `datagram.rs`: the vectors of docs/knet-wire.md §6.1 and §6.3,
//! every parse error of §4.11, and the writer's limits.

use super::*;

fn h(text: &str) -> Vec<u8> {
    hex::decode(text.replace(' ', "")).unwrap()
}

/// A hex vector that lives for the whole test (parsed blocks borrow it).
fn hs(text: &str) -> &'static [u8] {
    Box::leak(h(text).into_boxed_slice())
}

fn parse_all(bytes: &[u8]) -> (DatagramHeader, Vec<Block<'_>>) {
    let (header, blocks) = parse_datagram(bytes).unwrap();
    (header, blocks.map(Result::unwrap).collect())
}

/// Parses, re-encodes with the same packet id and checks the bytes match.
fn assert_round_trip(bytes: &[u8]) {
    let (header, blocks) = parse_all(bytes);
    let outs: Vec<BlockOut> = blocks.iter().map(|b| b.to_out().unwrap()).collect();
    let mut again = Vec::new();
    write_datagram(&mut again, header.packet_id, &outs).unwrap();
    assert_eq!(hex::encode(&again), hex::encode(bytes));
    let len = header_len(reliable_base(&outs))
        + outs
            .iter()
            .map(|b| block_len(b, reliable_base(&outs)))
            .sum::<usize>();
    assert_eq!(len, bytes.len(), "block_len sums to the datagram length");
}

fn message(block: &Block) -> (u32, Vec<u8>) {
    let (id, rest) = block.split_message_id().unwrap();
    (id.0, rest.to_vec())
}

const LOGIN_XML: &str = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n\t<password value=\"\" />\n\t<protocol value=\"udp\" />\n\t<address value=\"127.0.0.1\" />\n\t<port value=\"41234\" />\n\t<client-version value=\"2.5.4.1\" />\n\t<client-name value=\"Name\" />\n\t<client-organization value=\"Org\" />\n</login>\n";
const REPLY_XML: &str =
    "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n";

#[test]
fn pings_u2_u3_u4_u8_u9_d1() {
    let (header, blocks) = parse_all(hs("81 00 00 02 20 01 01 02 20 01 02"));
    assert_eq!(header.packet_id, PacketId::new(1));
    assert!(header.in_order && !header.reliable && header.reliable_base.is_none());
    assert_eq!(blocks.len(), 2);
    assert_eq!(message(&blocks[0]), (1, vec![1]));
    assert_eq!(message(&blocks[1]), (1, vec![2]));
    assert!(blocks[0].in_order && blocks[0].reliable_number.is_none());
    assert_eq!(blocks[0].fragment, FragmentInfo::Whole);
    let (_, blocks) = parse_all(hs("85 00 00 02 20 02 03 02 20 01 02"));
    assert_eq!(message(&blocks[0]), (2, vec![3]));
    assert_eq!(message(&blocks[1]), (1, vec![2]));
    let (header, blocks) = parse_all(hs("a4 01 00 02 20 01 07"));
    assert_eq!(header.packet_id, PacketId::new(100));
    assert_eq!(message(&blocks[0]), (1, vec![7]));
    for vector in [
        "81 00 00 02 20 01 01 02 20 01 02",
        "81 00 00 02 20 02 01 02 20 02 02",
        "82 00 00 02 20 01 01",
        "85 00 00 02 20 01 03",
        "85 00 00 02 20 02 03 02 20 01 02",
        "a4 01 00 02 20 01 07",
    ] {
        assert_round_trip(&h(vector));
    }
}

#[test]
fn login_u5() {
    assert_eq!(LOGIN_XML.len(), 275);
    let mut bytes = h("c3 00 00 00 00 17 31 00 64 13 01");
    bytes.extend_from_slice(LOGIN_XML.as_bytes());
    bytes.push(0x04);
    assert_eq!(bytes.len(), 287);
    let (header, blocks) = parse_all(&bytes);
    assert_eq!(header.packet_id, PacketId::new(3));
    assert_eq!(header.reliable_base, Some(0));
    assert_eq!(blocks[0].reliable_number, Some(ReliableNumber(0)));
    assert_eq!(blocks[0].content.len(), 279);
    let (id, payload) = message(&blocks[0]);
    assert_eq!(id, 100);
    assert_eq!(&payload[..2], &275u16.to_le_bytes());
    assert_eq!(&payload[2..277], LOGIN_XML.as_bytes());
    assert_eq!(payload[277], 4);
    assert_round_trip(&bytes);
}

#[test]
fn client_joined_and_login_reply_u6() {
    assert_eq!(REPLY_XML.len(), 77);
    let mut bytes =
        h("c3 00 00 00 00 0a 30 00 66 01 06 00 74 65 73 74 65 72 53 30 01 65 01 01 4d 00");
    bytes.extend_from_slice(REPLY_XML.as_bytes());
    bytes.push(0x04);
    assert_eq!(bytes.len(), 104);
    let (_, blocks) = parse_all(&bytes);
    assert_eq!(blocks.len(), 2);
    assert_eq!(message(&blocks[0]), (102, h("01 06 00 74 65 73 74 65 72")));
    assert_eq!(blocks[1].reliable_number, Some(ReliableNumber(1)));
    assert_eq!(message(&blocks[1]).0, 101);
    assert_round_trip(&bytes);
}

#[test]
fn acks_and_disconnects_u7_u10_u11_u12_d3() {
    let (_, blocks) = parse_all(hs("84 00 00 08 20 04 03 00 00 00 00 00 00"));
    assert_eq!(message(&blocks[0]), (4, h("03 00 00 00 00 00 00")));
    let (header, blocks) = parse_all(hs("cc 00 00 01 00 04 30 00 ff ff ff ff"));
    assert_eq!(header.packet_id, PacketId::new(12));
    assert_eq!(header.reliable_base, Some(1));
    assert_eq!(blocks[0].reliable_number, Some(ReliableNumber(1)));
    assert_eq!(message(&blocks[0]), (0x3FFF_FFFF, vec![]));
    let (header, blocks) = parse_all(hs("93 00 00 04 20 fe ff ff ff"));
    assert_eq!(header.packet_id, PacketId::new(19));
    assert_eq!(message(&blocks[0]), (0x3FFF_FFFE, vec![]));
    for vector in [
        "84 00 00 08 20 04 03 00 00 00 00 00 00",
        "cc 00 00 01 00 04 30 00 ff ff ff ff",
        "93 00 00 04 20 fe ff ff ff",
        "c6 00 00 02 00 04 30 00 ff ff ff ff",
        "85 00 00 08 20 04 fe ff 3f 07 00 00 00",
        "84 00 00 08 20 04 03 00 00 07 00 00 00",
    ] {
        assert_round_trip(&h(vector));
    }
}

#[test]
fn wide_base_and_deltas_d2() {
    let bytes = h("ff ff ff 40 9c 01 00 03 30 00 74 00 05 03 30 c8 01 74 00 06");
    let (header, blocks) = parse_all(&bytes);
    assert_eq!(header.packet_id, PacketId::new(0x3F_FFFF));
    assert_eq!(header.reliable_base, Some(40000));
    assert_eq!(blocks[0].reliable_number, Some(ReliableNumber(40000)));
    assert_eq!(blocks[1].reliable_number, Some(ReliableNumber(40200)));
    assert_eq!(message(&blocks[1]), (0x74, h("00 06")));
    assert_round_trip(&bytes);
}

#[test]
fn no_flags_d4() {
    let bytes = h("09 00 00 03 00 69 00 00");
    let (header, blocks) = parse_all(&bytes);
    assert_eq!(header.packet_id, PacketId::new(9));
    assert!(!header.reliable && !header.in_order);
    assert!(!blocks[0].in_order && blocks[0].reliable_number.is_none());
    assert_eq!(message(&blocks[0]), (105, h("00 00")));
    assert_round_trip(&bytes);
}

#[test]
fn fragments_f1_f2_f4() {
    let chunk: Vec<u8> = (0..FRAGMENT_CHUNK).map(|i| i as u8).collect();
    let mut bytes = h("c5 00 00 02 00 3f f1 00 07 01 6e");
    bytes.extend_from_slice(&chunk);
    assert_eq!(bytes.len(), 329, "F2 starts at offset 329");
    bytes.extend_from_slice(&h("3e 71 01 01 01"));
    bytes.extend_from_slice(&chunk);
    let (header, blocks) = parse_all(&bytes);
    assert_eq!(header.reliable_base, Some(2));
    let start = FragmentInfo::Start {
        count: 7,
        transfer: TransferId(1),
    };
    assert_eq!(blocks[0].fragment, start);
    assert_eq!(blocks[0].content.len(), 319);
    assert_eq!(message(&blocks[0]), (110, chunk.clone()));
    let part = FragmentInfo::Part {
        transfer: TransferId(1),
        index: 1,
    };
    assert_eq!(blocks[1].fragment, part);
    assert_eq!(blocks[1].reliable_number, Some(ReliableNumber(3)));
    assert_eq!(blocks[1].content, &chunk[..]);
    assert_eq!(blocks[1].split_message_id(), Err(KnetError::NoMessageId));
    assert_round_trip(&bytes);
    // F4: fragments 4 and 5 (318 bytes) and 6 (hdr 0x7072, delta 2, 114
    // bytes) in a 770-byte datagram with base 6.
    let mut f4 = h("c6 00 00 06 00 3e 71 00 01 04");
    f4.extend_from_slice(&chunk);
    assert_eq!(f4.len(), 328);
    f4.extend_from_slice(&h("3e 71 01 01 05"));
    f4.extend_from_slice(&chunk);
    assert_eq!(f4.len(), 651);
    f4.extend_from_slice(&h("72 70 02 01 06"));
    f4.extend_from_slice(&chunk[..114]);
    assert_eq!(f4.len(), 770);
    let f4: &'static [u8] = Box::leak(f4.into_boxed_slice());
    let (_, blocks) = parse_all(f4);
    let numbers: Vec<_> = blocks
        .iter()
        .map(|b| b.reliable_number.unwrap().0)
        .collect();
    assert_eq!(numbers, vec![6, 7, 8]);
    assert_eq!(
        blocks[2].fragment,
        FragmentInfo::Part {
            transfer: TransferId(1),
            index: 6
        }
    );
    assert_eq!(blocks[2].content.len(), 114);
    assert_round_trip(f4);
}

#[test]
fn tolerated_variants() {
    // Bit 11 set: ignored on parse; the writer emits it clear.
    let (_, blocks) = parse_all(hs("01 00 00 02 28 01 07"));
    assert_eq!(message(&blocks[0]), (1, vec![7]));
    // FragmentStart without bit 14 is still a start.
    let (_, blocks) = parse_all(hs("01 00 00 02 80 02 09 05 00"));
    let start = FragmentInfo::Start {
        count: 2,
        transfer: TransferId(9),
    };
    assert_eq!(blocks[0].fragment, start);
    // A reliable block without the header's Reliable flag: base 0.
    let (header, blocks) = parse_all(hs("01 00 00 02 10 05 01 07"));
    assert_eq!(header.reliable_base, None);
    assert_eq!(blocks[0].reliable_number, Some(ReliableNumber(5)));
    // A header alone is a datagram with no blocks.
    assert_eq!(parse_all(hs("01 00 00")).1.len(), 0);
}

#[test]
fn parse_errors_of_section_4_11() {
    assert_eq!(
        parse_datagram(&h("81 00")).err(),
        Some(KnetError::ShortDatagram(2))
    );
    let first_error = |text: &str| {
        let bytes = h(text);
        let (_, mut blocks) = parse_datagram(&bytes).unwrap();
        let error = blocks.find_map(Result::err).unwrap();
        assert!(blocks.next().is_none(), "nothing after an error");
        error
    };
    // U1, the connect datagram, is not a kNet datagram.
    assert_eq!(
        first_error("00 00 00 00 00 00 00 00"),
        KnetError::EmptyContent
    );
    assert_eq!(
        first_error("01 00 00 05 00 01"),
        KnetError::ContentBeyondEnd { len: 5, left: 1 }
    );
    assert_eq!(
        first_error("01 00 00 02 c0 01 01 05"),
        KnetError::BadFragmentCount(1)
    );
    assert_eq!(
        first_error("01 00 00 02 40 01 00 05 05"),
        KnetError::BadFragmentIndex { index: 0 }
    );
    assert_eq!(
        first_error("01 00 00 02 20 01 07 ff"),
        KnetError::Truncated {
            what: "message block header"
        }
    );
    assert_eq!(
        first_error("01 00 00 02 c0 80"),
        KnetError::BadVle {
            what: "fragment count"
        }
    );
    assert_eq!(
        parse_datagram(&h("41 00 00 00")).err(),
        Some(KnetError::BadVle {
            what: "reliable base"
        })
    );
    // A block whose id VLE is cut short by its own content length.
    let (_, mut blocks) = parse_datagram(&[1, 0, 0, 1, 0, 0x80]).unwrap();
    let block = blocks.next().unwrap().unwrap();
    assert_eq!(
        block.split_message_id(),
        Err(KnetError::BadVle { what: "message id" })
    );
}

fn whole(id: u32, payload: &[u8], number: Option<u32>) -> BlockOut<'_> {
    BlockOut {
        in_order: true,
        reliable_number: number.map(ReliableNumber),
        fragment: FragmentInfo::Whole,
        message_id: Some(MessageId(id)),
        payload,
    }
}

#[test]
fn writer_limits() {
    let mut out = vec![0xAA];
    let big = vec![0; MAX_CONTENT_LEN];
    let cases = [
        (
            vec![whole(100, &big, None)],
            KnetError::TooLarge {
                what: "message content",
                len: 2048,
                max: 2047,
            },
        ),
        (
            vec![whole(1, &[], Some(0)), whole(1, &[], Some(32768))],
            KnetError::DeltaTooLarge(32768),
        ),
        (
            vec![whole(0x4000_0000, &[], None)],
            KnetError::MessageIdTooLarge(0x4000_0000),
        ),
        (
            vec![BlockOut {
                message_id: None,
                ..whole(1, &[1], None)
            }],
            KnetError::Inconsistent("no message id on a whole or start block"),
        ),
        (
            vec![BlockOut {
                fragment: FragmentInfo::Part {
                    transfer: TransferId(1),
                    index: 1,
                },
                message_id: None,
                ..whole(1, &[], Some(0))
            }],
            KnetError::EmptyContent,
        ),
        (
            vec![BlockOut {
                fragment: FragmentInfo::Start {
                    count: 1,
                    transfer: TransferId(1),
                },
                ..whole(1, &[], Some(0))
            }],
            KnetError::BadFragmentCount(1),
        ),
    ];
    for (blocks, error) in cases {
        assert_eq!(
            write_datagram(&mut out, PacketId::FIRST, &blocks),
            Err(error)
        );
        assert_eq!(out, vec![0xAA], "nothing written on error");
    }
    // 2047 bytes of content is the most a block carries.
    write_datagram(&mut out, PacketId::FIRST, &[whole(100, &big[1..], None)]).unwrap();
    assert_eq!(out.len(), 1 + 3 + 2 + 2047);
}

#[test]
fn base_is_the_wrap_aware_minimum() {
    let blocks = [
        whole(1, &[], Some(2)),
        whole(1, &[], Some(u32::MAX - 1)),
        whole(1, &[], Some(0)),
    ];
    assert_eq!(reliable_base(&blocks), Some(ReliableNumber(u32::MAX - 1)));
    // Past 2^31 the base no longer fits VLE16_32 (kNet asserts).
    let mut out = Vec::new();
    assert!(matches!(
        write_datagram(&mut out, PacketId::FIRST, &blocks),
        Err(KnetError::OutOfRange { .. })
    ));
    let blocks = [whole(1, &[], Some(40200)), whole(1, &[], Some(40000))];
    write_datagram(&mut out, PacketId::new(0x3F_FFFF), &blocks).unwrap();
    assert_eq!(hex::encode(&out), "ffffff409c01000130c8010101300001");
}
