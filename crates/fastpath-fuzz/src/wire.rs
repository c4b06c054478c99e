//! The wire parsers: IPv4, UDP, ICMPv4 and the datagram quoted in an ICMP error.
//!
//! Each target asks the parser for its verdict on the bytes and compares it with a model written
//! here from the RFCs (which error, in which order), then, for what parses, reads every field back
//! against the bytes and round-trips the meaning through the emitter.

use std::net::Ipv4Addr;

use fastpath::wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use fastpath::wire::{
    IcmpMessage, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
    WireError,
};

use crate::{be16, ones_add, reference_sum};

/// RFC 791's length rules, in the order `Ipv4Packet::new_checked` documents them.
fn ipv4_model(data: &[u8]) -> Result<(), WireError> {
    if data.len() < 20 {
        return Err(WireError::Truncated);
    }
    if data[0] >> 4 != 4 {
        return Err(WireError::BadVersion);
    }
    let ihl = usize::from(data[0] & 0x0f) * 4;
    if ihl < 20 || ihl > data.len() {
        return Err(WireError::BadHeaderLength);
    }
    let total = usize::from(be16(data, 2));
    if total < ihl || total > data.len() {
        return Err(WireError::BadTotalLength);
    }
    Ok(())
}

/// The IPv4 parser: `Ipv4Packet::new_checked` and `Ipv4Repr::parse` agree with the model and with each
/// other; every accessor reads the right bytes; the header checksum verifies exactly when the
/// reference sum says so; emitting the parsed meaning and parsing it again gives it back.
pub fn ipv4(data: &[u8]) {
    let model = ipv4_model(data);
    let checked = Ipv4Packet::new_checked(data);
    assert_eq!(checked.as_ref().err().copied(), model.err(), "new_checked");
    let parsed = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data));
    assert_eq!(parsed.err(), model.err(), "Ipv4Repr::parse");
    let (Ok(packet), Ok(repr)) = (checked, parsed) else {
        return;
    };

    let ihl = usize::from(data[0] & 0x0f) * 4;
    let total = usize::from(be16(data, 2));
    let flags = be16(data, 6);
    assert_eq!(packet.version(), 4);
    assert_eq!(packet.header_len(), ihl);
    assert_eq!(packet.total_len() as usize, total);
    assert_eq!(packet.tos(), data[1]);
    assert_eq!(packet.ident(), be16(data, 4));
    assert_eq!(packet.dont_frag(), flags & 0x4000 != 0);
    assert_eq!(packet.more_frags(), flags & 0x2000 != 0);
    assert_eq!(
        usize::from(packet.frag_offset()),
        usize::from(flags & 0x1fff) * 8
    );
    assert_eq!(packet.is_fragment(), flags & 0x3fff != 0);
    assert_eq!(packet.ttl(), data[8]);
    assert_eq!(u8::from(packet.protocol()), data[9]);
    assert_eq!(packet.checksum(), be16(data, 10));
    assert_eq!(packet.src_addr().octets(), data[12..16]);
    assert_eq!(packet.dst_addr().octets(), data[16..20]);
    assert_eq!(packet.header(), &data[..ihl]);
    assert_eq!(packet.options(), &data[20..ihl]);
    assert_eq!(packet.payload(), &data[ihl..total]);
    assert_eq!(
        packet.verify_checksum(),
        reference_sum(&data[..ihl]) == 0xffff,
        "header checksum verdict"
    );

    assert_eq!(repr.src_addr, packet.src_addr());
    assert_eq!(repr.dst_addr, packet.dst_addr());
    assert_eq!(repr.protocol, packet.protocol());
    assert_eq!(repr.payload_len, total - ihl);
    assert_eq!(repr.ttl, data[8]);
    assert_eq!(repr.tos, data[1]);
    assert_eq!(repr.ident, packet.ident());
    assert_eq!(repr.dont_frag, packet.dont_frag());
    assert_eq!(repr.more_frags, packet.more_frags());
    assert_eq!(repr.frag_offset, packet.frag_offset());

    // Emit what it means (options are not emitted), with the payload, and read it back.
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out[..20]);
    out[20..].copy_from_slice(packet.payload());
    assert_eq!(be16(&out, 10), 0, "emit leaves the checksum to the caller");
    let mut emitted = Ipv4Packet::new_unchecked(&mut out[..]);
    emitted.fill_checksum();
    assert_eq!(reference_sum(&out[..20]), 0xffff, "fill_checksum");
    let again = Ipv4Packet::new_checked(&out[..]).expect("emitted header parses");
    assert!(again.verify_checksum());
    assert_eq!(Ipv4Repr::parse(&again), Ok(repr), "emit then parse");
    assert_eq!(again.payload(), packet.payload());
}

