//! The link-layer parsers: Ethernet II (with an 802.1Q tag) and ARP for IPv4 over Ethernet.
//!
//! As the IP targets: the parser's verdict against a model written here from the standards, every
//! field read back against the bytes, and the emitter giving the header's bytes back.

use fastpath::wire::{ArpOp, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr, WireError};

use crate::be16;

/// IEEE 802.3 / 802.1Q's rules as `EthernetFrame::new_checked` documents them.
fn ethernet_model(data: &[u8]) -> Result<usize, WireError> {
    if data.len() < 14 {
        return Err(WireError::Truncated);
    }
    let (mut ty, mut header) = (be16(data, 12), 14);
    if ty == 0x8100 {
        if data.len() < 18 {
            return Err(WireError::Truncated);
        }
        ty = be16(data, 16);
        header = 18;
        if ty == 0x8100 || ty == 0x88a8 {
            return Err(WireError::Unrecognized);
        }
    }
    if ty < 0x0600 {
        return Err(WireError::Unrecognized);
    }
    Ok(header)
}

/// The Ethernet parser: its verdict is the model's; the fields are the bytes'; emitting the parsed
/// header gives its bytes back; the payload is the rest of the frame.
pub fn ethernet(data: &[u8]) {
    let model = ethernet_model(data);
    let checked = EthernetFrame::new_checked(data);
    assert_eq!(checked.as_ref().err().copied(), model.err(), "new_checked");
    let (Ok(frame), Ok(header)) = (checked, model) else {
        return;
    };
    let repr = EthernetRepr::parse(&frame);
    assert_eq!(frame.header_len(), header);
    assert_eq!(repr.header_len(), header);
    assert_eq!(repr.dst.0[..], data[0..6]);
    assert_eq!(repr.src.0[..], data[6..12]);
    assert_eq!(u16::from(repr.ethertype), be16(data, header - 2));
    if let Some(tag) = repr.vlan {
        let tci = be16(data, 14);
        assert_eq!(
            (tag.priority, tag.drop_eligible, tag.id),
            ((tci >> 13) as u8, tci & 0x1000 != 0, tci & 0xfff)
        );
    }
    let mut out = vec![0u8; header];
    repr.emit(&mut out);
    assert_eq!(out[..], data[..header], "emit");
    assert_eq!(frame.payload(), &data[header..]);
}

/// RFC 826's message for IPv4 over Ethernet, as `ArpPacket::new_checked` documents it.
fn arp_model(data: &[u8]) -> Result<(), WireError> {
    if data.len() < 28 {
        return Err(WireError::Truncated);
    }
    if be16(data, 0) != 1 || be16(data, 2) != 0x0800 || data[4] != 6 || data[5] != 4 {
        return Err(WireError::Unrecognized);
    }
    if !matches!(be16(data, 6), 1 | 2) {
        return Err(WireError::Unrecognized);
    }
    Ok(())
}

/// The ARP parser: its verdict is the model's; the fields are the bytes'; emitting gives the 28
/// bytes back.
pub fn arp(data: &[u8]) {
    let model = arp_model(data);
    let checked = ArpPacket::new_checked(data);
    assert_eq!(checked.as_ref().err().copied(), model.err(), "new_checked");
    let Ok(packet) = checked else {
        return;
    };
    let repr = ArpRepr::parse(&packet);
    let op = if be16(data, 6) == 1 {
        ArpOp::Request
    } else {
        ArpOp::Reply
    };
    assert_eq!(repr.op, op);
    assert_eq!(repr.sender_mac.0[..], data[8..14]);
    assert_eq!(repr.sender_ip.octets()[..], data[14..18]);
    assert_eq!(repr.target_mac.0[..], data[18..24]);
    assert_eq!(repr.target_ip.octets()[..], data[24..28]);
    let mut out = [0u8; 28];
    repr.emit(&mut out);
    assert_eq!(out[..], data[..28], "emit");
}

