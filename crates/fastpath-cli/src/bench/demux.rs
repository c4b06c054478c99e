//! `fastpath bench demux`: how lookup time grows with the number of bound sockets, per strategy.
//!
//! For each socket count N, every strategy gets the same PCBs: N wildcard server PCBs
//! (`0.0.0.0:port`, distinct ports drawn at random from 1..=60000) plus 4 connected ones, and answers
//! the same fixed pseudo-random sequence of datagrams: 15 in 16 to a random server port from a random
//! remote socket, 1 in 16 to one of the connected PCBs. Each round times every strategy once (the
//! strategies interleaved, the first one rotating from round to round, because the machine is shared
//! and noisy) over a batch of lookups; the result is the median of the rounds' ns per lookup. The
//! batch is as many lookups as fit in `--round-ms` (measured on a first pass), between 1,000 and
//! `--lookups`: a slow strategy with many sockets runs a shorter prefix of the same sequence. Mean
//! comparisons per lookup are counted, and answers checked, on a first pass over the first 4,000
//! lookups, the same for every strategy.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use clap::Args;
use fastpath::demux::{Demux, DemuxStrategy, Pcb, SocketId};
use fastpath::rng::Rng;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::demux_sim::emit;

/// Options of `fastpath bench demux`.
#[derive(Args, Debug)]
pub struct DemuxBenchArgs {
    /// Numbers of bound wildcard sockets to measure, comma-separated, 1 to 60000 each (4 connected
    /// ones are added to each) [default: 1,16,64,256,1024,16384; with --quick: 1,64,1024].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = super::common::count(1, MAX_PORT as u64)
    )]
    sockets: Vec<usize>,
    /// Strategies, comma-separated [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    strategies: Vec<DemuxStrategy>,
    /// Rounds; each cell reports the median [default: 7; with --quick: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: Option<u32>,
    /// Most lookups per cell and round, at least 1000 [default: 100000; with --quick: 10000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    lookups: Option<u64>,
    /// Time a round of one cell should take, in milliseconds (fewer lookups for slow cells).
    #[arg(long, value_name = "MS", default_value_t = 10.0, value_parser = super::common::parse_positive)]
    round_ms: f64,
    /// Write the results as JSON to PATH (`-`: standard output, the table then goes to standard
    /// error).
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
    /// A short run (1, 64 and 1024 sockets, 3 rounds, 10,000 lookups) for tests and CI; explicit
    /// options win over it: it only fills in what is not given.
    #[arg(long)]
    quick: bool,
}

/// Connected PCBs added to every socket count.
const CONNECTED: usize = 4;
/// The highest server port drawn.
const MAX_PORT: u16 = 60_000;
/// Fewest lookups in a timed batch.
const MIN_LOOKUPS: usize = 1000;
/// Lookups of the first, untimed pass that counts comparisons and checks answers.
const PROBE_LOOKUPS: usize = 4000;
/// The server host's address.
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// One cell of the result, as `--json` writes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// Wildcard sockets bound.
    pub sockets: usize,
    /// Connected sockets bound beside them.
    pub connected: usize,
    /// Strategy name.
    pub strategy: String,
    /// Lookups timed per round.
    pub lookups_per_round: usize,
    /// Rounds.
    pub rounds: u32,
    /// Median ns per lookup.
    pub ns_per_lookup: f64,
    /// Fastest round's ns per lookup.
    pub ns_min: f64,
    /// Slowest round's ns per lookup.
    pub ns_max: f64,
    /// Mean comparisons per lookup.
    pub mean_comparisons: f64,
    /// Lookups whose answer differed from the expected socket.
    pub mismatches: usize,
}

impl DemuxBenchArgs {
    /// The defaults, for `bench all`.
    pub fn for_all() -> DemuxBenchArgs {
        DemuxBenchArgs {
            sockets: Vec::new(),
            strategies: Vec::new(),
            rounds: None,
            lookups: None,
            round_ms: 10.0,
            json: None,
            quick: false,
        }
    }

