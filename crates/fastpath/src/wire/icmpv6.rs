//! ICMPv6 (RFC 4443): the messages this stack sends and acts on, and the types it recognizes in order
//! to drop them with a named reason (neighbour discovery, RFC 4861, and multicast listener discovery,
//! RFC 3810), which the kernel sends on a TUN link as the interface comes up.
//!
//! Unlike ICMPv4, the ICMPv6 checksum covers a pseudo-header (RFC 4443 §2.3), so [`Icmpv6Repr::parse`]
//! and [`Icmpv6Repr::emit`] take the packet's addresses.

use std::net::Ipv6Addr;

use super::ipv6::{Ipv6Packet, Ipv6Repr, HEADER_LEN as IPV6_HEADER_LEN, MIN_MTU};
use super::ipv6ext;
use super::{read_u16, write_u16, IpProtocol, Result, WireError};
use crate::checksum;

/// Length of the ICMPv6 header (type, code, checksum and the 4-byte field that follows), in bytes.
pub const HEADER_LEN: usize = 8;

/// The most of an offending packet an ICMPv6 error quotes: what fits in the minimum MTU (RFC 4443
/// §2.4(c)): 1280 - 40 - 8 bytes.
pub const MAX_QUOTE: usize = MIN_MTU - IPV6_HEADER_LEN - HEADER_LEN;

/// Message types (RFC 4443 §2.1, RFC 4861 §4, RFC 3810 §5).
pub mod kind {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Multicast listener query (MLD).
    pub const MLD_QUERY: u8 = 130;
    /// MLDv1 report.
    pub const MLD_REPORT: u8 = 131;
    /// MLDv1 done.
    pub const MLD_DONE: u8 = 132;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbour solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbour advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
    /// MLDv2 report.
    pub const MLD2_REPORT: u8 = 143;
}

/// Destination unreachable codes (RFC 4443 §3.1).
pub mod unreachable {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Communication administratively prohibited.
    pub const PROHIBITED: u8 = 1;
    /// Address unreachable.
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
}

