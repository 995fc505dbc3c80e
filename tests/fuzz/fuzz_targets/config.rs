//! Fuzz target: see lessgate::fuzz::config::config.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::config::config(data);
});
