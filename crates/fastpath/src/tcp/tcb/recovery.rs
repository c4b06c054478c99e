//! Acknowledgments: RTT, SACK, duplicate ACKs, fast retransmit and recovery, the retransmission
//! timeout.

use super::*;

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
        self.take_timestamp(seg);
        self.process_sack(seg);
        if ack > self.snd_una {
            self.ack_advance(ack, seg, cx);
        } else if ack == self.snd_una
            && seg_len == 0
            && !seg.flags.contains(Flags::FIN)
            && (seg.window as u32) << self.snd_shift == self.snd_wnd
            && self.snd_max > self.snd_una
        {
            self.duplicate_ack(cx);
        }
        if self.recover.is_some() && self.sack_on {
            self.mark_lost();
        }
        // Window update (RFC 9293 §3.10.7.4, SND.WL1/WL2 rule).
        if self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack) {
            self.take_window(seg);
        }
        // A closed window that answers our probes is alive: probes do not count toward giving up.
        if self.snd_wnd == 0 && ack == self.snd_una {
            self.retries = 0;
        }
        true
    }

    /// Records SACK blocks about data we sent (RFC 2018 §3, RFC 6675).
    pub(super) fn process_sack(&mut self, seg: &TcpRepr) {
        if !self.sack_on {
            return;
        }
        for &(l, r) in seg.options.sack_blocks() {
            let (l, r) = (Seq(l), Seq(r));
            // Ignore blocks below snd_una (D-SACK) or outside what was sent.
            if l < r && l >= self.snd_una && r <= self.snd_max {
                self.scoreboard.add(l, r);
            }
        }
    }

    /// `ack` acknowledges new data (RFC 9293 §3.10.7.4, RFC 6298 §5, RFC 5681, RFC 6582).
    pub(super) fn ack_advance(&mut self, ack: Seq, seg: &TcpRepr, cx: &mut Cx) {
        let acked = ack - self.snd_una;
        // RTT: from the echoed timestamp, else from the timed segment if it was not retransmitted.
        if let Some((_, ecr)) = seg.options.timestamps.filter(|_| self.ts_on) {
            self.rtt_from_echo(ecr, cx);
        } else if let Some((probe, sent)) = self.rtt_probe {
            if ack > probe {
                self.rtt_probe = None;
                let rtt = cx.now.saturating_since(sent);
                self.rtt_sample(cx.now, rtt.as_millis() as u32, cx);
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
        self.scoreboard.ack(ack);
        self.push_marks.trim(ack);
        self.retries = 0;
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
            self.timers.set(Timer::Retransmit, cx.now + self.rto);
        }
        match self.recover {
            Some(point) if ack >= point => {
                // Full acknowledgment: recovery ends (RFC 6582 §3.2 step 3).
                self.recover = None;
                self.dupacks = 0;
                let flight = self.snd_max - self.snd_una;
                self.cc.cwnd = self.cc.ssthresh.min(flight.max(self.mss) + self.mss);
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
                let srtt = self.srtt.unwrap_or(self.rto);
                self.cc.on_ack(acked, self.mss, cx.now, srtt);
            }
        }
    }

    pub(super) fn duplicate_ack(&mut self, cx: &mut Cx) {
        self.dupacks += 1;
        if self.recover.is_some() {
            return;
        }
        let sack_says_lost = self.sack_on && self.scoreboard.sacked_bytes() >= 3 * self.mss;
        if self.dupacks >= DUPTHRESH || sack_says_lost {
            // Fast retransmit (RFC 5681 §3.2; RFC 6582: not twice for one window).
            cx.counters.fast_recoveries += 1;
            let flight = self.snd_max - self.snd_una;
            self.cc.on_loss(flight, self.mss);
            self.recover = Some(self.snd_max);
            self.rexmit_next = self.snd_una;
            // The first hole at least; with SACK, what IsLost() then marks (`mark_lost`).
            self.rexmit_limit = self.snd_una + self.mss;
            self.rtt_probe = None;
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
            self.rtt_sample(cx.now, rtt_ms, cx);
        }
    }

    pub(super) fn rtt_sample(&mut self, _now: Instant, rtt_ms: u32, cx: &mut Cx) {
        // In nanoseconds as integers: `Duration`'s own multiplications and divisions carry between
        // seconds and nanoseconds at every step, which cost more than the rest of an ACK's
        // processing. The results are the same (both round down; a sample is below 50 days, so
        // nothing here comes near `u64`'s limit).
        let nanos = |d: Duration| d.as_nanos() as u64;
        let r = u64::from(rtt_ms.max(1)) * 1_000_000;
        let (srtt, rttvar) = match self.srtt {
            None => (r, r / 2),
            Some(srtt) => {
                let srtt = nanos(srtt);
                let rttvar = (nanos(self.rttvar) * 3 + srtt.abs_diff(r)) / 4;
                ((srtt * 7 + r) / 8, rttvar)
            }
        };
        if self.activity.min_rtt == 0 || r < self.activity.min_rtt {
            self.activity.min_rtt = r;
        }
        self.srtt = Some(Duration::from_nanos(srtt));
        self.rttvar = Duration::from_nanos(rttvar);
        // The variance term's floor: the clock's granularity (RFC 6298 §2.3), or `min_rto` as Linux.
        let floor = if cx.cfg.rto_min_on_variance {
            nanos(cx.cfg.min_rto)
        } else {
            1_000_000
        };
        let rto = srtt + (rttvar * 4).max(floor);
        self.rto = Duration::from_nanos(rto).clamp(cx.cfg.min_rto, cx.cfg.max_rto);
    }

    /// Bytes the network holds for us (RFC 6675 §4 "pipe", with every unSACKed byte below the highest
    /// SACKed one taken as lost, as FACK does).
    pub(super) fn pipe(&self) -> u32 {
        let flight = self.snd_max - self.snd_una;
        if self.recover.is_none() {
            return self.snd_nxt - self.snd_una;
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
        self.retries += 1;
        let limit = if self.state.is_synchronized() {
            cx.cfg.max_retries
        } else {
            cx.cfg.syn_retries
        };
        let out_of_time = self.user_timeout.is_some();
        if (out_of_time && self.user_timeout_expired(cx.now))
            || (!out_of_time && self.retries > limit)
        {
            let synchronized = self.state.is_synchronized();
            if synchronized {
                cx.counters.estab_resets += 1;
            } else {
                cx.counters.attempt_fails += 1;
            }
            self.abort(io::ErrorKind::TimedOut, cx);
            return if synchronized {
                Verdict::Reset {
                    seq: self.snd_nxt.0,
                    ack: None,
                }
            } else {
                Verdict::Remove
            };
        }
        // Back off (RFC 6298 §5.5) and go back to the first unacknowledged byte.
        self.rto = (self.rto * 2).min(cx.cfg.max_rto);
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
        Verdict::Continue
    }
}
