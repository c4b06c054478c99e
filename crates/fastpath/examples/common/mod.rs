//! What the TCP profiles share: two stacks joined by the in-memory pair.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Ipv4Cidr, Ipv6Cidr, Stack, StackConfig};

/// Two stacks with the default configuration over a pair of `mtu`: 10.0.0.1 and 10.0.0.2, and with
/// `v6` fd00::1 and fd00::2 too. Returns them and the second one's address in the family asked for.
pub fn two_stacks(mtu: usize, v6: bool) -> (Stack, Stack, IpAddr) {
    let (ea, eb) = PairEnd::pair(
        LinkCapabilities::plain(mtu),
        1 << 16,
        Impairments::default(),
    );
    let (ia, ib) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut a = Stack::new(StackConfig::default());
    let link_a = a.add_interface("pair0", ea, Ipv4Cidr::new(ia, 24));
    let mut b = Stack::new(StackConfig::default());
    let link_b = b.add_interface("pair0", eb, Ipv4Cidr::new(ib, 24));
    if !v6 {
        return (a, b, ib.into());
    }
    let (a6, b6) = (
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
    );
    a.add_ipv6_address(link_a, Ipv6Cidr::new(a6, 64))
        .expect("an IPv6 address");
    b.add_ipv6_address(link_b, Ipv6Cidr::new(b6, 64))
        .expect("an IPv6 address");
    (a, b, b6.into())
}
