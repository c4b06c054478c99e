//! IPv6 (RFC 8200) and ICMPv6 (RFC 4443) through a whole stack, its peer the test itself on a raw
//! in-memory pair: echo, the extension-header chain, the errors this host sends and the ones it must
//! not, the discovery messages a TUN link carries, and hostile packets, each with the counter that moves.
//! Every packet the stack sends is read back with `etherparse`, an independent parser.

use std::net::Ipv6Addr;

use crate::common::*;
use fastpath::link::{LinkCapabilities, PairEnd};
use fastpath::{DropReason, Instant, Stack, StackConfig};

const T0: Instant = Instant::ZERO;

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The peer (the test) and the stack: 2001:db8::1 and 2001:db8::2/64, with fe80::2 too.
const PEER: &str = "2001:db8::1";
const US: &str = "2001:db8::2";

struct Host {
    b: Stack,
    raw: PairEnd,
}

impl Host {
    fn new() -> Host {
        let (mut b, raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
        let iface = fastpath::InterfaceId(1);
        b.add_ipv6_address(iface, format!("{US}/64").parse().unwrap())
            .unwrap();
        b.add_ipv6_address(iface, "fe80::2/64".parse().unwrap())
            .unwrap();
        Host { b, raw }
    }

    fn exchange(&mut self, packet: &[u8]) -> Vec<Vec<u8>> {
        inject(&mut self.raw, packet);
        while self.b.poll(T0) > 0 {}
        capture(&mut self.raw)
    }

    fn drops(&self, reason: DropReason) -> u64 {
        self.b.counters().drops.get(reason)
    }
}

/// An IPv6 packet from `src` to `dst` with `next` and `payload` (extension headers included in it).
fn ipv6(src: &str, dst: &str, next: u8, payload: &[u8]) -> Vec<u8> {
    let h = etherparse::Ipv6Header {
        traffic_class: 0,
        flow_label: Default::default(),
        payload_length: payload.len() as u16,
        next_header: etherparse::IpNumber(next),
        hop_limit: 64,
        source: a6(src).octets(),
        destination: a6(dst).octets(),
    };
    let mut p = h.to_bytes().to_vec();
    p.extend_from_slice(payload);
    p
}

/// An ICMPv6 message of `kind`/`code` with the 4-byte field `word` and `body`, checksummed for `src`
/// and `dst` by etherparse.
fn icmp6(src: &str, dst: &str, kind: u8, code: u8, word: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, code, 0, 0];
    m.extend_from_slice(&word);
    m.extend_from_slice(body);
    let sum = icmp6_checksum(src, dst, &m);
    m[2..4].copy_from_slice(&sum.to_be_bytes());
    m
}

fn icmp6_checksum(src: &str, dst: &str, m: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&a6(src).octets());
    pseudo.extend_from_slice(&a6(dst).octets());
    pseudo.extend_from_slice(&(m.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(m);
    !fastpath::checksum::rfc1071(&pseudo)
}

fn echo_request(src: &str, dst: &str, ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut word = [0; 4];
    word[..2].copy_from_slice(&ident.to_be_bytes());
    word[2..].copy_from_slice(&seq.to_be_bytes());
    ipv6(src, dst, 58, &icmp6(src, dst, 128, 0, word, data))
}

/// Reads a packet the stack sent with etherparse: its IPv6 header and its ICMPv6 header and payload.
fn read_icmp6(p: &[u8]) -> (etherparse::Ipv6Header, etherparse::Icmpv6Type, Vec<u8>) {
    let sliced = etherparse::SlicedPacket::from_ip(p).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv6(ip)) = sliced.net else {
        panic!("not IPv6: {p:?}");
    };
    let header = ip.header().to_header();
    let Some(etherparse::TransportSlice::Icmpv6(icmp)) = sliced.transport else {
        panic!("not ICMPv6");
    };
    // etherparse verifies nothing by itself: check the checksum with the pseudo-header here.
    let expected = icmp
        .icmp_type()
        .calc_checksum(header.source, header.destination, icmp.payload())
        .unwrap();
    assert_eq!(icmp.checksum(), expected, "ICMPv6 checksum");
    (header, icmp.icmp_type(), icmp.payload().to_vec())
}

#[test]
fn the_stack_answers_ping6_on_each_address_and_to_all_nodes() {
    let mut h = Host::new();
    for (dst, from) in [(US, US), ("fe80::2", "fe80::2"), ("ff02::1", US)] {
        let src = if dst.starts_with("fe80") {
            "fe80::1"
        } else {
            PEER
        };
        let out = h.exchange(&echo_request(src, dst, 0x1234, 7, b"abcdefgh"));
        assert_eq!(out.len(), 1, "one reply to {dst}");
        let (ip, kind, payload) = read_icmp6(&out[0]);
        assert_eq!(ip.source, a6(from).octets(), "reply to {dst} from {from}");
        assert_eq!(ip.destination, a6(src).octets());
        assert_eq!(ip.hop_limit, 64);
        assert_eq!(
            kind,
            etherparse::Icmpv6Type::EchoReply(etherparse::IcmpEchoHeader { id: 0x1234, seq: 7 })
        );
        assert_eq!(payload, b"abcdefgh");
    }
    let c = h.b.counters();
    assert_eq!(c.icmp6.in_echos, 3);
    assert_eq!(c.icmp6.out_echo_reps, 3);
    assert_eq!(c.ip6.in_mcast_pkts, 1);
}

#[test]
fn extension_headers_are_walked_before_the_upper_layer() {
    let mut h = Host::new();
    let echo = icmp6(PEER, US, 128, 0, [0, 1, 0, 2], b"x");
    // Hop-by-hop (PadN 4), then destination options (router alert skipped by a host), then ICMPv6.
    let mut p = vec![60, 0, 1, 4, 0, 0, 0, 0];
    p.extend_from_slice(&[58, 0, 0x05, 2, 0, 0, 1, 0]);
    p.extend_from_slice(&echo);
    let out = h.exchange(&ipv6(PEER, US, 0, &p));
    assert_eq!(out.len(), 1);
    let (_, kind, _) = read_icmp6(&out[0]);
    assert!(matches!(kind, etherparse::Icmpv6Type::EchoReply(_)));
    assert_eq!(h.b.counters().ip6.in_ext_headers, 2);

    // An atomic fragment (RFC 6946) is processed at once.
    let mut p = vec![58, 0, 0, 0, 0, 0, 0, 9];
    p.extend_from_slice(&echo);
    let out = h.exchange(&ipv6(PEER, US, 44, &p));
    assert_eq!(out.len(), 1, "atomic fragment answered");
    assert_eq!(h.b.counters().ip6.in_atomic_fragments, 1);
}

