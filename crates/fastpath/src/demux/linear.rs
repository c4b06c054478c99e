//! The reference strategy: 4.3BSD's linear best-match search.

use std::net::Ipv4Addr;

use super::{Demux, DemuxStats, IpAddress, Pcb, SocketId};

/// One list of PCBs, scanned in full for every lookup; newest first, as 4.3BSD inserted at the head.
#[derive(Debug)]
pub struct Linear<A: IpAddress = Ipv4Addr> {
    pcbs: Vec<(Pcb<A>, SocketId)>,
    stats: DemuxStats,
}

impl<A: IpAddress> Demux<A> for Linear<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        self.pcbs.insert(0, (pcb, id));
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        if let Some(i) = self.pcbs.iter().position(|(p, s)| *s == id && p == pcb) {
            self.pcbs.remove(i);
        }
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        let (found, examined) = self.find(dst, src);
        self.stats.comparisons += examined;
        found.map(|(_, id)| id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        let matching = self
            .pcbs
            .iter()
            .filter(|(p, _)| p.match_wildcards(dst, src).is_some());
        out.extend(matching.map(|(_, id)| *id));
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}

/// `in_pcblookup`'s scan over `pcbs` (newest first): the first exact match, else the first match with
/// the fewest wildcards. Returns it, with its PCB, and the number of PCBs examined.
#[inline]
pub(crate) fn best_match<'a, A: IpAddress>(
    pcbs: impl Iterator<Item = &'a (Pcb<A>, SocketId)>,
    dst: A::Socket,
    src: A::Socket,
) -> (Option<(Pcb<A>, SocketId)>, u64) {
    let mut best: Option<(u8, &(Pcb<A>, SocketId))> = None;
    let mut examined = 0;
    for entry in pcbs {
        examined += 1;
        match entry.0.match_wildcards(dst, src) {
            Some(0) => return (Some(*entry), examined),
            Some(w) if best.is_none_or(|(b, _)| w < b) => best = Some((w, entry)),
            _ => {}
        }
    }
    (best.map(|(_, e)| *e), examined)
}

impl<A: IpAddress> Linear<A> {
    /// The best match with its PCB, and the number of PCBs examined, without counting a lookup: for
    /// the caching strategies that keep a `Linear` list behind their caches.
    pub(crate) fn find(&self, dst: A::Socket, src: A::Socket) -> (Option<(Pcb<A>, SocketId)>, u64) {
        best_match(self.pcbs.iter(), dst, src)
    }
}

impl<A: IpAddress> Default for Linear<A> {
    fn default() -> Self {
        Linear {
            pcbs: Vec::new(),
            stats: DemuxStats::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn sa(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn best_match_prefers_fewest_wildcards() {
        let mut d = Linear::default();
        let any = Pcb::bound(sa("0.0.0.0:53"));
        let local = Pcb::bound(sa("10.0.0.1:53"));
        let connected = Pcb {
            remote_addr: Ipv4Addr::new(10, 0, 0, 9),
            remote_port: 4000,
            ..local
        };
        d.insert(SocketId(1), any);
        d.insert(SocketId(2), local);
        d.insert(SocketId(3), connected);
        assert_eq!(
            d.lookup(sa("10.0.0.1:53"), sa("10.0.0.9:4000")),
            Some(SocketId(3))
        );
        assert_eq!(
            d.lookup(sa("10.0.0.1:53"), sa("10.0.0.9:4001")),
            Some(SocketId(2))
        );
        assert_eq!(
            d.lookup(sa("10.0.0.2:53"), sa("10.0.0.9:4000")),
            Some(SocketId(1))
        );
        assert_eq!(d.lookup(sa("10.0.0.2:54"), sa("10.0.0.9:4000")), None);
        let mut all = Vec::new();
        d.lookup_all(sa("10.0.0.1:53"), sa("10.0.0.9:4000"), &mut all);
        all.sort();
        assert_eq!(all, [SocketId(1), SocketId(2), SocketId(3)]);
        d.remove(SocketId(3), &connected);
        assert_eq!(
            d.lookup(sa("10.0.0.1:53"), sa("10.0.0.9:4000")),
            Some(SocketId(2))
        );
    }
}
