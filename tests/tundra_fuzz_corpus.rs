//! Replays the saved fuzz corpora of `tundra_frame`, `txml` and
//! `asset_storage`
//! (`tests/fuzz/corpus/<target>/`) through the same library functions the
//! fuzz targets call, on stable Rust.

mod fuzz_corpus;

use fuzz_corpus::corpus;

use lessgate::tundra::messages::{DecodeContext, Message};
use lessgate::tundra::{ProtocolVersion, Registry};

/// Inputs the fuzzer found are named `found-*`; the others are seeds.
fn is_seed(name: &str) -> bool {
    !name.starts_with("found-")
}

#[test]
fn corpus_replays_without_panics() {
    let corpus = corpus("tundra_frame");
    assert!(corpus.len() >= 20, "corpus has {} files", corpus.len());
    for (_, data) in &corpus {
        lessgate::fuzz::tundra_frame::decode_frame(data);
    }
}

#[test]
fn seed_inputs_decode_and_re_encode_byte_for_byte() {
    let registry = Registry::builtin();
    let seeds: Vec<_> = corpus("tundra_frame")
        .into_iter()
        .filter(|(name, _)| is_seed(name))
        .collect();
    assert!(seeds.len() >= 20, "{} seeds", seeds.len());
    for (name, data) in seeds {
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

#[test]
fn txml_corpus_replays_and_seed_scenes_import() {
    let inputs = corpus("txml");
    let mut seeds = 0;
    for (name, input) in &inputs {
        let imported = lessgate::fuzz::txml::txml(input);
        if is_seed(name) {
            assert!(imported >= 1, "{name}: {imported} entities imported");
            seeds += 1;
        }
    }
    assert!(seeds >= 5, "{seeds} seed scenes");
}

#[test]
fn asset_storage_corpus_replays_and_seed_replies_parse() {
    let inputs = corpus("asset_storage");
    let mut with_storages = 0;
    for (name, input) in &inputs {
        let read = lessgate::fuzz::asset_storage::login_reply(input);
        if is_seed(name) && read > 0 {
            with_storages += 1;
        }
    }
    // Every seed but the captured empty-scene reply and the two without a
    // storage names at least one.
    assert!(with_storages >= 5, "{with_storages} seeds with storages");
}
