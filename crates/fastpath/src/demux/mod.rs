//! Demultiplexing: finding the protocol control block an arriving packet belongs to, a UDP socket or
//! a TCP connection or listener. UDP's socket table and TCP's table of connections and listeners each
//! keep one [`Demux`], of the strategy [`StackConfig::demux`](crate::StackConfig::demux) names.
//!
//! Every strategy implements [`Demux`] and must return what the 4.3BSD best-match rule returns
//! (Dixon & Calvert, paper 003 §1.2): among the PCBs whose local port equals the datagram's destination
//! port, and whose other fields each either equal the datagram's or are wildcards, the one with the
//! fewest wildcards. [`Linear`] is that rule written as 4.3BSD wrote it; it is the reference the others
//! are tested against.
//!
//! Every strategy is generic over the address family ([`IpAddress`]; `Ipv4Addr` is the default type
//! parameter) and is monomorphized per family: a table of IPv6 PCBs is a second instance, and IPv4's
//! lookups compile to what they were when the strategies were written for IPv4 alone. [`Table`] packs
//! each family's fields into its own key types ([`TableAddress`]).

mod hash_chains;
mod linear;
mod one_behind;
mod pp_cache;
mod table;
mod two_cache;
mod two_stage;

pub use hash_chains::HashChains;
pub use linear::Linear;
pub use one_behind::OneBehind;
pub use pp_cache::PpCache;
pub use table::{Key, Table, TableAddress};
pub use two_cache::TwoCache;
pub use two_stage::TwoStage;

use std::fmt;
use std::net::Ipv4Addr;

pub use crate::addr::IpAddress;

/// Index of an entry in the table a [`Demux`] serves: a UDP socket, or a TCP connection or listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId(pub u32);

/// The addresses of a protocol control block (a UDP socket's, a TCP connection's or listener's), in
/// one address family. The unspecified address (`0.0.0.0`, `::`) is a wildcard; an unconnected PCB
/// has the unspecified remote address and port 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pcb<A: IpAddress = Ipv4Addr> {
    /// Local address, or the wildcard for any of the host's addresses.
    pub local_addr: A,
    /// Local port (never 0 once bound).
    pub local_port: u16,
    /// Remote address of a connected PCB, or the wildcard.
    pub remote_addr: A,
    /// Remote port of a connected PCB, or 0.
    pub remote_port: u16,
}

impl<A: IpAddress> Pcb<A> {
    /// An unconnected PCB bound to `local`.
    pub fn bound(local: A::Socket) -> Pcb<A> {
        Pcb {
            local_addr: A::ip(&local),
            local_port: A::port(&local),
            remote_addr: A::WILDCARD,
            remote_port: 0,
        }
    }

    /// True when connected to a remote address.
    #[inline]
    pub fn is_connected(&self) -> bool {
        !self.remote_addr.is_wildcard()
    }

    /// The remote socket address of a connected PCB.
    #[inline]
    pub fn peer(&self) -> Option<A::Socket> {
        self.is_connected()
            .then(|| self.remote_addr.socket(self.remote_port))
    }

    /// Wildcards among the local address and the remote address and port: 0 (fully specified) to 2.
    pub fn wildcards(&self) -> u8 {
        self.local_addr.is_wildcard() as u8 + !self.is_connected() as u8
    }

    /// The number of wildcards this PCB uses to match a datagram from `src` to `dst`, or `None` if it
    /// does not match (the rule of 4.3BSD's `in_pcblookup`).
    #[inline]
    pub fn match_wildcards(&self, dst: A::Socket, src: A::Socket) -> Option<u8> {
        if self.local_port != A::port(&dst) {
            return None;
        }
        let mut wildcards = 0;
        if self.local_addr.is_wildcard() {
            wildcards += 1;
        } else if self.local_addr != A::ip(&dst) {
            return None;
        }
        if self.remote_addr.is_wildcard() {
            wildcards += 1;
        } else if self.remote_addr != A::ip(&src) || self.remote_port != A::port(&src) {
            return None;
        }
        Some(wildcards)
    }
}

