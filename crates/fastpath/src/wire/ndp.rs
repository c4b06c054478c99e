//! IPv6 neighbour discovery's messages (RFC 4861 §4): router solicitation and advertisement,
//! neighbour solicitation and advertisement, and the options a host reads (link-layer addresses,
//! prefix information, MTU). [`NdpRepr::parse`] takes an ICMPv6 message whose checksum the caller
//! has verified and applies the checks of §6.1.2 and §7.1 that the message alone can answer (code
//! 0, lengths, no option of length 0, a target that is not multicast); the checks that need the
//! IPv6 header (hop limit 255, the source and destination rules) are the caller's.

use std::net::Ipv6Addr;

use super::ethernet::MacAddr;
use super::icmpv6::kind as msg_type;
use super::{Result, WireError};

/// Prefixes an advertisement may carry that are read; the rest are ignored.
pub const MAX_PREFIXES: usize = 8;

const OPT_SOURCE_LLADDR: u8 = 1;
const OPT_TARGET_LLADDR: u8 = 2;
const OPT_PREFIX_INFO: u8 = 3;
const OPT_MTU: u8 = 5;

/// A prefix information option (RFC 4861 §4.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixInfo {
    /// The prefix (bits past `prefix_len` are the sender's business, not ours).
    pub prefix: Ipv6Addr,
    /// Its length in bits.
    pub prefix_len: u8,
    /// L: the prefix is on the link.
    pub on_link: bool,
    /// A: addresses may be formed from it (RFC 4862).
    pub autonomous: bool,
    /// Seconds the prefix stays valid (`u32::MAX`: for ever).
    pub valid_lifetime: u32,
    /// Seconds addresses from it stay preferred.
    pub preferred_lifetime: u32,
}

/// The flags of a neighbour advertisement (RFC 4861 §4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NaFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: an answer to a solicitation.
    pub solicited: bool,
    /// O: the link-layer address overrides a cached one.
    pub override_: bool,
}

/// A neighbour discovery message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NdpRepr {
    /// Router solicitation (type 133).
    RouterSolicit {
        /// Source link-layer address option.
        lladdr: Option<MacAddr>,
    },
    /// Router advertisement (type 134).
    RouterAdvert {
        /// Hop limit hosts should use (0: unspecified).
        hop_limit: u8,
        /// The M and O flags' byte.
        flags: u8,
        /// Seconds the sender is a default router (0: it is not one).
        router_lifetime: u16,
        /// Milliseconds of `REACHABLE_TIME` (0: unspecified).
        reachable_time: u32,
        /// Milliseconds of `RETRANS_TIMER` (0: unspecified).
        retrans_time: u32,
        /// Source link-layer address option.
        lladdr: Option<MacAddr>,
        /// MTU option.
        mtu: Option<u32>,
        /// Prefix information options, the first [`MAX_PREFIXES`].
        prefixes: Vec<PrefixInfo>,
    },
    /// Neighbour solicitation (type 135).
    NeighborSolicit {
        /// The address asked about.
        target: Ipv6Addr,
        /// Source link-layer address option.
        lladdr: Option<MacAddr>,
    },
    /// Neighbour advertisement (type 136).
    NeighborAdvert {
        /// R, S and O.
        flags: NaFlags,
        /// The address answered for.
        target: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<MacAddr>,
    },
    /// Redirect (type 137, RFC 4861 §4.5): `destination` is better reached through `target`, a
    /// router on the link or, when the two are the same, the destination itself, on the link.
    Redirect {
        /// The better first hop.
        target: Ipv6Addr,
        /// The destination redirected.
        destination: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<MacAddr>,
    },
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The options after a message's fixed part, as far as a host reads them.
#[derive(Default)]
struct Options {
    source: Option<MacAddr>,
    target: Option<MacAddr>,
    mtu: Option<u32>,
    prefixes: Vec<PrefixInfo>,
}

