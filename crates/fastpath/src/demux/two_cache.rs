//! Dixon & Calvert's MRU/LRU two-entry cache (paper 003 §2.2.2, figure 2).

use std::net::Ipv4Addr;

use super::{exact_hit, Demux, DemuxStats, IpAddress, Linear, Pcb, SocketId};

/// A [`Linear<A>`] list behind two cache entries. Check the most recently used entry, then the least
/// recently used one; on a double miss the list search replaces the LRU entry; then the two swap, so the
/// answer is always the new MRU. As with the one-behind cache, a hit needs an exact four-field match,
/// and both entries are cleared whenever a PCB is added or removed.
#[derive(Debug)]
pub struct TwoCache<A: IpAddress = Ipv4Addr> {
    list: Linear<A>,
    mru: Option<(Pcb<A>, SocketId)>,
    lru: Option<(Pcb<A>, SocketId)>,
    stats: DemuxStats,
}

impl<A: IpAddress> Demux<A> for TwoCache<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        (self.mru, self.lru) = (None, None);
        self.list.insert(id, pcb);
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        (self.mru, self.lru) = (None, None);
        self.list.remove(id, pcb);
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        if let Some((pcb, id)) = self.mru {
            self.stats.comparisons += 1;
            if exact_hit(&pcb, dst, src) {
                self.stats.cache_hits += 1;
                return Some(id);
            }
        }
        let lru_hit = self.lru.filter(|(pcb, _)| {
            self.stats.comparisons += 1;
            exact_hit(pcb, dst, src)
        });
        if lru_hit.is_some() {
            self.stats.cache_hits += 1;
        } else {
            let (found, examined) = self.list.find(dst, src);
            self.stats.comparisons += examined;
            self.lru = found;
        }
        std::mem::swap(&mut self.mru, &mut self.lru);
        self.mru.map(|(_, id)| id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        self.list.lookup_all(dst, src, out);
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}

impl<A: IpAddress> Default for TwoCache<A> {
    fn default() -> Self {
        TwoCache {
            list: Linear::default(),
            mru: None,
            lru: None,
            stats: DemuxStats::default(),
        }
    }
}
