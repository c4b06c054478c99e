//! What the two IP layers (`ipv4/`, `ipv6/`) share and the layers above see of either: where a packet
//! goes after routing ([`NextHop`]), how an arriving one was addressed ([`Delivery`]), the sink for
//! finished packets ([`Transmit`]), the loopback interface, and the limits both ICMPs put on the
//! errors they send ([`ErrorLimit`]).

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::addr::IpAddress;
use crate::buf::PacketBuf;
use crate::link::LinkCapabilities;
use crate::pmtu::PathMtuCache;
use crate::route::{InterfaceId, RoutingTable};
use crate::secret::SecretKey;
use crate::stats::DropReason;
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
    /// Queues `packet` (a whole IP packet) for `iface`, to the neighbour `next_hop` (the gateway, or
    /// the destination itself when it is on the link; what a link with a link layer resolves).
    /// Returns how many packets the link dropped because its queue was full (this one or others of
    /// its batch), for IP to count.
    fn transmit<A: IpAddress>(
        &mut self,
        iface: InterfaceId,
        next_hop: A,
        packet: PacketBuf,
    ) -> usize;
}

/// When an IP layer's routing state next changes by itself: the earlier of the next path MTU's
/// end and the next redirect's (each IP layer keeps it, as the stack asks at every poll).
pub(crate) fn routes_deadline<A: IpAddress>(
    path_mtu: &PathMtuCache<A>,
    routes: &RoutingTable<A>,
) -> Option<Instant> {
    crate::time::earlier(path_mtu.next_expiry(), routes.next_expiry())
}

/// An ICMP error about a packet a transport sent, as the transport is told of it: the error, and
/// what TCP does with it beyond reporting it (Linux's `tcp_v4_err` and `tcp_v6_err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IcmpError {
    /// The error a socket is given.
    pub(crate) kind: std::io::ErrorKind,
    /// It ends a half-open connection whose SYN-ACK it quotes.
    pub(crate) ends_half_open: bool,
    /// A network or host unreachable (over IPv6, no route): it undoes one doubling of the
    /// retransmission timeout of the segment it quotes (RFC 6069).
    pub(crate) reverts_backoff: bool,
}

impl IcmpError {
    /// An error that does nothing more than report `kind`.
    pub(crate) fn report(kind: std::io::ErrorKind) -> IcmpError {
        IcmpError {
            kind,
            ends_half_open: false,
            reverts_backoff: false,
        }
    }
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

    /// Whether a token is there at `now` (the bucket refilled for the time since it last was),
    /// without taking it.
    pub(crate) fn ready(&mut self, now: Instant) -> bool {
        let elapsed = now.total_micros().saturating_sub(self.last.total_micros());
        self.last = self.last.max(now);
        self.micro_tokens =
            (self.micro_tokens + elapsed.saturating_mul(self.rate)).min(self.burst * 1_000_000);
        self.micro_tokens >= 1_000_000
    }

    /// Takes a token, if there is one (after [`ready`](Self::ready) said so).
    pub(crate) fn take(&mut self) {
        self.micro_tokens = self.micro_tokens.saturating_sub(1_000_000);
    }

    #[cfg(test)]
    fn allow(&mut self, now: Instant) -> bool {
        let ready = self.ready(now);
        if ready {
            self.take();
        }
        ready
    }
}

/// Slots of a [`PeerLimit`]: sets of [`PEER_WAYS`], a power of two of them, so that picking one is
/// a shift.
const PEER_SLOTS: usize = 256;
const PEER_WAYS: usize = 2;

/// One destination's token bucket in a [`PeerLimit`].
#[derive(Clone, Copy, Debug)]
struct PeerSlot {
    /// The destination's hash, with its lowest bit set (0: an empty slot).
    tag: u64,
    /// Credit, in microseconds: one message costs `interval`.
    credit: u64,
    /// When credit was last added.
    last: Instant,
    /// The table's count of lookups when this slot was last looked up: the least recently used
    /// slot of a full set makes room.
    used: u64,
}

