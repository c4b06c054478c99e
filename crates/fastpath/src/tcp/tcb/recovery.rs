//! Acknowledgments: RTT, SACK and D-SACK, loss detection (RACK-TLP or duplicate ACKs), fast
//! retransmit and recovery with proportional rate reduction, the retransmission timeout.

use super::*;
use crate::config::LossDetection;
use crate::tcp::rack::{self, RackTimer, Sent};
use crate::time::{micros, nanos};

impl<A: crate::addr::IpAddress> Tcb<A> {
    /// The ACK field of an acceptable segment (RFC 9293 §3.10.7.4 fifth step): new data
    /// acknowledged, a duplicate ACK, the window. False when the ACK is unacceptable (RFC 5961 §5: an
    /// ACK of data never sent is answered with an ACK; one far older than the window the peer could
    /// have seen is challenged) and the segment must be dropped.
    pub(super) fn acknowledgment(&mut self, seg: &TcpRepr, seg_len: u32, cx: &mut Cx) -> bool {
        let ack = Seq(seg.ack);
        let seq = Seq(seg.seq);
        if ack > self.snd_max {
            cx.drops.add(DropReason::TcpBadAck);
            self.invalid_ack(seg, seg_len, cx);
            return false;
        }
        if ack < self.snd_una - self.max_snd_wnd.max(65535) {
            cx.drops.add(DropReason::TcpBadAck);
            self.challenge_ack(cx);
            return false;
        }
        if ack >= self.snd_una {
            // The peer answers (an ACK that is not old, Linux's `tcp_ack`): no probe is
            // unanswered, and an ICMP error heard before no longer says why nothing moves.
            self.probes_out = 0;
            self.soft_error = None;
        }
        self.take_timestamp(seg);
        let una_before = self.snd_una;
        let sacked_before = self.scoreboard.sacked_bytes();
        let lost_before = self.sent_log.lost_bytes();
        self.rack.ack_begins();
        let dsack = self.process_sack(seg, cx);
        let sacked_after = self.scoreboard.sacked_bytes();
        let duplicate = ack == self.snd_una
            && seg_len == 0
            && !seg.flags.contains(Flags::FIN)
            && (seg.window as u32) << self.snd_shift == self.snd_wnd
            && self.snd_max > self.snd_una;
        if ack > self.snd_una {
            self.ack_advance(ack, seg, cx);
        } else {
            if duplicate {
                self.duplicate_ack(cx);
            }
            if self.rack_on(cx.cfg) {
                self.rack_detect(cx);
                self.grow_on_sack(sacked_after.saturating_sub(sacked_before), cx);
            }
        }
        if self.recover.is_some() && self.sack_on && !self.rack_on(cx.cfg) {
            self.mark_lost();
        }
        let una_advanced = self.snd_una > una_before;
        if self.rack.probe_high.is_some() && !una_advanced {
            // (An ACK that moves SND.UNA was seen by `ack_advance`.)
            let new_info = seg_len > 0 || !duplicate || sacked_after > sacked_before;
            self.probe_acked(ack, dsack, new_info, cx);
        }
        if self.recover.is_some() && cx.cfg.prr {
            // Delivered: newly acknowledged bytes not SACKed before, and newly SACKed ones.
            let delivered = (i64::from(self.snd_una - una_before) + i64::from(sacked_after)
                - i64::from(sacked_before))
            .max(0) as u32;
            let newly_lost = self.sent_log.lost_bytes() > lost_before;
            self.prr_resize(delivered, una_advanced, newly_lost);
        }
        // Window update (RFC 9293 §3.10.7.4, SND.WL1/WL2 rule).
        if self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack) {
            self.take_window(seg);
        }
        // A closed window that answers our probes is alive: probes do not count toward giving up.
        if self.snd_wnd == 0 && ack == self.snd_una {
            self.retries = 0;
            self.retry_since = None;
        }
        true
    }

    /// An ACK that SACKed `newly_sacked` bytes and moved nothing else: on a path seen to reorder by
    /// more than DupThresh segments, delivery out of order is delivery, and the window grows by it
    /// outside recovery (Linux's `tcp_may_raise_cwnd`: RFC 5681 grows it only for data acknowledged
    /// in order).
    fn grow_on_sack(&mut self, newly_sacked: u32, cx: &mut Cx) {
        if newly_sacked == 0
            || self.rack.reorder_distance <= DUPTHRESH * self.mss
            || self.recover.is_some()
            || self.loss_until.is_some()
        {
            return;
        }
        self.grow_window(newly_sacked, cx);
    }

    /// The congestion window grows by `delivered` bytes, if it is being used (`cwnd_validation`).
    #[inline]
    fn grow_window(&mut self, delivered: u32, cx: &Cx) {
        if !cx.cfg.cwnd_validation || self.cc.is_cwnd_limited() {
            let srtt = self.srtt_or_rto();
            self.cc.on_ack(delivered, self.mss, cx.now, srtt);
        }
    }

    /// In recovery with PRR: the window becomes the pipe and what PRR lets go for `delivered`
    /// bytes delivered (see [`Prr::on_ack`]).
    fn prr_resize(&mut self, delivered: u32, una_advanced: bool, newly_lost: bool) {
        let (pipe, ssthresh, mss) = (self.pipe(), self.cc.ssthresh, self.mss);
        if let Some(cwnd) =
            self.prr
                .on_ack(delivered, pipe, ssthresh, mss, una_advanced, newly_lost)
        {
            self.cc.cwnd = cwnd;
        }
    }

    /// Records SACK blocks about data we sent (RFC 2018 §3, RFC 6675), and hands RACK the
    /// segments they deliver. Returns true when the first block is a D-SACK (RFC 2883 §4: below the
    /// cumulative ACK, or inside the second block): a segment of ours arrived twice.
    pub(super) fn process_sack(&mut self, seg: &TcpRepr, cx: &mut Cx) -> bool {
        let blocks = seg.options.sack_blocks();
        if !self.sack_on || blocks.is_empty() {
            return false;
        }
        let (first_left, first_right) = (Seq(blocks[0].0), Seq(blocks[0].1));
        let dsack = match blocks {
            [(l, r), rest @ ..] => {
                Seq(*r) <= Seq(seg.ack)
                    || rest
                        .first()
                        .is_some_and(|&(l2, r2)| Seq(*l) >= Seq(l2) && Seq(*r) <= Seq(r2))
            }
            [] => false,
        };
        if dsack {
            cx.counters.dsacks_received += 1;
            if cx.cfg.dsack && first_left < first_right {
                let segments = (first_right - first_left).div_ceil(self.mss.max(1));
                let of_probe = self
                    .rack
                    .probe_high
                    .is_some_and(|(high, _)| high == first_right);
                let (una, max, resent) = (self.snd_una, self.snd_max, self.retransmits);
                self.rack.dsack(una, max, segments, resent, of_probe);
            }
        }
        let rack = self.rack_on(cx.cfg);
        for &(l, r) in &blocks[dsack as usize..] {
            let (l, r) = (Seq(l), Seq(r));
            // Ignore blocks outside what was sent.
            if l < r && l >= self.snd_una && r <= self.snd_max {
                self.scoreboard.add(l, r);
                if rack {
                    let (now, min_rtt) = (cx.now, self.activity.min_rtt);
                    let echoed = self.echoed(seg);
                    let (log, state) = (&mut self.sent_log, &mut self.rack);
                    log.sacked(l, r, |s| {
                        state.delivered(s, now, min_rtt, |at| echo_before(echoed, at))
                    });
                }
            }
        }
        dsack
    }

    /// Whether RACK runs on this connection: chosen, and SACK in use (without SACK it has nothing
    /// to see deliveries by; the duplicate-ACK rules apply).
    pub(super) fn rack_on(&self, cfg: &TcpConfig) -> bool {
        self.sack_on && cfg.loss_detection == LossDetection::Rack
    }

    /// The ACK's timestamp echo on our clock, for RACK's check of a retransmission's delivery.
    fn echoed(&self, seg: &TcpRepr) -> Option<u32> {
        seg.options
            .timestamps
            .filter(|_| self.ts_on)
            .map(|(_, ecr)| ecr.wrapping_sub(self.ts_offset))
    }

    /// RACK's loss detection (RFC 8985 §6.2) after an ACK or its reordering timer: marks what it
    /// finds lost (entering recovery for it) and runs the reordering timer for what may still be
    /// reordered.
    pub(super) fn rack_detect(&mut self, cx: &mut Cx) {
        if self.loss_until.is_some() && self.snd_nxt < self.snd_max {
            // Sending everything again after a timeout: nothing to compare yet.
            return;
        }
        let min_rtt = self.min_rtt().unwrap_or_default();
        let srtt = self.srtt_or_rto();
        let sacked_segments = self.scoreboard.sacked_bytes() / self.mss.max(1);
        let recovering = self.recover.is_some() || self.loss_until.is_some();
        let reo_wnd = self
            .rack
            .reo_wnd(recovering, sacked_segments, min_rtt, srtt);
        let (marked, timeout) = self.sent_log.detect_loss(&self.rack, reo_wnd, cx.now);
        if marked > 0 {
            cx.counters.rack_lost += u64::from(marked);
            if !recovering {
                self.enter_recovery(cx);
            }
        }
        match timeout {
            Some(at) => {
                self.cancel_probe();
                self.rack.timer = RackTimer::Reorder;
                // As Linux arms it: in whole milliseconds (jiffies at HZ=1000), rounded up, and
                // `TCP_TIMEOUT_MIN` (2 ms) later, a little more time for reordered segments.
                let remaining = at.total_micros().saturating_sub(cx.now.total_micros());
                let slack = remaining.div_ceil(1000) * 1000 + REORDER_TIMER_MIN;
                self.timers.set(
                    Timer::Rack,
                    Instant::from_micros(cx.now.total_micros() + slack),
                );
            }
            None if self.rack.timer == RackTimer::Reorder => self.timers.clear(Timer::Rack),
            None => {}
        }
    }

    /// `Timer::Rack` fired.
    pub(super) fn rack_timeout(&mut self, cx: &mut Cx) {
        match self.rack.timer {
            RackTimer::Reorder => {
                cx.counters.rack_reorder_timeouts += 1;
                let recovering = self.recover.is_some();
                self.rack_detect(cx);
                if !recovering && self.recover.is_some() && cx.cfg.prr {
                    // Recovery begun by the timer, with no ACK to size the window: as Linux's
                    // `tcp_rack_reo_timeout`, as if an ACK had delivered one segment, so that one
                    // retransmission goes now and the rest as the ACKs come (RFC 6937).
                    self.prr_resize(self.mss, false, false);
                }
            }
            RackTimer::Probe => {
                // The probe took the retransmission timer's place (as in Linux, where they share
                // one): the RTO runs again from its old deadline unless a probe goes.
                let rto_at = self.rack.rto_at.max(cx.now);
                self.timers.set(Timer::Retransmit, rto_at);
                if self.rack.probe_high.is_none() && self.snd_una != self.snd_max {
                    self.rack.probe_due = true;
                }
            }
        }
    }

    /// Schedules the tail loss probe (RFC 8985 §7.2, as Linux's `tcp_schedule_loss_probe`) after
    /// an ACK left data in flight (see [`Tcb::probe_applies`]). It takes the place of the
    /// retransmission timer, at most as late.
    pub(super) fn schedule_probe(&mut self, cx: &Cx) {
        if !self.probe_applies(cx.cfg) {
            return;
        }
        let rto_at = match self.timers.get(Timer::Retransmit) {
            Some(at) => at,
            None if self.timers.is_set(Timer::Rack) => self.rack.rto_at,
            None => self.rto_from(cx.now),
        };
        self.arm_probe(rto_at, cx.cfg, cx.now);
    }

    /// New data went: the retransmission timer runs (from now, unless it runs already), or the
    /// tail loss probe takes its place as [`Tcb::schedule_probe`] has it. One step rather than
    /// starting the retransmission timer only for the probe to take its deadline back at once
    /// (this runs for every request and response).
    #[inline]
    pub(super) fn arm_after_new_data(&mut self, cfg: &TcpConfig, now: Instant) {
        let rto_at = match self.timers.get(Timer::Retransmit) {
            Some(at) => at,
            None => self.rto_from(now),
        };
        if self.probe_applies(cfg) {
            self.arm_probe(rto_at, cfg, now);
        } else {
            self.timers.set(Timer::Retransmit, rto_at);
        }
    }

    /// Whether the tail loss probe is to be scheduled: on, with SACK, data in flight, outside
    /// recovery and disorder, no probe in flight, no reordering timer running.
    #[inline]
    fn probe_applies(&self, cfg: &TcpConfig) -> bool {
        cfg.tail_loss_probe
            && self.rack_on(cfg)
            && self.snd_una != self.snd_max
            && self.recover.is_none()
            && self.loss_until.is_none()
            && self.rack.probe_high.is_none()
            && self.scoreboard.ranges.is_empty()
            && self.state.sends_data()
            && !(self.timers.is_set(Timer::Rack) && self.rack.timer == RackTimer::Reorder)
    }

    /// Runs the probe timer in the retransmission timer's place, which would fire at `rto_at`.
    fn arm_probe(&mut self, rto_at: Instant, cfg: &TcpConfig, now: Instant) {
        let one_segment = self.snd_max - self.snd_una <= self.mss;
        let srtt_us = self.srtt.map(|ns| ns / 1000);
        let pto = rack::probe_timeout(srtt_us, one_segment, micros(cfg.min_rto));
        let probe_at = Instant::from_micros(now.total_micros() + pto);
        self.rack.rto_at = rto_at;
        self.rack.timer = RackTimer::Probe;
        self.timers.clear(Timer::Retransmit);
        self.timers.set(Timer::Rack, probe_at.min(rto_at));
    }

    /// A pending probe gives the retransmission timer back.
    pub(super) fn cancel_probe(&mut self) {
        if self.rack.timer == RackTimer::Probe && self.timers.is_set(Timer::Rack) {
            self.timers.clear(Timer::Rack);
            self.timers.arm_once(Timer::Retransmit, self.rack.rto_at);
        }
        self.rack.probe_due = false;
    }

    /// An ACK at or past a retransmitted probe's end (RFC 8985 §7.4, as Linux's
    /// `tcp_process_tlp_ack`): past it without a D-SACK, the probe repaired a loss and the window
    /// is reduced as for one; a D-SACK, or a duplicate ACK at its end, says original and probe both
    /// arrived.
    fn probe_acked(&mut self, ack: Seq, dsack: bool, new_info: bool, cx: &mut Cx) {
        let Some((high, retransmitted)) = self.rack.probe_high else {
            return;
        };
        if ack < high {
            return;
        }
        if !retransmitted || dsack {
            self.rack.probe_high = None;
        } else if ack > high {
            self.rack.probe_high = None;
            cx.counters.loss_probe_recoveries += 1;
            let flight = self.snd_max - self.snd_una;
            self.cc.on_loss(flight, self.mss);
        } else if !new_info {
            self.rack.probe_high = None;
        }
    }

    /// Loss found before the retransmission timer: recovery begins (RFC 5681 §3.2, RFC 6675 §5,
    /// RFC 6937 §3; RFC 6582: not twice for one window).
    fn enter_recovery(&mut self, cx: &mut Cx) {
        cx.counters.fast_recoveries += 1;
        let flight = self.snd_max - self.snd_una;
        self.prr = Prr::start(self.cc.cwnd);
        self.cc.on_loss(flight, self.mss);
        self.recover = Some(self.snd_max);
        self.rexmit_next = self.snd_una;
        // The first hole at least; with SACK, what IsLost() then marks (`mark_lost`).
        self.rexmit_limit = self.snd_una + self.mss;
        self.rtt_probe = None;
        self.cancel_probe();
    }

    /// `ack` acknowledges new data (RFC 9293 §3.10.7.4, RFC 6298 §5, RFC 5681, RFC 6582).
    pub(super) fn ack_advance(&mut self, ack: Seq, seg: &TcpRepr, cx: &mut Cx) {
        let acked = ack - self.snd_una;
        let rack_on = self.rack_on(cx.cfg);
        // RACK's record: what this ACK delivered, and from when (to the microsecond) the segments
        // it covers were sent, if none of them was sent twice.
        let mut sent_at = None;
        if rack_on && !self.sent_log.is_empty() {
            let (now, min_rtt) = (cx.now, self.activity.min_rtt);
            let echoed = self.echoed(seg);
            let (log, state) = (&mut self.sent_log, &mut self.rack);
            let mut span: Option<(Instant, Instant)> = None;
            let mut resent = false;
            log.acked(ack, |s: &Sent| {
                if s.retransmitted() {
                    resent = true;
                } else {
                    span = Some(span.map_or((s.at, s.at), |(o, n)| (o.min(s.at), n.max(s.at))));
                }
                state.delivered(s, now, min_rtt, |at| echo_before(echoed, at))
            });
            sent_at = span.filter(|_| !resent);
        }
        // RTT (Karn: never from a retransmission): from the record, as Linux measures it (the
        // oldest segment covered for the smoothed RTT, the newest for the least); else from the
        // echoed timestamp, else from the timed segment.
        if let Some((oldest, newest)) = sent_at {
            let since = |t: Instant| cx.now.total_micros().saturating_sub(t.total_micros());
            let (rtt, newest_rtt) = (since(oldest), since(newest));
            self.rtt_sample(rtt, newest_rtt, cx);
            if cx.cfg.hystart && self.cc.hystart_wanted(self.mss) {
                let delay_min = self.activity.min_rtt / 1000;
                let (una, nxt) = (ack.0, self.snd_nxt.max(ack).0);
                self.cc
                    .hystart_sample((newest_rtt, delay_min), (una, nxt), cx.now);
            }
        } else if let Some((_, ecr)) = seg.options.timestamps.filter(|_| self.ts_on) {
            self.rtt_from_echo(ecr, cx);
        } else if let Some((probe, sent)) = self.rtt_probe {
            if ack > probe {
                self.rtt_probe = None;
                let rtt = cx.now.saturating_since(sent);
                let ms = (rtt.as_millis() as u64).max(1);
                self.rtt_sample(ms * 1000, ms * 1000, cx);
            }
        }
        // Drop acknowledged bytes (a SYN or FIN takes one sequence number but no buffer byte).
        if ack > self.tx_seq {
            let n = (ack - self.tx_seq).min(self.tx.len() as u32);
            self.tx.consume(n as usize);
            self.tx_seq = self.tx_seq + n;
        }
        self.activity.bytes_acked += u64::from(acked);
        self.activity.delivered += u64::from(acked.div_ceil(self.mss.max(1)));
        self.unacked_since = (ack != self.snd_max).then_some(cx.now);
        if self.loss_until.is_some_and(|point| ack >= point) {
            self.loss_until = None;
        }
        self.snd_una = ack;
        if self.snd_nxt < ack {
            self.snd_nxt = ack;
        }
        // Bytes SACKed before and acknowledged now were delivered then: they do not grow the window
        // again (Linux counts each delivery once).
        let sacked_below = if !self.scoreboard.ranges.is_empty() {
            self.scoreboard.sacked_below(ack)
        } else if !self.sack_on && self.dupacks > 0 {
            // Without SACK each duplicate ACK stood for a segment delivered, as Linux counts them
            // (`tcp_add_reno_sack`): all but one of the segments acknowledged now were.
            let segments = acked.div_ceil(self.mss.max(1));
            self.dupacks.min(segments.saturating_sub(1)) * self.mss
        } else {
            0
        };
        self.scoreboard.ack(ack);
        self.push_marks.trim(ack);
        self.writes_acked(ack, cx.now);
        self.retries = 0;
        self.retry_since = None;
        if self.chronos.kind != Chrono::Idle {
            // Room in the send buffer ends a wait for it; nothing left ends being busy.
            if self.tx.free() > 0 {
                self.chrono_stop(Chrono::SndbufLimited, cx.now);
            } else {
                self.chrono_stop(Chrono::Idle, cx.now);
            }
        }
        if self.snd_una == self.snd_max {
            self.timers.clear(Timer::Retransmit);
        } else {
            self.timers.set(Timer::Retransmit, self.rto_from(cx.now));
        }
        match self.recover {
            Some(point) if ack >= point => {
                // Full acknowledgment: recovery ends (RFC 6582 §3.2 step 3), the window at
                // ssthresh with PRR (RFC 6937 §3, as Linux's `tcp_end_cwnd_reduction`), else at
                // most one segment more than the flight.
                self.recover = None;
                self.dupacks = 0;
                let flight = self.snd_max - self.snd_una;
                self.cc.cwnd = if cx.cfg.prr {
                    self.cc.ssthresh
                } else {
                    self.cc.ssthresh.min(flight.max(self.mss) + self.mss)
                };
                self.rack.recovery_ended();
            }
            Some(_) => {
                // Partial acknowledgment: the next hole is lost too; retransmit it.
                if self.rexmit_next < ack {
                    self.rexmit_next = ack;
                }
                // The byte after a partial ACK is a hole (RFC 6582 §3.2 step 5), SACK or not.
                if self.rexmit_limit < ack + self.mss {
                    self.rexmit_limit = ack + self.mss;
                }
                if !self.sack_on || self.scoreboard.ranges.is_empty() {
                    self.rexmit_next = ack;
                    self.rexmit_limit = ack + self.mss;
                    self.dupacks = 0;
                }
            }
            None => {
                self.dupacks = 0;
                self.grow_window(acked.saturating_sub(sacked_below), cx);
            }
        }
        if self.rack.probe_high.is_some() {
            // A D-SACK of the probe says it arrived twice (no loss).
            let dsack = seg
                .options
                .sack_blocks()
                .first()
                .is_some_and(|&(_, r)| Seq(r) <= ack);
            self.probe_acked(ack, dsack, true, cx);
        }
        if rack_on {
            if self.snd_una == self.snd_max {
                self.timers.clear(Timer::Rack);
                self.rack.probe_due = false;
            } else {
                self.rack_detect(cx);
                if self.rack.timer == RackTimer::Probe {
                    self.timers.clear(Timer::Rack);
                }
                self.schedule_probe(cx);
            }
        }
    }

    pub(super) fn duplicate_ack(&mut self, cx: &mut Cx) {
        self.dupacks += 1;
        if self.recover.is_some() || self.rack_on(cx.cfg) {
            // In recovery already, or RACK decides what is lost.
            return;
        }
        let sack_says_lost = self.sack_on && self.scoreboard.sacked_bytes() >= 3 * self.mss;
        if self.dupacks >= DUPTHRESH || sack_says_lost {
            // Fast retransmit (RFC 5681 §3.2).
            self.enter_recovery(cx);
        }
    }

    /// RFC 6675's IsLost(): an unSACKed byte with at least DupThresh (3) segments' worth of SACKed
    /// bytes above it is lost. Everything below the highest such byte may be retransmitted: as the
    /// SACKs of a recovery arrive, holes found later in the window (a second loss in it) are marked
    /// lost and repaired in the same recovery, not left to the retransmission timer.
    fn mark_lost(&mut self) {
        if let Some(limit) = self.scoreboard.lost_limit(3 * self.mss) {
            if limit > self.rexmit_limit {
                self.rexmit_limit = limit;
            }
        }
    }

    /// One RTT measurement, in milliseconds (RFC 6298 §2).
    /// An RTT sample from a timestamp the peer echoed (RFC 7323 §4), unless it is not one of ours
    /// from the last minute: a peer echoing a bogus value must not inflate the RTO.
    pub(super) fn rtt_from_echo(&mut self, ecr: u32, cx: &mut Cx) {
        let rtt_ms = ts_clock(cx.now).wrapping_sub(ecr.wrapping_sub(self.ts_offset));
        if rtt_ms < 60_000 {
            let us = u64::from(rtt_ms.max(1)) * 1000;
            self.rtt_sample(us, us, cx);
        }
    }

    /// `rtt_us` for the smoothed RTT, `min_us` for the least (Linux's `seq_rtt` and `ca_rtt`: from
    /// the oldest and the newest segment an ACK covers), in microseconds.
    pub(super) fn rtt_sample(&mut self, rtt_us: u64, min_us: u64, cx: &mut Cx) {
        // In nanoseconds as integers (see the fields): both round down as `Duration`'s own
        // multiplications and divisions would; a sample is below 50 days, so nothing here comes
        // near `u64`'s limit.
        let r = rtt_us.max(1) * 1000;
        let least = min_us.clamp(1, rtt_us.max(1)) * 1000;
        let (srtt, rttvar) = match self.srtt {
            None => (r, r / 2),
            Some(srtt) => {
                let rttvar = (self.rttvar * 3 + srtt.abs_diff(r)) / 4;
                ((srtt * 7 + r) / 8, rttvar)
            }
        };
        if self.activity.min_rtt == 0 || least < self.activity.min_rtt {
            self.activity.min_rtt = least;
        }
        self.srtt = Some(srtt);
        self.rttvar = rttvar;
        self.rto = rto_of(srtt, rttvar, cx.cfg);
        self.backoff = 0;
    }

    /// Bytes the network holds for us (RFC 6675 §4 "pipe", with every unSACKed byte below the highest
    /// SACKed one taken as lost, as FACK does).
    pub(super) fn pipe(&self) -> u32 {
        let flight = self.snd_max - self.snd_una;
        if self.recover.is_none() {
            return self.snd_nxt - self.snd_una;
        }
        if !self.sent_log.is_empty() {
            // RACK: what is neither SACKed nor marked lost (a lost segment sent again is in
            // flight again), as Linux's `tcp_packets_in_flight`.
            return flight
                .saturating_sub(self.scoreboard.sacked_bytes())
                .saturating_sub(self.sent_log.lost_bytes());
        }
        if self.sack_on && !self.scoreboard.ranges.is_empty() {
            let high = self.scoreboard.high().unwrap_or(self.snd_una);
            let lost = self
                .scoreboard
                .holes_between(self.rexmit_next.max(self.snd_una), high);
            flight
                .saturating_sub(self.scoreboard.sacked_bytes())
                .saturating_sub(lost)
        } else {
            flight.saturating_sub(self.dupacks.saturating_sub(3) * self.mss + 3 * self.mss)
        }
    }

    pub(super) fn retransmit_timeout(&mut self, cx: &mut Cx) -> Verdict {
        cx.counters.timeouts += 1;
        if self.retries == 0 {
            // The run began when the timer that fired was started, its RTO ago.
            let began = cx.now.total_micros().saturating_sub(self.rto / 1000);
            self.retry_since = Some(Instant::from_micros(began));
        }
        self.retries += 1;
        let out_of_time = if self.user_timeout.is_some() {
            self.user_timeout_expired(cx.now)
        } else if self.state.is_synchronized() {
            self.retries_timed_out(cx.now, cx.cfg)
        } else {
            self.retries > self.syn_retries(cx.cfg)
        };
        if out_of_time {
            if self.state.is_synchronized() {
                return self.time_out(cx);
            }
            cx.counters.attempt_fails += 1;
            self.abort(self.soft_error.unwrap_or(io::ErrorKind::TimedOut), cx);
            return Verdict::Remove;
        }
        // Back off (RFC 6298 §5.5) and go back to the first unacknowledged byte.
        self.rto = self.rto.saturating_mul(2).min(nanos(cx.cfg.max_rto));
        self.backoff += 1;
        if self.state.is_synchronized() {
            let flight = self.snd_max - self.snd_una;
            self.cc.on_timeout(flight, self.mss);
            self.loss_until = Some(self.snd_max);
        }
        self.snd_nxt = self.snd_una;
        self.recover = None;
        self.dupacks = 0;
        self.scoreboard.clear();
        self.rtt_probe = None;
        self.sent_log.reset_marks();
        self.rack.probe_high = None;
        self.rack.probe_due = false;
        self.timers.clear(Timer::Rack);
        Verdict::Continue
    }
}

