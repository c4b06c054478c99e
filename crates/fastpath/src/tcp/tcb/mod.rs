//! One connection: its transmission control block and the RFC 9293 state machine.
//!
//! The block reacts to three things: an arriving segment ([`Tcb::on_segment`], with Jacobson's header
//! prediction in front of it as [`Tcb::predict`]), a timer ([`Tcb::on_timer`]) and the application
//! (write, read, close). It never sends by itself: it records what is owed (an ACK, data the windows
//! allow, a retransmission) and [`Tcb::next_segment`] says what the next segment to send is, so that the
//! stack builds every outgoing segment in one place.

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::buffers::{OutOfOrder, PushMarks, ReceiveQueue, Scoreboard, SendBuffer};
use super::congestion::{Congestion, Prr};
use super::rack::{Rack, SentLog};
use super::seq::Seq;
use super::writes::{
    Completions, RecordEnds, RxTimestamps, TxTimestamping, TxTimestamps, WriteFlags,
};
use crate::addr::IpAddress;
use crate::buf::{BufferPool, PacketBuf};
use crate::config::{Ecn, TcpConfig};
use crate::ip::NextHop;
use crate::stats::{DropReason, Drops, TcpCounters};
use crate::time::{nanos, Instant};
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

/// How a connection takes part in path MTU discovery over IPv4 (RFC 1191), Linux's
/// `IP_MTU_DISCOVER` as it applies to a stream socket. The stack's
/// [`StackConfig::path_mtu_discovery`](crate::StackConfig::path_mtu_discovery) off turns it off
/// for every connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathMtuDiscovery {
    /// Segments go with don't-fragment set, and a "fragmentation needed" lowers the connection's
    /// MSS (Linux's `IP_PMTUDISC_WANT` and `IP_PMTUDISC_DO`; the default).
    #[default]
    Discover,
    /// Segments go without don't-fragment, for routers to fragment, and the connection keeps its
    /// MSS (`IP_PMTUDISC_DONT`).
    Dont,
    /// Segments go with don't-fragment set, and the connection keeps its MSS whatever ICMP says
    /// (`IP_PMTUDISC_INTERFACE`, `IP_PMTUDISC_OMIT`).
    Interface,
}

impl PathMtuDiscovery {
    /// Whether the connection's segments carry don't-fragment.
    pub(crate) fn dont_fragment(self) -> bool {
        self != PathMtuDiscovery::Dont
    }

    /// Whether a "fragmentation needed" lowers the connection's MSS.
    pub(crate) fn follows_icmp(self) -> bool {
        self == PathMtuDiscovery::Discover
    }
}

/// Where a connection's loss recovery stands (the states of Linux's `tcpi_ca_state`, those this stack
/// has: no ECN, so no CWR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CongestionState {
    /// Nothing unusual: ACKs advance in order.
    #[default]
    Open,
    /// Duplicate ACKs or SACKs arrived, not yet enough to call a segment lost.
    Disorder,
    /// Fast recovery (RFC 6582, RFC 6675) after a fast retransmit.
    Recovery,
    /// A retransmission timeout: everything outstanding at the time is being sent again.
    Loss,
}

/// Per-connection figures, for applications and tests (Linux's `TCP_INFO` has the same figures;
/// sizes here are in bytes where Linux counts segments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The connection's state.
    pub state: State,
    /// Where loss recovery stands.
    pub congestion_state: CongestionState,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (`u32::MAX` until the first loss).
    pub ssthresh: u32,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// The RTT's mean deviation (RFC 6298's RTTVAR; zero before the first measurement).
    pub rttvar: Duration,
    /// The smallest RTT measured, if any.
    pub min_rtt: Option<Duration>,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// Doublings of the RTO since it was last computed from the RTT (Linux's `tcpi_backoff`).
    pub backoff: u32,
    /// Window or keep-alive probes sent without an answer.
    pub probes: u32,
    /// MSS used for sending.
    pub mss: u32,
    /// The MSS our SYN offered.
    pub advertised_mss: u32,
    /// The path MTU the MSS is sized for.
    pub path_mtu: u32,
    /// The peer's receive window, bytes.
    pub snd_wnd: u32,
    /// The receive window we last advertised, bytes from RCV.NXT.
    pub rcv_wnd: u32,
    /// The peer's window scale shift, when window scaling was negotiated (else 0).
    pub snd_window_shift: u8,
    /// Our window scale shift, when window scaling was negotiated (else 0).
    pub rcv_window_shift: u8,
    /// Sequence space sent and not acknowledged (data, SYN, FIN), bytes.
    pub unacked: u32,
    /// Of `unacked`, bytes the peer reported received by SACK.
    pub sacked: u32,
    /// Of `unacked`, bytes taken as lost: everything not SACKed after a timeout; in recovery, what
    /// RACK marked lost and is not SACKed since, resent or not (Linux's `lost_out`), or without
    /// RACK the holes below the highest SACK (one MSS without SACK).
    pub lost: u32,
    /// Of `unacked`, bytes sent again and neither acknowledged nor SACKed since (Linux's
    /// `retrans_out`, in bytes), from RACK's record; 0 when RACK is off.
    pub retransmitted_out: u32,
    /// Bytes written and not sent yet.
    pub not_sent: u32,
    /// The degree of reordering in segments (Linux's `tcpi_reordering`): RFC 5681's DupThresh of 3,
    /// raised (with RACK, up to Linux's limit of 300) to the farthest a segment has been seen to
    /// arrive behind segments sent after it.
    pub dupack_threshold: u32,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Segments sent, retransmissions and pure ACKs included.
    pub segments_out: u64,
    /// Segments received for the connection.
    pub segments_in: u64,
    /// Segments sent that carried data.
    pub data_segments_out: u64,
    /// Segments received that carried data.
    pub data_segments_in: u64,
    /// The largest payload a segment brought (what the peer's MSS seems to be; 0 before data).
    pub largest_segment_in: u32,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: u64,
    /// Sequence space the peer acknowledged after the handshake (data, and a FIN).
    pub bytes_acked: u64,
    /// Segments the peer acknowledged, our SYN (with any data it carried) counting as one, each
    /// ACK that advances counting at least one (Linux's `tcpi_delivered`).
    pub delivered: u64,
    /// Payload bytes received in order.
    pub bytes_received: u64,
    /// When data was last sent.
    pub last_data_sent: Option<Instant>,
    /// When a segment with data, or the peer's SYN (as Linux counts from the handshake), last
    /// arrived.
    pub last_data_received: Option<Instant>,
    /// When a segment with an ACK last arrived.
    pub last_ack_received: Option<Instant>,
    /// ACKs that showed segments arriving out of order, behind segments sent after them (Linux's
    /// `tcpi_reord_seen`; with RACK).
    pub reorderings: u64,
    /// Segments the peer reported, by D-SACK, to have arrived twice (Linux's `tcpi_dsack_dups`;
    /// with RACK).
    pub dsack_dups: u64,
    /// Time spent with data queued or in flight (Linux's `tcpi_busy_time`), the two below
    /// included.
    pub busy_time: Duration,
    /// Of `busy_time`, time the peer's receive window held data back.
    pub rwnd_limited: Duration,
    /// Of `busy_time`, time writes waited for room in the send buffer.
    pub sndbuf_limited: Duration,
    /// Whether SACK, timestamps and window scaling were negotiated.
    pub sack: bool,
    /// See `sack`.
    pub timestamps: bool,
    /// See `sack`.
    pub window_scaling: bool,
    /// TCP Fast Open carried data in the SYN: a listener took it, or the server acknowledged ours
    /// (Linux's `TCPI_OPT_SYN_DATA`).
    pub syn_data: bool,
}

