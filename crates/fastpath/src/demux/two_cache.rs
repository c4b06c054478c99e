//! Dixon & Calvert's MRU/LRU two-entry cache (paper 003 §2.2.2, figure 2).

use std::net::SocketAddrV4;

use super::{exact_hit, Demux, DemuxStats, Linear, Pcb, SocketId};

/// A [`Linear`] list behind two cache entries. Check the most recently used entry, then the least
/// recently used one; on a double miss the list search replaces the LRU entry; then the two swap, so the
/// answer is always the new MRU. As with the one-behind cache, a hit needs an exact four-field match,
/// and both entries are cleared whenever a PCB is added or removed.
#[derive(Debug, Default)]
pub struct TwoCache {
    list: Linear,
    mru: Option<(Pcb, SocketId)>,
    lru: Option<(Pcb, SocketId)>,
    stats: DemuxStats,
}

impl Demux for TwoCache {
    fn insert(&mut self, id: SocketId, pcb: Pcb) {
        (self.mru, self.lru) = (None, None);
        self.list.insert(id, pcb);
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb) {
        (self.mru, self.lru) = (None, None);
        self.list.remove(id, pcb);
    }

    fn lookup(&mut self, dst: SocketAddrV4, src: SocketAddrV4) -> Option<SocketId> {
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

    fn lookup_all(&mut self, dst: SocketAddrV4, src: SocketAddrV4, out: &mut Vec<SocketId>) {
        self.list.lookup_all(dst, src, out);
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}
