//! IPv6 extension headers (RFC 8200 §4): hop-by-hop and destination options, the routing header and the
//! fragment header, walked in the order the RFC gives.
//!
//! [`walk`] reads the chain that starts at a packet's payload, as a host (not a router) processes it:
//!
//! - hop-by-hop options only right after the fixed header (§4.1; elsewhere its next header value is
//!   unrecognized, a parameter problem with code 1);
//! - options (§4.2): Pad1 and PadN skipped, any other option's two high bits say what to do with an
//!   option this host does not know: skip it, discard the packet, or discard it and send a parameter
//!   problem (code 2), the last only when the destination is not multicast. Padding is limited to what
//!   alignment can need (at most 7 bytes in a row, as Linux checks) and known-option counts are bounded, so a
//!   header of padding or a thousand unknown-but-skippable options cannot make a host loop;
//! - a routing header with segments left is never followed (a host does not forward): type 0 is refused
//!   (RFC 5095 §3), and any type with segments left is a parameter problem (code 0) pointing at the
//!   type, which is what §4.4 asks for an unrecognized type; with no segments left it is skipped;
//! - the fragment header stops the walk: what follows is a fragment's payload, for reassembly
//!   ([`Chain::fragment`]);
//! - at most [`MAX_HEADERS`] extension headers in a chain.
//!
//! Pointers in [`ChainError::ParamProblem`] count from the start of the IPv6 header (RFC 4443 §3.4).

use super::ipv6::HEADER_LEN;
use super::{read_u16, IpProtocol, WireError};

/// The most extension headers a chain may have before it is refused (Linux allows a similar handful;
/// RFC 8200 §4.1 recommends each header appear at most once, destination options at most twice).
pub const MAX_HEADERS: usize = 8;

/// The most options other than padding one options header may carry (Linux's `max_hbh_opts_number`
/// and `max_dst_opts_number` default to 8).
pub const MAX_OPTIONS: usize = 8;

/// The most padding bytes in a row an options header may carry: alignment never needs more than 7
/// (RFC 4942 §2.1.9.5).
pub const MAX_PADDING: usize = 7;

/// A fragment header (RFC 8200 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentHeader {
    /// The header that the reassembled payload starts with.
    pub next_header: IpProtocol,
    /// Offset of this fragment's data in the original payload, in bytes (a multiple of 8).
    pub offset: usize,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
    /// Where the fragment header is in the packet's payload: the unfragmentable part's length.
    pub at: usize,
}

impl FragmentHeader {
    /// An atomic fragment (offset 0, no more fragments): a whole packet carrying a fragment header,
    /// processed at once without reassembly (RFC 6946 §4).
    pub fn is_atomic(&self) -> bool {
        self.offset == 0 && !self.more
    }

    /// Writes an 8-byte fragment header (the `at` field is not part of it).
    ///
    /// # Panics
    /// If `out` is shorter than 8 bytes or the offset is not a multiple of 8 below 65,536.
    pub fn emit(&self, out: &mut [u8]) {
        assert!(self.offset.is_multiple_of(8) && self.offset < 65536);
        out[0] = self.next_header.into();
        out[1] = 0;
        let w = self.offset as u16 | u16::from(self.more);
        out[2..4].copy_from_slice(&w.to_be_bytes());
        out[4..8].copy_from_slice(&self.ident.to_be_bytes());
    }
}

/// Where a chain of extension headers led.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    /// The header after the last extension header walked: the upper-layer protocol, or after a
    /// fragment header the next header of the fragmented payload.
    pub upper: IpProtocol,
    /// Where that header starts, in the packet's payload (after the fixed header).
    pub offset: usize,
    /// The fragment header that ended the walk, if one did.
    pub fragment: Option<FragmentHeader>,
    /// Extension headers walked.
    pub headers: usize,
    /// Where the next header field that names `upper` is, counted from the start of the IPv6 header
    /// (for a parameter problem about an unrecognized next header, code 1).
    pub named_at: u32,
}

