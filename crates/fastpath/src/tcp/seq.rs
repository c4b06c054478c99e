//! Sequence numbers: 32-bit, compared modulo 2^32 (RFC 9293 §3.4).

use std::fmt;
use std::ops::{Add, Sub};

/// A TCP sequence number. `a < b` means `b` lies less than 2^31 ahead of `a`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Seq(pub u32);

impl Seq {
    /// `self - other` as a signed distance.
    #[inline]
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// True when `self` lies in `[lo, hi)`.
    #[inline]
    pub fn in_range(self, lo: Seq, hi: Seq) -> bool {
        lo <= self && self < hi
    }

    /// The later of two sequence numbers.
    #[inline]
    pub fn max(self, other: Seq) -> Seq {
        if self < other {
            other
        } else {
            self
        }
    }

    /// The earlier of two sequence numbers.
    #[inline]
    pub fn min(self, other: Seq) -> Seq {
        if self < other {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for Seq {
    #[inline]
    fn partial_cmp(&self, other: &Seq) -> Option<std::cmp::Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

impl Sub<Seq> for Seq {
    type Output = u32;
    /// The distance from `other` forward to `self` (callers ensure `other <= self`).
    #[inline]
    fn sub(self, other: Seq) -> u32 {
        self.0.wrapping_sub(other.0)
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_across_the_wrap() {
        let a = Seq(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b - a, 20);
        assert_eq!(a.diff(b), -20);
        assert!(Seq(5).in_range(a, b));
        assert!(!b.in_range(a, b));
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
    }
}
