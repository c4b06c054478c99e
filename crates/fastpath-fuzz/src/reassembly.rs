//! The reassembly table, alone: hostile fragment sequences and timer ticks.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use fastpath::buf::{BufferMode, BufferPool, PacketBuf};
use fastpath::config::Limits;
use fastpath::reassembly::{Ipv4FragmentKey as FragmentKey, Ipv4Reassembly as ReassemblyTable, Outcome};
use fastpath::stats::Drops;
use fastpath::{DropReason, Instant};

use crate::{pattern, Input};

/// Bytes `from..from + len` of every datagram with `key`: a window of [`pattern`] at an offset that
/// depends on the key, so that a byte put at the wrong offset, or taken from another datagram, shows.
/// (Slices rather than a function per byte: copying and comparing them is what keeps the target fast
/// under coverage instrumentation.)
fn content(key: &FragmentKey, from: usize, len: usize) -> &'static [u8] {
    let shift =
        (usize::from(key.ident) * 7919 + usize::from(key.src.octets()[3]) * 104_729) % 65536;
    &pattern()[shift + from..shift + from + len]
}

/// The IP header the table is given with a fragment (quoted if the datagram times out): 20 to 60
/// bytes that name the key.
fn header(key: &FragmentKey, len: usize) -> Vec<u8> {
    let mut h = vec![0u8; len];
    h[0] = 0x40 | (len / 4) as u8;
    h[4..6].copy_from_slice(&key.ident.to_be_bytes());
    h[9] = key.protocol;
    h[12..16].copy_from_slice(&key.src.octets());
    h[16..20].copy_from_slice(&key.dst.octets());
    for (i, b) in h.iter_mut().enumerate().skip(20) {
        *b = i as u8;
    }
    h
}

struct Harness {
    table: ReassemblyTable,
    pool: BufferPool,
    drops: Drops,
    limits: Limits,
    now: Instant,
    /// Keys given to the table, for checking what it reports as expired.
    keys: HashSet<FragmentKey>,
}

/// A fragment of the datagram with `key`: `len` bytes from `offset`.
fn fragment(pool: &mut BufferPool, key: &FragmentKey, offset: usize, len: usize) -> PacketBuf {
    let mut buf = pool.alloc(len);
    buf.extend_from_slice(content(key, offset, len));
    buf
}

impl Harness {
    fn insert(
        &mut self,
        key: FragmentKey,
        offset: usize,
        len: usize,
        more: bool,
        hlen: usize,
    ) -> Outcome {
        let buf = fragment(&mut self.pool, &key, offset, len);
        self.keys.insert(key);
        let evictions = self.drops.get(DropReason::ReassemblyEvicted);
        let held = self.table.len() as i64;
        let outcome = self.table.insert(
            key,
            offset,
            more,
            &header(&key, hlen),
            buf,
            self.now,
            &mut self.pool,
            &mut self.drops,
        );
        assert_eq!(
            self.drops.total(),
            self.drops.get(DropReason::ReassemblyEvicted),
            "the table counts evictions only"
        );
        // What no state can change: the checks on the fragment alone.
        let stateless = if len == 0 || (more && !len.is_multiple_of(8)) {
            Some(DropReason::FragmentBadLength)
        } else if hlen + offset + len > 65535 {
            Some(DropReason::FragmentTooBig)
        } else if offset == 0 && more && len < 8 {
            Some(DropReason::FragmentTinyFirst)
        } else {
            None
        };
        match (&outcome, stateless) {
            (Outcome::Dropped(r), Some(s)) => assert_eq!(*r, s, "stateless check"),
            (o, Some(s)) => panic!("expected {s:?}, got {o:?}"),
            (Outcome::Dropped(r), None) => assert!(
                matches!(
                    r,
                    DropReason::FragmentDuplicate
                        | DropReason::ReassemblyOverlap
                        | DropReason::ReassemblyInconsistent
                        | DropReason::ReassemblyTooManyFragments
                        | DropReason::ReassemblyEvicted
                ),
                "unexpected {r:?}"
            ),
            _ => {}
        }
        // Every datagram that leaves the table is counted once: the others it evicted by the table,
        // this one (completed, or discarded whole) by the caller from the outcome. So the change in
        // datagrams held plus the table's evictions is whether this call made a new entry (0 or 1)
        // less whether this datagram left.
        let evicted = (self.drops.get(DropReason::ReassemblyEvicted) - evictions) as i64;
        let change = self.table.len() as i64 - held + evicted;
        let left = match &outcome {
            Outcome::Complete(_) => true,
            Outcome::Dropped(r) => !matches!(
                r,
                DropReason::FragmentBadLength
                    | DropReason::FragmentTooBig
                    | DropReason::FragmentTinyFirst
                    | DropReason::FragmentDuplicate
            ),
            Outcome::Held => false,
        };
        let expected = if left { -1..=0 } else { 0..=1 };
        assert!(
            expected.contains(&change),
            "{outcome:?}: {held} held before, {} after, {evicted} evicted",
            self.table.len()
        );
        if stateless.is_some() || matches!(outcome, Outcome::Dropped(DropReason::FragmentDuplicate))
        {
            assert_eq!(
                (change, evicted),
                (0, 0),
                "a rejected fragment changed the table"
            );
        }
        if let Outcome::Complete(d) = &outcome {
            let d = d.data();
            assert!(
                d.len() >= offset + len,
                "completed short of its last fragment"
            );
            assert!(hlen + d.len() <= 65535, "completed past 65535 bytes");
            if d != content(&key, 0, d.len()) {
                let k = (0..d.len())
                    .find(|&k| d[k] != content(&key, k, 1)[0])
                    .unwrap_or(0);
                panic!("byte {k} of {} of {key:?} is wrong", d.len());
            }
        }
        // A completed datagram's buffer is the caller's until it frees it.
        self.check(u64::from(matches!(outcome, Outcome::Complete(_))));
        outcome
    }