/// Time exceeded codes (RFC 4443 §3.3).
pub mod time_exceeded {
    /// Hop limit exceeded in transit.
    pub const HOP_LIMIT: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// Parameter problem codes (RFC 4443 §3.4, RFC 7112 §7).
pub mod param_problem {
    /// Erroneous header field.
    pub const HEADER_FIELD: u8 = 0;
    /// Unrecognized next header type.
    pub const NEXT_HEADER: u8 = 1;
    /// Unrecognized IPv6 option.
    pub const OPTION: u8 = 2;
    /// The first fragment has an incomplete header chain (RFC 7112).
    pub const INCOMPLETE_CHAIN: u8 = 3;
}

/// An ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data, returned unchanged in the reply.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier, copied from the request.
        ident: u16,
        /// Sequence number, copied from the request.
        seq_no: u16,
        /// Data, copied from the request.
        data: &'a [u8],
    },
    /// Destination unreachable (code: [`mod@unreachable`]); `data` quotes the offending packet.
    DstUnreachable {
        /// The code.
        code: u8,
        /// The quoted packet.
        data: &'a [u8],
    },
    /// Packet too big (RFC 4443 §3.2; RFC 8201 path MTU discovery).
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// The quoted packet.
        data: &'a [u8],
    },
    /// Time exceeded (code: [`time_exceeded`]).
    TimeExceeded {
        /// The code.
        code: u8,
        /// The quoted packet.
        data: &'a [u8],
    },
    /// Parameter problem (code: [`param_problem`]).
    ParamProblem {
        /// The code.
        code: u8,
        /// Offset of the offending byte in the quoted packet.
        pointer: u32,
        /// The quoted packet.
        data: &'a [u8],
    },
    /// A message of another type that checksums correctly: neighbour discovery, MLD, or unknown.
    Other {
        /// The type.
        msg_type: u8,
        /// The code.
        code: u8,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads the message in `bytes` (the ICMPv6 header and body), sent from `src` to `dst`.
    ///
    /// Errors: [`WireError::Truncated`] if shorter than 8 bytes (4 for a message of an unknown type),
    /// [`WireError::BadChecksum`] if the checksum with the pseudo-header fails.
    pub fn parse(bytes: &'a [u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<Icmpv6Repr<'a>> {
        if bytes.len() < 4 {
            return Err(WireError::Truncated);
        }
        if bytes.len() > usize::from(u16::MAX) {
            return Err(WireError::BadLength);
        }
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, dst, 58, bytes.len() as u16),
            checksum::fast(bytes),
        );
        if sum != 0xffff {
            return Err(WireError::BadChecksum);
        }
        let (msg_type, code) = (bytes[0], bytes[1]);
        let known = matches!(msg_type, 1..=4 | 128 | 129);
        if known && bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let data = bytes.get(HEADER_LEN..).unwrap_or(&[]);
        let word = || u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        Ok(match msg_type {
            kind::ECHO_REQUEST => Icmpv6Repr::EchoRequest {
                ident: read_u16(bytes, 4),
                seq_no: read_u16(bytes, 6),
                data,
            },
            kind::ECHO_REPLY => Icmpv6Repr::EchoReply {
                ident: read_u16(bytes, 4),
                seq_no: read_u16(bytes, 6),
                data,
            },
            kind::DST_UNREACHABLE => Icmpv6Repr::DstUnreachable { code, data },
            kind::PACKET_TOO_BIG => Icmpv6Repr::PacketTooBig { mtu: word(), data },
            kind::TIME_EXCEEDED => Icmpv6Repr::TimeExceeded { code, data },
            kind::PARAM_PROBLEM => Icmpv6Repr::ParamProblem {
                code,
                pointer: word(),
                data,
            },
            msg_type => Icmpv6Repr::Other { msg_type, code },
        })
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => data,
            Icmpv6Repr::Other { .. } => &[],
        }
    }

    /// The length of the message [`Icmpv6Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the message into `buffer[..self.buffer_len()]` with its checksum for `src` to `dst`.
    ///
    /// # Panics
    /// If `buffer` is too short: a bug in the caller.
    pub fn emit(&self, buffer: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
        let len = self.buffer_len();
        assert!(buffer.len() >= len, "ICMPv6 message needs {len} bytes");
        let b = &mut buffer[..len];
        let (t, code, word) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, .. } => (
                kind::ECHO_REQUEST,
                0,
                u32::from(ident) << 16 | u32::from(seq_no),
            ),
            Icmpv6Repr::EchoReply { ident, seq_no, .. } => (
                kind::ECHO_REPLY,
                0,
                u32::from(ident) << 16 | u32::from(seq_no),
            ),
            Icmpv6Repr::DstUnreachable { code, .. } => (kind::DST_UNREACHABLE, code, 0),
            Icmpv6Repr::PacketTooBig { mtu, .. } => (kind::PACKET_TOO_BIG, 0, mtu),
            Icmpv6Repr::TimeExceeded { code, .. } => (kind::TIME_EXCEEDED, code, 0),
            Icmpv6Repr::ParamProblem { code, pointer, .. } => (kind::PARAM_PROBLEM, code, pointer),
            Icmpv6Repr::Other { msg_type, code } => (msg_type, code, 0),
        };
        b[0] = t;
        b[1] = code;
        write_u16(b, 2, 0);
        b[4..8].copy_from_slice(&word.to_be_bytes());
        b[HEADER_LEN..].copy_from_slice(self.data());
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, dst, 58, len as u16),
            checksum::fast(b),
        );
        write_u16(b, 2, !sum);
    }

    /// True for error messages (types below 128, RFC 4443 §2.1): never answered with an error.
    pub fn is_error(msg_type: u8) -> bool {
        msg_type < 128
    }
}

/// What an ICMPv6 error's quote says about the packet it concerns: its header, the upper-layer
/// protocol its extension headers led to, and that header's first 8 bytes (for UDP and TCP, the ports
/// and for TCP the sequence number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoted {
    /// The quoted fixed header.
    pub ip: Ipv6Repr,
    /// The upper-layer protocol.
    pub upper: IpProtocol,
    /// The upper-layer header's first 8 bytes.
    pub head: [u8; 8],
}

