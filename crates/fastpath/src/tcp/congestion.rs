//! Congestion control: NewReno (RFC 5681, RFC 6582) and CUBIC (RFC 9438), the default.
//!
//! Both share slow start and the loss response's shape; they differ in how the window grows in
//! congestion avoidance and how far it falls on loss. The recovery procedure itself (which segment to
//! resend, when to leave recovery) lives with the connection; this module only sizes the window.

use std::time::Duration;

use crate::time::Instant;

pub use crate::config::CongestionAlgorithm;

/// CUBIC's constant C (RFC 9438 §4.1), in segments per second cubed.
const CUBIC_C: f64 = 0.4;
/// CUBIC's multiplicative decrease factor.
const CUBIC_BETA: f64 = 0.7;

/// The congestion window and slow-start threshold of one connection.
#[derive(Clone, Debug)]
pub(crate) struct Congestion {
    pub(crate) algorithm: CongestionAlgorithm,
    /// Slow start's growth per ACK, at most this many MSS (RFC 3465's L); `None` counts every byte
    /// acknowledged, as Linux's `tcp_slow_start` does.
    pub(crate) slow_start_limit: Option<u32>,
    /// Congestion window, bytes.
    pub(crate) cwnd: u32,
    /// Slow-start threshold, bytes.
    pub(crate) ssthresh: u32,
    /// NewReno's byte counter for congestion avoidance (RFC 5681 §3.1, appropriate byte counting).
    acked_in_avoidance: u32,
    // CUBIC state, in segments.
    w_max: f64,
    k: f64,
    epoch: Option<Instant>,
    /// The Reno-friendly estimate (RFC 9438 §4.3).
    w_est: f64,
    /// How fully the window is used, as Linux tracks it (`tcp_cwnd_validate`): whether sending was
    /// held back by it in the current window, else the most bytes in flight; the current window ends
    /// when the cumulative ACK passes `usage_end`.
    limited: bool,
    max_out: u32,
    usage_end: u32,
    hystart: HyStart,
    /// The initial window (RFC 6928), which a restart after idle does not go below.
    pub(crate) initial: u32,
}

/// HyStart (Ha and Rhee, "Taming the elephants: new TCP slow start", 2011; Linux CUBIC's
/// `hystart`, on by default there, `TcpConfig::hystart` here): slow start ends before the first
/// loss, with ssthresh at the window, when within one round trip either the ACKs of a window keep
/// arriving closely spaced for longer than half the least RTT (the ACK train has filled the
/// path), or the least of the round's first eight RTT samples exceeds the least RTT by an eighth
/// (4 to 16 ms): a queue is building. From a window of 16 segments, as Linux.
#[derive(Clone, Copy, Debug, Default)]
struct HyStart {
    /// Slow start was ended for this connection (until a retransmission timeout).
    found: bool,
    /// A round trip is being watched (`round_end` is set).
    begun: bool,
    /// The round trip ends when the cumulative ACK passes this (SND.NXT at its start).
    round_end: u32,
    /// When the round started, and the last ACK of the train, microseconds.
    round_start: u64,
    last_ack: u64,
    /// The least RTT sample of the round, microseconds, and how many were taken.
    round_rtt: u64,
    samples: u8,
}

/// HyStart's constants, as Linux's: the window it starts at (segments), the samples a round
/// takes before its delay check, the delay threshold's bounds, and the most time between two ACKs
/// of a train (microseconds).
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_MIN_SAMPLES: u8 = 8;
const HYSTART_DELAY_MIN: u64 = 4000;
const HYSTART_DELAY_MAX: u64 = 16000;
const HYSTART_ACK_DELTA: u64 = 2000;
/// What Linux adds to the least RTT for the ACK train's threshold (`hystart_ack_delay`: at most
/// a millisecond), microseconds.
const HYSTART_ACK_DELAY: u64 = 1000;

impl Congestion {
    /// Initial window per RFC 6928: min(10 MSS, max(2 MSS, 14600 bytes)).
    pub(crate) fn new(algorithm: CongestionAlgorithm, mss: u32) -> Congestion {
        Congestion {
            algorithm,
            slow_start_limit: None,
            cwnd: (10 * mss).min((2 * mss).max(14600)),
            ssthresh: u32::MAX,
            acked_in_avoidance: 0,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            limited: false,
            max_out: 0,
            usage_end: 0,
            hystart: HyStart::default(),
            initial: (10 * mss).min((2 * mss).max(14600)),
        }
    }

