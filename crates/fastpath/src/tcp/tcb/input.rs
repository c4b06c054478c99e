//! Segment arrival: header prediction and the segment-arrives procedure (RFC 9293 §3.10.7).

use super::*;

impl<A: crate::addr::IpAddress> Tcb<A> {
    /// Takes the peer's ISN and options from its SYN.
    pub(super) fn take_syn(&mut self, syn: &TcpRepr, cfg: &TcpConfig) {
        self.irs = Seq(syn.seq);
        self.rcv_nxt = self.irs + 1;
        let o = &syn.options;
        let peer_mss = o.mss.unwrap_or(536) as u32;
        self.ws_on = cfg.window_scaling && o.window_scale.is_some();
        if self.ws_on {
            self.snd_shift = o.window_scale.unwrap_or(0);
        } else {
            self.rcv_shift = 0;
            self.rx_capacity = self.rx_capacity.min(65535);
        }
        self.sack_on = cfg.sack && o.sack_permitted;
        self.ts_on = cfg.timestamps && o.timestamps.is_some();
        if let Some((val, _)) = o.timestamps {
            self.ts_recent = val;
        }
        self.peer_mss = peer_mss;
        self.mss = self.send_mss();
        self.cc = Congestion::limited(self.cc.algorithm, self.mss, self.cc.slow_start_limit);
        self.rcv_adv = self.rcv_nxt + self.advertisable();
    }

    /// Whether a SYN-ACK's echoed timestamp, if it echoes one, lies between our first SYN's
    /// timestamp and our clock now.
    fn echo_plausible(&self, seg: &TcpRepr, cx: &Cx) -> bool {
        let Some((_, ecr)) = seg.options.timestamps else {
            return true;
        };
        if ecr == 0 || !cx.cfg.timestamps {
            return true;
        }
        let first = self.unacked_since.unwrap_or(cx.now);
        let lo = ts_clock(first).wrapping_add(self.ts_offset);
        let hi = ts_clock(cx.now).wrapping_add(self.ts_offset);
        ecr.wrapping_sub(lo) <= hi.wrapping_sub(lo)
    }

    /// ECN on an acceptable segment (RFC 3168 §6.1): a CWR on data ends our echo, a congestion
    /// mark on data starts it (and is acknowledged at once, as Linux's quick-ACK mode does); an
    /// echo makes the window shrink as for a loss, once per window, and our next new data say CWR.
    fn ecn_input(&mut self, seg: &TcpRepr, payload: &PacketBuf, cx: &mut Cx) {
        if !payload.is_empty() {
            if seg.flags.contains(Flags::CWR) {
                self.ece_owed = false;
            }
            if payload.meta.ecn() == ECN_CE && !self.ece_owed {
                cx.counters.ecn_ce_received += 1;
                self.ece_owed = true;
                self.ack_now = true;
            }
        }
        if self.ecn_recover.is_some_and(|r| self.snd_una >= r) {
            self.ecn_recover = None;
        }
        let echo = seg.flags.contains(Flags::ECE) && !seg.flags.contains(Flags::SYN);
        if echo && self.ecn_recover.is_none() && self.recover.is_none() {
            cx.counters.ecn_reductions += 1;
            let flight = self.snd_max - self.snd_una;
            self.cc.on_loss(flight, self.mss);
            self.cwr_owed = true;
            self.ecn_recover = Some(self.snd_max);
        }
    }

