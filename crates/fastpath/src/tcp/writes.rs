//! What the application said about its writes, beyond their bytes: where records end (Linux's
//! `MSG_EOR`), which writes it wants to hear have been acknowledged (Linux's `MSG_ZEROCOPY`
//! completion notifications), and when each write's last byte went and was acknowledged (Linux's
//! software transmit timestamps, `SO_TIMESTAMPING`); and, for reads, when the bytes read arrived
//! (software receive timestamps). Each is kept per connection in a bounded queue of sequence
//! numbers; the connection consults them as it cuts segments, as they go and as acknowledgments
//! and data arrive.

use std::collections::VecDeque;
use std::ops::RangeInclusive;

use super::seq::Seq;

/// How one write is to be sent, Linux's `send` flags as a type: see
/// [`TcpStreamRef::write_flagged`](crate::TcpStreamRef::write_flagged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// More data follows soon (`MSG_MORE`): a partial segment at the end of this write waits, as
    /// under cork, for a later write without the flag, a full segment, or the retransmission
    /// timeout's worth of time; and this write does not ask for PSH.
    pub more: bool,
    /// This write ends a record (`MSG_EOR`): no segment, sent or resent, carries bytes from both
    /// sides of its end.
    pub end_of_record: bool,
    /// Report when the peer has acknowledged all of this write (`MSG_ZEROCOPY`'s completion
    /// notification): see [`TcpStreamRef::take_completed`](crate::TcpStreamRef::take_completed).
    /// Each flagged write that queues at least one byte takes the next number, counting from 0.
    pub notify_acked: bool,
}

/// Record ends kept at most per connection; a write with `end_of_record` that finds them all in
/// use waits (`WouldBlock`), as Linux's would for send-buffer memory, each record being a buffer
/// of its own there.
pub(crate) const RECORD_ENDS: usize = 64;

/// The ends of records not yet acknowledged, ascending.
#[derive(Debug, Default)]
pub(crate) struct RecordEnds {
    ends: VecDeque<Seq>,
}

impl RecordEnds {
    /// Whether there is room for another record end.
    pub(crate) fn has_room(&self) -> bool {
        self.ends.len() < RECORD_ENDS
    }

    /// Whether any record end is held (the fast path's only question).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Records that a record ends at `end` (usually above every end recorded so far).
    pub(crate) fn push(&mut self, end: Seq) {
        debug_assert!(self.has_room());
        match self.ends.iter().position(|&e| e >= end) {
            None => self.ends.push_back(end),
            Some(i) if self.ends[i] != end => self.ends.insert(i, end),
            Some(_) => {}
        }
    }

    /// Whether a record ends exactly at `seq`.
    pub(crate) fn ends_at(&self, seq: Seq) -> bool {
        self.ends.back() == Some(&seq) || self.ends.contains(&seq)
    }

    /// How many bytes from `seq` a segment may carry without crossing a record's end: `len`, or
    /// less when a record ends inside `(seq, seq + len)`.
    pub(crate) fn clip(&self, seq: Seq, len: u32) -> u32 {
        match self.ends.iter().find(|&&end| end > seq) {
            Some(&end) => (end - seq).min(len),
            None => len,
        }
    }

    /// Forgets the ends at or below `ack`.
    pub(crate) fn trim(&mut self, ack: Seq) {
        while self.ends.front().is_some_and(|&end| end <= ack) {
            self.ends.pop_front();
        }
    }
}

/// Writes whose acknowledgment is awaited, kept at most per connection: past this, a further
/// notified write joins the latest one (reported with it, when both are acknowledged), as Linux
/// joins consecutive notified writes into one notification record.
pub(crate) const AWAITED_WRITES: usize = 64;

/// Completion notifications: the numbers of notified writes, those awaiting their
/// acknowledgment, and the range acknowledged but not yet taken by the application.
#[derive(Debug, Default)]
pub(crate) struct Completions {
    /// The number the next notified write takes.
    next: u32,
    /// Writes awaiting acknowledgment, oldest first: the sequence number their last byte ends
    /// at, and the range of write numbers that ends there.
    awaited: VecDeque<(Seq, u32, u32)>,
    /// Write numbers acknowledged and not yet taken: one range, as writes complete in order and
    /// each completion extends it (Linux extends the error queue's last notification likewise).
    done: Option<(u32, u32)>,
}

impl Completions {
    /// Whether anything waits for an acknowledgment (the fast path's only question).
    #[inline]
    pub(crate) fn awaiting(&self) -> bool {
        !self.awaited.is_empty()
    }

