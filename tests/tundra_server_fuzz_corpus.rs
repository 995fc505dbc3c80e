//! Replays the saved fuzz corpus of `tundra_server_frames`
//! (tests/fuzz/corpus/tundra_server_frames/) through the same library
//! function the fuzz target calls, on stable Rust: a node with a loaded
//! scene and logged-in clients, fed client frames, ticks and reconnects.

mod fuzz_corpus;

use fuzz_corpus::{check_seeds, corpus};
use lessgate::fuzz::tundra_server::{frames, frames_seeds};

#[test]
fn tundra_server_frames_corpus_replays_and_seeds_reach_the_scene() {
    let seeds = frames_seeds();
    check_seeds("tundra_server_frames", &seeds);
    for (name, seed) in &seeds {
        let outcome = frames(seed);
        assert!(outcome.frames_in > 4, "{name}: {outcome:?}");
    }
    let inputs = corpus("tundra_server_frames");
    assert!(inputs.len() >= seeds.len());
    let mut frames_in = 0;
    for (_, input) in &inputs {
        frames_in += frames(input).frames_in;
    }
    assert!(frames_in >= inputs.len() as u64, "{frames_in} frames in");
}
