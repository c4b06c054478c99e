//! A connection's data: the send buffer, the in-order receive queue and the out-of-order queue.
//!
//! Received segments are kept in the buffers they arrived in and handed to the application from
//! there: receiving copies nothing (paper 002 §3.1), except that a small segment is appended to the
//! queue's last buffer when it has room, so that a peer sending one-byte segments cannot make the queue
//! hold a 2 KiB buffer per byte. The send buffer is a byte ring the application writes into (or fills
//! in place); segments are copied out of it, fused with the checksum, because the data must stay until
//! it is acknowledged.

use std::collections::VecDeque;

use super::seq::Seq;
use crate::buf::{BufferPool, PacketBuf};
use crate::wire::tcp::MAX_SACK_BLOCKS;

/// Bytes the application wrote that are not yet acknowledged: a ring that grows on demand (doubling,
/// up to `capacity`), so an idle connection costs little.
#[derive(Debug, Default)]
pub(crate) struct SendBuffer {
    ring: Vec<u8>,
    head: usize,
    len: usize,
    /// Most bytes held.
    pub(crate) capacity: usize,
}

impl SendBuffer {
    pub(crate) fn new(capacity: usize) -> SendBuffer {
        SendBuffer {
            ring: Vec::new(),
            head: 0,
            len: 0,
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn free(&self) -> usize {
        self.capacity.saturating_sub(self.len)
    }

    /// Bytes of heap the ring holds.
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.ring.capacity()
    }

    /// Gives the ring's memory back, once nothing more will be written or sent (TIME-WAIT, a closed
    /// connection): what was held is gone.
    pub(crate) fn release(&mut self) {
        *self = SendBuffer::new(self.capacity);
    }

    /// Makes room for `n` more bytes if the ring can still grow.
    fn reserve(&mut self, n: usize) {
        let size = self.ring.len();
        if size - self.len >= n || size >= self.capacity {
            return;
        }
        let new_size = (self.len + n).max(2 * size).max(4096).min(self.capacity);
        let mut ring = vec![0u8; new_size];
        let (a, b) = self.range(0, self.len);
        ring[..a.len()].copy_from_slice(a);
        ring[a.len()..self.len].copy_from_slice(b);
        self.ring = ring;
        self.head = 0;
    }

    /// Appends as much of `data` as fits; returns how much.
    pub(crate) fn write(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        self.reserve(n);
        let size = self.ring.len();
        let n = n.min(size - self.len);
        let tail = wrap(self.head + self.len, size);
        let first = n.min(size - tail);
        self.ring[tail..tail + first].copy_from_slice(&data[..first]);
        self.ring[..n - first].copy_from_slice(&data[first..n]);
        self.len += n;
        n
    }

    /// Lets `fill` write up to `max` bytes in place (zero copy from the application's side: it
    /// writes into the stack's buffer, paper 002 §3.1); `fill` returns how many it wrote. It is given
    /// one contiguous stretch of the ring, which may be shorter than `max`. The ring grows to offer
    /// `max` (doubling, up to the capacity) before `fill` runs, so a caller that may write little
    /// should ask for little: the tunnel's relay doubles its requests as its reads fill them.
    pub(crate) fn write_with(
        &mut self,
        max: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> usize,
    ) -> usize {
        let want = max.min(self.free());
        if want == 0 {
            return 0;
        }
        self.reserve(want);
        let size = self.ring.len();
        let tail = wrap(self.head + self.len, size);
        let room = if tail >= self.head && self.len < size {
            size - tail
        } else {
            size - self.len
        };
        let n = want.min(room);
        let wrote = fill(&mut self.ring[tail..tail + n]).min(n);
        self.len += wrote;
        wrote
    }

    /// Drops the first `n` bytes (acknowledged).
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.head = if self.len == 0 {
            0
        } else {
            wrap(self.head + n, self.ring.len())
        };
    }