    fn expire(&mut self) {
        let before = self.table.len();
        let keys = &self.keys;
        let n = self.table.expire(self.now, &mut self.pool, |e| {
            assert!(keys.contains(&e.key), "expired an unknown datagram");
            assert!(e.quote_len <= 68);
            let h = usize::from(e.quote[0] & 0x0f) * 4;
            assert!(h >= 20 && h <= e.quote_len && e.quote_len <= h + 8);
            assert_eq!(&e.quote[..h], &header(&e.key, h)[..], "quoted header");
            assert_eq!(
                &e.quote[h..e.quote_len],
                content(&e.key, 0, e.quote_len - h),
                "quoted payload"
            );
        });
        assert_eq!(self.table.len(), before - n);
        if let Some(d) = self.table.next_deadline() {
            assert!(d > self.now, "a datagram past its deadline survived expire");
        }
        self.check(0);
    }

    /// Bounds hold; empty means nothing held, and every buffer is back in the pool.
    fn check(&self, out_elsewhere: u64) {
        let (n, bytes) = (self.table.len(), self.table.bytes_held());
        assert!(n <= self.limits.reassembly_datagrams, "{n} datagrams held");
        assert!(bytes <= self.limits.reassembly_bytes, "{bytes} bytes held");
        assert_eq!(n == 0, bytes == 0, "{n} datagrams in {bytes} bytes");
        assert_eq!(n == 0, self.table.next_deadline().is_none());
        let s = self.pool.stats();
        let out = s.allocated + s.reused - s.recycled - s.released;
        if n == 0 {
            assert_eq!(out, out_elsewhere, "buffers lost by the table");
        }
    }
}

