//! Hostile input and resource bounds: every attack has one test here, which checks both that the
//! right counter moved (a [`DropReason`], or a limit's own counter) and that the stack survives and
//! still serves afterwards (a datagram, and a fragmented one, still reach a socket intact).
//!
//! - Malformed IPv4: truncated, wrong version, IHL below 5 or past the packet, total length past the
//!   buffer or below the header, bad or zero header checksum, TTL 0, broadcast, multicast or loopback
//!   sources, not for us, unknown protocol.
//! - UDP: length field larger or smaller than the IP payload, truncated, zero checksum (allowed: "none"),
//!   a corrupted datagram to a closed port (no port unreachable).
//! - ICMP: truncated, bad or zero checksum (not allowed), unknown type, ping flood (answered; smurf
//!   ignored), error floods (limited per destination and in all),
//!   echo reply flood, no error about broadcasts or errors, no 127/8 source on a link.
//! - Fragments: teardrop, ping of death, tiny first fragments, too many fragments, floods of
//!   never-completed sets against the datagram and byte caps (oldest evicted, timeouts fire).
//! - Floods against the other limits: a socket that never reads, the loopback queue, the pool.
//! - Random garbage: no panic, every packet accounted for.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::common::*;
use fastpath::buf::{PacketBuf, HEADROOM};
use fastpath::link::{LinkCapabilities, PairEnd};
use fastpath::stack::LOOPBACK;
use fastpath::{DropReason, Instant, Stack, StackConfig, UdpSocket};

const T0: Instant = Instant::ZERO;
const B_BROADCAST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 255);

/// The stack under attack (B, 10.0.0.2/24 on a pair), the attacker's raw end of the pair, and a
/// socket on B:9.
struct Target {
    b: Stack,
    raw: PairEnd,
    s: UdpSocket,
}

impl Target {
    fn new() -> Target {
        Target::with(StackConfig::default(), 1500)
    }

    fn with(config: StackConfig, mtu: usize) -> Target {
        let (mut b, raw) = stack_and_raw(config, LinkCapabilities::plain(mtu));
        let s = b.udp_bind(sa(B, 9)).unwrap();
        Target { b, raw, s }
    }

    fn inject(&mut self, bytes: &[u8]) {
        inject(&mut self.raw, bytes);
    }

    fn poll(&mut self, now: Instant) {
        while self.b.poll(now) > 0 {}
    }

    /// What the stack sent back.
    fn sent(&mut self) -> Vec<Vec<u8>> {
        capture(&mut self.raw)
    }

    fn drops(&self, reason: DropReason) -> u64 {
        self.b.counters().drops.get(reason)
    }

    /// Reads the socket dry; returns how many datagrams there were.
    fn drain(&mut self) -> usize {
        let mut buf = vec![0u8; 65536];
        std::iter::from_fn(|| self.b.udp(self.s).recv(&mut buf).ok()).count()
    }

    /// The stack survives and still serves: a datagram and a fragmented one (3 fragments) to B:9
    /// arrive intact, and nothing is left over in reassembly from them.
    fn still_serves(&mut self, now: Instant) {
        self.drain();
        let mut buf = vec![0u8; 65536];
        self.inject(&udp_packet(sa(A, 1000), sa(B, 9), b"still here"));
        self.poll(now);
        let n = self
            .b
            .udp(self.s)
            .recv(&mut buf)
            .expect("a datagram after the attack");
        assert_eq!(&buf[..n], b"still here");
        let big = payload(3000, 99);
        let held = self.b.reassembly_stats().0;
        for f in fragmented_udp(0xfffe, 9, &big, 1480) {
            self.inject(&f);
        }
        self.poll(now);
        let n = self
            .b
            .udp(self.s)
            .recv(&mut buf)
            .expect("a fragmented datagram after the attack");
        assert_eq!(&buf[..n], &big[..]);
        assert!(self.b.reassembly_stats().0 <= held);
    }
}

/// Injects `bytes`, and checks that exactly `reason` was counted, nothing was delivered and nothing
/// was sent back; then that the stack still serves.
fn dropped_as(bytes: &[u8], reason: DropReason) {
    let mut t = Target::new();
    t.inject(bytes);
    t.poll(T0);
    let c = t.b.counters();
    assert_eq!(c.drops.get(reason), 1, "expected {reason:?}, got:\n{c}");
    assert_eq!(c.drops.total(), 1, "only {reason:?} expected:\n{c}");
    assert_eq!(t.drain(), 0, "delivered");
    assert!(t.sent().is_empty(), "answered");
    t.still_serves(T0);
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

/// A fragment from A to B of protocol 17 carrying `payload` (not necessarily a real datagram).
fn fragment(ident: u16, offset: usize, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut p = ip_packet(A, B, 17, payload);
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    let field = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    p[6..8].copy_from_slice(&field.to_be_bytes());
    fix_ip_checksum(&mut p);
    p
}

/// A real UDP datagram from A:1000 to B:`port` with `data`, checksum included, in fragments of
/// `piece` bytes (a multiple of 8).
fn fragmented_udp(ident: u16, port: u16, data: &[u8], piece: usize) -> Vec<Vec<u8>> {
    let whole = udp_packet(sa(A, 1000), sa(B, port), data);
    let udp = &whole[20..];
    (0..udp.len())
        .step_by(piece)
        .map(|at| {
            let end = (at + piece).min(udp.len());
            fragment(ident, at, end < udp.len(), &udp[at..end])
        })
        .collect()
}

/// An ICMP message with its checksum.
fn icmp(msg_type: u8, rest: [u8; 4], data: &[u8]) -> Vec<u8> {
    let mut m = vec![msg_type, 0, 0, 0];
    m.extend_from_slice(&rest);
    m.extend_from_slice(data);
    let sum = fastpath::checksum::rfc1071(&m);
    m[2..4].copy_from_slice(&(!sum).to_be_bytes());
    m
}

fn echo_request(dst: Ipv4Addr, seq: u16) -> Vec<u8> {
    let [hi, lo] = seq.to_be_bytes();
    ip_packet(A, dst, 1, &icmp(8, [0, 7, hi, lo], b"ping"))
}

// ---------------------------------------------------------------------------------------------
// Malformed IPv4 headers.

#[test]
fn empty_and_truncated_packets() {
    dropped_as(&[], DropReason::Ipv4Truncated);
    dropped_as(&good()[..19], DropReason::Ipv4Truncated);
}

#[test]
fn wrong_version() {
    for version in (0..16u8).filter(|&v| v != 4 && v != 6) {
        let mut p = good();
        p[0] = version << 4 | 5;
        dropped_as(&p, DropReason::Ipv4BadVersion);
    }
    // Version 6 is IPv6's: this 20-byte header is too short for one.
    let mut p = good();
    p[0] = 0x65;
    dropped_as(&p, DropReason::Ipv6Truncated);
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
    // IHL 6 (24 bytes of header) in a packet whose total length says 22.
    let mut p = good();
    p[0] = 0x46;
    p[2..4].copy_from_slice(&22u16.to_be_bytes());
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4BadTotalLength);
}