    /// The bytes `[offset, offset + len)` as up to two slices.
    pub(crate) fn range(&self, offset: usize, len: usize) -> (&[u8], &[u8]) {
        let size = self.ring.len();
        if len == 0 || size == 0 {
            return (&[], &[]);
        }
        let start = wrap(self.head + offset, size);
        let first = len.min(size - start);
        (&self.ring[start..start + first], &self.ring[..len - first])
    }
}

/// `i`, which is below twice `size`, modulo `size`, by a compare instead of a division: a 64-bit
/// division takes tens of cycles, and `range` runs for every segment sent. Every caller adds to
/// `head` (below `size`) at most `size` bytes.
#[inline(always)]
fn wrap(i: usize, size: usize) -> usize {
    debug_assert!(i < 2 * size.max(1), "{i} is not below twice {size}");
    if i >= size {
        i - size
    } else {
        i
    }
}

/// In-order received data waiting for the application.
#[derive(Debug, Default)]
pub(crate) struct ReceiveQueue {
    segments: VecDeque<PacketBuf>,
    /// Payload bytes held.
    pub(crate) bytes: usize,
    /// Buffer bytes held (what the queue costs).
    pub(crate) truesize: usize,
    /// Payload bytes ever queued in order (RFC 4898's `HCThruOctetsReceived`).
    pub(crate) total: u64,
}

impl ReceiveQueue {
    /// Appends a segment's payload (the buffer's window). Small payloads are copied into the last
    /// buffer's tailroom when they fit, and their buffer goes back to the pool.
    pub(crate) fn push(&mut self, buf: PacketBuf, pool: &mut BufferPool) {
        if buf.is_empty() {
            return pool.free(buf);
        }
        self.bytes += buf.len();
        self.total += buf.len() as u64;
        if let Some(last) = self.segments.back_mut() {
            if buf.len() <= last.tailroom() && buf.len() * 4 <= buf.truesize() {
                last.extend_from_slice(buf.data());
                return pool.free(buf);
            }
        }
        self.truesize += buf.truesize();
        self.segments.push_back(buf);
    }

    /// Copies up to `out.len()` bytes out; returns how many.
    pub(crate) fn read(&mut self, out: &mut [u8], pool: &mut BufferPool) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(front) = self.segments.front_mut() else {
                break;
            };
            let take = front.len().min(out.len() - n);
            out[n..n + take].copy_from_slice(&front.data()[..take]);
            n += take;
            self.advance_front(take, pool);
        }
        n
    }

    /// Lends the queued bytes to `f`, one buffer at a time, without copying; `f` returns how many it
    /// took (less than offered stops the loop). Returns the total taken.
    pub(crate) fn read_with(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> usize,
        pool: &mut BufferPool,
    ) -> usize {
        let mut n = 0;
        while let Some(front) = self.segments.front() {
            let offered = front.len();
            let took = f(front.data()).min(offered);
            n += took;
            self.advance_front(took, pool);
            if took < offered {
                break;
            }
        }
        n
    }

    fn advance_front(&mut self, n: usize, pool: &mut BufferPool) {
        let front = self.segments.front_mut().expect("a front segment");
        front.pull_front(n);
        self.bytes -= n;
        if front.is_empty() {
            let buf = self.segments.pop_front().expect("a front segment");
            self.truesize -= buf.truesize();
            pool.free(buf);
        }
    }

    /// Returns every buffer to the pool.
    pub(crate) fn clear(&mut self, pool: &mut BufferPool) {
        for buf in self.segments.drain(..) {
            pool.free(buf);
        }
        self.bytes = 0;
        self.truesize = 0;
    }
}

/// Segments that arrived ahead of `rcv_nxt`, sorted and not overlapping.
#[derive(Debug, Default)]
pub(crate) struct OutOfOrder {
    segments: Vec<(Seq, PacketBuf)>,
    /// Where the latest arrivals went, the most recent first (`recent_len` of them): the SACK blocks
    /// report the blocks holding them in that order (RFC 2018 §4: the first block holds the latest
    /// segment, and the others repeat the most recently reported, as Linux and FreeBSD order them).
    recent: [Seq; MAX_SACK_BLOCKS],
    recent_len: usize,
}

