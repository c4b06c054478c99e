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
}

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
        }
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

    /// The retransmission timer expired: back to one segment (RFC 5681 §3.1, RFC 9438 §4.8).
    pub(crate) fn on_timeout(&mut self, flight: u32, mss: u32) {
        self.on_loss(flight, mss);
        if self.algorithm == CongestionAlgorithm::NewReno {
            self.ssthresh = (flight / 2).max(2 * mss);
        }
        self.cwnd = mss;
    }
}

#[cfg(test)]
mod tests {
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
}