#[test]
fn link_padding_past_the_total_length_is_ignored() {
    let mut t = Target::new();
    let mut p = good();
    p.extend_from_slice(&[0xee; 30]);
    t.inject(&p);
    t.poll(T0);
    let mut buf = [0u8; 100];
    assert_eq!(t.b.udp(t.s).recv(&mut buf).unwrap(), 8);
    assert_eq!(t.b.counters().drops.total(), 0);
}

/// A wrong header checksum, and a zero one (IPv4 has no "no checksum").
#[test]
fn bad_or_zero_header_checksum() {
    let mut p = good();
    p[10] ^= 1;
    dropped_as(&p, DropReason::Ipv4BadChecksum);
    let mut p = good();
    p[10..12].copy_from_slice(&[0, 0]);
    dropped_as(&p, DropReason::Ipv4BadChecksum);
}

/// TTL 0 and 1 are delivered (RFC 1122 §3.2.1.7: a host must not discard a datagram for a TTL below
/// 2; Linux delivers them), and TTL 0 dropped, counted, with `accept_ttl_zero` off.
#[test]
fn ttl_zero() {
    for ttl in [0, 1] {
        let mut t = Target::new();
        let mut p = good();
        p[8] = ttl;
        fix_ip_checksum(&mut p);
        t.inject(&p);
        t.poll(T0);
        assert_eq!(t.drain(), 1, "ttl {ttl}");
    }
    let config = StackConfig {
        accept_ttl_zero: false,
        ..StackConfig::default()
    };
    let mut t = Target::with(config, 1500);
    let mut p = good();
    p[8] = 0;
    fix_ip_checksum(&mut p);
    t.inject(&p);
    t.poll(T0);
    assert_eq!(t.drain(), 0);
    assert_eq!(t.b.counters().drops.get(DropReason::Ipv4TtlZero), 1);
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
    let mut t = Target::new();
    t.inject(&echo_request(Ipv4Addr::new(127, 0, 0, 9), 1));
    t.poll(T0);
    assert!(t.sent().is_empty(), "answered from 127.0.0.9 on a link");
    // Over loopback itself, 127/8 is as usual.
    let mut echo = echo_request(Ipv4Addr::new(127, 0, 0, 9), 1);
    echo[12..16].copy_from_slice(&[127, 0, 0, 1]);
    fix_ip_checksum(&mut echo);
    t.b.receive(LOOPBACK, PacketBuf::from_slice(&echo));
    t.poll(T0);
    assert_eq!(t.b.counters().icmp.out_echo_reps, 1);
    assert_eq!(t.b.recv_echo_reply().map(|r| r.seq_no), Some(1));
}

/// A datagram to 127.0.0.9 from a host on a link, fed straight into the loopback interface through
/// `Stack::receive` (which a real loopback never carries): the port unreachable goes back on the link
/// from the link's address, never from 127/8.
#[test]
fn an_error_leaving_on_a_link_never_comes_from_loopback() {
    let mut t = Target::new();
    let p = udp_packet(sa(A, 1000), sa(Ipv4Addr::new(127, 0, 0, 9), 4444), b"x");
    t.b.receive(LOOPBACK, PacketBuf::from_slice(&p));
    t.poll(T0);
    let out = t.sent();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0][20], out[0][21]), (3, 3), "port unreachable");
    assert_eq!(out[0][12..16], B.octets(), "its source");
    t.still_serves(T0);
}

#[test]
fn not_for_us() {
    let mut p = good();
    p[16..20].copy_from_slice(&[10, 0, 0, 77]);
    fix_ip_checksum(&mut p);
    dropped_as(&p, DropReason::Ipv4NotForUs);
}

/// An unknown protocol draws a protocol unreachable, but not when sent to a broadcast.
#[test]
fn unknown_protocol_gets_protocol_unreachable() {
    let mut t = Target::new();
    t.inject(&ip_packet(A, B, 99, b"whatever"));
    t.inject(&ip_packet(A, B_BROADCAST, 99, b"whatever"));
    t.poll(T0);
    assert_eq!(t.drops(DropReason::Ipv4UnknownProtocol), 2);
    let out = t.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0][20], out[0][21]),
        (3, 2),
        "ICMP protocol unreachable"
    );
    t.still_serves(T0);
}

// ---------------------------------------------------------------------------------------------
// UDP.

/// Above the IP payload: dropped. Below 8: dropped. Below the IP payload but valid: the excess is
/// ignored (as Linux does; the checksum covers the UDP length only).
#[test]
fn udp_length_field_larger_or_smaller_than_the_ip_payload() {
    let mut p = good();
    p[24..26].copy_from_slice(&200u16.to_be_bytes());
    dropped_as(&p, DropReason::UdpBadLength);
    let mut p = good();
    p[24..26].copy_from_slice(&4u16.to_be_bytes());
    dropped_as(&p, DropReason::UdpBadLength);
    let mut inner = good()[20..].to_vec();
    inner.extend_from_slice(b"trailing junk");
    let mut t = Target::new();
    t.inject(&ip_packet(A, B, 17, &inner));
    t.poll(T0);
    let mut buf = [0u8; 100];
    assert_eq!(t.b.udp(t.s).recv(&mut buf).unwrap(), 8);
    assert_eq!(&buf[..8], b"payload!");
}

