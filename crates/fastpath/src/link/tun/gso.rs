//! Segmentation offload at the TUN link: the virtio-net header's GSO packets, both ways.
//!
//! - Transmit: a TCP segment the stack built larger than the MTU ([`PacketMeta::gso_size`]) goes to
//!   the kernel whole, marked `VIRTIO_NET_HDR_GSO_TCPV4` or `_TCPV6`, and the kernel cuts it (TSO, paper 002
//!   §3.3); nothing is segmented in software here. UDP is never sent segmented: the stack fragments
//!   large datagrams at the IP layer.
//! - Receive: a TCP GSO packet (with `TUN_F_TSO4 | TUN_F_TSO6`) is taken whole, copied into one buffer, as one large
//!   segment (GRO's effect); a UDP GSO packet (USO, with `TUN_F_USO4 | TUN_F_USO6`) is split in
//!   software into the datagrams it stands for.
//!
//! [`PacketMeta::gso_size`]: crate::buf::PacketMeta::gso_size

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::vnet::{
    RxDrop, VnetHeader, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4,
    VIRTIO_NET_HDR_GSO_TCPV6, VIRTIO_NET_HDR_GSO_UDP_L4,
};
use crate::buf::{BufferPool, ChecksumOffload, PacketBuf};
use crate::checksum;

/// Most datagrams one GSO packet may stand for (Linux's `UDP_MAX_SEGMENTS`).
pub const UDP_MAX_SEGMENTS: usize = 128;

/// Marks `header`, already asking for a partial checksum from `start`, as a TCP GSO packet of
/// `gso_size`-byte segments, TCP/IPv4 or TCP/IPv6 by the packet's version: the kernel cuts `data`,
/// the segment; `hdr_len` covers the IP and TCP headers (the TCP header's own length, read from its
/// data offset; 20 if the packet is too short to say).
pub(super) fn mark_tso(header: &mut VnetHeader, data: &[u8], l2: usize, start: u16, gso_size: u16) {
    let tcp_len = data
        .get(start as usize + 12)
        .map_or(20, |&b| (b >> 4) as u16 * 4);
    header.gso_type = match data.get(l2) {
        Some(b) if b >> 4 == 6 => VIRTIO_NET_HDR_GSO_TCPV6,
        _ => VIRTIO_NET_HDR_GSO_TCPV4,
    };
    header.gso_size = gso_size;
    header.hdr_len = start + tcp_len;
}

/// A large TCP segment (a TCP GSO packet taken whole) copied into one buffer from `pool`, from the
/// 64 KiB class: the one copy GRO costs. The caller keeps `frame` within the MTU's limit.
pub(super) fn join_tcp_gso(frame: &Frame<'_>, pool: &mut BufferPool) -> PacketBuf {
    let mut big = pool.alloc(frame.len());
    big.extend_from_slice(frame.head);
    big.extend_from_slice(frame.tail);
    big
}

/// A received packet in up to two pieces: the receive buffer, then the scratch area it spilled into.
pub(super) struct Frame<'a> {
    pub(super) head: &'a [u8],
    pub(super) tail: &'a [u8],
}

impl Frame<'_> {
    /// Bytes in both pieces.
    pub(super) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Copies `dst.len()` bytes from offset `from`; the caller keeps within `len()`.
    fn copy_to(&self, from: usize, dst: &mut [u8]) {
        let mut done = 0;
        if from < self.head.len() {
            let n = dst.len().min(self.head.len() - from);
            dst[..n].copy_from_slice(&self.head[from..from + n]);
            done = n;
        }
        if done < dst.len() {
            let at = from + done - self.head.len();
            let rest = dst.len() - done;
            dst[done..].copy_from_slice(&self.tail[at..at + rest]);
        }
    }
}