/// Why a chain was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainError {
    /// A header runs past the packet: discard silently.
    Truncated,
    /// Discard and answer with ICMPv6 parameter problem (RFC 4443 §3.4) with this code and pointer
    /// (from the start of the IPv6 header), unless the destination is multicast and `multicast_ok` is false.
    ParamProblem {
        /// 0: erroneous header field; 1: unrecognized next header; 2: unrecognized option.
        code: u8,
        /// The offending byte, counted from the start of the IPv6 header.
        pointer: u32,
        /// Whether the error may be sent even when the destination is multicast (option type 10xxxxxx).
        multicast_ok: bool,
    },
    /// An unknown option with action 01: discard silently (RFC 8200 §4.2).
    UnknownOption,
    /// A routing header of type 0 with segments left (RFC 5095 §3: refused, and answered as an
    /// unrecognized type: a parameter problem, code 0, pointing at `pointer`, the type field).
    RoutingType0 {
        /// The routing type field, counted from the start of the IPv6 header.
        pointer: u32,
    },
    /// More than [`MAX_HEADERS`] extension headers, more than [`MAX_OPTIONS`] options or more than
    /// [`MAX_PADDING`] padding bytes in a row.
    TooLong,
}

impl From<WireError> for ChainError {
    fn from(_: WireError) -> Self {
        ChainError::Truncated
    }
}

/// True for the next-header values this walker treats as extension headers.
pub fn is_extension(p: IpProtocol) -> bool {
    matches!(
        p,
        IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Frag | IpProtocol::Ipv6Opts
    )
}

/// Walks the extension headers of `payload` (a packet's bytes after the fixed header), starting with
/// header `first`, until an upper-layer header or a fragment header. `base` is the payload's offset from
/// the IPv6 header's start, for error pointers (40 for a packet as received; reassembled payloads pass
/// where their first header stood).
pub fn walk(payload: &[u8], first: IpProtocol, base: usize) -> Result<Chain, ChainError> {
    walk_from(payload, first, base, 6)
}

/// [`walk`] for a chain whose first header was named by the next header field at `named_at` (from the
/// IPv6 header's start): the fixed header's own field is byte 6; the rest of a chain after a fragment
/// header was named by that header's first byte.
pub fn walk_from(
    payload: &[u8],
    first: IpProtocol,
    base: usize,
    named_at: u32,
) -> Result<Chain, ChainError> {
    let mut next = first;
    let mut offset = 0;
    // Where the next header field that named `next` is, for a code 1 pointer.
    let mut named_at = named_at;
    let mut headers = 0;
    loop {
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                if next == IpProtocol::HopByHop && (headers > 0 || base != HEADER_LEN) {
                    // RFC 8200 §4.1: only right after the fixed header.
                    return Err(ChainError::ParamProblem {
                        code: 1,
                        pointer: named_at,
                        multicast_ok: false,
                    });
                }
                headers += 1;
                if headers > MAX_HEADERS {
                    return Err(ChainError::TooLong);
                }
                let h = payload
                    .get(offset..offset + 2)
                    .ok_or(ChainError::Truncated)?;
                let len = 8 + 8 * usize::from(h[1]);
                let header = payload
                    .get(offset..offset + len)
                    .ok_or(ChainError::Truncated)?;
                let at = (base + offset) as u32;
                if next == IpProtocol::Ipv6Route {
                    routing(header, at)?;
                } else {
                    options(header, at)?;
                }
                named_at = at;
                next = IpProtocol::from(header[0]);
                offset += len;
            }
            IpProtocol::Ipv6Frag => {
                headers += 1;
                if headers > MAX_HEADERS {
                    return Err(ChainError::TooLong);
                }
                let h = payload
                    .get(offset..offset + 8)
                    .ok_or(ChainError::Truncated)?;
                let w = read_u16(h, 2);
                let fragment = FragmentHeader {
                    next_header: IpProtocol::from(h[0]),
                    offset: usize::from(w & 0xfff8),
                    more: w & 1 != 0,
                    ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
                    at: offset,
                };
                return Ok(Chain {
                    upper: fragment.next_header,
                    offset: offset + 8,
                    fragment: Some(fragment),
                    headers,
                    named_at: (base + offset) as u32,
                });
            }
            upper => {
                return Ok(Chain {
                    upper,
                    offset,
                    fragment: None,
                    headers,
                    named_at,
                })
            }
        }
    }
}