#[test]
fn udp_truncated() {
    dropped_as(&ip_packet(A, B, 17, &[0, 1, 0]), DropReason::UdpTruncated);
}

/// In IPv4 a zero UDP checksum means "none" (RFC 768) and is accepted, whatever the configuration;
/// a wrong non-zero one is dropped.
#[test]
fn zero_udp_checksum_means_none_and_is_accepted() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let mut t = Target::with(config, 1500);
        let mut p = good();
        p[26..28].copy_from_slice(&[0, 0]);
        t.inject(&p);
        let mut wrong = good();
        wrong[27] ^= 0x40;
        t.inject(&wrong);
        t.poll(T0);
        let mut buf = [0u8; 100];
        assert_eq!(t.b.udp(t.s).recv(&mut buf).unwrap(), 8);
        assert!(
            t.b.udp(t.s).recv(&mut buf).is_err(),
            "the wrong one was delivered"
        );
        assert_eq!(t.b.counters().udp.in_no_checksum, 1);
        assert_eq!(t.drops(DropReason::UdpBadChecksum), 1);
        t.still_serves(T0);
    }
}

/// RFC 1122 §4.1.3.4: a datagram with a bad checksum is discarded silently, even when no socket wants
/// it: no port unreachable goes back (deferred verification used to send one), and it counts as a bad
/// checksum, whatever the configuration.
#[test]
fn a_corrupted_datagram_to_a_closed_port_gets_no_port_unreachable() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let mut t = Target::with(config, 1500);
        let mut p = udp_packet(sa(A, 1000), sa(B, 4444), b"corrupted");
        p[30] ^= 0x55;
        t.inject(&p);
        let mut broadcast = udp_packet(sa(A, 1000), sa(B_BROADCAST, 4444), b"corrupted");
        broadcast[30] ^= 0x55;
        t.inject(&broadcast);
        t.poll(T0);
        assert!(
            t.sent().is_empty(),
            "an ICMP error about a corrupted datagram"
        );
        assert_eq!(t.drops(DropReason::UdpBadChecksum), 2);
        assert_eq!(t.drops(DropReason::UdpNoSocket), 0);
        // An intact one still gets its port unreachable.
        t.inject(&udp_packet(sa(A, 1000), sa(B, 4444), b"intact"));
        t.poll(T0);
        assert_eq!(t.sent().len(), 1);
        t.still_serves(T0);
    }
}

// ---------------------------------------------------------------------------------------------
// ICMP.

#[test]
fn icmp_truncated_bad_checksum_and_unknown() {
    dropped_as(&ip_packet(A, B, 1, &[8, 0, 0]), DropReason::IcmpTruncated);
    dropped_as(
        &ip_packet(A, B, 1, &[8, 0, 0, 0, 0, 1, 0, 1]),
        DropReason::IcmpBadChecksum,
    );
    dropped_as(
        &ip_packet(A, B, 1, &icmp(42, [0; 4], &[])),
        DropReason::IcmpUnhandled,
    );
}

/// ICMP has no "no checksum": a zero field on a message whose checksum is not zero is a bad checksum
/// (no reply), and a message whose checksum really is zero is answered.
#[test]
fn a_zero_icmp_checksum_is_not_allowed() {
    let mut zeroed = icmp(8, [0, 1, 0, 1], b"ping");
    zeroed[2..4].copy_from_slice(&[0, 0]);
    dropped_as(&ip_packet(A, B, 1, &zeroed), DropReason::IcmpBadChecksum);
    // 0x0800 + 0xf7ff = 0xffff: the checksum of this echo request is 0x0000.
    let real_zero = icmp(8, [0xf7, 0xff, 0, 0], &[]);
    assert_eq!(real_zero[2..4], [0, 0]);
    let mut t = Target::new();
    t.inject(&ip_packet(A, B, 1, &real_zero));
    t.poll(T0);
    assert_eq!(t.sent().len(), 1, "no reply to a valid zero checksum");
}

/// A third host on B's link.
const C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);

/// A ping flood is answered in full (echo replies are not rate-limited, as in Linux: each answers one
/// request and is no larger than it); echo requests to a broadcast are ignored (no smurf
/// amplification); and the stack keeps serving UDP throughout.
#[test]
fn a_ping_flood_is_answered_but_never_a_broadcast_one() {
    let mut t = Target::new();
    for seq in 0..2000 {
        t.inject(&echo_request(B, seq));
    }
    t.poll(T0);
    let replies = t.sent();
    assert_eq!(replies.len(), 2000);
    assert!(replies.iter().all(|r| r[20] == 0), "echo replies");
    assert_eq!(t.drops(DropReason::IcmpRateLimited), 0);
    assert_eq!(t.drops(DropReason::IcmpPeerRateLimited), 0);
    let c = t.b.counters();
    assert_eq!(c.icmp.out_echo_reps, 2000);
    t.still_serves(T0);
    // Smurf: a broadcast echo request is not answered at all.
    t.inject(&echo_request(B_BROADCAST, 1));
    t.inject(&echo_request(Ipv4Addr::BROADCAST, 2));
    t.poll(T0);
    assert!(t.sent().is_empty());
    assert_eq!(t.drops(DropReason::IcmpBroadcastEcho), 2);
    t.still_serves(T0);
}

