//! `cargo fuzz run ethernet`: see `fastpath_fuzz::TARGETS` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastpath_fuzz::link::ethernet(data));