/// Parses the packet quoted in an ICMPv6 error: tolerant of a payload length longer than the quote,
/// strict about the quoted extension headers (they are walked as if received). Errors:
/// [`WireError::Truncated`] if the fixed header, an extension header or the 8 upper-layer bytes are
/// missing; [`WireError::BadVersion`]; [`WireError::Unrecognized`] for a quoted chain the walker refuses
/// or that ends in a fragment that is not the first.
pub fn parse_quoted(data: &[u8]) -> Result<Quoted> {
    let packet = Ipv6Packet::new_unchecked(data);
    packet.check_header()?;
    let ip = Ipv6Repr::from_checked_header(&packet);
    let rest = &data[IPV6_HEADER_LEN..];
    let chain = match ipv6ext::walk(rest, ip.next_header, IPV6_HEADER_LEN) {
        Ok(c) => c,
        Err(ipv6ext::ChainError::Truncated) => return Err(WireError::Truncated),
        Err(_) => return Err(WireError::Unrecognized),
    };
    if chain.fragment.is_some_and(|f| f.offset != 0) {
        return Err(WireError::Unrecognized);
    }
    let head = rest
        .get(chain.offset..chain.offset + 8)
        .ok_or(WireError::Truncated)?;
    Ok(Quoted {
        ip,
        upper: chain.upper,
        head: head.try_into().expect("8 bytes"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn echo_round_trips_and_etherparse_agrees() {
        let (src, dst) = (a("2001:db8::1"), a("2001:db8::2"));
        let data = [1u8, 2, 3, 4, 5];
        let req = Icmpv6Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 7,
            data: &data,
        };
        let mut b = vec![0; req.buffer_len()];
        req.emit(&mut b, src, dst);
        assert_eq!(Icmpv6Repr::parse(&b, src, dst).unwrap(), req);
        // etherparse computes the same checksum.
        let (h, _) = etherparse::Icmpv6Header::from_slice(&b).unwrap();
        let theirs = h
            .icmp_type
            .calc_checksum(src.octets(), dst.octets(), &data)
            .unwrap();
        assert_eq!(h.checksum, theirs);
        // Another destination breaks the checksum: the pseudo-header is covered.
        assert_eq!(
            Icmpv6Repr::parse(&b, src, a("2001:db8::3")).unwrap_err(),
            WireError::BadChecksum
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let (src, dst) = (a("fe80::1"), a("ff02::1"));
        let q = [9u8; 48];
        let reprs = [
            Icmpv6Repr::EchoReply {
                ident: 1,
                seq_no: 2,
                data: &q,
            },
            Icmpv6Repr::DstUnreachable {
                code: unreachable::PORT,
                data: &q,
            },
            Icmpv6Repr::PacketTooBig {
                mtu: 1400,
                data: &q,
            },
            Icmpv6Repr::TimeExceeded {
                code: time_exceeded::REASSEMBLY,
                data: &q,
            },
            Icmpv6Repr::ParamProblem {
                code: param_problem::OPTION,
                pointer: 42,
                data: &q,
            },
        ];
        for r in reprs {
            let mut b = vec![0; r.buffer_len()];
            r.emit(&mut b, src, dst);
            assert_eq!(Icmpv6Repr::parse(&b, src, dst).unwrap(), r);
        }
        // A router solicitation as the kernel sends it (8 bytes, reserved zero).
        let rs = Icmpv6Repr::Other {
            msg_type: kind::ROUTER_SOLICIT,
            code: 0,
        };
        let mut b = vec![0; 8];
        rs.emit(&mut b, src, a("ff02::2"));
        assert_eq!(Icmpv6Repr::parse(&b, src, a("ff02::2")).unwrap(), rs);
    }

    #[test]
    fn quotes_lead_to_the_upper_layer() {
        // A UDP packet 2001:db8::1:5000 -> 2001:db8::2:53 behind a destination options header.
        let ip = Ipv6Repr {
            src_addr: a("2001:db8::1"),
            dst_addr: a("2001:db8::2"),
            next_header: IpProtocol::Ipv6Opts,
            payload_len: 1000,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        };
        let mut q = vec![0; 40];
        ip.emit(&mut q);
        q.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        q.extend_from_slice(&[0x13, 0x88, 0, 53, 0x03, 0xe0, 0, 0]);
        let quoted = parse_quoted(&q).unwrap();
        assert_eq!(quoted.ip, ip);
        assert_eq!(quoted.upper, IpProtocol::Udp);
        assert_eq!(&quoted.head[..4], &[0x13, 0x88, 0, 53]);
        assert_eq!(parse_quoted(&q[..55]).unwrap_err(), WireError::Truncated);
        assert_eq!(parse_quoted(&q[..30]).unwrap_err(), WireError::Truncated);
    }

    #[test]
    fn short_messages_are_errors() {
        let (src, dst) = (a("::1"), a("::1"));
        assert_eq!(
            Icmpv6Repr::parse(&[128, 0, 0], src, dst).unwrap_err(),
            WireError::Truncated
        );
        // A 4-byte echo request with a valid checksum is still too short for its fields.
        let mut b = [128u8, 0, 0, 0];
        let sum = checksum::add(
            checksum::pseudo_header_sum(src, dst, 58, 4),
            checksum::fast(&b),
        );
        b[2..4].copy_from_slice(&(!sum).to_be_bytes());
        assert_eq!(
            Icmpv6Repr::parse(&b, src, dst).unwrap_err(),
            WireError::Truncated
        );
    }

    proptest! {
        /// Any bytes: a message or an error, never a panic; and any quote likewise.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = Icmpv6Repr::parse(&bytes, Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
            let _ = parse_quoted(&bytes);
        }
    }
}
