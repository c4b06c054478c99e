//! Interception (`fastpath::api::intercept`): stack B intercepts on its link, and stack A (the
//! applications behind a TUN interface, in a transparent proxy) reaches "the whole network" through
//! it. TCP connections and UDP flows to addresses that are nobody's here are terminated by B as if it
//! were the host addressed; everything else intercepted is dropped by name.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};

use common::*;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{DropReason, Instant, InterfaceId, Ipv4Cidr, Stack, StackConfig};

const T0: Instant = Instant::ZERO;
const LINK: InterfaceId = InterfaceId(1);

fn sock(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A (10.0.0.1, fd00::1) routes everything through B (10.0.0.2, fd00::2), which intercepts on
/// the link when `intercept` says so.
fn proxy_pair(intercept: bool) -> (Stack, Stack) {
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    a.add_route(Ipv4Cidr::new(Ipv4Addr::UNSPECIFIED, 0), Some(B), LINK)
        .unwrap();
    a.add_ipv6_address(LINK, "fd00::1/64".parse().unwrap())
        .unwrap();
    b.add_ipv6_address(LINK, "fd00::2/64".parse().unwrap())
        .unwrap();
    a.add_ipv6_route(
        "::/0".parse().unwrap(),
        Some("fd00::2".parse().unwrap()),
        LINK,
    )
    .unwrap();
    b.set_intercept(LINK, intercept).unwrap();
    (a, b)
}

#[test]
fn tcp_to_any_address_is_accepted_with_that_address_as_its_local_one() {
    let (mut a, mut b) = proxy_pair(true);
    let listener = b.tcp_intercept(16).unwrap();
    for (dst, app) in [
        ("198.51.100.7:443", "10.0.0.1"),
        ("[2001:db8:5::9]:80", "fd00::1"),
    ] {
        let dst = sock(dst);
        let client = a.tcp_connect(dst).unwrap();
        settle(&mut a, &mut b, T0);
        assert!(a.tcp(client).is_established(), "{dst}: the handshake");
        let (conn, _) = b.tcp_listener(listener).accept().expect("accepted");
        let (local, remote) = b.tcp(conn).addrs().unwrap();
        assert_eq!(local, dst, "the local address is the destination asked for");
        assert_eq!(remote.ip().to_string(), app);
        assert_eq!(remote, a.tcp(client).addrs().unwrap().0);

        a.tcp(client).write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        settle(&mut a, &mut b, T0);
        let mut got = [0u8; 64];
        let n = b.tcp(conn).read(&mut got).unwrap();
        assert_eq!(&got[..n], b"GET / HTTP/1.0\r\n\r\n");
        b.tcp(conn).write_all(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
        b.tcp(conn).close();
        settle(&mut a, &mut b, T0);
        let mut reply = String::new();
        a.tcp(client).read_to_string(&mut reply).unwrap();
        assert_eq!(reply, "HTTP/1.0 200 OK\r\n\r\n");
        a.tcp(client).close();
        settle(&mut a, &mut b, T0);
    }
    // Nothing was dropped along the way, and no port of B's was involved.
    assert_eq!(b.counters().drops.total(), 0, "{}", b.counters());
}

#[test]
fn a_listener_on_a_port_of_the_host_never_takes_an_intercepted_connection() {
    let (mut a, mut b) = proxy_pair(true);
    let own = b.tcp_listen("0.0.0.0:80", 16).unwrap();
    let intercepting = b.tcp_intercept(16).unwrap();
    let to_other = a.tcp_connect("198.51.100.7:80").unwrap();
    let to_b = a.tcp_connect("10.0.0.2:80").unwrap();
    settle(&mut a, &mut b, T0);
    assert!(a.tcp(to_other).is_established() && a.tcp(to_b).is_established());
    let (s, _) = b.tcp_listener(intercepting).accept().unwrap();
    assert_eq!(b.tcp(s).addrs().unwrap().0, sock("198.51.100.7:80"));
    assert!(
        b.tcp_listener(intercepting).accept().is_err(),
        "only that one"
    );
    let (s, _) = b.tcp_listener(own).accept().unwrap();
    assert_eq!(b.tcp(s).addrs().unwrap().0, sock("10.0.0.2:80"));
    // A second intercepting listener is refused; closing the first stops interception of TCP.
    assert_eq!(
        b.tcp_intercept(1).unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse
    );
    b.tcp_listener(intercepting).close();
    let late = a.tcp_connect("198.51.100.7:81").unwrap();
    settle(&mut a, &mut b, T0);
    assert!(!a.tcp(late).is_established());
    assert_eq!(b.counters().drops.get(DropReason::TcpInterceptOff), 1);
    let again = b.tcp_intercept(4).unwrap();
    assert!(!b.tcp_listener(again).readable());
}

#[test]
fn without_interception_other_hosts_packets_are_not_for_us() {
    let (mut a, mut b) = proxy_pair(false);
    let _l = b.tcp_intercept(16).unwrap();
    b.udp_intercept(true);
    let client = a.tcp_connect("198.51.100.7:443").unwrap();
    let u = a.udp_bind("0.0.0.0:0").unwrap();
    a.udp(u).send_to(b"x", "203.0.113.5:53").unwrap();
    settle(&mut a, &mut b, T0);
    assert!(!a.tcp(client).is_established());
    assert_eq!(b.counters().drops.get(DropReason::Ipv4NotForUs), 2);
    assert!(!b.udp_intercepted_readable());
}

#[test]
fn intercepted_udp_is_read_with_its_destination_and_answered_from_it() {
    let (mut a, mut b) = proxy_pair(true);
    // A socket of B's own on port 53 must not see datagrams to other hosts' port 53.
    let own = b.udp_bind("0.0.0.0:53").unwrap();
    b.udp_intercept(true);
    for (app, dst) in [
        ("0.0.0.0:0", "203.0.113.5:53"),
        ("[::]:0", "[2001:db8::53]:53"),
    ] {
        let u = a.udp_bind(app).unwrap();
        let dst = sock(dst);
        a.udp(u).send_to(b"query", dst).unwrap();
        settle(&mut a, &mut b, T0);
        assert!(b.udp_intercepted_readable());
        let mut buf = [0u8; 3];
        let (n, from, to) = b.udp_recv_intercepted(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], to),
            (&b"que"[..], dst),
            "truncated to the buffer"
        );
        assert_eq!(from.port(), a.udp(u).local_addr().unwrap().port());
        b.udp_send_from(b"answer", to, from).unwrap();
        settle(&mut a, &mut b, T0);
        let mut got = [0u8; 16];
        let (n, sender) = a.udp(u).recv_from(&mut got).unwrap();
        assert_eq!((&got[..n], sender), (&b"answer"[..], dst));
    }
    let mut buf = [0u8; 16];
    assert!(b.udp(own).recv_from(&mut buf).is_err());
    assert_eq!(
        b.udp_recv_intercepted(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    // Families must agree.
    let mixed = b.udp_send_from(b"x", sock("203.0.113.5:53"), sock("[fd00::1]:9"));
    assert_eq!(mixed.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn the_intercept_queue_is_bounded_and_off_means_dropped_by_name() {
    let mut config = StackConfig::default();
    config.limits.udp_intercept_queue_bytes = 16 << 10;
    let (mut a, mut b) = two_stacks(
        config,
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    a.add_route(Ipv4Cidr::new(Ipv4Addr::UNSPECIFIED, 0), Some(B), LINK)
        .unwrap();
    b.set_intercept(LINK, true).unwrap();
    let u = a.udp_bind("0.0.0.0:0").unwrap();
    // Off: dropped by name, and sending from another host's address is refused.
    a.udp(u).send_to(b"x", "203.0.113.5:53").unwrap();
    settle(&mut a, &mut b, T0);
    assert_eq!(b.counters().drops.get(DropReason::UdpInterceptOff), 1);
    let spoof = b.udp_send_from(b"x", sock("203.0.113.5:53"), sock("10.0.0.1:9"));
    assert_eq!(
        spoof.unwrap_err().kind(),
        std::io::ErrorKind::PermissionDenied
    );
    // On: the queue holds what its limit allows, the rest is counted.
    b.udp_intercept(true);
    for i in 0..100u16 {
        a.udp(u)
            .send_to(&[0u8; 100], ("203.0.113.5", 1000 + i))
            .unwrap();
        settle(&mut a, &mut b, T0);
    }
    let mut queued = 0;
    let mut buf = [0u8; 200];
    while b.udp_recv_intercepted(&mut buf).is_ok() {
        queued += 1;
    }
    let full = b.counters().drops.get(DropReason::UdpInterceptQueueFull);
    assert!(queued > 0 && full > 0, "queued {queued}, dropped {full}");
    assert_eq!(queued + full, 100);
    // Off again: what is queued is discarded, and reading says so.
    a.udp(u).send_to(b"x", "203.0.113.5:53").unwrap();
    settle(&mut a, &mut b, T0);
    b.udp_intercept(false);
    assert_eq!(
        b.udp_recv_intercepted(&mut buf).unwrap_err().kind(),
        std::io::ErrorKind::NotConnected
    );
}

#[test]
fn intercepted_icmp_and_other_protocols_are_dropped_unanswered() {
    let (mut a, mut b) = proxy_pair(true);
    let _l = b.tcp_intercept(16).unwrap();
    b.udp_intercept(true);
    a.send_echo_request(Ipv4Addr::new(198, 51, 100, 7), 1, 1, b"ping")
        .unwrap();
    settle(&mut a, &mut b, T0);
    assert_eq!(a.recv_echo_reply(), None);
    assert_eq!(b.counters().drops.get(DropReason::InterceptedOther), 1);
    // B's own address still answers.
    a.send_echo_request(B, 1, 2, b"ping").unwrap();
    settle(&mut a, &mut b, T0);
    assert_eq!(a.recv_echo_reply().map(|r| r.seq_no), Some(2));
}

#[test]
fn a_stray_segment_to_an_intercepted_address_is_reset_from_that_address() {
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    b.set_intercept(LINK, true).unwrap();
    let _l = b.tcp_intercept(16).unwrap();
    // An ACK of a connection B does not have, to 198.51.100.7:443.
    let mut segment = Vec::new();
    etherparse::PacketBuilder::ipv4(A.octets(), [198, 51, 100, 7], 64)
        .tcp(5555, 443, 1000, 65535)
        .ack(77)
        .write(&mut segment, &[])
        .unwrap();
    inject(&mut raw, &segment);
    b.poll(T0);
    let sent = capture(&mut raw);
    assert_eq!(sent.len(), 1, "one reply");
    let reply = etherparse::SlicedPacket::from_ip(&sent[0]).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &reply.net else {
        panic!("IPv4")
    };
    assert_eq!(ip.header().source(), [198, 51, 100, 7]);
    assert_eq!(ip.header().destination(), A.octets());
    let Some(etherparse::TransportSlice::Tcp(tcp)) = &reply.transport else {
        panic!("TCP")
    };
    assert!(tcp.rst() && !tcp.syn());
    assert_eq!((tcp.source_port(), tcp.destination_port()), (443, 5555));
    assert_eq!(
        tcp.sequence_number(),
        77,
        "seq = the segment's ack (RFC 9293 §3.10.7.1)"
    );
}

#[test]
fn hostile_traffic_to_intercepted_addresses_gets_at_most_one_reply_each_and_stays_bounded() {
    let mut config = StackConfig::default();
    config.limits.udp_intercept_queue_bytes = 64 << 10;
    config.limits.tcp_connections = 64;
    let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
    b.set_intercept(LINK, true).unwrap();
    let _l = b.tcp_intercept(8).unwrap();
    b.udp_intercept(true);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut now = T0;
    let mut udp_sent = 0;
    for i in 0..4000 {
        let r = next();
        let dst = [198, 51, (r >> 8) as u8 % 4, (r >> 16) as u8];
        let src = if r & 0x100_0000 != 0 {
            A.octets()
        } else {
            [10, 0, 0, 3 + (r >> 32) as u8 % 200]
        };
        let (sport, dport) = ((r >> 40) as u16 % 8 + 1000, (r >> 48) as u16 % 8 + 1);
        let builder = etherparse::PacketBuilder::ipv4(src, dst, 64);
        let mut packet = Vec::new();
        let data = vec![i as u8; (r >> 56) as usize];
        match r % 3 {
            0 => {
                udp_sent += 1;
                builder.udp(sport, dport).write(&mut packet, &data).unwrap()
            }
            _ => {
                let mut t = builder.tcp(sport, dport, next() as u32, 65535);
                let bits = next();
                if bits & 1 != 0 {
                    t = t.syn();
                }
                if bits & 2 != 0 {
                    t = t.ack(next() as u32);
                }
                if bits & 4 != 0 {
                    t = t.fin();
                }
                if bits & 8 != 0 {
                    t = t.rst();
                }
                t.write(&mut packet, &data).unwrap();
            }
        }
        // Timers due now fire first, so that what follows the packet is its own doing.
        b.poll(now);
        capture(&mut raw);
        inject(&mut raw, &packet);
        b.poll(now);
        let sent = capture(&mut raw);
        assert!(sent.len() <= 1, "packet {i} drew {} replies", sent.len());
        now = now + std::time::Duration::from_millis(5);
    }
    assert!(b.tcp_connections() <= 64);
    let mut buf = [0u8; 2048];
    let mut queued = 0;
    while b.udp_recv_intercepted(&mut buf).is_ok() {
        queued += 1;
    }
    // The queue filled (about 1,300 datagrams were sent) and held what its bytes allow.
    let full = b.counters().drops.get(DropReason::UdpInterceptQueueFull);
    assert!(queued > 0 && full > 0, "{queued} queued, {full} dropped");
    assert_eq!(queued + full, udp_sent);
    // The timers run and the stack still serves its own address.
    b.poll(now + std::time::Duration::from_secs(300));
    let u = b.udp_bind("10.0.0.2:9").unwrap();
    let mut packet = Vec::new();
    etherparse::PacketBuilder::ipv4(A.octets(), B.octets(), 64)
        .udp(1, 9)
        .write(&mut packet, b"still here")
        .unwrap();
    inject(&mut raw, &packet);
    b.poll(now + std::time::Duration::from_secs(301));
    let (n, _) = b.udp(u).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"still here");
}

#[test]
fn a_refused_intercepted_datagram_is_reported_to_the_application() {
    let (mut a, mut b) = proxy_pair(true);
    b.udp_intercept(true);
    for (app, dst) in [
        ("0.0.0.0:0", "203.0.113.5:53"),
        ("[::]:0", "[2001:db8::53]:53"),
    ] {
        let u = a.udp_bind(app).unwrap();
        a.udp(u).connect(dst).unwrap();
        a.udp(u).send(b"query").unwrap();
        settle(&mut a, &mut b, T0);
        let mut buf = [0u8; 64];
        let (n, from, to) = b.udp_recv_intercepted(&mut buf).unwrap();
        b.udp_intercepted_unreachable(from, to, n).unwrap();
        settle(&mut a, &mut b, T0);
        let err = a.udp(u).send(b"again").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{dst}");
    }
    b.udp_intercept(false);
    let off = b.udp_intercepted_unreachable(sock("10.0.0.1:9"), sock("203.0.113.5:53"), 1);
    assert_eq!(
        off.unwrap_err().kind(),
        std::io::ErrorKind::PermissionDenied
    );
}
