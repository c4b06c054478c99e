//! Interception (`fastpath::api::intercept`): stack B intercepts on its link, and stack A (the
//! applications behind a TUN interface, in a transparent proxy) reaches "the whole network" through
//! it. TCP connections and UDP flows to addresses that are nobody's here are terminated by B as if it
//! were the host addressed; everything else intercepted is dropped by name.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};

use crate::common::*;
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

/// A SYN from A (10.0.0.1:40000, sequence number 1000) to another host's 198.51.100.7:80.
fn held_syn() -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ipv4(A.octets(), [198, 51, 100, 7], 64)
        .tcp(40000, 80, 1000, 64240)
        .syn();
    let mut out = Vec::new();
    builder.write(&mut out, &[]).unwrap();
    out
}

/// B intercepting on its link with a holding listener; A's side is the test's raw end.
fn holding_raw() -> (Stack, fastpath::link::PairEnd, fastpath::TcpListener) {
    let (mut b, raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    b.set_intercept(LINK, true).unwrap();
    let listener = b.tcp_intercept_holding(16).unwrap();
    (b, raw, listener)
}

fn tcp_of(packet: &[u8]) -> etherparse::TcpHeaderSlice<'_> {
    let ip = etherparse::Ipv4HeaderSlice::from_slice(packet).unwrap();
    assert_eq!(ip.protocol(), etherparse::IpNumber::TCP);
    assert_eq!(
        ip.source(),
        [198, 51, 100, 7],
        "from the destination asked for"
    );
    assert_eq!(ip.destination(), A.octets());
    etherparse::TcpHeaderSlice::from_slice(&packet[ip.slice().len()..]).unwrap()
}

#[test]
fn a_held_syn_is_answered_only_once_the_application_confirms_it() {
    let (mut b, mut raw, listener) = holding_raw();
    inject(&mut raw, &held_syn());
    b.poll(T0);
    assert!(capture(&mut raw).is_empty(), "nothing answers a held SYN");
    let (conn, peer) = b
        .tcp_listener(listener)
        .accept()
        .expect("held, for the application");
    assert_eq!(
        peer,
        sock("[::ffff:10.0.0.1]:40000"),
        "v4-mapped, as a dual-stack listener's"
    );
    assert!(b.tcp(conn).is_held());
    assert_eq!(b.tcp(conn).addrs().unwrap().0, sock("198.51.100.7:80"));
    // The peer's SYN again (its retransmission) finds the held connection: no second one, and
    // still no answer, however long the application takes.
    inject(&mut raw, &held_syn());
    b.poll(T0 + std::time::Duration::from_secs(1));
    b.poll(T0 + std::time::Duration::from_secs(120));
    assert!(capture(&mut raw).is_empty());
    assert!(b.tcp_listener(listener).accept().is_err(), "one connection");
    assert_eq!(b.counters().tcp.held_syns, 1);
    // Bytes written while held wait for the handshake; a half-close is refused.
    assert_eq!(b.tcp(conn).write(b"hello").unwrap(), 5);
    assert_eq!(
        b.tcp(conn).shutdown_write().unwrap_err().kind(),
        std::io::ErrorKind::NotConnected
    );

    b.tcp(conn).confirm().unwrap();
    assert!(!b.tcp(conn).is_held());
    b.poll(T0 + std::time::Duration::from_secs(120));
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "the SYN-ACK alone");
    let synack = tcp_of(&out[0]);
    assert!(synack.syn() && synack.ack() && !synack.rst() && !synack.fin());
    assert_eq!(
        (synack.source_port(), synack.destination_port()),
        (80, 40000)
    );
    assert_eq!(synack.acknowledgment_number(), 1001);
    assert_eq!(
        b.tcp(conn).confirm().unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput,
        "confirmed once"
    );
    // The handshake's last ACK: established, and the written bytes follow.
    let iss = synack.sequence_number();
    let ack = etherparse::PacketBuilder::ipv4(A.octets(), [198, 51, 100, 7], 64)
        .tcp(40000, 80, 1001, 64240)
        .ack(iss.wrapping_add(1));
    let mut bytes = Vec::new();
    ack.write(&mut bytes, &[]).unwrap();
    inject(&mut raw, &bytes);
    b.poll(T0 + std::time::Duration::from_secs(121));
    assert!(b.tcp(conn).is_established());
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "{out:?}");
    let data = tcp_of(&out[0]);
    assert_eq!(data.sequence_number(), iss.wrapping_add(1));
    assert_eq!(&out[0][20 + data.slice().len()..], b"hello");
    let c = b.counters();
    assert_eq!((c.tcp.held_confirmed, c.tcp.held_refused), (1, 0));
    assert_eq!(c.drops.total(), 0, "{c}");
}

