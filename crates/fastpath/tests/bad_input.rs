//! Hostile and malformed input: every packet is dropped with the right counter, and the stack still
//! serves afterwards.

mod common;

use std::time::Duration;

use common::*;
use fastpath::link::LinkCapabilities;
use fastpath::{DropReason, Instant, Stack, StackConfig};

fn stack() -> (Stack, fastpath::link::PairEnd, fastpath::UdpSocket) {
    let (mut b, raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    let s = b.udp_bind(sa(B, 9)).unwrap();
    (b, raw, s)
}

/// Injects `bytes`, polls, and checks that exactly `reason` was counted and nothing was delivered;
/// then checks that a good datagram still gets through.
fn dropped_as(bytes: &[u8], reason: DropReason) {
    let (mut b, mut raw, s) = stack();
    inject(&mut raw, bytes);
    b.poll(Instant::ZERO);
    let c = b.counters();
    assert_eq!(c.drops.get(reason), 1, "expected {reason:?}, got:\n{c}");
    assert_eq!(c.drops.total(), 1, "only {reason:?} expected:\n{c}");
    let mut buf = [0u8; 100];
    assert!(b.udp(s).recv(&mut buf).is_err());
    inject(&mut raw, &udp_packet(sa(A, 1), sa(B, 9), b"still here"));
    b.poll(Instant::ZERO);
    assert_eq!(b.udp(s).recv(&mut buf).unwrap(), 10);
}

fn good() -> Vec<u8> {
    udp_packet(sa(A, 1), sa(B, 9), b"payload!")
}

fn fix_ip_checksum(p: &mut [u8]) {
    let ihl = ((p[0] & 0xf) as usize * 4).min(p.len());
    p[10] = 0;
    p[11] = 0;
    let sum = fastpath::checksum::rfc1071(&p[..ihl]);
    p[10..12].copy_from_slice(&(!sum).to_be_bytes());
}

#[test]
fn empty_and_truncated_packets() {
    dropped_as(&[], DropReason::Ipv4Truncated);
    dropped_as(&good()[..19], DropReason::Ipv4Truncated);
}

#[test]
fn wrong_version() {
    let mut p = good();
    p[0] = 0x65;
    dropped_as(&p, DropReason::Ipv4BadVersion);
}

#[test]
fn ihl_below_5_or_past_the_packet() {
    let mut p = good();
    p[0] = 0x44;
    dropped_as(&p, DropReason::Ipv4BadHeaderLength);
    let mut p = good()[..24].to_vec();
    p[0] = 0x47;
    dropped_as(&p, DropReason::Ipv4BadHeaderLength);
}

#[test]
fn total_length_past_the_buffer_or_below_the_header() {
    let mut p = good();
    p[2..4].copy_from_slice(&1000u16.to_be_bytes());
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4BadTotalLength);
    let mut p = good();
    p[2..4].copy_from_slice(&10u16.to_be_bytes());
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4BadTotalLength);
}

#[test]
fn link_padding_past_the_total_length_is_ignored() {
    let (mut b, mut raw, s) = stack();
    let mut p = good();
    p.extend_from_slice(&[0xee; 30]);
    inject(&mut raw, &p);
    b.poll(Instant::ZERO);
    let mut buf = [0u8; 100];
    assert_eq!(b.udp(s).recv(&mut buf).unwrap(), 8);
}

#[test]
fn bad_header_checksum() {
    let mut p = good();
    p[10] ^= 1;
    dropped_as(&p, DropReason::Ipv4BadChecksum);
}

#[test]
fn ttl_zero() {
    let mut p = good();
    p[8] = 0;
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4TtlZero);
}

#[test]
fn broadcast_or_multicast_source() {
    for src in [[255, 255, 255, 255], [224, 0, 0, 1], [10, 0, 0, 255]] {
        let mut p = good();
        p[12..16].copy_from_slice(&src);
        fix_ip_checksum(&mut p);
        dropped_as(&p, DropReason::Ipv4BadSource);
    }
}