#[test]
fn bad_chains_are_refused_with_the_right_answer() {
    let mut h = Host::new();
    let echo = icmp6(PEER, US, 128, 0, [0, 1, 0, 2], b"x");

    // Routing header type 0 with segments left: refused (RFC 5095), parameter problem code 0 at the
    // type field (byte 42).
    let mut p = vec![58, 0, 0, 1, 0, 0, 0, 0];
    p.extend_from_slice(&echo);
    let out = h.exchange(&ipv6(PEER, US, 43, &p));
    assert_eq!(out.len(), 1);
    let (_, kind, quote) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::ErroneousHeaderField,
            pointer: 42
        })
    );
    assert_eq!(
        &quote[..8],
        &ipv6(PEER, US, 43, &p)[..8],
        "quotes the packet"
    );
    assert_eq!(h.drops(DropReason::Ipv6RoutingType0), 1);

    // An unknown option with action 10: parameter problem code 2 at the option (byte 42).
    let mut p = vec![58, 0, 0x9e, 2, 0, 0, 1, 0];
    p.extend_from_slice(&echo);
    let out = h.exchange(&ipv6(PEER, US, 60, &p));
    let (_, kind, _) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::UnrecognizedIpv6Option,
            pointer: 42
        })
    );
    // With action 01: discarded silently.
    p[2] = 0x5e;
    assert!(h.exchange(&ipv6(PEER, US, 60, &p)).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6UnknownOption), 1);

    // Hop-by-hop anywhere but first: unrecognized next header, pointing at the field that named it.
    let mut p = vec![0, 0, 1, 4, 0, 0, 0, 0, 58, 0, 1, 4, 0, 0, 0, 0];
    p.extend_from_slice(&echo);
    let out = h.exchange(&ipv6(PEER, US, 60, &p));
    let (_, kind, _) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::UnrecognizedNextHeader,
            pointer: 40
        })
    );

    // An unknown upper layer: unrecognized next header at byte 6.
    let out = h.exchange(&ipv6(PEER, US, 200, b"whatever"));
    let (_, kind, _) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::UnrecognizedNextHeader,
            pointer: 6
        })
    );

    // A long chain of destination options: dropped by the bound, no answer.
    let mut p = Vec::new();
    for i in 0..9 {
        p.extend_from_slice(&[if i == 8 { 58 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
    }
    p.extend_from_slice(&echo);
    assert!(h.exchange(&ipv6(PEER, US, 60, &p)).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6ChainTooLong), 1);

    // A first fragment whose chain stops short of the upper-layer header (RFC 7112): dropped and
    // answered with code 3.
    let p = vec![60, 0, 0, 1, 0, 0, 0, 5, 58, 0, 1, 4];
    let out = h.exchange(&ipv6(PEER, US, 44, &p));
    assert_eq!(h.drops(DropReason::Ipv6IncompleteChain), 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0][40], 4, "parameter problem");
    assert_eq!(out[0][41], 3, "code 3: incomplete header chain");
}

#[test]
fn errors_are_not_sent_where_rfc_4443_forbids_them() {
    let mut h = Host::new();
    // To a group: no parameter problem for an unknown next header.
    assert!(h.exchange(&ipv6(PEER, "ff02::1", 200, b"x")).is_empty());
    // About an ICMPv6 error: an unknown option inside a packet carrying a destination unreachable.
    let err = icmp6(PEER, US, 1, 4, [0; 4], &[0; 48]);
    let mut p = vec![58, 0, 0x9e, 2, 0, 0, 1, 0];
    p.extend_from_slice(&err);
    assert!(h.exchange(&ipv6(PEER, US, 60, &p)).is_empty());
    // From the unspecified address to us: dropped as a bad source.
    assert!(h.exchange(&echo_request("::", US, 1, 1, b"")).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6BadSource), 1);
    // Not for us.
    assert!(h
        .exchange(&echo_request(PEER, "2001:db8::9", 1, 1, b""))
        .is_empty());
    assert_eq!(h.drops(DropReason::Ipv6NotForUs), 1);
    // Our own address, or ::1, as a source from the link.
    assert!(h.exchange(&echo_request(US, US, 1, 1, b"")).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6OwnSource), 1);
    assert!(h.exchange(&echo_request("::1", US, 1, 1, b"")).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6BadSource), 2);
    // A bad checksum.
    let mut p = echo_request(PEER, US, 1, 1, b"abc");
    *p.last_mut().unwrap() ^= 1;
    assert!(h.exchange(&p).is_empty());
    assert_eq!(h.drops(DropReason::Icmpv6BadChecksum), 1);
    // Truncated: the payload length runs past the packet.
    let p = echo_request(PEER, US, 1, 1, b"abc");
    assert!(h.exchange(&p[..p.len() - 1]).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6Truncated), 1);
}

#[test]
fn what_the_kernel_sends_on_a_new_link_is_dropped_by_name() {
    let mut h = Host::new();
    // Router solicitation from the kernel's link-local address to all routers... which we are not a
    // member of; to all nodes instead, as a neighbour advertisement would be.
    let rs = icmp6("fe80::1", "ff02::1", 133, 0, [0; 4], &[]);
    assert!(h.exchange(&ipv6("fe80::1", "ff02::1", 58, &rs)).is_empty());
    assert_eq!(h.drops(DropReason::Icmpv6RouterDiscovery), 1);
    // Duplicate address detection: from :: to our solicited-node group.
    let target = a6(US).octets();
    let ns = icmp6("::", "ff02::1:ff00:2", 135, 0, [0; 4], &target);
    assert!(h
        .exchange(&ipv6("::", "ff02::1:ff00:2", 58, &ns))
        .is_empty());
    assert_eq!(h.drops(DropReason::Icmpv6NeighborDiscovery), 1);
    // An MLDv2 report to ff02::16, a group we are not in: not for us.
    let mld = icmp6("fe80::1", "ff02::16", 143, 0, [0; 4], &[]);
    assert!(h
        .exchange(&ipv6("fe80::1", "ff02::16", 58, &mld))
        .is_empty());
    assert_eq!(h.drops(DropReason::Ipv6NotForUs), 1);
    // The same to all nodes is counted as discovery.
    let mld = icmp6("fe80::1", "ff02::1", 143, 0, [0; 4], &[]);
    assert!(h.exchange(&ipv6("fe80::1", "ff02::1", 58, &mld)).is_empty());
    assert_eq!(h.drops(DropReason::Icmpv6ListenerDiscovery), 1);
    assert_eq!(h.b.counters().icmp6.in_discovery, 3);
}

/// A UDP datagram with its checksum over the IPv6 pseudo-header (`zero`: with a zero field instead).
fn udp6(src: &str, dst: &str, sport: u16, dport: u16, data: &[u8], zero: bool) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    if !zero {
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&a6(src).octets());
        pseudo.extend_from_slice(&a6(dst).octets());
        pseudo.extend_from_slice(&(u.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(&u);
        let sum = match !fastpath::checksum::rfc1071(&pseudo) {
            0 => 0xffff,
            x => x,
        };
        u[6..8].copy_from_slice(&sum.to_be_bytes());
    }
    ipv6(src, dst, 17, &u)
}