/// Port unreachables for a flood of UDP to a closed port from A are held to A's own budget
/// (`icmp_peer_burst` at once, then one per `icmp_peer_interval`, Linux's `icmp_ratelimit`), counted;
/// meanwhile C's pings are all answered and C's errors still go out. Errors to all hosts together are
/// held to the global budget (`icmp_burst`, then `icmp_rate_per_sec`).
#[test]
fn errors_are_limited_per_destination_and_in_all() {
    let mut t = Target::new();
    let limits = t.b.config().limits.clone();
    let peer_burst = limits.icmp_peer_burst as usize;
    let closed = |src| udp_packet(sa(src, 1000), sa(B, 4444), b"closed");
    let is_port_unreachable = |p: &Vec<u8>| p[9] == 1 && p[20] == 3 && p[21] == 3;
    for _ in 0..1000 {
        t.inject(&closed(A));
    }
    t.poll(T0);
    let sent = t.sent();
    assert_eq!(sent.len(), peer_burst);
    assert!(sent
        .iter()
        .all(|p| is_port_unreachable(p) && p[16..20] == A.octets()));
    assert_eq!(
        t.drops(DropReason::IcmpPeerRateLimited),
        1000 - peer_burst as u64
    );
    assert_eq!(t.drops(DropReason::UdpNoSocket), 1000);
    // C: every ping answered, and its own errors sent.
    for seq in 0..100 {
        let [hi, lo] = u16::to_be_bytes(seq);
        t.inject(&ip_packet(C, B, 1, &icmp(8, [0, 9, hi, lo], b"ping")));
    }
    t.inject(&closed(C));
    t.inject(&closed(A));
    t.poll(T0);
    let sent = t.sent();
    let (to_c, to_a): (Vec<_>, Vec<_>) = sent.into_iter().partition(|p| p[16..20] == C.octets());
    assert_eq!(to_a.len(), 0, "A's budget is spent");
    assert_eq!(to_c.iter().filter(|p| p[20] == 0).count(), 100);
    assert_eq!(to_c.iter().filter(|p| is_port_unreachable(p)).count(), 1);
    // A second buys A one more.
    let t1 = T0 + limits.icmp_peer_interval;
    for _ in 0..10 {
        t.inject(&closed(A));
    }
    t.poll(t1);
    assert_eq!(t.sent().len(), 1);
    assert_eq!(t.drops(DropReason::IcmpRateLimited), 0);
    // Errors to many hosts at once meet the global budget: the burst, then the rate.
    let t2 = t1 + Duration::from_secs(10);
    for host in 10..210u8 {
        t.inject(&closed(Ipv4Addr::new(10, 0, 0, host)));
    }
    t.poll(t2);
    assert_eq!(t.sent().len(), limits.icmp_burst as usize);
    assert_eq!(
        t.drops(DropReason::IcmpRateLimited),
        200 - u64::from(limits.icmp_burst)
    );
    t.still_serves(t2);
}

/// Echo replies nobody reads are kept up to `echo_reply_queue`; the rest are dropped, counted.
#[test]
fn an_echo_reply_flood_is_bounded() {
    let mut t = Target::new();
    for seq in 0..100u16 {
        let [hi, lo] = seq.to_be_bytes();
        t.inject(&ip_packet(A, B, 1, &icmp(0, [0, 7, hi, lo], b"pong")));
    }
    t.poll(T0);
    let limit = t.b.config().limits.echo_reply_queue;
    assert_eq!(
        t.drops(DropReason::IcmpEchoReplyDropped),
        100 - limit as u64
    );
    assert_eq!(std::iter::from_fn(|| t.b.recv_echo_reply()).count(), limit);
    t.still_serves(T0);
}

/// RFC 1122 §3.2.2: no ICMP error about a datagram addressed to a broadcast. A fragment of one that
/// never completes times out silently (one to this host's own address still draws a time exceeded).
#[test]
fn no_time_exceeded_about_a_broadcast() {
    let mut t = Target::new();
    for (ident, dst) in [
        (1u16, [10, 0, 0, 255]),
        (2, [255, 255, 255, 255]),
        (3, [10, 0, 0, 2]),
    ] {
        let mut p = fragment(ident, 0, true, &[0; 16]);
        p[16..20].copy_from_slice(&dst);
        fix_ip_checksum(&mut p);
        t.inject(&p);
    }
    t.poll(T0);
    let later = T0 + Duration::from_secs(31);
    t.poll(later);
    assert_eq!(t.drops(DropReason::ReassemblyTimeout), 3);
    let out = t.sent();
    assert_eq!(
        out.len(),
        1,
        "time exceeded only about the unicast datagram"
    );
    assert_eq!((out[0][20], out[0][21]), (11, 1));
    assert_eq!(out[0][28 + 16..28 + 20], [10, 0, 0, 2]);
    t.still_serves(later);
}

/// RFC 1122 §3.2.2: no ICMP error about an ICMP error. A fragmented ICMP error message (here a port
/// unreachable) that never completes times out silently; a fragmented echo request still draws a
/// time exceeded.
#[test]
fn no_time_exceeded_about_an_icmp_error() {
    let mut t = Target::new();
    for (ident, icmp_type) in [(1u16, 3u8), (2, 11), (3, 8)] {
        let mut message = vec![0u8; 32];
        message[0] = icmp_type;
        let mut p = fragment(ident, 0, true, &message);
        p[9] = 1;
        fix_ip_checksum(&mut p);
        t.inject(&p);
    }
    t.poll(T0);
    let later = T0 + Duration::from_secs(31);
    t.poll(later);
    assert_eq!(t.drops(DropReason::ReassemblyTimeout), 3);
    let out = t.sent();
    assert_eq!(out.len(), 1, "time exceeded only about the echo request");
    assert_eq!(out[0][28 + 20], 8, "the quoted message is the echo request");
    t.still_serves(later);
}

// ---------------------------------------------------------------------------------------------
// Fragments.

/// Teardrop and its variants: a fragment inside another, one reaching into the next, one reaching
/// back into the previous. Each discards its whole datagram (as Linux does since CVE-2018-5391); an
/// exact duplicate is dropped alone and the datagram still completes.
#[test]
fn teardrop_overlapping_fragments() {
    let mut t = Target::new();
    t.inject(&fragment(1, 0, true, &[0; 32]));
    t.inject(&fragment(1, 24, false, &[0; 4]));
    t.inject(&fragment(2, 0, true, &[0; 32]));
    t.inject(&fragment(2, 16, false, &[0; 32]));
    t.inject(&fragment(3, 16, false, &[0; 16]));
    t.inject(&fragment(3, 0, true, &[0; 24]));
    t.poll(T0);
    assert_eq!(t.drops(DropReason::ReassemblyOverlap), 3);
    assert_eq!(t.b.reassembly_stats(), (0, 0));
    assert_eq!(t.b.counters().ip.reasm_oks, 0);
    assert_eq!(t.drain(), 0);
    let pieces = fragmented_udp(4, 9, &payload(100, 4), 48);
    for p in [&pieces[0], &pieces[0], &pieces[1], &pieces[2]] {
        t.inject(p);
    }
    t.poll(T0);
    assert_eq!(t.drops(DropReason::FragmentDuplicate), 1);
    assert_eq!(t.drain(), 1);
    t.still_serves(T0);
}

