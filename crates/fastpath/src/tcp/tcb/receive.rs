//! The text and the FIN of acceptable segments: the receive queue, out-of-order data, the peer's
//! FIN and TIME-WAIT.

use super::*;

impl<A: crate::addr::IpAddress> Tcb<A> {
    /// In-order data was queued: acknowledge at once every second full segment, else soon; in
    /// quick-ACK mode, at once.
    pub(super) fn data_arrived(&mut self, len: u32, cx: &mut Cx) {
        // A large segment (coalesced by the link) counts as the full-sized segments it holds.
        self.unacked_segments += (len / self.mss.max(1)).max(1);
        self.ack_scheduled |= len > 0;
        if cx.cfg.quick_ack && !self.pingpong {
            // Linux's quick-ACK mode (`tcp_event_data_recv`, `tcp_incr_quickack`): the first data
            // of a connection, and data after a silence longer than the RTO, start a run of ACKs
            // sent at once, one per segment, of up to 16 (or half the window in segments), so that
            // a sender in slow start (or restarting after idle) is not held back by the delayed-ACK
            // timer.
            // No data before (the first starts it), or a silence longer than the RTO.
            let idle = self.last_data_in.is_none_or(|at| {
                let idle_us = cx.now.total_micros().saturating_sub(at.total_micros());
                idle_us.saturating_mul(1000) > self.rto
            });
            if idle {
                let half_window = self.rx_capacity as u32 / (2 * self.mss.max(1));
                self.quick_acks = half_window.clamp(2, QUICK_ACKS) as u8;
            }
            self.last_data_in = Some(cx.now);
            if self.quick_acks > 0 && len > 0 {
                // Spent by the ACK that goes (`finish_with`), not by the segment: one ACK for a
                // flight that arrived in one poll is one quick ACK, as for Linux's GRO packet.
                self.ack_now = true;
                return;
            }
        }
        match cx.cfg.delayed_ack {
            Some(delay) if self.unacked_segments < 2 && len > 0 => {
                self.timers.arm_once(Timer::DelayedAck, cx.now + delay);
            }
            _ => self.ack_now = true,
        }
    }

    pub(super) fn after_fin_check(&mut self, verdict: Verdict, cx: &mut Cx) -> Verdict {
        if self.ooo_fin == Some(self.rcv_nxt) && self.ooo.is_empty() {
            self.ooo_fin = None;
            self.fin_arrived(cx);
        }
        verdict
    }

    /// Queues in-window data that starts at `start` (at or after `rcv_nxt`).
    pub(super) fn receive_text(
        &mut self,
        start: Seq,
        payload: PacketBuf,
        len: u32,
        fin: bool,
        cx: &mut Cx,
    ) {
        if self.rx.truesize > 2 * self.rx_capacity + 65536 {
            cx.drops.add(DropReason::TcpReceiveQueueFull);
            cx.pool.free(payload);
            self.ack_now = true;
            return;
        }
        if start == self.rcv_nxt {
            self.rcv_nxt = self.rcv_nxt + len;
            self.rx.push(payload, cx.pool);
            let had_holes = !self.ooo.is_empty();
            while let Some(buf) = self.ooo.pop_ready(self.rcv_nxt, cx.pool) {
                self.rcv_nxt = self.rcv_nxt + buf.len() as u32;
                self.rx.push(buf, cx.pool);
            }
            self.stamp_arrival(cx.now);
            if fin {
                self.fin_arrived(cx);
            } else if had_holes {
                // Filling a hole is acknowledged at once (RFC 5681 §4.2).
                self.ack_scheduled = true;
                self.ack_now = true;
                self.ack_immediately = true;
            } else {
                self.data_arrived(len, cx);
            }
        } else {
            if !self.ooo.insert(start, payload, cx.max_ooo, cx.pool) {
                if self.ooo.len() >= cx.max_ooo {
                    cx.drops.add(DropReason::TcpOutOfOrderFull);
                } else {
                    // Held already: a duplicate.
                    self.note_duplicate(start, start + len, cx);
                }
            }
            if fin {
                self.ooo_fin = Some(start + len);
            }
            // Out of order: a duplicate ACK at once, with SACK blocks (RFC 5681 §4.2), not
            // coalesced with the batch: the sender counts them for fast retransmit.
            self.ack_scheduled = true;
            self.ack_now = true;
            self.ack_immediately = true;
        }
    }

    /// Data we already had arrived again: the next ACK goes at once and reports `[left, right)` as
    /// its first SACK block, a D-SACK (RFC 2883), so that the sender learns its retransmission was
    /// needless (and the path reorders or duplicates).
    /// As Linux (`tcp_enter_quickack_mode` for a retransmission received), the ACKs after it go
    /// at once too, up to 16 segments: the sender is recovering a loss, and a delayed ACK would
    /// hold its clock back (and, under RACK, stretch the RTT it measures its reordering window by).
    pub(super) fn note_duplicate(&mut self, left: Seq, right: Seq, cx: &mut Cx) {
        if self.sack_on && cx.cfg.dsack && left < right {
            self.dsack = Some((left, right));
            cx.counters.dsacks_sent += 1;
        }
        if cx.cfg.quick_ack {
            let half_window = self.rx_capacity as u32 / (2 * self.mss.max(1));
            self.quick_acks = self.quick_acks.max(half_window.clamp(2, QUICK_ACKS) as u8);
            self.pingpong = false;
        }
        self.ack_scheduled = true;
        self.ack_now = true;
    }

    /// The data of a SYN taken by TCP Fast Open (RFC 7413 §4.2.2): in order, right after the SYN.
    pub(crate) fn take_syn_data(&mut self, payload: PacketBuf, cx: &mut Cx) {
        let len = payload.len() as u32;
        if len == 0 {
            cx.pool.free(payload);
            return;
        }
        self.syn_data = len;
        self.receive_text(self.rcv_nxt, payload, len, false, cx);
    }

    /// The peer's FIN, in order.
    pub(super) fn fin_arrived(&mut self, cx: &mut Cx) {
        if self.fin_received {
            self.ack_now = true;
            return;
        }
        self.fin_received = true;
        self.rcv_nxt = self.rcv_nxt + 1;
        self.ack_now = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.snd_una > self.fin_seq() {
                    self.enter_time_wait(cx);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(cx),
            _ => {}
        }
    }

    pub(super) fn enter_time_wait(&mut self, cx: &mut Cx) {
        self.state = State::TimeWait;
        self.timers = Timers::default();
        self.timers.set(Timer::Close, cx.now + 2 * cx.cfg.msl);
        // TIME-WAIT only answers segments: it holds no buffers (as Linux's TIME-WAIT sockets hold
        // none). Both FINs are acknowledged, so nothing is left to send or reassemble; what was
        // received in order stays for the application to read.
        self.tx.release();
        self.ooo.release(cx.pool);
        self.scoreboard = Scoreboard::default();
        self.sent_log.release();
    }
}
