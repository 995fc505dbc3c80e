//! Fuzz target: one kNet UDP datagram (parse, split ids, re-encode, re-parse).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lessgate::fuzz::knet::fuzz_datagram(data));
