//! The reassembly table, alone: hostile fragment sequences and timer ticks, with IPv4 keys
//! ([`reassembly`]) and IPv6 keys ([`reassembly_ipv6`]), through one harness generic over the family.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use fastpath::buf::{BufferMode, BufferPool, PacketBuf};
use fastpath::config::Limits;
use fastpath::reassembly::{
    FragmentKey, Ipv4FragmentKey, Ipv4Reassembled, Ipv6FragmentKey, Ipv6Reassembled, Outcome,
    ReassemblyTable,
};
use fastpath::stats::Drops;
use fastpath::{DropReason, Instant};

use crate::{be16, pattern, Input};

/// What the harness needs of an address family, written from the RFCs rather than from the table.
trait Family {
    type Key: FragmentKey;
    /// Whether the first fragment's header bounds the others (RFC 8200 §4.5), so that a fragment
    /// may be refused as too big for what is held.
    const BOUND_BY_FIRST_HEADER: bool;
    /// The header of every fragment of a whole set.
    const SET_HEADER_LEN: usize;
    /// The most a time exceeded quotes, and of that the most of the first fragment's payload.
    const QUOTE_MAX: usize;
    const QUOTED_PAYLOAD: usize;

    /// The key of datagram `ident` from source `source` (0 or 1 for single fragments, 2 for whole sets).
    fn key(source: u8, ident: u32) -> Self::Key;
    /// The identification of a single fragment's key, from the input.
    fn ident(input: &mut Input) -> u32;
    /// A header length for a single fragment, from the input.
    fn header_len(input: &mut Input) -> usize;
    /// Where the key's datagram starts in [`pattern`].
    fn shift(key: &Self::Key) -> usize;
    /// The header given with a fragment: `len` bytes that name the key.
    fn header(key: &Self::Key, len: usize) -> Vec<u8>;
    /// The length of the header a quote starts with, as written in it.
    fn quoted_header_len(quote: &[u8]) -> usize;
    /// Bytes of a `len`-byte header that count toward 65,535 (RFC 791; RFC 8200 §4.5).
    fn counted(len: usize) -> usize;
    /// Bytes a kept first header adds to the table's count.
    fn header_cost(len: usize) -> usize;
    /// Checks a completed datagram of `key` (the fragment that completed it had a `hlen`-byte
    /// header) and returns its payload.
    fn completed(
        key: &Self::Key,
        hlen: usize,
        d: <Self::Key as FragmentKey>::Datagram,
    ) -> PacketBuf;
}

struct V4;

impl Family for V4 {
    type Key = Ipv4FragmentKey;
    const BOUND_BY_FIRST_HEADER: bool = false;
    const SET_HEADER_LEN: usize = 20;
    const QUOTE_MAX: usize = 68;
    const QUOTED_PAYLOAD: usize = 8;

    fn key(source: u8, ident: u32) -> Ipv4FragmentKey {
        let src = match source {
            2 => Ipv4Addr::new(10, 9, 0, 1),
            s => Ipv4Addr::new(10, 0, 0, 1 + s),
        };
        Ipv4FragmentKey {
            src,
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 17,
            ident: ident as u16,
        }
    }
    fn ident(input: &mut Input) -> u32 {
        input.below(4) as u32
    }
    fn header_len(input: &mut Input) -> usize {
        20 + 4 * input.below(11)
    }
    fn shift(key: &Ipv4FragmentKey) -> usize {
        (usize::from(key.ident) * 7919 + usize::from(key.src.octets()[3]) * 104_729) % 65536
    }
    fn header(key: &Ipv4FragmentKey, len: usize) -> Vec<u8> {
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
    fn quoted_header_len(quote: &[u8]) -> usize {
        usize::from(quote[0] & 0x0f) * 4
    }
    fn counted(len: usize) -> usize {
        len
    }
    fn header_cost(_: usize) -> usize {
        0
    }
    fn completed(_: &Ipv4FragmentKey, hlen: usize, d: Ipv4Reassembled) -> PacketBuf {
        assert!(
            hlen + d.payload.len() <= 65535,
            "completed past 65535 bytes"
        );
        let h = d.first_header().len();
        assert!((20..=60).contains(&h), "a {h}-byte first header");
        d.payload
    }
}

struct V6;

/// The identifications single IPv6 fragments use: two that differ only above 16 bits, and the
/// extremes.
const IDENTS_V6: [u32; 4] = [0, 0x0001_0000, 0x8000_0001, u32::MAX];

impl Family for V6 {
    type Key = Ipv6FragmentKey;
    const BOUND_BY_FIRST_HEADER: bool = true;
    const SET_HEADER_LEN: usize = 48;
    const QUOTE_MAX: usize = 1232;
    const QUOTED_PAYLOAD: usize = 1232;

