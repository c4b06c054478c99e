//! The PCB population of Dixon & Calvert §2.4: turns the datagrams that arrive at one host into the
//! binds, sends, lookups and removes a BSD host would have performed.
//!
//! The rules, applied to each arriving datagram from foreign port F to local port L (a port is
//! *well-known* when it is below 1024):
//!
//! * L well-known: the host is a **server** for L. A wildcard PCB `0.0.0.0:L` is bound before the
//!   first event and stays for the whole trace (servers start at boot).
//! * F well-known and L not: the host is a **client** of the service F. The client bound a wildcard
//!   PCB `0.0.0.0:L` just before this datagram (it sent the request, so the strategy is told of a send)
//!   and removes it once this one reply has been delivered.
//! * Neither well-known: **undetermined**, taken to be a client with a fully specified PCB
//!   (local address, L, foreign address, F), bound (and told of a send) just before the first datagram
//!   of that 4-tuple and removed just after its last one.
//!
//! Every arriving datagram is delivered (the paper's first assumption), so every lookup carries the
//! socket it must find. When two rules would bind the same PCB at the same time, the PCB is bound once
//! and reference-counted.

use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::demux::{Pcb, SocketId};

/// Ports below this are well-known (assigned services), as in the paper.
pub const WELL_KNOWN_LIMIT: u16 = 1024;

/// One UDP datagram arriving at the host: `dst` is the host's side, `src` the foreign side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Datagram {
    /// Foreign address and port (the sender).
    pub src: SocketAddrV4,
    /// Local address and port (the host under study).
    pub dst: SocketAddrV4,
}

/// The role §2.4 gives the host for one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The local port is well-known: a long-lived wildcard server PCB receives it.
    Server,
    /// The foreign port is well-known and the local port is not: a reply to one of the host's clients,
    /// received by a wildcard PCB that lives for this one datagram.
    Client,
    /// Neither port is well-known: a client with a fully specified PCB.
    FullySpecified,
}

impl Class {
    /// The class of `d` under the §2.4 rules.
    pub fn of(d: &Datagram) -> Class {
        if d.dst.port() < WELL_KNOWN_LIMIT {
            Class::Server
        } else if d.src.port() < WELL_KNOWN_LIMIT {
            Class::Client
        } else {
            Class::FullySpecified
        }
    }
}

/// One step of the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A socket binds (inserts) a PCB.
    Bind(SocketId, Pcb),
    /// A socket sends a datagram (only Partridge & Pink's send cache listens).
    Sent(SocketId, Pcb),
    /// A datagram arrives; `expected` is the socket the model delivers it to.
    Lookup {
        /// Local side of the datagram.
        dst: SocketAddrV4,
        /// Foreign side of the datagram.
        src: SocketAddrV4,
        /// The socket that must be found.
        expected: SocketId,
    },
    /// A socket closes (removes) its PCB.
    Remove(SocketId, Pcb),
}

/// The events for a trace and what the model made of it.
#[derive(Clone, Debug, Default)]
pub struct Population {
    /// Binds, sends, lookups and removes in trace order; the server binds come first.
    pub events: Vec<Event>,
    /// Server PCBs bound at the start (table 4's single list length).
    pub initial_pcbs: usize,
    /// Their local ports, ascending.
    pub server_ports: Vec<u16>,
    /// Lookups (one per datagram).
    pub lookups: usize,
    /// Lookups delivered to server PCBs.
    pub server_lookups: usize,
    /// Lookups delivered to short-lived client PCBs.
    pub client_lookups: usize,
    /// Lookups delivered to fully specified PCBs.
    pub fully_specified_lookups: usize,
    /// Distinct fully specified PCBs (4-tuples).
    pub fully_specified_pcbs: usize,
    /// Binds of short-lived client PCBs.
    pub client_binds: usize,
    /// Lookups that go to the same socket as the lookup before (the locality a one-entry cache of
    /// the last socket found could exploit).
    pub repeats: usize,
}

impl Population {
    /// The fraction of lookups delivered to server PCBs (table 1's last column).
    pub fn server_share(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.server_lookups as f64 / self.lookups as f64
        }
    }
}

/// The number of events before the first lookup: the binds at the start.
pub fn initial_events(events: &[Event]) -> usize {
    events
        .iter()
        .position(|e| matches!(e, Event::Lookup { .. }))
        .unwrap_or(events.len())
}

/// Binds PCBs once, counting references, and hands out socket ids.
struct Binder {
    next_id: u32,
    live: HashMap<Pcb, (SocketId, u32)>,
}

impl Binder {
    fn bind(&mut self, pcb: Pcb, events: &mut Vec<Event>) -> (SocketId, bool) {
        if let Some((id, refs)) = self.live.get_mut(&pcb) {
            *refs += 1;
            return (*id, false);
        }
        let id = SocketId(self.next_id);
        self.next_id += 1;
        self.live.insert(pcb, (id, 1));
        events.push(Event::Bind(id, pcb));
        (id, true)
    }

    fn release(&mut self, pcb: Pcb, events: &mut Vec<Event>) {
        if let Some((id, refs)) = self.live.get_mut(&pcb) {
            *refs -= 1;
            if *refs == 0 {
                events.push(Event::Remove(*id, pcb));
                self.live.remove(&pcb);
            }
        }
    }

