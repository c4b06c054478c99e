//! One Ethernet interface's link layer: frames in and out, ARP and neighbour discovery, the two
//! neighbour caches, duplicate address detection. The stack holds one per link whose
//! [`Medium`](crate::link::Medium) is Ethernet and calls it with the clock and a queue for the
//! frames it must send; it returns what arrived for IPv4 and IPv6 and reports what the stack must
//! apply (an address checked, a router heard) as events. No IP layer sees any of it.
//!
//! Input keeps a frame only if it is addressed to us (our address, broadcast, or a group we
//! listen to: all nodes and the solicited-node groups of our IPv6 addresses), comes from a
//! unicast address that is not ours, and carries our VLAN (or none when we have none). ARP and
//! neighbour discovery messages are answered here (one message out at most for one in); IPv4
//! and IPv6 packets are handed back with the header stripped. Output maps groups and broadcasts
//! to their Ethernet addresses and resolves unicast next hops through the cache, holding packets
//! while it asks.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::arp::{arp_input, ArpDrop, ArpInterface};
use super::board::NeighborBoard;
use super::ndp::{link_local, ndp_input, NdpDrop, NdpInterface, Redirect, RouterInfo, ALL_NODES};
use super::neighbor::{NeighborAction, NeighborCache, NeighborState, Resolved};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::checksum;
pub use crate::config::EthernetConfig;
use crate::config::{TemporaryAddresses, TemporaryMode};
use crate::route::{Ipv4Cidr, Ipv6Cidr};
use crate::secret::SecretKey;
use crate::stats::{DropReason, Drops};
use crate::time::Instant;
use crate::wire::ethernet::HEADER_LEN;
use crate::wire::ndp::{multicast_mac, solicited_node};
use crate::wire::{
    ArpOp, ArpPacket, ArpRepr, EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv6Packet,
    Ipv6Repr, MacAddr, NdpRepr, VlanTag,
};

/// What an arriving frame held for the layers above.
#[derive(Debug)]
pub enum FrameIn {
    /// An IPv4 packet (the frame's header stripped).
    Ipv4(PacketBuf),
    /// An IPv6 packet.
    Ipv6(PacketBuf),
    /// Nothing: it was ARP or neighbour discovery (answered here), or dropped (counted).
    Consumed,
}

/// What the stack must apply, reported by [`EthernetInterface::take_events`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EthernetEvent {
    /// An IPv6 address passed duplicate address detection: give it to IPv6.
    AddressReady(Ipv6Cidr),
    /// An IPv6 address being checked belongs to another node: it is not used.
    Duplicate(Ipv6Addr),
    /// A router advertised itself (its prefixes and MTU for the stack to apply; the default
    /// router is [`EthernetEvent::DefaultRouter`]'s).
    Router(RouterInfo),
    /// The default router changed (RFC 4861 §6.3.6): the default route goes through `router`
    /// now, or through none when no router is left; `replaced` is the one it went through.
    DefaultRouter {
        /// The router chosen.
        router: Option<Ipv6Addr>,
        /// The router chosen before.
        replaced: Option<Ipv6Addr>,
    },
    /// The on-link route to a prefix a router gave ran out.
    Expired {
        /// The router.
        router: Ipv6Addr,
        /// The prefix.
        prefix: Ipv6Cidr,
    },
    /// An address formed from a router's prefix (RFC 4862 §5.5.3) changed preference: deprecated
    /// when its preferred lifetime ran out (a source for new communication only when no other
    /// will do, §5.5.4), preferred again when an advertisement extended it.
    Deprecated {
        /// The address.
        addr: Ipv6Addr,
        /// Deprecated (true) or preferred again (false).
        deprecated: bool,
    },
    /// An address formed from a router's prefix reached the end of its valid lifetime (RFC 4862
    /// §5.5.4): it is no longer ours, as a source or as a destination.
    AddressExpired(Ipv6Cidr),
    /// A router redirects a destination (RFC 4861 §8): applied if it is the destination's first
    /// hop now.
    Redirect(Redirect),
}

/// What the interface counted, beyond its drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthernetCounters {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// ARP requests sent (resolutions and probes).
    pub arp_requests_out: u64,
    /// ARP replies sent.
    pub arp_replies_out: u64,
    /// Neighbour solicitations sent (resolutions, probes and duplicate address detection).
    pub ns_out: u64,
    /// Neighbour advertisements sent.
    pub na_out: u64,
    /// Router advertisements heard.
    pub ra_in: u64,
    /// Redirects heard that passed the message's own checks (the stack then checks their
    /// sender against its route: `ndp: redirect not from the first hop`).
    pub redirects_in: u64,
    /// Router solicitations sent.
    pub rs_out: u64,
    /// Multicast listener reports sent (MLDv2).
    pub mld_reports_out: u64,
    /// Multicast listener queries heard.
    pub mld_queries_in: u64,
    /// IPv6 addresses found to be duplicates.
    pub duplicates: u64,
    /// Temporary addresses formed (RFC 8981), each new identifier counted.
    pub temporary_formed: u64,
}

