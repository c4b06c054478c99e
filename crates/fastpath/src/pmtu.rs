//! Path MTU: what this host has learned about the largest datagram that reaches a destination
//! without fragmentation (RFC 1191 for IPv4, RFC 8201 for IPv6), written once over [`IpAddress`] and
//! kept by each IP layer for its family.
//!
//! The cache is bounded (the oldest entry makes room for a new destination) and every entry expires
//! a fixed time after it was learned, so that a path that got better is found again (RFC 1191 §6.3:
//! no sooner than 5 minutes, 10 recommended; Linux's `mtu_expires` is 600 s). It never holds more
//! than it was told, and it refuses MTUs below a floor: RFC 5927 §3 (an attacker who forges
//! "fragmentation needed" messages to shrink a connection's segments to the minimum) and RFC 8201
//! §4 / RFC 1191 §3 (a host must not reduce its estimate below the protocol's minimum).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::addr::IpAddress;
use crate::stats::{DropReason, Drops, PathMtuCounters};
use crate::time::Instant;

/// RFC 1191 §7's table of MTU plateaus, largest first: the MTUs in common use, for a "fragmentation
/// needed" message from an old router that does not say its next-hop MTU (RFC 1191 §5).
pub const IPV4_PLATEAUS: [u16; 11] = [
    65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68,
];

/// The largest RFC 1191 plateau below `total_len`, the total length of the datagram an old router
/// could not forward (RFC 1191 §5: "the PMTU should be reduced to the largest plateau smaller than
/// the total length"); 68, IPv4's minimum MTU (RFC 791), at the bottom.
pub fn ipv4_plateau_below(total_len: u16) -> u16 {
    IPV4_PLATEAUS
        .iter()
        .copied()
        .find(|&p| p < total_len)
        .unwrap_or(68)
}

/// The bounds of a [`PathMtuCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathMtuLimits {
    /// Destinations remembered at once; the oldest entry is evicted for a new one.
    pub entries: usize,
    /// How long a learned MTU is believed.
    pub expires: Duration,
    /// The smallest MTU accepted from the network: IPv4 552 by default (Linux's `min_pmtu`: 512
    /// bytes of TCP payload and two 20-byte headers), IPv6 1280 (RFC 8200 §5).
    pub floor: usize,
}

/// Why [`PathMtuCache::learn`] did not lower a destination's MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The MTU is below the cache's floor.
    BelowFloor,
    /// The MTU is not smaller than the path MTU already in use; the path MTU is still this.
    NotSmaller(usize),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    mtu: usize,
    expires: Instant,
}

/// Path MTUs by destination, bounded and expiring. Lookups take the stack's explicit clock, so an
/// entry past its time is never used even before [`expire`](Self::expire) has removed it.
#[derive(Debug)]
pub struct PathMtuCache<A> {
    limits: PathMtuLimits,
    entries: HashMap<A, Entry>,
    /// Destinations in the order they were learned, with the expiry they were learned with: since
    /// every entry lives equally long this is also the order they expire in. An element whose expiry
    /// no longer matches its entry's is stale (the destination was learned again since) and skipped.
    order: VecDeque<(A, Instant)>,
    /// The time of the front of `order`, kept so that [`next_expiry`](Self::next_expiry), asked on
    /// every poll, is one load.
    next: Option<Instant>,
}

impl<A: IpAddress> PathMtuCache<A> {
    /// An empty cache with `limits`.
    pub fn new(limits: PathMtuLimits) -> PathMtuCache<A> {
        PathMtuCache {
            limits,
            entries: HashMap::new(),
            order: VecDeque::new(),
            next: None,
        }
    }

    /// The bounds.
    pub fn limits(&self) -> PathMtuLimits {
        self.limits
    }

