//! Partridge & Pink's PCB caches (paper 000 §6.3).

use std::net::Ipv4Addr;

use super::{Demux, DemuxStats, IpAddress, Pcb, SocketId};

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node<A: IpAddress> {
    pcb: Pcb<A>,
    id: SocketId,
    /// Insertion order: among equally good matches the newest wins, as in 4.3BSD's list.
    seq: u64,
    /// Could hide a better (or equally good) match: never cached, never returned early.
    hiding: bool,
    prev: u32,
    next: u32,
}

/// Receive and send one-behind caches that may hold wildcard PCBs (§6.3.1, §6.3.2), over a doubly linked
/// list with early return and move-to-front (§6.3.5).
///
/// A PCB that could hide another is marked when PCBs are added or removed: `p` hides when some other PCB
/// on its port could match a datagram that `p` matches, with no more wildcards than `p`. An unmarked PCB
/// that matches a datagram is therefore its unique best match: it may be cached, a cache hit on it is
/// correct whatever its wildcards, and a list search may return it the moment it is found. Every found
/// PCB moves to the front of the list. The caches are cleared when PCBs are added or removed.
#[derive(Debug)]
pub struct PpCache<A: IpAddress = Ipv4Addr> {
    nodes: Vec<Node<A>>,
    free: Vec<u32>,
    head: u32,
    /// Node of each socket id, for the send cache.
    by_id: Vec<u32>,
    recv_cache: Option<(Pcb<A>, SocketId)>,
    send_cache: Option<(Pcb<A>, SocketId)>,
    next_seq: u64,
    stats: DemuxStats,
}

/// True when some datagram could match both PCBs.
fn overlap<A: IpAddress>(p: &Pcb<A>, q: &Pcb<A>) -> bool {
    p.local_port == q.local_port
        && (p.local_addr.is_wildcard()
            || q.local_addr.is_wildcard()
            || p.local_addr == q.local_addr)
        && (!p.is_connected()
            || !q.is_connected()
            || (p.remote_addr == q.remote_addr && p.remote_port == q.remote_port))
}

impl<A: IpAddress> PpCache<A> {
    /// An empty list with empty caches.
    pub fn new() -> PpCache<A> {
        PpCache::default()
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors((self.head != NIL).then_some(self.head), |&i| {
            let n = self.nodes[i as usize].next;
            (n != NIL).then_some(n)
        })
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = (self.nodes[i as usize].prev, self.nodes[i as usize].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = i;
        }
        self.head = i;
    }

    /// Recomputes the hiding marks of every PCB on `port`.
    fn mark(&mut self, port: u16) {
        let on_port: Vec<u32> = self
            .iter()
            .filter(|&i| self.nodes[i as usize].pcb.local_port == port)
            .collect();
        for &i in &on_port {
            let p = self.nodes[i as usize].pcb;
            let w = p.wildcards();
            let hiding = on_port.iter().any(|&j| {
                let q = &self.nodes[j as usize].pcb;
                j != i && overlap(&p, q) && q.wildcards() <= w
            });
            self.nodes[i as usize].hiding = hiding;
        }
    }
}

impl<A: IpAddress> Demux<A> for PpCache<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        (self.recv_cache, self.send_cache) = (None, None);
        self.next_seq += 1;
        let node = Node {
            pcb,
            id,
            seq: self.next_seq,
            hiding: false,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(i);
        let slot = id.0 as usize;
        if self.by_id.len() <= slot {
            self.by_id.resize(slot + 1, NIL);
        }
        self.by_id[slot] = i;
        self.mark(pcb.local_port);
    }

    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        (self.recv_cache, self.send_cache) = (None, None);
        let Some(i) = self
            .iter()
            .find(|&i| self.nodes[i as usize].id == id && self.nodes[i as usize].pcb == *pcb)
        else {
            return;
        };
        self.unlink(i);
        self.free.push(i);
        if self.by_id.get(id.0 as usize) == Some(&i) {
            self.by_id[id.0 as usize] = NIL;
        }
        self.mark(pcb.local_port);
    }

    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        for (pcb, id) in [self.recv_cache, self.send_cache].into_iter().flatten() {
            self.stats.comparisons += 1;
            if pcb.match_wildcards(dst, src).is_some() {
                self.stats.cache_hits += 1;
                return Some(id);
            }
        }
        let mut best: Option<(u8, u64, u32)> = None;
        let mut i = self.head;
        while i != NIL {
            let n = &self.nodes[i as usize];
            self.stats.comparisons += 1;
            if let Some(w) = n.pcb.match_wildcards(dst, src) {
                if !n.hiding {
                    best = Some((w, n.seq, i));
                    break;
                }
                if best.is_none_or(|(bw, bseq, _)| w < bw || (w == bw && n.seq > bseq)) {
                    best = Some((w, n.seq, i));
                }
            }
            i = n.next;
        }
        let (_, _, i) = best?;
        if i != self.head {
            self.unlink(i);
            self.push_front(i);
        }
        let n = &self.nodes[i as usize];
        if !n.hiding {
            self.recv_cache = Some((n.pcb, n.id));
        }
        Some(n.id)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        for i in self.iter() {
            let n = &self.nodes[i as usize];
            if n.pcb.match_wildcards(dst, src).is_some() {
                out.push(n.id);
            }
        }
    }

    fn sent(&mut self, id: SocketId, pcb: &Pcb<A>) {
        let Some(&i) = self.by_id.get(id.0 as usize) else {
            return;
        };
        if i == NIL {
            return;
        }
        let n = &self.nodes[i as usize];
        if n.pcb == *pcb && !n.hiding {
            self.send_cache = Some((n.pcb, n.id));
        }
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}

impl<A: IpAddress> Default for PpCache<A> {
    fn default() -> Self {
        PpCache {
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            by_id: Vec::new(),
            recv_cache: None,
            send_cache: None,
            next_seq: 0,
            stats: DemuxStats::default(),
        }
    }
}