#[test]
fn a_refused_held_syn_gets_a_reset_and_an_unreachable_one_an_icmp_error() {
    // Refused: a RST that acknowledges the SYN, as a closed port's.
    let (mut b, mut raw, listener) = holding_raw();
    inject(&mut raw, &held_syn());
    b.poll(T0);
    let (conn, _) = b.tcp_listener(listener).accept().unwrap();
    b.tcp(conn).abort();
    b.poll(T0);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1);
    let rst = tcp_of(&out[0]);
    assert!(rst.rst() && rst.ack() && !rst.syn());
    assert_eq!(rst.acknowledgment_number(), 1001);
    assert_eq!(b.tcp_connections(), 0);
    assert_eq!(b.counters().tcp.held_refused, 1);

    // Unreachable: an ICMP host unreachable from B quoting the SYN's addresses, ports and sequence
    // number (what the peer matches it on).
    let (mut b, mut raw, listener) = holding_raw();
    inject(&mut raw, &held_syn());
    b.poll(T0);
    let (conn, _) = b.tcp_listener(listener).accept().unwrap();
    b.tcp(conn)
        .unreachable(fastpath::Unreachable::Host)
        .unwrap();
    b.poll(T0);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1);
    let packet = etherparse::SlicedPacket::from_ip(&out[0]).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &packet.net else {
        panic!("IPv4")
    };
    assert_eq!(ip.header().destination(), A.octets());
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &packet.transport else {
        panic!("ICMP: {packet:?}")
    };
    assert_eq!(
        icmp.icmp_type(),
        etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Host
        )
    );
    let quoted = icmp.payload();
    let q = etherparse::Ipv4HeaderSlice::from_slice(quoted).unwrap();
    assert_eq!(
        (q.source(), q.destination()),
        (A.octets(), [198, 51, 100, 7])
    );
    assert_eq!(q.protocol(), etherparse::IpNumber::TCP);
    let head = &quoted[q.slice().len()..];
    assert_eq!(
        &head[..8],
        &[0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe8],
        "ports and sequence"
    );
    assert_eq!(b.tcp_connections(), 0);
    assert!(b.poll(T0 + std::time::Duration::from_secs(60)) == 0 && capture(&mut raw).is_empty());
    assert_eq!(b.counters().tcp.held_refused, 1);
}

