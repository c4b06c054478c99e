//! Routing: prefixes and the routing table (longest-prefix match to an interface and a next hop),
//! written once over [`IpAddress`] and kept by each IP layer for its family.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::addr::IpAddress;
use crate::time::Instant;

/// Index of an interface in the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InterfaceId(pub usize);

/// An address prefix of a family: [`Ipv4Cidr`], [`Ipv6Cidr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr<A> {
    /// Address (host bits may be set: an interface address with its prefix).
    pub addr: A,
    /// Prefix length, 0 to the address's bits.
    pub prefix_len: u8,
}

/// An IPv4 prefix.
pub type Ipv4Cidr = Cidr<Ipv4Addr>;
/// An IPv6 prefix.
pub type Ipv6Cidr = Cidr<Ipv6Addr>;

impl<A: IpAddress> Cidr<A> {
    /// `addr/prefix_len`.
    ///
    /// # Panics
    /// If `prefix_len` is past the address's bits (32, 128).
    pub const fn new(addr: A, prefix_len: u8) -> Cidr<A> {
        assert!(prefix_len <= A::BITS, "prefix length past the address");
        Cidr { addr, prefix_len }
    }

    /// True when `addr` is inside the prefix.
    #[inline]
    pub fn contains(&self, addr: A) -> bool {
        self.addr.same_prefix(addr, self.prefix_len)
    }
}

impl Cidr<Ipv4Addr> {
    /// The network mask.
    pub const fn mask(&self) -> u32 {
        if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix_len)
        }
    }

    /// The directed broadcast address of the prefix (none for /31 and /32).
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        (self.prefix_len < 31).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask()))
    }
}

impl<A: IpAddress + std::str::FromStr> std::str::FromStr for Cidr<A> {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = a.parse().map_err(|_| format!("bad address in `{s}`"))?;
        let prefix_len = match p {
            None => A::BITS,
            Some(p) => p
                .parse()
                .ok()
                .filter(|&p| p <= A::BITS)
                .ok_or_else(|| format!("bad prefix length in `{s}`"))?,
        };
        Ok(Cidr { addr, prefix_len })
    }
}

impl<A: std::fmt::Display> std::fmt::Display for Cidr<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// One route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<A = Ipv4Addr> {
    /// Destinations it covers.
    pub dest: Cidr<A>,
    /// Gateway to send through, or `None` when the destination is on the link.
    pub gateway: Option<A>,
    /// Interface to send on.
    pub iface: InterfaceId,
}

/// Routes, kept longest prefix first so the first match is the best.
#[derive(Clone, Debug)]
pub struct RoutingTable<A = Ipv4Addr> {
    routes: Vec<Route<A>>,
    /// The destinations redirected (each with a host route in `routes`) and when each redirect
    /// ends, oldest first, at most [`MAX_REDIRECTS`].
    redirected: std::collections::VecDeque<(A, Instant)>,
}

/// How long a redirect holds after the router sent it (RFC 1122 §3.2.2.2 and RFC 4861 §8.3 leave
/// it open): 300 s, as Linux keeps an IPv4 redirect (`ip_rt_gc_timeout`); then the destination
/// goes by the routes again, and a router that still prefers another sends a new redirect. (Linux
/// drops an IPv6 one sooner, after about 60 s unused.)
pub const REDIRECT_LIFETIME: Duration = Duration::from_secs(300);

/// The most destinations redirected at once (RFC 1122 §3.2.2.2, RFC 4861 §8.3: a destination
/// cache, bounded): past it the oldest redirect is forgotten, so that redirects cannot grow the
/// routing table without end.
pub const MAX_REDIRECTS: usize = 64;

impl<A> Default for RoutingTable<A> {
    fn default() -> Self {
        RoutingTable {
            routes: Vec::new(),
            redirected: std::collections::VecDeque::new(),
        }
    }
}

impl<A: IpAddress> RoutingTable<A> {
    /// A router redirected `destination` to `gateway` (`None`: straight over the link) on
    /// `iface` at `now`: a host route of its own for [`REDIRECT_LIFETIME`], replacing an earlier
    /// redirect's, the oldest redirect forgotten past [`MAX_REDIRECTS`]. False, and nothing
    /// changed, when a route for exactly the destination was given otherwise (by the
    /// application): it stays.
    pub fn redirect(
        &mut self,
        destination: A,
        gateway: Option<A>,
        iface: InterfaceId,
        now: Instant,
    ) -> bool {
        let dest = Cidr::new(destination, A::BITS);
        let before = self.redirected.len();
        self.redirected.retain(|&(d, _)| d != destination);
        if self.redirected.len() == before {
            if self.routes.iter().any(|r| r.dest == dest) {
                return false;
            }
            if self.redirected.len() >= MAX_REDIRECTS {
                if let Some((oldest, _)) = self.redirected.pop_front() {
                    let oldest = Cidr::new(oldest, A::BITS);
                    self.routes.retain(|r| r.dest != oldest);
                }
            }
        }
        // Kept in the order they end: each lasts as long.
        self.redirected
            .push_back((destination, now + REDIRECT_LIFETIME));
        self.insert(Route {
            dest,
            gateway,
            iface,
        });
        true
    }

