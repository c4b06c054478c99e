//! The default strategy: hash tables by wildcard shape, so a lookup costs the same with 1 socket or
//! 100,000.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Demux, DemuxStats, IpAddress, Pcb, SocketId};

const EMPTY: u32 = u32::MAX;

/// A key of one of the tables: the PCB fields that are not wildcards, packed into integers.
pub trait Key: Copy + Eq + Default + std::fmt::Debug + Send {
    /// Fibonacci hashing: multiply by 2^64/φ; the table takes the top bits.
    fn hash(self) -> u64;
}

impl Key for u64 {
    #[inline(always)]
    fn hash(self) -> u64 {
        self.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

impl Key for u128 {
    #[inline(always)]
    fn hash(self) -> u64 {
        ((self as u64) ^ ((self >> 64) as u64).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

impl Key for (u128, u64) {
    #[inline(always)]
    fn hash(self) -> u64 {
        (self.0 ^ u128::from(self.1).rotate_left(96)).hash()
    }
}

impl Key for (u128, u128, u64) {
    #[inline(always)]
    fn hash(self) -> u64 {
        (self.0 ^ self.1.rotate_left(64) ^ u128::from(self.2).rotate_left(32)).hash()
    }
}

/// How a family's PCB fields pack into [`Table`]'s keys.
pub trait TableAddress: IpAddress {
    /// A fully specified PCB's key.
    type Exact: Key;
    /// The key of a PCB with a local address and no peer, and of one with a peer and no local
    /// address.
    type Half: Key;
    /// The key of (local address, local port, remote address, remote port).
    fn exact_key(laddr: Self, lport: u16, raddr: Self, rport: u16) -> Self::Exact;
    /// The key of (local address, local port).
    fn local_key(laddr: Self, lport: u16) -> Self::Half;
    /// The key of (local port, remote address, remote port).
    fn remote_key(lport: u16, raddr: Self, rport: u16) -> Self::Half;
    /// The address as the port array holds it for a port whose only PCB is bound to it, or `None` when
    /// the family's addresses do not fit in 32 bits (the table then keeps the address by socket id
    /// and compares it whole).
    fn tag(self) -> Option<u32>;
}

impl TableAddress for Ipv4Addr {
    type Exact = u128;
    type Half = u64;
    #[inline(always)]
    fn exact_key(laddr: Self, lport: u16, raddr: Self, rport: u16) -> u128 {
        (u32::from(laddr) as u128) << 64
            | (lport as u128) << 48
            | (u32::from(raddr) as u128) << 16
            | rport as u128
    }
    #[inline(always)]
    fn local_key(laddr: Self, lport: u16) -> u64 {
        (u32::from(laddr) as u64) << 16 | lport as u64
    }
    #[inline(always)]
    fn remote_key(lport: u16, raddr: Self, rport: u16) -> u64 {
        (lport as u64) << 48 | (u32::from(raddr) as u64) << 16 | rport as u64
    }
    #[inline(always)]
    fn tag(self) -> Option<u32> {
        Some(u32::from(self))
    }
}

impl TableAddress for Ipv6Addr {
    type Exact = (u128, u128, u64);
    type Half = (u128, u64);
    #[inline]
    fn exact_key(laddr: Self, lport: u16, raddr: Self, rport: u16) -> Self::Exact {
        (
            u128::from(laddr),
            u128::from(raddr),
            u64::from(lport) << 16 | u64::from(rport),
        )
    }
    #[inline]
    fn local_key(laddr: Self, lport: u16) -> Self::Half {
        (u128::from(laddr), u64::from(lport))
    }
    #[inline]
    fn remote_key(lport: u16, raddr: Self, rport: u16) -> Self::Half {
        (u128::from(raddr), u64::from(lport) << 16 | u64::from(rport))
    }
    #[inline(always)]
    fn tag(self) -> Option<u32> {
        None
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot<K> {
    key: K,
    /// The newest socket with this key, or `EMPTY` for a free slot.
    id: u32,
    seq: u64,
    /// Older sockets with the same key (`reuse_address`), an index into `FlatMap::older`, or `EMPTY`.
    older: u32,
}

/// An open-addressing hash map with linear probing, at most half full, with backward-shift deletion (no
/// tombstones, so a miss stops at the first free slot). Only local binds insert, so a remote sender
/// cannot choose keys that collide.
#[derive(Debug)]
struct FlatMap<K> {
    slots: Vec<Slot<K>>,
    shift: u32,
    len: usize,
    /// Older sockets sharing a key, newest first.
    older: Vec<Vec<(u64, SocketId)>>,
    free_older: Vec<u32>,
}

impl<K: Key> FlatMap<K> {
    fn new() -> FlatMap<K> {
        FlatMap {
            slots: vec![
                Slot {
                    id: EMPTY,
                    ..Slot::default()
                };
                8
            ],
            shift: 64 - 3,
            len: 0,
            older: Vec::new(),
            free_older: Vec::new(),
        }
    }

    #[inline(always)]
    fn home(&self, key: K) -> usize {
        (key.hash() >> self.shift) as usize
    }

    /// The newest socket with `key`, and its sequence number.
    #[inline(always)]
    fn get(&self, key: K) -> Option<(SocketId, u64)> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            if s.id == EMPTY {
                return None;
            }
            if s.key == key {
                return Some((SocketId(s.id), s.seq));
            }
            i = (i + 1) & mask;
        }
    }

    fn find(&self, key: K) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].id != EMPTY {
            if self.slots[i].key == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    fn insert(&mut self, key: K, id: SocketId, seq: u64) {
        if let Some(i) = self.find(key) {
            // A newer socket with the same key takes the slot; the previous one heads the older list.
            let s = self.slots[i];
            let older = if s.older == EMPTY {
                let o = self.free_older.pop().unwrap_or_else(|| {
                    self.older.push(Vec::new());
                    (self.older.len() - 1) as u32
                });
                self.slots[i].older = o;
                o
            } else {
                s.older
            };
            self.older[older as usize].insert(0, (s.seq, SocketId(s.id)));
            self.slots[i].id = id.0;
            self.slots[i].seq = seq;
            return;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].id != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot {
            key,
            id: id.0,
            seq,
            older: EMPTY,
        };
        self.len += 1;
    }

    /// Removes `id` from under `key`; false if it was not there.
    fn remove(&mut self, key: K, id: SocketId) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        let s = self.slots[i];
        if s.id != id.0 {
            if s.older == EMPTY {
                return false;
            }
            let list = &mut self.older[s.older as usize];
            let before = list.len();
            list.retain(|&(_, o)| o != id);
            let removed = list.len() != before;
            if list.is_empty() {
                self.free_older.push(s.older);
                self.slots[i].older = EMPTY;
            }
            return removed;
        }
        if s.older != EMPTY {
            let list = &mut self.older[s.older as usize];
            let (seq, next) = list.remove(0);
            self.slots[i].id = next.0;
            self.slots[i].seq = seq;
            if list.is_empty() {
                self.free_older.push(s.older);
                self.slots[i].older = EMPTY;
            }
            return true;
        }
        // Backward-shift deletion: pull later members of the probe run back over the hole.
        let mask = self.slots.len() - 1;
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.slots[j].id != EMPTY {
            let home = self.home(self.slots[j].key);
            // Move slot j into the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole].id = EMPTY;
        self.len -= 1;
        true
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![
            Slot {
                id: EMPTY,
                ..Slot::default()
            };
            old.len() * 2
        ];
        self.shift -= 1;
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.id != EMPTY) {
            let mut i = self.home(s.key);
            while self.slots[i].id != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Every (key, socket) held, older sockets included.
    fn entries(&self) -> impl Iterator<Item = (K, SocketId)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.id != EMPTY)
            .flat_map(move |s| {
                let older = (s.older != EMPTY)
                    .then(|| &self.older[s.older as usize])
                    .into_iter()
                    .flatten();
                std::iter::once((s.key, SocketId(s.id)))
                    .chain(older.map(move |&(_, id)| (s.key, id)))
            })
    }
}

/// In a [`Table`]'s port array entry (low half): the port has PCBs more specific than a wildcard server,
/// look in the hash tables.
const SPECIFIC: u32 = 1 << 31;
/// In a port array entry (low half): the port's only PCB is bound to the address in the high half, with
/// no peer.
const LOCAL: u32 = 1 << 30;
/// In a port array entry (low half): the socket id plus one (zero: none).
const ID_MASK: u32 = LOCAL - 1;

/// One array entry per local port, then four hash tables, one per wildcard shape: fully specified PCBs
/// by their 4-tuple; PCBs with a local address and no peer by (local address, local port); PCBs with a
/// peer and no local address by (local port, remote address, remote port); PCBs with neither by local
/// port.
///
/// The port array answers the common cases with one load: a port served by wildcard sockets, as UDP
/// servers bind (paper 003 §1.2; the entry holds the newest one's id), and a port whose only socket is
/// bound to one address (the entry holds the id and the address). Otherwise the entry says so, and the
/// hash tables are probed: the exact table, then the two one-wildcard tables (the newer of two matches
/// wins, as in 4.3BSD's list), then the server. Either way a lookup costs the same with 1 socket or
/// 100,000.
#[derive(Debug)]
pub struct Table<A: TableAddress = Ipv4Addr> {
    /// Per local port: low half, the newest wildcard server's socket id plus one (or the lone local PCB's,
    /// with `LOCAL`), and `SPECIFIC`; high half, the lone local PCB's address tag.
    ports: Box<[u64; 65536]>,
    /// The PCBs more specific than a wildcard server, by local port (ports with none are absent).
    specific: HashMap<u16, Vec<(Pcb<A>, SocketId)>>,
    exact: FlatMap<A::Exact>,
    local: FlatMap<A::Half>,
    remote: FlatMap<A::Half>,
    port: FlatMap<u64>,
    /// For a family whose addresses have no 32-bit tag (IPv6): the address of each lone local PCB,
    /// by socket id, checked when the port array names it.
    lone: Vec<A>,
    next_seq: u64,
    stats: DemuxStats,
}

impl<A: TableAddress> Table<A> {
    /// Recomputes port `port`'s array entry after a change.
    fn refresh_port(&mut self, port: u16) {
        let server = self.port.get(port as u64).map_or(0, |(id, _)| id.0 + 1);
        let entry = match self.specific.get(&port).map(Vec::as_slice) {
            None => server as u64,
            Some([(pcb, id)]) if server == 0 && !pcb.is_connected() => match pcb.local_addr.tag() {
                Some(tag) => ((tag as u64) << 32) | ((id.0 + 1) | LOCAL) as u64,
                None => {
                    let i = id.0 as usize;
                    if self.lone.len() <= i {
                        self.lone.resize(i + 1, A::WILDCARD);
                    }
                    self.lone[i] = pcb.local_addr;
                    ((id.0 + 1) | LOCAL) as u64
                }
            },
            Some(_) => (server | SPECIFIC) as u64,
        };
        self.ports[port as usize] = entry;
    }

    /// The lookup for a port that has PCBs more specific than a wildcard server: kept out of line so the
    /// common case needs no saved registers.
    #[cold]
    #[inline(never)]
    fn lookup_specific(&mut self, entry: u32, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        let lport = A::port(&dst);
        let (daddr, saddr, sport) = (A::ip(&dst), A::ip(&src), A::port(&src));
        if self.exact.len != 0 {
            self.stats.comparisons += 1;
            if let Some((id, _)) = self.exact.get(A::exact_key(daddr, lport, saddr, sport)) {
                return Some(id);
            }
        }
        let local = if self.local.len != 0 {
            self.stats.comparisons += 1;
            self.local.get(A::local_key(daddr, lport))
        } else {
            None
        };
        let remote = if self.remote.len != 0 {
            self.stats.comparisons += 1;
            self.remote.get(A::remote_key(lport, saddr, sport))
        } else {
            None
        };
        match (local, remote) {
            (Some((a, sa)), Some((b, sb))) => return Some(if sa > sb { a } else { b }),
            (Some((a, _)), None) => return Some(a),
            (None, Some((b, _))) => return Some(b),
            (None, None) => {}
        }
        let server = entry & ID_MASK;
        (server != 0).then(|| SocketId(server - 1))
    }

    fn add_specific(&mut self, pcb: Pcb<A>, id: SocketId) {
        self.specific
            .entry(pcb.local_port)
            .or_default()
            .push((pcb, id));
    }

    fn remove_specific(&mut self, pcb: &Pcb<A>, id: SocketId) {
        if let Some(list) = self.specific.get_mut(&pcb.local_port) {
            list.retain(|(p, i)| !(*i == id && p == pcb));
            if list.is_empty() {
                self.specific.remove(&pcb.local_port);
            }
        }
    }
}

impl<A: TableAddress> Default for Table<A> {
    fn default() -> Self {
        // Zeroed, so the kernel maps its pages only as ports are used.
        let ports: Box<[u64; 65536]> = vec![0; 65536]
            .into_boxed_slice()
            .try_into()
            .expect("65536 entries");
        Table {
            ports,
            specific: HashMap::new(),
            exact: FlatMap::new(),
            local: FlatMap::new(),
            remote: FlatMap::new(),
            port: FlatMap::new(),
            lone: Vec::new(),
            next_seq: 0,
            stats: DemuxStats::default(),
        }
    }
}

impl<A: TableAddress> Demux<A> for Table<A> {
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        assert!(id.0 < ID_MASK, "socket ids must stay below 2^30 - 1");
        self.next_seq += 1;
        let seq = self.next_seq;
        let p = pcb;
        match (p.local_addr.is_wildcard(), p.is_connected()) {
            (false, true) => self.exact.insert(
                A::exact_key(p.local_addr, p.local_port, p.remote_addr, p.remote_port),
                id,
                seq,
            ),
            (false, false) => self
                .local
                .insert(A::local_key(p.local_addr, p.local_port), id, seq),
            (true, true) => self.remote.insert(
                A::remote_key(p.local_port, p.remote_addr, p.remote_port),
                id,
                seq,
            ),
            (true, false) => self.port.insert(p.local_port as u64, id, seq),
        }
        if p.wildcards() < 2 {
            self.add_specific(p, id);
        }
        self.refresh_port(p.local_port);
    }

    fn remove(&mut self, id: SocketId, p: &Pcb<A>) {
        let present = match (p.local_addr.is_wildcard(), p.is_connected()) {
            (false, true) => self.exact.remove(
                A::exact_key(p.local_addr, p.local_port, p.remote_addr, p.remote_port),
                id,
            ),
            (false, false) => self
                .local
                .remove(A::local_key(p.local_addr, p.local_port), id),
            (true, true) => self.remote.remove(
                A::remote_key(p.local_port, p.remote_addr, p.remote_port),
                id,
            ),
            (true, false) => self.port.remove(p.local_port as u64, id),
        };
        if present && p.wildcards() < 2 {
            self.remove_specific(p, id);
        }
        self.refresh_port(p.local_port);
    }

    #[inline]
    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        self.stats.lookups += 1;
        self.stats.comparisons += 1;
        let lport = A::port(&dst);
        let entry = self.ports[lport as usize];
        let low = entry as u32;
        if low & (SPECIFIC | LOCAL) == 0 {
            return (low != 0).then(|| SocketId(low - 1));
        }
        if low & SPECIFIC == 0 {
            let id = (low & ID_MASK) - 1;
            let ours = match A::ip(&dst).tag() {
                Some(tag) => tag == (entry >> 32) as u32,
                None => self.lone.get(id as usize) == Some(&A::ip(&dst)),
            };
            return ours.then_some(SocketId(id));
        }
        self.lookup_specific(low, dst, src)
    }

    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        // Broadcasts need every match: scan the PCBs of the port (4.3BSD scanned its whole list for
        // them too). `specific` holds every PCB with a local address or a peer; the wildcard servers
        // are the port table's.
        let lport = A::port(&dst);
        let specific = self.specific.get(&lport).into_iter().flatten();
        out.extend(
            specific
                .filter(|(p, _)| p.match_wildcards(dst, src).is_some())
                .map(|&(_, id)| id),
        );
        out.extend(
            self.port
                .entries()
                .filter(|&(k, _)| k == lport as u64)
                .map(|(_, id)| id),
        );
    }

    fn stats(&self) -> DemuxStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_map_insert_remove_grow_and_duplicates() {
        let mut m: FlatMap<u64> = FlatMap::new();
        for k in 0..1000u64 {
            m.insert(k * 7919, SocketId(k as u32), k);
        }
        assert_eq!(m.len, 1000);
        for k in 0..1000u64 {
            assert_eq!(m.get(k * 7919), Some((SocketId(k as u32), k)));
        }
        for k in (0..1000u64).step_by(2) {
            m.remove(k * 7919, SocketId(k as u32));
        }
        for k in 0..1000u64 {
            assert_eq!(m.get(k * 7919).is_some(), k % 2 == 1, "key {k}");
        }
        // Duplicates: newest wins, removal promotes the next newest.
        m.insert(5, SocketId(1), 2000);
        m.insert(5, SocketId(2), 2001);
        m.insert(5, SocketId(3), 2002);
        assert_eq!(m.get(5), Some((SocketId(3), 2002)));
        m.remove(5, SocketId(2));
        assert_eq!(m.get(5), Some((SocketId(3), 2002)));
        m.remove(5, SocketId(3));
        assert_eq!(m.get(5), Some((SocketId(1), 2000)));
        m.remove(5, SocketId(1));
        assert_eq!(m.get(5), None);
        assert_eq!(m.entries().count(), 500);
    }
}
