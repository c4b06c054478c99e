//! IPv4 input: validation, header prediction, reassembly.
//!
//! Input reads straight down: parse, verify the header checksum, check the addresses and the options
//! (RFC 1122 §3.2.1.8; only a header longer than 20 bytes has any), and return the payload; each
//! failure leaves early and is counted. The test for "is this a fragment?" is one load
//! and a mask, so datagrams that are not fragments never touch the reassembly table (Kay & Pasquale,
//! paper 004: the defragmentation queue check).

use std::net::Ipv4Addr;

use super::{Delivery, IpCx, Ipv4, LOOPBACK};
use crate::buf::PacketBuf;
use crate::checksum;
use crate::reassembly::{Ipv4Expired, Ipv4FragmentKey, Outcome};
use crate::route::InterfaceId;
use crate::stats::{DropReason, IpCounters};
use crate::wire::ipv4opt::{self, Found, Options};
use crate::wire::{IpProtocol, Ipv4Packet, Ipv4Repr, WireError};

/// A datagram IPv4 accepted: its payload (the buffer's window), its header, and how it was addressed.
pub(crate) type Accepted = (PacketBuf, Ipv4Repr, Delivery);

/// What IPv4 input made of a packet.
#[derive(Debug)]
pub(crate) enum Input4 {
    /// Nothing to hand on: dropped (counted), or held for reassembly.
    Nothing,
    /// A datagram for its protocol.
    Deliver(Accepted),
    /// A datagram for its protocol whose header has a record route or timestamp option: its
    /// options area (checked) and where those are, for ICMP to echo (RFC 1122 §3.2.2.6); a
    /// reassembled datagram's are its first fragment's.
    WithOptions(Accepted, Options, Found),
    /// A packet whose options are malformed (RFC 1122 §3.2.1.8), as it came, header included; how
    /// it was addressed, and the offset in its header of the byte at fault, for an ICMP parameter
    /// problem. Not yet counted: the drop is the stack's to count, once it has answered.
    BadOptions {
        packet: PacketBuf,
        repr: Ipv4Repr,
        delivery: Delivery,
        pointer: u8,
    },
}

/// An options area that passes the checks and holds what an echo reply reflects (record route,
/// timestamp): the area and where those are.
fn reflected(area: &[u8]) -> Option<(Options, Found)> {
    let found = ipv4opt::check(area).ok()?;
    if found.record_route.is_none() && found.timestamp.is_none() {
        return None;
    }
    Some((Options::from_slice(area)?, found))
}

impl Ipv4 {
    /// Header prediction's side of input (`input_header_prediction`): when `buf` (from `iface`) is a
    /// datagram of the common shape that passes every check, counts it received and delivered, leaves
    /// the UDP datagram or TCP segment in `buf`'s window and returns its header. `None` leaves `buf`
    /// as it was, for [`Self::input`]. Taking the buffer by reference keeps the hot path from moving
    /// it. `PROTOCOL` is UDP's 17 or TCP's 6: one prediction per protocol, each with the protocol a
    /// constant that the header checksum folds in.
    #[inline(always)]
    pub(crate) fn input_predicted<const PROTOCOL: u8>(
        &self,
        counters: &mut IpCounters,
        iface: InterfaceId,
        buf: &mut PacketBuf,
    ) -> Option<Ipv4Repr> {
        if !self.cfg.input_header_prediction {
            return None;
        }
        let repr = self.predict::<PROTOCOL>(counters, iface, buf.data())?;
        layer!(Receive, Ip);
        counters.in_receives += 1;
        buf.truncate(20 + repr.payload_len);
        buf.pull_front(20);
        counters.in_delivers += 1;
        Some(repr)
    }

    /// Input: one packet from `iface`. Returns the datagram for a transport, or nothing when the
    /// packet was dropped (counted) or held for reassembly, or a packet with malformed options. The
    /// host model is weak (RFC 1122 §3.3.4.2): the arriving interface does not restrict which of the
    /// host's addresses the packet may be for.
    #[inline(never)]
    pub(crate) fn input(
        &mut self,
        cx: &mut IpCx,
        iface: InterfaceId,
        mut buf: PacketBuf,
    ) -> Input4 {
        layer!(Receive, Ip);
        cx.counters.in_receives += 1;
        cx.counters.in_unpredicted += 1;
        let (repr, header_len, delivery, fragment) =
            match self.check(cx.counters, iface, buf.data()) {
                Ok(checked) => checked,
                Err(reason) => {
                    cx.drops.add(reason);
                    cx.pool.free(buf);
                    return Input4::Nothing;
                }
            };
        if header_len > 20 {
            return self.input_with_options(cx, buf, repr, header_len, delivery, fragment);
        }
        if !fragment {
            buf.truncate(header_len + repr.payload_len);
            buf.pull_front(header_len);
            cx.counters.in_delivers += 1;
            return Input4::Deliver((buf, repr, delivery));
        }
        self.reassemble(cx, buf, repr, header_len, delivery)
    }