/// Per-connection settings (socket options) a connection takes before its SYN or SYN-ACK: given to
/// [`Stack::tcp_connect_with`](crate::Stack::tcp_connect_with), or set on a listener for the
/// connections it accepts. `None` keeps the stack's configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSocketOptions {
    /// Send buffer, bytes (see [`TcpStreamRef::set_send_buffer`](crate::TcpStreamRef::set_send_buffer)).
    pub send_buffer: Option<usize>,
    /// Receive buffer, bytes: it fixes the window scale the SYN offers (see
    /// [`TcpStreamRef::set_recv_buffer`](crate::TcpStreamRef::set_recv_buffer)).
    pub recv_buffer: Option<usize>,
    /// The MSS limit, both ways (`TCP_MAXSEG`, 88 to 32767; see
    /// [`TcpStreamRef::set_max_segment`](crate::TcpStreamRef::set_max_segment)).
    pub max_segment: Option<u16>,
    /// SYN retransmissions before `connect` gives up (`TCP_SYNCNT`), instead of the stack's
    /// [`TcpConfig::syn_retries`].
    pub syn_retries: Option<u32>,
    /// The type of service of every segment, the SYN (or SYN-ACK) included (`IP_TOS`; see
    /// [`TcpStreamRef::set_tos`](crate::TcpStreamRef::set_tos)).
    pub tos: u8,
    /// Path MTU discovery over IPv4, the SYN included (`IP_MTU_DISCOVER`; see
    /// [`PathMtuDiscovery`]).
    pub path_mtu_discovery: PathMtuDiscovery,
}

/// What limits a connection's sending, for the times [`ConnectionInfo`] reports (Linux's
/// "chrono" accounting, in its order: a higher kind replaces a lower one when it starts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Chrono {
    /// Nothing to send nor outstanding.
    #[default]
    Idle,
    /// Data queued or in flight.
    Busy,
    /// Data waits for the peer's receive window.
    RwndLimited,
    /// The application waits for room in the send buffer.
    SndbufLimited,
}

/// Time spent in each [`Chrono`] kind but the current one, and the current one with its start, in
/// microseconds (integers: a switch happens at most a few times per exchange, on the fast path).
#[derive(Clone, Copy, Debug, Default)]
struct Chronos {
    kind: Chrono,
    since: u64,
    busy: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
}

impl Chronos {
    fn switch(&mut self, to: Chrono, now: Instant) {
        let now = now.total_micros();
        let spent = now.saturating_sub(self.since);
        match self.kind {
            Chrono::Idle => {}
            Chrono::Busy => self.busy += spent,
            Chrono::RwndLimited => self.rwnd_limited += spent,
            Chrono::SndbufLimited => self.sndbuf_limited += spent,
        }
        self.kind = to;
        self.since = now;
    }

    /// The three totals (busy including the limited times, receive-window limited, send-buffer
    /// limited), with the current kind counted up to `now` when given.
    fn totals(&self, now: Option<Instant>) -> (Duration, Duration, Duration) {
        let mut c = *self;
        if let Some(now) = now {
            c.switch(c.kind, now);
        }
        (
            Duration::from_micros(c.busy + c.rwnd_limited + c.sndbuf_limited),
            Duration::from_micros(c.rwnd_limited),
            Duration::from_micros(c.sndbuf_limited),
        )
    }
}