    /// Socket counts: those given, else the default or the quick run's.
    fn sockets(&self) -> Vec<usize> {
        match (self.sockets.is_empty(), self.quick) {
            (false, _) => self.sockets.clone(),
            (true, false) => vec![1, 16, 64, 256, 1024, 16384],
            (true, true) => vec![1, 64, 1024],
        }
    }

    /// Strategies: those given, else all.
    fn strategies(&self) -> Vec<DemuxStrategy> {
        if self.strategies.is_empty() {
            DemuxStrategy::ALL.to_vec()
        } else {
            self.strategies.clone()
        }
    }

    /// Rounds: given, else the default or the quick run's.
    fn rounds(&self) -> u32 {
        self.rounds.unwrap_or(if self.quick { 3 } else { 7 })
    }

    /// Most lookups per cell and round: given, else the default or the quick run's.
    fn lookups(&self) -> u64 {
        self.lookups
            .unwrap_or(if self.quick { 10_000 } else { 100_000 })
    }
}

/// Measures every cell (also used by `bench all`), with a progress bar on a terminal.
pub fn measure_cells(args: &DemuxBenchArgs) -> Vec<Cell> {
    let strategies = args.strategies();
    let bar = super::common::progress(steps(args, &strategies), "bench demux");
    let cells = measure_cells_with(args, &strategies, &bar);
    bar.finish_and_clear();
    cells
}

/// Measures every cell, advancing `bar` by one step per strategy's first pass and per timed batch.
fn measure_cells_with(
    args: &DemuxBenchArgs,
    strategies: &[DemuxStrategy],
    bar: &ProgressBar,
) -> Vec<Cell> {
    args.sockets()
        .iter()
        .flat_map(|&n| measure(n, strategies, args, bar))
        .collect()
}

/// The steps of the whole measurement: for each socket count and strategy, the first pass and one
/// batch a round.
fn steps(args: &DemuxBenchArgs, strategies: &[DemuxStrategy]) -> u64 {
    (args.sockets().len() * strategies.len()) as u64 * (1 + u64::from(args.rounds()))
}

/// The PCBs and the lookup sequence for one socket count.
struct Workload {
    pcbs: Vec<(SocketId, Pcb)>,
    lookups: Vec<(SocketAddrV4, SocketAddrV4, SocketId)>,
}

fn workload(sockets: usize, lookups: usize) -> Workload {
    let mut rng = Rng::new(0xB0B5_0C4E_7500_0000 ^ sockets as u64);
    // Distinct ports: a partial Fisher-Yates shuffle of 1..=MAX_PORT.
    let mut ports: Vec<u16> = (1..=MAX_PORT).collect();
    for i in 0..sockets {
        let j = i + rng.below((ports.len() - i) as u64) as usize;
        ports.swap(i, j);
    }
    let mut pcbs: Vec<(SocketId, Pcb)> = ports[..sockets]
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let pcb = Pcb::bound(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, p));
            (SocketId(i as u32 + 1), pcb)
        })
        .collect();
    for c in 0..CONNECTED {
        let pcb = Pcb {
            local_addr: LOCAL,
            local_port: MAX_PORT + 1 + c as u16,
            remote_addr: Ipv4Addr::new(10, 9, 0, c as u8 + 1),
            remote_port: 7000 + c as u16,
        };
        pcbs.push((SocketId((sockets + c) as u32 + 1), pcb));
    }
    let lookups = (0..lookups)
        .map(|_| {
            if rng.below(16) == 0 {
                let (id, p) = pcbs[sockets + rng.below(CONNECTED as u64) as usize];
                (
                    SocketAddrV4::new(p.local_addr, p.local_port),
                    SocketAddrV4::new(p.remote_addr, p.remote_port),
                    id,
                )
            } else {
                let (id, p) = pcbs[rng.below(sockets as u64) as usize];
                let host = rng.below(1 << 16) as u16;
                let remote = SocketAddrV4::new(
                    Ipv4Addr::new(10, 20, (host >> 8) as u8, host as u8),
                    1024 + rng.below(60_000) as u16,
                );
                (SocketAddrV4::new(LOCAL, p.local_port), remote, id)
            }
        })
        .collect();
    Workload { pcbs, lookups }
}

