//! The Ethernet II header (IEEE 802.3 with an EtherType, RFC 894), with an IEEE 802.1Q VLAN tag
//! read and written.
//!
//! [`EthernetFrame`] is a view over a frame's bytes; [`EthernetRepr`] is what its header means.
//! A frame is destination, source, an optional 802.1Q tag (TPID 0x8100, then the priority, DEI and
//! 12-bit VLAN ID), and the EtherType of the payload. A length field (a value below 0x0600, IEEE
//! 802.3 framing with LLC) is refused: nothing above this layer speaks it. The frame check
//! sequence is the NIC's (a TAP or AF_XDP frame does not carry it), and the 60-byte minimum is the
//! sender's padding, which the payload keeps (the IP layer trims to its own length).

use core::fmt;

use super::{read_u16, write_u16, Result, WireError};

/// The untagged header's length, in bytes.
pub const HEADER_LEN: usize = 14;
/// An 802.1Q tag's length, in bytes.
pub const VLAN_TAG_LEN: usize = 4;

/// The 802.1Q tag protocol identifier.
const TPID_8021Q: u16 = 0x8100;
/// EtherType values below this are IEEE 802.3 lengths, not types.
const MIN_ETHERTYPE: u16 = 0x0600;

/// A MAC address (IEEE 802, 48 bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address, ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Whether this is a group (multicast or broadcast) address: the I/G bit of the first octet.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == MacAddr::BROADCAST
    }

    /// Whether a host may use this as its own (unicast) address: not a group address, not zero.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && self.0 != [0; 6]
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The EtherType of a frame's payload (IEEE's registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// IPv4, 0x0800.
    Ipv4,
    /// ARP, 0x0806 (RFC 826).
    Arp,
    /// IPv6, 0x86dd.
    Ipv6,
    /// Any other type (0x0600 and above).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(other) => other,
        }
    }
}

/// An 802.1Q tag: priority code point (3 bits), drop eligible indicator, VLAN ID (12 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point, 0 to 7 (IEEE 802.1p).
    pub priority: u8,
    /// Drop eligible indicator.
    pub drop_eligible: bool,
    /// VLAN ID, 0 to 4095 (0: priority tag only; 4095 reserved).
    pub id: u16,
}

impl VlanTag {
    fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            priority: (tci >> 13) as u8,
            drop_eligible: tci & 0x1000 != 0,
            id: tci & 0x0fff,
        }
    }

    fn tci(&self) -> u16 {
        u16::from(self.priority & 7) << 13
            | u16::from(self.drop_eligible) << 12
            | (self.id & 0x0fff)
    }
}

