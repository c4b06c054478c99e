//! RACK-TLP loss detection (RFC 8985), the default ([`LossDetection::Rack`]).
//!
//! RFC 6675 counts: a segment is lost once three segments above it are SACKed. RACK times: a
//! segment is lost once a segment *sent after it* has been delivered and a reordering window has
//! passed since. That finds what counting cannot: a lost retransmission (anything sent after it
//! arrives), and a loss with fewer than three segments behind it (the reordering timer). The tail
//! loss probe (TLP, RFC 8985 §7) covers the last case, where nothing behind the loss is left to
//! arrive: two round trips after the last transmission with nothing acknowledged, one segment goes
//! (new data, or the last segment again), so that its ACK's SACK shows what is missing, and the
//! retransmission timer, with its collapse to one segment, is the last resort rather than the rule.
//!
//! [`SentLog`] is the record of what is in flight and when each part was last sent, one record per
//! segment; [`Rack`] is the algorithm's state. Both are pure: the connection (`tcb/recovery.rs`)
//! feeds them what its ACKs deliver and asks what is lost. Where Linux (6.18) and the RFC leave room,
//! this follows Linux: the reordering window is zero without reordering seen once a DupThresh of
//! segments is SACKed or in recovery, a D-SACK widens it a quarter of the least RTT at a time, and
//! the probe timeout is two smoothed RTTs plus 2 ms (plus the 200 ms delayed-ACK allowance for a
//! single segment in flight).
//!
//! [`LossDetection::Rack`]: crate::config::LossDetection::Rack

use std::collections::VecDeque;
use std::time::Duration;

use super::seq::Seq;
use crate::time::Instant;

/// Records kept at most: past it a transmission joins the last record (its time the later one's,
/// which can only make RACK wait longer, never call something lost early). 8,192 full segments
/// is over 11 MB in flight.
pub(crate) const MAX_RECORDS: usize = 8192;

/// The record of one segment in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) start: Seq,
    pub(crate) end: Seq,
    /// When it was last sent.
    pub(crate) at: Instant,
    flags: u8,
}

const SACKED: u8 = 1;
const LOST: u8 = 2;
const RETRANSMITTED: u8 = 4;
/// Marked lost at some point and neither SACKed nor acknowledged since (sent again or not):
/// what Linux's `lost_out` counts.
const MARKED: u8 = 8;

impl Sent {
    fn len(&self) -> u32 {
        self.end - self.start
    }
    pub(crate) fn lost(&self) -> bool {
        self.flags & LOST != 0
    }
    pub(crate) fn retransmitted(&self) -> bool {
        self.flags & RETRANSMITTED != 0
    }
}

/// What is in flight, in sequence order, each segment with the time it was last sent.
#[derive(Clone, Debug, Default)]
pub(crate) struct SentLog {
    records: VecDeque<Sent>,
    /// Bytes marked lost and not yet sent again nor SACKed.
    lost: u32,
    /// Bytes marked lost and not yet SACKed nor acknowledged, sent again or not.
    marked: u32,
}

impl SentLog {
    /// New data `[start, end)` went at `at`, as segments of at most `segment` bytes.
    #[inline]
    pub(crate) fn sent(&mut self, start: Seq, end: Seq, at: Instant, segment: u32) {
        // The usual case on its own, inlined: one segment, with room for its record.
        if start < end && end - start <= segment && self.records.len() < MAX_RECORDS {
            self.records.push_back(Sent {
                start,
                end,
                at,
                flags: 0,
            });
        } else {
            self.sent_cut(start, end, at, segment);
        }
    }

    /// [`SentLog::sent`] for several segments, or with the log full.
    #[inline(never)]
    fn sent_cut(&mut self, start: Seq, end: Seq, at: Instant, segment: u32) {
        let mut s = start;
        while s < end {
            let e = if end - s > segment { s + segment } else { end };
            let full = self.records.len() >= MAX_RECORDS;
            match self.records.back_mut() {
                Some(last) if full && last.end == s => {
                    last.end = e;
                    last.at = at;
                }
                _ => self.records.push_back(Sent {
                    start: s,
                    end: e,
                    at,
                    flags: 0,
                }),
            }
            s = e;
        }
    }

