//! Reading UDP/IPv4 datagrams out of a pcap or pcapng capture, as `tcpdump -w` writes them.
//!
//! Link types: Ethernet (1, with up to two VLAN tags), raw IP (101, and 12/14 as some systems write
//! it), IPv4 (228), Linux cooked (113) and its second version (276), and BSD null/loopback (0, 108).
//! A packet the capture cut short, or whose headers contradict each other, is counted as malformed and
//! skipped; other protocols and non-first fragments are counted and skipped. Checksums are not checked:
//! captures taken on the sending host often hold checksums the NIC fills in later.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

use super::population::Datagram;

/// The first four bytes of a pcapng file (a section header block).
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

/// What reading a capture found, besides the datagrams.
#[derive(Clone, Debug, Default)]
pub struct CaptureSummary {
    /// `pcap` or `pcapng`.
    pub format: &'static str,
    /// The link types seen (numbers of the tcpdump.org registry).
    pub link_types: Vec<u32>,
    /// Packets read.
    pub packets: u64,
    /// IPv4 UDP datagrams (first fragments included).
    pub udp: u64,
    /// Packets that are not IPv4 UDP (ARP, IPv6, TCP, ICMP...).
    pub other: u64,
    /// Non-first IPv4 fragments of UDP datagrams (their datagram was counted with its first fragment).
    pub fragments: u64,
    /// Packets whose headers are cut short or inconsistent.
    pub malformed: u64,
    /// Packets on an interface whose link type is not supported.
    pub unsupported_link: u64,
    /// The error that ended reading early, if the file itself is damaged.
    pub stopped_by: Option<String>,
}

/// What one packet turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// An IPv4 UDP datagram (or its first fragment).
    Udp(Datagram),
    /// Something else.
    Other,
    /// A later fragment of an IPv4 UDP datagram.
    Fragment,
    /// Headers cut short or inconsistent.
    Malformed,
    /// A link type this reader does not know.
    UnsupportedLink,
}

/// True for the link types [`parse_packet`] understands.
pub fn link_supported(link: u32) -> bool {
    matches!(link, 0 | 1 | 12 | 14 | 101 | 108 | 113 | 228 | 276)
}

