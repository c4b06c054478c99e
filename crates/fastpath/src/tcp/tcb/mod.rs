//! One connection: its transmission control block and the RFC 9293 state machine.
//!
//! The block reacts to three things: an arriving segment ([`Tcb::on_segment`], with Jacobson's header
//! prediction in front of it as [`Tcb::predict`]), a timer ([`Tcb::on_timer`]) and the application
//! (write, read, close). It never sends by itself: it records what is owed (an ACK, data the windows
//! allow, a retransmission) and [`Tcb::next_segment`] says what the next segment to send is, so that the
//! stack builds every outgoing segment in one place.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::buffers::{OutOfOrder, ReceiveQueue, Scoreboard, SendBuffer};
use super::congestion::Congestion;
use super::seq::Seq;
use crate::addr::IpAddress;
use crate::buf::{BufferPool, PacketBuf};
use crate::config::TcpConfig;
use crate::ip::NextHop;
use crate::stats::{DropReason, Drops, TcpCounters};
use crate::time::Instant;
use crate::wire::tcp::{
    FastOpenOption, Flags, TcpOptions, TcpRepr, ALT_CHECKSUM_NONE, MAX_SACK_BLOCKS,
};

mod input;
mod output;
mod receive;
mod recovery;
mod time_wait;
mod timers;

pub(crate) use time_wait::TimeWait;
pub(crate) use timers::{Timer, Timers};

#[cfg(test)]
pub(super) mod tests;

/// Connection states (RFC 9293 §3.3.2). LISTEN belongs to listeners, CLOSED to no block at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// A SYN was sent; waiting for the SYN-ACK.
    SynSent,
    /// A SYN was received and a SYN-ACK sent; waiting for its ACK.
    SynReceived,
    /// Open both ways.
    Established,
    /// The application closed; our FIN is unacknowledged.
    FinWait1,
    /// Our FIN was acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; the application has not.
    CloseWait,
    /// Both sent FINs at once; waiting for the ACK of ours.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both closed; waiting out old duplicates (2 MSL).
    TimeWait,
    /// Gone (reset, timed out, or closed and acknowledged); the block is about to be freed.
    Closed,
}

impl State {
    /// True once the three-way handshake completed.
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::SynSent | State::SynReceived | State::Closed)
    }

    /// True in the states that send data and a FIN: synchronized, and our FIN not yet acknowledged.
    pub(crate) fn sends_data(self) -> bool {
        matches!(
            self,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }
}

/// What the stack must do after a segment or a timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing beyond sending what the block owes.
    Continue,
    /// An active open that tried Fast Open completed: the stack caches the cookie the SYN-ACK
    /// carried (in `syn_fast_open`) and the server's MSS, for the next connection to the server.
    FastOpenLearned,
    /// A passive open completed: hand the connection to its listener's accept queue.
    Established,
    /// Answer with a RST `seq`/`ack` (RFC 9293 §3.10.7), then carry on.
    Reset { seq: u32, ack: Option<u32> },
    /// The block is finished: free it.
    Remove,
    /// A SYN in TIME-WAIT starts a new incarnation of the connection (RFC 9293 §3.10.7.4's note,
    /// RFC 6191): the block is finished, and the SYN goes to the listener as if it had found no
    /// connection (Linux's `TCP_TW_SYN`), rather than waiting for the peer to send it again.
    Reincarnate,
}

/// Per-connection figures, for applications and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// MSS used for sending.
    pub mss: u32,
    /// The peer's receive window, bytes.
    pub snd_wnd: u32,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Whether SACK, timestamps and window scaling were negotiated.
    pub sack: bool,
    /// See `sack`.
    pub timestamps: bool,
    /// See `sack`.
    pub window_scaling: bool,
}

/// What the stack passes into the block's methods.
pub(crate) struct Cx<'a> {
    pub(crate) now: Instant,
    pub(crate) cfg: &'a TcpConfig,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut TcpCounters,
    pub(crate) drops: &'a mut Drops,
    pub(crate) max_ooo: usize,
}

/// One segment to send, as [`Tcb::next_segment`] describes it; the payload is `len` bytes of the send
/// buffer from `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outgoing {
    pub(crate) repr: TcpRepr,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    /// The payload may go out as several MSS-sized segments cut by the link (TSO) of this size.
    pub(crate) segment_size: Option<u16>,
}