#[test]
fn a_peer_learns_each_answer_to_its_held_syn_and_a_dropped_one_is_asked_again() {
    let (mut a, mut b) = proxy_pair(true);
    let listener = b.tcp_intercept_holding(16).unwrap();
    let now = T0;

    // Refused, in both families.
    for dst in ["198.51.100.7:80", "[2001:db8:5::9]:80"] {
        let client = a.tcp_connect(dst).unwrap();
        settle(&mut a, &mut b, now);
        let (conn, _) = b.tcp_listener(listener).accept().unwrap();
        assert!(!a.tcp(client).is_established());
        b.tcp(conn).abort();
        settle(&mut a, &mut b, now);
        let err = a.tcp(client).take_error().unwrap().expect("failed");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{dst}");
    }
    // Unreachable: the peer gets a router's ICMP error about its SYN. (fastpath's own TCP takes net
    // and host unreachable as soft errors, RFC 1122 §4.2.3.9, and goes on trying; Linux fails the
    // connect at once: the tunnel's tests show that.)
    for (dst, why) in [
        ("198.51.100.8:80", fastpath::Unreachable::Host),
        ("198.51.100.9:80", fastpath::Unreachable::Network),
        ("[2001:db8:5::8]:80", fastpath::Unreachable::Host),
    ] {
        let before = (
            a.counters().icmp.in_dest_unreachs,
            a.counters().icmp6.in_errors,
        );
        let client = a.tcp_connect(dst).unwrap();
        settle(&mut a, &mut b, now);
        let (conn, _) = b.tcp_listener(listener).accept().unwrap();
        b.tcp(conn).unreachable(why).unwrap();
        settle(&mut a, &mut b, now);
        let after = (
            a.counters().icmp.in_dest_unreachs,
            a.counters().icmp6.in_errors,
        );
        assert_eq!(after.0 + after.1, before.0 + before.1 + 1, "{dst}");
        assert!(!a.tcp(client).is_established());
        a.tcp(client).abort();
    }
    // Dropped in silence: the peer's next SYN is a new connection to decide on, and this time it
    // is confirmed.
    let client = a.tcp_connect("198.51.100.10:80").unwrap();
    settle(&mut a, &mut b, now);
    let (conn, _) = b.tcp_listener(listener).accept().unwrap();
    b.tcp(conn).close();
    assert_eq!(b.tcp_connections(), 0);
    let later = now + std::time::Duration::from_secs(2);
    settle(&mut a, &mut b, later);
    assert!(!a.tcp(client).is_established());
    let (conn, _) = b
        .tcp_listener(listener)
        .accept()
        .expect("the SYN again, held again");
    b.tcp(conn).confirm().unwrap();
    settle(&mut a, &mut b, later);
    assert!(a.tcp(client).is_established() && b.tcp(conn).is_established());
    a.tcp(client).write_all(b"ping").unwrap();
    settle(&mut a, &mut b, later);
    let mut got = [0u8; 8];
    assert_eq!(b.tcp(conn).read(&mut got).unwrap(), 4);
    let c = b.counters();
    assert_eq!(
        (c.tcp.held_syns, c.tcp.held_confirmed, c.tcp.held_refused),
        (7, 1, 6)
    );
}

/// A SYN from A's port `sport` to `dst`:80, sequence number 1000.
fn syn_to(dst: [u8; 4], sport: u16) -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ipv4(A.octets(), dst, 64)
        .tcp(sport, 80, 1000, 64240)
        .syn();
    let mut out = Vec::new();
    builder.write(&mut out, &[]).unwrap();
    out
}

