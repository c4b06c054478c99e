//! Addresses: what the layers above IP need to know of an address family ([`IpAddress`], for IPv4 and
//! IPv6), and socket addresses as the API takes them (anything that implements [`ToSocketAddrs`]:
//! a bind takes the first address it yields, a send or connect the first of the socket's family).
//!
//! The demultiplexers, the routing table and the transport pseudo-header are written over
//! [`IpAddress`] and monomorphized per family, so IPv4's per-packet code is what it would be if it
//! were written for `Ipv4Addr` alone.

use std::fmt;
use std::hash::Hash;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};

/// An address family's address, as the family-neutral code needs it: demultiplexing keys, routes,
/// the transport pseudo-header. Implemented by `Ipv4Addr` and `Ipv6Addr`.
pub trait IpAddress: Copy + Eq + Hash + fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// A socket address of the family: `SocketAddrV4`, `SocketAddrV6`.
    type Socket: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static;
    /// The wildcard (unspecified) address: `0.0.0.0`, `::`.
    const WILDCARD: Self;
    /// The address length in bits, the longest prefix: 32, 128.
    const BITS: u8;
    /// The family's IP header in front of a transport's (without options or extension headers): 20,
    /// 40.
    const HEADER_LEN: usize;

    /// True for the wildcard.
    fn is_wildcard(&self) -> bool;
    /// The address of a socket address.
    fn ip(socket: &Self::Socket) -> Self;
    /// The port of a socket address.
    fn port(socket: &Self::Socket) -> u16;
    /// The socket address of this address and `port`.
    fn socket(self, port: u16) -> Self::Socket;
    /// The same as a [`SocketAddr`], built in place (for a value the API returns).
    fn socket_addr(self, port: u16) -> SocketAddr;
    /// The sum of the address's 16-bit words in network order, not folded: its part of a transport
    /// pseudo-header sum (RFC 768, RFC 8200 §8.1).
    fn word_sum(self) -> u32;
    /// True when the first `prefix_len` bits of `self` and `other` are equal (`prefix_len` at most
    /// [`BITS`](Self::BITS)).
    fn same_prefix(self, other: Self, prefix_len: u8) -> bool;
}

impl IpAddress for Ipv4Addr {
    type Socket = SocketAddrV4;
    const WILDCARD: Self = Ipv4Addr::UNSPECIFIED;
    const BITS: u8 = 32;
    const HEADER_LEN: usize = 20;
    #[inline(always)]
    fn is_wildcard(&self) -> bool {
        self.is_unspecified()
    }
    #[inline(always)]
    fn ip(socket: &SocketAddrV4) -> Self {
        *socket.ip()
    }
    #[inline(always)]
    fn port(socket: &SocketAddrV4) -> u16 {
        socket.port()
    }
    #[inline(always)]
    fn socket(self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self, port)
    }
    #[inline(always)]
    fn socket_addr(self, port: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(self, port))
    }
    #[inline(always)]
    fn word_sum(self) -> u32 {
        let a = u32::from(self);
        (a >> 16) + (a & 0xffff)
    }
    #[inline]
    fn same_prefix(self, other: Self, prefix_len: u8) -> bool {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(prefix_len))
            .unwrap_or(0);
        (u32::from(self) ^ u32::from(other)) & mask == 0
    }
}

impl IpAddress for Ipv6Addr {
    type Socket = SocketAddrV6;
    const WILDCARD: Self = Ipv6Addr::UNSPECIFIED;
    const BITS: u8 = 128;
    const HEADER_LEN: usize = 40;
    #[inline(always)]
    fn is_wildcard(&self) -> bool {
        self.is_unspecified()
    }
    #[inline(always)]
    fn ip(socket: &SocketAddrV6) -> Self {
        *socket.ip()
    }
    #[inline(always)]
    fn port(socket: &SocketAddrV6) -> u16 {
        socket.port()
    }
    #[inline(always)]
    fn socket(self, port: u16) -> SocketAddrV6 {
        SocketAddrV6::new(self, port, 0, 0)
    }
    #[inline(always)]
    fn socket_addr(self, port: u16) -> SocketAddr {
        // Through the address's bits: built from the bytes, it went through a copy on the stack
        // that was read back at an offset from its store, which the CPU does not forward.
        SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from_bits(self.to_bits()),
            port,
            0,
            0,
        ))
    }
    #[inline]
    fn word_sum(self) -> u32 {
        // Eight 16-bit words, summed as two 64-bit halves' four 16-bit lanes: at most 8 * 0xffff.
        let v = u128::from(self);
        let lanes = |x: u64| (x >> 48) + ((x >> 32) & 0xffff) + ((x >> 16) & 0xffff) + (x & 0xffff);
        (lanes((v >> 64) as u64) + lanes(v as u64)) as u32
    }
    #[inline]
    fn same_prefix(self, other: Self, prefix_len: u8) -> bool {
        let mask = u128::MAX
            .checked_shl(128 - u32::from(prefix_len))
            .unwrap_or(0);
        (u128::from(self) ^ u128::from(other)) & mask == 0
    }
}

