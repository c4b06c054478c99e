//! Synthetic datagram traces modelled on the four servers of Dixon & Calvert (tables 1 and 4).
//!
//! The paper's tcpdump traces (Georgia Tech, April 1995) are not public, so this module generates
//! datagram streams with the figures the paper does publish, and lets the §2.4 population model
//! ([`super::population`]) turn them into PCB events exactly as it does for a real capture.
//!
//! The model, per server:
//!
//! * **Size.** Exactly table 1's number of UDP lookups; exactly `round(lookups × share)` of them go to
//!   server ports, where share is table 1's "% UDP server lookups".
//! * **Server ports.** Table 4's single-list length N is the number of server ports; all of them
//!   receive at least one datagram, so all N server PCBs are bound at the start. The ports are drawn
//!   from 1..=1023 so that, hashed by port modulo 64, the non-empty chains have exactly table 4's
//!   minimum and maximum lengths: the chain sizes are dealt first (every non-empty chain gets the
//!   minimum, one gets the maximum, the rest is dealt at random up to the maximum; when N is too small
//!   to fill all 64 chains, as on siwenna, only as many chains as fit are used), then each chain's
//!   ports are drawn at random from its residue class.
//! * **Server popularity.** Zipf-like (weight 1/rank) over a random ranking of the server ports.
//!   Requests come from a pool of 256 remote hosts, themselves Zipf-popular, from BSD ephemeral ports
//!   (1024..=5000). Requests arrive in trains: with probability 1/2 a server datagram repeats the
//!   previous one's port and sender (a client reading a file, a burst of queries). With the default
//!   seed 38% (cleon) to 56% (siwenna) of lookups then go to the socket of the lookup before, under
//!   the 57% last-received hit rate Partridge & Pink give as their best case.
//! * **Replies to the host's own clients** make up the rest but for a sliver: each arrives on a fresh
//!   ephemeral local port (allocated sequentially in 1024..=5000, as 4.3BSD did) from a well-known
//!   foreign port (mostly DNS 53; also 111, 123, 161, 69, 513).
//! * **Fully specified flows**: 0.4% of all lookups (the paper: "less than one percent"; at most half
//!   of the non-server lookups), in flows of 25 datagrams on average between a local port in
//!   5001..=65535 and a remote port in 1024..=65535. Each flow is active over a random stretch of 2% to
//!   20% of the trace and its datagrams fall at random inside that stretch.
//!
//! Everything is drawn from the seed, so a (trace, seed) pair always yields the same datagrams.

use std::net::{Ipv4Addr, SocketAddrV4};

use clap::ValueEnum;
use fastpath::rng::Rng;

use super::population::Datagram;

/// The paper's four servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceName {
    /// xterm and other services; 327 PCBs, 85,975 lookups, 85% to servers.
    Cleon,
    /// xterm and other services; 266 PCBs, 106,969 lookups, 99% to servers.
    Gaia,
    /// nfs, smtp and other services; 414 PCBs, 61,437 lookups, 96% to servers.
    Lennon,
    /// nfs and nntp; 17 PCBs, 143,830 lookups, 99% to servers.
    Siwenna,
}

/// The paper's instruction counts for one server (tables 2, 3 and 5).
#[derive(Clone, Copy, Debug)]
pub struct PaperInstructions {
    /// `in_pcblookup`, linear search (table 2).
    pub linear: f64,
    /// BSD 4.3-Reno one-behind cache (table 2).
    pub one_behind: f64,
    /// MRU/LRU two-entry cache (table 2).
    pub two_cache: f64,
    /// 64 hash chains without caches: mean and 90th percentile (table 3).
    pub hash_chains: (f64, f64),
    /// Two-stage hash chains: mean and 90th percentile (table 5).
    pub two_stage: (f64, f64),
}

/// What the paper says about one server trace.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    /// Which server.
    pub trace: TraceName,
    /// Its name.
    pub name: &'static str,
    /// Its primary UDP services (table 1).
    pub services: &'static str,
    /// Server PCBs at the start: table 4's single list length.
    pub pcbs: usize,
    /// UDP lookups (table 1).
    pub lookups: usize,
    /// Percentage of lookups to server PCBs (table 1).
    pub server_percent: usize,
    /// Shortest non-empty chain with 64 chains at the start (table 4).
    pub chain_min: usize,
    /// Longest chain with 64 chains at the start (table 4).
    pub chain_max: usize,
    /// Instructions per lookup the paper measured.
    pub paper: PaperInstructions,
}

