//! UDP demultiplexing: finding the socket a datagram belongs to.
//!
//! Every strategy implements [`Demux`] and must return what the 4.3BSD best-match rule returns
//! (Dixon & Calvert, paper 003 §1.2): among the PCBs whose local port equals the datagram's destination
//! port, and whose other fields each either equal the datagram's or are wildcards, the one with the
//! fewest wildcards. [`Linear`] is that rule written as 4.3BSD wrote it; it is the reference the others
//! are tested against.

mod linear;

pub use linear::Linear;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};

/// Index of a socket in the stack's socket table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId(pub u32);

/// The addresses of a UDP protocol control block. An unspecified address (`0.0.0.0`) is a wildcard;
/// an unconnected PCB has remote `0.0.0.0:0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pcb {
    /// Local address, or `0.0.0.0` for any of the host's addresses.
    pub local_addr: Ipv4Addr,
    /// Local port (never 0 once bound).
    pub local_port: u16,
    /// Remote address of a connected PCB, or `0.0.0.0`.
    pub remote_addr: Ipv4Addr,
    /// Remote port of a connected PCB, or 0.
    pub remote_port: u16,
}

impl Pcb {
    /// An unconnected PCB bound to `local`.
    pub fn bound(local: SocketAddrV4) -> Pcb {
        Pcb {
            local_addr: *local.ip(),
            local_port: local.port(),
            remote_addr: Ipv4Addr::UNSPECIFIED,
            remote_port: 0,
        }
    }

    /// True when connected to a remote address.
    pub fn is_connected(&self) -> bool {
        !self.remote_addr.is_unspecified()
    }

    /// The number of wildcards this PCB uses to match a datagram from `src` to `dst`, or `None` if it
    /// does not match (the rule of 4.3BSD's `in_pcblookup`).
    #[inline]
    pub fn match_wildcards(&self, dst: SocketAddrV4, src: SocketAddrV4) -> Option<u8> {
        if self.local_port != dst.port() {
            return None;
        }
        let mut wildcards = 0;
        if self.local_addr.is_unspecified() {
            wildcards += 1;
        } else if self.local_addr != *dst.ip() {
            return None;
        }
        if self.remote_addr.is_unspecified() {
            wildcards += 1;
        } else if self.remote_addr != *src.ip() || self.remote_port != src.port() {
            return None;
        }
        Some(wildcards)
    }
}

/// A demultiplexing strategy.
pub trait Demux: Send + fmt::Debug {
    /// Adds a PCB (bind, or connect after a remove).
    fn insert(&mut self, id: SocketId, pcb: Pcb);

    /// Removes the PCB `id` had, which was `pcb`.
    fn remove(&mut self, id: SocketId, pcb: &Pcb);

    /// The best match for a unicast datagram from `src` to `dst`.
    fn lookup(&mut self, dst: SocketAddrV4, src: SocketAddrV4) -> Option<SocketId>;

    /// Every PCB that matches a broadcast datagram from `src` to `dst` (with any number of wildcards),
    /// appended to `out`.
    fn lookup_all(&mut self, dst: SocketAddrV4, src: SocketAddrV4, out: &mut Vec<SocketId>);
}

/// The demultiplexing strategies, selectable in [`StackConfig`](crate::StackConfig).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DemuxStrategy {
    /// 4.3BSD `in_pcblookup`: one list, full scan, best match (paper 003 §2.2.1).
    #[default]
    Linear,
}

impl DemuxStrategy {
    /// Every strategy.
    pub const ALL: &'static [DemuxStrategy] = &[DemuxStrategy::Linear];

    /// The name used in configuration and output.
    pub fn name(self) -> &'static str {
        match self {
            DemuxStrategy::Linear => "linear",
        }
    }

    /// A new, empty demultiplexer of this strategy.
    pub fn build(self) -> Box<dyn Demux> {
        match self {
            DemuxStrategy::Linear => Box::new(Linear::default()),
        }
    }
}

impl std::str::FromStr for DemuxStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DemuxStrategy::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown demux strategy `{s}`"))
    }
}