#[test]
fn udp_over_ipv6_is_delivered_and_a_closed_port_answered() {
    let mut h = Host::new();
    let s = h.b.udp_bind(format!("[{US}]:9")).unwrap();
    assert!(h
        .exchange(&udp6(PEER, US, 5000, 9, b"hello six", false))
        .is_empty());
    let mut buf = [0u8; 64];
    let (n, from) = h.b.udp(s).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello six");
    assert_eq!(from, format!("[{PEER}]:5000").parse().unwrap());
    // The echo goes back over IPv6, checksummed; etherparse reads it.
    h.b.udp(s).send_to(&buf[..n], from).unwrap();
    while h.b.poll(T0) > 0 {}
    let out = capture(&mut h.raw);
    assert_eq!(out.len(), 1);
    let sliced = etherparse::SlicedPacket::from_ip(&out[0]).unwrap();
    let Some(etherparse::TransportSlice::Udp(u)) = sliced.transport else {
        panic!("not UDP");
    };
    assert_eq!((u.source_port(), u.destination_port()), (9, 5000));
    assert_eq!(u.payload(), b"hello six");
    assert_eq!(
        out[0],
        udp6(US, PEER, 9, 5000, b"hello six", false),
        "checksum and all"
    );

    // A closed port: destination unreachable, port.
    let out = h.exchange(&udp6(PEER, US, 5000, 10, b"x", false));
    assert_eq!(out.len(), 1);
    let (_, kind, quote) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::DestinationUnreachable(
            etherparse::icmpv6::DestUnreachableCode::Port
        )
    );
    assert_eq!(
        quote,
        udp6(PEER, US, 5000, 10, b"x", false),
        "quotes the datagram"
    );
    assert_eq!(h.drops(DropReason::UdpNoSocket), 1);

    // A zero checksum is not allowed over IPv6 (RFC 8200 §8.1): dropped, named, unanswered.
    assert!(h
        .exchange(&udp6(PEER, US, 5000, 9, b"naked", true))
        .is_empty());
    assert_eq!(h.drops(DropReason::UdpZeroChecksumIpv6), 1);
    assert!(h.b.udp(s).recv_from(&mut buf).is_err());
    // A bad checksum is dropped too.
    let mut bad = udp6(PEER, US, 5000, 9, b"bad", false);
    *bad.last_mut().unwrap() ^= 0x40;
    assert!(h.exchange(&bad).is_empty());
    assert!(h.b.udp(s).recv_from(&mut buf).is_err());
    assert_eq!(h.drops(DropReason::UdpBadChecksum), 1);
}

#[test]
fn an_ipv4_socket_and_an_only_v6_socket_share_a_port_but_not_datagrams() {
    let mut h = Host::new();
    let s4 = h.b.udp_bind("0.0.0.0:53").unwrap();
    // A dual-stack socket would hold the port in IPv4 too.
    assert_eq!(
        h.b.udp_bind("[::]:53").unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
    let only_v6 = fastpath::UdpOptions {
        only_v6: true,
        ..Default::default()
    };
    let s6 = h.b.udp_bind_with("[::]:53", only_v6).unwrap();
    assert!(h
        .exchange(&udp6(PEER, US, 5000, 53, b"six", false))
        .is_empty());
    let mut buf = [0u8; 16];
    assert!(
        h.b.udp(s4).recv_from(&mut buf).is_err(),
        "not to the IPv4 socket"
    );
    let (n, from) = h.b.udp(s6).recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from.is_ipv6()), (&b"six"[..], true));
    assert_eq!(
        h.b.udp(s6).local_addr().unwrap(),
        "[::]:53".parse().unwrap()
    );
    // An IPv6 socket takes only IPv6 destinations, and says so.
    let e = h.b.udp(s6).send_to(b"x", "10.0.0.1:53").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrNotAvailable);
    // A second IPv6 bind of the same port conflicts.
    assert_eq!(
        h.b.udp_bind(format!("[{US}]:53")).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
}

#[test]
fn a_dual_stack_socket_serves_ipv4_through_mapped_addresses() {
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        Default::default(),
    );
    let iface = fastpath::InterfaceId(1);
    a.add_ipv6_address(iface, "2001:db8::1/64".parse().unwrap())
        .unwrap();
    b.add_ipv6_address(iface, "2001:db8::2/64".parse().unwrap())
        .unwrap();
    // One socket on [::]:7 for both families, as Linux's default (bindv6only 0).
    let server = b.udp_bind("[::]:7").unwrap();
    let c4 = a.udp_bind("10.0.0.1:4000").unwrap();
    let c6 = a.udp_bind("[2001:db8::1]:6000").unwrap();
    a.udp(c4).send_to(b"over four", "10.0.0.2:7").unwrap();
    a.udp(c6).send_to(b"over six", "[2001:db8::2]:7").unwrap();
    settle(&mut a, &mut b, T0);
    let mut buf = [0u8; 32];
    for _ in 0..2 {
        let (n, from) = b.udp(server).recv_from(&mut buf).unwrap();
        let want: std::net::SocketAddr = if &buf[..n] == b"over four" {
            "[::ffff:10.0.0.1]:4000".parse().unwrap()
        } else {
            "[2001:db8::1]:6000".parse().unwrap()
        };
        assert_eq!(from, want, "{:?}", std::str::from_utf8(&buf[..n]));
        // The echo to a mapped address goes back over IPv4.
        b.udp(server).send_to(&buf[..n], from).unwrap();
    }
    settle(&mut a, &mut b, T0);
    let (n, from) = a.udp(c4).recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from),
        (&b"over four"[..], "10.0.0.2:7".parse().unwrap())
    );
    let (n, from) = a.udp(c6).recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from),
        (&b"over six"[..], "[2001:db8::2]:7".parse().unwrap())
    );
    assert_eq!(b.counters().udp.in_datagrams, 2);
    // And the port is held in IPv4 too.
    assert_eq!(
        b.udp_bind("0.0.0.0:7").unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );

    // With only_v6, IPv4 to the port is refused (a port unreachable), and sending to IPv4 too.
    let only_v6 = fastpath::UdpOptions {
        only_v6: true,
        ..Default::default()
    };
    let s = b.udp_bind_with("[::]:8", only_v6).unwrap();
    a.udp(c4).send_to(b"x", "10.0.0.2:8").unwrap();
    settle(&mut a, &mut b, T0);
    assert!(b.udp(s).recv_from(&mut buf).is_err());
    assert_eq!(b.counters().icmp.out_dest_unreachs, 1);
    let e = b
        .udp(s)
        .send_to(b"x", "[::ffff:10.0.0.1]:4000")
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NetworkUnreachable);
}

