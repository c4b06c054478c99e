//! IPv4: the host's addresses and routes, input validation, output with header templates and
//! fragmentation, reassembly and the identification counters.
//!
//! `Ipv4` owns all of that state and is called with a narrow context (`IpCx`: the clock, the
//! buffer pool, IP's counters and the drop counters). Input (`input`) returns the datagram it
//! accepted, for the stack to hand to a transport; output (`output`) hands finished packets to a
//! `Transmit` sink. IPv4 knows nothing of the protocols above it.

pub mod ident;
mod input;
mod output;

use std::net::Ipv4Addr;

use crate::buf::BufferPool;
use crate::checksum::{self, Algorithm};
use crate::config::StackConfig;
use crate::link::LinkCapabilities;
use crate::pmtu::{PathMtuCache, PathMtuLimits, Refused};
use crate::reassembly::Ipv4Reassembly;
use crate::route::{InterfaceId, Ipv4Cidr, Route, RoutingTable};
use crate::secret::SecretKey;
use crate::stats::{Drops, IpCounters, PathMtuCounters};
use crate::time::Instant;
use ident::IdentTable;

pub(crate) use input::Input4;
pub(crate) use output::HeaderTemplate;

pub use crate::ip::LOOPBACK;
pub(crate) use crate::ip::{Delivery, Transmit};

/// Where a datagram to an IPv4 destination goes.
pub(crate) type NextHop = crate::ip::NextHop<Ipv4Addr>;

/// One interface as IP sees it: its address, prefix and what its link can do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IfaceAddr {
    pub(crate) cidr: Ipv4Cidr,
    /// The prefix's directed broadcast address, computed once.
    pub(crate) broadcast: Option<Ipv4Addr>,
    pub(crate) caps: LinkCapabilities,
    /// Takes packets to any unicast address as [`Delivery::Intercepted`] (`Stack::set_intercept`).
    pub(crate) intercept: bool,
}

/// IPv4's slice of the stack's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ipv4Config {
    pub(crate) checksum: Algorithm,
    pub(crate) inline_header_checksum: bool,
    pub(crate) input_header_prediction: bool,
    pub(crate) output_header_template: bool,
    pub(crate) default_ttl: u8,
    pub(crate) accept_ttl_zero: bool,
    /// `path_mtu_discovery`: TCP is sent with DF and "fragmentation needed" is acted on.
    pub(crate) path_mtu_discovery: bool,
}

impl Ipv4Config {
    fn of(config: &StackConfig) -> Ipv4Config {
        Ipv4Config {
            checksum: config.checksum,
            inline_header_checksum: config.inline_header_checksum,
            input_header_prediction: config.input_header_prediction,
            output_header_template: config.output_header_template,
            default_ttl: config.default_ttl,
            accept_ttl_zero: config.accept_ttl_zero,
            path_mtu_discovery: config.path_mtu_discovery,
        }
    }

    /// The sum of a 20-byte (or longer) header: in line (`inline_header_checksum`, paper 000 §6.1) or
    /// by the general routine (counted, `header_sums_by_routine`).
    #[inline]
    pub(crate) fn header_sum(&self, counters: &mut IpCounters, header: &[u8]) -> u16 {
        timed!(Checksum);
        match <&[u8; 20]>::try_from(header) {
            Ok(h) if self.inline_header_checksum => checksum::ipv4_header_sum(h),
            _ => {
                counters.header_sums_by_routine += 1;
                self.checksum.sum(header)
            }
        }
    }
}

/// What IP is handed for each call: the clock, the buffer pool, its counters and the drops.
pub(crate) struct IpCx<'a> {
    pub(crate) now: Instant,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut IpCounters,
    pub(crate) drops: &'a mut Drops,
}

/// The IPv4 layer of a stack.
#[derive(Debug)]
pub(crate) struct Ipv4 {
    pub(crate) cfg: Ipv4Config,
    /// Interfaces by [`InterfaceId`]; loopback first.
    pub(crate) ifaces: Vec<IfaceAddr>,
    pub(crate) routes: RoutingTable,
    pub(crate) reassembly: Ipv4Reassembly,
    pub(crate) ident: IdentTable,
    /// Path MTUs learned from "fragmentation needed" (RFC 1191), by destination.
    pub(crate) path_mtu: PathMtuCache<Ipv4Addr>,
    /// Bumped whenever routes or interfaces change, and whenever a path MTU is learned or expires:
    /// routes cached from before (UDP's `TxRoute`, a TCP connection's MSS) are stale.
    pub(crate) route_epoch: u32,
    /// The earlier of the next path MTU's and the next redirect's end, kept as they change (the
    /// stack asks at every poll): never later than either.
    routes_deadline: Option<Instant>,
}

