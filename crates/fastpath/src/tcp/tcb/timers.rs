//! The connection's timers: one deadline per [`Timer`], the earliest of them the connection's
//! [`deadline`](Tcb::deadline) (which the table keeps in its own deadline structure), and what each
//! does when it fires.

use super::*;

/// The timers a connection runs (RFC 9293 §3.8, RFC 1122 §4.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Retransmission (RFC 6298), of the SYN too.
    Retransmit,
    /// The delayed ACK (RFC 1122 §4.2.3.2).
    DelayedAck,
    /// Zero-window probing, and the sender's silly window override (RFC 9293 §3.8.6.1).
    Persist,
    /// Keep-alive (RFC 1122 §4.2.3.6).
    KeepAlive,
    /// The end of the connection: 2 MSL in TIME-WAIT, the FIN-WAIT-2 timeout of an orphan.
    Close,
    /// RACK's reordering timer or the tail loss probe (RFC 8985 §6.3, §7; which one: `Rack::timer`).
    Rack,
}

impl Timer {
    const COUNT: usize = 6;
}

/// The deadline of each [`Timer`] in microseconds, [`NOT_RUNNING`] when it does not run. Plain
/// integers rather than `Option<Instant>`s, so that the earliest of them (asked after every segment
/// in and out) is six comparisons without a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timers([u64; Timer::COUNT]);

/// A timer's slot when it does not run: later than any deadline [`Timers::set`] stores.
const NOT_RUNNING: u64 = u64::MAX;

impl Default for Timers {
    fn default() -> Timers {
        Timers([NOT_RUNNING; Timer::COUNT])
    }
}

impl Timers {
    /// When `timer` fires, if it runs.
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        let at = self.0[timer as usize];
        (at != NOT_RUNNING).then(|| Instant::from_micros(at))
    }

    /// True when `timer` runs.
    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.0[timer as usize] != NOT_RUNNING
    }

    /// Starts (or restarts) `timer` to fire at `at` (a microsecond earlier at the very end of time,
    /// which is the sign for a timer that does not run).
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.0[timer as usize] = at.total_micros().min(NOT_RUNNING - 1);
    }

    /// Starts `timer` to fire at `at` unless it runs already.
    pub(crate) fn arm_once(&mut self, timer: Timer, at: Instant) {
        if !self.is_set(timer) {
            self.set(timer, at);
        }
    }

    /// Stops `timer`.
    pub(crate) fn clear(&mut self, timer: Timer) {
        self.0[timer as usize] = NOT_RUNNING;
    }

    /// Stops `timer` and returns true if it was due at `now`.
    fn take_due(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.get(timer).is_some_and(|t| t <= now);
        if due {
            self.clear(timer);
        }
        due
    }

    /// The earliest deadline.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        let at = self.0.iter().fold(NOT_RUNNING, |a, &b| a.min(b));
        (at != NOT_RUNNING).then(|| Instant::from_micros(at))
    }
}

impl<A: crate::addr::IpAddress> Tcb<A> {
    /// The earliest timer.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.timers.earliest()
    }

    /// Runs the timers that are due. Returns `Remove` when the block is finished.
    pub(crate) fn on_timer(&mut self, cx: &mut Cx) -> Verdict {
        let now = cx.now;
        if self.timers.take_due(Timer::Close, now) {
            if self.state == State::FinWait2 {
                self.abort(io::ErrorKind::TimedOut, cx);
            }
            self.state = State::Closed;
            return Verdict::Remove;
        }
        if self.timers.take_due(Timer::DelayedAck, now) {
            self.ack_now = true;
            // The peer waited for this ACK: the exchange is not interactive after all.
            self.pingpong = false;
        }
        if self.timers.take_due(Timer::Retransmit, now) {
            return self.retransmit_timeout(cx);
        }
        if self.timers.take_due(Timer::Rack, now) {
            self.rack_timeout(cx);
        }
        if self.timers.take_due(Timer::Persist, now) {
            // A peer that answers probes is kept for ever (RFC 1122 §4.2.2.17); one that stops
            // answering is given up after `max_retries` probes (an orphan's `orphan_retries`), or
            // at the user timeout from the first probe, as Linux's `tcp_probe_timer` gives it up.
            let since = *self.probe_since.get_or_insert(now);
            let out_of_time = match self.user_timeout {
                Some(limit) => now.saturating_since(since) >= limit,
                None => self.probes_out >= self.retry_limit(cx.cfg),
            };
            if out_of_time && self.state.is_synchronized() {
                return self.time_out(cx);
            }
            self.probes_out += 1;
            self.persist_backoff += 1;
            self.probe = Some(Probe::Window);
        }
        if self.timers.take_due(Timer::KeepAlive, now) {
            let (_, interval, probes) = self.keepalive_times(cx.cfg);
            // With a user timeout, the time since the peer was last heard decides, once a probe
            // has gone, as Linux's `tcp_keepalive_timer`; else the probes unanswered.
            let out_of_time = match self.user_timeout {
                Some(limit) => {
                    self.keepalive_probes > 0 && now.saturating_since(self.heard_at) >= limit
                }
                None => self.keepalive_probes >= probes,
            };
            if out_of_time {
                return self.time_out(cx);
            }
            self.keepalive_probes += 1;
            self.timers.set(Timer::KeepAlive, now + interval);
            self.probe = Some(Probe::KeepAlive);
        }
        Verdict::Continue
    }

    /// Arms keep-alive.
    pub(crate) fn set_keepalive(&mut self, on: bool, now: Instant, idle: Duration) {
        self.keepalive = on;
        if on {
            self.heard_at = now;
            self.timers.set(Timer::KeepAlive, now + idle);
        } else {
            self.timers.clear(Timer::KeepAlive);
        }
        self.keepalive_probes = 0;
    }
}
