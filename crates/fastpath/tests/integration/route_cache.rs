//! The per-socket output route cache (`StackConfig::output_route_cache`) never sends a datagram
//! differently from the general path: a new route, a new interface, changed options and connect or
//! disconnect all take effect on the very next datagram. Each check runs with the cache on and off
//! and compares what leaves, byte for byte.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::common::*;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{InterfaceId, Ipv4Cidr, Stack, StackConfig, UdpOptions};

const FAR: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 9);

/// A stack with pair0 (10.0.0.2/24) and pair1 (10.1.0.2/24), a route to 10.9.9.0/24 via 10.0.0.1,
/// and the raw ends of both pairs.
fn host(cache: bool) -> (Stack, [PairEnd; 2], InterfaceId) {
    let config = StackConfig {
        output_route_cache: cache,
        ..StackConfig::default()
    };
    let mut s = Stack::new(config);
    let (r0, e0) = PairEnd::pair(LinkCapabilities::plain(1500), 1024, Impairments::default());
    let (r1, e1) = PairEnd::pair(LinkCapabilities::plain(1500), 1024, Impairments::default());
    let i0 = s.add_interface("pair0", e0, Ipv4Cidr::new(B, 24));
    s.add_interface("pair1", e1, Ipv4Cidr::new(Ipv4Addr::new(10, 1, 0, 2), 24));
    s.add_route(Ipv4Cidr::new(Ipv4Addr::new(10, 9, 9, 0), 24), Some(A), i0)
        .unwrap();
    (s, [r0, r1], i0)
}

/// Everything each raw end received since the last call, IP identifiers zeroed (they count per stack).
fn taken(raw: &mut [PairEnd; 2]) -> [Vec<Vec<u8>>; 2] {
    let mut out = [capture(&mut raw[0]), capture(&mut raw[1])];
    for packets in &mut out {
        for p in packets.iter_mut() {
            p[4] = 0;
            p[5] = 0;
            let sum = !fastpath::checksum::rfc1071(&{
                let mut h = p[..20].to_vec();
                h[10] = 0;
                h[11] = 0;
                h
            });
            p[10..12].copy_from_slice(&sum.to_be_bytes());
        }
    }
    out
}

/// Runs the same sequence of sends and changes with the cache on and off; returns what left.
fn scenario(cache: bool) -> Vec<[Vec<Vec<u8>>; 2]> {
    let (mut s, mut raw, _) = host(cache);
    let now = fastpath::Instant::ZERO;
    let sock = s
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000))
        .unwrap();
    let far = SocketAddrV4::new(FAR, 53);
    let near = SocketAddrV4::new(A, 53);
    let mut steps = Vec::new();
    let send = |s: &mut Stack, to: SocketAddrV4, raw: &mut [PairEnd; 2]| {
        s.udp(sock).send_to(b"hello", to).unwrap();
        s.udp(sock).send_to(b"again", to).unwrap();
        s.poll(now);
        taken(raw)
    };
    // Twice to the same place (the second from the cache), then elsewhere and back.
    steps.push(send(&mut s, far, &mut raw));
    steps.push(send(&mut s, near, &mut raw));
    steps.push(send(&mut s, far, &mut raw));
    // A more specific route through the other interface: the next datagram follows it.
    let pair1 = s.interfaces().find(|i| i.1 == "pair1").unwrap().0;
    s.add_route(
        Ipv4Cidr::new(FAR, 32),
        Some(Ipv4Addr::new(10, 1, 0, 1)),
        pair1,
    )
    .unwrap();
    let moved = send(&mut s, far, &mut raw);
    assert!(
        moved[0].is_empty() && moved[1].len() == 2,
        "the new route is used at once"
    );
    steps.push(moved);
    // No checksum from now on.
    s.udp(sock)
        .set_options(UdpOptions {
            no_checksum: true,
            ..UdpOptions::default()
        })
        .unwrap();
    let plain = send(&mut s, far, &mut raw);
    assert!(
        plain[1].iter().all(|p| p[26] == 0 && p[27] == 0),
        "no checksum"
    );
    steps.push(plain);
    // Connected, then disconnected.
    s.udp(sock).connect(near).unwrap();
    s.udp(sock).send(b"connected").unwrap();
    s.poll(now);
    steps.push(taken(&mut raw));
    s.udp(sock).disconnect().unwrap();
    steps.push(send(&mut s, far, &mut raw));
    steps
}

#[test]
fn the_cache_sends_exactly_what_the_general_path_sends() {
    let with = scenario(true);
    let without = scenario(false);
    assert_eq!(with.len(), without.len());
    for (i, (w, wo)) in with.iter().zip(&without).enumerate() {
        assert_eq!(w, wo, "step {i}");
    }
    // And the traffic is as routed: the first sends to FAR left on pair0.
    assert_eq!(with[0][0].len(), 2);
}
