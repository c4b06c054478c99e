//! UDP: the socket tables, input (checksum, demultiplexing, queueing) and output (copy, checksum, send).
//!
//! Written once over `transport::Network`, the IP layer of a family, and instantiated for IPv4 and
//! IPv6: each family has its own `Table` of sockets and its own demultiplexer; the local ports are shared.
//! What differs by family is said by the IP layer: the header template, the path MTU, and that an
//! IPv6 datagram always carries a checksum (RFC 8200 §8.1: one arriving without is dropped, and the
//! `no_checksum` option and Kay & Pasquale's elimination do not apply).
//!
//! Input verifies the checksum on arrival, or, with `CopyChecksum::Fused`, sums only the pseudo-header
//! and UDP header and leaves the payload to be verified while it is copied to the application
//! (Partridge & Pink §7.1.1). Output copies the application's data into a buffer once, after headroom
//! for every header, summing it in the same loop when fused.
//!
//! # Path MTU
//!
//! UDP never sets DF, and a datagram larger than the path MTU is fragmented here, to the path MTU
//! when one is known (RFC 1191's cache, learned from "fragmentation needed" about TCP or UDP), else
//! to the link's MTU. That is what Linux does with `IP_MTU_DISCOVER` set to `IP_PMTUDISC_DONT`
//! (no DF, but local fragmentation to the cached path MTU). Linux's default for UDP is
//! `IP_PMTUDISC_WANT`: DF on datagrams that fit the path MTU, larger ones fragmented locally
//! without it, and a "fragmentation needed" reported to a connected socket as `EMSGSIZE` on its
//! next call (and to any socket with `IP_RECVERR`). fastpath keeps DF to TCP, so UDP's datagrams are
//! never dropped by a router for their size and there is nothing lost to report: a "fragmentation
//! needed" quoting a datagram of a bound socket (connected or not, as Linux's
//! `ipv4_sk_update_pmtu`) only lowers the destination's path MTU, and the socket is not told. The
//! path MTU is read when a route is worked out (`TxRoute`), never per datagram: learning or
//! forgetting one bumps the stack's `route_epoch`, which makes every cached route stale.

use std::io;

use std::net::{Ipv4Addr, SocketAddr};

use crate::addr::IpAddress;
use crate::buf::ring::Ring;
use crate::buf::{BufferPool, ChecksumOffload, PacketBuf};
use crate::checksum;
use crate::config::StackConfig;
use crate::demux::{Demux, Demuxer, Pcb, SocketId};
use crate::ip::{Delivery, NextHop, Transmit, LOOPBACK};
use crate::ipv4::Ipv4;
use crate::ipv6::Ipv6;
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::transport::checksum::{
    deferred_ok, udp_header_sum, ChecksumRules, RxChecksum, TxChecksum,
};
use crate::transport::hints::Hints;
use crate::transport::network::Network;
use crate::transport::ports::Ports;
use crate::transport::slots::Slots;

pub(crate) use crate::transport::checksum::Payload;
use crate::wire::{IpProtocol, UdpPacket, UdpRepr, WireError};

/// A UDP socket of a stack: a handle, used through `Stack::udp`.
///
/// One 64-bit word: the slot's index in bits 0-30, the family in bit 31 (set for the IPv6 table), the
/// slot's generation in bits 32-63. As three fields it was copied in an 8-byte and a 4-byte store and
/// read back in 4-byte loads, one of them from the middle of the 8-byte store, which the CPU does not
/// forward: the load waited for the store to reach the cache on every call.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpSocket(u64);

impl UdpSocket {
    const V6: u64 = 1 << 31;
    /// The index of no slot: what a datagram sent on no socket's behalf (a reply to an intercepted
    /// one) carries.
    const NO_INDEX: u32 = (1 << 31) - 1;