#[test]
fn udp_between_two_stacks_over_ipv6_with_fragments_both_ways() {
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        Default::default(),
    );
    let iface = fastpath::InterfaceId(1);
    a.add_ipv6_address(iface, "2001:db8::1/64".parse().unwrap())
        .unwrap();
    b.add_ipv6_address(iface, "2001:db8::2/64".parse().unwrap())
        .unwrap();
    let sa = a.udp_bind("[2001:db8::1]:0").unwrap();
    let sb = b.udp_bind("[::]:7").unwrap();
    let big: Vec<u8> = (0..20_000u32).map(|i| (i * 31 + i / 7) as u8).collect();
    for size in [0usize, 1, 1231, 1232, 1452, 1453, 4000, 20_000] {
        a.udp(sa).send_to(&big[..size], "[2001:db8::2]:7").unwrap();
        settle(&mut a, &mut b, T0);
        let mut buf = vec![0u8; 65536];
        let (n, from) = b.udp(sb).recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &big[..size], "size {size}");
        b.udp(sb).send_to(&buf[..n], from).unwrap();
        settle(&mut a, &mut b, T0);
        let (n, _) = a.udp(sa).recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &big[..size], "echo of size {size}");
    }
    let (ca, cb) = (a.counters(), b.counters());
    assert!(ca.ip6.frag_oks >= 3 && cb.ip6.frag_oks >= 3, "{ca}\n{cb}");
    assert!(ca.ip6.reasm_oks >= 3 && cb.ip6.reasm_oks >= 3);
    assert_eq!(ca.drops.total() + cb.drops.total(), 0, "{ca}\n{cb}");

    // Over ::1, within one stack.
    let lo = a.udp_bind("[::1]:9").unwrap();
    let c = a.udp_bind("[::1]:0").unwrap();
    // ::1 never leaves the host (RFC 4291 §2.5.3).
    let e = a.udp(c).send_to(b"out", "[2001:db8::2]:7").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    a.udp(c).send_to(b"loop", "[::1]:9").unwrap();
    while a.poll(T0) > 0 {}
    let mut buf = [0u8; 8];
    let (n, from) = a.udp(lo).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"loop");
    assert_eq!(from, a.udp(c).local_addr().unwrap());
}

#[test]
fn a_connected_ipv6_socket_learns_of_a_closed_port() {
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        Default::default(),
    );
    let iface = fastpath::InterfaceId(1);
    a.add_ipv6_address(iface, "2001:db8::1/64".parse().unwrap())
        .unwrap();
    b.add_ipv6_address(iface, "2001:db8::2/64".parse().unwrap())
        .unwrap();
    let s = a.udp_bind("[::]:0").unwrap();
    a.udp(s).connect("[2001:db8::2]:4444").unwrap();
    assert_eq!(
        a.udp(s).peer_addr().unwrap(),
        "[2001:db8::2]:4444".parse().unwrap()
    );
    assert_eq!(
        a.udp(s).local_addr().unwrap().ip(),
        "2001:db8::1".parse::<std::net::IpAddr>().unwrap(),
        "the route's source"
    );
    a.udp(s).send(b"anyone?").unwrap();
    settle(&mut a, &mut b, T0);
    assert_eq!(b.counters().icmp6.out_dest_unreachs, 1);
    let e = a.udp(s).send(b"again").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
}

/// Echo replies are not rate-limited (as in Linux, where only ICMPv6 errors are): a flood of pings
/// from one peer is answered in full at one instant. Errors are: port unreachables for a flood of
/// UDP to a closed port go to the flooding peer as far as its own budget goes (`icmp_peer_burst`),
/// counted, while another peer's pings are all answered and its errors still go out.
#[test]
fn pings_are_all_answered_and_errors_limited_per_destination() {
    const OTHER: &str = "2001:db8::3";
    let mut h = Host::new();
    let mut replies = 0;
    for i in 0..3000 {
        replies += h.exchange(&echo_request(PEER, US, 1, i, b"")).len();
    }
    let c = h.b.counters();
    assert_eq!(c.icmp6.in_echos, 3000);
    assert_eq!(replies, 3000, "replies at one instant");
    assert_eq!(c.icmp6.out_echo_reps, 3000);
    let limits = h.b.config().limits.clone();
    let mut errors = 0;
    for _ in 0..500 {
        errors += h.exchange(&udp6(PEER, US, 5000, 10, b"x", false)).len();
    }
    assert_eq!(errors, limits.icmp_peer_burst as usize);
    assert_eq!(
        h.drops(DropReason::Icmpv6PeerRateLimited),
        500 - u64::from(limits.icmp_peer_burst)
    );
    assert_eq!(h.drops(DropReason::Icmpv6RateLimited), 0);
    for i in 0..100 {
        let out = h.exchange(&echo_request(OTHER, US, 2, i, b"hi"));
        assert_eq!(out.len(), 1);
        let (ip, kind, _) = read_icmp6(&out[0]);
        assert_eq!(ip.destination, a6(OTHER).octets());
        assert!(matches!(kind, etherparse::Icmpv6Type::EchoReply(_)));
    }
    let out = h.exchange(&udp6(OTHER, US, 5000, 10, b"x", false));
    assert_eq!(out.len(), 1, "the other peer's error goes out");
    let (ip, kind, _) = read_icmp6(&out[0]);
    assert_eq!(ip.destination, a6(OTHER).octets());
    assert!(matches!(
        kind,
        etherparse::Icmpv6Type::DestinationUnreachable(_)
    ));
    assert!(h
        .exchange(&udp6(PEER, US, 5000, 10, b"x", false))
        .is_empty());
}

#[test]
fn garbage_never_panics_and_the_stack_still_answers() {
    let mut h = Host::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..5000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 120) as usize;
        let mut p = ipv6(PEER, US, (seed >> 8) as u8, &vec![0; len]);
        for (i, b) in p.iter_mut().enumerate().skip(4) {
            if (seed >> (i % 60)) & 3 == 0 {
                *b = (seed >> (i % 56)) as u8;
            }
        }
        h.exchange(&p);
    }
    let out = h.exchange(&echo_request(PEER, US, 9, 9, b"alive"));
    // The rate limit may have been spent by the garbage's answers: then wait for a token.
    let out = if out.is_empty() {
        inject(&mut h.raw, &echo_request(PEER, US, 9, 9, b"alive"));
        while h.b.poll(Instant::from_secs(10)) > 0 {}
        capture(&mut h.raw)
    } else {
        out
    };
    assert_eq!(out.len(), 1);
    let (_, _, payload) = read_icmp6(&out[0]);
    assert_eq!(payload, b"alive");
}

/// The fragments of `payload` (starting with a header of `next`) as a sender would cut them for a
/// link of `mtu`: each with the fixed header and a fragment header of `ident`.
fn fragments(
    src: &str,
    dst: &str,
    next: u8,
    payload: &[u8],
    mtu: usize,
    ident: u32,
) -> Vec<Vec<u8>> {
    let max = (mtu - 48) & !7;
    payload
        .chunks(max)
        .enumerate()
        .map(|(i, piece)| {
            let offset = i * max;
            let more = offset + piece.len() < payload.len();
            let mut p = vec![next, 0];
            p.extend_from_slice(&((offset as u16) | more as u16).to_be_bytes());
            p.extend_from_slice(&ident.to_be_bytes());
            p.extend_from_slice(piece);
            ipv6(src, dst, 44, &p)
        })
        .collect()
}

/// Reassembles what the stack sent (fragments or one whole packet): the upper-layer payload.
fn reassemble(packets: &[Vec<u8>]) -> Vec<u8> {
    let mut pieces: Vec<(usize, Vec<u8>)> = Vec::new();
    for p in packets {
        assert!(
            p.len() <= 1500,
            "a packet of {} bytes on a 1500-byte link",
            p.len()
        );
        if p[6] != 44 {
            return p[40..].to_vec();
        }
        let offset = usize::from(u16::from_be_bytes([p[42], p[43]]) & 0xfff8);
        pieces.push((offset, p[48..].to_vec()));
    }
    pieces.sort();
    let mut out = Vec::new();
    for (offset, piece) in pieces {
        assert_eq!(offset, out.len(), "fragments in order, no gap");
        out.extend_from_slice(&piece);
    }
    out
}

