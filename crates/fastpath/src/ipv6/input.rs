//! IPv6 input: the fixed header, the addresses, the extension-header chain (RFC 8200 §4), atomic
//! fragments (RFC 6946) and the first fragment's header chain (RFC 7112).

use std::net::Ipv6Addr;

use super::{Ip6Cx, Ipv6};
use crate::buf::PacketBuf;
use crate::ip::{Delivery, LOOPBACK};
use crate::reassembly::{Ipv6FragmentKey, Outcome};
use crate::route::InterfaceId;
use crate::stats::DropReason;
use crate::wire::icmpv6::param_problem;
use crate::wire::ipv6::{HEADER_LEN, MAX_PAYLOAD_LEN};
use crate::wire::ipv6ext::{self, Chain, ChainError};
use crate::wire::{IpProtocol, Ipv6Packet, Ipv6Repr};

/// A packet IPv6 accepted for an upper layer.
#[derive(Debug)]
pub(crate) struct Accepted6 {
    /// The upper-layer message: the buffer's window starts at its header.
    pub(crate) buf: PacketBuf,
    /// The fixed header, with `next_header` the upper-layer protocol and `payload_len` the upper
    /// layer's length.
    pub(crate) ip: Ipv6Repr,
    pub(crate) delivery: Delivery,
    /// How many bytes before the window belong to the packet (fixed and extension headers): a
    /// transport that answers with an ICMPv6 error quotes from there. 0 for a reassembled packet,
    /// whose headers are not in front of it (no error is sent about one).
    pub(crate) header_len: usize,
    /// The next header field that named the upper layer, from the IPv6 header's start.
    pub(crate) named_at: u32,
}

/// What input made of a packet.
#[derive(Debug)]
pub(crate) enum Input6 {
    /// For an upper layer.
    Deliver(Accepted6),
    /// Dropped (counted) or held.
    Done,
    /// Refused with an ICMPv6 parameter problem (RFC 4443 §3.4) to send about `packet` (the whole
    /// packet, the window at its IPv6 header); the drop is counted.
    ParamProblem {
        packet: PacketBuf,
        ip: Ipv6Repr,
        code: u8,
        pointer: u32,
    },
}