    fn new(index: u32, generation: u32, v6: bool) -> UdpSocket {
        assert!(u64::from(index) < UdpSocket::V6, "2^31 UDP sockets");
        UdpSocket(
            u64::from(index) | u64::from(generation) << 32 | if v6 { UdpSocket::V6 } else { 0 },
        )
    }

    /// The slot's index in its family's table.
    #[inline]
    pub(crate) fn index(self) -> u32 {
        (self.0 & (UdpSocket::V6 - 1)) as u32
    }

    /// The slot's generation when the socket was opened.
    #[inline]
    pub(crate) fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// In the IPv6 table.
    #[inline]
    pub(crate) fn v6(self) -> bool {
        self.0 & UdpSocket::V6 != 0
    }
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("index", &self.index())
            .field("generation", &self.generation())
            .field("v6", &self.v6())
            .finish()
    }
}

/// Socket options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpOptions {
    /// Allow other sockets with this option to bind the same address and port (`SO_REUSEADDR`).
    pub reuse_address: bool,
    /// Allow sending to broadcast addresses (`SO_BROADCAST`).
    pub broadcast: bool,
    /// Send with no checksum (zero field, RFC 768). Kay & Pasquale (paper 001) added this socket option
    /// for applications, such as audio and video, that tolerate corruption and want the speed. IPv4
    /// only: IPv6 forbids it (RFC 8200 §8.1), and an IPv6 socket ignores it.
    pub no_checksum: bool,
    /// An IPv6 socket takes IPv6 only (Linux's `IPV6_V6ONLY`). Without it (the default, as Linux's
    /// `bindv6only` 0), an IPv6 socket bound to `[::]` also receives the IPv4 datagrams no IPv4 socket
    /// takes, from v4-mapped addresses (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2, RFC 3493 §3.7), and sends
    /// to such addresses over IPv4; and it holds its port in both families. Set before binding.
    pub only_v6: bool,
    /// Receive queue limit in bytes of the buffers queued datagrams hold, as Linux counts `SO_RCVBUF`
    /// (a small datagram from a TUN link holds a 2 KiB buffer); `None` takes the stack's default,
    /// [`Limits::udp_rx_queue_bytes`](crate::config::Limits::udp_rx_queue_bytes).
    pub recv_buffer_bytes: Option<usize>,
}

/// Largest UDP payload in one IPv4 datagram: 65535 - 20 - 8.
pub const MAX_PAYLOAD: usize = 65507;

/// Largest UDP payload in one IPv6 packet without jumbograms: 65535 - 8 (the payload length field
/// does not count the fixed header).
pub const MAX_PAYLOAD_V6: usize = 65527;

/// A datagram waiting in a socket's receive queue; its buffer's window is the payload.
#[derive(Debug)]
pub(crate) struct RxDatagram<A> {
    pub(crate) buf: PacketBuf,
    /// The sender's address and port (kept apart: IPv6's `SocketAddrV6` would carry a flow label and
    /// scope in every queued datagram).
    pub(crate) from: (A, u16),
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
pub(crate) struct SocketState<N: Network> {
    pub(crate) pcb: Pcb<N::Addr>,
    /// The local address as bound by the user (restored on disconnect).
    pub(crate) bound_addr: N::Addr,
    pub(crate) options: UdpOptions,
    pub(crate) rx: Ring<RxDatagram<N::Addr>>,
    pub(crate) rx_bytes: usize,
    pub(crate) error: Option<io::ErrorKind>,
    pub(crate) counters: SocketCounters,
    /// The route and headers of the last destination sent to (`output_route_cache`); cleared when the
    /// PCB or the options change, stale when the stack's routes or interfaces have changed since.
    pub(crate) tx_cache: Option<TxRoute<N>>,
}

impl<N: Network> SocketState<N> {
    /// Takes the pending error (`SO_ERROR`), if any. Looked at before it is taken: `Option::take`
    /// stores its `None` even over a `None`, a store on every send and receive.
    #[inline(always)]
    pub(crate) fn take_error(&mut self) -> Option<io::ErrorKind> {
        self.error?;
        self.error.take()
    }
}

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
    /// The IP header's template.
    ip: N::Template,
}