    fn key(source: u8, ident: u32) -> Ipv6FragmentKey {
        Ipv6FragmentKey {
            src: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1 + u16::from(source)),
            dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100),
            ident,
        }
    }
    fn ident(input: &mut Input) -> u32 {
        input.choose(&IDENTS_V6)
    }
    fn header_len(input: &mut Input) -> usize {
        // Mostly a few extension headers; sometimes a chain longer than the quote.
        48 + 8 * match input.below(8) {
            0 => input.below(200),
            _ => input.below(11),
        }
    }
    fn shift(key: &Ipv6FragmentKey) -> usize {
        (key.ident as usize % 65521 * 7919 + usize::from(key.src.octets()[15]) * 104_729) % 65536
    }
    /// An IPv6 header (its Payload Length field holds the header's own length, so a quote says how
    /// much of it is header), 8-byte extension headers, and a Fragment header with Next Header 17.
    fn header(key: &Ipv6FragmentKey, len: usize) -> Vec<u8> {
        let mut h = vec![0u8; len];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(len as u16).to_be_bytes());
        h[6] = if len > 48 { 0 } else { 44 };
        h[7] = 64;
        h[8..24].copy_from_slice(&key.src.octets());
        h[24..40].copy_from_slice(&key.dst.octets());
        for (i, b) in h.iter_mut().enumerate().take(len - 8).skip(40) {
            *b = i as u8;
        }
        h[len - 8] = 17;
        h[len - 4..].copy_from_slice(&key.ident.to_be_bytes());
        h
    }
    fn quoted_header_len(quote: &[u8]) -> usize {
        usize::from(be16(quote, 4))
    }
    fn counted(len: usize) -> usize {
        len - 48
    }
    fn header_cost(len: usize) -> usize {
        len
    }
    fn completed(key: &Ipv6FragmentKey, _: usize, d: Ipv6Reassembled) -> PacketBuf {
        let h = d.first_header.len();
        assert!(h >= 48, "a {h}-byte first header");
        assert_eq!(
            &d.first_header[..],
            &Self::header(key, h)[..],
            "the first fragment's header"
        );
        assert_eq!(d.next_header(), 17);
        assert_eq!(d.unfragmentable().len(), h - 8);
        assert_eq!(d.payload_len(), Self::counted(h) + d.payload.len());
        assert!(d.payload_len() <= 65535, "completed past 65535 bytes");
        d.payload
    }
}

/// Bytes `from..from + len` of every datagram with `key`: a window of [`pattern`] at an offset that
/// depends on the key, so that a byte put at the wrong offset, or taken from another datagram, shows.
/// (Slices rather than a function per byte: copying and comparing them is what keeps the target fast
/// under coverage instrumentation.)
fn content<F: Family>(key: &F::Key, from: usize, len: usize) -> &'static [u8] {
    let shift = F::shift(key);
    &pattern()[shift + from..shift + from + len]
}

struct Harness<F: Family> {
    table: ReassemblyTable<F::Key>,
    pool: BufferPool,
    drops: Drops,
    limits: Limits,
    now: Instant,
    /// Keys given to the table, for checking what it reports as expired.
    keys: HashSet<F::Key>,
}

/// A fragment of the datagram with `key`: `len` bytes from `offset`.
fn fragment<F: Family>(
    pool: &mut BufferPool,
    key: &F::Key,
    offset: usize,
    len: usize,
) -> PacketBuf {
    let mut buf = pool.alloc(len);
    buf.extend_from_slice(content::<F>(key, offset, len));
    buf
}

impl<F: Family> Harness<F> {
    fn new(limits: Limits, mode: BufferMode) -> Harness<F> {
        Harness {
            table: ReassemblyTable::new(&limits),
            pool: BufferPool::new(mode, 64),
            drops: Drops::default(),
            limits,
            now: Instant::ZERO,
            keys: HashSet::new(),
        }
    }