/// The neighbour cache and ARP over it, driven by a program: packets to resolve, ARP messages in
/// (any sender, any target, requests and replies), learned and confirmed addresses, clock steps.
/// Checks: the cache never holds more than its bound; an ARP message never makes more than one
/// message out, never to a group address, never claiming an address not ours; a reply never
/// creates an entry; every packet held comes back exactly once (sent, dropped from a full queue,
/// given back when the cache is full, or dropped when its neighbour fails).
pub fn neighbor(data: &[u8]) {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use fastpath::buf::PacketBuf;
    use fastpath::ethernet::{
        arp_input, ArpInterface, NeighborAction, NeighborCache, NeighborConfig, Resolved,
    };
    use fastpath::wire::MacAddr;
    use fastpath::Instant;

    use crate::Input;

    let mut input = Input::new(data);
    let cfg = NeighborConfig {
        max_entries: 1 + input.below(8),
        queue_bytes: 64 + input.below(512),
        ..NeighborConfig::default()
    };
    let mut cache: NeighborCache<Ipv4Addr> = NeighborCache::new(cfg);
    let iface = ArpInterface {
        mac: MacAddr([2, 0, 0, 0, 0, 1]),
        addrs: vec![Ipv4Addr::new(10, 0, 0, 1)],
    };
    let mut now = Instant::from_secs(1);
    // Packets handed in and packets come back, by their one-byte tag.
    let (mut given, mut back) = (0usize, 0usize);
    let addr = |n: u8| Ipv4Addr::new(10, 0, 0, n % 8);
    let mac = |n: u8| {
        // Mostly unicast neighbours, sometimes group, zero or our own addresses.
        match n % 16 {
            0 => MacAddr::BROADCAST,
            1 => MacAddr([0, 0, 0, 0, 0, 0]),
            2 => MacAddr([2, 0, 0, 0, 0, 1]),
            3 => MacAddr([1, 0, 0x5e, 0, 0, 1]),
            k => MacAddr([2, 0, 0, 0, 1, k]),
        }
    };
    while !input.is_empty() {
        match input.below(6) {
            0 => {
                let len = input.below(300);
                let mut p = PacketBuf::with_storage(vec![0; len + 16], 16);
                p.extend_from_slice(&vec![0; len]);
                given += 1;
                match cache.resolve(addr(input.u8()), p, now) {
                    Resolved::Send(..) | Resolved::Full(_) => back += 1,
                    Resolved::Held { dropped, .. } => back += dropped.len(),
                }
            }
            1 => {
                let op = if input.bool() {
                    fastpath::wire::ArpOp::Request
                } else {
                    fastpath::wire::ArpOp::Reply
                };
                let repr = fastpath::wire::ArpRepr {
                    op,
                    sender_mac: mac(input.u8()),
                    sender_ip: addr(input.u8()),
                    target_mac: mac(input.u8()),
                    target_ip: addr(input.u8()),
                };
                let existed = cache.state(repr.sender_ip).is_some();
                let out = arp_input(&mut cache, &iface, &repr, now);
                back += out.released.len();
                if let Some((dst, reply)) = out.reply {
                    assert!(dst.is_unicast(), "a reply to {dst}");
                    assert!(
                        iface.addrs.contains(&reply.sender_ip),
                        "a reply claiming {}",
                        reply.sender_ip
                    );
                    assert_eq!(reply.sender_mac, iface.mac);
                }
                if repr.op == fastpath::wire::ArpOp::Reply && !existed {
                    assert!(
                        cache.state(repr.sender_ip).is_none(),
                        "a reply made an entry"
                    );
                }
            }
            2 => {
                back += cache
                    .learn(addr(input.u8()), mac(input.u8() | 4), now)
                    .len()
            }
            3 => cache.confirm(addr(input.u8()), now),
            4 => now = now + Duration::from_millis(u64::from(input.u16())),
            _ => {
                for action in cache.poll(now) {
                    if let NeighborAction::Failed { dropped, .. } = action {
                        back += dropped.len();
                    }
                }
            }
        }
        assert!(cache.len() <= cfg.max_entries, "{} entries", cache.len());
    }
    // Whatever still waits comes back when every neighbour is given up.
    for _ in 0..8 {
        now = now + Duration::from_secs(10);
        for action in cache.poll(now) {
            if let NeighborAction::Failed { dropped, .. } = action {
                back += dropped.len();
            }
        }
    }
    // Packets held for an address that was then learned came back through `learn`'s update only
    // if it released them: count what an answer would release now.
    for n in 0..8u8 {
        back += cache
            .heard(
                addr(n),
                MacAddr([2, 0, 0, 0, 2, n]),
                fastpath::ethernet::Heard::Solicited,
                now,
            )
            .len();
    }
    assert_eq!(given, back, "packets lost or duplicated");
}
