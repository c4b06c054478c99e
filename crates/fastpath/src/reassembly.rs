//! Reassembly of fragmented datagrams, for IPv4 and IPv6, with bounds on everything.
//!
//! One table design serves both families (RFC 8200 §4.5 asks IPv6 for what RFC 791 and RFC 815 gave
//! IPv4): [`ReassemblyTable`] is generic over the fragment key ([`FragmentKey`]: [`Ipv4FragmentKey`],
//! [`Ipv6FragmentKey`]), which also says how much of the first fragment an ICMP time exceeded quotes
//! and what a completed datagram is handed back as. [`Ipv4Reassembly`] and [`Ipv6Reassembly`] name
//! the two tables; each is monomorphized, so IPv4's is the code it was when it was written for IPv4
//! alone.
//!
//! Each datagram being reassembled holds its fragments' buffers (no copy until it completes), sorted by
//! offset. Overlapping fragments discard the whole datagram (as Linux does since CVE-2018-5391, and
//! RFC 5722 §4 and RFC 8200 §4.5 require for IPv6): that defeats teardrop-style attacks and the
//! ambiguity of which copy of a byte wins. An exact duplicate of a held fragment is dropped alone, since
//! links duplicate packets (RFC 8200 §4.5 allows it). The table holds at most `reassembly_datagrams`
//! datagrams and `reassembly_bytes` bytes of buffers; to admit a new one the oldest are evicted. Each
//! datagram times out `reassembly_timeout` after its first fragment.
//!
//! A fragment that arrives after its datagram was discarded for an overlap starts a fresh entry, as in
//! Linux (`inet_frag_kill` unhashes the queue, and the next fragment's lookup makes a new one): the
//! fragments discarded are gone, so that entry completes only if they are all sent again, and
//! otherwise times out. RFC 8200 §4.5 asks only that the fragments received be discarded (RFC 5722's
//! "including those not yet received" was not carried over).
//!
//! What stays with the caller, which parses the headers:
//! - Unfragmented packets never reach the table (for IPv4 the test is one load and a mask).
//! - Atomic fragments (offset 0, more-fragments clear: [`is_atomic`]) are processed at once, in
//!   isolation from any datagram with the same key (RFC 6946 §4); the caller skips the table for them.
//!   If one is given to [`ReassemblyTable::insert`] anyway, it comes straight back as
//!   [`Outcome::Complete`] without touching the table.
//! - IPv6: a first fragment without the whole header chain is dropped before the table (RFC 7112 §5,
//!   RFC 8200 §4.5), and the drops this table reports as [`DropReason::FragmentBadLength`] (a
//!   non-final fragment not a multiple of 8 bytes) and [`DropReason::FragmentTooBig`] (past 65,535
//!   bytes) are answered with an ICMPv6 parameter problem, code 0 (RFC 8200 §4.5).

use std::fmt;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::buf::{BufferPool, PacketBuf};
use crate::config::Limits;
use crate::stats::DropReason;
use crate::time::Instant;

/// The largest datagram either family reassembles: IPv4's total length (RFC 791) and IPv6's payload
/// length (RFC 8200 §4.5) are 16-bit fields.
pub const MAX_DATAGRAM: usize = 65535;

/// The most of a first fragment an ICMPv6 time exceeded quotes: as much of the invoking packet as fits
/// an ICMPv6 message in the minimum IPv6 MTU, 1280 bytes less the IPv6 header (40) and the ICMPv6
/// header (8) (RFC 4443 §2.4 (c), §3.3; RFC 8200 §4.5).
pub const IPV6_QUOTE_MAX: usize = 1232;

/// True for an atomic fragment (offset 0, more-fragments clear): a whole datagram that carries a
/// fragment header, to be processed at once and never put in the table (RFC 6946 §4).
#[inline(always)]
pub fn is_atomic(offset: usize, more: bool) -> bool {
    offset == 0 && !more
}

/// What identifies the fragments of one datagram, and what its family keeps of them: the quote of a
/// first fragment (for an ICMP time exceeded) and what a completed datagram is handed back as.
/// Implemented by [`Ipv4FragmentKey`] and [`Ipv6FragmentKey`].
pub trait FragmentKey: Copy + Eq + Hash + fmt::Debug {
    /// The quote an ICMP time exceeded carries, as a byte array whose length is the most quoted.
    type Quote: Copy + fmt::Debug + AsRef<[u8]> + AsMut<[u8]>;
    /// What the table keeps of the first fragment's header until its datagram leaves the table.
    type Header: fmt::Debug;
    /// A completed datagram as the caller gets it.
    type Datagram: fmt::Debug;

    /// An empty quote.
    const EMPTY_QUOTE: Self::Quote;
    /// The most bytes of the first fragment's payload quoted after its header.
    const QUOTED_PAYLOAD: usize;
    /// The shortest header a caller gives with a fragment.
    const MIN_HEADER_LEN: usize;
    /// Whether, once the first fragment is held, its header rather than each fragment's own counts
    /// toward the [`MAX_DATAGRAM`] bound: a fragment that would take the packet reassembled with the
    /// first fragment's header past it is dropped alone (RFC 8200 §4.5).
    const BOUND_BY_FIRST_HEADER: bool;

