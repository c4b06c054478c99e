//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::buf::PacketBuf;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn sa(ip: Ipv4Addr, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip, port)
}

/// Two stacks, A (10.0.0.1) and B (10.0.0.2), joined by an in-memory pair.
pub fn two_stacks(
    config: StackConfig,
    caps: LinkCapabilities,
    impair: Impairments,
) -> (Stack, Stack) {
    let (ea, eb) = PairEnd::pair(caps, 65536, impair);
    let mut a = Stack::new(config.clone());
    a.add_interface("pair0", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config);
    b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    (a, b)
}

/// A stack (B, 10.0.0.2) whose peer is the test itself, holding the raw other end of the pair.
pub fn stack_and_raw(config: StackConfig, caps: LinkCapabilities) -> (Stack, PairEnd) {
    let (raw, eb) = PairEnd::pair(caps, 65536, Impairments::default());
    let mut b = Stack::new(config);
    b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
    (b, raw)
}

/// Polls both stacks until neither moves a packet.
pub fn settle(a: &mut Stack, b: &mut Stack, now: Instant) {
    for _ in 0..1000 {
        let n = a.poll(now) + b.poll(now);
        if n == 0 {
            return;
        }
    }
    panic!("stacks did not settle");
}

/// Sends raw bytes into the stack through the raw end.
pub fn inject(raw: &mut PairEnd, bytes: &[u8]) {
    raw.transmit(&mut vec![PacketBuf::from_slice(bytes)]);
}

/// Everything the stack sent to the raw end.
pub fn capture(raw: &mut PairEnd) -> Vec<Vec<u8>> {
    let mut batch = Vec::new();
    raw.receive(&mut batch, usize::MAX);
    batch.iter().map(|p| p.data().to_vec()).collect()
}

/// A deterministic payload for a datagram of `len` bytes, different per `seed`.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = fastpath::rng::Rng::new(seed);
    let mut v = vec![0; len];
    rng.fill(&mut v);
    v
}

/// Builds an IPv4 packet around `payload` with etherparse (an independent implementation).
pub fn ip_packet(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = etherparse::Ipv4Header::new(
        payload.len() as u16,
        64,
        etherparse::IpNumber(protocol),
        src.octets(),
        dst.octets(),
    )
    .unwrap();
    h.header_checksum = h.calc_header_checksum();
    let mut out = h.to_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// Builds a UDP/IPv4 packet with etherparse, checksum included.
pub fn udp_packet(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ipv4(src.ip().octets(), dst.ip().octets(), 64)
        .udp(src.port(), dst.port());
    let mut out = Vec::new();
    builder.write(&mut out, payload).unwrap();
    out
}

/// An IPv6 packet from `src` to `dst` with hop limit `hop_limit` carrying the ICMPv6 message
/// `msg` (its checksum field filled in here).
pub fn ipv6_icmp(
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    hop_limit: u8,
    msg: &[u8],
) -> Vec<u8> {
    use fastpath::checksum;
    let mut m = msg.to_vec();
    m[2..4].fill(0);
    let sum = checksum::add(
        checksum::pseudo_header_sum(src, dst, 58, m.len() as u16),
        checksum::rfc1071(&m),
    );
    m[2..4].copy_from_slice(&(!sum).to_be_bytes());
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(m.len() as u16).to_be_bytes());
    p.extend_from_slice(&[58, hop_limit]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&m);
    p
}
