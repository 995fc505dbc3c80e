//! Replays the saved fuzz corpora (tests/fuzz/corpus/<target>/) through the
//! same library functions the fuzz targets call, on stable Rust.

mod fuzz_corpus;

use fuzz_corpus::corpus;

#[test]
fn less_packet_corpus_replays() {
    let inputs = corpus("less_packet");
    assert!(inputs.len() >= 5, "seed corpus present");
    for (_, input) in &inputs {
        lessgate::less::fuzz::packet(input);
    }
}

#[test]
fn less_session_corpus_replays_and_reaches_past_the_signature() {
    let inputs = corpus("less_session");
    assert!(inputs.len() >= 3, "seed corpus present");
    for (_, input) in &inputs {
        lessgate::less::fuzz::session(input);
    }
    for seed in ["datagram_flow", "stream_flow"] {
        let (_, input) = inputs.iter().find(|(name, _)| name == seed).unwrap();
        let (accepted, events) = lessgate::less::fuzz::session(input);
        assert!(accepted >= 3, "{seed}: {accepted} packets accepted");
        assert!(events >= 3, "{seed}: {events} events");
    }
}