/// The four servers, from tables 1 to 5.
pub const PROFILES: [Profile; 4] = [
    Profile {
        trace: TraceName::Cleon,
        name: "cleon",
        services: "xterm, other",
        pcbs: 327,
        lookups: 85_975,
        server_percent: 85,
        chain_min: 1,
        chain_max: 8,
        paper: PaperInstructions {
            linear: 886.1,
            one_behind: 905.7,
            two_cache: 913.3,
            hash_chains: (45.0, 46.0),
            two_stage: (114.7, 122.0),
        },
    },
    Profile {
        trace: TraceName::Gaia,
        name: "gaia",
        services: "xterm, other",
        pcbs: 266,
        lookups: 106_969,
        server_percent: 99,
        chain_min: 2,
        chain_max: 7,
        paper: PaperInstructions {
            linear: 839.2,
            one_behind: 858.2,
            two_cache: 865.2,
            hash_chains: (45.1, 46.0),
            two_stage: (117.9, 122.0),
        },
    },
    Profile {
        trace: TraceName::Lennon,
        name: "lennon",
        services: "nfs, smtp, other",
        pcbs: 414,
        lookups: 61_437,
        server_percent: 96,
        chain_min: 4,
        chain_max: 8,
        paper: PaperInstructions {
            linear: 1254.2,
            one_behind: 1273.3,
            two_cache: 1280.4,
            hash_chains: (50.8, 52.0),
            two_stage: (123.4, 125.0),
        },
    },
    Profile {
        trace: TraceName::Siwenna,
        name: "siwenna",
        services: "nfs, nntp",
        pcbs: 17,
        lookups: 143_830,
        server_percent: 99,
        chain_min: 1,
        chain_max: 2,
        paper: PaperInstructions {
            linear: 91.4,
            one_behind: 110.5,
            two_cache: 117.5,
            hash_chains: (33.4, 34.0),
            two_stage: (106.7, 107.0),
        },
    },
];

impl TraceName {
    /// The paper's figures for this server.
    pub fn profile(self) -> &'static Profile {
        PROFILES
            .iter()
            .find(|p| p.trace == self)
            .expect("every trace has a profile")
    }
}

/// The number of hash chains table 4 counts.
pub const CHAINS: usize = 64;
/// Remote hosts in the pool.
const HOSTS: usize = 256;
/// Probability that a server datagram repeats the previous one's port and sender.
const TRAIN: f64 = 0.5;
/// Fully specified lookups per thousand.
const FULLY_SPECIFIED_PER_MILLE: usize = 4;
/// Mean datagrams per fully specified flow.
const FLOW_LENGTH: usize = 25;
/// 4.3BSD's ephemeral port range.
const EPHEMERAL: (u16, u16) = (1024, 5000);
/// Foreign ports the host's clients talk to (DNS most of the time).
const CLIENT_SERVICES: [u16; 12] = [53, 53, 53, 53, 53, 53, 111, 111, 123, 161, 69, 513];

/// A generated trace.
#[derive(Clone, Debug)]
pub struct SyntheticTrace {
    /// The datagrams, in arrival order.
    pub datagrams: Vec<Datagram>,
    /// The server's address (every datagram's destination).
    pub local: Ipv4Addr,
    /// The server ports, ascending.
    pub server_ports: Vec<u16>,
}

/// Samples ranks 0..n with weight 1/(rank+1).
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut sum = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                sum += 1.0 / r as f64;
                sum
            })
            .collect();
        Zipf { cumulative }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().expect("non-empty");
        let u = unit(rng) * total;
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.cumulative.len() - 1)
    }
}

/// Uniform in [0, 1).
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn port_in(rng: &mut Rng, (lo, hi): (u16, u16)) -> u16 {
    lo + rng.below(u64::from(hi - lo) + 1) as u16
}