/// The big-endian 16-bit field at `at`.
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Splits a UDP GSO packet (`VIRTIO_NET_HDR_GSO_UDP_L4`: one IPv4 header, one UDP header, then the
/// payloads of several datagrams of `gso_size` bytes each, the last shorter) into those datagrams, as
/// the kernel's own segmentation would: each gets a copy of the IPv4 header with its own total length,
/// the next IP identifier and a new header checksum, and a UDP header with its own length and the
/// pseudo-header sum in the checksum field, marked [`ChecksumOffload::Partial`]. Returns how many
/// datagrams were queued on `out`; queues none if the packet does not add up.
pub(super) fn split_udp_gso(
    h: &VnetHeader,
    frame: &Frame<'_>,
    mtu: usize,
    pool: &mut BufferPool,
    out: &mut VecDeque<PacketBuf>,
) -> Result<usize, RxDrop> {
    if h.gso_type != VIRTIO_NET_HDR_GSO_UDP_L4 {
        return Err(RxDrop::Gso);
    }
    match frame.head.first().map(|b| b >> 4) {
        Some(6) => split_udp_gso6(h, frame, mtu, pool, out),
        _ => split_udp_gso4(h, frame, mtu, pool, out),
    }
}

/// [`split_udp_gso`] for UDP over IPv4.
fn split_udp_gso4(
    h: &VnetHeader,
    frame: &Frame<'_>,
    mtu: usize,
    pool: &mut BufferPool,
    out: &mut VecDeque<PacketBuf>,
) -> Result<usize, RxDrop> {
    let (head, len) = (frame.head, frame.len());
    if head.len() < 28 || head[0] >> 4 != 4 {
        return Err(RxDrop::GsoMalformed);
    }
    let ihl = (head[0] & 0x0f) as usize * 4;
    if ihl < 20 || ihl + 8 > head.len() {
        return Err(RxDrop::GsoMalformed);
    }
    if h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0
        || h.csum_start as usize != ihl
        || h.csum_offset != 6
    {
        return Err(RxDrop::BadChecksumOffsets);
    }
    let payload = len - ihl - 8;
    let size = h.gso_size as usize;
    if head[9] != 17
        || be16(head, 6) & 0x3fff != 0
        || be16(head, 2) as usize != len
        || be16(head, ihl + 4) as usize != len - ihl
        || size == 0
        || ihl + 8 + size > mtu
        || payload == 0
        || payload.div_ceil(size) > UDP_MAX_SEGMENTS
    {
        return Err(RxDrop::GsoMalformed);
    }
    let src = Ipv4Addr::new(head[12], head[13], head[14], head[15]);
    let dst = Ipv4Addr::new(head[16], head[17], head[18], head[19]);
    let ident = be16(head, 4);
    let segments = payload.div_ceil(size);
    for i in 0..segments {
        let at = i * size;
        let n = size.min(payload - at);
        let mut p = pool.alloc(ihl + 8 + n);
        let d = p.extend(ihl + 8 + n);
        d[..ihl + 8].copy_from_slice(&head[..ihl + 8]);
        d[2..4].copy_from_slice(&((ihl + 8 + n) as u16).to_be_bytes());
        d[4..6].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
        d[10..12].copy_from_slice(&[0, 0]);
        let sum = !checksum::fast(&d[..ihl]);
        d[10..12].copy_from_slice(&sum.to_be_bytes());
        d[ihl + 4..ihl + 6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, (8 + n) as u16);
        d[ihl + 6..ihl + 8].copy_from_slice(&pseudo.to_be_bytes());
        frame.copy_to(ihl + 8 + at, &mut d[ihl + 8..]);
        p.meta.set_checksum(ChecksumOffload::Partial {
            start: ihl as u16,
            offset: 6,
        });
        out.push_back(p);
    }
    Ok(segments)
}

/// [`split_udp_gso`] for UDP over IPv6 (`TUN_F_USO6`): UDP right after the fixed header, each
/// datagram with its own payload length and UDP length, the pseudo-header sum over the 40-byte
/// pseudo-header in the checksum field.
fn split_udp_gso6(
    h: &VnetHeader,
    frame: &Frame<'_>,
    mtu: usize,
    pool: &mut BufferPool,
    out: &mut VecDeque<PacketBuf>,
) -> Result<usize, RxDrop> {
    const IP: usize = 40;
    let (head, len) = (frame.head, frame.len());
    if head.len() < IP + 8 {
        return Err(RxDrop::GsoMalformed);
    }
    if h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0
        || h.csum_start as usize != IP
        || h.csum_offset != 6
    {
        return Err(RxDrop::BadChecksumOffsets);
    }
    let payload = len - IP - 8;
    let size = h.gso_size as usize;
    if head[6] != 17
        || be16(head, 4) as usize != len - IP
        || be16(head, IP + 4) as usize != len - IP
        || size == 0
        || IP + 8 + size > mtu
        || payload == 0
        || payload.div_ceil(size) > UDP_MAX_SEGMENTS
    {
        return Err(RxDrop::GsoMalformed);
    }
    let addr = |at: usize| -> Ipv6Addr {
        let b: [u8; 16] = head[at..at + 16].try_into().expect("16 bytes");
        Ipv6Addr::from(b)
    };
    let (src, dst) = (addr(8), addr(24));
    let segments = payload.div_ceil(size);
    for i in 0..segments {
        let at = i * size;
        let n = size.min(payload - at);
        let mut p = pool.alloc(IP + 8 + n);
        let d = p.extend(IP + 8 + n);
        d[..IP + 8].copy_from_slice(&head[..IP + 8]);
        d[4..6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        d[IP + 4..IP + 6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, (8 + n) as u16);
        d[IP + 6..IP + 8].copy_from_slice(&pseudo.to_be_bytes());
        frame.copy_to(IP + 8 + at, &mut d[IP + 8..]);
        p.meta.set_checksum(ChecksumOffload::Partial {
            start: IP as u16,
            offset: 6,
        });
        out.push_back(p);
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::pair::complete_checksum;
    use crate::link::tun::testing::{
        fake_kernel, framed, needs_csum, partial_udp, udp_checksum_verifies,
    };
    use crate::link::Link;

    fn gso_header(size: u16) -> VnetHeader {
        VnetHeader {
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            gso_size: size,
            hdr_len: 28,
            ..needs_csum(20, 6)
        }
    }

    #[test]
    fn uso_splits_a_gso_packet_into_its_datagrams() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let payload: Vec<u8> = (0..3500u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut sp = partial_udp(&payload);
        sp.data_mut()[4..6].copy_from_slice(&0xfffeu16.to_be_bytes()); // IP identifier wraps
                                                                       // 12 + 3528 bytes: past the 1500-byte link's receive buffer, so it spills into the scratch area.
        kernel.send(&framed(&gso_header(1000), sp.data())).unwrap();
        kernel
            .send(&framed(
                &VnetHeader::default(),
                partial_udp(b"after").data(),
            ))
            .unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 3), 3, "a batch holds at most max");
        assert_eq!(link.receive(&mut batch, 32), 2);
        let sizes: Vec<usize> = batch.iter().map(|p| p.len()).collect();
        assert_eq!(sizes, [1028, 1028, 1028, 528, 33]);
        for (i, p) in batch[..4].iter().enumerate() {
            let d = p.data();
            assert_eq!(be16(d, 2) as usize, d.len(), "IP total length");
            assert_eq!(
                be16(d, 4),
                0xfffeu16.wrapping_add(i as u16),
                "IP identifier"
            );
            assert_eq!(checksum::rfc1071(&d[..20]), 0xffff, "IP header checksum");
            assert_eq!(be16(d, 24) as usize, d.len() - 20, "UDP length");
            assert_eq!(&d[20..24], &sp.data()[20..24], "ports");
            assert_eq!(&d[28..], &payload[i * 1000..(i * 1000 + 1000).min(3500)]);
            assert_eq!(
                p.meta.checksum(),
                ChecksumOffload::Partial {
                    start: 20,
                    offset: 6
                }
            );
            let mut whole = PacketBuf::from_slice(d);
            complete_checksum(&mut whole, 20, 6);
            assert!(udp_checksum_verifies(&whole), "segment {i}");
        }
        let s = link.stats();
        assert_eq!((s.rx_gso_packets, s.rx_gso_segments), (1, 4));
        assert_eq!((s.rx_packets, s.rx_partial, s.rx_dropped()), (5, 4, 0));
    }

    #[test]
    fn uso_splits_an_ipv6_gso_packet_into_its_datagrams() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let payload: Vec<u8> = (0..2500u32).map(|i| (i * 3 + i / 7) as u8).collect();
        let (src, dst): (Ipv6Addr, Ipv6Addr) =
            ("fd00:7::1".parse().unwrap(), "fd00:7::2".parse().unwrap());
        let udp_len = 8 + payload.len();
        let mut p = vec![0u8; 40 + udp_len];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p[40..42].copy_from_slice(&5000u16.to_be_bytes());
        p[42..44].copy_from_slice(&7u16.to_be_bytes());
        p[44..46].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, udp_len as u16);
        p[46..48].copy_from_slice(&pseudo.to_be_bytes());
        p[48..].copy_from_slice(&payload);
        let header = VnetHeader {
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            gso_size: 1000,
            hdr_len: 48,
            ..needs_csum(40, 6)
        };
        kernel.send(&framed(&header, &p)).unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 32), 3);
        for (i, seg) in batch.iter().enumerate() {
            let d = seg.data();
            let n = (2500 - i * 1000).min(1000);
            assert_eq!(d.len(), 48 + n);
            assert_eq!(be16(d, 4) as usize, 8 + n, "IPv6 payload length");
            assert_eq!(be16(d, 44) as usize, 8 + n, "UDP length");
            assert_eq!(&d[48..], &payload[i * 1000..i * 1000 + n]);
            // Completed as the link would, the checksum verifies over the IPv6 pseudo-header.
            let mut whole = PacketBuf::from_slice(d);
            complete_checksum(&mut whole, 40, 6);
            let w = whole.data();
            let sum = checksum::add(
                checksum::pseudo_header_sum(src, dst, 17, (8 + n) as u16),
                checksum::rfc1071(&w[40..]),
            );
            assert_eq!(sum, 0xffff, "segment {i}");
        }
        assert_eq!(link.stats().rx_gso_segments, 3);
    }

    #[test]
    fn malformed_gso_packets_are_dropped_and_counted() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let sp = partial_udp(&[9; 3000]);
        let mut fragment = partial_udp(&[9; 300]);
        fragment.data_mut()[6] = 0x20;
        let mut short_ip = partial_udp(&[9; 300]);
        short_ip.data_mut()[2..4].copy_from_slice(&200u16.to_be_bytes());
        let mut long_udp = partial_udp(&[9; 300]);
        long_udp.data_mut()[24..26].copy_from_slice(&400u16.to_be_bytes());
        let malformed = [
            framed(&gso_header(0), sp.data()),          // a segment size of 0
            framed(&gso_header(1473), sp.data()),       // segments past the MTU
            framed(&gso_header(10), sp.data()),         // 300 segments
            framed(&gso_header(100), fragment.data()),  // a fragment
            framed(&gso_header(100), short_ip.data()),  // IP length disagrees
            framed(&gso_header(100), long_udp.data()),  // UDP length disagrees
            framed(&gso_header(100), &sp.data()[..25]), // no UDP header
        ];
        for frame in &malformed {
            kernel.send(frame).unwrap();
        }
        let no_csum = VnetHeader {
            flags: 0,
            ..gso_header(1000)
        };
        kernel.send(&framed(&no_csum, sp.data())).unwrap();
        let tcp = VnetHeader {
            gso_type: 1,
            ..gso_header(1000)
        };
        kernel.send(&framed(&tcp, sp.data())).unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 64), 0);
        let s = link.stats();
        assert_eq!(s.rx_drop_gso_malformed, malformed.len() as u64, "{s:?}");
        assert_eq!(s.rx_drop_bad_checksum_offsets, 1);
        assert_eq!(s.rx_drop_gso, 1);
        assert_eq!(s.rx_gso_packets, 0);

        // Without USO, a GSO packet is dropped whatever it holds.
        let (mut link, kernel) = fake_kernel(true);
        kernel
            .send(&framed(&gso_header(100), partial_udp(&[1; 300]).data()))
            .unwrap();
        assert_eq!(link.receive(&mut batch, 64), 0);
        assert_eq!(link.stats().rx_drop_gso, 1);
    }

    #[test]
    fn random_frames_through_a_uso_link_never_panic() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let mut rng = crate::rng::Rng::new(11);
        let mut batch = Vec::new();
        for round in 0..3000 {
            let len = rng.below(4000) as usize;
            let mut p = partial_udp(&vec![3; len]).data().to_vec();
            // Damage a few bytes of the headers, sometimes.
            for _ in 0..rng.below(3) {
                let at = rng.below(28) as usize;
                p[at] = rng.below(256) as u8;
            }
            p.truncate(rng.below(p.len() as u64 + 1) as usize + rng.below(2) as usize * p.len());
            let h = VnetHeader {
                flags: rng.below(4) as u8,
                gso_type: [0, 5, 5, 1, 0x85][rng.below(5) as usize],
                hdr_len: rng.below(100) as u16,
                gso_size: [0, 1, 8, 100, 1000, 1472, 1473, 65535][rng.below(8) as usize],
                csum_start: [20, 20, 0, 24, 60, 65535][rng.below(6) as usize],
                csum_offset: [6, 6, 0, 4, 65535][rng.below(5) as usize],
            };
            kernel.send(&framed(&h, &p)).unwrap();
            if round % 8 == 7 {
                link.receive(&mut batch, 64);
                batch.clear();
            }
        }
        while link.receive(&mut batch, 64) > 0 {
            batch.clear();
        }
        let s = link.stats();
        assert!(s.rx_gso_packets > 0 && s.rx_drop_gso_malformed > 0, "{s:?}");
    }

    #[test]
    fn tso_marks_the_header_with_the_tcp_header_length() {
        let mut segment = vec![0u8; 20 + 32 + 100];
        segment[32] = 0x80; // data offset 8 words: 32 bytes of TCP header
        let mut h = needs_csum(20, 16);
        mark_tso(&mut h, &segment, 0, 20, 1448);
        assert_eq!((h.gso_type, h.gso_size, h.hdr_len), (1, 1448, 52));
        let mut h = needs_csum(20, 16);
        mark_tso(&mut h, &segment[..30], 0, 20, 1000);
        assert_eq!(h.hdr_len, 40, "too short to say: 20 bytes of TCP header");
    }

    #[test]
    fn a_frame_copies_across_its_two_pieces() {
        let frame = Frame {
            head: &[1, 2, 3],
            tail: &[4, 5, 6, 7],
        };
        assert_eq!(frame.len(), 7);
        let mut dst = [0u8; 4];
        frame.copy_to(1, &mut dst);
        assert_eq!(dst, [2, 3, 4, 5]);
        frame.copy_to(3, &mut dst);
        assert_eq!(dst, [4, 5, 6, 7]);
        let mut pool = BufferPool::new(crate::buf::BufferMode::Heap, 0);
        assert_eq!(
            join_tcp_gso(&frame, &mut pool).data(),
            &[1, 2, 3, 4, 5, 6, 7]
        );
    }
}