/// Reassembly: the first bytes choose the limits (datagrams, bytes, fragments, timeout) and the
/// buffer mode; the rest is a program of fragments (one of four datagrams from two sources, any
/// offset and length, more-fragments either way, headers of 20 to 60 bytes), whole fragment sets
/// of a fresh datagram in shuffled order, clock steps and expiry. After every step: the caps hold,
/// an empty table holds no bytes and no buffers; the checks on a fragment alone give the same
/// verdict whatever the table holds; a completed datagram is every byte right; a whole set that fits
/// the limits completes whatever else is held; an expired datagram quotes its first fragment.
/// Finally everything expires, and every buffer is back in the pool.
pub fn reassembly(data: &[u8]) {
    let mut input = Input::new(data);
    let limits = Limits {
        reassembly_datagrams: 1 + input.below(8),
        reassembly_bytes: input.choose(&[4096, 6 * 2048, 16384 * 3, 2 * 65664, 4 << 20]),
        reassembly_fragments: input.choose(&[1, 2, 4, 16, 100, 2048]),
        reassembly_timeout: Duration::from_secs(input.choose(&[1, 15, 30])),
        ..Limits::default()
    };
    let mode = if input.bool() {
        BufferMode::Heap
    } else {
        BufferMode::Pool
    };
    let mut h = Harness {
        table: ReassemblyTable::new(&limits),
        pool: BufferPool::new(mode, 64),
        drops: Drops::default(),
        limits,
        now: Instant::ZERO,
        keys: HashSet::new(),
    };
    let mut fresh: u16 = 0;
    let mut steps = 0;
    while !input.is_empty() && steps < 2000 {
        steps += 1;
        match input.u8() % 10 {
            0..=5 => {
                let key = FragmentKey {
                    src: Ipv4Addr::new(10, 0, 0, 1 + input.below(2) as u8),
                    dst: Ipv4Addr::new(10, 0, 0, 2),
                    protocol: 17,
                    ident: input.below(4) as u16,
                };
                let offset = if input.bool() {
                    input.below(32) * 8
                } else {
                    usize::from(input.u16() & 0x1fff) * 8
                };
                let len = match input.below(4) {
                    0 => input.below(64),
                    1 => input.below(32) * 8,
                    2 => input.u16() as usize % 9000,
                    _ => input.u16() as usize,
                };
                let more = input.bool();
                let hlen = 20 + 4 * input.below(11);
                if let Outcome::Complete(d) = h.insert(key, offset, len, more, hlen) {
                    h.pool.free(d);
                }
            }
            6 => h.expire(),
            7 => {
                let step = input.choose(&[0, 1, 500, 1000, 10_000, 31_000]);
                h.now = h.now + Duration::from_millis(step);
            }
            _ => {
                // A whole fragment set of a fresh datagram, in an order the input picks.
                fresh = fresh.wrapping_add(1);
                let key = FragmentKey {
                    src: Ipv4Addr::new(10, 9, 0, 1),
                    dst: Ipv4Addr::new(10, 0, 0, 2),
                    protocol: 17,
                    ident: fresh,
                };
                let total = 1 + input.u16() as usize % 65515;
                // At most 300 pieces (past the fragment limits it tries, but for the default), so that
                // one input stays cheap.
                let size = (8 * (1 + input.u16() as usize % 2000))
                    .max(total.div_ceil(300).next_multiple_of(8));
                let mut pieces: Vec<(usize, usize)> = (0..total.div_ceil(size))
                    .map(|i| (i * size, size.min(total - i * size)))
                    .collect();
                for i in (1..pieces.len()).rev() {
                    pieces.swap(i, input.below(i + 1));
                }
                let truesize: usize = pieces
                    .iter()
                    .map(|&(_, len)| {
                        let b = h.pool.alloc(len);
                        let t = b.truesize();
                        h.pool.free(b);
                        t
                    })
                    .sum();
                let fits = truesize <= h.limits.reassembly_bytes
                    && pieces.len() <= h.limits.reassembly_fragments;
                let last = pieces.len() - 1;
                for (i, &(offset, len)) in pieces.iter().enumerate() {
                    let outcome = h.insert(key, offset, len, offset + len < total, 20);
                    match outcome {
                        Outcome::Complete(d) => {
                            assert_eq!(i, last, "completed early");
                            assert_eq!(d.len(), total);
                            h.pool.free(d);
                        }
                        Outcome::Held if i < last => {}
                        o => assert!(
                            !fits,
                            "a set of {} pieces in {truesize} bytes that fits {:?}: piece {i} {o:?}",
                            pieces.len(),
                            h.limits
                        ),
                    }
                }
            }
        }
    }
    h.now = h.now + Duration::from_secs(3600);
    h.expire();
    assert!(h.table.is_empty());
    assert_eq!(h.table.bytes_held(), 0);
}
