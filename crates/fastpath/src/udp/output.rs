//! UDP output: a datagram is copied (and summed, fused with the copy) once into a buffer behind
//! headroom for every header, and handed to IP. A socket's route cache (`TxRoute`, the
//! `output_route_cache` switch, Partridge & Pink §6.2) keeps what does not change from datagram to
//! datagram to the same destination.

use super::*;

/// What `send_to` needs about one destination that does not change from datagram to datagram: the
/// interface, its MTU, the checksum mode, and the constant parts of the headers and their sums.
#[derive(Debug)]
pub(crate) struct TxRoute<N: Network> {
    dst: N::Socket,
    /// The IP layer's `route_epoch` when this was computed.
    epoch: u32,
    hop: NextHop<N::Addr>,
    /// The checksum mode of a datagram that fits the MTU, and of one that is fragmented (offload
    /// cannot cross fragments).
    mode: TxChecksum,
    mode_fragmented: TxChecksum,
    /// The UDP pseudo-header's source, destination and protocol, summed (unfolded).
    pseudo: u32,
    /// The IP header's template, with the socket's type of service ([`UdpOptions::tos`]).
    ip: N::Template,
}

impl<N: Network> Clone for TxRoute<N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N: Network> Copy for TxRoute<N> {}

impl<N: Network> Table<N> {
    /// Sends `payload` as one datagram from `s` to `dst` (or to its peer if `None`).
    ///
    /// The route cache's hit (the same destination as last time, checked when it was cached, and a
    /// datagram that needs no fragmenting) is taken here, inlined into each of the API's sending
    /// calls so that it is specialized for their payload; everything else is
    /// [`Self::send_general`], out of line. With the whole of it out of line, a 64-byte `send_to`
    /// took about 80 instructions more, in the call and in handling a payload of any shape.
    #[inline(always)]
    pub(crate) fn send(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        s: UdpSocket,
        mut payload: Payload<'_, '_>,
        dst: Option<N::Socket>,
    ) -> io::Result<usize>
    where
        N: UdpFamily,
    {
        let epoch = cx.ip.route_epoch();
        if let Some(state) = self.sockets.get_mut(s.index(), s.generation()) {
            if let (None, Some(tx)) = (state.error, &state.tx_cache) {
                let pcb = state.pcb;
                let dst = dst.or_else(|| pcb.peer());
                let len = payload.len();
                if dst == Some(tx.dst) && tx.epoch == epoch && len <= N::MAX_PAYLOAD {
                    output(
                        &self.cfg,
                        Some(&mut self.demux),
                        cx,
                        s,
                        tx,
                        pcb,
                        &mut payload,
                        len,
                    );
                    return Ok(len);
                }
            }
        }
        self.send_general(cx, s, payload, dst)
    }

    /// [`Self::send`] past the route cache: a closed socket, a pending error, a new destination, a
    /// stale route, a datagram to fragment, or the 4.3BSD pseudo-connect.
    #[inline(never)]
    pub(super) fn send_general(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        s: UdpSocket,
        mut payload: Payload<'_, '_>,
        dst: Option<N::Socket>,
    ) -> io::Result<usize>
    where
        N: UdpFamily,
    {
        let state = self
            .sockets
            .get_mut(s.index(), s.generation())
            .ok_or_else(closed)?;
        if let Some(kind) = state.take_error() {
            return Err(kind.into());
        }
        let pcb = state.pcb;
        let options = state.options;
        let Some(dst) = dst.or_else(|| pcb.peer()) else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "socket is not connected",
            ));
        };
        let len = payload.len();
        if len > N::MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds {}", N::MAX_PAYLOAD),
            ));
        }
        if N::Addr::port(&dst) == 0 {
            return Err(port_zero());
        }
        if N::Addr::ip(&dst).is_wildcard() {
            return Err(wildcard_destination());
        }
        if cx.ip.is_broadcast(N::Addr::ip(&dst)) && !options.broadcast {
            return Err(broadcast_denied());
        }

        if self.cfg.sendto_pseudo_connect && !pcb.is_connected() {
            // 4.3BSD: connect for the duration of the send, then disconnect (paper 000 §6.2).
            self.connect(cx, s, dst)?;
            let connected = self.get(s).ok_or_else(closed)?.pcb;
            cx.counters.udp.pseudo_connects += 1;
            let result = tx_route(self.cfg, cx, connected, options, dst).map(|tx| {
                output(
                    &self.cfg,
                    Some(&mut self.demux),
                    cx,
                    s,
                    &tx,
                    connected,
                    &mut payload,
                    len,
                )
            });
            self.set_pcb(s, pcb);
            return result.map(|()| len);
        }
        let tx = tx_route(self.cfg, cx, pcb, options, dst)?;
        // The route cache (`output_route_cache`) keeps it for the next datagram to `dst`.
        if self.cfg.route_cache {
            if let Some(state) = self.get_mut(s) {
                state.tx_cache = Some(tx);
            }
        }
        output(
            &self.cfg,
            Some(&mut self.demux),
            cx,
            s,
            &tx,
            pcb,
            &mut payload,
            len,
        );
        Ok(len)
    }
}

