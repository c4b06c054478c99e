//! fastpath: a user-space UDP/TCP/IPv4 network stack that implements, switchably and measurably, the
//! end-system fast paths of the classic papers (see the README's technique map).
//!
//! Layers, bottom up: [`link`] moves packets in batches; [`buf`] holds them with headroom; [`wire`]
//! parses and emits headers; [`checksum`] computes the Internet checksum every way the papers measure;
//! [`ipv4`] validates, routes, fragments and reassembles; [`demux`] finds a datagram's socket; [`udp`],
//! [`tcp`] and [`icmp`] are the protocols; [`Stack`] ties them together; [`StackConfig`] switches each technique.
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

mod addr;
pub mod buf;
pub mod checksum;
pub mod config;
pub mod demux;
pub mod icmp;
#[cfg(feature = "instrument")]
pub mod instrument;
pub mod ipv4;
pub mod link;
pub mod rng;
pub mod stack;
pub mod stats;
pub mod tcp;
pub mod time;
pub mod udp;
pub mod wire;

pub use buf::{BufferDepot, PacketBuf};
pub use config::{CopyChecksum, StackConfig};
pub use ipv4::route::{InterfaceId, Ipv4Cidr};
pub use link::{Impaired, Impairments, Link, LinkCapabilities, Loopback, PairEnd};
#[cfg(target_os = "linux")]
pub use link::{TunConfig, TunHandle, TunLink, TunStats};
pub use stack::Stack;
pub use stats::{Counters, DropReason, Drops};
/// A TCP connection's state (RFC 9293 §3.3.2), as [`TcpStreamRef::state`] reports it: `tcp::State`.
pub use tcp::State as TcpState;
pub use tcp::{ConnectionInfo, TcpListener, TcpListenerRef, TcpStream, TcpStreamRef};
pub use time::Instant;
pub use udp::{UdpOptions, UdpSocket, UdpSocketRef};
