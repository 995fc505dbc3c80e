//! Fuzz target: see lessgate::fuzz::less_encodings::encodings.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::less_encodings::encodings(data);
});