impl std::fmt::Display for EthernetCounters {
    /// Prints like the stack's counters: a heading, then what is not zero.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "ethernet:")?;
        for (n, what) in [
            (self.rx_frames, "frames received"),
            (self.tx_frames, "frames sent"),
            (self.arp_requests_out, "arp requests sent"),
            (self.arp_replies_out, "arp replies sent"),
            (self.ns_out, "neighbor solicitations sent"),
            (self.na_out, "neighbor advertisements sent"),
            (self.ra_in, "router advertisements received"),
            (self.redirects_in, "redirects received"),
            (self.rs_out, "router solicitations sent"),
            (self.mld_reports_out, "multicast listener reports sent"),
            (self.mld_queries_in, "multicast listener queries received"),
            (self.duplicates, "duplicate addresses found"),
            (self.temporary_formed, "temporary addresses formed"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
struct Dad {
    cidr: Ipv6Cidr,
    sent: u8,
    next: Instant,
}

/// An address formed from a router's prefix (stateless autoconfiguration, RFC 4862 §5.5.3) and
/// its lifetimes (`None`: infinite).
#[derive(Clone, Copy, Debug)]
struct Autoconf {
    cidr: Ipv6Cidr,
    preferred: Option<Instant>,
    valid: Option<Instant>,
    deprecated: bool,
    /// Another node has it (duplicate address detection failed): not used, and not formed again
    /// while the prefix stays valid (as Linux keeps such an address, marked failed).
    failed: bool,
    /// RFC 7217's DAD_Counter: duplicates met for this prefix (stable identifiers only).
    dad_counter: u8,
    /// A temporary address (RFC 8981), not the prefix's own.
    temporary: Option<Temporary>,
}

/// What makes an autoconfigured address temporary (RFC 8981).
#[derive(Clone, Copy, Debug)]
struct Temporary {
    /// When it was formed: its lifetimes are bounded from then.
    created: Instant,
    /// Its `DESYNC_FACTOR` (§3.8), taken off its preferred lifetime.
    desync: Duration,
    /// Its successor was formed (or tried), `REGEN_ADVANCE` before it is deprecated.
    succeeded: bool,
    /// Identifiers tried before this one after duplicates (at most `TEMP_IDGEN_RETRIES`).
    retries: u8,
}

/// RFC 8981 §3.8's `TEMP_IDGEN_RETRIES`: identifiers tried after a duplicate.
const TEMP_IDGEN_RETRIES: u8 = 3;

/// Temporary addresses an interface has at most at once (Linux bounds all of an interface's
/// addresses by `max_addresses`, 16).
const MAX_TEMPORARY: usize = 16;

/// A router on the default router list (RFC 4861 §6.3.6).
#[derive(Clone, Copy, Debug)]
struct DefaultRouter {
    addr: Ipv6Addr,
    /// When its router lifetime runs out.
    until: Instant,
    /// Its preference (RFC 4191 §2.2): 1 high, 0 medium, -1 low.
    preference: i8,
    /// It did not answer neighbour discovery's probes since it last advertised itself.
    suspect: bool,
}

/// Routers on the default router list at most; an advertisement from one more is taken for its
/// prefixes but not as a default router.
const MAX_DEFAULT_ROUTERS: usize = 16;

/// RFC 4861 §6.3.2's MIN_RANDOM_FACTOR and MAX_RANDOM_FACTOR, in thousandths: ReachableTime is
/// drawn between half and one and a half times BaseReachableTime.
const REACHABLE_FACTOR: (u32, u32) = (500, 1500);

/// RFC 7217 §6's IDGEN_RETRIES: identifiers tried after the first, past duplicates or reserved
/// identifiers.
const IDGEN_RETRIES: u8 = 3;

/// Whether an interface identifier is one a host may not take (RFC 5453): all zeros (the
/// subnet-router anycast address) or one of the reserved subnet anycast identifiers.
fn reserved_id(id: u64) -> bool {
    id == 0 || (0xfdff_ffff_ffff_ff80..=0xfdff_ffff_ffff_ffff).contains(&id)
}

impl Autoconf {
    /// Whether its preferred lifetime has run out at `now`.
    fn deprecated_at(&self, now: Instant) -> bool {
        self.preferred.is_some_and(|t| t <= now)
    }

    /// Whether it is `prefix`'s own address (not a temporary one).
    fn is_public_of(&self, prefix: Ipv6Addr) -> bool {
        self.temporary.is_none() && mask(self.cidr.addr, 64) == prefix
    }

    /// When its successor is due, if it is a temporary address that has none yet.
    fn regenerate_at(&self, regen_advance: Duration) -> Option<Instant> {
        let t = self.temporary?;
        if t.succeeded || self.deprecated {
            return None;
        }
        let preferred = self.preferred?;
        Some(Instant::from_micros(
            preferred
                .total_micros()
                .saturating_sub(regen_advance.as_micros() as u64),
        ))
    }
}

impl Temporary {
    /// The ends of its preferred and valid lifetimes (§3.4 step 4, §3.5): its own bounds from
    /// when it was formed (the preferred one less its `DESYNC_FACTOR`), never past those of the
    /// prefix's address `public` (`None` there: infinite).
    fn lifetimes(&self, public: &Autoconf, t: &TemporaryAddresses) -> (Instant, Instant) {
        let sooner = |a: Option<Instant>, b: Instant| a.map_or(b, |a| a.min(b));
        let preferred = self.created + t.preferred_lifetime.saturating_sub(self.desync);
        let valid = self.created + t.valid_lifetime;
        (
            sooner(public.preferred, preferred),
            sooner(public.valid, valid),
        )
    }
}

/// The link-local prefix, `fe80::/64` (RFC 4291 §2.5.6).
const LINK_LOCAL_PREFIX: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0);

/// One Ethernet interface's link layer (see the module's notes).
#[derive(Debug)]
pub struct EthernetInterface {
    cfg: EthernetConfig,
    vlan: Option<VlanTag>,
    arp_if: ArpInterface,
    /// The directed broadcast addresses of our IPv4 prefixes.
    broadcasts: Vec<Ipv4Addr>,
    ndp_if: NdpInterface,
    dad: Vec<Dad>,
    arp: NeighborCache<Ipv4Addr>,
    nd: NeighborCache<Ipv6Addr>,
    events: Vec<EthernetEvent>,
    /// Shared with the stacks of the interface's other queues, and how many of its answers were read.
    board: Option<(NeighborBoard, u64)>,
    /// Router solicitations (RFC 4861 §6.3.7): sent so far and when the next is due, once the
    /// link-local address is usable, until a router advertises itself.
    rs: Option<(u32, Instant, Duration)>,
    /// A router has advertised itself: no more solicitations.
    router_heard: bool,
    /// What routers advertised and when it runs out: each on-link prefix, at most
    /// [`MAX_ADVERTISED`].
    advertised: Vec<(Ipv6Addr, Ipv6Cidr, Instant)>,
    /// The default router list (RFC 4861 §6.3.6), at most [`MAX_DEFAULT_ROUTERS`], and the one
    /// the default route goes through.
    routers: Vec<DefaultRouter>,
    default_router: Option<Ipv6Addr>,
    /// The addresses formed from advertised prefixes, at most [`MAX_AUTOCONF`].
    autoconf: Vec<Autoconf>,
    /// The groups the last multicast listener report named as joined.
    mld_joined: Vec<Ipv6Addr>,
    /// Groups left since, each with the reports still owed to say so (RFC 3810 §6.1: a change
    /// to include mode with no source, [Robustness Variable] times).
    mld_leaving: Vec<(Ipv6Addr, u8)>,
    /// When a multicast listener report is due: the groups changed (at once, then once more at a
    /// random time within a second, RFC 3810 §6.1's robustness), or a querier asked (at a random
    /// time within its maximum response delay, §6.2).
    mld_due: Option<Instant>,
    /// When the last report went: a change's first report and a query's answer go at most one a
    /// second, whatever asks.
    mld_last: Option<Instant>,
    /// Reports still owed for the last change: its retransmissions (the robustness variable, 2,
    /// less the report itself).
    mld_repeats: u8,
    /// The report due is a change's (state-change records), not only a query's answer
    /// (current-state records).
    mld_change: bool,
    /// The state of the generator report delays, solicitation intervals and reachable times are
    /// drawn from (seeded from the hardware address, so that hosts on one link differ).
    random: u64,
    /// The key of RFC 7217's stable identifiers, when they are on.
    privacy_key: Option<SecretKey>,
    /// The link-local address formed with a stable identifier, and the count of duplicates met
    /// it was formed with (none with the EUI-64 identifier).
    stable_link_local: Option<(Ipv6Addr, u8)>,
    /// The key temporary identifiers are drawn under, when they are on, and how many were drawn.
    temporary_key: Option<(SecretKey, u64)>,
    /// The earliest deadline of the timers the interface keeps itself (duplicate address
    /// detection, router solicitation, advertised lifetimes, addresses' lifetimes, multicast
    /// reports): worked out when one of them changes, since the stack asks at every poll.
    own_deadline: Option<Instant>,
    /// What the interface counted.
    pub counters: EthernetCounters,
    /// Its drops, by reason, until the stack takes them into its own counters.
    pub drops: Drops,
    /// Something was dropped since the stack last took the drops.
    dropped: bool,
}

/// The earlier of two deadlines, either of which may be unset.
#[inline]
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Frames queued for the link, with the count the interface keeps.
fn send(out: &mut Vec<PacketBuf>, counters: &mut EthernetCounters, frame: PacketBuf) {
    counters.tx_frames += 1;
    out.push(frame);
}

impl EthernetInterface {
    /// An interface with hardware address `mac` and no protocol address yet.
    pub fn new(mac: MacAddr, cfg: EthernetConfig) -> EthernetInterface {
        let mut e = EthernetInterface {
            vlan: cfg.vlan.map(|id| VlanTag {
                priority: 0,
                drop_eligible: false,
                id,
            }),
            arp_if: ArpInterface {
                mac,
                addrs: Vec::new(),
            },
            broadcasts: Vec::new(),
            ndp_if: NdpInterface {
                mac,
                ..NdpInterface::default()
            },
            dad: Vec::new(),
            arp: NeighborCache::new(cfg.neighbor),
            nd: NeighborCache::new(cfg.neighbor),
            events: Vec::new(),
            board: None,
            rs: None,
            router_heard: false,
            advertised: Vec::new(),
            routers: Vec::new(),
            default_router: None,
            autoconf: Vec::new(),
            mld_joined: Vec::new(),
            mld_leaving: Vec::new(),
            mld_due: None,
            mld_last: None,
            mld_repeats: 0,
            mld_change: false,
            random: u64::from_be_bytes([
                0, 0, mac.0[0], mac.0[1], mac.0[2], mac.0[3], mac.0[4], mac.0[5],
            ]) ^ 0x9e37_79b9_7f4a_7c15,
            own_deadline: None,
            privacy_key: None,
            stable_link_local: None,
            temporary_key: None,
            counters: EthernetCounters::default(),
            drops: Drops::default(),
            dropped: false,
            cfg,
        };
        // RFC 4861 §6.3.2: ReachableTime drawn between half and one and a half times
        // BaseReachableTime, so that hosts' confirmations do not fall due together (Linux's
        // `neigh_rand_reach_time`, for ARP too).
        let (base, retrans) = (e.cfg.neighbor.reachable, e.cfg.neighbor.retrans);
        let (arp, nd) = (
            e.jittered(base, REACHABLE_FACTOR),
            e.jittered(base, REACHABLE_FACTOR),
        );
        e.arp.set_timers(arp, retrans);
        e.nd.set_timers(nd, retrans);
        e
    }

    /// The interface's hardware address.
    pub fn mac(&self) -> MacAddr {
        self.arp_if.mac
    }

    /// The ARP cache.
    pub fn arp_cache(&self) -> &NeighborCache<Ipv4Addr> {
        &self.arp
    }

    /// The neighbour discovery cache.
    pub fn nd_cache(&self) -> &NeighborCache<Ipv6Addr> {
        &self.nd
    }

    /// IPv4 address `cidr.addr` is ours on this link: ARP answers for it.
    pub fn add_ipv4(&mut self, cidr: Ipv4Cidr) {
        if !self.arp_if.addrs.contains(&cidr.addr) {
            self.arp_if.addrs.push(cidr.addr);
        }
        if cidr.prefix_len < 31 {
            let host = u32::MAX >> cidr.prefix_len;
            self.broadcasts
                .push(Ipv4Addr::from(u32::from(cidr.addr) | host));
        }
    }

    /// IPv6 address `cidr.addr` is to be ours on this link. Returns true when it is usable at
    /// once (no duplicate address detection configured); otherwise it is tentative, and an
    /// [`EthernetEvent::AddressReady`] or [`EthernetEvent::Duplicate`] reports the outcome.
    pub fn add_ipv6(&mut self, cidr: Ipv6Cidr, now: Instant) -> bool {
        if self.ndp_if.addrs.contains(&cidr.addr) || self.ndp_if.tentative.contains(&cidr.addr) {
            return true;
        }
        if self.cfg.dad_transmits == 0 {
            self.ndp_if.addrs.push(cidr.addr);
            self.report_groups(now);
            self.usable(cidr.addr, now);
            self.own_timers_changed();
            return true;
        }
        self.ndp_if.tentative.push(cidr.addr);
        // A new solicited-node group, joined before the address is checked (RFC 4862 §5.4.2).
        self.report_groups(now);
        self.dad.push(Dad {
            cidr,
            sent: 0,
            next: now,
        });
        self.own_timers_changed();
        false
    }

    /// `addr` became usable: with a link-local address, ask for routers rather than wait for
    /// their next advertisement (RFC 4861 §6.3.7).
    fn usable(&mut self, addr: Ipv6Addr, now: Instant) {
        let link_local = addr.segments()[0] & 0xffc0 == 0xfe80;
        if link_local && !self.router_heard && self.cfg.router_solicitations != Some(0) {
            self.rs.get_or_insert((0, now, Duration::ZERO));
        }
    }

    /// Whether `addr` is being checked for duplicates.
    pub fn is_tentative(&self, addr: Ipv6Addr) -> bool {
        self.ndp_if.tentative.contains(&addr)
    }

    /// Whether `addr` was formed from a router's prefix (RFC 4862 §5.5.3), so lives as long as
    /// the router says and comes with no on-link route of its own (the prefix's on-link flag
    /// gives that, §5.5.3's note).
    pub fn is_autoconfigured(&self, addr: Ipv6Addr) -> bool {
        self.autoconf
            .iter()
            .any(|a| a.cidr.addr == addr && !a.failed)
    }

    /// IPv6 address `addr` is ours no more: no answers for it, its check (if any) stopped, and its
    /// solicited-node group left, reported to multicast routers when no other address of ours
    /// shares it. Returns whether it was ours (usable or tentative).
    pub fn remove_ipv6(&mut self, addr: Ipv6Addr, now: Instant) -> bool {
        let had = self.ndp_if.addrs.contains(&addr) || self.ndp_if.tentative.contains(&addr);
        self.ndp_if.addrs.retain(|&a| a != addr);
        self.ndp_if.tentative.retain(|&a| a != addr);
        self.dad.retain(|d| d.cidr.addr != addr);
        self.autoconf.retain(|a| a.cidr.addr != addr);
        if had && !self.groups().contains(&solicited_node(addr)) {
            self.report_groups(now);
        }
        self.own_timers_changed();
        had
    }

    /// Forms the addresses of advertised prefixes, and the link-local address, with RFC 7217's
    /// stable identifiers under `key` (see `EthernetConfig::stable_privacy`).
    pub fn set_privacy_key(&mut self, key: SecretKey) {
        self.privacy_key = Some(key);
    }

    /// Forms temporary addresses (RFC 8981, `EthernetConfig::temporary`) with identifiers drawn
    /// under `key`, which should be random and not kept from one run to the next.
    pub fn set_temporary_key(&mut self, key: SecretKey) {
        self.temporary_key = Some((key, 0));
    }

    /// Whether `addr` is a temporary address (RFC 8981).
    pub fn is_temporary(&self, addr: Ipv6Addr) -> bool {
        self.autoconf
            .iter()
            .any(|a| a.cidr.addr == addr && a.temporary.is_some())
    }

    /// RFC 8981 §3.8's `REGEN_ADVANCE`: 2 s, and the time three duplicate checks take.
    fn regen_advance(&self) -> Duration {
        Duration::from_secs(2)
            + self.cfg.neighbor.retrans
                * (u32::from(TEMP_IDGEN_RETRIES) * u32::from(self.cfg.dad_transmits))
    }

    /// Forms a temporary address for the prefix of the address at `public` (RFC 8981 §3.4), its
    /// `retries`th after duplicates: an identifier that is neither reserved nor already ours, and
    /// lifetimes within the prefix address's and the configured ones, less a random `DESYNC_FACTOR`
    /// off the preferred one. None is formed when the preferred lifetime left would not outlast
    /// `REGEN_ADVANCE` (§3.4 step 5), or when [`MAX_TEMPORARY`] exist.
    fn form_temporary(&mut self, public: usize, retries: u8, now: Instant) {
        let t = self.cfg.temporary;
        let Some((key, drawn)) = self.temporary_key.as_mut() else {
            return;
        };
        let temporaries = self
            .autoconf
            .iter()
            .filter(|a| a.temporary.is_some())
            .count();
        if t.mode == TemporaryMode::Off || temporaries >= MAX_TEMPORARY {
            return;
        }
        let p = self.autoconf[public];
        if p.failed {
            return;
        }
        let prefix = mask(p.cidr.addr, 64).octets();
        // §3.3.2: a hash, under the key, of the prefix, the hardware address, a count and the
        // time; the next count past a reserved identifier or an address we have (a few times:
        // with 64 random bits, one is as good as certain).
        let drawn_one = (0..4).find_map(|_| {
            *drawn += 1;
            let mut message = [0u8; 30];
            message[..8].copy_from_slice(&prefix[..8]);
            message[8..14].copy_from_slice(&self.arp_if.mac.0);
            message[14..22].copy_from_slice(&drawn.to_be_bytes());
            message[22..].copy_from_slice(&now.total_micros().to_be_bytes());
            let id = key.prf(&message);
            let mut octets = prefix;
            octets[8..].copy_from_slice(&id.to_be_bytes());
            let addr = Ipv6Addr::from(octets);
            let ours = self.ndp_if.addrs.contains(&addr) || self.ndp_if.tentative.contains(&addr);
            (!reserved_id(id) && !ours).then(|| {
                // DESYNC_FACTOR: up to MAX_DESYNC_FACTOR, 0.4 of the preferred lifetime.
                let max_desync = t.preferred_lifetime.as_micros() as u64 * 2 / 5;
                let draw = key.prf(&id.to_be_bytes()) % (max_desync + 1);
                (addr, Duration::from_micros(draw))
            })
        });
        let Some((addr, desync)) = drawn_one else {
            return;
        };
        let temporary = Temporary {
            created: now,
            desync,
            succeeded: false,
            retries,
        };
        let (preferred, valid) = temporary.lifetimes(&p, &t);
        if preferred <= now + self.regen_advance() || valid <= now {
            return;
        }
        let cidr = Ipv6Cidr::new(addr, 64);
        self.autoconf.push(Autoconf {
            cidr,
            preferred: Some(preferred),
            valid: Some(valid),
            deprecated: false,
            failed: false,
            dad_counter: 0,
            temporary: Some(temporary),
        });
        self.counters.temporary_formed += 1;
        if self.add_ipv6(cidr, now) {
            self.events.push(EthernetEvent::AddressReady(cidr));
        }
    }

    /// A router advertised the prefix of the address at `public` again (RFC 8981 §3.4, §3.5):
    /// its temporary addresses take its new lifetimes where they are shorter than their own
    /// bounds (counted from when each was formed), and one is formed if none is preferred.
    fn renew_temporaries(&mut self, public: usize, now: Instant) {
        let t = self.cfg.temporary;
        let p = self.autoconf[public];
        if t.mode == TemporaryMode::Off || p.failed {
            return;
        }
        let prefix = mask(p.cidr.addr, 64);
        let mut preferred_one = false;
        for a in &mut self.autoconf {
            let Some(tmp) = a.temporary.filter(|_| mask(a.cidr.addr, 64) == prefix) else {
                continue;
            };
            let (preferred, valid) = tmp.lifetimes(&p, &t);
            (a.preferred, a.valid) = (Some(preferred), Some(valid));
            preferred_one |= !a.deprecated_at(now);
        }
        if !preferred_one {
            self.form_temporary(public, 0, now);
        }
    }

    /// The interface's link-local address (`fe80::/64`): the modified EUI-64 identifier of the
    /// hardware address (RFC 4862 §5.3), or with a privacy key, RFC 7217's stable identifier for
    /// that prefix, as Linux forms it under `addr_gen_mode` 2 and 3 (a duplicate then tries the
    /// next count, as for a prefix's address).
    pub fn link_local(&mut self) -> Ipv6Addr {
        if self.privacy_key.is_none() {
            return link_local(self.arp_if.mac);
        }
        let formed = self.autoconf_address(LINK_LOCAL_PREFIX, 0);
        self.stable_link_local = formed;
        formed.map_or_else(|| link_local(self.arp_if.mac), |(addr, _)| addr)
    }

    /// The address for prefix `prefix` (a /64) with `dad_counter` duplicates met, and the count
    /// it was formed with: the modified EUI-64 identifier, or RFC 7217's stable one, skipping
    /// reserved identifiers; `None` once every try is used up.
    fn autoconf_address(&self, prefix: Ipv6Addr, dad_counter: u8) -> Option<(Ipv6Addr, u8)> {
        let mut octets = mask(prefix, 64).octets();
        let Some(key) = &self.privacy_key else {
            octets[8..].copy_from_slice(&link_local(self.arp_if.mac).octets()[8..]);
            return (dad_counter == 0).then_some((Ipv6Addr::from(octets), 0));
        };
        (dad_counter..=IDGEN_RETRIES).find_map(|count| {
            // F(Prefix, Net_Iface, Network_ID, DAD_Counter, secret_key), §5: the hardware
            // address names the interface; no network identifier.
            let mut message = [0u8; 15];
            message[..8].copy_from_slice(&octets[..8]);
            message[8..14].copy_from_slice(&self.arp_if.mac.0);
            message[14] = count;
            let id = key.prf(&message);
            (!reserved_id(id)).then(|| {
                octets[8..].copy_from_slice(&id.to_be_bytes());
                (Ipv6Addr::from(octets), count)
            })
        })
    }

    /// Shares answers with the stacks of the interface's other queues through `board`.
    pub fn set_board(&mut self, board: NeighborBoard) {
        self.board = Some((board, 0));
    }

    /// Completes the resolutions that answers posted by the other queues' stacks answer.
    pub fn read_board(&mut self, now: Instant, out: &mut Vec<PacketBuf>) {
        let Some((board, seen)) = &mut self.board else {
            return;
        };
        let (answers, posted) = board.since(*seen);
        *seen = posted;
        for (ip, mac) in answers {
            let (released, ethertype) = match ip {
                IpAddr::V4(a) => (self.arp.answered(a, mac, now), EtherType::Ipv4),
                IpAddr::V6(a) => (self.nd.answered(a, mac, now), EtherType::Ipv6),
            };
            for packet in released {
                let frame = self.frame(packet, mac, ethertype);
                send(out, &mut self.counters, frame);
            }
        }
    }

    fn post(&self, ip: IpAddr, mac: MacAddr) {
        if let Some((board, _)) = &self.board {
            board.post(ip, mac);
        }
    }

    /// Counts a drop.
    fn count_drop(&mut self, reason: DropReason) {
        self.drops.add(reason);
        self.dropped = true;
    }

    /// Moves the drops counted since the last call into `into`.
    pub fn take_drops(&mut self, into: &mut Drops) {
        if std::mem::take(&mut self.dropped) {
            into.take_from(&mut self.drops);
        }
    }

    /// Takes what the stack must apply.
    pub fn take_events(&mut self) -> Vec<EthernetEvent> {
        std::mem::take(&mut self.events)
    }

    /// The earliest time [`poll`](Self::poll) has something to do. Asked at every poll, so it
    /// only compares three values kept up to date.
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        #[cfg(test)]
        assert_eq!(
            self.own_deadline,
            self.own_deadline_worked_out(),
            "the interface's own deadline was not updated when its timers changed"
        );
        earliest(
            earliest(self.arp.next_deadline(), self.nd.next_deadline()),
            self.own_deadline,
        )
    }

    /// One of the interface's own timers (not the neighbour caches') was set, moved or stopped.
    fn own_timers_changed(&mut self) {
        self.own_deadline = self.own_deadline_worked_out();
    }

    /// The earliest deadline of the interface's own timers, from their lists.
    fn own_deadline_worked_out(&self) -> Option<Instant> {
        let mut at = self.rs.map(|(_, next, _)| next);
        at = earliest(at, self.mld_due);
        if !self.dad.is_empty() {
            at = earliest(at, self.dad.iter().map(|d| d.next).min());
        }
        if !self.advertised.is_empty() {
            at = earliest(at, self.advertised.iter().map(|a| a.2).min());
        }
        at = earliest(at, self.routers.iter().map(|r| r.until).min());
        let regen_advance = self.regen_advance();
        for a in &self.autoconf {
            at = earliest(at, a.valid);
            if !a.deprecated && !a.failed {
                at = earliest(at, a.preferred);
            }
            at = earliest(at, a.regenerate_at(regen_advance));
        }
        at
    }

    /// Whether the interface has events or drops for the stack to take.
    #[inline]
    pub fn has_news(&self) -> bool {
        self.dropped || !self.events.is_empty()
    }

    // ---------------------------------------------------------------------------------------------
    // Input.

    fn wants(&self, dst: MacAddr) -> bool {
        if dst == self.arp_if.mac || dst.is_broadcast() {
            return true;
        }
        // A group: IPv6's (33:33 and the group's last 32 bits) when we listen to one that maps
        // there; IPv4 multicast is not joined.
        dst.0[0] == 0x33
            && dst.0[1] == 0x33
            && (multicast_mac(ALL_NODES) == dst
                || self
                    .ndp_if
                    .addrs
                    .iter()
                    .chain(&self.ndp_if.tentative)
                    .any(|&a| multicast_mac(solicited_node(a)) == dst))
    }

    /// Handles the frame `frame`; frames to send in answer go to `out`.
    #[inline]
    pub fn input(
        &mut self,
        mut frame: PacketBuf,
        now: Instant,
        out: &mut Vec<PacketBuf>,
    ) -> FrameIn {
        self.counters.rx_frames += 1;
        // The common shape first, in a few compares: untagged, to our address, from a unicast one
        // not ours, IPv4 or IPv6 but not neighbour discovery. Anything else takes the general
        // path below, which decides the same for these.
        let d = frame.data();
        let mac = &self.arp_if.mac.0;
        if self.vlan.is_none()
            && d.len() >= HEADER_LEN
            && d[..6] == *mac
            && d[6] & 1 == 0
            && d[6..12] != *mac
            && d[6..12] != [0; 6]
        {
            match [d[12], d[13]] {
                [0x08, 0x00] => {
                    strip(&mut frame, HEADER_LEN);
                    return FrameIn::Ipv4(frame);
                }
                [0x86, 0xdd] if !is_ndp(&d[HEADER_LEN..]) => {
                    strip(&mut frame, HEADER_LEN);
                    return FrameIn::Ipv6(frame);
                }
                _ => {}
            }
        }
        self.input_general(frame, now, out)
    }

    /// [`Self::input`]'s general path.
    #[inline(never)]
    fn input_general(
        &mut self,
        mut frame: PacketBuf,
        now: Instant,
        out: &mut Vec<PacketBuf>,
    ) -> FrameIn {
        let Ok(f) = EthernetFrame::new_checked(frame.data()) else {
            self.count_drop(DropReason::EthernetMalformed);
            return FrameIn::Consumed;
        };
        let repr = EthernetRepr::parse(&f);
        if !self.wants(repr.dst) {
            self.count_drop(DropReason::EthernetNotForUs);
            return FrameIn::Consumed;
        }
        if !repr.src.is_unicast() || repr.src == self.arp_if.mac {
            self.count_drop(DropReason::EthernetBadSource);
            return FrameIn::Consumed;
        }
        if repr.vlan.map(|t| t.id) != self.vlan.map(|t| t.id) {
            self.count_drop(DropReason::EthernetOtherVlan);
            return FrameIn::Consumed;
        }
        let hl = repr.header_len();
        match repr.ethertype {
            EtherType::Ipv4 => {
                strip(&mut frame, hl);
                FrameIn::Ipv4(frame)
            }
            EtherType::Ipv6 => {
                strip(&mut frame, hl);
                if is_ndp(frame.data()) {
                    self.ndp(&frame, repr.src, now, out);
                    return FrameIn::Consumed;
                }
                if let Some(max_delay) = mld_query(frame.data()) {
                    // A querier asks who listens: the report answers for every group at once.
                    self.counters.mld_queries_in += 1;
                    self.answer_query(now, max_delay);
                    return FrameIn::Consumed;
                }
                FrameIn::Ipv6(frame)
            }
            EtherType::Arp => {
                self.arp(&frame.data()[hl..], now, out);
                FrameIn::Consumed
            }
            EtherType::Unknown(_) => {
                self.count_drop(DropReason::EthernetUnknownType);
                FrameIn::Consumed
            }
        }
    }

    fn arp(&mut self, msg: &[u8], now: Instant, out: &mut Vec<PacketBuf>) {
        let Ok(packet) = ArpPacket::new_checked(msg) else {
            self.count_drop(DropReason::ArpMalformed);
            return;
        };
        let repr = ArpRepr::parse(&packet);
        let outcome = arp_input(&mut self.arp, &self.arp_if, &repr, now);
        let to_us =
            repr.target_mac == self.arp_if.mac && self.arp_if.addrs.contains(&repr.target_ip);
        if repr.op == ArpOp::Reply && to_us && outcome.dropped.is_none() {
            self.post(repr.sender_ip.into(), repr.sender_mac);
        }
        if let Some(why) = outcome.dropped {
            self.count_drop(match why {
                ArpDrop::BadSender => DropReason::ArpBadSender,
                ArpDrop::FromUs => DropReason::ArpFromUs,
                ArpDrop::Conflict => DropReason::ArpConflict,
            });
        }
        if let Some((dst, reply)) = outcome.reply {
            self.counters.arp_replies_out += 1;
            let frame = self.arp_frame(dst, &reply);
            send(out, &mut self.counters, frame);
        }
        for (packet, mac) in outcome.released {
            let frame = self.frame(packet, mac, EtherType::Ipv4);
            send(out, &mut self.counters, frame);
        }
    }

    fn ndp(
        &mut self,
        packet: &PacketBuf,
        frame_src: MacAddr,
        now: Instant,
        out: &mut Vec<PacketBuf>,
    ) {
        // `is_ndp` checked the header's shape and that the payload is all there.
        let ip = Ipv6Packet::new_unchecked(packet.data());
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let msg = &packet.data()[40..40 + usize::from(ip.payload_len())];
        if ip.hop_limit() != 255 {
            // RFC 4861 §6.1, §7.1: from off the link.
            self.count_drop(DropReason::NdpNotFromLink);
            return;
        }
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, dst, 58, msg.len() as u16),
            checksum::fast(msg),
        );
        if sum != 0xffff {
            self.count_drop(DropReason::NdpBadChecksum);
            return;
        }
        let Ok(repr) = NdpRepr::parse(msg) else {
            self.count_drop(DropReason::NdpMalformed);
            return;
        };
        let outcome = ndp_input(
            &mut self.nd,
            &self.ndp_if,
            (src, dst, frame_src),
            &repr,
            now,
        );
        if let NdpRepr::NeighborAdvert {
            flags,
            target,
            lladdr: Some(mac),
        } = repr
        {
            if flags.solicited && self.ndp_if.addrs.contains(&dst) && outcome.dropped.is_none() {
                self.post(target.into(), mac);
            }
        }
        if let Some(why) = outcome.dropped {
            self.count_drop(match why {
                NdpDrop::FromUs => DropReason::NdpFromUs,
                NdpDrop::Conflict => DropReason::NdpConflict,
                NdpDrop::Invalid => DropReason::NdpMalformed,
                NdpDrop::NotOurs => DropReason::NdpNotOurs,
                NdpDrop::ForRouters => DropReason::NdpForRouters,
            });
        }
        if let Some(addr) = outcome.duplicate {
            self.duplicate(addr, now);
        }
        if let Some(info) = outcome.router {
            self.router_advertised(info, now);
        }
        if let Some(redirect) = outcome.redirect {
            self.counters.redirects_in += 1;
            self.events.push(EthernetEvent::Redirect(redirect));
        }
        if let Some((dst, mac, reply)) = outcome.reply {
            // The target answered for is ours, so is a good source (RFC 4861 §7.2.4); to all
            // nodes, it is the target too.
            let NdpRepr::NeighborAdvert { target, .. } = reply else {
                unreachable!("ndp_input answers with advertisements")
            };
            self.counters.na_out += 1;
            let frame = self.ndp_frame(target, dst, mac, &reply);
            send(out, &mut self.counters, frame);
        }
        for (packet, mac) in outcome.released {
            let frame = self.frame(packet, mac, EtherType::Ipv6);
            send(out, &mut self.counters, frame);
        }
        self.own_timers_changed();
    }

    fn duplicate(&mut self, addr: Ipv6Addr, now: Instant) {
        self.ndp_if.tentative.retain(|&a| a != addr);
        self.dad.retain(|d| d.cidr.addr != addr);
        self.counters.duplicates += 1;
        self.events.push(EthernetEvent::Duplicate(addr));
        if let Some((ll, count)) = self.stable_link_local.filter(|&(ll, _)| ll == addr) {
            // A stable link-local identifier tries the next count too (RFC 7217 §6).
            self.stable_link_local = self.autoconf_address(ll, count + 1);
            if let Some((next, _)) = self.stable_link_local {
                let cidr = Ipv6Cidr::new(next, 64);
                if self.add_ipv6(cidr, now) {
                    self.events.push(EthernetEvent::AddressReady(cidr));
                }
            }
            return;
        }
        let Some(i) = self.autoconf.iter().position(|a| a.cidr.addr == addr) else {
            return;
        };
        if let Some(tmp) = self.autoconf[i].temporary {
            // Another identifier, at most `TEMP_IDGEN_RETRIES` times (RFC 8981 §3.4 step 7).
            let prefix = mask(addr, 64);
            self.autoconf.remove(i);
            let public = self.autoconf.iter().position(|p| p.is_public_of(prefix));
            if let Some(public) = public.filter(|_| tmp.retries < TEMP_IDGEN_RETRIES) {
                self.form_temporary(public, tmp.retries + 1, now);
            }
            self.own_timers_changed();
            return;
        }
        // A stable identifier tries the next count (RFC 7217 §6); an EUI-64 one has no next, and
        // with the tries used up the prefix gives no address.
        let a = &self.autoconf[i];
        match self.autoconf_address(a.cidr.addr, a.dad_counter + 1) {
            Some((addr, count)) => {
                let cidr = Ipv6Cidr::new(addr, 64);
                self.autoconf[i].cidr = cidr;
                self.autoconf[i].dad_counter = count;
                if self.add_ipv6(cidr, now) {
                    self.events.push(EthernetEvent::AddressReady(cidr));
                }
            }
            None => self.autoconf[i].failed = true,
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Output.

    /// Frames `packet` (an IP packet for neighbour `next_hop`) into `out`, or holds it while the
    /// neighbour's address is resolved (a solicitation going to `out`).
    pub fn output(
        &mut self,
        next_hop: IpAddr,
        packet: PacketBuf,
        now: Instant,
        out: &mut Vec<PacketBuf>,
    ) {
        match next_hop {
            IpAddr::V4(hop) => {
                let group = if hop.is_broadcast() || self.broadcasts.contains(&hop) {
                    Some(MacAddr::BROADCAST)
                } else if hop.is_multicast() {
                    // RFC 1112 §6.4: 01:00:5e and the group's low 23 bits.
                    let o = hop.octets();
                    Some(MacAddr([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]))
                } else {
                    None
                };
                if let Some(mac) = group {
                    let frame = self.frame(packet, mac, EtherType::Ipv4);
                    return send(out, &mut self.counters, frame);
                }
                match self.arp.resolve(hop, packet, now) {
                    Resolved::Send(packet, mac) => {
                        let frame = self.frame(packet, mac, EtherType::Ipv4);
                        send(out, &mut self.counters, frame);
                    }
                    Resolved::Held { solicit, dropped } => {
                        self.held(dropped);
                        if solicit {
                            self.arp_request(hop, None, out);
                        }
                    }
                    Resolved::Full(_) => self.count_drop(DropReason::NeighborTableFull),
                }
            }
            IpAddr::V6(hop) => {
                if hop.is_multicast() {
                    let frame = self.frame(packet, multicast_mac(hop), EtherType::Ipv6);
                    return send(out, &mut self.counters, frame);
                }
                match self.nd.resolve(hop, packet, now) {
                    Resolved::Send(packet, mac) => {
                        let frame = self.frame(packet, mac, EtherType::Ipv6);
                        send(out, &mut self.counters, frame);
                    }
                    Resolved::Held { solicit, dropped } => {
                        self.held(dropped);
                        if solicit {
                            self.solicit(hop, None, out);
                        }
                    }
                    Resolved::Full(_) => self.count_drop(DropReason::NeighborTableFull),
                }
            }
        }
    }

    fn held(&mut self, dropped: Vec<PacketBuf>) {
        for _ in dropped {
            self.count_drop(DropReason::NeighborQueueFull);
        }
    }

    /// Runs the timers due at `now`: solicitations and probes, neighbours given up, duplicate
    /// address detection.
    pub fn poll(&mut self, now: Instant, out: &mut Vec<PacketBuf>) {
        for action in self.arp.poll(now) {
            match action {
                NeighborAction::Solicit { addr, unicast } => self.arp_request(addr, unicast, out),
                NeighborAction::Failed { dropped, .. } => {
                    for _ in dropped {
                        self.count_drop(DropReason::NeighborUnreachable);
                    }
                }
            }
        }
        for action in self.nd.poll(now) {
            match action {
                NeighborAction::Solicit { addr, unicast } => self.solicit(addr, unicast, out),
                NeighborAction::Failed { dropped, addr } => {
                    for _ in dropped {
                        self.count_drop(DropReason::NeighborUnreachable);
                    }
                    self.router_failed(addr);
                }
            }
        }
        let retrans = self.cfg.neighbor.retrans;
        let mut i = 0;
        while i < self.dad.len() {
            let d = self.dad[i];
            if d.next > now {
                i += 1;
                continue;
            }
            if d.sent < self.cfg.dad_transmits {
                // RFC 4862 §5.4.2: from the unspecified address to the address's solicited-node
                // group, with no source address option.
                let ns = NdpRepr::NeighborSolicit {
                    target: d.cidr.addr,
                    lladdr: None,
                };
                let group = solicited_node(d.cidr.addr);
                self.counters.ns_out += 1;
                let frame = self.ndp_frame(Ipv6Addr::UNSPECIFIED, group, multicast_mac(group), &ns);
                send(out, &mut self.counters, frame);
                self.dad[i].sent += 1;
                self.dad[i].next = now + retrans;
                i += 1;
                continue;
            }
            // Nobody objected: the address is ours.
            self.dad.swap_remove(i);
            self.ndp_if.tentative.retain(|&a| a != d.cidr.addr);
            self.ndp_if.addrs.push(d.cidr.addr);
            self.events.push(EthernetEvent::AddressReady(d.cidr));
            self.usable(d.cidr.addr, now);
        }
        self.solicit_routers(now, out);
        self.expire_advertised(now);
        if self.routers.iter().any(|r| r.until <= now) {
            self.routers.retain(|r| r.until > now);
            self.choose_router(false);
        }
        self.age_autoconf(now);
        if self.mld_due.is_some_and(|t| t <= now) {
            self.mld_due = None;
            self.mld_last = Some(now);
            self.send_report(self.mld_change, out);
            if self.mld_repeats > 0 {
                // The change's retransmission, at a random time within the unsolicited report
                // interval (RFC 3810 §6.1, 1 s; §9.11).
                self.mld_repeats -= 1;
                self.mld_due = Some(now + self.random_delay(1000).max(Duration::from_millis(1)));
            } else {
                self.mld_change = false;
            }
        }
        self.own_timers_changed();
    }

    /// The groups changed: a report at once, at most one a second, and one more after it
    /// (RFC 3810 §6.1: [Robustness Variable] reports in all).
    fn report_groups(&mut self, now: Instant) {
        let earliest = self
            .mld_last
            .map_or(now, |t| (t + Duration::from_secs(1)).max(now));
        self.mld_due = Some(self.mld_due.map_or(earliest, |d| d.min(earliest)));
        self.mld_repeats = MLD_ROBUSTNESS - 1;
        self.mld_change = true;
        self.own_timers_changed();
    }

    /// A query asks who listens, to be answered within `max_delay` milliseconds: one report of
    /// every group at a random time within it (RFC 3810 §6.2: a general query is answered once, not
    /// once per group), unless one is due sooner; at most one a second, however often it asks.
    fn answer_query(&mut self, now: Instant, max_delay: u32) {
        let earliest = self
            .mld_last
            .map_or(now, |t| (t + Duration::from_secs(1)).max(now));
        let at = (now + self.random_delay(u64::from(max_delay))).max(earliest);
        self.mld_due = Some(self.mld_due.map_or(at, |d| d.min(at)));
        self.own_timers_changed();
    }

    /// A random delay below `ms` milliseconds (0 when `ms` is 0), from a xorshift generator: the
    /// point is only that hosts on one link do not all act at once.
    fn random_delay(&mut self, ms: u64) -> Duration {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        Duration::from_millis(x.checked_rem(ms).unwrap_or(0))
    }

    /// `base` times a factor drawn from `low` to `high` thousandths.
    fn jittered(&mut self, base: Duration, (low, high): (u32, u32)) -> Duration {
        let thousandths = low + self.random_delay(u64::from(high - low + 1)).as_millis() as u32;
        base * thousandths / 1000
    }

    /// The solicited-node groups of our addresses, tentative ones included (RFC 4862 §5.4.2),
    /// sorted, each once.
    fn groups(&self) -> Vec<Ipv6Addr> {
        let mut groups: Vec<Ipv6Addr> = self
            .ndp_if
            .addrs
            .iter()
            .chain(&self.ndp_if.tentative)
            .map(|&a| solicited_node(a))
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// A version 2 multicast listener report (RFC 3810 §5.2) to all MLDv2 routers (`ff02::16`).
    /// For a `change` (§6.1), state-change records: each group we listen to as a change to
    /// exclude mode with no source (a join), and each group left since an earlier change's report
    /// as a change to include mode with no source (a leave, in [Robustness Variable] reports).
    /// Answering a query (§6.2), current-state records: each group in exclude mode with no
    /// source. From our link-local address (or the unspecified address while it is being
    /// checked, §5.2.13), hop limit 1, with a hop-by-hop header holding the router alert option.
    fn send_report(&mut self, change: bool, out: &mut Vec<PacketBuf>) {
        // The record types of §5.2.12.
        const MODE_IS_EXCLUDE: u8 = 2;
        const CHANGE_TO_INCLUDE: u8 = 3;
        const CHANGE_TO_EXCLUDE: u8 = 4;
        let mut groups = self.groups();
        groups.truncate(MLD_MAX_RECORDS);
        if !change {
            return self.send_records(groups.iter().map(|&g| (MODE_IS_EXCLUDE, g)), out);
        }
        for g in std::mem::take(&mut self.mld_joined) {
            if !groups.contains(&g) && !self.mld_leaving.iter().any(|l| l.0 == g) {
                self.mld_leaving.push((g, MLD_ROBUSTNESS));
            }
        }
        self.mld_leaving.retain(|l| !groups.contains(&l.0));
        self.mld_leaving.truncate(MLD_MAX_RECORDS - groups.len());
        self.mld_joined = groups.clone();
        let leaves: Vec<Ipv6Addr> = self.mld_leaving.iter().map(|l| l.0).collect();
        for (_, owed) in &mut self.mld_leaving {
            *owed -= 1;
        }
        self.mld_leaving.retain(|l| l.1 > 0);
        let joins = groups.iter().map(|&g| (CHANGE_TO_EXCLUDE, g));
        let records = joins.chain(leaves.iter().map(|&g| (CHANGE_TO_INCLUDE, g)));
        self.send_records(records, out);
    }

    /// A report of `records` (type and group, no sources), nothing if there are none.
    fn send_records(
        &mut self,
        records: impl Iterator<Item = (u8, Ipv6Addr)>,
        out: &mut Vec<PacketBuf>,
    ) {
        const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
        let mut msg = vec![143, 0, 0, 0, 0, 0, 0, 0];
        let mut n = 0u16;
        for (kind, g) in records {
            msg.extend_from_slice(&[kind, 0, 0, 0]);
            msg.extend_from_slice(&g.octets());
            n += 1;
        }
        if n == 0 {
            return;
        }
        msg[6..8].copy_from_slice(&n.to_be_bytes());
        let src = self
            .ndp_if
            .addrs
            .iter()
            .find(|a| a.segments()[0] & 0xffc0 == 0xfe80)
            .copied()
            .unwrap_or(Ipv6Addr::UNSPECIFIED);
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, ALL_MLDV2_ROUTERS, 58, msg.len() as u16),
            checksum::fast(&msg),
        );
        msg[2..4].copy_from_slice(&(!sum).to_be_bytes());
        let mut bytes = vec![0u8; 40 + 8];
        Ipv6Repr {
            src_addr: src,
            dst_addr: ALL_MLDV2_ROUTERS,
            next_header: IpProtocol::HopByHop,
            payload_len: 8 + msg.len(),
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut bytes[..40]);
        // Hop-by-hop: next header ICMPv6, 8 bytes, router alert (MLD, value 0), PadN of 0.
        bytes[40..48].copy_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
        bytes.extend_from_slice(&msg);
        self.counters.mld_reports_out += 1;
        let frame = self.frame(
            PacketBuf::from_slice(&bytes),
            multicast_mac(ALL_MLDV2_ROUTERS),
            EtherType::Ipv6,
        );
        send(out, &mut self.counters, frame);
    }

    /// Sends a router solicitation when one is due (`EthernetConfig::router_solicitations`): the
    /// first at once, then RFC 7559's backoff, as Linux's `rfc3315_s14_backoff_init` and
    /// `_update` draw it: `RTR_SOLICITATION_INTERVAL` (4 s) times 0.9 to 1.1, then each interval
    /// times 1.9 to 2.1, and past the maximum, the maximum times 0.9 to 1.1.
    fn solicit_routers(&mut self, now: Instant, out: &mut Vec<PacketBuf>) {
        let Some((sent, next, interval)) = self.rs else {
            return;
        };
        if next > now {
            return;
        }
        if self
            .cfg
            .router_solicitations
            .is_some_and(|limit| sent >= limit)
        {
            self.rs = None;
            return;
        }
        const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
        let Some(src) = self.ndp_if.source_for(ALL_ROUTERS) else {
            return;
        };
        let rs = NdpRepr::RouterSolicit {
            lladdr: Some(self.arp_if.mac),
        };
        self.counters.rs_out += 1;
        let frame = self.ndp_frame(src, ALL_ROUTERS, multicast_mac(ALL_ROUTERS), &rs);
        send(out, &mut self.counters, frame);
        let max = self.cfg.router_solicitation_max_interval;
        let interval = if sent == 0 {
            self.jittered(Duration::from_secs(4), (900, 1100))
        } else {
            let doubled = self.jittered(interval, (1900, 2100));
            if doubled > max {
                self.jittered(max, (900, 1100))
            } else {
                doubled
            }
        };
        self.rs = Some((sent + 1, now + interval, interval));
    }

    /// Keeps when what `info` advertises runs out: its on-link prefixes.
    fn note_lifetimes(&mut self, info: &RouterInfo, now: Instant) {
        let mut keep = |router: Ipv6Addr, prefix: Ipv6Cidr, secs: u32| {
            self.advertised
                .retain(|a| !(a.0 == router && a.1 == prefix));
            // Infinity (all ones) and lifetimes past a few years are kept for ever.
            if secs == 0 || secs == u32::MAX || self.advertised.len() >= MAX_ADVERTISED {
                return;
            }
            let until = now + Duration::from_secs(u64::from(secs));
            self.advertised.push((router, prefix, until));
        };
        for p in info.prefixes.iter().filter(|p| p.on_link) {
            if (1..=128).contains(&p.prefix_len) {
                let prefix = Ipv6Cidr::new(mask(p.prefix, p.prefix_len), p.prefix_len);
                keep(info.router, prefix, p.valid_lifetime);
            }
        }
    }

    /// A router advertised itself (RFC 4861 §6.3.4): no more solicitations; its lifetimes kept,
    /// it listed as a default router, addresses formed from its prefixes, and the rest reported.
    fn router_advertised(&mut self, info: RouterInfo, now: Instant) {
        self.counters.ra_in += 1;
        self.router_heard = true;
        self.rs = None;
        // RFC 4861 §6.3.4: a Reachable Time and a Retrans Timer that are not 0 are the link's
        // from now on, for neighbour discovery and the duplicate checks (ARP keeps its own, as
        // in Linux), within Linux's floors (100 ms, 10 ms) and ceilings of an hour (RFC 4861's
        // MAX_REACHABLE_TIME) and a minute, so that a forged advertisement cannot stall
        // resolution for longer.
        if info.reachable_time != 0 || info.retrans_time != 0 {
            let ms =
                |v: u32, low: u64, high: u64| Duration::from_millis(u64::from(v).clamp(low, high));
            let n = &mut self.cfg.neighbor;
            if info.reachable_time != 0 {
                n.reachable = ms(info.reachable_time, 100, 3_600_000);
            }
            if info.retrans_time != 0 {
                n.retrans = ms(info.retrans_time, 10, 60_000);
            }
            let (base, retrans) = (n.reachable, n.retrans);
            let reachable = self.jittered(base, REACHABLE_FACTOR);
            self.nd.set_timers(reachable, retrans);
        }
        self.note_lifetimes(&info, now);
        self.list_router(&info, now);
        self.autoconfigure(&info, now);
        self.events.push(EthernetEvent::Router(info));
        self.own_timers_changed();
    }

    /// Keeps `info`'s router on the default router list for its router lifetime, with its
    /// preference, or takes it off at a lifetime of 0 (RFC 4861 §6.3.4), and chooses again.
    fn list_router(&mut self, info: &RouterInfo, now: Instant) {
        let at = self.routers.iter().position(|r| r.addr == info.router);
        match (at, info.lifetime) {
            (Some(i), 0) => {
                self.routers.remove(i);
            }
            (None, 0) => {}
            (at, secs) => {
                let router = DefaultRouter {
                    addr: info.router,
                    until: now + Duration::from_secs(u64::from(secs)),
                    preference: info.preference,
                    suspect: false,
                };
                match at {
                    Some(i) => self.routers[i] = router,
                    None if self.routers.len() < MAX_DEFAULT_ROUTERS => self.routers.push(router),
                    None => {}
                }
            }
        }
        self.choose_router(false);
        self.own_timers_changed();
    }

    /// Neighbour discovery gave `addr` up: if it is a listed router, it is suspect until it
    /// advertises itself again, and if the default route went through it, another router is
    /// chosen (the next of those as good, round robin when none is known to be reachable).
    fn router_failed(&mut self, addr: Ipv6Addr) {
        let Some(r) = self.routers.iter_mut().find(|r| r.addr == addr) else {
            return;
        };
        r.suspect = true;
        self.choose_router(self.default_router == Some(addr));
    }

    /// Default router selection (RFC 4861 §6.3.6, with RFC 4191's preferences, as Linux's
    /// `rt6_select` scores routers): a router not suspect before one that is, then the higher
    /// preference; the router in use is kept while none is better, and, when `move_on` (it just
    /// failed), the next as good after it in the list is taken, so that routers none of which
    /// answers are tried in turn. Reports a change as [`EthernetEvent::DefaultRouter`].
    fn choose_router(&mut self, move_on: bool) {
        let nd = &self.nd;
        let key = |r: &DefaultRouter| {
            // Heard from since it failed (its entry valid again), it is not suspect.
            let heard = nd
                .state(r.addr)
                .is_some_and(|s| !matches!(s, NeighborState::Incomplete { .. }));
            (!r.suspect || heard, r.preference)
        };
        let best = self.routers.iter().map(key).max();
        let current = self
            .default_router
            .and_then(|a| self.routers.iter().position(|r| r.addr == a));
        let chosen = match (current, best) {
            (Some(i), Some(b)) if !move_on && key(&self.routers[i]) == b => Some(i),
            (_, Some(b)) => {
                let n = self.routers.len();
                let start = current.map_or(0, |i| i + 1);
                (0..n)
                    .map(|k| (start + k) % n)
                    .find(|&j| key(&self.routers[j]) == b)
            }
            (_, None) => None,
        };
        let router = chosen.map(|i| self.routers[i].addr);
        if router != self.default_router {
            self.events.push(EthernetEvent::DefaultRouter {
                router,
                replaced: self.default_router,
            });
            self.default_router = router;
        }
    }

    /// The router the default route goes through (RFC 4861 §6.3.6), if any.
    pub fn default_router(&self) -> Option<Ipv6Addr> {
        self.default_router
    }

    /// Reports what routers advertised and has run out.
    fn expire_advertised(&mut self, now: Instant) {
        let events = &mut self.events;
        self.advertised.retain(|&(router, prefix, until)| {
            let live = until > now;
            if !live {
                events.push(EthernetEvent::Expired { router, prefix });
            }
            live
        });
    }

    /// Stateless address autoconfiguration (RFC 4862 §5.5.3) from a router's advertisement. For
    /// each prefix it marks autonomous, 64 bits long (what our interface identifier leaves), not
    /// link-local, and with a preferred lifetime no longer than its valid one: an address of the
    /// prefix and our interface identifier is formed (and checked for duplicates before use), or,
    /// formed already, has its lifetimes renewed. The preferred lifetime becomes the advertised
    /// one; the valid lifetime too when that is over two hours or over what is left, otherwise two
    /// hours unless less is left (§5.5.3 e: a forged advertisement cannot end an address early).
    /// An address the application gave is not the router's to age, and at most [`MAX_AUTOCONF`]
    /// are formed.
    fn autoconfigure(&mut self, info: &RouterInfo, now: Instant) {
        const TWO_HOURS: Duration = Duration::from_secs(2 * 3600);
        // `None` is infinity (all ones, RFC 4861 §4.6.2).
        let until =
            |secs: u32| (secs != u32::MAX).then(|| now + Duration::from_secs(u64::from(secs)));
        let longer = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (None, b) => b.is_some(),
            (Some(a), Some(b)) => a > b,
            (Some(_), None) => false,
        };
        for p in &info.prefixes {
            let link_local = p.prefix.segments()[0] & 0xffc0 == 0xfe80;
            if !p.autonomous
                || link_local
                || p.prefix_len != 64
                || p.preferred_lifetime > p.valid_lifetime
            {
                continue;
            }
            let prefix = mask(p.prefix, 64);
            let (preferred, valid) = (until(p.preferred_lifetime), until(p.valid_lifetime));
            let known = self.autoconf.iter().position(|a| a.is_public_of(prefix));
            let i = match known {
                Some(i) => {
                    let a = &mut self.autoconf[i];
                    a.preferred = preferred;
                    if longer(valid, Some(now + TWO_HOURS)) || longer(valid, a.valid) {
                        a.valid = valid;
                    } else if longer(a.valid, Some(now + TWO_HOURS)) {
                        a.valid = Some(now + TWO_HOURS);
                    }
                    if a.failed {
                        continue;
                    }
                    i
                }
                None => {
                    let Some((addr, dad_counter)) = self.autoconf_address(prefix, 0) else {
                        continue;
                    };
                    let cidr = Ipv6Cidr::new(addr, 64);
                    let ours = self.ndp_if.addrs.contains(&cidr.addr)
                        || self.ndp_if.tentative.contains(&cidr.addr);
                    let formed = self.autoconf.iter().filter(|a| a.temporary.is_none());
                    if p.valid_lifetime == 0 || ours || formed.count() >= MAX_AUTOCONF {
                        continue;
                    }
                    self.autoconf.push(Autoconf {
                        cidr,
                        preferred,
                        valid,
                        deprecated: false,
                        failed: false,
                        dad_counter,
                        temporary: None,
                    });
                    if self.add_ipv6(cidr, now) {
                        self.events.push(EthernetEvent::AddressReady(cidr));
                    }
                    self.autoconf.len() - 1
                }
            };
            self.renew_temporaries(i, now);
            for j in 0..self.autoconf.len() {
                if mask(self.autoconf[j].cidr.addr, 64) == prefix {
                    self.note_deprecation(j, now);
                }
            }
        }
        self.own_timers_changed();
    }

    /// Reports the address at `i` deprecated, or preferred again, if that changed by `now`.
    fn note_deprecation(&mut self, i: usize, now: Instant) {
        let a = &mut self.autoconf[i];
        let deprecated = a.deprecated_at(now) && !a.failed;
        if deprecated != a.deprecated {
            a.deprecated = deprecated;
            self.events.push(EthernetEvent::Deprecated {
                addr: a.cidr.addr,
                deprecated,
            });
        }
    }

    /// Deprecates the autoconfigured addresses whose preferred lifetime ran out, and gives up
    /// those whose valid lifetime did (RFC 4862 §5.5.4).
    fn age_autoconf(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.autoconf.len() {
            let a = self.autoconf[i];
            if a.valid.is_some_and(|t| t <= now) {
                if a.failed {
                    self.autoconf.remove(i);
                } else {
                    // Takes it off the list too: the next one is now at `i`.
                    self.remove_ipv6(a.cidr.addr, now);
                    self.events.push(EthernetEvent::AddressExpired(a.cidr));
                }
                continue;
            }
            // A temporary address's successor, `REGEN_ADVANCE` before it is deprecated (RFC 8981
            // §3.5), from the prefix's own address if there still is one.
            if a.regenerate_at(self.regen_advance())
                .is_some_and(|t| t <= now)
            {
                if let Some(tmp) = self.autoconf[i].temporary.as_mut() {
                    tmp.succeeded = true;
                }
                let prefix = mask(a.cidr.addr, 64);
                if let Some(public) = self.autoconf.iter().position(|p| p.is_public_of(prefix)) {
                    if !self.autoconf[public].failed {
                        self.form_temporary(public, 0, now);
                    }
                }
            }
            self.note_deprecation(i, now);
            i += 1;
        }
    }

    fn arp_request(
        &mut self,
        target: Ipv4Addr,
        unicast: Option<MacAddr>,
        out: &mut Vec<PacketBuf>,
    ) {
        let (dst, repr) = self.arp_if.request(target, unicast);
        self.counters.arp_requests_out += 1;
        let frame = self.arp_frame(dst, &repr);
        send(out, &mut self.counters, frame);
    }

    fn solicit(&mut self, target: Ipv6Addr, unicast: Option<MacAddr>, out: &mut Vec<PacketBuf>) {
        let (dst, mac, ns) = self.ndp_if.solicit(target, unicast);
        let Some(src) = self.ndp_if.source_for(dst) else {
            // No address of ours is usable yet: nothing to ask from (RFC 4861 §7.2.2 would have
            // us wait; the entry's timer tries again).
            self.count_drop(DropReason::NdpNoSource);
            return;
        };
        self.counters.ns_out += 1;
        let frame = self.ndp_frame(src, dst, mac.unwrap_or_else(|| multicast_mac(dst)), &ns);
        send(out, &mut self.counters, frame);
    }

    // ---------------------------------------------------------------------------------------------
    // Framing.

    /// Puts the Ethernet header in front of `packet`.
    fn frame(&self, mut packet: PacketBuf, dst: MacAddr, ethertype: EtherType) -> PacketBuf {
        let repr = EthernetRepr {
            dst,
            src: self.arp_if.mac,
            vlan: self.vlan,
            ethertype,
        };
        let hl = repr.header_len();
        if packet.headroom() < hl {
            // Every layer leaves room for a link header; a packet built elsewhere may not.
            let meta = packet.meta;
            packet = PacketBuf::from_slice(packet.data());
            packet.meta = meta;
        }
        repr.emit(packet.push_front(hl));
        // Checksum offsets count from the frame's first byte.
        if let ChecksumOffload::Partial { start, offset } = packet.meta.checksum() {
            packet.meta.set_checksum(ChecksumOffload::Partial {
                start: start + hl as u16,
                offset,
            });
        }
        packet
    }

    fn arp_frame(&self, dst: MacAddr, repr: &ArpRepr) -> PacketBuf {
        let mut msg = [0u8; crate::wire::arp::PACKET_LEN];
        repr.emit(&mut msg);
        self.frame(PacketBuf::from_slice(&msg), dst, EtherType::Arp)
    }

    fn ndp_frame(&self, src: Ipv6Addr, dst: Ipv6Addr, mac: MacAddr, repr: &NdpRepr) -> PacketBuf {
        let len = repr.buffer_len();
        let mut bytes = vec![0u8; 40 + len];
        Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: len,
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut bytes[..40]);
        repr.emit(&mut bytes[40..]);
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, dst, 58, len as u16),
            checksum::fast(&bytes[40..]),
        );
        bytes[42..44].copy_from_slice(&(!sum).to_be_bytes());
        self.frame(PacketBuf::from_slice(&bytes), mac, EtherType::Ipv6)
    }
}