/// True when `pcb` is fully specified and names exactly this datagram's four fields: the only kind of
/// cache hit that cannot hide a better match.
#[inline]
pub(crate) fn exact_hit<A: IpAddress>(pcb: &Pcb<A>, dst: A::Socket, src: A::Socket) -> bool {
    pcb.local_port == A::port(&dst)
        && pcb.local_addr == A::ip(&dst)
        && pcb.remote_addr == A::ip(&src)
        && pcb.remote_port == A::port(&src)
        && !pcb.local_addr.is_wildcard()
        && pcb.is_connected()
}

/// Counters a strategy keeps: what the trace-driven simulator (paper 003 §2) reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// Unicast lookups.
    pub lookups: u64,
    /// PCB comparisons (a cache check, a list entry examined, or a hash-table probe each count one).
    pub comparisons: u64,
    /// Lookups answered by a cache.
    pub cache_hits: u64,
}

/// A demultiplexing strategy.
pub trait Demux<A: IpAddress = Ipv4Addr>: Send + fmt::Debug {
    /// Adds a PCB (bind, or connect after a remove).
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>);

    /// Removes the PCB `id` had, which was `pcb`.
    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>);

    /// The best match for a unicast packet from `src` to `dst`. Among equally good matches, the most
    /// recently inserted wins (4.3BSD inserted at the head of its list).
    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId>;

    /// Every PCB that matches a broadcast datagram from `src` to `dst` (with any number of wildcards),
    /// appended to `out`.
    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>);

    /// Tells the strategy that socket `id`, whose PCB is `pcb`, sent a datagram: Partridge & Pink's
    /// send cache (paper 000 §6.3.2) remembers it. Others ignore it, and are not called
    /// ([`DemuxStrategy::has_send_cache`]).
    fn sent(&mut self, _id: SocketId, _pcb: &Pcb<A>) {}

    /// Counters since the strategy was built.
    fn stats(&self) -> DemuxStats;

    /// The length of each hash chain, for strategies that hash (paper 003 table 4).
    fn chain_lengths(&self) -> Option<Vec<usize>> {
        None
    }
}

/// The demultiplexing strategies, selectable in [`StackConfig`](crate::StackConfig).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DemuxStrategy {
    /// 4.3BSD `in_pcblookup`: one list, full scan, best match (paper 003 §2.2.1). The reference.
    Linear,
    /// The 4.3BSD-Reno cache of the last PCB found, hit on exact matches only (paper 003 §2.2.2).
    OneBehind,
    /// Partridge & Pink: receive and send one-behind caches that may hold wildcard PCBs, PCBs that could
    /// hide a better match marked uncacheable, early return on a non-hiding wildcard match,
    /// move-to-front (paper 000 §6.3.1, §6.3.2, §6.3.5).
    PpCache,
    /// Dixon & Calvert's MRU/LRU two-entry cache (paper 003 §2.2.2).
    TwoCache,
    /// `chains` lists by local port modulo `chains`, no cache (paper 003 §2.2.3, table 3).
    HashChains {
        /// Number of chains (the paper uses 64).
        chains: u16,
    },
    /// McKenney & Dove: hash chains with a one-behind cache per chain (paper 003 §2.2.3).
    HashChainsCached {
        /// Number of chains (the paper uses 64).
        chains: u16,
    },
    /// Separate hashed stores for fully specified PCBs (with per-chain caches) and wildcard PCBs,
    /// fully specified first (paper 003 §2.2.4, table 5).
    TwoStage {
        /// Number of chains per store (the paper uses 64).
        chains: u16,
    },
    /// The default: an exact 4-tuple hash table, then tables keyed by (local address, local port),
    /// (local port, remote address, remote port) and local port: a lookup costs the same with 1 socket
    /// or 100,000.
    #[default]
    Table,
}

