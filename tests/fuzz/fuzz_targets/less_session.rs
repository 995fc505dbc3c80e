#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::less::session(data);
});
