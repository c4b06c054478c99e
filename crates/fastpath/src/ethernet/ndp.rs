//! IPv6 neighbour discovery (RFC 4861) and duplicate address detection (RFC 4862 §5.4) over the
//! [`NeighborCache`], as a host: a message in, at most one out, and the packets an answer
//! releases. Pure, as [`arp`](super::arp) is: the caller frames and sends what it is told, and has
//! checked what the IPv6 header says (hop limit 255, the checksum).
//!
//! - A solicitation for one of our addresses is answered: to its sender with S and O set, or, from
//!   the unspecified address (another node's duplicate address detection), to all nodes. Its
//!   sender's link-layer address is learned (a STALE entry, §7.2.3).
//! - An advertisement updates an entry that exists, never creates one (we did not ask), and one
//!   for an address we are still checking means someone has it: the address is a duplicate.
//! - A solicitation from the unspecified address for an address we are checking is another
//!   node checking it too: a duplicate as well (RFC 4862 §5.4.3).
//! - A router advertisement from a link-local address is reported for the stack to apply
//!   (default router, prefixes, MTU); a router solicitation is a router's business, dropped.
//! - Our own link-layer address as a sender, or another node claiming one of our addresses, are
//!   dropped by reason.

use std::net::Ipv6Addr;

use super::neighbor::NeighborCache;
use crate::buf::PacketBuf;
use crate::time::Instant;
use crate::wire::ndp::{multicast_mac, solicited_node, PrefixInfo};
use crate::wire::{MacAddr, NaFlags, NdpRepr};

/// All nodes on the link, `ff02::1`.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The interface neighbour discovery speaks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NdpInterface {
    /// Our hardware address.
    pub mac: MacAddr,
    /// Our addresses on this link, checked and in use.
    pub addrs: Vec<Ipv6Addr>,
    /// Addresses being checked for duplicates: not ours yet, and not answered for.
    pub tentative: Vec<Ipv6Addr>,
}

impl NdpInterface {
    fn owns(&self, ip: Ipv6Addr) -> bool {
        self.addrs.contains(&ip)
    }

    /// Whether a frame to group `ip` is for us: all nodes, or the solicited-node group of an
    /// address we have or are checking.
    pub fn listens(&self, group: Ipv6Addr) -> bool {
        group == ALL_NODES
            || self
                .addrs
                .iter()
                .chain(&self.tentative)
                .any(|&a| solicited_node(a) == group)
    }

    /// A solicitation for `target`: to its solicited-node group when `unicast` is `None`
    /// (resolving), else to that address (a probe of a stale entry); from `src` (one of ours).
    /// Returns the IPv6 destination, the frame's destination and the message.
    pub fn solicit(
        &self,
        target: Ipv6Addr,
        unicast: Option<MacAddr>,
    ) -> (Ipv6Addr, Option<MacAddr>, NdpRepr) {
        let dst = if unicast.is_some() {
            target
        } else {
            solicited_node(target)
        };
        (
            dst,
            unicast,
            NdpRepr::NeighborSolicit {
                target,
                lladdr: Some(self.mac),
            },
        )
    }

    /// The source address for what we send to `dst`: a link-local one of ours for a link-local
    /// or multicast destination when we have one, else the first.
    pub fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let link_local = |a: &&Ipv6Addr| a.segments()[0] & 0xffc0 == 0xfe80;
        let wants_ll = dst.is_multicast() || dst.segments()[0] & 0xffc0 == 0xfe80;
        wants_ll
            .then(|| self.addrs.iter().find(link_local))
            .flatten()
            .or(self.addrs.first())
            .copied()
    }
}

/// Why a neighbour discovery message was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdpDrop {
    /// It came from our own hardware address (a loop, or a reflection).
    FromUs,
    /// Another node claims one of our addresses.
    Conflict,
    /// It breaks a rule of RFC 4861 §6.1, §7.1 or §8.1 that needs the IPv6 header (a
    /// solicitation from the unspecified address to a unicast address or with a source address
    /// option, a solicited advertisement to a group, an advertisement or a redirect from a
    /// router not link-local, a redirect to a group or to a target neither link-local nor the
    /// destination).
    Invalid,
    /// A solicitation for an address that is not ours.
    NotOurs,
    /// A router solicitation: for routers.
    ForRouters,
}