    /// A notified write's bytes now end at `end`: it takes the next number, returned.
    pub(crate) fn written(&mut self, end: Seq) -> u32 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        let full = self.awaited.len() >= AWAITED_WRITES;
        match self.awaited.back_mut() {
            Some(last) if full => {
                last.0 = end;
                last.2 = id;
            }
            _ => self.awaited.push_back((end, id, id)),
        }
        id
    }

    /// The peer acknowledged everything below `ack`: the writes ending there are complete.
    pub(crate) fn acked(&mut self, ack: Seq) {
        while let Some(&(end, lo, hi)) = self.awaited.front() {
            if end > ack {
                break;
            }
            self.awaited.pop_front();
            self.done = Some(match self.done {
                Some((first, last)) if last.wrapping_add(1) == lo => (first, hi),
                Some(other) => {
                    // Numbers only ever complete in order, so the ranges always join; keep the
                    // newer rather than lose track if they ever did not.
                    debug_assert!(false, "completion {lo} after {other:?}");
                    (lo, hi)
                }
                None => (lo, hi),
            });
        }
    }

    /// Whether a completion waits for the application.
    pub(crate) fn ready(&self) -> bool {
        self.done.is_some()
    }

    /// The range of write numbers acknowledged since the last call, if any.
    pub(crate) fn take(&mut self) -> Option<RangeInclusive<u32>> {
        self.done.take().map(|(lo, hi)| lo..=hi)
    }
}

/// Which moments of a write's last byte to report (Linux's `SO_TIMESTAMPING` software transmit
/// flags): see [`TcpStreamRef::set_tx_timestamps`](crate::TcpStreamRef::set_tx_timestamps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxTimestamping {
    /// When the segment carrying it is handed to the link (`SOF_TIMESTAMPING_TX_SCHED`).
    pub scheduled: bool,
    /// When that segment leaves the stack (`SOF_TIMESTAMPING_TX_SOFTWARE`): in a user-space stack
    /// the same moment as `scheduled`.
    pub sent: bool,
    /// When the peer acknowledges it (`SOF_TIMESTAMPING_TX_ACK`).
    pub acked: bool,
}

/// One moment [`TxTimestamping`] asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxTimestamp {
    /// Which moment (Linux's `SCM_TSTAMP_SCHED`, `SCM_TSTAMP_SND`, `SCM_TSTAMP_ACK`).
    pub kind: TxTimestampKind,
    /// The write's last byte, counted from 0 at the first byte written after timestamping was
    /// turned on (Linux's `SOF_TIMESTAMPING_OPT_ID` key).
    pub key: u32,
    /// When it happened, on the stack's clock.
    pub at: crate::time::Instant,
}

/// The moments of a [`TxTimestamp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxTimestampKind {
    /// The segment carrying the byte was handed to the link.
    Scheduled,
    /// The segment carrying the byte left the stack.
    Sent,
    /// The peer acknowledged the byte.
    Acked,
}

/// Writes whose last byte awaits its moments, and timestamps not yet taken, kept at most per
/// connection each: past it, a write's byte is not followed, and a timestamp is dropped (counted),
/// as Linux's error queue drops past the receive buffer.
pub(crate) const TX_TIMESTAMPS: usize = 64;

/// Transmit timestamps of the writes' last bytes.
#[derive(Debug, Default)]
pub(crate) struct TxTimestamps {
    pub(crate) on: TxTimestamping,
    /// Any moment asked for (the write path's only question).
    pub(crate) any: bool,
    /// The sequence number of the first byte written after they were turned on: key 0.
    base: Seq,
    /// The end (one past the last byte) of each write followed, and whether its segment went.
    awaited: VecDeque<(Seq, bool)>,
    /// Timestamps not yet taken, oldest first.
    ready: VecDeque<TxTimestamp>,
    /// Timestamps dropped because `ready` was full, and writes not followed.
    pub(crate) dropped: u64,
}

impl TxTimestamps {
    /// Turns them on from `next` (the next byte written) with `on`'s moments, or off.
    pub(crate) fn set(&mut self, on: TxTimestamping, next: Seq) {
        *self = TxTimestamps {
            on,
            any: on.scheduled || on.sent || on.acked,
            base: next,
            dropped: self.dropped,
            ..TxTimestamps::default()
        };
    }

    /// Whether any write awaits a moment (the fast path's only question).
    #[inline]
    pub(crate) fn awaiting(&self) -> bool {
        !self.awaited.is_empty()
    }

