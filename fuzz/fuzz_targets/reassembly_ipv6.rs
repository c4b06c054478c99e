//! `cargo fuzz run reassembly_ipv6`: see `fastpath_fuzz::TARGETS` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastpath_fuzz::reassembly::reassembly_ipv6(data));
