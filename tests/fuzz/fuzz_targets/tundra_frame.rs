//! Fuzz target: one Tundra frame (first byte picks the protocol version).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lessgate::fuzz::tundra_frame::decode_frame(data));