/// A token bucket per destination host, as Linux keeps in its `inet_peer` entries for ICMP errors
/// (`inet_peer_xrlim_allow`): one message per `interval`, `burst` saved up. The buckets live in a
/// fixed table of [`PEER_SLOTS`] slots in sets of [`PEER_WAYS`], the set picked by SipHash-2-4 of the
/// destination's address under a key of the stack's, so a flood from many (spoofed) sources never
/// grows it and no one outside knows which destinations share a set. A destination that finds its
/// set full takes over the slot that was used least recently, with a full bucket: a host that keeps
/// drawing errors keeps its slot, and what a takeover lets through is still held by the global
/// budget.
#[derive(Debug)]
pub(crate) struct PeerLimit {
    key: SecretKey,
    /// Microseconds a message costs; 0 lets every message through.
    interval: u64,
    burst: u64,
    slots: Box<[PeerSlot; PEER_SLOTS]>,
    lookups: u64,
}

impl PeerLimit {
    pub(crate) fn new(key: SecretKey, interval: Duration, burst: u32) -> PeerLimit {
        let empty = PeerSlot {
            tag: 0,
            credit: 0,
            last: Instant::ZERO,
            used: 0,
        };
        PeerLimit {
            key,
            interval: u64::try_from(interval.as_micros()).unwrap_or(u64::MAX),
            burst: u64::from(burst.max(1)),
            slots: Box::new([empty; PEER_SLOTS]),
            lookups: 0,
        }
    }

    /// Whether a message to `peer` (its address's bytes) may go at `now`; if so, its cost is taken.
    pub(crate) fn allow(&mut self, peer: &[u8], now: Instant) -> bool {
        if self.interval == 0 {
            return true;
        }
        let full = self.interval.saturating_mul(self.burst);
        let hash = self.key.prf(peer);
        let sets = PEER_SLOTS / PEER_WAYS;
        let first = (hash >> (64 - sets.trailing_zeros())) as usize * PEER_WAYS;
        let set = &mut self.slots[first..first + PEER_WAYS];
        let tag = hash | 1;
        let way = match set.iter().position(|s| s.tag == tag) {
            Some(way) => way,
            None => (0..PEER_WAYS).min_by_key(|&w| set[w].used).unwrap_or(0),
        };
        self.lookups += 1;
        let slot = &mut set[way];
        slot.used = self.lookups;
        if slot.tag == tag {
            let elapsed = now.total_micros().saturating_sub(slot.last.total_micros());
            slot.credit = slot.credit.saturating_add(elapsed).min(full);
            slot.last = slot.last.max(now);
        } else {
            *slot = PeerSlot {
                tag,
                credit: full,
                last: now,
                used: self.lookups,
            };
        }
        if slot.credit >= self.interval {
            slot.credit -= self.interval;
            true
        } else {
            false
        }
    }
}

/// What limits the ICMP errors a host sends (RFC 1812 §4.3.2.8 for ICMPv4, RFC 4443 §2.4(f) for
/// ICMPv6, which both leave the policy open), as Linux does (`icmp_global_allow`,
/// `icmpv4_xrlim_allow`, and ICMPv6's alike): a global token bucket (Linux's `icmp_msgs_per_sec` and
/// `icmp_msgs_burst`), and a bucket per destination ([`PeerLimit`]; Linux's `icmp_ratelimit`), which
/// errors to the loopback interface skip. An error the destination's bucket holds back takes nothing
/// from the global one, so a host that draws errors as fast as it can only silences errors to itself.
/// Echo replies (and other answers to queries) pass neither: each answers one request, and is no
/// larger than it.
#[derive(Debug)]
pub(crate) struct ErrorLimit {
    global: RateLimit,
    peers: PeerLimit,
}

impl ErrorLimit {
    pub(crate) fn new(limits: &crate::config::Limits, key: SecretKey) -> ErrorLimit {
        ErrorLimit {
            global: RateLimit::new(limits.icmp_rate_per_sec, limits.icmp_burst),
            peers: PeerLimit::new(key, limits.icmp_peer_interval, limits.icmp_peer_burst),
        }
    }