/// What a connection sent and received, for [`ConnectionInfo`]: counters bumped once per segment.
#[derive(Clone, Copy, Debug, Default)]
struct Activity {
    segments_out: u64,
    segments_in: u64,
    data_segments_out: u64,
    data_segments_in: u64,
    largest_segment_in: u32,
    bytes_sent: u64,
    bytes_retransmitted: u64,
    bytes_acked: u64,
    delivered: u64,
    last_data_sent: Option<Instant>,
    last_data_received: Option<Instant>,
    last_ack_received: Option<Instant>,
    /// The least RTT sample, nanoseconds (0: none yet).
    min_rtt: u64,
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
    /// The IP header's ECN field: ECT(0) for new data of a connection with ECN, else 0.
    pub(crate) ecn: u8,
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
    /// Our first SYN asked for a cookie (without data) and the SYN-ACK had no Fast Open option at
    /// all: for the stack's cache, the format to ask in next (Linux's `try_exp`: 1, the
    /// experimental option, after a request in kind 34; 2, kind 34 again, after one in the
    /// experimental option; 0: nothing learned).
    pub(crate) fast_open_try_exp: u8,
    /// Bytes of data the SYN carried (Fast Open): an active open's first SYN, from its send buffer;
    /// a passive open's, taken by its listener.
    pub(crate) syn_data: u32,
    /// SYN-RECEIVED reached from SYN-SENT by the peer's SYN crossing ours (RFC 9293 §3.5).
    pub(crate) simultaneous_open: bool,
    /// The last ICMP error about the connection since the peer's last acknowledgment (Linux's
    /// `sk_err_soft`): reported instead of "timed out" if the connection times out.
    pub(crate) soft_error: Option<io::ErrorKind>,
    /// ACKs left to send at once in quick-ACK mode (`TcpConfig::quick_ack`).
    quick_acks: u8,
    /// Data arrived (in order, out of order or again) since the last ACK went: that ACK spends
    /// one of `quick_acks` (Linux's `ICSK_ACK_SCHED`).
    ack_scheduled: bool,
    /// When in-order data last arrived (none yet: the first starts quick-ACK mode, and nothing sent
    /// before it makes the connection interactive); a silence longer than the RTO restarts quick-ACK
    /// mode.
    last_data_in: Option<Instant>,
    /// Interactive (Linux's "pingpong" mode): we sent data within the delayed-ACK time of the last
    /// data received, so ACKs wait to ride on our answers, quick-ACK mode or not. The delayed-ACK
    /// timer firing ends it.
    pingpong: bool,
    /// The end of the last new segment sent shorter than a full one (Linux's `snd_sml`): while it
    /// is unacknowledged, Nagle with Minshall's change holds the next partial segment.
    snd_sml: Seq,
    /// The application waits to write once the connection is established (`expect_write`).
    write_pending: bool,
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
    push_marks: PushMarks,
    /// Where records end (`MSG_EOR`): no segment crosses one.
    records: RecordEnds,
    /// Writes the application asked to hear acknowledged (`MSG_ZEROCOPY` notifications).
    pub(crate) completions: Completions,
    /// Transmit timestamps of the writes' last bytes (`SO_TIMESTAMPING`).
    pub(crate) tx_stamps: TxTimestamps,
    /// Receive timestamps: when the bytes read arrived.
    pub(crate) rx_stamps: RxTimestamps,
    /// `TCP_CORK`: a partial segment waits for more data (or the persist timer's override).
    corked: bool,
    /// The latest write said more follows (`MSG_MORE`): its partial segment waits like a corked
    /// one, until a write without the flag or an acknowledgment moves the connection on.
    more: bool,
    /// One output that sends what cork and `MSG_MORE` hold (Linux's `TCP_NAGLE_PUSH`, set by
    /// `TCP_NODELAY` and by uncorking).
    pub(crate) push_now: bool,
    /// The sequence range of the transmission unit the data segments being sent belong to (the TSO
    /// packet Linux would send), for the PSH flag of its last segment.
    unit: (Seq, Seq),
    /// Payload bytes per segment we send.
    pub(crate) mss: u32,
    /// The largest MSS our route allows (for our SYN's MSS option).
    pub(crate) local_mss: u16,
    /// The application's limit on the MSS, both ways (`TCP_MAXSEG`).
    user_mss: Option<u16>,
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
    /// ECN (RFC 3168, [`TcpConfig::ecn`]): asked for (before the handshake's end), then negotiated.
    ecn_on: bool,
    /// A congestion mark (CE) arrived: every ACK carries ECE until the peer's CWR (§6.1.3).
    ece_owed: bool,
    /// The window was reduced for an echo: the next new data segment carries CWR (§6.1.2).
    cwr_owed: bool,
    /// No other reduction for an echo until the cumulative ACK reaches this: one per window.
    ecn_recover: Option<Seq>,
    /// A duplicate segment to report as the next ACK's first SACK block (RFC 2883 D-SACK).
    dsack: Option<(Seq, Seq)>,
    pub(crate) fin_received: bool,

    // Options in use.
    ts_on: bool,
    ts_recent: u32,
    ts_offset: u32,
    sack_on: bool,
    ws_on: bool,
    last_ack_sent: Seq,

    // Retransmission (RFC 6298), in nanoseconds: integers, as the least RTT in `activity`, since
    // `Duration`'s arithmetic (and its conversion to the clock's microseconds) carries between
    // seconds and nanoseconds at every step of a sample taken twice per request/response.
    rto: u64,
    srtt: Option<u64>,
    rttvar: u64,
    /// Karn: a sequence number being timed and when it was sent (without timestamps).
    rtt_probe: Option<(Seq, Instant)>,
    /// Retransmission timeouts in a row without progress (Linux's `icsk_retransmits`).
    retries: u32,
    /// Doublings of the RTO since it was last computed from the RTT (Linux's `icsk_backoff`): one
    /// less after an ICMP unreachable about what is being retransmitted (RFC 6069).
    backoff: u32,
    /// When the run of retransmission timeouts under way began (the retransmission timer's start
    /// before the first): what a synchronized connection's give-up time counts from.
    retry_since: Option<Instant>,

