//! TCP (RFC 9293): connections, listeners, input, output and timers.
//!
//! The layout follows the work: [`seq`] is sequence arithmetic; `tcb` is one connection's state
//! machine ([`State`], [`ConnectionInfo`]), which decides what to send but builds no packets; `buffers`
//! holds its data; [`congestion`] sizes its window; `isn` makes initial sequence numbers and SYN
//! cookies. This file is the table of connections and listeners (found through the same [`Demux`] as
//! UDP: fully specified PCBs for connections, wildcard-remote PCBs for listeners, best match first) and
//! the stack's TCP input and output. `socket` is the application's API: [`TcpListener`] and
//! [`TcpStream`] handles, used through [`Stack::tcp_listener`](crate::Stack::tcp_listener) and
//! [`Stack::tcp`](crate::Stack::tcp).
//!
//! Techniques and their switches ([`TcpConfig`]): header prediction
//! (`header_prediction`, paper 000 §2), checksum offload (the stack's `checksum_policy`, paper 002
//! §3.2), zero-copy receive and in-place send (always: see `TcpStreamRef::read_with` and
//! `TcpStreamRef::write_with`), SACK, timestamps and window scaling, CUBIC or NewReno, delayed ACKs,
//! SYN cookies.

mod buffers;
pub mod congestion;
mod isn;
pub mod seq;
mod tcb;

pub use congestion::CongestionAlgorithm;
pub(crate) use tcb::Tcb;
pub use tcb::{ConnectionInfo, State};

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
use crate::ip::{Delivery, NextHop, Transmit};
use crate::ipv4::Ipv4;
use crate::secret::SecretKey;
use crate::stats::Counters;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::transport::checksum::{ChecksumRules, Payload, RxChecksum, TxChecksum};
use crate::transport::hints::Hints;
use crate::transport::network::Network;
use crate::transport::ports::Ports;
use crate::transport::slots::Slots;
use crate::wire::tcp::{Flags, TcpOptions, TcpPacket, TcpRepr, CHECKSUM_OFFSET};
use crate::wire::WireError;
use isn::IsnGenerator;
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

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener<A: IpAddress = std::net::Ipv4Addr> {
    pub(crate) local: A::Socket,
    pub(crate) backlog: usize,
    /// Children in SYN-RECEIVED (their slots).
    pub(crate) half_open: Vec<u32>,
    /// Established children waiting for `accept` (and, when `hold` is set, held ones).
    pub(crate) ready: VecDeque<SocketId>,
    /// SYNs are held: each becomes a connection for `accept` at once, answered only when the
    /// application confirms it (see [`Tcb::held`]).
    pub(crate) hold: bool,
}

#[derive(Debug)]
pub(crate) enum Entry<A: IpAddress = std::net::Ipv4Addr> {
    Listener(Listener<A>),
    Conn(Box<Tcb<A>>),
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
    _family: PhantomData<fn() -> N>,
}

impl<N: Network> Tcp<N> {
    pub(crate) fn new(config: &StackConfig, secret: SecretKey) -> Tcp<N> {
        Tcp {
            slots: Slots::default(),
            demux: config.demux.demuxer(),
            ports: Ports::new(&config.ephemeral_ports),
            checksum: ChecksumRules::of(config),
            isn: IsnGenerator::new(secret),
            last_cookie: None,
            timers: BinaryHeap::new(),
            due: Vec::new(),
            #[cfg(test)]
            timer_visits: 0,
            connections: 0,
            dirty: Vec::new(),
            intercept: None,
            hints: Hints::default(),
            _family: PhantomData,
        }
    }

    fn insert(&mut self, entry: Entry<N::Addr>, pcb: Pcb<N::Addr>) -> (u32, u32) {
        if matches!(entry, Entry::Conn(_)) {
            self.connections += 1;
        }
        let (index, generation) = self.slots.insert(Slot {
            entry,
            in_demux: true,
            scheduled: None,
        });
        self.ports.take(pcb.local_port);
        self.demux.insert(SocketId(index), pcb);
        (index, generation)
    }

    /// Takes an entry out of the demultiplexer (it receives nothing more) but keeps its slot.
    fn unhook(&mut self, index: u32) {
        let Some(slot) = self.slots.at_mut(index) else {
            return;
        };
        if !slot.in_demux {
            return;
        }
        slot.in_demux = false;
        let pcb = match &slot.entry {
            Entry::Conn(t) => pcb_of(t),
            Entry::Listener(l) => Pcb::bound(l.local),
        };
        self.demux.remove(SocketId(index), &pcb);
        self.ports.release(pcb.local_port);
    }