impl<A: IpAddress> Tcb<A> {
    /// A synchronized connection gives up (its retransmissions, window probes or keep-alive
    /// probes ran out): counted, ended with the ICMP error last heard or "timed out" (Linux's
    /// `tcp_write_err`), and a RST for the peer.
    pub(super) fn time_out(&mut self, cx: &mut Cx) -> Verdict {
        cx.counters.estab_resets += 1;
        self.abort(self.soft_error.unwrap_or(io::ErrorKind::TimedOut), cx);
        Verdict::Reset {
            seq: self.snd_nxt.0,
            ack: None,
        }
    }

    /// Whether a synchronized connection's retransmissions have run out of time: as long as
    /// `max_retries` of them take from the least RTO, doubling up to the greatest
    /// ([`give_up_after`]), since the first timeout's timer started. By time rather than by count,
    /// as Linux's `retransmits_timed_out`, so that a connection whose RTO an ICMP unreachable kept
    /// short (RFC 6069) is not abandoned sooner than another.
    fn retries_timed_out(&self, now: Instant, cfg: &TcpConfig) -> bool {
        let retries = self.retry_limit(cfg);
        self.retry_since
            .is_some_and(|since| now.saturating_since(since) >= give_up_after(cfg, retries))
    }

    /// How many retransmission timeouts (or window probes unanswered) this connection takes:
    /// `max_retries`, or `orphan_retries` once the application has closed it.
    pub(super) fn retry_limit(&self, cfg: &TcpConfig) -> u32 {
        if self.orphan {
            cfg.orphan_retries
        } else {
            cfg.max_retries
        }
    }

