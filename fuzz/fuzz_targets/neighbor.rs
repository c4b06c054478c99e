//! `cargo fuzz run neighbor`: see `fastpath_fuzz::TARGETS` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastpath_fuzz::link::neighbor(data));
