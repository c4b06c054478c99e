//! The whole receive path: packets into a stack, through its links or straight in, with the socket
//! calls and clock steps that drive it.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use fastpath::buf::{ChecksumOffload, PacketBuf};
use fastpath::checksum::Algorithm;
use fastpath::config::Limits;
use fastpath::demux::DemuxStrategy;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::stack::LOOPBACK;
use fastpath::wire::icmpv4;
use fastpath::wire::{Ipv4Packet, UdpPacket, WireError};
use fastpath::{
    CopyChecksum, Counters, DropReason, Instant, InterfaceId, Ipv4Cidr, Stack, StackConfig,
    UdpOptions, UdpSocket,
};

use crate::{be16, ones_add, pattern, reference_sum, Input};

/// The peer on `pair0`.
const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The stack on `pair0` (10.0.0.0/24, MTU 1500).
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The stack on `pair1` (192.168.0.0/16, MTU 9000).
const C: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);
/// A peer on `pair1`.
const D: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 7);
const B_BROADCAST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 255);
const C_BROADCAST: Ipv4Addr = Ipv4Addr::new(192, 168, 255, 255);

/// Sources the packet builder picks from: peers, ourselves, loopback, and every kind of address a
/// source must not be.
const SOURCES: [Ipv4Addr; 12] = [
    A,
    A,
    D,
    Ipv4Addr::new(10, 0, 0, 3),
    Ipv4Addr::new(8, 8, 8, 8),
    B,
    Ipv4Addr::LOCALHOST,
    Ipv4Addr::UNSPECIFIED,
    B_BROADCAST,
    C_BROADCAST,
    Ipv4Addr::BROADCAST,
    Ipv4Addr::new(224, 0, 0, 1),
];
/// Destinations: ours, our broadcasts, loopback, and others'.
const DESTINATIONS: [Ipv4Addr; 11] = [
    B,
    B,
    C,
    B_BROADCAST,
    C_BROADCAST,
    Ipv4Addr::BROADCAST,
    Ipv4Addr::LOCALHOST,
    Ipv4Addr::new(127, 0, 0, 9),
    A,
    Ipv4Addr::new(224, 0, 0, 1),
    Ipv4Addr::UNSPECIFIED,
];
const PORTS: [u16; 7] = [9, 7, 53, 67, 5000, 1000, 1];

/// Where datagrams the harness sends go.
const SEND_TO: [(Ipv4Addr, u16); 10] = [
    (A, 1000),
    (A, 9),
    (B_BROADCAST, 67),
    (Ipv4Addr::BROADCAST, 67),
    (Ipv4Addr::LOCALHOST, 9),
    (B, 7),
    (C, 5000),
    (D, 5000),
    (Ipv4Addr::new(8, 8, 8, 8), 53),
    (B, 0),
];

/// Limits small enough for a few packets to reach every one.
fn small_limits() -> Limits {
    Limits {
        reassembly_datagrams: 3,
        reassembly_bytes: 6 * 2048,
        reassembly_fragments: 8,
        reassembly_timeout: Duration::from_secs(2),
        udp_rx_queue_bytes: 4 * 2048,
        udp_intercept_queue_bytes: 4 * 2048,
        icmp_rate_per_sec: 5,
        icmp_burst: 3,
        icmp_peer_interval: Duration::from_millis(500),
        icmp_peer_burst: 2,
        pool_free_buffers: 4,
        pool_free_bytes: 4 * 2048,
        loopback_queue: 4,
        echo_reply_queue: 2,
        tcp_connections: 6,
        tcp_backlog: 2,
        tcp_held_syns: 3,
        tcp_held_syns_per_destination: 2,
        tcp_out_of_order: 4,
        path_mtu_entries: 2,
        path_mtu_expires: Duration::from_secs(3),
        path_mtu_floor: 552,
    }
}

/// A stack with loopback, `pair0` (B) and `pair1` (C), the raw ends of both pairs, and seven
/// sockets bound every way the demultiplexer distinguishes.
struct Host {
    stack: Stack,
    raw: [PairEnd; 2],
    sockets: Vec<UdpSocket>,
    /// Packets taken off the raw ends: what the stack sent on its pairs.
    captured: u64,
}