    /// Frees a slot. Its heap entry, if any, is dead now (the slot's generation moves on): dropped
    /// now if it is on top, else when it gets there.
    pub(crate) fn remove(&mut self, index: u32) -> Option<Entry<N::Addr>> {
        self.unhook(index);
        if self.intercept == Some(index) {
            self.intercept = None;
        }
        let generation = self.slots.generation(index);
        let entry = self.slots.remove(index, generation)?.entry;
        if matches!(entry, Entry::Conn(_)) {
            self.connections -= 1;
        }
        self.drop_dead_top();
        Some(entry)
    }

    /// The entry in slot `index`, if it holds one of `generation` (any generation when `None`).
    fn entry(&mut self, index: u32, generation: Option<u32>) -> Option<&mut Entry<N::Addr>> {
        let slot = match generation {
            Some(g) => self.slots.get_mut(index, g),
            None => self.slots.at_mut(index),
        };
        slot.map(|s| &mut s.entry)
    }

    /// The connection a handle names (its generation must match).
    pub(crate) fn conn_mut(&mut self, index: u32, generation: u32) -> Option<&mut Tcb<N::Addr>> {
        match self.entry(index, Some(generation))? {
            Entry::Conn(t) => Some(t),
            Entry::Listener(_) => None,
        }
    }

    pub(crate) fn tcb(&mut self, index: u32) -> Option<&mut Tcb<N::Addr>> {
        match self.entry(index, None)? {
            Entry::Conn(t) => Some(t),
            Entry::Listener(_) => None,
        }
    }

