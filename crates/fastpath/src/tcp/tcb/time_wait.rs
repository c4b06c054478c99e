//! A connection in TIME-WAIT that the application has closed, in a compact form.
//!
//! TIME-WAIT lasts 2 MSL (60 s) after a connection that closed first, and a server that closes its
//! connections first keeps one behind each for that long: thousands at a time. In TIME-WAIT a
//! connection only answers segments (a retransmitted FIN, a SYN that may start a new incarnation,
//! strays), so most of a block is dead weight there: its buffers (already released when it entered
//! TIME-WAIT), its congestion, retransmission and recovery state. [`TimeWait`] keeps what those
//! answers need (the addresses and route, the sequence numbers, the window, the timestamps, the
//! rate limits and the deadline), as Linux replaces such a socket by an `inet_timewait_sock`. The
//! rare segment that arrives for it rebuilds a block from it ([`TimeWait::revive`]) and goes through
//! the block's own TIME-WAIT handling, so that the answers are the same in either form; the block
//! is compacted again afterwards.

use super::*;

/// What a closed connection in TIME-WAIT keeps (see the module's documentation).
#[derive(Debug)]
pub(crate) struct TimeWait<A: IpAddress> {
    pub(crate) local: A::Socket,
    pub(crate) remote: A::Socket,
    hop: NextHop<A>,
    route_epoch: u32,
    path_mtu: usize,
    mss: u32,
    iss: Seq,
    /// Everything sent, the FIN included, is acknowledged: SND.UNA = SND.NXT = SND.MAX.
    snd_nxt: Seq,
    snd_wnd: u32,
    snd_wl1: Seq,
    snd_wl2: Seq,
    snd_shift: u8,
    irs: Seq,
    rcv_nxt: Seq,
    rcv_adv: Seq,
    rcv_shift: u8,
    rx_capacity: usize,
    ts_on: bool,
    ts_recent: u32,
    ts_offset: u32,
    ws_on: bool,
    last_ack_sent: Seq,
    /// When TIME-WAIT ends.
    pub(crate) deadline: Instant,
    challenge_window: (u64, u32),
    last_invalid_ack: Option<Instant>,
}

impl<A: IpAddress> Tcb<A> {
    /// The compact form of this block, if it can take one: in TIME-WAIT, closed by the application,
    /// with nothing left to send, to read or to reassemble, and checksummed as usual (a connection
    /// that eliminated its checksum keeps its block).
    /// Called at the end of every path that runs a block (`Tcp::schedule`): the first test fails
    /// at once for every connection not in TIME-WAIT, and nothing is built unless it passes.
    #[inline]
    pub(crate) fn time_wait(&self) -> Option<TimeWait<A>> {
        if self.state != State::TimeWait {
            return None;
        }
        let idle = self.state == State::TimeWait
            && self.orphan
            && !self.held
            && !self.no_checksum
            && !self.ack_now
            && self.probe.is_none()
            && self.tx.len() == 0
            && self.rx.bytes == 0
            && self.ooo.is_empty()
            && self.snd_una == self.snd_max
            && self.snd_nxt == self.snd_max;
        // Its one timer is its end (no delayed ACK or probe owed).
        let deadline = self.timers.get(Timer::Close)?;
        if !idle || self.deadline() != Some(deadline) {
            return None;
        }
        Some(TimeWait {
            local: self.local,
            remote: self.remote,
            hop: self.hop,
            route_epoch: self.route_epoch,
            path_mtu: self.path_mtu,
            mss: self.mss,
            iss: self.iss,
            snd_nxt: self.snd_nxt,
            snd_wnd: self.snd_wnd,
            snd_wl1: self.snd_wl1,
            snd_wl2: self.snd_wl2,
            snd_shift: self.snd_shift,
            irs: self.irs,
            rcv_nxt: self.rcv_nxt,
            rcv_adv: self.rcv_adv,
            rcv_shift: self.rcv_shift,
            rx_capacity: self.rx_capacity,
            ts_on: self.ts_on,
            ts_recent: self.ts_recent,
            ts_offset: self.ts_offset,
            ws_on: self.ws_on,
            last_ack_sent: self.last_ack_sent,
            deadline,
            challenge_window: self.challenge_window,
            last_invalid_ack: self.last_invalid_ack,
        })
    }
}

impl<A: IpAddress> TimeWait<A> {
    /// The block this stands for, to take a segment: in TIME-WAIT, closed by the application, its
    /// FIN sent and acknowledged, the peer's received, and the same deadline.
    pub(crate) fn revive(&self, cfg: &TcpConfig) -> Tcb<A> {
        let mut tcb = Tcb::new(
            State::TimeWait,
            self.local,
            self.remote,
            self.hop,
            self.iss.0,
            cfg,
        );
        tcb.orphan = true;
        tcb.snd_una = self.snd_nxt;
        tcb.snd_nxt = self.snd_nxt;
        tcb.snd_max = self.snd_nxt;
        tcb.rexmit_next = self.snd_nxt;
        tcb.rexmit_limit = self.snd_nxt;
        // The FIN took the sequence number before SND.NXT, after an empty send buffer.
        tcb.tx_seq = self.snd_nxt - 1;
        tcb.fin_queued = true;
        tcb.snd_wnd = self.snd_wnd;
        tcb.max_snd_wnd = self.snd_wnd;
        tcb.snd_wl1 = self.snd_wl1;
        tcb.snd_wl2 = self.snd_wl2;
        tcb.snd_shift = self.snd_shift;
        tcb.mss = self.mss;
        tcb.path_mtu = self.path_mtu;
        tcb.route_epoch = self.route_epoch;
        tcb.irs = self.irs;
        tcb.rcv_nxt = self.rcv_nxt;
        tcb.rcv_adv = self.rcv_adv;
        tcb.rcv_shift = self.rcv_shift;
        tcb.rx_capacity = self.rx_capacity;
        tcb.fin_received = true;
        tcb.ts_on = self.ts_on;
        tcb.ts_recent = self.ts_recent;
        tcb.ts_offset = self.ts_offset;
        tcb.ws_on = self.ws_on;
        tcb.last_ack_sent = self.last_ack_sent;
        tcb.timers.set(Timer::Close, self.deadline);
        tcb.challenge_window = self.challenge_window;
        tcb.last_invalid_ack = self.last_invalid_ack;
        tcb
    }
}