/// RFC 1122 §3.2.1.3: 127/8 must not appear outside a host. From a link, a loopback source is a bad
/// source and a loopback destination is not for us: no reply leaves with a 127/8 source.
#[test]
fn loopback_addresses_from_a_link() {
    let mut p = good();
    p[12..16].copy_from_slice(&[127, 0, 0, 1]);
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4BadSource);
    let mut p = good();
    p[16..20].copy_from_slice(&[127, 0, 0, 9]);
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4NotForUs);
    let (mut b, mut raw, _) = stack();
    let mut echo = vec![8, 0, 0, 0, 0, 1, 0, 1];
    let sum = fastpath::checksum::rfc1071(&echo);
    echo[2..4].copy_from_slice(&(!sum).to_be_bytes());
    inject(
        &mut raw,
        &ip_packet(A, "127.0.0.9".parse().unwrap(), 1, &echo),
    );
    b.poll(Instant::ZERO);
    assert!(
        capture(&mut raw).is_empty(),
        "answered from 127.0.0.9 on a link"
    );
    // Over loopback itself, 127/8 is as usual.
    let mut echo_lo = ip_packet(
        "127.0.0.1".parse().unwrap(),
        "127.0.0.9".parse().unwrap(),
        1,
        &echo,
    );
    fix_ip_checksum(&mut echo_lo);
    b.receive(
        fastpath::stack::LOOPBACK,
        fastpath::buf::PacketBuf::from_slice(&echo_lo),
    );
    b.poll(Instant::ZERO);
    assert_eq!(b.counters().icmp.out_echo_reps, 1);
    assert_eq!(b.recv_echo_reply().map(|r| r.seq_no), Some(1));
}

#[test]
fn not_for_us() {
    let mut p = good();
    p[16..20].copy_from_slice(&[10, 0, 0, 77]);
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4NotForUs);
}

#[test]
fn unknown_protocol_gets_protocol_unreachable() {
    let p = ip_packet(A, B, 99, b"whatever");
    let (mut b, mut raw, _) = stack();
    inject(&mut raw, &p);
    b.poll(Instant::ZERO);
    assert_eq!(b.counters().drops.get(DropReason::Ipv4UnknownProtocol), 1);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0][20], out[0][21]),
        (3, 2),
        "ICMP protocol unreachable"
    );
}

#[test]
fn udp_length_field_larger_or_smaller_than_the_ip_payload() {
    let mut p = good();
    p[24..26].copy_from_slice(&200u16.to_be_bytes());
    dropped_as(&p, DropReason::UdpBadLength);
    let mut p = good();
    p[24..26].copy_from_slice(&4u16.to_be_bytes());
    dropped_as(&p, DropReason::UdpBadLength);
    // Smaller than the IP payload but valid: the excess is ignored (as Linux does); the checksum covers
    // the UDP length only.
    let mut inner = udp_packet(sa(A, 1), sa(B, 9), b"payload!")[20..].to_vec();
    inner.extend_from_slice(b"trailing junk");
    let p = ip_packet(A, B, 17, &inner);
    let (mut b, mut raw, s) = stack();
    inject(&mut raw, &p);
    b.poll(Instant::ZERO);
    let mut buf = [0u8; 100];
    assert_eq!(b.udp(s).recv(&mut buf).unwrap(), 8);
}

#[test]
fn udp_truncated() {
    dropped_as(&ip_packet(A, B, 17, &[0, 1, 0]), DropReason::UdpTruncated);
}

#[test]
fn zero_udp_checksum_means_none_and_is_accepted() {
    let mut p = good();
    p[26] = 0;
    p[27] = 0;
    let (mut b, mut raw, s) = stack();
    inject(&mut raw, &p);
    b.poll(Instant::ZERO);
    let mut buf = [0u8; 100];
    assert_eq!(b.udp(s).recv(&mut buf).unwrap(), 8);
    assert_eq!(b.counters().udp.in_no_checksum, 1);
}

#[test]
fn icmp_truncated_bad_checksum_and_unknown() {
    dropped_as(&ip_packet(A, B, 1, &[8, 0, 0]), DropReason::IcmpTruncated);
    dropped_as(
        &ip_packet(A, B, 1, &[8, 0, 0, 0, 0, 1, 0, 1]),
        DropReason::IcmpBadChecksum,
    );
    let mut unknown = vec![42, 0, 0, 0, 0, 0, 0, 0];
    let sum = fastpath::checksum::rfc1071(&unknown);
    unknown[2..4].copy_from_slice(&(!sum).to_be_bytes());
    dropped_as(&ip_packet(A, B, 1, &unknown), DropReason::IcmpUnhandled);
}