impl Host {
    fn new(config: StackConfig) -> Host {
        let mut stack = Stack::new(config);
        let (raw0, end0) = PairEnd::pair(
            LinkCapabilities::plain(1500),
            1 << 16,
            Impairments::default(),
        );
        let (raw1, end1) = PairEnd::pair(
            LinkCapabilities::plain(9000),
            1 << 16,
            Impairments::default(),
        );
        stack.add_interface("pair0", end0, Ipv4Cidr::new(B, 24));
        stack.add_interface("pair1", end1, Ipv4Cidr::new(C, 16));
        let reuse = UdpOptions {
            reuse_address: true,
            ..UdpOptions::default()
        };
        let broadcast = UdpOptions {
            broadcast: true,
            ..UdpOptions::default()
        };
        let sockets = vec![
            stack.udp_bind(SocketAddrV4::new(B, 9)).expect("bind"),
            stack
                .udp_bind_with(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7), reuse)
                .expect("bind"),
            stack
                .udp_bind_with(SocketAddrV4::new(B, 7), reuse)
                .expect("bind"),
            stack.udp_bind(SocketAddrV4::new(B, 53)).expect("bind"),
            stack
                .udp_bind_with(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 67), broadcast)
                .expect("bind"),
            stack
                .udp_bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9))
                .expect("bind"),
            stack.udp_bind(SocketAddrV4::new(C, 5000)).expect("bind"),
        ];
        stack
            .udp(sockets[3])
            .connect(SocketAddrV4::new(A, 1000))
            .expect("connect");
        stack
            .udp(sockets[6])
            .connect(SocketAddrV4::new(D, 5000))
            .expect("connect");
        Host {
            stack,
            raw: [raw0, raw1],
            sockets,
            captured: 0,
        }
    }

    /// Everything the stack sent on its pairs since the last call, checked: see [`check_output`].
    fn take_output(&mut self) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        for (i, raw) in self.raw.iter_mut().enumerate() {
            let mut batch = Vec::new();
            raw.receive(&mut batch, usize::MAX);
            for p in batch {
                check_output(i, p.data());
                out.push((i, p.data().to_vec()));
            }
        }
        self.captured += out.len() as u64;
        out
    }

    /// Bounds and counter identities that hold at every step.
    fn check(&mut self) {
        let s = &self.stack;
        let limits = s.config().limits.clone();
        let (n, bytes) = s.reassembly_stats();
        assert!(n <= limits.reassembly_datagrams, "{n} reassemblies");
        assert!(bytes <= limits.reassembly_bytes, "{bytes} reassembly bytes");
        let c = s.counters();
        // Every packet received was dropped at IP, held for (or dropped by) reassembly, or delivered
        // whole; reassembled datagrams are delivered too.
        let ip_input_drops: u64 = [
            DropReason::Ipv4Truncated,
            DropReason::Ipv4BadVersion,
            DropReason::Ipv4BadHeaderLength,
            DropReason::Ipv4BadTotalLength,
            DropReason::Ipv4BadChecksum,
            DropReason::Ipv4TtlZero,
            DropReason::Ipv4BadSource,
            DropReason::Ipv4OwnSource,
            DropReason::Ipv4NotForUs,
            DropReason::Ipv4BadOptions,
        ]
        .iter()
        .map(|&r| c.drops.get(r))
        .sum();
        assert_eq!(
            c.ip.in_receives,
            ip_input_drops + c.ip.reasm_reqds + c.ip.in_delivers - c.ip.reasm_oks,
            "packets received do not add up:\n{c}"
        );
        assert!(c.ip.reasm_oks <= c.ip.reasm_reqds);
        // ICMP messages received are handled once each (an error or a redirect whose quote is bad
        // also counts as unhandled, a timestamp request too short for its timestamp as truncated).
        let icmp_seen = c.drops.get(DropReason::IcmpTruncated)
            + c.drops.get(DropReason::IcmpBadChecksum)
            + c.drops.get(DropReason::IcmpUnhandled)
            + c.icmp.in_echos
            + c.icmp.in_echo_reps
            + c.icmp.in_dest_unreachs
            + c.icmp.in_time_excds
            + c.icmp.in_parm_probs
            + c.icmp.in_redirects
            + c.icmp.in_timestamps
            + c.icmp.in_timestamp_reps;
        assert!(
            icmp_seen >= c.icmp.in_msgs
                && icmp_seen
                    <= c.icmp.in_msgs
                        + c.icmp.in_dest_unreachs
                        + c.icmp.in_time_excds
                        + c.icmp.in_parm_probs
                        + c.icmp.in_redirects
                        + c.icmp.in_timestamps,
            "{c}"
        );
        // Errors meet the global limit: a burst, then the rate. Echo replies are not limited, but
        // answer one request each.
        assert!(c.icmp.out_echo_reps <= c.icmp.in_echos, "{c}");
        assert!(c.icmp.out_timestamp_reps <= c.icmp.in_timestamps, "{c}");
        let sent = c.icmp.out_dest_unreachs + c.icmp.out_time_excds + c.icmp.out_parm_probs;
        let allowed = u64::from(limits.icmp_burst)
            + s.now().total_micros() * u64::from(limits.icmp_rate_per_sec) / 1_000_000;
        assert!(sent <= allowed, "{sent} ICMP errors by {:?}", s.now());
        for i in 0..self.sockets.len() {
            let (_, queued) = self.stack.udp(self.sockets[i]).queued().expect("open");
            assert!(queued <= limits.udp_rx_queue_bytes, "{queued} bytes queued");
        }
    }
}

