//! The UDP header (RFC 768).
//!
//! [`UdpPacket`] reads and writes the header in place over an IP payload; [`UdpRepr`] is its meaning. The
//! checksum belongs to the UDP layer, which may verify it late, fuse it with the copy, or skip it (Partridge &
//! Pink §7.1, Kay & Pasquale): `parse` does not verify it and `emit` writes zero.
//! [`UdpPacket::verify_checksum`] and [`UdpPacket::fill_checksum`] are plain reference helpers for tests and slow
//! paths.

use std::net::Ipv4Addr;

use super::{read_u16, write_u16, IpProtocol, Result, WireError};
use crate::checksum;

/// Length of the UDP header in bytes.
pub const HEADER_LEN: usize = 8;

/// The largest UDP length field value (header plus payload), in bytes.
const MAX_LEN: usize = 65535;

/// Where each field of the header lives.
mod field {
    /// Source port, 16 bits.
    pub const SRC_PORT: usize = 0;
    /// Destination port, 16 bits.
    pub const DST_PORT: usize = 2;
    /// Length of header plus payload, 16 bits.
    pub const LENGTH: usize = 4;
    /// Checksum over the pseudo-header, header and payload, 16 bits; zero means "not computed".
    pub const CHECKSUM: usize = 6;
    /// The payload starts here and runs to the length field.
    pub const PAYLOAD: usize = 8;
}

/// A typed view of a UDP header and its payload over a byte buffer (the IP payload).
///
/// Build it with [`UdpPacket::new_checked`] for bytes from the network. The accessors index the buffer directly:
/// on a packet built with [`UdpPacket::new_unchecked`] over a buffer that is too short they panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it. For buffers this stack has just written (or checked) itself.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after checking it: [`WireError::Truncated`] if shorter than 8 bytes, [`WireError::BadLength`]
    /// if the length field is below 8 or longer than the buffer. The buffer may be longer than the length field
    /// says; [`UdpPacket::payload`] stops at the length field. The checksum is not verified here.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Everything [`UdpPacket::new_checked`] checks.
    fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN || len > data.len() {
            return Err(WireError::BadLength);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// The destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field: header plus payload, in bytes.
    #[allow(clippy::len_without_is_empty)] // a header field, not the length of a container
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// The checksum field as it is on the wire (zero: the sender did not compute one).
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload: from the end of the header to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..usize::from(self.len())]
    }

    /// Whether the checksum verifies for a datagram from `src` to `dst`, computed with the reference
    /// [`checksum::fast`]. A zero checksum field means the sender did not compute one and counts as valid
    /// (RFC 768). The UDP layer uses its configured algorithm instead; this is for tests and slow paths.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || self.sum(src, dst) == 0xffff
    }

    /// The folded ones'-complement sum of the pseudo-header and the datagram up to the length field.
    fn sum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let len = self.len();
        let mut sum = checksum::Checksum::new();
        sum.add_sum(checksum::pseudo_header_sum(
            src,
            dst,
            u8::from(IpProtocol::Udp),
            len,
        ));
        sum.add_sum(checksum::fast(&self.buffer.as_ref()[..usize::from(len)]));
        sum.sum()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field (header plus payload).
    pub fn set_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// The payload (end of header to the length field), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[field::PAYLOAD..len]
    }

    /// Computes the checksum for a datagram from `src` to `dst` with the reference [`checksum::fast`] and writes
    /// it; a computed zero goes on the wire as 0xffff (RFC 768). The length field must already be set.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let value = !self.sum(src, dst);
        self.set_checksum(if value == 0 { 0xffff } else { value });
    }
}

