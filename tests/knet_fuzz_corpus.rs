//! Replays the saved kNet fuzz corpora (`tests/fuzz/corpus/knet_datagram/`
//! and `knet_stream/`) through the same library functions the fuzz targets
//! call, on stable Rust, and checks the seeds (made from the captures in
//! `tests/data/knet/`) are what they claim: valid kNet.

mod fuzz_corpus;

use fuzz_corpus::corpus;

use lessgate::knet::datagram::parse_datagram;
use lessgate::knet::stream::{StreamDecoder, MAX_STREAM_MESSAGE};

/// Seeds are named after their capture or vector; anything else in the
/// directory was found by the fuzzer and only has to replay.
fn is_seed(name: &str) -> bool {
    name.starts_with("udp-") || name.starts_with("tcp-") || name.starts_with('d')
}

#[test]
fn knet_datagram_corpus_replays_and_seeds_parse() {
    let inputs = corpus("knet_datagram");
    assert!(inputs.len() >= 20, "seed corpus present");
    let mut parsed = 0;
    for (name, input) in &inputs {
        lessgate::fuzz::knet::fuzz_datagram(input);
        // The connect datagram (8 zero bytes) is not kNet: its first block
        // has ContentLength 0 and is refused.
        if !is_seed(name) || input == &[0; 8] {
            continue;
        }
        let (_, blocks) = parse_datagram(input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let blocks: Vec<_> = blocks.collect::<Result<_, _>>().unwrap();
        assert!(!blocks.is_empty(), "{name}");
        parsed += 1;
    }
    assert!(parsed >= 20, "{parsed} seeds parsed");
}

#[test]
fn knet_stream_corpus_replays_and_seeds_decode() {
    let inputs = corpus("knet_stream");
    assert!(inputs.len() >= 3, "seed corpus present");
    for (name, input) in &inputs {
        lessgate::fuzz::knet::fuzz_stream(input);
        if !is_seed(name) {
            continue;
        }
        // The first 4 bytes pick the chunk sizes; the rest is the stream.
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&input[4..]);
        let mut messages = 0;
        while let Some(_message) = decoder.next_message().unwrap() {
            messages += 1;
        }
        assert!(messages >= 2, "{name}: {messages} messages");
        assert_eq!(decoder.buffered(), 0, "{name} ends on a message boundary");
    }
}

#[test]
fn knet_reassembly_corpus_replays() {
    let inputs = corpus("knet_reassembly");
    assert!(inputs.len() >= 8, "seed corpus present");
    for (_, input) in &inputs {
        lessgate::fuzz::knet::fuzz_reassembly(input);
    }
}

/// The in-order and reordered seeds are real transfers: they assemble to
/// the same 219 bytes, in index order whatever the arrival order.
#[test]
fn knet_reassembly_seeds_assemble_in_index_order() {
    use lessgate::knet::ids::{MessageId, TransferId};
    use lessgate::knet::udp::reassembly::Reassembly;

    let expected: Vec<u8> = (0..200u8).chain(0..19).collect();
    for seed in ["seed-in-order", "seed-reordered"] {
        let input = corpus("knet_reassembly")
            .into_iter()
            .find(|(name, _)| name == seed)
            .unwrap()
            .1;
        let mut reassembly = Reassembly::new(1 << 20, 1 << 20);
        let mut rest = &input[..];
        let mut assembled = None;
        while rest.len() >= 5 {
            let transfer = TransferId(rest[1]);
            let value = u32::from(u16::from_le_bytes([rest[2], rest[3]]));
            let len = usize::from(rest[4]);
            let chunk = &rest[5..5 + len];
            let result = if rest[0] & 1 == 0 {
                reassembly.handle_start(transfer, value, MessageId(100), chunk)
            } else {
                reassembly.handle_part(transfer, value, chunk)
            };
            if let Some(message) = result.unwrap() {
                assembled = Some(message);
            }
            rest = &rest[5 + len..];
        }
        let (id, payload) = assembled.unwrap_or_else(|| panic!("{seed} assembles"));
        assert_eq!(id, MessageId(100));
        assert_eq!(&payload[..], &expected[..], "{seed}");
        assert_eq!(reassembly.buffered(), 0, "{seed} leaves nothing buffered");
    }
}
