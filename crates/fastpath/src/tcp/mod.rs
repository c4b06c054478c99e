//! TCP (RFC 9293): connections, listeners, input, output and timers.
//!
//! The layout follows the work: [`seq`] is sequence arithmetic; `tcb` is one connection's state
//! machine ([`State`], [`ConnectionInfo`]), which decides what to send but builds no packets; `buffers`
//! holds its data; [`congestion`] sizes its window; `isn` makes initial sequence numbers and SYN
//! cookies from the stack's secret. `listen` is a listener's machine (a SYN in, a new block or a
//! cookie SYN-ACK out), pure like the block's. `table` is the table of connections and listeners
//! (found through the same [`Demux`] as UDP: fully specified PCBs for connections, wildcard-remote
//! PCBs for listeners, best match first) with the stack's bookkeeping per slot and the deadline heap;
//! `input` finds a segment's connection or listener and acts on its verdict; `output` builds the
//! segments. This file holds the handles and what the application asks of the layer (listen,
//! connect, close, abort) and ICMP's reports. The application's API is
//! [`TcpListener`] and [`TcpStream`] handles, used through
//! [`Stack::tcp_listener`](crate::Stack::tcp_listener) and [`Stack::tcp`](crate::Stack::tcp).
//!
//! Techniques and their switches ([`TcpConfig`]): header prediction
//! (`header_prediction`, paper 000 §2), checksum offload (the stack's `checksum_policy`, paper 002
//! §3.2), zero-copy receive and in-place send (always: see `TcpStreamRef::read_with` and
//! `TcpStreamRef::write_with`), SACK, timestamps and window scaling, CUBIC or NewReno, delayed ACKs,
//! SYN cookies. `writes` keeps what the application said of its writes beyond their bytes: record
//! ends (`MSG_EOR`) and acknowledgment notifications (`MSG_ZEROCOPY`).

mod buffers;
pub mod congestion;
pub(crate) mod fastopen;
mod input;
mod isn;
mod listen;
mod output;
mod rack;
pub mod seq;
mod table;
mod tcb;
mod writes;

pub use congestion::CongestionAlgorithm;
pub(crate) use tcb::Tcb;
pub use tcb::{CongestionState, ConnectionInfo, PathMtuDiscovery, State, TcpSocketOptions};
pub use writes::{TxTimestamp, TxTimestampKind, TxTimestamping, WriteFlags};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, IoSlice};
use std::marker::PhantomData;

use crate::addr::IpAddress;
use crate::buf::BufferPool;
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::checksum;
use crate::config::{StackConfig, TcpConfig};
use crate::demux::{Demux, Demuxer, Pcb, SocketId};
use crate::ip::{Delivery, NextHop, Transmit, LOOPBACK};
use crate::ipv4::Ipv4;
use crate::secret::SecretKey;
use crate::stats::DropReason;
use crate::stats::{Counters, TcpCounters};
use crate::time::Instant;
use crate::transport::checksum::{ChecksumRules, Payload, RxChecksum, TxChecksum};
use crate::transport::hints::Hints;
use crate::transport::network::Network;
use crate::transport::ports::Ports;
use crate::transport::slots::Slots;
use crate::wire::tcp::{Flags, TcpOptions, TcpPacket, TcpRepr, CHECKSUM_OFFSET};
use crate::wire::WireError;
use isn::IsnGenerator;
pub(crate) use listen::Listener;
use table::conn_at;
use tcb::{Cx, Outgoing, Verdict};

/// Segments one call to the output routine sends at most before it lets the link drain.
const OUTPUT_BURST: usize = 64;

/// Largest TCP payload in one TSO packet of family `A`: 64 KiB less the IP header and a TCP header
/// with options.
const fn tso_max<A: IpAddress>() -> usize {
    65535 - A::HEADER_LEN - 60
}

/// A listening socket: a handle, used through `Stack::tcp_listener`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpListener {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    /// In the IPv6 table.
    pub(crate) v6: bool,
    /// A dual-stack IPv6 listener's IPv4 half: the listener on `0.0.0.0` and the same port in the
    /// IPv4 table (slot and generation), whose connections `accept` hands out too.
    pub(crate) v4_half: Option<(u32, u32)>,
}

