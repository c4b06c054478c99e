//! Wire formats: typed views over packet bytes and their parsed meanings.
//!
//! Each header has its own file and two layers:
//!
//! - a **packet** (`Ipv4Packet`, `UdpPacket`, `Icmpv4Packet`) is a zero-copy view over a byte buffer. Its
//!   `new_checked` constructor validates the lengths once, after which the one-line accessors read fields in place.
//!   Packets are hostile input: `new_checked` returns an error, never panics, whatever the bytes.
//! - a **repr** (`Ipv4Repr`, `UdpRepr`, `Icmpv4Repr`) is what the header means, with `parse` (packet to repr)
//!   and `emit` (repr to bytes). Emitters write into a buffer the caller provides, in place, so a payload written
//!   once into headroom never moves.
//!
//! Checksums: the IPv4 header and UDP checksums are left to the layers that own them (they use the configured
//! algorithm from [`crate::checksum`]); `parse` does not verify them and `emit` writes zero. ICMP is small and
//! rare, so [`Icmpv4Repr`] verifies and fills its own checksum.

pub mod arp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv4opt;
pub mod ipv6;
pub mod ipv6ext;
pub mod ndp;
pub mod tcp;
pub mod udp;

pub use arp::{ArpOp, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr, VlanTag};
pub use icmpv4::{DstUnreachable, Icmpv4Packet, Icmpv4Repr, Message as IcmpMessage, TimeExceeded};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ndp::{NaFlags, NdpRepr, PrefixInfo};
pub use tcp::{TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};

use core::fmt;

/// Why a packet was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer is shorter than the fixed header.
    Truncated,
    /// The IP version field is not the family's (4, 6).
    BadVersion,
    /// The IPv4 header length (IHL) is below 5 words or runs past the buffer.
    BadHeaderLength,
    /// The IPv4 total length is shorter than the header or longer than the buffer.
    BadTotalLength,
    /// A length field (UDP) is shorter than its header or longer than the buffer.
    BadLength,
    /// The checksum does not verify.
    BadChecksum,
    /// A well-formed message of a type or code this stack does not handle.
    Unrecognized,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            WireError::Truncated => "truncated packet",
            WireError::BadVersion => "bad ip version",
            WireError::BadHeaderLength => "bad header length",
            WireError::BadTotalLength => "bad total length",
            WireError::BadLength => "bad length",
            WireError::BadChecksum => "bad checksum",
            WireError::Unrecognized => "unrecognized message",
        };
        f.write_str(s)
    }
}

impl std::error::Error for WireError {}

/// The result of a wire-format check or parse.
pub type Result<T> = core::result::Result<T, WireError>;

/// The IPv4 protocol field and IPv6's next header field: which header follows (the IANA "Assigned
/// Internet Protocol Numbers", shared by both families).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// IPv6 hop-by-hop options, 0 (RFC 8200 §4.3).
    HopByHop,
    /// ICMP, protocol 1 (RFC 792).
    Icmp,
    /// TCP, protocol 6 (RFC 9293).
    Tcp,
    /// UDP, protocol 17 (RFC 768).
    Udp,
    /// IPv6 routing header, 43 (RFC 8200 §4.4).
    Ipv6Route,
    /// IPv6 fragment header, 44 (RFC 8200 §4.5).
    Ipv6Frag,
    /// ICMPv6, 58 (RFC 4443).
    Icmpv6,
    /// IPv6 "no next header", 59 (RFC 8200 §4.7).
    Ipv6NoNext,
    /// IPv6 destination options, 60 (RFC 8200 §4.6).
    Ipv6Opts,
    /// Any other protocol number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        match value {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNext,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        match value {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNext => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

/// Reads the big-endian `u16` at `data[at..at + 2]`. Panics if out of bounds; callers check lengths first.
///
/// Slicing first makes it one bounds check and one 16-bit load (indexing the two bytes separately compiles to
/// two checks and two byte loads).
#[inline]
fn read_u16(data: &[u8], at: usize) -> u16 {
    let bytes = &data[at..at + 2];
    u16::from_be_bytes([bytes[0], bytes[1]])
}

/// Writes `value` big-endian at `data[at..at + 2]`. Panics if out of bounds; callers check lengths first.
#[inline]
fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Packets for the tests of every header: built to match what Linux `ping`, `traceroute` and a DNS stub resolver
/// put on the wire, with their checksums computed by a separate script (and cross-checked by `etherparse` in the
/// tests).
#[cfg(test)]
mod testdata {
    /// 192.168.1.100:54321 -> 8.8.8.8:53, a DNS query for `example.com` A. IP: DF, TTL 64, ident 0x1c46.
    pub const UDP_DNS_QUERY: [u8; 57] = [
        0x45, 0x00, 0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x4c, 0x52, // IP header
        0xc0, 0xa8, 0x01, 0x64, 0x08, 0x08, 0x08, 0x08, //
        0xd4, 0x31, 0x00, 0x35, 0x00, 0x25, 0xdd, 0xe5, // UDP header
        0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // DNS header
        0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d,
        0x00, // example.com
        0x00, 0x01, 0x00, 0x01, // A, IN
    ];

