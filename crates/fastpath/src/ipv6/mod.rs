//! IPv6 (RFC 8200): the host's addresses and routes, input validation with the extension-header chain,
//! and output with fragmentation.
//!
//! The sibling of `ipv4/`, in its shape: `Ipv6` owns its state and is called with a narrow context
//! (`Ip6Cx`); input (`input`) returns what it accepted, for the stack to hand to a transport, or the
//! parameter problem to answer with; output hands finished packets to a `Transmit` sink. It knows nothing
//! of the protocols above it.
//!
//! What changes from IPv4: no header checksum (nothing for the in-line header sum to do), no broadcast
//! (the groups this host belongs to are all-nodes and the solicited-node group of each of its addresses,
//! RFC 4291 §2.8), no fragmentation by routers (the sender fragments, with a fragment header, §4.5), and
//! a `::1/128` loopback (RFC 4291 §2.5.3).

mod input;
mod output;

pub(crate) use input::{Accepted6, Input6};
pub(crate) use output::HeaderTemplate6;

use std::net::Ipv6Addr;

use crate::buf::BufferPool;
use crate::config::StackConfig;
use crate::ip::{NextHop, LOOPBACK};
use crate::link::LinkCapabilities;
use crate::pmtu::{PathMtuCache, PathMtuLimits, Refused};
use crate::reassembly::{Ipv6Expired, Ipv6Reassembly};
use crate::route::{InterfaceId, Ipv6Cidr, Route, RoutingTable};
use crate::secret::SecretKey;
use crate::stats::{DropReason, Drops, Ip6Counters};
use crate::time::Instant;
use crate::wire::ipv6::MIN_MTU;

/// Where a packet to an IPv6 destination goes.
pub(crate) type NextHop6 = NextHop<Ipv6Addr>;

/// One interface as IPv6 sees it: its addresses (each with its prefix) and what its link can do.
#[derive(Clone, Debug)]
pub(crate) struct Iface6 {
    pub(crate) addrs: Vec<Ipv6Cidr>,
    /// Addresses whose preferred lifetime ran out (RFC 4862 §5.5.4): still ours, but a source
    /// only when no other will do (RFC 6724 §5, rule 3).
    pub(crate) deprecated: Vec<Ipv6Addr>,
    /// Temporary addresses (RFC 8981), and whether they are preferred as sources over the others
    /// (RFC 6724 §5, rule 7) or the others over them.
    pub(crate) temporary: Vec<Ipv6Addr>,
    pub(crate) prefer_temporary: bool,
    /// The hop limit of packets sent out of it: the stack's, or what a router advertised for the
    /// link (RFC 4861 §6.3.4's CurHopLimit, kept per interface as Linux keeps it per device).
    pub(crate) hop_limit: u8,
    pub(crate) caps: LinkCapabilities,
    /// Takes packets to any unicast address as [`Delivery::Intercepted`](crate::ip::Delivery)
    /// (`Stack::set_intercept`).
    pub(crate) intercept: bool,
}

/// IPv6's slice of the stack's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ipv6Config {
    /// The hop limit of packets this host sends (the IPv4 TTL's setting: Linux uses 64 for both),
    /// unless a router gave an interface its own ([`Iface6::hop_limit`]).
    pub(crate) hop_limit: u8,
    /// `input_header_prediction`: the common shape of packet (UDP or TCP right after the fixed
    /// header, to one of our addresses) takes a short path.
    pub(crate) input_header_prediction: bool,
}

/// What IPv6 is handed for each call: the clock, the buffer pool, its counters and the drops.
pub(crate) struct Ip6Cx<'a> {
    pub(crate) now: Instant,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut Ip6Counters,
    pub(crate) drops: &'a mut Drops,
}

