//! ARP (RFC 826) for IPv4 over Ethernet: the only pairing this stack resolves.
//!
//! [`ArpPacket`] is a view over an ARP message; [`ArpRepr`] is its meaning. A message of another
//! hardware or protocol type, or with other address lengths, is refused
//! ([`WireError::Unrecognized`]): RFC 826 has a receiver drop what it does not speak. Bytes past
//! the 28 of the message (an Ethernet frame's padding) are ignored.

use std::net::Ipv4Addr;

use super::ethernet::MacAddr;
use super::{read_u16, write_u16, Result, WireError};

/// An Ethernet/IPv4 ARP message's length, in bytes.
pub const PACKET_LEN: usize = 28;

/// Hardware type Ethernet, protocol type IPv4, and their address lengths.
const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

/// The ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    /// 1: who has the target protocol address?
    Request,
    /// 2: the sender has it.
    Reply,
}

/// A typed view of an Ethernet/IPv4 ARP message over its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer after checking it: [`WireError::Truncated`] below 28 bytes,
    /// [`WireError::Unrecognized`] for another hardware or protocol type, other address lengths,
    /// or an operation other than request and reply.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        let d = packet.buffer.as_ref();
        if d.len() < PACKET_LEN {
            return Err(WireError::Truncated);
        }
        if read_u16(d, 0) != HTYPE_ETHERNET
            || read_u16(d, 2) != PTYPE_IPV4
            || d[4] != 6
            || d[5] != 4
        {
            return Err(WireError::Unrecognized);
        }
        if !matches!(read_u16(d, 6), 1 | 2) {
            return Err(WireError::Unrecognized);
        }
        Ok(packet)
    }

    /// The operation.
    pub fn op(&self) -> ArpOp {
        if read_u16(self.buffer.as_ref(), 6) == 1 {
            ArpOp::Request
        } else {
            ArpOp::Reply
        }
    }

    fn mac(&self, at: usize) -> MacAddr {
        let d = &self.buffer.as_ref()[at..at + 6];
        MacAddr([d[0], d[1], d[2], d[3], d[4], d[5]])
    }

    fn ip(&self, at: usize) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[at..at + 4];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// The sender's hardware address.
    pub fn sender_mac(&self) -> MacAddr {
        self.mac(8)
    }

    /// The sender's protocol address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        self.ip(14)
    }

    /// The target's hardware address (zero in a request).
    pub fn target_mac(&self) -> MacAddr {
        self.mac(18)
    }

    /// The target's protocol address.
    pub fn target_ip(&self) -> Ipv4Addr {
        self.ip(24)
    }
}

/// What an Ethernet/IPv4 ARP message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request or reply.
    pub op: ArpOp,
    /// The sender's hardware address.
    pub sender_mac: MacAddr,
    /// The sender's protocol address.
    pub sender_ip: Ipv4Addr,
    /// The target's hardware address (zero in a request).
    pub target_mac: MacAddr,
    /// The target's protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// The meaning of a checked message.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> ArpRepr {
        ArpRepr {
            op: packet.op(),
            sender_mac: packet.sender_mac(),
            sender_ip: packet.sender_ip(),
            target_mac: packet.target_mac(),
            target_ip: packet.target_ip(),
        }
    }

    /// Writes the 28-byte message into the start of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than 28 bytes.
    pub fn emit(&self, out: &mut [u8]) {
        write_u16(out, 0, HTYPE_ETHERNET);
        write_u16(out, 2, PTYPE_IPV4);
        out[4] = 6;
        out[5] = 4;
        write_u16(
            out,
            6,
            match self.op {
                ArpOp::Request => 1,
                ArpOp::Reply => 2,
            },
        );
        out[8..14].copy_from_slice(&self.sender_mac.0);
        out[14..18].copy_from_slice(&self.sender_ip.octets());
        out[18..24].copy_from_slice(&self.target_mac.0);
        out[24..28].copy_from_slice(&self.target_ip.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_request_round_trips_with_linuxs_bytes() {
        // A request as Linux sends it: who has 10.0.0.2, tell 10.0.0.1.
        let bytes: [u8; 28] = [
            0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
        ];
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        let repr = ArpRepr::parse(&packet);
        assert_eq!(
            repr,
            ArpRepr {
                op: ArpOp::Request,
                sender_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                sender_ip: Ipv4Addr::new(10, 0, 0, 1),
                target_mac: MacAddr::default(),
                target_ip: Ipv4Addr::new(10, 0, 0, 2),
            }
        );
        let mut out = [0u8; 28];
        repr.emit(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn other_types_lengths_and_operations_are_refused() {
        let mut bytes = [0u8; 28];
        ArpRepr {
            op: ArpOp::Reply,
            sender_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            sender_ip: Ipv4Addr::new(10, 0, 0, 1),
            target_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            target_ip: Ipv4Addr::new(10, 0, 0, 2),
        }
        .emit(&mut bytes);
        assert!(ArpPacket::new_checked(&bytes[..]).is_ok());
        assert_eq!(
            ArpPacket::new_checked(&bytes[..27]).err(),
            Some(WireError::Truncated)
        );
        for (at, value) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16), (7, 3)] {
            let mut bad = bytes;
            bad[at] = value;
            assert_eq!(
                ArpPacket::new_checked(&bad[..]).err(),
                Some(WireError::Unrecognized),
                "byte {at}"
            );
        }
    }

    proptest! {
        /// Whatever the bytes, the checked view never panics, and what it accepts round-trips.
        #[test]
        fn any_bytes_are_refused_or_round_trip(mut bytes in proptest::collection::vec(any::<u8>(), 0..40), valid in any::<bool>()) {
            if valid && bytes.len() >= 8 {
                bytes[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
                bytes[6] = 0;
                bytes[7] = 1 + (bytes[7] & 1);
            }
            let Ok(packet) = ArpPacket::new_checked(&bytes[..]) else {
                return Ok(());
            };
            let repr = ArpRepr::parse(&packet);
            let mut out = [0u8; PACKET_LEN];
            repr.emit(&mut out);
            prop_assert_eq!(&out[..], &bytes[..PACKET_LEN]);
        }
    }
}
