//! The `tcp` target: segments from a hostile peer, the application's calls and the clock, against a
//! stack with one passive and one active connection already open.
//!
//! The target opens both connections itself (a handshake each way over a raw pair end), so every
//! input starts in ESTABLISHED; the input then chooses segments whose sequence and acknowledgment
//! numbers are offsets from the live ones, so that small inputs reach the window checks, loss
//! recovery, SACK, FIN and RST handling, TIME-WAIT and the timers. Every payload byte at sequence
//! number `s` is [`byte_at`]`(s)`, so whatever the application reads must be that function of the
//! stream position: reassembly may never misplace, repeat or invent a byte.
//!
//! Checked at every step: no panic; every segment the stack sends is a well-formed IPv4/TCP packet
//! with a correct checksum and sane flags, from the stack's address; the connection count stays
//! within its limit; bytes read are the peer's bytes in order.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::tcp::{CongestionAlgorithm, State};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig, TcpListener, TcpStream};

use crate::seeds::ip_packet;
use crate::{be16, ones_add, reference_sum, Input};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// The peer's byte at sequence number `s`.
pub fn byte_at(s: u32) -> u8 {
    (s.wrapping_mul(31) ^ (s >> 8)) as u8
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// A TCP segment from A:`sport` to B:`dport` with a correct checksum.
#[allow(clippy::too_many_arguments)]
fn segment(
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    options: &[u8],
    payload_len: usize,
) -> Vec<u8> {
    let (src, dst) = (SocketAddrV4::new(A, sport), SocketAddrV4::new(B, dport));
    tcp_packet(src, dst, seq, ack, flags, window, options, payload_len)
}

/// A TCP/IPv4 packet from `src` to `dst` with a correct checksum, the payload bytes [`byte_at`]
/// their sequence numbers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tcp_packet(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    options: &[u8],
    payload_len: usize,
) -> Vec<u8> {
    let hlen = 20 + options.len();
    let mut t = vec![0u8; hlen];
    t[0..2].copy_from_slice(&src.port().to_be_bytes());
    t[2..4].copy_from_slice(&dst.port().to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = ((hlen / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&window.to_be_bytes());
    t[20..].copy_from_slice(options);
    t.extend((0..payload_len as u32).map(|k| byte_at(seq.wrapping_add(k))));
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = 6;
    pseudo[10..].copy_from_slice(&(t.len() as u16).to_be_bytes());
    let sum = !ones_add(reference_sum(&pseudo), reference_sum(&t));
    t[16..18].copy_from_slice(&sum.to_be_bytes());
    ip_packet(*src.ip(), *dst.ip(), 6, 0, 0, &[], &t)
}

/// One open connection as the peer sees it.
struct Peer {
    stream: TcpStream,
    /// Our (the peer's) port and the stack's.
    port: u16,
    stack_port: u16,
    /// The peer's next sequence number, and the stack's as last seen.
    snd_nxt: u32,
    stack_nxt: u32,
    /// Stream position of the next byte the application will read.
    read_seq: u32,
}

struct Host {
    stack: Stack,
    raw: PairEnd,
    now: Instant,
    listener: TcpListener,
    peers: Vec<Peer>,
}

const FLAGS: [u8; 12] = [
    0x10, 0x10, 0x18, 0x11, 0x14, 0x04, 0x02, 0x12, 0x01, 0x00, 0x03, 0x30,
];

impl Host {
    fn new(config: StackConfig) -> Option<Host> {
        let mut stack = Stack::new(config);
        let (raw, end) = PairEnd::pair(
            LinkCapabilities::plain(1500),
            1 << 12,
            Impairments::default(),
        );
        stack.add_interface("pair0", end, Ipv4Cidr::new(B, 24));
        let now = Instant::from_secs(1);
        stack.poll(now);
        let listener = stack.tcp_listen(SocketAddrV4::new(B, 80), 2).ok()?;
        let mut h = Host {
            stack,
            raw,
            now,
            listener,
            peers: Vec::new(),
        };
        // Passive: our SYN, its SYN-ACK, our ACK.
        h.inject(&segment(
            1000,
            80,
            5000,
            0,
            0x02,
            65535,
            &[2, 4, 5, 0xb4],
            0,
        ));
        let synack = h.output().into_iter().find(|p| p[33] & 0x12 == 0x12)?;
        let stack_isn = be32(&synack, 24);
        h.inject(&segment(
            1000,
            80,
            5001,
            stack_isn.wrapping_add(1),
            0x10,
            65535,
            &[],
            0,
        ));
        h.output();
        let (stream, _) = h.stack.tcp_listener(h.listener).accept().ok()?;
        h.peers.push(Peer {
            stream,
            port: 1000,
            stack_port: 80,
            snd_nxt: 5001,
            stack_nxt: stack_isn.wrapping_add(1),
            read_seq: 5001,
        });
        // Active: the stack connects to us.
        let stream = h.stack.tcp_connect(SocketAddrV4::new(A, 2000)).ok()?;
        h.stack.poll(h.now);
        let syn = h.output().into_iter().find(|p| p[33] & 0x02 != 0)?;
        let (stack_port, isn) = (be16(&syn, 20), be32(&syn, 24));
        h.inject(&segment(
            2000,
            stack_port,
            9000,
            isn.wrapping_add(1),
            0x12,
            65535,
            &[],
            0,
        ));
        h.output();
        h.peers.push(Peer {
            stream,
            port: 2000,
            stack_port,
            snd_nxt: 9001,
            stack_nxt: isn.wrapping_add(1),
            read_seq: 9001,
        });
        Some(h)
    }

    fn inject(&mut self, packet: &[u8]) {
        self.raw
            .transmit(&mut vec![fastpath::buf::PacketBuf::from_slice(packet)]);
        self.stack.poll(self.now);
    }

    /// What the stack sent, checked; updates each peer's view of the stack's sequence numbers.
    fn output(&mut self) -> Vec<Vec<u8>> {
        let mut batch = Vec::new();
        self.raw.receive(&mut batch, usize::MAX);
        let mut out = Vec::new();
        for p in batch {
            let d = p.data().to_vec();
            check_segment(&d);
            if d[9] == 6 {
                let (sport, dport) = (be16(&d, 20), be16(&d, 22));
                let end = be32(&d, 24)
                    .wrapping_add((d.len() - 20 - ((d[32] >> 4) as usize * 4)) as u32)
                    .wrapping_add(u32::from(d[33] & 0x03 != 0));
                for peer in &mut self.peers {
                    if peer.port == dport
                        && peer.stack_port == sport
                        && (end.wrapping_sub(peer.stack_nxt) as i32) > 0
                    {
                        peer.stack_nxt = end;
                    }
                }
            }
            out.push(d);
        }
        out
    }

    fn read(&mut self, k: usize) {
        let Some(peer) = self.peers.get_mut(k) else {
            return;
        };
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.stack.tcp(peer.stream).read(&mut buf) {
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                assert_eq!(b, byte_at(peer.read_seq), "byte at {}", peer.read_seq);
                peer.read_seq = peer.read_seq.wrapping_add(1);
            }
        }
    }
}

/// A packet the stack sent: IPv4 from B to A, a TCP header that parses, a correct checksum, sane
/// flags.
fn check_segment(d: &[u8]) {
    assert!(d.len() >= 20 && d[0] == 0x45, "bad IP header: {d:02x?}");
    assert_eq!(usize::from(be16(d, 2)), d.len(), "IP length");
    assert_eq!(reference_sum(&d[..20]), 0xffff, "IP header checksum");
    assert_eq!(&d[12..16], &B.octets(), "source");
    if d[9] != 6 {
        return;
    }
    let t = &d[20..];
    assert!(t.len() >= 20, "short TCP header");
    let hlen = (t[12] >> 4) as usize * 4;
    assert!((20..=t.len()).contains(&hlen), "TCP data offset {hlen}");
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&d[12..16]);
    pseudo[4..8].copy_from_slice(&d[16..20]);
    pseudo[9] = 6;
    pseudo[10..].copy_from_slice(&(t.len() as u16).to_be_bytes());
    assert_eq!(
        ones_add(reference_sum(&pseudo), reference_sum(t)),
        0xffff,
        "TCP checksum: {d:02x?}"
    );
    let flags = t[13];
    assert!(flags & 0x3f != 0, "no flags");
    assert!(flags & 0x03 != 0x03, "SYN with FIN");
    assert!(
        flags & 0x04 == 0 || t.len() == hlen,
        "a RST with data: {d:02x?}"
    );
    assert!(d.len() <= 1500, "larger than the MTU");
}