/// The IPv6 layer of a stack.
#[derive(Debug)]
pub(crate) struct Ipv6 {
    pub(crate) cfg: Ipv6Config,
    /// Interfaces by [`InterfaceId`], as IPv4 numbers them; loopback first, with `::1`.
    pub(crate) ifaces: Vec<Iface6>,
    pub(crate) routes: RoutingTable<Ipv6Addr>,
    /// Bumped whenever routes or addresses change: routes cached from before are stale.
    pub(crate) route_epoch: u32,
    pub(crate) reassembly: Ipv6Reassembly,
    /// Path MTUs learned from packet too big (RFC 8201), never below 1280.
    pub(crate) path_mtu: PathMtuCache<Ipv6Addr>,
    /// The next fragment identification, from a random start (RFC 7739 §5.1's counter; one for the
    /// host, since fragments are rare here: only UDP datagrams larger than the path MTU make them).
    next_ident: u32,
    /// The earlier of the next path MTU's and the next redirect's end, kept as they change (the
    /// stack asks at every poll): never later than either.
    routes_deadline: Option<Instant>,
}

impl Ipv6 {
    pub(crate) fn new(config: &StackConfig, secret: SecretKey) -> Ipv6 {
        Ipv6 {
            cfg: Ipv6Config {
                hop_limit: config.default_ttl,
                input_header_prediction: config.input_header_prediction,
            },
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            route_epoch: 0,
            routes_deadline: None,
            // RFC 8200 §4.5: 60 seconds to reassemble, twice IPv4's 30.
            reassembly: Ipv6Reassembly::new(&crate::config::Limits {
                reassembly_timeout: config.limits.reassembly_timeout * 2,
                ..config.limits.clone()
            }),
            path_mtu: PathMtuCache::new(PathMtuLimits {
                entries: config.limits.path_mtu_entries,
                expires: config.limits.path_mtu_expires,
                floor: MIN_MTU,
            }),
            next_ident: secret.prf(b"ident") as u32,
        }
    }

    /// Adds an interface (numbered as IPv4 numbers it) with no addresses; the first one added is
    /// loopback and gets `::1`.
    pub(crate) fn add_interface(&mut self, caps: LinkCapabilities) -> InterfaceId {
        let id = InterfaceId(self.ifaces.len());
        self.ifaces.push(Iface6 {
            addrs: Vec::new(),
            deprecated: Vec::new(),
            temporary: Vec::new(),
            prefer_temporary: false,
            hop_limit: self.cfg.hop_limit,
            caps,
            intercept: false,
        });
        if id == LOOPBACK {
            self.ifaces[0]
                .addrs
                .push(Ipv6Cidr::new(Ipv6Addr::LOCALHOST, 128));
        }
        id
    }

