//! The stack's routing for interfaces whose link carries Ethernet frames: frames in through the
//! interface's link layer (`ethernet/`) to IPv4 and IPv6, its timers, and what it reports applied
//! to the IP layers (an IPv6 address that passed duplicate address detection, a router's
//! advertisement). Output reaches the link layer through `Devices::transmit`, with the next hop
//! IP chose.

use std::net::Ipv6Addr;

use super::Stack;
use crate::buf::PacketBuf;
use crate::config::TemporaryMode;
use crate::ethernet::interface::mask;
use crate::ethernet::{
    EthernetCounters, EthernetEvent, EthernetInterface, FrameIn, NeighborBoard, Redirect,
    RouterInfo,
};
use crate::route::{InterfaceId, Ipv4Cidr, Ipv6Cidr, Route};
use crate::secret::SecretKey;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::MacAddr;

impl Stack {
    /// Gives an Ethernet interface its link layer: ARP for `cidr`, and a link-local IPv6 address
    /// checked for duplicates before use.
    pub(super) fn attach_ethernet(&mut self, iface: InterfaceId, mac: MacAddr, cidr: Ipv4Cidr) {
        let mut eth = EthernetInterface::new(mac, self.config.ethernet);
        if self.config.ethernet.stable_privacy {
            eth.set_privacy_key(self.privacy_key);
        }
        let temporary = self.config.ethernet.temporary.mode;
        if temporary != TemporaryMode::Off {
            // Drawn afresh, not from the stack's secret: a temporary address must not come back
            // when the stack starts again with the same secret and the same clock.
            eth.set_temporary_key(SecretKey::random());
        }
        self.ip6
            .prefer_temporary(iface, temporary == TemporaryMode::Prefer);
        eth.add_ipv4(cidr);
        let ll = Ipv6Cidr::new(eth.link_local(), 64);
        self.devices.list[iface.0].eth = Some(Box::new(eth));
        self.devices.ethernet = true;
        self.ethernet_add_ipv6(iface, ll);
    }

    /// Starts using `cidr` on Ethernet interface `iface`: at once when duplicate address
    /// detection is off, else when it has passed. Returns false when `iface` is not Ethernet.
    pub(super) fn ethernet_add_ipv6(&mut self, iface: InterfaceId, cidr: Ipv6Cidr) -> bool {
        let now = self.now;
        let Some(eth) = self.devices.list[iface.0].eth.as_mut() else {
            return false;
        };
        if eth.add_ipv6(cidr, now) {
            self.ip6.add_address(iface, cidr, true);
        }
        true
    }

    /// The link layer of interface `iface`, if its link carries Ethernet frames: its hardware
    /// address, neighbour caches and counters.
    pub fn ethernet(&self, iface: InterfaceId) -> Option<&EthernetInterface> {
        self.devices.list.get(iface.0)?.eth.as_deref()
    }

    /// [`EthernetCounters`] of interface `iface`, if it is Ethernet.
    pub fn ethernet_counters(&self, iface: InterfaceId) -> Option<EthernetCounters> {
        self.ethernet(iface).map(|e| e.counters)
    }

    /// Input of one round of frames from Ethernet interface `i`, taken out of `batch`.
    #[inline(never)]
    pub(super) fn ethernet_input(&mut self, i: usize, batch: &mut Vec<PacketBuf>) {
        let now = self.now;
        for frame in batch.drain(..) {
            let dev = &mut self.devices.list[i];
            let Some(eth) = dev.eth.as_mut() else {
                return;
            };
            match eth.input(frame, now, &mut dev.txq) {
                FrameIn::Ipv4(p) => self.ipv4_input(InterfaceId(i), p),
                FrameIn::Ipv6(p) => self.ipv6_input(InterfaceId(i), p),
                FrameIn::Consumed => {}
            }
        }
        // What the link layer itself answered (ARP, neighbour discovery) is on the queue.
        self.devices.queued |= !self.devices.list[i].txq.is_empty();
        self.ethernet_events();
    }

