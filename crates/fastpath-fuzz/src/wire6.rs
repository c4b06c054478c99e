//! The IPv6 parsers: the fixed header, the extension-header chain, and ICMPv6 with its quotes.
//!
//! As for IPv4 ([`crate::wire`]): each target compares the parser's verdict with a model written here
//! from RFC 8200 and RFC 4443, reads the fields back against the bytes, and round-trips what parses.

use std::net::Ipv6Addr;

use fastpath::wire::icmpv6::{self, Icmpv6Repr};
use fastpath::wire::ipv6ext::{self, ChainError};
use fastpath::wire::{IpProtocol, Ipv6Packet, Ipv6Repr, WireError};

use crate::{be16, ones_add, reference_sum};

/// RFC 8200 §3's length rules, in the order `Ipv6Packet::new_checked` documents them.
fn ipv6_model(data: &[u8]) -> Result<(), WireError> {
    if data.len() < 40 {
        return Err(WireError::Truncated);
    }
    if data[0] >> 4 != 6 {
        return Err(WireError::BadVersion);
    }
    if 40 + usize::from(be16(data, 4)) > data.len() {
        return Err(WireError::BadTotalLength);
    }
    Ok(())
}

/// The IPv6 header and its extension headers: the verdict against the model; every field against the
/// bytes; emit(parse) gives the 40 header bytes back; the chain walk stays inside the payload, agrees
/// with the length-only skip wherever it accepts a chain without a fragment header, and refuses
/// hop-by-hop anywhere but first.
pub fn ipv6(data: &[u8]) {
    let model = ipv6_model(data);
    let checked = Ipv6Packet::new_checked(data);
    assert_eq!(checked.as_ref().err().copied(), model.err(), "new_checked");
    let Ok(packet) = checked else {
        return;
    };
    let repr = Ipv6Repr::parse(&packet).expect("parse agrees with new_checked");
    let w0 = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    assert_eq!(repr.traffic_class, (w0 >> 20) as u8);
    assert_eq!(repr.flow_label, w0 & 0xf_ffff);
    assert_eq!(repr.payload_len, usize::from(be16(data, 4)));
    assert_eq!(repr.next_header, IpProtocol::from(data[6]));
    assert_eq!(repr.hop_limit, data[7]);
    assert_eq!(repr.src_addr.octets(), data[8..24]);
    assert_eq!(repr.dst_addr.octets(), data[24..40]);
    let mut out = [0u8; 40];
    repr.emit(&mut out);
    assert_eq!(out, data[..40], "emit(parse)");

    let payload = packet.payload();
    match ipv6ext::walk(payload, repr.next_header, 40) {
        Ok(chain) => {
            assert!(chain.offset <= payload.len(), "chain past the payload");
            assert!(chain.headers <= ipv6ext::MAX_HEADERS);
            assert!(!ipv6ext::is_extension(chain.upper) || chain.fragment.is_some());
            if chain.fragment.is_none() {
                assert_eq!(
                    ipv6ext::skip(payload, repr.next_header),
                    Some((chain.upper, chain.offset)),
                    "skip agrees with walk"
                );
            }
            let named = chain.named_at as usize;
            assert!(named < 40 + payload.len().max(1), "named_at in the packet");
        }
        Err(ChainError::ParamProblem { pointer, code, .. }) => {
            assert!(code <= 2);
            assert!(
                (pointer as usize) < 40 + payload.len(),
                "pointer in the packet"
            );
        }
        Err(ChainError::RoutingType0 { pointer }) => {
            assert_eq!(data[pointer as usize], 0, "points at routing type 0");
        }
        Err(_) => {}
    }
}

/// ICMPv6: the first 32 bytes are the source and destination addresses, the rest the message. The
/// checksum verdict agrees with a reference sum over the pseudo-header; a message of a type with
/// fields parses back from its emitted bytes (and is those bytes where none is unused); a quote parses or errs without panicking and, when it parses,
/// names the quoted header's addresses.
pub fn icmpv6(data: &[u8]) {
    if data.len() < 32 {
        return;
    }
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&data[..16]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&data[16..32]).unwrap());
    let msg = &data[32..];
    let parsed = Icmpv6Repr::parse(msg, src, dst);
    if msg.len() >= 4 && msg.len() <= 65535 {
        let mut pseudo = Vec::with_capacity(40);
        pseudo.extend_from_slice(&data[..32]);
        pseudo.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        let ok = ones_add(reference_sum(&pseudo), reference_sum(msg)) == 0xffff;
        if !ok {
            assert_eq!(parsed, Err(WireError::BadChecksum), "bad checksum accepted");
        } else {
            assert_ne!(parsed, Err(WireError::BadChecksum), "good checksum refused");
        }
    }
    let Ok(repr) = parsed else {
        return;
    };
    if !matches!(repr, Icmpv6Repr::Other { .. }) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut out, src, dst);
        assert_eq!(
            Icmpv6Repr::parse(&out, src, dst),
            Ok(repr),
            "parse(emit(parse))"
        );
        // Messages whose every byte is a field come back byte for byte: destination unreachable
        // and time exceeded have an unused word, and echo and packet too big a code "ignored by the
        // receiver" (RFC 4443 §3.2, §4), all emitted as zero.
        let code_kept = matches!(repr, Icmpv6Repr::ParamProblem { .. }) || msg[1] == 0;
        if code_kept
            && matches!(
                repr,
                Icmpv6Repr::EchoRequest { .. }
                    | Icmpv6Repr::EchoReply { .. }
                    | Icmpv6Repr::PacketTooBig { .. }
                    | Icmpv6Repr::ParamProblem { .. }
            )
        {
            assert_eq!(out, msg, "emit(parse)");
        }
    }
    let data = match repr {
        Icmpv6Repr::DstUnreachable { data, .. }
        | Icmpv6Repr::PacketTooBig { data, .. }
        | Icmpv6Repr::TimeExceeded { data, .. }
        | Icmpv6Repr::ParamProblem { data, .. } => data,
        _ => return,
    };
    if let Ok(q) = icmpv6::parse_quoted(data) {
        assert_eq!(q.ip.src_addr.octets(), data[8..24]);
        assert_eq!(q.ip.dst_addr.octets(), data[24..40]);
    }
}
