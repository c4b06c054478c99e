//! Fuzz targets for fastpath, as plain functions of a byte slice.
//!
//! Each target takes whatever bytes a fuzzer (or the deterministic [`smoke`] driver) gives it, feeds
//! them to one part of the stack, and checks the part's invariants with `assert!`: a failed assertion
//! or any other panic is a finding. The targets never read files, clocks or anything else outside
//! their input, so every finding replays from its input alone.
//!
//! | target | what it feeds | what it checks |
//! | --- | --- | --- |
//! | [`ipv4`](wire::ipv4) | bytes to `Ipv4Packet::new_checked` and `Ipv4Repr::parse` | the verdict against a model of RFC 791's length rules, every accessor against the bytes, the header checksum against a reference sum, emit and parse round trips |
//! | [`udp`](wire::udp) | addresses and bytes to `UdpPacket` and `UdpRepr` | the verdict against a model, the checksum (zero means none) against a reference sum, `fill_checksum` never writes zero |
//! | [`icmpv4`](wire::icmpv4) | bytes to `Icmpv4Packet` and `Icmpv4Repr::parse`, errors' data to `parse_quoted` | type and code mapping, checksum, parse-emit-parse |
//! | [`icmp_quoted`](wire::icmp_quoted) | bytes to `icmpv4::parse_quoted` | the verdict against a model of RFC 792's quote |
//! | [`ipv6`](wire6::ipv6) | bytes to `Ipv6Packet`, `Ipv6Repr` and the extension-header walk | the verdict against a model of RFC 8200's lengths, every field, emit-parse round trip; the walk inside the payload, agreeing with the length-only skip, its pointers inside the packet |
//! | [`icmpv6`](wire6::icmpv6) | addresses and bytes to `Icmpv6Repr::parse`, errors' data to `parse_quoted` | the checksum verdict against a reference sum with the pseudo-header, parse-emit round trip |
//! | [`ethernet`](link::ethernet) | bytes to `EthernetFrame` and `EthernetRepr` | the verdict against a model of Ethernet II and 802.1Q framing, every field, emit round trip |
//! | [`arp`](link::arp) | bytes to `ArpPacket` and `ArpRepr` | the verdict against a model of RFC 826's IPv4-over-Ethernet message, every field, emit round trip |
//! | [`neighbor`](link::neighbor) | packets to resolve, ARP messages from any sender, learned and confirmed addresses and clock steps to a `NeighborCache` and `arp_input` | the entry bound held; one message out per message in at most, never to a group address nor claiming an address not ours; a reply never makes an entry; every packet held comes back exactly once |
//! | [`lan`](lan::lan) | frames a neighbour could send (ARP and neighbour discovery messages with any addresses, flags, hop limits and options; IP in frames to us, to groups, to others; raw bytes) to a stack on an Ethernet link, alone or in programs with scans by the application and clock steps (the programs' host with stable and temporary addresses) | one frame makes at most 4 frames out in the next two seconds; both neighbour caches and the addresses formed within their bounds |
//! | [`checksum`](checksum::checksum) | bytes, cut into pieces | every algorithm, fused copies, partial sums over odd pieces and incremental updates agree with a reference sum |
//! | [`reassembly`](reassembly::reassembly) | fragment sequences and timer ticks to a `ReassemblyTable` with IPv4 keys | bytes and datagrams held within the caps, completed datagrams exact, atomic fragments pass straight through, a whole set always completes, expired datagrams quote header and 8 bytes, no buffer lost |
//! | [`reassembly_ipv6`](reassembly::reassembly_ipv6) | the same with IPv6 keys (32-bit identifications, equal ones from two sources) and header chains of 48 bytes and up | as `reassembly`, and: the first fragment's header comes back with the packet, which stays within 65,535 bytes counting its extension headers; expired packets quote their first fragment up to 1232 bytes |
//! | [`demux`](demux::demux) | bind, connect, close, send and lookup sequences | every strategy answers exactly what `linear` answers |
//! | [`stack`](stack::stack) | packets (raw or built from a few fields), socket reads and sends, time, to a stack with three interfaces | no panic; counters add up (`in_receives` = packets fed + looped back); every bound held; what the stack sends is well formed, never sourced from 127/8 on a wire, never an ICMP error about a broadcast; rate limit; with a second stack of other techniques (separate copy and checksum, `rfc1071`, `linear`) the same datagrams read and the same counters |
//! | [`tcp`](tcp::tcp) | segments near the live sequence numbers, hostile headers, SYN floods, the application's calls and the clock, to a stack with a passive and an active connection open | no panic; every segment sent well formed with a correct checksum and sane flags; the connection limit held; every byte read is the peer's byte for its stream position |
//!
//! | [`amplification`](amplification::amplification) | one packet (any source, ours and loopback's included; any destination, protocol and header; through the link or into loopback) to a stack with sockets, listeners and a connection over the link and one with itself | the stack sends at most [`MAX_ANSWERS`](amplification::MAX_ANSWERS) packets, loopback included, in the simulated second after: no reply loops, no amplification |
//!
//! | [`socks5`](tunnel::socks5) | a SOCKS5 server's side of the conversation (method choice, RFC 1929 status, reply) to the tunnel's client, and bytes to the address and UDP-header parsers | no panic, every read within what the server sent, the client's own requests well formed, the parsers' lengths within the input and their results encoding back to the same bytes |
//! | [`http_connect`](tunnel::http_connect) | an HTTP proxy's answer to the tunnel's CONNECT, and the same bytes as a name to connect to | no panic; an accepted response is final (2xx to 5xx), within the input and [`MAX_RESPONSE`](fastpath_tunnel::http_connect::MAX_RESPONSE), ends with its empty line and parses the same alone; more is asked for only below the bound; a request carries no injected line |
//! | [`dns`](tunnel::dns) | datagrams to the tunnel's fake DNS, over a small range | no panic; a reply keeps the query's ID and question, is a response with at most one answer, and names an address of the range that is not reserved and stands for a name; the table within its range |
//!
//! [`TARGETS`] lists them by name for the drivers: `tests/smoke.rs` (a few thousand seeded inputs
//! per target plus the committed seed corpus, in `cargo test`), the `fastpath-fuzz` binary (replay
//! files, longer seeded runs, regenerate the seeds) and the cargo-fuzz project in `fuzz/`
//! (coverage-guided campaigns).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod amplification;
pub mod checksum;
pub mod demux;
pub mod input;
pub mod lan;
pub mod link;
pub mod reassembly;
pub mod seeds;
pub mod smoke;
pub mod stack;
pub mod tcp;
pub mod tunnel;
pub mod wire;
pub mod wire6;