/// Ping of death: a fragment whose end would be past 65,535 bytes is dropped; one that ends exactly
/// at 65,535 is held.
#[test]
fn ping_of_death_fragment_past_65535() {
    dropped_as(
        &fragment(2, 65528, false, &[0; 16]),
        DropReason::FragmentTooBig,
    );
    dropped_as(
        &fragment(2, 65512, false, &[0; 4]),
        DropReason::FragmentTooBig,
    );
    let mut t = Target::new();
    t.inject(&fragment(2, 65512, false, &[0; 3]));
    t.poll(T0);
    assert_eq!(t.b.counters().drops.total(), 0);
    assert_eq!(t.b.reassembly_stats().0, 1);
    t.still_serves(T0);
}

/// A first fragment of 1 to 7 bytes (or none) is not a multiple of 8 and is dropped; the smallest
/// legal one, 8 bytes, holds the whole UDP header, and its datagram reassembles intact. (Because a
/// non-final fragment is a multiple of 8 bytes, `FragmentTinyFirst` cannot occur for UDP or ICMP,
/// whose headers are 8 bytes: the length check catches every shorter first fragment.)
#[test]
fn tiny_first_fragments() {
    for len in [0, 1, 4, 7] {
        dropped_as(
            &fragment(3, 0, true, &vec![0; len]),
            DropReason::FragmentBadLength,
        );
    }
    let mut t = Target::new();
    let data = payload(40, 3);
    for p in fragmented_udp(5, 9, &data, 8) {
        t.inject(&p);
    }
    t.poll(T0);
    let mut buf = [0u8; 100];
    let n = t.b.udp(t.s).recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], &data[..]);
    assert_eq!(t.drops(DropReason::FragmentTinyFirst), 0);
    t.still_serves(T0);
}

/// More fragments than `reassembly_fragments` discard the datagram.
#[test]
fn too_many_fragments() {
    let mut config = StackConfig::default();
    config.limits.reassembly_fragments = 4;
    let mut t = Target::with(config, 1500);
    for i in 0..5 {
        t.inject(&fragment(7, 8 * i, true, &[0; 8]));
    }
    t.poll(T0);
    assert_eq!(t.drops(DropReason::ReassemblyTooManyFragments), 1);
    assert_eq!(t.b.reassembly_stats(), (0, 0));
    t.still_serves(T0);
}

/// A flood of first fragments that never complete: at most `reassembly_datagrams` are held, the
/// oldest are evicted (the newest still completes, the oldest does not), and the rest time out after
/// `reassembly_timeout`, each with a time exceeded as far as the source's budget of errors goes
/// (`icmp_peer_burst`; the rest counted).
#[test]
fn a_flood_of_incomplete_fragments_evicts_the_oldest_and_times_out() {
    let mut config = StackConfig::default();
    config.limits.reassembly_datagrams = 16;
    config.limits.reassembly_bytes = 64 * 1024;
    let mut t = Target::with(config, 1500);
    for ident in 0..5000u16 {
        t.inject(&fragment(ident, 0, true, &[7; 1024]));
        if ident % 100 == 0 {
            t.poll(T0);
            let (n, bytes) = t.b.reassembly_stats();
            assert!(
                n <= 16 && bytes <= 64 * 1024,
                "{n} datagrams, {bytes} bytes"
            );
        }
    }
    t.poll(T0);
    assert_eq!(t.b.reassembly_stats().0, 16);
    assert_eq!(t.drops(DropReason::ReassemblyEvicted), 5000 - 16);
    t.inject(&fragment(4999, 1024, false, &[7; 8]));
    t.poll(T0);
    assert_eq!(t.b.counters().ip.reasm_oks, 1, "the newest completes");
    t.inject(&fragment(0, 1024, false, &[7; 8]));
    t.poll(T0);
    assert_eq!(t.b.counters().ip.reasm_oks, 1, "the oldest was evicted");
    assert_eq!(t.b.reassembly_stats().0, 16);
    let later = T0 + Duration::from_secs(30);
    t.poll(later);
    assert_eq!(t.b.reassembly_stats(), (0, 0));
    assert_eq!(t.drops(DropReason::ReassemblyTimeout), 16);
    // One of the 16 (ident 0's last fragment) had no first fragment: nothing to quote. Of the 15
    // others, A is sent its burst.
    let burst = u64::from(t.b.config().limits.icmp_peer_burst);
    assert_eq!(t.b.counters().icmp.out_time_excds, burst);
    assert_eq!(t.drops(DropReason::IcmpPeerRateLimited), 15 - burst);
    t.still_serves(later);
}

/// A flood of large first fragments: the bytes they hold stay under `reassembly_bytes`; a datagram
/// larger than the cap by itself is evicted too.
#[test]
fn a_flood_of_large_fragments_stays_under_the_byte_cap() {
    let mut config = StackConfig::default();
    config.limits.reassembly_bytes = 64 * 1024;
    let mut t = Target::with(config, 9000);
    for ident in 0..200u16 {
        t.inject(&fragment(ident, 0, true, &[7; 8000]));
        t.poll(T0);
        let (n, bytes) = t.b.reassembly_stats();
        assert!(bytes <= 64 * 1024, "{n} datagrams, {bytes} bytes");
    }
    let (n, _) = t.b.reassembly_stats();
    assert!(n < 200);
    assert_eq!(t.drops(DropReason::ReassemblyEvicted), 200 - n as u64);
    // One datagram larger than the cap by itself: the others go first, then it does.
    let evicted = t.drops(DropReason::ReassemblyEvicted);
    // (Injected packets come in buffers of their own size, 4,148 bytes here: 16 exceed 64 KiB.)
    for i in 0..16 {
        t.inject(&fragment(9999, 4000 * i, true, &[7; 4000]));
    }
    t.poll(T0);
    assert_eq!(t.b.reassembly_stats(), (0, 0));
    // Each datagram evicted counts once, itself included.
    assert_eq!(
        t.drops(DropReason::ReassemblyEvicted),
        evicted + n as u64 + 1
    );
    t.still_serves(T0);
}