impl Ipv6 {
    /// Header prediction (`input_header_prediction`, as IPv4 has it): when `buf` (from `iface`) is a
    /// packet of the common shape, a UDP datagram or TCP segment right after the fixed header (no
    /// extension headers) to one of this host's unicast addresses, from a plausible source, counts
    /// it received and delivered, leaves the datagram or segment in `buf`'s window and returns its
    /// header. `None` leaves `buf` as it was, for [`Self::input`], which checks everything (and drops
    /// what is bad). `PROTOCOL` is UDP's 17 or TCP's 6, one prediction each, as for IPv4.
    #[inline(always)]
    pub(crate) fn input_predicted<const PROTOCOL: u8>(
        &self,
        counters: &mut crate::stats::Ip6Counters,
        iface: InterfaceId,
        buf: &mut PacketBuf,
    ) -> Option<Ipv6Repr> {
        if !self.cfg.input_header_prediction {
            return None;
        }
        let data = buf.data();
        let h: &[u8; HEADER_LEN] = data.get(..HEADER_LEN)?.try_into().ok()?;
        let payload_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
        // Version 6, the protocol next, room for a UDP header (a shorter TCP header is TCP's to find
        // and count, as on the general path), a payload length within the packet.
        if h[0] >> 4 != 6
            || h[6] != PROTOCOL
            || payload_len < 8
            || HEADER_LEN + payload_len > data.len()
        {
            return None;
        }
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
        let wire = iface != LOOPBACK;
        if src.is_multicast()
            || src.is_unspecified()
            || dst.is_multicast()
            || (wire && (src == Ipv6Addr::LOCALHOST || dst == Ipv6Addr::LOCALHOST))
        {
            return None;
        }
        let own = |a: Ipv6Addr| {
            self.ifaces
                .iter()
                .any(|f| f.addrs.iter().any(|c| c.addr == a))
        };
        if (wire && own(src)) || !(dst == Ipv6Addr::LOCALHOST || own(dst)) {
            return None;
        }
        let w0 = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let repr = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::from(PROTOCOL),
            payload_len,
            hop_limit: h[7],
            traffic_class: (w0 >> 20) as u8,
            flow_label: w0 & 0x000f_ffff,
        };
        layer!(Receive, Ip);
        counters.in_receives += 1;
        buf.truncate(HEADER_LEN + payload_len);
        buf.pull_front(HEADER_LEN);
        counters.in_delivers += 1;
        Some(repr)
    }

    /// Input: one packet from `iface` whose version field is 6.
    pub(crate) fn input(&mut self, cx: &mut Ip6Cx, iface: InterfaceId, buf: PacketBuf) -> Input6 {
        layer!(Receive, Ip);
        cx.counters.in_receives += 1;
        cx.counters.in_unpredicted += 1;
        let (ip, delivery) = match self.check(iface, buf.data()) {
            Ok(checked) => checked,
            Err(reason) => return drop(cx, buf, reason),
        };
        if delivery == Delivery::Broadcast {
            cx.counters.in_mcast_pkts += 1;
        }
        let payload = &buf.data()[HEADER_LEN..HEADER_LEN + ip.payload_len];
        let chain = match ipv6ext::walk(payload, ip.next_header, HEADER_LEN) {
            Ok(chain) => chain,
            Err(e) => return refuse(cx, buf, ip, delivery, e),
        };
        cx.counters.in_ext_headers += chain.headers as u64;
        let chain = match chain.fragment {
            None => chain,
            Some(f) if f.is_atomic() => {
                // RFC 6946 §4: an atomic fragment is a whole packet; it never enters reassembly.
                cx.counters.in_atomic_fragments += 1;
                let rest = &payload[chain.offset..];
                let base = HEADER_LEN + chain.offset;
                match ipv6ext::walk_from(rest, f.next_header, base, chain.named_at) {
                    Ok(after) => Chain {
                        offset: chain.offset + after.offset,
                        headers: chain.headers + after.headers,
                        ..after
                    },
                    Err(e) => return refuse(cx, buf, ip, delivery, e),
                }
            }
            Some(f) => {
                cx.counters.reasm_reqds += 1;
                if f.offset == 0 {
                    // RFC 7112 §5: the first fragment holds the whole header chain, the upper-layer
                    // header included; otherwise it is dropped, and may be answered (§7, code 3).
                    let rest = &payload[chain.offset..];
                    let base = HEADER_LEN + chain.offset;
                    let whole = ipv6ext::walk_from(rest, f.next_header, base, chain.named_at).map(
                        |after| {
                            after.fragment.is_none()
                                && rest.len()
                                    >= after.offset + ipv6ext::upper_header_len(after.upper)
                        },
                    );
                    match whole {
                        Ok(true) => {}
                        Ok(false) | Err(ChainError::Truncated) => {
                            if delivery != Delivery::Unicast {
                                return drop(cx, buf, DropReason::Ipv6IncompleteChain);
                            }
                            cx.drops.add(DropReason::Ipv6IncompleteChain);
                            return Input6::ParamProblem {
                                packet: buf,
                                ip,
                                code: param_problem::INCOMPLETE_CHAIN,
                                pointer: 0,
                            };
                        }
                        Err(e) => return refuse(cx, buf, ip, delivery, e),
                    }
                }
                return self.reassemble(cx, buf, ip, delivery, chain, f);
            }
        };
        if chain.upper == IpProtocol::Ipv6NoNext {
            return drop(cx, buf, DropReason::Ipv6NoNextHeader);
        }
        let mut buf = buf;
        let header_len = HEADER_LEN + chain.offset;
        buf.truncate(HEADER_LEN + ip.payload_len);
        buf.pull_front(header_len);
        cx.counters.in_delivers += 1;
        Input6::Deliver(Accepted6 {
            ip: Ipv6Repr {
                next_header: chain.upper,
                payload_len: buf.len(),
                ..ip
            },
            buf,
            delivery,
            header_len,
            named_at: chain.named_at,
        })
    }

    /// A fragment (not atomic) into the reassembly table (RFC 8200 §4.5); a completed packet goes on
    /// through the rest of its header chain. A fragment whose length is not a multiple of 8 with more
    /// to come, or that would make the packet longer than 65,535 bytes, is answered with a parameter
    /// problem (code 0, pointing at the payload length or the fragment offset) as §4.5 asks.
    #[inline(never)]
    fn reassemble(
        &mut self,
        cx: &mut Ip6Cx,
        mut buf: PacketBuf,
        ip: Ipv6Repr,
        delivery: Delivery,
        chain: Chain,
        f: ipv6ext::FragmentHeader,
    ) -> Input6 {
        let len = ip.payload_len - chain.offset;
        let problem = if f.more && !len.is_multiple_of(8) {
            Some((DropReason::FragmentBadLength, 4))
        } else if chain.offset - 8 + f.offset + len > MAX_PAYLOAD_LEN {
            Some((DropReason::FragmentTooBig, (HEADER_LEN + f.at + 2) as u32))
        } else {
            None
        };
        if let Some((reason, pointer)) = problem {
            if delivery != Delivery::Unicast || len == 0 {
                return drop(cx, buf, reason);
            }
            cx.drops.add(reason);
            return Input6::ParamProblem {
                packet: buf,
                ip,
                code: param_problem::HEADER_FIELD,
                pointer,
            };
        }
        let key = Ipv6FragmentKey {
            src: ip.src_addr,
            dst: ip.dst_addr,
            ident: f.ident,
        };
        let header_len = HEADER_LEN + chain.offset;
        let mut header = [0u8; 256];
        let kept = header_len.min(header.len());
        header[..kept].copy_from_slice(&buf.data()[..kept]);
        if kept < header_len {
            // An unfragmentable part this long is not worth holding (the chain walk bounds it).
            return drop(cx, buf, DropReason::Ipv6ChainTooLong);
        }
        buf.truncate(HEADER_LEN + ip.payload_len);
        buf.pull_front(header_len);
        let done = match self.reassembly.insert(
            key,
            f.offset,
            f.more,
            &header[..header_len],
            buf,
            cx.now,
            cx.pool,
            cx.drops,
        ) {
            Outcome::Held => return Input6::Done,
            Outcome::Dropped(reason) => {
                cx.drops.add(reason);
                return Input6::Done;
            }
            Outcome::Complete(done) => done,
        };
        cx.counters.reasm_oks += 1;
        // The rest of the chain, after the fragment header, in the reassembled payload. Errors about a
        // reassembled packet are not sent (its headers are no longer in front of it): counted drops.
        let first = IpProtocol::from(done.next_header());
        let base = done.first_header.len();
        let mut payload = done.payload;
        let after = match ipv6ext::walk_from(payload.data(), first, base, (base - 8) as u32) {
            Ok(after) if after.fragment.is_none() => after,
            Ok(_) => return drop(cx, payload, DropReason::Ipv6ChainTooLong),
            Err(e) => {
                let reason = match e {
                    ChainError::Truncated => DropReason::Ipv6ExtensionTruncated,
                    ChainError::UnknownOption => DropReason::Ipv6UnknownOption,
                    ChainError::RoutingType0 { .. } => DropReason::Ipv6RoutingType0,
                    ChainError::TooLong => DropReason::Ipv6ChainTooLong,
                    ChainError::ParamProblem { .. } => DropReason::Ipv6ParameterProblem,
                };
                return drop(cx, payload, reason);
            }
        };
        cx.counters.in_ext_headers += after.headers as u64;
        if after.upper == IpProtocol::Ipv6NoNext {
            return drop(cx, payload, DropReason::Ipv6NoNextHeader);
        }
        payload.pull_front(after.offset);
        cx.counters.in_delivers += 1;
        Input6::Deliver(Accepted6 {
            ip: Ipv6Repr {
                next_header: after.upper,
                payload_len: payload.len(),
                ..ip
            },
            buf: payload,
            delivery,
            header_len: 0,
            named_at: after.named_at,
        })
    }

    /// Validates the fixed header and the addresses of a packet from `iface`. `::1` and this host's own
    /// addresses never arrive as sources from a link, nor `::1` as a destination (RFC 4291 §2.5.3);
    /// a multicast source is never valid (§2.7); the unspecified source only for the multicast of
    /// duplicate address detection (RFC 4862 §5.4.2), which ICMPv6 then drops by name.
    fn check(&self, iface: InterfaceId, data: &[u8]) -> Result<(Ipv6Repr, Delivery), DropReason> {
        let packet = Ipv6Packet::new_checked(data).map_err(|_| DropReason::Ipv6Truncated)?;
        let ip = Ipv6Repr::parse(&packet).map_err(|_| DropReason::Ipv6Truncated)?;
        let (src, dst) = (ip.src_addr, ip.dst_addr);
        let wire = iface != LOOPBACK;
        if src.is_multicast() || (wire && src == Ipv6Addr::LOCALHOST) {
            return Err(DropReason::Ipv6BadSource);
        }
        if src.is_unspecified() && !dst.is_multicast() {
            return Err(DropReason::Ipv6BadSource);
        }
        if wire && dst == Ipv6Addr::LOCALHOST {
            return Err(DropReason::Ipv6NotForUs);
        }
        if wire && self.is_own_address(src) {
            return Err(DropReason::Ipv6OwnSource);
        }
        let delivery = if dst.is_multicast() {
            self.is_member(dst).then_some(Delivery::Broadcast)
        } else if self.is_own_address(dst) {
            Some(Delivery::Unicast)
        } else {
            // Another host's unicast address, on an interface that intercepts.
            let intercept = self.ifaces.get(iface.0).is_some_and(|f| f.intercept);
            (intercept && !dst.is_unspecified()).then_some(Delivery::Intercepted)
        };
        Ok((ip, delivery.ok_or(DropReason::Ipv6NotForUs)?))
    }
}