/// The first IPv4 address `addr` resolves to. A `SocketAddrV4` or `SocketAddr` costs nothing past a
/// copy once inlined (its resolution is a one-element iterator, with no system call); a host name is
/// looked up by the system's resolver, which blocks. A resolution with no IPv4 address at all is an
/// `AddrNotAvailable` error (IPv6 is not supported yet), and an empty one an `InvalidInput` error.
#[inline]
pub(crate) fn ipv4<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<SocketAddrV4> {
    let mut saw_v6 = false;
    for a in addr.to_socket_addrs()? {
        match a {
            SocketAddr::V4(v4) => return Ok(v4),
            SocketAddr::V6(_) => saw_v6 = true,
        }
    }
    Err(no_ipv4(saw_v6))
}

/// The first IPv6 address `addr` resolves to, for a socket of the IPv6 family.
pub(crate) fn ipv6<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<SocketAddrV6> {
    let mut saw_v4 = false;
    for a in addr.to_socket_addrs()? {
        match a {
            SocketAddr::V6(v6) => return Ok(v6),
            SocketAddr::V4(_) => saw_v4 = true,
        }
    }
    Err(if saw_v4 {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "the address resolved to IPv4 only, for an IPv6 socket",
        )
    } else {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to no address at all",
        )
    })
}

/// The first address `addr` resolves to, of either family (what a bind takes).
pub(crate) fn any<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to no address at all",
        )
    })
}

#[cold]
#[inline(never)]
fn no_ipv4(saw_v6: bool) -> io::Error {
    if saw_v6 {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "the address resolved to IPv6 only, for an IPv4 socket (or a call that takes IPv4 only)",
        )
    } else {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to no address at all",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_word_sums() {
        let a = Ipv4Addr::new(10, 1, 2, 3);
        assert!(a.same_prefix(Ipv4Addr::new(10, 1, 255, 0), 16));
        assert!(!a.same_prefix(Ipv4Addr::new(10, 2, 2, 3), 16));
        assert!(a.same_prefix(Ipv4Addr::new(99, 0, 0, 0), 0));
        assert!(a.same_prefix(a, 32) && !a.same_prefix(Ipv4Addr::new(10, 1, 2, 4), 32));
        assert_eq!(a.word_sum(), 0x0a01 + 0x0203);
        let b: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert!(b.same_prefix("2001:db8:0:1::".parse().unwrap(), 32));
        assert!(!b.same_prefix("2001:db8:0:1::".parse().unwrap(), 64));
        assert!(b.same_prefix(Ipv6Addr::LOCALHOST, 0));
        assert!(!b.same_prefix("2001:db8::2".parse().unwrap(), 128));
        assert!(b.same_prefix(b, 128));
        assert_eq!(b.word_sum(), 0x2001 + 0x0db8 + 1);
        assert!(Ipv6Addr::WILDCARD.is_wildcard() && !b.is_wildcard());
        assert_eq!(Ipv6Addr::port(&b.socket(53)), 53);
    }

    #[test]
    fn the_first_ipv4_address_is_taken() {
        let v4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
        assert_eq!(ipv4(&v4).unwrap(), v4);
        assert_eq!(ipv4(&SocketAddr::V4(v4)).unwrap(), v4);
        assert_eq!(ipv4("10.0.0.1:80").unwrap(), v4);
        assert_eq!(ipv4(&(Ipv4Addr::new(10, 0, 0, 1), 80)).unwrap(), v4);
        let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 80, 0, 0));
        let other = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80));
        assert_eq!(ipv4(&&[v6, SocketAddr::V4(v4), other][..]).unwrap(), v4);
    }

    #[test]
    fn ipv6_only_and_nothing_at_all_are_errors() {
        let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 80, 0, 0));
        let e = ipv4(&v6).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable);
        assert!(e.to_string().contains("IPv6"), "{e}");
        assert_eq!(
            ipv4("[::1]:80").unwrap_err().kind(),
            io::ErrorKind::AddrNotAvailable
        );
        let none: &[SocketAddr] = &[];
        assert_eq!(ipv4(&none).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            ipv4("not an address").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
