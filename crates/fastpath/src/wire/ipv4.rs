//! The IPv4 header (RFC 791).
//!
//! [`Ipv4Packet`] reads and writes the header in place; [`Ipv4Repr`] is its meaning without options. Neither
//! verifies nor computes the header checksum on the fast path: the IP layer does that with the checksum algorithm
//! it is configured with (Partridge & Pink §6.1 compute it in line). [`Ipv4Packet::verify_checksum`] and
//! [`Ipv4Packet::fill_checksum`] are plain reference helpers for tests and slow paths.

use std::net::Ipv4Addr;

use super::{read_u16, write_u16, IpProtocol, Result, WireError};
use crate::checksum;

/// Length of an IPv4 header without options, in bytes.
pub const HEADER_LEN: usize = 20;

/// The largest IPv4 datagram, header included, in bytes (the total length field is 16 bits).
pub const MAX_PACKET_LEN: usize = 65535;

/// Where each field of the header lives.
mod field {
    /// Version (high nibble) and IHL, the header length in 32-bit words (low nibble).
    pub const VER_IHL: usize = 0;
    /// Type of service (DSCP and ECN).
    pub const TOS: usize = 1;
    /// Total length of the datagram, 16 bits.
    pub const TOTAL_LEN: usize = 2;
    /// Identification, 16 bits.
    pub const IDENT: usize = 4;
    /// Flags (3 bits) and fragment offset in 8-byte units (13 bits), 16 bits.
    pub const FLAGS_FRAG: usize = 6;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum, 16 bits.
    pub const CHECKSUM: usize = 10;
    /// Source address.
    pub const SRC_ADDR: core::ops::Range<usize> = 12..16;
    /// Destination address.
    pub const DST_ADDR: core::ops::Range<usize> = 16..20;
    /// Options start here and run to the header length.
    pub const OPTIONS: usize = 20;

    /// Don't fragment, in the flags/offset word.
    pub const DONT_FRAG: u16 = 0x4000;
    /// More fragments, in the flags/offset word.
    pub const MORE_FRAGS: u16 = 0x2000;
    /// Fragment offset, in the flags/offset word.
    pub const FRAG_OFFSET: u16 = 0x1fff;
}