/// A name for a link type, for reports.
pub fn link_name(link: u32) -> String {
    match link {
        0 => "null/loopback".into(),
        1 => "Ethernet".into(),
        12 | 14 | 101 => "raw IP".into(),
        108 => "OpenBSD loopback".into(),
        113 => "Linux cooked".into(),
        228 => "raw IPv4".into(),
        276 => "Linux cooked v2".into(),
        n => format!("unsupported ({n})"),
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parses one captured frame of link type `link`.
pub fn parse_packet(link: u32, frame: &[u8]) -> Parsed {
    const ETHERTYPE_IPV4: u16 = 0x0800;
    let ip = match link {
        1 => {
            let mut at = 12;
            loop {
                if frame.len() < at + 2 {
                    return Parsed::Malformed;
                }
                match be16(frame, at) {
                    0x8100 | 0x88A8 | 0x9100 => at += 4,
                    ETHERTYPE_IPV4 => break &frame[at + 2..],
                    _ => return Parsed::Other,
                }
            }
        }
        12 | 14 | 101 => match frame.first().map(|b| b >> 4) {
            Some(4) => frame,
            Some(6) => return Parsed::Other,
            _ => return Parsed::Malformed,
        },
        228 => frame,
        113 => {
            if frame.len() < 16 {
                return Parsed::Malformed;
            }
            if be16(frame, 14) != ETHERTYPE_IPV4 {
                return Parsed::Other;
            }
            &frame[16..]
        }
        276 => {
            if frame.len() < 20 {
                return Parsed::Malformed;
            }
            if be16(frame, 0) != ETHERTYPE_IPV4 {
                return Parsed::Other;
            }
            &frame[20..]
        }
        0 | 108 => {
            // The address family, in the capturing host's byte order (0) or network order (108).
            // AF_INET is 2 everywhere.
            let Some(family) = frame.get(..4) else {
                return Parsed::Malformed;
            };
            let family: [u8; 4] = [family[0], family[1], family[2], family[3]];
            if u32::from_le_bytes(family) != 2 && u32::from_be_bytes(family) != 2 {
                return Parsed::Other;
            }
            &frame[4..]
        }
        _ => return Parsed::UnsupportedLink,
    };
    parse_ipv4(ip)
}

/// Parses an IPv4 header and the UDP ports after it.
pub fn parse_ipv4(ip: &[u8]) -> Parsed {
    const UDP: u8 = 17;
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Parsed::Malformed;
    }
    let header_len = usize::from(ip[0] & 0x0F) * 4;
    let total_len = usize::from(be16(ip, 2));
    if header_len < 20 || ip.len() < header_len || total_len < header_len {
        return Parsed::Malformed;
    }
    if ip[9] != UDP {
        return Parsed::Other;
    }
    let flags_offset = be16(ip, 6);
    let more_fragments = flags_offset & 0x2000 != 0;
    if flags_offset & 0x1FFF != 0 {
        return Parsed::Fragment;
    }
    // The UDP header must be inside the datagram and inside what was captured.
    if total_len < header_len + 8 || ip.len() < header_len + 8 {
        return Parsed::Malformed;
    }
    let udp = &ip[header_len..];
    let udp_len = usize::from(be16(udp, 4));
    if udp_len < 8 || (!more_fragments && udp_len > total_len - header_len) {
        return Parsed::Malformed;
    }
    let src_port = be16(udp, 0);
    let dst_port = be16(udp, 2);
    if dst_port == 0 {
        return Parsed::Malformed;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    Parsed::Udp(Datagram {
        src: SocketAddrV4::new(src, src_port),
        dst: SocketAddrV4::new(dst, dst_port),
    })
}

impl CaptureSummary {
    fn count(&mut self, link: u32, frame: &[u8], out: &mut Vec<Datagram>) {
        self.packets += 1;
        match parse_packet(link, frame) {
            Parsed::Udp(d) => {
                self.udp += 1;
                out.push(d);
            }
            Parsed::Other => self.other += 1,
            Parsed::Fragment => self.fragments += 1,
            Parsed::Malformed => self.malformed += 1,
            Parsed::UnsupportedLink => self.unsupported_link += 1,
        }
    }

    fn saw_link(&mut self, link: u32) {
        if !self.link_types.contains(&link) {
            self.link_types.push(link);
        }
    }
}

/// Reads every IPv4 UDP datagram of the capture at `path` (pcap or pcapng, told apart by the magic
/// number).
pub fn read_capture(path: &Path) -> Result<(Vec<Datagram>, CaptureSummary), String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let head = reader
        .fill_buf()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let pcapng = head.starts_with(&PCAPNG_MAGIC);
    let mut datagrams = Vec::new();
    let mut summary = CaptureSummary::default();
    let bad =
        |e: pcap_file::PcapError| format!("{}: not a pcap or pcapng capture ({e})", path.display());
    if pcapng {
        summary.format = "pcapng";
        let mut ng = PcapNgReader::new(reader).map_err(bad)?;
        // Link types of the current section's interfaces, by interface id. The reader has already
        // taken in the first section header.
        let mut interfaces: Vec<u32> = Vec::new();
        while let Some(block) = ng.next_block() {
            let block = match block {
                Ok(b) => b,
                Err(e) => {
                    summary.stopped_by = Some(e.to_string());
                    break;
                }
            };
            let (interface, data) = match &block {
                Block::SectionHeader(_) => {
                    interfaces.clear();
                    continue;
                }
                Block::InterfaceDescription(i) => {
                    interfaces.push(u32::from(i.linktype));
                    continue;
                }
                Block::EnhancedPacket(p) => (p.interface_id, &p.data),
                Block::SimplePacket(p) => (0, &p.data),
                Block::Packet(p) => (u32::from(p.interface_id), &p.data),
                _ => continue,
            };
            match interfaces.get(interface as usize) {
                Some(&link) => {
                    summary.saw_link(link);
                    summary.count(link, data, &mut datagrams);
                }
                None => {
                    // A packet naming an interface that was never described.
                    summary.packets += 1;
                    summary.malformed += 1;
                }
            }
        }
    } else {
        summary.format = "pcap";
        let mut pcap = PcapReader::new(reader).map_err(bad)?;
        let link = u32::from(pcap.header().datalink);
        summary.saw_link(link);
        if !link_supported(link) {
            return Err(format!(
                "{}: link type {link} is not supported (Ethernet, raw IP, Linux cooked, null/loopback are)",
                path.display()
            ));
        }
        while let Some(packet) = pcap.next_packet() {
            match packet {
                Ok(p) => summary.count(link, &p.data, &mut datagrams),
                Err(e) => {
                    summary.stopped_by = Some(e.to_string());
                    break;
                }
            }
        }
    }
    if summary.stopped_by.is_some() {
        // The damaged record is a malformed packet too.
        summary.malformed += 1;
    }
    Ok((datagrams, summary))
}

/// True for addresses a datagram can be unicast to.
pub fn is_unicast(a: Ipv4Addr) -> bool {
    !(a.is_multicast() || a.is_broadcast() || a.is_unspecified())
}

/// The unicast address most datagrams are sent to (ties go to the lowest address), with its count.
pub fn busiest_destination(datagrams: &[Datagram]) -> Option<(Ipv4Addr, usize)> {
    let mut counts: HashMap<Ipv4Addr, usize> = HashMap::new();
    for d in datagrams.iter().filter(|d| is_unicast(*d.dst.ip())) {
        *counts.entry(*d.dst.ip()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 UDP packet from 10.0.0.2:5000 to 10.0.0.1:53 with 4 payload bytes.
    fn ipv4_udp() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
        ];
        p.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
        p
    }

    fn expected() -> Parsed {
        Parsed::Udp(Datagram {
            src: "10.0.0.2:5000".parse().unwrap(),
            dst: "10.0.0.1:53".parse().unwrap(),
        })
    }

    #[test]
    fn every_link_type_finds_the_datagram() {
        let ip = ipv4_udp();
        let mut eth = vec![0; 12];
        eth.extend_from_slice(&[0x08, 0x00]);
        eth.extend_from_slice(&ip);
        assert_eq!(parse_packet(1, &eth), expected());
        let mut vlan = vec![0; 12];
        vlan.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]);
        vlan.extend_from_slice(&ip);
        assert_eq!(parse_packet(1, &vlan), expected());
        assert_eq!(parse_packet(101, &ip), expected());
        assert_eq!(parse_packet(228, &ip), expected());
        let mut sll = vec![0; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        sll.extend_from_slice(&ip);
        assert_eq!(parse_packet(113, &sll), expected());
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend_from_slice(&[0; 18]);
        sll2.extend_from_slice(&ip);
        assert_eq!(parse_packet(276, &sll2), expected());
        for family in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            let mut null = family.to_vec();
            null.extend_from_slice(&ip);
            assert_eq!(parse_packet(0, &null), expected());
        }
        let mut ipv6_null = vec![30, 0, 0, 0];
        ipv6_null.extend_from_slice(&ip);
        assert_eq!(parse_packet(0, &ipv6_null), Parsed::Other);
        assert_eq!(parse_packet(147, &ip), Parsed::UnsupportedLink);
    }

    #[test]
    fn damage_is_counted_not_fatal() {
        let ip = ipv4_udp();
        for cut in 0..28 {
            assert_eq!(
                parse_packet(101, &ip[..cut]),
                Parsed::Malformed,
                "cut {cut}"
            );
        }
        let mut bad_ihl = ip.clone();
        bad_ihl[0] = 0x44;
        assert_eq!(parse_packet(228, &bad_ihl), Parsed::Malformed);
        let mut short_total = ip.clone();
        short_total[3] = 24;
        assert_eq!(parse_packet(228, &short_total), Parsed::Malformed);
        let mut long_udp = ip.clone();
        long_udp[25] = 200;
        assert_eq!(parse_packet(228, &long_udp), Parsed::Malformed);
        let mut tcp = ip.clone();
        tcp[9] = 6;
        assert_eq!(parse_packet(228, &tcp), Parsed::Other);
        let mut later_fragment = ip.clone();
        later_fragment[7] = 8;
        assert_eq!(parse_packet(228, &later_fragment), Parsed::Fragment);
        assert_eq!(parse_packet(1, &[0; 13]), Parsed::Malformed);
        assert_eq!(parse_packet(113, &[0; 15]), Parsed::Malformed);
        assert_eq!(parse_packet(0, &[2, 0]), Parsed::Malformed);
    }

    #[test]
    fn busiest_destination_ignores_broadcast() {
        let d = |dst: &str| Datagram {
            src: "10.0.0.9:1".parse().unwrap(),
            dst: dst.parse().unwrap(),
        };
        let trace = [
            d("255.255.255.255:67"),
            d("255.255.255.255:67"),
            d("224.0.0.251:5353"),
            d("224.0.0.251:5353"),
            d("10.0.0.1:53"),
            d("10.0.0.2:53"),
            d("10.0.0.2:54"),
        ];
        assert_eq!(
            busiest_destination(&trace),
            Some((Ipv4Addr::new(10, 0, 0, 2), 2))
        );
    }
}