/// A packet the stack sent on a pair: a whole IPv4 packet with a 20-byte header that verifies, from
/// one of the stack's addresses on a wire (never 127/8), to a unicast address unless it is UDP the
/// harness sent to a broadcast; UDP with a length that fits and a checksum that verifies; ICMP with a
/// checksum that verifies, and an error never about a broadcast, a multicast, a non-unicast source or
/// another ICMP error; TCP only as a RST (the host has no TCP socket) with a checksum that verifies.
fn check_output(iface: usize, p: &[u8]) {
    let packet =
        Ipv4Packet::new_checked(p).unwrap_or_else(|e| panic!("sent a bad packet ({e}): {p:02x?}"));
    // Options only on an echo or timestamp reply, which echoes a request's record route and
    // timestamp.
    let header_len = packet.header_len();
    assert!(
        header_len == 20 || (p[9] == 1 && matches!(p.get(header_len), Some(0 | 14))),
        "options sent: {p:02x?}"
    );
    assert_eq!(
        usize::from(packet.total_len()),
        p.len(),
        "sent with padding"
    );
    assert_eq!(
        reference_sum(&p[..header_len]),
        0xffff,
        "sent a bad header checksum"
    );
    let (src, dst) = (packet.src_addr(), packet.dst_addr());
    assert!(
        src == B || src == C,
        "sent from {src} on pair{iface}: {p:02x?}"
    );
    assert!(
        !dst.is_loopback() && !dst.is_unspecified() && !dst.is_multicast(),
        "sent to {dst}"
    );
    let broadcast = dst.is_broadcast() || dst == B_BROADCAST || dst == C_BROADCAST;
    let payload = packet.payload();
    if packet.is_fragment() {
        assert!(
            !packet.more_frags() || payload.len().is_multiple_of(8),
            "a fragment of {} bytes",
            payload.len()
        );
        return;
    }
    match p[9] {
        17 => {
            let udp = UdpPacket::new_checked(payload).expect("sent a bad UDP datagram");
            assert_eq!(usize::from(udp.len()), payload.len());
            assert!(udp.verify_checksum(src, dst), "sent a bad UDP checksum");
            assert_ne!(udp.checksum(), 0, "sent without a checksum");
            // Only socket 4 (port 67) has the broadcast option.
            assert!(
                !broadcast || udp.src_port() == 67,
                "a broadcast without the option: {p:02x?}"
            );
        }
        1 => {
            assert!(payload.len() >= 8);
            // Only the harness's own pings may go to a broadcast, never a reply or an error.
            assert!(
                !broadcast || payload[0] == 8,
                "ICMP to a broadcast address {dst}"
            );
            assert_eq!(reference_sum(payload), 0xffff, "sent a bad ICMP checksum");
            if matches!(payload[0], 3 | 11 | 12) {
                let q = &payload[8..];
                let (quoted, head) = match icmpv4::parse_quoted(q) {
                    Ok(parsed) => parsed,
                    // A datagram with fewer than 8 bytes of payload is quoted whole.
                    Err(WireError::Truncated) if q.len() >= 20 => {
                        assert_eq!(usize::from(be16(q, 2)), q.len(), "a short quote: {p:02x?}");
                        let mut head = [0u8; 8];
                        let ihl = usize::from(q[0] & 0x0f) * 4;
                        head[..q.len() - ihl].copy_from_slice(&q[ihl..]);
                        let mut padded = q.to_vec();
                        padded.resize(ihl + 8, 0);
                        (icmpv4::parse_quoted(&padded).expect("a bad quote").0, head)
                    }
                    Err(e) => panic!("a bad quote ({e}): {p:02x?}"),
                };
                assert_eq!(
                    quoted.src_addr, dst,
                    "an error sent to someone else than the sender"
                );
                let q = quoted.dst_addr;
                assert!(
                    !q.is_broadcast() && !q.is_multicast() && q != B_BROADCAST && q != C_BROADCAST,
                    "an ICMP error about a datagram to {q}: {p:02x?}"
                );
                if u8::from(quoted.protocol) == 1 {
                    assert!(
                        matches!(head[0], 0 | 8 | 13..=18),
                        "an ICMP error about an ICMP error"
                    );
                }
            }
        }
        6 => {
            // The host has no TCP socket: all it may send is a RST for a segment to a closed port
            // (RFC 9293 §3.10.7.1), never to a broadcast, with a checksum that verifies.
            assert!(payload.len() >= 20, "a short TCP segment: {p:02x?}");
            assert!(!broadcast, "TCP to a broadcast address {dst}");
            assert_ne!(payload[13] & 0x04, 0, "TCP other than a RST: {p:02x?}");
            let mut pseudo = [0u8; 12];
            pseudo[..4].copy_from_slice(&src.octets());
            pseudo[4..8].copy_from_slice(&dst.octets());
            pseudo[9] = 6;
            pseudo[10..].copy_from_slice(&(payload.len() as u16).to_be_bytes());
            assert_eq!(
                ones_add(reference_sum(&pseudo), reference_sum(payload)),
                0xffff,
                "sent a bad TCP checksum: {p:02x?}"
            );
        }
        other => panic!("sent protocol {other}"),
    }
}