    /// `[start, end)` went again at `at`: its records take the new time, are retransmissions, and
    /// are no longer lost (a record that straddles either edge is split first).
    pub(crate) fn resent(&mut self, start: Seq, end: Seq, at: Instant) {
        self.split_at(start);
        self.split_at(end);
        let mut i = self.first_ending_after(start);
        while let Some(r) = self.records.get_mut(i) {
            if r.start >= end {
                break;
            }
            if r.flags & LOST != 0 && r.flags & SACKED == 0 {
                self.lost -= r.len();
            }
            r.flags = (r.flags & !LOST) | RETRANSMITTED;
            r.at = at;
            i += 1;
        }
    }

    /// The index of the first record that ends after `seq`.
    fn first_ending_after(&self, seq: Seq) -> usize {
        self.records.partition_point(|r| r.end <= seq)
    }

    /// Splits the record holding `seq` strictly inside it in two at `seq`.
    fn split_at(&mut self, seq: Seq) {
        let i = self.first_ending_after(seq);
        let room = self.records.len() < MAX_RECORDS;
        if let Some(r) = self.records.get_mut(i) {
            if r.start < seq && seq < r.end && room {
                let mut tail = *r;
                r.end = seq;
                tail.start = seq;
                self.records.insert(i + 1, tail);
            }
        }
    }

    /// The cumulative ACK reached `ack`: the records below it leave; each fully acknowledged one not
    /// SACKed before is handed to `delivered`.
    pub(crate) fn acked(&mut self, ack: Seq, mut delivered: impl FnMut(&Sent)) {
        // The usual case on its own, straight-line (a request or a response: one segment in
        // flight, all of it acknowledged), without the loop's bookkeeping around it.
        if self.records.len() == 1 {
            if let Some(&r) = self.records.front().filter(|r| r.end <= ack) {
                self.records.clear();
                self.uncount(r.flags, r.len());
                if r.flags & SACKED == 0 {
                    delivered(&r);
                }
                return;
            }
        }
        while let Some(r) = self.records.front_mut() {
            if r.end <= ack {
                let r = self.records.pop_front().unwrap_or_else(|| unreachable!());
                self.uncount(r.flags, r.len());
                if r.flags & SACKED == 0 {
                    delivered(&r);
                }
            } else {
                if r.start < ack {
                    let (flags, cut) = (r.flags, ack - r.start);
                    r.start = ack;
                    self.uncount(flags, cut);
                }
                break;
            }
        }
    }

    /// A SACK block `[left, right)`: the records inside it not SACKed before are SACKed now and
    /// handed to `delivered`.
    pub(crate) fn sacked(&mut self, left: Seq, right: Seq, mut delivered: impl FnMut(&Sent)) {
        let mut i = self.first_ending_after(left);
        while let Some(r) = self.records.get_mut(i) {
            if r.start >= right {
                break;
            }
            if r.start >= left && r.end <= right && r.flags & SACKED == 0 {
                let (flags, len) = (r.flags, r.len());
                r.flags = (r.flags & !(LOST | MARKED)) | SACKED;
                delivered(r);
                self.uncount(flags, len);
            }
            i += 1;
        }
    }

    /// `bytes` of a record with `flags` leave the lost and marked counts (acknowledged, or SACKed
    /// now); a record SACKed before had left them already.
    #[inline(always)]
    fn uncount(&mut self, flags: u8, bytes: u32) {
        if flags & SACKED == 0 {
            if flags & LOST != 0 {
                self.lost -= bytes;
            }
            if flags & MARKED != 0 {
                self.marked -= bytes;
            }
        }
    }

    /// Nothing in flight is recorded (RACK off, or everything acknowledged).
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Bytes marked lost, not yet sent again nor SACKed.
    pub(crate) fn lost_bytes(&self) -> u32 {
        self.lost
    }

    /// Bytes marked lost and neither SACKed nor acknowledged since, sent again or not (Linux's
    /// `lost_out`, which `tcpi_lost` reports).
    pub(crate) fn marked_bytes(&self) -> u32 {
        self.marked
    }

    /// Bytes sent again and neither acknowledged nor SACKed since (for the connection's figures).
    pub(crate) fn retransmitted_out(&self) -> u32 {
        self.records
            .iter()
            .filter(|r| r.flags & (RETRANSMITTED | SACKED) == RETRANSMITTED)
            .map(|r| r.len())
            .sum()
    }

    /// The first record marked lost (to send again).
    pub(crate) fn first_lost(&self) -> Option<Sent> {
        if self.lost == 0 {
            return None;
        }
        self.records.iter().find(|r| r.lost()).copied()
    }

    /// The last record (a tail loss probe sends it again).
    pub(crate) fn last(&self) -> Option<Sent> {
        self.records.back().copied()
    }