    /// A write ended at `end`: its last byte is followed, if any moment is asked for.
    pub(crate) fn written(&mut self, end: Seq) {
        let on = self.on;
        if !(on.scheduled || on.sent || on.acked) {
            return;
        }
        if self.awaited.len() >= TX_TIMESTAMPS {
            self.dropped += 1;
            return;
        }
        self.awaited.push_back((end, false));
    }

    fn record(&mut self, kind: TxTimestampKind, end: Seq, at: crate::time::Instant) {
        if self.ready.len() >= TX_TIMESTAMPS {
            self.dropped += 1;
            return;
        }
        let key = (end - self.base).wrapping_sub(1);
        self.ready.push_back(TxTimestamp { kind, key, at });
    }

    /// New data up to `end` went at `at`: the writes whose last byte it carried are scheduled and
    /// sent.
    pub(crate) fn sent(&mut self, end: Seq, at: crate::time::Instant) {
        for i in 0..self.awaited.len() {
            let (last, went) = self.awaited[i];
            if last > end {
                break;
            }
            if !went {
                self.awaited[i].1 = true;
                if self.on.scheduled {
                    self.record(TxTimestampKind::Scheduled, last, at);
                }
                if self.on.sent {
                    self.record(TxTimestampKind::Sent, last, at);
                }
            }
        }
    }

    /// Everything below `ack` was acknowledged at `at`.
    pub(crate) fn acked(&mut self, ack: Seq, at: crate::time::Instant) {
        while let Some(&(last, _)) = self.awaited.front() {
            if last > ack {
                break;
            }
            self.awaited.pop_front();
            if self.on.acked {
                self.record(TxTimestampKind::Acked, last, at);
            }
        }
    }

    /// Whether a timestamp waits to be taken.
    pub(crate) fn ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The oldest timestamp not yet taken.
    pub(crate) fn take(&mut self) -> Option<TxTimestamp> {
        self.ready.pop_front()
    }
}

/// Arrival times kept at most per connection: past it, a new stretch joins the latest (which then
/// reports the later time).
pub(crate) const RX_TIMESTAMPS: usize = 256;

/// Software receive timestamps (`SO_TIMESTAMPING`'s `SOF_TIMESTAMPING_RX_SOFTWARE`): when each
/// stretch of bytes became readable (in order: a segment that arrived out of order counts from
/// when the hole before it was filled), and the time of the last byte the latest read returned.
#[derive(Debug, Default)]
pub(crate) struct RxTimestamps {
    pub(crate) on: bool,
    /// The end of each stretch not yet read, and when it became readable, oldest first.
    stretches: VecDeque<(Seq, crate::time::Instant)>,
    /// When the last byte of the latest read arrived.
    pub(crate) last_read: Option<crate::time::Instant>,
}

impl RxTimestamps {
    /// Turns them on or off (off forgets what was recorded).
    pub(crate) fn set(&mut self, on: bool) {
        *self = RxTimestamps {
            on,
            ..RxTimestamps::default()
        };
    }

    /// Bytes up to `end` became readable at `at`.
    pub(crate) fn arrived(&mut self, end: Seq, at: crate::time::Instant) {
        if self.stretches.len() >= RX_TIMESTAMPS {
            if let Some(last) = self.stretches.back_mut() {
                *last = (end, at);
            }
            return;
        }
        self.stretches.push_back((end, at));
    }

