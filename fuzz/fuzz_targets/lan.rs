//! `cargo fuzz run lan`: see `fastpath_fuzz::TARGETS` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastpath_fuzz::lan::lan(data));
