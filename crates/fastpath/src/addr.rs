//! Socket addresses as the API takes them: anything that implements [`ToSocketAddrs`], resolved to the
//! first IPv4 address it yields (the stack speaks IPv4 only).

use std::io;
use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};

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

#[cold]
#[inline(never)]
fn no_ipv4(saw_v6: bool) -> io::Error {
    if saw_v6 {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            "the address resolved to IPv6 only: fastpath does not support IPv6 yet",
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
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV6};

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
