//! Demultiplexing: finding the protocol control block an arriving packet belongs to, a UDP socket or
//! a TCP connection or listener. UDP's socket table and TCP's table of connections and listeners each
//! keep one [`Demux`], of the strategy [`StackConfig::demux`](crate::StackConfig::demux) names.
//!
//! Every strategy implements [`Demux`] and must return what the 4.3BSD best-match rule returns
//! (Dixon & Calvert, paper 003 §1.2): among the PCBs whose local port equals the datagram's destination
//! port, and whose other fields each either equal the datagram's or are wildcards, the one with the
//! fewest wildcards. [`Linear`] is that rule written as 4.3BSD wrote it; it is the reference the others
//! are tested against.

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
pub use table::Table;
pub use two_cache::TwoCache;
pub use two_stage::TwoStage;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};

/// Index of an entry in the table a [`Demux`] serves: a UDP socket, or a TCP connection or listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId(pub u32);

/// The addresses of a protocol control block (a UDP socket's, a TCP connection's or listener's). An unspecified address (`0.0.0.0`) is a wildcard;
/// an unconnected PCB has remote `0.0.0.0:0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pcb {
    /// Local address, or `0.0.0.0` for any of the host's addresses.
    pub local_addr: Ipv4Addr,
    /// Local port (never 0 once bound).
    pub local_port: u16,
    /// Remote address of a connected PCB, or `0.0.0.0`.
    pub remote_addr: Ipv4Addr,
    /// Remote port of a connected PCB, or 0.
    pub remote_port: u16,
}

impl Pcb {
    /// An unconnected PCB bound to `local`.
    pub fn bound(local: SocketAddrV4) -> Pcb {
        Pcb {
            local_addr: *local.ip(),
            local_port: local.port(),
            remote_addr: Ipv4Addr::UNSPECIFIED,
            remote_port: 0,
        }
    }

    /// True when connected to a remote address.
    pub fn is_connected(&self) -> bool {
        !self.remote_addr.is_unspecified()
    }

    /// Wildcards among the local address and the remote address and port: 0 (fully specified) to 2.
    pub fn wildcards(&self) -> u8 {
        self.local_addr.is_unspecified() as u8 + !self.is_connected() as u8
    }

    /// The number of wildcards this PCB uses to match a datagram from `src` to `dst`, or `None` if it
    /// does not match (the rule of 4.3BSD's `in_pcblookup`).
    #[inline]
    pub fn match_wildcards(&self, dst: SocketAddrV4, src: SocketAddrV4) -> Option<u8> {
        if self.local_port != dst.port() {
            return None;
        }
        let mut wildcards = 0;
        if self.local_addr.is_unspecified() {
            wildcards += 1;
        } else if self.local_addr != *dst.ip() {
            return None;
        }
        if self.remote_addr.is_unspecified() {
            wildcards += 1;
        } else if self.remote_addr != *src.ip() || self.remote_port != src.port() {
            return None;
        }
        Some(wildcards)
    }
}

/// True when `pcb` is fully specified and names exactly this datagram's four fields: the only kind of
/// cache hit that cannot hide a better match.
#[inline]
pub(crate) fn exact_hit(pcb: &Pcb, dst: SocketAddrV4, src: SocketAddrV4) -> bool {
    pcb.local_port == dst.port()
        && pcb.local_addr == *dst.ip()
        && pcb.remote_addr == *src.ip()
        && pcb.remote_port == src.port()
        && !pcb.local_addr.is_unspecified()
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
pub trait Demux: Send + fmt::Debug {
    /// Adds a PCB (bind, or connect after a remove).
    fn insert(&mut self, id: SocketId, pcb: Pcb);

    /// Removes the PCB `id` had, which was `pcb`.
    fn remove(&mut self, id: SocketId, pcb: &Pcb);

    /// The best match for a unicast packet from `src` to `dst`. Among equally good matches, the most
    /// recently inserted wins (4.3BSD inserted at the head of its list).
    fn lookup(&mut self, dst: SocketAddrV4, src: SocketAddrV4) -> Option<SocketId>;

    /// Every PCB that matches a broadcast datagram from `src` to `dst` (with any number of wildcards),
    /// appended to `out`.
    fn lookup_all(&mut self, dst: SocketAddrV4, src: SocketAddrV4, out: &mut Vec<SocketId>);

    /// Tells the strategy that socket `id`, whose PCB is `pcb`, sent a datagram: Partridge & Pink's
    /// send cache (paper 000 §6.3.2) remembers it. Others ignore it.
    fn sent(&mut self, _id: SocketId, _pcb: &Pcb) {}

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
    pub fn build(self) -> Box<dyn Demux> {
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
