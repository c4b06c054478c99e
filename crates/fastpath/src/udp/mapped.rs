//! Dual-stack sockets: an IPv6 socket bound to `[::]` without `only_v6` takes IPv4 datagrams too,
//! and sends to v4-mapped addresses (`::ffff:a.b.c.d`) over IPv4.

use super::*;

impl Table<Ipv6> {
    /// The dual-stack socket of this table bound to `port` on the wildcard that takes IPv4 (not
    /// `only_v6`), if any.
    pub(super) fn dual_stack_socket(
        &mut self,
        dst: Ipv4Addr,
        src: std::net::SocketAddrV4,
        port: u16,
    ) -> Option<SocketId> {
        let dst = dst.to_ipv6_mapped().socket(port);
        let src = src.ip().to_ipv6_mapped().socket(src.port());
        let id = self.demux.lookup(dst, src)?;
        let state = self.by_id(id);
        (!state.options.only_v6 && state.pcb.local_addr.is_wildcard()).then_some(id)
    }

    /// An IPv4 datagram (`buf` at its UDP header, its checksum verified or deferred in `pending`
    /// terms already settled by IPv4's input) that no IPv4 socket took, offered to the dual-stack
    /// sockets: queued from the v4-mapped source on one, or given back.
    pub(crate) fn input_mapped(
        &mut self,
        cx: &mut UdpCx<impl Transmit, Ipv4>,
        mut buf: PacketBuf,
        (src, dst): (Ipv4Addr, Ipv4Addr),
    ) -> Option<PacketBuf> {
        let h = buf.data();
        let (sport, dport) = (
            u16::from_be_bytes([h[0], h[1]]),
            u16::from_be_bytes([h[2], h[3]]),
        );
        let Some(id) = self.dual_stack_socket(dst, src.socket(sport), dport) else {
            return Some(buf);
        };
        buf.pull_front(8);
        let from = src.to_ipv6_mapped().socket(sport);
        self.enqueue(cx, id, buf, from, None);
        None
    }

    /// Sends `payload` from dual-stack socket `s` to the IPv4 host behind the v4-mapped `dst`, over
    /// IPv4 (the route worked out for each datagram: the socket's route cache is IPv6's).
    pub(crate) fn send_mapped(
        &mut self,
        cx: &mut UdpCx<impl Transmit, Ipv4>,
        s: UdpSocket,
        mut payload: Payload<'_, '_>,
        dst: std::net::SocketAddrV4,
    ) -> io::Result<usize> {
        let cfg = self.cfg;
        let state = self.get_mut(s).ok_or_else(closed)?;
        if let Some(kind) = state.take_error() {
            return Err(kind.into());
        }
        if state.options.only_v6 {
            return Err(io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("{dst} is IPv4, and the socket is only_v6"),
            ));
        }
        let local_addr = match state.pcb.local_addr {
            a if a.is_wildcard() => Ipv4Addr::UNSPECIFIED,
            a => a.to_ipv4_mapped().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!("a socket bound to {a} cannot send to the IPv4 host {dst}"),
                )
            })?,
        };
        let len = payload.len();
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds {MAX_PAYLOAD}"),
            ));
        }
        let pcb = Pcb {
            local_addr,
            local_port: state.pcb.local_port,
            remote_addr: Ipv4Addr::UNSPECIFIED,
            remote_port: 0,
        };
        let options = state.options;
        if dst.port() == 0 {
            return Err(port_zero());
        }
        if dst.ip().is_unspecified() {
            return Err(wildcard_destination());
        }
        if cx.ip.is_broadcast(*dst.ip()) && !options.broadcast {
            return Err(broadcast_denied());
        }
        let tx = tx_route(cfg, cx, pcb, options, dst)?;
        output::<Ipv4>(&cfg, None, cx, s, &tx, pcb, &mut payload, len);
        Ok(len)
    }
}

impl Udp {
    /// True when binding `local` with `options` would take a port the other family holds in a way the
    /// dual stack shares (as Linux refuses with `EADDRINUSE`): an IPv4 bind of a port a dual-stack
    /// IPv6 socket holds on the wildcard, or a dual-stack wildcard IPv6 bind of a port an IPv4 socket
    /// holds, unless both allow reuse.
    pub(crate) fn dual_stack_conflict(&self, local: SocketAddr, options: UdpOptions) -> bool {
        let port = local.port();
        if port == 0 || !self.ports.in_use(port) {
            return false;
        }
        let reuse = |o: &UdpOptions| options.reuse_address && o.reuse_address;
        match local {
            SocketAddr::V4(_) => self.v6.sockets.iter().any(|(_, s)| {
                s.pcb.local_port == port
                    && !s.options.only_v6
                    && s.pcb.local_addr.is_wildcard()
                    && !reuse(&s.options)
            }),
            SocketAddr::V6(a) if a.ip().is_unspecified() && !options.only_v6 => self
                .v4
                .sockets
                .iter()
                .any(|(_, s)| s.pcb.local_port == port && !reuse(&s.options)),
            SocketAddr::V6(_) => false,
        }
    }
}
