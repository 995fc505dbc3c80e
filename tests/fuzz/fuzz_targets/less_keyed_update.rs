//! Fuzz target: see lessgate::less::fuzz_encodings::keyed_update.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::less::fuzz_encodings::keyed_update(data);
});