/// A router's advertisement, for the stack to apply (RFC 4861 §6.3.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterInfo {
    /// The router's (link-local) address.
    pub router: Ipv6Addr,
    /// Seconds it stays a default router (0: it is not one).
    pub lifetime: u16,
    /// Its preference as a default router (RFC 4191 §2.2): 1 high, 0 medium, -1 low.
    pub preference: i8,
    /// The hop limit hosts on the link should use (0: unspecified).
    pub hop_limit: u8,
    /// Milliseconds a neighbour's confirmation holds, `BaseReachableTime` (0: unspecified).
    pub reachable_time: u32,
    /// Milliseconds between solicitations, `RetransTimer` (0: unspecified).
    pub retrans_time: u32,
    /// The link's MTU, if it says.
    pub mtu: Option<u32>,
    /// Its prefix information.
    pub prefixes: Vec<PrefixInfo>,
}

/// A router's redirect (RFC 4861 §8), checked as far as the message alone allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The router that sent it (link-local).
    pub router: Ipv6Addr,
    /// The destination redirected.
    pub destination: Ipv6Addr,
    /// Its better first hop: a router on the link, or the destination itself when it is on
    /// the link.
    pub target: Ipv6Addr,
}

/// What a neighbour discovery message asks of us.
#[derive(Debug, Default)]
pub struct NdpOutcome {
    /// A message to send: its IPv6 destination, the frame's destination (`None`: the group's
    /// address) and the message.
    pub reply: Option<(Ipv6Addr, MacAddr, NdpRepr)>,
    /// Packets that waited for the sender's address: send them to it.
    pub released: Vec<(PacketBuf, MacAddr)>,
    /// An address we were checking is someone else's.
    pub duplicate: Option<Ipv6Addr>,
    /// A router advertisement to apply.
    pub router: Option<RouterInfo>,
    /// A redirect to apply if it comes from the destination's first hop (only the stack knows
    /// the routes): the router that sent it, the destination and its better first hop.
    pub redirect: Option<Redirect>,
    /// Why it was dropped, if it was.
    pub dropped: Option<NdpDrop>,
}

