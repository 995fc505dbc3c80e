//! Replays the saved kNet fuzz corpora (`tests/fuzz/corpus/knet_datagram/`
//! and `knet_stream/`) through the same library functions the fuzz targets
//! call, on stable Rust, and checks the seeds (made from the captures in
//! `tests/data/knet/`) are what they claim: valid kNet.

use std::fs;
use std::path::PathBuf;

use lessgate::knet::datagram::parse_datagram;
use lessgate::knet::stream::{StreamDecoder, MAX_STREAM_MESSAGE};

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    inputs
}

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
        lessgate::knet::fuzz::fuzz_datagram(input);
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
        lessgate::knet::fuzz::fuzz_stream(input);
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