/// The transmission control block.
#[derive(Debug)]
pub(crate) struct Tcb<A: IpAddress = Ipv4Addr> {
    pub(crate) state: State,
    pub(crate) local: A::Socket,
    pub(crate) remote: A::Socket,
    pub(crate) hop: NextHop<A>,
    /// The application has closed its handle: nobody will read, and the block frees itself.
    pub(crate) orphan: bool,
    /// A held SYN: the peer's SYN is taken but not answered until the application confirms the
    /// connection (then the SYN-ACK goes out) or refuses it. Nothing is sent while it is set.
    pub(crate) held: bool,
    /// TCP Fast Open (RFC 7413) carried data in the SYN: a passive open took it, and was handed to
    /// the application before its handshake completed (it may send in SYN-RECEIVED); an active
    /// open's data was acknowledged by the SYN-ACK.
    pub(crate) fast_open: bool,
    /// The Fast Open option our first SYN or our SYN-ACK carries (a cookie, or a request for one);
    /// once an active open's SYN-ACK arrives, the cookie it carried, for the stack's cache.
    pub(crate) syn_fast_open: Option<FastOpenOption>,
    /// Bytes of the send buffer an active open's first SYN carries (Fast Open).
    pub(crate) syn_data: u32,
    pub(crate) error: Option<io::ErrorKind>,

    // Send sequence space (RFC 9293 §3.3.1).
    iss: Seq,
    snd_una: Seq,
    snd_nxt: Seq,
    /// The highest sequence number sent (snd_nxt goes back on a timeout; this does not).
    snd_max: Seq,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_wl1: Seq,
    snd_wl2: Seq,
    /// The peer's window scale shift.
    snd_shift: u8,
    pub(crate) tx: SendBuffer,
    /// Sequence number of the send buffer's first byte.
    tx_seq: Seq,
    /// The application shut down writing: a FIN follows the buffered data.
    fin_queued: bool,
    /// Where the application's writes ended, ascending, above SND.UNA: Linux's push marks (see
    /// [`TcpConfig::linux_push`]).
    push_marks: VecDeque<Seq>,
    /// The sequence range of the transmission unit the data segments being sent belong to (the TSO
    /// packet Linux would send), for the PSH flag of its last segment.
    unit: (Seq, Seq),
    /// Payload bytes per segment we send.
    pub(crate) mss: u32,
    /// The largest MSS our route allows (for our SYN's MSS option).
    pub(crate) local_mss: u16,
    /// The MSS the peer's SYN offered (RFC 9293 §3.7.1; 536 when it offered none), before options.
    pub(crate) peer_mss: u32,
    /// The path MTU `mss` is sized for: the link's, or less when path MTU discovery learned less
    /// (RFC 1191 §3).
    pub(crate) path_mtu: usize,
    /// The IP layer's `route_epoch` when `path_mtu` was read: a different epoch means the path MTU
    /// may have changed (learned by another connection, or expired).
    pub(crate) route_epoch: u32,

    // Receive sequence space.
    pub(crate) irs: Seq,
    rcv_nxt: Seq,
    /// The right edge of the window we last advertised; it never moves left (RFC 9293 §3.8.6).
    rcv_adv: Seq,
    rcv_shift: u8,
    pub(crate) rx: ReceiveQueue,
    rx_capacity: usize,
    ooo: OutOfOrder,
    /// A FIN that arrived ahead of missing data.
    ooo_fin: Option<Seq>,
    pub(crate) fin_received: bool,

    // Options in use.
    ts_on: bool,
    ts_recent: u32,
    ts_offset: u32,
    sack_on: bool,
    ws_on: bool,
    last_ack_sent: Seq,

    // Retransmission (RFC 6298).
    rto: Duration,
    srtt: Option<Duration>,
    /// The least RTT sample, for the size of Linux's transmission units.
    min_rtt: Option<Duration>,
    rttvar: Duration,
    /// Karn: a sequence number being timed and when it was sent (without timestamps).
    rtt_probe: Option<(Seq, Instant)>,
    retries: u32,

    /// Every timer's deadline (see [`Timer`]).
    timers: Timers,
    persist_backoff: u32,
    keepalive_probes: u32,
    pub(crate) keepalive: bool,

