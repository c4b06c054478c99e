//! Two stacks on an in-memory LAN of Ethernet frames (`PairEnd::ethernet_pair`): ARP and neighbour
//! discovery resolve each other before the first datagram goes, duplicate address detection holds
//! an IPv6 address back until it is checked, TCP runs over frames, and what a hostile or confused
//! neighbour sends (frames for others, our own frames, answers to questions never asked, a scan
//! of the prefix) is dropped by reason within the cache's bounds.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::common::{capture, inject, payload, A, B};
use fastpath::config::{EthernetConfig, NeighborConfig};
use fastpath::ethernet::NeighborState;
use fastpath::wire::MacAddr;
use fastpath::{
    DropReason, Impairments, Instant, InterfaceId, Ipv4Cidr, Ipv6Cidr, LinkCapabilities, PairEnd,
    Stack, StackConfig, TcpState,
};

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const ETH: InterfaceId = InterfaceId(1);

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn config() -> StackConfig {
    StackConfig {
        ethernet: EthernetConfig {
            neighbor: NeighborConfig {
                max_entries: 64,
                ..NeighborConfig::default()
            },
            ..EthernetConfig::default()
        },
        ..StackConfig::default()
    }
}

/// A (10.0.0.1, 2001:db8::1) and B (10.0.0.2, 2001:db8::2) on an Ethernet pair.
fn lan() -> (Stack, Stack) {
    let (ea, eb) = PairEnd::ethernet_pair(
        LinkCapabilities::plain(1500),
        4096,
        Impairments::default(),
        [MAC_A, MAC_B],
    );
    let mut a = Stack::new(config());
    a.add_interface("eth0", ea, Ipv4Cidr::new(A, 24));
    a.add_ipv6_address(ETH, "2001:db8::1/64".parse().unwrap())
        .unwrap();
    let mut b = Stack::new(config());
    b.add_interface("eth0", eb, Ipv4Cidr::new(B, 24));
    b.add_ipv6_address(ETH, "2001:db8::2/64".parse().unwrap())
        .unwrap();
    (a, b)
}

/// Polls both stacks every millisecond of virtual time for `d`.
fn run(a: &mut Stack, b: &mut Stack, now: &mut Instant, d: Duration) {
    let end = *now + d;
    while *now < end {
        *now = *now + Duration::from_millis(1);
        for _ in 0..100 {
            if a.poll(*now) + b.poll(*now) == 0 {
                break;
            }
        }
    }
}

#[test]
fn the_first_datagram_waits_for_arp_and_arrives() {
    let (mut a, mut b) = lan();
    let mut now = Instant::ZERO;
    let rx = b.udp_bind((B, 7)).unwrap();
    let tx = a.udp_bind((A, 0)).unwrap();
    a.udp(tx).send_to(b"first", (B, 7)).unwrap();
    a.udp(tx).send_to(b"second", (B, 7)).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(5));
    let mut buf = [0u8; 64];
    let (n, from) = b.udp(rx).recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from.ip()), (&b"first"[..], A.into()));
    let (n, _) = b.udp(rx).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"second");
    // One request for both datagrams, one reply; B learned A from the request.
    let ca = a.ethernet_counters(ETH).unwrap();
    let cb = b.ethernet_counters(ETH).unwrap();
    assert_eq!((ca.arp_requests_out, cb.arp_replies_out), (1, 1));
    let eth_a = a.ethernet(ETH).unwrap();
    assert_eq!(eth_a.arp_cache().mac(B), Some(MAC_B));
    assert!(matches!(
        eth_a.arp_cache().state(B),
        Some(NeighborState::Reachable { .. })
    ));
    assert_eq!(b.ethernet(ETH).unwrap().arp_cache().mac(A), Some(MAC_A));
}

#[test]
fn an_ipv6_address_is_used_only_after_duplicate_address_detection() {
    let (mut a, mut b) = lan();
    let mut now = Instant::ZERO;
    // Tentative: not an address of the interface yet.
    assert!(a.ipv6_addresses(ETH).is_empty());
    assert!(a.ethernet(ETH).unwrap().is_tentative(v6("2001:db8::1")));
    run(&mut a, &mut b, &mut now, Duration::from_millis(1100));
    let addrs: Vec<Ipv6Addr> = a.ipv6_addresses(ETH).iter().map(|c| c.addr).collect();
    assert!(addrs.contains(&v6("2001:db8::1")), "{addrs:?}");
    assert!(addrs.contains(&v6("fe80::ff:fe00:a")), "{addrs:?}");
    // Then UDP over IPv6, resolved by neighbour discovery.
    let rx = b.udp_bind("[2001:db8::2]:7").unwrap();
    let tx = a.udp_bind("[2001:db8::1]:0").unwrap();
    a.udp(tx).send_to(b"over six", "[2001:db8::2]:7").unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(5));
    let mut buf = [0u8; 64];
    let (n, from) = b.udp(rx).recv_from(&mut buf).unwrap();
    assert_eq!(
        (&buf[..n], from.ip()),
        (&b"over six"[..], v6("2001:db8::1").into())
    );
    let ca = a.ethernet_counters(ETH).unwrap();
    assert!(
        ca.ns_out >= 3,
        "two addresses checked and one resolved: {ca:?}"
    );
    assert_eq!(b.ethernet_counters(ETH).unwrap().na_out, 1);
    assert_eq!(
        a.ethernet(ETH).unwrap().nd_cache().mac(v6("2001:db8::2")),
        Some(MAC_B)
    );
}

