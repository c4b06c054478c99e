//! What the application said about its writes, beyond their bytes: where records end (Linux's
//! `MSG_EOR`) and which writes it wants to hear have been acknowledged (Linux's `MSG_ZEROCOPY`
//! completion notifications). Both are kept per connection in bounded rings of sequence numbers;
//! the connection consults them as it cuts segments and as acknowledgments arrive.

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

    /// Records that a record ends at `end` (above every end recorded so far).
    pub(crate) fn push(&mut self, end: Seq) {
        debug_assert!(self.has_room());
        if self.ends.back() != Some(&end) {
            self.ends.push_back(end);
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
