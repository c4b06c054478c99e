//! UDP: the socket table, input (checksum, demultiplexing, queueing) and output (copy, checksum, send).
//!
//! Input verifies the checksum on arrival, or, with [`CopyChecksum::Fused`], sums only the pseudo-header
//! and UDP header and leaves the payload to be verified while it is copied to the application
//! (Partridge & Pink §7.1.1). Output copies the application's data into a buffer once, after headroom
//! for every header, summing it in the same loop when fused.

mod socket;

pub use socket::{UdpOptions, UdpSocket, UdpSocketRef};

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};

use crate::buf::{gather, ChecksumOffload, PacketBuf};
use crate::checksum::{self, Checksum};
use crate::config::{CopyChecksum, StackConfig};
use crate::demux::{Demux, Pcb, SocketId};
use crate::ipv4::ident::IdentBucket;
use crate::ipv4::route::InterfaceId;
use crate::ipv4::{Delivery, NextHop};
use crate::stack::{Stack, LOOPBACK};
use crate::stats::DropReason;
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::{IpProtocol, Ipv4Repr, UdpPacket, UdpRepr, WireError};

/// Largest UDP payload in one IPv4 datagram: 65535 - 20 - 8.
pub const MAX_PAYLOAD: usize = 65507;

/// A datagram waiting in a socket's receive queue; its buffer's window is the payload.
#[derive(Debug)]
pub(crate) struct RxDatagram {
    pub(crate) buf: PacketBuf,
    pub(crate) from: SocketAddrV4,
    /// With deferred verification: the sum of the pseudo-header and UDP header, to be completed with the
    /// payload's sum as it is copied out.
    pub(crate) pending: Option<u16>,
}

/// Per-socket counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketCounters {
    /// Datagrams queued.
    pub queued: u64,
    /// Datagrams dropped because the receive queue was full.
    pub queue_full: u64,
    /// Datagrams dropped at read time because the deferred checksum failed.
    pub bad_checksum: u64,
}

/// The state of one UDP socket (its protocol control block and queues).
#[derive(Debug)]
pub(crate) struct SocketState {
    pub(crate) pcb: Pcb,
    /// The local address as bound by the user (restored on disconnect).
    pub(crate) bound_addr: Ipv4Addr,
    pub(crate) options: UdpOptions,
    pub(crate) rx: VecDeque<RxDatagram>,
    pub(crate) rx_bytes: usize,
    pub(crate) error: Option<io::ErrorKind>,
    pub(crate) counters: SocketCounters,
    /// The route and headers of the last destination sent to (`output_route_cache`); cleared when the
    /// PCB or the options change, stale when the stack's routes or interfaces have changed since.
    pub(crate) tx_cache: Option<TxRoute>,
}

/// What `send_to` needs about one destination that does not change from datagram to datagram: the
/// interface, its MTU, the checksum mode, and the constant parts of the headers and their sums.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxRoute {
    dst: SocketAddrV4,
    /// The stack's `route_epoch` when this was computed.
    epoch: u32,
    iface: InterfaceId,
    mtu: usize,
    mode: TxChecksum,
    /// The UDP pseudo-header's source, destination and protocol, summed (unfolded).
    pseudo: u32,
    /// The IPv4 header with zero length, ident and checksum.
    ip: [u8; 20],
    /// The sum of that header's 16-bit words (unfolded).
    ip_sum: u32,
    /// The identification counter of this source, destination and protocol.
    ident: IdentBucket,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    socket: Option<SocketState>,
}

/// Every UDP socket, the demultiplexer over them, and the ephemeral port cursor.
#[derive(Debug)]
pub(crate) struct UdpTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    pub(crate) demux: Box<dyn Demux>,
    next_ephemeral: u16,
    matches: Vec<SocketId>,
}

impl UdpTable {
    pub(crate) fn new(config: &StackConfig) -> UdpTable {
        UdpTable {
            slots: Vec::new(),
            free: Vec::new(),
            demux: config.demux.build(),
            next_ephemeral: *config.ephemeral_ports.start(),
            matches: Vec::new(),
        }
    }

    pub(crate) fn get(&self, s: UdpSocket) -> Option<&SocketState> {
        self.slots
            .get(s.index as usize)
            .filter(|slot| slot.generation == s.generation)?
            .socket
            .as_ref()
    }

