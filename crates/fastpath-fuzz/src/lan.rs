//! The `lan` target: a stack on an Ethernet link (`PairEnd::ethernet_pair`), fed frames a neighbour
//! could send: ARP and neighbour discovery messages with any addresses, flags, hop limits and
//! options, IP packets in frames addressed to us, to others, to groups, and raw bytes.
//!
//! Two modes, by the input's first byte:
//! - **one frame** into a quiet host: within the two simulated seconds that follow, the stack sends
//!   at most [`MAX_ANSWERS`] frames (an ARP request is answered once; a ping from a neighbour not
//!   yet known costs a solicitation and a reply; nothing is answered by an answer).
//! - **a program** of frames, sends by the application to addresses on the prefix (a scan), and the
//!   clock moving: the neighbour caches never hold more than their bound, and nothing panics.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use fastpath::buf::PacketBuf;
use fastpath::config::{EthernetConfig, NeighborConfig, TemporaryAddresses, TemporaryMode};
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::wire::MacAddr;
use fastpath::{Instant, InterfaceId, Ipv4Cidr, Stack, StackConfig};

use crate::seeds::{icmp_message, ip_packet, udp_datagram};
use crate::{ones_add, reference_sum, Input};

/// The most frames one frame may make the stack send in the two seconds after it.
pub const MAX_ANSWERS: usize = 4;

/// The neighbour caches' bound in this target.
const MAX_ENTRIES: usize = 8;

const US: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
const PEER: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const ETH: InterfaceId = InterfaceId(1);

fn b6() -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)
}

fn a6() -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)
}

/// The hardware addresses a frame may come from or go to.
const MACS: [MacAddr; 6] = [
    US,
    PEER,
    MacAddr::BROADCAST,
    MacAddr([0x33, 0x33, 0, 0, 0, 1]),
    MacAddr([0x33, 0x33, 0xff, 0, 0, 2]),
    MacAddr([0x02, 0, 0, 0, 0, 9]),
];

/// IPv4 addresses for ARP's fields.
const V4: [Ipv4Addr; 5] = [
    B,
    A,
    Ipv4Addr::UNSPECIFIED,
    Ipv4Addr::BROADCAST,
    Ipv4Addr::new(10, 0, 0, 3),
];

/// IPv6 addresses for neighbour discovery's fields.
fn v6(i: usize) -> Ipv6Addr {
    [
        b6(),
        a6(),
        Ipv6Addr::UNSPECIFIED,
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2),
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3),
    ][i % 8]
}

struct Host {
    stack: Stack,
    raw: PairEnd,
    now: Instant,
}

impl Host {
    /// A host past its duplicate checks; `private` forms its addresses as a host that hides its
    /// hardware address does (RFC 7217's stable identifiers, RFC 8981's temporary addresses).
    fn new(private: bool) -> Host {
        let config = StackConfig {
            ethernet: EthernetConfig {
                neighbor: NeighborConfig {
                    max_entries: MAX_ENTRIES,
                    queue_bytes: 4096,
                    ..NeighborConfig::default()
                },
                stable_privacy: private,
                temporary: TemporaryAddresses {
                    mode: if private {
                        TemporaryMode::Prefer
                    } else {
                        TemporaryMode::Off
                    },
                    ..TemporaryAddresses::default()
                },
                ..EthernetConfig::default()
            },
            ..StackConfig::default()
        };
        let mut stack = Stack::new(config);
        let (raw, end) = PairEnd::ethernet_pair(
            LinkCapabilities::plain(1500),
            1 << 12,
            Impairments::default(),
            [PEER, US],
        );
        stack.add_interface("eth0", end, Ipv4Cidr::new(B, 24));
        stack
            .add_ipv6_address(ETH, fastpath::Ipv6Cidr::new(b6(), 64))
            .expect("an address");
        let mut h = Host {
            stack,
            raw,
            now: Instant::from_secs(1),
        };
        // Past duplicate address detection: both addresses in use, the link quiet.
        for _ in 0..3 {
            h.stack.poll(h.now);
            h.now = h.now + Duration::from_millis(600);
        }
        h.stack.poll(h.now);
        for port in [7, 9] {
            let any: SocketAddr = (Ipv6Addr::UNSPECIFIED, port).into();
            h.stack.udp_bind(any).expect("bind");
        }
        h.take();
        h
    }

    fn take(&mut self) -> usize {
        let mut batch = Vec::new();
        self.raw.receive(&mut batch, usize::MAX)
    }

    fn bounded(&self) {
        let eth = self.stack.ethernet(ETH).expect("an Ethernet interface");
        assert!(
            eth.arp_cache().len() <= MAX_ENTRIES,
            "ARP cache past its bound"
        );
        assert!(
            eth.nd_cache().len() <= MAX_ENTRIES,
            "ND cache past its bound"
        );
        // The link-local and the given address, and at most 16 formed from prefixes and 16
        // temporary ones.
        let addrs = self.stack.ipv6_addresses(ETH).len();
        assert!(addrs <= 2 + 16 + 16, "{addrs} IPv6 addresses");
    }
}