#[test]
fn an_address_another_host_has_or_is_checking_is_given_up() {
    let (ea, eb) = PairEnd::ethernet_pair(
        LinkCapabilities::plain(1500),
        4096,
        Impairments::default(),
        [MAC_A, MAC_B],
    );
    let mut a = Stack::new(config());
    a.add_interface("eth0", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config());
    b.add_interface("eth0", eb, Ipv4Cidr::new(B, 24));
    let has = |s: &Stack, addr| s.ipv6_addresses(ETH).iter().any(|c| c.addr == addr);
    let mut now = Instant::ZERO;
    // A has 2001:db8::5; B's check of it is answered, and B does without.
    let taken = "2001:db8::5/64".parse().unwrap();
    a.add_ipv6_address(ETH, taken).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(1500));
    assert!(has(&a, taken.addr));
    b.add_ipv6_address(ETH, taken).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(1500));
    assert!(has(&a, taken.addr) && !has(&b, taken.addr));
    assert_eq!(b.ethernet_counters(ETH).unwrap().duplicates, 1);
    // Both check 2001:db8::6 at once: whoever hears the other's check first gives it up (here B,
    // which polls second), and the other keeps it.
    let both = "2001:db8::6/64".parse().unwrap();
    a.add_ipv6_address(ETH, both).unwrap();
    b.add_ipv6_address(ETH, both).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(1500));
    assert!(has(&a, both.addr) && !has(&b, both.addr));
    assert_eq!(b.ethernet_counters(ETH).unwrap().duplicates, 2);
    assert_eq!(a.ethernet_counters(ETH).unwrap().duplicates, 0);
}

#[test]
fn tcp_moves_a_megabyte_over_frames() {
    let (mut a, mut b) = lan();
    let mut now = Instant::ZERO;
    let listener = b.tcp_listen((B, 80), 4).unwrap();
    let client = a.tcp_connect((B, 80)).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(5));
    let (server, _) = b.tcp_listener(listener).accept().unwrap();
    assert_eq!(a.tcp(client).state().unwrap(), TcpState::Established);
    let data = payload(1 << 20, 7);
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = vec![0u8; 65536];
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += a.tcp(client).write(&data[sent..]).unwrap_or(0);
        }
        run(&mut a, &mut b, &mut now, Duration::from_millis(1));
        while let Ok(n) = b.tcp(server).read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
}

/// A frame from `src` to `dst` with `ethertype` and `payload`.
fn frame(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn arp(op: u16, sender: (MacAddr, Ipv4Addr), target: (MacAddr, Ipv4Addr)) -> Vec<u8> {
    let mut m = vec![0, 1, 8, 0, 6, 4];
    m.extend_from_slice(&op.to_be_bytes());
    m.extend_from_slice(&sender.0 .0);
    m.extend_from_slice(&sender.1.octets());
    m.extend_from_slice(&target.0 .0);
    m.extend_from_slice(&target.1.octets());
    m
}

/// B alone on the LAN, the test holding the other end.
fn b_and_raw() -> (Stack, PairEnd) {
    b_and_raw_with(config())
}

/// B with `cfg` on an Ethernet pair, and the pair's raw end (MAC_A).
fn b_and_raw_with(cfg: StackConfig) -> (Stack, PairEnd) {
    let (raw, eb) = PairEnd::ethernet_pair(
        LinkCapabilities::plain(1500),
        4096,
        Impairments::default(),
        [MAC_A, MAC_B],
    );
    let mut b = Stack::new(cfg);
    b.add_interface("eth0", eb, Ipv4Cidr::new(B, 24));
    (b, raw)
}

#[test]
fn hostile_frames_are_dropped_by_reason_and_never_answered_twice() {
    let (mut b, mut raw) = b_and_raw();
    let now = Instant::from_secs(10);
    b.poll(now);
    capture(&mut raw); // the link-local address's check
    let peer = Ipv4Addr::new(10, 0, 0, 9);
    let other = MacAddr([0x02, 0, 0, 0, 0, 0x99]);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (vec![0u8; 10], DropReason::EthernetMalformed),
        (
            frame(other, MAC_A, 0x0800, &[0x45; 20]),
            DropReason::EthernetNotForUs,
        ),
        (
            frame(MAC_B, MAC_B, 0x0800, &[0x45; 20]),
            DropReason::EthernetBadSource,
        ),
        (
            frame(MAC_B, MacAddr::BROADCAST, 0x0800, &[0x45; 20]),
            DropReason::EthernetBadSource,
        ),
        (
            frame(MAC_B, MAC_A, 0x88cc, &[0; 40]),
            DropReason::EthernetUnknownType,
        ),
        (
            frame(MAC_B, MAC_A, 0x0806, &[0; 10]),
            DropReason::ArpMalformed,
        ),
        (
            frame(
                MacAddr::BROADCAST,
                MAC_A,
                0x0806,
                &arp(1, (MAC_A, B), (MacAddr::default(), B)),
            ),
            DropReason::ArpConflict,
        ),
    ];
    for (bytes, reason) in cases {
        let before = b.counters().drops.get(reason);
        inject(&mut raw, &bytes);
        b.poll(now);
        assert_eq!(b.counters().drops.get(reason), before + 1, "{reason:?}");
        assert!(capture(&mut raw).is_empty(), "{reason:?} answered");
    }
    // A reply nobody asked for creates no entry; a request for B is answered once and learns A.
    inject(
        &mut raw,
        &frame(MAC_B, MAC_A, 0x0806, &arp(2, (MAC_A, peer), (MAC_B, B))),
    );
    b.poll(now);
    assert!(b.ethernet(ETH).unwrap().arp_cache().is_empty());
    inject(
        &mut raw,
        &frame(
            MacAddr::BROADCAST,
            MAC_A,
            0x0806,
            &arp(1, (MAC_A, peer), (MacAddr::default(), B)),
        ),
    );
    b.poll(now);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &MAC_A.0);
    assert_eq!(&out[0][20..22], &[0, 2], "a reply");
    assert_eq!(b.ethernet(ETH).unwrap().arp_cache().mac(peer), Some(MAC_A));
}