    /// A network or host unreachable quoting `seq` arrived (RFC 6069, as Linux's
    /// `tcp_ld_RTO_revert`): if it is about SND.UNA while its retransmission timeout is backed
    /// off, the path is what failed, not the network's capacity, so one doubling is undone and the
    /// timer runs from when the segment last went, at once if that time is past. Returns whether
    /// the timer moved.
    pub(crate) fn revert_backoff(&mut self, seq: u32, cfg: &TcpConfig, now: Instant) -> bool {
        if Seq(seq) != self.snd_una
            || self.retries == 0
            || self.backoff == 0
            || !self.state.is_synchronized()
        {
            return false;
        }
        let Some(deadline) = self.timers.get(Timer::Retransmit) else {
            return false;
        };
        let sent = deadline.total_micros().saturating_sub(self.rto / 1000);
        self.backoff -= 1;
        let base = match self.srtt {
            Some(srtt) => rto_of(srtt, self.rttvar, cfg),
            None => nanos(cfg.initial_rto),
        };
        self.rto = base
            .saturating_mul(1u64 << self.backoff.min(32))
            .min(nanos(cfg.max_rto));
        let at = Instant::from_micros(sent.saturating_add(self.rto / 1000)).max(now);
        self.timers.set(Timer::Retransmit, at);
        true
    }
}