impl OutOfOrder {
    pub(crate) fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.segments.len()
    }

    /// Holds `buf` (payload starting at `seq`), trimming what other segments already hold. Returns
    /// false (and frees the buffer) when it brought nothing new or the queue is at `max` segments.
    pub(crate) fn insert(
        &mut self,
        mut seq: Seq,
        mut buf: PacketBuf,
        max: usize,
        pool: &mut BufferPool,
    ) -> bool {
        // First segment that ends after `seq`.
        let mut i = self
            .segments
            .partition_point(|(s, b)| *s + b.len() as u32 <= seq);
        if let Some((s, b)) = self.segments.get(i) {
            if *s <= seq {
                // Overlaps the front: keep only what lies past it.
                let end = *s + b.len() as u32;
                let skip = (end - seq) as usize;
                if skip >= buf.len() {
                    pool.free(buf);
                    return false;
                }
                buf.pull_front(skip);
                seq = end;
                i += 1;
            }
        }
        if let Some((s, _)) = self.segments.get(i) {
            // Overlaps the next one: cut the tail.
            let room = *s - seq;
            if (room as usize) < buf.len() {
                buf.truncate(room as usize);
            }
        }
        if buf.is_empty() || self.segments.len() >= max {
            pool.free(buf);
            return false;
        }
        self.recent.copy_within(0..MAX_SACK_BLOCKS - 1, 1);
        self.recent[0] = seq;
        self.recent_len = (self.recent_len + 1).min(MAX_SACK_BLOCKS);
        self.segments.insert(i, (seq, buf));
        true
    }

    /// Takes the first segment if it starts at or before `rcv_nxt`, trimmed to start there.
    pub(crate) fn pop_ready(&mut self, rcv_nxt: Seq, pool: &mut BufferPool) -> Option<PacketBuf> {
        while let Some((s, b)) = self.segments.first() {
            if *s > rcv_nxt {
                return None;
            }
            let (s, mut b) = {
                let _ = b;
                self.segments.remove(0)
            };
            let skip = (rcv_nxt - s) as usize;
            if skip < b.len() {
                b.pull_front(skip);
                return Some(b);
            }
            pool.free(b);
        }
        None
    }

    /// Up to `max` SACK blocks: the one holding the latest arrival first, then the others from the
    /// lowest (RFC 2018 §4).
    pub(crate) fn sack_blocks(&self, out: &mut [(u32, u32)], max: usize) -> usize {
        let mut blocks: Vec<(Seq, Seq)> = Vec::new();
        for (s, b) in &self.segments {
            let end = *s + b.len() as u32;
            match blocks.last_mut() {
                Some(last) if last.1 == *s => last.1 = end,
                _ => blocks.push((*s, end)),
            }
        }
        // The blocks holding the latest arrivals, most recent first (each rotated into place, in
        // the same vector); then the rest, highest first.
        let mut placed = 0;
        for &seq in &self.recent[..self.recent_len] {
            let found = blocks[placed..]
                .iter()
                .position(|&(l, r)| seq.in_range(l, r));
            if let Some(i) = found {
                blocks[placed..=placed + i].rotate_right(1);
                placed += 1;
            }
        }
        blocks[placed..].reverse();
        let n = blocks.len().min(max).min(out.len());
        for (o, (l, r)) in out.iter_mut().zip(&blocks[..n]) {
            *o = (l.0, r.0);
        }
        n
    }

    pub(crate) fn clear(&mut self, pool: &mut BufferPool) {
        for (_, b) in self.segments.drain(..) {
            pool.free(b);
        }
        self.recent_len = 0;
    }

    /// [`Self::clear`], and the queue's own memory given back too.
    pub(crate) fn release(&mut self, pool: &mut BufferPool) {
        self.clear(pool);
        self.segments = Vec::new();
    }
}