/// The UDP parser. The first 8 bytes are the source and destination addresses (for the checksum),
/// the rest the datagram: the verdict matches RFC 768's length rules; the fields read right; the
/// checksum verifies when its field is zero ("none") or the reference sum over the pseudo-header and
/// the datagram is all ones; `fill_checksum` makes any datagram verify and never writes zero.
pub fn udp(data: &[u8]) {
    let (src, dst, data) = if data.len() >= 8 {
        let (a, rest) = data.split_at(8);
        (
            Ipv4Addr::new(a[0], a[1], a[2], a[3]),
            Ipv4Addr::new(a[4], a[5], a[6], a[7]),
            rest,
        )
    } else {
        (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), data)
    };
    let model = if data.len() < 8 {
        Err(WireError::Truncated)
    } else if !(8..=data.len()).contains(&usize::from(be16(data, 4))) {
        Err(WireError::BadLength)
    } else {
        Ok(())
    };
    let checked = UdpPacket::new_checked(data);
    assert_eq!(checked.as_ref().err().copied(), model.err(), "new_checked");
    let parsed = UdpRepr::parse(&UdpPacket::new_unchecked(data));
    assert_eq!(parsed.err(), model.err(), "UdpRepr::parse");
    let (Ok(packet), Ok(repr)) = (checked, parsed) else {
        return;
    };

    let len = usize::from(be16(data, 4));
    assert_eq!(packet.src_port(), be16(data, 0));
    assert_eq!(packet.dst_port(), be16(data, 2));
    assert_eq!(usize::from(packet.len()), len);
    assert_eq!(packet.checksum(), be16(data, 6));
    assert_eq!(packet.payload(), &data[8..len]);
    assert_eq!(repr.src_port, packet.src_port());
    assert_eq!(repr.dst_port, packet.dst_port());
    assert_eq!(repr.payload_len, len - 8);
    assert_eq!(repr.buffer_len(), len);

    let pseudo = |len: usize| {
        let mut p = [0u8; 12];
        p[..4].copy_from_slice(&src.octets());
        p[4..8].copy_from_slice(&dst.octets());
        p[9] = 17;
        p[10..12].copy_from_slice(&(len as u16).to_be_bytes());
        reference_sum(&p)
    };
    let verifies = ones_add(pseudo(len), reference_sum(&data[..len])) == 0xffff;
    assert_eq!(
        packet.verify_checksum(src, dst),
        packet.checksum() == 0 || verifies,
        "checksum verdict"
    );

    // Emit the meaning with the payload, fill the checksum, and read it back.
    let mut out = vec![0u8; len];
    repr.emit(&mut out[..8]);
    out[8..].copy_from_slice(packet.payload());
    let mut emitted = UdpPacket::new_unchecked(&mut out[..]);
    emitted.fill_checksum(src, dst);
    assert_ne!(emitted.checksum(), 0, "a computed zero goes out as 0xffff");
    assert_eq!(ones_add(pseudo(len), reference_sum(&out)), 0xffff);
    let again = UdpPacket::new_checked(&out[..]).expect("emitted datagram parses");
    assert!(again.verify_checksum(src, dst));
    assert_eq!(UdpRepr::parse(&again), Ok(repr));
}

