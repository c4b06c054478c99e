//! TCP Fast Open (RFC 7413): the server's cookies and its decision on a SYN that carries data.
//!
//! A client that once connected to a server holds a cookie the server gave it, and may then send its
//! first data in the SYN; the server hands that data to the application before the handshake
//! completes, saving a round trip. The cookie is a keyed PRF of the client's and the server's
//! addresses (§4.1.2), so a SYN forged from an address that never received one cannot make the
//! server act on its data. The PRF is SipHash-2-4 of the SYN's source address then its destination
//! address, under a 128-bit key, and the cookie its 8 bytes little-endian: the construction Linux
//! uses, so that a key given in Linux's form (`FastOpenConfig::key`) gives Linux's cookies.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;

use crate::config::FastOpenConfig;
use crate::secret::SecretKey;
use crate::wire::tcp::FastOpenOption;

/// Cookie length: 8 bytes, as Linux sends.
pub(crate) const COOKIE_LEN: usize = 8;

/// The server's cookie for a SYN from `remote` to `local` (both of one family).
pub(crate) fn cookie(key: &SecretKey, remote: IpAddr, local: IpAddr) -> [u8; COOKIE_LEN] {
    let mut message = [0u8; 32];
    let len = match (remote, local) {
        (IpAddr::V4(r), IpAddr::V4(l)) => {
            message[..4].copy_from_slice(&r.octets());
            message[4..8].copy_from_slice(&l.octets());
            8
        }
        (IpAddr::V6(r), IpAddr::V6(l)) => {
            message[..16].copy_from_slice(&r.octets());
            message[16..].copy_from_slice(&l.octets());
            32
        }
        // A connection's two ends are of one family: no cookie is ever valid otherwise.
        _ => 0,
    };
    key.prf(&message[..len]).to_le_bytes()
}

/// The key cookies are made with: the configured one, or the stack's own.
pub(crate) fn key(cfg: &FastOpenConfig, derived: &SecretKey) -> SecretKey {
    match cfg.key {
        Some(k) => SecretKey::from_bytes(k),
        None => *derived,
    }
}

/// What a listener does with a SYN's Fast Open option and data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// An ordinary handshake: any data in the SYN is left for the client to send again.
    Ignore,
    /// An ordinary handshake whose SYN-ACK carries this cookie (the client asked for one, or sent
    /// one that is not valid); any data is left for the client to send again.
    SendCookie(FastOpenOption),
    /// A Fast Open connection: the SYN's data is taken, and the connection is ready for `accept`
    /// before its handshake completes.
    Accept,
}

/// What a listener knows when it decides.
pub(crate) struct Syn<'a> {
    /// The SYN's Fast Open option, if any.
    pub(crate) option: Option<&'a FastOpenOption>,
    /// Bytes of data in the SYN.
    pub(crate) data: usize,
    /// The valid cookie for the SYN's addresses.
    pub(crate) valid: [u8; COOKIE_LEN],
}

/// The listener's decision (RFC 7413 §4.2.2), as Linux makes it: `pending` connections already
/// taken by Fast Open await their handshake's end, of at most `max_pending` (`None`: the listener
/// did not turn Fast Open on).
pub(crate) fn decide(
    cfg: &FastOpenConfig,
    max_pending: Option<usize>,
    pending: usize,
    syn: &Syn<'_>,
) -> Decision {
    let Some(max) = max_pending.or(cfg.every_listener) else {
        return Decision::Ignore;
    };
    // A SYN with neither option nor data is an ordinary one; past the bound on pending connections,
    // every SYN is (§4.2.2's defence against SYN floods that carry valid cookies).
    if !cfg.server || (syn.option.is_none() && syn.data == 0) || pending >= max {
        return Decision::Ignore;
    }
    if cfg.server_without_cookie {
        return Decision::Accept;
    }
    match syn.option {
        None => Decision::Ignore,
        Some(o) if o.cookie() == syn.valid => Decision::Accept,
        Some(o) => Decision::SendCookie(FastOpenOption::new(&syn.valid, o.experimental)),
    }
}

/// What a client remembers of a server (Linux keeps it in its TCP metrics): the cookie it gave, and
/// its MSS, which bounds the data the next SYN carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Remembered {
    pub(crate) cookie: Option<FastOpenOption>,
    pub(crate) mss: Option<u16>,
    /// With no cookie: 1 when the next request goes in the experimental option (a request in kind
    /// 34 went unanswered), 2 when one in the experimental option did too (Linux's `try_exp`).
    pub(crate) try_exp: u8,
}

/// Servers remembered at most: the oldest is forgotten past it.
pub(crate) const CACHE_ENTRIES: usize = 1024;

