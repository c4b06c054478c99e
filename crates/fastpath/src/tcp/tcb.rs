//! One connection: its transmission control block and the RFC 9293 state machine.
//!
//! The block reacts to three things: an arriving segment ([`Tcb::on_segment`], with Jacobson's header
//! prediction in front of it as [`Tcb::predict`]), a timer ([`Tcb::on_timer`]) and the application
//! (write, read, close). It never sends by itself: it records what is owed (an ACK, data the windows
//! allow, a retransmission) and [`Tcb::next_segment`] says what the next segment to send is, so that the
//! stack builds every outgoing segment in one place.

use std::io;
use std::net::SocketAddrV4;
use std::time::Duration;

use super::buffers::{OutOfOrder, ReceiveQueue, Scoreboard, SendBuffer};
use super::congestion::Congestion;
use super::seq::Seq;
use crate::buf::{BufferPool, PacketBuf};
use crate::config::TcpConfig;
use crate::demux::SocketId;
use crate::ipv4::NextHop;
use crate::stats::{DropReason, Drops, TcpCounters};
use crate::time::Instant;
use crate::wire::tcp::{Flags, TcpOptions, TcpRepr, ALT_CHECKSUM_NONE, MAX_SACK_BLOCKS};

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
}

/// What the stack must do after a segment or a timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing beyond sending what the block owes.
    Continue,
    /// A passive open completed: hand the connection to its listener's accept queue.
    Established,
    /// Answer with a RST `seq`/`ack` (RFC 9293 §3.10.7), then carry on.
    Reset { seq: u32, ack: Option<u32> },
    /// The block is finished: free it.
    Remove,
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
pub(crate) struct Tcb {
    pub(crate) state: State,
    pub(crate) local: SocketAddrV4,
    pub(crate) remote: SocketAddrV4,
    pub(crate) hop: NextHop,
    /// The listener a passive open belongs to until it is accepted.
    pub(crate) listener: Option<SocketId>,
    /// The application has closed its handle: nobody will read, and the block frees itself.
    pub(crate) orphan: bool,
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
    /// Payload bytes per segment we send.
    pub(crate) mss: u32,
    /// The largest MSS our route allows (for our SYN's MSS option).
    local_mss: u16,

    // Receive sequence space.
    irs: Seq,
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
    rttvar: Duration,
    /// Karn: a sequence number being timed and when it was sent (without timestamps).
    rtt_probe: Option<(Seq, Instant)>,
    retries: u32,
    rto_at: Option<Instant>,

    // Other timers.
    delack_at: Option<Instant>,
    persist_at: Option<Instant>,
    persist_backoff: u32,
    keepalive_at: Option<Instant>,
    keepalive_probes: u32,
    pub(crate) keepalive: bool,
    close_at: Option<Instant>,

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
    /// On the stack's list of connections to send for after the input batch.
    pub(crate) output_queued: bool,
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

impl Tcb {
    /// A block for `local`/`remote` in `state` with our ISN `iss`.
    fn new(
        state: State,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        hop: NextHop,
        iss: u32,
        cfg: &TcpConfig,
    ) -> Tcb {
        let local_mss = (hop.caps.mtu.min(65535) - 40) as u16;
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
            listener: None,
            orphan: false,
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
            mss,
            local_mss,
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
            rttvar: Duration::ZERO,
            rtt_probe: None,
            retries: 0,
            rto_at: None,
            delack_at: None,
            persist_at: None,
            persist_backoff: 0,
            keepalive_at: None,
            keepalive_probes: 0,
            keepalive: false,
            close_at: None,
            ack_now: false,
            unacked_segments: 0,
            probe: None,
            dupacks: 0,
            recover: None,
            scoreboard: Scoreboard::default(),
            rexmit_next: iss,
            rexmit_limit: iss,
            cc: Congestion::new(cfg.congestion, mss),
            nodelay: false,
            no_checksum: false,
            alt_requested: false,
            output_queued: false,
            ack_immediately: false,
            challenge_window: (0, 0),
            last_invalid_ack: None,
            retransmits: 0,
        }
    }

    /// An active open: SYN-SENT, the SYN owed.
    pub(crate) fn connect(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        hop: NextHop,
        iss: u32,
        cfg: &TcpConfig,
    ) -> Tcb {
        let mut tcb = Tcb::new(State::SynSent, local, remote, hop, iss, cfg);
        tcb.alt_requested = eliminable(cfg, &hop, remote);
        tcb
    }