fn options(mut b: &[u8]) -> Result<Options> {
    let mut o = Options::default();
    while !b.is_empty() {
        if b.len() < 2 {
            return Err(WireError::BadLength);
        }
        let len = usize::from(b[1]) * 8;
        // §4.6: a length of 0 makes the whole message invalid.
        if len == 0 || len > b.len() {
            return Err(WireError::BadLength);
        }
        let opt = &b[..len];
        match b[0] {
            // A link-layer address option for Ethernet is 8 bytes (RFC 2464 §6); another length
            // is for another link, and ignored.
            OPT_SOURCE_LLADDR if len == 8 => {
                o.source = Some(MacAddr([opt[2], opt[3], opt[4], opt[5], opt[6], opt[7]]));
            }
            OPT_TARGET_LLADDR if len == 8 => {
                o.target = Some(MacAddr([opt[2], opt[3], opt[4], opt[5], opt[6], opt[7]]));
            }
            OPT_PREFIX_INFO => {
                if len != 32 {
                    return Err(WireError::BadLength);
                }
                if o.prefixes.len() < MAX_PREFIXES {
                    o.prefixes.push(PrefixInfo {
                        prefix_len: opt[2],
                        on_link: opt[3] & 0x80 != 0,
                        autonomous: opt[3] & 0x40 != 0,
                        valid_lifetime: u32_at(opt, 4),
                        preferred_lifetime: u32_at(opt, 8),
                        prefix: addr(&opt[16..]),
                    });
                }
            }
            OPT_MTU => {
                if len != 8 {
                    return Err(WireError::BadLength);
                }
                o.mtu = Some(u32_at(opt, 4));
            }
            // Options a host does not know are ignored (§4.6).
            _ => {}
        }
        b = &b[len..];
    }
    Ok(o)
}

