//! The virtio-net header in front of every packet on the TUN descriptor: its layout, its flags and
//! GSO types, and what a received header says about its packet once checked against it.
//!
//! The layout is virtio 1.0's `struct virtio_net_hdr_v1` (12 bytes, with `num_buffers`, which we never
//! use); the legacy header is its first 10 bytes. The fields are in host byte order, TUN's default for
//! the legacy header.

use super::super::pair::complete_checksum;
use crate::buf::{ChecksumOffload, PacketBuf};

/// Bytes of the virtio-net header in front of every packet (`struct virtio_net_hdr_v1`, with
/// `num_buffers`).
pub const VNET_HEADER_LEN: usize = 12;

/// `flags`: the transport checksum is partial; the receiver completes it from `csum_start` and
/// `csum_offset`.
pub(super) const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// `flags`: the sender has verified the checksums.
pub(super) const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
/// `gso_type`: an ordinary packet.
pub(super) const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
/// `gso_type`: a TCP/IPv4 segment to be cut into `gso_size` pieces of payload.
pub(super) const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
/// `gso_type`: a TCP/IPv6 segment to be cut into `gso_size` pieces of payload.
pub(super) const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;

/// True for the TCP GSO types (IPv4 and IPv6).
pub(super) fn is_tcp_gso(gso_type: u8) -> bool {
    gso_type == VIRTIO_NET_HDR_GSO_TCPV4 || gso_type == VIRTIO_NET_HDR_GSO_TCPV6
}
/// `gso_type`: a UDP datagram standing for several of `gso_size` bytes of payload each (USO).
pub(super) const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

/// Why the link refused a packet from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RxDrop {
    BadChecksumOffsets,
    Gso,
    GsoMalformed,
}

/// What the virtio header said about a packet's checksum, once checked against the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RxChecksum {
    /// As [`PacketMeta`](crate::buf::PacketMeta) will carry it.
    Meta(ChecksumOffload),
    /// The link completed a partial checksum itself.
    Completed,
}

/// The fields of a virtio-net header we read or write, in host byte order (TUN's default for the
/// legacy header; `num_buffers`, the last two bytes, is ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct VnetHeader {
    pub(super) flags: u8,
    pub(super) gso_type: u8,
    pub(super) hdr_len: u16,
    pub(super) gso_size: u16,
    pub(super) csum_start: u16,
    pub(super) csum_offset: u16,
}