    pub(crate) fn get_mut(&mut self, s: UdpSocket) -> Option<&mut SocketState> {
        self.slots
            .get_mut(s.index as usize)
            .filter(|slot| slot.generation == s.generation)?
            .socket
            .as_mut()
    }

    fn by_id(&mut self, id: SocketId) -> &mut SocketState {
        self.slots[id.0 as usize]
            .socket
            .as_mut()
            .expect("demux holds only live sockets")
    }

    fn sockets(&self) -> impl Iterator<Item = &SocketState> {
        self.slots.iter().filter_map(|s| s.socket.as_ref())
    }

    /// True when binding `local` (with `reuse`) would conflict with an existing socket: same port, and
    /// addresses that overlap (equal, or either a wildcard), unless both sockets allow reuse.
    fn conflicts(&self, local: SocketAddrV4, reuse: bool) -> bool {
        self.sockets().any(|s| {
            s.pcb.local_port == local.port()
                && (s.pcb.local_addr.is_unspecified()
                    || local.ip().is_unspecified()
                    || s.pcb.local_addr == *local.ip())
                && !(reuse && s.options.reuse_address)
        })
    }

    fn port_in_use(&self, port: u16) -> bool {
        self.sockets().any(|s| s.pcb.local_port == port)
    }

    fn ephemeral_port(&mut self, range: &std::ops::RangeInclusive<u16>) -> Option<u16> {
        let (lo, hi) = (*range.start(), *range.end());
        let span = (hi - lo) as u32 + 1;
        for _ in 0..span {
            let port = self.next_ephemeral.clamp(lo, hi);
            self.next_ephemeral = if port == hi { lo } else { port + 1 };
            if !self.port_in_use(port) {
                return Some(port);
            }
        }
        None
    }

    fn insert(&mut self, state: SocketState) -> UdpSocket {
        let pcb = state.pcb;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    socket: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.socket = Some(state);
        self.demux.insert(SocketId(index), pcb);
        UdpSocket {
            index,
            generation: slot.generation,
        }
    }

    pub(crate) fn remove(&mut self, s: UdpSocket) -> Option<SocketState> {
        let slot = self
            .slots
            .get_mut(s.index as usize)
            .filter(|slot| slot.generation == s.generation)?;
        let state = slot.socket.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(s.index);
        self.demux.remove(SocketId(s.index), &state.pcb);
        Some(state)
    }

    /// Replaces socket `s`'s PCB, keeping the demultiplexer in step.
    pub(crate) fn set_pcb(&mut self, s: UdpSocket, pcb: Pcb) {
        let id = SocketId(s.index);
        let state = self.by_id(id);
        state.tx_cache = None;
        let old = std::mem::replace(&mut state.pcb, pcb);
        self.demux.remove(id, &old);
        self.demux.insert(id, pcb);
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "no such UDP socket (closed)")
}

impl Stack {
    /// Binds a UDP socket to `local` with default options. Port 0 picks an ephemeral port; address
    /// `0.0.0.0` receives on every address of the host.
    ///
    /// `local` is anything [`ToSocketAddrs`] takes (`SocketAddrV4`, `"127.0.0.1:9"`,
    /// `(Ipv4Addr::LOCALHOST, 9)`, ...): the first IPv4 address it resolves to is used, and one that
    /// resolves to IPv6 addresses only is an `AddrNotAvailable` error (no IPv6 yet). A host name is
    /// resolved by the system, which may block.
    pub fn udp_bind(&mut self, local: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        self.udp_bind_with(local, UdpOptions::default())
    }

    /// Binds a UDP socket with `options` (set before binding, such as `reuse_address`). `local` as for
    /// [`udp_bind`](Stack::udp_bind).
    pub fn udp_bind_with(
        &mut self,
        local: impl ToSocketAddrs,
        options: UdpOptions,
    ) -> io::Result<UdpSocket> {
        let local = crate::addr::ipv4(&local)?;
        self.udp_bind_v4(local, options)
    }

