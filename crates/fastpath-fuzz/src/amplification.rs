//! The `amplification` target: one packet in, a handful out. Whatever a single packet is (any source,
//! our own and loopback's included, any destination, any protocol and header, through the link or
//! straight into loopback), the stack must not send more than [`MAX_ANSWERS`] packets in the simulated
//! second that follows, counting what it sends to itself over loopback. This catches the class of bug
//! behind the "LAND" packet (a SYN from our own address and port that had the stack ACK its own ACKs
//! for ever) rather than that one packet: a reply that triggers a reply, an error about an error, a
//! broadcast answered by many.
//!
//! The stack under test has a link (`pair0`, B = 10.0.0.2/24, the peer A = 10.0.0.1), UDP sockets on
//! B and on loopback, TCP listeners on every address, one connection established with the peer over
//! the link and one with itself over loopback, all idle: nothing is owed before the packet arrives.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use fastpath::buf::PacketBuf;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::stack::LOOPBACK;
use fastpath::{Instant, InterfaceId, Ipv4Cidr, Stack, StackConfig};

use crate::seeds::{icmp_message, ip_packet, udp_datagram};
use crate::tcp::tcp_packet;
use crate::Input;

/// The most packets one input packet may make the stack send within a second. A SYN to a listener
/// gets its SYN-ACK and, a second later, one retransmission; a SYN from ourselves to ourselves on
/// loopback (which is allowed there) gets a SYN-ACK, one duplicate ACK, and the same again when the
/// SYN-ACK is retransmitted (the duplicate ACKs are rate-limited, 500 ms apart).
pub const MAX_ANSWERS: u64 = 8;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Sources: the peer, ourselves, loopback (two of its addresses), broadcasts, and others.
const SOURCES: [Ipv4Addr; 9] = [
    A,
    B,
    LO,
    Ipv4Addr::new(127, 0, 0, 5),
    Ipv4Addr::new(10, 0, 0, 255),
    Ipv4Addr::BROADCAST,
    Ipv4Addr::UNSPECIFIED,
    Ipv4Addr::new(224, 0, 0, 1),
    Ipv4Addr::new(10, 0, 0, 3),
];
/// Destinations: ours, loopback's, broadcasts, the peer's.
const DESTINATIONS: [Ipv4Addr; 6] = [
    B,
    LO,
    Ipv4Addr::new(127, 0, 0, 5),
    Ipv4Addr::new(10, 0, 0, 255),
    Ipv4Addr::BROADCAST,
    A,
];

/// The host and what the input needs to aim at its connections.
struct Host {
    stack: Stack,
    raw: PairEnd,
    now: Instant,
    /// Ports in use: the listeners', the UDP sockets', the connections' both ends.
    ports: Vec<u16>,
    /// The wire connection's next sequence numbers: the peer's and the stack's.
    peer_nxt: u32,
    stack_nxt: u32,
}

impl Host {
    fn new(config: StackConfig) -> Host {
        let mut stack = Stack::new(config);
        let (raw, end) = PairEnd::pair(
            LinkCapabilities::plain(1500),
            1 << 12,
            Impairments::default(),
        );
        stack.add_interface("pair0", end, Ipv4Cidr::new(B, 24));
        let now = Instant::from_secs(1);
        stack.poll(now);
        let any = |port| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        let listener = stack.tcp_listen(any(80), 4).expect("listen");
        for (addr, port) in [(B, 9), (LO, 9), (Ipv4Addr::UNSPECIFIED, 7)] {
            stack.udp_bind(SocketAddrV4::new(addr, port)).expect("bind");
        }
        let mut h = Host {
            stack,
            raw,
            now,
            ports: vec![80, 9, 7, 1000, 81],
            peer_nxt: 5001,
            stack_nxt: 0,
        };
        // The wire connection: A:1000 to B:80, opened by the peer.
        h.inject_raw(&tcp_packet(
            SocketAddrV4::new(A, 1000),
            SocketAddrV4::new(B, 80),
            5000,
            0,
            0x02,
            65535,
            &[],
            0,
        ));
        let synack = h
            .take()
            .into_iter()
            .find(|p| p.len() >= 40 && p[33] == 0x12);
        let isn = synack.map_or(0, |p| u32::from_be_bytes([p[24], p[25], p[26], p[27]]));
        h.stack_nxt = isn.wrapping_add(1);
        h.inject_raw(&tcp_packet(
            SocketAddrV4::new(A, 1000),
            SocketAddrV4::new(B, 80),
            5001,
            h.stack_nxt,
            0x10,
            65535,
            &[],
            0,
        ));
        // The loopback connection: the stack to itself.
        let client = h
            .stack
            .tcp_connect(SocketAddrV4::new(LO, 80))
            .expect("connect");
        for _ in 0..8 {
            h.stack.poll(h.now);
        }
        if let Ok((local, _)) = h.stack.tcp(client).addrs() {
            h.ports.push(local.port());
        }
        while h.stack.tcp_listener(listener).accept().is_ok() {}
        h.settle();
        h.take();
        h
    }

