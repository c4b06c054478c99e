//! The state machine on its own, smoltcp-style: a block built directly, segments in (through header
//! prediction first, as the stack does), and the exact segments `next_segment` emits.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::*;
use crate::buf::BufferMode;
use crate::config::LossDetection;
use crate::link::LinkCapabilities;
use crate::route::InterfaceId;
use crate::tcp::congestion::CongestionAlgorithm;
use crate::wire::tcp::Flags;

pub(crate) const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
pub(crate) const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4000);
/// Our initial sequence number, and the peer's.
const ISS: u32 = 1000;
pub(crate) const IRS: u32 = 5000;
const MSS: u32 = 1460;

const ACK: Flags = Flags::ACK;
const SYN: Flags = Flags::SYN;
const FIN: Flags = Flags::FIN;
const RST: Flags = Flags::RST;
const PSH: Flags = Flags::PSH;

/// The tests' configuration: no options, NewReno, RFC 6675 loss detection without PRR (RACK-TLP
/// and PRR have their tests in `rack.rs`), and the RTO floored as a whole (RFC 6298), so that
/// the timers of a connection whose only RTT sample is the handshake's start at exactly 200 ms (the
/// Linux floor on the variance term, the default, has its own test in `loss.rs`), the delayed-ACK
/// rule from the first segment (quick-ACK mode has its own test in `window.rs`), and no window
/// restart after idle (its test is in `window.rs`).
pub(crate) fn plain() -> TcpConfig {
    TcpConfig {
        sack: false,
        timestamps: false,
        window_scaling: false,
        congestion: CongestionAlgorithm::NewReno,
        rto_min_on_variance: false,
        quick_ack: false,
        loss_detection: LossDetection::DupAck,
        tail_loss_probe: false,
        prr: false,
        dsack: false,
        restart_after_idle: false,
        ..TcpConfig::default()
    }
}

pub(crate) fn hop() -> NextHop {
    NextHop {
        iface: InterfaceId(1),
        src: *LOCAL.ip(),
        next_hop: *REMOTE.ip(),
        caps: LinkCapabilities::plain(1500),
    }
}

/// A segment from the peer.
fn seg(flags: Flags, seq: u32, ack: u32, window: u16) -> TcpRepr {
    TcpRepr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq,
        ack,
        flags,
        window,
        urgent: 0,
        options: TcpOptions::default(),
    }
}

/// What we expect to send: header fields, no options.
fn out(flags: Flags, seq: u32, ack: u32, window: u16) -> TcpRepr {
    TcpRepr {
        src_port: LOCAL.port(),
        dst_port: REMOTE.port(),
        ..seg(flags, seq, ack, window)
    }
}

/// One block and everything a `Cx` borrows.
struct Harness {
    tcb: Tcb,
    cfg: TcpConfig,
    pool: BufferPool,
    counters: TcpCounters,
    drops: Drops,
    now: Instant,
    /// Calls of `send` the shortcut answered.
    owed_nothing: usize,
    /// The IP ECN field of the last segment `send` returned.
    last_ecn: u8,
    /// The IP ECN field of the segments `recv` feeds.
    ecn_in: u8,
}

/// Runs `$e` with `$cx` a context over the harness's parts.
macro_rules! with_cx {
    ($h:expr, |$tcb:ident, $cx:ident| $e:expr) => {{
        let h = &mut *$h;
        let mut cx = Cx {
            now: h.now,
            cfg: &h.cfg,
            pool: &mut h.pool,
            counters: &mut h.counters,
            drops: &mut h.drops,
            max_ooo: 64,
        };
        let $cx = &mut cx;
        let $tcb = &mut h.tcb;
        $e
    }};
}

