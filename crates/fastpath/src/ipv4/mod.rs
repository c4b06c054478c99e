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
use crate::reassembly::Ipv4Reassembly;
use crate::route::{InterfaceId, Ipv4Cidr, Route, RoutingTable};
use crate::stats::{Drops, IpCounters};
use crate::time::Instant;
use ident::IdentTable;

pub(crate) use output::{HeaderTemplate, Transmit};

/// The loopback interface every stack has: interface 0.
pub const LOOPBACK: InterfaceId = InterfaceId(0);

/// Where a datagram to some destination goes: the result of routing it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NextHop {
    pub(crate) iface: InterfaceId,
    /// The source address to use unless the socket is bound to one.
    pub(crate) src: Ipv4Addr,
    /// The gateway, or the destination itself when it is on the link.
    pub(crate) next_hop: Ipv4Addr,
    pub(crate) caps: LinkCapabilities,
}

/// How an arriving datagram is addressed to this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Unicast,
    Broadcast,
}

/// One interface as IP sees it: its address, prefix and what its link can do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IfaceAddr {
    pub(crate) cidr: Ipv4Cidr,
    /// The prefix's directed broadcast address, computed once.
    pub(crate) broadcast: Option<Ipv4Addr>,
    pub(crate) caps: LinkCapabilities,
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
    /// Bumped whenever routes or interfaces change: routes cached from before are stale.
    pub(crate) route_epoch: u32,
}

impl Ipv4 {
    pub(crate) fn new(config: &StackConfig, secret: [u64; 2]) -> Ipv4 {
        Ipv4 {
            cfg: Ipv4Config::of(config),
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            reassembly: Ipv4Reassembly::new(&config.limits),
            ident: IdentTable::new(secret),
            route_epoch: 0,
        }
    }

    /// Adds an interface and the route to its prefix.
    pub(crate) fn add_interface(&mut self, cidr: Ipv4Cidr, caps: LinkCapabilities) -> InterfaceId {
        let id = InterfaceId(self.ifaces.len());
        self.ifaces.push(IfaceAddr {
            cidr,
            broadcast: cidr.broadcast(),
            caps,
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

    /// Routes `dst`: the loopback interface for this host's own addresses, else the longest-prefix match.
    #[inline]
    pub(crate) fn route(&self, dst: Ipv4Addr) -> Result<NextHop, crate::stats::DropReason> {
        let lo = &self.ifaces[LOOPBACK.0];
        if lo.cidr.contains(dst) || self.ifaces.iter().any(|f| f.cidr.addr == dst) {
            return Ok(NextHop {
                iface: LOOPBACK,
                src: dst,
                next_hop: dst,
                caps: lo.caps,
            });
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

    /// The earliest reassembly timeout.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.reassembly.next_deadline()
    }
}