    /// RACK's step 5 (RFC 8985 §6.2): every segment sent before the most recently delivered one
    /// (`rack`'s) and unacknowledged for longer than its RTT plus `reo_wnd` is marked lost. Returns
    /// how many were marked and, for those that may still arrive, when the last of them runs out
    /// (the reordering timer).
    pub(crate) fn detect_loss(
        &mut self,
        rack: &Rack,
        reo_wnd: Duration,
        now: Instant,
    ) -> (u32, Option<Instant>) {
        let Some((xmit, end)) = rack.latest else {
            return (0, None);
        };
        let wait = Duration::from_micros(rack.rtt_us) + reo_wnd;
        let mut marked = 0;
        let mut timeout: Option<Instant> = None;
        for r in self.records.iter_mut() {
            if r.flags & (SACKED | LOST) != 0 {
                continue;
            }
            if !sent_after(xmit, end, r.at, r.end) {
                // First transmissions are in time order along the sequence, and a retransmission
                // is later than its original: nothing further on was sent before `rack`'s.
                if r.flags & RETRANSMITTED == 0 {
                    break;
                }
                continue;
            }
            let due = r.at + wait;
            if due <= now {
                r.flags |= LOST;
                self.lost += r.len();
                if r.flags & MARKED == 0 {
                    r.flags |= MARKED;
                    self.marked += r.len();
                }
                marked += 1;
            } else {
                timeout = Some(timeout.map_or(due, |t| t.max(due)));
            }
        }
        (marked, timeout)
    }

    /// A retransmission timeout: nothing is SACKed or lost any more (the sender goes back to the
    /// first unacknowledged byte and the scoreboard starts again).
    pub(crate) fn reset_marks(&mut self) {
        for r in self.records.iter_mut() {
            r.flags &= RETRANSMITTED;
        }
        self.lost = 0;
        self.marked = 0;
    }

    /// Forgets everything (TIME-WAIT holds no send state).
    pub(crate) fn release(&mut self) {
        *self = SentLog::default();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

/// Whether a segment sent at `t1` ending at `end1` was sent after one sent at `t2` ending at
/// `end2` (RFC 8985 §6.2: the sequence breaks a tie in time).
fn sent_after(t1: Instant, end1: Seq, t2: Instant, end2: Seq) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

/// Which of RACK's timers runs in the connection's `Timer::Rack` slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum RackTimer {
    /// Segments may still arrive reordered: look again when the last of their windows runs out.
    #[default]
    Reorder,
    /// The tail loss probe.
    Probe,
}

/// RACK-TLP's state for one connection.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rack {
    /// The send time and end of the most recently sent segment delivered (RACK.xmit_ts,
    /// RACK.end_seq).
    pub(crate) latest: Option<(Instant, Seq)>,
    /// That segment's RTT (RACK.rtt), microseconds (an integer: it is taken for every segment
    /// an ACK delivers).
    pub(crate) rtt_us: u64,
    /// The highest end delivered (RACK.fack).
    fack: Seq,
    /// `fack` as it was before the ACK being taken (Linux's `prior_fack`), if anything had been
    /// delivered: what reordering is judged against, so that the SACK blocks and the cumulative
    /// ACK of one ACK never count each other as reordered.
    prior_fack: Option<Seq>,
    /// ACKs that showed reordering: a segment below `prior_fack` delivered without being sent
    /// again (Linux's `tcpi_reord_seen`, counted there at most once for an ACK's SACK blocks and
    /// once for its cumulative part; here once an ACK). Any at all: the path reorders.
    pub(crate) reorderings: u64,
    /// The farthest, in bytes, such a segment's start lay below `prior_fack`: the degree of
    /// reordering seen (Linux's `tp->reordering`, there in segments, from
    /// `tcp_check_sack_reordering`).
    pub(crate) reorder_distance: u32,
    /// This ACK has been counted in `reorderings`.
    reordering_counted: bool,
    /// The reordering window in quarters of the least RTT (RACK.reo_wnd_mult), widened by D-SACKs.
    reo_steps: u8,
    /// Recoveries left before `reo_steps` goes back to one (RACK.reo_wnd_persist).
    reo_persist: u8,
    /// No second widening until the ACK passes this (one per round trip).
    dsack_round: Option<Seq>,
    /// Segments reported duplicated by D-SACKs so far.
    pub(crate) dsack_dups: u64,
    /// What `Timer::Rack` is running for.
    pub(crate) timer: RackTimer,
    /// The end of the tail loss probe in flight (TLP.end_seq), and whether it was a retransmission.
    pub(crate) probe_high: Option<(Seq, bool)>,
    /// The probe timer fired: the next transmission is the probe.
    pub(crate) probe_due: bool,
    /// When the retransmission timer would fire, while the probe timer stands in for it.
    pub(crate) rto_at: Instant,
}