/// Options of a listening socket, set before it listens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpListenOptions {
    /// An IPv6 listener on `[::]` takes IPv6 connections only (Linux's `IPV6_V6ONLY`). Without it (the
    /// default, as Linux's `bindv6only` 0) it takes IPv4 connections on its port too: they are IPv4
    /// connections, and `accept` gives their peer as a v4-mapped address (`::ffff:a.b.c.d`).
    pub only_v6: bool,
}

/// A connection: a handle, used through `Stack::tcp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpStream {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    /// In the IPv6 table.
    pub(crate) v6: bool,
}

#[derive(Debug)]
pub(crate) enum Entry<A: IpAddress = std::net::Ipv4Addr> {
    Listener(Listener<A>),
    Conn(Box<Tcb<A>>),
    /// A connection in TIME-WAIT the application has closed, compacted (see [`tcb::TimeWait`]).
    TimeWait(Box<tcb::TimeWait<A>>),
}

/// What a slot of the table holds.
#[derive(Debug)]
struct Slot<A: IpAddress> {
    entry: Entry<A>,
    /// The entry's PCB is in the demultiplexer.
    in_demux: bool,
    /// The deadline of this slot's live entry in the table's timer heap, if it has one: never later
    /// than the connection's own deadline (it is earlier when that deadline moved later).
    scheduled: Option<Instant>,
    /// The listener (its slot) a passive open belongs to until it is accepted.
    parent: Option<u32>,
    /// The connection is on the list of those to send for after the input batch (`Tcp::dirty`).
    output_queued: bool,
}

/// The TCP layer: every connection and listener, the demultiplexer over them, the ports in use, the
/// sequence-number generator and the timers.
#[derive(Debug)]
pub(crate) struct Tcp<N: Network = Ipv4> {
    slots: Slots<Slot<N::Addr>>,
    pub(crate) demux: Demuxer<N::Addr>,
    /// Local ports in use.
    ports: Ports,
    /// The transport checksum's switches, from the configuration.
    checksum: ChecksumRules,
    isn: IsnGenerator,
    /// The key of the server's Fast Open cookies unless the configuration gives one.
    fast_open_key: SecretKey,
    /// The client's Fast Open cookies, per server.
    fast_open_cache: fastopen::CookieCache<N::Addr>,
    /// When the last SYN cookie went out: an ACK to a listener is checked as a cookie only while one
    /// sent could still be valid, and is otherwise a stray (of a connection gone, say).
    last_cookie: Option<Instant>,
    /// The connections' deadlines, earliest first: (deadline, slot, generation). An entry is live
    /// while its slot holds that generation and has it as `scheduled`; dead ones are dropped when
    /// they reach the top. A connection whose deadline moves later keeps its entry until it comes
    /// due (then it is pushed again at its deadline), so a busy connection, whose retransmission and
    /// delayed-ACK timers move later with nearly every segment, costs no heap operation per segment.
    /// The top is therefore a lower bound of the earliest deadline, not always the deadline itself
    /// (see [`Tcp::next_deadline`]).
    timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Slots whose entries came due in the current `tcp_timers` run (kept for its allocation).
    due: Vec<u32>,
    /// Connections visited by timer runs (tests check that idle ones are not).
    #[cfg(test)]
    timer_visits: usize,
    connections: usize,
    /// Connections whose output waits for the end of the input batch.
    dirty: Vec<u32>,
    /// The intercepting listener's slot, if there is one: it takes the SYNs IP delivered as
    /// intercepted (to another host's address) that no connection of their own claims. It is not in
    /// the demultiplexer (it has no address of the host's to be found by).
    intercept: Option<u32>,
    /// Connections and listeners that may have become ready, for an event loop
    /// ([`Stack::take_ready_hints`](crate::Stack::take_ready_hints)).
    pub(crate) hints: Hints,
    /// The connections held (SYNs a holding listener took and the application has not answered),
    /// and their bounds.
    holds: listen::Holds<N::Addr>,
    /// A search of the full table for TIME-WAIT connections to end found none: none is made again
    /// before this time ([`Tcp::recycle_time_wait`]).
    no_time_wait_until: Option<Instant>,
    _family: PhantomData<fn() -> N>,
}

/// Whether a segment from `src` through `hop` would carry a loopback address (127/8, `::1`) off
/// the host, which RFC 1122 §3.2.1.3 and RFC 4291 §2.5.3 forbid: a connect is refused and a reply
/// (a RST, a SYN-ACK) not sent, as Linux's route lookup refuses them.
pub(crate) fn off_host_loopback<N: Network>(src: N::Addr, hop: &NextHop<N::Addr>) -> bool {
    N::is_loopback(src) && hop.iface != LOOPBACK
}