/// RFC 3810 §9.1's Robustness Variable: a change is reported this many times.
const MLD_ROBUSTNESS: u8 = 2;

/// Routes advertised by routers whose lifetimes are kept (more are kept for ever).
const MAX_ADVERTISED: usize = 32;

/// Addresses formed from advertised prefixes (more prefixes are not used for addresses).
const MAX_AUTOCONF: usize = 16;

/// Group records in one multicast listener report: what a 1280-byte packet carries.
const MLD_MAX_RECORDS: usize = 60;

/// `addr` with the bits past `len` (1 to 128) cleared.
pub(crate) fn mask(addr: Ipv6Addr, len: u8) -> Ipv6Addr {
    let keep = u128::MAX << (128 - u32::from(len.clamp(1, 128)));
    Ipv6Addr::from(u128::from(addr) & keep)
}

/// Takes the link header off a received frame, keeping checksum offsets relative to the packet.
#[inline]
fn strip(frame: &mut PacketBuf, hl: usize) {
    frame.pull_front(hl);
    if let ChecksumOffload::Partial { start, offset } = frame.meta.checksum() {
        let checksum = match (start as usize).checked_sub(hl) {
            Some(start) => ChecksumOffload::Partial {
                start: start as u16,
                offset,
            },
            None => ChecksumOffload::None,
        };
        frame.meta.set_checksum(checksum);
    }
}