    /// After a transmission (or a transmission the window held back): `out` bytes in flight, the
    /// send at `nxt`, the cumulative ACK at `una`, `limited` when the window is full.
    pub(crate) fn note_usage(&mut self, una: u32, nxt: u32, out: u32, limited: bool) {
        if una.wrapping_sub(self.usage_end) as i32 >= 0
            || limited
            || (!self.limited && out > self.max_out)
        {
            self.limited = limited;
            self.max_out = out;
            self.usage_end = nxt;
        }
    }

    /// Whether the window is used enough to grow (Linux's `tcp_is_cwnd_limited`): held back in the
    /// current window, or in slow start below twice the most in flight. A sender the application
    /// or the peer's window limits keeps its window rather than growing it on ACKs of a flight that
    /// never filled it (RFC 7661's concern, Linux's rule).
    pub(crate) fn is_cwnd_limited(&self) -> bool {
        self.limited || (self.cwnd < self.ssthresh && self.cwnd < self.max_out.saturating_mul(2))
    }

    /// [`Congestion::new`], slow start growing at most `limit` MSS per ACK when given.
    pub(crate) fn limited(
        algorithm: CongestionAlgorithm,
        mss: u32,
        limit: Option<u32>,
    ) -> Congestion {
        Congestion {
            slow_start_limit: limit,
            ..Congestion::new(algorithm, mss)
        }
    }

    /// New data was acknowledged outside recovery.
    pub(crate) fn on_ack(&mut self, acked: u32, mss: u32, now: Instant, srtt: Duration) {
        if self.cwnd < self.ssthresh {
            // Slow start, by the bytes acknowledged (appropriate byte counting, RFC 3465), at most L
            // MSS per ACK when limited; a stretch ACK (one for ten segments, from a receiver's GRO or
            // ACK thinning) grows the window by all it covers, as in Linux, up to ssthresh.
            let grow = match self.slow_start_limit {
                Some(l) => acked.min(l.saturating_mul(mss)),
                None => acked,
            };
            self.cwnd = self.cwnd.saturating_add(grow).min(self.ssthresh);
            return;
        }
        match self.algorithm {
            CongestionAlgorithm::NewReno => {
                self.acked_in_avoidance += acked;
                if self.acked_in_avoidance >= self.cwnd {
                    self.acked_in_avoidance -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(mss);
                }
            }
            CongestionAlgorithm::Cubic => self.cubic_ack(acked, mss, now, srtt),
        }
    }

    fn cubic_ack(&mut self, acked: u32, mss: u32, now: Instant, srtt: Duration) {
        let m = mss as f64;
        let cwnd = self.cwnd as f64 / m;
        let epoch = *self.epoch.get_or_insert_with(|| {
            // First ACK of a congestion-avoidance epoch (RFC 9438 §4.2).
            if self.w_max < cwnd {
                self.w_max = cwnd;
                self.k = 0.0;
            } else {
                self.k = ((self.w_max - cwnd) / CUBIC_C).cbrt();
            }
            self.w_est = cwnd;
            now
        });
        let t = now.saturating_since(epoch).as_secs_f64() + srtt.as_secs_f64();
        let target = (CUBIC_C * (t - self.k).powi(3) + self.w_max).clamp(cwnd, 1.5 * cwnd);
        // Reno-friendly region: alpha = 3 (1 - beta) / (1 + beta) segments per window.
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        self.w_est += alpha * (acked as f64 / m) / cwnd;
        let next = if self.w_est > target {
            self.w_est
        } else {
            cwnd + (target - cwnd) / cwnd * (acked as f64 / m)
        };
        self.cwnd = ((next * m) as u32).max(self.cwnd);
    }

    /// A loss detected by duplicate ACKs or SACK: enter recovery. `flight` is the bytes in flight.
    pub(crate) fn on_loss(&mut self, flight: u32, mss: u32) {
        let m = mss as f64;
        match self.algorithm {
            CongestionAlgorithm::NewReno => {
                self.ssthresh = (flight / 2).max(2 * mss);
            }
            CongestionAlgorithm::Cubic => {
                let cwnd = self.cwnd as f64 / m;
                // Fast convergence (RFC 9438 §4.7).
                self.w_max = if cwnd < self.w_max {
                    cwnd * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd
                };
                self.ssthresh = ((self.cwnd as f64 * CUBIC_BETA) as u32).max(2 * mss);
                self.epoch = None;
            }
        }
        self.cwnd = self.ssthresh;
        self.acked_in_avoidance = 0;
    }