    /// Gives `iface` the address `cidr.addr` and, with `on_link`, a route to its prefix on the link
    /// (none for a /128).
    pub(crate) fn add_address(&mut self, iface: InterfaceId, cidr: Ipv6Cidr, on_link: bool) {
        let f = &mut self.ifaces[iface.0];
        if !f.addrs.contains(&cidr) {
            f.addrs.push(cidr);
        }
        if on_link && cidr.prefix_len < 128 {
            self.add_route(Route {
                dest: Ipv6Cidr::new(cidr.addr, cidr.prefix_len),
                gateway: None,
                iface,
            });
        }
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// Takes `addr` from `iface`, and with `on_link` the route to its prefix on the link that
    /// `add_address` gave it. Returns whether `iface` had it.
    pub(crate) fn remove_address(
        &mut self,
        iface: InterfaceId,
        addr: Ipv6Addr,
        on_link: bool,
    ) -> bool {
        let f = &mut self.ifaces[iface.0];
        let Some(at) = f.addrs.iter().position(|c| c.addr == addr) else {
            return false;
        };
        let cidr = f.addrs.remove(at);
        f.deprecated.retain(|&a| a != addr);
        f.temporary.retain(|&a| a != addr);
        let given = self
            .routes
            .routes()
            .iter()
            .any(|r| r.dest == cidr && r.gateway.is_none() && r.iface == iface);
        if on_link && given {
            self.routes.remove(cidr);
        }
        self.route_epoch = self.route_epoch.wrapping_add(1);
        true
    }

    /// Marks `addr` of `iface` deprecated (or preferred again): see [`Iface6::deprecated`].
    pub(crate) fn set_deprecated(&mut self, iface: InterfaceId, addr: Ipv6Addr, deprecated: bool) {
        let f = &mut self.ifaces[iface.0];
        f.deprecated.retain(|&a| a != addr);
        if deprecated {
            f.deprecated.push(addr);
        }
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// Marks `addr` of `iface` temporary (RFC 8981): see [`Iface6::temporary`].
    pub(crate) fn set_temporary(&mut self, iface: InterfaceId, addr: Ipv6Addr) {
        let f = &mut self.ifaces[iface.0];
        if !f.temporary.contains(&addr) {
            f.temporary.push(addr);
        }
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// The hop limit of packets out of `iface` (a router's advertisement of it, RFC 4861 §6.3.4);
    /// cached headers are stale.
    pub(crate) fn set_hop_limit(&mut self, iface: InterfaceId, hop_limit: u8) {
        if self.ifaces[iface.0].hop_limit != hop_limit {
            self.ifaces[iface.0].hop_limit = hop_limit;
            self.route_epoch = self.route_epoch.wrapping_add(1);
        }
    }

    /// The hop limit of packets out of `iface`.
    #[inline]
    pub(crate) fn hop_limit(&self, iface: InterfaceId) -> u8 {
        self.ifaces
            .get(iface.0)
            .map_or(self.cfg.hop_limit, |f| f.hop_limit)
    }

    /// Whether `iface`'s temporary addresses are preferred as sources (RFC 6724 §5, rule 7).
    pub(crate) fn prefer_temporary(&mut self, iface: InterfaceId, prefer: bool) {
        self.ifaces[iface.0].prefer_temporary = prefer;
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// Adds a route (and makes cached routes stale).
    pub(crate) fn add_route(&mut self, route: Route<Ipv6Addr>) {
        self.routes.add(route);
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// A router redirected `destination` (see [`RoutingTable::redirect`]); cached routes are
    /// stale if it was taken.
    pub(crate) fn redirect(
        &mut self,
        destination: Ipv6Addr,
        gateway: Option<Ipv6Addr>,
        iface: InterfaceId,
        now: Instant,
    ) -> bool {
        let taken = self.routes.redirect(destination, gateway, iface, now);
        if taken {
            self.route_epoch = self.route_epoch.wrapping_add(1);
            self.routes_changed();
        }
        taken
    }

    /// Removes the route for exactly `dest` (and makes cached routes stale).
    pub(crate) fn remove_route(&mut self, dest: Ipv6Cidr) {
        if self.routes.remove(dest) {
            self.route_epoch = self.route_epoch.wrapping_add(1);
        }
    }

    /// Routes `dst`: loopback for this host's own addresses, else the longest-prefix match, from the
    /// outgoing interface's address that best fits `dst` ([`Self::source_for`]).
    pub(crate) fn route(&self, dst: Ipv6Addr) -> Result<NextHop6, DropReason> {
        if self.is_own_address(dst) {
            return Ok(NextHop::local(dst, self.ifaces[LOOPBACK.0].caps));
        }
        let route = self.routes.lookup(dst).ok_or(DropReason::Ipv6NoRoute)?;
        let f = &self.ifaces[route.iface.0];
        let src = Self::source_for(f, dst).ok_or(DropReason::Ipv6NoRoute)?;
        Ok(NextHop {
            iface: route.iface,
            src,
            next_hop: route.gateway.unwrap_or(dst),
            caps: f.caps,
        })
    }

    /// Source address selection, the parts of RFC 6724 §5 a host with a few addresses needs: the
    /// same scope as the destination first (rule 2: a link-local destination from a link-local
    /// address, a global one from a global address), then one not deprecated (rule 3), then a
    /// temporary one, or one not temporary, as the interface prefers (rule 7), then the longest
    /// common prefix (rule 8).
    fn source_for(f: &Iface6, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let link_local = |a: &Ipv6Addr| a.segments()[0] & 0xffc0 == 0xfe80;
        let common = |a: &Ipv6Addr| (u128::from(*a) ^ u128::from(dst)).leading_zeros();
        f.addrs.iter().map(|c| c.addr).max_by_key(|a| {
            (
                link_local(a) == link_local(&dst),
                !f.deprecated.contains(a),
                f.temporary.contains(a) == f.prefer_temporary,
                common(a),
            )
        })
    }

    /// Refuses to bind to `addr` unless it is the wildcard or one of this host's addresses.
    pub(crate) fn check_local_address(&self, addr: Ipv6Addr) -> std::io::Result<()> {
        if addr.is_unspecified() || self.is_own_address(addr) {
            return Ok(());
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{addr} is not an address of this host"),
        ))
    }

    /// True when `addr` is one of this host's unicast addresses (`::1` included).
    pub(crate) fn is_own_address(&self, addr: Ipv6Addr) -> bool {
        addr == Ipv6Addr::LOCALHOST
            || self
                .ifaces
                .iter()
                .any(|f| f.addrs.iter().any(|c| c.addr == addr))
    }

    /// True for the multicast groups this host belongs to: all-nodes at interface-local and link-local
    /// scope (`ff01::1`, `ff02::1`), and the solicited-node group (`ff02::1:ffXX:XXXX`) of each of its
    /// addresses (RFC 4291 §2.7.1, §2.8).
    pub(crate) fn is_member(&self, group: Ipv6Addr) -> bool {
        let s = group.segments();
        if group == Ipv6Addr::new(0xff01, 0, 0, 0, 0, 0, 0, 1)
            || group == Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
        {
            return true;
        }
        if s[..6] != [0xff02, 0, 0, 0, 0, 1] || s[6] >> 8 != 0xff {
            return false;
        }
        let low = u128::from(group) & 0xff_ffff;
        self.ifaces
            .iter()
            .flat_map(|f| &f.addrs)
            .any(|c| u128::from(c.addr) & 0xff_ffff == low)
    }

    /// The earliest reassembly timeout, path MTU expiry or redirect's end.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        #[cfg(test)]
        {
            let due = crate::ip::routes_deadline(&self.path_mtu, &self.routes);
            assert!(
                due.is_none_or(|due| self.routes_deadline.is_some_and(|kept| kept <= due)),
                "the kept deadline is never later than what it keeps"
            );
        }
        crate::time::earlier(self.reassembly.next_deadline(), self.routes_deadline)
    }

    /// Discards the reassemblies whose time is up (counted) and returns what ICMPv6 may quote of
    /// them; forgets the path MTUs and redirects past their time.
    pub(crate) fn expire(&mut self, cx: &mut Ip6Cx) -> Vec<Ipv6Expired> {
        let mut expired = Vec::new();
        let n = self.reassembly.expire(cx.now, cx.pool, |e| expired.push(e));
        for _ in 0..n {
            cx.drops.add(DropReason::ReassemblyTimeout);
        }
        let redirects = self.routes.expire(cx.now);
        if self.path_mtu.expire(cx.now, &mut cx.counters.path_mtu) + redirects > 0 {
            self.route_epoch = self.route_epoch.wrapping_add(1);
        }
        self.routes_changed();
        expired
    }

    /// `hop` with its MTU lowered to the path MTU to `dst` when one is known at `now`.
    pub(crate) fn along_path(&self, mut hop: NextHop6, dst: Ipv6Addr, now: Instant) -> NextHop6 {
        hop.caps.mtu = self.path_mtu.path_mtu(dst, hop.caps.mtu, now);
        hop
    }

    /// Works out [`Self::routes_deadline`] again after a path MTU or a redirect came or went.
    fn routes_changed(&mut self) {
        self.routes_deadline = crate::ip::routes_deadline(&self.path_mtu, &self.routes);
    }

    /// A packet too big said packets to `dst` must be at most `mtu` bytes (RFC 8201 §4): learned
    /// unless below 1280 or not below what is in use (both counted). Learning makes cached routes
    /// stale. Returns the path MTU now in use, or `None` when `mtu` was refused as below the floor.
    pub(crate) fn learn_path_mtu(
        &mut self,
        cx: &mut Ip6Cx,
        dst: Ipv6Addr,
        mtu: usize,
    ) -> Option<usize> {
        let link_mtu = self.route(dst).map_or(usize::MAX, |h| h.caps.mtu);
        let (now, counters) = (cx.now, &mut cx.counters.path_mtu);
        self.learn_path_mtu_at(now, dst, mtu, link_mtu, counters, cx.drops)
    }

    /// [`Self::learn_path_mtu`] with the first hop's MTU given.
    pub(crate) fn learn_path_mtu_at(
        &mut self,
        now: Instant,
        dst: Ipv6Addr,
        mtu: usize,
        link_mtu: usize,
        counters: &mut crate::stats::PathMtuCounters,
        drops: &mut Drops,
    ) -> Option<usize> {
        match self
            .path_mtu
            .learn(dst, mtu, link_mtu, now, counters, drops)
        {
            Ok(mtu) => {
                self.route_epoch = self.route_epoch.wrapping_add(1);
                self.routes_changed();
                Some(mtu)
            }
            Err(Refused::NotSmaller(current)) => Some(current),
            Err(Refused::BelowFloor) => None,
        }
    }

    /// A new fragment identification.
    pub(crate) fn next_ident(&mut self) -> u32 {
        self.next_ident = self.next_ident.wrapping_add(1);
        self.next_ident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn layer() -> Ipv6 {
        let mut ip = Ipv6::new(
            &StackConfig::default(),
            crate::secret::SecretKey::from_bytes([1; 16]),
        );
        ip.add_interface(LinkCapabilities::plain(65535));
        let tun = ip.add_interface(LinkCapabilities::plain(1500));
        ip.add_address(tun, "2001:db8::1/64".parse().unwrap(), true);
        ip.add_address(tun, "fe80::1/64".parse().unwrap(), true);
        ip
    }

    #[test]
    fn routes_and_sources() {
        let mut ip = layer();
        let hop = ip.route(a("2001:db8::2")).unwrap();
        assert_eq!((hop.iface, hop.src), (InterfaceId(1), a("2001:db8::1")));
        let hop = ip.route(a("fe80::9")).unwrap();
        assert_eq!(hop.src, a("fe80::1"));
        assert_eq!(ip.route(a("::1")).unwrap().iface, LOOPBACK);
        assert_eq!(ip.route(a("2001:db8::1")).unwrap().iface, LOOPBACK);
        assert_eq!(
            ip.route(a("2001:db9::1")).unwrap_err(),
            DropReason::Ipv6NoRoute
        );
        ip.add_route(Route {
            dest: "::/0".parse().unwrap(),
            gateway: Some(a("fe80::ff")),
            iface: InterfaceId(1),
        });
        let hop = ip.route(a("2001:db9::1")).unwrap();
        assert_eq!((hop.src, hop.next_hop), (a("2001:db8::1"), a("fe80::ff")));
    }

    #[test]
    fn groups_and_own_addresses() {
        let ip = layer();
        assert!(ip.is_member(a("ff02::1")));
        assert!(ip.is_member(a("ff01::1")));
        assert!(ip.is_member(a("ff02::1:ff00:1")));
        assert!(!ip.is_member(a("ff02::1:ff00:2")));
        assert!(!ip.is_member(a("ff02::2")));
        assert!(!ip.is_member(a("ff05::1")));
        assert!(ip.is_own_address(a("::1")));
        assert!(ip.is_own_address(a("fe80::1")));
        assert!(!ip.is_own_address(a("2001:db8::2")));
        assert!(ip.check_local_address(a("::")).is_ok());
        assert!(ip.check_local_address(a("2001:db8::2")).is_err());
    }
}
