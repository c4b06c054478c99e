//! fastpath: a user-space UDP/TCP network stack over IPv4 and IPv6 that implements, switchably and
//! measurably, the end-system fast paths of the classic papers (the repository's
//! `docs/techniques.md` maps each technique to its paper, module and switch).
//!
//! Layers, bottom up: [`link`] moves packets in batches; [`buf`] holds them with headroom; [`wire`]
//! parses and emits headers; [`checksum`] computes the Internet checksum every way the papers measure;
//! [`ipv4`] and its IPv6 sibling validate, route, fragment and reassemble (in the family-neutral
//! [`reassembly`] table); [`demux`] finds a datagram's or a segment's socket; [`udp`], [`tcp`] and
//! [`icmp`] (with ICMPv6) are the protocols, UDP and TCP over both families; [`Stack`] ties them
//! together; [`StackConfig`] switches each technique.
//!
//! # Platforms
//!
//! The TUN link ([`TunLink`], in `link::tun`) talks to the Linux kernel and exists only on Linux
//! (`cfg(target_os = "linux")`), as do the async front (`fastpath-tokio`) and the command-line
//! program built on this crate. The rest is plain Rust on `std`, but Linux is the only platform it is
//! built and tested on.
//!
//! # Examples
//!
//! Two stacks joined by an in-memory link ([`PairEnd::pair`]) exchange a UDP datagram. Nothing moves
//! until a stack is polled, and no call blocks: a socket with nothing to read returns
//! `io::ErrorKind::WouldBlock`. Sockets are handles, used through the stack that owns them
//! (`stack.udp(socket)`, `stack.tcp(stream)`); addresses are anything [`ToSocketAddrs`] takes, and a
//! socket's family (IPv4 or IPv6) is its bind address's.
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
//! TCP over IPv6 between the same two kinds of stack. A connection's handle ([`TcpStreamRef`]) is a
//! `std::io::Read` and `Write`, non-blocking; a listener on `[::]` takes IPv4 connections too.
//!
//! ```
//! use std::io::{Read, Write};
//! use fastpath::{Impairments, Instant, Ipv4Cidr, LinkCapabilities, PairEnd, Stack, StackConfig};
//!
//! fn step(a: &mut Stack, b: &mut Stack) {
//!     let now = Instant::now();
//!     a.poll(now);
//!     b.poll(now);
//! }
//!
//! let (end_a, end_b) = PairEnd::pair(LinkCapabilities::plain(1500), 64, Impairments::default());
//! let mut a = Stack::new(StackConfig::default());
//! let ia = a.add_interface("pair0", end_a, Ipv4Cidr::new([10, 0, 0, 1].into(), 24));
//! a.add_ipv6_address(ia, "2001:db8::1/64".parse().unwrap())?;
//! let mut b = Stack::new(StackConfig::default());
//! let ib = b.add_interface("pair0", end_b, Ipv4Cidr::new([10, 0, 0, 2].into(), 24));
//! b.add_ipv6_address(ib, "2001:db8::2/64".parse().unwrap())?;
//!
//! let listener = b.tcp_listen("[::]:80", 16)?;
//! let client = a.tcp_connect("[2001:db8::2]:80")?;
//! step(&mut a, &mut b); // SYN, then SYN-ACK
//! step(&mut a, &mut b); // ACK: the connection is established on both sides
//! let (server, peer) = b.tcp_listener(listener).accept()?;
//! assert_eq!(peer.ip(), "2001:db8::1".parse::<std::net::IpAddr>().unwrap());
//!
//! a.tcp(client).write_all(b"hello")?;
//! step(&mut a, &mut b);
//! let mut buf = [0u8; 64];
//! let n = b.tcp(server).read(&mut buf)?;
//! assert_eq!(&buf[..n], b"hello");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! On a Linux TUN interface (root needed): the kernel routes packets into the interface, and the stack
//! reads and writes them. A [`TunLink`] lends its descriptor ([`AsFd`](std::os::fd::AsFd)) to an event
//! loop, or its [`TunHandle`] sleeps until a packet arrives:
//!
//! ```no_run
//! use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig, TunConfig, TunLink};
//!
//! // Interface `fp0` in the caller's namespace; its kernel side is addressed and brought up with
//! // `ip addr add 10.7.0.1/24 dev fp0; ip link set fp0 up`.
//! let link = TunLink::open(&TunConfig { name: "fp0".into(), ..TunConfig::default() })?;
//! let tun = link.handle();
//! let mut stack = Stack::new(StackConfig::default());
//! stack.add_interface("fp0", link, Ipv4Cidr::new([10, 7, 0, 2].into(), 24));
//! let echo = stack.udp_bind("10.7.0.2:7")?;
//! let mut buf = vec![0u8; 65536];
//! loop {
//!     stack.poll(Instant::now()); // answers pings by itself
//!     while let Ok((n, from)) = stack.udp(echo).recv_from(&mut buf) {
//!         stack.udp(echo).send_to(&buf[..n], from)?;
//!     }
//!     stack.flush();
//!     let timer = stack.next_deadline().map(|t| t.saturating_since(Instant::now()));
//!     tun.wait(timer)?;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
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
pub mod ethernet;
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

pub use api::intercept::Unreachable;
pub use api::ready::ReadyKey;
pub use api::tcp::{TcpListenerRef, TcpStreamRef};
pub use api::udp::UdpSocketRef;
pub use buf::{BufferDepot, PacketBuf};
pub use config::{CopyChecksum, Ecn, FastOpenConfig, LossDetection, StackConfig};
pub use link::{Impaired, Impairments, Link, LinkCapabilities, Loopback, PairEnd};
#[cfg(target_os = "linux")]
pub use link::{TunConfig, TunHandle, TunLink, TunStats};
pub use route::{Cidr, InterfaceId, Ipv4Cidr, Ipv6Cidr};
pub use stack::Stack;
pub use stats::{Counters, DropReason, Drops};
/// A TCP connection's state (RFC 9293 §3.3.2), as [`TcpStreamRef::state`] reports it: `tcp::State`.
pub use tcp::State as TcpState;
pub use tcp::{
    CongestionState, ConnectionInfo, PathMtuDiscovery, TcpListenOptions, TcpListener,
    TcpSocketOptions, TcpStream, TxTimestamp, TxTimestampKind, TxTimestamping, WriteFlags,
};
pub use time::Instant;
pub use udp::{UdpOptions, UdpSocket};