/// Draws `p.pcbs` distinct ports in 1..=1023 whose chains (port mod 64) have table 4's shape.
fn server_ports(p: &Profile, rng: &mut Rng) -> Vec<u16> {
    let (n, lo, hi) = (p.pcbs, p.chain_min, p.chain_max);
    let spread = hi - lo;
    let chains_used = if n >= CHAINS * lo + spread {
        CHAINS
    } else {
        ((n - spread) / lo).min(CHAINS)
    };
    let mut order: Vec<usize> = (0..CHAINS).collect();
    shuffle(&mut order, rng);
    let used = &order[..chains_used];
    let mut sizes = [0usize; CHAINS];
    for &c in used {
        sizes[c] = lo;
    }
    let mut left = n - chains_used * lo;
    if chains_used >= 2 && left >= spread {
        // One chain at the minimum (used[0]), one at the maximum (used[1]).
        sizes[used[1]] = hi;
        left -= spread;
    }
    let dealable = if chains_used > 2 { &used[2..] } else { used };
    let capacity: usize = dealable.iter().map(|&c| hi - sizes[c]).sum();
    assert!(left <= capacity, "table 4 shape cannot hold {n} ports");
    while left > 0 {
        let c = dealable[rng.below(dealable.len() as u64) as usize];
        if sizes[c] < hi {
            sizes[c] += 1;
            left -= 1;
        }
    }
    let mut ports = Vec::with_capacity(n);
    for (c, &size) in sizes.iter().enumerate() {
        let mut class: Vec<u16> = (c..1024)
            .step_by(CHAINS)
            .filter(|&p| p != 0)
            .map(|p| p as u16)
            .collect();
        shuffle(&mut class, rng);
        ports.extend_from_slice(&class[..size]);
    }
    ports.sort_unstable();
    ports
}