/// Checks a routing header (RFC 8200 §4.4) at `at` (pointer base): with no segments left it is ignored;
/// otherwise this host would have to forward, which it does not: type 0 is refused (RFC 5095), any
/// other type is answered as unrecognized, pointing at the type field.
fn routing(header: &[u8], at: u32) -> Result<(), ChainError> {
    let (kind, segments_left) = (header[2], header[3]);
    if segments_left == 0 {
        return Ok(());
    }
    if kind == 0 {
        return Err(ChainError::RoutingType0 { pointer: at + 2 });
    }
    Err(ChainError::ParamProblem {
        code: 0,
        pointer: at + 2,
        multicast_ok: false,
    })
}

/// Checks the options of a hop-by-hop or destination options header (RFC 8200 §4.2) at `at`.
fn options(header: &[u8], at: u32) -> Result<(), ChainError> {
    let mut i = 2;
    let (mut known, mut padding) = (0, 0);
    while i < header.len() {
        let kind = header[i];
        if kind == 0 {
            // Pad1.
            padding += 1;
            if padding > MAX_PADDING {
                return Err(ChainError::TooLong);
            }
            i += 1;
            continue;
        }
        let len = usize::from(*header.get(i + 1).ok_or(ChainError::Truncated)?);
        if i + 2 + len > header.len() {
            return Err(ChainError::Truncated);
        }
        if kind == 1 {
            // PadN.
            padding += 2 + len;
            if padding > MAX_PADDING {
                return Err(ChainError::TooLong);
            }
        } else {
            padding = 0;
            known += 1;
            if known > MAX_OPTIONS {
                return Err(ChainError::TooLong);
            }
            // No option is recognized by this host (router alert and jumbo payload are for routers and
            // jumbograms): the action bits decide.
            match kind >> 6 {
                0 => {}
                1 => return Err(ChainError::UnknownOption),
                action => {
                    return Err(ChainError::ParamProblem {
                        code: 2,
                        pointer: at + i as u32,
                        multicast_ok: action == 2,
                    })
                }
            }
        }
        i += 2 + len;
    }
    Ok(())
}

/// Skips the extension headers of `payload` by their lengths alone, checking nothing else (what Linux's
/// `ipv6_skip_exthdr` does): the upper-layer protocol and where it starts, or `None` if a header runs
/// past the bytes, there are more than twice [`MAX_HEADERS`], or a non-first fragment hides it. For
/// deciding whether a packet is an ICMPv6 error (never answered with another) even when its chain is
/// one this host refuses.
pub fn skip(payload: &[u8], first: IpProtocol) -> Option<(IpProtocol, usize)> {
    skip_noting_fragment(payload, first).map(|(upper, at, _)| (upper, at))
}

/// [`skip`], and whether a first fragment's Fragment header was passed with a nonzero offset and
/// flags field (its More Fragments bit set: not an atomic fragment), as Linux's `ipv6_skip_exthdr`
/// reports it: then an upper-layer header that is not in the bytes is in a later fragment.
pub fn skip_noting_fragment(
    payload: &[u8],
    first: IpProtocol,
) -> Option<(IpProtocol, usize, bool)> {
    let (mut next, mut offset, mut fragment) = (first, 0, false);
    for _ in 0..2 * MAX_HEADERS {
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                let h = payload.get(offset..offset + 2)?;
                next = IpProtocol::from(h[0]);
                offset += 8 + 8 * usize::from(h[1]);
            }
            IpProtocol::Ipv6Frag => {
                let h = payload.get(offset..offset + 8)?;
                if read_u16(h, 2) & 0xfff8 != 0 {
                    return None;
                }
                fragment |= read_u16(h, 2) != 0;
                next = IpProtocol::from(h[0]);
                offset += 8;
            }
            upper => return (offset <= payload.len()).then_some((upper, offset, fragment)),
        }
    }
    None
}