    /// The bytes of a `header_len`-byte header that count toward the [`MAX_DATAGRAM`] bound.
    fn counted_header_len(header_len: usize) -> usize;
    /// Keeps the first fragment's header.
    fn keep_header(header: &[u8]) -> Self::Header;
    /// The bytes of a kept header.
    fn header_bytes(kept: &Self::Header) -> &[u8];
    /// Bytes of memory a kept header takes beyond the table's own entry, counted against
    /// `reassembly_bytes` (0 when it is kept in line).
    fn header_cost(kept: &Self::Header) -> usize;
    /// The completed datagram: `payload` is the reassembled data after the header, `first` the first
    /// fragment's kept header.
    fn complete(first: Self::Header, payload: PacketBuf) -> Self::Datagram;
}

/// What identifies the fragments of one IPv4 datagram (RFC 791: source, destination, protocol and
/// identification).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4FragmentKey {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Identification field.
    pub ident: u16,
}

/// IPv4: the header given with a fragment is its IP header (20 to 60 bytes), all of which counts
/// toward the total length; a time exceeded quotes the first fragment's header and 8 bytes of its
/// payload (RFC 792); a completed datagram is its payload and the first fragment's header
/// ([`Ipv4Reassembled`]: the options an echo reply reflects are the first fragment's).
impl FragmentKey for Ipv4FragmentKey {
    type Quote = [u8; 68];
    type Header = ([u8; 60], usize);
    type Datagram = Ipv4Reassembled;
    const EMPTY_QUOTE: [u8; 68] = [0; 68];
    const QUOTED_PAYLOAD: usize = 8;
    const MIN_HEADER_LEN: usize = 20;
    /// Each fragment is checked against its own header, as IPv4 always was: the stack delivers the
    /// payload with the header of the fragment that completed it.
    const BOUND_BY_FIRST_HEADER: bool = false;

    #[inline]
    fn counted_header_len(header_len: usize) -> usize {
        header_len
    }
    fn keep_header(header: &[u8]) -> ([u8; 60], usize) {
        let mut kept = [0; 60];
        let n = header.len().min(60);
        kept[..n].copy_from_slice(&header[..n]);
        (kept, n)
    }
    fn header_bytes(kept: &([u8; 60], usize)) -> &[u8] {
        &kept.0[..kept.1]
    }
    fn header_cost(_: &([u8; 60], usize)) -> usize {
        0
    }
    fn complete(first: ([u8; 60], usize), payload: PacketBuf) -> Ipv4Reassembled {
        Ipv4Reassembled { payload, first }
    }
}

/// A reassembled IPv4 datagram: its payload, and the header its first fragment arrived with.
#[derive(Debug)]
pub struct Ipv4Reassembled {
    /// The datagram's payload.
    pub payload: PacketBuf,
    first: ([u8; 60], usize),
}

impl Ipv4Reassembled {
    /// The first fragment's header, options included (20 to 60 bytes).
    pub fn first_header(&self) -> &[u8] {
        &self.first.0[..self.first.1]
    }
}

/// What identifies the fragments of one IPv6 packet: source, destination and the 32-bit
/// identification of the Fragment header (RFC 8200 §4.5). The Next Header is not part of it: the
/// fragments' Fragment headers may disagree, and the first fragment's is the one used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentKey {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// The Fragment header's identification.
    pub ident: u32,
}

/// IPv6: the header given with a fragment is everything of the packet in front of its fragmentable
/// part, as it arrived: the IPv6 header, the extension headers of the unfragmentable part and the
/// Fragment header (at least 48 bytes); of it, all but the fixed header and the Fragment header
/// counts toward the reassembled Payload Length (RFC 8200 §4.5): each fragment's own until the first
/// fragment is held, the first fragment's after. A time exceeded quotes the first
/// fragment as it arrived, up to [`IPV6_QUOTE_MAX`] bytes (RFC 4443 §3.3); a completed datagram
/// comes back with the first fragment's header ([`Ipv6Reassembled`]).
impl FragmentKey for Ipv6FragmentKey {
    type Quote = [u8; IPV6_QUOTE_MAX];
    type Header = Box<[u8]>;
    type Datagram = Ipv6Reassembled;
    const EMPTY_QUOTE: [u8; IPV6_QUOTE_MAX] = [0; IPV6_QUOTE_MAX];
    const QUOTED_PAYLOAD: usize = IPV6_QUOTE_MAX;
    const MIN_HEADER_LEN: usize = 48;
    const BOUND_BY_FIRST_HEADER: bool = true;