/// Routes `dst` for a socket with `pcb`: the next hop and the source address.
pub(super) fn source_route<N: Network>(
    cx: &UdpCx<impl Transmit, N>,
    pcb: Pcb<N::Addr>,
    dst: N::Socket,
) -> io::Result<(NextHop<N::Addr>, N::Addr)> {
    // Sized by the path MTU when one is known (RFC 1191; Linux's `ip_skb_dst_mtu`).
    let daddr = N::Addr::ip(&dst);
    let hop = cx.ip.route(daddr, cx.now).map_err(|_| no_route(daddr))?;
    let src = if pcb.local_addr.is_wildcard() {
        hop.src
    } else {
        pcb.local_addr
    };
    if N::is_loopback(src) && hop.iface != LOOPBACK {
        // 127/8 and ::1 must not appear outside the host (RFC 1122 §3.2.1.3, RFC 4291 §2.5.3);
        // Linux says EINVAL too.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a socket bound to {src} cannot send to {dst}, off the host"),
        ));
    }
    Ok((hop, src))
}

/// How a datagram to `dst` through `hop` is checksummed: none with the socket's `no_checksum` or
/// Kay & Pasquale's rule, else as the stack's checksum switches say.
pub(super) fn tx_checksum_mode<N: Network>(
    cfg: UdpConfig,
    options: UdpOptions,
    hop: &NextHop<N::Addr>,
    dst: N::Socket,
    fragments: bool,
) -> TxChecksum {
    // IPv6 never goes without (RFC 8200 §8.1).
    let none = N::UDP_CHECKSUM_OPTIONAL
        && (options.no_checksum || cfg.checksum.eliminated_on(hop, N::Addr::ip(&dst)));
    cfg.checksum.tx(&hop.caps, none, fragments)
}

/// Everything about sending to `dst` from a socket with `pcb` and `options` that is the same for
/// every datagram: the route, the checksum modes, the pseudo-header's and IPv4 header's constant
/// parts. Made for each datagram, or kept by the route cache.
pub(super) fn tx_route<N: Network>(
    cfg: UdpConfig,
    cx: &mut UdpCx<impl Transmit, N>,
    pcb: Pcb<N::Addr>,
    options: UdpOptions,
    dst: N::Socket,
) -> io::Result<TxRoute<N>> {
    cx.counters.udp.route_lookups += 1;
    let (hop, src) = source_route(cx, pcb, dst)?;
    let mode = tx_checksum_mode::<N>(cfg, options, &hop, dst, false);
    let mode_fragmented = tx_checksum_mode::<N>(cfg, options, &hop, dst, true);
    let proto: u8 = IpProtocol::Udp.into();
    let daddr = N::Addr::ip(&dst);
    let pseudo = src.word_sum() + daddr.word_sum() + u32::from(proto);
    Ok(TxRoute {
        dst,
        epoch: cx.ip.route_epoch(),
        hop,
        mode,
        mode_fragmented,
        pseudo,
        ip: cx
            .ip
            .template(hop.iface, src, daddr, IpProtocol::Udp, options.tos),
    })
}

