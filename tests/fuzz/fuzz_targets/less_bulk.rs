//! Fuzz target: see lessgate::less::fuzz_bulk::bulk.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::less::fuzz_bulk::bulk(data);
});
