//! The IPv6 header (RFC 8200 §3).
//!
//! [`Ipv6Packet`] reads and writes the fixed 40-byte header in place; [`Ipv6Repr`] is its meaning. IPv6 has
//! no header checksum (RFC 8200 §3 left it to the link and the transports), so there is nothing for the
//! in-line header sum of Partridge & Pink §6.1 to do here; the transports' checksums become mandatory
//! instead (RFC 8200 §8.1). The extension headers that may follow are in [`super::ipv6ext`].

use std::net::Ipv6Addr;

use super::{read_u16, write_u16, IpProtocol, Result, WireError};

/// Length of the fixed IPv6 header, in bytes.
pub const HEADER_LEN: usize = 40;

/// The smallest MTU every IPv6 link must carry (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

/// The largest payload the 16-bit payload length field describes (no jumbograms, RFC 2675).
pub const MAX_PAYLOAD_LEN: usize = 65535;

/// Where each field of the header lives.
mod field {
    /// Version (4 bits), traffic class (8 bits) and flow label (20 bits).
    pub const VER_TC_FLOW: core::ops::Range<usize> = 0..4;
    /// Payload length: everything after the fixed header, extension headers included, 16 bits.
    pub const PAYLOAD_LEN: usize = 4;
    /// Next header: the type of the header that follows.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: core::ops::Range<usize> = 8..24;
    /// Destination address.
    pub const DST_ADDR: core::ops::Range<usize> = 24..40;
}

/// A typed view of an IPv6 header and its payload over a byte buffer.
///
/// Build it with [`Ipv6Packet::new_checked`] for bytes from the network. The accessors index the buffer
/// directly: on a packet built with [`Ipv6Packet::new_unchecked`] over a buffer that is too short they panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it. For buffers this stack has just written (or checked) itself.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after checking that every accessor stays in bounds and the lengths agree.
    ///
    /// Errors, in order: [`WireError::Truncated`] if shorter than 40 bytes; [`WireError::BadVersion`] unless
    /// the version is 6; [`WireError::BadTotalLength`] if the payload length runs past the buffer. A buffer
    /// longer than the header and payload is fine (link-layer padding); [`Ipv6Packet::payload`] excludes it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_header()?;
        if HEADER_LEN + usize::from(packet.payload_len()) > packet.buffer.as_ref().len() {
            return Err(WireError::BadTotalLength);
        }
        Ok(packet)
    }

    /// Checks the fixed header and the version, not the payload length (an ICMPv6 error quotes only the
    /// start of a packet).
    pub(super) fn check_header(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 6 {
            return Err(WireError::BadVersion);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The version field (6 for IPv6).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label, 20 bits (RFC 6437).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Payload length: the bytes after the fixed header, extension headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// The next header: an extension header or the upper-layer protocol.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let b: [u8; 16] = self.buffer.as_ref()[field::SRC_ADDR].try_into().unwrap();
        Ipv6Addr::from(b)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let b: [u8; 16] = self.buffer.as_ref()[field::DST_ADDR].try_into().unwrap();
        Ipv6Addr::from(b)
    }

    /// The fixed header's bytes.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN]
    }

    /// The payload (extension headers and upper layer) as the payload length gives it.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, the traffic class and the flow label.
    pub fn set_version_class_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = 6 << 28 | u32::from(traffic_class) << 20 | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
}

