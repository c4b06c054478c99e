//! Hashing to multiple PCB lists by local port (paper 003 §2.2.3).

use std::net::Ipv4Addr;

use super::linear::best_match;
use super::{exact_hit, Demux, DemuxStats, IpAddress, Pcb, SocketId};

/// A chain's one-entry cache.
type Cached<A> = Option<(Pcb<A>, SocketId)>;

/// `N` lists, a PCB on list `local port mod N`, each kept newest first and searched like `in_pcblookup`
/// (a datagram's candidates all share its destination port, so they all sit on one list). Dixon &
/// Calvert used 64 lists and found the per-list one-behind cache of McKenney & Dove useless for UDP
/// (table 3 is without it); `cached` adds it (hits on exact four-field matches only, cleared when its
/// list changes).
#[derive(Debug)]
pub struct HashChains<A: IpAddress = Ipv4Addr> {
    chains: Vec<Vec<(Pcb<A>, SocketId)>>,
    caches: Option<Vec<Cached<A>>>,
    stats: DemuxStats,
}

impl<A: IpAddress> HashChains<A> {
    /// `n` chains (at least 1), with or without a one-behind cache per chain.
    pub fn new(n: u16, cached: bool) -> HashChains<A> {
        let n = n.max(1) as usize;
        HashChains {
            chains: vec![Vec::new(); n],
            caches: cached.then(|| vec![None; n]),
            stats: DemuxStats::default(),
        }
    }

    #[inline]
    fn chain_of(&self, port: u16) -> usize {
        port as usize % self.chains.len()
    }
}

impl<A: IpAddress> Demux<A> for HashChains<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        let r = self.chain_of(pcb.local_port);
        if let Some(caches) = &mut self.caches {
            caches[r] = None;
        }
        self.chains[r].insert(0, (pcb, id));
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        let r = self.chain_of(pcb.local_port);
        if let Some(caches) = &mut self.caches {
            caches[r] = None;
        }
        let chain = &mut self.chains[r];
        if let Some(i) = chain.iter().position(|(p, s)| *s == id && p == pcb) {
            chain.remove(i);
        }
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        let r = self.chain_of(A::port(&dst));
        if let Some(caches) = &self.caches {
            if let Some((pcb, id)) = caches[r] {
                self.stats.comparisons += 1;
                if exact_hit(&pcb, dst, src) {
                    self.stats.cache_hits += 1;
                    return Some(id);
                }
            }
        }
        let chain = &self.chains[r];
        let (found, examined) = best_match(chain.iter(), dst, src);
        self.stats.comparisons += examined;
        if let Some(caches) = &mut self.caches {
            caches[r] = found;
        }
        found.map(|(_, id)| id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        let chain = &self.chains[self.chain_of(A::port(&dst))];
        out.extend(
            chain
                .iter()
                .filter(|(p, _)| p.match_wildcards(dst, src).is_some())
                .map(|(_, id)| *id),
        );
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }

    fn chain_lengths(&self) -> Option<Vec<usize>> {
        Some(self.chains.iter().map(Vec::len).collect())
    }
}
