//! IPv4 output: the header template, the general path, fragmentation.

use std::net::Ipv4Addr;

use super::ident::IdentBucket;
use super::{IpCx, Ipv4, NextHop, Transmit};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::checksum;
use crate::stats::DropReason;
use crate::wire::{IpProtocol, Ipv4Repr};

/// A header template (`output_header_template`, paper 000 §6.1's "header prediction" on output):
/// the 20 bytes of an IPv4 header to one destination with everything but the length, identification
/// and checksum filled in, the sum of those constant words, and the destination's identification
/// counter. [`Ipv4::output`] makes one per datagram; UDP's route cache keeps one per socket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeaderTemplate {
    bytes: [u8; 20],
    /// The sum of the constant 16-bit words (unfolded).
    sum: u32,
    ident: IdentBucket,
}

impl HeaderTemplate {
    /// The template with type of service `tos` (a sending socket's DSCP and ECN field).
    #[inline]
    pub(crate) fn with_tos(mut self, tos: u8) -> HeaderTemplate {
        // The sum holds the first word, 0x45 and this byte, so it cannot go below zero here.
        self.sum = self.sum - u32::from(self.bytes[1]) + u32::from(tos);
        self.bytes[1] = tos;
        self
    }

    /// The source, destination and protocol the template was made for, and its don't-fragment flag.
    fn addresses(&self) -> (Ipv4Addr, Ipv4Addr, IpProtocol, bool) {
        let b = &self.bytes;
        (
            Ipv4Addr::new(b[12], b[13], b[14], b[15]),
            Ipv4Addr::new(b[16], b[17], b[18], b[19]),
            IpProtocol::from(b[9]),
            b[6] & 0x40 != 0,
        )
    }

    /// The template for datagrams from `src` to `dst` of `protocol`: version 4, a 20-byte header, TOS
    /// 0, no offset, the configured TTL, and the don't-fragment flag when `dont_frag` (path MTU
    /// discovery, RFC 1191 §3).
    #[inline]
    pub(crate) fn new(
        ip: &Ipv4,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        dont_frag: bool,
    ) -> HeaderTemplate {
        let [s0, s1, s2, s3] = src.octets();
        let [d0, d1, d2, d3] = dst.octets();
        let proto: u8 = protocol.into();
        let ttl = ip.cfg.default_ttl;
        let flags = if dont_frag { 0x40 } else { 0 };
        let bytes = [
            0x45, 0, 0, 0, 0, 0, flags, 0, ttl, proto, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3,
        ];
        let sum = bytes
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        HeaderTemplate {
            bytes,
            sum,
            ident: ip.ident.bucket(src, dst, proto),
        }
    }
}

