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
//! Techniques and their switches ([`TcpConfig`](crate::config::TcpConfig)): header prediction
//! (`header_prediction`, paper 000 §2), checksum offload (the stack's `checksum_policy`, paper 002
//! §3.2), zero-copy receive and in-place send (always: see [`TcpStreamRef::read_with`] and
//! [`TcpStreamRef::write_with`]), SACK, timestamps and window scaling, CUBIC or NewReno, delayed ACKs,
//! SYN cookies.

mod buffers;
pub mod congestion;
mod isn;
pub mod seq;
mod socket;
mod tcb;

pub use congestion::CongestionAlgorithm;
pub use socket::{TcpListener, TcpListenerRef, TcpStream, TcpStreamRef};
pub use tcb::{ConnectionInfo, State};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddrV4;

use crate::buf::{gather, ChecksumOffload, PacketBuf};
use crate::checksum::{self, Checksum};
use crate::config::{CopyChecksum, StackConfig};
use crate::demux::{Demux, Pcb, SocketId};
use crate::ipv4::{Delivery, NextHop};
use crate::stack::Stack;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::tcp::{Flags, TcpOptions, TcpPacket, TcpRepr, CHECKSUM_OFFSET};
use crate::wire::{IpProtocol, Ipv4Repr, WireError};
use isn::IsnGenerator;
use tcb::{Cx, Outgoing, Tcb, Verdict};

/// Segments one call to the output routine sends at most before it lets the link drain.
const OUTPUT_BURST: usize = 64;

/// Largest TCP payload in one TSO packet: 64 KiB less the IP header and a TCP header with options.
const TSO_MAX: usize = 65535 - 20 - 60;

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) local: SocketAddrV4,
    pub(crate) backlog: usize,
    /// Children in SYN-RECEIVED (their slots).
    pub(crate) half_open: Vec<u32>,
    /// Established children waiting for `accept`.
    pub(crate) ready: VecDeque<SocketId>,
}

#[derive(Debug)]
pub(crate) enum Entry {
    Listener(Listener),
    Conn(Box<Tcb>),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
    /// The entry's PCB is in the demultiplexer.
    in_demux: bool,
    /// The deadline of this slot's live entry in the table's timer heap, if it has one: never later
    /// than the connection's own deadline.
    scheduled: Option<Instant>,
}

/// Every connection and listener.
#[derive(Debug)]
pub(crate) struct TcpTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    pub(crate) demux: Box<dyn Demux>,
    /// Local ports in use, with how many entries use each.
    ports: HashMap<u16, u32>,
    next_ephemeral: u16,
    isn: IsnGenerator,
    /// The connections' deadlines, earliest first: (deadline, slot, generation). An entry is live
    /// while its slot holds that generation and has it as `scheduled`; others are dropped when they
    /// reach the top. A connection whose deadline moves later keeps its entry until it comes due
    /// (then it is pushed again with the new deadline), so a busy connection costs no heap operation
    /// per segment, and `settle` keeps the top exact.
    timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Slots whose entries came due in the current `tcp_timers` run (kept for its allocation).
    due: Vec<u32>,
    /// Connections visited by timer runs (tests check that idle ones are not).
    #[cfg(test)]
    timer_visits: usize,
    connections: usize,
    /// Connections whose output waits for the end of the input batch.
    dirty: Vec<u32>,
}

impl TcpTable {
    pub(crate) fn new(config: &StackConfig, secret: [u64; 2]) -> TcpTable {
        TcpTable {
            slots: Vec::new(),
            free: Vec::new(),
            demux: config.demux.build(),
            ports: HashMap::new(),
            next_ephemeral: *config.ephemeral_ports.start(),
            isn: IsnGenerator::new(secret),
            timers: BinaryHeap::new(),
            due: Vec::new(),
            #[cfg(test)]
            timer_visits: 0,
            connections: 0,
            dirty: Vec::new(),
        }
    }