/// What a UDP header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes: the length field minus 8.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads the header fields. The lengths are checked again (as in [`UdpPacket::new_checked`]), so this never
    /// panics even on a packet built unchecked; the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// The length of the header [`UdpRepr::emit`] writes: 8 bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length of the whole datagram: header plus payload (the length field).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 8-byte header into `header[..8]`, with length `8 + payload_len` and a zero checksum field: the
    /// caller computes the checksum with its configured algorithm (or leaves it zero) and sets it.
    ///
    /// # Panics
    /// If `header` is shorter than 8 bytes or the datagram would exceed 65535 bytes: both are bugs in the caller.
    pub fn emit(&self, header: &mut [u8]) {
        assert!(
            header.len() >= HEADER_LEN,
            "UDP header needs {HEADER_LEN} bytes, got {}",
            header.len()
        );
        assert!(
            self.payload_len <= MAX_LEN - HEADER_LEN,
            "UDP payload too long: {}",
            self.payload_len
        );
        let mut packet = UdpPacket::new_unchecked(&mut header[..HEADER_LEN]);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
    use crate::wire::testdata::{PORT_UNREACHABLE, UDP_DNS_QUERY};
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 100);
    const DST: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);

    /// The UDP datagram inside [`UDP_DNS_QUERY`].
    fn datagram() -> &'static [u8] {
        &UDP_DNS_QUERY[20..]
    }

    fn dns_query_repr() -> UdpRepr {
        UdpRepr {
            src_port: 54321,
            dst_port: 53,
            payload_len: 29,
        }
    }

    #[test]
    fn accessors_read_a_real_datagram() {
        let packet = UdpPacket::new_checked(datagram()).unwrap();
        assert_eq!(packet.src_port(), 54321);
        assert_eq!(packet.dst_port(), 53);
        assert_eq!(packet.len(), 37);
        assert_eq!(packet.checksum(), 0xdde5);
        assert_eq!(packet.payload(), &UDP_DNS_QUERY[28..]);
        assert!(packet.verify_checksum(SRC, DST));
        assert!(!packet.verify_checksum(SRC, Ipv4Addr::new(8, 8, 4, 4)));
        assert_eq!(packet.into_inner(), datagram());
    }

    #[test]
    fn bytes_to_repr() {
        let packet = UdpPacket::new_checked(datagram()).unwrap();
        assert_eq!(UdpRepr::parse(&packet).unwrap(), dns_query_repr());
    }

    #[test]
    fn repr_to_bytes() {
        let repr = dns_query_repr();
        assert_eq!(repr.header_len(), 8);
        assert_eq!(repr.buffer_len(), 37);
        let mut bytes = [0xffu8; 37];
        repr.emit(&mut bytes);
        assert_eq!(
            bytes[6..8],
            [0, 0],
            "emit leaves the checksum to the caller"
        );
        assert_eq!(bytes[..6], datagram()[..6]);
        bytes[8..].copy_from_slice(&datagram()[8..]);
        let mut packet = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        packet.fill_checksum(SRC, DST);
        assert_eq!(&bytes[..], datagram());
    }

    #[test]
    fn whole_datagram_from_reprs_matches_the_wire() {
        let ip = Ipv4Repr::parse(&Ipv4Packet::new_checked(&UDP_DNS_QUERY[..]).unwrap()).unwrap();
        let udp = dns_query_repr();
        let mut bytes = [0u8; 57];
        ip.emit(&mut bytes);
        udp.emit(&mut bytes[ipv4::HEADER_LEN..]);
        bytes[28..].copy_from_slice(&UDP_DNS_QUERY[28..]);
        let sum = checksum::rfc1071(&bytes[..20]);
        bytes[10..12].copy_from_slice(&(!sum).to_be_bytes());
        UdpPacket::new_unchecked(&mut bytes[20..]).fill_checksum(ip.src_addr, ip.dst_addr);
        assert_eq!(bytes, UDP_DNS_QUERY);
    }

    #[test]
    fn setters_write_where_accessors_read() {
        let mut bytes = [0u8; 16];
        let mut packet = UdpPacket::new_unchecked(&mut bytes[..]);
        packet.set_src_port(1);
        packet.set_dst_port(0xfffe);
        packet.set_len(12);
        packet.set_checksum(0xabcd);
        packet.payload_mut().copy_from_slice(b"ping");
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (
                packet.src_port(),
                packet.dst_port(),
                packet.len(),
                packet.checksum()
            ),
            (1, 0xfffe, 12, 0xabcd)
        );
        assert_eq!(packet.payload(), b"ping");
        assert_eq!(
            bytes[12..],
            [0, 0, 0, 0],
            "payload_mut stops at the length field"
        );
    }

    #[test]
    fn zero_checksum_means_not_computed() {
        let mut bytes = [0u8; 37];
        bytes.copy_from_slice(datagram());
        let mut packet = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        packet.set_checksum(0);
        assert!(packet.verify_checksum(SRC, DST));
        packet.set_checksum(0x1234);
        assert!(!packet.verify_checksum(SRC, DST));
    }

    #[test]
    fn computed_zero_is_sent_as_all_ones() {
        // Choose the source port so the datagram sums to 0xffff with a zero checksum field: the computed checksum
        // is then 0, which must go on the wire as 0xffff.
        let mut bytes = [0u8; 8];
        UdpRepr {
            src_port: 0,
            dst_port: 7,
            payload_len: 0,
        }
        .emit(&mut bytes);
        let partial = UdpPacket::new_unchecked(&bytes[..]).sum(SRC, DST);
        let src_port = !partial; // partial + src_port = 0xffff in ones'-complement arithmetic
        UdpRepr {
            src_port,
            dst_port: 7,
            payload_len: 0,
        }
        .emit(&mut bytes);
        let mut packet = UdpPacket::new_unchecked(&mut bytes[..]);
        packet.fill_checksum(SRC, DST);
        assert_eq!(packet.checksum(), 0xffff);
        assert!(packet.verify_checksum(SRC, DST));
        let (header, _) = etherparse::UdpHeader::from_slice(&bytes).unwrap();
        assert_eq!(
            header
                .calc_checksum_ipv4_raw(SRC.octets(), DST.octets(), &[])
                .unwrap(),
            0xffff
        );
    }

    #[test]
    fn longer_buffer_than_length_field_is_fine() {
        let mut bytes = [0u8; 64];
        bytes[..37].copy_from_slice(datagram());
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload(), &datagram()[8..]);
        assert_eq!(UdpRepr::parse(&packet).unwrap(), dns_query_repr());
    }

    #[test]
    fn every_truncation_is_rejected() {
        for len in 0..datagram().len() {
            let expected = if len < HEADER_LEN {
                WireError::Truncated
            } else {
                WireError::BadLength
            };
            assert_eq!(
                UdpPacket::new_checked(&datagram()[..len]).unwrap_err(),
                expected,
                "prefix of {len}"
            );
            assert_eq!(
                UdpRepr::parse(&UdpPacket::new_unchecked(&datagram()[..len])),
                Err(expected)
            );
        }
        assert_eq!(
            UdpPacket::new_checked(&[][..]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn bad_length_fields_are_rejected() {
        for len in [0u16, 1, 7, 38, 0xffff] {
            let mut bytes = [0u8; 37];
            bytes.copy_from_slice(datagram());
            bytes[4..6].copy_from_slice(&len.to_be_bytes());
            assert_eq!(
                UdpPacket::new_checked(&bytes[..]).unwrap_err(),
                WireError::BadLength,
                "length {len}"
            );
        }
        // Exactly a header: an empty payload is a valid datagram.
        let packet = UdpPacket::new_checked(&[0, 1, 0, 2, 0, 8, 0, 0][..]).unwrap();
        assert!(packet.payload().is_empty());
        assert_eq!(UdpRepr::parse(&packet).unwrap().payload_len, 0);
    }

    #[test]
    fn the_datagram_quoted_in_an_icmp_error_reads_too() {
        let packet = UdpPacket::new_checked(&PORT_UNREACHABLE[48..]).unwrap();
        assert_eq!((packet.src_port(), packet.dst_port()), (51000, 9999));
        assert_eq!(packet.payload(), b"hello");
        assert!(packet.verify_checksum(
            Ipv4Addr::new(192, 168, 1, 100),
            Ipv4Addr::new(192, 168, 1, 1)
        ));
    }

    #[test]
    #[should_panic(expected = "UDP header needs 8 bytes")]
    fn emit_into_a_short_buffer_is_a_caller_bug() {
        dns_query_repr().emit(&mut [0u8; 7]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(packet) = UdpPacket::new_checked(&bytes[..]) {
                let _ = (packet.src_port(), packet.dst_port(), packet.len(), packet.checksum(), packet.payload());
                let _ = packet.verify_checksum(SRC, DST);
                let repr = UdpRepr::parse(&packet).unwrap();
                prop_assert_eq!(repr.buffer_len(), usize::from(packet.len()));
            }
            let _ = UdpRepr::parse(&UdpPacket::new_unchecked(&bytes[..]));
        }

        #[test]
        fn plausible_lengths_never_panic(len in 0u16..80, rest in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut bytes = rest;
            if bytes.len() >= 6 {
                bytes[4..6].copy_from_slice(&len.to_be_bytes());
            }
            let checked = UdpPacket::new_checked(&bytes[..]).map(|p| UdpRepr::parse(&p).unwrap());
            prop_assert_eq!(checked, UdpRepr::parse(&UdpPacket::new_unchecked(&bytes[..])));
        }

        #[test]
        fn repr_emit_parse_round_trips(
            src_port in any::<u16>(),
            dst_port in any::<u16>(),
            payload_len in 0..=MAX_LEN - HEADER_LEN,
            junk in any::<u8>(),
        ) {
            let repr = UdpRepr { src_port, dst_port, payload_len };
            let mut bytes = vec![junk; repr.buffer_len()];
            repr.emit(&mut bytes);
            let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&packet).unwrap(), repr);
            prop_assert_eq!(packet.checksum(), 0);
        }

        #[test]
        fn etherparse_agrees_with_emitted_datagrams(
            src in any::<u32>(),
            dst in any::<u32>(),
            src_port in any::<u16>(),
            dst_port in any::<u16>(),
            ttl in 1u8..,
            ident in any::<u16>(),
            payload in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let udp = UdpRepr { src_port, dst_port, payload_len: payload.len() };
            let ip = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                protocol: IpProtocol::Udp,
                payload_len: udp.buffer_len(),
                ttl,
                tos: 0,
                ident,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
            };
            let mut bytes = vec![0u8; ip.buffer_len()];
            ip.emit(&mut bytes);
            let sum = checksum::rfc1071(&bytes[..ipv4::HEADER_LEN]);
            bytes[10..12].copy_from_slice(&(!sum).to_be_bytes());
            udp.emit(&mut bytes[ipv4::HEADER_LEN..]);
            bytes[ipv4::HEADER_LEN + HEADER_LEN..].copy_from_slice(&payload);
            UdpPacket::new_unchecked(&mut bytes[ipv4::HEADER_LEN..]).fill_checksum(src, dst);

            let headers = etherparse::PacketHeaders::from_ip_slice(&bytes).unwrap();
            let Some(etherparse::NetHeaders::Ipv4(ip_header, _)) = headers.net else {
                panic!("etherparse found no IPv4 header");
            };
            let Some(etherparse::TransportHeader::Udp(udp_header)) = headers.transport else {
                panic!("etherparse found no UDP header");
            };
            prop_assert_eq!(ip_header.calc_header_checksum(), ip_header.header_checksum);
            prop_assert_eq!(udp_header.source_port, src_port);
            prop_assert_eq!(udp_header.destination_port, dst_port);
            prop_assert_eq!(usize::from(udp_header.length), udp.buffer_len());
            prop_assert_eq!(headers.payload.slice(), &payload[..]);
            prop_assert_eq!(udp_header.calc_checksum_ipv4(&ip_header, &payload).unwrap(), udp_header.checksum);

            let packet = UdpPacket::new_checked(&bytes[ipv4::HEADER_LEN..]).unwrap();
            prop_assert!(packet.verify_checksum(src, dst));
            prop_assert_eq!(packet.payload(), &payload[..]);
        }
    }

    #[test]
    fn etherparse_agrees_with_the_literal() {
        let headers = etherparse::PacketHeaders::from_ip_slice(&UDP_DNS_QUERY).unwrap();
        let Some(etherparse::NetHeaders::Ipv4(ip_header, _)) = headers.net else {
            panic!("no IPv4 header")
        };
        let Some(etherparse::TransportHeader::Udp(udp_header)) = headers.transport else {
            panic!("no UDP header")
        };
        let payload = headers.payload.slice();
        assert_eq!(
            udp_header.calc_checksum_ipv4(&ip_header, payload).unwrap(),
            udp_header.checksum
        );
        assert_eq!(
            (udp_header.source_port, udp_header.destination_port),
            (54321, 53)
        );
        assert_eq!(payload, &UDP_DNS_QUERY[28..]);
    }
}
