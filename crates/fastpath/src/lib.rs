//! fastpath: a user-space UDP/TCP/IPv4 network stack that implements, switchably and measurably, the
//! end-system fast paths of the classic papers (see the README's technique map).
//!
//! Layers, bottom up: [`link`] moves packets in batches; [`buf`] holds them with headroom; [`wire`]
//! parses and emits headers; [`checksum`] computes the Internet checksum every way the papers measure;
//! [`ipv4`] validates, routes, fragments and reassembles (in the family-neutral [`reassembly`] table);
//! [`demux`] finds a datagram's socket; [`udp`], [`tcp`] and [`icmp`] are the protocols; [`Stack`]
//! ties them together; [`StackConfig`] switches each technique.
//!
//! # Example
//!
//! Two stacks joined by an in-memory link ([`PairEnd::pair`]) exchange a UDP datagram. Nothing moves
//! until a stack is polled, and no call blocks: a socket with nothing to read returns
//! `io::ErrorKind::WouldBlock`. Sockets are handles, used through the stack that owns them
//! (`stack.udp(socket)`, `stack.tcp(stream)`); addresses are anything [`ToSocketAddrs`] takes. UDP
//! speaks IPv4 and IPv6 (a socket's family is its bind address's); TCP IPv4 only so far.
//!
//! ```
//! use fastpath::{Impairments, Instant, Ipv4Cidr, LinkCapabilities, PairEnd, Stack, StackConfig};
//!
//! let (end_a, end_b) = PairEnd::pair(LinkCapabilities::plain(1500), 64, Impairments::default());
//! let mut a = Stack::new(StackConfig::default());
//! a.add_interface("pair0", end_a, Ipv4Cidr::new([10, 0, 0, 1].into(), 24));
//! let mut b = Stack::new(StackConfig::default());
//! b.add_interface("pair0", end_b, Ipv4Cidr::new([10, 0, 0, 2].into(), 24));
//!
//! let server = b.udp_bind("10.0.0.2:7")?;
//! let client = a.udp_bind("0.0.0.0:0")?;
//! a.udp(client).send_to(b"hello", "10.0.0.2:7")?;
//! let now = Instant::now();
//! a.poll(now); // A sends the datagram onto the link
//! b.poll(now); // B receives it and queues it on the socket
//!
//! let mut buf = [0u8; 1500];
//! let (n, from) = b.udp(server).recv_from(&mut buf)?;
//! assert_eq!(&buf[..n], b"hello");
//! assert_eq!(from.ip(), std::net::Ipv4Addr::new(10, 0, 0, 1));
//! assert_eq!(
//!     b.udp(server).recv_from(&mut buf).unwrap_err().kind(),
//!     std::io::ErrorKind::WouldBlock
//! );
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A connection's handle ([`TcpStreamRef`]) is a `std::io::Read` and `Write`, non-blocking; a
//! [`TunLink`] lends its descriptor ([`AsFd`](std::os::fd::AsFd)) to an event loop.
//!
//! [`ToSocketAddrs`]: std::net::ToSocketAddrs
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// Marks a layer boundary for the `instrument` feature: `layer!(Send, Udp)`, or `layer!()` when control
/// goes back to the application. Expands to nothing without the feature.
macro_rules! layer {
    () => {
        #[cfg(feature = "instrument")]
        $crate::instrument::enter(None);
    };
    ($side:ident, $layer:ident) => {
        #[cfg(feature = "instrument")]
        $crate::instrument::enter(Some((
            $crate::instrument::Side::$side,
            $crate::instrument::Layer::$layer,
        )));
    };
}

/// Times the rest of the enclosing block as operation `$op` for the `instrument` feature. Expands to
/// nothing without the feature.
macro_rules! timed {
    ($op:ident) => {
        #[cfg(feature = "instrument")]
        let _op_timer = $crate::instrument::OpTimer::start($crate::instrument::Op::$op);
    };
}

pub mod addr;
pub mod api;
pub mod buf;
pub mod checksum;
pub mod config;
pub mod demux;
pub mod icmp;
mod icmpv6;
#[cfg(feature = "instrument")]
pub mod instrument;
mod ip;
pub mod ipv4;
mod ipv6;
pub mod link;
pub mod pmtu;
pub mod reassembly;
pub mod rng;
pub mod route;
pub mod secret;
pub mod stack;
pub mod stats;
pub mod tcp;
pub mod time;
mod transport;
pub mod udp;
pub mod wire;

/// The repository's README, whose Rust examples are compiled and run as doctests so that they keep
/// up with the API (only under `cargo test --doc`; the README is not part of the rendered docs, where
/// its relative links would not resolve).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

pub use api::intercept::Unreachable;
pub use api::ready::ReadyKey;
pub use api::tcp::{TcpListenerRef, TcpStreamRef};
pub use api::udp::UdpSocketRef;
pub use buf::{BufferDepot, PacketBuf};
pub use config::{CopyChecksum, StackConfig};
pub use link::{Impaired, Impairments, Link, LinkCapabilities, Loopback, PairEnd};
#[cfg(target_os = "linux")]
pub use link::{TunConfig, TunHandle, TunLink, TunStats};
pub use route::{Cidr, InterfaceId, Ipv4Cidr, Ipv6Cidr};
pub use stack::Stack;
pub use stats::{Counters, DropReason, Drops};
/// A TCP connection's state (RFC 9293 §3.3.2), as [`TcpStreamRef::state`] reports it: `tcp::State`.
pub use tcp::State as TcpState;
pub use tcp::{ConnectionInfo, TcpListenOptions, TcpListener, TcpStream};
pub use time::Instant;
pub use udp::{UdpOptions, UdpSocket};
