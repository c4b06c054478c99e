//! Reassembly of fragmented datagrams, with bounds on everything.
//!
//! Each datagram being reassembled holds its fragments' buffers (no copy until it completes), sorted by
//! offset. Overlapping fragments discard the whole datagram (as Linux does since CVE-2018-5391, and
//! RFC 5722 requires for IPv6): that defeats teardrop-style attacks and the ambiguity of which copy of a
//! byte wins. An exact duplicate of a held fragment is dropped alone, since links duplicate packets. The
//! table holds at most `reassembly_datagrams` datagrams and `reassembly_bytes` bytes of buffers; to admit
//! a new one the oldest are evicted. Each datagram times out `reassembly_timeout` after its first fragment.

use std::net::Ipv4Addr;

use crate::buf::{BufferPool, PacketBuf};
use crate::config::Limits;
use crate::stats::DropReason;
use crate::time::Instant;

/// What identifies the fragments of one datagram (RFC 791).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragmentKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Identification field.
    pub ident: u16,
}

/// What the table did with a fragment.
#[derive(Debug)]
pub enum Outcome {
    /// Held; the datagram is not complete yet.
    Held,
    /// The datagram is complete: its payload, in a fresh buffer.
    Complete(PacketBuf),
    /// The fragment (or, for some reasons, its whole datagram) was dropped.
    Dropped(DropReason),
}

/// The start of a datagram that timed out with its first fragment received: what an ICMP time exceeded
/// message quotes (RFC 792). `quote` holds the original IP header and up to 8 bytes of its payload.
#[derive(Clone, Copy, Debug)]
pub struct Expired {
    /// The fragment key of the datagram.
    pub key: FragmentKey,
    /// Header and leading payload bytes of the first fragment.
    pub quote: [u8; 68],
    /// Valid bytes in `quote`.
    pub quote_len: usize,
}

#[derive(Debug)]
struct Fragment {
    offset: usize,
    buf: PacketBuf,
}

#[derive(Debug)]
struct Datagram {
    key: FragmentKey,
    fragments: Vec<Fragment>,
    /// Payload length, known once the final fragment arrived.
    total: Option<usize>,
    received: usize,
    truesize: usize,
    deadline: Instant,
    first: Option<([u8; 68], usize)>,
}

/// The reassembly table.
#[derive(Debug)]
pub struct ReassemblyTable {
    datagrams: Vec<Datagram>,
    bytes: usize,
    limits: Limits,
}

impl ReassemblyTable {
    /// An empty table with these limits.
    pub fn new(limits: &Limits) -> ReassemblyTable {
        ReassemblyTable {
            datagrams: Vec::new(),
            bytes: 0,
            limits: limits.clone(),
        }
    }

    /// Datagrams being reassembled.
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    /// True when nothing is being reassembled.
    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// Bytes of buffers held.
    pub fn bytes_held(&self) -> usize {
        self.bytes
    }