/// Generates the trace of `trace` from `seed`.
pub fn generate(trace: TraceName, seed: u64) -> SyntheticTrace {
    let p = trace.profile();
    let index = PROFILES.iter().position(|q| q.trace == trace).unwrap_or(0);
    let mut rng = Rng::new(seed ^ (index as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
    let local = Ipv4Addr::new(10, 1, 0, index as u8 + 1);
    let ports = server_ports(p, &mut rng);

    let total = p.lookups;
    let servers = (total * p.server_percent + 50) / 100;
    let others = total - servers;
    let fully_specified = (total * FULLY_SPECIFIED_PER_MILLE / 1000).min(others / 2);
    let clients = others - fully_specified;

    let mut ranked = ports.clone();
    shuffle(&mut ranked, &mut rng);
    let port_zipf = Zipf::new(ranked.len());
    let mut hosts: Vec<Ipv4Addr> = (0..HOSTS)
        .map(|i| Ipv4Addr::new(10, 2, (i / 250) as u8, (i % 250) as u8 + 1))
        .collect();
    shuffle(&mut hosts, &mut rng);
    let host_zipf = Zipf::new(HOSTS);

    // Server requests and client replies, interleaved at random.
    let mut is_server = vec![true; servers];
    is_server.resize(servers + clients, false);
    shuffle(&mut is_server, &mut rng);
    let mut base = Vec::with_capacity(servers + clients);
    let mut last_request: Option<Datagram> = None;
    let mut ephemeral = port_in(&mut rng, EPHEMERAL);
    let new_request = |port: u16, rng: &mut Rng| Datagram {
        src: SocketAddrV4::new(hosts[host_zipf.sample(rng)], port_in(rng, EPHEMERAL)),
        dst: SocketAddrV4::new(local, port),
    };
    for &server in &is_server {
        if server {
            let d = match last_request {
                Some(prev) if rng.chance(TRAIN) => prev,
                _ => new_request(ranked[port_zipf.sample(&mut rng)], &mut rng),
            };
            last_request = Some(d);
            base.push(d);
        } else {
            let service = CLIENT_SERVICES[rng.below(CLIENT_SERVICES.len() as u64) as usize];
            let host = hosts[host_zipf.sample(&mut rng)];
            base.push(Datagram {
                src: SocketAddrV4::new(host, service),
                dst: SocketAddrV4::new(local, ephemeral),
            });
            ephemeral = if ephemeral == EPHEMERAL.1 {
                EPHEMERAL.0
            } else {
                ephemeral + 1
            };
        }
    }

    // Every server port receives something, so every server PCB exists from the start.
    let mut hits = [0usize; 1024];
    let server_at: Vec<usize> = (0..base.len()).filter(|&i| is_server[i]).collect();
    for &i in &server_at {
        hits[usize::from(base[i].dst.port())] += 1;
    }
    for &port in &ports {
        if hits[usize::from(port)] > 0 {
            continue;
        }
        loop {
            let i = server_at[rng.below(server_at.len() as u64) as usize];
            let old = usize::from(base[i].dst.port());
            if hits[old] > 1 {
                hits[old] -= 1;
                hits[usize::from(port)] = 1;
                base[i] = new_request(port, &mut rng);
                break;
            }
        }
    }

    // Fully specified flows, each over its own stretch of the trace.
    let mut inserts: Vec<(usize, usize, Datagram)> = Vec::with_capacity(fully_specified);
    if fully_specified > 0 {
        let flows = fully_specified.div_ceil(FLOW_LENGTH).max(1);
        let mut lengths = vec![1usize; flows];
        for _ in flows..fully_specified {
            lengths[rng.below(flows as u64) as usize] += 1;
        }
        let mut local_ports = Vec::with_capacity(flows);
        while local_ports.len() < flows {
            let port = port_in(&mut rng, (5001, 65535));
            if !local_ports.contains(&port) {
                local_ports.push(port);
            }
        }
        let n = base.len();
        for (flow, (&len, &local_port)) in lengths.iter().zip(&local_ports).enumerate() {
            let remote = SocketAddrV4::new(
                hosts[host_zipf.sample(&mut rng)],
                port_in(&mut rng, (1024, 65535)),
            );
            let d = Datagram {
                src: remote,
                dst: SocketAddrV4::new(local, local_port),
            };
            let stretch = n / 50 + rng.below((n / 5 - n / 50) as u64 + 1) as usize;
            let start = rng.below((n - stretch) as u64 + 1) as usize;
            for _ in 0..len {
                let at = start + rng.below(stretch as u64 + 1) as usize;
                inserts.push((at, flow, d));
            }
        }
        inserts.sort_by_key(|&(at, flow, _)| (at, flow));
    }
    let mut datagrams = Vec::with_capacity(total);
    let mut pending = inserts.iter().peekable();
    for (i, d) in base.iter().enumerate() {
        while let Some(&(_, _, f)) = pending.next_if(|(at, _, _)| *at <= i) {
            datagrams.push(f);
        }
        datagrams.push(*d);
    }
    datagrams.extend(pending.map(|&(_, _, f)| f));
    debug_assert_eq!(datagrams.len(), total);
    SyntheticTrace {
        datagrams,
        local,
        server_ports: ports,
    }
}

/// The lengths of 64 chains hashed by port modulo 64.
pub fn chains_by_port(ports: &[u16]) -> [usize; CHAINS] {
    let mut chains = [0; CHAINS];
    for &p in ports {
        chains[usize::from(p) % CHAINS] += 1;
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demux_sim::population::{self, Class};

    #[test]
    fn traces_match_tables_1_and_4() {
        for p in &PROFILES {
            let t = generate(p.trace, 7);
            assert_eq!(t.datagrams.len(), p.lookups, "{}", p.name);
            let servers = t
                .datagrams
                .iter()
                .filter(|d| Class::of(d) == Class::Server)
                .count();
            assert_eq!(servers, (p.lookups * p.server_percent + 50) / 100);
            let pop = population::build(&t.datagrams);
            assert_eq!(pop.initial_pcbs, p.pcbs, "{}", p.name);
            assert_eq!(pop.server_ports, t.server_ports);
            let chains = chains_by_port(&t.server_ports);
            let used: Vec<usize> = chains.iter().copied().filter(|&c| c > 0).collect();
            assert_eq!(used.iter().min(), Some(&p.chain_min), "{}", p.name);
            assert_eq!(used.iter().max(), Some(&p.chain_max), "{}", p.name);
            assert!(pop.fully_specified_lookups * 100 < p.lookups);
            assert!(pop.fully_specified_lookups > 0);
        }
    }

    #[test]
    fn same_seed_same_trace() {
        let a = generate(TraceName::Siwenna, 3);
        let b = generate(TraceName::Siwenna, 3);
        let c = generate(TraceName::Siwenna, 4);
        assert_eq!(a.datagrams, b.datagrams);
        assert_ne!(a.datagrams, c.datagrams);
    }
}