    fn insert(&mut self, entry: Entry, pcb: Pcb) -> (u32, u32) {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                    in_demux: false,
                    scheduled: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        if matches!(entry, Entry::Conn(_)) {
            self.connections += 1;
        }
        let slot = &mut self.slots[index as usize];
        slot.entry = Some(entry);
        slot.in_demux = true;
        *self.ports.entry(pcb.local_port).or_insert(0) += 1;
        self.demux.insert(SocketId(index), pcb);
        (index, slot.generation)
    }

    /// Takes an entry out of the demultiplexer (it receives nothing more) but keeps its slot.
    fn unhook(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        if !slot.in_demux {
            return;
        }
        slot.in_demux = false;
        let pcb = match &slot.entry {
            Some(Entry::Conn(t)) => pcb_of(t),
            Some(Entry::Listener(l)) => Pcb::bound(l.local),
            None => return,
        };
        self.demux.remove(SocketId(index), &pcb);
        if let Some(n) = self.ports.get_mut(&pcb.local_port) {
            *n -= 1;
            if *n == 0 {
                self.ports.remove(&pcb.local_port);
            }
        }
    }

    /// Frees a slot.
    fn remove(&mut self, index: u32) -> Option<Entry> {
        self.unhook(index);
        let slot = &mut self.slots[index as usize];
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        // Its heap entry, if any, is dead now (another generation): dropped when it reaches the top.
        slot.scheduled = None;
        self.free.push(index);
        if matches!(entry, Entry::Conn(_)) {
            self.connections -= 1;
        }
        self.settle();
        Some(entry)
    }

    /// The entry in slot `index`, if it holds one of `generation` (any generation when `None`).
    fn entry(&mut self, index: u32, generation: Option<u32>) -> Option<&mut Entry> {
        let slot = self.slots.get_mut(index as usize)?;
        if generation.is_some_and(|g| g != slot.generation) {
            return None;
        }
        slot.entry.as_mut()
    }

    /// The connection a handle names (its generation must match).
    pub(crate) fn conn_mut(&mut self, index: u32, generation: u32) -> Option<&mut Tcb> {
        match self.entry(index, Some(generation))? {
            Entry::Conn(t) => Some(t),
            Entry::Listener(_) => None,
        }
    }

    fn tcb(&mut self, index: u32) -> Option<&mut Tcb> {
        match self.entry(index, None)? {
            Entry::Conn(t) => Some(t),
            Entry::Listener(_) => None,
        }
    }

