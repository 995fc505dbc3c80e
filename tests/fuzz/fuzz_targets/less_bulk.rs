//! Fuzz target: see lessgate::fuzz::less_bulk::bulk.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::less_bulk::bulk(data);
});