impl<N: Network> Clone for TxRoute<N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N: Network> Copy for TxRoute<N> {}

/// One family's sockets and the demultiplexer over them.
#[derive(Debug)]
pub(crate) struct Table<N: Network> {
    pub(crate) cfg: UdpConfig,
    sockets: Slots<SocketState<N>>,
    pub(crate) demux: Demuxer<N::Addr>,
    matches: Vec<SocketId>,
    /// Intercepted datagrams (to other hosts' addresses, `Stack::udp_intercept`), while interception
    /// of UDP is on.
    pub(crate) intercept: Option<InterceptQueue<N::Addr>>,
    /// Sockets that may have become ready ([`INTERCEPT_HINT`] for the intercept queue), for an
    /// event loop ([`Stack::take_ready_hints`](crate::Stack::take_ready_hints)).
    pub(crate) hints: Hints,
}

/// The hint that stands for the intercept queue.
pub(crate) const INTERCEPT_HINT: u32 = u32::MAX;

/// The queue of intercepted datagrams, bounded in bytes.
#[derive(Debug)]
pub(crate) struct InterceptQueue<A> {
    pub(crate) rx: std::collections::VecDeque<Intercepted<A>>,
    pub(crate) bytes: usize,
    pub(crate) limit: usize,
}

/// An intercepted datagram: its payload (the buffer's window, checksum verified), its sender and the
/// destination it was sent to.
#[derive(Debug)]
pub(crate) struct Intercepted<A> {
    pub(crate) buf: PacketBuf,
    pub(crate) from: (A, u16),
    pub(crate) to: (A, u16),
}

/// The UDP layer: a socket table per family, and the local ports in use (shared: a port is a port).
#[derive(Debug)]
pub(crate) struct Udp {
    pub(crate) cfg: UdpConfig,
    pub(crate) v4: Table<Ipv4>,
    pub(crate) v6: Table<Ipv6>,
    pub(crate) ports: Ports,
}

/// A family's table in the UDP layer.
pub(crate) trait UdpFamily: Network + Sized {
    /// True for IPv6 (the handle's flag).
    const V6: bool;
    /// The largest payload of one datagram.
    const MAX_PAYLOAD: usize;
    /// The family's table, and the shared ports.
    fn split(udp: &mut Udp) -> (&mut Table<Self>, &mut Ports);
    /// The family's table.
    fn table(udp: &Udp) -> &Table<Self>;
}

impl UdpFamily for Ipv4 {
    const V6: bool = false;
    const MAX_PAYLOAD: usize = MAX_PAYLOAD;
    #[inline(always)]
    fn split(udp: &mut Udp) -> (&mut Table<Ipv4>, &mut Ports) {
        (&mut udp.v4, &mut udp.ports)
    }
    #[inline(always)]
    fn table(udp: &Udp) -> &Table<Ipv4> {
        &udp.v4
    }
}

impl UdpFamily for Ipv6 {
    const V6: bool = true;
    const MAX_PAYLOAD: usize = MAX_PAYLOAD_V6;
    #[inline(always)]
    fn split(udp: &mut Udp) -> (&mut Table<Ipv6>, &mut Ports) {
        (&mut udp.v6, &mut udp.ports)
    }
    #[inline(always)]
    fn table(udp: &Udp) -> &Table<Ipv6> {
        &udp.v6
    }
}

impl Udp {
    pub(crate) fn new(config: &StackConfig) -> Udp {
        let cfg = UdpConfig {
            checksum: ChecksumRules::of(config),
            route_cache: config.output_route_cache,
            sendto_pseudo_connect: config.sendto_pseudo_connect,
            rx_queue_bytes: config.limits.udp_rx_queue_bytes,
            demux_send_cache: config.demux.has_send_cache(),
        };
        Udp {
            cfg,
            v4: Table::new(cfg, config),
            v6: Table::new(cfg, config),
            ports: Ports::new(&config.ephemeral_ports),
        }
    }

