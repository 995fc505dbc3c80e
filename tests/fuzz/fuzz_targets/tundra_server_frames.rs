//! Fuzz target: see lessgate::server::fuzz::frames.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::server::fuzz::frames(data);
});