// ---------------------------------------------------------------------------------------------
// Floods against the other limits.

/// A flood to a socket that never reads: its queue holds `udp_rx_queue_bytes` of buffers, the newest
/// are dropped (counted for the stack and the socket), other sockets are served, and reading makes
/// room again.
#[test]
fn a_socket_that_never_reads_keeps_its_queue_limit() {
    let mut t = Target::new();
    let other = t.b.udp_bind(sa(B, 7)).unwrap();
    let limit = t.b.config().limits.udp_rx_queue_bytes;
    // Each datagram arrives in a buffer of its own size (headroom, IP and UDP headers, payload).
    let truesize = HEADROOM + 128;
    let fit = limit / truesize;
    let total = fit + 500;
    for i in 0..total as u32 {
        t.inject(&udp_packet(sa(A, 1000), sa(B, 9), &[i as u8; 100]));
        if i % 64 == 0 {
            t.poll(T0);
            assert!(t.b.udp(t.s).queued().unwrap().1 <= limit);
        }
    }
    t.poll(T0);
    let (n, bytes) = t.b.udp(t.s).queued().unwrap();
    assert_eq!((n, bytes), (fit, fit * truesize));
    assert_eq!(t.drops(DropReason::UdpQueueFull), (total - fit) as u64);
    assert_eq!(
        t.b.udp(t.s).counters().unwrap().queue_full,
        (total - fit) as u64
    );
    t.inject(&udp_packet(sa(A, 1000), sa(B, 7), b"other"));
    t.poll(T0);
    assert_eq!(t.b.udp(other).recv(&mut [0; 16]).unwrap(), 5);
    // The oldest are kept; one read makes room for one more.
    let mut buf = [0u8; 200];
    assert_eq!(t.b.udp(t.s).recv(&mut buf).unwrap(), 100);
    assert_eq!(buf[0], 0);
    t.inject(&udp_packet(sa(A, 1000), sa(B, 9), b"room"));
    t.poll(T0);
    assert_eq!(t.b.udp(t.s).queued().unwrap().0, fit);
    t.still_serves(T0);
}

/// The loopback queue holds `loopback_queue` packets; the rest are dropped, counted.
#[test]
fn the_loopback_queue_is_bounded() {
    let mut config = StackConfig::default();
    config.limits.loopback_queue = 8;
    let mut t = Target::with(config, 1500);
    let rx = t.b.udp_bind(sa(Ipv4Addr::LOCALHOST, 9)).unwrap();
    let tx = t.b.udp_bind(sa(Ipv4Addr::LOCALHOST, 0)).unwrap();
    for _ in 0..20 {
        t.b.udp(tx)
            .send_to(b"x", sa(Ipv4Addr::LOCALHOST, 9))
            .unwrap();
    }
    t.poll(T0);
    assert_eq!(t.drops(DropReason::LinkQueueFull), 12);
    assert_eq!(
        std::iter::from_fn(|| t.b.udp(rx).recv(&mut [0; 4]).ok()).count(),
        8
    );
    t.still_serves(T0);
}

/// Buffers coming back to the pool beyond `pool_free_buffers` per size class go back to the heap.
#[test]
fn the_pool_keeps_at_most_pool_free_buffers() {
    let mut config = StackConfig::default();
    config.limits.pool_free_buffers = 16;
    config.limits.udp_rx_queue_bytes = 8 << 20;
    let mut t = Target::with(config, 1500);
    let rx = t.b.udp_bind(sa(Ipv4Addr::LOCALHOST, 9)).unwrap();
    let tx = t.b.udp_bind(sa(Ipv4Addr::LOCALHOST, 0)).unwrap();
    for _ in 0..1000 {
        t.b.udp(tx)
            .send_to(&[1; 100], sa(Ipv4Addr::LOCALHOST, 9))
            .unwrap();
    }
    t.poll(T0);
    assert_eq!(
        std::iter::from_fn(|| t.b.udp(rx).recv(&mut [0; 128]).ok()).count(),
        1000
    );
    let (stats, held, _) = t.b.pool_stats();
    assert!(held <= 16 * 3, "{held} free buffers held");
    assert!(stats.released >= 1000 - 16, "{stats:?}");
    t.still_serves(T0);
}

// ---------------------------------------------------------------------------------------------
// Reflection and loops: no packet may make the stack answer itself, or answer for ever.

/// A TCP/IPv4 segment built by etherparse with the given control bits.
fn tcp_segment(
    src: std::net::SocketAddrV4,
    dst: std::net::SocketAddrV4,
    seq: u32,
    syn: bool,
    ack: Option<u32>,
) -> Vec<u8> {
    let mut t = etherparse::PacketBuilder::ipv4(src.ip().octets(), dst.ip().octets(), 64).tcp(
        src.port(),
        dst.port(),
        seq,
        65535,
    );
    if syn {
        t = t.syn();
    }
    if let Some(n) = ack {
        t = t.ack(n);
    }
    let mut out = Vec::new();
    t.write(&mut out, &[]).unwrap();
    out
}

/// Polls `b` every millisecond of virtual time from `from` for `span`.
fn run_for(b: &mut Stack, from: Instant, span: Duration) {
    let mut now = from;
    while now < from + span {
        b.poll(now);
        now = now + Duration::from_millis(1);
    }
}