    /// The earliest deadline, if any datagram is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.datagrams.iter().map(|d| d.deadline).min()
    }

    /// Adds one fragment whose payload is `buf`'s data, at byte `offset`, with the more-fragments flag
    /// `more`. `header` is the fragment's IP header (for an ICMP time exceeded quote if it is the
    /// first). The caller counts the outcome's drop (one per call); the evictions of other datagrams
    /// are counted here, in `drops`.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        key: FragmentKey,
        offset: usize,
        more: bool,
        header: &[u8],
        buf: PacketBuf,
        now: Instant,
        pool: &mut BufferPool,
        drops: &mut crate::stats::Drops,
    ) -> Outcome {
        let len = buf.len();
        let reject = |pool: &mut BufferPool, buf, reason| {
            pool.free(buf);
            Outcome::Dropped(reason)
        };
        if len == 0 || (more && !len.is_multiple_of(8)) {
            return reject(pool, buf, DropReason::FragmentBadLength);
        }
        if header.len() + offset + len > 65535 {
            return reject(pool, buf, DropReason::FragmentTooBig);
        }
        if offset == 0 && more && len < 8 {
            return reject(pool, buf, DropReason::FragmentTinyFirst);
        }

        let index = match self.datagrams.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                self.make_room(buf.truesize(), pool, drops);
                self.datagrams.push(Datagram {
                    key,
                    fragments: Vec::new(),
                    total: None,
                    received: 0,
                    truesize: 0,
                    deadline: now + self.limits.reassembly_timeout,
                    first: None,
                });
                self.datagrams.len() - 1
            }
        };

        let d = &mut self.datagrams[index];
        let end = offset + len;
        // Find where it goes; reject duplicates and overlaps.
        let at = d.fragments.partition_point(|f| f.offset < offset);
        let overlaps_prev = at > 0 && {
            let p = &d.fragments[at - 1];
            p.offset + p.buf.len() > offset
        };
        let same = d
            .fragments
            .get(at)
            .is_some_and(|n| n.offset == offset && n.buf.len() == len);
        if same {
            return reject(pool, buf, DropReason::FragmentDuplicate);
        }
        let overlaps_next = d.fragments.get(at).is_some_and(|n| n.offset < end);
        if overlaps_prev || overlaps_next {
            pool.free(buf);
            self.discard(index, pool);
            return Outcome::Dropped(DropReason::ReassemblyOverlap);
        }
        let inconsistent = match (more, d.total) {
            (false, Some(total)) => total != end,
            (false, None) => d
                .fragments
                .last()
                .is_some_and(|f| f.offset + f.buf.len() > end),
            (true, Some(total)) => end >= total,
            (true, None) => false,
        };
        if inconsistent {
            pool.free(buf);
            self.discard(index, pool);
            return Outcome::Dropped(DropReason::ReassemblyInconsistent);
        }
        if d.fragments.len() >= self.limits.reassembly_fragments {
            pool.free(buf);
            self.discard(index, pool);
            return Outcome::Dropped(DropReason::ReassemblyTooManyFragments);
        }
        if !more {
            d.total = Some(end);
        }
        if offset == 0 {
            let mut quote = [0; 68];
            let h = header.len().min(60);
            quote[..h].copy_from_slice(&header[..h]);
            let p = len.min(8);
            quote[h..h + p].copy_from_slice(&buf.data()[..p]);
            d.first = Some((quote, h + p));
        }
        d.received += len;
        d.truesize += buf.truesize();
        self.bytes += buf.truesize();
        d.fragments.insert(at, Fragment { offset, buf });

        if d.total == Some(d.received) {
            // Disjoint fragments inside [0, total) whose lengths add up to total cover it.
            let d = self.datagrams.swap_remove(index);
            self.bytes -= d.truesize;
            let total = d.received;
            timed!(Copy);
            let mut out = pool.alloc(total);
            for f in d.fragments {
                out.extend_from_slice(f.buf.data());
                pool.free(f.buf);
            }
            return Outcome::Complete(out);
        }
        // Stay within the byte limit, evicting others first.
        while self.bytes > self.limits.reassembly_bytes {
            let victim = self
                .oldest_except(key)
                .unwrap_or(index_of(&self.datagrams, key));
            let evicted_self = self.datagrams[victim].key == key;
            self.discard(victim, pool);
            if evicted_self {
                // Counted by the caller, from the outcome.
                return Outcome::Dropped(DropReason::ReassemblyEvicted);
            }
            drops.add(DropReason::ReassemblyEvicted);
        }
        Outcome::Held
    }

    /// Discards every datagram whose deadline has passed, calling `expired` for each one whose first
    /// fragment had arrived (RFC 1122 §3.3.2: only then is an ICMP time exceeded sent). Returns how many
    /// were discarded.
    pub fn expire(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        mut expired: impl FnMut(Expired),
    ) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.datagrams.len() {
            if self.datagrams[i].deadline <= now {
                let d = &self.datagrams[i];
                if let Some((quote, quote_len)) = d.first {
                    expired(Expired {
                        key: d.key,
                        quote,
                        quote_len,
                    });
                }
                self.discard(i, pool);
                n += 1;
            } else {
                i += 1;
            }
        }
        n
    }

    fn make_room(
        &mut self,
        incoming: usize,
        pool: &mut BufferPool,
        drops: &mut crate::stats::Drops,
    ) {
        while !self.datagrams.is_empty()
            && (self.datagrams.len() >= self.limits.reassembly_datagrams
                || self.bytes + incoming > self.limits.reassembly_bytes)
        {
            let oldest = self.oldest().expect("not empty");
            self.discard(oldest, pool);
            drops.add(DropReason::ReassemblyEvicted);
        }
    }

    fn oldest(&self) -> Option<usize> {
        (0..self.datagrams.len()).min_by_key(|&i| self.datagrams[i].deadline)
    }

    fn oldest_except(&self, key: FragmentKey) -> Option<usize> {
        (0..self.datagrams.len())
            .filter(|&i| self.datagrams[i].key != key)
            .min_by_key(|&i| self.datagrams[i].deadline)
    }

    fn discard(&mut self, index: usize, pool: &mut BufferPool) {
        let d = self.datagrams.swap_remove(index);
        self.bytes -= d.truesize;
        for f in d.fragments {
            pool.free(f.buf);
        }
    }
}

