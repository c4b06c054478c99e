//! The stack's clock. Time is passed in explicitly (`Stack::poll(now)`), so tests and simulations are
//! deterministic; `Instant::now()` reads the process's monotonic clock for real use.

use std::ops::{Add, Sub};
use std::sync::OnceLock;
use std::time::Duration;

/// A point in time, in microseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant { micros }
    }

    /// `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant {
            micros: millis * 1000,
        }
    }

    /// `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Instant {
        Instant {
            micros: secs * 1_000_000,
        }
    }

    /// Microseconds since the origin.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// The monotonic clock of this process (origin: its first call).
    pub fn now() -> Instant {
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(std::time::Instant::now);
        Instant {
            micros: origin.elapsed().as_micros() as u64,
        }
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

/// `d` in whole microseconds, without `Duration::as_micros`'s 128-bit division (a library call, on
/// every timer set), saturating past `u64`'s.
pub(crate) fn micros(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_micros()))
}

/// `d` in whole nanoseconds, saturating past `u64`'s (584 years): the RTT estimator keeps its
/// figures as integers, since `Duration`'s arithmetic carries between seconds and nanoseconds at
/// every step.
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// The earlier of two deadlines, either of which may be unset.
#[inline]
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(micros(d)),
        }
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_sub(micros(d)),
        }
    }
}