/// The sender's record of what the receiver SACKed (RFC 6675 §3): sorted, merged ranges above
/// `snd_una`, at most `MAX_RANGES` of them.
#[derive(Debug, Default)]
pub(crate) struct Scoreboard {
    pub(crate) ranges: Vec<(Seq, Seq)>,
}

const MAX_RANGES: usize = 32;

impl Scoreboard {
    /// Adds a SACK block, merging it with what it touches.
    pub(crate) fn add(&mut self, left: Seq, right: Seq) {
        let i = self.ranges.partition_point(|&(_, r)| r < left);
        let mut l = left;
        let mut r = right;
        let mut j = i;
        while j < self.ranges.len() && self.ranges[j].0 <= r {
            l = l.min(self.ranges[j].0);
            r = r.max(self.ranges[j].1);
            j += 1;
        }
        if i == j && self.ranges.len() >= MAX_RANGES {
            return;
        }
        self.ranges.splice(i..j, [(l, r)]);
    }

    /// Forgets everything below `una`.
    pub(crate) fn ack(&mut self, una: Seq) {
        self.ranges.retain(|&(_, r)| r > una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(una);
        }
    }

    pub(crate) fn sacked_bytes(&self) -> u32 {
        self.ranges.iter().map(|&(l, r)| r - l).sum()
    }

    /// Bytes SACKed below `seq`.
    pub(crate) fn sacked_below(&self, seq: Seq) -> u32 {
        self.ranges
            .iter()
            .filter(|&&(l, _)| l < seq)
            .map(|&(l, r)| r.min(seq) - l)
            .sum()
    }

    /// The highest SACKed sequence number.
    pub(crate) fn high(&self) -> Option<Seq> {
        self.ranges.last().map(|&(_, r)| r)
    }

    /// The highest sequence number below which every unSACKed byte has at least `above` bytes
    /// SACKed above it (RFC 6675's IsLost() with DupThresh × SMSS = `above`): the left edge of the
    /// range where the SACKed bytes, counted from the top, reach `above`.
    pub(crate) fn lost_limit(&self, above: u32) -> Option<Seq> {
        let mut sacked = 0;
        for &(l, r) in self.ranges.iter().rev() {
            sacked += r - l;
            if sacked >= above {
                return Some(l);
            }
        }
        None
    }

    /// If `seq` is SACKed, the end of its range.
    pub(crate) fn skip(&self, seq: Seq) -> Option<Seq> {
        self.ranges
            .iter()
            .find(|&&(l, r)| seq.in_range(l, r))
            .map(|&(_, r)| r)
    }

    /// The first SACKed range starting after `seq`.
    pub(crate) fn next_after(&self, seq: Seq) -> Option<Seq> {
        self.ranges.iter().map(|&(l, _)| l).find(|&l| l > seq)
    }

    /// Bytes not SACKed in `[from, to)`.
    pub(crate) fn holes_between(&self, from: Seq, to: Seq) -> u32 {
        if to <= from {
            return 0;
        }
        let covered: u32 = self
            .ranges
            .iter()
            .map(|&(l, r)| {
                let (l, r) = (l.max(from), r.min(to));
                if l < r {
                    r - l
                } else {
                    0
                }
            })
            .sum();
        (to - from) - covered
    }

    pub(crate) fn clear(&mut self) {
        self.ranges.clear();
    }
}

/// Where the application's latest writes ended, ascending, above SND.UNA: Linux's push marks (see
/// `TcpConfig::linux_push`). A fixed ring of [`PUSH_MARKS`]: a writer of many small writes in flight
/// loses the oldest marks (their segments were sent with their PSH already; only a retransmission
/// of them goes without), and no number of writes makes it grow.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PushMarks {
    marks: [Seq; PUSH_MARKS],
    head: u8,
    len: u8,
}

/// Push marks kept at most.
pub(crate) const PUSH_MARKS: usize = 32;

impl PushMarks {
    fn at(&self, i: usize) -> Seq {
        self.marks[(self.head as usize + i) & (PUSH_MARKS - 1)]
    }

