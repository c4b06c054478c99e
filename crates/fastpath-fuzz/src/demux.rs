//! The demultiplexers, against `linear`.

use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::demux::{Demux, DemuxStrategy, Pcb, SocketId};

use crate::Input;

const LOCAL: [Ipv4Addr; 3] = [
    Ipv4Addr::UNSPECIFIED,
    Ipv4Addr::new(10, 0, 0, 1),
    Ipv4Addr::new(10, 0, 0, 2),
];
const REMOTE: [Ipv4Addr; 4] = [
    Ipv4Addr::new(10, 0, 0, 9),
    Ipv4Addr::new(192, 0, 2, 1),
    Ipv4Addr::new(192, 0, 2, 2),
    Ipv4Addr::UNSPECIFIED,
];
/// 53 and 117 share a chain of 64; 40000 is ephemeral; 0 and 65535 are the edges.
const PORTS: [u16; 7] = [53, 117, 54, 1000, 40000, 0, 65535];

/// The strategies checked: every one the stack offers, and the hashing ones with so few chains that
/// everything collides.
fn strategies() -> Vec<DemuxStrategy> {
    let mut all = DemuxStrategy::ALL.to_vec();
    all.extend([
        DemuxStrategy::HashChains { chains: 1 },
        DemuxStrategy::HashChainsCached { chains: 3 },
        DemuxStrategy::TwoStage { chains: 1 },
    ]);
    all
}

fn addr(input: &mut Input<'_>, table: &[Ipv4Addr]) -> Ipv4Addr {
    match input.below(table.len() + 1) {
        i if i < table.len() => table[i],
        _ => Ipv4Addr::from(input.u32()),
    }
}

fn port(input: &mut Input<'_>) -> u16 {
    match input.below(PORTS.len() + 1) {
        i if i < PORTS.len() => PORTS[i],
        _ => input.u16(),
    }
}

/// The socket table as the stack keeps it: slots reused after close, the bound address kept.
struct Model {
    sockets: Vec<Option<(Pcb, Ipv4Addr)>>,
    free: Vec<u32>,
    demuxes: Vec<(DemuxStrategy, Box<dyn Demux>)>,
}

impl Model {
    fn live(&self, pick: usize) -> Option<u32> {
        let live: Vec<u32> = (0..self.sockets.len() as u32)
            .filter(|&i| self.sockets[i as usize].is_some())
            .collect();
        (!live.is_empty()).then(|| live[pick % live.len()])
    }

    fn set_pcb(&mut self, id: u32, pcb: Pcb) {
        let (old, bound) = self.sockets[id as usize].expect("live");
        for (_, d) in &mut self.demuxes {
            d.remove(SocketId(id), &old);
            d.insert(SocketId(id), pcb);
        }
        self.sockets[id as usize] = Some((pcb, bound));
    }

    fn live_count(&self) -> usize {
        self.sockets.iter().flatten().count()
    }
}