fn drop(cx: &mut Ip6Cx, buf: PacketBuf, reason: DropReason) -> Input6 {
    cx.drops.add(reason);
    cx.pool.free(buf);
    Input6::Done
}

/// A chain the walker refused: counted, and answered with a parameter problem where RFC 8200 says so
/// (not about a packet to a group, unless the option's action bits ask for it even then).
fn refuse(
    cx: &mut Ip6Cx,
    buf: PacketBuf,
    ip: Ipv6Repr,
    delivery: Delivery,
    e: ChainError,
) -> Input6 {
    let (reason, problem) = match e {
        ChainError::Truncated => (DropReason::Ipv6ExtensionTruncated, None),
        ChainError::UnknownOption => (DropReason::Ipv6UnknownOption, None),
        ChainError::TooLong => (DropReason::Ipv6ChainTooLong, None),
        ChainError::RoutingType0 { pointer } => (
            DropReason::Ipv6RoutingType0,
            Some((param_problem::HEADER_FIELD, pointer, false)),
        ),
        ChainError::ParamProblem {
            code,
            pointer,
            multicast_ok,
        } => (
            DropReason::Ipv6ParameterProblem,
            Some((code, pointer, multicast_ok)),
        ),
    };
    match problem {
        Some((code, pointer, multicast_ok)) if delivery == Delivery::Unicast || multicast_ok => {
            cx.drops.add(reason);
            Input6::ParamProblem {
                packet: buf,
                ip,
                code,
                pointer,
            }
        }
        _ => drop(cx, buf, reason),
    }
}