/// The client's cookies, per server address, bounded ([`CACHE_ENTRIES`]), the oldest forgotten
/// first.
#[derive(Debug)]
pub(crate) struct CookieCache<A> {
    entries: HashMap<A, Remembered>,
    order: VecDeque<A>,
}

impl<A: Copy + Eq + Hash> Default for CookieCache<A> {
    fn default() -> Self {
        CookieCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<A: Copy + Eq + Hash> CookieCache<A> {
    pub(crate) fn get(&self, server: A) -> Remembered {
        self.entries.get(&server).copied().unwrap_or_default()
    }

    /// After a handshake that tried Fast Open: the server's MSS, and its cookie if it gave one (a
    /// SYN-ACK without one keeps the cookie held); without a cookie, `try_exp` (see
    /// [`Remembered::try_exp`]) when a request went unanswered.
    pub(crate) fn learn(
        &mut self,
        server: A,
        cookie: Option<FastOpenOption>,
        mss: u16,
        try_exp: u8,
    ) {
        if !self.entries.contains_key(&server) {
            if self.order.len() >= CACHE_ENTRIES {
                if let Some(old) = self.order.pop_front() {
                    self.entries.remove(&old);
                }
            }
            self.order.push_back(server);
        }
        let entry = self.entries.entry(server).or_default();
        entry.mss = Some(mss);
        if cookie.is_some() {
            entry.cookie = cookie;
        } else if try_exp > entry.try_exp && entry.cookie.is_none() {
            entry.try_exp = try_exp;
        }
    }
}

/// The Fast Open a client's SYN carries: the option (its cookie, or a request; none when it sends
/// data without a cookie) and how much of `len` bytes of data go with it. `mss` is the MSS the SYN
/// offers, bounded by the path; the data leaves room for 40 bytes of options as Linux does, so that
/// a middlebox adding options does not make the SYN too long.
pub(crate) fn client_syn(
    cfg: &FastOpenConfig,
    remembered: Remembered,
    mss: u32,
    len: usize,
) -> (Option<FastOpenOption>, usize) {
    let space = remembered
        .mss
        .map_or(mss, |m| mss.min(u32::from(m)))
        .saturating_sub(40) as usize;
    match remembered.cookie {
        Some(cookie) => (Some(cookie), len.min(space)),
        None if cfg.client_without_cookie => (None, len.min(space)),
        None => (Some(FastOpenOption::new(&[], remembered.try_exp == 1)), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's key in its `tcp_fastopen_key` form: four 32-bit words, each stored little-endian.
    fn linux_key(words: [u32; 4]) -> SecretKey {
        let mut key = [0u8; 16];
        for (i, w) in words.iter().enumerate() {
            key[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        SecretKey::from_bytes(key)
    }

    /// Cookies Linux 6.18 gave, in packetdrill's suite: its `TFO_COOKIE` values for IPv4 and IPv6
    /// under the key of `defaults.sh`, and `fastopen/server/simple1.pkt`'s.
    #[test]
    fn cookies_are_linuxs() {
        let k = linux_key([0xa1a1a1a1, 0xb2b2b2b2, 0xc3c3c3c3, 0xd4d4d4d4]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            cookie(&k, ip("192.0.2.1"), ip("192.168.0.1")),
            [0x30, 0x21, 0xb9, 0xd8, 0x89, 0x01, 0x7e, 0xeb]
        );
        assert_eq!(
            cookie(&k, ip("fd3d:fa7b:d17d::1"), ip("fd3d:a0b:17d6::1")),
            [0xc1, 0xd1, 0xe9, 0x74, 0x2a, 0x47, 0xa9, 0xbc]
        );
        let k = linux_key([0xa0bf63f7, 0xed803d81, 0xcd641d30, 0xcebc4a90]);
        assert_eq!(
            cookie(&k, ip("10.248.0.2"), ip("192.168.0.2")),
            [0x00, 0xab, 0xaa, 0xab, 0xe8, 0xe9, 0x54, 0xc2]
        );
        // The direction matters: the server's cookie is not the client's.
        assert_ne!(
            cookie(&k, ip("192.168.0.2"), ip("10.248.0.2")),
            cookie(&k, ip("10.248.0.2"), ip("192.168.0.2"))
        );
    }

    /// The client's cache: a SYN-ACK without a cookie keeps the one held and updates the MSS; the
    /// oldest server is forgotten past the bound; what the SYN then carries.
    #[test]
    fn the_client_cache_is_bounded_and_sizes_the_syn_data() {
        let mut cache = CookieCache::<u32>::default();
        let cookie = FastOpenOption::new(&[5; 8], false);
        cache.learn(1, Some(cookie), 1460, 0);
        cache.learn(1, None, 940, 0);
        assert_eq!(
            cache.get(1),
            Remembered {
                cookie: Some(cookie),
                mss: Some(940),
                try_exp: 0,
            }
        );
        for server in 2..=CACHE_ENTRIES as u32 + 1 {
            cache.learn(server, None, 1460, 0);
        }
        assert_eq!(
            cache.get(1),
            Remembered::default(),
            "the oldest is forgotten"
        );
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
        let cfg = FastOpenConfig::default();
        let remembered = Remembered {
            cookie: Some(cookie),
            mss: Some(940),
            try_exp: 0,
        };
        // 940 less 40 bytes of room for options: 900 of 2000, as Linux sends.
        assert_eq!(
            client_syn(&cfg, remembered, 1460, 2000),
            (Some(cookie), 900)
        );
        assert_eq!(
            client_syn(&cfg, Remembered::default(), 1460, 2000),
            (Some(FastOpenOption::new(&[], false)), 0),
            "no cookie: a request, no data"
        );
        // A request in kind 34 went unanswered: the next in the experimental option; that one
        // unanswered too, kind 34 again; a cookie ends the trying.
        cache.learn(7, None, 1460, 1);
        let asked = |cache: &CookieCache<u32>| client_syn(&cfg, cache.get(7), 1460, 10).0;
        assert_eq!(asked(&cache), Some(FastOpenOption::new(&[], true)));
        cache.learn(7, None, 1460, 2);
        assert_eq!(asked(&cache), Some(FastOpenOption::new(&[], false)));
        cache.learn(7, None, 1460, 1);
        assert_eq!(
            asked(&cache),
            Some(FastOpenOption::new(&[], false)),
            "not back"
        );
        let exp_cookie = FastOpenOption::new(&[6; 8], true);
        cache.learn(7, Some(exp_cookie), 1460, 0);
        assert_eq!(asked(&cache), Some(exp_cookie));
        let bold = FastOpenConfig {
            client_without_cookie: true,
            ..FastOpenConfig::default()
        };
        assert_eq!(
            client_syn(&bold, Remembered::default(), 1460, 2000),
            (None, 1420)
        );
    }

    #[test]
    fn decisions() {
        let cfg = FastOpenConfig::default();
        let valid = [7u8; COOKIE_LEN];
        let good = FastOpenOption::new(&valid, false);
        let bad = FastOpenOption::new(&[1, 2, 3, 4, 5, 6, 7, 8], true);
        let request = FastOpenOption::new(&[], false);
        let syn = |option, data| Syn {
            option,
            data,
            valid,
        };
        // A listener that did not turn it on ignores it all.
        assert_eq!(
            decide(&cfg, None, 0, &syn(Some(&good), 10)),
            Decision::Ignore
        );
        // A valid cookie is taken, with data or without.
        assert_eq!(
            decide(&cfg, Some(4), 0, &syn(Some(&good), 10)),
            Decision::Accept
        );
        assert_eq!(
            decide(&cfg, Some(4), 0, &syn(Some(&good), 0)),
            Decision::Accept
        );
        // A request, or a bad cookie, is answered with the valid one, in the kind it came in.
        assert_eq!(
            decide(&cfg, Some(4), 0, &syn(Some(&request), 0)),
            Decision::SendCookie(good)
        );
        assert_eq!(
            decide(&cfg, Some(4), 0, &syn(Some(&bad), 10)),
            Decision::SendCookie(FastOpenOption::new(&valid, true))
        );
        // Data without an option, or past the bound on pending connections: an ordinary handshake.
        assert_eq!(decide(&cfg, Some(4), 0, &syn(None, 10)), Decision::Ignore);
        assert_eq!(
            decide(&cfg, Some(4), 4, &syn(Some(&good), 10)),
            Decision::Ignore
        );
        // Every listener takes it when so configured; no cookie needed when so configured.
        let every = FastOpenConfig {
            every_listener: Some(7),
            ..FastOpenConfig::default()
        };
        assert_eq!(
            decide(&every, None, 0, &syn(Some(&good), 1)),
            Decision::Accept
        );
        let trusting = FastOpenConfig {
            server_without_cookie: true,
            ..FastOpenConfig::default()
        };
        assert_eq!(
            decide(&trusting, Some(1), 0, &syn(None, 10)),
            Decision::Accept
        );
        // Server side off: nothing.
        let off = FastOpenConfig {
            server: false,
            ..FastOpenConfig::default()
        };
        assert_eq!(
            decide(&off, Some(4), 0, &syn(Some(&good), 10)),
            Decision::Ignore
        );
    }
}