impl Ipv4 {
    pub(crate) fn new(config: &StackConfig, secret: SecretKey) -> Ipv4 {
        Ipv4 {
            cfg: Ipv4Config::of(config),
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            reassembly: Ipv4Reassembly::new(&config.limits),
            ident: IdentTable::new(secret),
            path_mtu: PathMtuCache::new(PathMtuLimits {
                entries: config.limits.path_mtu_entries,
                expires: config.limits.path_mtu_expires,
                floor: config.limits.path_mtu_floor,
            }),
            route_epoch: 0,
            routes_deadline: None,
        }
    }

    /// Adds an interface and the route to its prefix.
    pub(crate) fn add_interface(&mut self, cidr: Ipv4Cidr, caps: LinkCapabilities) -> InterfaceId {
        let id = InterfaceId(self.ifaces.len());
        self.ifaces.push(IfaceAddr {
            cidr,
            broadcast: cidr.broadcast(),
            caps,
            intercept: false,
        });
        self.add_route(Route {
            dest: Ipv4Cidr::new(cidr.addr, cidr.prefix_len),
            gateway: None,
            iface: id,
        });
        id
    }

    /// Adds a route (and makes cached routes stale).
    pub(crate) fn add_route(&mut self, route: Route) {
        self.routes.add(route);
        self.route_epoch = self.route_epoch.wrapping_add(1);
    }

    /// A router redirected `destination` (see [`RoutingTable::redirect`]); cached routes are
    /// stale if it was taken.
    pub(crate) fn redirect(
        &mut self,
        destination: Ipv4Addr,
        gateway: Ipv4Addr,
        iface: InterfaceId,
        now: Instant,
    ) -> bool {
        let taken = self.routes.redirect(destination, Some(gateway), iface, now);
        if taken {
            self.route_epoch = self.route_epoch.wrapping_add(1);
            self.routes_changed();
        }
        taken
    }

    /// Routes `dst`: the loopback interface for this host's own addresses, else the longest-prefix match.
    #[inline]
    pub(crate) fn route(&self, dst: Ipv4Addr) -> Result<NextHop, crate::stats::DropReason> {
        let lo = &self.ifaces[LOOPBACK.0];
        if lo.cidr.contains(dst) || self.ifaces.iter().any(|f| f.cidr.addr == dst) {
            return Ok(NextHop::local(dst, lo.caps));
        }
        let route = self
            .routes
            .lookup(dst)
            .ok_or(crate::stats::DropReason::Ipv4NoRoute)?;
        let f = &self.ifaces[route.iface.0];
        Ok(NextHop {
            iface: route.iface,
            src: f.cidr.addr,
            next_hop: route.gateway.unwrap_or(dst),
            caps: f.caps,
        })
    }

    /// Refuses to bind to `addr` unless it is the wildcard or one of this host's addresses.
    pub(crate) fn check_local_address(&self, addr: Ipv4Addr) -> std::io::Result<()> {
        if addr.is_unspecified() || self.is_own_address(addr) {
            return Ok(());
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{addr} is not an address of this host"),
        ))
    }

    /// True when `addr` is one of this host's unicast addresses (all of 127/8 counts).
    pub(crate) fn is_own_address(&self, addr: Ipv4Addr) -> bool {
        addr.is_loopback() || self.ifaces.iter().any(|f| f.cidr.addr == addr)
    }

    /// True for the limited broadcast and every interface's directed broadcast: the addresses the
    /// broadcast option is needed for, as in BSD's `in_broadcast`.
    pub(crate) fn is_broadcast(&self, addr: Ipv4Addr) -> bool {
        addr.is_broadcast() || self.ifaces.iter().any(|f| f.broadcast == Some(addr))
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

    /// `hop` with its MTU lowered to the path MTU to `dst` when one is known at `now` (for a
    /// transport that sizes or fragments datagrams by the path, not the link).
    #[inline]
    pub(crate) fn along_path(&self, mut hop: NextHop, dst: Ipv4Addr, now: Instant) -> NextHop {
        hop.caps.mtu = self.path_mtu.path_mtu(dst, hop.caps.mtu, now);
        hop
    }

    /// Works out [`Self::routes_deadline`] again after a path MTU or a redirect came or went.
    fn routes_changed(&mut self) {
        self.routes_deadline = crate::ip::routes_deadline(&self.path_mtu, &self.routes);
    }

    /// A "fragmentation needed" said datagrams to `dst` (whose first hop takes `link_mtu`) must be at
    /// most `mtu` bytes, and the transport found it plausible (RFC 5927 §5). Returns the path MTU now
    /// in use: `mtu` if it was learned, or the smaller one already known (the message is then
    /// counted as ignored); `None` when `mtu` is below the floor. Learning makes cached routes stale.
    pub(crate) fn learn_path_mtu(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        mtu: usize,
        link_mtu: usize,
        counters: &mut PathMtuCounters,
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
}