    fn id(&self, pcb: &Pcb) -> SocketId {
        self.live[pcb].0
    }
}

/// The fully specified PCB a datagram of the undetermined class is delivered to.
fn fully_specified(d: &Datagram) -> Pcb {
    Pcb {
        local_addr: *d.dst.ip(),
        local_port: d.dst.port(),
        remote_addr: *d.src.ip(),
        remote_port: d.src.port(),
    }
}

/// A wildcard PCB on `port`.
fn wildcard(port: u16) -> Pcb {
    Pcb::bound(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
}

/// Applies the §2.4 rules to `datagrams` (all addressed to the host under study, in arrival order).
pub fn build(datagrams: &[Datagram]) -> Population {
    let mut pop = Population::default();
    let mut server_ports = BTreeSet::new();
    let mut span: HashMap<Pcb, (usize, usize)> = HashMap::new();
    for (i, d) in datagrams.iter().enumerate() {
        match Class::of(d) {
            Class::Server => {
                server_ports.insert(d.dst.port());
            }
            Class::Client => {}
            Class::FullySpecified => {
                span.entry(fully_specified(d))
                    .and_modify(|s| s.1 = i)
                    .or_insert((i, i));
            }
        }
    }
    pop.fully_specified_pcbs = span.len();
    pop.server_ports = server_ports.iter().copied().collect();
    pop.initial_pcbs = server_ports.len();

    let mut events = Vec::with_capacity(datagrams.len() * 2 + server_ports.len());
    let mut binder = Binder {
        next_id: 1,
        live: HashMap::new(),
    };
    for &port in &server_ports {
        binder.bind(wildcard(port), &mut events);
    }
    for (i, d) in datagrams.iter().enumerate() {
        let lookup = |expected| Event::Lookup {
            dst: d.dst,
            src: d.src,
            expected,
        };
        match Class::of(d) {
            Class::Server => {
                pop.server_lookups += 1;
                events.push(lookup(binder.id(&wildcard(d.dst.port()))));
            }
            Class::Client => {
                pop.client_lookups += 1;
                let pcb = wildcard(d.dst.port());
                let (id, fresh) = binder.bind(pcb, &mut events);
                if fresh {
                    pop.client_binds += 1;
                }
                events.push(Event::Sent(id, pcb));
                events.push(lookup(id));
                binder.release(pcb, &mut events);
            }
            Class::FullySpecified => {
                pop.fully_specified_lookups += 1;
                let pcb = fully_specified(d);
                let (first, last) = span[&pcb];
                if i == first {
                    let (id, _) = binder.bind(pcb, &mut events);
                    events.push(Event::Sent(id, pcb));
                }
                events.push(lookup(binder.id(&pcb)));
                if i == last {
                    binder.release(pcb, &mut events);
                }
            }
        }
    }
    pop.lookups = datagrams.len();
    let mut previous = None;
    for e in &events {
        if let Event::Lookup { expected, .. } = e {
            if previous == Some(*expected) {
                pop.repeats += 1;
            }
            previous = Some(*expected);
        }
    }
    pop.events = events;
    pop
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dg(src: &str, dst: &str) -> Datagram {
        Datagram {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
        }
    }

    #[test]
    fn classes_and_lifetimes_follow_section_2_4() {
        let trace = [
            dg("10.2.0.1:3000", "10.1.0.1:53"),   // server 53
            dg("10.2.0.2:53", "10.1.0.1:1500"),   // reply to a client
            dg("10.2.0.3:7000", "10.1.0.1:6000"), // fully specified, first
            dg("10.2.0.1:3001", "10.1.0.1:123"),  // server 123
            dg("10.2.0.3:7000", "10.1.0.1:6000"), // fully specified, last
            dg("10.2.0.4:3000", "10.1.0.1:53"),   // server 53 again
        ];
        let pop = build(&trace);
        assert_eq!(pop.initial_pcbs, 2);
        assert_eq!(pop.server_ports, [53, 123]);
        assert_eq!(
            (
                pop.server_lookups,
                pop.client_lookups,
                pop.fully_specified_lookups
            ),
            (3, 1, 2)
        );
        assert_eq!(initial_events(&pop.events), 2);
        let kinds: Vec<char> = pop
            .events
            .iter()
            .map(|e| match e {
                Event::Bind(..) => 'B',
                Event::Sent(..) => 'S',
                Event::Lookup { .. } => 'L',
                Event::Remove(..) => 'R',
            })
            .collect();
        assert_eq!(kinds.iter().collect::<String>(), "BBLBSLRBSLLLRL");
        // Replaying through the reference finds every expected socket.
        let mut linear = fastpath::demux::Linear::default();
        for e in &pop.events {
            use fastpath::demux::Demux;
            match *e {
                Event::Bind(id, pcb) => linear.insert(id, pcb),
                Event::Sent(..) => {}
                Event::Lookup { dst, src, expected } => {
                    assert_eq!(linear.lookup(dst, src), Some(expected))
                }
                Event::Remove(id, pcb) => linear.remove(id, &pcb),
            }
        }
    }
}