/// Bytes of a generated payload: a function of a seed and the position, so fragments of a datagram
/// built in separate records agree.
fn generated(seed: u8, len: usize) -> Vec<u8> {
    let at = usize::from(seed) * 251;
    pattern()[at..at + len].to_vec()
}

fn pick_addr(input: &mut Input<'_>, table: &[Ipv4Addr]) -> Ipv4Addr {
    match input.below(table.len() + 1) {
        i if i < table.len() => table[i],
        _ => Ipv4Addr::from(input.u32()),
    }
}

fn pick_port(input: &mut Input<'_>) -> u16 {
    match input.below(PORTS.len() + 1) {
        i if i < PORTS.len() => PORTS[i],
        _ => input.u16(),
    }
}

fn pick_len(input: &mut Input<'_>) -> usize {
    match input.below(8) {
        0..=3 => input.below(64),
        4 => input.below(1500),
        5 => input.u16() as usize % 9000,
        6 => input.choose(&[1472, 1473, 1480, 1481, 8972, 8973, 65507]),
        _ => input.u16() as usize % 65508,
    }
}

/// A packet, either raw bytes from the input (with the IP header checksum fixed if asked) or built
/// from a few choices: addresses from small sets, protocol, TTL, options, UDP or ICMP (errors quote
/// a datagram a socket may have sent) or another protocol, a length field and checksum right or
/// wrong, and optionally one fragment of the datagram at an offset the input picks (so a few records
/// make a whole set, since the payload is a function of a seed).
fn build_packet(input: &mut Input<'_>) -> Vec<u8> {
    let kind = input.u8();
    if kind & 0x80 == 0 {
        let len = input.u16() as usize % 2048;
        let mut p = input.bytes(len).to_vec();
        if kind & 1 == 1 {
            fix_ip_checksum(&mut p);
        }
        return p;
    }
    let src = pick_addr(input, &SOURCES);
    let dst = pick_addr(input, &DESTINATIONS);
    let protocol = input.choose(&[17, 17, 17, 1, 1, 6, 99]);
    let ttl = input.choose(&[64, 64, 0, 1, 255]);
    let options = input.below(4) * 4 * usize::from(input.below(4) == 0);
    let ident = match input.below(4) {
        0 => input.u16(),
        n => n as u16,
    };
    let seed = input.u8();
    let mut datagram = match protocol {
        17 => {
            let (sport, dport) = (pick_port(input), pick_port(input));
            let payload = generated(seed, pick_len(input));
            let mut u = vec![0u8; 8];
            u[..2].copy_from_slice(&sport.to_be_bytes());
            u[2..4].copy_from_slice(&dport.to_be_bytes());
            u.extend_from_slice(&payload);
            let len = u.len().min(65535) as u16;
            let length_field = match input.below(8) {
                0 => input.u16(),
                1 => len.wrapping_add(1),
                2 => len.saturating_sub(1),
                _ => len,
            };
            u[4..6].copy_from_slice(&length_field.to_be_bytes());
            let mut pseudo = [0u8; 12];
            pseudo[..4].copy_from_slice(&src.octets());
            pseudo[4..8].copy_from_slice(&dst.octets());
            pseudo[9] = 17;
            pseudo[10..].copy_from_slice(&length_field.to_be_bytes());
            let covered = usize::from(length_field).min(u.len());
            let sum = !ones_add(reference_sum(&pseudo), reference_sum(&u[..covered]));
            let field = match input.below(8) {
                0 => 0,
                1 => sum ^ 1,
                2 => input.u16(),
                _ if sum == 0 => 0xffff,
                _ => sum,
            };
            u[6..8].copy_from_slice(&field.to_be_bytes());
            u
        }
        1 => {
            let msg_type = input.choose(&[8, 8, 0, 3, 3, 11, 5, 13]);
            let code = input.choose(&[0, 1, 2, 3, 4, 9]);
            let mut m = vec![msg_type, code, 0, 0];
            m.extend_from_slice(&input.u32().to_be_bytes());
            if matches!(msg_type, 3 | 11) && input.below(4) != 0 {
                // Quote a datagram one of the sockets may have sent.
                let mut q = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
                let proto = input.choose(&[17, 17, 1, 6]);
                q[9] = proto;
                q[2..4].copy_from_slice(&(28 + input.below(100) as u16).to_be_bytes());
                q.extend_from_slice(&input.choose(&[B, C, A, Ipv4Addr::LOCALHOST]).octets());
                q.extend_from_slice(&input.choose(&[A, D, B, Ipv4Addr::BROADCAST]).octets());
                let sum = !reference_sum(&q);
                q[10..12].copy_from_slice(&sum.to_be_bytes());
                q.extend_from_slice(&pick_port(input).to_be_bytes());
                q.extend_from_slice(&pick_port(input).to_be_bytes());
                q.extend_from_slice(&input.u32().to_be_bytes());
                let keep = q.len() - input.below(4) * usize::from(input.below(4) == 0);
                q.truncate(keep);
                m.extend_from_slice(&q);
            } else {
                m.extend_from_slice(&generated(seed, pick_len(input)));
            }
            let sum = !reference_sum(&m);
            let field = match input.below(8) {
                0 => 0,
                1 => sum ^ 1,
                _ => sum,
            };
            m[2..4].copy_from_slice(&field.to_be_bytes());
            m
        }
        _ => generated(seed, pick_len(input)),
    };
    datagram.truncate(65535 - 20 - options);

    // Not a fragment, one fragment of the datagram, or any flags at all.
    let (piece, flags) = match input.below(8) {
        0..=4 => (&datagram[..], if input.below(4) == 0 { 0x4000 } else { 0 }),
        5 | 6 => {
            let size = 8 * (1 + input.below(200));
            let count = datagram.len().div_ceil(size).max(1);
            let offset = input.below(count) * size;
            let end = (offset + size).min(datagram.len());
            let more = end < datagram.len();
            let mf = if input.below(8) == 0 { !more } else { more };
            (
                &datagram[offset.min(end)..end],
                (offset / 8) as u16 | u16::from(mf) << 13,
            )
        }
        _ => (&datagram[..], input.u16()),
    };
    let mut p = vec![0u8; 20 + options];
    p[0] = 0x40 | ((20 + options) / 4) as u8;
    p[1] = input.u8() & 0xfc;
    let total = (20 + options + piece.len()) as u16;
    let total_field = match input.below(16) {
        0 => input.u16(),
        1 => total.wrapping_add(1),
        _ => total,
    };
    p[2..4].copy_from_slice(&total_field.to_be_bytes());
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&flags.to_be_bytes());
    p[8] = ttl;
    p[9] = protocol;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    for b in &mut p[20..] {
        *b = input.choose(&[1, 0, 7, 0x44, 0x94]);
    }
    p.extend_from_slice(piece);
    match input.below(16) {
        0 => p.truncate(input.below(p.len() + 1)),
        1 => p.extend(std::iter::repeat_n(0xee, input.below(64))),
        _ => {}
    }
    if input.below(16) != 0 {
        fix_ip_checksum(&mut p);
    }
    p
}