    /// [`udp_bind_with`](Stack::udp_bind_with) once the address is resolved.
    fn udp_bind_v4(
        &mut self,
        local: SocketAddrV4,
        mut options: UdpOptions,
    ) -> io::Result<UdpSocket> {
        let addr = *local.ip();
        self.check_local_address(addr)?;
        let port = match local.port() {
            0 => self
                .udp
                .ephemeral_port(&self.config.ephemeral_ports)
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::AddrInUse, "no free ephemeral port")
                })?,
            p => p,
        };
        let local = SocketAddrV4::new(addr, port);
        if self.udp.conflicts(local, options.reuse_address) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{local} is in use (set reuse_address on every socket sharing it)"),
            ));
        }
        options.recv_buffer_bytes = options
            .recv_buffer_bytes
            .or(Some(self.config.limits.udp_rx_queue_bytes));
        Ok(self.udp.insert(SocketState {
            pcb: Pcb::bound(local),
            bound_addr: addr,
            options,
            rx: VecDeque::new(),
            rx_bytes: 0,
            error: None,
            counters: SocketCounters::default(),
            tx_cache: None,
        }))
    }

    /// A handle to call socket methods on, in the manner of `std::net::UdpSocket`.
    pub fn udp(&mut self, socket: UdpSocket) -> UdpSocketRef<'_> {
        UdpSocketRef {
            stack: self,
            socket,
        }
    }

    /// Connects `s` to `remote`: fixes its remote address, picks its local address by route if bound to
    /// the wildcard, and refuses a 4-tuple already in use.
    pub(crate) fn udp_connect(&mut self, s: UdpSocket, remote: SocketAddrV4) -> io::Result<()> {
        let state = self.udp.get(s).ok_or_else(closed)?;
        if remote.ip().is_unspecified() || remote.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "cannot connect to a wildcard address or port 0",
            ));
        }
        if self.is_broadcast(*remote.ip()) && !state.options.broadcast {
            return Err(broadcast_denied());
        }
        let hop = self
            .route(*remote.ip())
            .map_err(|_| no_route(*remote.ip()))?;
        let local_addr = if state.bound_addr.is_unspecified() {
            hop.src
        } else {
            state.bound_addr
        };
        let pcb = Pcb {
            local_addr,
            local_port: state.pcb.local_port,
            remote_addr: *remote.ip(),
            remote_port: remote.port(),
        };
        self.check_tuple_free(s, &pcb)?;
        self.udp.set_pcb(s, pcb);
        Ok(())
    }

    /// True for the limited broadcast and every interface's directed broadcast: the addresses the
    /// broadcast option is needed for, as in BSD's `in_broadcast`.
    fn is_broadcast(&self, addr: Ipv4Addr) -> bool {
        addr.is_broadcast() || self.ifaces.iter().any(|f| f.broadcast == Some(addr))
    }

    /// Refuses a connected PCB whose 4-tuple another socket has.
    fn check_tuple_free(&mut self, s: UdpSocket, pcb: &Pcb) -> io::Result<()> {
        let local = SocketAddrV4::new(pcb.local_addr, pcb.local_port);
        let remote = SocketAddrV4::new(pcb.remote_addr, pcb.remote_port);
        if let Some(other) = self.udp.demux.lookup(local, remote) {
            if other.0 != s.index && self.udp.by_id(other).pcb == *pcb {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{local} -> {remote} is in use"),
                ));
            }
        }
        Ok(())
    }

    /// Undoes a connect: the socket takes datagrams from anyone again.
    pub(crate) fn udp_disconnect(&mut self, s: UdpSocket) -> io::Result<()> {
        let state = self.udp.get(s).ok_or_else(closed)?;
        let pcb = Pcb::bound(SocketAddrV4::new(state.bound_addr, state.pcb.local_port));
        self.udp.set_pcb(s, pcb);
        Ok(())
    }

    /// Sends `payload` as one datagram from `s` to `dst` (or to its peer if `None`).
    pub(crate) fn udp_send(
        &mut self,
        s: UdpSocket,
        mut payload: Payload<'_, '_>,
        dst: Option<SocketAddrV4>,
    ) -> io::Result<usize> {
        let epoch = self.route_epoch;
        let state = self.udp.get_mut(s).ok_or_else(closed)?;
        if let Some(kind) = state.error.take() {
            return Err(kind.into());
        }
        let pcb = state.pcb;
        let options = state.options;
        let dst = match dst {
            Some(d) => d,
            None if pcb.is_connected() => SocketAddrV4::new(pcb.remote_addr, pcb.remote_port),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "socket is not connected",
                ))
            }
        };
        let len = payload.len();
        // The route cache: the same destination as last time, checked when it was cached, and a
        // datagram that needs no fragmenting.
        if let Some(tx) = &state.tx_cache {
            if tx.dst == dst && tx.epoch == epoch && len <= MAX_PAYLOAD && 28 + len <= tx.mtu {
                let tx = *tx;
                self.udp_output_cached(s, &tx, pcb, &mut payload, len);
                return Ok(len);
            }
        }
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds {MAX_PAYLOAD}"),
            ));
        }
        if dst.ip().is_unspecified() || dst.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "cannot send to a wildcard address or port 0",
            ));
        }
        if self.is_broadcast(*dst.ip()) && !options.broadcast {
            return Err(broadcast_denied());
        }

        if self.config.output_route_cache
            && self.config.output_header_template
            && !self.config.sendto_pseudo_connect
        {
            let tx = self.tx_route(pcb, options, dst)?;
            if 28 + len <= tx.mtu {
                if let Some(state) = self.udp.get_mut(s) {
                    state.tx_cache = Some(tx);
                }
                self.udp_output_cached(s, &tx, pcb, &mut payload, len);
                return Ok(len);
            }
        }
        if self.config.sendto_pseudo_connect && !pcb.is_connected() {
            // 4.3BSD: connect for the duration of the send, then disconnect (paper 000 §6.2).
            self.udp_connect(s, dst)?;
            let connected = self.udp.get(s).ok_or_else(closed)?.pcb;
            let result = self.udp_output(s, connected, options, &mut payload, dst, len);
            self.udp.set_pcb(s, pcb);
            return result;
        }
        self.udp_output(s, pcb, options, &mut payload, dst, len)
    }

    /// Routes `dst` for a socket with `pcb`: the next hop and the source address.
    fn source_route(&self, pcb: Pcb, dst: SocketAddrV4) -> io::Result<(NextHop, Ipv4Addr)> {
        let hop: NextHop = self.route(*dst.ip()).map_err(|_| no_route(*dst.ip()))?;
        let src = if pcb.local_addr.is_unspecified() {
            hop.src
        } else {
            pcb.local_addr
        };
        if src.is_loopback() && hop.iface != LOOPBACK {
            // 127/8 must not appear outside the host (RFC 1122 §3.2.1.3); Linux says EINVAL too.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a socket bound to {src} cannot send to {dst}, off the host"),
            ));
        }
        Ok((hop, src))
    }

    /// How a datagram to `dst` through `hop` is checksummed.
    fn tx_checksum_mode(
        &self,
        options: UdpOptions,
        hop: &NextHop,
        dst: SocketAddrV4,
        fragments: bool,
    ) -> TxChecksum {
        let policy = self.config.checksum_policy;
        if options.no_checksum
            || (policy.eliminate_on_protected_hop
                && hop.caps.crc_protected
                && hop.next_hop == *dst.ip())
        {
            TxChecksum::None
        } else if policy.use_offload && hop.caps.tx_checksum_offload && !fragments {
            TxChecksum::Offload
        } else {
            TxChecksum::Software
        }
    }

    /// Everything about sending to `dst` from a socket with `pcb` and `options` that is the same for
    /// every datagram that fits the MTU, for the route cache.
    fn tx_route(&self, pcb: Pcb, options: UdpOptions, dst: SocketAddrV4) -> io::Result<TxRoute> {
        let (hop, src) = self.source_route(pcb, dst)?;
        let mode = self.tx_checksum_mode(options, &hop, dst, false);
        let [s0, s1, s2, s3] = src.octets();
        let [d0, d1, d2, d3] = dst.ip().octets();
        let ttl = self.config.default_ttl;
        let proto: u8 = IpProtocol::Udp.into();
        // Version and header length 0x45, TOS 0, no flags or offset: as `ipv4_output`'s template.
        let ip = [
            0x45, 0, 0, 0, 0, 0, 0, 0, ttl, proto, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3,
        ];
        let ip_sum = ip
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let (s, d) = (u32::from(src), u32::from(*dst.ip()));
        let pseudo = (s >> 16) + (s & 0xffff) + (d >> 16) + (d & 0xffff) + u32::from(proto);
        Ok(TxRoute {
            dst,
            epoch: self.route_epoch,
            iface: hop.iface,
            mtu: hop.caps.mtu,
            mode,
            pseudo,
            ip,
            ip_sum,
            ident: self.ident.bucket(src, *dst.ip(), proto),
        })
    }

    /// Output through the route cache (`output_route_cache`): the UDP and IPv4 headers of a datagram
    /// that fits the MTU, from `tx`'s constant parts and sums, and the payload copied (and summed) once.
    fn udp_output_cached(
        &mut self,
        s: UdpSocket,
        tx: &TxRoute,
        pcb: Pcb,
        payload_source: &mut Payload<'_, '_>,
        len: usize,
    ) {
        layer!(Send, Udp);
        let mut buf = {
            timed!(Buffers);
            self.pool.alloc(8 + len)
        };
        let udp_len = (8 + len) as u16;
        let datagram = buf.extend(8 + len);
        let (header, payload) = datagram.split_at_mut(8);
        let [p0, p1] = pcb.local_port.to_be_bytes();
        let [q0, q1] = tx.dst.port().to_be_bytes();
        let [l0, l1] = udp_len.to_be_bytes();
        header.copy_from_slice(&[p0, p1, q0, q1, l0, l1, 0, 0]);
        let pseudo = fold(tx.pseudo + u32::from(udp_len));
        let field = match payload_source {
            Payload::Copy(pieces)
                if tx.mode == TxChecksum::Software
                    && self.config.copy_checksum == CopyChecksum::Fused =>
            {
                timed!(CopyChecksum);
                let mut sum = Checksum::new();
                sum.add_sum(header_sum(pcb.local_port, tx.dst.port(), udp_len, 0));
                sum.add_sum(pseudo);
                sum.copy_and_add_pieces(self.config.checksum, payload, pieces);
                nonzero(sum.checksum())
            }
            source => {
                match source {
                    Payload::Copy([piece]) => {
                        timed!(Copy);
                        payload.copy_from_slice(piece);
                    }
                    Payload::Copy(pieces) => {
                        timed!(Copy);
                        gather(payload, pieces);
                    }
                    Payload::Fill(_, fill) => fill(payload),
                }
                match tx.mode {
                    TxChecksum::Software => {
                        timed!(Checksum);
                        nonzero(!checksum::add(self.config.checksum.sum(buf.data()), pseudo))
                    }
                    TxChecksum::Offload => pseudo,
                    TxChecksum::None => 0,
                }
            }
        };
        match tx.mode {
            TxChecksum::Offload => {
                buf.meta.checksum = ChecksumOffload::Partial {
                    start: 20,
                    offset: 6,
                };
                self.counters.udp.out_checksum_offloaded += 1;
            }
            TxChecksum::None => self.counters.udp.out_no_checksum += 1,
            TxChecksum::Software => {}
        }
        buf.data_mut()[6..8].copy_from_slice(&field.to_be_bytes());
        self.counters.udp.out_datagrams += 1;
        self.udp.demux.sent(SocketId(s.index), &pcb);

        layer!(Send, Ip);
        self.counters.ip.out_requests += 1;
        let ident = self.ident.next(tx.ident);
        let total = 20 + udp_len;
        let mut h = tx.ip;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&ident.to_be_bytes());
        let sum = !fold(tx.ip_sum + u32::from(total) + u32::from(ident));
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        buf.push_front(20).copy_from_slice(&h);
        self.enqueue(tx.iface, buf);
    }

    fn udp_output(
        &mut self,
        s: UdpSocket,
        pcb: Pcb,
        options: UdpOptions,
        payload_source: &mut Payload<'_, '_>,
        dst: SocketAddrV4,
        len: usize,
    ) -> io::Result<usize> {
        let (hop, src) = self.source_route(pcb, dst)?;
        let mode = self.tx_checksum_mode(options, &hop, dst, 28 + len > hop.caps.mtu);

        layer!(Send, Udp);
        let mut buf = {
            timed!(Buffers);
            self.pool.alloc(8 + len)
        };
        let datagram = buf.extend(8 + len);
        let (header, payload) = datagram.split_at_mut(8);
        UdpRepr {
            src_port: pcb.local_port,
            dst_port: dst.port(),
            payload_len: len,
        }
        .emit(header);
        let pseudo = checksum::pseudo_header_sum(src, *dst.ip(), 17, (8 + len) as u16);
        let fused =
            mode == TxChecksum::Software && self.config.copy_checksum == CopyChecksum::Fused;
        let field = match payload_source {
            Payload::Copy(pieces) if fused => {
                timed!(CopyChecksum);
                // One pass over the user's data: copy and sum together (paper 000 §7.1).
                let mut sum = Checksum::new();
                sum.add_sum(header_sum(pcb.local_port, dst.port(), (8 + len) as u16, 0));
                sum.add_sum(pseudo);
                sum.copy_and_add_pieces(self.config.checksum, payload, pieces);
                nonzero(sum.checksum())
            }
            source => {
                match source {
                    Payload::Copy(pieces) => {
                        timed!(Copy);
                        gather(payload, pieces);
                    }
                    // Zero copy (paper 002 §3.1): the application writes into the stack's buffer.
                    Payload::Fill(_, fill) => fill(payload),
                }
                match mode {
                    // A separate pass over the whole datagram with the configured routine.
                    TxChecksum::Software => {
                        timed!(Checksum);
                        nonzero(!checksum::add(self.config.checksum.sum(buf.data()), pseudo))
                    }
                    // The field holds the pseudo-header sum; the link completes it.
                    TxChecksum::Offload => pseudo,
                    TxChecksum::None => 0,
                }
            }
        };
        buf.data_mut()[6..8].copy_from_slice(&field.to_be_bytes());
        match mode {
            TxChecksum::Offload => {
                buf.meta.checksum = ChecksumOffload::Partial {
                    start: 20,
                    offset: 6,
                };
                self.counters.udp.out_checksum_offloaded += 1;
            }
            TxChecksum::None => self.counters.udp.out_no_checksum += 1,
            TxChecksum::Software => {}
        }
        self.counters.udp.out_datagrams += 1;
        self.udp.demux.sent(SocketId(s.index), &pcb);
        self.ipv4_output(buf, &hop, src, *dst.ip(), IpProtocol::Udp);
        Ok(len)
    }

    /// Input: one UDP datagram (the IP payload in `buf`).
    #[inline(always)]
    pub(crate) fn udp_input(&mut self, mut buf: PacketBuf, ip: &Ipv4Repr, delivery: Delivery) {
        layer!(Receive, Udp);
        if let Err(e) = UdpPacket::new_checked(buf.data()) {
            let reason = if e == WireError::Truncated {
                DropReason::UdpTruncated
            } else {
                DropReason::UdpBadLength
            };
            return self.drop_packet(buf, reason);
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

        let pseudo = || checksum::pseudo_header_sum(ip.src_addr, ip.dst_addr, 17, udp_len as u16);
        let offloaded =
            self.config.checksum_policy.use_offload && buf.meta.checksum != ChecksumOffload::None;
        let pending = if field == 0 {
            self.counters.udp.in_no_checksum += 1;
            None
        } else if offloaded {
            self.counters.udp.in_checksum_offloaded += 1;
            None
        } else if self.config.copy_checksum == CopyChecksum::Fused {
            Some(checksum::add(
                pseudo(),
                header_sum(repr.src_port, repr.dst_port, udp_len as u16, field),
            ))
        } else {
            let sum = {
                timed!(Checksum);
                self.config.checksum.sum(buf.data())
            };
            if checksum::add(pseudo(), sum) != 0xffff {
                return self.drop_packet(buf, DropReason::UdpBadChecksum);
            }
            None
        };

        let dst = SocketAddrV4::new(ip.dst_addr, repr.dst_port);
        let from = SocketAddrV4::new(ip.src_addr, repr.src_port);
        if delivery == Delivery::Broadcast {
            let mut matches = std::mem::take(&mut self.udp.matches);
            self.udp.demux.lookup_all(dst, from, &mut matches);
            if matches.is_empty() {
                let reason = if deferred_ok(pending, buf.data()) {
                    DropReason::UdpNoSocket
                } else {
                    DropReason::UdpBadChecksum
                };
                self.drop_packet(buf, reason);
            } else {
                buf.pull_front(8);
                let last = matches.len() - 1;
                for &id in &matches[..last] {
                    let copy = buf.duplicate();
                    self.udp_enqueue(id, copy, from, pending);
                }
                self.udp_enqueue(matches[last], buf, from, pending);
            }
            matches.clear();
            self.udp.matches = matches;
            return;
        }
        match self.udp.demux.lookup(dst, from) {
            Some(id) => {
                buf.pull_front(8);
                self.udp_enqueue(id, buf, from, pending);
            }
            None if !deferred_ok(pending, buf.data()) => {
                self.drop_packet(buf, DropReason::UdpBadChecksum)
            }
            None => {
                self.icmp_send_error(DstUnreachable::PortUnreachable, ip, buf.data());
                self.drop_packet(buf, DropReason::UdpNoSocket);
            }
        }
    }

    #[inline]
    fn udp_enqueue(
        &mut self,
        id: SocketId,
        buf: PacketBuf,
        from: SocketAddrV4,
        pending: Option<u16>,
    ) {
        layer!(Receive, Socket);
        let socket = self.udp.by_id(id);
        let size = buf.truesize();
        if socket.rx_bytes + size > socket.options.recv_buffer_bytes.unwrap_or(usize::MAX) {
            socket.counters.queue_full += 1;
            return self.drop_packet(buf, DropReason::UdpQueueFull);
        }
        socket.rx_bytes += size;
        socket.counters.queued += 1;
        socket.rx.push_back(RxDatagram { buf, from, pending });
        self.counters.udp.in_datagrams += 1;
    }

    /// Reports an ICMP error about a datagram this host sent (quoted as `ip` and the first bytes of its
    /// UDP header) to the connected socket that sent it; unconnected sockets are not told (as in BSD
    /// and Linux without `IP_RECVERR`).
    pub(crate) fn udp_report_error(&mut self, ip: &Ipv4Repr, head: &[u8; 8], kind: io::ErrorKind) {
        let local = SocketAddrV4::new(ip.src_addr, u16::from_be_bytes([head[0], head[1]]));
        let remote = SocketAddrV4::new(ip.dst_addr, u16::from_be_bytes([head[2], head[3]]));
        if let Some(id) = self.udp.demux.lookup(local, remote) {
            let socket = self.udp.by_id(id);
            if socket.pcb.is_connected() {
                socket.error = Some(kind);
            }
        }
    }
}