#[test]
fn a_scan_of_the_prefix_fills_the_cache_to_its_bound_and_no_further() {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    capture(&mut raw); // the link-local address's check
    let tx = b.udp_bind((B, 0)).unwrap();
    // 200 destinations nobody answers for: 64 entries at most, one request each per second.
    for i in 0..200u32 {
        let dst = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + 10 + i);
        let _ = b.udp(tx).send_to(b"scan", (dst, 9));
    }
    b.poll(now);
    let arp = |frames: Vec<Vec<u8>>| frames.iter().filter(|f| f[12..14] == [8, 6]).count();
    let requests = arp(capture(&mut raw));
    assert!(requests <= 64, "{requests} requests");
    assert!(b.ethernet(ETH).unwrap().arp_cache().len() <= 64);
    assert!(b.counters().drops.get(DropReason::NeighborTableFull) >= 136);
    // Three solicitations each, then given up: everything held is dropped, counted.
    for _ in 0..5 {
        now = now + Duration::from_secs(1);
        b.poll(now);
        assert!(arp(capture(&mut raw)) <= 64);
    }
    assert!(b.ethernet(ETH).unwrap().arp_cache().is_empty());
    assert_eq!(
        b.counters().drops.get(DropReason::NeighborUnreachable)
            + b.counters().drops.get(DropReason::NeighborTableFull),
        200
    );
}

#[test]
fn a_router_advertisement_gives_a_default_route_and_an_address() {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    let router = v6("fe80::1");
    // RA: hop limit 64, lifetime 1800 s, source link-layer address, MTU 1400, prefix
    // 2001:db8:1::/64 on-link and autonomous.
    let mut ra = vec![134, 0, 0, 0, 64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0];
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&MAC_A.0);
    ra.extend_from_slice(&[5, 1, 0, 0]);
    ra.extend_from_slice(&1400u32.to_be_bytes());
    ra.extend_from_slice(&[3, 4, 64, 0xc0]);
    ra.extend_from_slice(&u32::MAX.to_be_bytes());
    ra.extend_from_slice(&u32::MAX.to_be_bytes());
    ra.extend_from_slice(&[0; 4]);
    ra.extend_from_slice(&v6("2001:db8:1::").octets());
    let all_nodes = v6("ff02::1");
    let packet = crate::common::ipv6_icmp(router, all_nodes, 255, &ra);
    inject(
        &mut raw,
        &frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &packet),
    );
    b.poll(now);
    assert_eq!(b.ethernet_counters(ETH).unwrap().ra_in, 1);
    // The address from the prefix is checked first, then used.
    now = now + Duration::from_millis(1100);
    b.poll(now);
    now = now + Duration::from_millis(1100);
    b.poll(now);
    let addrs: Vec<Ipv6Addr> = b.ipv6_addresses(ETH).iter().map(|c| c.addr).collect();
    assert!(addrs.contains(&v6("2001:db8:1:0:0:ff:fe00:b")), "{addrs:?}");
    // A datagram to a host off the link goes to the router's hardware address.
    capture(&mut raw);
    let tx = b.udp_bind("[::]:0").unwrap();
    b.udp(tx).send_to(b"away", "[2001:db8:99::1]:9").unwrap();
    b.poll(now);
    let out = capture(&mut raw);
    assert_eq!(
        out.len(),
        1,
        "sent at once: the router's address came with its advertisement"
    );
    assert_eq!(&out[0][..6], &MAC_A.0);
    // The same advertisement with hop limit 64 was sent by no neighbour: dropped.
    let off_link = crate::common::ipv6_icmp(router, all_nodes, 64, &ra);
    inject(
        &mut raw,
        &frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &off_link),
    );
    b.poll(now);
    assert_eq!(b.counters().drops.get(DropReason::NdpNotFromLink), 1);
}

/// A redirect (RFC 4861 §8) from `router` for `destination` to `target`, to B's link-local
/// address, with the target's hardware address when `lladdr` is given.
fn redirect(router: Ipv6Addr, target: Ipv6Addr, destination: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
    let mut m = vec![137, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&target.octets());
    m.extend_from_slice(&destination.octets());
    let packet = crate::common::ipv6_icmp(router, v6("fe80::ff:fe00:b"), hop_limit, &m);
    frame(MAC_B, MAC_A, 0x86dd, &packet)
}

/// The IPv6 address a neighbour solicitation B sent asks for, if `f` is one.
fn solicited(f: &[u8]) -> Option<Ipv6Addr> {
    let ip = &f[14..];
    (ip.len() >= 64 && ip[6] == 58 && ip[40] == 135).then(|| {
        let mut t = [0u8; 16];
        t.copy_from_slice(&ip[48..64]);
        Ipv6Addr::from(t)
    })
}