/// B holding SYNs with bounds of `total` held connections and `per_destination` to one address.
fn holding_bounded(
    total: usize,
    per_destination: usize,
    cookies: bool,
) -> (Stack, fastpath::link::PairEnd, fastpath::TcpListener) {
    let mut config = StackConfig::default();
    config.limits.tcp_held_syns = total;
    config.limits.tcp_held_syns_per_destination = per_destination;
    config.tcp.syn_cookies = cookies;
    let (mut b, raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
    b.set_intercept(LINK, true).unwrap();
    let listener = b.tcp_intercept_holding(1024).unwrap();
    (b, raw, listener)
}

#[test]
fn past_the_held_bounds_syns_are_answered_with_cookies_and_their_connections_arrive_established() {
    let (mut b, mut raw, listener) = holding_bounded(8, 4, true);
    let mut held = Vec::new();
    let take = |b: &mut Stack| {
        let mut got = Vec::new();
        while let Ok((conn, _)) = b.tcp_listener(listener).accept() {
            got.push(conn);
        }
        got
    };
    // Four to one destination are held; the fifth meets that destination's bound.
    for port in 0..5 {
        inject(&mut raw, &syn_to([198, 51, 100, 7], 40000 + port));
    }
    b.poll(T0);
    held.extend(take(&mut b));
    assert_eq!(held.len(), 4);
    assert!(held.iter().all(|&c| b.tcp(c).is_held()));
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "one SYN-ACK, for the fifth");
    let cookie = tcp_of(&out[0]);
    assert!(cookie.syn() && cookie.ack());
    assert_eq!(
        (cookie.destination_port(), cookie.acknowledgment_number()),
        (40004, 1001)
    );
    let cookie_seq = cookie.sequence_number();
    // Four more destinations fill the bound of eight in all; a ninth gets a cookie too.
    for d in 1..=5 {
        inject(&mut raw, &syn_to([198, 51, 100, 10 + d], 41000));
    }
    b.poll(T0);
    held.extend(take(&mut b));
    assert_eq!(held.len(), 8);
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "one cookie, for the ninth: {out:?}");
    let c = b.counters();
    assert_eq!((c.tcp.held_syns, c.tcp.held_deferred), (8, 2));

    // The fifth peer completes its handshake: its connection arrives established, not held.
    let ack = etherparse::PacketBuilder::ipv4(A.octets(), [198, 51, 100, 7], 64)
        .tcp(40004, 80, 1001, 64240)
        .ack(cookie_seq.wrapping_add(1));
    let mut bytes = Vec::new();
    ack.write(&mut bytes, &[]).unwrap();
    inject(&mut raw, &bytes);
    b.poll(T0);
    let late = take(&mut b);
    assert_eq!(late.len(), 1);
    assert!(!b.tcp(late[0]).is_held());
    assert!(b.tcp(late[0]).is_established());
    assert_eq!(b.tcp(late[0]).addrs().unwrap().0, sock("198.51.100.7:80"));

    // Answering a held connection frees its room: the next SYN to that destination is held.
    b.tcp(held[0]).confirm().unwrap();
    b.poll(T0);
    capture(&mut raw);
    inject(&mut raw, &syn_to([198, 51, 100, 7], 40100));
    b.poll(T0);
    let again = take(&mut b);
    assert_eq!(again.len(), 1);
    assert!(b.tcp(again[0]).is_held());
    assert!(capture(&mut raw).is_empty(), "held: nothing answers it yet");
    // And so does refusing one (with a RST).
    b.tcp(held[1]).abort();
    b.poll(T0);
    capture(&mut raw);
    inject(&mut raw, &syn_to([198, 51, 100, 7], 40101));
    b.poll(T0);
    assert_eq!(take(&mut b).len(), 1);
    assert!(capture(&mut raw).is_empty());
    assert_eq!(b.counters().tcp.held_deferred, 2);
}

#[test]
fn past_the_held_bounds_without_cookies_a_syn_replaces_the_oldest_held_one() {
    let (mut b, mut raw, listener) = holding_bounded(3, 2, false);
    let mut held = Vec::new();
    for (d, port) in [(7, 40000), (7, 40001), (8, 40002)] {
        inject(&mut raw, &syn_to([198, 51, 100, d], port));
        b.poll(T0);
        held.push(b.tcp_listener(listener).accept().unwrap().0);
    }
    // A third to .7 meets its destination's bound: the oldest to .7 goes, in silence.
    inject(&mut raw, &syn_to([198, 51, 100, 7], 40003));
    b.poll(T0);
    let newer = b.tcp_listener(listener).accept().unwrap().0;
    assert!(b.tcp(newer).is_held());
    assert!(b.tcp(held[0]).confirm().is_err(), "the oldest is gone");
    assert!(b.tcp(held[2]).is_held());
    // A SYN to a fourth destination meets the bound in all: the oldest of all (.7's second) goes.
    inject(&mut raw, &syn_to([198, 51, 100, 9], 40004));
    b.poll(T0);
    assert!(b.tcp_listener(listener).accept().is_ok());
    assert!(b.tcp(held[1]).confirm().is_err());
    assert!(b.tcp(held[2]).is_held() && b.tcp(newer).is_held());
    assert!(capture(&mut raw).is_empty(), "nothing answered");
    let c = b.counters();
    assert_eq!((c.tcp.held_syns, c.tcp.held_replaced), (5, 2));
    assert_eq!(c.tcp.syn_cookies_sent, 0);
}