    /// Makes Ethernet interface `iface` share the answers it hears with other stacks given the
    /// same `board`: the stacks of the other queues of one multi-queue interface, which have its
    /// addresses too and whose answers the link may hand to any of them
    /// ([`NeighborBoard`]). Returns false when `iface` is not
    /// Ethernet.
    pub fn share_neighbors(&mut self, iface: InterfaceId, board: NeighborBoard) -> bool {
        match self
            .devices
            .list
            .get_mut(iface.0)
            .and_then(|d| d.eth.as_mut())
        {
            Some(eth) => {
                eth.set_board(board);
                true
            }
            None => false,
        }
    }

    /// Runs the Ethernet interfaces' timers and applies what they report.
    pub(super) fn ethernet_timers(&mut self, now: Instant) {
        for dev in self.devices.list.iter_mut() {
            if let Some(eth) = dev.eth.as_mut() {
                eth.read_board(now, &mut dev.txq);
                self.devices.queued |= !dev.txq.is_empty();
                if eth.next_deadline().is_some_and(|d| d <= now) {
                    eth.poll(now, &mut dev.txq);
                    self.devices.queued = true;
                }
            }
        }
        self.ethernet_events();
    }

    /// The earliest deadline of an Ethernet interface's timers.
    pub(super) fn ethernet_deadline(&self) -> Option<Instant> {
        if !self.devices.ethernet {
            return None;
        }
        self.devices
            .list
            .iter()
            .filter_map(|d| d.eth.as_ref()?.next_deadline())
            .min()
    }

    /// Applies what the Ethernet interfaces report, and takes their drops into the stack's counts.
    /// Asked twice a poll and almost always with nothing to apply: the look is inline, the work
    /// out of line.
    #[inline]
    fn ethernet_events(&mut self) {
        for i in 1..self.devices.list.len() {
            if self.devices.list[i]
                .eth
                .as_ref()
                .is_some_and(|e| e.has_news())
            {
                self.ethernet_news(i);
            }
        }
    }

    /// Applies what Ethernet interface `i` reports (see [`Self::ethernet_events`]).
    #[inline(never)]
    fn ethernet_news(&mut self, i: usize) {
        let Some(eth) = self.devices.list[i].eth.as_mut() else {
            return;
        };
        eth.take_drops(&mut self.counters.drops);
        let iface = InterfaceId(i);
        for event in eth.take_events() {
            match event {
                EthernetEvent::AddressReady(cidr) => {
                    // An address formed from a router's prefix brings no on-link route: the
                    // prefix's on-link flag decides that (RFC 4862 §5.5.3's note).
                    let autoconf = self.devices.list[i]
                        .eth
                        .as_ref()
                        .is_some_and(|e| e.is_autoconfigured(cidr.addr));
                    self.ip6.add_address(iface, cidr, !autoconf);
                    if self.devices.list[i]
                        .eth
                        .as_ref()
                        .is_some_and(|e| e.is_temporary(cidr.addr))
                    {
                        self.ip6.set_temporary(iface, cidr.addr);
                    }
                }
                // Counted by the interface; the address is simply not used (RFC 4862 §5.4.5).
                EthernetEvent::Duplicate(_) => {}
                EthernetEvent::Router(info) => self.router_heard(iface, &info),
                EthernetEvent::DefaultRouter { router, replaced } => {
                    self.default_router_chosen(iface, router, replaced)
                }
                EthernetEvent::Expired { router, prefix } => {
                    self.advertised_expired(iface, router, prefix)
                }
                EthernetEvent::Deprecated { addr, deprecated } => {
                    self.ip6.set_deprecated(iface, addr, deprecated)
                }
                EthernetEvent::AddressExpired(cidr) => {
                    self.ip6.remove_address(iface, cidr.addr, false);
                }
                EthernetEvent::Redirect(redirect) => self.redirect_heard(iface, redirect),
            }
        }
    }

