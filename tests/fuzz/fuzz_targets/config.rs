//! Fuzz target: see lessgate::config::fuzz::config.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::config::fuzz::config(data);
});