impl NdpRepr {
    /// Reads the ICMPv6 message `msg` (type, code, checksum and body), already checksummed. A type
    /// that is not one of the five is [`WireError::Unrecognized`]; a message that breaks §6.1 or
    /// §7.1's rules on its own is [`WireError::BadLength`] (short, an option of length 0) or
    /// [`WireError::Unrecognized`] (a code other than 0, a multicast target).
    pub fn parse(msg: &[u8]) -> Result<NdpRepr> {
        if msg.len() < 8 {
            return Err(WireError::Truncated);
        }
        if msg[1] != 0 {
            return Err(WireError::Unrecognized);
        }
        let need = match msg[0] {
            msg_type::ROUTER_SOLICIT => 8,
            msg_type::ROUTER_ADVERT => 16,
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT => 24,
            msg_type::REDIRECT => 40,
            _ => return Err(WireError::Unrecognized),
        };
        if msg.len() < need {
            return Err(WireError::Truncated);
        }
        let o = options(&msg[need..])?;
        Ok(match msg[0] {
            msg_type::ROUTER_SOLICIT => NdpRepr::RouterSolicit { lladdr: o.source },
            msg_type::ROUTER_ADVERT => NdpRepr::RouterAdvert {
                hop_limit: msg[4],
                flags: msg[5],
                router_lifetime: u16::from_be_bytes([msg[6], msg[7]]),
                reachable_time: u32_at(msg, 8),
                retrans_time: u32_at(msg, 12),
                lladdr: o.source,
                mtu: o.mtu,
                prefixes: o.prefixes,
            },
            msg_type::NEIGHBOR_SOLICIT => {
                let target = addr(&msg[8..]);
                if target.is_multicast() {
                    return Err(WireError::Unrecognized);
                }
                NdpRepr::NeighborSolicit {
                    target,
                    lladdr: o.source,
                }
            }
            msg_type::REDIRECT => {
                // §8.1: the destination is not multicast.
                let destination = addr(&msg[24..]);
                if destination.is_multicast() {
                    return Err(WireError::Unrecognized);
                }
                NdpRepr::Redirect {
                    target: addr(&msg[8..]),
                    destination,
                    lladdr: o.target,
                }
            }
            _ => {
                let target = addr(&msg[8..]);
                if target.is_multicast() {
                    return Err(WireError::Unrecognized);
                }
                NdpRepr::NeighborAdvert {
                    flags: NaFlags {
                        router: msg[4] & 0x80 != 0,
                        solicited: msg[4] & 0x40 != 0,
                        override_: msg[4] & 0x20 != 0,
                    },
                    target,
                    lladdr: o.target,
                }
            }
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        let lladdr = |l: &Option<MacAddr>| if l.is_some() { 8 } else { 0 };
        match self {
            NdpRepr::RouterSolicit { lladdr: l } => 8 + lladdr(l),
            NdpRepr::RouterAdvert {
                lladdr: l,
                mtu,
                prefixes,
                ..
            } => 16 + lladdr(l) + if mtu.is_some() { 8 } else { 0 } + 32 * prefixes.len(),
            NdpRepr::NeighborSolicit { lladdr: l, .. }
            | NdpRepr::NeighborAdvert { lladdr: l, .. } => 24 + lladdr(l),
            NdpRepr::Redirect { lladdr: l, .. } => 40 + lladdr(l),
        }
    }

    /// Writes the message into `out` (at least [`Self::buffer_len`] bytes) with a zero checksum,
    /// for the caller to fill in over the pseudo-header.
    pub fn emit(&self, out: &mut [u8]) {
        let out = &mut out[..self.buffer_len()];
        out.fill(0);
        let lladdr = |out: &mut [u8], kind: u8, mac: &MacAddr| {
            out[0] = kind;
            out[1] = 1;
            out[2..8].copy_from_slice(&mac.0);
        };
        match self {
            NdpRepr::RouterSolicit { lladdr: l } => {
                out[0] = msg_type::ROUTER_SOLICIT;
                if let Some(mac) = l {
                    lladdr(&mut out[8..], OPT_SOURCE_LLADDR, mac);
                }
            }
            NdpRepr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_time,
                lladdr: l,
                mtu,
                prefixes,
            } => {
                out[0] = msg_type::ROUTER_ADVERT;
                out[4] = *hop_limit;
                out[5] = *flags;
                out[6..8].copy_from_slice(&router_lifetime.to_be_bytes());
                out[8..12].copy_from_slice(&reachable_time.to_be_bytes());
                out[12..16].copy_from_slice(&retrans_time.to_be_bytes());
                let mut at = 16;
                if let Some(mac) = l {
                    lladdr(&mut out[at..], OPT_SOURCE_LLADDR, mac);
                    at += 8;
                }
                if let Some(mtu) = mtu {
                    out[at] = OPT_MTU;
                    out[at + 1] = 1;
                    out[at + 4..at + 8].copy_from_slice(&mtu.to_be_bytes());
                    at += 8;
                }
                for p in prefixes {
                    let o = &mut out[at..at + 32];
                    o[0] = OPT_PREFIX_INFO;
                    o[1] = 4;
                    o[2] = p.prefix_len;
                    o[3] = u8::from(p.on_link) << 7 | u8::from(p.autonomous) << 6;
                    o[4..8].copy_from_slice(&p.valid_lifetime.to_be_bytes());
                    o[8..12].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
                    o[16..32].copy_from_slice(&p.prefix.octets());
                    at += 32;
                }
            }
            NdpRepr::NeighborSolicit { target, lladdr: l } => {
                out[0] = msg_type::NEIGHBOR_SOLICIT;
                out[8..24].copy_from_slice(&target.octets());
                if let Some(mac) = l {
                    lladdr(&mut out[24..], OPT_SOURCE_LLADDR, mac);
                }
            }
            NdpRepr::NeighborAdvert {
                flags,
                target,
                lladdr: l,
            } => {
                out[0] = msg_type::NEIGHBOR_ADVERT;
                out[4] = u8::from(flags.router) << 7
                    | u8::from(flags.solicited) << 6
                    | u8::from(flags.override_) << 5;
                out[8..24].copy_from_slice(&target.octets());
                if let Some(mac) = l {
                    lladdr(&mut out[24..], OPT_TARGET_LLADDR, mac);
                }
            }
            NdpRepr::Redirect {
                target,
                destination,
                lladdr: l,
            } => {
                out[0] = msg_type::REDIRECT;
                out[8..24].copy_from_slice(&target.octets());
                out[24..40].copy_from_slice(&destination.octets());
                if let Some(mac) = l {
                    lladdr(&mut out[40..], OPT_TARGET_LLADDR, mac);
                }
            }
        }
    }
}

/// The solicited-node multicast group of `addr` (RFC 4291 §2.7.1): `ff02::1:ffXX:`.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address an IPv6 multicast group maps to (RFC 2464 §7): `33:33` and the group's
/// last 32 bits.
pub fn multicast_mac(group: Ipv6Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 7]);

    fn roundtrip(r: &NdpRepr) -> NdpRepr {
        let mut b = vec![0xee; r.buffer_len()];
        r.emit(&mut b);
        NdpRepr::parse(&b).unwrap()
    }

    #[test]
    fn every_message_round_trips() {
        let target: Ipv6Addr = "fe80::1".parse().unwrap();
        for r in [
            NdpRepr::RouterSolicit { lladdr: Some(MAC) },
            NdpRepr::NeighborSolicit {
                target,
                lladdr: None,
            },
            NdpRepr::NeighborSolicit {
                target,
                lladdr: Some(MAC),
            },
            NdpRepr::NeighborAdvert {
                flags: NaFlags {
                    router: false,
                    solicited: true,
                    override_: true,
                },
                target,
                lladdr: Some(MAC),
            },
            NdpRepr::RouterAdvert {
                hop_limit: 64,
                flags: 0x40,
                router_lifetime: 1800,
                reachable_time: 30_000,
                retrans_time: 1000,
                lladdr: Some(MAC),
                mtu: Some(1500),
                prefixes: vec![PrefixInfo {
                    prefix: "2001:db8::".parse().unwrap(),
                    prefix_len: 64,
                    on_link: true,
                    autonomous: true,
                    valid_lifetime: u32::MAX,
                    preferred_lifetime: 604_800,
                }],
            },
            NdpRepr::Redirect {
                target,
                destination: "2001:db8::9".parse().unwrap(),
                lladdr: Some(MAC),
            },
            NdpRepr::Redirect {
                target,
                destination: target,
                lladdr: None,
            },
        ] {
            assert_eq!(roundtrip(&r), r);
        }
        // §8.1: a redirect for a multicast destination, or shorter than its fixed part, is not one.
        let mut b = vec![0u8; 40];
        NdpRepr::Redirect {
            target,
            destination: target,
            lladdr: None,
        }
        .emit(&mut b);
        assert!(NdpRepr::parse(&b[..39]).is_err());
        b[24] = 0xff;
        assert!(NdpRepr::parse(&b).is_err());
    }

    #[test]
    fn an_option_of_length_zero_invalidates_the_message() {
        let mut b = vec![0u8; 32];
        b[0] = msg_type::NEIGHBOR_SOLICIT;
        b[8] = 0xfe;
        b[9] = 0x80;
        b[24] = OPT_SOURCE_LLADDR;
        b[25] = 0;
        assert_eq!(NdpRepr::parse(&b), Err(WireError::BadLength));
        b[25] = 2; // runs past the end
        assert_eq!(NdpRepr::parse(&b), Err(WireError::BadLength));
        b[25] = 1;
        assert!(NdpRepr::parse(&b).is_ok());
    }

    #[test]
    fn a_multicast_target_a_nonzero_code_and_short_messages_are_refused() {
        let mut b = vec![0u8; 24];
        b[0] = msg_type::NEIGHBOR_ADVERT;
        b[8] = 0xff;
        assert_eq!(NdpRepr::parse(&b), Err(WireError::Unrecognized));
        b[8] = 0xfe;
        b[1] = 1;
        assert_eq!(NdpRepr::parse(&b), Err(WireError::Unrecognized));
        b[1] = 0;
        assert_eq!(NdpRepr::parse(&b[..23]), Err(WireError::Truncated));
        assert!(NdpRepr::parse(&b).is_ok());
    }

    #[test]
    fn groups_and_their_ethernet_addresses() {
        let a: Ipv6Addr = "2001:db8::aabb:ccdd".parse().unwrap();
        assert_eq!(
            solicited_node(a),
            "ff02::1:ffbb:ccdd".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            multicast_mac(solicited_node(a)),
            MacAddr([0x33, 0x33, 0xff, 0xbb, 0xcc, 0xdd])
        );
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..200), ty in 133u8..=137) {
            let mut b = bytes;
            if !b.is_empty() {
                b[0] = ty;
            }
            if let Ok(r) = NdpRepr::parse(&b) {
                // What parses re-emits into something that parses the same.
                prop_assert_eq!(roundtrip(&r), r);
            }
        }
    }
}
