//! The parts of the `fastpath` command that read bytes from the network outside the stack, as a
//! library so that the fuzz targets (`crates/fastpath-fuzz`) reach them: the SOCKS5 client of
//! `fastpath tunnel --socks5` and the fake DNS of `fastpath tunnel --fake-dns`. The command itself
//! is `src/main.rs`.

#![forbid(unsafe_code)]

pub mod fake_dns;
#[cfg(target_os = "linux")]
pub mod socks5;