    fn inject_raw(&mut self, packet: &[u8]) {
        self.raw.transmit(&mut vec![PacketBuf::from_slice(packet)]);
        self.stack.poll(self.now);
    }

    fn take(&mut self) -> Vec<Vec<u8>> {
        let mut batch = Vec::new();
        self.raw.receive(&mut batch, usize::MAX);
        batch.iter().map(|p| p.data().to_vec()).collect()
    }

    /// Polls until the stack is quiet, at most a bounded number of times.
    fn settle(&mut self) -> bool {
        (0..64).any(|_| self.stack.poll(self.now) == 0)
    }
}

/// One packet built from the input.
fn build(input: &mut Input<'_>, h: &Host) -> Vec<u8> {
    let src = input.choose(&SOURCES);
    let dst = input.choose(&DESTINATIONS);
    let sport = if input.bool() {
        input.choose(&h.ports)
    } else {
        input.u16()
    };
    let dport = if input.bool() {
        input.choose(&h.ports)
    } else {
        input.u16()
    };
    let len = match input.below(4) {
        0 => input.below(1400),
        1 => 1,
        _ => 0,
    };
    match input.below(8) {
        0..=3 => {
            let near = |base: u32, input: &mut Input<'_>| {
                base.wrapping_add(i32::from(input.u16() as i16 >> 4) as u32)
            };
            let seq = match input.below(3) {
                0 => near(h.peer_nxt, input),
                1 => near(h.stack_nxt, input),
                _ => input.u32(),
            };
            let ack = match input.below(3) {
                0 => near(h.stack_nxt, input),
                1 => near(h.peer_nxt, input),
                _ => input.u32(),
            };
            let flags = input.u8();
            let window = input.u16();
            let options: &[u8] = match input.below(3) {
                0 => &[2, 4, 5, 0xb4],
                1 => &[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 0],
                _ => &[],
            };
            let (s, d) = (SocketAddrV4::new(src, sport), SocketAddrV4::new(dst, dport));
            tcp_packet(s, d, seq, ack, flags, window, options, len)
        }
        4 | 5 => {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            ip_packet(
                src,
                dst,
                17,
                0,
                0,
                &[],
                &udp_datagram(src, dst, sport, dport, &data),
            )
        }
        6 => {
            // ICMP: an echo request, or an error quoting one of our own packets (a TCP or UDP header
            // from B or loopback to the port chosen), or whatever the input says.
            let (t, code) = (input.u8() % 20, input.u8() % 16);
            let quoted = ip_packet(dst, src, input.choose(&[6, 17, 1]), 0, 0, &[], &{
                let mut q = sport.to_be_bytes().to_vec();
                q.extend_from_slice(&dport.to_be_bytes());
                q.extend_from_slice(&h.stack_nxt.to_be_bytes());
                q
            });
            let data = if input.bool() {
                quoted
            } else {
                vec![0x5a; len]
            };
            let rest = [input.u8(), input.u8(), input.u8(), input.u8()];
            ip_packet(src, dst, 1, 0, 0, &[], &icmp_message(t, code, rest, &data))
        }
        _ => {
            // Raw bytes, a valid IPv4 header in front when the input says so.
            let n = input.below(256);
            let bytes = input.bytes(n).to_vec();
            if input.bool() {
                ip_packet(src, dst, input.u8(), input.u16(), input.u16(), &[], &bytes)
            } else {
                bytes
            }
        }
    }
}

/// The target: see the module's documentation.
pub fn amplification(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let mut config = StackConfig::default();
    config.tcp.header_prediction = mode & 4 == 0;
    config.tcp.timestamps = mode & 8 == 0;
    config.tcp.syn_cookies = mode & 16 == 0;
    let mut h = Host::new(config);
    assert!(h.settle(), "the host does not go quiet before the packet");
    let packet = build(&mut input, &h);
    let before = h.stack.counters().ip.out_packets;
    let buf = PacketBuf::from_slice(&packet);
    match mode & 3 {
        0 | 1 => {
            h.raw.transmit(&mut vec![buf]);
        }
        2 => h.stack.receive(InterfaceId(1), buf),
        _ => h.stack.receive(LOOPBACK, buf),
    }
    // One simulated second: poll until quiet, then at every timer (and at least every 50 ms).
    let end = h.now + Duration::from_secs(1);
    let mut polls = 0;
    while h.now <= end {
        for _ in 0..64 {
            polls += 1;
            if h.stack.poll(h.now) == 0 {
                break;
            }
        }
        h.take();
        let sent = h.stack.counters().ip.out_packets - before;
        assert!(
            sent <= MAX_ANSWERS,
            "one packet made the stack send {sent} by {:?} ({polls} polls): {packet:02x?}\n{}",
            h.now,
            h.stack.counters()
        );
        let step = h.now + Duration::from_millis(50);
        h.now = h
            .stack
            .next_deadline()
            .map_or(step, |d| d.min(step))
            .max(h.now + Duration::from_micros(100));
    }
}
