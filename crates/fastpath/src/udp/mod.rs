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
mod input;
mod intercept;
mod mapped;
mod output;
mod receive;

pub(crate) use intercept::{InterceptQueue, Intercepted};
pub(crate) use output::TxRoute;
use output::{output, tx_route};
pub(crate) use receive::RecvCx;

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
    /// The byte datagrams carry as the IPv4 header's type of service or IPv6's traffic class
    /// (`IP_TOS`, `IPV6_TCLASS`): the DSCP in the top six bits (RFC 2474), the ECN field in the
    /// low two, both the application's, as Linux leaves them to a datagram socket. 0 by default.
    pub tos: u8,
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

/// The UDP layer: a socket table per family, and the local ports in use (shared: a port is a port).
#[derive(Debug)]
pub(crate) struct Udp {
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