/// Times `batch` lookups on `d`: ns per lookup.
fn time_batch(d: &mut dyn Demux, batch: &[(SocketAddrV4, SocketAddrV4, SocketId)]) -> f64 {
    let start = Instant::now();
    let mut acc = 0u32;
    for &(dst, src, _) in batch {
        if let Some(SocketId(id)) = d.lookup(black_box(dst), black_box(src)) {
            acc ^= id;
        }
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / batch.len() as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Measures every strategy on one socket count.
fn measure(
    sockets: usize,
    strategies: &[DemuxStrategy],
    args: &DemuxBenchArgs,
    bar: &ProgressBar,
) -> Vec<Cell> {
    let max_lookups = args.lookups() as usize;
    let w = workload(sockets, max_lookups);
    let mut instances: Vec<Box<dyn Demux>> = strategies
        .iter()
        .map(|s| {
            let mut d = s.build();
            for &(id, pcb) in &w.pcbs {
                d.insert(id, pcb);
            }
            d
        })
        .collect();
    // First pass, over the same prefix for every strategy: comparisons, correctness, and how many
    // lookups fit in a round.
    let probe = &w.lookups[..PROBE_LOOKUPS.min(max_lookups)];
    let mut cells = Vec::new();
    for (s, d) in strategies.iter().zip(instances.iter_mut()) {
        let before = d.stats().comparisons;
        let start = Instant::now();
        let mismatches = probe
            .iter()
            .filter(|&&(dst, src, id)| d.lookup(dst, src) != Some(id))
            .count();
        let per_lookup = (start.elapsed().as_nanos() as f64 / probe.len() as f64).max(0.1);
        let comparisons = d.stats().comparisons - before;
        let fit = (args.round_ms * 1e6 / per_lookup) as usize;
        cells.push(Cell {
            sockets,
            connected: CONNECTED,
            strategy: s.name(),
            lookups_per_round: fit.clamp(MIN_LOOKUPS, max_lookups),
            rounds: args.rounds(),
            ns_per_lookup: 0.0,
            ns_min: 0.0,
            ns_max: 0.0,
            mean_comparisons: comparisons as f64 / probe.len() as f64,
            mismatches,
        });
        bar.inc(1);
    }
    let k = strategies.len();
    let mut samples = vec![Vec::with_capacity(args.rounds() as usize); k];
    for round in 0..args.rounds() as usize {
        for j in 0..k {
            let i = (round + j) % k;
            let batch = &w.lookups[..cells[i].lookups_per_round];
            samples[i].push(time_batch(instances[i].as_mut(), batch));
            bar.inc(1);
        }
    }
    for (cell, mut s) in cells.iter_mut().zip(samples) {
        cell.ns_per_lookup = median(&mut s);
        cell.ns_min = s[0];
        cell.ns_max = s[s.len() - 1];
    }
    cells
}

fn table(
    cells: &[Cell],
    sizes: &[usize],
    names: &[String],
    value: impl Fn(&Cell) -> String,
) -> String {
    let widths: Vec<usize> = names.iter().map(|n| n.len().max(8)).collect();
    let mut s = format!("{:>8}", "sockets");
    for (n, w) in names.iter().zip(&widths) {
        s += &format!("  {n:>w$}");
    }
    s.push('\n');
    for &size in sizes {
        s += &format!("{size:>8}");
        for (n, w) in names.iter().zip(&widths) {
            let v = cells
                .iter()
                .find(|c| c.sockets == size && &c.strategy == n)
                .map_or("-".to_string(), &value);
            s += &format!("  {v:>w$}");
        }
        s.push('\n');
    }
    s
}

/// Runs `bench demux`.
pub fn run(args: &DemuxBenchArgs) -> Result<(), String> {
    let json = super::common::JsonOut::open(args.json.as_deref())?;
    if args.json.as_deref() != Some("-") {
        super::common::header(
            "bench demux: lookup cost of every demultiplexing strategy by socket count (paper 003)",
        );
    }
    let strategies = args.strategies();
    let to_stderr = args.json.as_deref() == Some("-");
    let say = |s: &str| emit(s, to_stderr);
    say(&format!(
        "bench demux: ns per lookup, median of {} rounds (strategies interleaved in each round); \
         each row binds that many wildcard sockets on distinct ports plus {CONNECTED} connected ones; \
         1 lookup in 16 goes to a connected socket\n",
        args.rounds()
    ));
    let cells = measure_cells(args);
    let names: Vec<String> = strategies.iter().map(|s| s.name()).collect();
    let mut report = table(&cells, &args.sockets(), &names, |c| {
        format!("{:.1}", c.ns_per_lookup)
    });
    report += "\nmean comparisons per lookup\n";
    report += &table(&cells, &args.sockets(), &names, |c| {
        format!("{:.1}", c.mean_comparisons)
    });
    let mut short = Vec::new();
    for &n in &args.sockets() {
        let counts = cells
            .iter()
            .filter(|c| c.sockets == n)
            .map(|c| c.lookups_per_round);
        let (lo, hi) = (counts.clone().min().unwrap_or(0), counts.max().unwrap_or(0));
        if lo < args.lookups() as usize {
            short.push(if lo == hi {
                format!("{n} sockets: {lo}")
            } else {
                format!("{n} sockets: {lo} to {hi}")
            });
        }
    }
    report += &format!(
        "\ncomparisons counted over the first {} lookups; {} lookups per round, fewer where that \
         would take over {} ms: {}\n",
        PROBE_LOOKUPS.min(args.lookups() as usize),
        args.lookups(),
        args.round_ms,
        if short.is_empty() {
            "none".to_string()
        } else {
            short.join("; ")
        }
    );
    let wrong: Vec<String> = cells
        .iter()
        .filter(|c| c.mismatches > 0)
        .map(|c| format!("{}@{}", c.strategy, c.sockets))
        .collect();
    if !wrong.is_empty() {
        report += &format!("WRONG ANSWERS: {}\n", wrong.join(", "));
    }
    say(&report);
    if let Some(json) = json {
        json.write(&cells)?;
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("wrong answers from: {}", wrong.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_bar_ends_full() {
        let args = DemuxBenchArgs {
            sockets: vec![1, 16],
            strategies: vec![DemuxStrategy::Linear, DemuxStrategy::Table],
            rounds: Some(3),
            lookups: Some(1000),
            round_ms: 0.1,
            json: None,
            quick: true,
        };
        let strategies = args.strategies();
        let bar = ProgressBar::hidden();
        bar.set_length(steps(&args, &strategies));
        let cells = measure_cells_with(&args, &strategies, &bar);
        assert_eq!(cells.len(), 4);
        assert_eq!(bar.length(), Some(2 * 2 * (1 + 3)));
        assert_eq!(bar.position(), 2 * 2 * (1 + 3));
    }

    #[test]
    fn workload_is_fixed_and_answerable() {
        let a = workload(64, 2000);
        let b = workload(64, 2000);
        assert_eq!(a.lookups, b.lookups);
        let mut ports: Vec<u16> = a.pcbs.iter().map(|(_, p)| p.local_port).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 64 + CONNECTED);
        let mut linear = fastpath::demux::Linear::default();
        for &(id, pcb) in &a.pcbs {
            linear.insert(id, pcb);
        }
        for &(dst, src, id) in &a.lookups {
            assert_eq!(linear.lookup(dst, src), Some(id));
        }
    }
}