    /// Sending again after `idle` microseconds with nothing in flight, more than an RTO of `rto`
    /// microseconds: the window is halved for each RTO of idle time, down to the initial window
    /// (RFC 5681 §4.1, Linux's `tcp_cwnd_restart`); ssthresh keeps three quarters of the old window
    /// (`tcp_current_ssthresh`), so slow start climbs back towards it.
    pub(crate) fn restart_after_idle(&mut self, idle: u64, rto: u64) {
        let restart = self.initial.min(self.cwnd);
        self.ssthresh = self.ssthresh.max(self.cwnd / 2 + self.cwnd / 4);
        let mut cwnd = self.cwnd;
        let mut left = idle;
        while left > rto && cwnd > restart {
            left -= rto;
            cwnd /= 2;
        }
        self.cwnd = cwnd.max(restart);
    }

    /// Whether HyStart looks at this ACK: CUBIC in slow start from a window of 16 segments, until
    /// it ends slow start. The rounds start from there (Linux counts them from the first ACK; the
    /// first round it watches is a partial one either way).
    #[inline]
    pub(crate) fn hystart_wanted(&self, mss: u32) -> bool {
        self.cwnd >= HYSTART_LOW_WINDOW * mss
            && self.cwnd < self.ssthresh
            && !self.hystart.found
            && self.algorithm == CongestionAlgorithm::Cubic
    }

    /// HyStart's view of an ACK of new data in slow start (see [`HyStart`]), when
    /// [`hystart_wanted`](Self::hystart_wanted): `rtt` the RTT of the newest segment it
    /// acknowledged and `delay_min` the connection's least, microseconds, `una` and `nxt` the send
    /// sequence after it. Ends slow start (ssthresh at the window) when it finds the path full.
    pub(crate) fn hystart_sample(
        &mut self,
        (rtt, delay_min): (u64, u64),
        (una, nxt): (u32, u32),
        now: Instant,
    ) {
        // Samples just after a recovery are discarded (Linux's `bictcp_acked`): a second.
        if self
            .epoch
            .is_some_and(|e| now.saturating_since(e) < Duration::from_secs(1))
        {
            return;
        }
        let now = now.total_micros();
        let h = &mut self.hystart;
        let rtt = rtt.max(1);
        let delay_min = delay_min.clamp(1, rtt);
        if !h.begun || una.wrapping_sub(h.round_end) as i32 > 0 {
            // A new round trip.
            h.begun = true;
            h.round_start = now;
            h.last_ack = now;
            h.round_end = nxt;
            h.round_rtt = u64::MAX;
            h.samples = 0;
        }
        // The ACK train: closely spaced ACKs for longer than half the least RTT.
        if now.saturating_sub(h.last_ack) <= HYSTART_ACK_DELTA {
            h.last_ack = now;
            if now.saturating_sub(h.round_start) > (delay_min + HYSTART_ACK_DELAY) / 2 {
                h.found = true;
            }
        }
        // The delay: the round's least RTT over its first samples, against the least RTT.
        h.round_rtt = h.round_rtt.min(rtt);
        if h.samples < HYSTART_MIN_SAMPLES {
            h.samples += 1;
        } else if h.round_rtt
            > delay_min + (delay_min / 8).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX)
        {
            h.found = true;
        }
        if h.found {
            self.ssthresh = self.cwnd;
        }
    }

    /// The retransmission timer expired: back to one segment (RFC 5681 §3.1, RFC 9438 §4.8).
    pub(crate) fn on_timeout(&mut self, flight: u32, mss: u32) {
        self.on_loss(flight, mss);
        if self.algorithm == CongestionAlgorithm::NewReno {
            self.ssthresh = (flight / 2).max(2 * mss);
        }
        self.cwnd = mss;
        // Slow start begins afresh: HyStart may end it again (Linux's `bictcp_reset`).
        self.hystart = HyStart::default();
    }
}

/// Proportional rate reduction (RFC 6937, as Linux's `tcp_cwnd_reduction`): how much recovery
/// may send on each ACK. Rather than halving the window at once (a burst, or a silence while the
/// flight drains below it), recovery sends in proportion to what the ACKs deliver, ssthresh for
/// every window's worth, so that the flight arrives at ssthresh as recovery ends; when losses have
/// taken the flight below ssthresh, slow start brings it back up, by at most what each ACK
/// delivered plus one segment (PRR-SSRB). The first ACK of a recovery may always send one segment:
/// the fast retransmission.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Prr {
    /// The congestion window when recovery began (Linux's `prior_cwnd`; RFC 6937's RecoverFS).
    prior_cwnd: u32,
    /// Bytes delivered to the receiver since recovery began (`prr_delivered`).
    delivered: u32,
    /// Bytes sent since recovery began (`prr_out`).
    pub(crate) out: u32,
}