/// Feeds a segment (with payload) and checks the verdict.
macro_rules! recv {
    ($h:expr, $seg:expr) => {
        recv!($h, $seg, b"", Verdict::Continue)
    };
    ($h:expr, $seg:expr, $data:expr) => {
        recv!($h, $seg, $data, Verdict::Continue)
    };
    ($h:expr, $seg:expr, $data:expr, $verdict:expr) => {
        assert_eq!($h.recv(&$seg, $data), $verdict, "verdict for {:?}", $seg)
    };
}

/// Checks the next segment sent (header and payload length), or that none is.
macro_rules! send {
    ($h:expr, None) => {
        assert_eq!(
            $h.send().map(|(r, d)| (r, d.len())),
            None,
            "nothing to send"
        )
    };
    ($h:expr, $repr:expr) => {
        send!($h, $repr, 0)
    };
    ($h:expr, $repr:expr, $len:expr) => {{
        let (repr, data) = $h.send().expect("a segment");
        assert_eq!(repr, $repr);
        assert_eq!(data.len(), $len, "payload length");
        data
    }};
}

impl Harness {
    fn new(tcb: Tcb, cfg: TcpConfig) -> Harness {
        Harness {
            tcb,
            cfg,
            pool: BufferPool::new(BufferMode::Pool, 64),
            counters: TcpCounters::default(),
            drops: Drops::default(),
            now: Instant::from_secs(1),
            owed_nothing: 0,
            last_ecn: 0,
            ecn_in: 0,
        }
    }

    /// CLOSED → SYN-SENT.
    fn connect(cfg: TcpConfig) -> Harness {
        let tcb = Tcb::connect(LOCAL, REMOTE, hop(), ISS, &cfg);
        Harness::new(tcb, cfg)
    }

    /// LISTEN → SYN-RECEIVED on `syn`.
    fn accept(cfg: TcpConfig, syn: &TcpRepr) -> Harness {
        let tcb = Tcb::accept(LOCAL, REMOTE, hop(), ISS, syn, &cfg);
        Harness::new(tcb, cfg)
    }