    /// Makes a passive open a Fast Open one (RFC 7413 §4.2.2): it may send before the handshake's
    /// ACK, into the SYN's window (never scaled, RFC 7323 §2.2), as Linux does.
    pub(crate) fn open_fast(&mut self, syn: &TcpRepr) {
        self.fast_open = true;
        self.snd_wnd = u32::from(syn.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = Seq(syn.seq);
    }

    /// Jacobson's header prediction (paper 000 §2): the two cases that make up nearly all segments of
    /// a bulk transfer, handled without the general state machine. Returns the payload back when the
    /// segment does not fit the prediction.
    pub(crate) fn predict(
        &mut self,
        seg: &TcpRepr,
        payload: PacketBuf,
        cx: &mut Cx,
    ) -> Result<(), PacketBuf> {
        let flags = seg.flags.0 & !Flags::PSH.0;
        let o = &seg.options;
        let options_ok = if self.ts_on {
            // Timestamps, in order: nothing else.
            matches!(o.timestamps, Some((val, _)) if (val.wrapping_sub(self.ts_recent) as i32) >= 0)
                && o.sack_count == 0
        } else {
            o.timestamps.is_none() && o.sack_count == 0
        };
        // Unlike 4.3BSD-Reno, a changed window does not leave the fast path: a receiver whose
        // application reads in bursts changes it on most ACKs, and applying it here costs three stores.
        // Pure ACKs also take the short path while our side is closing (the last window of a
        // transfer is sent in FIN-WAIT-1), as long as they do not acknowledge the FIN itself.
        let state_ok = match self.state {
            State::Established => true,
            State::FinWait1 | State::CloseWait | State::Closing | State::LastAck => {
                payload.is_empty() && (!self.fin_queued || Seq(seg.ack) <= self.fin_seq())
            }
            _ => false,
        };
        if !state_ok
            || flags != Flags::ACK.0
            || Seq(seg.seq) != self.rcv_nxt
            || self.snd_nxt != self.snd_max
            || !options_ok
            || payload.meta.ecn() == ECN_CE
        {
            return Err(payload);
        }
        // In order from the peer, whichever path below takes it: the peer is alive.
        self.heard_from_peer(cx);
        let ack = Seq(seg.ack);
        if payload.is_empty() {
            // A pure ACK for new data, outside recovery.
            if ack > self.snd_una
                && ack <= self.snd_max
                && self.recover.is_none()
                && self.dupacks == 0
            {
                self.take_timestamp(seg);
                self.rack.ack_begins();
                self.ack_advance(ack, seg, cx);
                self.take_window(seg);
                cx.pool.free(payload);
                cx.counters.predicted_acks += 1;
                return Ok(());
            }
            // A pure window update (the window changed, so it is no duplicate ACK).
            if ack == self.snd_una && (seg.window as u32) << self.snd_shift != self.snd_wnd {
                self.take_timestamp(seg);
                self.take_window(seg);
                cx.pool.free(payload);
                cx.counters.predicted_acks += 1;
                return Ok(());
            }
            return Err(payload);
        }
        // The next data in order, with room for it, acknowledging nothing new, or (a request or a
        // response of a request/response exchange, where every segment carries data and the ACK of
        // the last one the other way) new data outside recovery. The ACK first, then the data, as
        // the general path takes them (RFC 9293 §3.10.7.4, fifth and seventh checks).
        let acks_new = ack > self.snd_una && ack <= self.snd_max;
        if (ack == self.snd_una || (acks_new && self.recover.is_none() && self.dupacks == 0))
            && self.ooo.is_empty()
            && payload.len() as u32 <= self.rx_free()
            && self.rcv_nxt + payload.len() as u32 <= self.rcv_adv
        {
            self.take_timestamp(seg);
            if acks_new {
                self.rack.ack_begins();
                self.ack_advance(ack, seg, cx);
            }
            self.take_window(seg);
            let len = payload.len() as u32;
            self.rcv_nxt = self.rcv_nxt + len;
            self.rx.push(payload, cx.pool);
            self.stamp_arrival(cx.now);
            self.data_arrived(len, cx);
            cx.counters.predicted_data += 1;
            return Ok(());
        }
        Err(payload)
    }

    /// A segment arrived: keep-alive starts counting its idle time again.
    fn heard_from_peer(&mut self, cx: &mut Cx) {
        if self.keepalive {
            self.timers
                .set(Timer::KeepAlive, cx.now + self.keepalive_times(cx.cfg).0);
            self.keepalive_probes = 0;
            self.heard_at = cx.now;
        }
    }

    /// The window of an in-order segment that passed the SND.WL1/WL2 test by construction (its
    /// sequence number is `rcv_nxt` and its ACK at least `snd_una`).
    pub(super) fn take_window(&mut self, seg: &TcpRepr) {
        let wnd = (seg.window as u32) << self.snd_shift;
        self.snd_wnd = wnd;
        self.max_snd_wnd = self.max_snd_wnd.max(wnd);
        self.snd_wl1 = Seq(seg.seq);
        self.snd_wl2 = Seq(seg.ack);
        // The peer answers: no probe is unanswered, and an ICMP error heard before no longer
        // says why nothing moves (Linux's `tcp_ack`, for every ACK that is not old).
        self.probes_out = 0;
        self.soft_error = None;
        if wnd > 0 {
            self.timers.clear(Timer::Persist);
            self.persist_backoff = 0;
            self.probe_since = None;
        }
    }

    /// Records the peer's timestamp for echoing (RFC 7323 §4.3).
    pub(super) fn take_timestamp(&mut self, seg: &TcpRepr) {
        if let Some((val, _)) = seg.options.timestamps {
            if Seq(seg.seq) <= self.last_ack_sent && (val.wrapping_sub(self.ts_recent) as i32) >= 0
            {
                self.ts_recent = val;
            }
        }
    }

    /// The general segment-arrives procedure (RFC 9293 §3.10.7.3, §3.10.7.4) for a block in any state
    /// but LISTEN, in the RFC's order: the checks (PAWS, SYN, sequence number, RST, ACK), then the
    /// text and the FIN.
    pub(crate) fn on_segment(
        &mut self,
        seg: &TcpRepr,
        mut payload: PacketBuf,
        cx: &mut Cx,
    ) -> Verdict {
        self.heard_from_peer(cx);
        if self.state == State::SynSent {
            let verdict = self.on_segment_syn_sent(seg, cx);
            // A SYN-ACK may carry data (a Fast Open server's, RFC 7413 §4.2.2): taken at the sixth
            // step (RFC 9293 §3.10.7.3), if it fits the window we offered.
            let len = payload.len() as u32;
            if self.state == State::Established && len > 0 && len <= self.rcv_wnd() {
                let fin = seg.flags.contains(Flags::FIN);
                self.receive_text(self.rcv_nxt, payload, len, fin, cx);
            } else {
                cx.pool.free(payload);
            }
            return verdict;
        }
        let mut seg = *seg;
        match self.check_segment(&mut seg, &mut payload, cx) {
            Ok(verdict) => self.segment_text(&seg, payload, verdict, cx),
            Err(verdict) => {
                cx.pool.free(payload);
                verdict
            }
        }
    }

    /// Every step before the text. `Err` ends the segment's processing with that verdict; the
    /// sequence check may strip the segment down to its ACK (`seg` and `payload` change).
    pub(super) fn check_segment(
        &mut self,
        seg: &mut TcpRepr,
        payload: &mut PacketBuf,
        cx: &mut Cx,
    ) -> Result<Verdict, Verdict> {
        self.check_paws(seg, payload.len() as u32, cx)?;
        let crossed = self.crossed_syn_ack(seg, payload.len());
        if crossed {
            // The peer's SYN-ACK after crossing SYNs: its SYN is one we have (reported as a
            // D-SACK), its ACK completes the open (Linux's `tcp_validate_incoming` lets it pass).
            self.note_duplicate(self.irs, self.irs + 1, cx);
            seg.flags = Flags(seg.flags.0 & !Flags::SYN.0);
            seg.seq = seg.seq.wrapping_add(1);
        }
        self.check_syn(seg, cx)?;
        self.check_sequence(seg, payload, cx)?;
        self.check_rst(seg, cx)?;
        let verdict = self.check_ack(seg, payload.len() as u32, cx)?;
        if crossed {
            // The window of a SYN is never scaled (RFC 7323 §2.2).
            self.snd_wnd = u32::from(seg.window);
            self.max_snd_wnd = self.snd_wnd;
        }
        Ok(verdict)
    }

    /// Whether `seg` is the peer's SYN-ACK answering our SYN after its own SYN crossed it: the
    /// SYN we already took, no data, acknowledging all we sent.
    fn crossed_syn_ack(&self, seg: &TcpRepr, payload_len: usize) -> bool {
        self.simultaneous_open
            && self.state == State::SynReceived
            && seg.flags.contains(Flags::SYN | Flags::ACK)
            && !seg.flags.contains(Flags::FIN)
            && !seg.flags.contains(Flags::RST)
            && payload_len == 0
            && Seq(seg.seq) + 1 == self.rcv_nxt
            && Seq(seg.ack) == self.snd_max
    }

    /// PAWS (RFC 7323 §5.3): a timestamp older than the last in-window one means an old duplicate.
    pub(super) fn check_paws(
        &mut self,
        seg: &TcpRepr,
        seg_len: u32,
        cx: &mut Cx,
    ) -> Result<(), Verdict> {
        if !self.ts_on || seg.flags.contains(Flags::RST) {
            return Ok(());
        }
        match seg.options.timestamps {
            Some((val, _)) if (val.wrapping_sub(self.ts_recent) as i32) < 0 => {
                cx.drops.add(DropReason::TcpPaws);
                self.invalid_ack(seg, seg_len, cx);
                Err(Verdict::Continue)
            }
            _ => Ok(()),
        }
    }

    /// A SYN (the fourth step, taken first as RFC 5961 §4 asks, whatever the sequence number). In
    /// SYN-RECEIVED, the peer's SYN again: our SYN-ACK is owed again. In TIME-WAIT, perhaps a new
    /// incarnation. Anywhere else, a rate-limited challenge ACK.
    pub(super) fn check_syn(&mut self, seg: &TcpRepr, cx: &mut Cx) -> Result<(), Verdict> {
        let flags = seg.flags;
        if !flags.contains(Flags::SYN) {
            return Ok(());
        }
        if self.state == State::SynReceived
            && !flags.contains(Flags::ACK)
            && Seq(seg.seq) == self.irs
        {
            self.snd_nxt = self.iss;
            return Err(Verdict::Continue);
        }
        // In TIME-WAIT a plain SYN may open a new incarnation (RFC 6191); a SYN-ACK cannot, and is
        // challenged like a SYN on any synchronized connection (RFC 5961 §4), TIME-WAIT kept, as Linux
        // and FreeBSD do.
        if self.state == State::TimeWait && !flags.contains(Flags::ACK) {
            return Err(self.time_wait_syn(seg));
        }
        cx.drops.add(DropReason::TcpChallenged);
        self.challenge_ack(cx);
        Err(Verdict::Continue)
    }

    /// The receive window, from `rcv_nxt` to the edge last advertised.
    pub(super) fn rcv_wnd(&self) -> u32 {
        if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        }
    }

