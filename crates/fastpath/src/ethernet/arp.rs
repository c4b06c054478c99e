//! ARP (RFC 826) over the [`NeighborCache`]: an ARP message in, at most one message out, and the
//! packets an answer releases. Pure: the caller frames and sends what it is told.
//!
//! As Linux answers: a request for one of our addresses gets a unicast reply to its sender, and
//! its sender is learned (a request to us is not unsolicited: the neighbour will talk to us); an
//! address-conflict probe (sender 0.0.0.0, RFC 5227) for one of our addresses gets a reply too;
//! a request for another host, a gratuitous announcement or a reply only update an entry that
//! exists, and a reply creates none (we did not ask). A message from a group or zero hardware
//! address, from our own hardware address, or claiming one of our protocol addresses is dropped,
//! each for its reason. One message in never makes more than one out.

use std::net::Ipv4Addr;

use super::neighbor::{Heard, NeighborCache};
use crate::buf::PacketBuf;
use crate::time::Instant;
use crate::wire::{ArpOp, ArpRepr, MacAddr};

/// The interface ARP speaks for: its hardware address and protocol addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArpInterface {
    /// Our hardware address.
    pub mac: MacAddr,
    /// Our IPv4 addresses on this link.
    pub addrs: Vec<Ipv4Addr>,
}

impl ArpInterface {
    fn owns(&self, ip: Ipv4Addr) -> bool {
        self.addrs.contains(&ip)
    }

    /// A request for `target`: broadcast when `unicast` is `None` (resolving), else to that
    /// address (a probe of a stale entry). Returns the frame's destination and the message. With
    /// no address of ours on the link, the sender address is 0.0.0.0 (RFC 5227's probe).
    pub fn request(&self, target: Ipv4Addr, unicast: Option<MacAddr>) -> (MacAddr, ArpRepr) {
        let sender_ip = self.addrs.first().copied().unwrap_or(Ipv4Addr::UNSPECIFIED);
        (
            unicast.unwrap_or(MacAddr::BROADCAST),
            ArpRepr {
                op: ArpOp::Request,
                sender_mac: self.mac,
                sender_ip,
                target_mac: MacAddr::default(),
                target_ip: target,
            },
        )
    }
}

/// Why an ARP message was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpDrop {
    /// Its sender hardware address is a group or zero address.
    BadSender,
    /// It came from our own hardware address (a loop, or a reflection).
    FromUs,
    /// Another host claims one of our addresses (a conflict, or spoofing).
    Conflict,
}

/// What an ARP message asks of us.
#[derive(Debug, Default)]
pub struct ArpOutcome {
    /// A message to send, and the frame's destination.
    pub reply: Option<(MacAddr, ArpRepr)>,
    /// Packets that waited for the sender's address: send them to it.
    pub released: Vec<(PacketBuf, MacAddr)>,
    /// Why it was dropped, if it was.
    pub dropped: Option<ArpDrop>,
}

