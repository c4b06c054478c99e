//! Initial sequence numbers (RFC 6528) and SYN cookies.
//!
//! Both are a clock plus a keyed pseudo-random function of the connection's addresses:
//! `ISN = M + F(4-tuple, secret)` where `M` ticks every 4 microseconds and `F` is SipHash-2-4 under
//! a key of the stack's (crate::secret), so an off-path attacker can predict neither.

use std::net::SocketAddr;

use crate::secret::SecretKey;
use crate::time::Instant;

/// The per-stack secret and the functions keyed by it.
#[derive(Clone, Debug)]
pub(crate) struct IsnGenerator {
    key: SecretKey,
}

/// The message the PRF hashes: the local address and port, the remote address and port (4 or 16
/// bytes of address, 2 of port, in network order), then 8 bytes (little-endian) of the use's own.
struct Message {
    bytes: [u8; 2 * 18 + 8],
    len: usize,
}

impl Message {
    fn new(local: SocketAddr, remote: SocketAddr, extra: u64) -> Message {
        let mut m = Message {
            bytes: [0; 2 * 18 + 8],
            len: 0,
        };
        for end in [local, remote] {
            match end {
                SocketAddr::V4(a) => m.push(&a.ip().octets()),
                SocketAddr::V6(a) => m.push(&a.ip().octets()),
            }
            m.push(&end.port().to_be_bytes());
        }
        m.push(&extra.to_le_bytes());
        m
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

/// MSS values a SYN cookie can encode (3 bits), largest last.
const COOKIE_MSS: [u16; 8] = [536, 1200, 1360, 1440, 1460, 4016, 8960, 65495];

/// SYN cookies stay valid for two 64-second periods.
const COOKIE_PERIOD_SECS: u64 = 64;

/// How long after the last cookie sent an ACK to a listener may still be one.
pub(crate) const COOKIE_LIFETIME: std::time::Duration =
    std::time::Duration::from_secs(2 * COOKIE_PERIOD_SECS);

impl IsnGenerator {
    pub(crate) fn new(key: SecretKey) -> IsnGenerator {
        IsnGenerator { key }
    }

    fn hash<S: Into<SocketAddr>>(&self, local: S, remote: S, extra: u64) -> u64 {
        let m = Message::new(local.into(), remote.into(), extra);
        self.key.prf(&m.bytes[..m.len])
    }

    /// The initial sequence number for a connection (RFC 6528 §3).
    pub(crate) fn isn<S: Into<SocketAddr>>(&self, local: S, remote: S, now: Instant) -> u32 {
        let m = (now.total_micros() / 4) as u32;
        m.wrapping_add(self.hash(local, remote, 0) as u32)
    }

    /// A SYN cookie: the ISN of a SYN-ACK sent without keeping state. Layout: 5 bits of the 64-second
    /// period counter, 3 bits of MSS index, 24 bits of keyed hash over the addresses, the client's
    /// ISN, the counter and the MSS index.
    pub(crate) fn cookie<S: Into<SocketAddr> + Copy>(
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

    fn cookie_for<S: Into<SocketAddr>>(
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
    pub(crate) fn check_cookie<S: Into<SocketAddr> + Copy>(
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

    fn key(n: u8) -> SecretKey {
        SecretKey::from_bytes([n; 16])
    }

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000),
        )
    }

    #[test]
    fn isns_differ_by_tuple_and_by_secret_and_advance_with_time() {
        let (l, r) = addrs();
        let g = IsnGenerator::new(key(1));
        let t = Instant::from_secs(5);
        assert_ne!(
            g.isn(l, r, t),
            g.isn(l, SocketAddrV4::new(*r.ip(), 40001), t)
        );
        assert_ne!(g.isn(l, r, t), IsnGenerator::new(key(2)).isn(l, r, t));
        assert_eq!(
            g.isn(l, r, t + std::time::Duration::from_micros(400)),
            g.isn(l, r, t).wrapping_add(100)
        );
    }

    #[test]
    fn cookies_verify_for_two_periods_and_carry_the_mss() {
        let (l, r) = addrs();
        let g = IsnGenerator::new(key(9));
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

    /// A known answer: the ISN is the clock plus the low 32 bits of SipHash-2-4 of the documented
    /// message layout, so the value is fixed by the key, the tuple and the time alone.
    #[test]
    fn isn_known_answer() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let (l, r) = addrs();
        // 10.0.0.1:80, 10.0.0.2:40000, then 8 zero bytes.
        let message = [
            10, 0, 0, 1, 0, 80, 10, 0, 0, 2, 0x9c, 0x40, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let f = SecretKey::from_bytes(key).prf(&message) as u32;
        let g = IsnGenerator::new(SecretKey::from_bytes(key));
        assert_eq!(g.isn(l, r, Instant::ZERO), f);
        assert_eq!(
            g.isn(l, r, Instant::from_secs(4)),
            f.wrapping_add(1_000_000)
        );
        // The value itself, so that a change of PRF or layout cannot pass unnoticed.
        assert_eq!(g.isn(l, r, Instant::ZERO), KNOWN_ISN);
    }

    /// SipHash-2-4 of the message above under key 00 01 .. 0f, low 32 bits.
    const KNOWN_ISN: u32 = 0x7d4b_5f59;
}