/// Output, the one routine for every datagram: the UDP header from `tx`'s constant parts, the
/// payload copied (and summed, when fused) once, and the datagram handed to IPv4 with `tx`'s
/// header template (which IPv4 uses when its switch is on and the datagram fits the MTU).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn output<N: Network>(
    cfg: &UdpConfig,
    demux: Option<&mut Demuxer<N::Addr>>,
    cx: &mut UdpCx<impl Transmit, N>,
    s: UdpSocket,
    tx: &TxRoute<N>,
    pcb: Pcb<N::Addr>,
    payload_source: &mut Payload<'_, '_>,
    len: usize,
) {
    layer!(Send, Udp);
    let mut buf = {
        timed!(Buffers);
        cx.pool.alloc_len(8 + len)
    };
    let udp_len = (8 + len) as u16;
    let mode = if N::HEADER_LEN + 8 + len <= tx.hop.caps.mtu {
        tx.mode
    } else {
        tx.mode_fragmented
    };
    let datagram = buf.data_mut();
    let pseudo = checksum::fold32(tx.pseudo + u32::from(udp_len));
    let (local, remote) = (pcb.local_port, N::Addr::port(&tx.dst));
    // The header in one 8-byte store, with its final checksum field when that does not depend on
    // the payload: IP input reads it back in one load, which a CPU forwards from one store but not
    // from four 2-byte ones (the load would wait for them to reach the cache).
    let field = match mode {
        TxChecksum::Offload => pseudo,
        TxChecksum::None | TxChecksum::Separate | TxChecksum::Fused => 0,
    };
    let header = u64::from(local) << 48
        | u64::from(remote) << 32
        | u64::from(udp_len) << 16
        | u64::from(field);
    datagram[..8].copy_from_slice(&header.to_be_bytes());
    let field = cfg.checksum.fill(
        mode,
        datagram,
        8,
        || udp_header_sum(local, remote, udp_len, 0),
        pseudo,
        payload_source,
    );
    finish(cx, &mut buf, mode, field);
    cx.counters.udp.out_datagrams += 1;
    if cfg.demux_send_cache {
        if let Some(demux) = demux {
            demux.sent(SocketId(s.index()), &pcb);
        }
    }

    layer!(Send, Ip);
    cx.output(buf, &tx.hop, &tx.ip);
}

/// Writes the checksum `field` the fill computed for `mode` into the datagram's header (an
/// offloaded one's pseudo-header sum, and `None`'s zero, are there already), marks the buffer for
/// the link to finish an offloaded one, and counts. A computed checksum of zero is sent as `0xffff`:
/// zero means "no checksum" (RFC 768).
#[inline(always)]
pub(super) fn finish<N: Network>(
    cx: &mut UdpCx<impl Transmit, N>,
    buf: &mut PacketBuf,
    mode: TxChecksum,
    field: u16,
) {
    let field = match mode {
        TxChecksum::Offload => {
            buf.meta.set_checksum(ChecksumOffload::Partial {
                start: N::HEADER_LEN as u16,
                offset: 6,
            });
            cx.counters.udp.out_checksum_offloaded += 1;
            debug_assert_eq!(buf.data()[6..8], field.to_be_bytes());
            return;
        }
        TxChecksum::None => {
            cx.counters.udp.out_no_checksum += 1;
            debug_assert_eq!(buf.data()[6..8], [0, 0]);
            return;
        }
        TxChecksum::Separate => {
            cx.counters.udp.out_checksum_separate += 1;
            field
        }
        TxChecksum::Fused => field,
    };
    let field = if field == 0 { 0xffff } else { field };
    buf.data_mut()[6..8].copy_from_slice(&field.to_be_bytes());
}