    /// Every timer's deadline (see [`Timer`]).
    timers: Timers,
    /// New data went in the burst under way: the retransmission timer or the tail loss probe is to
    /// be armed when it ends ([`Tcb::burst_sent`]).
    new_data_sent: bool,
    persist_backoff: u32,
    /// Window probes sent since the peer last answered anything (Linux's `icsk_probes_out`):
    /// `TcpConfig::max_retries` of them unanswered (an orphan's `orphan_retries`) end the
    /// connection.
    probes_out: u32,
    /// When the first window probe of the present closed window went (Linux's
    /// `icsk_probes_tstamp`): the user timeout counts from it.
    probe_since: Option<Instant>,
    keepalive_probes: u32,
    /// With keep-alive on, when the peer was last heard from (or keep-alive turned on).
    heard_at: Instant,
    pub(crate) keepalive: bool,
    /// Keep-alive's idle time, interval and probes for this connection (`TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`, `TCP_KEEPCNT`), instead of the stack's [`TcpConfig::keepalive`].
    keepalive_times: Option<(Duration, Duration, u32)>,
    /// SYN retransmissions before giving up, instead of the stack's (`TCP_SYNCNT`).
    syn_retries: Option<u32>,

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
    /// What is in flight and when each segment was last sent, for RACK (empty when RACK is off).
    sent_log: SentLog,
    /// RACK-TLP's state (RFC 8985).
    rack: Rack,
    /// Proportional rate reduction's counts in the current recovery (RFC 6937).
    prr: Prr,
    pub(crate) cc: Congestion,

    pub(crate) nodelay: bool,
    /// The DSCP the connection's segments carry in the IPv4 TOS byte or IPv6 traffic class (its
    /// top six bits, the ECN field's two clear: TCP sets those).
    pub(crate) dscp: u8,
    /// How the connection takes part in path MTU discovery (IPv4).
    pub(crate) pmtu: PathMtuDiscovery,
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
    /// A retransmission timeout sent everything below this sequence number again: in loss until it
    /// is acknowledged (Linux's Loss state, until `high_seq`).
    loss_until: Option<Seq>,
    activity: Activity,
    chronos: Chronos,
    /// `TCP_NOTSENT_LOWAT`: writes wait while this many bytes or more are queued and not sent.
    notsent_lowat: Option<u32>,
    /// `TCP_USER_TIMEOUT` (RFC 5482): the connection is aborted once sent data has gone this long
    /// without an acknowledgment.
    user_timeout: Option<Duration>,
    /// Since when the peer has acknowledged nothing of what is outstanding: the first send into
    /// an empty flight, or the last ACK that acknowledged something.
    unacked_since: Option<Instant>,
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
            Self::shift_for(cfg.recv_buffer)
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
            fast_open_try_exp: 0,
            syn_data: 0,
            simultaneous_open: false,
            soft_error: None,
            quick_acks: 0,
            ack_scheduled: false,
            last_data_in: None,
            pingpong: false,
            snd_sml: iss,
            write_pending: false,
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
            push_marks: PushMarks::default(),
            records: RecordEnds::default(),
            completions: Completions::default(),
            tx_stamps: TxTimestamps::default(),
            rx_stamps: RxTimestamps::default(),
            corked: false,
            more: false,
            push_now: false,
            unit: (iss, iss),
            mss,
            local_mss,
            user_mss: None,
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
            dsack: None,
            ecn_on: false,
            ece_owed: false,
            cwr_owed: false,
            ecn_recover: None,
            fin_received: false,
            ts_on: false,
            ts_recent: 0,
            ts_offset: iss.0.rotate_left(13),
            sack_on: false,
            ws_on: false,
            last_ack_sent: Seq(0),
            rto: nanos(cfg.initial_rto),
            srtt: None,
            rttvar: 0,
            rtt_probe: None,
            retries: 0,
            backoff: 0,
            retry_since: None,
            timers: Timers::default(),
            new_data_sent: false,
            persist_backoff: 0,
            probes_out: 0,
            probe_since: None,
            keepalive_probes: 0,
            heard_at: Instant::ZERO,
            keepalive: false,
            keepalive_times: None,
            syn_retries: None,
            ack_now: false,
            unacked_segments: 0,
            probe: None,
            dupacks: 0,
            recover: None,
            scoreboard: Scoreboard::default(),
            rexmit_next: iss,
            rexmit_limit: iss,
            sent_log: SentLog::default(),
            rack: Rack::default(),
            prr: Prr::default(),
            cc: Congestion::limited(cfg.congestion, mss, cfg.slow_start_ack_limit),
            nodelay: false,
            dscp: 0,
            pmtu: PathMtuDiscovery::Discover,
            no_checksum: false,
            alt_requested: false,
            ack_immediately: false,
            challenge_window: (0, 0),
            last_invalid_ack: None,
            retransmits: 0,
            loss_until: None,
            activity: Activity::default(),
            chronos: Chronos::default(),
            notsent_lowat: None,
            user_timeout: None,
            unacked_since: None,
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
        tcb.ecn_on = cfg.ecn == Ecn::On;
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
        // An ECN-setup SYN has both ECE and CWR (RFC 3168 §6.1.1).
        tcb.ecn_on =
            cfg.ecn != Ecn::Off && syn.flags.contains(Flags::ECE) && syn.flags.contains(Flags::CWR);
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

    /// Where loss recovery stands.
    fn congestion_state(&self) -> CongestionState {
        if self.loss_until.is_some() {
            CongestionState::Loss
        } else if self.recover.is_some() {
            CongestionState::Recovery
        } else if self.dupacks > 0 || !self.scoreboard.ranges.is_empty() {
            CongestionState::Disorder
        } else {
            CongestionState::Open
        }
    }

    /// Bytes outstanding taken as lost (see [`ConnectionInfo::lost`]).
    fn lost_bytes(&self) -> u32 {
        let flight = self.snd_max - self.snd_una;
        let sacked = self.scoreboard.sacked_bytes();
        if self.loss_until.is_some() {
            flight.saturating_sub(sacked)
        } else if self.recover.is_some() && !self.sent_log.is_empty() {
            self.sent_log.marked_bytes()
        } else if self.recover.is_some() {
            match self.scoreboard.high().filter(|_| self.sack_on) {
                Some(high) => self.scoreboard.holes_between(self.snd_una, high),
                None => flight.min(self.mss),
            }
        } else {
            0
        }
    }

    /// Figures for the application, the times up to the last change of what limits sending.
    #[cfg(test)]
    pub(crate) fn info(&self) -> ConnectionInfo {
        self.info_at(None)
    }

