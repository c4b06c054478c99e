//! The UDP socket API: binding rules, connect, send_to, receive variants, limits and errors.

use std::io::{ErrorKind, IoSlice, IoSliceMut};
use std::net::Ipv4Addr;

use crate::common::*;

/// `sa` as a `SocketAddr`, as the socket calls return addresses.
fn sx(ip: Ipv4Addr, port: u16) -> std::net::SocketAddr {
    sa(ip, port).into()
}
use fastpath::config::ChecksumPolicy;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{DropReason, Instant, StackConfig, UdpOptions};

const ANY: Ipv4Addr = Ipv4Addr::UNSPECIFIED;
const NOW: Instant = Instant::ZERO;

fn pair() -> (fastpath::Stack, fastpath::Stack) {
    two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        Impairments::default(),
    )
}

#[test]
fn bind_rules() {
    let (mut a, _) = pair();
    let s = a.udp_bind(sa(ANY, 5000)).unwrap();
    assert_eq!(a.udp(s).local_addr().unwrap(), sx(ANY, 5000));
    // Same port, overlapping address: in use, with a clear error.
    let e = a.udp_bind(sa(A, 5000)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    assert!(e.to_string().contains("in use"));
    assert_eq!(
        a.udp_bind(sa(ANY, 5000)).unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    // Not one of our addresses.
    assert_eq!(
        a.udp_bind(sa(Ipv4Addr::new(10, 9, 9, 9), 1))
            .unwrap_err()
            .kind(),
        ErrorKind::AddrNotAvailable
    );
    // Reuse only when both sides ask for it.
    let reuse = UdpOptions {
        reuse_address: true,
        ..UdpOptions::default()
    };
    let r1 = a.udp_bind_with(sa(A, 6000), reuse).unwrap();
    a.udp_bind_with(sa(A, 6000), reuse).unwrap();
    assert_eq!(
        a.udp_bind(sa(A, 6000)).unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    // Specific addresses on the same port do not overlap.
    a.udp_bind(sa(Ipv4Addr::LOCALHOST, 7000)).unwrap();
    a.udp_bind(sa(A, 7000)).unwrap();
    // Ephemeral ports are distinct and in range; closing frees the port.
    let e1 = a.udp_bind(sa(ANY, 0)).unwrap();
    let e2 = a.udp_bind(sa(ANY, 0)).unwrap();
    let (p1, p2) = (
        a.udp(e1).local_addr().unwrap().port(),
        a.udp(e2).local_addr().unwrap().port(),
    );
    assert!(p1 >= 49152 && p2 >= 49152 && p1 != p2);
    a.udp(s).close().unwrap();
    a.udp_bind(sa(A, 5000)).unwrap();
    // A closed handle is refused, not confused with the socket that reuses its slot.
    assert_eq!(
        a.udp(s).local_addr().unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    a.udp(r1).close().unwrap();
    assert!(a.udp(r1).close().is_err());
}

#[test]
fn ephemeral_ports_run_out_cleanly() {
    let config = StackConfig {
        ephemeral_ports: 50000..=50003,
        ..StackConfig::default()
    };
    let (mut a, _) = two_stacks(
        config,
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    for _ in 0..4 {
        a.udp_bind(sa(ANY, 0)).unwrap();
    }
    assert_eq!(
        a.udp_bind(sa(ANY, 0)).unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
}

#[test]
fn recv_would_block_then_delivers_and_peek_keeps_the_datagram() {
    let (mut a, mut b) = pair();
    let tx = a.udp_bind(sa(A, 1111)).unwrap();
    let rx = b.udp_bind(sa(ANY, 2222)).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(
        b.udp(rx).recv_from(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    a.udp(tx).send_to(b"first", sa(B, 2222)).unwrap();
    a.udp(tx).send_to(b"second", sa(B, 2222)).unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(b.udp(rx).queued().unwrap().0, 2);
    assert_eq!(b.udp(rx).peek_from(&mut buf).unwrap(), (5, sx(A, 1111)));
    assert_eq!(b.udp(rx).peek(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"first");
    // A short buffer truncates the datagram; the rest is discarded.
    let mut small = [0u8; 3];
    assert_eq!(b.udp(rx).recv(&mut small).unwrap(), 3);
    assert_eq!(&small, b"fir");
    let (n, from) = b.udp(rx).recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"second"[..], sx(A, 1111)));
    assert_eq!(
        b.udp(rx).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[test]
fn vectored_send_and_receive_with_odd_pieces() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let (mut a, mut b) = two_stacks(
            config,
            LinkCapabilities::plain(1500),
            Impairments::default(),
        );
        let tx = a.udp_bind(sa(A, 0)).unwrap();
        let rx = b.udp_bind(sa(B, 9)).unwrap();
        let data = payload(3001, 7);
        let pieces = [
            IoSlice::new(&data[..1]),
            IoSlice::new(&data[1..4]),
            IoSlice::new(&data[4..2999]),
            IoSlice::new(&data[2999..]),
        ];
        assert_eq!(a.udp(tx).send_to_vectored(&pieces, sa(B, 9)).unwrap(), 3001);
        settle(&mut a, &mut b, NOW);
        let (mut x, mut y, mut z) = ([0u8; 7], [0u8; 1000], [0u8; 4000]);
        let mut bufs = [
            IoSliceMut::new(&mut x),
            IoSliceMut::new(&mut y),
            IoSliceMut::new(&mut z),
        ];
        let (n, _) = b.udp(rx).recv_vectored(&mut bufs).unwrap();
        assert_eq!(n, 3001);
        let joined: Vec<u8> = x.iter().chain(&y).chain(&z[..1994]).copied().collect();
        assert_eq!(joined, data);
        assert_eq!(b.counters().drops.total(), 0);
    }
}

#[test]
fn connect_filters_and_send_to_never_connects() {
    for config in [
        StackConfig::default(),
        StackConfig {
            sendto_pseudo_connect: true,
            ..StackConfig::default()
        },
    ] {
        let (mut a, mut b) = two_stacks(
            config,
            LinkCapabilities::plain(1500),
            Impairments::default(),
        );
        let a1 = a.udp_bind(sa(A, 1000)).unwrap();
        let a2 = a.udp_bind(sa(A, 1001)).unwrap();
        let s = b.udp_bind(sa(ANY, 3000)).unwrap();
        // send_to leaves the socket unconnected, in both modes (4.3BSD reconnected it afterwards).
        b.udp(s).send_to(b"hello", sa(A, 1000)).unwrap();
        assert_eq!(
            b.udp(s).peer_addr().unwrap_err().kind(),
            ErrorKind::NotConnected
        );
        assert_eq!(b.udp(s).local_addr().unwrap(), sx(ANY, 3000));
        assert_eq!(
            b.udp(s).send(b"x").unwrap_err().kind(),
            ErrorKind::NotConnected
        );

        b.udp(s).connect(sa(A, 1000)).unwrap();
        assert_eq!(b.udp(s).peer_addr().unwrap(), sx(A, 1000));
        assert_eq!(
            b.udp(s).local_addr().unwrap(),
            sx(B, 3000),
            "connect picks the local address"
        );
        a.udp(a1).send_to(b"from a1", sa(B, 3000)).unwrap();
        a.udp(a2).send_to(b"from a2", sa(B, 3000)).unwrap();
        settle(&mut a, &mut b, NOW);
        let mut buf = [0u8; 32];
        let (n, from) = b.udp(s).recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"from a1"[..], sx(A, 1000)));
        assert_eq!(
            b.udp(s).recv(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        b.udp(s).send(b"reply").unwrap();
        b.udp(s).disconnect().unwrap();
        assert_eq!(b.udp(s).local_addr().unwrap(), sx(ANY, 3000));
        a.udp(a2).send_to(b"again", sa(B, 3000)).unwrap();
        settle(&mut a, &mut b, NOW);
        assert_eq!(b.udp(s).recv_from(&mut buf).unwrap().1, sx(A, 1001));
        let mut got = [0u8; 8];
        assert_eq!(a.udp(a1).recv_from(&mut got).unwrap(), (5, sx(B, 3000)));
    }
}

#[test]
fn pseudo_connect_refuses_a_tuple_in_use_like_4_3bsd() {
    let config = StackConfig {
        sendto_pseudo_connect: true,
        ..StackConfig::default()
    };
    let (mut a, _) = two_stacks(
        config,
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    let reuse = UdpOptions {
        reuse_address: true,
        ..UdpOptions::default()
    };
    let c = a.udp_bind_with(sa(A, 4000), reuse).unwrap();
    a.udp(c).connect(sa(B, 53)).unwrap();
    let u = a.udp_bind_with(sa(A, 4000), reuse).unwrap();
    assert_eq!(
        a.udp(u).send_to(b"q", sa(B, 53)).unwrap_err().kind(),
        ErrorKind::AddrInUse
    );
    // Without pseudo-connect the same send is fine.
    let (mut a, _) = pair();
    let c = a.udp_bind_with(sa(A, 4000), reuse).unwrap();
    a.udp(c).connect(sa(B, 53)).unwrap();
    let u = a.udp_bind_with(sa(A, 4000), reuse).unwrap();
    a.udp(u).send_to(b"q", sa(B, 53)).unwrap();
}

#[test]
fn best_match_delivery_prefers_the_most_specific_socket() {
    let (mut a, mut b) = pair();
    let reuse = UdpOptions {
        reuse_address: true,
        ..UdpOptions::default()
    };
    let wild = b.udp_bind_with(sa(ANY, 53), reuse).unwrap();
    let local = b.udp_bind_with(sa(B, 53), reuse).unwrap();
    let conn = b.udp_bind_with(sa(B, 53), reuse).unwrap();
    b.udp(conn).connect(sa(A, 999)).unwrap();
    let a999 = a.udp_bind(sa(A, 999)).unwrap();
    let a998 = a.udp_bind(sa(A, 998)).unwrap();
    a.udp(a999).send_to(b"1", sa(B, 53)).unwrap();
    a.udp(a998).send_to(b"2", sa(B, 53)).unwrap();
    settle(&mut a, &mut b, NOW);
    let mut buf = [0u8; 4];
    assert_eq!(b.udp(conn).recv_from(&mut buf).unwrap().1, sx(A, 999));
    assert_eq!(b.udp(local).recv_from(&mut buf).unwrap().1, sx(A, 998));
    assert_eq!(
        b.udp(wild).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // Loopback traffic to 127.0.0.1:53 matches only the wildcard socket.
    let l = b.udp_bind(sa(Ipv4Addr::LOCALHOST, 0)).unwrap();
    b.udp(l).send_to(b"3", sa(Ipv4Addr::LOCALHOST, 53)).unwrap();
    b.poll(NOW);
    assert_eq!(b.udp(wild).recv(&mut buf).unwrap(), 1);
}

#[test]
fn receive_queue_limit_drops_and_counts() {
    let (mut a, mut b) = pair();
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    let opts = UdpOptions {
        recv_buffer_bytes: Some(10 * 2048),
        ..UdpOptions::default()
    };
    let rx = b.udp_bind_with(sa(B, 8), opts).unwrap();
    for _ in 0..25 {
        a.udp(tx).send_to(&[1; 100], sa(B, 8)).unwrap();
    }
    settle(&mut a, &mut b, NOW);
    assert_eq!(b.udp(rx).queued().unwrap(), (10, 10 * 2048));
    assert_eq!(b.counters().drops.get(DropReason::UdpQueueFull), 15);
    assert_eq!(b.udp(rx).counters().unwrap().queue_full, 15);
    let mut buf = [0u8; 200];
    for _ in 0..10 {
        assert_eq!(b.udp(rx).recv(&mut buf).unwrap(), 100);
    }
    assert_eq!(b.udp(rx).queued().unwrap(), (0, 0));
}

#[test]
fn port_unreachable_refuses_a_connected_socket_once() {
    let (mut a, mut b) = pair();
    let s = a.udp_bind(sa(ANY, 0)).unwrap();
    a.udp(s).connect(sa(B, 4444)).unwrap();
    a.udp(s).send(b"anyone?").unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(b.counters().drops.get(DropReason::UdpNoSocket), 1);
    assert_eq!(b.counters().icmp.out_dest_unreachs, 1);
    assert_eq!(a.counters().icmp.in_dest_unreachs, 1);
    let mut buf = [0u8; 8];
    assert_eq!(
        a.udp(s).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    assert_eq!(
        a.udp(s).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // An unconnected socket is not told.
    let u = a.udp_bind(sa(ANY, 0)).unwrap();
    a.udp(u).send_to(b"anyone?", sa(B, 4444)).unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(
        a.udp(u).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert!(a.udp(u).take_error().unwrap().is_none());
}

#[test]
fn port_unreachables_are_rate_limited() {
    let mut config = StackConfig::default();
    config.limits.icmp_rate_per_sec = 10;
    config.limits.icmp_burst = 5;
    let (mut a, mut b) = two_stacks(
        config,
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    let s = a.udp_bind(sa(ANY, 0)).unwrap();
    for _ in 0..50 {
        a.udp(s).send_to(b"x", sa(B, 4444)).unwrap();
    }
    settle(&mut a, &mut b, Instant::from_secs(1));
    assert_eq!(b.counters().icmp.out_dest_unreachs, 5);
    assert_eq!(b.counters().drops.get(DropReason::IcmpRateLimited), 45);
    assert_eq!(b.counters().drops.get(DropReason::UdpNoSocket), 50);
}

#[test]
fn errors_for_bad_sends() {
    let (mut a, _) = pair();
    let s = a.udp_bind(sa(ANY, 0)).unwrap();
    assert_eq!(
        a.udp(s)
            .send_to(&vec![0; 65508], sa(B, 1))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    // Port 0: EINVAL on Linux.
    assert_eq!(
        a.udp(s).send_to(b"x", sa(B, 0)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        a.udp(s).send_to(b"x", sa(ANY, 7)).unwrap_err().kind(),
        ErrorKind::AddrNotAvailable
    );
    assert_eq!(
        a.udp(s)
            .send_to(b"x", sa(Ipv4Addr::new(8, 8, 8, 8), 1))
            .unwrap_err()
            .kind(),
        ErrorKind::NetworkUnreachable
    );
    assert_eq!(
        a.udp(s)
            .send_to(b"x", sa(Ipv4Addr::BROADCAST, 1))
            .unwrap_err()
            .kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        a.udp(s).connect(sa(ANY, 1)).unwrap_err().kind(),
        ErrorKind::AddrNotAvailable
    );
}

#[test]
fn broadcast_reaches_every_matching_socket() {
    let (mut a, mut b) = pair();
    let opts = UdpOptions {
        broadcast: true,
        ..UdpOptions::default()
    };
    let tx = a.udp_bind_with(sa(A, 0), opts).unwrap();
    let reuse = UdpOptions {
        reuse_address: true,
        ..UdpOptions::default()
    };
    let r1 = b.udp_bind_with(sa(ANY, 67), reuse).unwrap();
    let r2 = b.udp_bind_with(sa(ANY, 67), reuse).unwrap();
    let other = b.udp_bind(sa(ANY, 68)).unwrap();
    a.udp(tx)
        .send_to(b"directed", sa(Ipv4Addr::new(10, 0, 0, 255), 67))
        .unwrap();
    settle(&mut a, &mut b, NOW);
    let mut buf = [0u8; 16];
    assert_eq!(b.udp(r1).recv(&mut buf).unwrap(), 8);
    assert_eq!(b.udp(r2).recv(&mut buf).unwrap(), 8);
    assert_eq!(
        b.udp(other).recv(&mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // No port unreachable is sent for a broadcast nobody listens to.
    a.udp(tx)
        .send_to(b"nobody", sa(Ipv4Addr::new(10, 0, 0, 255), 99))
        .unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(b.counters().icmp.out_dest_unreachs, 0);
    assert_eq!(b.counters().drops.get(DropReason::UdpNoSocket), 1);
}

#[test]
fn ping_gets_a_reply() {
    let (mut a, mut b) = pair();
    a.send_echo_request(B, 7, 1, b"abcdefgh").unwrap();
    settle(&mut a, &mut b, NOW);
    let r = a.recv_echo_reply().unwrap();
    assert_eq!(
        (r.from, r.ident, r.seq_no, &r.data[..]),
        (B, 7, 1, &b"abcdefgh"[..])
    );
    assert!(a.recv_echo_reply().is_none());
    // A large ping is fragmented both ways.
    let big = payload(20000, 3);
    a.send_echo_request(B, 7, 2, &big).unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(a.recv_echo_reply().unwrap().data, big);
    // Ping ourselves over loopback.
    a.send_echo_request(Ipv4Addr::LOCALHOST, 7, 3, b"me")
        .unwrap();
    a.poll(NOW);
    assert_eq!(a.recv_echo_reply().unwrap().from, Ipv4Addr::LOCALHOST);
}

/// Sends one datagram from A to B and returns the UDP checksum field as it crossed the wire.
fn checksum_on_the_wire(
    config: StackConfig,
    caps: LinkCapabilities,
    opts: UdpOptions,
) -> (u16, fastpath::Counters) {
    let (mut b, mut raw) = stack_and_raw(config, caps);
    let s = b.udp_bind_with(sa(B, 5000), opts).unwrap();
    b.udp(s).send_to(b"checksum me", sa(A, 6000)).unwrap();
    b.flush();
    let packets = capture(&mut raw);
    assert_eq!(packets.len(), 1);
    let p = &packets[0];
    (u16::from_be_bytes([p[26], p[27]]), *b.counters())
}

#[test]
fn checksum_policies_on_output() {
    let plain = LinkCapabilities::plain(1500);
    let protected = LinkCapabilities {
        crc_protected: true,
        ..plain
    };
    let (field, _) = checksum_on_the_wire(StackConfig::default(), protected, UdpOptions::default());
    assert_ne!(field, 0, "elimination is off by default");
    let (field, c) = checksum_on_the_wire(
        StackConfig::default(),
        plain,
        UdpOptions {
            no_checksum: true,
            ..UdpOptions::default()
        },
    );
    assert_eq!(
        (field, c.udp.out_no_checksum),
        (0, 1),
        "the socket option sends no checksum"
    );
    let eliminate = StackConfig {
        checksum_policy: ChecksumPolicy {
            eliminate_on_protected_hop: true,
            ..ChecksumPolicy::default()
        },
        ..StackConfig::default()
    };
    assert_eq!(
        checksum_on_the_wire(eliminate.clone(), protected, UdpOptions::default()).0,
        0
    );
    assert_ne!(
        checksum_on_the_wire(eliminate, plain, UdpOptions::default()).0,
        0,
        "only on a protected link"
    );
}

#[test]
fn checksum_offload_leaves_the_field_to_the_link_and_the_peer_trusts_it() {
    let caps = LinkCapabilities {
        tx_checksum_offload: true,
        ..LinkCapabilities::plain(1500)
    };
    let (mut a, mut b) = two_stacks(StackConfig::default(), caps, Impairments::default());
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    let rx = b.udp_bind(sa(B, 9)).unwrap();
    a.udp(tx).send_to(&payload(1000, 1), sa(B, 9)).unwrap();
    // Fragmented datagrams cannot be offloaded: they are summed in software.
    a.udp(tx).send_to(&payload(5000, 2), sa(B, 9)).unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(a.counters().udp.out_checksum_offloaded, 1);
    assert_eq!(b.counters().udp.in_checksum_offloaded, 1);
    let mut buf = vec![0; 6000];
    assert_eq!(b.udp(rx).recv(&mut buf).unwrap(), 1000);
    assert_eq!(buf[..1000], payload(1000, 1)[..]);
    assert_eq!(b.udp(rx).recv(&mut buf).unwrap(), 5000);
    assert_eq!(buf[..5000], payload(5000, 2)[..]);
}

#[test]
fn corrupted_datagrams_are_caught_on_arrival_or_at_the_deferred_copy() {
    for config in [StackConfig::default(), StackConfig::classic()] {
        let fused = config.copy_checksum == fastpath::CopyChecksum::Fused;
        let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
        let rx = b.udp_bind(sa(B, 9)).unwrap();
        let good = udp_packet(sa(A, 1), sa(B, 9), b"good datagram");
        let mut bad = udp_packet(sa(A, 1), sa(B, 9), b"evil datagram");
        let last = bad.len() - 1;
        bad[last] ^= 0x40;
        inject(&mut raw, &bad);
        inject(&mut raw, &good);
        inject(&mut raw, &bad);
        b.poll(NOW);
        let mut buf = [0u8; 64];
        // Deferred verification (fused) queues all three and drops the bad ones at read time.
        assert_eq!(b.udp(rx).queued().unwrap().0, if fused { 3 } else { 1 });
        assert_eq!(b.udp(rx).recv(&mut buf).unwrap(), 13);
        assert_eq!(&buf[..13], b"good datagram");
        assert_eq!(
            b.udp(rx).recv(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        assert_eq!(b.counters().drops.get(DropReason::UdpBadChecksum), 2);
    }
}

#[test]
fn corruption_on_the_wire_is_caught_by_the_checksums() {
    let impair = Impairments {
        corrupt: 0.2,
        seed: 9,
        ..Impairments::default()
    };
    let caps = LinkCapabilities {
        tx_checksum_offload: true,
        ..LinkCapabilities::plain(1500)
    };
    let (mut a, mut b) = two_stacks(StackConfig::default(), caps, impair);
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    let rx = b.udp_bind(sa(B, 9)).unwrap();
    let mut ok = 0;
    let mut buf = vec![0; 4000];
    for i in 0..500u64 {
        let len = 1 + (i as usize * 37) % 3000;
        a.udp(tx).send_to(&payload(len, i), sa(B, 9)).unwrap();
        settle(&mut a, &mut b, NOW);
        while let Ok(n) = b.udp(rx).recv(&mut buf) {
            // Two bit errors can cancel in the ones'-complement sum; with this seed none do.
            assert_eq!(buf[..n], payload(n, i)[..], "corrupted payload delivered");
            ok += 1;
        }
    }
    let drops = b.counters().drops;
    assert!(ok > 300 && ok < 500, "{ok}");
    assert!(drops.get(DropReason::UdpBadChecksum) + drops.get(DropReason::Ipv4BadChecksum) > 0);
}

#[test]
fn zero_copy_send_and_receive() {
    for offload in [false, true] {
        let caps = LinkCapabilities {
            tx_checksum_offload: offload,
            ..LinkCapabilities::plain(9000)
        };
        let (mut a, mut b) = two_stacks(StackConfig::default(), caps, Impairments::default());
        let tx = a.udp_bind(sa(A, 0)).unwrap();
        let rx = b.udp_bind(sa(B, 9)).unwrap();
        for len in [0, 1, 63, 1472, 8000, 20000] {
            let data = payload(len, len as u64);
            let n = a
                .udp(tx)
                .send_to_with(len, sa(B, 9), |buf| buf.copy_from_slice(&data))
                .unwrap();
            assert_eq!(n, len);
            settle(&mut a, &mut b, NOW);
            let got = b
                .udp(rx)
                .recv_from_with(|p, from| (p.to_vec(), from))
                .unwrap();
            assert_eq!(got, (data, sx(A, a.udp(tx).local_addr().unwrap().port())));
        }
        assert_eq!(
            b.udp(rx).recv_from_with(|p, _| p.len()).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        assert_eq!(b.counters().drops.total(), 0);
    }
    // Deferred verification applies to zero-copy reads too.
    let (mut b, mut raw) = stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500));
    let rx = b.udp_bind(sa(B, 9)).unwrap();
    let mut bad = udp_packet(sa(A, 1), sa(B, 9), b"evil");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    inject(&mut raw, &bad);
    inject(&mut raw, &udp_packet(sa(A, 1), sa(B, 9), b"good"));
    b.poll(NOW);
    assert_eq!(
        b.udp(rx).recv_from_with(|p, _| p.to_vec()).unwrap(),
        b"good"
    );
    assert_eq!(b.counters().drops.get(DropReason::UdpBadChecksum), 1);
}

/// A socket bound to a loopback address cannot send off the host: 127/8 must not appear on a link
/// (RFC 1122 §3.2.1.3; Linux says EINVAL). It still sends over loopback.
#[test]
fn a_socket_bound_to_loopback_stays_on_the_host() {
    let (mut a, mut b) = pair();
    let s = a.udp_bind(sa(Ipv4Addr::LOCALHOST, 7000)).unwrap();
    let r = b.udp_bind(sa(B, 9)).unwrap();
    let e = a.udp(s).send_to(b"out", sa(B, 9)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    settle(&mut a, &mut b, NOW);
    assert!(b.udp(r).recv(&mut [0; 8]).is_err());
    assert_eq!(b.counters().ip.in_receives, 0, "a 127/8 source on the link");
    let l = a.udp_bind(sa(Ipv4Addr::LOCALHOST, 9)).unwrap();
    a.udp(s).send_to(b"in", sa(Ipv4Addr::LOCALHOST, 9)).unwrap();
    settle(&mut a, &mut b, NOW);
    assert_eq!(a.udp(l).recv(&mut [0; 8]).unwrap(), 2);
}

/// The broadcast option is needed for a directed broadcast (10.0.0.255 here) as for 255.255.255.255,
/// on send and on connect, as in BSD and Linux.
#[test]
fn a_directed_broadcast_needs_the_broadcast_option() {
    let (mut a, _) = pair();
    let s = a.udp_bind(sa(A, 0)).unwrap();
    for dst in [Ipv4Addr::new(10, 0, 0, 255), Ipv4Addr::BROADCAST] {
        let e = a.udp(s).send_to(b"x", sa(dst, 67)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{dst}");
        let e = a.udp(s).connect(sa(dst, 67)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{dst}");
    }
    assert_eq!(a.counters().udp.out_datagrams, 0);
}