    /// A read took every byte below `pos`: the time of the last of them is kept.
    pub(crate) fn read_to(&mut self, pos: Seq) {
        while let Some(&(end, at)) = self.stretches.front() {
            if end >= pos {
                // The last byte read (`pos - 1`) lies in this stretch, which stays for the rest
                // unless the read took it all.
                self.last_read = Some(at);
                if end == pos {
                    self.stretches.pop_front();
                }
                return;
            }
            self.stretches.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_clip_segments_at_their_ends() {
        let mut r = RecordEnds::default();
        r.push(Seq(1400));
        r.push(Seq(1800));
        assert_eq!(r.clip(Seq(1000), 1000), 400);
        assert_eq!(r.clip(Seq(1400), 1000), 400);
        assert_eq!(r.clip(Seq(1800), 1000), 1000);
        assert!(r.ends_at(Seq(1400)) && !r.ends_at(Seq(1500)));
        r.trim(Seq(1400));
        assert_eq!(r.clip(Seq(1000), 1000), 800);
        r.trim(Seq(5000));
        assert!(r.is_empty());
    }

    #[test]
    fn record_ends_are_bounded() {
        let mut r = RecordEnds::default();
        for i in 0..RECORD_ENDS as u32 {
            assert!(r.has_room());
            r.push(Seq(10 * (i + 1)));
        }
        assert!(!r.has_room());
    }

    #[test]
    fn completions_join_in_order_and_are_taken_once() {
        let mut c = Completions::default();
        c.written(Seq(4000));
        c.written(Seq(8000));
        c.written(Seq(12000));
        c.acked(Seq(3999));
        assert!(!c.ready());
        c.acked(Seq(8000));
        assert_eq!(c.take(), Some(0..=1));
        assert_eq!(c.take(), None);
        c.acked(Seq(12000));
        assert_eq!(c.take(), Some(2..=2));
        assert!(!c.awaiting());
    }

    #[test]
    fn timestamps_follow_each_writes_last_byte() {
        use crate::time::Instant;
        let mut t = TxTimestamps::default();
        let all = TxTimestamping {
            scheduled: true,
            sent: true,
            acked: true,
        };
        t.set(all, Seq(1));
        t.written(Seq(2001));
        t.written(Seq(4001));
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        // A segment ending before the first write's end stamps nothing.
        t.sent(Seq(1001), at(10));
        assert!(!t.ready());
        t.sent(Seq(4001), at(10));
        t.acked(Seq(2001), at(20));
        t.acked(Seq(4001), at(30));
        let got: Vec<_> = std::iter::from_fn(|| t.take())
            .map(|s| (s.kind, s.key, s.at))
            .collect();
        use TxTimestampKind::*;
        assert_eq!(
            got,
            [
                (Scheduled, 1999, at(10)),
                (Sent, 1999, at(10)),
                (Scheduled, 3999, at(10)),
                (Sent, 3999, at(10)),
                (Acked, 1999, at(20)),
                (Acked, 3999, at(30)),
            ]
        );
        // A retransmission stamps nothing again.
        t.written(Seq(5001));
        t.sent(Seq(5001), at(40));
        t.sent(Seq(5001), at(50));
        assert_eq!(t.take().map(|s| s.at), Some(at(40)));
        assert_eq!(t.take().map(|s| s.at), Some(at(40)));
        assert_eq!(t.take(), None);
    }

    #[test]
    fn a_read_reports_when_its_last_byte_arrived() {
        use crate::time::Instant;
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        let mut r = RxTimestamps::default();
        r.set(true);
        r.arrived(Seq(100), at(1));
        r.arrived(Seq(200), at(2));
        r.arrived(Seq(300), at(3));
        r.read_to(Seq(150));
        assert_eq!(r.last_read, Some(at(2)));
        r.read_to(Seq(200));
        assert_eq!(r.last_read, Some(at(2)));
        r.read_to(Seq(300));
        assert_eq!(r.last_read, Some(at(3)));
        for i in 0..(RX_TIMESTAMPS as u32 + 10) {
            r.arrived(Seq(400 + i), at(10 + u64::from(i)));
        }
        assert_eq!(r.stretches.len(), RX_TIMESTAMPS);
        r.read_to(Seq(400 + RX_TIMESTAMPS as u32 + 9));
        assert_eq!(r.last_read, Some(at(10 + RX_TIMESTAMPS as u64 + 9)));
    }

    #[test]
    fn timestamps_are_bounded() {
        let mut t = TxTimestamps::default();
        t.set(
            TxTimestamping {
                acked: true,
                ..TxTimestamping::default()
            },
            Seq(0),
        );
        for i in 1..=(TX_TIMESTAMPS as u32 + 5) {
            t.written(Seq(i));
        }
        assert_eq!(t.dropped, 5);
        t.acked(Seq(1000), crate::time::Instant::from_micros(0));
        assert_eq!(std::iter::from_fn(|| t.take()).count(), TX_TIMESTAMPS);
    }

    #[test]
    fn awaited_writes_are_bounded_by_joining_the_latest() {
        let mut c = Completions::default();
        for i in 0..(AWAITED_WRITES as u32 + 10) {
            c.written(Seq(100 * (i + 1)));
        }
        assert_eq!(c.awaited.len(), AWAITED_WRITES);
        c.acked(Seq(100 * AWAITED_WRITES as u32));
        // The last record holds the writes past the bound: not complete until the last one is.
        assert_eq!(c.take(), Some(0..=AWAITED_WRITES as u32 - 2));
        c.acked(Seq(100 * (AWAITED_WRITES as u32 + 10)));
        assert_eq!(
            c.take(),
            Some(AWAITED_WRITES as u32 - 1..=AWAITED_WRITES as u32 + 9)
        );
    }
}
