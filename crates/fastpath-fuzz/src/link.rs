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