/// The smallest upper-layer header of `upper` a first fragment must hold whole (RFC 7112 §5: the
/// first fragment carries the entire header chain, upper-layer header included). 0 for protocols whose
/// header this host does not know.
pub fn upper_header_len(upper: IpProtocol) -> usize {
    match upper {
        IpProtocol::Tcp => 20,
        IpProtocol::Udp => 8,
        IpProtocol::Icmpv6 => 4,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UDP: u8 = 17;

    fn hbh(next: u8, opts: &[u8]) -> Vec<u8> {
        let mut h = vec![next, 0];
        h.extend_from_slice(opts);
        assert_eq!(h.len() % 8, 0, "test header must be whole");
        h[1] = (h.len() / 8 - 1) as u8;
        h
    }

    #[test]
    fn a_plain_upper_layer_is_reached_at_once() {
        let c = walk(&[0; 8], IpProtocol::Udp, 40).unwrap();
        assert_eq!(
            c,
            Chain {
                upper: IpProtocol::Udp,
                offset: 0,
                fragment: None,
                headers: 0,
                named_at: 6,
            }
        );
    }

    #[test]
    fn options_headers_are_walked_in_order() {
        let mut p = hbh(60, &[1, 4, 0, 0, 0, 0]); // hop-by-hop, PadN(4)
        p.extend(hbh(UDP, &[0x05, 2, 0, 0, 1, 0])); // router alert (type 5, action 00): a host skips it
        p.extend_from_slice(&[0; 8]);
        let c = walk(&p, IpProtocol::HopByHop, 40).unwrap();
        assert_eq!(c.upper, IpProtocol::Udp);
        assert_eq!(c.offset, 16);
        assert_eq!(c.headers, 2);
        assert_eq!(
            c.named_at, 48,
            "the destination options header's next header field"
        );
    }

    #[test]
    fn hop_by_hop_elsewhere_is_an_unrecognized_next_header() {
        let mut p = hbh(0, &[1, 4, 0, 0, 0, 0]); // destination options naming hop-by-hop
        p.extend(hbh(UDP, &[1, 4, 0, 0, 0, 0]));
        assert_eq!(
            walk(&p, IpProtocol::Ipv6Opts, 40),
            Err(ChainError::ParamProblem {
                code: 1,
                pointer: 40,
                multicast_ok: false
            })
        );
    }

    #[test]
    fn unknown_options_follow_their_action_bits() {
        let with = |kind: u8| hbh(UDP, &[kind, 2, 0, 0, 1, 0]);
        assert!(walk(&with(0x1e), IpProtocol::Ipv6Opts, 40).is_ok());
        assert_eq!(
            walk(&with(0x5e), IpProtocol::Ipv6Opts, 40),
            Err(ChainError::UnknownOption)
        );
        assert_eq!(
            walk(&with(0x9e), IpProtocol::Ipv6Opts, 40),
            Err(ChainError::ParamProblem {
                code: 2,
                pointer: 42,
                multicast_ok: true
            })
        );
        assert_eq!(
            walk(&with(0xde), IpProtocol::Ipv6Opts, 40),
            Err(ChainError::ParamProblem {
                code: 2,
                pointer: 42,
                multicast_ok: false
            })
        );
    }

    #[test]
    fn padding_and_options_are_bounded() {
        // Eight bytes of PadN past the two-byte header: 14 bytes of padding in a row.
        let p = hbh(UDP, &[1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(walk(&p, IpProtocol::HopByHop, 40), Err(ChainError::TooLong));
        let mut opts = Vec::new();
        for _ in 0..9 {
            opts.extend_from_slice(&[0x1e, 0]);
        }
        opts.extend_from_slice(&[1, 2, 0, 0]);
        let p = hbh(UDP, &opts);
        assert_eq!(walk(&p, IpProtocol::HopByHop, 40), Err(ChainError::TooLong));
    }

    #[test]
    fn long_chains_are_refused() {
        let mut p = Vec::new();
        for i in 0..MAX_HEADERS + 1 {
            let next = if i == MAX_HEADERS { UDP } else { 60 };
            p.extend(hbh(next, &[1, 4, 0, 0, 0, 0]));
        }
        assert_eq!(walk(&p, IpProtocol::Ipv6Opts, 40), Err(ChainError::TooLong));
        assert!(walk(&p[8..], IpProtocol::Ipv6Opts, 40).is_ok());
    }

    #[test]
    fn routing_headers() {
        let rh = |kind: u8, left: u8| vec![UDP, 0, kind, left, 0, 0, 0, 0];
        assert_eq!(
            walk(&rh(0, 0), IpProtocol::Ipv6Route, 40).unwrap().offset,
            8
        );
        assert_eq!(
            walk(&rh(0, 1), IpProtocol::Ipv6Route, 40),
            Err(ChainError::RoutingType0 { pointer: 42 })
        );
        assert_eq!(
            walk(&rh(4, 2), IpProtocol::Ipv6Route, 40),
            Err(ChainError::ParamProblem {
                code: 0,
                pointer: 42,
                multicast_ok: false
            })
        );
    }

    #[test]
    fn fragment_header_ends_the_walk() {
        let mut p = hbh(44, &[1, 4, 0, 0, 0, 0]);
        let f = FragmentHeader {
            next_header: IpProtocol::Udp,
            offset: 1232,
            more: true,
            ident: 0xdead_beef,
            at: 8,
        };
        let mut bytes = [0; 8];
        f.emit(&mut bytes);
        p.extend_from_slice(&bytes);
        p.extend_from_slice(&[7; 16]);
        let c = walk(&p, IpProtocol::HopByHop, 40).unwrap();
        assert_eq!(c.fragment, Some(f));
        assert_eq!((c.upper, c.offset), (IpProtocol::Udp, 16));
        assert!(!f.is_atomic());
        assert!(FragmentHeader {
            offset: 0,
            more: false,
            ..f
        }
        .is_atomic());
        // etherparse reads the same fragment header.
        let (theirs, _) = etherparse::Ipv6FragmentHeader::from_slice(&bytes).unwrap();
        assert_eq!(theirs.fragment_offset.value() as usize * 8, 1232);
        assert!(theirs.more_fragments);
        assert_eq!(theirs.identification, 0xdead_beef);
    }

    #[test]
    fn truncated_headers_are_errors() {
        let p = hbh(UDP, &[1, 4, 0, 0, 0, 0]);
        for n in 0..p.len() {
            assert_eq!(
                walk(&p[..n], IpProtocol::HopByHop, 40),
                Err(ChainError::Truncated),
                "{n}"
            );
        }
        // An option that runs past its header.
        let bad = hbh(UDP, &[0x1e, 9, 0, 0, 0, 0]);
        assert_eq!(
            walk(&bad, IpProtocol::HopByHop, 40),
            Err(ChainError::Truncated)
        );
        assert_eq!(
            walk(&[44, 0, 0], IpProtocol::Ipv6Frag, 40),
            Err(ChainError::Truncated)
        );
    }

    #[test]
    fn skip_reads_past_headers_the_walk_refuses() {
        let mut p = hbh(60, &[0x9e, 2, 0, 0, 1, 0]); // an option the walk answers with an error
        p.extend(hbh(58, &[1, 4, 0, 0, 0, 0]));
        p.extend_from_slice(&[1, 4, 0, 0]);
        assert!(walk(&p, IpProtocol::HopByHop, 40).is_err());
        assert_eq!(
            skip(&p, IpProtocol::HopByHop),
            Some((IpProtocol::Icmpv6, 16))
        );
        assert_eq!(skip(&p[..10], IpProtocol::HopByHop), None);
    }

    /// A first fragment (More Fragments set) is noted; an atomic fragment is not.
    #[test]
    fn skip_notes_a_first_fragment() {
        let first = [60, 0, 0, 1, 0, 0, 0, 5, 58, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(
            skip_noting_fragment(&first, IpProtocol::Ipv6Frag),
            Some((IpProtocol::Icmpv6, 16, true))
        );
        let atomic = [60, 0, 0, 0, 0, 0, 0, 5, 58, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(
            skip_noting_fragment(&atomic, IpProtocol::Ipv6Frag),
            Some((IpProtocol::Icmpv6, 16, false))
        );
        let later = [60, 0, 0, 9, 0, 0, 0, 5, 58, 0, 1, 4, 0, 0, 0, 0];
        assert_eq!(skip_noting_fragment(&later, IpProtocol::Ipv6Frag), None);
    }

    proptest! {
        /// Any bytes and any first header: a chain inside the bytes or an error, never a panic.
        #[test]
        fn arbitrary_chains_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), first in any::<u8>()) {
            if let Ok(c) = walk(&bytes, IpProtocol::from(first), 40) {
                prop_assert!(c.offset <= bytes.len());
                prop_assert!(c.headers <= MAX_HEADERS);
                if let Some(f) = c.fragment {
                    prop_assert_eq!(f.at + 8, c.offset);
                }
            }
        }
    }
}
