//! ICMP redirects (RFC 1122 §3.2.2.2) as Linux takes them under its defaults: only from the
//! gateway a destination goes through, only to another gateway on the same link that is already
//! a gateway of a route, and never about this host's own addresses, broadcasts or groups. What is
//! taken becomes a host route of its own; what is not is counted.

use std::net::Ipv4Addr;

use crate::common::*;
use fastpath::link::LinkCapabilities;
use fastpath::{DropReason, Instant, InterfaceId, Ipv4Cidr, Stack, StackConfig};

const ROUTER: Ipv4Addr = A; // 10.0.0.1
const OTHER_ROUTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
const FAR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);
const ETH: InterfaceId = InterfaceId(1);

/// A redirect from `from` about a datagram B sent to `destination`: go through `gateway`.
fn redirect(from: Ipv4Addr, destination: Ipv4Addr, gateway: Ipv4Addr, code: u8) -> Vec<u8> {
    let quoted = ip_packet(B, destination, 17, &[0x9c, 0x40, 0, 53, 0, 8, 0, 0]);
    let mut icmp = vec![5, code, 0, 0];
    icmp.extend_from_slice(&gateway.octets());
    icmp.extend_from_slice(&quoted);
    let sum = !fastpath::checksum::rfc1071(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    ip_packet(from, B, 1, &icmp)
}

fn gateway_for(b: &Stack, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    b.routes().lookup(dst).and_then(|r| r.gateway)
}

#[test]
fn a_redirect_is_taken_only_from_the_first_hop_to_a_known_gateway_on_the_link() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    // A default route through 10.0.0.1, and a route to 198.51.100.0/24 through 10.0.0.7: both
    // gateways known.
    b.add_route(Ipv4Cidr::new(Ipv4Addr::UNSPECIFIED, 0), Some(ROUTER), ETH)
        .unwrap();
    b.add_route(
        Ipv4Cidr::new(Ipv4Addr::new(198, 51, 100, 0), 24),
        Some(OTHER_ROUTER),
        ETH,
    )
    .unwrap();
    let now = Instant::from_secs(1);
    let refused = [
        // Not from the destination's gateway.
        redirect(OTHER_ROUTER, FAR, OTHER_ROUTER, 1),
        // To a gateway no route goes through (Linux's `secure_redirects`).
        redirect(ROUTER, FAR, Ipv4Addr::new(10, 0, 0, 8), 1),
        // To a gateway off the link.
        redirect(ROUTER, FAR, Ipv4Addr::new(192, 0, 2, 1), 1),
        // To the router itself, to our own address, to the subnet's broadcast.
        redirect(ROUTER, FAR, ROUTER, 1),
        redirect(ROUTER, FAR, B, 1),
        redirect(ROUTER, FAR, Ipv4Addr::new(10, 0, 0, 255), 1),
        // About a destination on the link (its first hop is itself).
        redirect(ROUTER, Ipv4Addr::new(10, 0, 0, 9), OTHER_ROUTER, 1),
        // About a group.
        redirect(ROUTER, Ipv4Addr::new(224, 0, 0, 9), OTHER_ROUTER, 1),
    ];
    for r in &refused {
        inject(&mut raw, r);
    }
    b.poll(now);
    assert_eq!(
        b.counters().drops.get(DropReason::IcmpRedirectRejected),
        refused.len() as u64
    );
    assert_eq!(gateway_for(&b, FAR), Some(ROUTER));
    // Code 4 is no redirect.
    inject(&mut raw, &redirect(ROUTER, FAR, OTHER_ROUTER, 4));
    b.poll(now);
    assert_eq!(b.counters().drops.get(DropReason::IcmpUnhandled), 1);
    // From the first hop to the other known gateway: taken (a network redirect as a host one),
    // for that destination only, and nothing sent in answer.
    capture(&mut raw);
    inject(&mut raw, &redirect(ROUTER, FAR, OTHER_ROUTER, 0));
    b.poll(now);
    assert!(capture(&mut raw).is_empty());
    assert_eq!(gateway_for(&b, FAR), Some(OTHER_ROUTER));
    assert_eq!(gateway_for(&b, Ipv4Addr::new(192, 0, 2, 10)), Some(ROUTER));
    assert_eq!(b.counters().icmp.in_redirects, refused.len() as u64 + 1);
    // Now only 10.0.0.7 may redirect it.
    inject(&mut raw, &redirect(ROUTER, FAR, ROUTER, 1));
    b.poll(now);
    assert_eq!(gateway_for(&b, FAR), Some(OTHER_ROUTER));
    inject(&mut raw, &redirect(OTHER_ROUTER, FAR, ROUTER, 1));
    b.poll(now);
    assert_eq!(gateway_for(&b, FAR), Some(ROUTER));
    // A datagram to it still leaves (the link carries IP packets: the next hop does not show).
    let s = b.udp_bind("0.0.0.0:0").unwrap();
    b.udp(s).send_to(b"hi", (FAR, 53)).unwrap();
    b.poll(now);
    assert_eq!(capture(&mut raw).len(), 1);
}

/// A redirect holds for five minutes from the router's last one (as Linux keeps an IPv4
/// redirect); then the destination goes by the routes again, and `next_deadline` says when.
#[test]
fn a_redirect_ends_after_five_minutes() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    b.add_route(Ipv4Cidr::new(Ipv4Addr::UNSPECIFIED, 0), Some(ROUTER), ETH)
        .unwrap();
    b.add_route(
        Ipv4Cidr::new(Ipv4Addr::new(198, 51, 100, 0), 24),
        Some(OTHER_ROUTER),
        ETH,
    )
    .unwrap();
    let t0 = Instant::from_secs(1);
    b.poll(t0);
    assert_eq!(b.next_deadline(), None);
    inject(&mut raw, &redirect(ROUTER, FAR, OTHER_ROUTER, 1));
    b.poll(t0);
    assert_eq!(gateway_for(&b, FAR), Some(OTHER_ROUTER));
    let end = t0 + std::time::Duration::from_secs(300);
    assert_eq!(b.next_deadline(), Some(end));
    b.poll(end - std::time::Duration::from_millis(1));
    assert_eq!(gateway_for(&b, FAR), Some(OTHER_ROUTER));
    b.poll(end);
    assert_eq!(
        gateway_for(&b, FAR),
        Some(ROUTER),
        "by the default route again"
    );
    assert_eq!(b.next_deadline(), None);
}