    /// Destinations held (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The MTU learned for `dst`, unless there is none or it has expired at `now`.
    #[inline]
    pub fn get(&self, dst: A, now: Instant) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        self.entries
            .get(&dst)
            .filter(|e| e.expires > now)
            .map(|e| e.mtu)
    }

    /// The path MTU to `dst` through a link of `link_mtu`: the smaller of the two.
    #[inline]
    pub fn path_mtu(&self, dst: A, link_mtu: usize, now: Instant) -> usize {
        self.get(dst, now).map_or(link_mtu, |m| m.min(link_mtu))
    }

    /// A router said datagrams to `dst` must be at most `mtu` bytes; the first hop's link takes
    /// `link_mtu`. Lowers the path MTU to `mtu` and returns it, or refuses (counted as ignored, and as
    /// a drop by its reason): an MTU below the floor, or one not smaller than the path MTU in use
    /// (RFC 1191 §6.3: a host must never raise its estimate on a "fragmentation needed"). A new
    /// destination in a full cache evicts the oldest entry.
    pub fn learn(
        &mut self,
        dst: A,
        mtu: usize,
        link_mtu: usize,
        now: Instant,
        counters: &mut PathMtuCounters,
        drops: &mut Drops,
    ) -> Result<usize, Refused> {
        if mtu < self.limits.floor {
            counters.ignored += 1;
            drops.add(DropReason::PathMtuBelowFloor);
            return Err(Refused::BelowFloor);
        }
        let current = self.path_mtu(dst, link_mtu, now);
        if mtu >= current {
            counters.ignored += 1;
            drops.add(DropReason::PathMtuNotSmaller);
            return Err(Refused::NotSmaller(current));
        }
        self.expire(now, counters);
        if !self.entries.contains_key(&dst) && self.entries.len() >= self.limits.entries {
            self.evict_oldest(counters);
        }
        let expires = now + self.limits.expires;
        self.entries.insert(dst, Entry { mtu, expires });
        self.order.push_back((dst, expires));
        // Stale order elements (destinations learned again) are dropped as they reach the front;
        // compact when they outnumber the live ones so the queue stays bounded.
        if self.order.len() > 2 * self.limits.entries.max(1) {
            let entries = &self.entries;
            self.order
                .retain(|(d, at)| entries.get(d).is_some_and(|e| e.expires == *at));
        }
        self.next = self.order.front().map(|&(_, at)| at);
        counters.learned += 1;
        Ok(mtu)
    }

    /// Removes the oldest live entry.
    fn evict_oldest(&mut self, counters: &mut PathMtuCounters) {
        while let Some((dst, at)) = self.order.pop_front() {
            if self.entries.get(&dst).is_some_and(|e| e.expires == at) {
                self.entries.remove(&dst);
                counters.evicted += 1;
                return;
            }
        }
    }

    /// When [`expire`](Self::expire) next has work: the next entry's expiry, or earlier, the time of
    /// a stale record of one learned again since (which `expire` then clears). One look at the front
    /// of the queue, kept: the stack asks on every poll.
    #[inline(always)]
    pub fn next_expiry(&self) -> Option<Instant> {
        self.next
    }

    /// Removes the entries expired at `now`; returns how many.
    pub fn expire(&mut self, now: Instant, counters: &mut PathMtuCounters) -> usize {
        let mut n = 0;
        while let Some(&(dst, at)) = self.order.front() {
            let live = self.entries.get(&dst).is_some_and(|e| e.expires == at);
            if live && at > now {
                break;
            }
            self.order.pop_front();
            if live {
                self.entries.remove(&dst);
                counters.expired += 1;
                n += 1;
            }
        }
        self.next = self.order.front().map(|&(_, at)| at);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const T0: Instant = Instant::from_secs(100);

    fn cache<A: IpAddress>(entries: usize, floor: usize) -> PathMtuCache<A> {
        PathMtuCache::new(PathMtuLimits {
            entries,
            expires: Duration::from_secs(600),
            floor,
        })
    }

    fn v4(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    #[test]
    fn learns_only_smaller_mtus_above_the_floor() {
        let mut c = cache::<Ipv4Addr>(4, 552);
        let (mut n, mut drops) = (PathMtuCounters::default(), Drops::default());
        assert_eq!(c.path_mtu(v4(1), 1500, T0), 1500);
        assert_eq!(c.learn(v4(1), 1000, 1500, T0, &mut n, &mut drops), Ok(1000));
        assert_eq!(c.path_mtu(v4(1), 1500, T0), 1000);
        // A smaller link wins over what was learned.
        assert_eq!(c.path_mtu(v4(1), 900, T0), 900);
        assert_eq!(
            c.learn(v4(1), 1200, 1500, T0, &mut n, &mut drops),
            Err(Refused::NotSmaller(1000))
        );
        assert_eq!(
            c.learn(v4(1), 1000, 1500, T0, &mut n, &mut drops),
            Err(Refused::NotSmaller(1000))
        );
        assert_eq!(
            c.learn(v4(2), 1500, 1500, T0, &mut n, &mut drops),
            Err(Refused::NotSmaller(1500))
        );
        assert_eq!(
            c.learn(v4(1), 551, 1500, T0, &mut n, &mut drops),
            Err(Refused::BelowFloor)
        );
        assert_eq!(c.learn(v4(1), 552, 1500, T0, &mut n, &mut drops), Ok(552));
        assert_eq!(c.path_mtu(v4(1), 1500, T0), 552);
        assert_eq!((n.learned, n.ignored), (2, 4));
        assert_eq!(drops.get(DropReason::PathMtuNotSmaller), 3);
        assert_eq!(drops.get(DropReason::PathMtuBelowFloor), 1);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn entries_expire_after_their_time() {
        let mut c = cache::<Ipv4Addr>(4, 552);
        let (mut n, mut drops) = (PathMtuCounters::default(), Drops::default());
        c.learn(v4(1), 1000, 1500, T0, &mut n, &mut drops).unwrap();
        let t1 = T0 + Duration::from_secs(60);
        c.learn(v4(2), 1200, 1500, t1, &mut n, &mut drops).unwrap();
        assert_eq!(c.next_expiry(), Some(T0 + Duration::from_secs(600)));
        let before = T0 + Duration::from_secs(599);
        assert_eq!(c.get(v4(1), before), Some(1000));
        assert_eq!(c.expire(before, &mut n), 0);
        // At its time an entry is no longer used, even before it is removed.
        let at = T0 + Duration::from_secs(600);
        assert_eq!(c.get(v4(1), at), None);
        assert_eq!(c.path_mtu(v4(1), 1500, at), 1500);
        assert_eq!(c.expire(at, &mut n), 1);
        assert_eq!(c.next_expiry(), Some(t1 + Duration::from_secs(600)));
        assert_eq!(c.get(v4(2), at), Some(1200));
        assert_eq!(c.expire(t1 + Duration::from_secs(600), &mut n), 1);
        assert!(c.is_empty() && c.next_expiry().is_none());
        assert_eq!(n.expired, 2);
        // Learning again restarts the clock: the older expiry is stale.
        c.learn(v4(3), 1400, 1500, at, &mut n, &mut drops).unwrap();
        let later = at + Duration::from_secs(300);
        c.learn(v4(3), 1300, 1500, later, &mut n, &mut drops)
            .unwrap();
        assert_eq!(c.expire(at + Duration::from_secs(600), &mut n), 0);
        assert_eq!(c.get(v4(3), at + Duration::from_secs(600)), Some(1300));
        assert_eq!(c.next_expiry(), Some(later + Duration::from_secs(600)));
    }

    #[test]
    fn a_full_cache_evicts_the_oldest() {
        let mut c = cache::<Ipv4Addr>(3, 552);
        let (mut n, mut drops) = (PathMtuCounters::default(), Drops::default());
        for i in 1..=3u8 {
            let t = T0 + Duration::from_secs(u64::from(i));
            c.learn(v4(i), 1000, 1500, t, &mut n, &mut drops).unwrap();
        }
        // Learning 1 again makes 2 the oldest.
        let t = T0 + Duration::from_secs(10);
        c.learn(v4(1), 900, 1500, t, &mut n, &mut drops).unwrap();
        c.learn(v4(4), 1000, 1500, t, &mut n, &mut drops).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(v4(2), t), None);
        assert_eq!(c.get(v4(1), t), Some(900));
        assert_eq!(c.get(v4(3), t), Some(1000));
        assert_eq!(n.evicted, 1);
        // The bound holds whatever the churn, and so does the order queue's.
        for i in 0..10_000u32 {
            let dst = Ipv4Addr::from(0x0a01_0000 + (i % 7));
            let mtu = 1400 - (i as usize % 800);
            let _ = c.learn(dst, mtu, 1500, t, &mut n, &mut drops);
            assert!(c.len() <= 3 && c.order.len() <= 6 + 1);
        }
    }

    #[test]
    fn ipv6_uses_the_same_cache_with_its_floor() {
        let mut c = cache::<Ipv6Addr>(8, 1280);
        let (mut n, mut drops) = (PathMtuCounters::default(), Drops::default());
        let dst: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            c.learn(dst, 1279, 1500, T0, &mut n, &mut drops),
            Err(Refused::BelowFloor)
        );
        assert_eq!(c.learn(dst, 1280, 1500, T0, &mut n, &mut drops), Ok(1280));
        assert_eq!(c.path_mtu(dst, 9000, T0), 1280);
    }

    #[test]
    fn plateaus_below_the_total_length() {
        assert_eq!(ipv4_plateau_below(1500), 1492);
        assert_eq!(ipv4_plateau_below(1492), 1006);
        assert_eq!(ipv4_plateau_below(65535), 32000);
        assert_eq!(ipv4_plateau_below(600), 508);
        assert_eq!(ipv4_plateau_below(68), 68);
        assert_eq!(ipv4_plateau_below(0), 68);
    }
}