impl<N: Network> Tcp<N> {
    pub(crate) fn new(config: &StackConfig, secret: SecretKey) -> Tcp<N> {
        Tcp {
            slots: Slots::default(),
            demux: config.demux.demuxer(),
            ports: Ports::new(&config.ephemeral_ports),
            checksum: ChecksumRules::of(config),
            isn: IsnGenerator::new(secret),
            fast_open_key: secret.derive("tcp fast open"),
            fast_open_cache: fastopen::CookieCache::default(),
            last_cookie: None,
            timers: BinaryHeap::new(),
            due: Vec::new(),
            #[cfg(test)]
            timer_visits: 0,
            connections: 0,
            dirty: Vec::new(),
            intercept: None,
            hints: Hints::default(),
            holds: listen::Holds::new(
                config.limits.tcp_held_syns,
                config.limits.tcp_held_syns_per_destination,
            ),
            no_time_wait_until: None,
            _family: PhantomData,
        }
    }
}

/// What TCP is handed for each call: the clock, its configuration, the buffer pool, the counters, and
/// IPv4 with the stack's links to send through.
pub(crate) struct TcpCx<'a, T: Transmit, N: Network = Ipv4> {
    pub(crate) now: Instant,
    pub(crate) cfg: &'a TcpConfig,
    /// Connections the table may hold, and out-of-order segments one connection may.
    pub(crate) max_connections: usize,
    pub(crate) max_ooo: usize,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut Counters,
    pub(crate) ip: &'a mut N,
    pub(crate) out: &'a mut T,
}

impl<'a, T: Transmit, N: Network> TcpCx<'a, T, N> {
    /// The narrower context a connection's state machine takes.
    #[inline]
    fn tcb(&mut self) -> Cx<'_> {
        Cx {
            now: self.now,
            cfg: self.cfg,
            pool: &mut *self.pool,
            counters: &mut self.counters.tcp,
            drops: &mut self.counters.drops,
            max_ooo: self.max_ooo,
        }
    }

    /// Counts a drop and recycles the buffer.
    #[inline]
    fn drop(&mut self, buf: PacketBuf, reason: DropReason) {
        self.counters.drops.add(reason);
        self.pool.free(buf);
    }

    /// IP output through `hop`; over IPv4 with don't-fragment when `dont_frag` and the stack's
    /// path MTU discovery are on.
    #[inline]
    fn output(
        &mut self,
        buf: PacketBuf,
        hop: &NextHop<N::Addr>,
        (src, dst): (N::Addr, N::Addr),
        dont_frag: bool,
    ) {
        self.ip.output_segment(
            self.now,
            &mut *self.pool,
            &mut *self.counters,
            &mut *self.out,
            buf,
            hop,
            (src, dst),
            dont_frag,
        );
    }

    /// The path MTU to `dst` through a link of `link_mtu`, and the route epoch it belongs to.
    #[inline]
    fn path_mtu(&self, dst: N::Addr, link_mtu: usize) -> (usize, u32) {
        (
            self.ip.path_mtu(dst, link_mtu, self.now),
            self.ip.route_epoch(),
        )
    }
}

fn pcb_of<A: IpAddress>(t: &Tcb<A>) -> Pcb<A> {
    connected_pcb(t.local, t.remote)
}

fn connected_pcb<A: IpAddress>(local: A::Socket, remote: A::Socket) -> Pcb<A> {
    Pcb {
        local_addr: A::ip(&local),
        local_port: A::port(&local),
        remote_addr: A::ip(&remote),
        remote_port: A::port(&remote),
    }
}