    /// `ping 10.0.0.2` from 10.0.0.1: ident 0x1234, seq 1, 56 data bytes: the 16-byte
    /// send time (x86-64 `struct timeval`, little-endian) then the pattern 0x10..0x37.
    pub const ECHO_REQUEST: [u8; 84] = [
        0x45, 0x00, 0x00, 0x54, 0x3b, 0x9e, 0x40, 0x00, 0x40, 0x01, 0xeb, 0x08, // IP header
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, //
        0x08, 0x00, 0xe0, 0x94, 0x12, 0x34, 0x00, 0x01, // ICMP echo request
        0xa2, 0xe0, 0x51, 0x66, 0x00, 0x00, 0x00, 0x00, // struct timeval, host order: tv_sec
        0x47, 0x1c, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, // tv_usec
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, // pattern
        0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, //
        0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, //
        0x34, 0x35, 0x36, 0x37,
    ];

    /// The reply from 10.0.0.2 to [`ECHO_REQUEST`]: same ident, sequence and data. IP: no DF, ident 0x9f21.
    pub const ECHO_REPLY: [u8; 84] = [
        0x45, 0x00, 0x00, 0x54, 0x9f, 0x21, 0x00, 0x00, 0x40, 0x01, 0xc7, 0x85, // IP header
        0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x01, //
        0x00, 0x00, 0xe8, 0x94, 0x12, 0x34, 0x00, 0x01, // ICMP echo reply
        0xa2, 0xe0, 0x51, 0x66, 0x00, 0x00, 0x00, 0x00, // struct timeval, host order: tv_sec
        0x47, 0x1c, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, // tv_usec
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, // pattern
        0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, //
        0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, //
        0x34, 0x35, 0x36, 0x37,
    ];

    /// 192.168.1.1 tells 192.168.1.100 that UDP port 9999 is closed, quoting the whole datagram
    /// (192.168.1.100:51000 -> 192.168.1.1:9999, "hello"), as Linux does. IP: TOS 0xc0 (internetwork control).
    pub const PORT_UNREACHABLE: [u8; 61] = [
        0x45, 0xc0, 0x00, 0x3d, 0x7a, 0x10, 0x00, 0x00, 0x40, 0x01, 0x7c, 0x3a, // IP header
        0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x64, //
        0x03, 0x03, 0x80, 0xd1, 0x00, 0x00, 0x00, 0x00, // ICMP dst unreachable, port
        0x45, 0x00, 0x00, 0x21, 0x4d, 0x2e, 0x40, 0x00, 0x40, 0x11, 0x69,
        0xe8, // quoted IP header
        0xc0, 0xa8, 0x01, 0x64, 0xc0, 0xa8, 0x01, 0x01, //
        0xc7, 0x38, 0x27, 0x0f, 0x00, 0x0d, 0x4a, 0x04, // quoted UDP header
        0x68, 0x65, 0x6c, 0x6c, 0x6f, // "hello"
    ];

    /// Router 10.1.1.1 (TTL 254) tells 192.168.1.100 that a 1500-byte DF datagram to 203.0.113.7:5001 needs
    /// fragmenting for a 1400-byte next hop (RFC 1191), quoting the IP header and 8 bytes (RFC 792).
    pub const FRAG_NEEDED: [u8; 56] = [
        0x45, 0xc0, 0x00, 0x38, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x01, 0xee, 0xf6, // IP header
        0x0a, 0x01, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x64, //
        0x03, 0x04, 0xfb, 0x71, 0x00, 0x00, 0x05,
        0x78, // ICMP dst unreachable, frag needed, MTU 1400
        0x45, 0x00, 0x05, 0xdc, 0x01, 0x02, 0x40, 0x00, 0x40, 0x11, 0x35,
        0xfb, // quoted IP header
        0xc0, 0xa8, 0x01, 0x64, 0xcb, 0x00, 0x71, 0x07, //
        0x9c, 0xbb, 0x13, 0x89, 0x05, 0xc8, 0x46, 0x05, // quoted UDP header
    ];

    /// Router 192.168.1.1 answers a TTL-1 `traceroute` probe (192.168.1.100:40000 -> 93.184.216.34:33434,
    /// 60 bytes) with time exceeded in transit, quoting the IP header and 8 bytes.
    pub const TIME_EXCEEDED: [u8; 56] = [
        0x45, 0xc0, 0x00, 0x38, 0x1e, 0x7f, 0x00, 0x00, 0x40, 0x01, 0xd7, 0xd0, // IP header
        0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x64, //
        0x0b, 0x00, 0xe2, 0x25, 0x00, 0x00, 0x00, 0x00, // ICMP time exceeded, TTL
        0x45, 0x00, 0x00, 0x3c, 0x8b, 0x5c, 0x00, 0x00, 0x01, 0x11, 0x36,
        0x6e, // quoted IP header
        0xc0, 0xa8, 0x01, 0x64, 0x5d, 0xb8, 0xd8, 0x22, //
        0x9c, 0x40, 0x82, 0x9a, 0x00, 0x28, 0xf3, 0xd6, // quoted UDP header
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_protocol_round_trips_every_value() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
        assert_eq!(IpProtocol::from(1), IpProtocol::Icmp);
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(17), IpProtocol::Udp);
        assert_eq!(IpProtocol::from(89), IpProtocol::Unknown(89));
    }

    #[test]
    fn errors_display_as_short_lowercase_phrases() {
        let all = [
            WireError::Truncated,
            WireError::BadVersion,
            WireError::BadHeaderLength,
            WireError::BadTotalLength,
            WireError::BadLength,
            WireError::BadChecksum,
            WireError::Unrecognized,
        ];
        for e in all {
            let s = e.to_string();
            assert!(!s.is_empty());
            assert_eq!(s, s.to_lowercase());
        }
        let boxed: Box<dyn std::error::Error> = Box::new(WireError::Truncated);
        assert_eq!(boxed.to_string(), "truncated packet");
    }
}
