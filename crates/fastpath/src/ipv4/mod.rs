//! IPv4: input validation and dispatch, output with routing and fragmentation, reassembly.
//!
//! Input reads straight down: parse, verify the header checksum, check the addresses, and hand the
//! payload up; each failure leaves early and is counted. The test for "is this a fragment?" is one load
//! and a mask, so datagrams that are not fragments never touch the reassembly table (Kay & Pasquale,
//! paper 004: the defragmentation queue check).

pub mod ident;
pub mod reassembly;
pub mod route;

use std::net::Ipv4Addr;

use crate::buf::{ChecksumOffload, PacketBuf};
use crate::checksum;
use crate::link::LinkCapabilities;
use crate::stack::{Stack, LOOPBACK};
use crate::stats::DropReason;
use crate::wire::{IpProtocol, Ipv4Packet, Ipv4Repr, WireError};
use reassembly::{FragmentKey, Outcome};
use route::InterfaceId;

/// Where a datagram to some destination goes: the result of routing it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NextHop {
    pub(crate) iface: InterfaceId,
    /// The source address to use unless the socket is bound to one.
    pub(crate) src: Ipv4Addr,
    /// The gateway, or the destination itself when it is on the link.
    pub(crate) next_hop: Ipv4Addr,
    pub(crate) caps: LinkCapabilities,
}

/// How an arriving datagram is addressed to this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Unicast,
    Broadcast,
}

impl Stack {
    /// Routes `dst`: the loopback interface for this host's own addresses, else the longest-prefix match.
    #[inline]
    pub(crate) fn route(&self, dst: Ipv4Addr) -> Result<NextHop, DropReason> {
        let lo = &self.ifaces[LOOPBACK.0];
        if lo.cidr.contains(dst) || self.ifaces.iter().any(|f| f.cidr.addr == dst) {
            return Ok(NextHop {
                iface: LOOPBACK,
                src: dst,
                next_hop: dst,
                caps: lo.caps,
            });
        }
        let route = self.routes.lookup(dst).ok_or(DropReason::Ipv4NoRoute)?;
        let f = &self.ifaces[route.iface.0];
        Ok(NextHop {
            iface: route.iface,
            src: f.cidr.addr,
            next_hop: route.gateway.unwrap_or(dst),
            caps: f.caps,
        })
    }

