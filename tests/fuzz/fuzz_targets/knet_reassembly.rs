//! Fuzz target: kNet fragment reassembly, directly and through a UDP
//! connection (fragments in any order, duplicated, inconsistent).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lessgate::fuzz::knet::fuzz_reassembly(data));