/// A redirect from the router a destination is reached through sends that destination's packets
/// to the target from then on (a router, or the destination itself on the link), each resolved by
/// neighbour discovery; one from another router, one for a destination reached directly, and one
/// naming a target neither link-local nor the destination are dropped by reason (§8.1). At most
/// 64 destinations are redirected at once: the oldest is forgotten.
#[test]
fn a_redirect_from_the_first_hop_router_moves_a_destination_to_its_target() {
    let (mut b, mut raw) = b_and_raw();
    let now = Instant::from_secs(1);
    b.poll(now);
    // A default route through fe80::1 (MAC_A), with its hardware address.
    let mut ra = vec![134, 0, 0, 0, 64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0];
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&MAC_A.0);
    let packet = crate::common::ipv6_icmp(v6("fe80::1"), v6("ff02::1"), 255, &ra);
    inject(
        &mut raw,
        &frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &packet),
    );
    let now = now + Duration::from_secs(3);
    b.poll(now);
    b.add_ipv6_address(ETH, "2001:db8:1::b/64".parse().unwrap())
        .unwrap();
    let mut now = now;
    for _ in 0..30 {
        now = now + Duration::from_millis(100);
        b.poll(now);
    }
    let on_link: Vec<Ipv6Addr> = b.ipv6_addresses(ETH).iter().map(|c| c.addr).collect();
    assert!(on_link.contains(&v6("2001:db8:1::b")), "{on_link:?}");
    capture(&mut raw);
    let tx = b.udp_bind("[::]:0").unwrap();
    let send = |b: &mut Stack, raw: &mut PairEnd, to: &str| {
        b.udp(tx).send_to(b"away", to).unwrap();
        b.poll(now);
        capture(raw)
    };
    let far = v6("2001:db8:99::1");
    let out = send(&mut b, &mut raw, "[2001:db8:99::1]:9");
    assert_eq!(&out[0][..6], &MAC_A.0, "through the router");
    // Refused: from a router that is not the first hop, for an on-link destination, a target
    // neither link-local nor the destination, hop limit not 255.
    inject(&mut raw, &redirect(v6("fe80::9"), v6("fe80::2"), far, 255));
    inject(
        &mut raw,
        &redirect(v6("fe80::1"), v6("fe80::2"), v6("2001:db8:1::7"), 255),
    );
    inject(
        &mut raw,
        &redirect(v6("fe80::1"), v6("2001:db8:5::1"), far, 255),
    );
    inject(&mut raw, &redirect(v6("fe80::1"), v6("fe80::2"), far, 64));
    b.poll(now);
    let drops = &b.counters().drops;
    assert_eq!(drops.get(DropReason::NdpRedirectNotFirstHop), 2);
    assert_eq!(drops.get(DropReason::NdpMalformed), 1);
    assert_eq!(drops.get(DropReason::NdpNotFromLink), 1);
    let out = send(&mut b, &mut raw, "[2001:db8:99::1]:9");
    assert_eq!(&out[0][..6], &MAC_A.0, "still through the router");
    // From the first hop: the destination goes through fe80::2, which is resolved first.
    inject(&mut raw, &redirect(v6("fe80::1"), v6("fe80::2"), far, 255));
    b.poll(now);
    assert_eq!(b.ethernet_counters(ETH).unwrap().redirects_in, 3);
    let out = send(&mut b, &mut raw, "[2001:db8:99::1]:9");
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(solicited(&out[0]), Some(v6("fe80::2")));
    // Only fe80::2 may redirect it now; it says the destination is on the link.
    inject(&mut raw, &redirect(v6("fe80::1"), far, far, 255));
    b.poll(now);
    assert_eq!(
        b.counters().drops.get(DropReason::NdpRedirectNotFirstHop),
        2 + 1
    );
    inject(&mut raw, &redirect(v6("fe80::2"), far, far, 255));
    b.poll(now);
    let out = send(&mut b, &mut raw, "[2001:db8:99::1]:9");
    assert_eq!(solicited(&out[0]), Some(far));
    // Other destinations still go through the router; 64 more redirects forget the first.
    let out = send(&mut b, &mut raw, "[2001:db8:99::2]:9");
    assert_eq!(&out[0][..6], &MAC_A.0);
    for i in 0..64u16 {
        let dst = Ipv6Addr::new(0x2001, 0xdb8, 0x98, 0, 0, 0, 0, i + 1);
        inject(&mut raw, &redirect(v6("fe80::1"), v6("fe80::3"), dst, 255));
        b.poll(now);
    }
    let out = send(&mut b, &mut raw, "[2001:db8:99::1]:9");
    assert_eq!(
        &out[0][..6],
        &MAC_A.0,
        "forgotten: through the router again"
    );
}

/// A router advertisement from fe80::1 (MAC_A) to all nodes, in its frame: a default router for
/// `lifetime` seconds (0: none), with its hardware address if `lladdr`, and the /64 `prefix` with
/// `flags` (0x80 on-link, 0x40 autonomous) and its valid and preferred lifetimes in seconds.
fn advert_frame(
    lifetime: u16,
    lladdr: bool,
    (prefix, flags, valid, preferred): (&str, u8, u32, u32),
) -> Vec<u8> {
    let mut ra = vec![134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    ra[6..8].copy_from_slice(&lifetime.to_be_bytes());
    if lladdr {
        ra.extend_from_slice(&[1, 1]);
        ra.extend_from_slice(&MAC_A.0);
    }
    ra.extend_from_slice(&[3, 4, 64, flags]);
    ra.extend_from_slice(&valid.to_be_bytes());
    ra.extend_from_slice(&preferred.to_be_bytes());
    ra.extend_from_slice(&[0; 4]);
    ra.extend_from_slice(&v6(prefix).octets());
    let packet = crate::common::ipv6_icmp(v6("fe80::1"), v6("ff02::1"), 255, &ra);
    frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &packet)
}

/// With `stable_privacy` the address a router's prefix gives hides the hardware address (RFC
/// 7217), and is the same from one run of a stack to the next with the same secret.
#[test]
fn stable_privacy_addresses_hide_the_hardware_address_and_stay_with_the_secret() {
    let address = |secret: [u8; 16]| {
        let mut cfg = config();
        cfg.ethernet.stable_privacy = true;
        cfg.secret = Some(fastpath::secret::SecretKey::from_bytes(secret));
        let (mut b, mut raw) = b_and_raw_with(cfg);
        let mut now = Instant::from_secs(1);
        b.poll(now);
        let prefix = ("2001:db8:1::", 0xc0, u32::MAX, u32::MAX);
        inject(&mut raw, &advert_frame(1800, false, prefix));
        for _ in 0..30 {
            now = now + Duration::from_millis(100);
            b.poll(now);
        }
        let global: Vec<Ipv6Addr> = b
            .ipv6_addresses(ETH)
            .iter()
            .map(|c| c.addr)
            .filter(|a| a.segments()[0] == 0x2001)
            .collect();
        assert_eq!(global.len(), 1, "{global:?}");
        let link_local: Vec<Ipv6Addr> = b
            .ipv6_addresses(ETH)
            .iter()
            .map(|c| c.addr)
            .filter(|a| a.is_unicast_link_local())
            .collect();
        assert_eq!(link_local.len(), 1, "{link_local:?}");
        (global[0], link_local[0])
    };
    let (a, ll) = address([1; 16]);
    assert_eq!(a.segments()[..4], [0x2001, 0xdb8, 1, 0]);
    assert_ne!(
        a,
        v6("2001:db8:1:0:0:ff:fe00:b"),
        "not the EUI-64 identifier"
    );
    assert_eq!(ll.segments()[..4], [0xfe80, 0, 0, 0]);
    assert_ne!(ll, v6("fe80::ff:fe00:b"), "nor for the link-local address");
    assert_ne!(
        ll.octets()[8..],
        a.octets()[8..],
        "another for another prefix"
    );
    assert_eq!(address([1; 16]), (a, ll), "stable with the secret");
    let (a2, ll2) = address([2; 16]);
    assert!(a2 != a && ll2 != ll);
}

