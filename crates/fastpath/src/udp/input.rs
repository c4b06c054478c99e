//! UDP input: checksum, demultiplexing (best match first, every match for broadcast) and queueing on
//! the socket, bounded in bytes; and the ICMP errors that quote a datagram we sent.

use super::*;

impl<N: Network> Table<N> {
    /// Input: one UDP datagram (the IP payload in `buf`).
    #[inline(always)]
    pub(crate) fn input(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        mut buf: PacketBuf,
        (src, dst): (N::Addr, N::Addr),
        delivery: Delivery,
    ) -> Option<PacketBuf> {
        layer!(Receive, Udp);
        if let Err(e) = UdpPacket::new_checked(buf.data()) {
            let reason = if e == WireError::Truncated {
                DropReason::UdpTruncated
            } else {
                DropReason::UdpBadLength
            };
            {
                cx.drop(buf, reason);
                return None;
            }
        }
        // `new_checked` validated the length: read the fixed 8 bytes once.
        let h: [u8; 8] = buf.data()[..8]
            .try_into()
            .expect("checked: at least 8 bytes");
        let repr = UdpRepr {
            src_port: u16::from_be_bytes([h[0], h[1]]),
            dst_port: u16::from_be_bytes([h[2], h[3]]),
            payload_len: u16::from_be_bytes([h[4], h[5]]) as usize - 8,
        };
        let field = u16::from_be_bytes([h[6], h[7]]);
        let udp_len = 8 + repr.payload_len;
        buf.truncate(udp_len);

        let pseudo = || checksum::pseudo_header_sum(src, dst, 17, udp_len as u16);
        let pending = if field == 0 {
            if !N::UDP_CHECKSUM_OPTIONAL {
                // RFC 8200 §8.1: an IPv6 receiver drops a UDP datagram with a zero checksum.
                cx.drop(buf, DropReason::UdpZeroChecksumIpv6);
                return None;
            }
            cx.counters.udp.in_no_checksum += 1;
            None
        } else {
            match self.cfg.checksum.rx(buf.meta.checksum(), true) {
                RxChecksum::Trusted => {
                    cx.counters.udp.in_checksum_offloaded += 1;
                    None
                }
                RxChecksum::Deferred => Some(checksum::add(
                    pseudo(),
                    udp_header_sum(repr.src_port, repr.dst_port, udp_len as u16, field),
                )),
                RxChecksum::Now => {
                    cx.counters.udp.in_checksum_on_arrival += 1;
                    if !self.cfg.checksum.verify(buf.data(), pseudo()) {
                        cx.drop(buf, DropReason::UdpBadChecksum);
                        return None;
                    }
                    None
                }
            }
        };
        let from = src.socket(repr.src_port);
        let dst = dst.socket(repr.dst_port);
        if delivery == Delivery::Intercepted {
            self.intercepted(cx, buf, from, dst, pending);
            return None;
        }
        if delivery == Delivery::Broadcast {
            let mut matches = std::mem::take(&mut self.matches);
            self.demux.lookup_all(dst, from, &mut matches);
            if matches.is_empty() {
                let reason = if deferred_ok(pending, &buf.data()[8..]) {
                    DropReason::UdpNoSocket
                } else {
                    DropReason::UdpBadChecksum
                };
                cx.drop(buf, reason);
            } else {
                buf.pull_front(8);
                let last = matches.len() - 1;
                for &id in &matches[..last] {
                    let copy = buf.duplicate();
                    self.enqueue(cx, id, copy, from, pending);
                }
                self.enqueue(cx, matches[last], buf, from, pending);
            }
            matches.clear();
            self.matches = matches;
            return None;
        }
        match self.demux.lookup(dst, from) {
            Some(id) => {
                buf.pull_front(8);
                self.enqueue(cx, id, buf, from, pending);
            }
            None if !deferred_ok(pending, &buf.data()[8..]) => {
                cx.drop(buf, DropReason::UdpBadChecksum);
            }
            None => {
                // No socket: the stack answers with a port unreachable and drops it.
                return Some(buf);
            }
        }
        None
    }

    /// Queues a datagram on socket `id` (of this family; `cx` may be the other family's, for a
    /// datagram a dual-stack socket takes).
    #[inline(always)]
    pub(super) fn enqueue<M: Network>(
        &mut self,
        cx: &mut UdpCx<impl Transmit, M>,
        id: SocketId,
        buf: PacketBuf,
        from: N::Socket,
        pending: Option<u16>,
    ) {
        layer!(Receive, Socket);
        let socket = self.by_id(id);
        let size = buf.truesize();
        if socket.rx_bytes + size > socket.options.recv_buffer_bytes.unwrap_or(usize::MAX) {
            socket.counters.queue_full += 1;
            return cx.drop(buf, DropReason::UdpQueueFull);
        }
        socket.rx_bytes += size;
        socket.counters.queued += 1;
        let from = (N::Addr::ip(&from), N::Addr::port(&from));
        socket.rx.push_back(RxDatagram { buf, from, pending });
        cx.counters.udp.in_datagrams += 1;
        self.hints.note(id.0);
    }
}

impl Table<Ipv4> {
    /// A "fragmentation needed" quoting a datagram this host sent (`ip` and the first bytes of its UDP
    /// header) says the path to its destination takes `mtu` bytes: learned if a socket of ours sent
    /// it (as Linux, which looks the socket up too), and the socket is not told (see the module's
    /// "Path MTU").
    pub(crate) fn report_path_mtu(
        &mut self,
        cx: &mut UdpCx<impl Transmit, Ipv4>,
        ip: &crate::wire::Ipv4Repr,
        head: &[u8; 8],
        mtu: usize,
    ) {
        let local =
            std::net::SocketAddrV4::new(ip.src_addr, u16::from_be_bytes([head[0], head[1]]));
        let remote =
            std::net::SocketAddrV4::new(ip.dst_addr, u16::from_be_bytes([head[2], head[3]]));
        if !cx.ip.is_own_address(ip.src_addr) || self.demux.lookup(local, remote).is_none() {
            cx.counters.drops.add(DropReason::PathMtuNoSocket);
            return;
        }
        let Ok(hop) = cx.ip.route(ip.dst_addr) else {
            cx.counters.drops.add(DropReason::Ipv4NoRoute);
            return;
        };
        cx.ip.learn_path_mtu(
            cx.now,
            ip.dst_addr,
            mtu,
            hop.caps.mtu,
            &mut cx.counters.ip.path_mtu,
            &mut cx.counters.drops,
        );
    }
}

impl<N: Network> Table<N> {
    /// Reports an ICMP error about a datagram this host sent (from `src` to `dst`, the first bytes of
    /// its UDP header in `head`) to the connected socket that sent it; unconnected sockets are not told
    /// (as in BSD and Linux without `IP_RECVERR`). Returns false when no socket sent it.
    pub(crate) fn report_error(
        &mut self,
        (src, dst): (N::Addr, N::Addr),
        head: &[u8; 8],
        kind: io::ErrorKind,
    ) -> bool {
        let local = src.socket(u16::from_be_bytes([head[0], head[1]]));
        let remote = dst.socket(u16::from_be_bytes([head[2], head[3]]));
        let Some(id) = self.demux.lookup(local, remote) else {
            return false;
        };
        let socket = self.by_id(id);
        if socket.pcb.is_connected() {
            socket.error = Some(kind);
            self.hints.note(id.0);
        }
        true
    }
}