/// Demultiplexing: a program of binds (any local address and port from small sets, or anything),
/// connects (keeping a wildcard local address or not), disconnects, closes, sends (which prime the
/// caches) and lookups of unicast and broadcast datagrams. Every strategy answers every lookup exactly
/// as `linear` (4.3BSD's `in_pcblookup`) does, including which of several equal matches wins; every
/// broadcast reaches the same set; hash chains hold every socket once.
pub fn demux(data: &[u8]) {
    let mut input = Input::new(data);
    let mut model = Model {
        sockets: Vec::new(),
        free: Vec::new(),
        demuxes: strategies().into_iter().map(|s| (s, s.build())).collect(),
    };
    assert_eq!(model.demuxes[0].0, DemuxStrategy::Linear);
    let mut steps = 0;
    while !input.is_empty() && steps < 5000 {
        steps += 1;
        match input.u8() % 16 {
            0..=2 => {
                let local = SocketAddrV4::new(addr(&mut input, &LOCAL), port(&mut input));
                let pcb = Pcb::bound(local);
                let id = model.free.pop().unwrap_or_else(|| {
                    model.sockets.push(None);
                    (model.sockets.len() - 1) as u32
                });
                model.sockets[id as usize] = Some((pcb, *local.ip()));
                for (_, d) in &mut model.demuxes {
                    d.insert(SocketId(id), pcb);
                }
            }
            3 | 4 => {
                let pick = input.u8() as usize;
                let keep_any = input.bool();
                let remote = SocketAddrV4::new(addr(&mut input, &REMOTE), port(&mut input));
                if let Some(id) = model.live(pick) {
                    let (pcb, _) = model.sockets[id as usize].expect("live");
                    let local_addr = if pcb.local_addr.is_unspecified() && !keep_any {
                        LOCAL[1]
                    } else {
                        pcb.local_addr
                    };
                    let new = Pcb {
                        local_addr,
                        remote_addr: *remote.ip(),
                        remote_port: remote.port(),
                        ..pcb
                    };
                    model.set_pcb(id, new);
                }
            }
            5 => {
                if let Some(id) = model.live(input.u8() as usize) {
                    let (pcb, bound) = model.sockets[id as usize].expect("live");
                    model.set_pcb(id, Pcb::bound(SocketAddrV4::new(bound, pcb.local_port)));
                }
            }
            6 => {
                if let Some(id) = model.live(input.u8() as usize) {
                    let (pcb, _) = model.sockets[id as usize].take().expect("live");
                    for (_, d) in &mut model.demuxes {
                        d.remove(SocketId(id), &pcb);
                    }
                    model.free.push(id);
                }
            }
            7 => {
                if let Some(id) = model.live(input.u8() as usize) {
                    let (pcb, _) = model.sockets[id as usize].expect("live");
                    for (_, d) in &mut model.demuxes {
                        d.sent(SocketId(id), &pcb);
                    }
                }
            }
            8..=14 => {
                let dst_addr = match input.below(4) {
                    0 => LOCAL[1],
                    1 => LOCAL[2],
                    2 => Ipv4Addr::new(127, 0, 0, 1),
                    _ => Ipv4Addr::from(input.u32()),
                };
                let dst = SocketAddrV4::new(dst_addr, port(&mut input));
                let src = SocketAddrV4::new(addr(&mut input, &REMOTE), port(&mut input));
                let mut answers = model
                    .demuxes
                    .iter_mut()
                    .map(|(s, d)| (*s, d.lookup(dst, src)));
                let (_, expected) = answers.next().expect("linear first");
                for (strategy, got) in answers {
                    assert_eq!(
                        got, expected,
                        "{strategy} disagrees with linear: {src} -> {dst}"
                    );
                }
            }
            _ => {
                let dst_addr =
                    input.choose(&[Ipv4Addr::new(10, 0, 0, 255), Ipv4Addr::BROADCAST, LOCAL[1]]);
                let dst = SocketAddrV4::new(dst_addr, port(&mut input));
                let src = SocketAddrV4::new(addr(&mut input, &REMOTE), port(&mut input));
                let mut sets = Vec::new();
                for (s, d) in &mut model.demuxes {
                    let mut out = Vec::new();
                    d.lookup_all(dst, src, &mut out);
                    out.sort();
                    sets.push((*s, out));
                }
                for (s, set) in &sets[1..] {
                    assert_eq!(set, &sets[0].1, "{s}: broadcast set {src} -> {dst}");
                }
            }
        }
        let live = model.live_count();
        for (s, d) in &model.demuxes {
            if let (
                DemuxStrategy::HashChains { .. } | DemuxStrategy::HashChainsCached { .. },
                Some(chains),
            ) = (s, d.chain_lengths())
            {
                assert_eq!(
                    chains.iter().sum::<usize>(),
                    live,
                    "{s} holds every socket once"
                );
            }
            let _ = d.stats();
        }
    }
}