/// Temporary addresses (RFC 8981) through the stack: a router's prefix gives the host its own
/// address and a temporary one; traffic to the world leaves from the temporary one when they are
/// preferred (Linux's `use_tempaddr` 2), from the other when they are only formed (1), and with
/// the mode off there is no temporary address. Each stack draws its own: two stacks with the
/// same secret and the same clock get different ones.
#[test]
fn temporary_addresses_are_the_source_of_new_traffic_when_preferred() {
    use fastpath::config::TemporaryMode;
    let run = |mode: TemporaryMode| {
        let mut cfg = config();
        cfg.ethernet.temporary.mode = mode;
        cfg.secret = Some(fastpath::secret::SecretKey::from_bytes([1; 16]));
        let (mut b, mut raw) = b_and_raw_with(cfg);
        let mut now = Instant::from_secs(1);
        b.poll(now);
        // A default router (fe80::1, MAC_A) and the autonomous prefix 2001:db8:1::/64.
        let prefix = ("2001:db8:1::", 0xc0, 86_400, 14_400);
        inject(&mut raw, &advert_frame(1800, true, prefix));
        for _ in 0..30 {
            now = now + Duration::from_millis(100);
            b.poll(now);
        }
        let eth = b.ethernet(ETH).unwrap();
        let global: Vec<Ipv6Addr> = b
            .ipv6_addresses(ETH)
            .iter()
            .map(|c| c.addr)
            .filter(|a| a.segments()[0] == 0x2001)
            .collect();
        let temporary: Vec<Ipv6Addr> = global
            .iter()
            .copied()
            .filter(|&a| eth.is_temporary(a))
            .collect();
        capture(&mut raw);
        let tx = b.udp_bind("[::]:0").unwrap();
        b.udp(tx).send_to(b"out", "[2001:db8:99::1]:9").unwrap();
        b.poll(now);
        let out = capture(&mut raw);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(&out[0][..6], &MAC_A.0, "through the router");
        let mut src = [0u8; 16];
        src.copy_from_slice(&out[0][14 + 8..14 + 24]);
        (global, temporary, Ipv6Addr::from(src))
    };
    let (global, temporary, src) = run(TemporaryMode::Prefer);
    assert_eq!(global.len(), 2, "{global:?}");
    assert_eq!(temporary.len(), 1, "{global:?}");
    assert_eq!(src, temporary[0], "from the temporary address");
    let public = global
        .iter()
        .find(|&&a| a != temporary[0])
        .copied()
        .unwrap();
    assert_eq!(public, v6("2001:db8:1:0:0:ff:fe00:b"));
    let (again, temporary_again, _) = run(TemporaryMode::Prefer);
    assert!(again.contains(&public));
    assert_ne!(temporary_again, temporary, "drawn afresh by each stack");
    let (global, temporary, src) = run(TemporaryMode::Form);
    assert_eq!((global.len(), temporary.len()), (2, 1));
    assert_eq!(src, public, "from the prefix's own address");
    let (global, temporary, src) = run(TemporaryMode::Off);
    assert_eq!((global.len(), temporary.len()), (1, 0));
    assert_eq!(src, public);
}

/// A router advertisement from `router` (`mac`) to all nodes, in its frame: a default router for
/// `lifetime` seconds with the preference bits `prf` (RFC 4191: 0b01 high, 0b11 low), its
/// hardware address given, no prefix.
fn router_frame(router: &str, mac: MacAddr, lifetime: u16, prf: u8) -> Vec<u8> {
    let mut ra = vec![134, 0, 0, 0, 64, prf << 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    ra[6..8].copy_from_slice(&lifetime.to_be_bytes());
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&mac.0);
    let packet = crate::common::ipv6_icmp(v6(router), v6("ff02::1"), 255, &ra);
    frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), mac, 0x86dd, &packet)
}

/// B with the global address 2001:db8:1::b checked and the routers `routers` (link-local
/// address, hardware address) heard, in that order, each a default router for 1800 s at medium
/// preference; the raw end's queue emptied. Returns B, the raw end and the time.
fn host_with_routers(routers: &[(&str, MacAddr)]) -> (Stack, PairEnd, Instant) {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    b.add_ipv6_address(ETH, "2001:db8:1::b/64".parse().unwrap())
        .unwrap();
    for &(router, mac) in routers {
        inject(&mut raw, &router_frame(router, mac, 1800, 0));
    }
    for _ in 0..20 {
        now = now + Duration::from_millis(100);
        b.poll(now);
    }
    capture(&mut raw);
    (b, raw, now)
}

/// The frame of the UDP datagram socket `tx` of B sends to the world (2001:db8:99::1) at `now`,
/// if it left at once.
fn datagram_out(
    b: &mut Stack,
    raw: &mut PairEnd,
    tx: fastpath::UdpSocket,
    now: Instant,
) -> Option<Vec<u8>> {
    capture(raw);
    b.udp(tx).send_to(b"out", "[2001:db8:99::1]:9").unwrap();
    b.poll(now);
    capture(raw)
        .into_iter()
        .find(|f| f.len() > 54 && f[20] == 17)
}