    /// An established connection (active open with `cfg`, the peer offering `peer` options and a
    /// 65535-byte window), the handshake's ACK already sent.
    fn established_with(cfg: TcpConfig, peer: TcpOptions) -> Harness {
        let mut h = Harness::connect(cfg);
        let (syn, _) = h.send().expect("SYN");
        let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 65535);
        syn_ack.options = TcpOptions {
            mss: Some(MSS as u16),
            ..peer
        };
        // The peer echoes our SYN's timestamp.
        if let (Some((val, _)), Some((ours, _))) = (peer.timestamps, syn.options.timestamps) {
            syn_ack.options.timestamps = Some((val, ours));
        }
        recv!(h, syn_ack);
        assert_eq!(h.tcb.state, State::Established);
        h.send().expect("ACK");
        h
    }

    fn established() -> Harness {
        Harness::established_with(plain(), TcpOptions::default())
    }

    fn recv(&mut self, repr: &TcpRepr, data: &[u8]) -> Verdict {
        let mut payload = self.pool.alloc(data.len());
        payload.extend_from_slice(data);
        payload.meta.set_ecn(self.ecn_in);
        let prediction = self.cfg.header_prediction;
        // As the stack's `conn_input` does.
        self.tcb.note_arrival(repr, data.len(), self.now);
        with_cx!(self, |tcb, cx| {
            if prediction {
                match tcb.predict(repr, payload, cx) {
                    Ok(()) => Verdict::Continue,
                    Err(payload) => tcb.on_segment(repr, payload, cx),
                }
            } else {
                tcb.on_segment(repr, payload, cx)
            }
        })
    }

    /// The next segment and its payload, as a burst of one (its timers armed as the output path
    /// arms them when a burst ends). Whenever the block says it owes nothing (the output path's
    /// shortcut), `next_segment` is checked to send nothing and change nothing.
    fn send(&mut self) -> Option<(TcpRepr, Vec<u8>)> {
        let now = self.now;
        if self.tcb.owes_nothing() {
            let before = format!("{:?}", self.tcb);
            assert!(with_cx!(self, |tcb, cx| tcb.next_segment(cx, None)).is_none());
            assert_eq!(format!("{:?}", self.tcb), before, "the block changed");
            self.owed_nothing += 1;
            return None;
        }
        let o = with_cx!(self, |tcb, cx| {
            let o = tcb.next_segment(cx, None);
            tcb.burst_sent(cx.cfg, cx.now);
            o
        })?;
        self.last_ecn = o.ecn;
        let mut repr = o.repr;
        self.tcb.stamp(&mut repr, now);
        let (a, b) = self.tcb.tx.range(o.offset, o.len);
        Some((repr, [a, b].concat()))
    }

    /// Every segment owed now.
    fn send_all(&mut self) -> Vec<(TcpRepr, Vec<u8>)> {
        std::iter::from_fn(|| self.send()).collect()
    }

    /// Every segment owed now as the output path sends them, one burst whose timers are armed
    /// when it ends; the sequence numbers and lengths.
    fn send_burst(&mut self) -> Vec<(u32, usize)> {
        let mut out = Vec::new();
        while let Some(o) = with_cx!(self, |tcb, cx| tcb.next_segment(cx, None)) {
            out.push((o.repr.seq, o.len));
        }
        with_cx!(self, |tcb, cx| tcb.burst_sent(cx.cfg, cx.now));
        out
    }

    fn timer(&mut self) -> Verdict {
        with_cx!(self, |tcb, cx| tcb.on_timer(cx))
    }

    /// Moves the clock to the block's deadline and runs its timers.
    fn fire(&mut self) -> Verdict {
        self.now = self.tcb.deadline().expect("a timer runs");
        self.timer()
    }

    fn advance(&mut self, d: Duration) {
        self.now = self.now + d;
    }

    fn write(&mut self, n: usize) {
        let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
        assert_eq!(self.tcb.write(&data).unwrap(), n);
    }

    fn shutdown(&mut self) {
        self.tcb.shutdown_write();
    }

    fn rcv_nxt(&self) -> u32 {
        self.tcb.rcv_nxt.0
    }
}

/// An established connection driven into `state` (FIN exchanges as needed).
fn in_state(state: State) -> Harness {
    let mut h = Harness::established();
    let (s, r) = (ISS + 1, IRS + 1);
    match state {
        State::Established => {}
        State::FinWait1 => {
            h.shutdown();
            send!(h, out(FIN | ACK, s, r, 65535));
        }
        State::FinWait2 => {
            h.shutdown();
            send!(h, out(FIN | ACK, s, r, 65535));
            recv!(h, seg(ACK, r, s + 1, 65535));
        }
        State::Closing => {
            h.shutdown();
            send!(h, out(FIN | ACK, s, r, 65535));
            recv!(h, seg(FIN | ACK, r, s, 65535));
            send!(h, out(ACK, s + 1, r + 1, 65535));
        }
        State::TimeWait => {
            h.shutdown();
            send!(h, out(FIN | ACK, s, r, 65535));
            recv!(h, seg(FIN | ACK, r, s + 1, 65535));
            send!(h, out(ACK, s + 1, r + 1, 65535));
        }
        State::CloseWait => {
            recv!(h, seg(FIN | ACK, r, s, 65535));
            send!(h, out(ACK, s, r + 1, 65535));
        }
        State::LastAck => {
            recv!(h, seg(FIN | ACK, r, s, 65535));
            send!(h, out(ACK, s, r + 1, 65535));
            h.shutdown();
            send!(h, out(FIN | ACK, s, r + 1, 65535));
        }
        _ => unreachable!(),
    }
    assert_eq!(h.tcb.state, state);
    h
}

mod close;
mod defence;
mod ecn;
mod info;
mod loss;
mod open;
mod options;
mod pmtu;
mod push;
mod rack;
mod timeouts;
mod window;
mod writes;
