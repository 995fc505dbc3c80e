//! Fuzz target: a kNet TCP stream (first 4 bytes: chunk sizes; the rest is fed in chunks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lessgate::fuzz::knet::fuzz_stream(data));