impl Prr {
    /// Recovery begins with the congestion window at `cwnd`.
    pub(crate) fn start(cwnd: u32) -> Prr {
        Prr {
            prior_cwnd: cwnd.max(1),
            delivered: 0,
            out: 0,
        }
    }

    /// An ACK in recovery delivered `delivered` bytes (newly acknowledged or SACKed) with `pipe`
    /// bytes left in flight: the congestion window it leaves (`pipe` plus what may go now).
    /// `una_advanced` and `newly_lost` choose PRR-SSRB's extra segment as Linux does (only for an
    /// ACK that moved SND.UNA and found no new loss).
    pub(crate) fn on_ack(
        &mut self,
        delivered: u32,
        pipe: u32,
        ssthresh: u32,
        mss: u32,
        una_advanced: bool,
        newly_lost: bool,
    ) -> Option<u32> {
        if delivered == 0 {
            return None;
        }
        self.delivered = self.delivered.saturating_add(delivered);
        let send = if pipe > ssthresh {
            // Proportional: ssthresh / RecoverFS of what was delivered, less what went.
            // Whole segments, as Linux counts packets.
            let allowed = (u64::from(ssthresh) * u64::from(self.delivered))
                .div_ceil(u64::from(self.prior_cwnd))
                .next_multiple_of(u64::from(mss.max(1)));
            (allowed.min(u64::from(u32::MAX)) as u32).saturating_sub(self.out)
        } else {
            // Slow-start reduction bound.
            let mut limit = self.delivered.saturating_sub(self.out).max(delivered);
            if una_advanced && !newly_lost {
                limit += mss;
            }
            limit.min(ssthresh - pipe)
        };
        // The fast retransmission goes whatever the figures say.
        let send = if self.out == 0 { send.max(mss) } else { send };
        Some(pipe + send)
    }
}

#[cfg(test)]
mod tests {

    /// cubic/cubic-hystart-delay-rtt-jumps-upward.pkt's arithmetic: least RTT 200 ms, then a
    /// round of 240 ms samples from a window of 20 segments; slow start ends at the ninth sample
    /// (the round's least above 200 + 16 ms), with ssthresh at the window. ACKs a millisecond
    /// apart are a train, but far shorter than half the least RTT.
    #[test]
    fn hystart_ends_slow_start_when_the_rtt_rises_within_a_round() {
        let mss = 1000;
        let mut c = Congestion::new(CongestionAlgorithm::Cubic, mss);
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        c.on_ack(10_000, mss, at(400), Duration::from_millis(200));
        assert_eq!(c.cwnd, 20 * mss);
        for i in 0..8u32 {
            let una = 12_001 + 2000 * i;
            assert!(c.hystart_wanted(mss));
            c.hystart_sample((240_000, 200_000), (una, 30_001), at(640 + u64::from(i)));
            c.on_ack(2000, mss, at(640), Duration::from_millis(200));
            assert_eq!(c.ssthresh, u32::MAX, "sample {i}");
        }
        assert_eq!(c.cwnd, 36 * mss);
        c.hystart_sample((240_000, 200_000), (28_001, 30_001), at(648));
        assert!(!c.hystart_wanted(mss));
        assert_eq!(c.ssthresh, 36 * mss);
        c.on_ack(2000, mss, at(648), Duration::from_millis(200));
        // Congestion avoidance now: a fraction of a segment, not the two slow start would add.
        assert!(c.cwnd < 37 * mss, "no more slow start: {}", c.cwnd);
    }

    #[test]
    fn hystart_leaves_a_round_of_steady_rtts_alone() {
        let mss = 1000;
        let mut c = Congestion::new(CongestionAlgorithm::Cubic, mss);
        c.cwnd = 20 * mss;
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        for i in 0..30u32 {
            assert!(c.hystart_wanted(mss));
            c.hystart_sample(
                (200_000 + 1000, 200_000),
                (1 + 1000 * i, 40_000),
                at(1000 + 10 * u64::from(i)),
            );
        }
        assert_eq!(c.ssthresh, u32::MAX);
    }
    use super::*;