/// Two routers on the link: traffic to the world goes through the first heard; when it stops
/// answering neighbour discovery's probes (RFC 4861 §7.3.3: STALE, DELAY 5 s, three unicast
/// probes a second apart), through the other (§6.3.6); a router that advertises a high
/// preference (RFC 4191) takes over.
#[test]
fn a_router_that_stops_answering_is_replaced_by_another() {
    let mac_c = MacAddr([2, 0, 0, 0, 0, 0x0c]);
    let mac_d = MacAddr([2, 0, 0, 0, 0, 0x0d]);
    let (mut b, mut raw, mut now) = host_with_routers(&[("fe80::1", MAC_A), ("fe80::2", mac_c)]);
    let tx = b.udp_bind("[::]:0").unwrap();
    // The hardware address the next datagram to the world goes to.
    let first_hop = |b: &mut Stack, raw: &mut PairEnd, now: Instant| {
        datagram_out(b, raw, tx, now).map(|f| MacAddr(f[..6].try_into().unwrap()))
    };
    assert_eq!(
        first_hop(&mut b, &mut raw, now),
        Some(MAC_A),
        "the first router heard"
    );
    assert_eq!(
        b.ethernet(ETH).unwrap().default_router(),
        Some(v6("fe80::1"))
    );
    // fe80::1 answers nothing; one datagram a second keeps its entry in use.
    let mut hops = Vec::new();
    for _ in 0..12 {
        now = now + Duration::from_secs(1);
        b.poll(now);
        hops.push(first_hop(&mut b, &mut raw, now));
    }
    assert_eq!(hops.last(), Some(&Some(mac_c)), "{hops:?}");
    assert!(
        hops.contains(&Some(MAC_A)),
        "through fe80::1 until it failed: {hops:?}"
    );
    assert_eq!(
        b.ethernet(ETH).unwrap().default_router(),
        Some(v6("fe80::2"))
    );
    // A third router with a high preference.
    inject(&mut raw, &router_frame("fe80::3", mac_d, 1800, 0b01));
    b.poll(now);
    assert_eq!(first_hop(&mut b, &mut raw, now), Some(mac_d));
    // It leaves (lifetime 0): back to fe80::2, not to fe80::1, which still has not answered.
    inject(&mut raw, &router_frame("fe80::3", mac_d, 0, 0b01));
    b.poll(now);
    assert_eq!(first_hop(&mut b, &mut raw, now), Some(mac_c));
}

/// A connection goes by the route in use when it sends, not the one it was opened with: when the
/// first router stops answering, the SYN's retransmissions go through the second (as a redirect
/// would move them), as Linux re-checks a socket's cached route.
#[test]
fn a_connection_follows_its_route_to_another_router() {
    let mac_c = MacAddr([2, 0, 0, 0, 0, 0x0c]);
    let (mut b, mut raw, mut now) = host_with_routers(&[("fe80::1", MAC_A), ("fe80::2", mac_c)]);
    b.tcp_connect("[2001:db8:99::1]:80").unwrap();
    // Where each SYN went, over 20 s.
    let mut syns = Vec::new();
    for _ in 0..200 {
        b.poll(now);
        for f in capture(&mut raw) {
            if f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 6 {
                syns.push(MacAddr(f[..6].try_into().unwrap()));
            }
        }
        now = now + Duration::from_millis(100);
    }
    assert_eq!(syns.first(), Some(&MAC_A), "{syns:?}");
    assert_eq!(syns.last(), Some(&mac_c), "{syns:?}");
    assert_eq!(
        b.ethernet(ETH).unwrap().default_router(),
        Some(v6("fe80::2"))
    );
}

/// What a router's advertisement says of the link (RFC 4861 §6.3.4) is taken: its Cur Hop Limit
/// becomes the hop limit of what leaves by the interface (a UDP socket's cached header too), and
/// its Retrans Timer the time between neighbour solicitations.
#[test]
fn a_routers_hop_limit_and_retransmission_timer_are_the_links() {
    // A default router, fe80::1 (MAC_A), that says nothing of hop limits and timers.
    let (mut b, mut raw, now) = host_with_routers(&[("fe80::1", MAC_A)]);
    let tx = b.udp_bind("[::]:0").unwrap();
    let hop_limit = |b: &mut Stack, raw: &mut PairEnd, now: Instant| {
        datagram_out(b, raw, tx, now).map(|f| f[21])
    };
    assert_eq!(
        hop_limit(&mut b, &mut raw, now),
        Some(64),
        "the stack's own"
    );
    // Cur Hop Limit 17, Reachable Time 5 s, Retrans Timer 300 ms.
    let mut ra = vec![134, 0, 0, 0, 17, 0, 0x07, 0x08];
    ra.extend_from_slice(&5000u32.to_be_bytes());
    ra.extend_from_slice(&300u32.to_be_bytes());
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&MAC_A.0);
    let packet = crate::common::ipv6_icmp(v6("fe80::1"), v6("ff02::1"), 255, &ra);
    inject(
        &mut raw,
        &frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &packet),
    );
    b.poll(now);
    assert_eq!(hop_limit(&mut b, &mut raw, now), Some(17), "the router's");
    // A neighbour that does not answer: solicited three times, 300 ms apart.
    capture(&mut raw);
    b.udp(tx).send_to(b"x", "[2001:db8:1::7]:9").unwrap();
    let mut asked = Vec::new();
    for step in 0..20u64 {
        let at = now + Duration::from_millis(50 * step);
        b.poll(at);
        for f in capture(&mut raw) {
            if solicited(&f) == Some(v6("2001:db8:1::7")) {
                asked.push(50 * step);
            }
        }
    }
    assert_eq!(asked, [0, 300, 600], "{asked:?}");
}

/// A router advertisement with lifetimes: the default route (3 s) and the on-link prefix (5 s).
fn short_lived_advert() -> Vec<u8> {
    let mut ra = vec![134, 0, 0, 0, 64, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0];
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&MAC_A.0);
    ra.extend_from_slice(&[3, 4, 64, 0x80]);
    ra.extend_from_slice(&5u32.to_be_bytes());
    ra.extend_from_slice(&5u32.to_be_bytes());
    ra.extend_from_slice(&[0; 4]);
    ra.extend_from_slice(&v6("2001:db8:7::").octets());
    crate::common::ipv6_icmp(v6("fe80::1"), v6("ff02::1"), 255, &ra)
}

#[test]
fn routers_are_solicited_once_the_link_local_address_is_usable_and_no_more_once_heard() {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    let mut solicitations = 0;
    let is_rs = |f: &Vec<u8>| f.len() > 54 && f[..6] == [0x33, 0x33, 0, 0, 0, 2] && f[54] == 133;
    for _ in 0..6 {
        b.poll(now);
        solicitations += capture(&mut raw).iter().filter(|f| is_rs(f)).count();
        now = now + Duration::from_millis(1100);
    }
    // The first once the link-local address passed its check, the second 4 s later.
    assert_eq!(solicitations, 2);
    inject(
        &mut raw,
        &frame(
            MacAddr([0x33, 0x33, 0, 0, 0, 1]),
            MAC_A,
            0x86dd,
            &short_lived_advert(),
        ),
    );
    for _ in 0..20 {
        b.poll(now);
        solicitations += capture(&mut raw).iter().filter(|f| is_rs(f)).count();
        now = now + Duration::from_millis(1000);
    }
    assert_eq!(solicitations, 2, "none after an advertisement");
    assert_eq!(b.ethernet_counters(ETH).unwrap().rs_out, 2);
}