fn index_of(datagrams: &[Datagram], key: FragmentKey) -> usize {
    datagrams
        .iter()
        .position(|d| d.key == key)
        .expect("datagram present")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BufferMode;
    use crate::stats::Drops;
    use std::time::Duration;

    fn key(ident: u16) -> FragmentKey {
        FragmentKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 17,
            ident,
        }
    }

    struct T {
        table: ReassemblyTable,
        pool: BufferPool,
        drops: Drops,
    }

    impl T {
        fn new(limits: Limits) -> T {
            T {
                table: ReassemblyTable::new(&limits),
                pool: BufferPool::new(BufferMode::Pool, 64),
                drops: Drops::default(),
            }
        }
        fn frag(
            &mut self,
            ident: u16,
            offset: usize,
            more: bool,
            bytes: &[u8],
            now: u64,
        ) -> Outcome {
            let mut buf = self.pool.alloc(bytes.len());
            buf.extend_from_slice(bytes);
            self.table.insert(
                key(ident),
                offset,
                more,
                &[0x45; 20],
                buf,
                Instant::from_secs(now),
                &mut self.pool,
                &mut self.drops,
            )
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7) as u8).collect()
    }

    #[test]
    fn reassembles_in_any_order() {
        let d = data(40);
        let mut t = T::new(Limits::default());
        assert!(matches!(t.frag(1, 16, true, &d[16..32], 0), Outcome::Held));
        assert!(matches!(t.frag(1, 32, false, &d[32..], 0), Outcome::Held));
        match t.frag(1, 0, true, &d[..16], 0) {
            Outcome::Complete(buf) => assert_eq!(buf.data(), &d[..]),
            o => panic!("{o:?}"),
        }
        assert!(t.table.is_empty());
        assert_eq!(t.table.bytes_held(), 0);
    }

    #[test]
    fn overlap_discards_the_datagram_and_duplicates_are_dropped_alone() {
        let d = data(48);
        let mut t = T::new(Limits::default());
        t.frag(1, 0, true, &d[..16], 0);
        assert!(matches!(
            t.frag(1, 0, true, &d[..16], 0),
            Outcome::Dropped(DropReason::FragmentDuplicate)
        ));
        assert_eq!(t.table.len(), 1);
        assert!(matches!(
            t.frag(1, 8, true, &d[8..24], 0),
            Outcome::Dropped(DropReason::ReassemblyOverlap)
        ));
        assert!(t.table.is_empty());
        assert_eq!(t.table.bytes_held(), 0);
    }

    #[test]
    fn bad_fragments_are_refused() {
        let mut t = T::new(Limits::default());
        assert!(matches!(
            t.frag(1, 0, true, &data(12), 0),
            Outcome::Dropped(DropReason::FragmentBadLength)
        ));
        assert!(matches!(
            t.frag(1, 0, true, &[], 0),
            Outcome::Dropped(DropReason::FragmentBadLength)
        ));
        assert!(matches!(
            t.frag(1, 65512, false, &data(8), 0),
            Outcome::Dropped(DropReason::FragmentTooBig)
        ));
        t.frag(2, 0, true, &data(16), 0);
        assert!(matches!(t.frag(2, 16, false, &data(8), 0), Outcome::Complete(b) if b.len() == 24));
    }

    #[test]
    fn inconsistent_final_length_discards() {
        let mut t = T::new(Limits::default());
        t.frag(1, 16, false, &data(8), 0);
        assert!(matches!(
            t.frag(1, 32, false, &data(8), 0),
            Outcome::Dropped(DropReason::ReassemblyInconsistent)
        ));
        assert!(t.table.is_empty());
        t.frag(2, 16, false, &data(8), 0);
        assert!(matches!(
            t.frag(2, 24, true, &data(8), 0),
            Outcome::Dropped(DropReason::ReassemblyInconsistent)
        ));
    }

    #[test]
    fn limits_evict_the_oldest_and_timeouts_fire() {
        let limits = Limits {
            reassembly_datagrams: 4,
            reassembly_timeout: Duration::from_secs(10),
            ..Limits::default()
        };
        let mut t = T::new(limits);
        for ident in 0..10 {
            t.frag(ident, 0, true, &data(16), ident as u64);
        }
        assert_eq!(t.table.len(), 4);
        assert_eq!(t.drops.get(DropReason::ReassemblyEvicted), 6);
        let mut quoted = Vec::new();
        let n = t.table.expire(Instant::from_secs(17), &mut t.pool, |e| {
            quoted.push(e.key.ident)
        });
        assert_eq!(n, 2);
        quoted.sort();
        assert_eq!(quoted, [6, 7]);
        t.table.expire(Instant::from_secs(100), &mut t.pool, |_| {});
        assert!(t.table.is_empty());
        assert_eq!(t.table.bytes_held(), 0);
    }

    #[test]
    fn byte_limit_holds() {
        let limits = Limits {
            reassembly_bytes: 3 * 2048,
            ..Limits::default()
        };
        let mut t = T::new(limits);
        for ident in 0..20 {
            t.frag(ident, 0, true, &data(16), 0);
            assert!(t.table.bytes_held() <= 3 * 2048);
        }
        assert_eq!(t.table.len(), 3);
    }
}
