//! Fuzz target: see lessgate::fuzz::tundra_server::frames.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::tundra_server::frames(data);
});