/// A fragment of a UDP datagram from A, built by hand.
fn fragment(ident: u16, offset: usize, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut p = ip_packet(A, B, 17, payload);
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    let field = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    p[6..8].copy_from_slice(&field.to_be_bytes());
    fix_ip_checksum(&mut p);
    p
}

#[test]
fn fragment_attacks() {
    // Teardrop: the second fragment overlaps the first.
    let (mut b, mut raw, _) = stack();
    inject(&mut raw, &fragment(1, 0, true, &[0; 32]));
    inject(&mut raw, &fragment(1, 24, false, &[0; 32]));
    b.poll(Instant::ZERO);
    assert_eq!(b.counters().drops.get(DropReason::ReassemblyOverlap), 1);
    assert_eq!(b.reassembly_stats(), (0, 0));
    // Ping of death: a fragment reaching past 65535 bytes.
    dropped_as(
        &fragment(2, 65528, false, &[0; 16]),
        DropReason::FragmentTooBig,
    );
    // Tiny first fragment and a non-final fragment that is not a multiple of 8.
    dropped_as(
        &fragment(3, 0, true, &[0; 0]),
        DropReason::FragmentBadLength,
    );
    dropped_as(
        &fragment(4, 0, true, &[0; 12]),
        DropReason::FragmentBadLength,
    );
}

#[test]
fn a_flood_of_incomplete_fragments_stays_under_the_caps_and_times_out() {
    let mut config = StackConfig::default();
    config.limits.reassembly_datagrams = 16;
    config.limits.reassembly_bytes = 64 * 1024;
    let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
    for ident in 0..5000u16 {
        inject(&mut raw, &fragment(ident, 0, true, &[7; 1024]));
        if ident % 100 == 0 {
            b.poll(Instant::ZERO);
            let (n, bytes) = b.reassembly_stats();
            assert!(
                n <= 16 && bytes <= 64 * 1024,
                "{n} datagrams, {bytes} bytes"
            );
        }
    }
    b.poll(Instant::ZERO);
    assert!(b.counters().drops.get(DropReason::ReassemblyEvicted) > 4000);
    b.poll(Instant::ZERO + Duration::from_secs(31));
    assert_eq!(b.reassembly_stats(), (0, 0));
    assert!(b.counters().drops.get(DropReason::ReassemblyTimeout) > 0);
    // Time exceeded went out for the expired ones whose first fragment arrived (rate permitting).
    assert!(b.counters().icmp.out_time_excds > 0);
}

#[test]
fn random_garbage_never_panics_and_every_packet_is_accounted_for() {
    let (mut b, mut raw, _) = stack();
    let mut rng = fastpath::rng::Rng::new(1);
    let mut templates = vec![
        good(),
        fragment(9, 0, true, &[1; 16]),
        ip_packet(A, B, 1, &[8, 0, 0, 0, 0, 0, 0, 0]),
    ];
    templates.push(ip_packet(A, B, 17, &[0; 4]));
    for i in 0..20000 {
        let mut p = templates[i % templates.len()].clone();
        let flips = 1 + rng.below(4);
        for _ in 0..flips {
            let at = rng.below(p.len() as u64) as usize;
            p[at] = rng.next_u64() as u8;
        }
        p.truncate(rng.below(p.len() as u64 + 1) as usize);
        inject(&mut raw, &p);
        if i % 64 == 0 {
            b.poll(Instant::ZERO);
        }
    }
    b.poll(Instant::ZERO);
    let c = b.counters();
    assert_eq!(c.ip.in_receives, 20000);
    // Every packet was either delivered to a protocol or dropped at IP.
    let ip_drops: u64 = fastpath::DropReason::ALL
        .iter()
        .filter(|r| r.label().starts_with("ipv4:"))
        .map(|&r| c.drops.get(r))
        .sum();
    assert_eq!(
        c.ip.in_delivers + ip_drops + c.ip.reasm_reqds - c.ip.reasm_oks,
        20000,
        "{c}"
    );
}