/// The ICMPv4 parser: the verdict (short, bad checksum by the reference sum, unknown type); for
/// what parses, the type and code mapping and the fields; parse, emit, parse gives the same meaning
/// and a message whose checksum verifies; an error's data goes through [`icmp_quoted`] too.
pub fn icmpv4(data: &[u8]) {
    let model = if data.len() < 8 {
        Err(WireError::Truncated)
    } else if reference_sum(data) != 0xffff {
        Err(WireError::BadChecksum)
    } else if !(matches!(data[0], 0 | 3 | 8 | 11 | 12 | 13 | 14) || data[0] == 5 && data[1] <= 3) {
        Err(WireError::Unrecognized)
    } else {
        Ok(())
    };
    let packet = match Icmpv4Packet::new_checked(data) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(Err(e), model, "new_checked");
            return;
        }
    };
    assert_eq!(packet.msg_type(), IcmpMessage::from(data[0]));
    assert_eq!(packet.code(), data[1]);
    assert_eq!(packet.checksum(), be16(data, 2));
    assert_eq!(packet.data(), &data[8..]);
    assert_eq!(packet.verify_checksum(), reference_sum(data) == 0xffff);
    let repr = match Icmpv4Repr::parse(&packet) {
        Ok(r) => r,
        Err(e) => {
            assert_eq!(Err(e), model, "Icmpv4Repr::parse");
            return;
        }
    };
    assert_eq!(model, Ok(()), "parsed {repr:?}");
    match repr {
        Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data: d,
        }
        | Icmpv4Repr::EchoReply {
            ident,
            seq_no,
            data: d,
        } => {
            assert_eq!(data[0] == 8, matches!(repr, Icmpv4Repr::EchoRequest { .. }));
            assert_eq!((ident, seq_no), (be16(data, 4), be16(data, 6)));
            assert_eq!(d, &data[8..]);
        }
        Icmpv4Repr::Timestamp {
            ident,
            seq_no,
            data: d,
        }
        | Icmpv4Repr::TimestampReply {
            ident,
            seq_no,
            data: d,
        } => {
            assert_eq!(data[0] == 13, matches!(repr, Icmpv4Repr::Timestamp { .. }));
            assert!(matches!(data[0], 13 | 14));
            assert_eq!((ident, seq_no), (be16(data, 4), be16(data, 6)));
            assert_eq!(d, &data[8..]);
        }
        Icmpv4Repr::DstUnreachable {
            reason,
            next_hop_mtu,
            data: d,
        } => {
            assert_eq!(data[0], 3);
            assert_eq!(reason, DstUnreachable::from(data[1]));
            assert_eq!(u8::from(reason), data[1]);
            let mtu = if data[1] == 4 { be16(data, 6) } else { 0 };
            assert_eq!(next_hop_mtu, mtu);
            assert_eq!(d, &data[8..]);
            icmp_quoted(d);
        }
        Icmpv4Repr::ParamProblem { pointer, data: d } => {
            assert_eq!(data[0], 12);
            assert_eq!(pointer, data[4]);
            assert_eq!(d, &data[8..]);
            icmp_quoted(d);
        }
        Icmpv4Repr::TimeExceeded { reason, data: d } => {
            assert_eq!(data[0], 11);
            assert_eq!(reason, TimeExceeded::from(data[1]));
            assert_eq!(u8::from(reason), data[1]);
            assert_eq!(d, &data[8..]);
            icmp_quoted(d);
        }
        Icmpv4Repr::Redirect {
            code,
            gateway,
            data: d,
        } => {
            assert_eq!((data[0], code), (5, data[1]));
            assert_eq!(gateway.octets(), [data[4], data[5], data[6], data[7]]);
            assert_eq!(d, &data[8..]);
            icmp_quoted(d);
        }
    }
    let mut out = vec![0xa5u8; repr.buffer_len()];
    assert_eq!(out.len(), data.len());
    repr.emit(&mut out);
    assert_eq!(reference_sum(&out), 0xffff, "emitted checksum");
    assert_eq!(out[8..], data[8..], "emitted data");
    let again = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).expect("emitted"));
    assert_eq!(again, Ok(repr), "parse, emit, parse");
}

/// The quote in an ICMP error (RFC 792: the offending datagram's IP header and its first 8 payload
/// bytes), which the stack reads to find the socket an error is about: the verdict matches a model
/// (lenient on the quoted total length and checksum, strict on the header being all there), and
/// what parses is read from the right bytes.
pub fn icmp_quoted(data: &[u8]) {
    let model = (|| {
        if data.len() < 20 {
            return Err(WireError::Truncated);
        }
        if data[0] >> 4 != 4 {
            return Err(WireError::BadVersion);
        }
        let ihl = usize::from(data[0] & 0x0f) * 4;
        if ihl < 20 || ihl > data.len() {
            return Err(WireError::BadHeaderLength);
        }
        if usize::from(be16(data, 2)) < ihl {
            return Err(WireError::BadTotalLength);
        }
        if data.len() < ihl + 8 {
            return Err(WireError::Truncated);
        }
        Ok(ihl)
    })();
    let parsed = icmpv4::parse_quoted(data);
    match (parsed, model) {
        (Err(e), Err(m)) => assert_eq!(e, m, "parse_quoted verdict"),
        (Ok((repr, head)), Ok(ihl)) => {
            assert_eq!(head, data[ihl..ihl + 8], "quoted transport header");
            assert_eq!(repr.src_addr.octets(), data[12..16]);
            assert_eq!(repr.dst_addr.octets(), data[16..20]);
            assert_eq!(repr.protocol, IpProtocol::from(data[9]));
            assert_eq!(repr.payload_len, usize::from(be16(data, 2)) - ihl);
            assert_eq!(repr.ident, be16(data, 4));
            assert_eq!(repr.ttl, data[8]);
            assert_eq!(
                usize::from(repr.frag_offset),
                usize::from(be16(data, 6) & 0x1fff) * 8
            );
            assert_eq!(repr.more_frags, be16(data, 6) & 0x2000 != 0);
        }
        (parsed, model) => panic!("parse_quoted: {parsed:?}, the model says {model:?}"),
    }
}