impl DemuxStrategy {
    /// Every strategy, with the paper's 64 chains where it hashes.
    pub const ALL: &'static [DemuxStrategy] = &[
        DemuxStrategy::Linear,
        DemuxStrategy::OneBehind,
        DemuxStrategy::PpCache,
        DemuxStrategy::TwoCache,
        DemuxStrategy::HashChains { chains: 64 },
        DemuxStrategy::HashChainsCached { chains: 64 },
        DemuxStrategy::TwoStage { chains: 64 },
        DemuxStrategy::Table,
    ];

    /// True when the strategy keeps a send cache, so [`Demux::sent`] does something (only
    /// [`PpCache`]).
    pub fn has_send_cache(self) -> bool {
        self == DemuxStrategy::PpCache
    }

    /// The name used in configuration and output (`hash-chains`, or `hash-chains:128` for other than
    /// 64 chains).
    pub fn name(self) -> String {
        let (base, chains) = match self {
            DemuxStrategy::Linear => ("linear", 64),
            DemuxStrategy::OneBehind => ("one-behind", 64),
            DemuxStrategy::PpCache => ("pp-cache", 64),
            DemuxStrategy::TwoCache => ("two-cache", 64),
            DemuxStrategy::HashChains { chains } => ("hash-chains", chains),
            DemuxStrategy::HashChainsCached { chains } => ("hash-chains-cached", chains),
            DemuxStrategy::TwoStage { chains } => ("two-stage", chains),
            DemuxStrategy::Table => ("table", 64),
        };
        if chains == 64 {
            base.to_string()
        } else {
            format!("{base}:{chains}")
        }
    }

    /// A new, empty demultiplexer of this strategy.
    pub fn build<A: TableAddress>(self) -> Box<dyn Demux<A>> {
        match self {
            DemuxStrategy::Linear => Box::new(Linear::default()),
            DemuxStrategy::OneBehind => Box::new(OneBehind::default()),
            DemuxStrategy::PpCache => Box::new(PpCache::new()),
            DemuxStrategy::TwoCache => Box::new(TwoCache::default()),
            DemuxStrategy::HashChains { chains } => Box::new(HashChains::new(chains, false)),
            DemuxStrategy::HashChainsCached { chains } => Box::new(HashChains::new(chains, true)),
            DemuxStrategy::TwoStage { chains } => Box::new(TwoStage::new(chains)),
            DemuxStrategy::Table => Box::new(Table::default()),
        }
    }

    /// The stack's own demultiplexer of this strategy: as [`Self::build`], with the default called
    /// directly.
    pub(crate) fn demuxer<A: TableAddress>(self) -> Demuxer<A> {
        Demuxer(match self {
            DemuxStrategy::Table => Strategy::Table(Box::default()),
            other => Strategy::Other(other.build()),
        })
    }
}

/// A demultiplexer of any strategy, as the stack's tables hold it: the default, [`Table`], called
/// directly, so that its lookup inlines into the receive path (an indirect call and its argument
/// shuffling were about 15 instructions a datagram); the others through a virtual call, as the
/// strategies to compare against.
#[derive(Debug)]
pub(crate) struct Demuxer<A: TableAddress>(Strategy<A>);

#[derive(Debug)]
enum Strategy<A: TableAddress> {
    Table(Box<Table<A>>),
    Other(Box<dyn Demux<A>>),
}

impl<A: TableAddress> Demux<A> for Demuxer<A> {
    #[inline]
    fn insert(&mut self, id: SocketId, pcb: Pcb<A>) {
        match &mut self.0 {
            Strategy::Table(t) => t.insert(id, pcb),
            Strategy::Other(d) => d.insert(id, pcb),
        }
    }

    #[inline]
    fn remove(&mut self, id: SocketId, pcb: &Pcb<A>) {
        match &mut self.0 {
            Strategy::Table(t) => t.remove(id, pcb),
            Strategy::Other(d) => d.remove(id, pcb),
        }
    }

    #[inline(always)]
    fn lookup(&mut self, dst: A::Socket, src: A::Socket) -> Option<SocketId> {
        match &mut self.0 {
            Strategy::Table(t) => t.lookup(dst, src),
            Strategy::Other(d) => d.lookup(dst, src),
        }
    }