impl VnetHeader {
    /// Reads a header from the first bytes of a frame.
    pub(super) fn parse(b: &[u8; VNET_HEADER_LEN]) -> VnetHeader {
        VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16::from_ne_bytes([b[2], b[3]]),
            gso_size: u16::from_ne_bytes([b[4], b[5]]),
            csum_start: u16::from_ne_bytes([b[6], b[7]]),
            csum_offset: u16::from_ne_bytes([b[8], b[9]]),
        }
    }

    /// The header as it goes in front of a packet.
    pub(super) fn emit(&self) -> [u8; VNET_HEADER_LEN] {
        let mut b = [0; VNET_HEADER_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// Checks a received packet's virtio header against the packet and says what its checksum state is.
/// `packet` is the IP packet alone; a partial checksum the stack could not trust is completed in it.
pub(super) fn classify_rx(
    header: &VnetHeader,
    packet: &mut PacketBuf,
    offload: bool,
    tso: bool,
    l2: usize,
) -> Result<RxChecksum, RxDrop> {
    let tcp_gso = tso && is_tcp_gso(header.gso_type);
    if header.gso_type != VIRTIO_NET_HDR_GSO_NONE && !tcp_gso {
        return Err(RxDrop::Gso);
    }
    if tcp_gso && header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0 {
        // A GSO packet always leaves its checksum to the receiver: anything else is malformed.
        return Err(RxDrop::GsoMalformed);
    }
    if header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        let (start, offset) = (header.csum_start as usize, header.csum_offset as usize);
        // The IP header starts after `l2` bytes of link header (a TAP device's Ethernet header);
        // the offsets count from the packet's first byte.
        let (whole_len, data) = (packet.len(), packet.data().get(l2..).unwrap_or(&[]));
        // The IP header's own length (IPv4's IHL; IPv6's fixed 40 bytes), and the protocol right
        // after it; the checksum must start past the header.
        let (ip_len, protocol, fragment) = match data.first().map(|b| b >> 4) {
            Some(4) if data.len() >= 20 => (
                (data[0] & 0x0f) as usize * 4,
                data[9],
                u16::from_be_bytes([data[6], data[7]]) & 0x3fff != 0,
            ),
            // IPv6 with the transport right after the fixed header (no extension headers).
            Some(6) if data.len() >= 40 => (40, data[6], false),
            _ => (20, 0, true),
        };
        if start < l2 + ip_len.max(20) || start + offset + 2 > whole_len {
            return Err(RxDrop::BadChecksumOffsets);
        }
        // The shapes the stack's UDP and TCP input can trust as partial: a whole (unfragmented) UDP
        // datagram or TCP segment whose checksum field is where its header says.
        let whole = start == l2 + ip_len && !fragment;
        let udp = whole && offset == 6 && start + 8 <= whole_len && protocol == 17;
        let tcp = whole && offset == 16 && start + 20 <= whole_len && protocol == 6;
        if offload && (udp || tcp) {
            return Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: start as u16,
                offset: offset as u16,
            }));
        }
        complete_checksum(packet, start, offset);
        return Ok(RxChecksum::Completed);
    }
    if offload && header.flags & VIRTIO_NET_HDR_F_DATA_VALID != 0 {
        return Ok(RxChecksum::Meta(ChecksumOffload::Valid));
    }
    Ok(RxChecksum::Meta(ChecksumOffload::None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tun::testing::{needs_csum, partial_udp, udp_checksum_verifies};

    #[test]
    fn tcp_gso_packets_are_taken_whole_only_with_tso_and_a_partial_checksum() {
        // A TCP segment larger than the MTU would be, as the kernel's TSO hands it over.
        let mut bytes = vec![0u8; 20 + 20 + 3000];
        bytes[0] = 0x45;
        let total = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        bytes[8] = 64;
        bytes[9] = 6;
        bytes[32] = 0x50;
        let mut gso = needs_csum(20, 16);
        gso.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
        gso.gso_size = 1448;
        let mut p = PacketBuf::from_slice(&bytes);
        assert_eq!(
            classify_rx(&gso, &mut p, true, true, 0),
            Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: 20,
                offset: 16
            }))
        );
        assert_eq!(classify_rx(&gso, &mut p, true, false, 0), Err(RxDrop::Gso));
        gso.flags = 0;
        assert_eq!(
            classify_rx(&gso, &mut p, true, true, 0),
            Err(RxDrop::GsoMalformed)
        );
    }

    #[test]
    fn headers_round_trip() {
        let h = VnetHeader {
            flags: 3,
            gso_type: 5,
            hdr_len: 42,
            gso_size: 1400,
            csum_start: 20,
            csum_offset: 6,
        };
        assert_eq!(VnetHeader::parse(&h.emit()), h);
    }

    #[test]
    fn a_partial_udp_checksum_is_trusted_with_offload_and_completed_without() {
        let mut p = partial_udp(b"hello");
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, true, false, 0),
            Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: 20,
                offset: 6
            }))
        );
        assert!(!udp_checksum_verifies(&p));
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, false, false, 0),
            Ok(RxChecksum::Completed)
        );
        assert!(udp_checksum_verifies(&p));
    }

    #[test]
    fn lying_checksum_offsets_are_dropped() {
        let len = partial_udp(b"hello").len() as u16;
        for (start, offset) in [
            (len, 0),
            (len - 1, 0),
            (20, len),
            (20, u16::MAX),
            (u16::MAX, u16::MAX),
            (10, 0), // inside the IP header
            (0, 6),
        ] {
            let mut p = partial_udp(b"hello");
            let before = p.data().to_vec();
            assert_eq!(
                classify_rx(&needs_csum(start, offset), &mut p, true, false, 0),
                Err(RxDrop::BadChecksumOffsets),
                "start {start} offset {offset}"
            );
            assert_eq!(p.data(), &before[..], "nothing written");
        }
    }

    #[test]
    fn a_partial_checksum_of_another_shape_is_completed_by_the_link() {
        // In bounds but not the UDP layout the stack trusts (an offset of 4): the link completes the
        // sum where the header says, as a device would, and hands the packet on unmarked.
        let mut p = partial_udp(b"hello world");
        assert_eq!(
            classify_rx(&needs_csum(20, 4), &mut p, true, false, 0),
            Ok(RxChecksum::Completed)
        );
        // A fragment is never trusted as partial either.
        let mut p = partial_udp(b"hello world");
        p.data_mut()[6] = 0x20; // more fragments
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, true, false, 0),
            Ok(RxChecksum::Completed)
        );
        // Nor is a packet too short to be an IPv4 packet, nor one with no packet at all.
        let mut p = PacketBuf::from_slice(&[0u8; 24]);
        assert_eq!(
            classify_rx(&needs_csum(20, 0), &mut p, true, false, 0),
            Ok(RxChecksum::Completed)
        );
        let mut p = PacketBuf::from_slice(&[]);
        assert_eq!(
            classify_rx(&needs_csum(0, 0), &mut p, true, false, 0),
            Err(RxDrop::BadChecksumOffsets)
        );
    }

    #[test]
    fn gso_packets_are_dropped_whatever_their_size() {
        for (gso_type, gso_size) in [
            (5, 0),
            (5, 1400),
            (1, 1448),
            (3, 0),
            (0x80 | 5, 100),
            (9, 1),
        ] {
            let mut p = partial_udp(&[7; 3000]);
            let h = VnetHeader {
                gso_type,
                gso_size,
                ..needs_csum(20, 6)
            };
            assert_eq!(classify_rx(&h, &mut p, true, false, 0), Err(RxDrop::Gso));
        }
    }

    #[test]
    fn data_valid_counts_only_with_offload() {
        let h = VnetHeader {
            flags: VIRTIO_NET_HDR_F_DATA_VALID,
            ..VnetHeader::default()
        };
        let mut p = partial_udp(b"x");
        assert_eq!(
            classify_rx(&h, &mut p, true, false, 0),
            Ok(RxChecksum::Meta(ChecksumOffload::Valid))
        );
        assert_eq!(
            classify_rx(&h, &mut p, false, false, 0),
            Ok(RxChecksum::Meta(ChecksumOffload::None))
        );
        assert_eq!(
            classify_rx(&VnetHeader::default(), &mut p, true, false, 0),
            Ok(RxChecksum::Meta(ChecksumOffload::None))
        );
    }

    #[test]
    fn random_headers_never_panic() {
        let mut rng = crate::rng::Rng::new(5);
        for _ in 0..20_000 {
            let mut raw = [0u8; VNET_HEADER_LEN];
            for b in &mut raw {
                *b = rng.below(256) as u8;
            }
            // Keep the flags and GSO type interesting: mostly no GSO, often NEEDS_CSUM.
            raw[1] = if rng.chance(0.8) { 0 } else { raw[1] };
            let mut h = VnetHeader::parse(&raw);
            if rng.chance(0.7) {
                h.csum_start = rng.below(80) as u16;
                h.csum_offset = rng.below(40) as u16;
            }
            let len = rng.below(64) as usize;
            let mut p = partial_udp(&vec![1; len]);
            p.truncate(rng.below(p.len() as u64 + 1) as usize);
            let _ = classify_rx(&h, &mut p, rng.chance(0.5), rng.chance(0.5), 0);
        }
    }
}