/// RFC 1122 §4.1.3.4: a datagram with a bad checksum is discarded silently, even when no socket wants
/// it: no port unreachable goes back (deferred verification used to send one), and it counts as a bad
/// checksum, whatever the configuration.
#[test]
fn a_corrupted_datagram_to_a_closed_port_gets_no_port_unreachable() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
        let mut p = udp_packet(sa(A, 1000), sa(B, 4444), b"corrupted");
        p[30] ^= 0x55;
        inject(&mut raw, &p);
        let b_broadcast = std::net::Ipv4Addr::new(10, 0, 0, 255);
        let mut broadcast = udp_packet(sa(A, 1000), sa(b_broadcast, 4444), b"corrupted");
        broadcast[30] ^= 0x55;
        inject(&mut raw, &broadcast);
        b.poll(Instant::ZERO);
        assert!(
            capture(&mut raw).is_empty(),
            "an ICMP error about a corrupted datagram"
        );
        let c = b.counters();
        assert_eq!(c.drops.get(DropReason::UdpBadChecksum), 2, "{c}");
        assert_eq!(c.drops.get(DropReason::UdpNoSocket), 0, "{c}");
        // An intact one still gets its port unreachable.
        inject(&mut raw, &udp_packet(sa(A, 1000), sa(B, 4444), b"intact"));
        b.poll(Instant::ZERO);
        assert_eq!(capture(&mut raw).len(), 1);
    }
}

/// RFC 1122 §3.2.2: no ICMP error about a datagram addressed to a broadcast. A fragment of one that
/// never completes times out silently (one to this host's own address still draws a time exceeded).
#[test]
fn no_time_exceeded_about_a_broadcast() {
    let (mut b, mut raw, _) = stack();
    for (ident, dst) in [
        (1u16, [10, 0, 0, 255]),
        (2, [255, 255, 255, 255]),
        (3, [10, 0, 0, 2]),
    ] {
        let mut p = fragment(ident, 0, true, &[0; 16]);
        p[16..20].copy_from_slice(&dst);
        fix_ip_checksum(&mut p);
        inject(&mut raw, &p);
    }
    b.poll(Instant::ZERO);
    b.poll(Instant::ZERO + Duration::from_secs(31));
    assert_eq!(b.counters().drops.get(DropReason::ReassemblyTimeout), 3);
    let out = capture(&mut raw);
    assert_eq!(
        out.len(),
        1,
        "time exceeded only about the unicast datagram"
    );
    assert_eq!((out[0][20], out[0][21]), (11, 1));
    assert_eq!(out[0][28 + 16..28 + 20], [10, 0, 0, 2]);
}

/// A datagram to 127.0.0.9 from a host on a link, fed straight into the loopback interface through
/// `Stack::receive` (which a real loopback never carries): the port unreachable goes back on the link
/// from the link's address, never from 127/8.
#[test]
fn an_error_leaving_on_a_link_never_comes_from_loopback() {
    let (mut b, mut raw, _) = stack();
    let p = udp_packet(sa(A, 1000), sa("127.0.0.9".parse().unwrap(), 4444), b"x");
    b.receive(
        fastpath::stack::LOOPBACK,
        fastpath::buf::PacketBuf::from_slice(&p),
    );
    b.poll(Instant::ZERO);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0][20], out[0][21]), (3, 3), "port unreachable");
    assert_eq!(out[0][12..16], B.octets(), "its source");
}

/// RFC 1122 §3.2.2: no ICMP error about an ICMP error. A fragmented ICMP error message (here a port
/// unreachable) that never completes times out silently; a fragmented echo request still draws a
/// time exceeded.
#[test]
fn no_time_exceeded_about_an_icmp_error() {
    let (mut b, mut raw, _) = stack();
    for (ident, icmp_type) in [(1u16, 3u8), (2, 11), (3, 8)] {
        let mut message = vec![0u8; 32];
        message[0] = icmp_type;
        let mut p = fragment(ident, 0, true, &message);
        p[9] = 1;
        fix_ip_checksum(&mut p);
        inject(&mut raw, &p);
    }
    b.poll(Instant::ZERO);
    b.poll(Instant::ZERO + Duration::from_secs(31));
    assert_eq!(b.counters().drops.get(DropReason::ReassemblyTimeout), 3);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "time exceeded only about the echo request");
    assert_eq!(out[0][28 + 20], 8, "the quoted message is the echo request");
}
