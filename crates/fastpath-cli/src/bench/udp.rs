//! `fastpath bench udp`: Partridge & Pink's loopback discard experiment (paper 000 §4.2, tables 1-7).
//!
//! A sender and an RFC 863 discard server share one stack's loopback link. The sender sends datagrams of
//! 59, 64, 509 and 512 bytes with `send_to` from an unconnected socket to `0.0.0.0:9`; the server reads
//! and discards them. Each configuration adds one of the paper's optimizations to the previous one, in
//! the paper's order, from `classic` (the 4.3BSD path) to `default` (everything fastpath does). The
//! configurations run interleaved, round after round, and the median round is quoted.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant as WallClock;

use clap::Args;
use fastpath::buf::BufferMode;
use fastpath::demux::DemuxStrategy;
use fastpath::{CopyChecksum, Instant, Stack, StackConfig};
use serde::{Deserialize, Serialize};

use super::common;
use crate::bench::common::{out, outln};

/// Options of `fastpath bench udp`.
#[derive(Args, Debug)]
pub struct UdpArgs {
    /// Datagrams per measurement (the paper sent 200,000) [default: 200000; with --quick: 20000].
    #[arg(long, value_parser = common::count(1, u32::MAX as u64))]
    datagrams: Option<usize>,
    /// Rounds; every configuration runs once per round and the median is quoted [default: 11; with
    /// --quick: 3].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Datagram sizes in bytes (1 to 65507).
    #[arg(long, value_delimiter = ',', default_values_t = [59usize, 64, 509, 512],
          value_parser = common::count(1, common::MAX_UDP_PAYLOAD))]
    sizes: Vec<usize>,
    /// The application sends this many datagrams between polls of the stack.
    #[arg(long, default_value_t = 32, value_parser = common::count(1, 1 << 20))]
    burst: usize,
    /// A short run (20,000 datagrams, 3 rounds) for tests and CI; explicit options win over it: it
    /// only fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

impl UdpArgs {
    /// The defaults (or the quick run), for `bench all`.
    pub fn for_all(quick: bool) -> UdpArgs {
        UdpArgs {
            datagrams: None,
            rounds: None,
            sizes: vec![59, 64, 509, 512],
            burst: 32,
            quick,
            json: None,
        }
    }

    /// Datagram sizes.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Datagrams per measurement and rounds: what was given, else the default or the quick run's.
    fn plan(&self) -> (usize, usize) {
        let (n, rounds) = if self.quick {
            (20_000, 3)
        } else {
            (200_000, 11)
        };
        (self.datagrams.unwrap_or(n), self.rounds.unwrap_or(rounds))
    }
}

/// One row of the results.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct UdpRow {
    /// Configuration name.
    pub config: String,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Median ns per datagram, sent and received.
    pub ns_per_datagram: f64,
    /// Datagrams per second at that median.
    pub datagrams_per_s: f64,
    /// `classic`'s ns per datagram divided by this configuration's.
    pub improvement_vs_classic: f64,
}

/// The configurations, each adding one optimization to the one before, in the paper's order.
pub fn configurations() -> Vec<(&'static str, &'static str, StackConfig)> {
    let mut steps = Vec::new();
    let mut c = StackConfig::classic();
    steps.push(("classic", "4.3BSD: checksum routine, pseudo-connect, linear PCB list, malloc per packet, copy then checksum", c.clone()));
    c.inline_header_checksum = true;
    steps.push((
        "inline-header-checksum",
        "+ in-line 20-byte IP header checksum (§6.1)",
        c.clone(),
    ));
    c.sendto_pseudo_connect = false;
    steps.push((
        "no-pseudo-connect",
        "+ send_to without a temporary connect (§6.2)",
        c.clone(),
    ));
    c.demux = DemuxStrategy::PpCache;
    steps.push((
        "pcb-caches",
        "+ receive and send PCB caches with hiding detection (§6.3)",
        c.clone(),
    ));
    c.buffers = BufferMode::Pool;
    steps.push(("buffer-cache", "+ recycled buffers (§6.4)", c.clone()));
    c.copy_checksum = CopyChecksum::Fused;
    steps.push((
        "fused-copy-checksum",
        "+ copy and checksum in one loop, deferred receive check (§7)",
        c.clone(),
    ));
    steps.push((
        "default",
        "fastpath: + SIMD checksum, table demux, batching, offload policy",
        StackConfig::default(),
    ));
    steps
}

