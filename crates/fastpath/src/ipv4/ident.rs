//! The IPv4 identification field: one counter per bucket of (source, destination, protocol), the
//! bucket picked by a keyed hash (RFC 7739 §5.3, the design Linux's `ip_idents` follows).
//!
//! The field only has to tell apart the fragments of datagrams that are in flight at once between the
//! same two hosts for the same protocol (RFC 791, RFC 6864 §4). One global counter does that, but it
//! is predictable from outside: an observer who sees two of a host's packets learns how many it sent
//! in between to anyone (the "idle scan" uses such a host as a zombie), and everybody's fragments share
//! one sequence. With a counter per bucket, a flow's packets still get consecutive values, but an
//! observer only ever sees the counter of its own bucket: the buckets are chosen by a hash keyed with a
//! per-stack secret, and every counter starts at a random value.

use std::cell::Cell;
use std::net::Ipv4Addr;

use crate::rng::Rng;
use crate::secret::SecretKey;

/// Buckets: a power of two, so that picking one is a shift.
const BUCKETS: usize = 2048;

/// Counters for the IPv4 identification field.
#[derive(Clone, Debug)]
pub struct IdentTable {
    key: SecretKey,
    counters: Box<[u16; BUCKETS]>,
    /// The last bucket worked out and for what (source and destination, protocol): a sender that
    /// sends to one destination again and again, as a TCP connection's segments do (IP builds
    /// their header template per segment), hashes once.
    last: Cell<(u64, u8, IdentBucket)>,
}

/// One bucket of an [`IdentTable`]: what a sender that sends to one destination again and again may
/// keep instead of hashing every time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdentBucket(u16);

impl IdentTable {
    /// A table keyed by `secret`; the counters start at values drawn from it.
    pub fn new(secret: SecretKey) -> IdentTable {
        let mut rng = Rng::new(secret.prf(b"counters"));
        let mut counters = Box::new([0u16; BUCKETS]);
        for c in counters.iter_mut() {
            *c = rng.next_u64() as u16;
        }
        let key = secret.derive("buckets");
        let unspecified = Ipv4Addr::UNSPECIFIED;
        let last = Cell::new((0, 0, Self::hash(&key, unspecified, unspecified, 0)));
        IdentTable {
            key,
            counters,
            last,
        }
    }

    /// The bucket of datagrams from `src` to `dst` of `protocol`: SipHash-2-4 of the source, the
    /// destination and the protocol (9 bytes) under the table's key, so the bucket is unknown outside.
    /// Senders keep the bucket in their header template ([`IdentBucket`]), so this runs once per
    /// destination, not per datagram.
    #[inline]
    pub fn bucket(&self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> IdentBucket {
        let pair = (u64::from(u32::from(src)) << 32) | u64::from(u32::from(dst));
        let (last_pair, last_protocol, last) = self.last.get();
        if pair == last_pair && protocol == last_protocol {
            return last;
        }
        let bucket = Self::hash(&self.key, src, dst, protocol);
        self.last.set((pair, protocol, bucket));
        bucket
    }

    #[inline(never)]
    fn hash(key: &SecretKey, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> IdentBucket {
        let [s0, s1, s2, s3] = src.octets();
        let [d0, d1, d2, d3] = dst.octets();
        let h = key.prf(&[s0, s1, s2, s3, d0, d1, d2, d3, protocol]);
        IdentBucket((h >> (64 - BUCKETS.trailing_zeros())) as u16)
    }

    /// The next identification for `bucket`.
    #[inline]
    pub fn next(&mut self, bucket: IdentBucket) -> u16 {
        let c = &mut self.counters[bucket.0 as usize];
        let ident = *c;
        *c = ident.wrapping_add(1);
        ident
    }

    /// The next identification for a datagram from `src` to `dst` of `protocol`.
    #[inline]
    pub fn next_for(&mut self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> u16 {
        let bucket = self.bucket(src, dst, protocol);
        self.next(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    #[test]
    fn one_flow_counts_up_by_one() {
        let mut t = IdentTable::new(SecretKey::from_bytes([1; 16]));
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let first = t.next_for(A, dst, 17);
        for i in 1..100u16 {
            assert_eq!(t.next_for(A, dst, 17), first.wrapping_add(i));
        }
    }

    #[test]
    fn destinations_spread_over_buckets() {
        let t = IdentTable::new(SecretKey::from_bytes([3; 16]));
        let mut seen = std::collections::HashSet::new();
        for i in 0..256u32 {
            seen.insert(t.bucket(A, Ipv4Addr::from(0x0a00_0100 + i), 6));
        }
        // 256 destinations into 2048 buckets: a few collisions at most, never one bucket for all.
        assert!(seen.len() > 230, "{} buckets", seen.len());
    }

    #[test]
    fn the_key_changes_buckets_and_starting_values() {
        let (t1, t2) = (
            IdentTable::new(SecretKey::from_bytes([5; 16])),
            IdentTable::new(SecretKey::from_bytes([7; 16])),
        );
        let dst = Ipv4Addr::new(192, 0, 2, 1);
        let differ = (0..64u8)
            .filter(|&p| t1.bucket(A, dst, p) != t2.bucket(A, dst, p))
            .count();
        assert!(differ > 50, "{differ} of 64 differ");
        // The one-entry cache gives what the hash gives, whatever came before.
        for p in [6, 17, 6, 6, 17] {
            assert_eq!(
                t1.bucket(A, dst, p),
                IdentTable::hash(&t1.key, A, dst, p),
                "protocol {p}"
            );
        }
        assert_ne!(t1.counters[..16], t2.counters[..16]);
    }
}