/// Recoveries a widened reordering window lasts (Linux's `TCP_RACK_RECOVERY_THRESH`).
const REO_PERSIST: u8 = 16;

impl Rack {
    /// An ACK is about to be taken: remembers what was delivered before it (see `prior_fack`).
    pub(crate) fn ack_begins(&mut self) {
        self.prior_fack = self.latest.map(|_| self.fack);
        self.reordering_counted = false;
    }

    /// RACK's step 2 (RFC 8985 §6.2) for one delivered segment, with the least RTT measured (in
    /// nanoseconds, 0 for none) and the ACK's timestamp echo if any: the most recently sent
    /// delivered segment and its RTT. A retransmission that may have been delivered by its original
    /// (its RTT below the least seen, or the echo older than the retransmission) tells nothing. A
    /// segment below the highest delivered before this ACK ([`Self::ack_begins`]) that was never
    /// sent again arrived out of order.
    pub(crate) fn delivered(
        &mut self,
        seg: &Sent,
        now: Instant,
        min_rtt_ns: u64,
        echo_before: impl Fn(Instant) -> bool,
    ) {
        let rtt_us = now.total_micros().saturating_sub(seg.at.total_micros());
        if seg.retransmitted() && (rtt_us < min_rtt_ns / 1000 || echo_before(seg.at)) {
            return;
        }
        if self.latest.is_none() {
            self.fack = seg.end;
        }
        if self.prior_fack.is_some_and(|f| seg.end < f) && !seg.retransmitted() {
            self.reordered(seg);
        }
        self.fack = self.fack.max(seg.end);
        self.rtt_us = rtt_us;
        match self.latest {
            Some((at, end)) if !sent_after(seg.at, seg.end, at, end) => {}
            _ => self.latest = Some((seg.at, seg.end)),
        }
    }

    /// `seg`, never sent again, arrived below what was delivered before this ACK: the path
    /// reorders, by as far as `seg` lay below it. Rare: out of line.
    #[cold]
    #[inline(never)]
    fn reordered(&mut self, seg: &Sent) {
        let prior = self.prior_fack.unwrap_or(seg.end);
        self.reorder_distance = self.reorder_distance.max(prior - seg.start);
        if !self.reordering_counted {
            self.reordering_counted = true;
            self.reorderings += 1;
        }
    }

    /// The path has been seen to reorder.
    pub(crate) fn reordering_seen(&self) -> bool {
        self.reorderings > 0
    }

    /// RACK's reordering window (RFC 8985 §6.2 step 4, as Linux's `tcp_rack_reo_wnd`): none when the
    /// path has not been seen to reorder and either recovery is under way or a DupThresh of segments
    /// is SACKed; else a quarter of the least RTT per step, at most the smoothed RTT.
    pub(crate) fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked_segments: u32,
        min_rtt: Duration,
        srtt: Duration,
    ) -> Duration {
        if !self.reordering_seen() && (in_recovery || sacked_segments >= 3) {
            return Duration::ZERO;
        }
        (min_rtt / 4 * u32::from(self.reo_steps.max(1))).min(srtt)
    }

    /// A D-SACK for `segments` segments arrived (RFC 8985 §6.2 step 4), `retransmitted` segments
    /// sent again so far: the window widens by a step, at most once per round trip, and stays
    /// widened for the next sixteen recoveries. As Linux (`tcp_dsack_seen`), only on a path seen to
    /// reorder, and not for duplicates the sender did not make (more duplicates reported than
    /// segments ever sent again: the network copies packets) nor for a tail loss probe's.
    pub(crate) fn dsack(
        &mut self,
        una: Seq,
        snd_max: Seq,
        segments: u32,
        retransmitted: u64,
        of_probe: bool,
    ) {
        self.dsack_dups += u64::from(segments.max(1));
        if self.dsack_dups > retransmitted || !self.reordering_seen() || of_probe {
            return;
        }
        if self.dsack_round.is_some_and(|end| una < end) {
            return;
        }
        self.reo_steps = self.reo_steps.max(1).saturating_add(1);
        self.reo_persist = REO_PERSIST;
        self.dsack_round = Some(snd_max);
    }

    /// A recovery ended: a widened window counts down to its reset.
    pub(crate) fn recovery_ended(&mut self) {
        if self.reo_persist > 0 {
            self.reo_persist -= 1;
            if self.reo_persist == 0 {
                self.reo_steps = 1;
            }
        }
    }
}

