//! Replays the saved fuzz corpus (`tests/fuzz/corpus/tundra_frame/`) through
//! the same library function the fuzz target calls, on stable Rust.

use std::path::PathBuf;

use lessgate::tundra::messages::{DecodeContext, Message};
use lessgate::tundra::{ProtocolVersion, Registry};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus/tundra_frame");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn corpus_replays_without_panics() {
    let corpus = corpus();
    assert!(corpus.len() >= 20, "corpus has {} files", corpus.len());
    for (_, data) in &corpus {
        lessgate::tundra::fuzz_decode_frame(data);
    }
}

#[test]
fn seed_inputs_decode_and_re_encode_byte_for_byte() {
    let registry = Registry::builtin();
    for (name, data) in corpus() {
        let Some((&selector, frame)) = data.split_first() else {
            continue;
        };
        let protocol = ProtocolVersion(u32::from(selector % 4) + 1);
        let ctx = DecodeContext {
            protocol_version: protocol,
            registry: &registry,
        };
        // Seeds are canonical frames, except the custom-type one, whose type
        // the built-in registry does not know (it stays opaque).
        let message = Message::decode_frame(frame, &ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(message.encode_frame(protocol).unwrap(), frame, "{name}");
    }
}