    /// The listener a handle names (its generation must match).
    pub(crate) fn listener_mut(&mut self, index: u32, generation: u32) -> Option<&mut Listener> {
        match self.entry(index, Some(generation))? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) => None,
        }
    }

    fn listener(&mut self, index: u32) -> Option<&mut Listener> {
        match self.entry(index, None)? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) => None,
        }
    }

    pub(crate) fn generation(&self, index: u32) -> u32 {
        self.slots[index as usize].generation
    }

    fn ephemeral_port(&mut self, range: &std::ops::RangeInclusive<u16>) -> Option<u16> {
        let (lo, hi) = (*range.start(), *range.end());
        for _ in 0..=(hi - lo) as u32 {
            let port = self.next_ephemeral.clamp(lo, hi);
            self.next_ephemeral = if port == hi { lo } else { port + 1 };
            if !self.ports.contains_key(&port) {
                return Some(port);
            }
        }
        None
    }

    /// Learns connection `index`'s deadline, which may have changed: every path that runs the
    /// block (input, output, timers, the application's calls) ends here, through `tcp_output` or
    /// `tcp_timers`. Pushes a heap entry only when the deadline moved earlier than the one scheduled.
    fn schedule(&mut self, index: u32) {
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return;
        };
        let deadline = match &slot.entry {
            Some(Entry::Conn(tcb)) => tcb.deadline(),
            _ => None,
        };
        if let Some(at) = deadline.filter(|&at| slot.scheduled.is_none_or(|s| at < s)) {
            slot.scheduled = Some(at);
            self.timers.push(Reverse((at, index, slot.generation)));
            if self.timers.len() > 2 * self.connections + 64 {
                self.compact_timers();
            }
        }
        self.settle();
    }

    /// The deadline of the heap entry `(at, index, generation)` if it is live, with the
    /// connection's actual deadline.
    fn live_entry(&self, at: Instant, index: u32, generation: u32) -> Option<Option<Instant>> {
        let slot = &self.slots[index as usize];
        if slot.generation != generation || slot.scheduled != Some(at) {
            return None;
        }
        match &slot.entry {
            Some(Entry::Conn(tcb)) => Some(tcb.deadline()),
            _ => Some(None),
        }
    }

    /// Makes the heap's top exact: drops dead entries, and moves a live one whose connection's
    /// deadline went later (or away) to where it now belongs. The top is then the earliest deadline
    /// of all connections: every connection with a deadline has a live entry no later than it.
    fn settle(&mut self) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            let Some(actual) = self.live_entry(at, index, generation) else {
                self.timers.pop();
                continue;
            };
            if actual == Some(at) {
                return;
            }
            self.timers.pop();
            let slot = &mut self.slots[index as usize];
            slot.scheduled = actual;
            if let Some(d) = actual {
                self.timers.push(Reverse((d, index, generation)));
            }
        }
    }

    /// Rebuilds the heap from the live entries, when dead ones outnumber them.
    #[cold]
    fn compact_timers(&mut self) {
        let slots = &self.slots;
        self.timers.retain(|&Reverse((at, index, generation))| {
            let slot = &slots[index as usize];
            slot.generation == generation && slot.scheduled == Some(at)
        });
    }

    /// Takes the connections whose deadlines are due at `now` off the heap, into `self.due`.
    fn take_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let slot = &mut self.slots[index as usize];
            if slot.generation == generation && slot.scheduled == Some(at) {
                slot.scheduled = None;
                self.due.push(index);
            }
        }
    }

    /// The earliest deadline of any connection.
    fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|&Reverse((at, _, _))| at)
    }

    /// Listeners and connections bound to `port` overlapping `addr`.
    fn listener_conflict(&self, local: SocketAddrV4) -> bool {
        self.slots.iter().any(|s| match &s.entry {
            Some(Entry::Listener(l)) => {
                s.in_demux
                    && l.local.port() == local.port()
                    && (l.local.ip().is_unspecified()
                        || local.ip().is_unspecified()
                        || l.local.ip() == local.ip())
            }
            _ => false,
        })
    }

    /// Number of connections, in every state.
    pub(crate) fn connections(&self) -> usize {
        self.connections
    }
}

fn pcb_of(t: &Tcb) -> Pcb {
    Pcb {
        local_addr: *t.local.ip(),
        local_port: t.local.port(),
        remote_addr: *t.remote.ip(),
        remote_port: t.remote.port(),
    }
}

/// What kind of checksum an outgoing segment gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxChecksum {
    /// Fused with the copy out of the send buffer (paper 000 §7.1).
    Software,
    /// Copy, then a separate checksum pass (`CopyChecksum::Separate`).
    Separate,
    /// Left to the link.
    Offload,
    /// None at all: Kay & Pasquale's elimination, negotiated with the alternate checksum option.
    None,
}

impl Stack {
    fn tcp_cx(&mut self) -> (&mut TcpTable, Cx<'_>) {
        let max_ooo = self.config.limits.tcp_out_of_order;
        (
            &mut self.tcp,
            Cx {
                now: self.now,
                cfg: &self.config.tcp,
                pool: &mut self.pool,
                counters: &mut self.counters.tcp,
                drops: &mut self.counters.drops,
                max_ooo,
            },
        )
    }