    /// Whether an error to `peer` (its address's bytes), leaving on `iface`, may go at `now`: else
    /// which limit held it back (`global` or `peer` is the reason to count).
    pub(crate) fn allow(
        &mut self,
        peer: &[u8],
        iface: InterfaceId,
        now: Instant,
        (global, per_peer): (DropReason, DropReason),
    ) -> Result<(), DropReason> {
        if !self.global.ready(now) {
            return Err(global);
        }
        if iface != LOOPBACK && !self.peers.allow(peer, now) {
            return Err(per_peer);
        }
        self.global.take();
        Ok(())
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

    /// Linux's `inet_peer_xrlim_allow` with `icmp_ratelimit` 1000 ms: a burst of 6, then one a
    /// second; another destination has a bucket of its own.
    #[test]
    fn peer_limit_is_per_destination() {
        let mut p = PeerLimit::new(SecretKey::from_bytes([2; 16]), Duration::from_secs(1), 6);
        let t0 = Instant::from_secs(5);
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 3]);
        assert_eq!((0..20).filter(|_| p.allow(&a, t0)).count(), 6);
        assert_eq!((0..20).filter(|_| p.allow(&b, t0)).count(), 6);
        let t1 = t0 + Duration::from_millis(999);
        assert!(!p.allow(&a, t1));
        let t2 = t0 + Duration::from_millis(1000);
        assert!(p.allow(&a, t2));
        assert!(!p.allow(&a, t2));
        // Saved credit stops at the burst.
        let t3 = t0 + Duration::from_secs(60);
        assert_eq!((0..20).filter(|_| p.allow(&a, t3)).count(), 6);
        // An interval of 0 turns the limit off.
        let mut off = PeerLimit::new(SecretKey::from_bytes([2; 16]), Duration::ZERO, 6);
        assert!((0..100).all(|_| off.allow(&a, t0)));
    }

    /// A flood of errors to many (spoofed) destinations neither grows the table nor keeps one host
    /// that draws no errors from getting its own (a slot is taken over with a full bucket); a host
    /// that keeps drawing errors through the flood keeps its slot, and its limit.
    #[test]
    fn peer_limit_table_is_bounded_and_a_flood_does_not_starve_others() {
        let mut p = PeerLimit::new(SecretKey::from_bytes([9; 16]), Duration::from_secs(1), 6);
        let flooder = [10, 0, 0, 1];
        let mut t = Instant::from_secs(1);
        assert_eq!((0..6).filter(|_| p.allow(&flooder, t)).count(), 6);
        for i in 0..100_000u32 {
            t = t + Duration::from_micros(1);
            let _ = p.allow(&(i | 0x8000_0000).to_be_bytes(), t);
            assert!(!p.allow(&flooder, t), "after {i}");
        }
        assert_eq!(p.slots.len(), PEER_SLOTS);
        assert!(p.allow(&[192, 0, 2, 7], t));
    }

    /// Errors held back by a destination's own bucket take nothing from the global budget; the
    /// global budget holds every destination; loopback skips the per-destination bucket.
    #[test]
    fn error_limit_checks_global_then_destination() {
        let limits = crate::config::Limits {
            icmp_rate_per_sec: 10,
            icmp_burst: 8,
            ..Default::default()
        };
        let mut l = ErrorLimit::new(&limits, SecretKey::from_bytes([4; 16]));
        let reasons = (DropReason::IcmpRateLimited, DropReason::IcmpPeerRateLimited);
        let t0 = Instant::from_secs(1);
        let link = InterfaceId(1);
        let a = [10, 0, 0, 1];
        let got: Vec<_> = (0..10).map(|_| l.allow(&a, link, t0, reasons)).collect();
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 6);
        assert_eq!(got[6], Err(DropReason::IcmpPeerRateLimited));
        // 2 of the global 8 are left.
        assert!(l.allow(&[10, 0, 0, 3], link, t0, reasons).is_ok());
        assert!(l.allow(&[10, 0, 0, 3], link, t0, reasons).is_ok());
        assert_eq!(
            l.allow(&[10, 0, 0, 3], link, t0, reasons),
            Err(DropReason::IcmpRateLimited)
        );
        // Loopback: only the global budget.
        let t1 = t0 + Duration::from_secs(10);
        let lo = [127, 0, 0, 1];
        let n = (0..20)
            .filter(|_| l.allow(&lo, LOOPBACK, t1, reasons).is_ok())
            .count();
        assert_eq!(n, 8);
    }
}