    // What is owed.
    ack_now: bool,
    unacked_segments: u32,
    /// Send a one-byte window probe (persist) or a keep-alive now.
    probe: Option<Probe>,

    // Loss recovery (RFC 5681, RFC 6582, RFC 6675).
    dupacks: u32,
    /// The recovery point: set while in fast recovery.
    recover: Option<Seq>,
    scoreboard: Scoreboard,
    /// The next sequence number to retransmit in recovery, and how far retransmission may go.
    rexmit_next: Seq,
    rexmit_limit: Seq,
    pub(crate) cc: Congestion,

    pub(crate) nodelay: bool,
    /// Checksum elimination negotiated (paper 001): segments after the handshake carry none and are
    /// not verified.
    pub(crate) no_checksum: bool,
    /// We asked for elimination in our SYN.
    alt_requested: bool,
    /// The owed ACK must not wait for the end of the batch (out-of-order data).
    pub(crate) ack_immediately: bool,
    challenge_window: (u64, u32),
    /// When the last duplicate ACK for an unacceptable segment was owed (see [`Self::invalid_ack`]).
    last_invalid_ack: Option<Instant>,
    retransmits: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Window,
    KeepAlive,
}

/// Timestamp clock: milliseconds (RFC 7323 §5.4 allows 1 ms to 1 s per tick).
fn ts_clock(now: Instant) -> u32 {
    (now.total_micros() / 1000) as u32
}

impl<A: IpAddress> Tcb<A> {
    /// A block for `local`/`remote` in `state` with our ISN `iss`.
    fn new(
        state: State,
        local: A::Socket,
        remote: A::Socket,
        hop: NextHop<A>,
        iss: u32,
        cfg: &TcpConfig,
    ) -> Tcb<A> {
        let local_mss = mss_for_mtu::<A>(hop.caps.mtu);
        let mss = (local_mss as u32).min(536);
        let rcv_shift = if cfg.window_scaling {
            let mut shift = 0u8;
            while (65535usize << shift) < cfg.recv_buffer && shift < 14 {
                shift += 1;
            }
            shift
        } else {
            0
        };
        let iss = Seq(iss);
        Tcb {
            state,
            local,
            remote,
            hop,
            orphan: false,
            held: false,
            fast_open: false,
            syn_fast_open: None,
            syn_data: 0,
            error: None,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: Seq(0),
            snd_wl2: iss,
            snd_shift: 0,
            tx: SendBuffer::new(cfg.send_buffer),
            tx_seq: iss + 1,
            fin_queued: false,
            push_marks: VecDeque::new(),
            unit: (iss, iss),
            mss,
            local_mss,
            peer_mss: 536,
            path_mtu: hop.caps.mtu,
            route_epoch: 0,
            irs: Seq(0),
            rcv_nxt: Seq(0),
            rcv_adv: Seq(0),
            rcv_shift,
            rx: ReceiveQueue::default(),
            rx_capacity: cfg.recv_buffer,
            ooo: OutOfOrder::default(),
            ooo_fin: None,
            fin_received: false,
            ts_on: false,
            ts_recent: 0,
            ts_offset: iss.0.rotate_left(13),
            sack_on: false,
            ws_on: false,
            last_ack_sent: Seq(0),
            rto: cfg.initial_rto,
            srtt: None,
            min_rtt: None,
            rttvar: Duration::ZERO,
            rtt_probe: None,
            retries: 0,
            timers: Timers::default(),
            persist_backoff: 0,
            keepalive_probes: 0,
            keepalive: false,
            ack_now: false,
            unacked_segments: 0,
            probe: None,
            dupacks: 0,
            recover: None,
            scoreboard: Scoreboard::default(),
            rexmit_next: iss,
            rexmit_limit: iss,
            cc: Congestion::limited(cfg.congestion, mss, cfg.slow_start_ack_limit),
            nodelay: false,
            no_checksum: false,
            alt_requested: false,
            ack_immediately: false,
            challenge_window: (0, 0),
            last_invalid_ack: None,
            retransmits: 0,
        }
    }