    /// Input: one TCP segment (the IP payload in `buf`).
    pub(crate) fn tcp_input(&mut self, mut buf: PacketBuf, ip: &Ipv4Repr, delivery: Delivery) {
        layer!(Receive, Tcp);
        if delivery != Delivery::Unicast {
            return self.drop_packet(buf, DropReason::TcpBadAddress);
        }
        let repr = match TcpPacket::new_checked(buf.data()) {
            Ok(packet) => match TcpRepr::parse(&packet) {
                Ok(repr) => repr,
                Err(_) => return self.drop_packet(buf, DropReason::TcpBadHeader),
            },
            Err(WireError::Truncated) => return self.drop_packet(buf, DropReason::TcpTruncated),
            Err(_) => return self.drop_packet(buf, DropReason::TcpBadHeader),
        };
        let local = SocketAddrV4::new(ip.dst_addr, repr.dst_port);
        let remote = SocketAddrV4::new(ip.src_addr, repr.src_port);
        let found = self.tcp.demux.lookup(local, remote);
        // A connection that negotiated checksum elimination (paper 001) takes its segments unsummed;
        // everything else is verified, or vouched for by the link.
        let eliminated = !repr.flags.contains(Flags::SYN)
            && found.is_some_and(|id| self.tcp.tcb(id.0).is_some_and(|t| t.no_checksum));
        let offloaded =
            self.config.checksum_policy.use_offload && buf.meta.checksum != ChecksumOffload::None;
        if eliminated {
            self.counters.tcp.in_no_checksum += 1;
        } else if offloaded {
            self.counters.tcp.in_checksum_offloaded += 1;
        } else {
            let pseudo = checksum::pseudo_header_sum(ip.src_addr, ip.dst_addr, 6, buf.len() as u16);
            let sum = {
                timed!(Checksum);
                self.config.checksum.sum(buf.data())
            };
            if checksum::add(pseudo, sum) != 0xffff {
                return self.drop_packet(buf, DropReason::TcpBadChecksum);
            }
        }
        // SYN with FIN or RST has no meaning anywhere. A segment with no control bits at all (a "null
        // scan") is not refused here: a closed port answers it with a RST like any other non-RST
        // segment (RFC 9293 §3.10.7.1), a listener drops it, a connection finds it has no ACK.
        let f = repr.flags;
        if f.contains(Flags::SYN) && (f.contains(Flags::FIN) || f.contains(Flags::RST)) {
            return self.drop_packet(buf, DropReason::TcpBadFlags);
        }
        if ip.src_addr.is_unspecified() || repr.src_port == 0 || repr.dst_port == 0 {
            return self.drop_packet(buf, DropReason::TcpBadAddress);
        }
        self.counters.tcp.in_segs += 1;
        let header_len = ((buf.data()[12] >> 4) as usize) * 4;
        buf.pull_front(header_len);

        let Some(SocketId(index)) = found else {
            self.tcp_reply_reset(local, remote, &repr, buf.len());
            return self.drop_packet(buf, DropReason::TcpNoSocket);
        };
        match self.tcp.slots[index as usize].entry {
            Some(Entry::Conn(_)) => self.tcp_conn_input(index, &repr, buf),
            Some(Entry::Listener(_)) => self.tcp_listen_input(index, local, remote, &repr, buf),
            None => self.drop_packet(buf, DropReason::TcpNoSocket),
        }
    }

    fn tcp_conn_input(&mut self, index: u32, repr: &TcpRepr, buf: PacketBuf) {
        let prediction = self.config.tcp.header_prediction;
        let (table, mut cx) = self.tcp_cx();
        let Some(tcb) = table.tcb(index) else {
            return cx.pool.free(buf);
        };
        let verdict = if prediction {
            match tcb.predict(repr, buf, &mut cx) {
                Ok(()) => Verdict::Continue,
                Err(buf) => tcb.on_segment(repr, buf, &mut cx),
            }
        } else {
            tcb.on_segment(repr, buf, &mut cx)
        };
        self.tcp_verdict(index, verdict);
    }