    /// The on-link route to a prefix a router advertised ran out (RFC 4861 §6.3.5): removed if
    /// it is still the one the advertisement gave.
    fn advertised_expired(&mut self, iface: InterfaceId, _router: Ipv6Addr, prefix: Ipv6Cidr) {
        let ours = self
            .ip6
            .routes
            .lookup(prefix.addr)
            .is_some_and(|r| r.dest == prefix && r.gateway.is_none() && r.iface == iface);
        if ours {
            self.ip6.remove_route(prefix);
        }
    }

    /// The interface chose another default router (RFC 4861 §6.3.6): the default route goes
    /// through it, or, with none left, the route through the one `replaced` goes (a default
    /// route the application gave through another gateway stays).
    fn default_router_chosen(
        &mut self,
        iface: InterfaceId,
        router: Option<Ipv6Addr>,
        replaced: Option<Ipv6Addr>,
    ) {
        let default = Ipv6Cidr::new(Ipv6Addr::UNSPECIFIED, 0);
        match router {
            Some(router) => self.ip6.add_route(Route {
                dest: default,
                gateway: Some(router),
                iface,
            }),
            None => {
                let ours = self
                    .ip6
                    .routes
                    .lookup(Ipv6Addr::UNSPECIFIED)
                    .is_some_and(|r| {
                        r.dest == default && r.gateway == replaced && r.iface == iface
                    });
                if ours {
                    self.ip6.remove_route(default);
                }
            }
        }
    }

    /// A router redirects a destination (RFC 4861 §8.3): taken only from the router the
    /// destination's route goes through now, on the interface it came in on (§8.1), and then the
    /// destination goes through the target (or, when the target is the destination, straight
    /// over the link) by a route of its own, one of at most `route::MAX_REDIRECTS`.
    fn redirect_heard(&mut self, iface: InterfaceId, r: Redirect) {
        let first_hop = self
            .ip6
            .route(r.destination)
            .ok()
            .filter(|hop| hop.iface == iface)
            .map(|hop| hop.next_hop);
        let gateway = (r.target != r.destination).then_some(r.target);
        if first_hop != Some(r.router)
            || !self.ip6.redirect(r.destination, gateway, iface, self.now)
        {
            self.counters.drops.add(DropReason::NdpRedirectNotFirstHop);
        }
    }

    /// A router's advertisement (RFC 4861 §6.3.4): the hop limit it gives, routes to the prefixes
    /// it says are on the link, and its MTU when it is one the link can carry. The on-link routes go when their
    /// lifetimes run out ([`Self::advertised_expired`]); the default route is the link layer's
    /// choice among the routers heard ([`Self::default_router_chosen`]), and the addresses it
    /// offers for autoconfiguration are the link layer's to form and age
    /// (`EthernetInterface::autoconfigure`).
    fn router_heard(&mut self, iface: InterfaceId, info: &RouterInfo) {
        // CurHopLimit (RFC 4861 §6.3.4): the hop limit of what leaves by this interface.
        if info.hop_limit != 0 {
            self.ip6.set_hop_limit(iface, info.hop_limit);
        }
        for p in &info.prefixes {
            // The link-local prefix is every link's already; a length past 128 is no prefix, and
            // one of 0 would make the whole Internet on-link (RFC 4861 §6.3.4 leaves both out).
            let ll_prefix = p.prefix.segments()[0] & 0xffc0 == 0xfe80;
            if ll_prefix || p.valid_lifetime == 0 || !(1..=128).contains(&p.prefix_len) {
                continue;
            }
            if p.on_link {
                self.ip6.add_route(Route {
                    dest: Ipv6Cidr::new(mask(p.prefix, p.prefix_len), p.prefix_len),
                    gateway: None,
                    iface,
                });
            }
        }
        if let Some(mtu) = info.mtu {
            let f = &mut self.ip6.ifaces[iface.0];
            let link_mtu = self.ip.ifaces[iface.0].caps.mtu;
            if (1280..=link_mtu).contains(&(mtu as usize)) {
                f.caps.mtu = mtu as usize;
            }
        }
    }
}