#[test]
fn fragmented_pings_are_reassembled_and_big_replies_fragmented() {
    let mut h = Host::new();
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let echo = icmp6(PEER, US, 128, 0, [0, 5, 0, 6], &data);
    let mut frags = fragments(PEER, US, 58, &echo, 1280, 0xabcd_0001);
    assert_eq!(frags.len(), 3);
    frags.swap(0, 2); // out of order
    for f in &frags {
        inject(&mut h.raw, f);
    }
    while h.b.poll(T0) > 0 {}
    let out = capture(&mut h.raw);
    assert!(
        out.len() >= 3,
        "the 3-KiB reply leaves in fragments: {}",
        out.len()
    );
    let reply = reassemble(&out);
    let mut expected = icmp6(US, PEER, 129, 0, [0, 5, 0, 6], &data);
    expected[2..4].copy_from_slice(&reply[2..4]);
    assert_eq!(reply, expected, "the echo reply carries the request's data");
    assert_eq!(
        icmp6_checksum(US, PEER, &reply),
        0xffff ^ 0xffff,
        "checksum verifies"
    );
    let c = h.b.counters();
    assert_eq!((c.ip6.reasm_reqds, c.ip6.reasm_oks), (3, 1));
    assert_eq!(c.ip6.frag_oks, 1);
    assert!(c.ip6.frag_creates >= 3);
}

#[test]
fn overlapping_fragments_discard_the_packet() {
    let mut h = Host::new();
    let echo = icmp6(PEER, US, 128, 0, [0, 1, 0, 1], &[7u8; 2000]);
    let frags = fragments(PEER, US, 58, &echo, 1280, 42);
    // The second fragment again, 8 bytes earlier: it overlaps the first (RFC 5722).
    let mut overlap = frags[1].clone();
    let offset = u16::from_be_bytes([overlap[42], overlap[43]]) & 0xfff8;
    overlap[42..44].copy_from_slice(&(offset - 8).to_be_bytes());
    assert!(h.exchange(&frags[0]).is_empty());
    assert!(h.exchange(&overlap).is_empty());
    assert!(
        h.exchange(&frags[1]).is_empty(),
        "a fresh entry, incomplete"
    );
    assert_eq!(h.drops(DropReason::ReassemblyOverlap), 1);
    assert_eq!(h.b.counters().ip6.reasm_oks, 0);
}

#[test]
fn an_unfinished_packet_times_out_with_a_time_exceeded() {
    let mut h = Host::new();
    let echo = icmp6(PEER, US, 128, 0, [0, 1, 0, 1], &[7u8; 2000]);
    let frags = fragments(PEER, US, 58, &echo, 1280, 43);
    assert!(h.exchange(&frags[0]).is_empty());
    // Not after IPv4's 30 s: IPv6 waits 60 (RFC 8200 §4.5).
    assert!(h.b.poll(Instant::from_secs(31)) == 0);
    assert!(h.b.poll(Instant::from_secs(61)) > 0);
    let out = capture(&mut h.raw);
    assert_eq!(out.len(), 1);
    let (_, kind, quote) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::TimeExceeded(
            etherparse::icmpv6::TimeExceededCode::FragmentReassemblyTimeExceeded
        )
    );
    assert_eq!(quote.len(), 1232, "as much as fits the minimum MTU");
    assert_eq!(
        quote,
        frags[0][..1232],
        "quotes the first fragment as it arrived"
    );
    assert_eq!(h.drops(DropReason::ReassemblyTimeout), 1);
}

#[test]
fn bad_fragment_lengths_get_a_parameter_problem() {
    let mut h = Host::new();
    // 13 bytes with more to come: not a multiple of 8 (pointer 4, the payload length).
    let mut p = vec![58, 0, 0, 1, 0, 0, 0, 44];
    p.extend_from_slice(&[128; 13]); // an echo request's start: not an error, so answerable
    let out = h.exchange(&ipv6(PEER, US, 44, &p));
    let (_, kind, _) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::ErroneousHeaderField,
            pointer: 4
        })
    );
    assert_eq!(h.drops(DropReason::FragmentBadLength), 1);
    // An offset that would end past 65,535 bytes: pointer at the fragment offset (byte 42).
    let mut p = vec![58, 0, 0xff, 0xf8, 0, 0, 0, 45];
    p.extend_from_slice(&[128; 16]);
    let out = h.exchange(&ipv6(PEER, US, 44, &p));
    let (_, kind, _) = read_icmp6(&out[0]);
    assert_eq!(
        kind,
        etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
            code: etherparse::icmpv6::ParameterProblemCode::ErroneousHeaderField,
            pointer: 42
        })
    );
    assert_eq!(h.drops(DropReason::FragmentTooBig), 1);
}

#[test]
fn packet_too_big_lowers_the_path_mtu_but_never_below_1280() {
    let mut h = Host::new();
    let data = vec![3u8; 1400];
    // A reply of 1448 bytes fits the 1500-byte link whole.
    let out = h.exchange(&echo_request(PEER, US, 1, 1, &data));
    assert_eq!(out.len(), 1);
    // A router says 1300.
    let quoted = &ipv6(US, PEER, 58, &icmp6(US, PEER, 129, 0, [0, 1, 0, 1], &data))[..1232];
    let ptb = icmp6("2001:db8::fe", US, 2, 0, 1300u32.to_be_bytes(), quoted);
    assert!(h.exchange(&ipv6("2001:db8::fe", US, 58, &ptb)).is_empty());
    assert_eq!(h.b.counters().ip6.path_mtu.learned, 1);
    let out = h.exchange(&echo_request(PEER, US, 1, 2, &data));
    assert!(out.len() >= 2, "fragmented to the path MTU");
    assert!(out.iter().all(|p| p.len() <= 1300));
    assert_eq!(reassemble(&out).len(), 8 + data.len());
    // Below 1280: ignored, counted (RFC 8201 §4).
    let ptb = icmp6("2001:db8::fe", US, 2, 0, 1000u32.to_be_bytes(), quoted);
    assert!(h.exchange(&ipv6("2001:db8::fe", US, 58, &ptb)).is_empty());
    assert_eq!(h.drops(DropReason::PathMtuBelowFloor), 1);
}

/// Two stacks with IPv6 addresses 2001:db8::1 and ::2 (and IPv4 10.0.0.1 and .2) on a pair.
fn two_stacks6(impair: fastpath::Impairments) -> (Stack, Stack) {
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        impair,
    );
    let iface = fastpath::InterfaceId(1);
    a.add_ipv6_address(iface, "2001:db8::1/64".parse().unwrap())
        .unwrap();
    b.add_ipv6_address(iface, "2001:db8::2/64".parse().unwrap())
        .unwrap();
    (a, b)
}

/// Polls both stacks, advancing time 1 ms a round, until `done` or `limit` of virtual time.
fn run_until(
    a: &mut Stack,
    b: &mut Stack,
    now: &mut Instant,
    limit: std::time::Duration,
    mut done: impl FnMut(&mut Stack, &mut Stack) -> bool,
) {
    let end = *now + limit;
    while *now < end {
        a.poll(*now);
        b.poll(*now);
        if done(a, b) {
            return;
        }
        *now = *now + std::time::Duration::from_millis(1);
    }
    panic!("not done within {limit:?}");
}