    /// An active open: SYN-SENT, the SYN owed.
    pub(crate) fn connect(
        local: A::Socket,
        remote: A::Socket,
        hop: NextHop<A>,
        iss: u32,
        cfg: &TcpConfig,
    ) -> Tcb<A> {
        let mut tcb = Tcb::new(State::SynSent, local, remote, hop, iss, cfg);
        tcb.alt_requested = eliminable(cfg, &hop, remote);
        tcb
    }

    /// A passive open from `syn`: SYN-RECEIVED, the SYN-ACK owed.
    pub(crate) fn accept(
        local: A::Socket,
        remote: A::Socket,
        hop: NextHop<A>,
        iss: u32,
        syn: &TcpRepr,
        cfg: &TcpConfig,
    ) -> Tcb<A> {
        let mut tcb = Tcb::new(State::SynReceived, local, remote, hop, iss, cfg);
        tcb.take_syn(syn, cfg);
        // Agree to elimination only when asked, when switched on here too, and on a protected hop.
        if syn.options.alt_checksum == Some(ALT_CHECKSUM_NONE) && eliminable(cfg, &hop, remote) {
            tcb.alt_requested = true;
            tcb.no_checksum = true;
        }
        tcb
    }

    /// A connection rebuilt from a valid SYN cookie (RFC 4987 §3.6): the handshake's last ACK `ack`.
    /// Its SYN and our SYN-ACK are long gone, so it starts established with `mss`, the MSS the cookie
    /// carried, and no other options.
    pub(crate) fn from_cookie(
        local: A::Socket,
        remote: A::Socket,
        hop: NextHop<A>,
        ack: &TcpRepr,
        mss: u16,
        cfg: &TcpConfig,
    ) -> Tcb<A> {
        let iss = ack.ack.wrapping_sub(1);
        let mut tcb = Tcb::new(State::Established, local, remote, hop, iss, cfg);
        tcb.irs = Seq(ack.seq.wrapping_sub(1));
        tcb.rcv_nxt = Seq(ack.seq);
        tcb.rcv_shift = 0;
        tcb.rx_capacity = tcb.rx_capacity.min(65535);
        tcb.rcv_adv = tcb.rcv_nxt + tcb.rx_capacity as u32;
        tcb.peer_mss = u32::from(mss);
        tcb.mss = (mss.min(tcb.local_mss)) as u32;
        tcb.cc = Congestion::limited(cfg.congestion, tcb.mss, cfg.slow_start_ack_limit);
        tcb.snd_una = Seq(ack.ack);
        tcb.snd_nxt = tcb.snd_una;
        tcb.snd_max = tcb.snd_una;
        tcb.tx_seq = tcb.snd_una;
        tcb.snd_wnd = ack.window as u32;
        tcb.max_snd_wnd = tcb.snd_wnd;
        tcb.snd_wl1 = Seq(ack.seq);
        tcb.snd_wl2 = Seq(ack.ack);
        tcb
    }

    /// The sequence numbers, for tests outside the block: our ISS, SND.UNA, SND.NXT, the peer's IRS
    /// and RCV.NXT.
    #[cfg(test)]
    pub(crate) fn sequence_numbers(&self) -> [u32; 5] {
        [
            self.iss.0,
            self.snd_una.0,
            self.snd_nxt.0,
            self.irs.0,
            self.rcv_nxt.0,
        ]
    }

    /// Bytes of receive space: the buffer's capacity less what the queue holds.
    fn rx_free(&self) -> u32 {
        self.rx_capacity.saturating_sub(self.rx.bytes) as u32
    }

    /// The window we can offer, capped by what the window field and scale can say.
    fn advertisable(&self) -> u32 {
        self.rx_free().min(65535 << self.rcv_shift)
    }

    /// Figures for the application.
    pub(crate) fn info(&self) -> ConnectionInfo {
        ConnectionInfo {
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
            srtt: self.srtt,
            rto: self.rto,
            mss: self.mss,
            snd_wnd: self.snd_wnd,
            retransmits: self.retransmits,
            sack: self.sack_on,
            timestamps: self.ts_on,
            window_scaling: self.ws_on,
        }
    }