/// A typed view of an Ethernet II frame over its bytes.
///
/// Build it with [`EthernetFrame::new_checked`] for bytes from the network: it refuses a frame
/// shorter than its header (with the tag when there is one) and an IEEE 802.3 length in place of
/// an EtherType. The accessors then read in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it (for frames this stack wrote itself).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after checking it: [`WireError::Truncated`] if shorter than the header (14
    /// bytes, 18 with an 802.1Q tag), [`WireError::Unrecognized`] for an IEEE 802.3 length where
    /// the EtherType belongs, or a second (stacked, 802.1ad) tag.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        let data = frame.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let mut ty = read_u16(data, 12);
        if ty == TPID_8021Q {
            if data.len() < HEADER_LEN + VLAN_TAG_LEN {
                return Err(WireError::Truncated);
            }
            ty = read_u16(data, 16);
            if ty == TPID_8021Q || ty == 0x88a8 {
                return Err(WireError::Unrecognized);
            }
        }
        if ty < MIN_ETHERTYPE {
            return Err(WireError::Unrecognized);
        }
        Ok(frame)
    }

    /// The destination address.
    pub fn dst(&self) -> MacAddr {
        let d = self.buffer.as_ref();
        MacAddr([d[0], d[1], d[2], d[3], d[4], d[5]])
    }

    /// The source address.
    pub fn src(&self) -> MacAddr {
        let d = self.buffer.as_ref();
        MacAddr([d[6], d[7], d[8], d[9], d[10], d[11]])
    }

    /// The 802.1Q tag, if the frame has one.
    pub fn vlan(&self) -> Option<VlanTag> {
        let d = self.buffer.as_ref();
        (read_u16(d, 12) == TPID_8021Q).then(|| VlanTag::from_tci(read_u16(d, 14)))
    }

    /// The header's length: 14, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        if read_u16(self.buffer.as_ref(), 12) == TPID_8021Q {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The payload's EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(read_u16(self.buffer.as_ref(), self.header_len() - 2))
    }

    /// The payload (with whatever padding the sender added to reach the minimum frame).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// What an Ethernet II header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The payload's type.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// The meaning of a checked frame's header.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> EthernetRepr {
        EthernetRepr {
            dst: frame.dst(),
            src: frame.src(),
            vlan: frame.vlan(),
            ethertype: frame.ethertype(),
        }
    }

    /// The header's length: 14, or 18 with a tag.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into the first [`header_len`](Self::header_len) bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than the header.
    pub fn emit(&self, out: &mut [u8]) {
        out[0..6].copy_from_slice(&self.dst.0);
        out[6..12].copy_from_slice(&self.src.0);
        let mut at = 12;
        if let Some(tag) = self.vlan {
            write_u16(out, at, TPID_8021Q);
            write_u16(out, at + 2, tag.tci());
            at += VLAN_TAG_LEN;
        }
        write_u16(out, at, u16::from(self.ethertype));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
    const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);

    #[test]
    fn an_untagged_frame_parses_and_emits() {
        let mut bytes = vec![0u8; 14 + 4];
        let repr = EthernetRepr {
            dst: B,
            src: A,
            vlan: None,
            ethertype: EtherType::Ipv4,
        };
        repr.emit(&mut bytes);
        assert_eq!(&bytes[12..14], &[0x08, 0x00]);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame), repr);
        assert_eq!(frame.payload().len(), 4);
    }

    #[test]
    fn a_tagged_frame_keeps_its_tag() {
        let repr = EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: A,
            vlan: Some(VlanTag {
                priority: 5,
                drop_eligible: true,
                id: 42,
            }),
            ethertype: EtherType::Arp,
        };
        let mut bytes = vec![0u8; 18];
        repr.emit(&mut bytes);
        assert_eq!(&bytes[12..18], &[0x81, 0x00, 0xb0, 42, 0x08, 0x06]);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(frame.header_len(), 18);
        assert_eq!(EthernetRepr::parse(&frame), repr);
    }

    #[test]
    fn short_frames_lengths_and_stacked_tags_are_refused() {
        assert_eq!(
            EthernetFrame::new_checked(&[0u8; 13][..]).err(),
            Some(WireError::Truncated)
        );
        let mut bytes = [0u8; 16];
        bytes[12] = 0x81;
        assert_eq!(
            EthernetFrame::new_checked(&bytes[..]).err(),
            Some(WireError::Truncated)
        );
        // An IEEE 802.3 length (LLC framing).
        let mut bytes = [0u8; 60];
        bytes[12..14].copy_from_slice(&46u16.to_be_bytes());
        assert_eq!(
            EthernetFrame::new_checked(&bytes[..]).err(),
            Some(WireError::Unrecognized)
        );
        // Q-in-Q.
        bytes[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        bytes[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(
            EthernetFrame::new_checked(&bytes[..]).err(),
            Some(WireError::Unrecognized)
        );
    }

    #[test]
    fn group_and_unicast_addresses() {
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(A.is_unicast());
        assert!(!MacAddr([0; 6]).is_unicast());
        assert_eq!(A.to_string(), "02:00:00:00:00:01");
    }

    proptest! {
        /// Whatever the bytes, the checked view never panics, and what it accepts etherparse reads
        /// the same way (addresses, tag, type, payload).
        #[test]
        fn any_bytes_parse_as_etherparse_reads_them(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) else {
                return Ok(());
            };
            let repr = EthernetRepr::parse(&frame);
            let theirs = etherparse::Ethernet2Header::from_slice(&bytes).unwrap().0;
            prop_assert_eq!(repr.dst.0, theirs.destination);
            prop_assert_eq!(repr.src.0, theirs.source);
            if let Some(tag) = repr.vlan {
                prop_assert_eq!(theirs.ether_type.0, 0x8100);
                let (vlan, _) = etherparse::SingleVlanHeader::from_slice(&bytes[14..]).unwrap();
                prop_assert_eq!(tag.id, vlan.vlan_id.value());
                prop_assert_eq!(tag.priority, vlan.pcp.value());
                prop_assert_eq!(tag.drop_eligible, vlan.drop_eligible_indicator);
                prop_assert_eq!(u16::from(repr.ethertype), vlan.ether_type.0);
            } else {
                prop_assert_eq!(u16::from(repr.ethertype), theirs.ether_type.0);
            }
            // Emitting the meaning gives the header's bytes back.
            let mut out = vec![0u8; repr.header_len()];
            repr.emit(&mut out);
            prop_assert_eq!(&out[..], &bytes[..repr.header_len()]);
            prop_assert_eq!(frame.payload(), &bytes[repr.header_len()..]);
        }
    }
}
