//! Initial sequence numbers (RFC 6528) and SYN cookies.
//!
//! Both are a clock plus a keyed hash of the connection's addresses: `ISN = M + F(4-tuple, secret)`
//! where `M` ticks every 4 microseconds. The hash is SipHash (std's `DefaultHasher`) keyed by
//! prefixing a per-stack secret, so an off-path attacker cannot predict a connection's numbers.

use std::hash::{Hash, Hasher};

use crate::time::Instant;

/// The per-stack secret and the functions keyed by it.
#[derive(Clone, Debug)]
pub(crate) struct IsnGenerator {
    secret: [u64; 2],
}

/// MSS values a SYN cookie can encode (3 bits), largest last.
const COOKIE_MSS: [u16; 8] = [536, 1200, 1360, 1440, 1460, 4016, 8960, 65495];

/// SYN cookies stay valid for two 64-second periods.
const COOKIE_PERIOD_SECS: u64 = 64;

/// How long after the last cookie sent an ACK to a listener may still be one.
pub(crate) const COOKIE_LIFETIME: std::time::Duration =
    std::time::Duration::from_secs(2 * COOKIE_PERIOD_SECS);

impl IsnGenerator {
    pub(crate) fn new(secret: [u64; 2]) -> IsnGenerator {
        IsnGenerator { secret }
    }

    fn hash<S: Hash>(&self, local: S, remote: S, extra: u64) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.secret.hash(&mut h);
        local.hash(&mut h);
        remote.hash(&mut h);
        extra.hash(&mut h);
        h.finish()
    }

    /// The initial sequence number for a connection (RFC 6528 §3).
    pub(crate) fn isn<S: Hash>(&self, local: S, remote: S, now: Instant) -> u32 {
        let m = (now.total_micros() / 4) as u32;
        m.wrapping_add(self.hash(local, remote, 0) as u32)
    }

    /// A SYN cookie: the ISN of a SYN-ACK sent without keeping state. Layout: 5 bits of the 64-second
    /// period counter, 3 bits of MSS index, 24 bits of keyed hash over the addresses, the client's
    /// ISN, the counter and the MSS index.
    pub(crate) fn cookie<S: Hash + Copy>(
        &self,
        local: S,
        remote: S,
        client_isn: u32,
        mss: u16,
        now: Instant,
    ) -> u32 {
        let count = now.total_micros() / 1_000_000 / COOKIE_PERIOD_SECS;
        let index = COOKIE_MSS.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
        self.cookie_for(local, remote, client_isn, count, index)
    }

    fn cookie_for<S: Hash>(
        &self,
        local: S,
        remote: S,
        client_isn: u32,
        count: u64,
        index: u32,
    ) -> u32 {
        let mac = self.hash(
            local,
            remote,
            (count << 40) | ((index as u64) << 32) | client_isn as u64,
        );
        (((count & 31) as u32) << 27) | (index << 24) | (mac as u32 & 0x00ff_ffff)
    }

    /// Checks the cookie a returning ACK acknowledges (`ack - 1`); on success returns the MSS it
    /// encodes.
    pub(crate) fn check_cookie<S: Hash + Copy>(
        &self,
        local: S,
        remote: S,
        client_isn: u32,
        cookie: u32,
        now: Instant,
    ) -> Option<u16> {
        let count_now = now.total_micros() / 1_000_000 / COOKIE_PERIOD_SECS;
        let index = (cookie >> 24) & 7;
        (0..2u64)
            .filter_map(|age| count_now.checked_sub(age))
            .find(|&count| self.cookie_for(local, remote, client_isn, count, index) == cookie)
            .map(|_| COOKIE_MSS[index as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000),
        )
    }

    #[test]
    fn isns_differ_by_tuple_and_by_secret_and_advance_with_time() {
        let (l, r) = addrs();
        let g = IsnGenerator::new([1, 2]);
        let t = Instant::from_secs(5);
        assert_ne!(
            g.isn(l, r, t),
            g.isn(l, SocketAddrV4::new(*r.ip(), 40001), t)
        );
        assert_ne!(g.isn(l, r, t), IsnGenerator::new([1, 3]).isn(l, r, t));
        assert_eq!(
            g.isn(l, r, t + std::time::Duration::from_micros(400)),
            g.isn(l, r, t).wrapping_add(100)
        );
    }

    #[test]
    fn cookies_verify_for_two_periods_and_carry_the_mss() {
        let (l, r) = addrs();
        let g = IsnGenerator::new([9, 9]);
        let t = Instant::from_secs(1000);
        let c = g.cookie(l, r, 777, 1460, t);
        assert_eq!(g.check_cookie(l, r, 777, c, t), Some(1460));
        assert_eq!(
            g.check_cookie(l, r, 777, c, Instant::from_secs(1060)),
            Some(1460)
        );
        assert_eq!(g.check_cookie(l, r, 777, c, Instant::from_secs(1200)), None);
        assert_eq!(g.check_cookie(l, r, 778, c, t), None);
        assert_eq!(g.check_cookie(l, r, 777, c ^ 1, t), None);
        assert_eq!(g.cookie(l, r, 1, 1000, t) >> 24 & 7, 0);
    }
}
