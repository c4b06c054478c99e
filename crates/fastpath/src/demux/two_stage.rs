//! Two-stage hashing: fully specified PCBs first, then wildcard ones (paper 003 §2.2.4).

use std::net::Ipv4Addr;

use super::linear::best_match;
use super::{exact_hit, Demux, DemuxStats, IpAddress, Pcb, SocketId};

/// Two stores of `N` chains each, both hashed by local port mod `N`: one for fully specified PCBs (no
/// wildcard), searched first with a one-behind cache per chain (McKenney & Dove), one for PCBs with
/// wildcards, searched without a cache only when the first stage finds nothing.
#[derive(Debug)]
pub struct TwoStage<A: IpAddress = Ipv4Addr> {
    full: Vec<Vec<(Pcb<A>, SocketId)>>,
    full_cache: Vec<Option<(Pcb<A>, SocketId)>>,
    wild: Vec<Vec<(Pcb<A>, SocketId)>>,
    stats: DemuxStats,
}

fn is_full<A: IpAddress>(pcb: &Pcb<A>) -> bool {
    !pcb.local_addr.is_wildcard() && pcb.is_connected()
}

impl<A: IpAddress> TwoStage<A> {
    /// `n` chains per store (at least 1).
    pub fn new(n: u16) -> TwoStage<A> {
        let n = n.max(1) as usize;
        TwoStage {
            full: vec![Vec::new(); n],
            full_cache: vec![None; n],
            wild: vec![Vec::new(); n],
            stats: DemuxStats::default(),
        }
    }

    #[inline]
    fn chain_of(&self, port: u16) -> usize {
        port as usize % self.full.len()
    }
}

impl<A: IpAddress> Demux<A> for TwoStage<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        let r = self.chain_of(pcb.local_port);
        if is_full(&pcb) {
            self.full_cache[r] = None;
            self.full[r].insert(0, (pcb, id));
        } else {
            self.wild[r].insert(0, (pcb, id));
        }
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        let r = self.chain_of(pcb.local_port);
        let chain = if is_full(pcb) {
            self.full_cache[r] = None;
            &mut self.full[r]
        } else {
            &mut self.wild[r]
        };
        if let Some(i) = chain.iter().position(|(p, s)| *s == id && p == pcb) {
            chain.remove(i);
        }
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        let r = self.chain_of(A::port(&dst));
        if let Some((pcb, id)) = self.full_cache[r] {
            self.stats.comparisons += 1;
            if exact_hit(&pcb, dst, src) {
                self.stats.cache_hits += 1;
                return Some(id);
            }
        }
        for (i, (pcb, id)) in self.full[r].iter().enumerate() {
            if exact_hit(pcb, dst, src) {
                self.stats.comparisons += i as u64 + 1;
                self.full_cache[r] = Some((*pcb, *id));
                return Some(*id);
            }
        }
        self.stats.comparisons += self.full[r].len() as u64;
        let (found, examined) = best_match(self.wild[r].iter(), dst, src);
        self.stats.comparisons += examined;
        found.map(|(_, id)| id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        let r = self.chain_of(A::port(&dst));
        let both = self.full[r].iter().chain(&self.wild[r]);
        out.extend(
            both.filter(|(p, _)| p.match_wildcards(dst, src).is_some())
                .map(|(_, id)| *id),
        );
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }

    fn chain_lengths(&self) -> Option<Vec<usize>> {
        Some(
            self.full
                .iter()
                .zip(&self.wild)
                .map(|(f, w)| f.len() + w.len())
                .collect(),
        )
    }
}