/// A typed view of an IPv4 header and its payload over a byte buffer.
///
/// Build it with [`Ipv4Packet::new_checked`] for bytes from the network. The accessors index the buffer directly:
/// on a packet built with [`Ipv4Packet::new_unchecked`] over a buffer that is too short they panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it. For buffers this stack has just written (or checked) itself.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after checking that every accessor stays in bounds and the lengths agree.
    ///
    /// Errors, in order: [`WireError::Truncated`] if shorter than 20 bytes; [`WireError::BadVersion`] unless the
    /// version is 4; [`WireError::BadHeaderLength`] if the IHL is below 5 or the header runs past the buffer;
    /// [`WireError::BadTotalLength`] if the total length is shorter than the header or longer than the buffer. A
    /// buffer longer than the total length is fine (link-layer padding); [`Ipv4Packet::payload`] excludes it.
    /// The header checksum is not verified here.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the fixed header, the version and the header length, but not the total length.
    pub(super) fn check_header(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if self.version() != 4 {
            return Err(WireError::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN || header_len > data.len() {
            return Err(WireError::BadHeaderLength);
        }
        Ok(())
    }

    /// Everything [`Ipv4Packet::new_checked`] checks.
    fn check_len(&self) -> Result<()> {
        self.check_header()?;
        let total_len = usize::from(self.total_len());
        if total_len < self.header_len() || total_len > self.buffer.as_ref().len() {
            return Err(WireError::BadTotalLength);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in bytes, options included (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The type of service byte (DSCP and ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// The total length of the datagram in bytes, header included.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// The identification field.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// The don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & field::DONT_FRAG != 0
    }

    /// The more-fragments flag.
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & field::MORE_FRAGS != 0
    }

    /// The fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & field::FRAG_OFFSET) << 3
    }

    /// Whether this datagram is a fragment: more-fragments set or a nonzero offset.
    ///
    /// Kay & Pasquale (paper 004): most of the defragmentation cost they measured was checking the queue for
    /// datagrams that were never fragmented, so the check must cost nothing for those. It is one 16-bit load and
    /// one mask; only a datagram that passes it goes near the reassembly table.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & (field::MORE_FRAGS | field::FRAG_OFFSET)
            != 0
    }

    /// The time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field as it is on the wire.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let a = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(a[0], a[1], a[2], a[3])
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let a = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(a[0], a[1], a[2], a[3])
    }

    /// The whole header, options included: the bytes the header checksum covers.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The options, empty for a 20-byte header.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// The payload: from the end of the header to the total length (link padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// Whether the header checksum verifies, computed with the reference [`checksum::fast`]. The IP layer uses
    /// its configured algorithm instead; this is for tests and slow paths.
    pub fn verify_checksum(&self) -> bool {
        checksum::fast(self.header()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version to 4 and the IHL from a header length in bytes (a multiple of 4, 20 to 60).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        debug_assert!(header_len & 3 == 0 && (HEADER_LEN..=60).contains(&header_len));
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    /// Sets the type of service byte.
    pub fn set_tos(&mut self, v: u8) {
        self.buffer.as_mut()[field::TOS] = v;
    }

    /// Sets the total length in bytes, header included.
    pub fn set_total_len(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }

    /// Sets the identification field.
    pub fn set_ident(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Sets the flags and the fragment offset, given in bytes (a multiple of 8; the low 3 bits are dropped).
    pub fn set_flags_and_offset(&mut self, dont_frag: bool, more_frags: bool, offset_bytes: u16) {
        debug_assert!(
            offset_bytes & 7 == 0,
            "fragment offsets are multiples of 8 bytes"
        );
        let mut word = offset_bytes >> 3;
        if dont_frag {
            word |= field::DONT_FRAG;
        }
        if more_frags {
            word |= field::MORE_FRAGS;
        }
        write_u16(self.buffer.as_mut(), field::FLAGS_FRAG, word);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol of the payload.
    pub fn set_protocol(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = u8::from(v);
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// The whole header, options included, mutably.
    pub fn header_mut(&mut self) -> &mut [u8] {
        let header_len = self.header_len();
        &mut self.buffer.as_mut()[..header_len]
    }

    /// The payload (header length to total length), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (header_len, total_len) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[header_len..total_len]
    }

    /// Computes the header checksum with the reference [`checksum::fast`] and writes it. The IP layer uses its
    /// configured algorithm instead; this is for tests and slow paths.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::fast(self.header());
        self.set_checksum(!sum);
    }
}

/// What an IPv4 header says, options left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length in bytes: total length minus header length.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Type of service byte.
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Reads the header fields. The lengths are checked again (as in [`Ipv4Packet::new_checked`]), so this never
    /// panics even on a packet built unchecked; the checksum is not verified and options are skipped.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        Ok(Self::from_checked_header(packet))
    }

    /// Reads the fields of a header that passed [`Ipv4Packet::check_header`]. The total length need not fit the
    /// buffer (ICMP errors quote only the start of a datagram); a total length shorter than the header gives 0.
    pub(super) fn from_checked_header<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()).saturating_sub(packet.header_len()),
            ttl: packet.ttl(),
            tos: packet.tos(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        }
    }

    /// The length of the header [`Ipv4Repr::emit`] writes: 20 bytes, no options.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length of the whole datagram: header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header without options into `header[..20]`, with total length `20 + payload_len` and a
    /// zero checksum field: the caller computes the checksum with its configured algorithm and sets it.
    ///
    /// # Panics
    /// If `header` is shorter than 20 bytes or the datagram would exceed [`MAX_PACKET_LEN`]: both are bugs in
    /// the caller, not properties of received data.
    pub fn emit(&self, header: &mut [u8]) {
        assert!(
            header.len() >= HEADER_LEN,
            "IPv4 header needs {HEADER_LEN} bytes, got {}",
            header.len()
        );
        assert!(
            self.payload_len <= MAX_PACKET_LEN - HEADER_LEN,
            "IPv4 payload too long: {}",
            self.payload_len
        );
        let mut packet = Ipv4Packet::new_unchecked(&mut header[..HEADER_LEN]);
        packet.set_version_and_header_len(HEADER_LEN);
        packet.set_tos(self.tos);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(self.ident);
        packet.set_flags_and_offset(self.dont_frag, self.more_frags, self.frag_offset);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_checksum(0);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testdata::{ECHO_REPLY, ECHO_REQUEST, UDP_DNS_QUERY};
    use proptest::prelude::*;

    fn dns_query_repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(192, 168, 1, 100),
            dst_addr: Ipv4Addr::new(8, 8, 8, 8),
            protocol: IpProtocol::Udp,
            payload_len: 37,
            ttl: 64,
            tos: 0,
            ident: 0x1c46,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    /// Emits `repr` and fills the checksum with the RFC 1071 reference over the header.
    fn emit_with_checksum(repr: &Ipv4Repr) -> [u8; HEADER_LEN] {
        let mut bytes = [0xa5u8; HEADER_LEN];
        repr.emit(&mut bytes);
        let sum = checksum::rfc1071(&bytes);
        bytes[10..12].copy_from_slice(&(!sum).to_be_bytes());
        bytes
    }

    #[test]
    fn accessors_read_a_real_udp_datagram() {
        let packet = Ipv4Packet::new_checked(&UDP_DNS_QUERY[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.tos(), 0);
        assert_eq!(packet.total_len(), 57);
        assert_eq!(packet.ident(), 0x1c46);
        assert!(packet.dont_frag());
        assert!(!packet.more_frags());
        assert_eq!(packet.frag_offset(), 0);
        assert!(!packet.is_fragment());
        assert_eq!(packet.ttl(), 64);
        assert_eq!(packet.protocol(), IpProtocol::Udp);
        assert_eq!(packet.checksum(), 0x4c52);
        assert_eq!(packet.src_addr(), Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(packet.dst_addr(), Ipv4Addr::new(8, 8, 8, 8));
        assert_eq!(packet.header(), &UDP_DNS_QUERY[..20]);
        assert!(packet.options().is_empty());
        assert_eq!(packet.payload(), &UDP_DNS_QUERY[20..]);
        assert!(packet.verify_checksum());
        assert_eq!(packet.into_inner(), &UDP_DNS_QUERY[..]);
    }

    #[test]
    fn bytes_to_repr() {
        let packet = Ipv4Packet::new_checked(&UDP_DNS_QUERY[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet).unwrap(), dns_query_repr());

        let packet = Ipv4Packet::new_checked(&ECHO_REPLY[..]).unwrap();
        let repr = Ipv4Repr::parse(&packet).unwrap();
        assert_eq!(repr.src_addr, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(repr.protocol, IpProtocol::Icmp);
        assert_eq!(repr.payload_len, 64);
        assert!(!repr.dont_frag);
    }

    #[test]
    fn repr_to_bytes() {
        let repr = dns_query_repr();
        assert_eq!(repr.header_len(), 20);
        assert_eq!(repr.buffer_len(), 57);

        let mut header = [0xffu8; 20];
        repr.emit(&mut header);
        assert_eq!(
            header[10..12],
            [0, 0],
            "emit leaves the checksum to the caller"
        );
        assert_eq!(header[..10], UDP_DNS_QUERY[..10]);
        assert_eq!(header[12..], UDP_DNS_QUERY[12..20]);
        assert_eq!(emit_with_checksum(&repr), UDP_DNS_QUERY[..20]);

        for literal in [&ECHO_REQUEST, &ECHO_REPLY] {
            let repr = Ipv4Repr::parse(&Ipv4Packet::new_checked(&literal[..]).unwrap()).unwrap();
            assert_eq!(emit_with_checksum(&repr), literal[..20]);
        }
    }

    #[test]
    fn fill_checksum_matches_the_wire() {
        let mut bytes = UDP_DNS_QUERY;
        let mut packet = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        packet.set_checksum(0);
        assert!(!packet.verify_checksum());
        packet.fill_checksum();
        assert!(packet.verify_checksum());
        assert_eq!(bytes, UDP_DNS_QUERY);
    }

    #[test]
    fn setters_write_where_accessors_read() {
        let mut bytes = [0u8; 48];
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_version_and_header_len(24);
        packet.set_tos(0xb8);
        packet.set_total_len(40);
        packet.set_ident(0xbeef);
        packet.set_flags_and_offset(false, true, 1480);
        packet.set_ttl(3);
        packet.set_protocol(IpProtocol::Unknown(200));
        packet.set_checksum(0x1234);
        packet.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        packet.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        packet.header_mut()[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // router alert
        packet.payload_mut().fill(0x77);

        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 24);
        assert_eq!(packet.tos(), 0xb8);
        assert_eq!(packet.total_len(), 40);
        assert_eq!(packet.ident(), 0xbeef);
        assert!(!packet.dont_frag());
        assert!(packet.more_frags());
        assert_eq!(packet.frag_offset(), 1480);
        assert!(packet.is_fragment());
        assert_eq!(packet.ttl(), 3);
        assert_eq!(packet.protocol(), IpProtocol::Unknown(200));
        assert_eq!(packet.checksum(), 0x1234);
        assert_eq!(packet.src_addr(), Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(packet.dst_addr(), Ipv4Addr::new(5, 6, 7, 8));
        assert_eq!(packet.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(packet.payload(), &[0x77; 16]);
        assert!(
            bytes[40..].iter().all(|&b| b == 0),
            "payload_mut stops at the total length"
        );

        let repr = Ipv4Repr::parse(&packet).unwrap();
        assert_eq!(repr.payload_len, 16, "options are not payload");
    }

    #[test]
    fn is_fragment_covers_first_middle_and_last() {
        let mut bytes = UDP_DNS_QUERY;
        let cases = [
            (false, false, 0, false), // whole datagram
            (true, false, 0, false),  // whole datagram, DF
            (false, true, 0, true),   // first fragment
            (false, true, 1480, true),
            (false, false, 2960, true), // last fragment
            (false, false, 65528, true),
        ];
        for (df, mf, offset, fragment) in cases {
            let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
            packet.set_flags_and_offset(df, mf, offset);
            assert_eq!(
                packet.is_fragment(),
                fragment,
                "df {df} mf {mf} offset {offset}"
            );
            assert_eq!(packet.frag_offset(), offset);
            assert_eq!(packet.dont_frag(), df);
            assert_eq!(packet.more_frags(), mf);
        }
    }

    #[test]
    fn link_padding_after_total_len_is_accepted_and_excluded() {
        let mut padded = [0u8; 64];
        padded[..57].copy_from_slice(&UDP_DNS_QUERY);
        let packet = Ipv4Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(packet.payload(), &UDP_DNS_QUERY[20..]);
        assert_eq!(Ipv4Repr::parse(&packet).unwrap(), dns_query_repr());
    }

    #[test]
    fn every_truncation_is_rejected() {
        for len in 0..UDP_DNS_QUERY.len() {
            let err = Ipv4Packet::new_checked(&UDP_DNS_QUERY[..len]).unwrap_err();
            let expected = if len < HEADER_LEN {
                WireError::Truncated
            } else {
                WireError::BadTotalLength
            };
            assert_eq!(err, expected, "prefix of {len} bytes");
            let unchecked = Ipv4Packet::new_unchecked(&UDP_DNS_QUERY[..len]);
            assert_eq!(Ipv4Repr::parse(&unchecked), Err(expected));
        }
        assert_eq!(
            Ipv4Packet::new_checked(&[][..]).unwrap_err(),
            WireError::Truncated
        );
    }

    fn with(edit: impl FnOnce(&mut [u8])) -> [u8; 57] {
        let mut bytes = UDP_DNS_QUERY;
        edit(&mut bytes);
        bytes
    }

    #[test]
    fn malformed_headers_are_rejected() {
        for version in [0u8, 5, 6, 15] {
            let bytes = with(|b| b[0] = (version << 4) | 5);
            assert_eq!(
                Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
                WireError::BadVersion
            );
        }
        for ihl in 0u8..5 {
            let bytes = with(|b| b[0] = 0x40 | ihl);
            assert_eq!(
                Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
                WireError::BadHeaderLength
            );
        }
        // IHL 15 = 60 bytes: past a 24-byte buffer, inside the 57-byte one (then total length decides).
        let bytes = with(|b| b[0] = 0x4f);
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..24]).unwrap_err(),
            WireError::BadHeaderLength
        );
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
            WireError::BadHeaderLength
        );
        let bytes = with(|b| b[0] = 0x4e); // 56 bytes of header, total length 57
        assert!(Ipv4Packet::new_checked(&bytes[..]).is_ok());

        for total_len in [0u16, 1, 19] {
            let bytes = with(|b| b[2..4].copy_from_slice(&total_len.to_be_bytes()));
            assert_eq!(
                Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
                WireError::BadTotalLength
            );
        }
        let bytes = with(|b| b[0] = 0x46); // 24-byte header, total length 57: fine; 23 is not
        assert!(Ipv4Packet::new_checked(&bytes[..]).is_ok());
        let bytes = with(|b| {
            b[0] = 0x46;
            b[2..4].copy_from_slice(&23u16.to_be_bytes());
        });
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
            WireError::BadTotalLength
        );
        for total_len in [58u16, 1500, 65535] {
            let bytes = with(|b| b[2..4].copy_from_slice(&total_len.to_be_bytes()));
            assert_eq!(
                Ipv4Packet::new_checked(&bytes[..]).unwrap_err(),
                WireError::BadTotalLength
            );
            let unchecked = Ipv4Packet::new_unchecked(&bytes[..]);
            assert_eq!(Ipv4Repr::parse(&unchecked), Err(WireError::BadTotalLength));
        }
        // A header-only datagram (total length 20) is valid and has an empty payload.
        let bytes = with(|b| b[2..4].copy_from_slice(&20u16.to_be_bytes()));
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.payload().is_empty());
    }

    #[test]
    #[should_panic(expected = "IPv4 header needs 20 bytes")]
    fn emit_into_a_short_buffer_is_a_caller_bug() {
        dns_query_repr().emit(&mut [0u8; 19]);
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            0..=MAX_PACKET_LEN - HEADER_LEN,
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<bool>(),
            any::<bool>(),
            0..=0x1fffu16,
        )
            .prop_map(
                |(src, dst, proto, payload_len, ttl, tos, ident, df, mf, offset)| Ipv4Repr {
                    src_addr: Ipv4Addr::from(src),
                    dst_addr: Ipv4Addr::from(dst),
                    protocol: IpProtocol::from(proto),
                    payload_len,
                    ttl,
                    tos,
                    ident,
                    dont_frag: df,
                    more_frags: mf,
                    frag_offset: offset * 8,
                },
            )
    }

    /// Calls every accessor, to catch any that would read out of bounds on a checked packet.
    fn read_everything<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) {
        let _ = (
            packet.version(),
            packet.header_len(),
            packet.tos(),
            packet.total_len(),
            packet.ident(),
        );
        let _ = (
            packet.dont_frag(),
            packet.more_frags(),
            packet.frag_offset(),
            packet.is_fragment(),
        );
        let _ = (
            packet.ttl(),
            packet.protocol(),
            packet.checksum(),
            packet.src_addr(),
            packet.dst_addr(),
        );
        let _ = (
            packet.header(),
            packet.options(),
            packet.payload(),
            packet.verify_checksum(),
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(packet) = Ipv4Packet::new_checked(&bytes[..]) {
                read_everything(&packet);
                prop_assert!(Ipv4Repr::parse(&packet).is_ok());
            }
            let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..]));
        }

        #[test]
        fn plausible_headers_never_panic(
            ver_ihl in prop_oneof![Just(0x45u8), 0x40u8..=0x4f, any::<u8>()],
            total_len in 0u16..100,
            rest in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut bytes = rest;
            if bytes.len() >= 4 {
                bytes[0] = ver_ihl;
                bytes[2..4].copy_from_slice(&total_len.to_be_bytes());
            }
            match Ipv4Packet::new_checked(&bytes[..]) {
                Ok(packet) => {
                    read_everything(&packet);
                    let repr = Ipv4Repr::parse(&packet).unwrap();
                    prop_assert_eq!(repr.payload_len + packet.header_len(), usize::from(total_len));
                }
                Err(e) => prop_assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..])), Err(e)),
            }
        }

        #[test]
        fn repr_emit_parse_round_trips(repr in arb_repr(), junk in any::<u8>()) {
            let mut bytes = vec![junk; repr.buffer_len()];
            repr.emit(&mut bytes);
            let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&packet).unwrap(), repr);
            prop_assert_eq!(packet.checksum(), 0);
        }

        #[test]
        fn etherparse_agrees_with_emitted_headers(repr in arb_repr()) {
            let bytes = emit_with_checksum(&repr);
            let (header, _) = etherparse::Ipv4Header::from_slice(&bytes).unwrap();
            prop_assert_eq!(header.source, repr.src_addr.octets());
            prop_assert_eq!(header.destination, repr.dst_addr.octets());
            prop_assert_eq!(header.protocol.0, u8::from(repr.protocol));
            prop_assert_eq!(usize::from(header.total_len), repr.buffer_len());
            prop_assert_eq!(header.time_to_live, repr.ttl);
            prop_assert_eq!((header.dscp.value() << 2) | header.ecn.value(), repr.tos);
            prop_assert_eq!(header.identification, repr.ident);
            prop_assert_eq!(header.dont_fragment, repr.dont_frag);
            prop_assert_eq!(header.more_fragments, repr.more_frags);
            prop_assert_eq!(header.fragment_offset.byte_offset(), repr.frag_offset);
            prop_assert_eq!(header.calc_header_checksum(), header.header_checksum);
            prop_assert!(Ipv4Packet::new_unchecked(&bytes[..]).verify_checksum());
        }
    }

    #[test]
    fn etherparse_agrees_with_the_literals() {
        for literal in [&UDP_DNS_QUERY[..], &ECHO_REQUEST[..], &ECHO_REPLY[..]] {
            let (header, _) = etherparse::Ipv4Header::from_slice(literal).unwrap();
            assert_eq!(header.calc_header_checksum(), header.header_checksum);
            let repr = Ipv4Repr::parse(&Ipv4Packet::new_checked(literal).unwrap()).unwrap();
            assert_eq!(header.source, repr.src_addr.octets());
            assert_eq!(usize::from(header.total_len), repr.buffer_len());
        }
    }
}
