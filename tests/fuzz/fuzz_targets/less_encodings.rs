//! Fuzz target: see lessgate::less::fuzz_encodings::encodings.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::less::fuzz_encodings::encodings(data);
});