    #[inline]
    fn counted_header_len(header_len: usize) -> usize {
        header_len.saturating_sub(48)
    }
    fn keep_header(header: &[u8]) -> Box<[u8]> {
        header.into()
    }
    fn header_bytes(kept: &Box<[u8]>) -> &[u8] {
        kept
    }
    fn header_cost(kept: &Box<[u8]>) -> usize {
        kept.len()
    }
    fn complete(first_header: Box<[u8]>, payload: PacketBuf) -> Ipv6Reassembled {
        Ipv6Reassembled {
            first_header,
            payload,
        }
    }
}

/// A reassembled IPv6 packet (RFC 8200 §4.5): the first fragment's header and the fragmentable
/// part. The original packet is the first fragment's unfragmentable part ([`unfragmentable`]) with
/// its last Next Header set to the first fragment's Fragment header's ([`next_header`]) and its
/// Payload Length set to [`payload_len`], followed by `payload`; the caller goes on parsing `payload`
/// as the header [`next_header`] names.
///
/// [`unfragmentable`]: Ipv6Reassembled::unfragmentable
/// [`next_header`]: Ipv6Reassembled::next_header
/// [`payload_len`]: Ipv6Reassembled::payload_len
#[derive(Debug)]
pub struct Ipv6Reassembled {
    /// The first fragment's IPv6 header, unfragmentable extension headers and Fragment header, as
    /// given to [`ReassemblyTable::insert`] with it.
    pub first_header: Box<[u8]>,
    /// The fragmentable part, reassembled, in a fresh buffer (or an atomic fragment's own).
    pub payload: PacketBuf,
}

impl Ipv6Reassembled {
    /// The Next Header of the first fragment's Fragment header (its last 8 bytes): what `payload`
    /// starts with. 59 (No Next Header) if the header given was shorter than a Fragment header.
    pub fn next_header(&self) -> u8 {
        let at = self.first_header.len().wrapping_sub(8);
        self.first_header.get(at).copied().unwrap_or(59)
    }

    /// The first fragment's unfragmentable part: the IPv6 header and the extension headers before
    /// the Fragment header.
    pub fn unfragmentable(&self) -> &[u8] {
        &self.first_header[..self.first_header.len().saturating_sub(8)]
    }

    /// The reassembled packet's Payload Length: the unfragmentable part's extension headers and the
    /// fragmentable part (RFC 8200 §4.5); at most [`MAX_DATAGRAM`].
    pub fn payload_len(&self) -> usize {
        self.unfragmentable().len().saturating_sub(40) + self.payload.len()
    }
}

/// The IPv4 reassembly table.
pub type Ipv4Reassembly = ReassemblyTable<Ipv4FragmentKey>;
/// The IPv6 reassembly table.
pub type Ipv6Reassembly = ReassemblyTable<Ipv6FragmentKey>;
/// An IPv4 datagram that timed out with its first fragment.
pub type Ipv4Expired = Expired<Ipv4FragmentKey>;
/// An IPv6 packet that timed out with its first fragment.
pub type Ipv6Expired = Expired<Ipv6FragmentKey>;

/// What the table did with a fragment. `D` is the family's completed datagram
/// ([`FragmentKey::Datagram`]): an [`Ipv4Reassembled`] or an [`Ipv6Reassembled`].
#[derive(Debug)]
pub enum Outcome<D = Ipv4Reassembled> {
    /// Held; the datagram is not complete yet.
    Held,
    /// The datagram is complete: its payload, in a fresh buffer.
    Complete(D),
    /// The fragment (or, for some reasons, its whole datagram) was dropped.
    Dropped(DropReason),
}

/// The start of a datagram that timed out with its first fragment received: what an ICMP time exceeded
/// message quotes. For IPv4, `quote` holds the original IP header and up to 8 bytes of its payload
/// (RFC 792); for IPv6, the first fragment as it arrived, up to [`IPV6_QUOTE_MAX`] bytes (RFC 4443
/// §3.3, RFC 8200 §4.5).
#[derive(Clone, Copy, Debug)]
pub struct Expired<K: FragmentKey> {
    /// The fragment key of the datagram.
    pub key: K,
    /// Header and leading payload bytes of the first fragment.
    pub quote: K::Quote,
    /// Valid bytes in `quote`.
    pub quote_len: usize,
}

impl<K: FragmentKey> Expired<K> {
    /// The quoted bytes.
    pub fn quoted(&self) -> &[u8] {
        &self.quote.as_ref()[..self.quote_len]
    }
}

#[derive(Debug)]
struct Fragment {
    offset: usize,
    buf: PacketBuf,
}

#[derive(Debug)]
struct Datagram<K: FragmentKey> {
    key: K,
    fragments: Vec<Fragment>,
    /// Payload length, known once the final fragment arrived.
    total: Option<usize>,
    received: usize,
    truesize: usize,
    deadline: Instant,
    /// The first fragment's header, once it arrived (its payload is `fragments[0]`).
    first: Option<K::Header>,
}

/// The reassembly table of one family, keyed by `K`.
#[derive(Debug)]
pub struct ReassemblyTable<K: FragmentKey> {
    datagrams: Vec<Datagram<K>>,
    bytes: usize,
    limits: Limits,
}

