//! fastpath's transparent proxy ("tun2socks") as a library: give it an open TUN descriptor and a
//! [`Config`], and it terminates every TCP connection and UDP flow the applications behind that
//! interface open, whatever their destination, and relays each through the host kernel's sockets:
//! directly, through a SOCKS5 server or through an HTTP proxy's CONNECT, chosen per destination
//! ([`rules`]), with an optional fake DNS ([`fake_dns`]) so that names reach the proxies. It is what
//! `fastpath tunnel` runs (docs/tunnel.md), for VPN apps to embed: [`Tunnel::start`] takes the
//! descriptor (Android's `VpnService` hands one over), [`Tunnel::stop`] or a [`StopHandle`] from any
//! thread stops it, [`Tunnel::stats`] reads its counters while it runs. The C API over it is the
//! crate `fastpath-tunnel-ffi`.
//!
//! What the relays do:
//!
//! - TCP (`tcp.rs`): the application's SYN is held until the tunnel's own connect to the destination
//!   (or through the proxy) has its answer, and answered the same way: a SYN-ACK, a RST for a
//!   refusal, an ICMP unreachable for an unreachable or prohibited destination, nothing for a
//!   timeout. Held SYNs are bounded (1,024 in all, 256 to one destination, `fastpath::Limits`):
//!   under a SYN flood the stack answers further SYNs with cookies, and a connection whose handshake
//!   completed is relayed after it (reset if the destination refuses; counted as
//!   [`Totals::tcp_handshake_first`]). Bytes are pumped both ways without a copy in this process,
//!   between the stack's buffers and the kernel socket; half-closes and resets are passed on.
//! - UDP (`udp.rs`): each (application, destination) pair is a flow with a connected kernel socket
//!   (or a SOCKS5 UDP association), replies sent back from the destination's address, flows bounded
//!   in number and idle time. An HTTP proxy carries no UDP: a flow routed to one is dropped and
//!   counted ([`Totals::udp_no_proxy`]).
//!
//! The tunnel runs a stack per TUN queue, each on a thread of its own with a current-thread tokio
//! runtime; [`Tunnel::start`] makes one queue of the descriptor it is given, and
//! [`Tunnel::start_links`] takes the links of a multi-queue interface. Nothing here changes
//! process-wide state (signals, limits): a writer to a closed kernel socket gets `EPIPE`, as Rust's
//! socket writes use `MSG_NOSIGNAL`; each relayed flow holds a descriptor, so the host should allow
//! `max_tcp_flows + max_udp_flows` of them (`RLIMIT_NOFILE`).

#![forbid(unsafe_code)]

pub mod fake_dns;
pub mod http_connect;
pub mod rules;
pub mod socks5;

#[cfg(target_os = "linux")]
mod queue;
#[cfg(target_os = "linux")]
mod settings;
mod stats;
#[cfg(target_os = "linux")]
mod tcp;
#[cfg(target_os = "linux")]
mod tunnel;
#[cfg(target_os = "linux")]
mod udp;

#[cfg(target_os = "linux")]
pub use queue::{stack_for_queue, LinkWrapper};
pub use rules::{Auth, Match, Routes, Rule, Upstream};
pub use stats::{Stats, Totals, TunTotals};
#[cfg(target_os = "linux")]
pub use tunnel::{Config, Error, ErrorKind, StopHandle, Tunnel};

/// A hook given every socket the tunnel opens towards the network ([`Config::protect`]).
#[derive(Clone)]
pub struct Protect(std::sync::Arc<ProtectFn>);

/// What a [`Protect`] calls.
pub type ProtectFn = dyn Fn(std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> + Send + Sync;

impl Protect {
    /// A hook calling `f`.
    pub fn new(
        f: impl Fn(std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Protect {
        Protect(std::sync::Arc::new(f))
    }

    /// Calls the hook on `socket`.
    pub fn call(&self, socket: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
        (self.0)(socket)
    }
}

impl std::fmt::Debug for Protect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Protect(..)")
    }
}

/// How often a running queue publishes its stack's counters for [`Tunnel::stats`] (the relays'
/// own counters are always current).
pub const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(250);