    fn insert(
        &mut self,
        key: F::Key,
        offset: usize,
        len: usize,
        more: bool,
        hlen: usize,
    ) -> Outcome<PacketBuf> {
        let buf = fragment::<F>(&mut self.pool, &key, offset, len);
        self.keys.insert(key);
        let evictions = self.drops.get(DropReason::ReassemblyEvicted);
        let (held, bytes) = (self.table.len() as i64, self.table.bytes_held());
        let outcome = match self.table.insert(
            key,
            offset,
            more,
            &F::header(&key, hlen),
            buf,
            self.now,
            &mut self.pool,
            &mut self.drops,
        ) {
            Outcome::Held => Outcome::Held,
            Outcome::Dropped(r) => Outcome::Dropped(r),
            Outcome::Complete(d) => Outcome::Complete(F::completed(&key, hlen, d)),
        };
        assert_eq!(
            self.drops.total(),
            self.drops.get(DropReason::ReassemblyEvicted),
            "the table counts evictions only"
        );
        // What no state can change: the checks on the fragment alone.
        let stateless = if len == 0 || (more && !len.is_multiple_of(8)) {
            Some(DropReason::FragmentBadLength)
        } else if F::counted(hlen) + offset + len > 65535 {
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
                ) || (F::BOUND_BY_FIRST_HEADER && *r == DropReason::FragmentTooBig),
                "unexpected {r:?}"
            ),
            _ => {}
        }
        // An atomic fragment (RFC 6946 §4) comes straight back, whatever is held with its key.
        let atomic = stateless.is_none() && offset == 0 && !more;
        if atomic {
            assert!(
                matches!(outcome, Outcome::Complete(_)),
                "atomic fragment: {outcome:?}"
            );
        }
        // Every datagram that leaves the table is counted once: the others it evicted by the table,
        // this one (completed, or discarded whole) by the caller from the outcome. So the change in
        // datagrams held plus the table's evictions is whether this call made a new entry (0 or 1)
        // less whether this datagram left.
        let evicted = (self.drops.get(DropReason::ReassemblyEvicted) - evictions) as i64;
        let change = self.table.len() as i64 - held + evicted;
        let left = match &outcome {
            Outcome::Complete(_) => !atomic,
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
        let refused = matches!(
            outcome,
            Outcome::Dropped(DropReason::FragmentDuplicate | DropReason::FragmentTooBig)
        );
        if stateless.is_some() || refused || atomic {
            assert_eq!(
                (change, evicted, self.table.bytes_held()),
                (0, 0, bytes),
                "a fragment refused or passed through changed the table"
            );
        }
        if let Outcome::Complete(d) = &outcome {
            let d = d.data();
            assert!(
                d.len() >= offset + len,
                "completed short of its last fragment"
            );
            if d != content::<F>(&key, 0, d.len()) {
                let k = (0..d.len())
                    .find(|&k| d[k] != content::<F>(&key, k, 1)[0])
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
            let q = e.quoted();
            assert!(q.len() <= F::QUOTE_MAX, "a {}-byte quote", q.len());
            let h = F::quoted_header_len(q);
            let hq = h.min(F::QUOTE_MAX);
            assert!(h >= F::SET_HEADER_LEN && hq <= q.len(), "{h}-byte header");
            assert!(q.len() <= h + F::QUOTED_PAYLOAD, "quoted past the payload");
            assert_eq!(&q[..hq], &F::header(&e.key, h)[..hq], "quoted header");
            assert_eq!(
                &q[hq..],
                content::<F>(&e.key, 0, q.len() - hq),
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

/// Reassembly with IPv4 keys: the first bytes choose the limits (datagrams, bytes, fragments,
/// timeout) and the buffer mode; the rest is a program of fragments (one of four datagrams from two
/// sources, any offset and length, more-fragments either way, headers of 20 to 60 bytes), whole
/// fragment sets of a fresh datagram in shuffled order, clock steps and expiry. After every step: the
/// caps hold, an empty table holds no bytes and no buffers; the checks on a fragment alone give the
/// same verdict whatever the table holds; an atomic fragment comes straight back and leaves the table
/// as it was; a completed datagram is every byte right; a whole set that fits the limits completes
/// whatever else is held; an expired datagram quotes its first fragment (header and 8 bytes).
/// Finally everything expires, and every buffer is back in the pool.
pub fn reassembly(data: &[u8]) {
    run::<V4>(data);
}

/// Reassembly with IPv6 keys (RFC 8200 §4.5): the program of [`reassembly`], with 32-bit
/// identifications (four, two of them equal in their low 16 bits, from each of two sources) and
/// headers of 48 bytes and up (the IPv6 header, 8-byte extension headers, the Fragment header),
/// sometimes longer than the quote. Besides [`reassembly`]'s checks: a completed packet carries its
/// first fragment's header, whose extension headers and the payload stay within 65,535 bytes; a
/// fragment refused as too big for the first fragment's header leaves the table as it was; the bytes
/// held count the kept headers and stay within the limit; an expired packet quotes its first fragment
/// as it arrived, up to 1232 bytes.
pub fn reassembly_ipv6(data: &[u8]) {
    run::<V6>(data);
}

fn run<F: Family>(data: &[u8]) {
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
    let mut h = Harness::<F>::new(limits, mode);
    let mut fresh: u16 = 0;
    let mut steps = 0;
    while !input.is_empty() && steps < 2000 {
        steps += 1;
        match input.u8() % 10 {
            0..=5 => {
                let source = input.below(2) as u8;
                let key = F::key(source, F::ident(&mut input));
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
                let hlen = F::header_len(&mut input);
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
                let key = F::key(2, u32::from(fresh));
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
                    .sum::<usize>()
                    + F::header_cost(F::SET_HEADER_LEN);
                let fits = truesize <= h.limits.reassembly_bytes
                    && pieces.len() <= h.limits.reassembly_fragments;
                let last = pieces.len() - 1;
                for (i, &(offset, len)) in pieces.iter().enumerate() {
                    let outcome =
                        h.insert(key, offset, len, offset + len < total, F::SET_HEADER_LEN);
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