    /// Figures for the application, the times counted up to `now` when given.
    pub(crate) fn info_at(&self, now: Option<Instant>) -> ConnectionInfo {
        let a = &self.activity;
        let (busy_time, rwnd_limited, sndbuf_limited) = self.chronos.totals(now);
        let shifts = if self.ws_on {
            (self.snd_shift, self.rcv_shift)
        } else {
            (0, 0)
        };
        ConnectionInfo {
            state: self.state,
            congestion_state: self.congestion_state(),
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
            srtt: self.srtt.map(Duration::from_nanos),
            rttvar: Duration::from_nanos(self.rttvar),
            min_rtt: (a.min_rtt > 0).then(|| Duration::from_nanos(a.min_rtt)),
            rto: Duration::from_nanos(self.rto),
            backoff: self.backoff,
            probes: self.probes_out.max(self.keepalive_probes),
            mss: self.mss,
            advertised_mss: u32::from(self.local_mss),
            path_mtu: self.path_mtu as u32,
            snd_wnd: self.snd_wnd,
            rcv_wnd: if self.rcv_adv > self.rcv_nxt {
                self.rcv_adv - self.rcv_nxt
            } else {
                0
            },
            snd_window_shift: shifts.0,
            rcv_window_shift: shifts.1,
            unacked: self.snd_max - self.snd_una,
            sacked: self.scoreboard.sacked_bytes(),
            lost: self.lost_bytes(),
            retransmitted_out: self.sent_log.retransmitted_out(),
            not_sent: self.not_sent() as u32,
            dupack_threshold: DUPTHRESH.max(
                self.rack
                    .reorder_distance
                    .div_ceil(self.mss.max(1))
                    .min(300),
            ),
            retransmits: self.retransmits,
            segments_out: a.segments_out,
            segments_in: a.segments_in,
            data_segments_out: a.data_segments_out,
            data_segments_in: a.data_segments_in,
            largest_segment_in: a.largest_segment_in,
            bytes_sent: a.bytes_sent,
            bytes_retransmitted: a.bytes_retransmitted,
            bytes_acked: a.bytes_acked,
            delivered: a.delivered,
            bytes_received: self.rx.total,
            last_data_sent: a.last_data_sent,
            last_data_received: a.last_data_received,
            last_ack_received: a.last_ack_received,
            reorderings: self.rack.reorderings,
            dsack_dups: self.rack.dsack_dups,
            busy_time,
            rwnd_limited,
            sndbuf_limited,
            sack: self.sack_on,
            timestamps: self.ts_on,
            window_scaling: self.ws_on,
            syn_data: self.fast_open && self.syn_data > 0,
        }
    }

    /// Counts a segment that arrived for this connection (`len` payload bytes), before it is
    /// processed.
    #[inline]
    pub(crate) fn note_arrival(&mut self, seg: &TcpRepr, len: usize, now: Instant) {
        let a = &mut self.activity;
        a.segments_in += 1;
        if len > 0 {
            a.data_segments_in += 1;
            a.largest_segment_in = a.largest_segment_in.max(len as u32);
        }
        if len > 0 || seg.flags.contains(Flags::SYN) {
            a.last_data_received = Some(now);
        }
        if seg.flags.contains(Flags::ACK) {
            a.last_ack_received = Some(now);
        }
    }

    /// Counts a segment [`Self::next_segment`] returns; `flight_was_empty` when nothing was
    /// outstanding before it (the user timeout's clock starts).
    #[inline]
    fn note_departure(&mut self, out: &Outgoing, flight_was_empty: bool, now: Instant) {
        if flight_was_empty && self.snd_max != self.snd_una {
            self.unacked_since = Some(now);
        }
        let a = &mut self.activity;
        let segments = match out.segment_size {
            Some(size) if size > 0 => out.len.div_ceil(usize::from(size)).max(1) as u64,
            _ => 1,
        };
        a.segments_out += segments;
        if out.len > 0 {
            a.data_segments_out += segments;
            a.bytes_sent += out.len as u64;
            a.last_data_sent = Some(now);
        }
    }

    /// Starts counting time as limited by `kind`, unless a higher kind is counting.
    #[inline]
    pub(crate) fn chrono_start(&mut self, kind: Chrono, now: Instant) {
        if kind > self.chronos.kind {
            self.chronos.switch(kind, now);
        }
    }

    /// Stops counting time as limited by `kind`, if it is: back to busy, or idle when nothing is
    /// queued or outstanding.
    #[inline]
    pub(crate) fn chrono_stop(&mut self, kind: Chrono, now: Instant) {
        if self.tx.len() == 0 && self.snd_una == self.snd_max {
            if self.chronos.kind != Chrono::Idle {
                self.chronos.switch(Chrono::Idle, now);
            }
        } else if kind == self.chronos.kind {
            self.chronos.switch(Chrono::Busy, now);
        }
    }

    /// After the application's write of `wanted` bytes took `took`: sending is busy; a write that
    /// did not all fit waits for the send buffer.
    #[inline]
    pub(crate) fn after_write(&mut self, took: usize, wanted: usize, now: Instant) {
        if took > 0 && self.chronos.kind == Chrono::Idle {
            self.chrono_start(Chrono::Busy, now);
        }
        if took < wanted {
            self.chrono_start(Chrono::SndbufLimited, now);
        }
    }

    /// See [`TcpStreamRef::expect_write`](crate::TcpStreamRef::expect_write).
    pub(crate) fn expect_write(&mut self) {
        self.write_pending = self.state == State::SynSent;
    }

    /// When a retransmission timer started at `now` fires: `now` plus the RTO (as `Instant +
    /// Duration` rounds, down to the microsecond).
    pub(crate) fn rto_from(&self, now: Instant) -> Instant {
        Instant::from_micros(now.total_micros().saturating_add(self.rto / 1000))
    }

    /// The smoothed RTT, or the RTO before any sample (what the congestion window and RACK's
    /// reordering window take).
    fn srtt_or_rto(&self) -> Duration {
        Duration::from_nanos(self.srtt.unwrap_or(self.rto))
    }