/// Handles the neighbour discovery message `repr` from `src` to `dst`, in a frame from
/// `frame_src`, that arrived on `iface`.
pub fn ndp_input(
    cache: &mut NeighborCache<Ipv6Addr>,
    iface: &NdpInterface,
    (src, dst, frame_src): (Ipv6Addr, Ipv6Addr, MacAddr),
    repr: &NdpRepr,
    now: Instant,
) -> NdpOutcome {
    let mut out = NdpOutcome::default();
    if frame_src == iface.mac {
        out.dropped = Some(NdpDrop::FromUs);
        return out;
    }
    if iface.owns(src) {
        out.dropped = Some(NdpDrop::Conflict);
        return out;
    }
    match *repr {
        NdpRepr::NeighborSolicit { target, lladdr } => {
            let dad = src.is_unspecified();
            // §7.1.1: from the unspecified address, only to a solicited-node group and without
            // a source address option.
            if dad && (!dst.is_multicast() || lladdr.is_some()) {
                out.dropped = Some(NdpDrop::Invalid);
                return out;
            }
            if iface.tentative.contains(&target) {
                // RFC 4862 §5.4.3: another node checking the same address; a solicitation from
                // a real address for a tentative one is not answered.
                if dad {
                    out.duplicate = Some(target);
                }
                return out;
            }
            if !iface.owns(target) {
                out.dropped = Some(NdpDrop::NotOurs);
                return out;
            }
            let flags = NaFlags {
                router: false,
                solicited: !dad,
                override_: true,
            };
            let answer = NdpRepr::NeighborAdvert {
                flags,
                target,
                lladdr: Some(iface.mac),
            };
            if dad {
                out.reply = Some((ALL_NODES, multicast_mac(ALL_NODES), answer));
                return out;
            }
            if let Some(mac) = lladdr {
                out.released = cache
                    .learn(src, mac, now)
                    .into_iter()
                    .map(|p| (p, mac))
                    .collect();
            }
            // To the address it gave, or to the frame's sender (a unicast probe may give none).
            out.reply = Some((src, lladdr.unwrap_or(frame_src), answer));
        }
        NdpRepr::NeighborAdvert {
            flags,
            target,
            lladdr,
        } => {
            if iface.tentative.contains(&target) {
                out.duplicate = Some(target);
                return out;
            }
            if iface.owns(target) {
                out.dropped = Some(NdpDrop::Conflict);
                return out;
            }
            // §7.1.2: a solicited advertisement goes to the soliciting node, never a group.
            if flags.solicited && dst.is_multicast() {
                out.dropped = Some(NdpDrop::Invalid);
                return out;
            }
            match lladdr {
                Some(mac) => {
                    out.released = cache
                        .advertised(target, mac, (flags.solicited, flags.override_), now)
                        .into_iter()
                        .map(|p| (p, mac))
                        .collect();
                }
                // No address given: a solicited one confirms what we have (§7.2.5).
                None if flags.solicited => cache.confirm(target, now),
                None => {}
            }
        }
        NdpRepr::RouterAdvert {
            hop_limit,
            router_lifetime,
            flags,
            reachable_time,
            retrans_time,
            lladdr,
            mtu,
            ref prefixes,
        } => {
            // §6.1.2: a router speaks from its link-local address.
            if src.segments()[0] & 0xffc0 != 0xfe80 {
                out.dropped = Some(NdpDrop::Invalid);
                return out;
            }
            if let Some(mac) = lladdr {
                out.released = cache
                    .learn(src, mac, now)
                    .into_iter()
                    .map(|p| (p, mac))
                    .collect();
            }
            // The Prf field (RFC 4191 §2.2): 01 high, 11 low, the reserved 10 as medium.
            let preference = match (flags >> 3) & 0b11 {
                0b01 => 1,
                0b11 => -1,
                _ => 0,
            };
            out.router = Some(RouterInfo {
                router: src,
                lifetime: router_lifetime,
                preference,
                hop_limit,
                reachable_time,
                retrans_time,
                mtu,
                prefixes: prefixes.clone(),
            });
        }
        NdpRepr::RouterSolicit { .. } => out.dropped = Some(NdpDrop::ForRouters),
        NdpRepr::Redirect {
            target,
            destination,
            lladdr,
        } => {
            // §8.1: from a router's link-local address, to us, and the target a router (link-local)
            // or the destination itself.
            if !src.is_unicast_link_local()
                || dst.is_multicast()
                || !(target.is_unicast_link_local() || target == destination)
            {
                out.dropped = Some(NdpDrop::Invalid);
                return out;
            }
            // §8.3: the target's address, given, updates an entry that exists; none is made (an
            // entry made for it unasked could be a spoofer's way to fill the cache).
            if let Some(mac) = lladdr {
                out.released = cache
                    .advertised(target, mac, (false, true), now)
                    .into_iter()
                    .map(|p| (p, mac))
                    .collect();
            }
            out.redirect = Some(Redirect {
                router: src,
                destination,
                target,
            });
        }
    }
    out
}

