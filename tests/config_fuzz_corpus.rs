//! Replays the saved fuzz corpus of `config` (tests/fuzz/corpus/config/)
//! through the same library function the fuzz target calls, on stable
//! Rust: node configuration files and peer files, parsed and validated.

mod fuzz_corpus;

use fuzz_corpus::corpus;
use lessgate::fuzz::config::config;

#[test]
fn config_corpus_replays_and_seeds_are_accepted() {
    let inputs = corpus("config");
    assert!(inputs.len() >= 4, "seed corpus present");
    let mut accepted = 0;
    for (name, input) in &inputs {
        let ok = config(input);
        if name.starts_with("seed-") {
            assert!(ok, "{name} is a valid file");
        }
        accepted += usize::from(ok);
    }
    assert!(accepted >= 4, "{accepted} accepted");
}