    /// A passive open from `syn`: SYN-RECEIVED, the SYN-ACK owed.
    pub(crate) fn accept(
        local: SocketAddrV4,
        remote: SocketAddrV4,
        hop: NextHop,
        iss: u32,
        syn: &TcpRepr,
        cfg: &TcpConfig,
    ) -> Tcb {
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
        local: SocketAddrV4,
        remote: SocketAddrV4,
        hop: NextHop,
        ack: &TcpRepr,
        mss: u16,
        cfg: &TcpConfig,
    ) -> Tcb {
        let iss = ack.ack.wrapping_sub(1);
        let mut tcb = Tcb::new(State::Established, local, remote, hop, iss, cfg);
        tcb.irs = Seq(ack.seq.wrapping_sub(1));
        tcb.rcv_nxt = Seq(ack.seq);
        tcb.rcv_shift = 0;
        tcb.rx_capacity = tcb.rx_capacity.min(65535);
        tcb.rcv_adv = tcb.rcv_nxt + tcb.rx_capacity as u32;
        tcb.mss = (mss.min(tcb.local_mss)) as u32;
        tcb.cc = Congestion::new(cfg.congestion, tcb.mss);
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

    /// Takes the peer's ISN and options from its SYN.
    fn take_syn(&mut self, syn: &TcpRepr, cfg: &TcpConfig) {
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
        let options_len = if self.ts_on { 12 } else { 0 };
        self.mss = peer_mss
            .min(self.local_mss as u32)
            .saturating_sub(options_len)
            .max(64);
        self.cc = Congestion::new(self.cc.algorithm, self.mss);
        self.rcv_adv = self.rcv_nxt + self.advertisable();
    }

    /// Bytes of receive space: the buffer's capacity less what the queue holds.
    fn rx_free(&self) -> u32 {
        self.rx_capacity.saturating_sub(self.rx.bytes) as u32
    }

    /// The window we can offer, capped by what the window field and scale can say.
    fn advertisable(&self) -> u32 {
        self.rx_free().min(65535 << self.rcv_shift)
    }

    /// The window field for an outgoing segment, with receiver-side silly window avoidance (RFC 9293
    /// §3.8.6.2.2): the right edge moves only by at least min(half the buffer, one MSS), and never
    /// back.
    fn window_field(&mut self) -> u16 {
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
    /// when the out-of-order queue is not empty (the options must not push a segment past the MTU).
    fn segment_limit(&self) -> u32 {
        if self.sack_on && !self.ooo.is_empty() {
            let blocks = if self.ts_on {
                3
            } else {
                MAX_SACK_BLOCKS as u32
            };
            self.mss - (4 + 8 * blocks)
        } else {
            self.mss
        }
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

    /// The earliest timer.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        [
            self.rto_at,
            self.delack_at,
            self.persist_at,
            self.keepalive_at,
            self.close_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ---------------------------------------------------------------------------------------------
    // The application's side.

    /// Queues `data`; returns how much fitted.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check_writable()?;
        let n = self.tx.write(data);
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
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
        Ok(self.tx.write_with(max, fill))
    }

    fn check_writable(&self) -> io::Result<()> {
        if let Some(e) = self.error {
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
    pub(crate) fn after_read(&mut self) {
        let current = if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        };
        let free = self.advertisable();
        if free >= current + self.mss.min(self.rx_capacity as u32 / 2)
            && self.state.is_synchronized()
        {
            self.ack_now = true;
        }
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

    // ---------------------------------------------------------------------------------------------
    // Input.

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
        {
            return Err(payload);
        }
        let ack = Seq(seg.ack);
        if payload.is_empty() {
            // A pure ACK for new data, outside recovery.
            if ack > self.snd_una
                && ack <= self.snd_max
                && self.recover.is_none()
                && self.dupacks == 0
            {
                self.take_timestamp(seg);
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
        // The next data in order, acknowledging nothing new, with room for it.
        if ack == self.snd_una
            && self.ooo.is_empty()
            && payload.len() as u32 <= self.rx_free()
            && self.rcv_nxt + payload.len() as u32 <= self.rcv_adv
        {
            self.take_timestamp(seg);
            self.take_window(seg);
            let len = payload.len() as u32;
            self.rcv_nxt = self.rcv_nxt + len;
            self.rx.push(payload, cx.pool);
            self.data_arrived(len, cx);
            cx.counters.predicted_data += 1;
            return Ok(());
        }
        Err(payload)
    }

    /// The window of an in-order segment that passed the SND.WL1/WL2 test by construction (its
    /// sequence number is `rcv_nxt` and its ACK at least `snd_una`).
    fn take_window(&mut self, seg: &TcpRepr) {
        let wnd = (seg.window as u32) << self.snd_shift;
        self.snd_wnd = wnd;
        self.max_snd_wnd = self.max_snd_wnd.max(wnd);
        self.snd_wl1 = Seq(seg.seq);
        self.snd_wl2 = Seq(seg.ack);
        if wnd > 0 {
            self.persist_at = None;
            self.persist_backoff = 0;
        }
    }

    /// Records the peer's timestamp for echoing (RFC 7323 §4.3).
    fn take_timestamp(&mut self, seg: &TcpRepr) {
        if let Some((val, _)) = seg.options.timestamps {
            if Seq(seg.seq) <= self.last_ack_sent && (val.wrapping_sub(self.ts_recent) as i32) >= 0
            {
                self.ts_recent = val;
            }
        }
    }

    /// In-order data was queued: acknowledge at once every second full segment, else soon.
    fn data_arrived(&mut self, len: u32, cx: &mut Cx) {
        // A large segment (coalesced by the link) counts as the full-sized segments it holds.
        self.unacked_segments += (len / self.mss.max(1)).max(1);
        match cx.cfg.delayed_ack {
            Some(delay) if self.unacked_segments < 2 && len > 0 => {
                self.delack_at.get_or_insert(cx.now + delay);
            }
            _ => self.ack_now = true,
        }
    }

    /// The general segment-arrives procedure (RFC 9293 §3.10.7.3, §3.10.7.4) for a block in any state
    /// but LISTEN.
    pub(crate) fn on_segment(
        &mut self,
        seg: &TcpRepr,
        mut payload: PacketBuf,
        cx: &mut Cx,
    ) -> Verdict {
        if self.keepalive {
            self.keepalive_at = Some(cx.now + cx.cfg.keepalive.0);
            self.keepalive_probes = 0;
        }
        if self.state == State::SynSent {
            let verdict = self.on_segment_syn_sent(seg, cx);
            cx.pool.free(payload);
            return verdict;
        }
        let flags = seg.flags;
        let seq = Seq(seg.seq);
        let mut seg_len = payload.len() as u32;

        // PAWS (RFC 7323 §5.3): a timestamp older than the last in-window one means an old duplicate.
        if self.ts_on && !flags.contains(Flags::RST) {
            if let Some((val, _)) = seg.options.timestamps {
                if (val.wrapping_sub(self.ts_recent) as i32) < 0 {
                    cx.drops.add(DropReason::TcpPaws);
                    self.invalid_ack(seg, seg_len, cx);
                    cx.pool.free(payload);
                    return Verdict::Continue;
                }
            }
        }

        // A retransmitted SYN while our SYN-ACK is unanswered: send the SYN-ACK again.
        if self.state == State::SynReceived
            && flags.contains(Flags::SYN)
            && !flags.contains(Flags::ACK)
            && seq == self.irs
        {
            self.snd_nxt = self.iss;
            cx.pool.free(payload);
            return Verdict::Continue;
        }

        // A SYN on a synchronized connection, whatever its sequence number (RFC 5961 §4): a
        // rate-limited challenge ACK. In TIME-WAIT it may open a new incarnation instead.
        if flags.contains(Flags::SYN) && self.state.is_synchronized() {
            cx.pool.free(payload);
            if self.state == State::TimeWait {
                return self.time_wait_syn(seg);
            }
            cx.drops.add(DropReason::TcpChallenged);
            self.challenge_ack(cx);
            return Verdict::Continue;
        }

        // 1. Sequence number acceptability.
        let window = if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        };
        let occupies =
            seg_len + flags.contains(Flags::SYN) as u32 + flags.contains(Flags::FIN) as u32;
        let acceptable = match (occupies, window) {
            (0, 0) => seq == self.rcv_nxt,
            (0, w) => seq.in_range(self.rcv_nxt, self.rcv_nxt + w),
            (_, 0) => false,
            (n, w) => {
                seq.in_range(self.rcv_nxt, self.rcv_nxt + w)
                    || (seq + (n - 1)).in_range(self.rcv_nxt, self.rcv_nxt + w)
            }
        };
        if !acceptable && window == 0 && seq == self.rcv_nxt && flags.contains(Flags::ACK) {
            // A closed window still takes the ACK (and RST) of a segment at its edge (RFC 9293
            // §3.10.7.4): the data is dropped, the acknowledgment is not.
            payload.truncate(0);
            self.ack_now = true;
            cx.drops.add(DropReason::TcpOutOfWindow);
            let ack_only = TcpRepr {
                flags: Flags(flags.0 & !(Flags::FIN.0 | Flags::SYN.0)),
                ..*seg
            };
            return self.on_segment(&ack_only, payload, cx);
        }
        if !acceptable {
            // A zero-window probe or an old duplicate: acknowledge, unless it is a RST.
            if self.state == State::TimeWait && flags.contains(Flags::SYN) {
                cx.pool.free(payload);
                return self.time_wait_syn(seg);
            }
            if !flags.contains(Flags::RST) {
                self.invalid_ack(seg, seg_len, cx);
            }
            cx.drops.add(DropReason::TcpOutOfWindow);
            cx.pool.free(payload);
            return Verdict::Continue;
        }

        // 2. RST (RFC 5961 §3: only an exact match resets; an in-window one is challenged).
        if flags.contains(Flags::RST) {
            cx.pool.free(payload);
            if seq != self.rcv_nxt {
                cx.drops.add(DropReason::TcpChallenged);
                self.challenge_ack(cx);
                return Verdict::Continue;
            }
            return self.reset_by_peer(cx);
        }

        // 4. SYN on a synchronized connection (RFC 5961 §4): challenge it. A SYN in SYN-RECEIVED is
        // the peer's retransmission: answer with our SYN-ACK again.
        if flags.contains(Flags::SYN) {
            cx.pool.free(payload);
            if self.state == State::TimeWait {
                return self.time_wait_syn(seg);
            }
            cx.drops.add(DropReason::TcpChallenged);
            self.challenge_ack(cx);
            return Verdict::Continue;
        }

        // 5. ACK.
        if !flags.contains(Flags::ACK) {
            cx.drops.add(DropReason::TcpNoAck);
            cx.pool.free(payload);
            return Verdict::Continue;
        }
        let ack = Seq(seg.ack);
        let mut verdict = Verdict::Continue;
        if self.state == State::SynReceived {
            if ack > self.snd_una && ack <= self.snd_max {
                self.state = State::Established;
                self.snd_wnd = (seg.window as u32) << self.snd_shift;
                self.max_snd_wnd = self.snd_wnd;
                self.snd_wl1 = seq;
                self.snd_wl2 = ack;
                verdict = Verdict::Established;
            } else {
                cx.pool.free(payload);
                return Verdict::Reset {
                    seq: seg.ack,
                    ack: None,
                };
            }
        }
        // RFC 5961 §5: an ACK of data never sent is answered with an ACK; one far older than the
        // window the peer could have seen is challenged.
        if ack > self.snd_max {
            cx.drops.add(DropReason::TcpBadAck);
            self.invalid_ack(seg, seg_len, cx);
            cx.pool.free(payload);
            return verdict;
        }
        if ack < self.snd_una - self.max_snd_wnd.max(65535) {
            cx.drops.add(DropReason::TcpBadAck);
            self.challenge_ack(cx);
            cx.pool.free(payload);
            return verdict;
        }
        self.take_timestamp(seg);
        self.process_sack(seg);
        if ack > self.snd_una {
            self.ack_advance(ack, seg, cx);
        } else if ack == self.snd_una
            && seg_len == 0
            && !flags.contains(Flags::FIN)
            && (seg.window as u32) << self.snd_shift == self.snd_wnd
            && self.snd_max > self.snd_una
        {
            self.duplicate_ack(cx);
        }
        // Window update (RFC 9293 §3.10.7.4, SND.WL1/WL2 rule).
        if self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack) {
            let wnd = (seg.window as u32) << self.snd_shift;
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            if wnd > 0 {
                self.persist_at = None;
                self.persist_backoff = 0;
            }
        }
        // A closed window that answers our probes is alive: probes do not count toward giving up.
        if self.snd_wnd == 0 && ack == self.snd_una {
            self.retries = 0;
        }
        // Our FIN acknowledged?
        let fin_acked = self.fin_queued && self.snd_una == self.fin_seq() + 1;
        match self.state {
            State::FinWait1 if fin_acked => {
                self.state = State::FinWait2;
                if self.orphan {
                    self.close_at = Some(cx.now + cx.cfg.fin_wait2_timeout);
                }
            }
            State::Closing if fin_acked => self.enter_time_wait(cx),
            State::LastAck if fin_acked => {
                self.state = State::Closed;
                cx.pool.free(payload);
                return Verdict::Remove;
            }
            State::TimeWait => {
                // Only a retransmitted FIN can arrive here: acknowledge it, restart 2 MSL.
                if flags.contains(Flags::FIN) {
                    self.ack_now = true;
                    self.enter_time_wait(cx);
                }
                cx.pool.free(payload);
                return verdict;
            }
            _ => {}
        }

        // 7. Segment text.
        if seg_len > 0 {
            match self.state {
                State::Established | State::FinWait1 | State::FinWait2 => {
                    if self.orphan {
                        // Nobody will read it (RFC 9293 §3.10.7.4 leaves this open; BSD and Linux reset).
                        cx.drops.add(DropReason::TcpDataAfterClose);
                        cx.pool.free(payload);
                        self.state = State::Closed;
                        return Verdict::Reset {
                            seq: self.snd_nxt.0,
                            ack: None,
                        };
                    }
                    // Trim what we already have, and what lies past the window.
                    if seq < self.rcv_nxt {
                        let skip = self.rcv_nxt - seq;
                        payload.pull_front(skip as usize);
                        seg_len -= skip;
                    }
                    let start = seq.max(self.rcv_nxt);
                    let room = self.rcv_adv.max(self.rcv_nxt + 1) - start;
                    let mut fin = flags.contains(Flags::FIN);
                    if seg_len > room {
                        payload.truncate(room as usize);
                        seg_len = room;
                        fin = false;
                    }
                    self.receive_text(start, payload, seg_len, fin, cx);
                    return self.after_fin_check(verdict, cx);
                }
                _ => {
                    // CLOSE-WAIT and later: the peer already sent its FIN; data past it is bogus.
                    cx.pool.free(payload);
                    return verdict;
                }
            }
        }
        cx.pool.free(payload);
        if flags.contains(Flags::FIN) {
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

    fn after_fin_check(&mut self, verdict: Verdict, cx: &mut Cx) -> Verdict {
        if self.ooo_fin == Some(self.rcv_nxt) && self.ooo.is_empty() {
            self.ooo_fin = None;
            self.fin_arrived(cx);
        }
        verdict
    }

    /// Queues in-window data that starts at `start` (at or after `rcv_nxt`).
    fn receive_text(&mut self, start: Seq, payload: PacketBuf, len: u32, fin: bool, cx: &mut Cx) {
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
            if fin {
                self.fin_arrived(cx);
            } else if had_holes {
                // Filling a hole is acknowledged at once (RFC 5681 §4.2).
                self.ack_now = true;
                self.ack_immediately = true;
            } else {
                self.data_arrived(len, cx);
            }
        } else {
            if !self.ooo.insert(start, payload, cx.max_ooo, cx.pool) && self.ooo.len() >= cx.max_ooo
            {
                cx.drops.add(DropReason::TcpOutOfOrderFull);
            }
            if fin {
                self.ooo_fin = Some(start + len);
            }
            // Out of order: a duplicate ACK at once, with SACK blocks (RFC 5681 §4.2), not
            // coalesced with the batch: the sender counts them for fast retransmit.
            self.ack_now = true;
            self.ack_immediately = true;
        }
    }

    /// The peer's FIN, in order.
    fn fin_arrived(&mut self, cx: &mut Cx) {
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

    fn enter_time_wait(&mut self, cx: &mut Cx) {
        self.state = State::TimeWait;
        self.rto_at = None;
        self.persist_at = None;
        self.keepalive_at = None;
        self.delack_at = None;
        self.close_at = Some(cx.now + 2 * cx.cfg.msl);
        self.tx.consume(self.tx.len());
    }

    /// A SYN for this 4-tuple while in TIME-WAIT: a new incarnation may start if its sequence
    /// numbers (or timestamps) are past the old one's (RFC 9293 §3.10.7.4 note, RFC 6191).
    fn time_wait_syn(&mut self, seg: &TcpRepr) -> Verdict {
        let newer_ts = match (self.ts_on, seg.options.timestamps) {
            (true, Some((val, _))) => (val.wrapping_sub(self.ts_recent) as i32) > 0,
            _ => false,
        };
        if Seq(seg.seq) > self.rcv_nxt || newer_ts {
            self.state = State::Closed;
            return Verdict::Remove;
        }
        self.ack_now = true;
        Verdict::Continue
    }

    fn reset_by_peer(&mut self, cx: &mut Cx) -> Verdict {
        let kind = match self.state {
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

    /// Ends the connection with error `kind` (reset, refused, timed out).
    pub(crate) fn abort(&mut self, kind: io::ErrorKind, cx: &mut Cx) {
        self.error = Some(kind);
        self.state = State::Closed;
        self.rto_at = None;
        self.delack_at = None;
        self.persist_at = None;
        self.keepalive_at = None;
        self.close_at = None;
        self.ooo.clear(cx.pool);
        self.ack_now = false;
        self.probe = None;
    }

    /// The duplicate ACK owed for an unacceptable segment (RFC 9293 §3.10.7.4), at most one per
    /// `invalid_ack_interval` for segments without data or FIN: an ACK answered by an ACK must not
    /// loop (Linux's `tcp_oow_rate_limited`). Data segments, a zero-window probe among them, are
    /// always answered.
    fn invalid_ack(&mut self, seg: &TcpRepr, seg_len: u32, cx: &mut Cx) {
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
    fn challenge_ack(&mut self, cx: &mut Cx) {
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

    fn on_segment_syn_sent(&mut self, seg: &TcpRepr, cx: &mut Cx) -> Verdict {
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
        self.take_syn(seg, cx.cfg);
        self.ack_now = true;
        self.no_checksum =
            self.alt_requested && seg.options.alt_checksum == Some(ALT_CHECKSUM_NONE);
        if flags.contains(Flags::ACK) {
            self.snd_una = ack;
            self.tx_seq = ack;
            self.state = State::Established;
            // The window of a SYN is never scaled (RFC 7323 §2.2).
            self.snd_wnd = seg.window as u32;
            self.max_snd_wnd = self.snd_wnd;
            self.snd_wl1 = Seq(seg.seq);
            self.snd_wl2 = ack;
            self.rto_at = None;
            self.retries = 0;
            if let Some((_, ecr)) = seg.options.timestamps.filter(|_| self.ts_on) {
                self.rtt_sample(
                    cx.now,
                    ts_clock(cx.now).wrapping_sub(ecr.wrapping_sub(self.ts_offset)),
                    cx,
                );
            } else if let Some((_, sent)) = self.rtt_probe.take() {
                let rtt = cx.now.saturating_since(sent);
                self.rtt_sample(cx.now, rtt.as_millis() as u32, cx);
            }
            Verdict::Continue
        } else {
            // Simultaneous open (RFC 9293 §3.5): SYN-RECEIVED, send a SYN-ACK.
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            Verdict::Continue
        }
    }

    /// The sequence number our FIN takes (valid once queued).
    fn fin_seq(&self) -> Seq {
        self.tx_seq + self.tx.len() as u32
    }

    /// Records SACK blocks about data we sent (RFC 2018 §3, RFC 6675).
    fn process_sack(&mut self, seg: &TcpRepr) {
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
    fn ack_advance(&mut self, ack: Seq, seg: &TcpRepr, cx: &mut Cx) {
        let acked = ack - self.snd_una;
        // RTT: from the echoed timestamp, else from the timed segment if it was not retransmitted.
        if let Some((_, ecr)) = seg.options.timestamps.filter(|_| self.ts_on) {
            let sent = ecr.wrapping_sub(self.ts_offset);
            let rtt_ms = ts_clock(cx.now).wrapping_sub(sent);
            if rtt_ms < 60_000 {
                self.rtt_sample(cx.now, rtt_ms, cx);
            }
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
        self.snd_una = ack;
        if self.snd_nxt < ack {
            self.snd_nxt = ack;
        }
        self.scoreboard.ack(ack);
        self.retries = 0;
        self.rto_at = if self.snd_una == self.snd_max {
            None
        } else {
            Some(cx.now + self.rto)
        };
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

    fn duplicate_ack(&mut self, cx: &mut Cx) {
        self.dupacks += 1;
        if self.recover.is_some() {
            return;
        }
        let sack_says_lost = self.sack_on && self.scoreboard.sacked_bytes() >= 3 * self.mss;
        if self.dupacks >= 3 || sack_says_lost {
            // Fast retransmit (RFC 5681 §3.2; RFC 6582: not twice for one window).
            cx.counters.fast_recoveries += 1;
            let flight = self.snd_max - self.snd_una;
            self.cc.on_loss(flight, self.mss);
            self.recover = Some(self.snd_max);
            self.rexmit_next = self.snd_una;
            self.rexmit_limit = if self.sack_on && !self.scoreboard.ranges.is_empty() {
                self.scoreboard.high().unwrap_or(self.snd_una + self.mss)
            } else {
                self.snd_una + self.mss
            };
            self.rtt_probe = None;
        }
    }

    /// One RTT measurement, in milliseconds (RFC 6298 §2).
    fn rtt_sample(&mut self, _now: Instant, rtt_ms: u32, cx: &mut Cx) {
        let r = Duration::from_millis(rtt_ms.max(1) as u64);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        self.rto = (srtt + (self.rttvar * 4).max(Duration::from_millis(1)))
            .clamp(cx.cfg.min_rto, cx.cfg.max_rto);
    }

    /// Bytes the network holds for us (RFC 6675 §4 "pipe", with every unSACKed byte below the highest
    /// SACKed one taken as lost, as FACK does).
    fn pipe(&self) -> u32 {
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

    // ---------------------------------------------------------------------------------------------
    // Timers.

    /// Runs the timers that are due. Returns `Remove` when the block is finished.
    pub(crate) fn on_timer(&mut self, cx: &mut Cx) -> Verdict {
        let now = cx.now;
        if self.close_at.is_some_and(|t| t <= now) {
            self.close_at = None;
            if self.state == State::FinWait2 {
                self.abort(io::ErrorKind::TimedOut, cx);
            }
            self.state = State::Closed;
            return Verdict::Remove;
        }
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.ack_now = true;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.rto_at = None;
            return self.retransmit_timeout(cx);
        }
        if self.persist_at.is_some_and(|t| t <= now) {
            self.persist_at = None;
            self.persist_backoff += 1;
            self.probe = Some(Probe::Window);
        }
        if self.keepalive_at.is_some_and(|t| t <= now) {
            let (_, interval, probes) = cx.cfg.keepalive;
            if self.keepalive_probes >= probes {
                cx.counters.estab_resets += 1;
                self.abort(io::ErrorKind::TimedOut, cx);
                return Verdict::Reset {
                    seq: self.snd_nxt.0,
                    ack: None,
                };
            }
            self.keepalive_probes += 1;
            self.keepalive_at = Some(now + interval);
            self.probe = Some(Probe::KeepAlive);
        }
        Verdict::Continue
    }

    fn retransmit_timeout(&mut self, cx: &mut Cx) -> Verdict {
        cx.counters.timeouts += 1;
        self.retries += 1;
        let limit = if self.state.is_synchronized() {
            cx.cfg.max_retries
        } else {
            cx.cfg.syn_retries
        };
        if self.retries > limit {
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
        }
        self.snd_nxt = self.snd_una;
        self.recover = None;
        self.dupacks = 0;
        self.scoreboard.clear();
        self.rtt_probe = None;
        Verdict::Continue
    }

    // ---------------------------------------------------------------------------------------------
    // Output.

    /// The next segment to send, if any, and the block's state updated as if it was sent. `tso_max`
    /// is the largest payload the link will cut into MSS-sized segments, when it can.
    pub(crate) fn next_segment(&mut self, cx: &mut Cx, tso_max: Option<usize>) -> Option<Outgoing> {
        let now = cx.now;
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived if self.snd_nxt == self.iss => {
                return Some(self.syn_segment(cx));
            }
            _ => {}
        }
        if let Some(out) = self.data_segment(cx, tso_max) {
            return Some(out);
        }
        if let Some(probe) = self.probe.take() {
            return Some(self.probe_segment(probe, now));
        }
        if self.ack_now && self.state != State::SynSent {
            let repr = self.header(Flags::ACK, self.snd_nxt);
            return Some(self.finish(repr, 0, 0, None));
        }
        // Nothing to send, yet data waits with nothing in flight: the peer's window is closed (or too
        // small for silly window avoidance to send into). The persist timer probes a closed window
        // (RFC 9293 §3.8.6.1) and is the override timeout for a small one (RFC 1122 §4.2.3.4).
        if self.snd_nxt == self.snd_una
            && self.rto_at.is_none()
            && (self.tx.len() > (self.snd_nxt - self.tx_seq) as usize)
            && self.persist_at.is_none()
            && self.state.is_synchronized()
        {
            let backoff = self.rto * (1 << self.persist_backoff.min(6));
            self.persist_at = Some(now + backoff.clamp(cx.cfg.min_rto, cx.cfg.max_rto));
        }
        None
    }

    fn syn_segment(&mut self, cx: &mut Cx) -> Outgoing {
        let cfg = cx.cfg;
        let passive = self.state == State::SynReceived;
        let flags = if passive {
            Flags::SYN | Flags::ACK
        } else {
            Flags::SYN
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
        // The window in a SYN is never scaled (RFC 7323 §2.2).
        repr.window = self.rx_free().min(65535) as u16;
        repr.options = o;
        if self.snd_max == self.iss {
            self.rtt_probe = Some((self.iss, cx.now));
        } else {
            cx.counters.retrans_segs += 1;
            self.retransmits += 1;
        }
        self.snd_nxt = self.iss + 1;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.rto_at.get_or_insert(cx.now + self.rto);
        self.ack_now = false;
        Outgoing {
            repr,
            offset: 0,
            len: 0,
            segment_size: None,
        }
    }

    /// Data (and FIN) the windows allow, with Nagle and sender silly window avoidance; in recovery,
    /// a retransmission first.
    fn data_segment(&mut self, cx: &mut Cx, tso_max: Option<usize>) -> Option<Outgoing> {
        if !matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) {
            return None;
        }
        let now = cx.now;
        let wnd = self.snd_wnd.min(self.cc.cwnd);

        // Loss recovery: resend the next hole while the pipe has room (RFC 6675 §5, RFC 6582).
        if self.recover.is_some() && self.rexmit_next < self.rexmit_limit {
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
                let len = (hole_end - start).min(self.segment_limit()) as usize;
                let data_end = self.tx_seq + self.tx.len() as u32;
                let len = len.min((data_end - start.min(data_end)) as usize);
                self.rexmit_next = start + len.max(1) as u32;
                let fin = self.fin_queued && start + len as u32 == self.fin_seq();
                if len > 0 || fin {
                    cx.counters.retrans_segs += 1;
                    self.retransmits += 1;
                    let mut flags = Flags::ACK;
                    if fin {
                        flags = flags | Flags::FIN;
                    }
                    let repr = self.header(flags, start);
                    let offset = (start - self.tx_seq) as usize;
                    return Some(self.finish(repr, offset, len, None));
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
        let in_flight = self.pipe();
        let usable = if self.recover.is_some() {
            self.cc
                .cwnd
                .saturating_sub(in_flight)
                .min((self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as u32)
        } else {
            (self.snd_una + wnd).diff(self.snd_nxt).max(0) as u32
        };
        let limit = self.segment_limit();
        let max_seg = match tso_max {
            Some(m) if cx.cfg.segmentation_offload => (m as u32 / limit).max(1) * limit,
            _ => limit,
        };
        let len = (available as u32).min(usable).min(max_seg) as usize;
        let all = len == available;
        let fin = self.fin_queued && all && self.snd_nxt + len as u32 == self.fin_seq();
        if len == 0 && !fin {
            return None;
        }
        // Sender-side silly window avoidance and Nagle (RFC 9293 §3.8.6.2.1, RFC 1122 §4.2.3.4).
        let retransmitting = self.snd_nxt < self.snd_max;
        let full = len as u32 >= limit;
        let nothing_out = self.snd_una == self.snd_nxt;
        let send = full
            || fin
            || retransmitting
            || (all && (self.nodelay || nothing_out))
            || (self.max_snd_wnd > 0 && len as u32 >= self.max_snd_wnd / 2);
        if !send {
            return None;
        }
        let seq = self.snd_nxt;
        let mut flags = Flags::ACK;
        if fin {
            flags = flags | Flags::FIN;
        }
        if len > 0 && all {
            flags = flags | Flags::PSH;
        }
        if retransmitting {
            cx.counters.retrans_segs += 1;
            self.retransmits += 1;
        } else if self.rtt_probe.is_none() && !self.ts_on {
            self.rtt_probe = Some((seq, now));
        }
        let repr = self.header(flags, seq);
        self.snd_nxt = seq + len as u32 + fin as u32;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.rto_at.get_or_insert(now + self.rto);
        let segment_size = (len as u32 > limit).then_some(limit as u16);
        Some(self.finish(repr, offset, len, segment_size))
    }

    fn probe_segment(&mut self, probe: Probe, now: Instant) -> Outgoing {
        match probe {
            Probe::Window => {
                // What the window takes, or one byte past a closed window (RFC 9293 §3.8.6.1).
                let offset = (self.snd_nxt - self.tx_seq) as usize;
                let available = self.tx.len().saturating_sub(offset);
                let usable = (self.snd_una + self.snd_wnd).diff(self.snd_nxt).max(0) as usize;
                let len = available
                    .min(usable.max(1))
                    .min(self.segment_limit() as usize);
                if len > 0 {
                    self.snd_nxt = self.snd_nxt + len as u32;
                    self.snd_max = self.snd_max.max(self.snd_nxt);
                    self.rto_at.get_or_insert(now + self.rto);
                    let repr = self.header(Flags::ACK, self.snd_nxt - len as u32);
                    self.persist_at = None;
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
    fn header(&mut self, flags: Flags, seq: Seq) -> TcpRepr {
        let mut repr = TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
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
    fn finish(
        &mut self,
        mut repr: TcpRepr,
        offset: usize,
        len: usize,
        segment_size: Option<u16>,
    ) -> Outgoing {
        if repr.flags.contains(Flags::ACK) {
            // The clock is read by the stack: `ts_val` is filled in by `stamp`.
            if self.ts_on {
                repr.options.timestamps = Some((0, self.ts_recent));
            }
            if self.sack_on && !self.ooo.is_empty() {
                let max = if self.ts_on { 3 } else { MAX_SACK_BLOCKS };
                let n = self.ooo.sack_blocks(&mut repr.options.sack, max);
                repr.options.sack_count = n as u8;
            }
            self.last_ack_sent = self.rcv_nxt;
            self.ack_now = false;
            self.delack_at = None;
            self.unacked_segments = 0;
        }
        Outgoing {
            repr,
            offset,
            len,
            segment_size,
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

    /// Frees every buffer the block holds.
    pub(crate) fn release(&mut self, pool: &mut BufferPool) {
        self.rx.clear(pool);
        self.ooo.clear(pool);
    }

    /// The sequence numbers a RST sent on the application's abort must carry.
    pub(crate) fn reset_fields(&self) -> (u32, u32) {
        (self.snd_nxt.0, self.rcv_nxt.0)
    }

    /// True once every byte written was acknowledged and no FIN is outstanding.
    pub(crate) fn all_acked(&self) -> bool {
        self.snd_una == self.snd_max && self.tx.len() == 0
    }

    /// Arms keep-alive.
    pub(crate) fn set_keepalive(&mut self, on: bool, now: Instant, idle: Duration) {
        self.keepalive = on;
        self.keepalive_at = on.then(|| now + idle);
        self.keepalive_probes = 0;
    }
}

/// Kay & Pasquale's condition for leaving the checksum out (paper 001): switched on, the route's link
/// protects packets with a CRC, and the next hop is the destination itself.
fn eliminable(cfg: &TcpConfig, hop: &NextHop, remote: SocketAddrV4) -> bool {
    cfg.alt_checksum && hop.caps.crc_protected && hop.next_hop == *remote.ip()
}