/// Handles an ARP message `repr` that arrived on `iface`.
pub fn arp_input(
    cache: &mut NeighborCache<Ipv4Addr>,
    iface: &ArpInterface,
    repr: &ArpRepr,
    now: Instant,
) -> ArpOutcome {
    let mut out = ArpOutcome::default();
    if !repr.sender_mac.is_unicast() {
        out.dropped = Some(ArpDrop::BadSender);
        return out;
    }
    if repr.sender_mac == iface.mac {
        out.dropped = Some(ArpDrop::FromUs);
        return out;
    }
    if iface.owns(repr.sender_ip) {
        out.dropped = Some(ArpDrop::Conflict);
        return out;
    }
    let for_us = iface.owns(repr.target_ip);
    if repr.op == ArpOp::Request && for_us {
        // A conflict probe is answered with the target address as sender, to its sender.
        out.reply = Some((
            repr.sender_mac,
            ArpRepr {
                op: ArpOp::Reply,
                sender_mac: iface.mac,
                sender_ip: repr.target_ip,
                target_mac: repr.sender_mac,
                target_ip: repr.sender_ip,
            },
        ));
    }
    if repr.sender_ip.is_unspecified() {
        return out;
    }
    let heard = match repr.op {
        // A reply to us answers our request; one for another host is overheard.
        ArpOp::Reply if repr.target_mac == iface.mac || for_us => Heard::Solicited,
        _ => Heard::Unsolicited,
    };
    if repr.op == ArpOp::Request && for_us && cache.state(repr.sender_ip).is_none() {
        // RFC 826's merge: a neighbour that asks for us will be answered; learn it now.
        // No entry, so nothing waited for it.
        let _ = cache.learn(repr.sender_ip, repr.sender_mac, now);
        return out;
    }
    let released = cache.heard(repr.sender_ip, repr.sender_mac, heard, now);
    out.released = released.into_iter().map(|p| (p, repr.sender_mac)).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::neighbor::{NeighborConfig, NeighborState, Resolved};

    const US: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const PEER: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const OTHER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);

    fn iface() -> ArpInterface {
        ArpInterface {
            mac: US,
            addrs: vec![OUR_IP],
        }
    }

    fn msg(op: ArpOp, sender: (MacAddr, Ipv4Addr), target: (MacAddr, Ipv4Addr)) -> ArpRepr {
        ArpRepr {
            op,
            sender_mac: sender.0,
            sender_ip: sender.1,
            target_mac: target.0,
            target_ip: target.1,
        }
    }

    fn cache() -> NeighborCache<Ipv4Addr> {
        NeighborCache::new(NeighborConfig::default())
    }

    fn now() -> Instant {
        Instant::from_secs(1)
    }

    #[test]
    fn a_request_for_us_is_answered_and_its_sender_learned() {
        let mut c = cache();
        let req = msg(
            ArpOp::Request,
            (PEER, PEER_IP),
            (MacAddr::default(), OUR_IP),
        );
        let out = arp_input(&mut c, &iface(), &req, now());
        assert_eq!(
            out.reply,
            Some((PEER, msg(ArpOp::Reply, (US, OUR_IP), (PEER, PEER_IP))))
        );
        assert_eq!(c.state(PEER_IP), Some(NeighborState::Stale));
        assert_eq!(c.mac(PEER_IP), Some(PEER));
    }

    #[test]
    fn a_request_for_another_host_is_neither_answered_nor_learned() {
        let mut c = cache();
        let req = msg(
            ArpOp::Request,
            (PEER, PEER_IP),
            (MacAddr::default(), OTHER_IP),
        );
        let out = arp_input(&mut c, &iface(), &req, now());
        assert!(out.reply.is_none() && out.released.is_empty() && out.dropped.is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn a_reply_we_did_not_ask_for_creates_nothing() {
        let mut c = cache();
        let rep = msg(ArpOp::Reply, (PEER, PEER_IP), (US, OUR_IP));
        let out = arp_input(&mut c, &iface(), &rep, now());
        assert!(out.reply.is_none() && out.released.is_empty());
        assert!(c.is_empty());
    }

    #[test]
    fn the_reply_we_asked_for_releases_the_waiting_packets() {
        let mut c = cache();
        let mut p = PacketBuf::with_storage(vec![0; 128], 64);
        p.extend_from_slice(&[1; 20]);
        assert!(matches!(
            c.resolve(PEER_IP, p, now()),
            Resolved::Held { solicit: true, .. }
        ));
        let (dst, req) = iface().request(PEER_IP, None);
        assert_eq!(dst, MacAddr::BROADCAST);
        assert_eq!(req.sender_ip, OUR_IP);
        let rep = msg(ArpOp::Reply, (PEER, PEER_IP), (US, OUR_IP));
        let out = arp_input(&mut c, &iface(), &rep, now());
        assert_eq!(out.released.len(), 1);
        assert_eq!(out.released[0].1, PEER);
        assert!(matches!(
            c.state(PEER_IP),
            Some(NeighborState::Reachable { .. })
        ));
    }

    #[test]
    fn a_conflict_probe_for_our_address_is_answered() {
        let mut c = cache();
        let probe = msg(
            ArpOp::Request,
            (PEER, Ipv4Addr::UNSPECIFIED),
            (MacAddr::default(), OUR_IP),
        );
        let out = arp_input(&mut c, &iface(), &probe, now());
        assert_eq!(
            out.reply,
            Some((
                PEER,
                msg(ArpOp::Reply, (US, OUR_IP), (PEER, Ipv4Addr::UNSPECIFIED))
            ))
        );
        assert!(c.is_empty());
    }

    #[test]
    fn bad_senders_our_own_frames_and_claims_on_our_address_are_dropped() {
        let mut c = cache();
        let to_us = (MacAddr::default(), OUR_IP);
        for (sender, why) in [
            ((MacAddr::BROADCAST, PEER_IP), ArpDrop::BadSender),
            (
                (MacAddr([1, 0, 0x5e, 0, 0, 1]), PEER_IP),
                ArpDrop::BadSender,
            ),
            ((MacAddr::default(), PEER_IP), ArpDrop::BadSender),
            ((US, PEER_IP), ArpDrop::FromUs),
            ((PEER, OUR_IP), ArpDrop::Conflict),
        ] {
            let out = arp_input(&mut c, &iface(), &msg(ArpOp::Request, sender, to_us), now());
            assert_eq!(out.dropped, Some(why));
            assert!(out.reply.is_none());
        }
        assert!(c.is_empty());
    }
}
