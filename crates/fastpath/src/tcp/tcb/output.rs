//! What to send next: the SYN, data and FIN the windows allow, probes and ACKs, and the header
//! fields every segment carries.

use super::*;

impl<A: crate::addr::IpAddress> Tcb<A> {
    /// The window field for an outgoing segment, with receiver-side silly window avoidance (RFC 9293
    /// §3.8.6.2.2): the right edge moves only by at least min(half the buffer, one MSS), and never
    /// back.
    pub(super) fn window_field(&mut self) -> u16 {
        let current = if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        };
        let free = self.advertisable();
        let step = ((self.rx_capacity / 2) as u32).min(self.mss);
        if free >= current + step || (free > current && free == self.rx_capacity as u32) {
            self.rcv_adv = self.rcv_nxt + free;
        }
        let window = if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        };
        // Round up to the scale's unit, and remember the edge as sent: the peer may fill what the
        // field says, so `rcv_adv` must be that edge, never less (else the window would shrink).
        let unit = (1u32 << self.rcv_shift) - 1;
        let field = ((window + unit) >> self.rcv_shift).min(65535);
        self.rcv_adv = self.rcv_adv.max(self.rcv_nxt + (field << self.rcv_shift));
        field as u16
    }

    /// Payload bytes the next data segment may carry: the MSS less the room SACK blocks will take
    /// when the out-of-order queue is not empty or a D-SACK is owed (the options must not push a
    /// segment past the MTU).
    pub(super) fn segment_limit(&self) -> u32 {
        if self.sack_on && (!self.ooo.is_empty() || self.dsack.is_some()) {
            let blocks = if self.ts_on {
                3
            } else {
                MAX_SACK_BLOCKS as u32
            };
            self.mss
                .saturating_sub(4 + 8 * blocks)
                .max(u32::from(MIN_MSS) / 2)
        } else {
            self.mss
        }
    }

    /// True when [`Tcb::next_segment`] would send nothing and change nothing: a synchronized
    /// connection with no ACK or probe owed, not in loss recovery nor sending again after a
    /// timeout, and with no data or FIN waiting. It is the common case after an input, a read or
    /// the last segment sent (a request/response exchange asked for output six times a transaction
    /// to send two segments), and spares `Tcp::output` the general walk. Conservative: false means
    /// "look".
    #[inline]
    pub(crate) fn owes_nothing(&self) -> bool {
        // Unsent data first: when something is owed, it is usually that (a write).
        self.tx.len() == (self.snd_nxt - self.tx_seq) as usize
            && self.state.sends_data()
            && !self.ack_now
            && self.probe.is_none()
            && self.recover.is_none()
            && !self.rack.probe_due
            && self.sent_log.lost_bytes() == 0
            && self.snd_nxt == self.snd_max
            && !self.fin_queued
    }

    /// The next segment to send, if any, and the block's state updated as if it was sent. `tso_max`
    /// is the largest payload the link will cut into MSS-sized segments, when it can.
    pub(crate) fn next_segment(&mut self, cx: &mut Cx, tso_max: Option<usize>) -> Option<Outgoing> {
        let flight_was_empty = self.snd_max == self.snd_una;
        // Returned as it came (not unwrapped and wrapped again: a copy of the segment less).
        let out = self.next_segment_uncounted(cx, tso_max);
        if let Some(segment) = &out {
            self.note_departure(segment, flight_was_empty, cx.now);
        }
        out
    }

    /// The burst of segments [`Tcb::next_segment`] gave ends: if it carried new data, the
    /// retransmission timer runs (from now, unless it runs already) or the tail loss probe takes
    /// its place, once for the burst. As Linux arms the probe once after `tcp_write_xmit`'s loop
    /// (`tcp_schedule_loss_probe`), and as RFC 6298 §5.1 starts the retransmission timer only
    /// if it is not running: the burst's later segments do not push the deadline back.
    #[inline]
    pub(crate) fn burst_sent(&mut self, cfg: &TcpConfig, now: Instant) {
        if std::mem::take(&mut self.new_data_sent) {
            self.arm_after_new_data(cfg, now);
        }
    }

    fn next_segment_uncounted(&mut self, cx: &mut Cx, tso_max: Option<usize>) -> Option<Outgoing> {
        let now = cx.now;
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.snd_nxt == self.iss => {
                // A held SYN is answered only once the application confirms it.
                return (!self.held).then(|| self.syn_segment(cx));
            }
            _ => {}
        }
        if let Some(out) = self.data_segment(cx, tso_max) {
            return Some(out);
        }
        if let Some(probe) = self.probe.take() {
            return Some(self.probe_segment(probe, now, cx.cfg));
        }
        if self.ack_now && self.state != State::SynSent {
            let repr = self.header(Flags::ACK, self.snd_nxt);
            return Some(self.finish(repr, 0, 0, None));
        }
        // Nothing to send, yet data waits with nothing in flight: the peer's window is closed (or too
        // small for silly window avoidance to send into). The persist timer probes a closed window
        // (RFC 9293 §3.8.6.1) and is the override timeout for a small one (RFC 1122 §4.2.3.4).
        if self.snd_nxt == self.snd_una
            && !self.timers.is_set(Timer::Retransmit)
            && (self.tx.len() > (self.snd_nxt - self.tx_seq) as usize)
            && !self.timers.is_set(Timer::Persist)
            && self.state.is_synchronized()
        {
            // Doubling up to the longest RTO, as Linux's `tcp_probe0_when`.
            let backoff = Duration::from_nanos(self.rto) * (1 << self.persist_backoff.min(16));
            self.timers.set(
                Timer::Persist,
                now + backoff.clamp(cx.cfg.min_rto, cx.cfg.max_rto),
            );
        }
        None
    }

    pub(super) fn syn_segment(&mut self, cx: &mut Cx) -> Outgoing {
        let cfg = cx.cfg;
        let passive = self.state == State::SynReceived;
        let flags = if passive {
            Flags::SYN | Flags::ACK
        } else {
            Flags::SYN
        };
        // ECN (RFC 3168 §6.1.1): our first SYN asks with ECE and CWR, a SYN-ACK agrees with ECE.
        // A retransmitted SYN goes without, and ECN with it, in case a middlebox dropped the
        // first for its flags (Linux's `tcp_ecn_clear_syn`).
        let first_syn = self.snd_max == self.iss;
        if !passive && !first_syn {
            self.ecn_on = false;
        }
        let flags = match (self.ecn_on, passive) {
            (true, true) => flags | Flags::ECE,
            (true, false) => flags | Flags::ECE | Flags::CWR,
            (false, _) => flags,
        };
        let mut repr = self.header(flags, self.iss);
        // Offer what we do; answer only what the peer offered (RFC 7323 §2.2, RFC 2018 §2).
        let mut o = TcpOptions {
            mss: Some(self.local_mss),
            ..TcpOptions::default()
        };
        if cfg.window_scaling && (!passive || self.ws_on) {
            o.window_scale = Some(self.rcv_shift);
        }
        if cfg.sack && (!passive || self.sack_on) {
            o.sack_permitted = true;
        }
        if cfg.timestamps && (!passive || self.ts_on) {
            o.timestamps = Some((
                ts_clock(cx.now).wrapping_add(self.ts_offset),
                self.ts_recent,
            ));
        }
        if self.alt_requested {
            o.alt_checksum = Some(ALT_CHECKSUM_NONE);
        }
        // The first SYN (or the SYN-ACK) carries the Fast Open option and the SYN's data; a
        // retransmitted SYN is a plain one, as Linux sends it, in case a middlebox dropped the first
        // for its option or data.
        let first = first_syn;
        if passive || first {
            o.fast_open = self.syn_fast_open;
        }
        let data = if passive || !first { 0 } else { self.syn_data };
        // The window in a SYN is never scaled (RFC 7323 §2.2).
        repr.window = self.rx_free().min(65535) as u16;
        repr.options = o;
        if passive {
            // The SYN-ACK acknowledges the SYN: the handshake's ACK, and the segments after it, are
            // then at Last.ACK.sent, and their timestamps are taken (RFC 7323 §4.3).
            self.last_ack_sent = self.rcv_nxt;
        }

        if self.snd_max == self.iss {
            self.rtt_probe = Some((self.iss, cx.now));
        } else {
            cx.counters.retrans_segs += 1;
            self.retransmits += 1;
        }
        self.snd_nxt = self.iss + 1 + data;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.timers
            .arm_once(Timer::Retransmit, self.rto_from(cx.now));
        self.ack_now = false;
        Outgoing {
            repr,
            offset: 0,
            len: data as usize,
            segment_size: None,
            ecn: 0,
        }
    }

    /// Data (and FIN) the windows allow, with Nagle and sender silly window avoidance; in recovery,
    /// a retransmission first.
    pub(super) fn data_segment(&mut self, cx: &mut Cx, tso_max: Option<usize>) -> Option<Outgoing> {
        // A Fast Open connection sends once its SYN-ACK is out, before the handshake's end (RFC
        // 7413 §4.2.2, as Linux does).
        let fast_open =
            self.fast_open && self.state == State::SynReceived && self.snd_nxt != self.iss;
        if !self.state.sends_data() && !fast_open {
            return None;
        }
        let now = cx.now;
        let mut wnd = self.snd_wnd.min(self.cc.cwnd);

        // The tail loss probe (RFC 8985 §7.3): a segment of new data if the peer's window takes
        // it, whatever the congestion window; else the last segment again.
        let probing = std::mem::take(&mut self.rack.probe_due);
        if probing {
            let unsent = (self.tx_seq + self.tx.len() as u32).diff(self.snd_nxt);
            let room = (self.snd_una + self.snd_wnd).diff(self.snd_nxt);
            let new_data = self.snd_nxt == self.snd_max
                && unsent > 0
                && room >= unsent.min(self.segment_limit() as i32);
            if new_data {
                wnd = self.snd_wnd;
            } else if let Some(last) = self.sent_log.last() {
                // Its last segment's worth, as the segment is now (SACK blocks may have taken
                // room since it went), as Linux cuts the tail to one MSS.
                let limit = self.segment_limit();
                let start = if last.end - last.start > limit {
                    last.end - limit
                } else {
                    last.start
                };
                if let Some(out) = self.resend(start, (last.end - start) as usize, cx) {
                    self.probe_sent(true, cx);
                    return Some(out);
                }
            }
        }

        // RACK: resend what it marked lost, first the lowest, while the pipe has room (the first
        // retransmission of a recovery whatever the pipe).
        if !self.sent_log.is_empty() && self.sent_log.lost_bytes() > 0 {
            if let Some(lost) = self.sent_log.first_lost() {
                if self.pipe() < self.cc.cwnd || self.prr.out == 0 {
                    let len = (lost.end - lost.start).min(self.segment_limit()) as usize;
                    if let Some(out) = self.resend(lost.start, len, cx) {
                        return Some(out);
                    }
                }
            }
        }

        // Loss recovery: resend the next hole while the pipe has room (RFC 6675 §5, RFC 6582).
        if self.recover.is_some()
            && self.rexmit_next < self.rexmit_limit
            && self.sent_log.is_empty()
        {
            let start = match self.scoreboard.skip(self.rexmit_next) {
                Some(end) => end,
                None => self.rexmit_next,
            };
            let first = self.pipe() == 0 || self.rexmit_next == self.snd_una;
            if start < self.rexmit_limit
                && start < self.snd_max
                && (first || self.pipe() < self.cc.cwnd)
            {
                let hole_end = self
                    .scoreboard
                    .next_after(start)
                    .unwrap_or(self.snd_max)
                    .min(self.rexmit_limit)
                    .min(self.snd_max);
                let len = (hole_end - start).min(self.segment_limit());
                let len = self.record_clip(start, len) as usize;
                let data_end = self.tx_seq + self.tx.len() as u32;
                self.rexmit_next =
                    start + len.min((data_end - start.min(data_end)) as usize).max(1) as u32;
                if let Some(out) = self.resend(start, len, cx) {
                    return Some(out);
                }
            } else {
                self.rexmit_next = self.rexmit_limit;
            }
        }

        // Skip what the receiver already SACKed (after a timeout sent us back).
        if self.snd_nxt < self.snd_max {
            while let Some(end) = self.scoreboard.skip(self.snd_nxt) {
                self.snd_nxt = end.min(self.snd_max);
            }
        }
        let offset = (self.snd_nxt - self.tx_seq) as usize;
        let available = self.tx.len().saturating_sub(offset);
        if available == 0 && !self.fin_queued {
            // Nothing to send (the common answer after the last segment went): no window to work out.
            return None;
        }
        // The restart comes as data can go: a closed peer window's probes do not restart it. A
        // window at the initial one has nothing to restart.
        if self.snd_una == self.snd_max
            && self.cc.cwnd > self.cc.initial
            && cx.cfg.restart_after_idle
            && !probing
            && self.snd_wnd > 0
        {
            self.restart_if_idle(now);
            wnd = self.snd_wnd.min(self.cc.cwnd);
        }
        let usable = if self.recover.is_some() {
            self.cc
                .cwnd
                .saturating_sub(self.pipe())
                .min((self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as u32)
        } else if cx.cfg.limited_transmit
            && (self.dupacks > 0 || !self.scoreboard.ranges.is_empty())
        {
            // Limited transmit (RFC 3042): what the peer holds out of order has left the network.
            let left = if self.sack_on {
                self.scoreboard.sacked_bytes()
            } else {
                self.dupacks * self.mss
            };
            let in_flight = (self.snd_nxt - self.snd_una).saturating_sub(left);
            self.cc
                .cwnd
                .saturating_sub(in_flight)
                .min((self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as u32)
        } else {
            (self.snd_una + wnd).diff(self.snd_nxt).max(0) as u32
        };
        let limit = self.segment_limit();
        let max_seg = match tso_max {
            _ if probing => limit,
            Some(m) if cx.cfg.segmentation_offload => (m as u32 / limit).max(1) * limit,
            _ => limit,
        };
        let mut len = (available as u32).min(usable).min(max_seg);
        // No segment crosses a record's end (`MSG_EOR`); one that ends at one goes as a full one
        // would (Linux never adds to a record's buffer, and sends a buffer that is not the last).
        let mut record_ends = false;
        if !self.records.is_empty() {
            len = self.records.clip(self.snd_nxt, len);
            record_ends = (len as usize) < available && self.records.ends_at(self.snd_nxt + len);
        }
        // Cork and `MSG_MORE`: the partial segment at the end waits; full ones before it go.
        if len > limit && len as usize == available && !record_ends && self.holds_partial() {
            len -= len % limit;
        }
        let len = len as usize;
        let all = len == available;
        let fin = self.fin_queued && all && self.snd_nxt + len as u32 == self.fin_seq();
        if len == 0 && !fin {
            self.note_window_limit(available, usable, now);
            if cx.cfg.cwnd_validation {
                self.note_usage(limit);
            }
            return None;
        }
        // Sender-side silly window avoidance and Nagle (RFC 9293 §3.8.6.2.1, RFC 1122 §4.2.3.4).
        let retransmitting = self.snd_nxt < self.snd_max;
        let full = len as u32 >= limit;
        // Nagle lets a partial segment go when nothing is in flight (a SYN-ACK still
        // unacknowledged is not: a Fast Open connection answers at once) or, with Minshall's
        // change, no partial segment is.
        let nothing_out = self.snd_una.max(self.tx_seq) == self.snd_nxt
            || (cx.cfg.minshall_nagle && !self.partial_in_flight());
        let send = full
            || fin
            || probing
            || retransmitting
            || record_ends
            || (!self.holds_partial()
                && ((all && (self.nodelay || nothing_out))
                    || (self.max_snd_wnd > 0 && len as u32 >= self.max_snd_wnd / 2)));
        if !send {
            self.note_window_limit(available, usable, now);
            if cx.cfg.cwnd_validation {
                self.note_usage(limit);
            }
            return None;
        }
        if self.chronos.kind == Chrono::RwndLimited {
            self.chrono_stop(Chrono::RwndLimited, now);
        }
        let seq = self.snd_nxt;
        let mut flags = Flags::ACK;
        if fin {
            flags = flags | Flags::FIN;
        }
        if cx.cfg.linux_push {
            // A TSO packet of several segments carries PSH (the link's segmentation leaves it on
            // the last segment, as Linux's packets have it).
            let push = if tso_max.is_some() && cx.cfg.segmentation_offload {
                len as u32 > limit || self.push_mark_in(seq, len)
            } else {
                let min_segs = cx.cfg.min_tso_segments;
                self.linux_push((seq, len), limit, available, usable, min_segs)
            };
            if push || record_ends {
                flags = flags | Flags::PSH;
            }
        } else if len > 0 && all {
            flags = flags | Flags::PSH;
        }
        if retransmitting {
            cx.counters.retrans_segs += 1;
            self.retransmits += 1;
            self.activity.bytes_retransmitted += len as u64;
        } else {
            if self.rtt_probe.is_none() && !self.ts_on {
                self.rtt_probe = Some((seq, now));
            }
            // An answer within the delayed-ACK time of the data it answers: interactive (not
            // before any data has arrived, as Linux's `ato` is 0 until then).
            if !self.pingpong && len > 0 {
                if let (Some(at), Some(delay)) = (self.last_data_in, cx.cfg.delayed_ack) {
                    self.pingpong = at + delay > now;
                }
            }
        }
        // ECN: new data is ECN-capable; the first after a reduction says so (RFC 3168 §6.1.2).
        let mut ecn = 0;
        if self.ecn_on && len > 0 && !retransmitting {
            ecn = ECN_ECT0;
            if std::mem::take(&mut self.cwr_owed) {
                flags = flags | Flags::CWR;
            }
        }
        let repr = self.header(flags, seq);
        let end = seq + len as u32 + fin as u32;
        let rack_on = self.rack_on(cx.cfg);
        if rack_on {
            // RACK's record: a retransmission after a timeout, new data, or part of each.
            let old_end = end.min(self.snd_max);
            if seq < old_end {
                self.sent_log.resent(seq, old_end, now);
            }
            if end > self.snd_max {
                self.sent_log.sent(seq.max(self.snd_max), end, now, limit);
            }
        }
        if self.recover.is_some() {
            self.prr.out += len as u32;
        }
        self.snd_nxt = end;
        if end > self.snd_max {
            self.snd_max = end;
            if !(len as u32).is_multiple_of(limit) {
                self.snd_sml = end;
            }
            if self.tx_stamps.awaiting() {
                self.tx_stamps.sent(end, now);
            }
        }
        if cx.cfg.cwnd_validation {
            self.note_usage(limit);
        }
        if probing {
            self.timers.arm_once(Timer::Retransmit, self.rto_from(now));
            self.probe_sent(false, cx);
        } else if !retransmitting {
            // Armed once the burst ends (`burst_sent`), not for each of its segments.
            self.new_data_sent = true;
        } else {
            self.timers.arm_once(Timer::Retransmit, self.rto_from(now));
        }
        let segment_size = (len as u32 > limit).then_some(limit as u16);
        Some(self.finish_with(repr, offset, len, segment_size, ecn))
    }

    /// New data is to go with nothing in flight: after more than an RTO since data last went, the
    /// congestion window restarts ([`TcpConfig::restart_after_idle`]).
    fn restart_if_idle(&mut self, now: Instant) {
        let Some(last) = self.activity.last_data_sent else {
            return;
        };
        let idle = now.total_micros().saturating_sub(last.total_micros());
        let rto = self.rto / 1000;
        if idle > rto {
            self.cc.restart_after_idle(idle, rto);
        }
    }

    /// How fully the congestion window is used after a transmission, or after one it held back
    /// (Linux's `tcp_cwnd_validate`: the window is full when what is in flight reaches it, in
    /// segments as Linux counts: when less than a full segment's room is left). `limit` is
    /// [`Tcb::segment_limit`], which the caller has at hand.
    fn note_usage(&mut self, limit: u32) {
        let out = self.snd_nxt - self.snd_una;
        let limited = out.saturating_add(limit) > self.cc.cwnd;
        self.cc
            .note_usage(self.snd_una.0, self.snd_nxt.0, out, limited);
    }

    /// Sends `[start, start + len)` again (with the FIN if it ends there), for loss recovery or a
    /// tail loss probe; None when nothing of it is left to send.
    fn resend(&mut self, start: Seq, len: usize, cx: &mut Cx) -> Option<Outgoing> {
        let data_end = self.tx_seq + self.tx.len() as u32;
        let len = len.min((data_end - start.min(data_end)) as usize);
        let len = self.record_clip(start, len as u32) as usize;
        let fin = self.fin_queued && start + len as u32 == self.fin_seq();
        if len == 0 && !fin {
            return None;
        }
        cx.counters.retrans_segs += 1;
        self.retransmits += 1;
        self.activity.bytes_retransmitted += len as u64;
        let mut flags = Flags::ACK;
        if fin {
            flags = flags | Flags::FIN;
        }
        if cx.cfg.linux_push && (self.push_mark_in(start, len) || self.ends_record(start, len)) {
            flags = flags | Flags::PSH;
        }
        if !self.sent_log.is_empty() {
            self.sent_log
                .resent(start, start + len as u32 + fin as u32, cx.now);
        }
        self.prr.out += len as u32;
        let repr = self.header(flags, start);
        let offset = (start - self.tx_seq) as usize;
        Some(self.finish(repr, offset, len, None))
    }

    /// A tail loss probe went: its end is remembered for its ACK, and the retransmission timer
    /// starts again from now (Linux's `tcp_send_loss_probe`).
    fn probe_sent(&mut self, retransmitted: bool, cx: &mut Cx) {
        cx.counters.loss_probes += 1;
        self.rack.probe_high = Some((self.snd_max, retransmitted));
        self.timers.set(Timer::Retransmit, self.rto_from(cx.now));
    }

    /// Data waits and nothing goes: when the peer's window (not the congestion window) is what
    /// holds the next segment back, the time counts as receive-window limited.
    #[cold]
    fn note_window_limit(&mut self, available: usize, usable: u32, now: Instant) {
        let wanted = (available as u32).min(self.segment_limit());
        if usable < wanted && self.snd_wnd <= self.cc.cwnd {
            self.chrono_start(Chrono::RwndLimited, now);
        }
    }

    /// Whether a data segment of `len` bytes from `seq` carries PSH under Linux's rule (see
    /// [`TcpConfig::linux_push`]), when it is not a TSO packet of its own: the segment belongs to a
    /// unit, the packet Linux's `tcp_write_xmit` would send, sized here from the congestion window,
    /// the flight and the pacing rate, out of `available` bytes and a window of `usable`. The last
    /// segment of a unit of several carries PSH (GSO leaves Linux's on the last); otherwise a
    /// segment does when a write ended in it.
    fn linux_push(
        &mut self,
        (seq, len): (Seq, usize),
        mss: u32,
        available: usize,
        usable: u32,
        min_segs: u32,
    ) -> bool {
        if len == 0 {
            return false;
        }
        if available <= mss as usize {
            // All there is fits one segment: a unit of one (the request/response case, without the
            // arithmetic of the packet's size).
            self.unit = (seq, seq + len as u32);
            return self.push_mark_in(seq, len);
        }
        let (start, end) = self.unit;
        if seq < start || seq >= end {
            let retransmitting = seq < self.snd_max;
            let bytes = self.unit_bytes(mss, available, usable, retransmitting, min_segs);
            self.unit = (seq, seq + bytes);
        }
        let (start, end) = self.unit;
        (seq + len as u32 == end && end - start > mss) || self.push_mark_in(seq, len)
    }

    /// Whether a record ends where `len` bytes from `seq` end (its buffer carries PSH in Linux).
    fn ends_record(&self, seq: Seq, len: usize) -> bool {
        !self.records.is_empty() && self.records.ends_at(seq + len as u32)
    }

    /// Whether a write ended within `(seq, seq + len]`.
    fn push_mark_in(&self, seq: Seq, len: usize) -> bool {
        self.push_marks.any_in(seq, len as u32)
    }

    /// The bytes of the packet Linux would send next (`tcp_write_xmit`): as many segments as the
    /// congestion window leaves, but no more than half the window at once (`tcp_cwnd_test`) nor
    /// than the pacing rate allows per millisecond (`tcp_tso_autosize`), within the window and the
    /// data; a last partial segment that Nagle or silly window avoidance will hold is left out (as
    /// `tcp_mss_split_point` leaves it).
    fn unit_bytes(
        &self,
        mss: u32,
        available: usize,
        usable: u32,
        retransmitting: bool,
        min_segs: u32,
    ) -> u32 {
        let cwnd = (self.cc.cwnd / mss).max(1);
        let flight = self.pipe().div_ceil(mss);
        let quota = (cwnd / 2)
            .max(1)
            .min(cwnd.saturating_sub(flight).max(1))
            .min(self.autosize_segments(mss, min_segs));
        let bytes = (quota * mss).min(usable).min(available as u32);
        let partial = bytes % mss;
        let held = !(retransmitting || self.nodelay && bytes as usize == available)
            && (self.max_snd_wnd == 0 || partial < self.max_snd_wnd / 2);
        if bytes > mss && partial != 0 && held {
            bytes - partial
        } else {
            bytes
        }
    }

    /// Segments per packet at the pacing rate (Linux's `tcp_tso_autosize` over the rate
    /// `tcp_update_pacing_rate` sets): what the rate sends in about a millisecond (1/1024 s), plus
    /// up to 64 KiB on a path whose least RTT is below a few milliseconds, at most 64 KiB, and at
    /// least `min_segs` segments. The rate is the window per smoothed RTT, doubled in slow start
    /// (below half ssthresh), 1.2 times after.
    fn autosize_segments(&self, mss: u32, min_segs: u32) -> u32 {
        const GSO_MAX: u64 = 65536;
        let Some(srtt) = self.srtt else {
            return ((GSO_MAX / u64::from(mss)) as u32).max(min_segs);
        };
        let percent: u64 = if self.cc.cwnd < self.cc.ssthresh / 2 {
            200
        } else {
            120
        };
        let window = u64::from(self.cc.cwnd.max(self.snd_nxt - self.snd_una));
        let micros = (srtt / 1000).max(1);
        let rate = window * percent * 10_000 / micros;
        let mut bytes = rate >> 10;
        if let Some(min_rtt) = self.min_rtt() {
            let shift = min_rtt.as_micros() as u64 >> 9;
            if shift < 32 {
                bytes += GSO_MAX >> shift;
            }
        }
        ((bytes.min(GSO_MAX) / u64::from(mss)) as u32).max(min_segs)
    }

    pub(super) fn probe_segment(
        &mut self,
        probe: Probe,
        now: Instant,
        cfg: &TcpConfig,
    ) -> Outgoing {
        let linux_push = cfg.linux_push;
        match probe {
            Probe::Window => {
                // What the window takes, or one byte past a closed window (RFC 9293 §3.8.6.1).
                let offset = (self.snd_nxt - self.tx_seq) as usize;
                let available = self.tx.len().saturating_sub(offset);
                let usable = (self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as usize;
                if usable == 0 && cfg.window_probe_without_data {
                    // Linux's probe of a closed window: an old sequence number, no data.
                    let repr = self.header(Flags::ACK, self.snd_una - 1);
                    return self.finish(repr, 0, 0, None);
                }
                let len = available
                    .min(usable.max(1))
                    .min(self.segment_limit() as usize);
                let len = self.record_clip(self.snd_nxt, len as u32) as usize;
                if len > 0 {
                    self.snd_nxt = self.snd_nxt + len as u32;
                    self.snd_max = self.snd_max.max(self.snd_nxt);
                    if self.tx_stamps.awaiting() {
                        self.tx_stamps.sent(self.snd_nxt, now);
                    }
                    self.timers.arm_once(Timer::Retransmit, self.rto_from(now));
                    // Linux's probe of a small open window (`tcp_write_wakeup`), cut from a larger
                    // buffer, carries PSH; the byte past a closed window is the stack's own (Linux
                    // probes a closed window with no data): PSH if a write ended there.
                    let mut flags = Flags::ACK;
                    let seq = self.snd_nxt - len as u32;
                    if linux_push && (usable > 0 || self.push_mark_in(seq, len)) {
                        flags = flags | Flags::PSH;
                    }
                    let repr = self.header(flags, seq);
                    self.timers.clear(Timer::Persist);
                    return self.finish(repr, offset, len, None);
                }
                let repr = self.header(Flags::ACK, self.snd_nxt);
                self.finish(repr, offset, 0, None)
            }
            Probe::KeepAlive => {
                // An old sequence number draws an ACK (RFC 1122 §4.2.3.6).
                let repr = self.header(Flags::ACK, self.snd_una - 1);
                self.finish(repr, 0, 0, None)
            }
        }
    }

    /// A header with the ACK fields, window and timestamps filled in.
    pub(super) fn header(&mut self, flags: Flags, seq: Seq) -> TcpRepr {
        let mut repr = TcpRepr {
            src_port: A::port(&self.local),
            dst_port: A::port(&self.remote),
            seq: seq.0,
            ack: 0,
            flags,
            window: 0,
            urgent: 0,
            options: TcpOptions::default(),
        };
        if flags.contains(Flags::ACK) {
            repr.ack = self.rcv_nxt.0;
            repr.window = self.window_field();
        }
        repr
    }

    /// Adds timestamps and SACK blocks, and records that an ACK went out.
    #[inline]
    pub(super) fn finish(
        &mut self,
        repr: TcpRepr,
        offset: usize,
        len: usize,
        segment_size: Option<u16>,
    ) -> Outgoing {
        self.finish_with(repr, offset, len, segment_size, 0)
    }

    /// [`finish`](Self::finish), the IP header's ECN field `ecn`.
    pub(super) fn finish_with(
        &mut self,
        mut repr: TcpRepr,
        offset: usize,
        len: usize,
        segment_size: Option<u16>,
        ecn: u8,
    ) -> Outgoing {
        if repr.flags.contains(Flags::ACK) {
            // The clock is read by the stack: `ts_val` is filled in by `stamp`.
            if self.ts_on {
                repr.options.timestamps = Some((0, self.ts_recent));
            }
            if self.sack_on && (!self.ooo.is_empty() || self.dsack.is_some()) {
                let max = if self.ts_on { 3 } else { MAX_SACK_BLOCKS };
                // A D-SACK first (RFC 2883 §4), once.
                let mut n = 0;
                if let Some((l, r)) = self.dsack.take() {
                    repr.options.sack[0] = (l.0, r.0);
                    n = 1;
                }
                n += self.ooo.sack_blocks(&mut repr.options.sack[n..], max - n);
                repr.options.sack_count = n as u8;
            }
            self.last_ack_sent = self.rcv_nxt;
            // An ACK of data that called for one spends a quick ACK (Linux's
            // `tcp_dec_quickack_mode`, since 6.6: one per ACK of new data, whatever it covers).
            if std::mem::take(&mut self.ack_scheduled) {
                self.quick_acks = self.quick_acks.saturating_sub(1);
            }
            self.ack_now = false;
            self.timers.clear(Timer::DelayedAck);
            self.unacked_segments = 0;
            // A congestion mark is echoed on every ACK until the peer's CWR (RFC 3168 §6.1.3).
            if self.ece_owed && !repr.flags.contains(Flags::SYN) {
                repr.flags = repr.flags | Flags::ECE;
            }
        }
        Outgoing {
            repr,
            offset,
            len,
            segment_size,
            ecn,
        }
    }

    /// Fills in our timestamp value, from the stack's clock.
    pub(crate) fn stamp(&self, repr: &mut TcpRepr, now: Instant) {
        if let Some((_, ecr)) = repr.options.timestamps {
            if !repr.flags.contains(Flags::SYN) {
                repr.options.timestamps = Some((ts_clock(now).wrapping_add(self.ts_offset), ecr));
            }
        }
    }
}
