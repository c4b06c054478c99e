//! ICMP for IPv4 (RFC 792): echo, destination unreachable (with RFC 1191's next-hop MTU), time exceeded,
//! parameter problem and timestamp.
//!
//! [`Icmpv4Packet`] reads and writes the 8-byte header in place; [`Icmpv4Repr`] is the message it carries.
//! ICMP is rare and small, so unlike IP and UDP, [`Icmpv4Repr::parse`] verifies the checksum and
//! [`Icmpv4Repr::emit`] fills it. [`parse_quoted`] reads the datagram an error message quotes, to find the socket
//! it concerns.

use std::net::Ipv4Addr;

use super::ipv4::{Ipv4Packet, Ipv4Repr};
use super::{read_u16, write_u16, Result, WireError};
use crate::checksum;

/// Length of the ICMP header in bytes (type, code, checksum and four type-specific bytes).
pub const HEADER_LEN: usize = 8;

/// Where each field of the header lives.
mod field {
    /// Message type.
    pub const TYPE: usize = 0;
    /// Message code (the reason, for errors).
    pub const CODE: usize = 1;
    /// Checksum over the whole message, 16 bits.
    pub const CHECKSUM: usize = 2;
    /// Echo identifier, 16 bits.
    pub const ECHO_IDENT: usize = 4;
    /// Echo sequence number, 16 bits.
    pub const ECHO_SEQ_NO: usize = 6;
    /// Unused in errors (zero), 16 bits.
    pub const UNUSED: usize = 4;
    /// Next-hop MTU in "fragmentation needed" (RFC 1191), 16 bits.
    pub const NEXT_HOP_MTU: usize = 6;
    /// Echo data, or the quoted datagram of an error, from here to the end.
    pub const DATA: usize = 8;
}

/// The ICMP message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// Echo reply, type 0.
    EchoReply,
    /// Destination unreachable, type 3.
    DstUnreachable,
    /// Redirect, type 5.
    Redirect,
    /// Echo request, type 8.
    EchoRequest,
    /// Time exceeded, type 11.
    TimeExceeded,
    /// Parameter problem, type 12.
    ParamProblem,
    /// Timestamp, type 13.
    Timestamp,
    /// Timestamp reply, type 14.
    TimestampReply,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Self {
        match value {
            0 => Message::EchoReply,
            3 => Message::DstUnreachable,
            5 => Message::Redirect,
            8 => Message::EchoRequest,
            11 => Message::TimeExceeded,
            12 => Message::ParamProblem,
            13 => Message::Timestamp,
            14 => Message::TimestampReply,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> Self {
        match value {
            Message::EchoReply => 0,
            Message::DstUnreachable => 3,
            Message::Redirect => 5,
            Message::EchoRequest => 8,
            Message::TimeExceeded => 11,
            Message::ParamProblem => 12,
            Message::Timestamp => 13,
            Message::TimestampReply => 14,
            Message::Unknown(other) => other,
        }
    }
}

/// The code of a destination unreachable message: why the datagram could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DstUnreachable {
    /// Network unreachable, code 0.
    NetUnreachable,
    /// Host unreachable, code 1.
    HostUnreachable,
    /// Protocol unreachable, code 2.
    ProtoUnreachable,
    /// Port unreachable, code 3: no socket is bound to the destination port.
    PortUnreachable,
    /// Fragmentation needed and DF set, code 4; carries the next-hop MTU (RFC 1191).
    FragRequired,
    /// Any other code (5 and up).
    Other(u8),
}

impl From<u8> for DstUnreachable {
    fn from(value: u8) -> Self {
        match value {
            0 => DstUnreachable::NetUnreachable,
            1 => DstUnreachable::HostUnreachable,
            2 => DstUnreachable::ProtoUnreachable,
            3 => DstUnreachable::PortUnreachable,
            4 => DstUnreachable::FragRequired,
            other => DstUnreachable::Other(other),
        }
    }
}

impl From<DstUnreachable> for u8 {
    fn from(value: DstUnreachable) -> Self {
        match value {
            DstUnreachable::NetUnreachable => 0,
            DstUnreachable::HostUnreachable => 1,
            DstUnreachable::ProtoUnreachable => 2,
            DstUnreachable::PortUnreachable => 3,
            DstUnreachable::FragRequired => 4,
            DstUnreachable::Other(other) => other,
        }
    }
}

/// The code of a time exceeded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeExceeded {
    /// The TTL reached zero in transit, code 0.
    TtlExpired,
    /// Fragment reassembly timed out, code 1.
    FragReassembly,
    /// Any other code.
    Other(u8),
}

