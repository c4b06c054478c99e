//! The connection's timers.

use super::*;

impl Tcb {
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

    /// Arms keep-alive.
    pub(crate) fn set_keepalive(&mut self, on: bool, now: Instant, idle: Duration) {
        self.keepalive = on;
        self.keepalive_at = on.then(|| now + idle);
        self.keepalive_probes = 0;
    }
}