/// The retransmission timeout for a smoothed RTT and its variation (nanoseconds): SRTT + 4 ·
/// RTTVAR, the variance term floored by the clock's granularity (RFC 6298 §2.3) or by `min_rto`
/// as Linux floors it (`TcpConfig::rto_min_on_variance`), the whole within `min_rto` and `max_rto`.
fn rto_of(srtt: u64, rttvar: u64, cfg: &TcpConfig) -> u64 {
    let min_rto = nanos(cfg.min_rto);
    let floor = if cfg.rto_min_on_variance {
        min_rto
    } else {
        1_000_000
    };
    (srtt + (rttvar * 4).max(floor)).clamp(min_rto, nanos(cfg.max_rto))
}

/// How long a synchronized connection retransmits before it gives up: what `retries` timeouts
/// take from `min_rto`, doubling up to `max_rto` (Linux's `tcp_model_timeout`): 522.2 s for
/// `max_retries` under the defaults, 15 from 200 ms up to 60 s (Linux's ceiling of 120 s makes its
/// 924.6 s), 102.2 s for an orphan's 8.
pub(crate) fn give_up_after(cfg: &TcpConfig, retries: u32) -> Duration {
    let base = cfg.min_rto.max(Duration::from_micros(1));
    let max = cfg.max_rto.max(base);
    // Doublings before the ceiling (Linux's `linear_backoff_thresh`).
    let doublings = (max.as_nanos() / base.as_nanos()).ilog2();
    let exponential = |n: u32| base.saturating_mul(((2u64 << n.min(31)) - 1) as u32);
    if retries <= doublings {
        exponential(retries)
    } else {
        exponential(doublings).saturating_add(max.saturating_mul(retries - doublings))
    }
}

/// Whether an ACK echoing `echoed` (on our timestamp clock) answers a segment sent before `at`, so
/// that it may acknowledge the original of a retransmission sent at `at` (RFC 8985 §6.2 step 2).
fn echo_before(echoed: Option<u32>, at: Instant) -> bool {
    echoed.is_some_and(|e| (e.wrapping_sub(ts_clock(at)) as i32) < 0)
}
