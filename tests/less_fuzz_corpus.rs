//! Replays the saved fuzz corpora (tests/fuzz/corpus/<target>/) through the
//! same library functions the fuzz targets call, on stable Rust.

mod fuzz_corpus;

use fuzz_corpus::{check_seeds, corpus};

#[test]
fn less_packet_corpus_replays() {
    let inputs = corpus("less_packet");
    assert!(inputs.len() >= 5, "seed corpus present");
    for (_, input) in &inputs {
        lessgate::fuzz::less::packet(input);
    }
}

#[test]
fn less_session_corpus_replays_and_reaches_past_the_signature() {
    let inputs = corpus("less_session");
    assert!(inputs.len() >= 3, "seed corpus present");
    for (_, input) in &inputs {
        lessgate::fuzz::less::session(input);
    }
    for seed in ["datagram_flow", "stream_flow"] {
        let (_, input) = inputs.iter().find(|(name, _)| name == seed).unwrap();
        let (accepted, events) = lessgate::fuzz::less::session(input);
        assert!(accepted >= 3, "{seed}: {accepted} packets accepted");
        assert!(events >= 3, "{seed}: {events} events");
    }
}

#[test]
fn less_keyed_update_corpus_replays_and_seeds_decode_whole() {
    use lessgate::fuzz::less_encodings::{keyed_update, keyed_update_seeds};
    let seeds = keyed_update_seeds();
    check_seeds("less_keyed_update", &seeds);
    for (name, seed) in &seeds {
        assert_eq!(keyed_update(seed), usize::from(seed[0]), "{name}");
    }
    let inputs = corpus("less_keyed_update");
    assert!(inputs.len() >= seeds.len());
    let decoded: usize = inputs.iter().map(|(_, input)| keyed_update(input)).sum();
    assert!(decoded >= inputs.len() / 2, "{decoded} messages decoded");
}

#[test]
fn less_encodings_corpus_replays() {
    use lessgate::fuzz::less_encodings::{encodings, encodings_seeds};
    let seeds = encodings_seeds();
    check_seeds("less_encodings", &seeds);
    let inputs = corpus("less_encodings");
    assert!(inputs.len() >= seeds.len());
    for (_, input) in &inputs {
        encodings(input);
    }
}

#[test]
fn less_bulk_corpus_replays_and_session_seeds_deliver_bulk_packets() {
    use lessgate::fuzz::less_bulk::{bulk, bulk_seeds};
    let seeds = bulk_seeds();
    check_seeds("less_bulk", &seeds);
    let (_, session) = seeds.iter().find(|(n, _)| n == "seed-session").unwrap();
    assert!(
        bulk(session) >= 1,
        "a compressed introduction reaches the session"
    );
    let inputs = corpus("less_bulk");
    assert!(inputs.len() >= seeds.len());
    for (_, input) in &inputs {
        bulk(input);
    }
}