/// Sends `n` datagrams of `size` bytes through a fresh stack with `config`; returns ns per datagram.
fn run_once(config: &StackConfig, size: usize, n: usize, burst: usize) -> Result<f64, String> {
    let mut stack = Stack::new(config.clone());
    let discard = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9))
        .map_err(|e| e.to_string())?;
    let sender = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| e.to_string())?;
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let data = vec![0xa5u8; size];
    let mut sink = vec![0u8; 2048];
    let mut received = 0;
    let started = WallClock::now();
    let mut sent = 0;
    while sent < n {
        let k = burst.min(n - sent);
        for _ in 0..k {
            stack
                .udp(sender)
                .send_to(&data, to)
                .map_err(|e| e.to_string())?;
        }
        sent += k;
        stack.poll(Instant::ZERO);
        while stack.udp(discard).recv(&mut sink).is_ok() {
            received += 1;
        }
    }
    let elapsed = started.elapsed();
    if received != n || stack.counters().drops.total() != 0 {
        return Err(format!(
            "{received} of {n} datagrams delivered; drops:\n{}",
            stack.counters()
        ));
    }
    Ok(elapsed.as_nanos() as f64 / n as f64)
}

/// Runs the experiment and returns its rows (also used by `bench all`).
pub fn measure(args: &UdpArgs) -> Result<Vec<UdpRow>, String> {
    let (n, rounds) = args.plan();
    let configs = configurations();
    let bar = common::progress(
        (rounds * configs.len() * args.sizes.len()) as u64,
        "bench udp",
    );
    let mut samples = vec![vec![Vec::new(); args.sizes.len()]; configs.len()];
    for _ in 0..rounds {
        for (si, &size) in args.sizes.iter().enumerate() {
            for (ci, (_, _, config)) in configs.iter().enumerate() {
                samples[ci][si].push(run_once(config, size, n, args.burst)?);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (ci, (name, _, _)) in configs.iter().enumerate() {
        for (si, &size) in args.sizes.iter().enumerate() {
            let ns = common::median(&samples[ci][si]);
            let classic = common::median(&samples[0][si]);
            rows.push(UdpRow {
                config: name.to_string(),
                size,
                ns_per_datagram: ns,
                datagrams_per_s: 1e9 / ns,
                improvement_vs_classic: classic / ns,
            });
        }
    }
    Ok(rows)
}

/// Partridge & Pink's table 7: UDP/IP and socket time before and after, per size (59, 64, 509, 512).
pub const PAPER_TABLE_7: [(&str, [f64; 4], [f64; 4]); 2] = [
    (
        "386",
        [202.19, 193.37, 264.21, 253.45],
        [134.91, 140.88, 181.37, 177.05],
    ),
    (
        "SPARC",
        [92.32, 83.11, 93.00, 91.48],
        [55.57, 58.53, 68.95, 64.17],
    ),
];

/// Prints the rows in the layout of the paper's tables.
pub fn print(rows: &[UdpRow], sizes: &[usize]) {
    let configs = configurations();
    out!("{:<24}", "ns per datagram");
    for s in sizes {
        out!("{:>12}", format!("{s} B"));
    }
    outln!();
    for (name, _, _) in &configs {
        out!("{name:<24}");
        for s in sizes {
            let r = rows
                .iter()
                .find(|r| r.config == *name && r.size == *s)
                .expect("row");
            out!("{:>12.1}", r.ns_per_datagram);
        }
        outln!();
    }
    outln!();
    out!("{:<24}", "x faster than classic");
    for s in sizes {
        out!("{:>12}", format!("{s} B"));
    }
    outln!();
    for (name, _, _) in &configs {
        out!("{name:<24}");
        for s in sizes {
            let r = rows
                .iter()
                .find(|r| r.config == *name && r.size == *s)
                .expect("row");
            out!("{:>12}", format!("{:.2}x", r.improvement_vs_classic));
        }
        outln!();
    }
    let last = rows.iter().filter(|r| r.config == "default");
    out!("{:<24}", "default, datagrams/s");
    for r in last {
        out!("{:>12}", format!("{:.2} M", r.datagrams_per_s / 1e6));
    }
    outln!("\n");
    for (cpu, before, after) in PAPER_TABLE_7 {
        let ratios: Vec<String> = before
            .iter()
            .zip(after)
            .map(|(b, a)| format!("{:.2}x", b / a))
            .collect();
        outln!(
            "paper 000 table 7 ({cpu}), UDP/IP+socket, 59/64/509/512 B: {}",
            ratios.join(" ")
        );
    }
    outln!("\nconfigurations (each adds to the one before):");
    for (name, what, _) in &configs {
        outln!("  {name:<24}{what}");
    }
}

/// `fastpath bench udp`.
pub fn run(args: &UdpArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header(
        "bench udp: sendto to a discard server over loopback (Partridge & Pink, paper 000 §4.2)",
    );
    let rows = measure(args)?;
    let (n, _) = args.plan();
    outln!(
        "{n} datagrams per run, sent {} per poll; every datagram was delivered in every run\n",
        args.burst
    );
    print(&rows, &args.sizes);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