#[test]
fn tcp_over_ipv6_connects_and_moves_data_both_ways_intact() {
    let (mut a, mut b) = two_stacks6(Default::default());
    let mut now = Instant::from_secs(1);
    // Timers count from a stack's last poll: bring both clocks to `now` first.
    a.poll(now);
    b.poll(now);
    let l = b.tcp_listen("[::]:80", 4).unwrap();
    let c = a.tcp_connect("[2001:db8::2]:80").unwrap();
    let mut s = None;
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(5),
        |a, b| {
            if s.is_none() {
                s = b.tcp_listener(l).accept().ok();
            }
            s.is_some() && a.tcp(c).is_established()
        },
    );
    let (s, peer) = s.unwrap();
    assert_eq!(peer, a.tcp(c).addrs().unwrap().0);
    assert_eq!(peer.ip(), a6("2001:db8::1"));
    let info = a.tcp(c).info().unwrap();
    assert_eq!(info.mss, 1500 - 60 - 12, "the IPv6 MSS, less timestamps");

    // 1 MiB each way, byte for byte.
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 + i / 509) as u8).collect();
    for (tx, rx, from_a) in [(c, s, true), (s, c, false)] {
        let (mut sent, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 65536];
        run_until(
            &mut a,
            &mut b,
            &mut now,
            std::time::Duration::from_secs(30),
            |a, b| {
                let (w, r) = if from_a { (a, b) } else { (b, a) };
                while sent < data.len() {
                    match w.tcp(tx).write(&data[sent..]) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
                while let Ok(n) = r.tcp(rx).read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                got.len() == data.len()
            },
        );
        assert!(got == data, "1 MiB intact");
    }
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!(ca.drops.total() + cb.drops.total(), 0, "{ca}\n{cb}");
    assert!(
        ca.tcp.predicted_data + cb.tcp.predicted_data > 100,
        "header prediction over IPv6"
    );
    assert_eq!(ca.ip.in_receives, 0, "nothing went over IPv4:\n{ca}");

    // Close both ways.
    a.tcp(c).close();
    b.tcp(s).close();
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(200),
        |a, b| a.tcp_connections() + b.tcp_connections() == 0,
    );
}

#[test]
fn tcp_over_ipv6_to_a_closed_port_is_reset() {
    let (mut a, mut b) = two_stacks6(Default::default());
    let mut now = Instant::from_secs(1);
    a.poll(now);
    b.poll(now);
    let c = a.tcp_connect("[2001:db8::2]:81").unwrap();
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(5),
        |a, _| {
            a.tcp(c)
                .state()
                .is_ok_and(|s| s == fastpath::TcpState::Closed)
        },
    );
    assert_eq!(
        a.tcp(c).take_error().unwrap().unwrap().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    assert_eq!(b.counters().tcp.out_rsts, 1);
    assert_eq!(b.counters().drops.get(DropReason::TcpNoSocket), 1);
}

#[test]
fn tcp_over_ipv6_survives_a_lossy_wire() {
    let impair = fastpath::Impairments {
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.02,
        seed: 7,
        ..Default::default()
    };
    let (mut a, mut b) = two_stacks6(impair);
    let mut now = Instant::from_secs(1);
    a.poll(now);
    b.poll(now);
    let l = b.tcp_listen("[2001:db8::2]:7", 4).unwrap();
    let c = a.tcp_connect("[2001:db8::2]:7").unwrap();
    let mut s = None;
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(60),
        |a, b| {
            if s.is_none() {
                s = b.tcp_listener(l).accept().ok().map(|x| x.0);
            }
            s.is_some() && a.tcp(c).is_established()
        },
    );
    let s = s.unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = vec![0u8; 65536];
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(120),
        |a, b| {
            while sent < data.len() {
                match a.tcp(c).write(&data[sent..]) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            while let Ok(n) = b.tcp(s).read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            got.len() == data.len()
        },
    );
    assert!(got == data);
    assert!(a.counters().tcp.retrans_segs > 0, "the loss was recovered");
}

/// A router on the wire between A and B with an IPv6 MTU of `mtu`: a packet from A larger than it is
/// dropped and answered with a packet too big (RFC 4443 §3.2) quoting as much of it as fits.
struct Router6 {
    a: Stack,
    b: Stack,
    ra: fastpath::PairEnd,
    rb: fastpath::PairEnd,
    mtu: Option<usize>,
    largest_after: usize,
    too_big: usize,
}

impl Router6 {
    fn new() -> Router6 {
        let caps = LinkCapabilities::plain(1500);
        let (ra, ea) = fastpath::PairEnd::pair(caps, 65536, Default::default());
        let (rb, eb) = fastpath::PairEnd::pair(caps, 65536, Default::default());
        let mut a = Stack::new(StackConfig::default());
        let ia = a.add_interface("pair0", ea, "10.0.0.1/24".parse().unwrap());
        a.add_ipv6_address(ia, "2001:db8::1/64".parse().unwrap())
            .unwrap();
        let mut b = Stack::new(StackConfig::default());
        let ib = b.add_interface("pair0", eb, "10.0.0.2/24".parse().unwrap());
        b.add_ipv6_address(ib, "2001:db8::2/64".parse().unwrap())
            .unwrap();
        Router6 {
            a,
            b,
            ra,
            rb,
            mtu: None,
            largest_after: 0,
            too_big: 0,
        }
    }

    fn step(&mut self, now: Instant) {
        self.a.poll(now);
        self.b.poll(now);
        for p in capture(&mut self.ra) {
            match self.mtu {
                Some(mtu) if p.len() > mtu => {
                    self.too_big += 1;
                    let quote = &p[..p.len().min(1232)];
                    let ptb = icmp6(
                        "2001:db8::fe",
                        "2001:db8::1",
                        2,
                        0,
                        (mtu as u32).to_be_bytes(),
                        quote,
                    );
                    inject(&mut self.ra, &ipv6("2001:db8::fe", "2001:db8::1", 58, &ptb));
                }
                Some(_) => {
                    self.largest_after = self.largest_after.max(p.len());
                    inject(&mut self.rb, &p);
                }
                None => inject(&mut self.rb, &p),
            }
        }
        for p in capture(&mut self.rb) {
            inject(&mut self.ra, &p);
        }
    }
}