/// The probe timeout (RFC 8985 §7.2, as Linux's `tcp_schedule_loss_probe`): two smoothed RTTs,
/// plus the worst delayed ACK when one segment is in flight (its ACK may wait for the delayed-ACK
/// timer), else plus 2 ms; one second with no RTT measured.
/// In microseconds (it is worked out for every transmission of new data).
pub(crate) fn probe_timeout(srtt_us: Option<u64>, one_segment: bool, ack_delay_us: u64) -> u64 {
    match srtt_us {
        Some(srtt) if one_segment => 2 * srtt + ack_delay_us,
        Some(srtt) => 2 * srtt + 2_000,
        None => 1_000_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// Ten segments sent at 0 ms; segments 1..=n delivered by SACK at `now`.
    fn log_with_sacks(n: u32, now: Instant) -> (SentLog, Rack) {
        let mut log = SentLog::default();
        let mut rack = Rack::default();
        log.sent(Seq(0), Seq(10 * MSS), ms(0), MSS);
        assert_eq!(log.len(), 10);
        let mut got = Vec::new();
        log.sacked(Seq(MSS), Seq((n + 1) * MSS), |s| got.push(*s));
        for s in &got {
            rack.delivered(s, now, 10_000_000, |_| false);
        }
        (log, rack)
    }

    #[test]
    fn a_segment_sent_before_a_delivered_one_is_lost_after_the_reordering_window() {
        // One SACKed segment: a quarter of the least RTT to wait (10 ms RTT: 2.5 ms).
        let (mut log, rack) = log_with_sacks(1, ms(10));
        assert_eq!(rack.latest, Some((ms(0), Seq(2 * MSS))));
        assert_eq!(rack.rtt_us, 10_000);
        let reo = rack.reo_wnd(
            false,
            1,
            Duration::from_millis(10),
            Duration::from_millis(10),
        );
        assert_eq!(reo, Duration::from_micros(2500));
        let (marked, timer) = log.detect_loss(&rack, reo, ms(10));
        assert_eq!((marked, timer), (0, Some(Instant::from_micros(12_500))));
        // The timer's time: segment 0 (and only it: 2..9 were sent after the delivered one).
        let (marked, timer) = log.detect_loss(&rack, reo, Instant::from_micros(12_500));
        assert_eq!((marked, timer), (1, None));
        assert_eq!(log.lost_bytes(), MSS);
        assert_eq!(log.first_lost().map(|s| s.start), Some(Seq(0)));
        // Sent again: not lost any more, a retransmission with a new time.
        log.resent(Seq(0), Seq(MSS), ms(13));
        assert_eq!(log.lost_bytes(), 0);
        assert_eq!(log.first_lost(), None);
    }

    #[test]
    fn three_sacked_segments_without_reordering_mark_at_once() {
        let (mut log, rack) = log_with_sacks(3, ms(10));
        let reo = rack.reo_wnd(
            false,
            3,
            Duration::from_millis(10),
            Duration::from_millis(10),
        );
        assert_eq!(reo, Duration::ZERO);
        assert_eq!(log.detect_loss(&rack, reo, ms(10)), (1, None));
    }

    #[test]
    fn a_lost_retransmission_is_found_by_what_was_sent_after_it() {
        let mut log = SentLog::default();
        let mut rack = Rack::default();
        let min_rtt = Duration::from_millis(10);
        log.sent(Seq(0), Seq(4 * MSS), ms(0), MSS);
        // Segment 0 lost and sent again at 20 ms; new data (segment 4) at 21 ms.
        log.resent(Seq(0), Seq(MSS), ms(20));
        log.sent(Seq(4 * MSS), Seq(5 * MSS), ms(21), MSS);
        // Segments 1..3 SACKed at 10 ms (before the retransmission): nothing to say about it.
        let mut got = Vec::new();
        log.sacked(Seq(MSS), Seq(4 * MSS), |s| got.push(*s));
        for s in &got {
            rack.delivered(s, ms(10), min_rtt.as_nanos() as u64, |_| false);
        }
        assert_eq!(log.detect_loss(&rack, Duration::ZERO, ms(22)), (0, None));
        // Segment 4 SACKed at 31 ms: the retransmission, sent before it, is lost.
        let mut got = Vec::new();
        log.sacked(Seq(4 * MSS), Seq(5 * MSS), |s| got.push(*s));
        for s in &got {
            rack.delivered(s, ms(31), min_rtt.as_nanos() as u64, |_| false);
        }
        assert_eq!(log.detect_loss(&rack, Duration::ZERO, ms(31)), (1, None));
        assert_eq!(
            log.first_lost().map(|s| (s.start, s.at)),
            Some((Seq(0), ms(20)))
        );
    }

    #[test]
    fn a_retransmission_acknowledged_too_soon_is_no_rtt_sample() {
        let mut rack = Rack::default();
        let mut log = SentLog::default();
        log.sent(Seq(0), Seq(MSS), ms(0), MSS);
        log.resent(Seq(0), Seq(MSS), ms(50));
        let mut got = Vec::new();
        log.acked(Seq(MSS), |s| got.push(*s));
        // Acknowledged 1 ms after the retransmission with a 10 ms least RTT: the original's ACK.
        rack.delivered(&got[0], ms(51), 10_000_000, |_| false);
        assert_eq!(rack.latest, None);
        // Or the echo predates it.
        rack.delivered(&got[0], ms(70), 10_000_000, |at| at > ms(40));
        assert_eq!(rack.latest, None);
        rack.delivered(&got[0], ms(70), 10_000_000, |_| false);
        assert_eq!(rack.latest, Some((ms(50), Seq(MSS))));
    }

    #[test]
    fn reordering_widens_the_window_and_a_dsack_widens_it_more() {
        let mut rack = Rack::default();
        let min_rtt = Duration::from_millis(8);
        let srtt = Duration::from_millis(100);
        let seg = |s: u32, at: u64| Sent {
            start: Seq(s),
            end: Seq(s + MSS),
            at: ms(at),
            flags: 0,
        };
        rack.ack_begins();
        rack.delivered(&seg(2 * MSS, 0), ms(10), min_rtt.as_nanos() as u64, |_| {
            false
        });
        // Segment 1 in the same ACK (its cumulative part): not reordering, as Linux judges it.
        rack.delivered(&seg(MSS, 0), ms(10), min_rtt.as_nanos() as u64, |_| false);
        assert!(!rack.reordering_seen());
        // Segment 0, never sent again, delivered by a later ACK after segment 2.
        rack.ack_begins();
        rack.delivered(&seg(0, 0), ms(11), min_rtt.as_nanos() as u64, |_| false);
        assert!(rack.reordering_seen());
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(2)
        );
        // Not for duplicates the network made (more than were ever sent again).
        rack.dsack(Seq(0), Seq(10 * MSS), 1, 0, false);
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(2)
        );
        rack.dsack(Seq(0), Seq(10 * MSS), 1, 5, false);
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(4)
        );
        // Once per round trip.
        rack.dsack(Seq(5 * MSS), Seq(12 * MSS), 1, 5, false);
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(4)
        );
        rack.dsack(Seq(10 * MSS), Seq(12 * MSS), 1, 5, false);
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(6)
        );
        // Never past the smoothed RTT; back to one step after sixteen recoveries.
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, Duration::from_millis(5)),
            Duration::from_millis(5)
        );
        for _ in 0..16 {
            rack.recovery_ended();
        }
        assert_eq!(
            rack.reo_wnd(true, 5, min_rtt, srtt),
            Duration::from_millis(2)
        );
    }

    #[test]
    fn records_split_on_partial_retransmission_and_acks_and_stay_bounded() {
        let mut log = SentLog::default();
        log.sent(Seq(0), Seq(3000), ms(0), 3000);
        log.resent(Seq(1000), Seq(2000), ms(5));
        assert_eq!(log.len(), 3);
        log.acked(Seq(1500), |_| {});
        assert_eq!(log.len(), 2);
        assert_eq!(log.records[0].start, Seq(1500));
        let mut log = SentLog::default();
        for i in 0..MAX_RECORDS as u32 + 100 {
            log.sent(Seq(i), Seq(i + 1), ms(u64::from(i)), MSS);
        }
        assert_eq!(log.len(), MAX_RECORDS);
    }

    #[test]
    fn the_probe_timeout_is_two_rtts_and_a_delayed_ack_for_one_segment() {
        assert_eq!(probe_timeout(Some(10_000), false, 200_000), 22_000);
        assert_eq!(probe_timeout(Some(10_000), true, 200_000), 220_000);
        assert_eq!(probe_timeout(None, false, 200_000), 1_000_000);
    }
}