/// The target.
pub fn tcp(data: &[u8]) {
    let mut input = Input::new(data);
    let mut config = StackConfig::default();
    let mode = input.u8();
    config.tcp.sack = mode & 1 == 0;
    config.tcp.timestamps = mode & 2 == 0;
    config.tcp.header_prediction = mode & 4 == 0;
    config.tcp.window_scaling = mode & 8 == 0;
    if mode & 16 != 0 {
        config.tcp.congestion = CongestionAlgorithm::NewReno;
    }
    config.tcp.recv_buffer = 8192 << (mode >> 6);
    config.tcp.send_buffer = 16384;
    config.limits.tcp_connections = 8;
    config.limits.tcp_out_of_order = 8;
    let Some(mut h) = Host::new(config) else {
        panic!("could not open the two connections");
    };
    let mut steps = 0;
    while !input.is_empty() && steps < 300 {
        steps += 1;
        let k = input.below(2);
        match input.below(9) {
            0..=2 => {
                // A segment near the live numbers.
                let (port, stack_port, snd, stack) = {
                    let p = &h.peers[k];
                    (p.port, p.stack_port, p.snd_nxt, p.stack_nxt)
                };
                let seq = snd.wrapping_add(i32::from(input.u16() as i16 >> 6) as u32);
                let ack = stack.wrapping_add(i32::from(input.u16() as i16 >> 4) as u32);
                let flags = FLAGS[input.below(FLAGS.len())];
                let window = match input.below(4) {
                    0 => 0,
                    1 => input.u16(),
                    _ => 65535,
                };
                let options: Vec<u8> = match input.below(4) {
                    0 => {
                        // NOP, NOP, timestamps: a value that moves with the step (and wraps).
                        let val = (steps as u8).wrapping_add(100);
                        vec![1, 1, 8, 10, 0, 0, 0, val, 0, 0, 0, 0]
                    }
                    1 => {
                        let l = stack.wrapping_add(u32::from(input.u16()));
                        let r = l.wrapping_add(u32::from(input.u16()));
                        let mut o = vec![1, 1, 5, 10];
                        o.extend_from_slice(&l.to_be_bytes());
                        o.extend_from_slice(&r.to_be_bytes());
                        o
                    }
                    2 => {
                        // Raw option bytes, padded to the header's 32-bit words.
                        let n = input.below(5) * 4;
                        let mut o = input.bytes(n).to_vec();
                        o.resize(n, 0);
                        o
                    }
                    _ => Vec::new(),
                };
                let len = match input.below(4) {
                    0 => input.below(1400),
                    1 => 1,
                    _ => 0,
                };
                h.inject(&segment(
                    port, stack_port, seq, ack, flags, window, &options, len,
                ));
                if seq == snd && flags & 0x04 == 0 {
                    h.peers[k].snd_nxt = snd
                        .wrapping_add(len as u32)
                        .wrapping_add(u32::from(flags & 0x01 != 0));
                }
            }
            3 => {
                // Hostile header bytes after a valid IP header.
                let n = input.below(64);
                let bytes = input.bytes(n).to_vec();
                h.inject(&ip_packet(A, B, 6, 0, 0, &[], &bytes));
            }
            4 => {
                let n = input.below(6000);
                let stream = h.peers[k].stream;
                let _ = h.stack.tcp(stream).write(&vec![0x5a; n]);
            }
            5 => h.read(k),
            6 => {
                let stream = h.peers[k].stream;
                match input.below(4) {
                    0 => {
                        let _ = h.stack.tcp(stream).shutdown_write();
                    }
                    1 => h.stack.tcp(stream).close(),
                    2 => h.stack.tcp(stream).abort(),
                    _ => {
                        let _ = h.stack.tcp(stream).set_keepalive(true);
                    }
                }
            }
            7 => {
                // SYNs to the listener (filling its queue, then cookies) and to a closed port.
                let port = 3000 + input.u8() as u16;
                let dport = if input.bool() { 80 } else { 81 };
                h.inject(&segment(port, dport, input.u32(), 0, 0x02, 1024, &[], 0));
            }
            _ => {
                let ms = u64::from(input.u16()) * 8;
                h.now = h.now + Duration::from_millis(ms);
                h.stack.poll(h.now);
            }
        }
        h.output();
        assert!(h.stack.tcp_connections() <= 8, "connection limit");
        for k in 0..h.peers.len() {
            let stream = h.peers[k].stream;
            if h.stack
                .tcp(stream)
                .state()
                .is_ok_and(|s| s != State::Closed)
            {
                h.read(k);
            }
        }
    }
    let _ = h.stack.tcp_listener(h.listener).accept();
}