    /// The latest mark, to move.
    #[inline]
    pub(crate) fn last_mut(&mut self) -> Option<&mut Seq> {
        let len = self.len as usize;
        (len > 0).then(|| &mut self.marks[(self.head as usize + len - 1) & (PUSH_MARKS - 1)])
    }

    /// The latest mark.
    pub(crate) fn last(&self) -> Option<Seq> {
        let len = self.len as usize;
        (len > 0).then(|| self.at(len - 1))
    }

    /// Forgets the latest mark.
    pub(crate) fn pop_last(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    /// Adds a mark above the others, forgetting the oldest when full.
    pub(crate) fn push(&mut self, mark: Seq) {
        if self.len as usize == PUSH_MARKS {
            self.head = ((self.head as usize + 1) & (PUSH_MARKS - 1)) as u8;
            self.len -= 1;
        }
        self.marks[(self.head as usize + self.len as usize) & (PUSH_MARKS - 1)] = mark;
        self.len += 1;
    }

    /// Forgets the marks at or below `ack`.
    pub(crate) fn trim(&mut self, ack: Seq) {
        while self.len > 0 && self.at(0) <= ack {
            self.head = ((self.head as usize + 1) & (PUSH_MARKS - 1)) as u8;
            self.len -= 1;
        }
    }

    /// Whether a mark lies in `(seq, seq + len]`.
    pub(crate) fn any_in(&self, seq: Seq, len: u32) -> bool {
        for i in 0..self.len as usize {
            let m = self.at(i);
            if m > seq {
                return m <= seq + len;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::buf::BufferMode;

    fn pool() -> BufferPool {
        BufferPool::new(BufferMode::Pool, 64)
    }

    fn seg(pool: &mut BufferPool, bytes: &[u8]) -> PacketBuf {
        let mut b = pool.alloc(bytes.len());
        b.extend_from_slice(bytes);
        b
    }

    #[test]
    fn push_marks_are_a_bounded_ring() {
        let mut m = PushMarks::default();
        for i in 1..=40u32 {
            m.push(Seq(i * 10));
        }
        // The 8 oldest were forgotten: 80 and below are gone, 90 to 400 stay.
        assert!(!m.any_in(Seq(70), 10));
        assert!(m.any_in(Seq(85), 5));
        assert!(!m.any_in(Seq(91), 8));
        assert_eq!(m.last(), Some(Seq(400)));
        m.pop_last();
        m.push(Seq(405));
        assert!(m.any_in(Seq(400), 5));
        m.trim(Seq(395));
        assert!(!m.any_in(Seq(385), 10));
        assert!(m.any_in(Seq(400), 5));
        m.trim(Seq(405));
        assert!(m.last().is_none());
    }

    #[test]
    fn sack_blocks_come_most_recent_first() {
        let mut p = pool();
        let mut q = OutOfOrder::default();
        let data = [0u8; 100];
        let mut blocks = [(0, 0); 4];
        for s in [200u32, 400, 600] {
            assert!(q.insert(Seq(s), seg(&mut p, &data), 8, &mut p));
        }
        assert_eq!(q.sack_blocks(&mut blocks, 4), 3);
        assert_eq!(blocks[..3], [(600, 700), (400, 500), (200, 300)]);
        // An arrival that extends the oldest block puts it first; the others keep their recency.
        assert!(q.insert(Seq(300), seg(&mut p, &data[..50]), 8, &mut p));
        assert_eq!(q.sack_blocks(&mut blocks, 4), 3);
        assert_eq!(blocks[..3], [(200, 350), (600, 700), (400, 500)]);
        // At most `max`, the most recent kept.
        assert_eq!(q.sack_blocks(&mut blocks, 2), 2);
        assert_eq!(blocks[..2], [(200, 350), (600, 700)]);
        q.clear(&mut p);
    }

    #[test]
    fn out_of_order_trims_overlaps_and_releases_in_order() {
        let mut p = pool();
        let mut q = OutOfOrder::default();
        let data: Vec<u8> = (0..100).collect();
        assert!(q.insert(Seq(30), seg(&mut p, &data[30..50]), 8, &mut p));
        assert!(q.insert(Seq(60), seg(&mut p, &data[60..70]), 8, &mut p));
        // Overlapping both: only 50..60 is new.
        assert!(q.insert(Seq(40), seg(&mut p, &data[40..65]), 8, &mut p));
        assert!(!q.insert(Seq(31), seg(&mut p, &data[31..49]), 8, &mut p));
        let mut blocks = [(0, 0); 4];
        assert_eq!(q.sack_blocks(&mut blocks, 4), 1);
        assert_eq!(blocks[0], (30, 70));
        assert!(q.pop_ready(Seq(20), &mut p).is_none());
        let mut got = Vec::new();
        let mut next = Seq(35);
        while let Some(b) = q.pop_ready(next, &mut p) {
            got.extend_from_slice(b.data());
            next = next + b.len() as u32;
        }
        assert_eq!(got, &data[35..70]);
        assert!(q.is_empty());
    }

    #[test]
    fn receive_queue_coalesces_small_segments() {
        let mut p = pool();
        let mut q = ReceiveQueue::default();
        for i in 0..1000u32 {
            let b = seg(&mut p, &[i as u8]);
            q.push(b, &mut p);
        }
        assert_eq!(q.bytes, 1000);
        assert!(q.truesize <= 2 * 2048, "{}", q.truesize);
        let mut out = vec![0u8; 1000];
        assert_eq!(q.read(&mut out, &mut p), 1000);
        assert!(out.iter().enumerate().all(|(i, &b)| b == i as u8));
        assert_eq!((q.bytes, q.truesize), (0, 0));
    }

    #[test]
    fn scoreboard_merges_and_counts_holes() {
        let mut s = Scoreboard::default();
        s.add(Seq(200), Seq(300));
        s.add(Seq(400), Seq(500));
        s.add(Seq(290), Seq(410));
        assert_eq!(s.ranges, vec![(Seq(200), Seq(500))]);
        s.add(Seq(600), Seq(700));
        assert_eq!(s.sacked_bytes(), 400);
        assert_eq!(s.holes_between(Seq(100), Seq(700)), 200);
        assert_eq!(s.skip(Seq(250)), Some(Seq(500)));
        assert_eq!(s.next_after(Seq(500)), Some(Seq(600)));
        s.ack(Seq(450));
        assert_eq!(s.ranges[0], (Seq(450), Seq(500)));
    }

    #[test]
    fn send_buffer_grows_wraps_and_fills_in_place() {
        let mut s = SendBuffer::new(10_000);
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut written = 0;
        let mut acked = 0;
        for round in 0..50 {
            let n = if round % 2 == 0 {
                s.write(&data[written % 10_000..(written % 10_000 + 3000).min(10_000)])
            } else {
                let at = written;
                s.write_with(2500, &mut |buf| {
                    for (k, b) in buf.iter_mut().enumerate() {
                        *b = data[(at + k) % 10_000];
                    }
                    buf.len()
                })
            };
            written += n;
            let (a, b) = s.range(0, s.len());
            let held: Vec<u8> = [a, b].concat();
            let expect: Vec<u8> = (acked..written).map(|i| data[i % 10_000]).collect();
            assert_eq!(held, expect, "round {round}");
            let drop = s.len() / 2;
            s.consume(drop);
            acked += drop;
        }
        assert!(s.ring.len() <= 10_000);
    }

    #[test]
    fn send_buffer_ranges_span_the_wrap() {
        let mut s = SendBuffer::new(8);
        assert_eq!(s.write(b"abcdef"), 6);
        s.consume(4);
        assert_eq!(s.write(b"ghijklmn"), 6);
        let (a, b) = s.range(1, 6);
        assert_eq!([a, b].concat(), b"fghijk");
        let n = s.write_with(5, &mut |buf| {
            buf.fill(b'z');
            buf.len()
        });
        assert_eq!(n, 0);
    }
}