    /// The state of socket `s` of family `N` (`None` for a closed socket or one of the other family).
    #[inline]
    pub(crate) fn get<N: UdpFamily>(&self, s: UdpSocket) -> Option<&SocketState<N>> {
        if s.v6() != N::V6 {
            return None;
        }
        N::table(self).sockets.get(s.index(), s.generation())
    }

    #[inline]
    pub(crate) fn get_mut<N: UdpFamily>(&mut self, s: UdpSocket) -> Option<&mut SocketState<N>> {
        if s.v6() != N::V6 {
            return None;
        }
        N::split(self).0.sockets.get_mut(s.index(), s.generation())
    }

    /// Closes socket `s` of family `N`: its state, for the caller to free what it queued.
    pub(crate) fn remove<N: UdpFamily>(&mut self, s: UdpSocket) -> Option<SocketState<N>> {
        if s.v6() != N::V6 {
            return None;
        }
        let (table, ports) = N::split(self);
        table.remove(ports, s)
    }
}

impl<N: Network> Table<N> {
    fn new(cfg: UdpConfig, config: &StackConfig) -> Table<N> {
        Table {
            cfg,
            sockets: Slots::default(),
            demux: config.demux.demuxer(),
            matches: Vec::new(),
            intercept: None,
            hints: Hints::default(),
        }
    }

    fn handle(index: u32, generation: u32) -> UdpSocket
    where
        N: UdpFamily,
    {
        UdpSocket::new(index, generation, N::V6)
    }

    #[inline]
    pub(crate) fn get(&self, s: UdpSocket) -> Option<&SocketState<N>> {
        self.sockets.get(s.index(), s.generation())
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, s: UdpSocket) -> Option<&mut SocketState<N>> {
        self.sockets.get_mut(s.index(), s.generation())
    }

    #[inline]
    fn by_id(&mut self, id: SocketId) -> &mut SocketState<N> {
        self.sockets
            .at_mut(id.0)
            .expect("demux holds only live sockets")
    }

    /// True when binding `local` (with `reuse`) would conflict with an existing socket: same port, and
    /// addresses that overlap (equal, or either a wildcard), unless both sockets allow reuse.
    fn conflicts(&self, ports: &Ports, local: N::Socket, reuse: bool) -> bool {
        let (addr, port) = (N::Addr::ip(&local), N::Addr::port(&local));
        ports.in_use(port)
            && self.sockets.iter().any(|(_, s)| {
                s.pcb.local_port == port
                    && (s.pcb.local_addr.is_wildcard()
                        || addr.is_wildcard()
                        || s.pcb.local_addr == addr)
                    && !(reuse && s.options.reuse_address)
            })
    }

    fn insert(&mut self, ports: &mut Ports, state: SocketState<N>) -> UdpSocket
    where
        N: UdpFamily,
    {
        let pcb = state.pcb;
        let (index, generation) = self.sockets.insert(state);
        ports.take(pcb.local_port);
        self.demux.insert(SocketId(index), pcb);
        Self::handle(index, generation)
    }

    fn remove(&mut self, ports: &mut Ports, s: UdpSocket) -> Option<SocketState<N>> {
        let state = self.sockets.remove(s.index(), s.generation())?;
        ports.release(state.pcb.local_port);
        self.demux.remove(SocketId(s.index()), &state.pcb);
        Some(state)
    }

    /// Replaces socket `s`'s PCB (its port stays), keeping the demultiplexer in step.
    pub(crate) fn set_pcb(&mut self, s: UdpSocket, pcb: Pcb<N::Addr>) {
        let id = SocketId(s.index());
        let state = self.by_id(id);
        state.tx_cache = None;
        let old = std::mem::replace(&mut state.pcb, pcb);
        self.demux.remove(id, &old);
        self.demux.insert(id, pcb);
    }
}