    /// The rest of [`Self::input`] for a header with options: they are checked (RFC 1122 §3.2.1.8)
    /// and, for a datagram that is not a fragment, handed on when an echo reply would reflect them.
    #[cold]
    #[inline(never)]
    fn input_with_options(
        &mut self,
        cx: &mut IpCx,
        mut buf: PacketBuf,
        repr: Ipv4Repr,
        header_len: usize,
        delivery: Delivery,
        fragment: bool,
    ) -> Input4 {
        let area = &buf.data()[20..header_len];
        let found = match ipv4opt::check(area) {
            Ok(found) => found,
            Err(pointer) => {
                return Input4::BadOptions {
                    packet: buf,
                    repr,
                    delivery,
                    pointer,
                }
            }
        };
        if fragment {
            return self.reassemble(cx, buf, repr, header_len, delivery);
        }
        let reflects = found.record_route.is_some() || found.timestamp.is_some();
        let options = Options::from_slice(area).filter(|_| reflects);
        buf.truncate(header_len + repr.payload_len);
        buf.pull_front(header_len);
        cx.counters.in_delivers += 1;
        match options {
            Some(options) => Input4::WithOptions((buf, repr, delivery), options, found),
            None => Input4::Deliver((buf, repr, delivery)),
        }
    }

    /// A fragment into the reassembly table; the datagram it completes, if it does.
    #[inline]
    fn reassemble(
        &mut self,
        cx: &mut IpCx,
        mut buf: PacketBuf,
        mut repr: Ipv4Repr,
        header_len: usize,
        delivery: Delivery,
    ) -> Input4 {
        cx.counters.reasm_reqds += 1;
        let key = Ipv4FragmentKey {
            src: repr.src_addr,
            dst: repr.dst_addr,
            protocol: repr.protocol.into(),
            ident: repr.ident,
        };
        let mut header = [0u8; 60];
        header[..header_len].copy_from_slice(&buf.data()[..header_len]);
        buf.truncate(header_len + repr.payload_len);
        buf.pull_front(header_len);
        let offset = repr.frag_offset as usize;
        let outcome = self.reassembly.insert(
            key,
            offset,
            repr.more_frags,
            &header[..header_len],
            buf,
            cx.now,
            cx.pool,
            cx.drops,
        );
        match outcome {
            Outcome::Held => Input4::Nothing,
            Outcome::Dropped(reason) => {
                cx.drops.add(reason);
                Input4::Nothing
            }
            Outcome::Complete(done) => {
                cx.counters.reasm_oks += 1;
                // The first fragment's options (checked as it arrived) are the datagram's.
                let options = reflected(done.first_header().get(20..).unwrap_or(&[]));
                let payload = done.payload;
                repr.payload_len = payload.len();
                repr.more_frags = false;
                repr.frag_offset = 0;
                cx.counters.in_delivers += 1;
                match options {
                    Some((options, found)) => {
                        Input4::WithOptions((payload, repr, delivery), options, found)
                    }
                    None => Input4::Deliver((payload, repr, delivery)),
                }
            }
        }
    }