    /// The listener a handle names (its generation must match).
    pub(crate) fn listener_mut(
        &mut self,
        index: u32,
        generation: u32,
    ) -> Option<&mut Listener<N::Addr>> {
        match self.entry(index, Some(generation))? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) => None,
        }
    }

    fn listener(&mut self, index: u32) -> Option<&mut Listener<N::Addr>> {
        match self.entry(index, None)? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) => None,
        }
    }

    pub(crate) fn generation(&self, index: u32) -> u32 {
        self.slots.generation(index)
    }

    /// Learns connection `index`'s deadline, which may have changed: every path that runs the
    /// block (input, output, timers, the application's calls) ends here, through `tcp_output` or
    /// `tcp_timers`. Pushes a heap entry only when the deadline moved earlier than the one
    /// scheduled; a deadline that moved later (or went) leaves the entry as it is, to be looked at
    /// when it comes due.
    fn schedule(&mut self, index: u32) {
        let generation = self.slots.generation(index);
        let Some(slot) = self.slots.at_mut(index) else {
            return;
        };
        let deadline = match &slot.entry {
            Entry::Conn(tcb) => tcb.deadline(),
            Entry::Listener(_) => None,
        };
        if let Some(at) = deadline.filter(|&at| slot.scheduled.is_none_or(|s| at < s)) {
            slot.scheduled = Some(at);
            self.timers.push(Reverse((at, index, generation)));
            if self.timers.len() > 2 * self.connections + 64 {
                self.compact_timers();
            }
        }
    }

    /// Drops dead entries (of connections gone, or left behind when a connection's deadline moved
    /// earlier) from the top of the heap, so that they cost no wake-up. Live entries whose
    /// connection's deadline moved later stay: they are looked at when they come due.
    fn drop_dead_top(&mut self) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            let live = self
                .slots
                .get(index, generation)
                .is_some_and(|slot| slot.scheduled == Some(at));
            if live {
                return;
            }
            self.timers.pop();
        }
    }

    /// Rebuilds the heap from the live entries, when dead ones outnumber them.
    #[cold]
    fn compact_timers(&mut self) {
        let slots = &self.slots;
        self.timers.retain(|&Reverse((at, index, generation))| {
            slots
                .get(index, generation)
                .is_some_and(|slot| slot.scheduled == Some(at))
        });
    }

    /// Takes the connections whose entries are due at `now` off the heap, into `self.due` (a
    /// connection whose deadline moved later since is among them: `timers` reschedules it).
    fn take_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if let Some(slot) = self.slots.get_mut(index, generation) {
                if slot.scheduled == Some(at) {
                    slot.scheduled = None;
                    self.due.push(index);
                }
            }
        }
    }

    /// When the next timer run may have work: never later than the earliest deadline of any
    /// connection, and earlier when the connection on top of the heap has moved its deadline later
    /// since its entry was pushed. That costs one run that finds it not due and pushes it again at
    /// its deadline; a connection gone leaves no entry on top.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|&Reverse((at, _, _))| at)
    }

    /// Listeners and connections bound to `port` overlapping `addr`.
    fn listener_conflict(&self, local: N::Socket) -> bool {
        self.slots.iter().any(|(_, s)| match &s.entry {
            Entry::Listener(l) => {
                s.in_demux
                    && N::Addr::port(&l.local) == N::Addr::port(&local)
                    && (N::Addr::ip(&l.local).is_wildcard()
                        || N::Addr::ip(&local).is_wildcard()
                        || N::Addr::ip(&l.local) == N::Addr::ip(&local))
            }
            _ => false,
        })
    }

    /// Number of connections, in every state.
    pub(crate) fn connections(&self) -> usize {
        self.connections
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

    /// IP output through `hop`.
    #[inline]
    fn output(&mut self, buf: PacketBuf, hop: &NextHop<N::Addr>, src: N::Addr, dst: N::Addr) {
        self.ip.output_segment(
            self.now,
            &mut *self.pool,
            &mut *self.counters,
            &mut *self.out,
            buf,
            hop,
            (src, dst),
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
    Pcb {
        local_addr: A::ip(&t.local),
        local_port: A::port(&t.local),
        remote_addr: A::ip(&t.remote),
        remote_port: A::port(&t.remote),
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
        let listener = Listener {
            local,
            backlog: backlog.clamp(1, max_backlog),
            half_open: Vec::new(),
            ready: Default::default(),
            hold: false,
        };
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
        let listener = Listener {
            local: N::Addr::WILDCARD.socket(0),
            backlog: backlog.clamp(1, max_backlog),
            half_open: Vec::new(),
            ready: Default::default(),
            hold,
        };
        let (index, generation) = self.slots.insert(Slot {
            entry: Entry::Listener(listener),
            in_demux: false,
            scheduled: None,
        });
        self.intercept = Some(index);
        Ok((index, generation))
    }

    /// Opens a connection from `local` (address or port may be unspecified) to `remote`: the SYN is
    /// sent at once; returns its slot and generation.
    pub(crate) fn connect(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        local: N::Socket,
        remote: N::Socket,
    ) -> io::Result<(u32, u32)> {
        if N::Addr::ip(&remote).is_wildcard()
            || N::Addr::port(&remote) == 0
            || cx.ip.is_broadcast(N::Addr::ip(&remote))
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("cannot connect to {remote}"),
            ));
        }
        if self.connections() >= cx.max_connections {
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
        let pcb = pcb_of(&tcb);
        cx.counters.tcp.active_opens += 1;
        let (index, generation) = self.insert(Entry::Conn(Box::new(tcb)), pcb);
        self.output(cx, index);
        Ok((index, generation))
    }

    /// Input: one TCP segment (the IP payload in `buf`).
    pub(crate) fn input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        mut buf: PacketBuf,
        (src, dst): (N::Addr, N::Addr),
        delivery: Delivery,
    ) {
        layer!(Receive, Tcp);
        if delivery == Delivery::Broadcast {
            return cx.drop(buf, DropReason::TcpBadAddress);
        }
        let repr = match TcpPacket::new_checked(buf.data()) {
            Ok(packet) => match TcpRepr::parse(&packet) {
                Ok(repr) => repr,
                Err(_) => return cx.drop(buf, DropReason::TcpBadHeader),
            },
            Err(WireError::Truncated) => return cx.drop(buf, DropReason::TcpTruncated),
            Err(_) => return cx.drop(buf, DropReason::TcpBadHeader),
        };
        let local = dst.socket(repr.dst_port);
        let remote = src.socket(repr.src_port);
        let mut found = self.demux.lookup(local, remote);
        if delivery == Delivery::Intercepted {
            // To another host's address: only a connection of its own takes it, never a listener
            // on a port of the host's (which the demultiplexer's wildcard match would find).
            found = found.filter(|id| {
                matches!(
                    self.slots.at(id.0),
                    Some(Slot {
                        entry: Entry::Conn(_),
                        ..
                    })
                )
            });
        }
        // A connection that negotiated checksum elimination (paper 001) takes its segments unsummed;
        // everything else is verified, or vouched for by the link.
        let eliminated = !repr.flags.contains(Flags::SYN)
            && found.is_some_and(|id| self.tcb(id.0).is_some_and(|t| t.no_checksum));
        if eliminated {
            cx.counters.tcp.in_no_checksum += 1;
        } else if self.checksum.rx(buf.meta.checksum(), false) == RxChecksum::Trusted {
            cx.counters.tcp.in_checksum_offloaded += 1;
        } else {
            let pseudo = checksum::pseudo_header_sum(src, dst, 6, buf.len() as u16);
            if !self.checksum.verify(buf.data(), pseudo) {
                return cx.drop(buf, DropReason::TcpBadChecksum);
            }
        }
        // SYN with FIN or RST has no meaning anywhere. A segment with no control bits at all (a "null
        // scan") is not refused here: a closed port answers it with a RST like any other non-RST
        // segment (RFC 9293 §3.10.7.1), a listener drops it, a connection finds it has no ACK.
        let f = repr.flags;
        if f.contains(Flags::SYN) && (f.contains(Flags::FIN) || f.contains(Flags::RST)) {
            return cx.drop(buf, DropReason::TcpBadFlags);
        }
        if src.is_wildcard() || repr.src_port == 0 || repr.dst_port == 0 {
            return cx.drop(buf, DropReason::TcpBadAddress);
        }
        cx.counters.tcp.in_segs += 1;
        let header_len = ((buf.data()[12] >> 4) as usize) * 4;
        buf.pull_front(header_len);

        let Some(SocketId(index)) = found else {
            if delivery == Delivery::Intercepted {
                return match self.intercept {
                    Some(l) => self.listen_input(cx, l, local, remote, &repr, buf),
                    None => cx.drop(buf, DropReason::TcpInterceptOff),
                };
            }
            self.reply_reset(cx, local, remote, &repr, buf.len());
            return cx.drop(buf, DropReason::TcpNoSocket);
        };
        match self.slots.at(index).map(|s| &s.entry) {
            Some(Entry::Conn(_)) => {
                if self.conn_input(cx, index, &repr, buf) == Verdict::Reincarnate {
                    self.reincarnate(cx, index, (local, remote), &repr, delivery);
                }
            }
            Some(Entry::Listener(_)) => self.listen_input(cx, index, local, remote, &repr, buf),
            None => cx.drop(buf, DropReason::TcpNoSocket),
        }
    }

    /// A segment to connection `index`; returns the block's verdict, which has been acted on.
    fn conn_input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) -> Verdict {
        let prediction = cx.cfg.header_prediction;
        let mut tcx = cx.tcb();
        let Some(tcb) = self.tcb(index) else {
            tcx.pool.free(buf);
            return Verdict::Continue;
        };
        let verdict = if prediction {
            match tcb.predict(repr, buf, &mut tcx) {
                Ok(()) => Verdict::Continue,
                Err(buf) => tcb.on_segment(repr, buf, &mut tcx),
            }
        } else {
            tcb.on_segment(repr, buf, &mut tcx)
        };
        self.verdict(cx, index, verdict);
        verdict
    }

    /// A SYN ended connection `index` in TIME-WAIT (now freed) and starts a new one: the listener
    /// (or the intercepting one) takes it, or it is answered as a closed port would be.
    #[cold]
    fn reincarnate(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        (local, remote): (N::Socket, N::Socket),
        syn: &TcpRepr,
        delivery: Delivery,
    ) {
        debug_assert!(
            self.slots.at(index).is_none()
                || self.tcb(index).is_some_and(|t| t.state == State::Closed)
        );
        let listener = match delivery {
            Delivery::Intercepted => self.intercept,
            _ => self
                .demux
                .lookup(local, remote)
                .map(|id| id.0)
                .filter(|&i| {
                    matches!(
                        self.slots.at(i),
                        Some(Slot {
                            entry: Entry::Listener(_),
                            ..
                        })
                    )
                }),
        };
        match listener {
            // The SYN's payload, if it had any, was not kept: a listener does not take SYN data.
            Some(l) => {
                let empty = cx.pool.alloc(0);
                self.listen_input(cx, l, local, remote, syn, empty);
            }
            None => {
                cx.counters.drops.add(DropReason::TcpNoSocket);
                self.reply_reset(cx, local, remote, syn, 0);
            }
        }
    }

    /// Acts on what a block asked for, then sends what it owes.
    fn verdict(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32, verdict: Verdict) {
        self.hints.note(index);
        match verdict {
            Verdict::Continue => {}
            Verdict::Established => {
                let Some(tcb) = self.tcb(index) else {
                    return;
                };
                let parent = tcb.listener.map(|p| p.0);
                if let Some((parent, l)) = parent.and_then(|p| Some((p, self.listener(p)?))) {
                    if let Some(pos) = l.half_open.iter().position(|&i| i == index) {
                        l.half_open.swap_remove(pos);
                    }
                    if l.ready.len() < l.backlog {
                        l.ready.push_back(SocketId(index));
                        self.hints.note(parent);
                    } else {
                        // The accept queue is full: refuse the connection.
                        cx.counters.drops.add(DropReason::TcpListenOverflow);
                        self.abort_with_reset(cx, index);
                        return;
                    }
                }
            }
            Verdict::Reset { seq, ack } => {
                if let Some(tcb) = self.tcb(index) {
                    let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
                    self.send_reset(cx, &hop, local, remote, seq, ack);
                }
                let closed = self.tcb(index).is_some_and(|t| t.state == State::Closed);
                if closed {
                    return self.finish(cx, index);
                }
            }
            Verdict::Remove | Verdict::Reincarnate => return self.finish(cx, index),
        }
        // Batched ACK processing: what the segments of one receive batch owe goes out once, after
        // the batch (a cumulative ACK for all of them, as GRO would give).
        if let Some(tcb) = self.tcb(index) {
            if std::mem::take(&mut tcb.ack_immediately) {
                return self.output(cx, index);
            }
            if !tcb.output_queued {
                tcb.output_queued = true;
                self.dirty.push(index);
            }
        }
    }

    /// True when connections wait to send what the last input batch made them owe.
    #[inline]
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Sends what every connection touched by the last input batch owes.
    #[inline]
    pub(crate) fn flush_dirty(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        if !self.dirty.is_empty() {
            self.flush_dirty_list(cx);
        }
    }

    #[inline(never)]
    fn flush_dirty_list(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            if let Some(tcb) = self.tcb(index) {
                tcb.output_queued = false;
                self.output(cx, index);
            }
        }
        dirty.clear();
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
    }

    /// A block is done: free it, or, if the application still holds it, keep it (unhooked) so the
    /// application sees the end or the error.
    pub(crate) fn finish(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        self.hints.note(index);
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        let child_of = tcb.listener;
        let free = tcb.orphan || child_of.is_some();
        tcb.state = State::Closed;
        if let Some(parent) = child_of {
            if let Some(l) = self.listener(parent.0) {
                if let Some(pos) = l.ready.iter().position(|&id| id.0 == index) {
                    l.ready.remove(pos);
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
        let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
        tcb.abort(std::io::ErrorKind::ConnectionAborted, &mut tcx);
        if send {
            self.send_reset(cx, &hop, local, remote, seq, Some(ack));
        }
        self.finish(cx, index);
    }

    /// A segment for a listener (RFC 9293 §3.10.7.2).
    fn listen_input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        local: N::Socket,
        remote: N::Socket,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) {
        let f = repr.flags;
        if f.contains(Flags::RST) {
            return cx.drop(buf, DropReason::TcpUnexpected);
        }
        if f.contains(Flags::ACK) && !f.contains(Flags::SYN) {
            return self.cookie_ack(cx, index, local, remote, repr, buf);
        }
        if !f.contains(Flags::SYN) || f.contains(Flags::ACK) {
            if f.contains(Flags::ACK) {
                self.reply_reset(cx, local, remote, repr, buf.len());
            }
            return cx.drop(buf, DropReason::TcpUnexpected);
        }
        let Ok(hop) = cx.ip.route_link(N::Addr::ip(&remote)) else {
            return cx.drop(buf, DropReason::Ipv4NoRoute);
        };
        let Some(listener) = self.listener(index) else {
            return cx.drop(buf, DropReason::TcpNoSocket);
        };
        let full = listener.half_open.len() >= listener.backlog
            || listener.ready.len() >= listener.backlog;
        let hold = listener.hold;
        if self.connections() >= cx.max_connections {
            return cx.drop(buf, DropReason::TcpTooManyConnections);
        }
        if full {
            // A cookie would answer the SYN: not for a listener that holds them.
            if cx.cfg.syn_cookies && !hold {
                cx.pool.free(buf);
                return self.send_cookie(cx, &hop, local, remote, repr);
            }
            return cx.drop(buf, DropReason::TcpListenOverflow);
        }
        cx.pool.free(buf);
        let iss = self.isn.isn(local, remote, cx.now);
        let mut tcb = Tcb::accept(local, remote, hop, iss, repr, cx.cfg);
        let (mtu, epoch) = cx.path_mtu(N::Addr::ip(&remote), hop.caps.mtu);
        tcb.sync_path_mtu(mtu, epoch);
        tcb.listener = Some(SocketId(index));
        let pcb = pcb_of(&tcb);
        cx.counters.tcp.passive_opens += 1;
        tcb.held = hold;
        let (child, _) = self.insert(Entry::Conn(Box::new(tcb)), pcb);
        let Some(l) = self.listener(index) else {
            return;
        };
        if hold {
            // Not answered: the application takes it now and decides.
            cx.counters.tcp.held_syns += 1;
            l.ready.push_back(SocketId(child));
            self.hints.note(index);
            return;
        }
        l.half_open.push(child);
        self.output(cx, child);
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
                cx.counters.tcp.held_confirmed += 1;
                self.output(cx, index);
            }
        }
    }

    /// A stateless SYN-ACK whose ISN is a SYN cookie (RFC 4987 §3.6).
    fn send_cookie(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        local: N::Socket,
        remote: N::Socket,
        syn: &TcpRepr,
    ) {
        let mss = syn
            .options
            .mss
            .unwrap_or(536)
            .min(tcb::mss_for_mtu::<N::Addr>(hop.caps.mtu));
        let cookie = self.isn.cookie(local, remote, syn.seq, mss, cx.now);
        let repr = TcpRepr {
            src_port: N::Addr::port(&local),
            dst_port: N::Addr::port(&remote),
            seq: cookie,
            ack: syn.seq.wrapping_add(1),
            flags: Flags::SYN | Flags::ACK,
            window: cx.cfg.recv_buffer.min(65535) as u16,
            urgent: 0,
            options: TcpOptions {
                mss: Some(mss),
                ..TcpOptions::default()
            },
        };
        cx.counters.tcp.syn_cookies_sent += 1;
        self.last_cookie = Some(cx.now);
        self.emit(cx, hop, local, remote, repr, &[]);
    }

    /// An ACK to a listener: the last step of a handshake whose SYN-ACK was a cookie, or garbage.
    fn cookie_ack(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        local: N::Socket,
        remote: N::Socket,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) {
        // The cookie is checked once: the MSS it carries, if it is valid.
        let cookies_out = self
            .last_cookie
            .is_some_and(|at| cx.now < at + isn::COOKIE_LIFETIME);
        let cookie_mss = if cx.cfg.syn_cookies && cookies_out {
            self.isn.check_cookie(
                local,
                remote,
                repr.seq.wrapping_sub(1),
                repr.ack.wrapping_sub(1),
                cx.now,
            )
        } else {
            None
        };
        let room = self
            .listener(index)
            .is_some_and(|l| l.ready.len() < l.backlog)
            && self.connections() < cx.max_connections;
        let (Some(mss), true, Ok(hop)) = (cookie_mss, room, cx.ip.route_link(N::Addr::ip(&remote)))
        else {
            self.reply_reset(cx, local, remote, repr, buf.len());
            let reason = if cookie_mss.is_some() {
                DropReason::TcpListenOverflow
            } else if cookies_out {
                DropReason::TcpBadCookie
            } else {
                DropReason::TcpStrayAck
            };
            return cx.drop(buf, reason);
        };
        let mut tcb = Tcb::from_cookie(local, remote, hop, repr, mss, cx.cfg);
        let (mtu, epoch) = cx.path_mtu(N::Addr::ip(&remote), hop.caps.mtu);
        tcb.sync_path_mtu(mtu, epoch);
        let pcb = pcb_of(&tcb);
        cx.counters.tcp.syn_cookies_ok += 1;
        cx.counters.tcp.passive_opens += 1;
        let (child, _) = self.insert(Entry::Conn(Box::new(tcb)), pcb);
        if let Some(t) = self.tcb(child) {
            t.listener = Some(SocketId(index));
        }
        if let Some(l) = self.listener(index) {
            l.ready.push_back(SocketId(child));
            self.hints.note(index);
        }
        // The ACK may carry data already.
        if buf.is_empty() {
            cx.pool.free(buf);
        } else {
            self.conn_input(cx, child, repr, buf);
        }
    }

    /// The answer to a segment no connection wants (RFC 9293 §3.10.7.1): a RST, unless it was one.
    fn reply_reset(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        local: N::Socket,
        remote: N::Socket,
        repr: &TcpRepr,
        payload_len: usize,
    ) {
        if repr.flags.contains(Flags::RST) {
            return;
        }
        let Ok(hop) = cx.ip.route_link(N::Addr::ip(&remote)) else {
            return;
        };
        if repr.flags.contains(Flags::ACK) {
            self.send_reset(cx, &hop, local, remote, repr.ack, None);
        } else {
            let len = payload_len as u32
                + repr.flags.contains(Flags::SYN) as u32
                + repr.flags.contains(Flags::FIN) as u32;
            self.send_reset(cx, &hop, local, remote, 0, Some(repr.seq.wrapping_add(len)));
        }
    }

    fn send_reset(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        local: N::Socket,
        remote: N::Socket,
        seq: u32,
        ack: Option<u32>,
    ) {
        let repr = TcpRepr {
            src_port: N::Addr::port(&local),
            dst_port: N::Addr::port(&remote),
            seq,
            ack: ack.unwrap_or(0),
            flags: if ack.is_some() {
                Flags::RST | Flags::ACK
            } else {
                Flags::RST
            },
            window: 0,
            urgent: 0,
            options: TcpOptions::default(),
        };
        cx.counters.tcp.out_rsts += 1;
        self.emit(cx, hop, local, remote, repr, &[]);
    }

    /// Builds and sends one segment whose payload is `pieces` (for segments with no connection).
    fn emit(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        local: N::Socket,
        remote: N::Socket,
        repr: TcpRepr,
        pieces: &[&[u8]],
    ) {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let buf = self.build(cx, hop, (local, remote), &repr, pieces, len, false);
        cx.counters.tcp.out_segs += 1;
        cx.output(buf, hop, N::Addr::ip(&local), N::Addr::ip(&remote));
    }

    /// Writes a segment into a pool buffer: header, payload copied from `pieces` and the checksum as
    /// the transport checksum rules say (fused with the copy, paper 000 §7.1; separate; left to the
    /// link; or none, when elimination was negotiated).
    #[allow(clippy::too_many_arguments)]
    fn build(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        (local, remote): (N::Socket, N::Socket),
        repr: &TcpRepr,
        pieces: &[&[u8]],
        len: usize,
        no_checksum: bool,
    ) -> PacketBuf {
        let header_len = repr.header_len();
        let total = header_len + len;
        let mode = self.checksum.tx(&hop.caps, no_checksum, false);
        let mut buf = {
            timed!(Buffers);
            cx.pool.alloc(total)
        };
        let segment = buf.extend(total);
        repr.emit(&mut segment[..header_len]);
        let pseudo =
            checksum::pseudo_header_sum(N::Addr::ip(&local), N::Addr::ip(&remote), 6, total as u16);
        let slices: [IoSlice<'_>; 2] = [
            IoSlice::new(pieces.first().copied().unwrap_or(&[])),
            IoSlice::new(pieces.get(1).copied().unwrap_or(&[])),
        ];
        // The header's sum, for a checksum fused with the copy.
        let header_sum = match mode {
            TxChecksum::Fused => self.checksum.algorithm().sum(&segment[..header_len]),
            _ => 0,
        };
        let field = self.checksum.fill(
            mode,
            segment,
            header_len,
            || header_sum,
            pseudo,
            &mut Payload::Copy(&slices[..pieces.len().min(2)]),
        );
        buf.data_mut()[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&field.to_be_bytes());
        match mode {
            TxChecksum::Offload => {
                buf.meta.set_checksum(ChecksumOffload::Partial {
                    start: N::Addr::HEADER_LEN as u16,
                    offset: CHECKSUM_OFFSET as u16,
                });
                cx.counters.tcp.out_checksum_offloaded += 1;
            }
            TxChecksum::None => cx.counters.tcp.out_no_checksum += 1,
            TxChecksum::Separate => cx.counters.tcp.out_checksum_separate += 1,
            TxChecksum::Fused => {}
        }
        buf
    }

    /// Sends everything connection `index` owes and the windows allow.
    pub(crate) fn output(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        layer!(Send, Tcp);
        let use_offload = self.checksum.offload_allowed();
        if let Some(tcb) = self.tcb(index) {
            if tcb.owes_nothing() {
                return self.schedule(index);
            }
            // A path MTU learned (by another connection), expired, or a route changed since this
            // connection last looked: its MSS follows the path MTU now in use.
            if tcb.route_epoch != cx.ip.route_epoch() {
                let (mtu, epoch) = cx.path_mtu(N::Addr::ip(&tcb.remote), tcb.hop.caps.mtu);
                tcb.sync_path_mtu(mtu, epoch);
            }
        }
        for _ in 0..OUTPUT_BURST {
            let mut tcx = cx.tcb();
            let Some(tcb) = self.tcb(index) else {
                return;
            };
            // The usual answer after the last segment went.
            if tcb.owes_nothing() {
                break;
            }
            // TSO (paper 002 §3.3): up to a 64 KiB packet when the link cuts segments and the checksum
            // is left to it as well.
            let caps = tcb.hop.caps;
            let tso = (caps.tso && caps.tx_checksum_offload && use_offload)
                .then_some(tso_max::<N::Addr>());
            let Some(Outgoing {
                mut repr,
                offset,
                len,
                segment_size,
            }) = tcb.next_segment(&mut tcx, tso)
            else {
                break;
            };
            tcb.stamp(&mut repr, tcx.now);
            let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
            let no_checksum = tcb.no_checksum && !repr.flags.contains(Flags::SYN);
            // Copy the payload out of the send buffer, borrowing it only as long as the build needs.
            let tx = std::mem::take(&mut tcb.tx);
            let (a, b) = tx.range(offset, len);
            let mut buf = self.build(cx, &hop, (local, remote), &repr, &[a, b], len, no_checksum);
            if let Some(tcb) = self.tcb(index) {
                tcb.tx = tx;
            }
            if let Some(size) = segment_size {
                buf.meta.set_gso_size(size);
                cx.counters.tcp.out_tso_packets += 1;
            }
            cx.counters.tcp.out_segs += 1;
            cx.output(buf, &hop, N::Addr::ip(&local), N::Addr::ip(&remote));
        }
        self.schedule(index);
        // A connection that finished its close while sending (LAST-ACK acknowledged elsewhere) is
        // handled by its verdicts; nothing more here.
    }

    /// Runs due TCP timers (from `poll`): only the connections whose deadlines are due are
    /// visited, each once per run (a timer re-armed for `now` waits for the next run).
    pub(crate) fn timers(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        let now = cx.now;
        self.take_due(now);
        let mut due = std::mem::take(&mut self.due);
        for &index in &due {
            #[cfg(test)]
            {
                self.timer_visits += 1;
            }
            let mut tcx = cx.tcb();
            let Some(tcb) = self.tcb(index) else {
                continue;
            };
            if tcb.deadline().is_some_and(|d| d <= now) {
                let verdict = tcb.on_timer(&mut tcx);
                self.verdict(cx, index, verdict);
            } else {
                cx.counters.tcp.timer_early += 1;
            }
            self.schedule(index);
        }
        due.clear();
        self.due = due;
        // The pops may have left a dead entry on top.
        self.drop_dead_top();
        self.flush_dirty(cx);
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
        if tcb.path_mtu_reduced(path_mtu) {
            self.output(cx, index);
        }
    }

    /// An ICMP error quoting a TCP segment we sent: a hard error while connecting refuses the
    /// connection (RFC 1122 §4.2.3.9); others are only remembered.
    pub(crate) fn report_error(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        (src, dst): (N::Addr, N::Addr),
        head: &[u8; 8],
        kind: std::io::ErrorKind,
    ) {
        let local = src.socket(u16::from_be_bytes([head[0], head[1]]));
        let remote = dst.socket(u16::from_be_bytes([head[2], head[3]]));
        let Some(SocketId(index)) = self.demux.lookup(local, remote) else {
            return;
        };
        let mut tcx = cx.tcb();
        let Some(tcb) = self.tcb(index) else {
            return;
        };
        if tcb.local != local || tcb.remote != remote {
            return;
        }
        if tcb.state == State::SynSent {
            tcx.counters.attempt_fails += 1;
            tcb.abort(kind, &mut tcx);
            self.finish(cx, index);
        }
    }
}

#[cfg(test)]
mod tests;