/// The link-local address made from a hardware address (RFC 4291 appendix A's modified EUI-64).
pub(crate) fn link_local(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::neighbor::{NeighborConfig, NeighborState, Resolved};

    const US: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn iface() -> NdpInterface {
        NdpInterface {
            mac: US,
            addrs: vec![ip("fe80::1"), ip("2001:db8::1")],
            tentative: vec![ip("2001:db8::9")],
        }
    }

    fn cache() -> NeighborCache<Ipv6Addr> {
        NeighborCache::new(NeighborConfig::default())
    }

    fn now() -> Instant {
        Instant::from_secs(1)
    }

    #[test]
    fn a_solicitation_for_us_is_answered_to_its_sender_and_the_sender_learned() {
        let mut c = cache();
        let ns = NdpRepr::NeighborSolicit {
            target: ip("2001:db8::1"),
            lladdr: Some(PEER),
        };
        let out = ndp_input(
            &mut c,
            &iface(),
            (ip("2001:db8::2"), solicited_node(ip("2001:db8::1")), PEER),
            &ns,
            now(),
        );
        assert_eq!(
            out.reply,
            Some((
                ip("2001:db8::2"),
                PEER,
                NdpRepr::NeighborAdvert {
                    flags: NaFlags {
                        router: false,
                        solicited: true,
                        override_: true
                    },
                    target: ip("2001:db8::1"),
                    lladdr: Some(US),
                }
            ))
        );
        assert_eq!(c.state(ip("2001:db8::2")), Some(NeighborState::Stale));
        assert_eq!(c.mac(ip("2001:db8::2")), Some(PEER));
    }

    #[test]
    fn duplicate_address_detection_is_answered_to_all_nodes_and_learns_nothing() {
        let mut c = cache();
        let ns = NdpRepr::NeighborSolicit {
            target: ip("2001:db8::1"),
            lladdr: None,
        };
        let out = ndp_input(
            &mut c,
            &iface(),
            (
                Ipv6Addr::UNSPECIFIED,
                solicited_node(ip("2001:db8::1")),
                PEER,
            ),
            &ns,
            now(),
        );
        let (dst, mac, NdpRepr::NeighborAdvert { flags, .. }) = out.reply.unwrap() else {
            panic!("an advertisement")
        };
        assert_eq!((dst, mac), (ALL_NODES, MacAddr([0x33, 0x33, 0, 0, 0, 1])));
        assert!(!flags.solicited && flags.override_);
        assert!(c.is_empty());
    }

    #[test]
    fn an_unspecified_source_with_an_address_option_or_to_a_unicast_address_is_invalid() {
        let mut c = cache();
        let ns = NdpRepr::NeighborSolicit {
            target: ip("2001:db8::1"),
            lladdr: Some(PEER),
        };
        let to_group = solicited_node(ip("2001:db8::1"));
        let out = ndp_input(
            &mut c,
            &iface(),
            (Ipv6Addr::UNSPECIFIED, to_group, PEER),
            &ns,
            now(),
        );
        assert_eq!(out.dropped, Some(NdpDrop::Invalid));
        assert!(out.reply.is_none());
    }

    #[test]
    fn someone_answering_or_checking_a_tentative_address_makes_it_a_duplicate() {
        let tentative = ip("2001:db8::9");
        let na = NdpRepr::NeighborAdvert {
            flags: NaFlags::default(),
            target: tentative,
            lladdr: Some(PEER),
        };
        let out = ndp_input(
            &mut cache(),
            &iface(),
            (ip("fe80::2"), ALL_NODES, PEER),
            &na,
            now(),
        );
        assert_eq!(out.duplicate, Some(tentative));
        let ns = NdpRepr::NeighborSolicit {
            target: tentative,
            lladdr: None,
        };
        let from_dad = (Ipv6Addr::UNSPECIFIED, solicited_node(tentative), PEER);
        let out = ndp_input(&mut cache(), &iface(), from_dad, &ns, now());
        assert_eq!(out.duplicate, Some(tentative));
        assert!(out.reply.is_none());
        // A resolution of the tentative address from a real one is not answered, nor a duplicate.
        let ns = NdpRepr::NeighborSolicit {
            target: tentative,
            lladdr: Some(PEER),
        };
        let from_peer = (ip("fe80::2"), solicited_node(tentative), PEER);
        let out = ndp_input(&mut cache(), &iface(), from_peer, &ns, now());
        assert!(out.duplicate.is_none() && out.reply.is_none());
    }

    #[test]
    fn an_advertisement_answers_a_resolution_and_creates_nothing_unasked() {
        let mut c = cache();
        let peer = ip("2001:db8::2");
        let Resolved::Held { solicit: true, .. } =
            c.resolve(peer, PacketBuf::from_slice(b"held"), now())
        else {
            panic!("held");
        };
        let na = |target| NdpRepr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited: true,
                override_: true,
            },
            target,
            lladdr: Some(PEER),
        };
        let out = ndp_input(
            &mut c,
            &iface(),
            (peer, ip("2001:db8::1"), PEER),
            &na(peer),
            now(),
        );
        assert_eq!(out.released.len(), 1);
        assert_eq!(out.released[0].1, PEER);
        assert!(matches!(
            c.state(peer),
            Some(NeighborState::Reachable { .. })
        ));
        let other = ip("2001:db8::3");
        let out = ndp_input(
            &mut c,
            &iface(),
            (other, ip("2001:db8::1"), PEER),
            &na(other),
            now(),
        );
        assert!(out.released.is_empty() && out.reply.is_none());
        assert_eq!(c.state(other), None);
    }

    /// RFC 4861 §7.2.5's override flag: an advertisement without it that gives another address
    /// makes a REACHABLE entry STALE and is otherwise ignored, the address kept; with it, the
    /// address is replaced. An advertisement without it that gives the same address confirms it.
    #[test]
    fn an_advertisement_without_the_override_flag_does_not_replace_an_address() {
        const OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x99]);
        let peer = ip("2001:db8::2");
        let mut c = cache();
        let _ = c.resolve(peer, PacketBuf::from_slice(b"held"), now());
        let na = |solicited, override_, mac| NdpRepr::NeighborAdvert {
            flags: NaFlags {
                router: false,
                solicited,
                override_,
            },
            target: peer,
            lladdr: Some(mac),
        };
        let hear = |c: &mut NeighborCache<Ipv6Addr>, repr: &NdpRepr| {
            ndp_input(c, &iface(), (peer, ip("2001:db8::1"), PEER), repr, now())
        };
        // An INCOMPLETE entry takes the address whatever the flag says.
        let out = hear(&mut c, &na(true, false, PEER));
        assert_eq!(out.released.len(), 1);
        let reachable = |c: &NeighborCache<Ipv6Addr>| {
            matches!(c.state(peer), Some(NeighborState::Reachable { .. }))
        };
        assert!(reachable(&c) && c.mac(peer) == Some(PEER));
        // Another address without the flag: STALE, the address kept; again: nothing.
        hear(&mut c, &na(true, false, OTHER));
        assert_eq!(c.state(peer), Some(NeighborState::Stale));
        assert_eq!(c.mac(peer), Some(PEER));
        hear(&mut c, &na(false, false, OTHER));
        assert_eq!(c.state(peer), Some(NeighborState::Stale));
        assert_eq!(c.mac(peer), Some(PEER));
        // The same address without the flag, solicited: confirmed.
        hear(&mut c, &na(true, false, PEER));
        assert!(reachable(&c));
        // With the flag the address is replaced (unsolicited: STALE until confirmed).
        hear(&mut c, &na(false, true, OTHER));
        assert_eq!(c.mac(peer), Some(OTHER));
        assert_eq!(c.state(peer), Some(NeighborState::Stale));
    }

    #[test]
    fn claims_on_our_addresses_our_own_frames_and_router_solicitations_are_dropped() {
        let na = NdpRepr::NeighborAdvert {
            flags: NaFlags::default(),
            target: ip("2001:db8::1"),
            lladdr: Some(PEER),
        };
        let from = (ip("fe80::2"), ALL_NODES, PEER);
        let out = ndp_input(&mut cache(), &iface(), from, &na, now());
        assert_eq!(out.dropped, Some(NdpDrop::Conflict));
        let out = ndp_input(
            &mut cache(),
            &iface(),
            (ip("fe80::2"), ALL_NODES, US),
            &na,
            now(),
        );
        assert_eq!(out.dropped, Some(NdpDrop::FromUs));
        let rs = NdpRepr::RouterSolicit { lladdr: Some(PEER) };
        let out = ndp_input(&mut cache(), &iface(), from, &rs, now());
        assert_eq!(out.dropped, Some(NdpDrop::ForRouters));
    }

    #[test]
    fn a_router_advertisement_is_reported_only_from_a_link_local_address() {
        let ra = NdpRepr::RouterAdvert {
            hop_limit: 64,
            flags: 0,
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_time: 0,
            lladdr: Some(PEER),
            mtu: Some(1400),
            prefixes: Vec::new(),
        };
        let mut c = cache();
        let out = ndp_input(
            &mut c,
            &iface(),
            (ip("fe80::99"), ALL_NODES, PEER),
            &ra,
            now(),
        );
        let info = out.router.unwrap();
        assert_eq!(
            (info.router, info.lifetime, info.mtu),
            (ip("fe80::99"), 1800, Some(1400))
        );
        assert_eq!(c.mac(ip("fe80::99")), Some(PEER));
        let out = ndp_input(
            &mut c,
            &iface(),
            (ip("2001:db8::99"), ALL_NODES, PEER),
            &ra,
            now(),
        );
        assert_eq!(out.dropped, Some(NdpDrop::Invalid));
        assert!(out.router.is_none());
    }
}