impl<K: FragmentKey> ReassemblyTable<K> {
    /// An empty table with these limits.
    pub fn new(limits: &Limits) -> ReassemblyTable<K> {
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

    /// Bytes of buffers held (and of IPv6 first fragments' headers).
    pub fn bytes_held(&self) -> usize {
        self.bytes
    }

    /// The earliest deadline, if any datagram is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.datagrams.iter().map(|d| d.deadline).min()
    }

    /// Adds one fragment whose payload (the fragmentable part) is `buf`'s data, at byte `offset`, with
    /// the more-fragments flag `more`. `header` is what precedes the payload in the packet (see the
    /// family's [`FragmentKey`] impl): kept if this is the first fragment, for an ICMP time exceeded
    /// quote and, for IPv6, the completed packet. The caller counts the outcome's drop (one per call);
    /// the evictions of other datagrams are counted here, in `drops`.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        key: K,
        offset: usize,
        more: bool,
        header: &[u8],
        buf: PacketBuf,
        now: Instant,
        pool: &mut BufferPool,
        drops: &mut crate::stats::Drops,
    ) -> Outcome<K::Datagram> {
        debug_assert!(header.len() >= K::MIN_HEADER_LEN, "header too short");
        let len = buf.len();
        let reject = |pool: &mut BufferPool, buf, reason| {
            pool.free(buf);
            Outcome::Dropped(reason)
        };
        if len == 0 || (more && !len.is_multiple_of(8)) {
            return reject(pool, buf, DropReason::FragmentBadLength);
        }
        if K::counted_header_len(header.len()) + offset + len > MAX_DATAGRAM {
            return reject(pool, buf, DropReason::FragmentTooBig);
        }
        if offset == 0 && more && len < 8 {
            return reject(pool, buf, DropReason::FragmentTinyFirst);
        }
        if is_atomic(offset, more) {
            // RFC 6946 §4: in isolation from any datagram with the same key.
            return Outcome::Complete(K::complete(K::keep_header(header), buf));
        }

        let first = (offset == 0).then(|| K::keep_header(header));
        let first_cost = first.as_ref().map_or(0, K::header_cost);
        let index = match self.datagrams.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                self.make_room(buf.truesize() + first_cost, pool, drops);
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
        if K::BOUND_BY_FIRST_HEADER {
            // RFC 8200 §4.5: the reassembled packet has the first fragment's unfragmentable part.
            // (A fresh entry passes: its only bound is this fragment's, checked above.)
            let (counted, reach) = match &d.first {
                Some(first) => (K::counted_header_len(K::header_bytes(first).len()), end),
                None if offset == 0 => {
                    let held = d.fragments.last().map_or(0, |f| f.offset + f.buf.len());
                    let reach = held.max(d.total.unwrap_or(0)).max(end);
                    (K::counted_header_len(header.len()), reach)
                }
                None => (0, 0),
            };
            if counted + reach > MAX_DATAGRAM {
                return reject(pool, buf, DropReason::FragmentTooBig);
            }
        }
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
        if first.is_some() {
            d.first = first;
        }
        d.received += len;
        d.truesize += buf.truesize() + first_cost;
        self.bytes += buf.truesize() + first_cost;
        d.fragments.insert(at, Fragment { offset, buf });

        if d.total == Some(d.received) {
            // Disjoint fragments inside [0, total) whose lengths add up to total cover it, so the
            // first fragment is among them.
            let d = self.datagrams.swap_remove(index);
            self.bytes -= d.truesize;
            let total = d.received;
            timed!(Copy);
            let mut out = pool.alloc(total);
            for f in d.fragments {
                out.extend_from_slice(f.buf.data());
                pool.free(f.buf);
            }
            let first = d.first.expect("a complete datagram has its first fragment");
            return Outcome::Complete(K::complete(first, out));
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
    /// fragment had arrived (RFC 1122 §3.3.2, RFC 8200 §4.5: only then is an ICMP time exceeded
    /// sent). Returns how many were discarded.
    pub fn expire(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        mut expired: impl FnMut(Expired<K>),
    ) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.datagrams.len() {
            if self.datagrams[i].deadline <= now {
                let d = &self.datagrams[i];
                if let (Some(header), Some(first)) = (&d.first, d.fragments.first()) {
                    expired(quote(d.key, K::header_bytes(header), first.buf.data()));
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

    fn oldest_except(&self, key: K) -> Option<usize> {
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

/// The quote of a first fragment: its header, then as much of its payload as the family quotes and
/// the quote holds.
fn quote<K: FragmentKey>(key: K, header: &[u8], payload: &[u8]) -> Expired<K> {
    let mut quote = K::EMPTY_QUOTE;
    let room = quote.as_ref().len();
    let h = header.len().min(room);
    let p = payload.len().min(K::QUOTED_PAYLOAD).min(room - h);
    let q = quote.as_mut();
    q[..h].copy_from_slice(&header[..h]);
    q[h..h + p].copy_from_slice(&payload[..p]);
    Expired {
        key,
        quote,
        quote_len: h + p,
    }
}

fn index_of<K: FragmentKey>(datagrams: &[Datagram<K>], key: K) -> usize {
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

    fn key(ident: u16) -> Ipv4FragmentKey {
        Ipv4FragmentKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 17,
            ident,
        }
    }

    struct T {
        table: Ipv4Reassembly,
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
            Outcome::Complete(done) => {
                assert_eq!(done.payload.data(), &d[..]);
                assert_eq!(done.first_header(), &[0x45; 20]);
            }
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
        assert!(
            matches!(t.frag(2, 16, false, &data(8), 0), Outcome::Complete(b) if b.payload.len() == 24)
        );
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

    #[test]
    fn ipv4_quote_is_the_header_and_8_bytes() {
        let mut t = T::new(Limits::default());
        t.frag(1, 0, true, &data(64), 0);
        let mut quotes = Vec::new();
        t.table
            .expire(Instant::from_secs(30), &mut t.pool, |e| quotes.push(e));
        assert_eq!(quotes.len(), 1);
        assert_eq!(quotes[0].quote_len, 28);
        assert_eq!(&quotes[0].quoted()[..20], &[0x45; 20]);
        assert_eq!(&quotes[0].quoted()[20..], &data(8)[..]);
    }

    /// IPv6 keys: the same table with 32-bit identifications, the first fragment's header kept, and
    /// RFC 8200 §4.5's quote.
    mod ipv6 {
        use super::*;
        use std::net::Ipv6Addr;

        const A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        const B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
        const C: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);

        fn key(src: Ipv6Addr, ident: u32) -> Ipv6FragmentKey {
            Ipv6FragmentKey { src, dst: B, ident }
        }

        /// The bytes in front of a fragment's payload: an IPv6 header (next header 0 with extension
        /// headers, else 44), `ext` 8-byte extension headers, and a Fragment header whose Next Header
        /// is `next`.
        fn header(key: Ipv6FragmentKey, ext: usize, next: u8) -> Vec<u8> {
            let mut h = vec![0u8; 48 + 8 * ext];
            h[0] = 0x60;
            h[6] = if ext > 0 { 0 } else { 44 };
            h[7] = 64;
            h[8..24].copy_from_slice(&key.src.octets());
            h[24..40].copy_from_slice(&key.dst.octets());
            for i in 0..ext {
                let at = 40 + 8 * i;
                h[at] = if i + 1 == ext { 44 } else { 60 };
                h[at + 2..at + 8].fill(i as u8 + 1);
            }
            let f = 40 + 8 * ext;
            h[f] = next;
            h[f + 4..f + 8].copy_from_slice(&key.ident.to_be_bytes());
            h
        }

        struct T6 {
            table: Ipv6Reassembly,
            pool: BufferPool,
            drops: Drops,
        }

        impl T6 {
            fn new(limits: Limits) -> T6 {
                T6 {
                    table: Ipv6Reassembly::new(&limits),
                    pool: BufferPool::new(BufferMode::Pool, 64),
                    drops: Drops::default(),
                }
            }
            #[allow(clippy::too_many_arguments)]
            fn frag_with(
                &mut self,
                key: Ipv6FragmentKey,
                ext: usize,
                next: u8,
                offset: usize,
                more: bool,
                bytes: &[u8],
                now: u64,
            ) -> Outcome<Ipv6Reassembled> {
                let mut buf = self.pool.alloc(bytes.len());
                buf.extend_from_slice(bytes);
                self.table.insert(
                    key,
                    offset,
                    more,
                    &header(key, ext, next),
                    buf,
                    Instant::from_secs(now),
                    &mut self.pool,
                    &mut self.drops,
                )
            }
            fn frag(
                &mut self,
                key: Ipv6FragmentKey,
                offset: usize,
                more: bool,
                bytes: &[u8],
                now: u64,
            ) -> Outcome<Ipv6Reassembled> {
                self.frag_with(key, 0, 17, offset, more, bytes, now)
            }
            fn expire(&mut self, now: u64) -> (usize, Vec<Ipv6Expired>) {
                let mut expired = Vec::new();
                let n = self
                    .table
                    .expire(Instant::from_secs(now), &mut self.pool, |e| expired.push(e));
                (n, expired)
            }
        }

        fn complete(o: Outcome<Ipv6Reassembled>) -> Ipv6Reassembled {
            match o {
                Outcome::Complete(r) => r,
                o => panic!("not complete: {o:?}"),
            }
        }

        #[test]
        fn completes_in_order_with_the_first_fragments_header() {
            let d = data(1000);
            let k = key(A, 0x8000_0001);
            let mut t = T6::new(Limits::default());
            assert!(matches!(
                t.frag_with(k, 2, 6, 0, true, &d[..504], 0),
                Outcome::Held
            ));
            assert!(matches!(
                t.frag(k, 504, true, &d[504..904], 0),
                Outcome::Held
            ));
            let r = complete(t.frag(k, 904, false, &d[904..], 1));
            assert_eq!(r.payload.data(), &d[..]);
            // The first fragment's header, not the last's: two extension headers and Next Header 6.
            assert_eq!(&r.first_header[..], &header(k, 2, 6)[..]);
            assert_eq!(r.next_header(), 6);
            assert_eq!(r.unfragmentable(), &header(k, 2, 6)[..56]);
            assert_eq!(r.payload_len(), 16 + 1000);
            assert!(t.table.is_empty());
            assert_eq!(t.table.bytes_held(), 0);
        }

        #[test]
        fn completes_out_of_order() {
            let d = data(3000);
            let k = key(A, 7);
            let mut t = T6::new(Limits::default());
            for (offset, end) in [(2048, 3000), (1024, 2048), (0, 1024)] {
                let more = end < 3000;
                let o = t.frag(k, offset, more, &d[offset..end], 0);
                if offset == 0 {
                    let r = complete(o);
                    assert_eq!(r.payload.data(), &d[..]);
                    assert_eq!(r.next_header(), 17);
                    assert_eq!(r.payload_len(), 3000);
                    t.pool.free(r.payload);
                } else {
                    assert!(matches!(o, Outcome::Held), "{o:?}");
                }
            }
            assert_eq!((t.table.len(), t.table.bytes_held()), (0, 0));
        }

        /// RFC 5722 §4, RFC 8200 §4.5: an overlap discards every fragment received, silently (no
        /// time exceeded later); an exact duplicate is dropped alone. A later fragment of the same
        /// packet starts a fresh entry, as in Linux.
        #[test]
        fn overlap_discards_the_whole_packet_and_a_later_fragment_starts_afresh() {
            let d = data(64);
            let k = key(A, 9);
            let mut t = T6::new(Limits::default());
            assert!(matches!(t.frag(k, 0, true, &d[..16], 0), Outcome::Held));
            assert!(matches!(
                t.frag(k, 0, true, &d[..16], 0),
                Outcome::Dropped(DropReason::FragmentDuplicate)
            ));
            assert!(matches!(t.frag(k, 32, false, &d[32..], 0), Outcome::Held));
            assert_eq!(t.table.len(), 1);
            assert!(matches!(
                t.frag(k, 8, true, &d[8..24], 0),
                Outcome::Dropped(DropReason::ReassemblyOverlap)
            ));
            assert_eq!((t.table.len(), t.table.bytes_held()), (0, 0));
            // The missing middle arrives: a fresh entry, which cannot complete on its own.
            assert!(matches!(t.frag(k, 16, true, &d[16..32], 0), Outcome::Held));
            assert_eq!(t.table.len(), 1);
            let (n, expired) = t.expire(60);
            assert_eq!(n, 1);
            assert!(expired.is_empty(), "no first fragment, no time exceeded");
        }

        /// RFC 8200 §4.5: a non-final fragment whose length is not a multiple of 8 is dropped (the
        /// caller sends a parameter problem), and leaves the table as it was.
        #[test]
        fn lengths_not_a_multiple_of_8_are_refused() {
            let k = key(A, 1);
            let mut t = T6::new(Limits::default());
            t.frag(k, 0, true, &data(16), 0);
            for len in [1, 7, 12, 1001] {
                assert!(matches!(
                    t.frag(k, 16, true, &data(len), 0),
                    Outcome::Dropped(DropReason::FragmentBadLength)
                ));
            }
            assert!(matches!(
                t.frag(k, 16, true, &[], 0),
                Outcome::Dropped(DropReason::FragmentBadLength)
            ));
            assert_eq!(t.table.len(), 1);
            // A final fragment may have any length.
            let r = complete(t.frag(k, 16, false, &data(5), 0));
            assert_eq!(r.payload.len(), 21);
        }

        /// RFC 8200 §4.5: a fragment that would make the reassembled Payload Length exceed 65,535
        /// bytes, counting the unfragmentable part's extension headers, is dropped.
        #[test]
        fn payload_past_65535_bytes_is_refused() {
            let k = key(A, 2);
            let mut t = T6::new(Limits::default());
            assert!(matches!(
                t.frag(k, 65528, false, &data(8), 0),
                Outcome::Dropped(DropReason::FragmentTooBig)
            ));
            assert!(matches!(
                t.frag(k, 65520, false, &data(16), 0),
                Outcome::Dropped(DropReason::FragmentTooBig)
            ));
            // Exactly 65,535 with no extension headers: held.
            assert!(matches!(
                t.frag(k, 65520, false, &data(15), 0),
                Outcome::Held
            ));
            // With one 8-byte extension header in front of the Fragment header, 8 bytes less fit.
            assert!(matches!(
                t.frag_with(key(A, 3), 1, 17, 65520, false, &data(15), 0),
                Outcome::Dropped(DropReason::FragmentTooBig)
            ));
            assert!(matches!(
                t.frag_with(key(A, 3), 1, 17, 65520, false, &data(7), 0),
                Outcome::Held
            ));
            assert!(matches!(
                t.frag(k, 0, true, &data(65535 - 8), 0),
                Outcome::Dropped(DropReason::FragmentBadLength)
            ));
        }

        /// Once the first fragment is held, its extension headers count for every other fragment;
        /// a first fragment whose extension headers would take the held ones past the bound is
        /// dropped alone.
        #[test]
        fn the_first_fragments_header_bounds_the_others() {
            let k = key(A, 4);
            let mut t = T6::new(Limits::default());
            // Ten 8-byte extension headers: 80 bytes of the 65,535.
            assert!(matches!(
                t.frag_with(k, 10, 17, 0, true, &data(16), 0),
                Outcome::Held
            ));
            let bytes = t.table.bytes_held();
            assert!(matches!(
                t.frag(k, 65448, false, &data(8), 0),
                Outcome::Dropped(DropReason::FragmentTooBig)
            ));
            assert_eq!((t.table.len(), t.table.bytes_held()), (1, bytes));
            assert!(matches!(
                t.frag(k, 65448, false, &data(7), 0),
                Outcome::Held
            ));
            // The other way round: the last fragment first, then a first fragment with one too many.
            let k = key(A, 5);
            assert!(matches!(
                t.frag(k, 65520, false, &data(15), 0),
                Outcome::Held
            ));
            let bytes = t.table.bytes_held();
            assert!(matches!(
                t.frag_with(k, 1, 17, 0, true, &data(16), 0),
                Outcome::Dropped(DropReason::FragmentTooBig)
            ));
            assert_eq!((t.table.len(), t.table.bytes_held()), (2, bytes));
            assert!(matches!(
                t.frag_with(k, 0, 17, 0, true, &data(16), 0),
                Outcome::Held
            ));
        }

        #[test]
        fn the_datagram_limit_evicts_the_oldest() {
            let limits = Limits {
                reassembly_datagrams: 4,
                ..Limits::default()
            };
            let mut t = T6::new(limits);
            for ident in 0..10u32 {
                t.frag(key(A, ident << 16), 0, true, &data(16), u64::from(ident));
                assert!(t.table.len() <= 4);
            }
            assert_eq!(t.table.len(), 4);
            assert_eq!(t.drops.get(DropReason::ReassemblyEvicted), 6);
            let (n, expired) = t.expire(100);
            assert_eq!(n, 4);
            let mut idents: Vec<u32> = expired.iter().map(|e| e.key.ident >> 16).collect();
            idents.sort();
            assert_eq!(idents, [6, 7, 8, 9]);
        }

        /// The byte limit counts buffers and the first fragments' kept headers.
        #[test]
        fn the_byte_limit_holds() {
            let limits = Limits {
                reassembly_bytes: 3 * 2048 + 3 * 48,
                ..Limits::default()
            };
            let mut t = T6::new(limits);
            for ident in 0..20u32 {
                t.frag(key(A, ident), 0, true, &data(16), 0);
                assert!(t.table.bytes_held() <= 3 * 2048 + 3 * 48);
            }
            assert_eq!(t.table.len(), 3);
            assert_eq!(t.table.bytes_held(), 3 * (2048 + 48));
            // Without the headers' bytes, two first fragments fit and a third does not.
            let limits = Limits {
                reassembly_bytes: 3 * 2048,
                ..Limits::default()
            };
            let mut t = T6::new(limits.clone());
            for ident in 0..20u32 {
                t.frag(key(A, ident), 0, true, &data(16), 0);
                assert!(t.table.bytes_held() <= 3 * 2048);
            }
            assert_eq!(t.table.len(), 2);
            // Non-first fragments carry no header cost.
            let mut t = T6::new(limits);
            for ident in 0..20u32 {
                t.frag(key(A, ident), 16, true, &data(16), 0);
            }
            assert_eq!(t.table.len(), 3);
        }

        #[test]
        fn too_many_fragments_discard_the_packet() {
            let limits = Limits {
                reassembly_fragments: 4,
                ..Limits::default()
            };
            let k = key(A, 5);
            let mut t = T6::new(limits);
            for i in 0..4 {
                assert!(matches!(
                    t.frag(k, 16 * i, true, &data(16), 0),
                    Outcome::Held
                ));
            }
            assert!(matches!(
                t.frag(k, 64, false, &data(16), 0),
                Outcome::Dropped(DropReason::ReassemblyTooManyFragments)
            ));
            assert_eq!((t.table.len(), t.table.bytes_held()), (0, 0));
        }

        /// RFC 8200 §4.5: a time exceeded only when the first fragment arrived, quoting it as it
        /// arrived, up to 1232 bytes (RFC 4443 §3.3: the minimum MTU less the IPv6 and ICMPv6 headers).
        #[test]
        fn timeout_quotes_the_first_fragment_up_to_1232_bytes() {
            let limits = Limits {
                reassembly_timeout: Duration::from_secs(60),
                ..Limits::default()
            };
            let d = data(1400);
            let mut t = T6::new(limits);
            let (big, small, headless, long) = (key(A, 1), key(A, 2), key(A, 3), key(C, 1));
            t.frag(big, 0, true, &d[..1400], 0);
            t.frag(small, 0, true, &d[..16], 0);
            t.frag(small, 32, false, &d[32..40], 0);
            t.frag(headless, 16, true, &d[16..32], 0);
            t.frag_with(long, 150, 17, 0, true, &d[..16], 10);
            let (n, expired) = t.expire(59);
            assert_eq!((n, expired.len()), (0, 0));
            let (n, mut expired) = t.expire(60);
            assert_eq!(n, 3);
            expired.sort_by_key(|e| e.key.ident);
            assert_eq!(expired.len(), 2, "no quote without the first fragment");
            let e = &expired[0];
            assert_eq!(e.key, big);
            assert_eq!(e.quote_len, IPV6_QUOTE_MAX);
            assert_eq!(&e.quoted()[..48], &header(big, 0, 17)[..]);
            assert_eq!(&e.quoted()[48..], &d[..IPV6_QUOTE_MAX - 48]);
            let e = &expired[1];
            assert_eq!(e.key, small);
            assert_eq!(e.quote_len, 48 + 16);
            assert_eq!(&e.quoted()[..48], &header(small, 0, 17)[..]);
            assert_eq!(&e.quoted()[48..], &d[..16]);
            // A header chain longer than the quote: the quote is its first 1232 bytes.
            let (n, expired) = t.expire(70);
            assert_eq!((n, expired.len()), (1, 1));
            assert_eq!(
                expired[0].quoted(),
                &header(long, 150, 17)[..IPV6_QUOTE_MAX]
            );
            assert_eq!((t.table.len(), t.table.bytes_held()), (0, 0));
        }

        /// The same 32-bit identification from two sources, and identifications that differ only
        /// above 16 bits, are different packets.
        #[test]
        fn identical_idents_from_different_sources_are_kept_apart() {
            let (da, dc) = (data(48), data(48).iter().map(|b| !b).collect::<Vec<u8>>());
            let (ka, kc) = (key(A, 0xdead_beef), key(C, 0xdead_beef));
            let (k1, k2) = (key(A, 0x0001_0001), key(A, 0x0002_0001));
            let mut t = T6::new(Limits::default());
            assert!(matches!(t.frag(ka, 0, true, &da[..16], 0), Outcome::Held));
            assert!(matches!(
                t.frag(kc, 16, true, &dc[16..32], 0),
                Outcome::Held
            ));
            assert!(matches!(t.frag(k1, 0, true, &da[..16], 0), Outcome::Held));
            // Same offsets as held fragments of other keys: no overlap, no duplicate.
            assert!(matches!(t.frag(kc, 0, true, &dc[..16], 0), Outcome::Held));
            assert!(matches!(
                t.frag(ka, 16, true, &da[16..32], 0),
                Outcome::Held
            ));
            assert!(matches!(t.frag(k2, 0, true, &dc[..16], 0), Outcome::Held));
            assert_eq!(t.table.len(), 4);
            let r = complete(t.frag(kc, 32, false, &dc[32..], 0));
            assert_eq!(r.payload.data(), &dc[..]);
            assert_eq!(&r.first_header[8..24], &C.octets());
            let r = complete(t.frag(ka, 32, false, &da[32..], 0));
            assert_eq!(r.payload.data(), &da[..]);
            assert_eq!(&r.first_header[8..24], &A.octets());
            let r = complete(t.frag(k2, 16, false, &dc[16..24], 0));
            assert_eq!(r.payload.data(), &dc[..24]);
            let r = complete(t.frag(k1, 16, false, &da[16..24], 0));
            assert_eq!(r.payload.data(), &da[..24]);
            assert!(t.table.is_empty());
        }

        /// RFC 6946 §4: an atomic fragment is processed in isolation, even while a packet with the
        /// same key is being reassembled: it comes straight back and the table is untouched.
        #[test]
        fn atomic_fragments_never_enter_the_table() {
            assert!(is_atomic(0, false));
            assert!(!is_atomic(0, true) && !is_atomic(8, false));
            let d = data(40);
            let k = key(A, 11);
            let mut t = T6::new(Limits::default());
            t.frag(k, 0, true, &d[..16], 0);
            let (n, bytes) = (t.table.len(), t.table.bytes_held());
            let r = complete(t.frag_with(k, 0, 58, 0, false, &d[..12], 0));
            assert_eq!(r.payload.data(), &d[..12]);
            assert_eq!(r.next_header(), 58);
            assert_eq!((t.table.len(), t.table.bytes_held()), (n, bytes));
            let r = complete(t.frag(k, 16, false, &d[16..], 0));
            assert_eq!(r.payload.data(), &d[..]);
        }
    }
}