    /// When the next redirect ends, if any holds.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.redirected.front().map(|&(_, end)| end)
    }

    /// Forgets the redirects that have ended by `now` (their host routes go); returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(&(destination, end)) = self.redirected.front() {
            if end > now {
                break;
            }
            self.redirected.pop_front();
            let dest = Cidr::new(destination, A::BITS);
            self.routes.retain(|r| r.dest != dest);
            n += 1;
        }
        n
    }

    /// Adds a route (replacing one for the same prefix, a redirect's included).
    pub fn add(&mut self, route: Route<A>) {
        if route.dest.prefix_len == A::BITS {
            self.redirected.retain(|&(d, _)| d != route.dest.addr);
        }
        self.insert(route);
    }

    fn insert(&mut self, route: Route<A>) {
        self.routes.retain(|r| r.dest != route.dest);
        let at = self
            .routes
            .partition_point(|r| r.dest.prefix_len >= route.dest.prefix_len);
        self.routes.insert(at, route);
    }

    /// Removes the route for exactly `dest`; true if there was one.
    pub fn remove(&mut self, dest: Cidr<A>) -> bool {
        if dest.prefix_len == A::BITS {
            self.redirected.retain(|&(d, _)| d != dest.addr);
        }
        let before = self.routes.len();
        self.routes.retain(|r| r.dest != dest);
        before != self.routes.len()
    }

    /// The longest-prefix match for `dst`.
    #[inline]
    pub fn lookup(&self, dst: A) -> Option<&Route<A>> {
        self.routes.iter().find(|r| r.dest.contains(dst))
    }

    /// Every route, longest prefix first.
    pub fn routes(&self) -> &[Route<A>] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant::from_secs(1);

    /// A redirect is a host route of its own: replaced by the next redirect for the destination,
    /// never over a route the application gave for exactly it, the oldest forgotten past
    /// [`MAX_REDIRECTS`]; a route the application adds for a redirected destination takes its
    /// place and is not forgotten.
    #[test]
    fn redirects_are_host_routes_bounded_and_never_over_a_given_route() {
        let mut t = RoutingTable::default();
        let router = Ipv4Addr::new(10, 0, 0, 1);
        t.add(Route {
            dest: "0.0.0.0/0".parse().unwrap(),
            gateway: Some(router),
            iface: InterfaceId(1),
        });
        let host = |i: u32| Ipv4Addr::from(0x0808_0000 + i);
        let via = |t: &RoutingTable, d| t.lookup(d).and_then(|r| r.gateway);
        let other = Some(Ipv4Addr::new(10, 0, 0, 2));
        assert!(t.redirect(host(0), other, InterfaceId(1), T0));
        assert_eq!(via(&t, host(0)), other);
        assert!(t.redirect(host(0), None, InterfaceId(1), T0), "replaced");
        assert_eq!(via(&t, host(0)), None);
        let given: Ipv4Cidr = Cidr::new(host(1), 32);
        t.add(Route {
            dest: given,
            gateway: Some(router),
            iface: InterfaceId(1),
        });
        assert!(!t.redirect(host(1), other, InterfaceId(1), T0));
        assert_eq!(via(&t, host(1)), Some(router));
        for i in 2..2 + MAX_REDIRECTS as u32 {
            assert!(t.redirect(host(i), other, InterfaceId(1), T0));
        }
        assert_eq!(via(&t, host(0)), Some(router), "the oldest forgotten");
        assert_eq!(via(&t, host(2)), other);
        assert_eq!(t.routes().len(), 1 + 1 + MAX_REDIRECTS);
        // The application's route for a redirected destination replaces the redirect for good.
        t.add(Route {
            dest: Cidr::new(host(2), 32),
            gateway: Some(router),
            iface: InterfaceId(1),
        });
        for i in 100..100 + MAX_REDIRECTS as u32 {
            t.redirect(host(i), other, InterfaceId(1), T0);
        }
        assert_eq!(via(&t, host(2)), Some(router));
        assert_eq!(via(&t, host(1)), Some(router));
    }

    /// A redirect holds for [`REDIRECT_LIFETIME`] from the last one for its destination; then the
    /// destination goes by the routes again.
    #[test]
    fn redirects_end_after_their_lifetime() {
        let mut t = RoutingTable::default();
        let router = Ipv4Addr::new(10, 0, 0, 1);
        t.add(Route {
            dest: "0.0.0.0/0".parse().unwrap(),
            gateway: Some(router),
            iface: InterfaceId(1),
        });
        let (a, b) = (Ipv4Addr::new(8, 8, 8, 8), Ipv4Addr::new(9, 9, 9, 9));
        let other = Some(Ipv4Addr::new(10, 0, 0, 2));
        let via = |t: &RoutingTable, d| t.lookup(d).and_then(|r| r.gateway);
        assert_eq!(t.next_expiry(), None);
        let later = T0 + Duration::from_secs(100);
        assert!(t.redirect(a, other, InterfaceId(1), T0));
        assert!(t.redirect(b, other, InterfaceId(1), T0));
        // Redirected again later: it holds from then.
        assert!(t.redirect(a, other, InterfaceId(1), later));
        assert_eq!(t.next_expiry(), Some(T0 + REDIRECT_LIFETIME));
        assert_eq!(t.expire(T0 + REDIRECT_LIFETIME - Duration::from_secs(1)), 0);
        assert_eq!(t.expire(T0 + REDIRECT_LIFETIME), 1);
        assert_eq!((via(&t, a), via(&t, b)), (other, Some(router)));
        assert_eq!(t.next_expiry(), Some(later + REDIRECT_LIFETIME));
        assert_eq!(t.expire(later + REDIRECT_LIFETIME), 1);
        assert_eq!(via(&t, a), Some(router));
        assert_eq!((t.routes().len(), t.next_expiry()), (1, None));
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RoutingTable::default();
        let r = |s: &str, gw: Option<[u8; 4]>, i| Route {
            dest: s.parse().unwrap(),
            gateway: gw.map(Ipv4Addr::from),
            iface: InterfaceId(i),
        };
        t.add(r("0.0.0.0/0", Some([10, 0, 0, 254]), 1));
        t.add(r("10.0.0.0/8", None, 2));
        t.add(r("10.1.0.0/16", None, 3));
        assert_eq!(
            t.lookup(Ipv4Addr::new(10, 1, 2, 3)).unwrap().iface,
            InterfaceId(3)
        );
        assert_eq!(
            t.lookup(Ipv4Addr::new(10, 2, 2, 3)).unwrap().iface,
            InterfaceId(2)
        );
        assert_eq!(
            t.lookup(Ipv4Addr::new(8, 8, 8, 8)).unwrap().iface,
            InterfaceId(1)
        );
        assert!(t.remove("0.0.0.0/0".parse().unwrap()));
        assert!(t.lookup(Ipv4Addr::new(8, 8, 8, 8)).is_none());
        let c: Ipv4Cidr = "192.168.7.9/24".parse().unwrap();
        assert_eq!(c.broadcast(), Some(Ipv4Addr::new(192, 168, 7, 255)));
        assert!("1.2.3.4/33".parse::<Ipv4Cidr>().is_err());
        assert_eq!("1.2.3.4".parse::<Ipv4Cidr>().unwrap().prefix_len, 32);
    }

    #[test]
    fn longest_prefix_wins_for_ipv6() {
        let mut t = RoutingTable::<Ipv6Addr>::default();
        let r = |s: &str, i| Route {
            dest: s.parse().unwrap(),
            gateway: None,
            iface: InterfaceId(i),
        };
        t.add(r("::/0", 1));
        t.add(r("2001:db8::/32", 2));
        t.add(r("2001:db8:1::/48", 3));
        t.add(r("2001:db8:1::7/128", 4));
        let at =
            |t: &RoutingTable<Ipv6Addr>, s: &str| t.lookup(s.parse().unwrap()).map(|r| r.iface.0);
        assert_eq!(at(&t, "2001:db8:1::7"), Some(4));
        assert_eq!(at(&t, "2001:db8:1::8"), Some(3));
        assert_eq!(at(&t, "2001:db8:2::1"), Some(2));
        assert_eq!(at(&t, "fe80::1"), Some(1));
        assert!(t.remove("::/0".parse().unwrap()));
        assert_eq!(at(&t, "fe80::1"), None);
        assert!("::1/129".parse::<Ipv6Cidr>().is_err());
        assert_eq!("::1".parse::<Ipv6Cidr>().unwrap().prefix_len, 128);
    }
}