/// Whether a datagram (UDP header first) whose verification was deferred passes its checksum. A
/// datagram no socket will read is verified at once with this, before an ICMP error is sent about it:
/// one with a bad checksum is discarded silently (RFC 1122 §4.1.3.4).
fn deferred_ok(pending: Option<u16>, datagram: &[u8]) -> bool {
    pending.is_none_or(|head| {
        let mut sum = Checksum::new();
        sum.add_sum(head);
        sum.add_bytes(&datagram[8..]);
        sum.sum() == 0xffff
    })
}

/// Where a datagram's payload comes from.
pub(crate) enum Payload<'a, 'b> {
    /// Copied from the application's buffers.
    Copy(&'a [IoSlice<'b>]),
    /// Written by the application straight into the stack's buffer of this length (zero copy).
    Fill(usize, &'a mut dyn FnMut(&mut [u8])),
}

impl Payload<'_, '_> {
    fn len(&self) -> usize {
        match self {
            Payload::Copy(pieces) => pieces.iter().map(|p| p.len()).sum(),
            Payload::Fill(len, _) => *len,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxChecksum {
    Software,
    Offload,
    None,
}

/// The sum of a UDP header's four 16-bit words, computed from its fields: cheaper than a call to the
/// general routine for 8 bytes.
#[inline(always)]
fn header_sum(src_port: u16, dst_port: u16, len: u16, field: u16) -> u16 {
    let acc = src_port as u32 + dst_port as u32 + len as u32 + field as u32;
    let acc = (acc & 0xffff) + (acc >> 16);
    ((acc & 0xffff) + (acc >> 16)) as u16
}

/// Folds a sum of 16-bit words (at most a few hundred thousand of them) to 16 bits, end-around carry
/// included.
#[inline(always)]
fn fold(acc: u32) -> u16 {
    let acc = (acc & 0xffff) + (acc >> 16);
    ((acc & 0xffff) + (acc >> 16)) as u16
}

/// A computed checksum of zero is sent as `0xffff`: zero means "no checksum" (RFC 768).
fn nonzero(field: u16) -> u16 {
    if field == 0 {
        0xffff
    } else {
        field
    }
}

fn broadcast_denied() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "sending to a broadcast address needs the broadcast option",
    )
}

fn no_route(dst: Ipv4Addr) -> io::Error {
    io::Error::new(
        io::ErrorKind::NetworkUnreachable,
        format!("no route to {dst}"),
    )
}
