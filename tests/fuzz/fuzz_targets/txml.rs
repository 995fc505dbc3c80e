//! Fuzz target: see lessgate::fuzz::txml::txml.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::txml::txml(data);
});
