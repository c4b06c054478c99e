//! 4.3BSD-Reno's one-behind cache (paper 003 §2.2.2).

use std::net::Ipv4Addr;

use super::{exact_hit, Demux, DemuxStats, IpAddress, Linear, Pcb, SocketId};

/// [`Linear<A>`]'s list plus a pointer to the PCB the last lookup found. The cache hits only when that PCB
/// matches the datagram exactly on all four fields, so a cached wildcard PCB never hits: that is why
/// Partridge & Pink found it useless for UDP servers (paper 000 §6.3.1).
///
/// The cache is cleared whenever a PCB is added or removed (Reno cleared it on removal; clearing it on
/// addition too keeps it from answering for a PCB that a newer identical one now shadows).
#[derive(Debug)]
pub struct OneBehind<A: IpAddress = Ipv4Addr> {
    list: Linear<A>,
    cache: Option<(Pcb<A>, SocketId)>,
    stats: DemuxStats,
}

impl<A: IpAddress> Demux<A> for OneBehind<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        self.cache = None;
        self.list.insert(id, pcb);
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        self.cache = None;
        self.list.remove(id, pcb);
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        if let Some((pcb, id)) = self.cache {
            self.stats.comparisons += 1;
            if exact_hit(&pcb, dst, src) {
                self.stats.cache_hits += 1;
                return Some(id);
            }
        }
        let (found, examined) = self.list.find(dst, src);
        self.stats.comparisons += examined;
        self.cache = found;
        found.map(|(_, id)| id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        self.list.lookup_all(dst, src, out);
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}

impl<A: IpAddress> Default for OneBehind<A> {
    fn default() -> Self {
        OneBehind {
            list: Linear::default(),
            cache: None,
            stats: DemuxStats::default(),
        }
    }
}