/// What a fixed IPv6 header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The header after the fixed one: an extension header or the upper-layer protocol.
    pub next_header: IpProtocol,
    /// Payload length in bytes (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads the header fields. The lengths are checked again (as in [`Ipv6Packet::new_checked`]), so this
    /// never panics even on a packet built unchecked.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_header()?;
        if HEADER_LEN + usize::from(packet.payload_len()) > packet.buffer.as_ref().len() {
            return Err(WireError::BadTotalLength);
        }
        Ok(Self::from_checked_header(packet))
    }

    /// Reads the fields of a header that passed the fixed-header check; the payload length need not fit
    /// the buffer (quotes in ICMPv6 errors).
    pub(super) fn from_checked_header<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Ipv6Repr {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        }
    }

    /// The length of the header [`Ipv6Repr::emit`] writes: 40 bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length of the whole packet: header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 40-byte header into `header[..40]`.
    ///
    /// # Panics
    /// If `header` is shorter than 40 bytes or the payload is longer than [`MAX_PAYLOAD_LEN`]: both are bugs
    /// in the caller, not properties of received data.
    pub fn emit(&self, header: &mut [u8]) {
        assert!(
            header.len() >= HEADER_LEN,
            "IPv6 header needs {HEADER_LEN} bytes, got {}",
            header.len()
        );
        assert!(
            self.payload_len <= MAX_PAYLOAD_LEN,
            "IPv6 payload too long: {}",
            self.payload_len
        );
        let mut packet = Ipv6Packet::new_unchecked(&mut header[..HEADER_LEN]);
        packet.set_version_class_flow(self.traffic_class, self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `ping -6 2001:db8::2` from 2001:db8::1 as Linux sends it: hop limit 64, flow label 0x3a4b5, an
    /// echo request of 16 bytes (ICMPv6 checksum not relevant here).
    const ECHO: [u8; 56] = [
        0x60, 0x03, 0xa4, 0xb5, 0x00, 0x10, 0x3a,
        0x40, // version, class, flow; length 16, ICMPv6, 64
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // source
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // destination
        0x80, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x01, 1, 2, 3, 4, 5, 6, 7, 8,
    ];

    #[test]
    fn accessors_read_an_echo_request() {
        let p = Ipv6Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.flow_label(), 0x3a4b5);
        assert_eq!(p.payload_len(), 16);
        assert_eq!(p.next_header(), IpProtocol::Icmpv6);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &ECHO[40..]);
        let repr = Ipv6Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        repr.emit(&mut out);
        assert_eq!(&out[..], &ECHO[..40]);
    }

    #[test]
    fn bad_packets_are_errors() {
        assert_eq!(
            Ipv6Packet::new_checked(&ECHO[..39]).unwrap_err(),
            WireError::Truncated
        );
        let mut v4 = ECHO;
        v4[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            WireError::BadVersion
        );
        assert_eq!(
            Ipv6Packet::new_checked(&ECHO[..55]).unwrap_err(),
            WireError::BadTotalLength
        );
        // Padding past the payload is allowed and left out of it.
        let mut padded = ECHO.to_vec();
        padded.extend_from_slice(&[0; 6]);
        let p = Ipv6Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 16);
    }

    fn arb_repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<u128>(),
            any::<u128>(),
            any::<u8>(),
            0..=MAX_PAYLOAD_LEN,
            any::<u8>(),
            any::<u8>(),
            0..=0x000f_ffffu32,
        )
            .prop_map(|(s, d, nh, len, hop, tc, flow)| Ipv6Repr {
                src_addr: s.into(),
                dst_addr: d.into(),
                next_header: nh.into(),
                payload_len: len,
                hop_limit: hop,
                traffic_class: tc,
                flow_label: flow,
            })
    }

    proptest! {
        /// Emit then parse gives the repr back, and etherparse reads the same fields.
        #[test]
        fn emit_parse_round_trip(repr in arb_repr()) {
            let mut bytes = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut bytes);
            let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr);
            let (theirs, _) = etherparse::Ipv6Header::from_slice(&bytes).unwrap();
            prop_assert_eq!(theirs.source, repr.src_addr.octets());
            prop_assert_eq!(theirs.destination, repr.dst_addr.octets());
            prop_assert_eq!(usize::from(theirs.payload_length), repr.payload_len);
            prop_assert_eq!(theirs.hop_limit, repr.hop_limit);
            prop_assert_eq!(theirs.traffic_class, repr.traffic_class);
            prop_assert_eq!(theirs.flow_label.value(), repr.flow_label);
            prop_assert_eq!(theirs.next_header.0, u8::from(repr.next_header));
        }

        /// Any bytes: a checked view or an error, never a panic, and a view's payload is in bounds.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(p) = Ipv6Packet::new_checked(&bytes[..]) {
                prop_assert!(HEADER_LEN + p.payload().len() <= bytes.len());
                let _ = Ipv6Repr::parse(&p).unwrap();
            }
        }
    }
}