    /// First step: sequence number acceptability (RFC 9293 §3.10.7.4's four cases). An unacceptable
    /// segment is answered with a duplicate ACK (unless it is a RST), except that a closed window
    /// still takes the ACK (and RST) of a segment at its edge: its data and FIN are dropped then.
    pub(super) fn check_sequence(
        &mut self,
        seg: &mut TcpRepr,
        payload: &mut PacketBuf,
        cx: &mut Cx,
    ) -> Result<(), Verdict> {
        let flags = seg.flags;
        let seq = Seq(seg.seq);
        let seg_len = payload.len() as u32;
        let window = self.rcv_wnd();
        let occupies = seg_len + flags.contains(Flags::FIN) as u32;
        let acceptable = match (occupies, window) {
            (0, 0) => seq == self.rcv_nxt,
            (0, w) => seq.in_range(self.rcv_nxt, self.rcv_nxt + w),
            (_, 0) => false,
            (n, w) => {
                seq.in_range(self.rcv_nxt, self.rcv_nxt + w)
                    || (seq + (n - 1)).in_range(self.rcv_nxt, self.rcv_nxt + w)
            }
        };
        if acceptable {
            return Ok(());
        }
        if window == 0 && seq == self.rcv_nxt && flags.contains(Flags::ACK) {
            payload.truncate(0);
            seg.flags = Flags(flags.0 & !Flags::FIN.0);
            self.ack_now = true;
            cx.drops.add(DropReason::TcpOutOfWindow);
            return Ok(());
        }
        if self.state == State::TimeWait
            && flags.contains(Flags::FIN)
            && seq + seg_len + 1 == self.rcv_nxt
        {
            // The peer's FIN again (our ACK of it was lost): acknowledge it and restart 2 MSL
            // (RFC 9293 §3.10.7.4, eighth step).
            self.ack_now = true;
            self.enter_time_wait(cx);
            return Err(Verdict::Continue);
        }
        if !flags.contains(Flags::RST) {
            if occupies > 0 && seq < self.rcv_nxt {
                // Old data again: reported as a D-SACK (RFC 2883 §4), up to RCV.NXT.
                self.note_duplicate(seq, (seq + occupies).min(self.rcv_nxt), cx);
            }
            self.invalid_ack(seg, seg_len, cx);
        }
        cx.drops.add(DropReason::TcpOutOfWindow);
        Err(Verdict::Continue)
    }