    /// Queues `data`; returns how much fitted.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check_writable()?;
        let n = self.tx.write(data);
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.mark_push(n);
        Ok(n)
    }

    /// Lets `fill` write into the send buffer in place.
    pub(crate) fn write_with(
        &mut self,
        max: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        self.check_writable()?;
        if self.tx.free() == 0 && max > 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.tx.write_with(max, fill);
        self.mark_push(n);
        Ok(n)
    }

    /// Records that a write of `n` bytes ended at the end of the send buffer: Linux marks the
    /// buffer (skb) holding a write's last byte for PSH (`tcp_push` → `tcp_mark_push`). A write
    /// appended to data not sent yet joins the buffer the previous write ended in, and Linux clears
    /// that buffer's mark as it appends (`tcp_sendmsg_locked`): only the later mark stays.
    fn mark_push(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let end = self.tx_seq + self.tx.len() as u32;
        if let Some(last) = self.push_marks.back_mut() {
            if *last > self.snd_max {
                *last = end;
                return;
            }
        }
        self.push_marks.push_back(end);
    }

    fn check_writable(&mut self) -> io::Result<()> {
        if let Some(e) = self.take_error() {
            return Err(e.into());
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
                if !self.fin_queued =>
            {
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection is shut down for writing",
            )),
        }
    }

    /// Shuts down writing: a FIN follows the data already queued.
    pub(crate) fn shutdown_write(&mut self) {
        if self.fin_queued {
            return;
        }
        match self.state {
            State::SynSent => self.state = State::Closed,
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// The application read; owe a window update if the window opened by enough to matter.
    ///
    /// A read is answered by an update of its own only once the peer has used at least half of the
    /// buffer and the update at least doubles what it may still send (Linux's rule too): while the
    /// window is wide open, the next ACK for data carries the new edge, and a bulk receiver sends no
    /// pure window updates at all. The edge itself moves as silly window avoidance allows
    /// ([`Self::window_field`]). Returns whether an ACK is owed now: if not, the read changed
    /// nothing output looks at, and the caller need not ask for output.
    pub(crate) fn after_read(&mut self) -> bool {
        let current = if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        };
        let free = self.advertisable();
        let half_used = 2 * u64::from(current) <= self.rx_capacity as u64;
        if half_used
            && free >= 2 * current
            && free >= current + self.mss.min(self.rx_capacity as u32 / 2)
            && self.state.is_synchronized()
        {
            self.ack_now = true;
        }
        self.ack_now
    }

    /// Readable: data queued, or the peer finished, or an error.
    pub(crate) fn readable(&self) -> bool {
        self.rx.bytes > 0
            || self.fin_received
            || self.error.is_some()
            || self.state == State::Closed
    }

    /// Writable: established (or close-wait) with room in the send buffer.
    pub(crate) fn writable(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait)
            && !self.fin_queued
            && self.tx.free() > 0
    }

    /// The sequence number our FIN takes (valid once queued).
    fn fin_seq(&self) -> Seq {
        self.tx_seq + self.tx.len() as u32
    }

    /// Takes the error that ended the connection (`SO_ERROR`): reported once, by whichever of `read`,
    /// `write` or `take_error` comes first, as Linux's `sock_error` clears `sk_err`. After it, reads
    /// return the end of the stream and writes `BrokenPipe`.
    pub(crate) fn take_error(&mut self) -> Option<io::ErrorKind> {
        self.error.take()
    }

    /// Ends the connection with error `kind` (reset, refused, timed out).
    pub(crate) fn abort(&mut self, kind: io::ErrorKind, cx: &mut Cx) {
        self.error = Some(kind);
        self.state = State::Closed;
        self.timers = Timers::default();
        self.ooo.clear(cx.pool);
        self.ack_now = false;
        self.probe = None;
    }

    /// Frees every buffer the block holds.
    pub(crate) fn release(&mut self, pool: &mut BufferPool) {
        self.rx.clear(pool);
        self.ooo.clear(pool);
    }

    /// The sequence numbers a RST sent on the application's abort must carry.
    /// The initial send sequence number.
    pub(crate) fn iss(&self) -> u32 {
        self.iss.0
    }

    pub(crate) fn reset_fields(&self) -> (u32, u32) {
        (self.snd_nxt.0, self.rcv_nxt.0)
    }

    /// The options of a RST this connection sends of its own accord (an abort, a close with unread
    /// data): the timestamps when they are in use, as on its other segments (Linux's active reset
    /// carries them too, and a peer checking PAWS on RSTs takes it).
    pub(crate) fn reset_options(&self, now: Instant) -> TcpOptions {
        TcpOptions {
            timestamps: self
                .ts_on
                .then(|| (ts_clock(now).wrapping_add(self.ts_offset), self.ts_recent)),
            ..TcpOptions::default()
        }
    }

    /// The MSS for sending: the peer's, or less when the path MTU is smaller (MTU − 40, RFC 1191 §3,
    /// RFC 9293 §3.7.1), less the timestamp option when it is in use, at least [`MIN_MSS`].
    fn send_mss(&self) -> u32 {
        let options_len = if self.ts_on { 12 } else { 0 };
        self.peer_mss
            .min(u32::from(mss_for_mtu::<A>(self.path_mtu)))
            .saturating_sub(options_len)
            .max(u32::from(MIN_MSS))
    }

    /// Takes `mtu` as the path MTU (a new connection to a destination whose path MTU is cached, or
    /// a change learned or expired since, `epoch` being the IP layer's route epoch): the MSS follows,
    /// up or down. Nothing is resent; segments in flight that were too large are lost and go again
    /// by the usual means (as Linux's `tcp_current_mss` resyncs before each send).
    pub(crate) fn sync_path_mtu(&mut self, mtu: usize, epoch: u32) {
        self.route_epoch = epoch;
        if mtu != self.path_mtu {
            self.path_mtu = mtu;
            self.mss = self.send_mss();
        }
    }

    /// A "fragmentation needed" (RFC 1191) quoting sequence number `seq`: true when it is in flight,
    /// within `[SND.UNA, SND.NXT)` (RFC 5927 §5.2; `snd_max` here is RFC 9293's SND.NXT, which
    /// this block's `snd_nxt` is not after a timeout sent it back). Linux checks the same.
    pub(crate) fn in_flight(&self, seq: u32) -> bool {
        let seq = Seq(seq);
        seq >= self.snd_una && seq < self.snd_max
    }

    /// The path MTU went down to `mtu` (a "fragmentation needed" about this connection): the MSS
    /// follows, and if it shrank, everything outstanding is sent again at the new size, from
    /// SND.UNA. Not congestion (RFC 1191 §6.4 says it is not a loss to back off for; Linux's
    /// `tcp_simple_retransmit` leaves the window alone): cwnd, ssthresh and the RTO stay.
    /// Returns true when there is something to send.
    pub(crate) fn path_mtu_reduced(&mut self, mtu: usize) -> bool {
        if mtu >= self.path_mtu {
            return false;
        }
        let before = self.mss;
        self.path_mtu = mtu;
        self.mss = self.send_mss();
        if self.mss >= before || !self.state.is_synchronized() || self.snd_una == self.snd_max {
            return false;
        }
        self.snd_nxt = self.snd_una;
        self.recover = None;
        self.dupacks = 0;
        self.rexmit_next = self.snd_una;
        self.rexmit_limit = self.snd_una;
        // Karn: a retransmitted segment times nothing.
        self.rtt_probe = None;
        true
    }

    /// True once every byte written was acknowledged and no FIN is outstanding.
    pub(crate) fn all_acked(&self) -> bool {
        self.snd_una == self.snd_max && self.tx.len() == 0
    }
}

/// Kay & Pasquale's condition for leaving the checksum out (paper 001): switched on, the route's link
/// protects packets with a CRC, and the next hop is the destination itself.
fn eliminable<A: IpAddress>(cfg: &TcpConfig, hop: &NextHop<A>, remote: A::Socket) -> bool {
    cfg.alt_checksum && hop.caps.crc_protected && hop.next_hop == A::ip(&remote)
}

/// The smallest MSS a connection uses, whatever its link's MTU: segments of it on a link whose MTU
/// is smaller are fragmented by IPv4 (Linux's floor, `tcp_min_snd_mss`, is 48).
pub(crate) const MIN_MSS: u16 = 64;

/// The MSS for a link of `mtu` in family `A`: the MTU less the IP (20, 40) and TCP headers, at least
/// [`MIN_MSS`].
pub(crate) fn mss_for_mtu<A: IpAddress>(mtu: usize) -> u16 {
    (mtu.min(65535).saturating_sub(A::HEADER_LEN + 20) as u16).max(MIN_MSS)
}