/// If an IPv6 packet is a multicast listener query from the link (hop limit 1, a hop-by-hop
/// header, then ICMPv6 type 130), which RFC 3810 §5.1 has every listener answer: its maximum
/// response delay in milliseconds (§5.1.3: the code itself below 32768, else a floating-point
/// value; an MLDv1 query's 16-bit delay reads the same way below 32768). Its checksum is not
/// checked: a query only schedules a report, at most one a second.
fn mld_query(p: &[u8]) -> Option<u32> {
    if p.len() < 48 || p[0] >> 4 != 6 || p[6] != 0 || p[7] != 1 || p[40] != 58 {
        return None;
    }
    let at = 40 + 8 * (usize::from(p[41]) + 1);
    if p.get(at) != Some(&130) {
        return None;
    }
    let code = u16::from_be_bytes([*p.get(at + 4)?, *p.get(at + 5)?]);
    Some(if code < 0x8000 {
        u32::from(code)
    } else {
        let (mant, exp) = (u32::from(code & 0x0fff), u32::from((code >> 12) & 0x7));
        (mant | 0x1000) << (exp + 3)
    })
}

/// Whether an IPv6 packet is a whole neighbour discovery message with no extension header
/// (RFC 4861 allows none that matters to a host, and Linux sends none).
fn is_ndp(p: &[u8]) -> bool {
    p.len() >= 48
        && p[0] >> 4 == 6
        && p[6] == 58
        && 40 + usize::from(u16::from_be_bytes([p[4], p[5]])) <= p.len()
        && u16::from_be_bytes([p[4], p[5]]) >= 8
        && (133..=137).contains(&p[40])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query with hop-by-hop header and router alert, its maximum response code `code`.
    fn query(code: u16) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 36, 0, 1];
        p.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
        p.extend_from_slice(&[130, 0, 0, 0]);
        p.extend_from_slice(&code.to_be_bytes());
        p.extend_from_slice(&[0; 22]);
        p
    }

    #[test]
    fn a_query_s_maximum_response_delay_is_read_as_rfc_3810_encodes_it() {
        assert_eq!(mld_query(&query(10_000)), Some(10_000));
        assert_eq!(mld_query(&query(0)), Some(0));
        assert_eq!(mld_query(&query(0x7fff)), Some(0x7fff));
        // §5.1.3: 1 exp mant, (mant | 0x1000) << (exp + 3).
        assert_eq!(mld_query(&query(0x8000)), Some(0x1000 << 3));
        assert_eq!(mld_query(&query(0xffff)), Some(0x1fff << 10));
        // Cut short, or another message: not a query.
        let q = query(100);
        for len in 0..52 {
            assert_eq!(mld_query(&q[..len]), None, "{len} bytes");
        }
        let mut report = q.clone();
        report[48] = 143;
        assert_eq!(mld_query(&report), None);
        let mut hops = q;
        hops[7] = 2;
        assert_eq!(mld_query(&hops), None, "hop limit 1 only");
    }

    #[test]
    fn report_delays_fall_within_what_is_asked_and_differ_by_host() {
        let cfg = EthernetConfig::default();
        let mut a = EthernetInterface::new(MacAddr([2, 0, 0, 0, 0, 1]), cfg);
        let mut b = EthernetInterface::new(MacAddr([2, 0, 0, 0, 0, 2]), cfg);
        let da: Vec<Duration> = (0..32).map(|_| a.random_delay(1000)).collect();
        let db: Vec<Duration> = (0..32).map(|_| b.random_delay(1000)).collect();
        assert!(da.iter().chain(&db).all(|d| *d < Duration::from_secs(1)));
        assert_ne!(da, db);
        assert!(da.windows(2).any(|w| w[0] != w[1]));
        assert_eq!(a.random_delay(0), Duration::ZERO);
    }

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0b]);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// An interface checking no address for duplicates, so that an address is usable at once.
    fn host() -> EthernetInterface {
        let cfg = EthernetConfig {
            dad_transmits: 0,
            router_solicitations: Some(0),
            ..EthernetConfig::default()
        };
        EthernetInterface::new(MAC, cfg)
    }

    /// An advertisement of `prefix`/64, autonomous, with these lifetimes in seconds.
    fn advert(prefix: &str, preferred: u32, valid: u32) -> RouterInfo {
        RouterInfo {
            router: v6("fe80::1"),
            lifetime: 0,
            preference: 0,
            hop_limit: 0,
            reachable_time: 0,
            retrans_time: 0,
            mtu: None,
            prefixes: vec![crate::wire::ndp::PrefixInfo {
                prefix: v6(prefix),
                prefix_len: 64,
                on_link: true,
                autonomous: true,
                valid_lifetime: valid,
                preferred_lifetime: preferred,
            }],
        }
    }

    const SLAAC: &str = "2001:db8:1:0:0:ff:fe00:b";

    /// RFC 7217: with a key, the address formed from a prefix has an identifier that is not the
    /// hardware address's, the same for the same key, prefix and interface, another for another
    /// prefix or key; a duplicate tries the next count, and after three more the prefix gives
    /// nothing. Without a key, the EUI-64 identifier, and a duplicate ends it at once.
    #[test]
    fn stable_identifiers_hide_the_hardware_address_and_retry_past_duplicates() {
        let t0 = Instant::from_secs(100);
        let formed = |key: Option<[u8; 16]>, prefix: &str| {
            let mut e = host();
            if let Some(k) = key {
                e.set_privacy_key(SecretKey::from_bytes(k));
            }
            e.autoconfigure(&advert(prefix, 100, 300), t0);
            let [EthernetEvent::AddressReady(cidr)] = e.take_events()[..] else {
                panic!("one address");
            };
            (e, cidr.addr)
        };
        let (_, eui64) = formed(None, "2001:db8:1::");
        assert_eq!(eui64, v6(SLAAC));
        let (mut e, a) = formed(Some([7; 16]), "2001:db8:1::");
        assert_eq!(mask(a, 64), v6("2001:db8:1::"));
        assert_ne!(a, eui64);
        assert_eq!(formed(Some([7; 16]), "2001:db8:1::").1, a, "stable");
        assert_ne!(formed(Some([8; 16]), "2001:db8:1::").1, a, "another key");
        let b = formed(Some([7; 16]), "2001:db8:2::").1;
        assert_ne!(b.octets()[8..], a.octets()[8..], "another prefix");
        // Duplicates: the next count each time, three more, then nothing.
        let mut seen = vec![a];
        let mut now_addr = a;
        for _ in 0..IDGEN_RETRIES {
            e.duplicate(now_addr, t0);
            let events = e.take_events();
            let Some(EthernetEvent::AddressReady(cidr)) = events.last() else {
                panic!("{events:?}");
            };
            assert!(!seen.contains(&cidr.addr));
            assert!(e.is_autoconfigured(cidr.addr));
            seen.push(cidr.addr);
            now_addr = cidr.addr;
        }
        e.duplicate(now_addr, t0);
        assert_eq!(e.take_events(), [EthernetEvent::Duplicate(now_addr)]);
        assert!(!e.is_autoconfigured(now_addr));
        // Without a key a duplicate ends the prefix's address at once.
        let (mut e, a) = formed(None, "2001:db8:1::");
        e.duplicate(a, t0);
        assert_eq!(e.take_events(), [EthernetEvent::Duplicate(a)]);
        assert!(!e.is_autoconfigured(a));
        assert!(reserved_id(0) && reserved_id(0xfdff_ffff_ffff_ff80) && !reserved_id(1));
        // The link-local address: EUI-64 without a key; with one, a stable identifier that
        // tries the next count when duplicated, as a prefix's address does.
        assert_eq!(host().link_local(), link_local(MAC));
        let mut e = host();
        e.set_privacy_key(SecretKey::from_bytes([7; 16]));
        let ll = e.link_local();
        assert_eq!(mask(ll, 64), v6("fe80::"));
        assert_ne!(ll, link_local(MAC));
        assert_eq!(e.link_local(), ll, "stable");
        e.add_ipv6(Ipv6Cidr::new(ll, 64), t0);
        e.take_events();
        e.duplicate(ll, t0);
        let events = e.take_events();
        let [EthernetEvent::Duplicate(d), EthernetEvent::AddressReady(next)] = events[..] else {
            panic!("{events:?}");
        };
        assert_eq!(d, ll);
        assert_eq!(mask(next.addr, 64), v6("fe80::"));
        assert_ne!(next.addr, ll);
    }

    #[test]
    fn an_address_is_formed_from_an_advertised_prefix_deprecated_then_given_up() {
        let mut e = host();
        let t0 = Instant::from_secs(100);
        e.autoconfigure(&advert("2001:db8:1::", 10, 30), t0);
        let cidr = Ipv6Cidr::new(v6(SLAAC), 64);
        assert_eq!(e.take_events(), [EthernetEvent::AddressReady(cidr)]);
        assert!(e.is_autoconfigured(cidr.addr));
        // The new address's group reported (twice within a second), then only the lifetimes.
        let mut out = Vec::new();
        for ms in (0..1500).step_by(100) {
            e.poll(t0 + Duration::from_millis(ms), &mut out);
        }
        assert_eq!(records(&out).len(), 2);
        assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(10)));
        e.poll(t0 + Duration::from_secs(10), &mut out);
        assert_eq!(
            e.take_events(),
            [EthernetEvent::Deprecated {
                addr: cidr.addr,
                deprecated: true
            }]
        );
        assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(30)));
        e.poll(t0 + Duration::from_secs(29), &mut out);
        assert_eq!(e.take_events(), []);
        e.poll(t0 + Duration::from_secs(30), &mut out);
        assert_eq!(e.take_events(), [EthernetEvent::AddressExpired(cidr)]);
        assert!(!e.is_autoconfigured(cidr.addr));
        assert!(
            !e.ndp_if.addrs.contains(&cidr.addr),
            "no longer answered for"
        );
    }

    /// RFC 4861 §6.3.6 with RFC 4191's preferences: the first router heard is kept while no
    /// better one comes (a second as good changes nothing), a higher preference takes over, a
    /// router that stops being one (lifetime 0, or its lifetime ends) gives the route back, and
    /// a router neighbour discovery gives up is passed over for the next as good, in turn when
    /// none answers, until it advertises itself again.
    #[test]
    fn the_default_router_list_prefers_reachable_routers_then_higher_preference() {
        let mut e = host();
        let t0 = Instant::from_secs(100);
        let router = |addr: &str, lifetime: u16, preference: i8| RouterInfo {
            router: v6(addr),
            lifetime,
            preference,
            hop_limit: 0,
            reachable_time: 0,
            retrans_time: 0,
            mtu: None,
            prefixes: Vec::new(),
        };
        let chosen = |e: &mut EthernetInterface| {
            e.take_events()
                .into_iter()
                .filter_map(|ev| match ev {
                    EthernetEvent::DefaultRouter { router, .. } => Some(router),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let (r1, r2, r3) = (v6("fe80::1"), v6("fe80::2"), v6("fe80::3"));
        e.list_router(&router("fe80::1", 1800, 0), t0);
        assert_eq!(chosen(&mut e), [Some(r1)]);
        e.list_router(&router("fe80::2", 600, 0), t0);
        assert_eq!(chosen(&mut e), [], "as good: the first stays");
        e.list_router(&router("fe80::3", 1800, 1), t0);
        assert_eq!(chosen(&mut e), [Some(r3)], "a higher preference");
        e.list_router(&router("fe80::3", 0, 1), t0);
        assert_eq!(chosen(&mut e), [Some(r1)], "no longer a router");
        // fe80::1 does not answer: the next as good; then fe80::2 neither: fe80::1 again.
        e.router_failed(r1);
        assert_eq!(chosen(&mut e), [Some(r2)]);
        e.router_failed(v6("fe80::9"));
        assert_eq!(chosen(&mut e), [], "not a router");
        e.router_failed(r2);
        assert_eq!(chosen(&mut e), [Some(r1)], "in turn when none answers");
        // fe80::2 advertises itself again: no longer suspect, so better than fe80::1.
        e.list_router(&router("fe80::2", 600, 0), t0 + Duration::from_secs(1));
        assert_eq!(chosen(&mut e), [Some(r2)]);
        assert_eq!(e.default_router(), Some(r2));
        // Lifetimes: fe80::2's ends first (601 s), then fe80::1's (1800 s), then none is left.
        assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(601)));
        let mut out = Vec::new();
        e.poll(t0 + Duration::from_secs(601), &mut out);
        assert_eq!(chosen(&mut e), [Some(r1)]);
        e.poll(t0 + Duration::from_secs(1800), &mut out);
        let events = e.take_events();
        assert!(
            events.contains(&EthernetEvent::DefaultRouter {
                router: None,
                replaced: Some(r1)
            }),
            "{events:?}"
        );
        assert_eq!(e.default_router(), None);
        // Bounded: past 16 routers, more are not listed.
        for i in 0..20u16 {
            let addr = format!("fe80::{:x}", 0x100 + i);
            e.list_router(&router(&addr, 1800, 0), t0 + Duration::from_secs(2000));
        }
        assert_eq!(e.routers.len(), MAX_DEFAULT_ROUTERS);
    }

    /// Router solicitations (RFC 4861 §6.3.7 with RFC 7559's backoff, as Linux 6.18 sends them
    /// with its defaults): the first as soon as the link-local address is usable, the next about
    /// 4 s later (3.6 to 4.4), each interval then 1.9 to 2.1 times the last, up to an hour
    /// (3,240 to 3,960 s), for as long as no router answers; none once one has. With a limit of
    /// 3, RFC 4861's `MAX_RTR_SOLICITATIONS`, three in all.
    #[test]
    fn routers_are_solicited_with_rfc_7559_s_backoff_until_one_answers() {
        let solicitations = |limit: Option<u32>, hours: u64, answer_at: Option<Instant>| {
            let mut cfg = host().cfg;
            cfg.router_solicitations = limit;
            let mut e = EthernetInterface::new(MAC, cfg);
            let t0 = Instant::from_secs(100);
            e.add_ipv6(Ipv6Cidr::new(link_local(MAC), 64), t0);
            let mut sent = Vec::new();
            let mut now = t0;
            let mut answered = false;
            while now < t0 + Duration::from_secs(hours * 3600) {
                if answer_at.is_some_and(|t| t <= now) && !answered {
                    answered = true;
                    e.router_advertised(advert("2001:db8:1::", 0, 0), now);
                }
                let mut out = Vec::new();
                e.poll(now, &mut out);
                let rs = out
                    .iter()
                    .filter(|f| f.data().len() > 54 && f.data()[54] == 133);
                sent.extend(rs.map(|_| now));
                let Some(next) = e.next_deadline() else { break };
                now = next.max(now + Duration::from_millis(1));
            }
            (t0, sent)
        };
        let (t0, sent) = solicitations(None, 10, None);
        assert_eq!(sent[0], t0, "at once");
        let gaps: Vec<f64> = sent
            .windows(2)
            .map(|w| (w[1].total_micros() - w[0].total_micros()) as f64 / 1e6)
            .collect();
        assert!((3.6..=4.4).contains(&gaps[0]), "{gaps:?}");
        let mut capped = 0;
        for w in gaps.windows(2) {
            if (3240.0..=3960.0).contains(&w[1]) && w[0] * 1.9 > 3600.0 * 0.9 {
                capped += 1;
            } else {
                assert!((1.9..=2.1).contains(&(w[1] / w[0])), "{gaps:?}");
            }
        }
        assert!(capped >= 6, "an hour apart once past the maximum: {gaps:?}");
        assert!(gaps.iter().all(|&g| g <= 3960.0));
        let draws: Vec<u64> = gaps.iter().map(|g| (g * 1000.0) as u64).collect();
        assert_ne!(
            draws[1],
            draws[0] * 2,
            "the intervals are drawn, not exact doublings"
        );
        // A router answers after a minute: no more.
        let (t0, sent) = solicitations(None, 2, Some(Instant::from_secs(160)));
        assert!(
            sent.iter().all(|&t| t < t0 + Duration::from_secs(60)),
            "{sent:?}"
        );
        assert!(sent.len() >= 4, "at 0 and about 4, 12 and 28 s: {sent:?}");
        // RFC 4861's three.
        let (_, sent) = solicitations(Some(3), 2, None);
        assert_eq!(sent.len(), 3);
    }

    /// RFC 4861 §6.3.2: a confirmation holds for a ReachableTime drawn between half and one and
    /// a half times BaseReachableTime (30 s), not the same on every host; a router's Reachable
    /// Time is drawn the same way.
    #[test]
    fn reachable_times_are_drawn_around_the_base() {
        let t0 = Instant::from_secs(100);
        let reachable = |e: &mut EthernetInterface| {
            let (v4, v6a) = (Ipv4Addr::new(10, 0, 0, 9), v6("fe80::9"));
            e.arp.learn(v4, MacAddr([2, 0, 0, 0, 0, 9]), t0);
            e.arp.confirm(v4, t0);
            e.nd.learn(v6a, MacAddr([2, 0, 0, 0, 0, 9]), t0);
            e.nd.confirm(v6a, t0);
            let until = |s: Option<NeighborState>| match s {
                Some(NeighborState::Reachable { until }) => {
                    until.total_micros() - t0.total_micros()
                }
                other => panic!("{other:?}"),
            };
            (until(e.arp.state(v4)), until(e.nd.state(v6a)))
        };
        let mut drawn = Vec::new();
        for last in 1..=8u8 {
            let mut e = EthernetInterface::new(MacAddr([2, 0, 0, 0, 0, last]), host().cfg);
            let (a, n) = reachable(&mut e);
            for t in [a, n] {
                assert!((15_000_000..=45_000_000).contains(&t), "{t}");
                drawn.push(t);
            }
        }
        drawn.sort_unstable();
        drawn.dedup();
        assert!(drawn.len() >= 12, "drawn, not fixed: {drawn:?}");
        // A router's Reachable Time of 10 s: between 5 and 15 s.
        let mut e = host();
        let mut info = advert("2001:db8:1::", 0, 0);
        info.reachable_time = 10_000;
        e.router_advertised(info, t0);
        let (_, n) = reachable(&mut e);
        assert!((5_000_000..=15_000_000).contains(&n), "{n}");
    }

    /// An interface forming temporary addresses (RFC 8981) under a fixed key, checking no
    /// address for duplicates.
    fn temporary_host(mode: TemporaryMode) -> EthernetInterface {
        let mut cfg = host().cfg;
        cfg.temporary.mode = mode;
        let mut e = EthernetInterface::new(MAC, cfg);
        e.set_temporary_key(SecretKey::from_bytes([5; 16]));
        e
    }

    /// The temporary addresses the interface has: address, preferred and valid lifetimes' ends,
    /// deprecated.
    fn temporaries(e: &EthernetInterface) -> Vec<(Ipv6Addr, Instant, Instant, bool)> {
        e.autoconf
            .iter()
            .filter(|a| a.temporary.is_some())
            .map(|a| {
                (
                    a.cidr.addr,
                    a.preferred.unwrap(),
                    a.valid.unwrap(),
                    a.deprecated,
                )
            })
            .collect()
    }

    /// RFC 8981: beside the prefix's own address, a temporary one with a random identifier,
    /// preferred for a day less its random DESYNC_FACTOR (at most 0.4 of a day) and valid for
    /// two; its successor formed REGEN_ADVANCE before it is deprecated, it then deprecated and
    /// given up at the end of its two days. Over ten days of a prefix advertised for ever, one
    /// temporary address is always preferred, and never more than four exist.
    #[test]
    fn temporary_addresses_come_and_go_while_the_prefix_lasts() {
        let day = Duration::from_secs(86_400);
        let mut e = temporary_host(TemporaryMode::Prefer);
        let t0 = Instant::from_secs(100);
        e.autoconfigure(&advert("2001:db8:1::", u32::MAX, u32::MAX), t0);
        let events = e.take_events();
        let [EthernetEvent::AddressReady(public), EthernetEvent::AddressReady(temp)] = events[..]
        else {
            panic!("{events:?}");
        };
        assert_eq!(public.addr, v6(SLAAC));
        assert_eq!(mask(temp.addr, 64), v6("2001:db8:1::"));
        assert_ne!(temp.addr, public.addr);
        assert!(e.is_temporary(temp.addr) && !e.is_temporary(public.addr));
        assert!(
            e.is_autoconfigured(temp.addr),
            "no on-link route of its own"
        );
        assert_eq!(e.counters.temporary_formed, 1);
        let [(addr, preferred, valid, false)] = temporaries(&e)[..] else {
            panic!("{:?}", temporaries(&e));
        };
        assert_eq!(addr, temp.addr);
        assert_eq!(valid, t0 + 2 * day);
        assert!(
            preferred <= t0 + day && preferred >= t0 + day * 3 / 5,
            "{preferred:?}"
        );
        // REGEN_ADVANCE is 2 s with no duplicate checks.
        let regen = Instant::from_secs(preferred.total_micros() / 1_000_000 - 2);
        assert!(e.next_deadline().unwrap() <= regen);
        let mut out = Vec::new();
        e.poll(regen + Duration::from_secs(1), &mut out);
        let events = e.take_events();
        let [EthernetEvent::AddressReady(next)] = events[..] else {
            panic!("{events:?}");
        };
        assert!(e.is_temporary(next.addr) && next.addr != temp.addr);
        e.poll(preferred, &mut out);
        assert_eq!(
            e.take_events(),
            [EthernetEvent::Deprecated {
                addr: temp.addr,
                deprecated: true
            }]
        );
        e.poll(valid, &mut out);
        assert!(e
            .take_events()
            .contains(&EthernetEvent::AddressExpired(temp)));
        assert!(!e.is_temporary(temp.addr));
        // Ten days, from deadline to deadline.
        let mut now = valid;
        let mut seen = vec![temp.addr, next.addr];
        while now < t0 + 10 * day {
            now = e
                .next_deadline()
                .expect("a temporary address always has a deadline");
            e.poll(now, &mut out);
            e.take_events();
            let live = temporaries(&e);
            assert!(live.len() <= 4, "{live:?}");
            assert!(
                live.iter().any(|t| !t.3),
                "one preferred at {now:?}: {live:?}"
            );
            for t in live {
                if !seen.contains(&t.0) {
                    seen.push(t.0);
                }
            }
        }
        assert!(
            seen.len() >= 10,
            "a new one at least every day: {}",
            seen.len()
        );
        assert_eq!(e.counters.temporary_formed, seen.len() as u64);
    }

    /// A temporary address lives no longer than its prefix: a shorter advertised lifetime bounds
    /// it (and one of 0 deprecates it), and none is formed when less than REGEN_ADVANCE of the
    /// prefix's preferred lifetime is left (RFC 8981 §3.4). Another key draws other identifiers
    /// and another DESYNC_FACTOR; with the mode off, none is formed.
    #[test]
    fn temporary_addresses_live_within_their_prefix() {
        let t0 = Instant::from_secs(100);
        let mut e = temporary_host(TemporaryMode::Form);
        e.autoconfigure(&advert("2001:db8:1::", 600, 3 * 3600), t0);
        let [(temp, preferred, valid, false)] = temporaries(&e)[..] else {
            panic!("{:?}", temporaries(&e));
        };
        assert_eq!(preferred, t0 + Duration::from_secs(600));
        assert_eq!(valid, t0 + Duration::from_secs(3 * 3600));
        // The router says the prefix is deprecated: so is the temporary address, at once.
        let t1 = t0 + Duration::from_secs(60);
        e.take_events();
        e.autoconfigure(&advert("2001:db8:1::", 0, 3 * 3600), t1);
        let events = e.take_events();
        assert!(
            events.contains(&EthernetEvent::Deprecated {
                addr: temp,
                deprecated: true
            }),
            "{events:?}"
        );
        assert_eq!(
            temporaries(&e).len(),
            1,
            "no new one for a deprecated prefix"
        );
        // Preferred again for long enough: a new one, since none is preferred.
        e.autoconfigure(&advert("2001:db8:1::", 3600, 3 * 3600), t1);
        let events = e.take_events();
        assert!(events.contains(&EthernetEvent::Deprecated {
            addr: temp,
            deprecated: false
        }));
        assert_eq!(temporaries(&e).len(), 1, "the old one is preferred again");
        // Too short a preferred lifetime for a first one.
        let mut e = temporary_host(TemporaryMode::Form);
        e.autoconfigure(&advert("2001:db8:2::", 2, 3 * 3600), t0);
        assert!(temporaries(&e).is_empty());
        // Another key: another identifier.
        let mut other = temporary_host(TemporaryMode::Form);
        other.set_temporary_key(SecretKey::from_bytes([6; 16]));
        other.autoconfigure(&advert("2001:db8:1::", 600, 3 * 3600), t0);
        assert_ne!(temporaries(&other)[0].0, temp);
        // Off: none, though a key is set.
        let mut off = temporary_host(TemporaryMode::Off);
        off.autoconfigure(&advert("2001:db8:1::", 600, 3 * 3600), t0);
        assert!(temporaries(&off).is_empty());
        assert_eq!(off.take_events().len(), 1);
    }

    /// A temporary address another node has is dropped and another identifier tried, three
    /// times at most (RFC 8981's TEMP_IDGEN_RETRIES); then the prefix has none until it is
    /// advertised again.
    #[test]
    fn a_duplicate_temporary_address_is_drawn_again_three_times_at_most() {
        let t0 = Instant::from_secs(100);
        let mut e = temporary_host(TemporaryMode::Prefer);
        e.autoconfigure(&advert("2001:db8:1::", 3600, 7200), t0);
        e.take_events();
        let mut seen = Vec::new();
        for i in 0..=TEMP_IDGEN_RETRIES {
            let [(temp, ..)] = temporaries(&e)[..] else {
                panic!("try {i}: {:?}", temporaries(&e));
            };
            assert!(!seen.contains(&temp));
            seen.push(temp);
            e.duplicate(temp, t0);
            assert!(!e.is_temporary(temp));
        }
        assert!(temporaries(&e).is_empty());
        assert_eq!(e.counters.temporary_formed, 4);
        assert_eq!(e.counters.duplicates, 4);
        e.autoconfigure(
            &advert("2001:db8:1::", 3600, 7200),
            t0 + Duration::from_secs(1),
        );
        assert_eq!(temporaries(&e).len(), 1);
    }

    #[test]
    fn a_short_valid_lifetime_is_taken_only_as_rfc_4862_s_two_hour_rule_allows() {
        let hours = |h: u64| Duration::from_secs(h * 3600);
        let valid = |e: &EthernetInterface| e.autoconf[0].valid;
        let mut e = host();
        let t0 = Instant::from_secs(100);
        e.autoconfigure(&advert("2001:db8:1::", 3600, 5 * 3600), t0);
        assert_eq!(valid(&e), Some(t0 + hours(5)));
        // A shorter lifetime than what is left, and over two hours left: cut to two hours.
        e.autoconfigure(&advert("2001:db8:1::", 0, 60), t0);
        assert_eq!(valid(&e), Some(t0 + hours(2)));
        // Two hours or less left: a shorter one is ignored...
        let t1 = t0 + Duration::from_secs(600);
        e.autoconfigure(&advert("2001:db8:1::", 0, 60), t1);
        assert_eq!(valid(&e), Some(t0 + hours(2)));
        // ...a longer one, or one over two hours, taken.
        e.autoconfigure(&advert("2001:db8:1::", 0, 7000), t1);
        assert_eq!(valid(&e), Some(t1 + Duration::from_secs(7000)));
        e.autoconfigure(&advert("2001:db8:1::", 0, 3 * 3600), t1);
        assert_eq!(valid(&e), Some(t1 + hours(3)));
        // Infinity is longer than anything; a finite one after it is cut to two hours.
        e.autoconfigure(&advert("2001:db8:1::", 0, u32::MAX), t1);
        assert_eq!(valid(&e), None);
        e.autoconfigure(&advert("2001:db8:1::", 0, 60), t1);
        assert_eq!(valid(&e), Some(t1 + hours(2)));
        // A valid lifetime of 0 for a new prefix forms nothing; preferred past valid is ignored.
        e.autoconfigure(&advert("2001:db8:2::", 0, 0), t1);
        e.autoconfigure(&advert("2001:db8:3::", 100, 50), t1);
        assert_eq!(e.autoconf.len(), 1);
        // The preferred lifetime is always the advertised one: deprecated now, preferred again.
        let events: Vec<EthernetEvent> = e.take_events().into_iter().skip(1).collect();
        let addr = v6(SLAAC);
        assert_eq!(
            events,
            [EthernetEvent::Deprecated {
                addr,
                deprecated: true
            }]
        );
        e.autoconfigure(&advert("2001:db8:1::", 600, u32::MAX), t1);
        assert_eq!(
            e.take_events(),
            [EthernetEvent::Deprecated {
                addr,
                deprecated: false
            }]
        );
    }

    #[test]
    fn an_address_another_node_has_is_not_formed_again_until_its_prefix_expires() {
        let cfg = EthernetConfig {
            router_solicitations: Some(0),
            ..EthernetConfig::default()
        };
        let mut e = EthernetInterface::new(MAC, cfg);
        let t0 = Instant::from_secs(100);
        let mut out = Vec::new();
        e.autoconfigure(&advert("2001:db8:1::", 10, 30), t0);
        assert!(e.is_tentative(v6(SLAAC)));
        e.duplicate(v6(SLAAC), t0);
        assert!(!e.is_tentative(v6(SLAAC)) && !e.is_autoconfigured(v6(SLAAC)));
        e.take_events();
        // The next advertisement forms nothing and starts no check.
        e.autoconfigure(&advert("2001:db8:1::", 10, 30), t0 + Duration::from_secs(5));
        assert!(!e.is_tentative(v6(SLAAC)));
        assert_eq!(e.take_events(), []);
        assert!(e.dad.is_empty());
        // Once the prefix's valid lifetime has run out, it may be tried again.
        e.poll(t0 + Duration::from_secs(40), &mut out);
        assert_eq!(e.take_events(), [], "nothing to give up");
        e.autoconfigure(
            &advert("2001:db8:1::", 10, 30),
            t0 + Duration::from_secs(41),
        );
        assert!(e.is_tentative(v6(SLAAC)));
    }

    #[test]
    fn an_address_the_application_gave_is_not_aged_and_the_number_formed_is_bounded() {
        let mut e = host();
        let t0 = Instant::from_secs(100);
        assert!(e.add_ipv6(Ipv6Cidr::new(v6(SLAAC), 64), t0));
        e.autoconfigure(&advert("2001:db8:1::", 10, 30), t0);
        assert!(!e.is_autoconfigured(v6(SLAAC)));
        for i in 0..40u16 {
            let prefix = Ipv6Addr::new(0x2001, 0xdb8, 0x100 + i, 0, 0, 0, 0, 0);
            e.autoconfigure(&advert(&prefix.to_string(), 10, 30), t0);
        }
        assert_eq!(e.autoconf.len(), MAX_AUTOCONF);
    }

    /// The records of the multicast listener reports in `out`: (type, group).
    fn records(out: &[PacketBuf]) -> Vec<Vec<(u8, Ipv6Addr)>> {
        out.iter()
            .filter(|f| f.data()[..6] == [0x33, 0x33, 0, 0, 0, 0x16])
            .map(|f| {
                let msg = &f.data()[14 + 48..];
                assert_eq!(msg[0], 143);
                let n = u16::from_be_bytes([msg[6], msg[7]]) as usize;
                (0..n)
                    .map(|i| {
                        let r = &msg[8 + 20 * i..8 + 20 * (i + 1)];
                        (
                            r[0],
                            Ipv6Addr::from(<[u8; 16]>::try_from(&r[4..20]).unwrap()),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_group_left_is_reported_as_a_change_to_include_mode_twice() {
        let mut e = host();
        let t0 = Instant::from_secs(100);
        let ll = link_local(MAC);
        let other = v6("2001:db8::77");
        e.add_ipv6(Ipv6Cidr::new(ll, 64), t0);
        e.add_ipv6(Ipv6Cidr::new(other, 64), t0);
        let mut out = Vec::new();
        let mut t = t0;
        for _ in 0..30 {
            e.poll(t, &mut out);
            t = t + Duration::from_millis(100);
        }
        let joins = vec![(4, solicited_node(ll)), (4, solicited_node(other))];
        let mut joins_sorted = joins.clone();
        joins_sorted.sort();
        assert_eq!(records(&out), [joins_sorted.clone(), joins_sorted]);
        // The link-local address's group stays; the other's is left.
        out.clear();
        assert!(e.remove_ipv6(other, t));
        assert!(!e.remove_ipv6(other, t), "not ours twice");
        for _ in 0..30 {
            e.poll(t, &mut out);
            t = t + Duration::from_millis(100);
        }
        let change = vec![(4, solicited_node(ll)), (3, solicited_node(other))];
        assert_eq!(records(&out), [change.clone(), change]);
        // Removing an address that shares its group with another leaves nothing.
        out.clear();
        e.add_ipv6(Ipv6Cidr::new(v6(SLAAC), 64), t);
        for _ in 0..30 {
            e.poll(t, &mut out);
            t = t + Duration::from_millis(100);
        }
        out.clear();
        assert!(e.remove_ipv6(v6(SLAAC), t));
        for _ in 0..30 {
            e.poll(t, &mut out);
            t = t + Duration::from_millis(100);
        }
        assert_eq!(records(&out), Vec::<Vec<(u8, Ipv6Addr)>>::new());
        // A query is answered with the current state: the group in exclude mode, no leave.
        out.clear();
        e.answer_query(t, 500);
        for _ in 0..10 {
            e.poll(t, &mut out);
            t = t + Duration::from_millis(100);
        }
        assert_eq!(records(&out), [vec![(2, solicited_node(ll))]]);
    }

    /// The deadline the stack asks for at every poll is kept rather than worked out each time;
    /// `next_deadline` checks it against the lists in this crate's tests. Here every kind of
    /// own timer is set, moved and stopped: duplicate detection, a router solicitation, a
    /// query's report from a frame, an address's removal.
    #[test]
    fn the_kept_deadline_follows_every_timer_the_interface_sets() {
        let mut e = EthernetInterface::new(MAC, EthernetConfig::default());
        let t0 = Instant::from_millis(0);
        let mut out = Vec::new();
        assert_eq!(e.next_deadline(), None);
        let ll = link_local(MAC);
        assert!(!e.add_ipv6(Ipv6Cidr::new(ll, 64), t0), "tentative");
        assert_eq!(
            e.next_deadline(),
            Some(t0),
            "a report and a solicitation at once"
        );
        let mut t = t0;
        let mut deadlines = Vec::new();
        for step in 0..200 {
            if step == 50 {
                let mut frame = vec![0x33, 0x33, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x0c, 0x86, 0xdd];
                frame.extend_from_slice(&query(1000));
                let got = e.input(PacketBuf::from_slice(&frame), t, &mut out);
                assert!(matches!(got, FrameIn::Consumed));
                assert!(e
                    .next_deadline()
                    .is_some_and(|d| d <= t + Duration::from_secs(1)));
            }
            if step == 120 {
                assert!(e.remove_ipv6(ll, t));
            }
            if let Some(d) = e.next_deadline() {
                deadlines.push(d);
                t = t.max(d);
            } else {
                t = t + Duration::from_millis(100);
            }
            e.poll(t, &mut out);
        }
        assert!(e.ndp_if.addrs.is_empty() && e.dad.is_empty());
        assert!(deadlines.len() > 5, "the timers ran: {deadlines:?}");
    }
}
