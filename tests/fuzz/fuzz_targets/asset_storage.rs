//! Fuzz target: see lessgate::fuzz::asset_storage::login_reply.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::fuzz::asset_storage::login_reply(data);
});