/// A datagram to port 0: `InvalidInput`, as Linux's `EINVAL`.
fn port_zero() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "cannot send to port 0")
}

/// A datagram to the wildcard address.
fn wildcard_destination() -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        "cannot send to a wildcard address",
    )
}

pub(crate) fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "no such UDP socket (closed)")
}

/// UDP's slice of the stack's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdpConfig {
    /// The transport checksum's switches.
    pub(crate) checksum: ChecksumRules,
    /// `output_route_cache`: keep each socket's last route.
    pub(crate) route_cache: bool,
    pub(crate) sendto_pseudo_connect: bool,
    pub(crate) rx_queue_bytes: usize,
    /// The demultiplexer keeps a send cache ([`Demux::sent`] does something): only then is it told of
    /// each datagram sent, which spares the others a call per datagram.
    pub(crate) demux_send_cache: bool,
}

/// What UDP is handed for each call: the clock, the buffer pool, the counters, and the IP layer of the
/// socket's family with the stack's links to send through.
pub(crate) struct UdpCx<'a, T: Transmit, N: Network> {
    pub(crate) now: Instant,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut Counters,
    pub(crate) ip: &'a mut N,
    pub(crate) out: &'a mut T,
}

impl<T: Transmit, N: Network> UdpCx<'_, T, N> {
    /// Counts a drop and recycles the buffer.
    #[inline]
    fn drop(&mut self, buf: PacketBuf, reason: DropReason) {
        timed!(Buffers);
        self.counters.drops.add(reason);
        self.pool.free(buf);
    }

    /// IP output through `hop`, with the datagram's header template.
    #[inline(always)]
    fn output(&mut self, buf: PacketBuf, hop: &NextHop<N::Addr>, template: &N::Template) {
        self.ip.output(
            self.now,
            self.pool,
            self.counters,
            self.out,
            buf,
            hop,
            template,
        );
    }
}

impl<N: UdpFamily> Table<N> {
    /// Binds a socket to `local` with `options` (port 0 picks an ephemeral port; the wildcard address
    /// receives on every address of the host), on a host whose addresses `ip` knows.
    pub(crate) fn bind(
        &mut self,
        ports: &mut Ports,
        ip: &N,
        local: N::Socket,
        mut options: UdpOptions,
    ) -> io::Result<UdpSocket> {
        let addr = N::Addr::ip(&local);
        ip.check_local_address(addr)?;
        let port = ports.choose(N::Addr::port(&local))?;
        let local = addr.socket(port);
        if self.conflicts(ports, local, options.reuse_address) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{local} is in use (set reuse_address on every socket sharing it)"),
            ));
        }
        options.recv_buffer_bytes = options.recv_buffer_bytes.or(Some(self.cfg.rx_queue_bytes));
        Ok(self.insert(
            ports,
            SocketState {
                pcb: Pcb::bound(local),
                bound_addr: addr,
                options,
                rx: Ring::default(),
                rx_bytes: 0,
                error: None,
                counters: SocketCounters::default(),
                tx_cache: None,
            },
        ))
    }
}