/// The "LAND" packet: a SYN from B:7 to B:7, arriving on the link. The stack must not answer itself:
/// it is dropped at IP as a spoofed own source, nothing leaves, nothing loops.
#[test]
fn a_land_syn_from_our_own_address_is_dropped() {
    let mut t = Target::new();
    let _l = t.b.tcp_listen(sa(B, 7), 8).unwrap();
    t.inject(&tcp_segment(sa(B, 7), sa(B, 7), 1000, true, None));
    // And a UDP datagram from our own socket's address, which would be echoed to ourselves.
    t.inject(&udp_packet(sa(B, 9), sa(B, 9), b"land"));
    run_for(&mut t.b, T0, Duration::from_secs(1));
    assert_eq!(t.drops(DropReason::Ipv4OwnSource), 2);
    assert_eq!(t.b.counters().tcp.out_segs, 0);
    assert_eq!(t.b.counters().ip.out_packets, 0);
    assert!(t.sent().is_empty());
    assert_eq!(t.drain(), 0);
    t.still_serves(T0 + Duration::from_secs(1));
}

/// The same SYN on loopback, where the host may talk to itself: the connection it opens with itself
/// finds its own segments out of window, and answers them with duplicate ACKs that it again finds out
/// of window. The rate limit on those ACKs (one per 500 ms) ends the loop: over two seconds the stack
/// sends a handful of segments, not millions.
#[test]
fn an_ack_loop_with_ourselves_is_rate_limited() {
    let mut t = Target::new();
    let lo = sa(Ipv4Addr::LOCALHOST, 7);
    let _l = t.b.tcp_listen(lo, 8).unwrap();
    t.b.receive(
        LOOPBACK,
        PacketBuf::from_slice(&tcp_segment(lo, lo, 1000, true, None)),
    );
    run_for(&mut t.b, T0, Duration::from_secs(2));
    let c = t.b.counters();
    assert!(c.tcp.out_segs <= 16, "{} segments sent", c.tcp.out_segs);
    assert!(c.tcp.invalid_acks_skipped >= 1, "{:?}", c.tcp);
    t.still_serves(T0 + Duration::from_secs(2));
}

/// Two connections whose ACKs each find the other's unacceptable (an ACK of data never sent): the
/// duplicate ACKs a connection sends for pure ACKs are rate-limited, those for data are not.
#[test]
fn duplicate_acks_for_unacceptable_acks_are_rate_limited_but_data_is_answered() {
    let mut t = Target::new();
    let l = t.b.tcp_listen(sa(B, 80), 4).unwrap();
    t.inject(&tcp_segment(sa(A, 1000), sa(B, 80), 100, true, None));
    t.poll(T0);
    let synack = t.sent();
    let (_, rest) = etherparse::Ipv4Header::from_slice(&synack[0]).unwrap();
    let ours = etherparse::TcpHeader::from_slice(rest)
        .unwrap()
        .0
        .sequence_number
        .wrapping_add(1);
    t.inject(&tcp_segment(sa(A, 1000), sa(B, 80), 101, false, Some(ours)));
    t.poll(T0);
    assert!(t.b.tcp_listener(l).accept().is_ok());
    // 100 ACKs of data never sent, within 100 ms: one duplicate ACK.
    for i in 0..100u64 {
        t.inject(&tcp_segment(
            sa(A, 1000),
            sa(B, 80),
            101,
            false,
            Some(ours.wrapping_add(5000)),
        ));
        t.poll(T0 + Duration::from_millis(i));
    }
    assert_eq!(t.sent().len(), 1);
    assert_eq!(t.drops(DropReason::TcpBadAck), 100);
    assert_eq!(t.b.counters().tcp.invalid_acks_skipped, 99);
    // After the interval, one more.
    t.inject(&tcp_segment(
        sa(A, 1000),
        sa(B, 80),
        101,
        false,
        Some(ours.wrapping_add(5000)),
    ));
    t.poll(T0 + Duration::from_millis(600));
    assert_eq!(t.sent().len(), 1);
    // Old data (a retransmission below the window) is always acknowledged.
    for i in 0..3u64 {
        let mut old = etherparse::PacketBuilder::ipv4(A.octets(), B.octets(), 64)
            .tcp(1000, 80, 1, 65535)
            .ack(ours);
        old = old.psh();
        let mut bytes = Vec::new();
        old.write(&mut bytes, b"old").unwrap();
        t.inject(&bytes);
        t.poll(T0 + Duration::from_millis(700 + i));
    }
    assert_eq!(t.sent().len(), 3);
}

/// A segment with no control bits at all (nmap's null scan) to a closed port is answered with a RST
/// (RFC 9293 §3.10.7.1), as Linux does: `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
#[test]
fn a_null_segment_to_a_closed_port_gets_a_reset() {
    let mut t = Target::new();
    t.inject(&tcp_segment(sa(A, 1000), sa(B, 81), 4242, false, None));
    t.poll(T0);
    let out = t.sent();
    assert_eq!(out.len(), 1);
    let (_, rest) = etherparse::Ipv4Header::from_slice(&out[0]).unwrap();
    let rst = etherparse::TcpHeader::from_slice(rest).unwrap().0;
    assert!(rst.rst && rst.ack && !rst.syn);
    assert_eq!((rst.sequence_number, rst.acknowledgment_number), (0, 4242));
    assert_eq!((rst.source_port, rst.destination_port), (81, 1000));
    assert_eq!(t.drops(DropReason::TcpNoSocket), 1);
    assert_eq!(t.drops(DropReason::TcpBadFlags), 0);
    // To a listener it is dropped without an answer; a RST to a closed port is never answered.
    let _l = t.b.tcp_listen(sa(B, 82), 4).unwrap();
    t.inject(&tcp_segment(sa(A, 1000), sa(B, 82), 1, false, None));
    let mut rst = etherparse::PacketBuilder::ipv4(A.octets(), B.octets(), 64)
        .tcp(1000, 81, 1, 0)
        .rst();
    rst = rst.ack(1);
    let mut bytes = Vec::new();
    rst.write(&mut bytes, &[]).unwrap();
    t.inject(&bytes);
    t.poll(T0);
    assert!(t.sent().is_empty());
    t.still_serves(T0);
}

