//! What the two IP layers (`ipv4/`, `ipv6/`) share and the layers above see of either: where a packet
//! goes after routing ([`NextHop`]), how an arriving one was addressed ([`Delivery`]), the sink for
//! finished packets ([`Transmit`]), the loopback interface, and the token bucket both ICMPs limit their
//! output with ([`RateLimit`]).

use std::net::Ipv4Addr;

use crate::addr::IpAddress;
use crate::buf::PacketBuf;
use crate::link::LinkCapabilities;
use crate::route::InterfaceId;
use crate::time::Instant;

/// The loopback interface every stack has: interface 0 (`127.0.0.1/8` and `::1`).
pub const LOOPBACK: InterfaceId = InterfaceId(0);

/// Where a datagram to some destination goes: the result of routing it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NextHop<A = Ipv4Addr> {
    pub(crate) iface: InterfaceId,
    /// The source address to use unless the socket is bound to one.
    pub(crate) src: A,
    /// The gateway, or the destination itself when it is on the link.
    pub(crate) next_hop: A,
    pub(crate) caps: LinkCapabilities,
}

impl<A: IpAddress> NextHop<A> {
    /// The hop to one of this host's own addresses: over loopback, from that address.
    pub(crate) fn local(dst: A, caps: LinkCapabilities) -> NextHop<A> {
        NextHop {
            iface: LOOPBACK,
            src: dst,
            next_hop: dst,
            caps,
        }
    }
}

/// How an arriving datagram is addressed to this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// To one of its addresses.
    Unicast,
    /// To a group it belongs to: an IPv4 broadcast, or an IPv6 multicast group (all nodes, a
    /// solicited-node group); every matching socket gets a copy, and no ICMP error answers it.
    Broadcast,
    /// To another host's unicast address, arriving on an interface that intercepts (see
    /// `Stack::set_intercept`): only the intercepting TCP listener and UDP endpoint take it, no
    /// socket bound to a port of the host's, and no ICMP error answers it.
    Intercepted,
}

/// Where IP's finished packets go: the stack's links.
pub(crate) trait Transmit {
    /// Queues `packet` (a whole IP packet) for `iface`. Returns how many packets the link dropped
    /// because its queue was full (this one or others of its batch), for IP to count.
    fn transmit(&mut self, iface: InterfaceId, packet: PacketBuf) -> usize;
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub(crate) struct RateLimit {
    rate: u64,
    burst: u64,
    /// Tokens, in millionths.
    micro_tokens: u64,
    last: Instant,
}

impl RateLimit {
    pub(crate) fn new(rate: u32, burst: u32) -> RateLimit {
        RateLimit {
            rate: rate as u64,
            burst: burst as u64,
            micro_tokens: burst as u64 * 1_000_000,
            last: Instant::ZERO,
        }
    }

    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.total_micros().saturating_sub(self.last.total_micros());
        self.last = self.last.max(now);
        self.micro_tokens =
            (self.micro_tokens + elapsed.saturating_mul(self.rate)).min(self.burst * 1_000_000);
        if self.micro_tokens >= 1_000_000 {
            self.micro_tokens -= 1_000_000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_allows_a_burst_then_the_rate() {
        let mut r = RateLimit::new(10, 3);
        let t0 = Instant::from_secs(1);
        assert_eq!((0..10).filter(|_| r.allow(t0)).count(), 3);
        assert!(!r.allow(t0));
        // 100 ms buys one token at 10 a second.
        assert!(r.allow(Instant::from_millis(1100)));
        assert!(!r.allow(Instant::from_millis(1100)));
        assert_eq!(
            (0..10).filter(|_| r.allow(Instant::from_secs(100))).count(),
            3
        );
    }
}