    #[inline]
    fn lookup_all(&mut self, dst: A::Socket, src: A::Socket, out: &mut Vec<SocketId>) {
        match &mut self.0 {
            Strategy::Table(t) => t.lookup_all(dst, src, out),
            Strategy::Other(d) => d.lookup_all(dst, src, out),
        }
    }

    #[inline]
    fn sent(&mut self, id: SocketId, pcb: &Pcb<A>) {
        match &mut self.0 {
            Strategy::Table(t) => t.sent(id, pcb),
            Strategy::Other(d) => d.sent(id, pcb),
        }
    }

    fn stats(&self) -> DemuxStats {
        match &self.0 {
            Strategy::Table(t) => t.stats(),
            Strategy::Other(d) => d.stats(),
        }
    }

    fn chain_lengths(&self) -> Option<Vec<usize>> {
        match &self.0 {
            Strategy::Table(t) => t.chain_lengths(),
            Strategy::Other(d) => d.chain_lengths(),
        }
    }
}

impl fmt::Display for DemuxStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::str::FromStr for DemuxStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (base, chains) = match s.split_once(':') {
            Some((b, n)) => {
                let n: u16 = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad chain count in `{s}`"))?;
                (b, n)
            }
            None => (s, 64),
        };
        let strategy = match base {
            "linear" => DemuxStrategy::Linear,
            "one-behind" => DemuxStrategy::OneBehind,
            "pp-cache" => DemuxStrategy::PpCache,
            "two-cache" => DemuxStrategy::TwoCache,
            "hash-chains" => DemuxStrategy::HashChains { chains },
            "hash-chains-cached" => DemuxStrategy::HashChainsCached { chains },
            "two-stage" => DemuxStrategy::TwoStage { chains },
            "table" => DemuxStrategy::Table,
            _ => {
                let names: Vec<String> = DemuxStrategy::ALL.iter().map(|d| d.name()).collect();
                return Err(format!(
                    "unknown demux strategy `{s}` (one of: {})",
                    names.join(", ")
                ));
            }
        };
        Ok(strategy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    /// The generic strategies give, for IPv6 addresses, the answers the reference gives.
    #[test]
    fn the_generic_strategies_agree_with_linear_for_ipv6() {
        let addr = |last: u16| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last);
        let sa = |last: u16, port: u16| addr(last).socket(port);
        let connected = |local: u16, port: u16, remote: u16, rport: u16| Pcb {
            local_addr: addr(local),
            local_port: port,
            remote_addr: addr(remote),
            remote_port: rport,
        };
        let pcbs = [
            Pcb::bound(Ipv6Addr::WILDCARD.socket(53)),
            Pcb::bound(sa(1, 53)),
            connected(1, 53, 9, 5000),
            Pcb::bound(Ipv6Addr::WILDCARD.socket(80)),
            connected(2, 80, 7, 4000),
        ];
        let mut strategies: Vec<Box<dyn Demux<Ipv6Addr>>> = vec![
            Box::new(Linear::default()),
            Box::new(OneBehind::default()),
            Box::new(TwoCache::default()),
            Box::new(PpCache::new()),
            Box::new(HashChains::new(8, false)),
            Box::new(HashChains::new(8, true)),
            Box::new(TwoStage::new(8)),
            Box::new(Table::default()),
        ];
        for d in &mut strategies {
            for (i, pcb) in pcbs.iter().enumerate() {
                d.insert(SocketId(i as u32), *pcb);
            }
        }
        let packets = [
            (sa(1, 53), sa(9, 5000)),
            (sa(1, 53), sa(9, 5001)),
            (sa(3, 53), sa(9, 5000)),
            (sa(2, 80), sa(7, 4000)),
            (sa(2, 80), sa(8, 4000)),
            (sa(2, 81), sa(7, 4000)),
        ];
        let expected = [Some(2), Some(1), Some(0), Some(4), Some(3), None];
        for _ in 0..2 {
            for ((dst, src), want) in packets.iter().zip(expected) {
                for d in &mut strategies {
                    assert_eq!(
                        d.lookup(*dst, *src).map(|id| id.0),
                        want,
                        "{d:?} {dst} {src}"
                    );
                }
            }
        }
    }
}
