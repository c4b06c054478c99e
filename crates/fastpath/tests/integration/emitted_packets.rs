//! Every kind of packet fastpath emits parses with etherparse, an independent implementation, with the
//! fields we meant and valid checksums.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::common::*;
use etherparse::{Icmpv4Type, NetSlice, SlicedPacket, TransportSlice};
use fastpath::link::LinkCapabilities;
use fastpath::{Instant, StackConfig};

fn parse(p: &[u8]) -> SlicedPacket<'_> {
    let sliced =
        SlicedPacket::from_ip(p).unwrap_or_else(|e| panic!("etherparse rejects {p:02x?}: {e}"));
    let Some(NetSlice::Ipv4(ip)) = &sliced.net else {
        panic!("not IPv4")
    };
    let h = ip.header().to_header();
    assert_eq!(
        h.header_checksum,
        h.calc_header_checksum(),
        "IP header checksum"
    );
    sliced
}

fn check_udp(p: &[u8], src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) {
    let sliced = parse(p);
    let Some(TransportSlice::Udp(udp)) = &sliced.transport else {
        panic!("not UDP")
    };
    let h = udp.to_header();
    assert_eq!(udp.payload(), payload);
    let expect = h
        .calc_checksum_ipv4_raw(src.octets(), dst.octets(), payload)
        .unwrap();
    assert_eq!(h.checksum, expect, "UDP checksum");
}

#[test]
fn udp_datagrams_in_every_configuration() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
        let s = b.udp_bind(sa(B, 5000)).unwrap();
        for len in [0, 1, 7, 8, 63, 64, 509, 512, 1472] {
            let data = payload(len, len as u64);
            b.udp(s).send_to(&data, sa(A, 6000)).unwrap();
            b.flush();
            let out = capture(&mut raw);
            assert_eq!(out.len(), 1);
            check_udp(&out[0], B, A, &data);
        }
    }
}

#[test]
fn fragments_reassemble_into_the_datagram() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    let s = b.udp_bind(sa(B, 5000)).unwrap();
    let data = payload(4000, 1);
    b.udp(s).send_to(&data, sa(A, 6000)).unwrap();
    b.flush();
    let out = capture(&mut raw);
    assert_eq!(out.len(), 3);
    let mut whole = vec![0u8; 4008];
    for (i, p) in out.iter().enumerate() {
        assert!(p.len() <= 1500);
        let sliced = parse(p);
        let Some(NetSlice::Ipv4(ip)) = &sliced.net else {
            panic!()
        };
        let h = ip.header();
        assert_eq!(h.more_fragments(), i < 2);
        let offset = h.fragments_offset().value() as usize * 8;
        whole[offset..offset + ip.payload().payload.len()].copy_from_slice(ip.payload().payload);
    }
    let udp = etherparse::UdpHeaderSlice::from_slice(&whole)
        .unwrap()
        .to_header();
    assert_eq!(udp.length, 4008);
    let expect = udp
        .calc_checksum_ipv4_raw(B.octets(), A.octets(), &whole[8..])
        .unwrap();
    assert_eq!(udp.checksum, expect);
    assert_eq!(&whole[8..], &data[..]);
}

fn icmp(p: &[u8]) -> (Icmpv4Type, Vec<u8>) {
    let sliced = parse(p);
    let Some(TransportSlice::Icmpv4(icmp)) = &sliced.transport else {
        panic!("not ICMP")
    };
    let h = icmp.header();
    assert_eq!(
        h.checksum,
        h.icmp_type.calc_checksum(icmp.payload()),
        "ICMP checksum"
    );
    (h.icmp_type, icmp.payload().to_vec())
}