impl<N: Network> Table<N> {
    /// Connects `s` to `remote`: fixes its remote address, picks its local address by route if bound to
    /// the wildcard, and refuses a 4-tuple already in use.
    pub(crate) fn connect(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        s: UdpSocket,
        remote: N::Socket,
    ) -> io::Result<()> {
        let state = self.get(s).ok_or_else(closed)?;
        let (raddr, rport) = (N::Addr::ip(&remote), N::Addr::port(&remote));
        if raddr.is_wildcard() || rport == 0 {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "cannot connect to a wildcard address or port 0",
            ));
        }
        if cx.ip.is_broadcast(raddr) && !state.options.broadcast {
            return Err(broadcast_denied());
        }
        let hop = cx.ip.route(raddr, cx.now).map_err(|_| no_route(raddr))?;
        let local_addr = if state.bound_addr.is_wildcard() {
            hop.src
        } else {
            state.bound_addr
        };
        let pcb = Pcb {
            local_addr,
            local_port: state.pcb.local_port,
            remote_addr: raddr,
            remote_port: rport,
        };
        self.check_tuple_free(s, &pcb)?;
        self.set_pcb(s, pcb);
        Ok(())
    }

    /// Refuses a connected PCB whose 4-tuple another socket has.
    fn check_tuple_free(&mut self, s: UdpSocket, pcb: &Pcb<N::Addr>) -> io::Result<()> {
        let local = pcb.local_addr.socket(pcb.local_port);
        let remote = pcb.remote_addr.socket(pcb.remote_port);
        if let Some(other) = self.demux.lookup(local, remote) {
            if other.0 != s.index() && self.by_id(other).pcb == *pcb {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{local} -> {remote} is in use"),
                ));
            }
        }
        Ok(())
    }

    /// Undoes a connect: the socket takes datagrams from anyone again.
    pub(crate) fn disconnect(&mut self, s: UdpSocket) -> io::Result<()> {
        let state = self.get(s).ok_or_else(closed)?;
        let pcb = Pcb::bound(state.bound_addr.socket(state.pcb.local_port));
        self.set_pcb(s, pcb);
        Ok(())
    }

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
    fn send_general(
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

    /// Queues an intercepted datagram (to another host's address) for the application, if interception
    /// of UDP is on; no socket of the host's is looked at, and nothing answers it.
    #[inline(never)]
    fn intercepted(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        mut buf: PacketBuf,
        from: N::Socket,
        to: N::Socket,
        pending: Option<u16>,
    ) {
        let Some(queue) = &mut self.intercept else {
            return cx.drop(buf, DropReason::UdpInterceptOff);
        };
        // The queue is the application's: verify a deferred checksum now rather than keep its sum.
        if !deferred_ok(pending, &buf.data()[8..]) {
            return cx.drop(buf, DropReason::UdpBadChecksum);
        }
        let size = buf.truesize();
        if queue.bytes + size > queue.limit {
            return cx.drop(buf, DropReason::UdpInterceptQueueFull);
        }
        buf.pull_front(8);
        queue.bytes += size;
        self.hints.note(INTERCEPT_HINT);
        queue.rx.push_back(Intercepted {
            buf,
            from: (N::Addr::ip(&from), N::Addr::port(&from)),
            to: (N::Addr::ip(&to), N::Addr::port(&to)),
        });
        cx.counters.udp.in_datagrams += 1;
    }

    /// Turns interception of UDP on (with a queue of at most `limit` bytes) or off (what is queued
    /// is freed).
    pub(crate) fn set_intercept(&mut self, limit: Option<usize>, pool: &mut BufferPool) {
        match limit {
            Some(limit) => match &mut self.intercept {
                Some(q) => q.limit = limit,
                None => {
                    self.intercept = Some(InterceptQueue {
                        rx: Default::default(),
                        bytes: 0,
                        limit,
                    })
                }
            },
            None => {
                for d in self.intercept.take().into_iter().flat_map(|q| q.rx) {
                    pool.free(d.buf);
                }
            }
        }
    }

    /// The next intercepted datagram, if any.
    pub(crate) fn pop_intercepted(&mut self) -> Option<Intercepted<N::Addr>> {
        let queue = self.intercept.as_mut()?;
        let d = queue.rx.pop_front()?;
        queue.bytes -= d.buf.truesize();
        Some(d)
    }

    /// Sends `payload` from `from`, another host's address (the destination of an intercepted flow),
    /// to `to`: allowed while interception of UDP is on.
    pub(crate) fn send_from(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        mut payload: Payload<'_, '_>,
        from: N::Socket,
        to: N::Socket,
    ) -> io::Result<usize>
    where
        N: UdpFamily,
    {
        if self.intercept.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "sending from another host's address needs interception of UDP on",
            ));
        }
        let len = payload.len();
        if len > N::MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds {}", N::MAX_PAYLOAD),
            ));
        }
        for (a, what) in [(from, "source"), (to, "destination")] {
            if N::Addr::port(&a) == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{what} {a}: port 0"),
                ));
            }
            if N::Addr::ip(&a).is_wildcard() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!("{what} {a}: a wildcard address or port 0"),
                ));
            }
        }
        if cx.ip.is_broadcast(N::Addr::ip(&to)) {
            return Err(broadcast_denied());
        }
        let pcb = Pcb {
            local_addr: N::Addr::ip(&from),
            local_port: N::Addr::port(&from),
            remote_addr: N::Addr::ip(&to),
            remote_port: N::Addr::port(&to),
        };
        let tx = tx_route(self.cfg, cx, pcb, UdpOptions::default(), to)?;
        let s = Self::handle(UdpSocket::NO_INDEX, 0);
        output(&self.cfg, None, cx, s, &tx, pcb, &mut payload, len);
        Ok(len)
    }

    /// Queues a datagram on socket `id` (of this family; `cx` may be the other family's, for a
    /// datagram a dual-stack socket takes).
    #[inline(always)]
    fn enqueue<M: Network>(
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
    /// (as in BSD and Linux without `IP_RECVERR`).
    pub(crate) fn report_error(
        &mut self,
        (src, dst): (N::Addr, N::Addr),
        head: &[u8; 8],
        kind: io::ErrorKind,
    ) {
        let local = src.socket(u16::from_be_bytes([head[0], head[1]]));
        let remote = dst.socket(u16::from_be_bytes([head[2], head[3]]));
        if let Some(id) = self.demux.lookup(local, remote) {
            let socket = self.by_id(id);
            if socket.pcb.is_connected() {
                socket.error = Some(kind);
                self.hints.note(id.0);
            }
        }
    }
}

