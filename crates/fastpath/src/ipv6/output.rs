//! IPv6 output: the fixed header, and fragments (RFC 8200 §4.5) when a packet is larger than the link's
//! MTU (routers never fragment IPv6: the source does).

use std::net::Ipv6Addr;

use super::{Ip6Cx, Ipv6, NextHop6};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::ip::Transmit;
use crate::route::InterfaceId;
use crate::stats::DropReason;
use crate::wire::ipv6::{HEADER_LEN, MIN_MTU};
use crate::wire::ipv6ext::FragmentHeader;
use crate::wire::{IpProtocol, Ipv6Repr};

/// A header template (`output_header_template`, paper 000 §6.1, as IPv4 has): the 40 bytes of an
/// IPv6 header to one destination with everything but the payload length filled in. With no header
/// checksum and no identification, using it is one copy and one store of the length. UDP's route
/// cache keeps one per socket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeaderTemplate6 {
    bytes: [u8; HEADER_LEN],
}

impl HeaderTemplate6 {
    /// The template for packets from `src` to `dst` with `next_header` out of `iface`: traffic
    /// class and flow label 0, the interface's hop limit.
    pub(crate) fn new(
        ip: &Ipv6,
        iface: InterfaceId,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
    ) -> HeaderTemplate6 {
        let mut bytes = [0u8; HEADER_LEN];
        Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header,
            payload_len: 0,
            hop_limit: ip.hop_limit(iface),
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut bytes);
        HeaderTemplate6 { bytes }
    }

    fn repr(&self, payload_len: usize) -> Ipv6Repr {
        let b = &self.bytes;
        Ipv6Repr {
            src_addr: Ipv6Addr::from(<[u8; 16]>::try_from(&b[8..24]).expect("16 bytes")),
            dst_addr: Ipv6Addr::from(<[u8; 16]>::try_from(&b[24..40]).expect("16 bytes")),
            next_header: IpProtocol::from(b[6]),
            payload_len,
            hop_limit: b[7],
            traffic_class: b[0] << 4 | b[1] >> 4,
            flow_label: 0,
        }
    }

    /// The template with traffic class `tc` (a sending socket's DSCP and ECN field), which
    /// straddles the first two bytes (RFC 8200 §3).
    pub(crate) fn with_traffic_class(mut self, tc: u8) -> HeaderTemplate6 {
        self.bytes[0] = 0x60 | tc >> 4;
        self.bytes[1] = (self.bytes[1] & 0x0f) | tc << 4;
        self
    }
}

impl Ipv6 {
    /// Output with a template a transport prepared (and may keep): the template's bytes and the
    /// payload length when the packet fits `hop`'s MTU, else fragments.
    #[inline(always)]
    pub(crate) fn output_prepared(
        &mut self,
        cx: &mut Ip6Cx,
        out: &mut impl Transmit,
        mut buf: PacketBuf,
        hop: &NextHop6,
        template: &HeaderTemplate6,
    ) {
        layer!(Send, Ip);
        cx.counters.out_requests += 1;
        if HEADER_LEN + buf.len() <= hop.caps.mtu || buf.meta.gso_size() > 0 {
            let mut h = template.bytes;
            h[4..6].copy_from_slice(&(buf.len() as u16).to_be_bytes());
            buf.push_front(HEADER_LEN).copy_from_slice(&h);
            return self.send(cx, out, hop, buf);
        }
        let repr = template.repr(buf.len());
        self.fragment(cx, out, buf, hop, repr);
    }

    /// Output: prepends an IPv6 header to `buf` (which holds the upper-layer message) and hands it to
    /// `out` for `hop`'s link, in fragments if it is larger than the link's MTU (a TSO segment is larger
    /// on purpose: the link cuts it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn output(
        &mut self,
        cx: &mut Ip6Cx,
        out: &mut impl Transmit,
        mut buf: PacketBuf,
        hop: &NextHop6,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
    ) {
        layer!(Send, Ip);
        cx.counters.out_requests += 1;
        let repr = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header,
            payload_len: buf.len(),
            hop_limit: self.hop_limit(hop.iface),
            // The sending socket's DSCP and a TCP segment's ECN field (RFC 3168 §5).
            traffic_class: buf.meta.tos(),
            flow_label: 0,
        };
        if HEADER_LEN + buf.len() <= hop.caps.mtu || buf.meta.gso_size() > 0 {
            repr.emit(buf.push_front(HEADER_LEN));
            return self.send(cx, out, hop, buf);
        }
        self.fragment(cx, out, buf, hop, repr);
    }

    /// Sends `buf`'s payload, described by `repr`, in fragments for a link of `mtu` (at least the
    /// IPv6 minimum, 1280): each fragment carries the fixed header and a fragment header, and every
    /// fragment but the last a multiple of 8 bytes (§4.5).
    #[inline(never)]
    fn fragment(
        &mut self,
        cx: &mut Ip6Cx,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop6,
        repr: Ipv6Repr,
    ) {
        let mtu = hop.caps.mtu;
        debug_assert!(
            !matches!(buf.meta.checksum(), ChecksumOffload::Partial { .. }),
            "offload across fragments"
        );
        let max = (mtu.max(MIN_MTU) - HEADER_LEN - 8) & !7;
        let total = buf.len();
        let ident = self.next_ident();
        let mut offset = 0;
        while offset < total {
            let len = max.min(total - offset);
            let mut frag = cx.pool.alloc(len);
            {
                timed!(Copy);
                frag.extend_from_slice(&buf.data()[offset..offset + len]);
            }
            FragmentHeader {
                next_header: repr.next_header,
                offset,
                more: offset + len < total,
                ident,
                at: 0,
            }
            .emit(frag.push_front(8));
            Ipv6Repr {
                next_header: IpProtocol::Ipv6Frag,
                payload_len: 8 + len,
                ..repr
            }
            .emit(frag.push_front(HEADER_LEN));
            cx.counters.frag_creates += 1;
            self.send(cx, out, hop, frag);
            offset += len;
        }
        cx.counters.frag_oks += 1;
        cx.pool.free(buf);
    }

    /// Hands one finished packet to the link, counting it (and any drop at a full queue).
    #[inline(always)]
    fn send(&mut self, cx: &mut Ip6Cx, out: &mut impl Transmit, hop: &NextHop6, buf: PacketBuf) {
        cx.counters.out_packets += 1;
        for _ in 0..out.transmit(hop.iface, hop.next_hop, buf) {
            cx.drops.add(DropReason::LinkQueueFull);
        }
    }
}
