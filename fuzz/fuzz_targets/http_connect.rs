//! `cargo fuzz run http_connect`: see `fastpath_fuzz::TARGETS` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastpath_fuzz::tunnel::http_connect(data));