/// Routes `dst` for a socket with `pcb`: the next hop and the source address.
fn source_route<N: Network>(
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
fn tx_checksum_mode<N: Network>(
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
fn tx_route<N: Network>(
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
        ip: cx.ip.template(src, daddr, IpProtocol::Udp),
    })
}

impl Table<Ipv6> {
    /// The dual-stack socket of this table bound to `port` on the wildcard that takes IPv4 (not
    /// `only_v6`), if any.
    fn dual_stack_socket(
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

/// Output, the one routine for every datagram: the UDP header from `tx`'s constant parts, the
/// payload copied (and summed, when fused) once, and the datagram handed to IPv4 with `tx`'s
/// header template (which IPv4 uses when its switch is on and the datagram fits the MTU).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn output<N: Network>(
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
fn finish<N: Network>(
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

fn broadcast_denied() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "sending to a broadcast address needs the broadcast option",
    )
}

fn no_route(dst: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::NetworkUnreachable,
        format!("no route to {dst}"),
    )
}

#[cfg(test)]
mod tests {
    use super::UdpSocket;

    #[test]
    fn a_handle_keeps_its_index_generation_and_family() {
        for index in [0, 1, 77, UdpSocket::NO_INDEX] {
            for generation in [0, 1, 0x8000_0000, u32::MAX] {
                for v6 in [false, true] {
                    let s = UdpSocket::new(index, generation, v6);
                    assert_eq!((s.index(), s.generation(), s.v6()), (index, generation, v6));
                }
            }
        }
        assert_ne!(UdpSocket::new(3, 1, false), UdpSocket::new(3, 1, true));
        assert_ne!(UdpSocket::new(3, 1, false), UdpSocket::new(3, 2, false));
    }

    #[test]
    #[should_panic(expected = "2^31")]
    fn an_index_past_31_bits_is_a_bug() {
        UdpSocket::new(1 << 31, 0, false);
    }
}