#[test]
fn echo_reply_port_unreachable_and_time_exceeded() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    // Echo request built by etherparse; the reply must mirror it.
    let mut req = Vec::new();
    etherparse::PacketBuilder::ipv4(A.octets(), B.octets(), 64)
        .icmpv4_echo_request(77, 5)
        .write(&mut req, b"ping data")
        .unwrap();
    inject(&mut raw, &req);
    b.poll(Instant::ZERO);
    let out = capture(&mut raw);
    let (t, data) = icmp(&out[0]);
    match t {
        Icmpv4Type::EchoReply(e) => assert_eq!((e.id, e.seq), (77, 5)),
        t => panic!("{t:?}"),
    }
    assert_eq!(data, b"ping data");

    // A datagram to a closed port: port unreachable quoting its header and first 8 bytes.
    let dgram = udp_packet(sa(A, 1234), sa(B, 4321), b"hello there");
    inject(&mut raw, &dgram);
    b.poll(Instant::ZERO);
    let out = capture(&mut raw);
    let (t, quote) = icmp(&out[0]);
    assert!(
        matches!(
            t,
            Icmpv4Type::DestinationUnreachable(etherparse::icmpv4::DestUnreachableHeader::Port)
        ),
        "{t:?}"
    );
    assert_eq!(&quote[12..20], &dgram[12..20], "quoted addresses");
    assert_eq!(&quote[20..28], &dgram[20..28], "quoted UDP header");

    // A first fragment that never completes: time exceeded (reassembly) after the timeout.
    let mut frag = udp_packet(sa(A, 1), sa(B, 9), &[3; 64]);
    frag[6] = 0x20; // more fragments
    frag[10] = 0;
    frag[11] = 0;
    let sum = fastpath::checksum::rfc1071(&frag[..20]);
    frag[10..12].copy_from_slice(&(!sum).to_be_bytes());
    inject(&mut raw, &frag);
    b.poll(Instant::ZERO);
    assert!(capture(&mut raw).is_empty());
    b.poll(Instant::ZERO + Duration::from_secs(31));
    let out = capture(&mut raw);
    let (t, quote) = icmp(&out[0]);
    assert!(
        matches!(
            t,
            Icmpv4Type::TimeExceeded(
                etherparse::icmpv4::TimeExceededCode::FragmentReassemblyTimeExceeded
            )
        ),
        "{t:?}"
    );
    assert_eq!(&quote[..28], &frag[..28]);
}

#[test]
fn echo_request_we_send() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    b.send_echo_request(A, 9, 10, b"0123456789").unwrap();
    b.flush();
    let out = capture(&mut raw);
    let (t, data) = icmp(&out[0]);
    assert!(matches!(t, Icmpv4Type::EchoRequest(e) if e.id == 9 && e.seq == 10));
    assert_eq!(data, b"0123456789");
}

#[test]
fn a_socket_s_type_of_service_is_in_every_packet_it_sends() {
    // UDP: the whole byte is the application's, DSCP (46, expedited forwarding) and ECN (ECT(1)).
    for config in [StackConfig::default(), StackConfig::classic()] {
        let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
        b.add_ipv6_address(fastpath::InterfaceId(1), "fd00::2/64".parse().unwrap())
            .unwrap();
        let s = b.udp_bind(sa(B, 5000)).unwrap();
        let mut options = b.udp(s).options().unwrap();
        options.tos = 0xb9;
        b.udp(s).set_options(options).unwrap();
        for len in [8, 3000] {
            let data = payload(len, 1);
            b.udp(s).send_to(&data, sa(A, 6000)).unwrap();
            b.flush();
            let out = capture(&mut raw);
            assert!(!out.is_empty());
            for p in &out {
                // Fragments too; `parse` checks the header checksum with the byte in.
                assert_eq!(p[1], 0xb9, "{len} bytes");
                parse(p);
            }
        }
        let s6 = b.udp_bind("[fd00::2]:5000").unwrap();
        b.udp(s6).set_options(options).unwrap();
        b.udp(s6).send_to(b"tc", "[fd00::1]:6000").unwrap();
        b.flush();
        let out = capture(&mut raw);
        assert_eq!(out.len(), 1);
        let p = &out[0];
        assert_eq!(p[0] >> 4, 6);
        assert_eq!((p[0] << 4) | (p[1] >> 4), 0xb9, "the traffic class");
        assert_eq!(p[1] & 0x0f, 0, "no flow label");
    }
    // TCP: the DSCP only, from the next segment on; the ECN field is TCP's.
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    let c = b.tcp_connect(sa(A, 80)).unwrap();
    b.flush();
    let syn = capture(&mut raw);
    assert_eq!((syn.len(), syn[0][1]), (1, 0), "the SYN, before");
    b.tcp(c).set_tos(0xbb).unwrap();
    assert_eq!(b.tcp(c).tos().unwrap(), 0xb8);
    // The SYN's retransmission carries it.
    b.poll(Instant::from_secs(2));
    let again = capture(&mut raw);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0][1], 0xb8);
    parse(&again[0]);
}