    /// Acts on what a block asked for, then sends what it owes.
    fn tcp_verdict(&mut self, index: u32, verdict: Verdict) {
        match verdict {
            Verdict::Continue => {}
            Verdict::Established => {
                let Some(tcb) = self.tcp.tcb(index) else {
                    return;
                };
                let parent = tcb.listener;
                if let Some(l) = parent.and_then(|p| self.tcp.listener(p.0)) {
                    if let Some(pos) = l.half_open.iter().position(|&i| i == index) {
                        l.half_open.swap_remove(pos);
                    }
                    if l.ready.len() < l.backlog {
                        l.ready.push_back(SocketId(index));
                    } else {
                        // The accept queue is full: refuse the connection.
                        self.counters.drops.add(DropReason::TcpListenOverflow);
                        self.tcp_abort_with_reset(index);
                        return;
                    }
                }
            }
            Verdict::Reset { seq, ack } => {
                if let Some(tcb) = self.tcp.tcb(index) {
                    let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
                    self.tcp_send_reset(&hop, local, remote, seq, ack);
                }
                let closed = self
                    .tcp
                    .tcb(index)
                    .is_some_and(|t| t.state == State::Closed);
                if closed {
                    return self.tcp_finish(index);
                }
            }
            Verdict::Remove => return self.tcp_finish(index),
        }
        // Batched ACK processing: what the segments of one receive batch owe goes out once, after
        // the batch (a cumulative ACK for all of them, as GRO would give).
        if let Some(tcb) = self.tcp.tcb(index) {
            if std::mem::take(&mut tcb.ack_immediately) {
                return self.tcp_output(index);
            }
            if !tcb.output_queued {
                tcb.output_queued = true;
                self.tcp.dirty.push(index);
            }
        }
    }

    /// Sends what every connection touched by the last input batch owes.
    #[inline]
    pub(crate) fn tcp_flush_dirty(&mut self) {
        if !self.tcp.dirty.is_empty() {
            self.tcp_flush_dirty_list();
        }
    }

    #[inline(never)]
    fn tcp_flush_dirty_list(&mut self) {
        let mut dirty = std::mem::take(&mut self.tcp.dirty);
        for &index in &dirty {
            if let Some(tcb) = self.tcp.tcb(index) {
                tcb.output_queued = false;
                self.tcp_output(index);
            }
        }
        dirty.clear();
        if self.tcp.dirty.is_empty() {
            self.tcp.dirty = dirty;
        }
    }

    /// A block is done: free it, or, if the application still holds it, keep it (unhooked) so the
    /// application sees the end or the error.
    fn tcp_finish(&mut self, index: u32) {
        let Some(tcb) = self.tcp.tcb(index) else {
            return;
        };
        let child_of = tcb.listener;
        let free = tcb.orphan || child_of.is_some();
        tcb.state = State::Closed;
        if let Some(parent) = child_of {
            if let Some(l) = self.tcp.listener(parent.0) {
                if let Some(pos) = l.ready.iter().position(|&id| id.0 == index) {
                    l.ready.remove(pos);
                } else if let Some(pos) = l.half_open.iter().position(|&i| i == index) {
                    l.half_open.swap_remove(pos);
                }
            }
        }
        if free {
            if let Some(Entry::Conn(mut tcb)) = self.tcp.remove(index) {
                tcb.release(&mut self.pool);
            }
        } else {
            self.tcp.unhook(index);
        }
    }

    /// Aborts connection `index` with a RST to the peer.
    pub(crate) fn tcp_abort_with_reset(&mut self, index: u32) {
        let (table, mut cx) = self.tcp_cx();
        let Some(tcb) = table.tcb(index) else {
            return;
        };
        let send = tcb.state.is_synchronized() || tcb.state == State::SynReceived;
        let (seq, ack) = tcb.reset_fields();
        let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
        tcb.abort(std::io::ErrorKind::ConnectionAborted, &mut cx);
        if send {
            self.tcp_send_reset(&hop, local, remote, seq, Some(ack));
        }
        self.tcp_finish(index);
    }