use std::sync::OnceLock;

pub use input::Input;

/// A fuzz target: panics when it finds a bug.
pub type Target = fn(&[u8]);

/// Every target by name, as `cargo fuzz run NAME` knows it.
pub const TARGETS: &[(&str, Target)] = &[
    ("ipv4", wire::ipv4),
    ("udp", wire::udp),
    ("icmpv4", wire::icmpv4),
    ("icmp_quoted", wire::icmp_quoted),
    ("ipv6", wire6::ipv6),
    ("icmpv6", wire6::icmpv6),
    ("ethernet", link::ethernet),
    ("arp", link::arp),
    ("neighbor", link::neighbor),
    ("lan", lan::lan),
    ("checksum", checksum::checksum),
    ("reassembly", reassembly::reassembly),
    ("reassembly_ipv6", reassembly::reassembly_ipv6),
    ("demux", demux::demux),
    ("stack", stack::stack),
    ("tcp", tcp::tcp),
    ("amplification", amplification::amplification),
    ("socks5", tunnel::socks5),
    ("http_connect", tunnel::http_connect),
    ("dns", tunnel::dns),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The Internet checksum's folded ones'-complement sum of `data`, written from RFC 1071 §4.1 for the
/// targets' own checks, sharing no code with the stack.
pub fn reference_sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The ones'-complement sum of two folded sums.
pub fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// 192 KiB of a fixed pseudo-random sequence that the targets cut payloads from, so that any window
/// up to 128 KiB long fits at any offset below 64 KiB. Copying and comparing windows keeps the
/// targets fast under coverage instrumentation, where a loop computing each byte is not.
pub fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| {
        (0..3u32 << 16)
            .map(|k| (k.wrapping_mul(0x9e37_79b1) >> 13) as u8)
            .collect()
    })
}

/// The big-endian `u16` at `data[at..at + 2]`.
pub fn be16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}