    /// Refuses to bind to `addr` unless it is the wildcard or one of this host's addresses.
    pub(crate) fn check_local_address(&self, addr: Ipv4Addr) -> std::io::Result<()> {
        if addr.is_unspecified() || self.is_own_address(addr) {
            return Ok(());
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{addr} is not an address of this host"),
        ))
    }

    /// True when `addr` is one of this host's unicast addresses (all of 127/8 counts).
    pub(crate) fn is_own_address(&self, addr: Ipv4Addr) -> bool {
        addr.is_loopback() || self.ifaces.iter().any(|f| f.cidr.addr == addr)
    }

    fn header_sum(&self, header: &[u8]) -> u16 {
        timed!(Checksum);
        match <&[u8; 20]>::try_from(header) {
            Ok(h) if self.config.inline_header_checksum => checksum::ipv4_header_sum(h),
            _ => self.config.checksum.sum(header),
        }
    }

    /// Input: one packet from `iface`. The host model is weak (RFC 1122 §3.3.4.2): the arriving
    /// interface does not restrict which of the host's addresses the packet may be for.
    pub(crate) fn ipv4_input(&mut self, iface: InterfaceId, mut buf: PacketBuf) {
        layer!(Receive, Ip);
        self.counters.ip.in_receives += 1;
        if self.config.input_header_prediction {
            if let Some(repr) = self.predict_udp(iface, buf.data()) {
                buf.truncate(20 + repr.payload_len);
                buf.pull_front(20);
                self.counters.ip.in_delivers += 1;
                return self.udp_input(buf, &repr, Delivery::Unicast);
            }
        }
        let checked = match self.ipv4_check(iface, buf.data()) {
            Ok(checked) => checked,
            Err(reason) => return self.drop_packet(buf, reason),
        };
        let (mut repr, header_len, delivery, fragment) = checked;

        if fragment {
            self.counters.ip.reasm_reqds += 1;
            let key = FragmentKey {
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
                self.now,
                &mut self.pool,
                &mut self.counters.drops,
            );
            match outcome {
                Outcome::Held => {}
                Outcome::Dropped(reason) => self.counters.drops.add(reason),
                Outcome::Complete(payload) => {
                    self.counters.ip.reasm_oks += 1;
                    repr.payload_len = payload.len();
                    repr.more_frags = false;
                    repr.frag_offset = 0;
                    self.ipv4_deliver(payload, &repr, delivery);
                }
            }
            return;
        }
        buf.truncate(header_len + repr.payload_len);
        buf.pull_front(header_len);
        self.ipv4_deliver(buf, &repr, delivery);
    }

    /// Header prediction (`input_header_prediction`): the parsed header of a packet of the common
    /// shape, a unicast UDP datagram to this host with a 20-byte header and not a fragment, that passes
    /// every check of [`Self::ipv4_check`]; `None` for any other packet, which then takes the general
    /// path (and is dropped there, counted, if it is bad). The header is read once, as an array.
    #[inline(always)]
    fn predict_udp(&self, iface: InterfaceId, data: &[u8]) -> Option<Ipv4Repr> {
        let h: &[u8; 20] = data.get(..20)?.try_into().ok()?;
        let total = u16::from_be_bytes([h[2], h[3]]) as usize;
        // Version 4 with no options; MF clear and offset zero; TTL not zero; UDP; a total length
        // within the packet with room for a UDP header.
        if h[0] != 0x45
            || h[6] & 0x3f != 0
            || h[7] != 0
            || h[8] == 0
            || h[9] != 17
            || total < 28
            || total > data.len()
        {
            return None;
        }
        let sum = if self.config.inline_header_checksum {
            timed!(Checksum);
            checksum::ipv4_header_sum(h)
        } else {
            self.header_sum(h)
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
            protocol: IpProtocol::Udp,
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
    fn ipv4_check(
        &self,
        iface: InterfaceId,
        data: &[u8],
    ) -> Result<(Ipv4Repr, usize, Delivery, bool), DropReason> {
        let packet = Ipv4Packet::new_checked(data).map_err(|e| match e {
            WireError::BadVersion => DropReason::Ipv4BadVersion,
            WireError::BadHeaderLength => DropReason::Ipv4BadHeaderLength,
            WireError::BadTotalLength => DropReason::Ipv4BadTotalLength,
            _ => DropReason::Ipv4Truncated,
        })?;
        if self.header_sum(packet.header()) != 0xffff {
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
        if repr.ttl == 0 && !self.config.accept_ttl_zero {
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
        // One pass over the interfaces: is the source a directed broadcast, is the destination ours?
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
        let delivery = delivery.ok_or(DropReason::Ipv4NotForUs)?;
        Ok((repr, header_len, delivery, flags & 0x3fff != 0))
    }

    fn ipv4_deliver(&mut self, buf: PacketBuf, repr: &Ipv4Repr, delivery: Delivery) {
        self.counters.ip.in_delivers += 1;
        match repr.protocol {
            IpProtocol::Udp => self.udp_input(buf, repr, delivery),
            IpProtocol::Tcp => self.tcp_input(buf, repr, delivery),
            IpProtocol::Icmp => self.icmp_input(buf, repr, delivery),
            _ => {
                if delivery == Delivery::Unicast {
                    self.icmp_send_error(
                        crate::wire::icmpv4::DstUnreachable::ProtoUnreachable,
                        repr,
                        buf.data(),
                    );
                }
                self.drop_packet(buf, DropReason::Ipv4UnknownProtocol);
            }
        }
    }

    /// Counts a drop and recycles the buffer.
    #[inline]
    pub(crate) fn drop_packet(&mut self, buf: PacketBuf, reason: DropReason) {
        timed!(Buffers);
        self.counters.drops.add(reason);
        self.pool.free(buf);
    }

    /// Output: prepends an IPv4 header to `buf` (which holds the transport datagram) and queues it for
    /// `hop`'s link, fragmenting it if it is larger than the link's MTU.
    #[inline]
    pub(crate) fn ipv4_output(
        &mut self,
        mut buf: PacketBuf,
        hop: &NextHop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) {
        layer!(Send, Ip);
        // A TSO segment is larger than the MTU on purpose: the link cuts it.
        let fits = 20 + buf.len() <= hop.caps.mtu || buf.meta.gso_size > 0;
        if self.config.output_header_template && fits {
            self.counters.ip.out_requests += 1;
            let ident = self.ident.next_for(src, dst, protocol.into());
            // The template: version and length 0x45, TOS 0, no flags or offset, the default TTL; the
            // length, ident, protocol and addresses filled in, then the checksum.
            let [t0, t1] = ((20 + buf.len()) as u16).to_be_bytes();
            let [i0, i1] = ident.to_be_bytes();
            let [s0, s1, s2, s3] = src.octets();
            let [d0, d1, d2, d3] = dst.octets();
            let ttl = self.config.default_ttl;
            let mut h = [
                0x45,
                0,
                t0,
                t1,
                i0,
                i1,
                0,
                0,
                ttl,
                protocol.into(),
                0,
                0,
                s0,
                s1,
                s2,
                s3,
                d0,
                d1,
                d2,
                d3,
            ];
            let [c0, c1] = (!self.header_sum(&h)).to_be_bytes();
            h[10] = c0;
            h[11] = c1;
            buf.push_front(20).copy_from_slice(&h);
            return self.enqueue(hop.iface, buf);
        }
        self.ipv4_output_general(buf, hop, src, dst, protocol);
    }

    /// [`Self::ipv4_output`] without the header template, or for a datagram to fragment.
    #[inline(never)]
    fn ipv4_output_general(
        &mut self,
        mut buf: PacketBuf,
        hop: &NextHop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) {
        self.counters.ip.out_requests += 1;
        let ident = self.ident.next_for(src, dst, protocol.into());
        let mut repr = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len: buf.len(),
            ttl: self.config.default_ttl,
            tos: 0,
            ident,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
        };
        if 20 + buf.len() <= hop.caps.mtu || buf.meta.gso_size > 0 {
            self.emit_header(&mut buf, &repr);
            return self.enqueue(hop.iface, buf);
        }

        // Fragment: every fragment but the last carries a multiple of 8 bytes.
        debug_assert!(
            !matches!(buf.meta.checksum, ChecksumOffload::Partial { .. }),
            "offload across fragments"
        );
        let max = (hop.caps.mtu.saturating_sub(20)) & !7;
        if max == 0 {
            return self.drop_packet(buf, DropReason::Ipv4NoRoute);
        }
        let total = buf.len();
        let mut offset = 0;
        while offset < total {
            let len = max.min(total - offset);
            let mut frag = self.pool.alloc(len);
            {
                timed!(Copy);
                frag.extend_from_slice(&buf.data()[offset..offset + len]);
            }
            repr.payload_len = len;
            repr.frag_offset = offset as u16;
            repr.more_frags = offset + len < total;
            self.emit_header(&mut frag, &repr);
            self.counters.ip.frag_creates += 1;
            self.enqueue(hop.iface, frag);
            offset += len;
        }
        self.counters.ip.frag_oks += 1;
        self.pool.free(buf);
    }

    #[inline]
    fn emit_header(&self, buf: &mut PacketBuf, repr: &Ipv4Repr) {
        let header = buf.push_front(20);
        repr.emit(header);
        let sum = self.header_sum(header);
        header[10..12].copy_from_slice(&(!sum).to_be_bytes());
    }

    pub(crate) fn expire_reassembly(&mut self) {
        let mut expired = Vec::new();
        let n = self
            .reassembly
            .expire(self.now, &mut self.pool, |e| expired.push(e));
        for _ in 0..n {
            self.counters.drops.add(DropReason::ReassemblyTimeout);
        }
        for e in expired {
            self.icmp_send_time_exceeded(&e);
        }
    }
}