    /// A segment for a listener (RFC 9293 §3.10.7.2).
    fn tcp_listen_input(
        &mut self,
        index: u32,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) {
        let f = repr.flags;
        if f.contains(Flags::RST) {
            return self.drop_packet(buf, DropReason::TcpUnexpected);
        }
        if f.contains(Flags::ACK) && !f.contains(Flags::SYN) {
            return self.tcp_cookie_ack(index, local, remote, repr, buf);
        }
        if !f.contains(Flags::SYN) || f.contains(Flags::ACK) {
            if f.contains(Flags::ACK) {
                self.tcp_reply_reset(local, remote, repr, buf.len());
            }
            return self.drop_packet(buf, DropReason::TcpUnexpected);
        }
        let Ok(hop) = self.route(*remote.ip()) else {
            return self.drop_packet(buf, DropReason::Ipv4NoRoute);
        };
        let Some(listener) = self.tcp.listener(index) else {
            return self.drop_packet(buf, DropReason::TcpNoSocket);
        };
        let full = listener.half_open.len() >= listener.backlog
            || listener.ready.len() >= listener.backlog;
        if self.tcp.connections() >= self.config.limits.tcp_connections {
            return self.drop_packet(buf, DropReason::TcpTooManyConnections);
        }
        if full {
            if self.config.tcp.syn_cookies {
                self.pool.free(buf);
                return self.tcp_send_cookie(&hop, local, remote, repr);
            }
            return self.drop_packet(buf, DropReason::TcpListenOverflow);
        }
        self.pool.free(buf);
        let iss = self.tcp.isn.isn(local, remote, self.now);
        let mut tcb = Tcb::accept(local, remote, hop, iss, repr, &self.config.tcp);
        tcb.listener = Some(SocketId(index));
        let pcb = pcb_of(&tcb);
        self.counters.tcp.passive_opens += 1;
        let (child, _) = self.tcp.insert(Entry::Conn(Box::new(tcb)), pcb);
        if let Some(l) = self.tcp.listener(index) {
            l.half_open.push(child);
        }
        self.tcp_output(child);
    }

    /// A stateless SYN-ACK whose ISN is a SYN cookie (RFC 4987 §3.6).
    fn tcp_send_cookie(
        &mut self,
        hop: &NextHop,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
    ) {
        let mss = syn
            .options
            .mss
            .unwrap_or(536)
            .min((hop.caps.mtu.min(65535) - 40) as u16);
        let cookie = self.tcp.isn.cookie(local, remote, syn.seq, mss, self.now);
        let repr = TcpRepr {
            src_port: local.port(),
            dst_port: remote.port(),
            seq: cookie,
            ack: syn.seq.wrapping_add(1),
            flags: Flags::SYN | Flags::ACK,
            window: self.config.tcp.recv_buffer.min(65535) as u16,
            urgent: 0,
            options: TcpOptions {
                mss: Some(mss),
                ..TcpOptions::default()
            },
        };
        self.counters.tcp.syn_cookies_sent += 1;
        self.tcp_emit(hop, local, remote, repr, &[]);
    }

    /// An ACK to a listener: the last step of a handshake whose SYN-ACK was a cookie, or garbage.
    fn tcp_cookie_ack(
        &mut self,
        index: u32,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) {
        // The cookie is checked once: the MSS it carries, if it is valid.
        let cookie_mss = if self.config.tcp.syn_cookies {
            self.tcp.isn.check_cookie(
                local,
                remote,
                repr.seq.wrapping_sub(1),
                repr.ack.wrapping_sub(1),
                self.now,
            )
        } else {
            None
        };
        let room = self
            .tcp
            .listener(index)
            .is_some_and(|l| l.ready.len() < l.backlog)
            && self.tcp.connections() < self.config.limits.tcp_connections;
        let (Some(mss), true, Ok(hop)) = (cookie_mss, room, self.route(*remote.ip())) else {
            self.tcp_reply_reset(local, remote, repr, buf.len());
            let reason = if cookie_mss.is_some() {
                DropReason::TcpListenOverflow
            } else {
                DropReason::TcpBadCookie
            };
            return self.drop_packet(buf, reason);
        };
        let tcb = Tcb::from_cookie(local, remote, hop, repr, mss, &self.config.tcp);
        let pcb = pcb_of(&tcb);
        self.counters.tcp.syn_cookies_ok += 1;
        self.counters.tcp.passive_opens += 1;
        let (child, _) = self.tcp.insert(Entry::Conn(Box::new(tcb)), pcb);
        if let Some(t) = self.tcp.tcb(child) {
            t.listener = Some(SocketId(index));
        }
        if let Some(l) = self.tcp.listener(index) {
            l.ready.push_back(SocketId(child));
        }
        // The ACK may carry data already.
        if buf.is_empty() {
            self.pool.free(buf);
        } else {
            self.tcp_conn_input(child, repr, buf);
        }
    }