#[test]
fn what_a_router_advertised_goes_when_its_lifetime_runs_out() {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    inject(
        &mut raw,
        &frame(
            MacAddr([0x33, 0x33, 0, 0, 0, 1]),
            MAC_A,
            0x86dd,
            &short_lived_advert(),
        ),
    );
    b.poll(now);
    let route = |b: &Stack, to: &str| {
        b.ipv6_routes()
            .routes()
            .iter()
            .any(|r| r.dest.contains(v6(to)) && r.dest.prefix_len < 128)
    };
    assert!(route(&b, "2001:db8:99::1"), "a default route");
    assert!(route(&b, "2001:db8:7::9"), "the on-link prefix");
    now = now + Duration::from_millis(3500);
    b.poll(now);
    assert!(!route(&b, "2001:db8:99::1"), "the default route expired");
    assert!(route(&b, "2001:db8:7::9"), "the prefix not yet");
    now = now + Duration::from_millis(2000);
    b.poll(now);
    assert!(!route(&b, "2001:db8:7::9"), "the prefix expired");
}

/// The source address of the UDP datagrams among `frames`.
fn udp_sources(frames: &[Vec<u8>]) -> Vec<Ipv6Addr> {
    frames
        .iter()
        .filter(|f| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 17)
        .map(|f| Ipv6Addr::from(<[u8; 16]>::try_from(&f[22..38]).unwrap()))
        .collect()
}

#[test]
fn an_autoconfigured_address_is_deprecated_then_given_up_as_its_lifetimes_say() {
    let (mut b, mut raw) = b_and_raw();
    b.add_ipv6_address(ETH, "2001:db8:2::5/64".parse().unwrap())
        .unwrap();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    // RA: a default router for 1800 s, prefix 2001:db8:1::/64 autonomous but not on-link,
    // preferred for 3 s, valid for 6 s.
    inject(
        &mut raw,
        &advert_frame(1800, true, ("2001:db8:1::", 0x40, 6, 3)),
    );
    let slaac = v6("2001:db8:1:0:0:ff:fe00:b");
    let has = |b: &Stack| b.ipv6_addresses(ETH).iter().any(|c| c.addr == slaac);
    for _ in 0..2 {
        b.poll(now);
        now = now + Duration::from_millis(1100);
    }
    b.poll(now);
    assert!(has(&b), "formed and checked");
    assert!(
        !b.ipv6_routes()
            .routes()
            .iter()
            .any(|r| r.dest.prefix_len > 0 && r.dest.contains(slaac)),
        "no on-link route: the prefix's on-link flag is clear"
    );
    // To a destination beyond the router, from the address sharing the longest prefix with it.
    let tx = b.udp_bind("[::]:0").unwrap();
    let mut source = |b: &mut Stack, now: Instant| {
        capture(&mut raw);
        b.udp(tx).send_to(b"which", "[2001:db8:1:1::1]:9").unwrap();
        b.poll(now);
        udp_sources(&capture(&mut raw))
    };
    assert_eq!(source(&mut b, now), [slaac]);
    // Past its preferred lifetime (4 s): deprecated, so another global address is the source,
    // but it is still ours.
    now = Instant::from_secs(5);
    b.poll(now);
    assert!(has(&b));
    assert_eq!(source(&mut b, now), [v6("2001:db8:2::5")]);
    let bound = b.udp_bind(format!("[{slaac}]:7000")).unwrap();
    b.udp(bound).close().unwrap();
    // Past its valid lifetime (7 s): gone.
    now = Instant::from_secs(8);
    b.poll(now);
    assert!(!has(&b));
    let refused = b.udp_bind(format!("[{slaac}]:7000")).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::AddrNotAvailable);
}

#[test]
fn an_address_removed_is_not_ours_and_its_group_is_left() {
    let (mut b, mut raw) = b_and_raw();
    let extra = v6("2001:db8::77");
    b.add_ipv6_address(ETH, Ipv6Cidr::new(extra, 64)).unwrap();
    let mut now = Instant::from_secs(1);
    for _ in 0..3 {
        b.poll(now);
        now = now + Duration::from_millis(1100);
    }
    assert!(b.ipv6_addresses(ETH).iter().any(|c| c.addr == extra));
    capture(&mut raw);
    b.remove_ipv6_address(ETH, extra).unwrap();
    let kind = b.remove_ipv6_address(ETH, extra).unwrap_err().kind();
    assert_eq!(kind, std::io::ErrorKind::NotFound);
    assert!(!b.ipv6_addresses(ETH).iter().any(|c| c.addr == extra));
    assert!(
        !b.ipv6_routes()
            .routes()
            .iter()
            .any(|r| r.dest.addr == extra),
        "its on-link route went with it"
    );
    // Its solicited-node group is reported left (a change to include mode, type 3), twice.
    let mut leaves = 0;
    for step in 0..30 {
        b.poll(now + Duration::from_millis(100 * step));
        for f in capture(&mut raw) {
            if f[..6] == [0x33, 0x33, 0, 0, 0, 0x16] {
                let msg = &f[14 + 48..];
                let n = u16::from_be_bytes([msg[6], msg[7]]) as usize;
                leaves += (0..n)
                    .filter(|i| {
                        let r = &msg[8 + 20 * i..8 + 20 * (i + 1)];
                        r[0] == 3 && r[4..20] == v6("ff02::1:ff00:77").octets()
                    })
                    .count();
            }
        }
    }
    assert_eq!(leaves, 2);
    // A solicitation for it is no longer answered.
    let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
    ns.extend_from_slice(&extra.octets());
    ns.extend_from_slice(&[1, 1]);
    ns.extend_from_slice(&MAC_A.0);
    let packet = crate::common::ipv6_icmp(v6("fe80::a"), v6("ff02::1:ff00:77"), 255, &ns);
    inject(
        &mut raw,
        &frame(
            MacAddr([0x33, 0x33, 0xff, 0, 0, 0x77]),
            MAC_A,
            0x86dd,
            &packet,
        ),
    );
    b.poll(now + Duration::from_secs(4));
    let answers = capture(&mut raw)
        .iter()
        .filter(|f| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[54] == 136)
        .count();
    assert_eq!(answers, 0);
}

