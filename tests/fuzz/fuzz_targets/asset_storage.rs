//! Fuzz target: see lessgate::tundra::fuzz_asset_storage::login_reply.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lessgate::tundra::fuzz_asset_storage::login_reply(data);
});