    /// The answer to a segment no connection wants (RFC 9293 §3.10.7.1): a RST, unless it was one.
    fn tcp_reply_reset(
        &mut self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: &TcpRepr,
        payload_len: usize,
    ) {
        if repr.flags.contains(Flags::RST) {
            return;
        }
        let Ok(hop) = self.route(*remote.ip()) else {
            return;
        };
        if repr.flags.contains(Flags::ACK) {
            self.tcp_send_reset(&hop, local, remote, repr.ack, None);
        } else {
            let len = payload_len as u32
                + repr.flags.contains(Flags::SYN) as u32
                + repr.flags.contains(Flags::FIN) as u32;
            self.tcp_send_reset(&hop, local, remote, 0, Some(repr.seq.wrapping_add(len)));
        }
    }

    fn tcp_send_reset(
        &mut self,
        hop: &NextHop,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        seq: u32,
        ack: Option<u32>,
    ) {
        let repr = TcpRepr {
            src_port: local.port(),
            dst_port: remote.port(),
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
        self.counters.tcp.out_rsts += 1;
        self.tcp_emit(hop, local, remote, repr, &[]);
    }

    /// Builds and sends one segment whose payload is `pieces` (for segments with no connection).
    fn tcp_emit(
        &mut self,
        hop: &NextHop,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        repr: TcpRepr,
        pieces: &[&[u8]],
    ) {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let buf = self.tcp_build(hop, (local, remote), &repr, pieces, len, false);
        self.counters.tcp.out_segs += 1;
        self.ipv4_output(buf, hop, *local.ip(), *remote.ip(), IpProtocol::Tcp);
    }

    /// Writes a segment into a pool buffer: header, payload copied from `pieces` (summed in the same
    /// loop when the checksum is computed here, paper 000 §7.1), checksum or offload mark.
    fn tcp_build(
        &mut self,
        hop: &NextHop,
        (local, remote): (SocketAddrV4, SocketAddrV4),
        repr: &TcpRepr,
        pieces: &[&[u8]],
        len: usize,
        no_checksum: bool,
    ) -> PacketBuf {
        let header_len = repr.header_len();
        let total = header_len + len;
        let mode = if no_checksum {
            TxChecksum::None
        } else if self.config.checksum_policy.use_offload && hop.caps.tx_checksum_offload {
            TxChecksum::Offload
        } else if self.config.copy_checksum == CopyChecksum::Separate {
            TxChecksum::Separate
        } else {
            TxChecksum::Software
        };
        let mut buf = {
            timed!(Buffers);
            self.pool.alloc(total)
        };
        let segment = buf.extend(total);
        let (header, payload) = segment.split_at_mut(header_len);
        repr.emit(header);
        let pseudo = checksum::pseudo_header_sum(*local.ip(), *remote.ip(), 6, total as u16);
        let field = match mode {
            TxChecksum::Offload | TxChecksum::None | TxChecksum::Separate => {
                {
                    timed!(Copy);
                    gather(payload, pieces);
                }
                match mode {
                    TxChecksum::Offload => pseudo,
                    TxChecksum::None => {
                        self.counters.tcp.out_no_checksum += 1;
                        0
                    }
                    _ => {
                        // The 4.3BSD way: a second pass over the whole segment.
                        timed!(Checksum);
                        !checksum::add(self.config.checksum.sum(&buf.data()[..total]), pseudo)
                    }
                }
            }
            TxChecksum::Software => {
                timed!(CopyChecksum);
                let mut sum = Checksum::new();
                sum.add_bytes(header);
                sum.add_sum(pseudo);
                sum.copy_and_add_pieces(self.config.checksum, payload, pieces);
                sum.checksum()
            }
        };
        buf.data_mut()[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&field.to_be_bytes());
        if mode == TxChecksum::Offload {
            buf.meta.checksum = ChecksumOffload::Partial {
                start: 20,
                offset: CHECKSUM_OFFSET as u16,
            };
            self.counters.tcp.out_checksum_offloaded += 1;
        }
        buf
    }

    /// Sends everything connection `index` owes and the windows allow.
    pub(crate) fn tcp_output(&mut self, index: u32) {
        layer!(Send, Tcp);
        let use_offload = self.config.checksum_policy.use_offload;
        for _ in 0..OUTPUT_BURST {
            let (table, mut cx) = self.tcp_cx();
            let Some(tcb) = table.tcb(index) else {
                return;
            };
            // TSO (paper 002 §3.3): up to a 64 KiB packet when the link cuts segments and the checksum
            // is left to it as well.
            let caps = tcb.hop.caps;
            let tso = (caps.tso && caps.tx_checksum_offload && use_offload).then_some(TSO_MAX);
            let Some(Outgoing {
                mut repr,
                offset,
                len,
                segment_size,
            }) = tcb.next_segment(&mut cx, tso)
            else {
                break;
            };
            tcb.stamp(&mut repr, cx.now);
            let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
            let no_checksum = tcb.no_checksum && !repr.flags.contains(Flags::SYN);
            // Copy the payload out of the send buffer, borrowing it only as long as the build needs.
            let tx = std::mem::take(&mut tcb.tx);
            let (a, b) = tx.range(offset, len);
            let mut buf = self.tcp_build(&hop, (local, remote), &repr, &[a, b], len, no_checksum);
            if let Some(tcb) = self.tcp.tcb(index) {
                tcb.tx = tx;
            }
            if let Some(size) = segment_size {
                buf.meta.gso_size = size;
                self.counters.tcp.out_tso_packets += 1;
            }
            self.counters.tcp.out_segs += 1;
            self.ipv4_output(buf, &hop, *local.ip(), *remote.ip(), IpProtocol::Tcp);
        }
        self.tcp.schedule(index);
        // A connection that finished its close while sending (LAST-ACK acknowledged elsewhere) is
        // handled by its verdicts; nothing more here.
    }

    /// Runs due TCP timers (from `poll`).
    /// Runs due TCP timers (from `poll`): only the connections whose deadlines are due are
    /// visited, each once per run (a timer re-armed for `now` waits for the next run).
    pub(crate) fn tcp_timers(&mut self) {
        let now = self.now;
        self.tcp.take_due(now);
        let mut due = std::mem::take(&mut self.tcp.due);
        for &index in &due {
            #[cfg(test)]
            {
                self.tcp.timer_visits += 1;
            }
            let (table, mut cx) = self.tcp_cx();
            let Some(tcb) = table.tcb(index) else {
                continue;
            };
            if tcb.deadline().is_some_and(|d| d <= now) {
                let verdict = tcb.on_timer(&mut cx);
                self.tcp_verdict(index, verdict);
            }
            self.tcp.schedule(index);
        }
        due.clear();
        self.tcp.due = due;
        self.tcp_flush_dirty();
    }

    /// The earliest TCP timer, for callers that sleep between polls.
    pub(crate) fn tcp_next_deadline(&self) -> Option<Instant> {
        self.tcp.next_deadline()
    }

    /// An ICMP error quoting a TCP segment we sent: a hard error while connecting refuses the
    /// connection (RFC 1122 §4.2.3.9); others are only remembered.
    pub(crate) fn tcp_report_error(
        &mut self,
        ip: &Ipv4Repr,
        head: &[u8; 8],
        kind: std::io::ErrorKind,
    ) {
        let local = SocketAddrV4::new(ip.src_addr, u16::from_be_bytes([head[0], head[1]]));
        let remote = SocketAddrV4::new(ip.dst_addr, u16::from_be_bytes([head[2], head[3]]));
        let Some(SocketId(index)) = self.tcp.demux.lookup(local, remote) else {
            return;
        };
        let (table, mut cx) = self.tcp_cx();
        let Some(tcb) = table.tcb(index) else {
            return;
        };
        if tcb.local != local || tcb.remote != remote {
            return;
        }
        if tcb.state == State::SynSent {
            cx.counters.attempt_fails += 1;
            tcb.abort(kind, &mut cx);
            self.tcp_finish(index);
        }
    }
}

#[cfg(test)]
mod tests;