    /// The least RTT measured, if any.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        (self.activity.min_rtt > 0).then(|| Duration::from_nanos(self.activity.min_rtt))
    }

    /// Bytes written and not sent yet.
    fn not_sent(&self) -> usize {
        let sent = (self.snd_max.max(self.tx_seq) - self.tx_seq) as usize;
        self.tx.len().saturating_sub(sent)
    }

    /// False while `TCP_NOTSENT_LOWAT` holds writes back.
    fn below_lowat(&self) -> bool {
        self.notsent_lowat
            .is_none_or(|lowat| self.not_sent() < lowat as usize)
    }

    /// Sets `TCP_NOTSENT_LOWAT`: with `Some(n)`, the connection is writable, and takes writes, only
    /// while fewer than `n` bytes are queued and not sent (a write that finds fewer takes what
    /// the send buffer has room for, as Linux's takes a whole buffer).
    pub(crate) fn set_notsent_lowat(&mut self, lowat: Option<u32>) {
        self.notsent_lowat = lowat;
    }

    /// The `TCP_NOTSENT_LOWAT` set.
    pub(crate) fn notsent_lowat(&self) -> Option<u32> {
        self.notsent_lowat
    }

    /// Sets `TCP_USER_TIMEOUT` (RFC 5482): with `Some(t)`, a retransmission timeout that finds
    /// what is outstanding unacknowledged for `t` or more aborts the connection (`TimedOut`), and
    /// the retry count no longer does; `None` gives back the retry limits. (The abort comes at
    /// the first retransmission timeout past `t`: the timer is not shortened to meet it.)
    pub(crate) fn set_user_timeout(&mut self, timeout: Option<Duration>) {
        self.user_timeout = timeout;
    }

    /// The `TCP_USER_TIMEOUT` set.
    pub(crate) fn user_timeout(&self) -> Option<Duration> {
        self.user_timeout
    }

    /// True when the user timeout ran out: something is outstanding and unacknowledged for that
    /// long.
    pub(super) fn user_timeout_expired(&self, now: Instant) -> bool {
        match (self.user_timeout, self.unacked_since) {
            (Some(t), Some(since)) => now.saturating_since(since) >= t,
            _ => false,
        }
    }

    /// True until our SYN (or SYN-ACK) has gone: what it offers may still change.
    fn syn_unsent(&self) -> bool {
        self.snd_max == self.iss
    }

    /// The window scale shift for a receive buffer of `bytes`: the smallest that lets the window
    /// field say all of it.
    fn shift_for(bytes: usize) -> u8 {
        let mut shift = 0u8;
        while (65535usize << shift) < bytes && shift < 14 {
            shift += 1;
        }
        shift
    }

    /// Sets the send buffer: `write` queues at most `bytes` not yet acknowledged. Smaller than what
    /// is queued, writes wait until enough is acknowledged.
    pub(crate) fn set_send_buffer(&mut self, bytes: usize) {
        self.tx.capacity = bytes;
    }

    /// Sets the receive buffer to `bytes`, the most the window offers. Before our SYN (or SYN-ACK)
    /// is sent it also fixes the window scale we offer, from the new size (as Linux fixes it from
    /// `SO_RCVBUF` set before `connect` or `listen`); after, the scale stays, and the window's right
    /// edge never moves back.
    pub(crate) fn set_recv_buffer(&mut self, bytes: usize, cfg: &TcpConfig) {
        self.rx_capacity = bytes;
        if !self.syn_unsent() {
            return;
        }
        let scales = match self.state {
            State::SynSent => cfg.window_scaling,
            State::SynReceived => self.ws_on,
            _ => false,
        };
        if scales {
            self.rcv_shift = Self::shift_for(bytes);
        } else if self.state == State::SynReceived {
            self.rx_capacity = bytes.min(65535);
        }
        if self.state == State::SynReceived {
            self.rcv_adv = self.rcv_nxt + self.advertisable();
        }
    }

    /// Limits the MSS to `mss` both ways (`TCP_MAXSEG`), `None` for no limit. Before our SYN (or
    /// SYN-ACK) is sent, the MSS it offers is lowered too; the MSS we send with follows at once
    /// (and the initial window with it, while nothing but the SYN was sent).
    pub(crate) fn set_max_segment(&mut self, mss: Option<u16>) {
        self.user_mss = mss;
        if self.syn_unsent() {
            let route = mss_for_mtu::<A>(self.path_mtu);
            self.local_mss = mss.map_or(route, |m| m.min(route));
        }
        if self.state == State::SynSent {
            self.mss = self.mss.min(u32::from(self.local_mss));
        } else {
            self.mss = self.send_mss();
        }
        if self.snd_max - self.iss <= 1 {
            self.cc = Congestion::limited(self.cc.algorithm, self.mss, self.cc.slow_start_limit);
        }
    }

    /// The MSS limit `set_max_segment` set.
    pub(crate) fn max_segment(&self) -> Option<u16> {
        self.user_mss
    }

    /// Applies a listener's settings to a connection it just made (before the SYN-ACK).
    pub(crate) fn apply_options(&mut self, o: &TcpSocketOptions, cfg: &TcpConfig) {
        if let Some(b) = o.send_buffer {
            self.set_send_buffer(b);
        }
        if let Some(b) = o.recv_buffer {
            self.set_recv_buffer(b, cfg);
        }
        if o.max_segment.is_some() {
            self.set_max_segment(o.max_segment);
        }
        if o.syn_retries.is_some() {
            self.syn_retries = o.syn_retries;
        }
        self.dscp = o.tos & !3;
        self.pmtu = o.path_mtu_discovery;
    }

    /// Keep-alive's idle time, interval and probes: this connection's, else the stack's.
    pub(crate) fn keepalive_times(&self, cfg: &TcpConfig) -> (Duration, Duration, u32) {
        self.keepalive_times.unwrap_or(cfg.keepalive)
    }

    /// Sets this connection's keep-alive timings (`None`: the stack's); a running keep-alive timer
    /// restarts with the new idle time.
    pub(crate) fn set_keepalive_times(
        &mut self,
        times: Option<(Duration, Duration, u32)>,
        now: Instant,
        cfg: &TcpConfig,
    ) {
        self.keepalive_times = times;
        if self.keepalive {
            self.timers
                .set(Timer::KeepAlive, now + self.keepalive_times(cfg).0);
        }
    }

    /// Sets this connection's SYN retransmissions (`None`: the stack's).
    pub(crate) fn set_syn_retries(&mut self, retries: Option<u32>) {
        self.syn_retries = retries;
    }

    /// SYN retransmissions before giving up: this connection's, else the stack's.
    pub(crate) fn syn_retries(&self, cfg: &TcpConfig) -> u32 {
        self.syn_retries.unwrap_or(cfg.syn_retries)
    }

    /// Queues `data` as [`WriteFlags`] say; returns how much fitted.
    pub(crate) fn write_flagged(&mut self, data: &[u8], flags: WriteFlags) -> io::Result<usize> {
        if flags.end_of_record && !self.records.has_room() {
            self.check_writable()?;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = if flags.more {
            let n = self.queue(data)?;
            self.stamp_write(n);
            // Appended to a buffer not sent yet, the write takes that buffer's PSH mark away and
            // sets none (`tcp_sendmsg_locked`, `tcp_push` under `MSG_MORE`).
            let end = self.tx_seq + self.tx.len() as u32;
            let before = end - n as u32;
            if n > 0
                && before > self.snd_max
                && self.push_marks.last() == Some(before)
                && !self.records.ends_at(before)
            {
                self.push_marks.pop_last();
            }
            n
        } else {
            self.write(data)?
        };
        self.more = flags.more;
        if n > 0 {
            let end = self.tx_seq + self.tx.len() as u32;
            if flags.end_of_record && n == data.len() {
                self.records.push(end);
            }
            if flags.notify_acked {
                self.completions.written(end);
            }
        }
        Ok(n)
    }

    /// A write of `n` bytes ended at the send buffer's end: its last byte is followed for transmit
    /// timestamps when they are on.
    #[inline]
    fn stamp_write(&mut self, n: usize) {
        if self.tx_stamps.any && n > 0 {
            self.tx_stamps.written(self.tx_seq + self.tx.len() as u32);
        }
    }

    /// Turns transmit timestamps on (for the bytes written from now on) or off.
    pub(crate) fn set_tx_timestamps(&mut self, on: TxTimestamping) {
        self.tx_stamps.set(on, self.tx_seq + self.tx.len() as u32);
    }

    /// Asks to hear when everything written so far is acknowledged; returns the number the
    /// notification will carry.
    pub(crate) fn notify_acked(&mut self) -> u32 {
        self.completions.written(self.tx_seq + self.tx.len() as u32)
    }

    /// Sets `TCP_CORK`: while on, a partial segment waits for more data; turned off, what waits
    /// may go.
    pub(crate) fn set_cork(&mut self, on: bool) {
        self.corked = on;
        self.push_now = !on;
    }

    /// Sets `TCP_NODELAY`; turned on, the next output sends what Nagle, cork or `MSG_MORE` hold.
    pub(crate) fn set_nodelay(&mut self, on: bool) {
        self.nodelay = on;
        self.push_now = on;
    }

    /// The `TCP_CORK` setting.
    pub(crate) fn cork(&self) -> bool {
        self.corked
    }

    /// The peer acknowledged everything below `ack`: records and notified writes ending there are
    /// done, and a `MSG_MORE` write's hold ends (output from here on is the acknowledgment's, under
    /// the socket's own rules, as Linux's `tcp_data_snd_check`).
    #[inline(always)]
    pub(super) fn writes_acked(&mut self, ack: Seq, now: Instant) {
        self.more = false;
        if self.tx_stamps.awaiting() {
            self.tx_stamps.acked(ack, now);
        }
        if !self.records.is_empty() {
            self.records.trim(ack);
        }
        if self.completions.awaiting() {
            self.completions.acked(ack);
        }
    }

    /// A partial segment waits for more data (cork or `MSG_MORE`).
    #[inline]
    pub(super) fn holds_partial(&self) -> bool {
        (self.corked || self.more) && !self.push_now
    }

    /// A partial segment of new data sent is unacknowledged (Linux's `tcp_minshall_check`).
    #[inline]
    pub(super) fn partial_in_flight(&self) -> bool {
        self.snd_sml > self.snd_una && self.snd_sml <= self.snd_nxt
    }

    /// How much of `len` bytes from `seq` one segment may carry without crossing a record's end.
    #[inline]
    pub(super) fn record_clip(&self, seq: Seq, len: u32) -> u32 {
        if self.records.is_empty() {
            len
        } else {
            self.records.clip(seq, len)
        }
    }

    /// Queues `data`; returns how much fitted.
    #[inline(always)]
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.queue(data)?;
        self.more = false;
        self.mark_push(n);
        self.stamp_write(n);
        Ok(n)
    }

    /// Copies `data` into the send buffer if the connection takes writes now (open for writing,
    /// below `TCP_NOTSENT_LOWAT`); `WouldBlock` when none of it fitted.
    #[inline(always)]
    fn queue(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check_writable()?;
        if !self.below_lowat() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.tx.write(data);
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// After the application's write of `wanted` bytes ended as `result`: as
    /// [`after_write`](Self::after_write) for what was taken (nothing when it would block); an
    /// error leaves the chronos alone.
    #[inline]
    pub(crate) fn note_write(&mut self, result: &io::Result<usize>, wanted: usize, now: Instant) {
        match result {
            Ok(n) => self.after_write(*n, wanted, now),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.after_write(0, wanted, now),
            Err(_) => {}
        }
    }

    /// Lets `fill` write into the send buffer in place.
    pub(crate) fn write_with(
        &mut self,
        max: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        self.check_writable()?;
        if (self.tx.free() == 0 || !self.below_lowat()) && max > 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.tx.write_with(max, fill);
        self.more = false;
        self.mark_push(n);
        self.stamp_write(n);
        Ok(n)
    }

    /// Records that a write of `n` bytes ended at the end of the send buffer: Linux marks the
    /// buffer (skb) holding a write's last byte for PSH (`tcp_push` → `tcp_mark_push`). A write
    /// appended to data not sent yet joins the buffer the previous write ended in, and Linux clears
    /// that buffer's mark as it appends (`tcp_sendmsg_locked`): only the later mark stays.
    #[inline]
    fn mark_push(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let end = self.tx_seq + self.tx.len() as u32;
        let (snd_max, records) = (self.snd_max, &self.records);
        if let Some(last) = self.push_marks.last_mut() {
            // A record's end keeps its mark: nothing joins its buffer.
            if *last > snd_max && (records.is_empty() || !records.ends_at(*last)) {
                *last = end;
                return;
            }
        }
        self.push_marks.push(end);
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

    /// Bytes up to `rcv_nxt` became readable now: their time, for receive timestamps.
    #[inline]
    pub(super) fn stamp_arrival(&mut self, now: Instant) {
        if self.rx_stamps.on {
            let end = self.rcv_nxt - u32::from(self.fin_received);
            self.rx_stamps.arrived(end, now);
        }
    }

    /// After a read: the time of the last byte it returned, for receive timestamps.
    #[inline]
    pub(crate) fn stamp_read(&mut self) {
        if self.rx_stamps.on {
            let pos = self.rcv_nxt - u32::from(self.fin_received) - self.rx.bytes as u32;
            self.rx_stamps.read_to(pos);
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
            && self.below_lowat()
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
            .min(self.user_mss.map_or(u32::MAX, u32::from))
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
            self.advertise_path_mtu();
        }
    }

    /// Before the handshake is done, the MSS our SYN (or SYN-ACK) offers goes down with the path
    /// MTU, never up: Linux's `tcp_advertise_mss` lowers it to the route's, whose MTU is the path
    /// MTU learnt, each time it builds one. So a SYN sent again after a "fragmentation needed"
    /// asks for segments that fit the path.
    fn advertise_path_mtu(&mut self) {
        if !self.state.is_synchronized() {
            self.local_mss = self.local_mss.min(mss_for_mtu::<A>(self.path_mtu));
        }
    }

    /// A "fragmentation needed" (RFC 1191) quoting sequence number `seq`: true when it is in flight,
    /// within `[SND.UNA, SND.NXT)` (RFC 5927 §5.2; `snd_max` here is RFC 9293's SND.NXT, which
    /// this block's `snd_nxt` is not after a timeout sent it back). Linux checks the same.
    pub(crate) fn in_flight(&self, seq: u32) -> bool {
        let seq = Seq(seq);
        seq >= self.snd_una && seq < self.snd_max
    }

    /// An ICMP error quoting sequence number `seq`: true when it is within `[SND.UNA, SND.NXT]`,
    /// both ends included (Linux's test in `tcp_v4_err` for every error but path MTU's).
    pub(crate) fn sent_or_next(&self, seq: u32) -> bool {
        let seq = Seq(seq);
        seq >= self.snd_una && seq <= self.snd_max
    }

    /// The path MTU went down to `mtu` (a "fragmentation needed" about this connection): the MSS
    /// follows, and if it shrank, everything outstanding is sent again at the new size, from
    /// SND.UNA. Not congestion (RFC 1191 §6.4 says it is not a loss to back off for; Linux's
    /// `tcp_simple_retransmit` leaves the window alone): cwnd, ssthresh and the RTO stay.
    /// Before the handshake, the MSS offered follows (see `advertise_path_mtu`), and a SYN that
    /// carried data is sent again at once without it. Returns true when there is something to
    /// send.
    pub(crate) fn path_mtu_reduced(&mut self, mtu: usize) -> bool {
        if mtu >= self.path_mtu {
            return false;
        }
        let before = self.mss;
        self.path_mtu = mtu;
        self.mss = self.send_mss();
        self.advertise_path_mtu();
        if self.state == State::SynSent && self.snd_max - self.iss > 1 {
            // Our SYN carried data (Fast Open) and did not fit: the SYN goes again at once, a
            // plain one as every retransmitted SYN is, offering the smaller MSS; the data follows
            // the handshake (Linux's `tcp_simple_retransmit` on a Fast Open SYN).
            self.snd_nxt = self.iss;
            self.rtt_probe = None;
            return true;
        }
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

/// Duplicate ACKs that start a fast retransmit (RFC 5681 §3.2).
pub(crate) const DUPTHRESH: u32 = 3;

/// Added to RACK's reordering timer, microseconds: Linux's `TCP_TIMEOUT_MIN`, two jiffies.
pub(crate) const REORDER_TIMER_MIN: u64 = 2000;

/// The IP header's ECN codepoints TCP uses (RFC 3168 §5): ECT(0), which our data carries, and CE.
pub(crate) const ECN_ECT0: u8 = 2;
pub(crate) const ECN_CE: u8 = 3;

/// The smallest MSS a connection uses, whatever its link's MTU: segments of it on a link whose MTU
/// is smaller are fragmented by IPv4 (Linux's floor, `tcp_min_snd_mss`, is 48).
pub(crate) const MIN_MSS: u16 = 64;

/// The MSS for a link of `mtu` in family `A`: the MTU less the IP (20, 40) and TCP headers, at least
/// [`MIN_MSS`].
pub(crate) fn mss_for_mtu<A: IpAddress>(mtu: usize) -> u16 {
    (mtu.min(65535).saturating_sub(A::HEADER_LEN + 20) as u16).max(MIN_MSS)
}

/// Quick-ACK mode's longest run of immediate ACKs (Linux's `TCP_MAX_QUICKACKS`).
pub(crate) const QUICK_ACKS: u32 = 16;