impl Ipv4 {
    /// Output: prepends an IPv4 header to `buf` (which holds the transport datagram) and hands it to
    /// `out` for `hop`'s link, fragmenting it if it is larger than the link's MTU. `dont_frag` sets
    /// DF (path MTU discovery, RFC 1191 §3) on a datagram that fits; one that must be fragmented
    /// here goes without it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn output(
        &mut self,
        cx: &mut IpCx,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        dont_frag: bool,
    ) {
        layer!(Send, Ip);
        // A TSO segment is larger than the MTU on purpose: the link cuts it.
        let fits = 20 + buf.len() <= hop.caps.mtu || buf.meta.gso_size() > 0;
        if self.cfg.output_header_template && fits {
            let mut template = HeaderTemplate::new(self, src, dst, protocol, dont_frag);
            // The sending socket's DSCP and a TCP segment's ECN field (RFC 3168 §5) in the TOS
            // byte, which is 0 in a template.
            let tos = buf.meta.tos();
            if tos != 0 {
                template = template.with_tos(tos);
            }
            return self.output_templated(cx, out, buf, hop, &template);
        }
        self.output_general(cx, out, buf, hop, (src, dst, protocol, dont_frag), &[]);
    }

    /// [`Self::output`] with `options` (an options area, a multiple of 4 bytes, at most 40) in the
    /// header, without DF: an echo reply's (RFC 1122 §3.2.2.6). Fragments but the first go without
    /// them: record route and timestamp are not copied into fragments (RFC 791 §3.1).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn output_with_options(
        &mut self,
        cx: &mut IpCx,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        options: &[u8],
    ) {
        layer!(Send, Ip);
        self.output_general(cx, out, buf, hop, (src, dst, protocol, false), options);
    }

    /// Output with a template a transport prepared (and may keep): the template's one store when
    /// `output_header_template` is on and the datagram fits `hop`'s MTU, else the general path (with
    /// fragmentation) from the template's addresses.
    #[inline(always)]
    pub(crate) fn output_prepared(
        &mut self,
        cx: &mut IpCx,
        out: &mut impl Transmit,
        mut buf: PacketBuf,
        hop: &NextHop,
        template: &HeaderTemplate,
    ) {
        layer!(Send, Ip);
        let fits = 20 + buf.len() <= hop.caps.mtu || buf.meta.gso_size() > 0;
        if self.cfg.output_header_template && fits {
            return self.output_templated(cx, out, buf, hop, template);
        }
        // The template's type of service, for the general path's header.
        buf.meta.set_tos(template.bytes[1]);
        self.output_general(cx, out, buf, hop, template.addresses(), &[]);
    }

    /// Output of a datagram that fits its link's MTU, from `template`: the length, identification and
    /// checksum filled in, the template copied into the buffer. The checksum is the template's sum
    /// updated with the two fields when `inline_header_checksum` is on, or the general routine's.
    #[inline(always)]
    fn output_templated(
        &mut self,
        cx: &mut IpCx,
        out: &mut impl Transmit,
        mut buf: PacketBuf,
        hop: &NextHop,
        template: &HeaderTemplate,
    ) {
        cx.counters.out_requests += 1;
        let ident = self.ident.next(template.ident);
        let total = (20 + buf.len()) as u16;
        // The template goes into the buffer first and the three fields over it there. Patched in a
        // copy on the stack and then copied as a whole, the header was read back in 16 bytes
        // straight after its 2-byte stores, which the CPU cannot forward: that load waited for the
        // stores to reach the cache (`peers_profile`: 3% faster at one datagram a poll).
        let h = buf.push_front(20);
        h.copy_from_slice(&template.bytes);
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&ident.to_be_bytes());
        let sum = if self.cfg.inline_header_checksum {
            timed!(Checksum);
            checksum::fold32(template.sum + u32::from(total) + u32::from(ident))
        } else {
            self.cfg.header_sum(cx.counters, h)
        };
        h[10..12].copy_from_slice(&(!sum).to_be_bytes());
        self.send(cx, out, hop, buf);
    }

    /// Hands one finished packet to the link, counting it (and any drop at a full queue).
    #[inline(always)]
    fn send(&mut self, cx: &mut IpCx, out: &mut impl Transmit, hop: &NextHop, buf: PacketBuf) {
        cx.counters.out_packets += 1;
        let dropped = out.transmit(hop.iface, hop.next_hop, buf);
        if dropped > 0 {
            for _ in 0..dropped {
                cx.drops.add(DropReason::LinkQueueFull);
            }
        }
    }

    /// [`Self::output`] without the header template, or for a datagram to fragment, or with
    /// `options` in the header (of the first fragment only: they are none that are copied).
    #[inline(never)]
    fn output_general(
        &mut self,
        cx: &mut IpCx,
        out: &mut impl Transmit,
        mut buf: PacketBuf,
        hop: &NextHop,
        (src, dst, protocol, dont_frag): (Ipv4Addr, Ipv4Addr, IpProtocol, bool),
        options: &[u8],
    ) {
        cx.counters.out_requests += 1;
        cx.counters.out_untemplated += 1;
        let ident = self.ident.next_for(src, dst, protocol.into());
        let mut repr = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol,
            payload_len: buf.len(),
            ttl: self.cfg.default_ttl,
            // The sending socket's DSCP and a TCP segment's ECN field (RFC 3168 §5).
            tos: buf.meta.tos(),
            ident,
            dont_frag,
            more_frags: false,
            frag_offset: 0,
        };
        let header_len = 20 + options.len();
        if header_len + buf.len() <= hop.caps.mtu || buf.meta.gso_size() > 0 {
            self.emit_header(cx, &mut buf, &repr, options);
            return self.send(cx, out, hop, buf);
        }

        // Fragment: every fragment but the last carries a multiple of 8 bytes. This host may
        // fragment what it originates whatever DF was asked for (the flag tells routers, RFC 791).
        repr.dont_frag = false;
        debug_assert!(
            !matches!(buf.meta.checksum(), ChecksumOffload::Partial { .. }),
            "offload across fragments"
        );
        let max = (hop.caps.mtu.saturating_sub(20)) & !7;
        let first_max = (hop.caps.mtu.saturating_sub(header_len)) & !7;
        if first_max == 0 {
            cx.drops.add(DropReason::Ipv4NoRoute);
            return cx.pool.free(buf);
        }
        let total = buf.len();
        let mut offset = 0;
        while offset < total {
            let first = offset == 0;
            let len = if first { first_max } else { max }.min(total - offset);
            let mut frag = cx.pool.alloc(len);
            {
                timed!(Copy);
                frag.extend_from_slice(&buf.data()[offset..offset + len]);
            }
            repr.payload_len = len;
            repr.frag_offset = offset as u16;
            repr.more_frags = offset + len < total;
            self.emit_header(cx, &mut frag, &repr, if first { options } else { &[] });
            cx.counters.frag_creates += 1;
            self.send(cx, out, hop, frag);
            offset += len;
        }
        cx.counters.frag_oks += 1;
        cx.pool.free(buf);
    }

    /// Prepends the header `repr` says, with `options` after its first 20 bytes.
    #[inline]
    fn emit_header(&self, cx: &mut IpCx, buf: &mut PacketBuf, repr: &Ipv4Repr, options: &[u8]) {
        let header_len = 20 + options.len();
        let header = buf.push_front(header_len);
        repr.emit(header);
        if !options.is_empty() {
            header[0] = 0x40 | (header_len / 4) as u8;
            let total = (header_len + repr.payload_len) as u16;
            header[2..4].copy_from_slice(&total.to_be_bytes());
            header[20..].copy_from_slice(options);
        }
        let sum = self.cfg.header_sum(cx.counters, header);
        header[10..12].copy_from_slice(&(!sum).to_be_bytes());
    }
}