    const MSS: u32 = 1000;

    fn grow(cc: &mut Congestion, rtts: u32) {
        let mut now = Instant::ZERO;
        for _ in 0..rtts {
            now = now + Duration::from_millis(10);
            let w = cc.cwnd;
            for _ in 0..w / MSS {
                cc.on_ack(MSS, MSS, now, Duration::from_millis(10));
            }
        }
    }

    #[test]
    fn slow_start_doubles_then_newreno_adds_one_segment_per_rtt() {
        let mut cc = Congestion::new(CongestionAlgorithm::NewReno, MSS);
        assert_eq!(cc.cwnd, 10 * MSS);
        grow(&mut cc, 1);
        assert_eq!(cc.cwnd, 20 * MSS);
        cc.on_loss(20 * MSS, MSS);
        assert_eq!(cc.cwnd, 10 * MSS);
        grow(&mut cc, 3);
        assert_eq!(cc.cwnd, 13 * MSS);
        cc.on_timeout(13 * MSS, MSS);
        assert_eq!((cc.cwnd, cc.ssthresh), (MSS, 6500));
    }

    #[test]
    fn a_stretch_ack_in_slow_start_grows_the_window_by_all_it_covers_unless_limited() {
        let t = Instant::ZERO;
        let rtt = Duration::from_millis(10);
        let mut cc = Congestion::new(CongestionAlgorithm::Cubic, MSS);
        cc.on_ack(10 * MSS, MSS, t, rtt);
        assert_eq!(cc.cwnd, 20 * MSS);
        // Up to ssthresh, not past it.
        cc.ssthresh = 25 * MSS;
        cc.on_ack(10 * MSS, MSS, t, rtt);
        assert_eq!(cc.cwnd, 25 * MSS);
        // RFC 3465 with L = 2.
        let mut cc = Congestion::new(CongestionAlgorithm::Cubic, MSS);
        cc.slow_start_limit = Some(2);
        cc.on_ack(10 * MSS, MSS, t, rtt);
        assert_eq!(cc.cwnd, 12 * MSS);
    }

    #[test]
    fn cubic_backs_off_to_70_percent_and_regrows_past_w_max() {
        let mut cc = Congestion::new(CongestionAlgorithm::Cubic, MSS);
        grow(&mut cc, 2);
        assert_eq!(cc.cwnd, 40 * MSS);
        cc.on_loss(40 * MSS, MSS);
        assert_eq!(cc.cwnd, 28 * MSS);
        // It regrows toward w_max = 40 segments and then beyond, without exceeding 1.5x per ACK round.
        let mut now = Instant::ZERO;
        for _ in 0..400 {
            now = now + Duration::from_millis(10);
            for _ in 0..cc.cwnd / MSS {
                cc.on_ack(MSS, MSS, now, Duration::from_millis(10));
            }
        }
        assert!(cc.cwnd > 40 * MSS, "cwnd {}", cc.cwnd);
    }

    #[test]
    fn prr_sends_in_proportion_then_slow_starts_back_to_ssthresh() {
        // Twenty segments in flight, one lost, ssthresh ten (NewReno's half).
        let mut prr = Prr::start(20 * MSS);
        // The ACK that starts recovery SACKs one segment: the fast retransmission may go.
        assert_eq!(
            prr.on_ack(MSS, 18 * MSS, 10 * MSS, MSS, false, false),
            Some(19 * MSS)
        );
        prr.out += MSS;
        // Each two segments delivered let one go (ssthresh / RecoverFS = 1/2).
        assert_eq!(
            prr.on_ack(MSS, 18 * MSS, 10 * MSS, MSS, false, false),
            Some(18 * MSS)
        );
        assert_eq!(
            prr.on_ack(MSS, 17 * MSS, 10 * MSS, MSS, false, false),
            Some(18 * MSS)
        );
        // Below ssthresh: what was delivered and not yet matched, plus a segment if SND.UNA moved.
        let mut prr = Prr::start(20 * MSS);
        prr.out = 2 * MSS;
        assert_eq!(
            prr.on_ack(2 * MSS, 5 * MSS, 10 * MSS, MSS, true, false),
            Some(8 * MSS)
        );
        assert_eq!(
            prr.on_ack(MSS, 9 * MSS, 10 * MSS, MSS, true, false),
            Some(10 * MSS)
        );
        // Nothing delivered: the window stays.
        assert_eq!(prr.on_ack(0, 9 * MSS, 10 * MSS, MSS, true, false), None);
    }
}
