//! Fuzz target: see lessgate::tundra::fuzz_txml::txml.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::tundra::fuzz_txml::txml(data);
});