impl From<u8> for TimeExceeded {
    fn from(value: u8) -> Self {
        match value {
            0 => TimeExceeded::TtlExpired,
            1 => TimeExceeded::FragReassembly,
            other => TimeExceeded::Other(other),
        }
    }
}

impl From<TimeExceeded> for u8 {
    fn from(value: TimeExceeded) -> Self {
        match value {
            TimeExceeded::TtlExpired => 0,
            TimeExceeded::FragReassembly => 1,
            TimeExceeded::Other(other) => other,
        }
    }
}

/// A typed view of an ICMP message over a byte buffer (the IP payload, exactly: the checksum covers all of it).
///
/// Build it with [`Icmpv4Packet::new_checked`] for bytes from the network. The accessors index the buffer directly:
/// on a packet built with [`Icmpv4Packet::new_unchecked`] over a buffer that is too short they panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking it. For buffers this stack has just written (or checked) itself.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer after checking it holds the 8-byte header ([`WireError::Truncated`] if not). Neither the
    /// checksum nor the type is checked here; [`Icmpv4Repr::parse`] does both.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(packet)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field as it is on the wire.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The echo identifier (echo request and reply).
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// The echo sequence number (echo request and reply).
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQ_NO)
    }

    /// The next-hop MTU of a "fragmentation needed" message, bytes 6..8 (RFC 1191); zero from old routers.
    pub fn next_hop_mtu(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::NEXT_HOP_MTU)
    }

    /// Everything after the header: echo data, or the datagram an error quotes.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    /// Whether the checksum over the whole buffer verifies. Never panics, whatever the buffer's length.
    pub fn verify_checksum(&self) -> bool {
        checksum::fast(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, v: Message) {
        self.buffer.as_mut()[field::TYPE] = u8::from(v);
    }

    /// Sets the message code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_IDENT, v);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::ECHO_SEQ_NO, v);
    }

    /// Sets the next-hop MTU (bytes 6..8).
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::NEXT_HOP_MTU, v);
    }

    /// Zeroes bytes 4..6, unused in error messages.
    fn clear_unused(&mut self) {
        write_u16(self.buffer.as_mut(), field::UNUSED, 0);
    }

    /// Everything after the header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    /// Computes the checksum over the whole buffer and writes it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::fast(self.buffer.as_ref());
        self.set_checksum(!sum);
    }
}