/// An ICMPv6 message with its checksum over the pseudo-header, in an IPv6 packet.
fn icmpv6_packet(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, msg: &[u8]) -> Vec<u8> {
    let mut m = msg.to_vec();
    if m.len() >= 4 {
        m[2..4].fill(0);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.octets());
        pseudo.extend_from_slice(&dst.octets());
        pseudo.extend_from_slice(&(m.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        let sum = ones_add(reference_sum(&pseudo), reference_sum(&m));
        m[2..4].copy_from_slice(&(!sum).to_be_bytes());
    }
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(m.len() as u16).to_be_bytes());
    p.extend_from_slice(&[58, hop_limit]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&m);
    p
}

/// A neighbour discovery message built from the input: a type of 133 to 137, the fixed part,
/// a target, and options of any type and length.
fn ndp_message(input: &mut Input<'_>) -> Vec<u8> {
    let t = 133 + input.below(5) as u8;
    let code = if input.below(8) == 0 { input.u8() } else { 0 };
    let mut m = vec![
        t,
        code,
        0,
        0,
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
    ];
    match t {
        134 => m.extend_from_slice(&input.u32().to_be_bytes().repeat(2)),
        135..=137 => m.extend_from_slice(&v6(input.below(8)).octets()),
        _ => {}
    }
    for _ in 0..input.below(4) {
        let kind = input.choose(&[1u8, 2, 3, 5, 14, 0]);
        let len = input.choose(&[1u8, 1, 4, 0, 2, 3]);
        m.extend_from_slice(&[kind, len]);
        let body = (usize::from(len) * 8).saturating_sub(2);
        let bytes = input.bytes(body);
        m.extend_from_slice(bytes);
    }
    m
}

/// One frame built from the input.
fn frame(input: &mut Input<'_>) -> Vec<u8> {
    let dst = input.choose(&MACS);
    let src = input.choose(&MACS[1..]);
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    if input.below(8) == 0 {
        f.extend_from_slice(&[0x81, 0x00, 0, input.u8()]);
    }
    match input.below(6) {
        0 | 1 => {
            f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, input.choose(&[1, 2, 3])]);
            f.extend_from_slice(&input.choose(&MACS).0);
            f.extend_from_slice(&input.choose(&V4).octets());
            f.extend_from_slice(&input.choose(&MACS).0);
            f.extend_from_slice(&input.choose(&V4).octets());
        }
        2 | 3 => {
            let (s, d) = (v6(input.below(8)), v6(input.below(8)));
            let hop_limit = if input.below(8) == 0 { input.u8() } else { 255 };
            let msg = ndp_message(input);
            f.extend_from_slice(&[0x86, 0xdd]);
            f.extend_from_slice(&icmpv6_packet(s, d, hop_limit, &msg));
        }
        4 => {
            // IPv4 in a frame: an echo request or a datagram to a port.
            let (s, d) = (input.choose(&V4), input.choose(&V4));
            f.extend_from_slice(&[0x08, 0x00]);
            let packet = if input.bool() {
                ip_packet(
                    s,
                    d,
                    1,
                    0,
                    0,
                    &[],
                    &icmp_message(8, 0, [0, 1, 0, 1], b"ping"),
                )
            } else {
                ip_packet(s, d, 17, 0, 0, &[], &udp_datagram(s, d, 1000, 9, b"x"))
            };
            f.extend_from_slice(&packet);
        }
        _ => {
            let n = input.below(80);
            f.extend_from_slice(input.bytes(n));
        }
    }
    f
}

/// The target: see the module's documentation.
pub fn lan(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    // Private addresses in the programs only: one frame into a quiet host checks answers, and an
    // advertisement of several prefixes starts a duplicate check for each address it gives.
    let mut h = Host::new(mode & 1 == 1);
    if mode & 1 == 0 {
        let f = frame(&mut input);
        h.raw.transmit(&mut vec![PacketBuf::from_slice(&f)]);
        let mut sent = 0;
        for _ in 0..40 {
            h.stack.poll(h.now);
            sent += h.take();
            h.now = h.now + Duration::from_millis(50);
        }
        assert!(
            sent <= MAX_ANSWERS,
            "one frame made the stack send {sent}: {f:02x?}"
        );
        h.bounded();
        return;
    }
    let tx = h
        .stack
        .udp_bind((Ipv6Addr::UNSPECIFIED, 0))
        .expect("a socket");
    for _ in 0..64 {
        if input.is_empty() {
            break;
        }
        match input.below(4) {
            0 | 1 => {
                let f = frame(&mut input);
                h.raw.transmit(&mut vec![PacketBuf::from_slice(&f)]);
            }
            2 => {
                // The application sends to a host on the prefix: a scan when repeated.
                let host = input.u8();
                let to: SocketAddr = if input.bool() {
                    (Ipv4Addr::new(10, 0, 0, host), 9).into()
                } else {
                    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, host.into()), 9).into()
                };
                let _ = h.stack.udp(tx).send_to(&[0u8; 100], to);
            }
            _ => h.now = h.now + Duration::from_millis(u64::from(input.u16())),
        }
        h.stack.poll(h.now);
        h.take();
        h.bounded();
    }
}