/// Sets the IPv4 header checksum of `p` (whatever its IHL says, within the bytes there are).
fn fix_ip_checksum(p: &mut [u8]) {
    if p.len() < 20 {
        return;
    }
    let ihl = (usize::from(p[0] & 0x0f) * 4).clamp(20, p.len());
    p[10] = 0;
    p[11] = 0;
    let sum = !reference_sum(&p[..ihl]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// What a socket call returned, comparable between stacks.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Read(Vec<u8>, std::net::SocketAddr),
    Sent(usize),
    Error(Option<io::ErrorKind>),
    Failed(io::ErrorKind),
    Done,
}

fn answer<T>(r: io::Result<T>, ok: impl FnOnce(T) -> Answer) -> Answer {
    match r {
        Ok(v) => ok(v),
        Err(e) => Answer::Failed(e.kind()),
    }
}

/// A socket call the input picks, on `host`.
fn socket_call(
    host: &mut Host,
    sock: usize,
    call: u8,
    a: usize,
    b: usize,
    send: (SocketAddrV4, Vec<u8>),
) -> Answer {
    let s = host.sockets[sock];
    let mut u = host.stack.udp(s);
    match call % 8 {
        0 => {
            let mut buf = vec![0u8; a];
            answer(u.recv_from(&mut buf), |(n, from)| {
                Answer::Read(buf[..n].to_vec(), from)
            })
        }
        1 => {
            let (mut x, mut y) = (vec![0u8; a], vec![0u8; b]);
            let mut bufs = [io::IoSliceMut::new(&mut x), io::IoSliceMut::new(&mut y)];
            answer(u.recv_vectored(&mut bufs), |(n, from)| {
                let mut all = x.clone();
                all.extend_from_slice(&y);
                Answer::Read(all[..n].to_vec(), from)
            })
        }
        2 => {
            let mut buf = vec![0u8; a];
            answer(u.peek_from(&mut buf), |(n, from)| {
                Answer::Read(buf[..n].to_vec(), from)
            })
        }
        3 => answer(
            u.recv_from_with(|d, from| (d.to_vec(), from)),
            |(d, from)| Answer::Read(d, from),
        ),
        4 => answer(u.take_error(), |e| Answer::Error(e.map(|e| e.kind()))),
        5 => answer(u.send_to(&send.1, send.0), Answer::Sent),
        6 => match a % 3 {
            0 => answer(u.connect(send.0), |()| Answer::Done),
            1 => answer(u.disconnect(), |()| Answer::Done),
            _ => answer(u.send(&send.1), Answer::Sent),
        },
        _ => {
            let r = host
                .stack
                .send_echo_request(*send.0.ip(), 7, a as u16, &send.1);
            let reply = host.stack.recv_echo_reply();
            match r {
                Ok(()) => Answer::Read(reply.map(|r| r.data).unwrap_or_default(), send.0.into()),
                Err(e) => Answer::Failed(e.kind()),
            }
        }
    }
}

/// Reads every socket dry; returns what was read.
fn drain(host: &mut Host) -> Vec<Answer> {
    let mut all = Vec::new();
    for i in 0..host.sockets.len() {
        let s = host.sockets[i];
        loop {
            let mut buf = vec![0u8; 65536];
            match host.stack.udp(s).recv_from(&mut buf) {
                Ok((n, from)) => all.push(Answer::Read(buf[..n].to_vec(), from)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => all.push(Answer::Failed(e.kind())),
            }
        }
        let (n, bytes) = host.stack.udp(s).queued().expect("open");
        assert_eq!(
            (n, bytes),
            (0, 0),
            "a drained socket holds {n} datagrams in {bytes} bytes"
        );
    }
    while let Some(r) = host.stack.recv_echo_reply() {
        all.push(Answer::Read(r.data, SocketAddrV4::new(r.from, 0).into()));
    }
    all
}

/// The whole receive path. The first byte picks small or default limits and whether to run a
/// second stack beside the first for comparison; the rest is a program of packets (raw or built,
/// fed through either pair or straight into an interface, loopback included, optionally with offload
/// metadata a link would set), socket calls (reads of every kind into buffers of any size, sends to
/// every kind of address, connects, pings) and clock steps. Checks, at every step: the bounds
/// (reassembly, socket queues, the ICMP rate); every packet received accounted for; what the stack
/// sends well formed (see `check_output`). At the end, after a clock step past every timeout:
/// nothing left in reassembly; `in_receives` equals the packets fed plus those the stack looped back
/// to itself. The second stack (run when metadata is not used) differs in every technique that must
/// not change behaviour: separate copy and checksum (verification on arrival), the reference
/// checksum, no in-line header sum, `linear` demultiplexing; both must send the same packets, answer
/// every call alike (until a receive queue overflows, which deferred verification may make
/// different) and end with the same counters, but for where a bad checksum is counted.
pub fn stack(data: &[u8]) {
    run(data);
}

/// [`stack`], returning the first stack's counters at the end (for tests of the seeds).
pub fn run(data: &[u8]) -> Counters {
    let mut input = Input::new(data);
    let setup = input.u8();
    let compare = setup & 1 == 0;
    let limits = if setup & 2 != 0 {
        small_limits()
    } else {
        Limits::default()
    };
    let primary = StackConfig {
        limits: limits.clone(),
        ..StackConfig::default()
    };
    let mut hosts = vec![Host::new(primary)];
    if compare {
        hosts.push(Host::new(StackConfig {
            copy_checksum: CopyChecksum::Separate,
            checksum: Algorithm::Rfc1071,
            inline_header_checksum: false,
            input_header_prediction: false,
            output_header_template: false,
            output_route_cache: false,
            demux: DemuxStrategy::Linear,
            limits,
            ..StackConfig::default()
        }));
    }
    let mut now = Instant::ZERO;
    let mut fed = 0u64;
    let mut steps = 0;
    let queue_full = |hosts: &[Host]| {
        hosts
            .iter()
            .any(|h| h.stack.counters().drops.get(DropReason::UdpQueueFull) > 0)
    };
    while !input.is_empty() && steps < 500 {
        steps += 1;
        let op = input.u8();
        match op % 8 {
            0..=3 => {
                let packet = build_packet(&mut input);
                let route = input.below(4);
                let meta = if compare {
                    ChecksumOffload::None
                } else {
                    match input.below(4) {
                        0 => ChecksumOffload::Valid,
                        1 => ChecksumOffload::Partial {
                            start: 20,
                            offset: 6,
                        },
                        2 => ChecksumOffload::Partial {
                            start: input.u16(),
                            offset: input.u16(),
                        },
                        _ => ChecksumOffload::None,
                    }
                };
                let poll = op & 0x10 != 0;
                for h in &mut hosts {
                    let mut buf = PacketBuf::from_slice(&packet);
                    buf.meta.set_checksum(meta);
                    match route {
                        0 | 1 => {
                            h.raw[route].transmit(&mut vec![buf]);
                        }
                        2 => h
                            .stack
                            .receive(InterfaceId(1 + (op as usize >> 5) % 2), buf),
                        _ => h.stack.receive(LOOPBACK, buf),
                    }
                    if poll {
                        h.stack.poll(now);
                    }
                }
                fed += 1;
            }
            4..=6 => {
                let sock = input.below(7);
                let call = input.u8();
                let (a, b) = (input.u16() as usize % 2048, input.u16() as usize % 2048);
                let (addr, port) = input.choose(&SEND_TO);
                let len = pick_len(&mut input);
                let payload = generated(input.u8(), len);
                let answers: Vec<Answer> = hosts
                    .iter_mut()
                    .map(|h| {
                        socket_call(
                            h,
                            sock,
                            call,
                            a,
                            b,
                            (SocketAddrV4::new(addr, port), payload.clone()),
                        )
                    })
                    .collect();
                if compare && !queue_full(&hosts) {
                    assert_eq!(answers[0], answers[1], "socket {sock}, call {call}");
                }
            }
            _ => {
                let step = input.choose(&[0, 1, 10, 100, 1000, 2500, 31_000]);
                now = now + Duration::from_millis(step);
                for h in &mut hosts {
                    h.stack.poll(now);
                }
            }
        }
        let outputs: Vec<_> = hosts.iter_mut().map(Host::take_output).collect();
        for h in &mut hosts {
            h.check();
        }
        if compare {
            // Each stack draws its IP identification counters at random (RFC 7739): compare the
            // packets without that field and the header checksum over it. A timestamp reply
            // carries the wall clock, read by each stack at its own moment: without its receive
            // and transmit times and the ICMP checksum over them.
            let [first, second] = [&outputs[0], &outputs[1]].map(|out| {
                out.iter()
                    .map(|(i, p)| {
                        let mut p = p.clone();
                        if p.len() >= 20 {
                            p[4..6].fill(0);
                            p[10..12].fill(0);
                            let icmp = usize::from(p[0] & 0x0f) * 4;
                            if p[9] == 1 && p.get(icmp) == Some(&14) && p.len() >= icmp + 20 {
                                p[icmp + 2..icmp + 4].fill(0);
                                p[icmp + 12..icmp + 20].fill(0);
                            }
                        }
                        (*i, p)
                    })
                    .collect::<Vec<_>>()
            });
            assert_eq!(first, second, "the two stacks sent different packets");
        }
    }

    // Quiet now (what is still on the pairs is received), then past every timeout, quiet again,
    // every socket read dry.
    let later = now + Duration::from_secs(3600);
    let mut reads = Vec::new();
    for h in &mut hosts {
        for t in [now, later] {
            for _ in 0..64 {
                if h.stack.poll(t) == 0 {
                    break;
                }
            }
            assert_eq!(h.stack.poll(t), 0, "the stack does not go quiet");
        }
        h.take_output();
        h.check();
        reads.push(drain(h));
        assert_eq!(
            h.stack.reassembly_stats(),
            (0, 0),
            "reassembly left after its timeout"
        );
        let c = h.stack.counters();
        // IPv4 and IPv6 together: a mutated version nibble makes a packet IPv6's, which ICMPv6 may
        // answer.
        let looped = c.ip.out_packets + c.ip6.out_packets
            - h.captured
            - c.drops.get(DropReason::LinkQueueFull);
        assert_eq!(
            c.ip.in_receives + c.ip6.in_receives,
            fed + looped,
            "fed {fed}, looped back {looped}:\n{c}"
        );
    }
    if compare && !queue_full(&hosts) {
        assert_eq!(
            reads[0], reads[1],
            "the two stacks read different datagrams"
        );
        let (p, s) = (*hosts[0].stack.counters(), *hosts[1].stack.counters());
        let h = &mut hosts[0];
        let deferred: u64 = (0..h.sockets.len())
            .map(|i| {
                h.stack
                    .udp(h.sockets[i])
                    .counters()
                    .expect("open")
                    .bad_checksum
            })
            .sum();
        // The counters of the paths the techniques took differ by design; the rest must not.
        let paths = |mut ip: fastpath::stats::IpCounters| {
            ip.in_unpredicted = 0;
            ip.out_untemplated = 0;
            ip.header_sums_by_routine = 0;
            ip
        };
        assert_eq!(paths(p.ip), paths(s.ip));
        assert_eq!(p.icmp, s.icmp);
        assert_eq!(
            p.udp.in_datagrams - deferred,
            s.udp.in_datagrams,
            "datagrams queued"
        );
        assert_eq!(p.udp.in_read, s.udp.in_read);
        assert_eq!(p.udp.out_datagrams, s.udp.out_datagrams);
        for &r in DropReason::ALL {
            if r != DropReason::UdpBadChecksum {
                assert_eq!(p.drops.get(r), s.drops.get(r), "{r:?}:\n{p}\n{s}");
            }
        }
        assert!(p.drops.get(DropReason::UdpBadChecksum) >= s.drops.get(DropReason::UdpBadChecksum));
    }
    *hosts[0].stack.counters()
}