impl<N: Network> Tcp<N> {
    /// Listens on `local` with `backlog` (capped at `max_backlog`), on a host whose addresses `ip`
    /// knows; returns the listener's slot and generation.
    pub(crate) fn listen(
        &mut self,
        ip: &N,
        max_backlog: usize,
        local: N::Socket,
        backlog: usize,
    ) -> io::Result<(u32, u32)> {
        let addr = N::Addr::ip(&local);
        ip.check_local_address(addr)?;
        let port = self.ports.choose(N::Addr::port(&local))?;
        let local = <N::Addr as IpAddress>::socket(addr, port);
        if self.listener_conflict(local) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{local} already has a listener"),
            ));
        }
        let listener = Listener::new(local, backlog.clamp(1, max_backlog), false);
        Ok(self.insert(Entry::Listener(listener), Pcb::bound(local)))
    }

    /// The intercepting listener (one per family): it accepts connections to any address and port
    /// that IP delivers as intercepted; each connection's local address is the destination the peer
    /// asked for. With `hold`, each SYN waits for the application's word (see [`Tcb::held`]).
    /// Returns its slot and generation.
    pub(crate) fn listen_intercept(
        &mut self,
        max_backlog: usize,
        backlog: usize,
        hold: bool,
    ) -> io::Result<(u32, u32)> {
        if self.intercept.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "there is an intercepting listener already",
            ));
        }
        let listener = Listener::new(
            N::Addr::WILDCARD.socket(0),
            backlog.clamp(1, max_backlog),
            hold,
        );
        let (index, generation) = self.slots.insert(Slot {
            entry: Entry::Listener(listener),
            in_demux: false,
            scheduled: None,
            parent: None,
            output_queued: false,
        });
        self.intercept = Some(index);
        Ok((index, generation))
    }

    /// The client forgets every server it learned of.
    pub(crate) fn fast_open_forget(&mut self) {
        self.fast_open_cache = fastopen::CookieCache::default();
    }

    /// Whether the client holds a Fast Open cookie from `server`.
    pub(crate) fn fast_open_cookie_held(&self, server: N::Addr) -> bool {
        self.fast_open_cache.get(server).cookie.is_some()
    }

    /// Opens a connection from `local` (address or port may be unspecified) to `remote`: the SYN is
    /// sent at once; returns its slot and generation.
    pub(crate) fn connect(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        local: N::Socket,
        remote: N::Socket,
        options: &TcpSocketOptions,
        fast_open: Option<&[u8]>,
    ) -> io::Result<(u32, u32, usize)> {
        if N::Addr::ip(&remote).is_wildcard()
            || N::Addr::port(&remote) == 0
            || cx.ip.is_broadcast(N::Addr::ip(&remote))
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("cannot connect to {remote}"),
            ));
        }
        if self.connections() >= cx.max_connections && !self.recycle_time_wait(cx) {
            return Err(io::Error::other("too many TCP connections"));
        }
        let hop = cx.ip.route_link(N::Addr::ip(&remote)).map_err(|_| {
            io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("no route to {}", N::Addr::ip(&remote)),
            )
        })?;
        cx.ip.check_local_address(N::Addr::ip(&local))?;
        let addr = if N::Addr::ip(&local).is_wildcard() {
            hop.src
        } else {
            N::Addr::ip(&local)
        };
        if off_host_loopback::<N>(addr, &hop) {
            // As UDP refuses it, and Linux's route lookup (EINVAL).
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a socket bound to {addr} cannot connect to {remote}, off the host"),
            ));
        }
        let port = self.ports.choose(N::Addr::port(&local))?;
        let local = <N::Addr as IpAddress>::socket(addr, port);
        let taken = self
            .demux
            .lookup(local, remote)
            .and_then(|id| {
                self.tcb(id.0)
                    .map(|t| t.local == local && t.remote == remote)
            })
            .unwrap_or(false);
        if taken {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{local} -> {remote} is in use"),
            ));
        }
        let iss = self.isn.isn(local, remote, cx.now);
        let mut tcb = Tcb::connect(local, remote, hop, iss, cx.cfg);
        let (mtu, epoch) = cx.path_mtu(N::Addr::ip(&remote), hop.caps.mtu);
        tcb.sync_path_mtu(mtu, epoch);
        tcb.apply_options(options, cx.cfg);
        // TCP Fast Open (RFC 7413 §4.1): with a cookie from this server, the SYN carries data;
        // without one, it asks for a cookie.
        let mut queued = 0;
        if let Some(data) = fast_open.filter(|_| cx.cfg.fast_open.client) {
            let remembered = self.fast_open_cache.get(N::Addr::ip(&remote));
            let (option, n) = fastopen::client_syn(
                &cx.cfg.fast_open,
                remembered,
                tcb.local_mss.into(),
                data.len(),
            );
            queued = tcb.write(&data[..n]).unwrap_or(0);
            tcb.syn_fast_open = option;
            tcb.syn_data = queued as u32;
        }
        let pcb = pcb_of(&tcb);
        cx.counters.tcp.active_opens += 1;
        let (index, generation) = self.insert(Entry::Conn(Box::new(tcb)), pcb);
        self.output(cx, index);
        Ok((index, generation, queued))
    }

    /// A block is done: free it, or, if the application still holds it, keep it (unhooked) so the
    /// application sees the end or the error.
    pub(crate) fn finish(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        self.hints.note(index);
        let Some(slot) = self.slots.at_mut(index) else {
            return;
        };
        let child_of = slot.parent;
        let Entry::Conn(tcb) = &mut slot.entry else {
            return;
        };
        if std::mem::take(&mut tcb.held) {
            self.holds.remove(index);
        }
        let orphan = tcb.orphan;
        let mut free = orphan || child_of.is_some();
        tcb.state = State::Closed;
        if let Some(parent) = child_of {
            if let Some(l) = self.listener(parent) {
                if let Some(pos) = l.fast_open_pending.iter().position(|&i| i == index) {
                    l.fast_open_pending.swap_remove(pos);
                }
                if l.ready.iter().any(|&id| id.0 == index) {
                    // In the accept queue: it stays there, closed, as Linux's accept queue keeps a
                    // socket the peer reset. `accept` returns it with what it received and its error.
                    free = orphan;
                    if orphan {
                        l.ready.retain(|&id| id.0 != index);
                    }
                } else if let Some(pos) = l.half_open.iter().position(|&i| i == index) {
                    l.half_open.swap_remove(pos);
                }
            }
        }
        if free {
            if let Some(Entry::Conn(mut tcb)) = self.remove(index) {
                tcb.release(cx.pool);
            }
        } else {
            self.unhook(index);
        }
    }

    /// Aborts connection `index` with a RST to the peer.
    pub(crate) fn abort_with_reset(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        let mut tcx = cx.tcb();
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        let send = tcb.state.is_synchronized() || tcb.state == State::SynReceived;
        if tcb.held {
            // Refusing a held SYN: the RST answers it (RFC 9293 §3.10.7.1's form, ACK = its
            // sequence number + 1), and the peer's connect fails as against a closed port.
            tcx.counters.held_refused += 1;
        }
        let (seq, ack) = tcb.reset_fields();
        let options = tcb.reset_options(tcx.now);
        let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
        tcb.abort(std::io::ErrorKind::ConnectionAborted, &mut tcx);
        if send {
            self.send_reset_with(cx, &hop, (local, remote), (seq, Some(ack)), options);
        }
        self.finish(cx, index);
    }

    /// Drops held connection `index` without a word to its peer, as if its SYN had been lost: the
    /// peer sends it again (a new connection to decide on) or gives up.
    pub(crate) fn drop_held(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        if tcb.held {
            tcb.orphan = true;
            cx.counters.tcp.held_refused += 1;
            self.finish(cx, index);
        }
    }

    /// The application's word on held connection `index`: answer its SYN now.
    pub(crate) fn confirm(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        if let Some(tcb) = self.tcb(index) {
            if std::mem::take(&mut tcb.held) {
                self.holds.remove(index);
                cx.counters.tcp.held_confirmed += 1;
                self.output(cx, index);
            }
        }
    }

    /// A "fragmentation needed" (RFC 1191) quoting a TCP segment we sent (`ip` and the first 8 bytes of
    /// its TCP header): when it names a connection and a sequence number in flight (RFC 5927 §5.2,
    /// as Linux), the path MTU to the destination goes down to `mtu` (unless below the floor, or not
    /// smaller than the one known: counted), the connection's MSS follows, and what is outstanding
    /// is resent at the new size at once (Linux's `tcp_v4_mtu_reduced` and `tcp_simple_retransmit`).
    pub(crate) fn report_path_mtu(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        (src, dst): (N::Addr, N::Addr),
        head: &[u8; 8],
        mtu: usize,
    ) {
        let local = src.socket(u16::from_be_bytes([head[0], head[1]]));
        let remote = dst.socket(u16::from_be_bytes([head[2], head[3]]));
        let seq = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let found = self
            .demux
            .lookup(local, remote)
            .and_then(|SocketId(index)| {
                let tcb = self.tcb(index)?;
                (tcb.local == local && tcb.remote == remote).then_some(index)
            });
        let Some(index) = found else {
            cx.counters.drops.add(DropReason::PathMtuNoSocket);
            return;
        };
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        if !tcb.in_flight(seq) {
            cx.counters.drops.add(DropReason::TcpIcmpOutOfWindow);
            return;
        }
        let link_mtu = tcb.hop.caps.mtu;
        let Some(path_mtu) = cx
            .ip
            .learn_path_mtu(cx.now, dst, mtu, link_mtu, cx.counters)
        else {
            return;
        };
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        // The destination's path MTU is learnt above for every connection; this one's MSS follows
        // unless its socket said otherwise (Linux's `ip_sk_accept_pmtu`).
        if tcb.pmtu.follows_icmp() && tcb.path_mtu_reduced(path_mtu) {
            self.output(cx, index);
        }
    }

    /// An ICMP error (`kind`) quoting a TCP segment we sent, taken as Linux's `tcp_v4_err` and
    /// `tcp_v6_err` take it. Its quoted sequence number must lie in what was sent (`[SND.UNA,
    /// SND.NXT]`, RFC 5927 §4.1), else it is counted and ignored. A connection being made (SYN-SENT,
    /// or SYN-RECEIVED after crossing SYNs) is refused with the error: RFC 1122 §4.2.3.9 would
    /// take a network or host unreachable as soft and try again, but Linux fails the connect at
    /// once (an application learns in one round trip that the host cannot be reached, not after a
    /// minute of SYNs; a blind attacker must still guess the ISN). A half-open connection its
    /// listener made, quoted at its SYN-ACK (the ISN), is dropped unanswered when `ends_half_open`
    /// says so, as Linux's `tcp_req_err` does: the peer's later ACK then finds no connection and is
    /// answered by RST. A connection Fast Open made, not yet accepted, ends whatever the error.
    /// On any other connection the error is soft (RFC 1122 §4.2.3.9): kept, and reported instead
    /// of "timed out" should the connection time out before the peer's next acknowledgment; a
    /// network or host unreachable about the segment being retransmitted undoes one doubling of
    /// its timeout (RFC 6069, Linux's `tcp_ld_RTO_revert`), so that it goes again soon after the
    /// path is back, not minutes later.
    pub(crate) fn report_error(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        (src, dst): (N::Addr, N::Addr),
        head: &[u8; 8],
        error: crate::ip::IcmpError,
    ) {
        let local = src.socket(u16::from_be_bytes([head[0], head[1]]));
        let remote = dst.socket(u16::from_be_bytes([head[2], head[3]]));
        let found = self.demux.lookup(local, remote).filter(|&SocketId(index)| {
            match self.slots.at(index).map(|slot| &slot.entry) {
                Some(Entry::Conn(t)) => t.local == local && t.remote == remote,
                // A connection in TIME-WAIT has nothing left to be told (as Linux).
                Some(Entry::TimeWait(_)) => true,
                _ => false,
            }
        });
        let Some(SocketId(index)) = found else {
            cx.counters.drops.add(DropReason::TcpIcmpNoConnection);
            return;
        };
        // Only a connection Fast Open made, still half-open, may wait in an accept queue that
        // matters here: the queue is looked through for it alone.
        let fast_open_child = self
            .tcb(index)
            .is_some_and(|t| t.state == State::SynReceived && t.fast_open);
        let fast_open = fast_open_child && self.awaiting_accept(index);
        let mut tcx = cx.tcb();
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        let seq = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let half_open = tcb.state == State::SynReceived && !tcb.fast_open && !tcb.simultaneous_open;
        let plausible = if half_open {
            seq == tcb.iss()
        } else {
            tcb.sent_or_next(seq)
        };
        if !plausible {
            cx.counters.drops.add(DropReason::TcpIcmpOutOfWindow);
            return;
        }
        let ends = match tcb.state {
            State::SynSent => true,
            State::SynReceived if half_open => error.ends_half_open && !tcb.held,
            State::SynReceived if tcb.simultaneous_open => true,
            _ => fast_open,
        };
        if ends {
            tcx.counters.attempt_fails += 1;
            tcb.abort(error.kind, &mut tcx);
            self.finish(cx, index);
            return;
        }
        tcb.soft_error = Some(error.kind);
        if error.reverts_backoff && tcb.revert_backoff(seq, tcx.cfg, tcx.now) {
            cx.counters.tcp.rto_reverts += 1;
            self.schedule(index);
        }
    }
}

#[cfg(test)]
mod tests;