#[test]
fn packet_too_big_lowers_a_tcp_connections_mss_at_once() {
    let mut w = Router6::new();
    let mut now = Instant::from_secs(1);
    w.a.poll(now);
    w.b.poll(now);
    let l = w.b.tcp_listen("[::]:9", 4).unwrap();
    let c = w.a.tcp_connect("[2001:db8::2]:9").unwrap();
    let mut s = None;
    for _ in 0..1000 {
        w.step(now);
        if s.is_none() {
            s = w.b.tcp_listener(l).accept().ok().map(|x| x.0);
        }
        if s.is_some() && w.a.tcp(c).is_established() {
            break;
        }
        now = now + std::time::Duration::from_millis(1);
    }
    let s = s.expect("established");
    assert_eq!(w.a.tcp(c).info().unwrap().mss, 1500 - 60 - 12);

    // A forged packet too big quoting a sequence number not in flight: ignored, counted (RFC 5927).
    let mut seg = ipv6("2001:db8::1", "2001:db8::2", 6, &[0u8; 1400]);
    let (ports, seq) = (w.a.tcp(c).addrs().unwrap(), 0x1234_5678u32);
    seg[40..42].copy_from_slice(&ports.0.port().to_be_bytes());
    seg[42..44].copy_from_slice(&ports.1.port().to_be_bytes());
    seg[44..48].copy_from_slice(&seq.to_be_bytes());
    let forged = icmp6(
        "2001:db8::fe",
        "2001:db8::1",
        2,
        0,
        1280u32.to_be_bytes(),
        &seg[..1232],
    );
    inject(&mut w.ra, &ipv6("2001:db8::fe", "2001:db8::1", 58, &forged));
    w.step(now);
    assert_eq!(w.a.counters().drops.get(DropReason::TcpIcmpOutOfWindow), 1);
    assert_eq!(w.a.tcp(c).info().unwrap().mss, 1500 - 60 - 12);

    // The router appears: 1280 bytes on its next hop.
    w.mtu = Some(1280);
    let data: Vec<u8> = (0..512 * 1024u32).map(|i| (i % 253) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = vec![0u8; 65536];
    for _ in 0..200_000 {
        while sent < data.len() {
            match w.a.tcp(c).write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        w.step(now);
        while let Ok(n) = w.b.tcp(s).read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
        now = now + std::time::Duration::from_micros(200);
    }
    assert!(got == data, "512 KiB intact through the smaller path");
    assert!(w.too_big > 0);
    assert!(w.largest_after <= 1280, "{}", w.largest_after);
    assert_eq!(w.a.tcp(c).info().unwrap().mss, 1280 - 60 - 12);
    let ca = w.a.counters();
    assert!(ca.ip6.path_mtu.learned >= 1, "{ca}");
    assert_eq!(ca.tcp.timeouts, 0, "resent at once, no timeout: {ca}");
}

#[test]
fn a_flood_of_ipv6_fragments_stays_within_the_bounds_and_the_stack_still_serves() {
    let mut h = Host::new();
    let limits = StackConfig::default().limits;
    // Thousands of first fragments of packets that never complete, each from its own identification.
    for ident in 0..5000u32 {
        let mut p = vec![58, 0, 0, 1];
        p.extend_from_slice(&ident.to_be_bytes());
        p.extend_from_slice(&icmp6(PEER, US, 128, 0, [0, 1, 0, 1], &[0u8; 1192])[..1200]);
        inject(&mut h.raw, &ipv6(PEER, US, 44, &p));
        if ident % 64 == 0 {
            while h.b.poll(T0) > 0 {}
        }
    }
    while h.b.poll(T0) > 0 {}
    let (held, bytes) = h.b.ipv6_reassembly_stats();
    assert!(held <= limits.reassembly_datagrams, "{held} held");
    assert!(bytes <= limits.reassembly_bytes, "{bytes} bytes held");
    assert!(h.drops(DropReason::ReassemblyEvicted) > 0);
    // Still serving: a fragmented echo request is answered.
    let echo = icmp6(PEER, US, 128, 0, [0, 9, 0, 9], &[5u8; 2000]);
    for f in fragments(PEER, US, 58, &echo, 1280, 0x7777_0000) {
        inject(&mut h.raw, &f);
    }
    while h.b.poll(T0) > 0 {}
    let out = capture(&mut h.raw);
    assert!(!out.is_empty(), "answered after the flood");
    assert_eq!(reassemble(&out).len(), 8 + 2000);
}

#[test]
fn a_dual_stack_tcp_listener_accepts_ipv4_with_mapped_peers() {
    let (mut a, mut b) = two_stacks6(Default::default());
    let mut now = Instant::from_secs(1);
    a.poll(now);
    b.poll(now);
    let l = b.tcp_listen("[::]:80", 8).unwrap();
    let c4 = a.tcp_connect("10.0.0.2:80").unwrap();
    let c6 = a.tcp_connect("[2001:db8::2]:80").unwrap();
    let mut accepted = Vec::new();
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(5),
        |a, b| {
            while let Ok(x) = b.tcp_listener(l).accept() {
                accepted.push(x);
            }
            accepted.len() == 2 && a.tcp(c4).is_established() && a.tcp(c6).is_established()
        },
    );
    let mut peers: Vec<String> = accepted.iter().map(|(_, p)| p.ip().to_string()).collect();
    peers.sort();
    assert_eq!(peers, ["2001:db8::1", "::ffff:10.0.0.1"]);
    // Data both ways over each.
    for &(s, _) in &accepted {
        b.tcp(s).write(b"hi").unwrap();
    }
    let mut buf = [0u8; 8];
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(1),
        |a, _| a.tcp(c4).available().unwrap_or(0) == 2 && a.tcp(c6).available().unwrap_or(0) == 2,
    );
    assert_eq!(a.tcp(c4).read(&mut buf).unwrap(), 2);
    assert_eq!(a.tcp(c6).read(&mut buf).unwrap(), 2);
    // The IPv4 port is taken by the listener's IPv4 half.
    assert_eq!(
        b.tcp_listen("0.0.0.0:80", 1).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
    // Closing the listener frees both halves.
    b.tcp_listener(l).close();
    b.tcp_listen("0.0.0.0:80", 1).unwrap();

    // only_v6: IPv4 is refused with a reset, and the IPv4 port stays free.
    let only = fastpath::TcpListenOptions { only_v6: true };
    b.tcp_listen_with("[::]:81", 1, only).unwrap();
    let l4 = b.tcp_listen("0.0.0.0:81", 1);
    assert!(l4.is_ok(), "only_v6 leaves 0.0.0.0:81 free");
    b.tcp_listener(l4.unwrap()).close();
    let c = a.tcp_connect("10.0.0.2:81").unwrap();
    run_until(
        &mut a,
        &mut b,
        &mut now,
        std::time::Duration::from_secs(5),
        |a, _| {
            a.tcp(c)
                .state()
                .is_ok_and(|s| s == fastpath::TcpState::Closed)
        },
    );
    assert_eq!(
        a.tcp(c).take_error().unwrap().unwrap().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    // A dual-stack listen on a port IPv4 already has fails, as Linux's does.
    b.tcp_listen("0.0.0.0:82", 1).unwrap();
    assert_eq!(
        b.tcp_listen("[::]:82", 1).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
    b.tcp_listen_with("[::]:82", 1, only).unwrap();
}

/// A TCP exchange between two stacks over IPv6 (handshake, requests and echoes, a bulk write, the
/// close), with header prediction on and off: the same bytes arrive, every counter but the one that
/// names the general path agrees, and with prediction on no segment took the general path.
#[test]
fn tcp_over_ipv6_takes_the_predicted_path_with_the_general_paths_result() {
    let run = |prediction: bool| {
        let config = StackConfig {
            input_header_prediction: prediction,
            ..StackConfig::default()
        };
        let (mut a, mut b) = two_stacks(
            config,
            LinkCapabilities::plain(1500),
            fastpath::link::Impairments::default(),
        );
        let link = fastpath::InterfaceId(1);
        a.add_ipv6_address(link, "fd00::1/64".parse().unwrap())
            .unwrap();
        b.add_ipv6_address(link, "fd00::2/64".parse().unwrap())
            .unwrap();
        let listener = b.tcp_listen("[fd00::2]:7", 4).unwrap();
        let client = a.tcp_connect("[fd00::2]:7").unwrap();
        let mut now = T0;
        settle(&mut a, &mut b, now);
        let (server, from) = b.tcp_listener(listener).accept().expect("accepted");
        assert_eq!(from.ip(), a6("fd00::1"));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        for i in 0..20u8 {
            a.tcp(client).write(&[i; 100]).unwrap();
            settle(&mut a, &mut b, now);
            let n = b.tcp(server).read(&mut buf).unwrap();
            b.tcp(server).write(&buf[..n]).unwrap();
            settle(&mut a, &mut b, now);
            let n = a.tcp(client).read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            now = now + std::time::Duration::from_millis(1);
        }
        let bulk = payload(20_000, 7);
        let mut sent = 0;
        let mut received = 0;
        while received < bulk.len() {
            sent += a.tcp(client).write(&bulk[sent..]).unwrap_or(0);
            settle(&mut a, &mut b, now);
            while let Ok(n) = b.tcp(server).read(&mut buf) {
                assert_eq!(&buf[..n], &bulk[received..received + n]);
                received += n;
            }
            now = now + std::time::Duration::from_millis(1);
        }
        a.tcp(client).close();
        b.tcp(server).close();
        settle(&mut a, &mut b, now);
        (got, *a.counters(), *b.counters())
    };
    let (fast, fa, fb) = run(true);
    let (general, mut ga, mut gb) = run(false);
    let expected: Vec<u8> = (0..20u8).flat_map(|i| [i; 100]).collect();
    assert_eq!(fast, expected);
    assert_eq!(general, expected);
    // Every segment in took the general path with prediction off, none with it on.
    assert_eq!(fa.ip6.in_unpredicted, 0);
    assert_eq!(fb.ip6.in_unpredicted, 0);
    assert_eq!(ga.ip6.in_unpredicted, ga.ip6.in_receives);
    assert_eq!(gb.ip6.in_unpredicted, gb.ip6.in_receives);
    assert!(gb.tcp.in_segs > 30, "{:?}", gb.tcp);
    ga.ip6.in_unpredicted = 0;
    gb.ip6.in_unpredicted = 0;
    assert_eq!(fa, ga);
    assert_eq!(fb, gb);
}

/// A first fragment that holds only a destination options header (RFC 7112 §5: the upper-layer
/// header is in a later fragment) is dropped and answered with a parameter problem, code 3, pointer
/// 0, quoting it (RFC 8200 §4.5), whatever the upper layer: ICMPv6 too, whose type (in a later
/// fragment) cannot show it to be an error, as Linux decides. One whose ICMPv6 type is there and
/// names an error is not answered.
#[test]
fn a_first_fragment_with_only_destination_options_gets_code_3() {
    for upper in [58u8, 17, 6] {
        let mut h = Host::new();
        let mut p = vec![60, 0, 0, 1, 0, 0, 0, 9];
        p.extend_from_slice(&[upper, 0, 1, 4, 0, 0, 0, 0]);
        let packet = ipv6(PEER, US, 44, &p);
        let out = h.exchange(&packet);
        assert_eq!(
            h.drops(DropReason::Ipv6IncompleteChain),
            1,
            "next header {upper}"
        );
        assert_eq!(out.len(), 1, "next header {upper}");
        let (ip, kind, quote) = read_icmp6(&out[0]);
        assert_eq!(ip.destination, a6(PEER).octets());
        assert_eq!(
            kind,
            etherparse::Icmpv6Type::ParameterProblem(etherparse::icmpv6::ParameterProblemHeader {
                code:
                    etherparse::icmpv6::ParameterProblemCode::Ipv6FirstFragmentIncompleteHeaderChain,
                pointer: 0,
            }),
            "next header {upper}"
        );
        assert_eq!(quote, packet);
    }
    // The ICMPv6 type is in the first fragment, and it is an error's (destination unreachable).
    let mut h = Host::new();
    let mut p = vec![60, 0, 0, 1, 0, 0, 0, 9];
    p.extend_from_slice(&[58, 0, 1, 4, 0, 0, 0, 0, 1, 4]);
    assert!(h.exchange(&ipv6(PEER, US, 44, &p)).is_empty());
    assert_eq!(h.drops(DropReason::Ipv6IncompleteChain), 1);
}

/// Over IPv6 too a connection being made fails at once on an ICMPv6 error quoting its SYN, as
/// Linux's `tcp_v6_err` fails it: every destination unreachable, a time exceeded, a parameter
/// problem, each with its error; one quoting another sequence number is counted and ignored.
#[test]
fn an_icmpv6_error_about_the_syn_fails_the_connect_at_once() {
    use std::io::ErrorKind;
    let cases = [
        (1, 0, ErrorKind::NetworkUnreachable),
        (1, 1, ErrorKind::PermissionDenied),
        (1, 3, ErrorKind::HostUnreachable),
        (1, 4, ErrorKind::ConnectionRefused),
        (3, 0, ErrorKind::HostUnreachable),
        (4, 0, ErrorKind::InvalidData),
    ];
    for (kind, code, error) in cases {
        let (mut raw, eb) =
            fastpath::PairEnd::pair(LinkCapabilities::plain(1500), 64, Default::default());
        let mut b = Stack::new(StackConfig::default());
        let ib = b.add_interface("pair0", eb, "10.0.0.2/24".parse().unwrap());
        b.add_ipv6_address(ib, "2001:db8::2/64".parse().unwrap())
            .unwrap();
        let t0 = Instant::from_secs(1);
        let c = b.tcp_connect("[2001:db8::1]:80").unwrap();
        b.poll(t0);
        let syn = capture(&mut raw).remove(0);
        assert_eq!(syn[6], 6, "a TCP segment");
        let about = |seq: u32| {
            let mut quote = syn.clone();
            quote[44..48].copy_from_slice(&seq.to_be_bytes());
            let pointer = if kind == 4 { [0, 0, 0, 6] } else { [0; 4] };
            let m = icmp6("2001:db8::fe", "2001:db8::2", kind, code, pointer, &quote);
            ipv6("2001:db8::fe", "2001:db8::2", 58, &m)
        };
        let iss = u32::from_be_bytes([syn[44], syn[45], syn[46], syn[47]]);
        inject(&mut raw, &about(iss.wrapping_add(5000)));
        b.poll(t0);
        assert_eq!(b.counters().drops.get(DropReason::TcpIcmpOutOfWindow), 1);
        assert!(b.tcp(c).take_error().unwrap().is_none());
        inject(&mut raw, &about(iss));
        b.poll(t0);
        let err = b.tcp(c).take_error().unwrap().expect("the connect failed");
        assert_eq!(err.kind(), error, "type {kind} code {code}");
    }
}
