//! The library's integration tests in one binary: one link, and one copy of the stack's inlined
//! code, instead of one per file. (`soak.rs` and `memory.rs` count allocations with a global
//! allocator, and `instrument.rs` needs a feature: they stay binaries of their own.)

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod demux_equivalence;
mod emitted_packets;
mod ethernet;
mod exchange;
mod intercept;
mod ipv4_options;
mod ipv6;
mod layers;
mod library_api;
mod pmtu;
mod properties;
mod redirect;
mod route_cache;
mod secret;
mod socket_api;
mod switches;
mod tcp;
mod tun_fd;