    /// Second step: a RST resets only at exactly RCV.NXT; elsewhere in the window it is challenged
    /// (RFC 5961 §3).
    pub(super) fn check_rst(&mut self, seg: &TcpRepr, cx: &mut Cx) -> Result<(), Verdict> {
        if !seg.flags.contains(Flags::RST) {
            return Ok(());
        }
        if Seq(seg.seq) != self.rcv_nxt {
            cx.drops.add(DropReason::TcpChallenged);
            self.challenge_ack(cx);
            return Err(Verdict::Continue);
        }
        Err(self.reset_by_peer(cx))
    }

    /// Fifth step: the ACK field. Completes a passive open, takes what it acknowledges and the
    /// window, and moves the closing states on once our FIN is acknowledged.
    pub(super) fn check_ack(
        &mut self,
        seg: &TcpRepr,
        seg_len: u32,
        cx: &mut Cx,
    ) -> Result<Verdict, Verdict> {
        if !seg.flags.contains(Flags::ACK) {
            cx.drops.add(DropReason::TcpNoAck);
            return Err(Verdict::Continue);
        }
        let verdict = if self.state == State::SynReceived {
            self.complete_passive_open(seg)?
        } else {
            Verdict::Continue
        };
        if !self.acknowledgment(seg, seg_len, cx) {
            return Err(verdict);
        }
        let fin_acked = self.fin_queued && self.snd_una == self.fin_seq() + 1;
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if self.orphan {
                    self.timers
                        .set(Timer::Close, cx.now + cx.cfg.fin_wait2_timeout);
                }
            }
            State::Closing if fin_acked => self.enter_time_wait(cx),
            State::LastAck if fin_acked => {
                self.state = State::Closed;
                return Err(Verdict::Remove);
            }
            State::TimeWait => {
                // A FIN past the peer's own (a retransmission is caught by the sequence check):
                // acknowledge it, restart 2 MSL.
                if seg.flags.contains(Flags::FIN) {
                    self.ack_now = true;
                    self.enter_time_wait(cx);
                }
                return Err(verdict);
            }
            _ => {}
        }
        Ok(verdict)
    }

    /// SYN-RECEIVED: an acceptable ACK establishes the connection; any other is answered by RST.
    pub(super) fn complete_passive_open(&mut self, seg: &TcpRepr) -> Result<Verdict, Verdict> {
        let ack = Seq(seg.ack);
        if ack > self.snd_una && ack <= self.snd_max {
            self.state = State::Established;
            self.snd_wnd = (seg.window as u32) << self.snd_shift;
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = Seq(seg.seq);
            self.snd_wl2 = ack;
            Ok(Verdict::Established)
        } else {
            Err(Verdict::Reset {
                seq: seg.ack,
                ack: None,
            })
        }
    }

    /// Seventh and eighth steps: the text, trimmed to the window, and the FIN.
    pub(super) fn segment_text(
        &mut self,
        seg: &TcpRepr,
        mut payload: PacketBuf,
        verdict: Verdict,
        cx: &mut Cx,
    ) -> Verdict {
        if self.ecn_on {
            self.ecn_input(seg, &payload, cx);
        }
        let seq = Seq(seg.seq);
        let mut seg_len = payload.len() as u32;
        let mut fin = seg.flags.contains(Flags::FIN);
        if seg_len > 0 {
            if !matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            ) {
                // CLOSE-WAIT and later: the peer already sent its FIN; data past it is bogus.
                cx.pool.free(payload);
                return verdict;
            }
            if self.orphan {
                // Nobody will read it (RFC 9293 §3.10.7.4 leaves this open; BSD and Linux reset).
                // The connection is gone, and the reset is the one a segment to no connection
                // draws (RFC 9293 §3.10.7.1, Linux's `tcp_v4_send_reset`): its sequence number
                // is the segment's acknowledgment, which the peer accepts whatever we sent since.
                cx.drops.add(DropReason::TcpDataAfterClose);
                cx.pool.free(payload);
                self.state = State::Closed;
                let seq = if seg.flags.contains(Flags::ACK) {
                    seg.ack
                } else {
                    self.snd_nxt.0
                };
                return Verdict::Reset { seq, ack: None };
            }
            // Trim what we already have, and what lies past the window.
            if seq < self.rcv_nxt {
                self.note_duplicate(seq, self.rcv_nxt, cx);
                let skip = self.rcv_nxt - seq;
                payload.pull_front(skip as usize);
                seg_len -= skip;
            }
            let start = seq.max(self.rcv_nxt);
            let room = self.rcv_adv.max(self.rcv_nxt + 1) - start;
            if seg_len > room {
                payload.truncate(room as usize);
                seg_len = room;
                fin = false;
            }
            self.receive_text(start, payload, seg_len, fin, cx);
            return self.after_fin_check(verdict, cx);
        }
        cx.pool.free(payload);
        if fin {
            if seq == self.rcv_nxt {
                self.fin_arrived(cx);
            } else if seq > self.rcv_nxt {
                self.ooo_fin = Some(seq);
                self.ack_now = true;
            } else {
                self.ack_now = true;
            }
        }
        verdict
    }

    /// A SYN for this 4-tuple while in TIME-WAIT: a new incarnation may start if its sequence
    /// numbers (or timestamps) are past the old one's (RFC 9293 §3.10.7.4 note, RFC 6191).
    pub(super) fn time_wait_syn(&mut self, seg: &TcpRepr) -> Verdict {
        let newer_ts = match (self.ts_on, seg.options.timestamps) {
            (true, Some((val, _))) => (val.wrapping_sub(self.ts_recent) as i32) > 0,
            _ => false,
        };
        if Seq(seg.seq) > self.rcv_nxt || newer_ts {
            self.state = State::Closed;
            return Verdict::Reincarnate;
        }
        self.ack_now = true;
        Verdict::Continue
    }

    pub(super) fn reset_by_peer(&mut self, cx: &mut Cx) -> Verdict {
        let kind = match self.state {
            // A connection taken by Fast Open is the application's already: reset, as Linux says.
            State::SynReceived if self.fast_open => io::ErrorKind::ConnectionReset,
            State::SynReceived => {
                cx.counters.attempt_fails += 1;
                io::ErrorKind::ConnectionRefused
            }
            State::Established | State::CloseWait => {
                cx.counters.estab_resets += 1;
                io::ErrorKind::ConnectionReset
            }
            State::TimeWait => {
                // RFC 1337: ignore RSTs in TIME-WAIT (TIME-WAIT assassination).
                return Verdict::Continue;
            }
            _ => io::ErrorKind::ConnectionReset,
        };
        self.abort(kind, cx);
        Verdict::Remove
    }

    /// The duplicate ACK owed for an unacceptable segment (RFC 9293 §3.10.7.4), at most one per
    /// `invalid_ack_interval` for segments without data or FIN: an ACK answered by an ACK must not
    /// loop (Linux's `tcp_oow_rate_limited`). Data segments, a zero-window probe among them, are
    /// always answered.
    pub(super) fn invalid_ack(&mut self, seg: &TcpRepr, seg_len: u32, cx: &mut Cx) {
        let carries = seg_len > 0 || seg.flags.contains(Flags::FIN);
        if !carries {
            if let Some(last) = self.last_invalid_ack {
                if cx.now < last + cx.cfg.invalid_ack_interval {
                    cx.counters.invalid_acks_skipped += 1;
                    return;
                }
            }
            self.last_invalid_ack = Some(cx.now);
        }
        self.ack_now = true;
    }

    /// A challenge ACK (RFC 5961 §7), rate-limited per connection.
    pub(super) fn challenge_ack(&mut self, cx: &mut Cx) {
        let second = cx.now.total_micros() / 1_000_000;
        if self.challenge_window.0 != second {
            self.challenge_window = (second, 0);
        }
        if self.challenge_window.1 < cx.cfg.challenge_acks_per_sec {
            self.challenge_window.1 += 1;
            self.ack_now = true;
            cx.counters.challenge_acks += 1;
        }
    }

    pub(super) fn on_segment_syn_sent(&mut self, seg: &TcpRepr, cx: &mut Cx) -> Verdict {
        let flags = seg.flags;
        let ack = Seq(seg.ack);
        if flags.contains(Flags::ACK) && (ack <= self.iss || ack > self.snd_max) {
            if flags.contains(Flags::RST) {
                cx.drops.add(DropReason::TcpUnexpected);
                return Verdict::Continue;
            }
            cx.drops.add(DropReason::TcpBadAck);
            return Verdict::Reset {
                seq: seg.ack,
                ack: None,
            };
        }
        if flags.contains(Flags::RST) {
            if flags.contains(Flags::ACK) {
                cx.counters.attempt_fails += 1;
                self.abort(io::ErrorKind::ConnectionRefused, cx);
                return Verdict::Remove;
            }
            cx.drops.add(DropReason::TcpUnexpected);
            return Verdict::Continue;
        }
        if !flags.contains(Flags::SYN) {
            cx.drops.add(DropReason::TcpUnexpected);
            return Verdict::Continue;
        }
        if flags.contains(Flags::ACK) && !self.echo_plausible(seg, cx) {
            // A SYN-ACK echoing a timestamp our SYNs never carried is not an answer to them
            // (Linux's `tcp_rcv_synsent_state_process`): reset, and wait for the real one.
            cx.drops.add(DropReason::TcpBadEcho);
            return Verdict::Reset {
                seq: seg.ack,
                ack: None,
            };
        }
        self.take_syn(seg, cx.cfg);
        self.ack_now = true;
        // ECN is on when asked for and the SYN-ACK agrees: ECE without CWR (RFC 3168 §6.1.1; a
        // simultaneous open's SYN asks as ours did).
        let (ece, cwr) = (
            seg.flags.contains(Flags::ECE),
            seg.flags.contains(Flags::CWR),
        );
        self.ecn_on &= ece && cwr != seg.flags.contains(Flags::ACK);
        self.no_checksum =
            self.alt_requested && seg.options.alt_checksum == Some(ALT_CHECKSUM_NONE);
        if flags.contains(Flags::ACK) {
            // The SYN's data, if any, as far as acknowledged, leaves the send buffer; the rest is
            // sent again at once (Linux's `tcp_rcv_fastopen_synack`).
            let acked = (ack - self.tx_seq).min(self.tx.len() as u32);
            self.tx.consume(acked as usize);
            self.tx_seq = self.tx_seq + acked;
            let tried_fast_open = self.syn_fast_open.is_some() || self.syn_data > 0;
            self.fast_open = self.syn_data > 0 && acked == self.syn_data;
            if self.syn_data > acked && self.records.has_room() {
                // What the SYN carried and the SYN-ACK did not acknowledge goes again as it went,
                // in a segment of its own (Linux resends the SYN's data buffer as it is).
                self.records.push(self.tx_seq + (self.syn_data - acked));
            }
            self.snd_una = ack;
            self.writes_acked(ack, cx.now);
            self.snd_nxt = ack;
            if self.syn_data > acked && self.rack_on(cx.cfg) {
                // RACK's record of the SYN's data left unacknowledged (SACK is known to be on
                // only now), so that sending it again is a retransmission that RACK can find
                // lost, as Linux's keeps the SYN's data in its retransmission queue.
                self.sent_log.sent(ack, self.snd_max, cx.now, self.mss);
            }
            self.state = State::Established;
            self.activity.delivered += 1;
            // The window of a SYN is never scaled (RFC 7323 §2.2).
            self.snd_wnd = seg.window as u32;
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = Seq(seg.seq);
            self.snd_wl2 = ack;
            self.timers.clear(Timer::Retransmit);
            self.retries = 0;
            self.retry_since = None;
            if let Some((_, ecr)) = seg.options.timestamps.filter(|_| self.ts_on) {
                self.rtt_from_echo(ecr, cx);
            } else if let Some((_, sent)) = self.rtt_probe.take() {
                let rtt = cx.now.saturating_since(sent);
                let ms = (rtt.as_millis() as u64).max(1);
                self.rtt_sample(ms * 1000, ms * 1000, cx);
            }
            if std::mem::take(&mut self.write_pending) {
                // A writer waits (Linux's `sk_write_pending`): the ACK rides on its data, a
                // delayed ACK should it not come; quick-ACK mode with the delayed-ACK clock started,
                // so that answering at once makes the connection interactive.
                self.ack_now = false;
                if let Some(delay) = cx.cfg.delayed_ack {
                    self.timers.arm_once(Timer::DelayedAck, cx.now + delay);
                } else {
                    self.ack_now = true;
                }
                self.last_data_in = Some(cx.now);
                self.quick_acks = QUICK_ACKS as u8;
            }
            if tried_fast_open {
                // A cookie is taken only when our SYN carried the option (a request or a cookie):
                // one a server sends unasked, to data sent without a cookie, is ignored (Linux's
                // `tcp_rcv_fastopen_synack`). The server's MSS is learned either way.
                let asked = self.syn_fast_open.is_some();
                if asked
                    && seg.options.fast_open.is_none()
                    && self.syn_data == 0
                    && self.retransmits == 0
                {
                    // The request went unanswered: a server (or a middlebox) that knows only
                    // the other format may answer it (Linux's `tcp_rcv_fastopen_synack`).
                    let exp = self.syn_fast_open.is_some_and(|o| o.experimental);
                    self.fast_open_try_exp = if exp { 2 } else { 1 };
                }
                self.syn_fast_open = seg
                    .options
                    .fast_open
                    .filter(|o| asked && !o.cookie().is_empty());
                return Verdict::FastOpenLearned;
            }
            Verdict::Continue
        } else {
            // Simultaneous open (RFC 9293 §3.5): SYN-RECEIVED, send a SYN-ACK. It is our SYN
            // again with ACK set: without a Fast Open option (Linux's request ended with the
            // call that sent the SYN) and without the SYN's data.
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.syn_fast_open = None;
            self.simultaneous_open = true;
            Verdict::Continue
        }
    }
}