    /// Header prediction (`input_header_prediction`): the parsed header of a packet of the common
    /// shape, a unicast UDP datagram or TCP segment to this host with a 20-byte header and not a
    /// fragment, that passes every check of [`Self::check`]; `None` for any other packet, which then
    /// takes the general path (and is dropped there, counted, if it is bad). The header is read once,
    /// as an array.
    #[inline(always)]
    fn predict<const PROTOCOL: u8>(
        &self,
        counters: &mut IpCounters,
        iface: InterfaceId,
        data: &[u8],
    ) -> Option<Ipv4Repr> {
        let h: &[u8; 20] = data.get(..20)?.try_into().ok()?;
        let total = u16::from_be_bytes([h[2], h[3]]) as usize;
        // Version 4 with no options; MF clear and offset zero; TTL not zero; the protocol; a total
        // length within the packet with room for a UDP header (a shorter TCP header is TCP's to
        // find and count, as on the general path).
        if h[0] != 0x45
            || h[6] & 0x3f != 0
            || h[7] != 0
            || h[8] == 0
            || h[9] != PROTOCOL
            || total < 28
            || total > data.len()
        {
            return None;
        }
        let sum = if self.cfg.inline_header_checksum {
            timed!(Checksum);
            checksum::ipv4_header_sum(h)
        } else {
            self.cfg.header_sum(counters, h)
        };
        if sum != 0xffff {
            return None;
        }
        let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
        let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
        let lo = iface == LOOPBACK;
        if src.is_broadcast()
            || src.is_multicast()
            || (!lo && (src.is_loopback() || dst.is_loopback()))
        {
            return None;
        }
        let mut ours = dst.is_loopback();
        for f in &self.ifaces {
            if f.broadcast == Some(src) || f.broadcast == Some(dst) || (!lo && f.cidr.addr == src) {
                return None;
            }
            ours |= f.cidr.addr == dst;
        }
        if !ours {
            return None;
        }
        let flags = u16::from_be_bytes([h[6], h[7]]);
        Some(Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: IpProtocol::from(PROTOCOL),
            payload_len: total - 20,
            ttl: h[8],
            tos: h[1],
            ident: u16::from_be_bytes([h[4], h[5]]),
            dont_frag: flags & 0x4000 != 0,
            more_frags: false,
            frag_offset: 0,
        })
    }

    /// Validates a packet that arrived on `iface`; on success returns its parsed header, header length,
    /// how it is addressed to us, and whether it is a fragment. Loopback addresses (127/8) must not
    /// appear outside a host (RFC 1122 §3.2.1.3): from any other interface, such a source is a bad
    /// source and such a destination is not for us. Nor may one of this host's own addresses arrive as
    /// a source from a link (Linux's martian source): only loopback carries the host's talk to itself.
    fn check(
        &self,
        counters: &mut IpCounters,
        iface: InterfaceId,
        data: &[u8],
    ) -> Result<(Ipv4Repr, usize, Delivery, bool), DropReason> {
        let packet = Ipv4Packet::new_checked(data).map_err(|e| match e {
            WireError::BadVersion => DropReason::Ipv4BadVersion,
            WireError::BadHeaderLength => DropReason::Ipv4BadHeaderLength,
            WireError::BadTotalLength => DropReason::Ipv4BadTotalLength,
            _ => DropReason::Ipv4Truncated,
        })?;
        if self.cfg.header_sum(counters, packet.header()) != 0xffff {
            return Err(DropReason::Ipv4BadChecksum);
        }
        // `new_checked` validated the lengths: read the fixed 20 bytes once, with no further checks.
        let h: &[u8; 20] = data[..20]
            .try_into()
            .map_err(|_| DropReason::Ipv4Truncated)?;
        let header_len = packet.header_len();
        let flags = u16::from_be_bytes([h[6], h[7]]);
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(h[12], h[13], h[14], h[15]),
            dst_addr: Ipv4Addr::new(h[16], h[17], h[18], h[19]),
            protocol: IpProtocol::from(h[9]),
            payload_len: u16::from_be_bytes([h[2], h[3]]) as usize - header_len,
            ttl: h[8],
            tos: h[1],
            ident: u16::from_be_bytes([h[4], h[5]]),
            dont_frag: flags & 0x4000 != 0,
            more_frags: flags & 0x2000 != 0,
            frag_offset: (flags & 0x1fff) * 8,
        };
        if repr.ttl == 0 && !self.cfg.accept_ttl_zero {
            return Err(DropReason::Ipv4TtlZero);
        }
        let (src, dst) = (repr.src_addr, repr.dst_addr);
        let wire = iface != LOOPBACK;
        if src.is_broadcast() || src.is_multicast() || (wire && src.is_loopback()) {
            return Err(DropReason::Ipv4BadSource);
        }
        if wire && dst.is_loopback() {
            return Err(DropReason::Ipv4NotForUs);
        }
        // One pass over the interfaces: is the source a directed broadcast or ours, is the destination
        // ours?
        let mut delivery = if dst.is_broadcast() {
            Some(Delivery::Broadcast)
        } else {
            dst.is_loopback().then_some(Delivery::Unicast)
        };
        for f in &self.ifaces {
            if f.broadcast == Some(src) {
                return Err(DropReason::Ipv4BadSource);
            }
            // Our own address as the source of a packet from a link: spoofed (a LAND packet would
            // have the host answer itself over loopback).
            if wire && f.cidr.addr == src {
                return Err(DropReason::Ipv4OwnSource);
            }
            if f.cidr.addr == dst {
                delivery = Some(Delivery::Unicast);
            } else if f.broadcast == Some(dst) {
                delivery = Some(Delivery::Broadcast);
            }
        }
        // Another host's unicast address, on an interface that intercepts.
        if delivery.is_none()
            && self.ifaces.get(iface.0).is_some_and(|f| f.intercept)
            && !(dst.is_multicast() || dst.is_unspecified())
        {
            delivery = Some(Delivery::Intercepted);
        }
        let delivery = delivery.ok_or(DropReason::Ipv4NotForUs)?;
        Ok((repr, header_len, delivery, flags & 0x3fff != 0))
    }

    /// Discards the reassemblies whose time is up (counted) and returns what ICMP may quote of them;
    /// forgets the path MTUs past their time.
    pub(crate) fn expire(&mut self, cx: &mut IpCx) -> Vec<Ipv4Expired> {
        let mut expired = Vec::new();
        let n = self.reassembly.expire(cx.now, cx.pool, |e| expired.push(e));
        for _ in 0..n {
            cx.drops.add(DropReason::ReassemblyTimeout);
        }
        // Path MTUs past their time: the link's MTU is tried again (RFC 1191 §6.3).
        // And redirects past theirs: the destinations go by the routes again.
        let redirects = self.routes.expire(cx.now);
        if self.path_mtu.expire(cx.now, &mut cx.counters.path_mtu) + redirects > 0 {
            self.route_epoch = self.route_epoch.wrapping_add(1);
        }
        self.routes_changed();
        expired
    }
}