/// The IP identification is not one global sequence (RFC 7739, RFC 6864): datagrams to one
/// destination count up by one, but what one destination sees says nothing about what the host sent to
/// others (no idle-scan zombie), and two stacks start from different values.
#[test]
fn ip_identification_is_a_sequence_per_destination_not_per_host() {
    let ids = |t: &mut Target| -> Vec<Vec<u16>> {
        let mut per_dst = vec![Vec::new(); 8];
        for round in 0..4 {
            for (d, ids) in per_dst.iter_mut().enumerate() {
                let dst = Ipv4Addr::new(10, 0, 0, 10 + d as u8);
                t.b.udp(t.s).send_to(&[round; 32], sa(dst, 7)).unwrap();
                t.poll(T0);
                let out = t.sent();
                assert_eq!(out.len(), 1);
                let (ip, _) = etherparse::Ipv4Header::from_slice(&out[0]).unwrap();
                assert_eq!(ip.destination, dst.octets());
                ids.push(ip.identification);
            }
        }
        per_dst
    };
    // A destination's counter moves by one per datagram to it, or by a little more when another of
    // the eight destinations happens to share its bucket (2,048 buckets: about one run in seventy).
    let per_destination = |ids: &[u16]| {
        for w in ids.windows(2) {
            let step = w[1].wrapping_sub(w[0]);
            assert!((1..=8).contains(&step), "{ids:?}");
        }
    };
    let mut t = Target::new();
    let first = ids(&mut t);
    first.iter().for_each(|ids| per_destination(ids));
    // In send order (d0, d1, ..., d7, d0, ...), neighbours are not one counter apart.
    let in_order: Vec<u16> = (0..4)
        .flat_map(|r| first.iter().map(move |ids| ids[r]))
        .collect();
    let consecutive = in_order
        .windows(2)
        .filter(|w| w[1] == w[0].wrapping_add(1))
        .count();
    // One global counter makes all 31 neighbours consecutive; buckets almost none (4 per pair of
    // neighbouring destinations that share a bucket).
    assert!(
        consecutive < 16,
        "{consecutive} consecutive in {in_order:?}"
    );
    // A second stack starts elsewhere.
    let second = ids(&mut Target::new());
    let same = (0..8).filter(|&d| first[d][0] == second[d][0]).count();
    assert!(same < 8, "{first:?} {second:?}");
    // General output (the header template off, no route cache) uses the same counters.
    let mut config = StackConfig::classic();
    config.limits = StackConfig::default().limits;
    let mut t = Target::with(config, 1500);
    ids(&mut t).iter().for_each(|ids| per_destination(ids));
}

/// A timer that sends to this host itself (here, the reassembly timeout's ICMP time exceeded about a
/// fragment from our own loopback address) is finished within the same `poll`: a poll that returns 0
/// has left nothing to do (found by a cargo-fuzz campaign on the `stack` target).
#[test]
fn what_a_timer_sends_to_ourselves_is_taken_in_by_the_same_poll() {
    let mut t = Target::new();
    let lo = Ipv4Addr::LOCALHOST;
    let mut first = ip_packet(lo, lo, 17, &[0x11; 16]);
    first[6..8].copy_from_slice(&0x2000u16.to_be_bytes());
    fix_ip_checksum(&mut first);
    t.b.receive(LOOPBACK, PacketBuf::from_slice(&first));
    assert_eq!(t.b.poll(T0), 0);
    assert_eq!(t.b.reassembly_stats().0, 1);
    let later = T0 + Duration::from_secs(31);
    assert!(t.b.poll(later) > 0);
    let c = t.b.counters();
    assert_eq!(c.drops.get(DropReason::ReassemblyTimeout), 1);
    assert_eq!((c.icmp.out_time_excds, c.icmp.in_time_excds), (1, 1));
    assert_eq!(t.b.poll(later), 0, "the stack does not go quiet");
}

// ---------------------------------------------------------------------------------------------
// Garbage.

#[test]
fn random_garbage_never_panics_and_every_packet_is_accounted_for() {
    let mut t = Target::new();
    let mut rng = fastpath::rng::Rng::new(1);
    let templates = [
        good(),
        fragment(9, 0, true, &[1; 16]),
        ip_packet(A, B, 1, &[8, 0, 0, 0, 0, 0, 0, 0]),
        ip_packet(A, B, 17, &[0; 4]),
    ];
    for i in 0..20000 {
        let mut p = templates[i % templates.len()].clone();
        let flips = 1 + rng.below(4);
        for _ in 0..flips {
            let at = rng.below(p.len() as u64) as usize;
            p[at] = rng.next_u64() as u8;
        }
        p.truncate(rng.below(p.len() as u64 + 1) as usize);
        t.inject(&p);
        if i % 64 == 0 {
            t.poll(T0);
        }
    }
    t.poll(T0);
    let c = t.b.counters();
    // Every packet was dropped at IP, taken by reassembly, or delivered whole (the stack answers
    // only over the pair: nothing came back over loopback). A flipped version nibble of 6 makes a
    // packet IPv6's, dropped or delivered there.
    assert_eq!(c.ip.in_receives + c.ip6.in_receives, 20000);
    let ip6_drops: u64 = DropReason::ALL
        .iter()
        .filter(|r| r.label().starts_with("ipv6:"))
        .map(|&r| c.drops.get(r))
        .sum();
    let after_delivery6 = c.drops.get(DropReason::Ipv6UnknownProtocol);
    assert_eq!(
        c.ip6.in_delivers + ip6_drops - after_delivery6,
        c.ip6.in_receives,
        "{c}"
    );
    let ip_drops: u64 = DropReason::ALL
        .iter()
        .filter(|r| r.label().starts_with("ipv4:"))
        .map(|&r| c.drops.get(r))
        .sum();
    let after_delivery =
        c.drops.get(DropReason::Ipv4UnknownProtocol) + c.drops.get(DropReason::Ipv4NoRoute);
    assert_eq!(
        c.ip.in_delivers + ip_drops - after_delivery + c.ip.reasm_reqds - c.ip.reasm_oks,
        c.ip.in_receives,
        "{c}"
    );
    t.still_serves(T0);
}