#[test]
fn two_hosts_on_one_vlan_talk_and_frames_of_another_are_dropped() {
    let vlan = |id| StackConfig {
        ethernet: EthernetConfig {
            vlan: Some(id),
            ..EthernetConfig::default()
        },
        ..StackConfig::default()
    };
    let (ea, eb) = PairEnd::ethernet_pair(
        LinkCapabilities::plain(1500),
        4096,
        Impairments::default(),
        [MAC_A, MAC_B],
    );
    let mut a = Stack::new(vlan(5));
    a.add_interface("eth0.5", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(vlan(5));
    b.add_interface("eth0.5", eb, Ipv4Cidr::new(B, 24));
    let mut now = Instant::ZERO;
    let rx = b.udp_bind((B, 7)).unwrap();
    let tx = a.udp_bind((A, 0)).unwrap();
    a.udp(tx).send_to(b"tagged", (B, 7)).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(5));
    let mut buf = [0u8; 16];
    let (n, _) = b.udp(rx).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"tagged");
    // B on VLAN 6 hears A's frames (tagged 5) and drops every one.
    let (ea, eb) = PairEnd::ethernet_pair(
        LinkCapabilities::plain(1500),
        4096,
        Impairments::default(),
        [MAC_A, MAC_B],
    );
    let mut a = Stack::new(vlan(5));
    a.add_interface("eth0.5", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(vlan(6));
    b.add_interface("eth0.6", eb, Ipv4Cidr::new(B, 24));
    let tx = a.udp_bind((A, 0)).unwrap();
    a.udp(tx).send_to(b"wrong vlan", (B, 7)).unwrap();
    run(&mut a, &mut b, &mut now, Duration::from_millis(5));
    assert!(b.counters().drops.get(DropReason::EthernetOtherVlan) >= 1);
    assert_eq!(b.ethernet_counters(ETH).unwrap().arp_replies_out, 0);
}

#[test]
fn the_groups_it_listens_to_are_reported_to_mld_routers_and_a_query_is_answered_once() {
    let (mut b, mut raw) = b_and_raw();
    let mut now = Instant::from_secs(1);
    b.poll(now);
    let is_report = |f: &Vec<u8>| f[..6] == [0x33, 0x33, 0, 0, 0, 0x16];
    let reports: Vec<Vec<u8>> = capture(&mut raw).into_iter().filter(is_report).collect();
    assert_eq!(
        reports.len(),
        1,
        "one report for the link-local address's group"
    );
    let f = &reports[0];
    // IPv6 from the unspecified address (the link-local one is still tentative) to ff02::16, hop
    // limit 1, a hop-by-hop header with the router alert option, then ICMPv6 143.
    let ip = &f[14..];
    assert_eq!((ip[6], ip[7]), (0, 1));
    assert_eq!(&ip[8..24], &[0; 16]);
    assert_eq!(ip[24..40], v6("ff02::16").octets());
    assert_eq!(&ip[40..48], &[58, 0, 5, 2, 0, 0, 1, 0]);
    let msg = &ip[48..];
    assert_eq!(
        (msg[0], msg[1], u16::from_be_bytes([msg[6], msg[7]])),
        (143, 0, 1)
    );
    assert_eq!(msg[8], 4, "a join: change to exclude mode, no sources");
    assert_eq!(msg[12..28], v6("ff02::1:ff00:b").octets());
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[8..40]);
    pseudo.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(msg);
    assert_eq!(fastpath::checksum::rfc1071(&pseudo), 0xffff, "checksum");
    // The change is reported once more within a second (RFC 3810 §6.1's robustness), then no more.
    let mut repeats = Vec::new();
    for step in 1..=40 {
        let at = now + Duration::from_millis(50 * step);
        b.poll(at);
        if capture(&mut raw).iter().any(is_report) {
            repeats.push(50 * step);
        }
    }
    assert_eq!(repeats.len(), 1, "one retransmission: {repeats:?}");
    assert!(repeats[0] <= 1000, "within a second: {repeats:?}");
    // A general query from a router (maximum response delay 10 s): one report at a random time
    // within it, however many times it asks.
    let mut query = vec![0x60, 0, 0, 0, 0, 36, 0, 1];
    query.extend_from_slice(&v6("fe80::1").octets());
    query.extend_from_slice(&v6("ff02::1").octets());
    query.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
    query.extend_from_slice(&[130, 0, 0, 0, 0x27, 0x10, 0, 0]);
    query.extend_from_slice(&[0; 16]);
    query.extend_from_slice(&[0, 0, 0, 0]);
    now = now + Duration::from_secs(3);
    b.poll(now);
    capture(&mut raw);
    for _ in 0..5 {
        inject(
            &mut raw,
            &frame(MacAddr([0x33, 0x33, 0, 0, 0, 1]), MAC_A, 0x86dd, &query),
        );
    }
    let mut answered = Vec::new();
    for step in 0..=40 {
        b.poll(now + Duration::from_millis(300 * step));
        for f in capture(&mut raw).iter().filter(|f| is_report(f)) {
            // Current state (RFC 3810 §6.2): the group in exclude mode, not a change.
            assert_eq!(f[14 + 48 + 8], 2, "a current-state record");
            answered.push(300 * step);
        }
    }
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert!(
        answered[0] <= 10_000 + 300,
        "within the delay: {answered:?}"
    );
    assert_eq!(b.ethernet_counters(ETH).unwrap().mld_queries_in, 5);
}