/// An ICMP message this stack sends or handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (`ping`).
    EchoRequest {
        /// Identifier, chosen by the sender to match replies.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data, returned unchanged in the reply.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier, copied from the request.
        ident: u16,
        /// Sequence number, copied from the request.
        seq_no: u16,
        /// Data, copied from the request.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Why: the message code.
        reason: DstUnreachable,
        /// The next-hop MTU (RFC 1191); 0 unless `reason` is [`DstUnreachable::FragRequired`].
        next_hop_mtu: u16,
        /// The quoted datagram: its IP header and at least its first 8 payload bytes (see [`parse_quoted`]).
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Why: the message code.
        reason: TimeExceeded,
        /// The quoted datagram: its IP header and at least its first 8 payload bytes (see [`parse_quoted`]).
        data: &'a [u8],
    },
    /// Timestamp request: identifier and sequence number as an echo's; the data holds the
    /// originate, receive and transmit timestamps (RFC 792: 12 bytes), as sent.
    Timestamp {
        /// Identifier, chosen by the sender to match replies.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// The timestamps, as sent.
        data: &'a [u8],
    },
    /// Timestamp reply: the request's originate timestamp, then when it was received and when the
    /// reply was sent (milliseconds since midnight UT).
    TimestampReply {
        /// Identifier, copied from the request.
        ident: u16,
        /// Sequence number, copied from the request.
        seq_no: u16,
        /// The three timestamps.
        data: &'a [u8],
    },
    /// Parameter problem (code 0: the pointer names the byte at fault).
    ParamProblem {
        /// The offset of the byte at fault in the quoted datagram's header.
        pointer: u8,
        /// The quoted datagram: its IP header, options included, and at least its first 8 payload
        /// bytes.
        data: &'a [u8],
    },
    /// Redirect (RFC 792; RFC 1122 §3.2.2.2): datagrams to the quoted datagram's destination
    /// (or its network, codes 0 and 2) are better sent through `gateway`.
    Redirect {
        /// 0 network, 1 host, 2 and 3 the same for a type of service.
        code: u8,
        /// The better gateway, on the sender's network.
        gateway: Ipv4Addr,
        /// The quoted datagram: its IP header and at least its first 8 payload bytes.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message, borrowing its data from the packet's buffer.
    ///
    /// Errors: [`WireError::Truncated`] if shorter than the header, [`WireError::BadChecksum`] if the checksum
    /// over the whole buffer fails, [`WireError::Unrecognized`] for any type but echo request/reply, destination
    /// unreachable, redirect (codes 0 to 3), time exceeded, parameter problem and timestamp request/reply. The code of an echo message is ignored (RFC 792 says 0; Linux accepts
    /// any). The data of an error is returned as is; [`parse_quoted`] checks it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv4Packet<&'a T>) -> Result<Icmpv4Repr<'a>> {
        let buffer: &'a [u8] = <T as AsRef<[u8]>>::as_ref(packet.buffer);
        let packet = Icmpv4Packet::new_checked(buffer)?;
        if !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        let data: &'a [u8] = &buffer[field::DATA..];
        let repr = match packet.msg_type() {
            Message::EchoRequest => Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            Message::EchoReply => Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            Message::DstUnreachable => {
                let reason = DstUnreachable::from(packet.code());
                let next_hop_mtu = if reason == DstUnreachable::FragRequired {
                    packet.next_hop_mtu()
                } else {
                    0
                };
                Icmpv4Repr::DstUnreachable {
                    reason,
                    next_hop_mtu,
                    data,
                }
            }
            Message::TimeExceeded => Icmpv4Repr::TimeExceeded {
                reason: TimeExceeded::from(packet.code()),
                data,
            },
            Message::Timestamp => Icmpv4Repr::Timestamp {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            Message::TimestampReply => Icmpv4Repr::TimestampReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            },
            Message::ParamProblem => Icmpv4Repr::ParamProblem {
                pointer: buffer[4],
                data,
            },
            // RFC 792: codes 0 to 3 (network, host, and each for a type of service).
            Message::Redirect if packet.code() <= 3 => Icmpv4Repr::Redirect {
                code: packet.code(),
                gateway: Ipv4Addr::from([buffer[4], buffer[5], buffer[6], buffer[7]]),
                data,
            },
            Message::Redirect | Message::Unknown(_) => return Err(WireError::Unrecognized),
        };
        Ok(repr)
    }

    /// The data after the header.
    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. }
            | Icmpv4Repr::ParamProblem { data, .. }
            | Icmpv4Repr::Redirect { data, .. }
            | Icmpv4Repr::Timestamp { data, .. }
            | Icmpv4Repr::TimestampReply { data, .. } => data,
        }
    }

    /// The length of the message [`Icmpv4Repr::emit`] writes: header plus data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the header and data into `buffer[..self.buffer_len()]` and fills the checksum over them. In errors
    /// the unused bytes are zero, and the next-hop MTU is written only for [`DstUnreachable::FragRequired`].
    ///
    /// # Panics
    /// If `buffer` is shorter than [`Icmpv4Repr::buffer_len`]: a bug in the caller.
    pub fn emit(&self, buffer: &mut [u8]) {
        let len = self.buffer_len();
        assert!(
            buffer.len() >= len,
            "ICMP message needs {len} bytes, got {}",
            buffer.len()
        );
        let mut packet = Icmpv4Packet::new_unchecked(&mut buffer[..len]);
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, .. }
            | Icmpv4Repr::EchoReply { ident, seq_no, .. }
            | Icmpv4Repr::Timestamp { ident, seq_no, .. }
            | Icmpv4Repr::TimestampReply { ident, seq_no, .. } => {
                packet.set_msg_type(match self {
                    Icmpv4Repr::EchoRequest { .. } => Message::EchoRequest,
                    Icmpv4Repr::EchoReply { .. } => Message::EchoReply,
                    Icmpv4Repr::Timestamp { .. } => Message::Timestamp,
                    _ => Message::TimestampReply,
                });
                packet.set_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                ..
            } => {
                packet.set_msg_type(Message::DstUnreachable);
                packet.set_code(u8::from(reason));
                packet.clear_unused();
                packet.set_next_hop_mtu(if reason == DstUnreachable::FragRequired {
                    next_hop_mtu
                } else {
                    0
                });
            }
            Icmpv4Repr::TimeExceeded { reason, .. } => {
                packet.set_msg_type(Message::TimeExceeded);
                packet.set_code(u8::from(reason));
                packet.clear_unused();
                packet.set_next_hop_mtu(0);
            }
            Icmpv4Repr::ParamProblem { pointer, .. } => {
                packet.set_msg_type(Message::ParamProblem);
                packet.set_code(0);
                packet.clear_unused();
                packet.set_next_hop_mtu(0);
                packet.buffer[4] = pointer;
            }
            Icmpv4Repr::Redirect { code, gateway, .. } => {
                packet.set_msg_type(Message::Redirect);
                packet.set_code(code);
                packet.buffer[4..8].copy_from_slice(&gateway.octets());
            }
        }
        packet.data_mut().copy_from_slice(self.data());
        packet.fill_checksum();
    }
}

