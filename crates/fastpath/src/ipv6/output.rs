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

impl Ipv6 {
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
            hop_limit: self.cfg.hop_limit,
            traffic_class: 0,
            flow_label: 0,
        };
        if HEADER_LEN + buf.len() <= hop.caps.mtu || buf.meta.gso_size > 0 {
            repr.emit(buf.push_front(HEADER_LEN));
            return self.send(cx, out, hop.iface, buf);
        }
        self.fragment(cx, out, buf, hop.iface, hop.caps.mtu, repr);
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
        iface: InterfaceId,
        mtu: usize,
        repr: Ipv6Repr,
    ) {
        debug_assert!(
            !matches!(buf.meta.checksum, ChecksumOffload::Partial { .. }),
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
            self.send(cx, out, iface, frag);
            offset += len;
        }
        cx.counters.frag_oks += 1;
        cx.pool.free(buf);
    }

    /// Hands one finished packet to the link, counting it (and any drop at a full queue).
    fn send(
        &mut self,
        cx: &mut Ip6Cx,
        out: &mut impl Transmit,
        iface: InterfaceId,
        buf: PacketBuf,
    ) {
        cx.counters.out_packets += 1;
        for _ in 0..out.transmit(iface, buf) {
            cx.drops.add(DropReason::LinkQueueFull);
        }
    }
}