/// Parses the datagram quoted in an ICMP error (RFC 792: its IP header and first 8 payload bytes), to find the
/// socket the error concerns: returns the quoted header's meaning and those 8 bytes (for UDP, the whole header).
///
/// Tolerant where a quote must be: the quoted total length may exceed what is quoted, and the quoted header
/// checksum is not verified. Errors: [`WireError::Truncated`] if fewer than 20 bytes or if the 8 payload bytes
/// are missing; [`WireError::BadVersion`]; [`WireError::BadHeaderLength`] if the IHL is below 5 or past the
/// quote; [`WireError::BadTotalLength`] if the quoted total length is shorter than its header.
pub fn parse_quoted(data: &[u8]) -> Result<(Ipv4Repr, [u8; 8])> {
    let packet = Ipv4Packet::new_unchecked(data);
    packet.check_header()?;
    let header_len = packet.header_len();
    if usize::from(packet.total_len()) < header_len {
        return Err(WireError::BadTotalLength);
    }
    let quoted = data
        .get(header_len..header_len + 8)
        .ok_or(WireError::Truncated)?;
    let mut payload = [0u8; 8];
    payload.copy_from_slice(quoted);
    Ok((Ipv4Repr::from_checked_header(&packet), payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4;
    use crate::wire::testdata::{
        ECHO_REPLY, ECHO_REQUEST, FRAG_NEEDED, PORT_UNREACHABLE, TIME_EXCEEDED,
    };
    use crate::wire::IpProtocol;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// The ICMP message inside an IP packet literal.
    fn icmp(ip_packet: &[u8]) -> &[u8] {
        &ip_packet[ipv4::HEADER_LEN..]
    }

    fn parse(bytes: &[u8]) -> Result<Icmpv4Repr<'_>> {
        Icmpv4Repr::parse(&Icmpv4Packet::new_checked(bytes)?)
    }

    fn emit(repr: &Icmpv4Repr<'_>) -> Vec<u8> {
        let mut bytes = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut bytes);
        bytes
    }

    #[test]
    fn echo_request_both_ways() {
        let bytes = icmp(&ECHO_REQUEST);
        let packet = Icmpv4Packet::new_checked(bytes).unwrap();
        assert_eq!(packet.msg_type(), Message::EchoRequest);
        assert_eq!(packet.code(), 0);
        assert_eq!(packet.checksum(), 0xe094);
        assert_eq!((packet.echo_ident(), packet.echo_seq_no()), (0x1234, 1));
        assert_eq!(packet.data().len(), 56);
        assert!(packet.verify_checksum());

        let repr = Icmpv4Repr::parse(&packet).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: &bytes[8..]
            }
        );
        assert_eq!(repr.buffer_len(), 56 + 8);
        assert_eq!(emit(&repr), bytes);
    }

    #[test]
    fn echo_reply_both_ways() {
        let bytes = icmp(&ECHO_REPLY);
        let repr = parse(bytes).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 1,
                data: &icmp(&ECHO_REQUEST)[8..]
            }
        );
        assert_eq!(emit(&repr), bytes);
    }

    #[test]
    fn port_unreachable_both_ways() {
        let bytes = icmp(&PORT_UNREACHABLE);
        let repr = parse(bytes).unwrap();
        let quoted = &bytes[8..];
        assert_eq!(
            repr,
            Icmpv4Repr::DstUnreachable {
                reason: DstUnreachable::PortUnreachable,
                next_hop_mtu: 0,
                data: quoted
            }
        );
        assert_eq!(emit(&repr), bytes);

        let (ip, udp) = parse_quoted(quoted).unwrap();
        assert_eq!(ip.src_addr, Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(ip.dst_addr, Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(ip.protocol, IpProtocol::Udp);
        assert_eq!(ip.payload_len, 13);
        assert_eq!(udp, [0xc7, 0x38, 0x27, 0x0f, 0x00, 0x0d, 0x4a, 0x04]); // 51000 -> 9999, length 13
    }

    #[test]
    fn frag_needed_both_ways() {
        let bytes = icmp(&FRAG_NEEDED);
        let packet = Icmpv4Packet::new_checked(bytes).unwrap();
        assert_eq!(packet.next_hop_mtu(), 1400);
        let repr = Icmpv4Repr::parse(&packet).unwrap();
        let quoted = &bytes[8..];
        assert_eq!(
            repr,
            Icmpv4Repr::DstUnreachable {
                reason: DstUnreachable::FragRequired,
                next_hop_mtu: 1400,
                data: quoted
            }
        );
        assert_eq!(emit(&repr), bytes);

        // The quoted datagram was 1500 bytes; only its header and 8 bytes are here.
        assert_eq!(
            Ipv4Packet::new_checked(quoted).unwrap_err(),
            WireError::BadTotalLength
        );
        let (ip, udp) = parse_quoted(quoted).unwrap();
        assert_eq!(ip.payload_len, 1480);
        assert!(ip.dont_frag);
        assert_eq!(ip.dst_addr, Ipv4Addr::new(203, 0, 113, 7));
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 40123);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 5001);
    }

    #[test]
    fn time_exceeded_both_ways() {
        let bytes = icmp(&TIME_EXCEEDED);
        let repr = parse(bytes).unwrap();
        assert_eq!(
            repr,
            Icmpv4Repr::TimeExceeded {
                reason: TimeExceeded::TtlExpired,
                data: &bytes[8..]
            }
        );
        assert_eq!(emit(&repr), bytes);

        let (ip, udp) = parse_quoted(&bytes[8..]).unwrap();
        assert_eq!(ip.ttl, 1);
        assert_eq!(ip.dst_addr, Ipv4Addr::new(93, 184, 216, 34));
        assert_eq!(ip.payload_len, 40);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 33434);
    }

    #[test]
    fn whole_ip_packets_from_reprs_match_the_wire() {
        for literal in [
            &ECHO_REQUEST[..],
            &ECHO_REPLY[..],
            &PORT_UNREACHABLE[..],
            &FRAG_NEEDED[..],
            &TIME_EXCEEDED[..],
        ] {
            let ip_packet = Ipv4Packet::new_checked(literal).unwrap();
            let ip = Ipv4Repr::parse(&ip_packet).unwrap();
            let message = Icmpv4Packet::new_checked(ip_packet.payload()).unwrap();
            let repr = Icmpv4Repr::parse(&message).unwrap();
            let mut bytes = vec![0u8; ip.buffer_len()];
            ip.emit(&mut bytes);
            repr.emit(&mut bytes[ipv4::HEADER_LEN..]);
            Ipv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            assert_eq!(bytes, literal);
        }
    }

    #[test]
    fn emit_leaves_bytes_after_the_message_alone() {
        let repr = Icmpv4Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: b"abc",
        };
        let mut bytes = [0xeeu8; 16];
        repr.emit(&mut bytes);
        assert_eq!(bytes[11..], [0xee; 5]);
        assert_eq!(parse(&bytes[..11]).unwrap(), repr);
    }

    #[test]
    fn echo_with_a_nonzero_code_is_accepted() {
        let mut bytes = icmp(&ECHO_REQUEST).to_vec();
        bytes[1] = 7;
        Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        assert!(matches!(
            parse(&bytes),
            Ok(Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                ..
            })
        ));
    }

    #[test]
    fn codes_and_types_convert_both_ways() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(Message::from(v)), v);
            assert_eq!(u8::from(DstUnreachable::from(v)), v);
            assert_eq!(u8::from(TimeExceeded::from(v)), v);
        }
        assert_eq!(DstUnreachable::from(4), DstUnreachable::FragRequired);
        assert_eq!(DstUnreachable::from(5), DstUnreachable::Other(5));
        assert_eq!(TimeExceeded::from(1), TimeExceeded::FragReassembly);
        assert_eq!(Message::from(13), Message::Timestamp);
        assert_eq!(Message::from(15), Message::Unknown(15));
    }

    #[test]
    fn setters_write_where_accessors_read() {
        let mut bytes = [0u8; 12];
        let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_msg_type(Message::Unknown(42));
        packet.set_code(9);
        packet.set_echo_ident(0x0102);
        packet.set_echo_seq_no(0x0304);
        packet.data_mut().copy_from_slice(b"data");
        packet.fill_checksum();
        assert!(packet.verify_checksum());
        let checksum = packet.checksum();
        packet.set_checksum(checksum ^ 1);
        assert!(!packet.verify_checksum());
        packet.set_next_hop_mtu(576);

        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (packet.msg_type(), packet.code()),
            (Message::Unknown(42), 9)
        );
        assert_eq!(
            (
                packet.echo_ident(),
                packet.echo_seq_no(),
                packet.next_hop_mtu()
            ),
            (0x0102, 576, 576)
        );
        assert_eq!(packet.data(), b"data");
        assert_eq!(packet.into_inner(), &bytes[..]);
    }

    #[test]
    fn truncated_messages_are_rejected() {
        let bytes = icmp(&ECHO_REQUEST);
        for len in 0..HEADER_LEN {
            assert_eq!(
                Icmpv4Packet::new_checked(&bytes[..len]).unwrap_err(),
                WireError::Truncated
            );
            let unchecked = Icmpv4Packet::new_unchecked(&bytes[..len]);
            assert_eq!(Icmpv4Repr::parse(&unchecked), Err(WireError::Truncated));
        }
        // Longer prefixes hold a header but lose data the checksum covers.
        for literal in [
            &ECHO_REQUEST[..],
            &PORT_UNREACHABLE[..],
            &FRAG_NEEDED[..],
            &TIME_EXCEEDED[..],
        ] {
            let bytes = icmp(literal);
            for len in HEADER_LEN..bytes.len() {
                assert_eq!(
                    parse(&bytes[..len]),
                    Err(WireError::BadChecksum),
                    "prefix of {len}"
                );
            }
        }
        assert_eq!(parse(&[]), Err(WireError::Truncated));
    }

    #[test]
    fn bad_checksums_are_rejected() {
        for literal in [
            &ECHO_REQUEST[..],
            &ECHO_REPLY[..],
            &PORT_UNREACHABLE[..],
            &FRAG_NEEDED[..],
            &TIME_EXCEEDED[..],
        ] {
            let good = icmp(literal);
            for i in 0..good.len() {
                let mut bytes = good.to_vec();
                bytes[i] ^= 0x10;
                assert_eq!(
                    parse(&bytes),
                    Err(WireError::BadChecksum),
                    "byte {i} flipped"
                );
            }
        }
        let mut bytes = icmp(&ECHO_REQUEST).to_vec();
        bytes[2..4].fill(0);
        assert_eq!(parse(&bytes), Err(WireError::BadChecksum));
    }

    #[test]
    fn timestamp_both_ways() {
        let times = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        for (repr, msg_type) in [
            (
                Icmpv4Repr::Timestamp {
                    ident: 7,
                    seq_no: 9,
                    data: &times,
                },
                13,
            ),
            (
                Icmpv4Repr::TimestampReply {
                    ident: 7,
                    seq_no: 9,
                    data: &times,
                },
                14,
            ),
        ] {
            let mut bytes = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut bytes);
            assert_eq!(bytes[..2], [msg_type, 0]);
            assert_eq!(bytes[4..8], [0, 7, 0, 9]);
            assert_eq!(parse(&bytes), Ok(repr));
            let theirs = etherparse::Icmpv4Slice::from_slice(&bytes).unwrap();
            let header = etherparse::icmpv4::TimestampMessage {
                id: 7,
                seq: 9,
                originate_timestamp: 1,
                receive_timestamp: 2,
                transmit_timestamp: 3,
            };
            let want = if msg_type == 13 {
                etherparse::Icmpv4Type::TimestampRequest(header)
            } else {
                etherparse::Icmpv4Type::TimestampReply(header)
            };
            assert_eq!(theirs.icmp_type(), want);
            assert_eq!(
                theirs.icmp_type().calc_checksum(theirs.payload()),
                theirs.checksum()
            );
        }
    }

    #[test]
    fn param_problem_both_ways() {
        let quote = [0x46u8; 32];
        let repr = Icmpv4Repr::ParamProblem {
            pointer: 22,
            data: &quote,
        };
        let mut bytes = vec![0xa5u8; repr.buffer_len()];
        repr.emit(&mut bytes);
        assert_eq!(bytes[..8], [12, 0, bytes[2], bytes[3], 22, 0, 0, 0]);
        assert_eq!(parse(&bytes), Ok(repr));
        let ours = etherparse::Icmpv4Slice::from_slice(&bytes).unwrap();
        assert_eq!(
            ours.icmp_type(),
            etherparse::Icmpv4Type::ParameterProblem(
                etherparse::icmpv4::ParameterProblemHeader::PointerIndicatesError(22)
            )
        );
        assert_eq!(
            ours.icmp_type().calc_checksum(ours.payload()),
            ours.checksum()
        );
    }

    #[test]
    fn unknown_types_are_unrecognized() {
        for msg_type in [4u8, 15, 16, 42, 255] {
            let mut bytes = icmp(&ECHO_REQUEST).to_vec();
            bytes[0] = msg_type;
            Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            assert_eq!(
                parse(&bytes),
                Err(WireError::Unrecognized),
                "type {msg_type}"
            );
        }
    }

    /// A redirect's codes 0 to 3 are read with the gateway and the quote, and written back the
    /// same; another code is not a redirect.
    #[test]
    fn a_redirect_round_trips_and_only_its_four_codes_are_read() {
        let quote = &icmp(&PORT_UNREACHABLE)[8..];
        for code in 0..=3 {
            let repr = Icmpv4Repr::Redirect {
                code,
                gateway: Ipv4Addr::new(10, 0, 0, 7),
                data: quote,
            };
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut bytes);
            assert_eq!(parse(&bytes), Ok(repr));
        }
        let mut bytes = vec![0u8; 8 + quote.len()];
        Icmpv4Repr::Redirect {
            code: 0,
            gateway: Ipv4Addr::new(10, 0, 0, 7),
            data: quote,
        }
        .emit(&mut bytes);
        bytes[1] = 4;
        Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        assert_eq!(parse(&bytes), Err(WireError::Unrecognized));
    }

    #[test]
    fn malformed_quotes_are_rejected() {
        let quoted = &icmp(&PORT_UNREACHABLE)[8..];
        for len in 0..20 {
            assert_eq!(
                parse_quoted(&quoted[..len]).unwrap_err(),
                WireError::Truncated,
                "quote of {len}"
            );
        }
        for len in 20..28 {
            assert_eq!(
                parse_quoted(&quoted[..len]).unwrap_err(),
                WireError::Truncated,
                "quote of {len}"
            );
        }
        assert!(parse_quoted(&quoted[..28]).is_ok());

        let with = |edit: &dyn Fn(&mut [u8])| {
            let mut bytes = quoted.to_vec();
            edit(&mut bytes);
            parse_quoted(&bytes)
        };
        assert_eq!(with(&|b| b[0] = 0x65).unwrap_err(), WireError::BadVersion);
        assert_eq!(
            with(&|b| b[0] = 0x44).unwrap_err(),
            WireError::BadHeaderLength
        );
        assert_eq!(
            with(&|b| b[0] = 0x4f).unwrap_err(),
            WireError::BadHeaderLength
        );
        assert_eq!(with(&|b| b[0] = 0x47).unwrap_err(), WireError::Truncated); // 28-byte header, 5 bytes after
        assert_eq!(
            with(&|b| b[2..4].copy_from_slice(&[0, 19])).unwrap_err(),
            WireError::BadTotalLength
        );
        assert!(with(&|b| b[2..4].copy_from_slice(&[0xff, 0xff])).is_ok());
        assert!(
            with(&|b| b[10..12].fill(0)).is_ok(),
            "the quoted header checksum is not checked"
        );
    }

    #[test]
    #[should_panic(expected = "ICMP message needs 11 bytes")]
    fn emit_into_a_short_buffer_is_a_caller_bug() {
        Icmpv4Repr::EchoReply {
            ident: 0,
            seq_no: 0,
            data: b"abc",
        }
        .emit(&mut [0u8; 10]);
    }

    /// An owned description of a message, from which a borrowed `Icmpv4Repr` is built.
    #[derive(Debug, Clone)]
    struct OwnedMessage {
        kind: u8,
        ident: u16,
        seq_no: u16,
        code: u8,
        mtu: u16,
        data: Vec<u8>,
    }

    impl OwnedMessage {
        fn repr(&self) -> Icmpv4Repr<'_> {
            let data = &self.data[..];
            match self.kind % 4 {
                0 => Icmpv4Repr::EchoRequest {
                    ident: self.ident,
                    seq_no: self.seq_no,
                    data,
                },
                1 => Icmpv4Repr::EchoReply {
                    ident: self.ident,
                    seq_no: self.seq_no,
                    data,
                },
                2 => {
                    let reason = DstUnreachable::from(self.code);
                    let next_hop_mtu = if reason == DstUnreachable::FragRequired {
                        self.mtu
                    } else {
                        0
                    };
                    Icmpv4Repr::DstUnreachable {
                        reason,
                        next_hop_mtu,
                        data,
                    }
                }
                _ => Icmpv4Repr::TimeExceeded {
                    reason: TimeExceeded::from(self.code),
                    data,
                },
            }
        }
    }

    fn arb_message() -> impl Strategy<Value = OwnedMessage> {
        (
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            prop_oneof![0u8..6, any::<u8>()],
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(kind, ident, seq_no, code, mtu, data)| OwnedMessage {
                kind,
                ident,
                seq_no,
                code,
                mtu,
                data,
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(packet) = Icmpv4Packet::new_checked(&bytes[..]) {
                let _ = (packet.msg_type(), packet.code(), packet.checksum(), packet.echo_ident());
                let _ = (packet.echo_seq_no(), packet.next_hop_mtu(), packet.data(), packet.verify_checksum());
                let _ = Icmpv4Repr::parse(&packet);
            }
            let _ = Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&bytes[..]));
            let _ = Icmpv4Packet::new_unchecked(&bytes[..]).verify_checksum();
            let _ = parse_quoted(&bytes);
        }

        #[test]
        fn arbitrary_bytes_with_a_good_checksum_never_panic(
            msg_type in prop_oneof![Just(0u8), Just(3), Just(8), Just(11), any::<u8>()],
            rest in proptest::collection::vec(any::<u8>(), 8..80),
        ) {
            let mut bytes = rest;
            bytes[0] = msg_type;
            Icmpv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            match parse(&bytes) {
                Ok(repr) => {
                    prop_assert_eq!(repr.buffer_len(), bytes.len());
                    if let Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } = repr {
                        let _ = parse_quoted(data);
                    }
                }
                Err(e) => prop_assert_eq!(e, WireError::Unrecognized),
            }
        }

        #[test]
        fn plausible_quotes_never_panic(
            ver_ihl in prop_oneof![Just(0x45u8), 0x40u8..=0x4f, any::<u8>()],
            total_len in any::<u16>(),
            rest in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut bytes = rest;
            if bytes.len() >= 4 {
                bytes[0] = ver_ihl;
                bytes[2..4].copy_from_slice(&total_len.to_be_bytes());
            }
            if let Ok((ip, payload)) = parse_quoted(&bytes) {
                let header_len = usize::from(ver_ihl & 0x0f) * 4;
                prop_assert_eq!(ip.payload_len + header_len, usize::from(total_len));
                prop_assert_eq!(&payload[..], &bytes[header_len..header_len + 8]);
            }
        }

        #[test]
        fn repr_emit_parse_round_trips(message in arb_message(), junk in any::<u8>()) {
            let repr = message.repr();
            let mut bytes = vec![junk; repr.buffer_len() + 4];
            repr.emit(&mut bytes);
            let len = repr.buffer_len();
            prop_assert_eq!(parse(&bytes[..len]), Ok(repr));
            prop_assert!(bytes[len..].iter().all(|&b| b == junk));
        }

        #[test]
        fn etherparse_agrees_with_emitted_messages(message in arb_message()) {
            let repr = message.repr();
            let bytes = emit(&repr);
            let slice = etherparse::Icmpv4Slice::from_slice(&bytes).unwrap();
            let header = slice.header();
            prop_assert_eq!(header.icmp_type.calc_checksum(slice.payload()), slice.checksum());
            prop_assert_eq!(slice.payload(), repr.data());
            use etherparse::Icmpv4Type as E;
            match (repr, slice.icmp_type()) {
                (Icmpv4Repr::EchoRequest { ident, seq_no, .. }, E::EchoRequest(echo))
                | (Icmpv4Repr::EchoReply { ident, seq_no, .. }, E::EchoReply(echo)) => {
                    prop_assert_eq!((echo.id, echo.seq), (ident, seq_no));
                }
                (Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, .. }, E::DestinationUnreachable(h)) => {
                    prop_assert_eq!(h.code_u8(), u8::from(reason));
                    if let etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: m } = h {
                        prop_assert_eq!(m, next_hop_mtu);
                    }
                }
                (Icmpv4Repr::TimeExceeded { reason, .. }, E::TimeExceeded(code)) => {
                    prop_assert_eq!(code.code_u8(), u8::from(reason));
                }
                // etherparse knows destination unreachable codes 0..=15 and time exceeded codes 0..=1 only.
                (Icmpv4Repr::DstUnreachable { reason, .. }, E::Unknown { type_u8: 3, code_u8, bytes5to8 }) => {
                    prop_assert!(code_u8 > 15);
                    prop_assert_eq!(code_u8, u8::from(reason));
                    prop_assert_eq!(bytes5to8, [0; 4]);
                }
                (Icmpv4Repr::TimeExceeded { reason, .. }, E::Unknown { type_u8: 11, code_u8, bytes5to8 }) => {
                    prop_assert!(code_u8 > 1);
                    prop_assert_eq!(code_u8, u8::from(reason));
                    prop_assert_eq!(bytes5to8, [0; 4]);
                }
                (repr, other) => prop_assert!(false, "{:?} parsed by etherparse as {:?}", repr, other),
            }
        }
    }

    #[test]
    fn etherparse_agrees_with_the_literals() {
        for literal in [
            &ECHO_REQUEST[..],
            &ECHO_REPLY[..],
            &PORT_UNREACHABLE[..],
            &FRAG_NEEDED[..],
            &TIME_EXCEEDED[..],
        ] {
            let headers = etherparse::PacketHeaders::from_ip_slice(literal).unwrap();
            let Some(etherparse::NetHeaders::Ipv4(ip_header, _)) = headers.net else {
                panic!("no IPv4 header")
            };
            assert_eq!(ip_header.calc_header_checksum(), ip_header.header_checksum);
            let Some(etherparse::TransportHeader::Icmpv4(header)) = headers.transport else {
                panic!("no ICMP")
            };
            let payload = headers.payload.slice();
            assert_eq!(header.icmp_type.calc_checksum(payload), header.checksum);
            assert_eq!(payload, &icmp(literal)[8..]);
        }
        let slice = etherparse::Icmpv4Slice::from_slice(icmp(&FRAG_NEEDED)).unwrap();
        assert_eq!(
            slice.icmp_type(),
            etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1400
                }
            )
        );
    }
}
