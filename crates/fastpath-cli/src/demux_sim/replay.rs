//! Replaying a population's events through a demultiplexing strategy: what it answers, how many PCB
//! comparisons each lookup costs, and how long each lookup takes.

use std::hint::black_box;
use std::net::SocketAddrV4;
use std::time::Instant;

use fastpath::demux::{Demux, DemuxStats, DemuxStrategy, Linear, Pcb, SocketId};

use super::population::{initial_events, Event};

/// What one strategy did with one trace.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// The answer to each lookup (from the first run).
    pub answers: Vec<Option<SocketId>>,
    /// PCB comparisons of each lookup (from the first run).
    pub comparisons: Vec<u64>,
    /// Nanoseconds of each lookup: the minimum over the runs, less the timer's overhead, at least 0.
    pub ns: Vec<u64>,
    /// The strategy's counters after the first run.
    pub stats: DemuxStats,
    /// Chain lengths right after the binds at the start, for strategies that hash.
    pub initial_chains: Option<Vec<usize>>,
}

/// The median cost of an empty timed pair (`Instant::now()` twice), in nanoseconds.
pub fn timer_overhead() -> u64 {
    let mut samples: Vec<u64> = (0..20_001)
        .map(|_| {
            let t0 = Instant::now();
            let t1 = black_box(Instant::now());
            (t1 - t0).as_nanos() as u64
        })
        .collect();
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Applies a non-lookup event.
fn apply(d: &mut dyn Demux, event: &Event) {
    match *event {
        Event::Bind(id, pcb) => d.insert(id, pcb),
        Event::Sent(id, pcb) => d.sent(id, &pcb),
        Event::Remove(id, pcb) => d.remove(id, &pcb),
        Event::Lookup { .. } => {}
    }
}

/// The answers of the reference strategy ([`Linear`], the 4.3BSD rule itself).
pub fn reference_answers(events: &[Event]) -> Vec<Option<SocketId>> {
    let mut linear = Linear::default();
    let mut answers = Vec::new();
    for e in events {
        match *e {
            Event::Lookup { dst, src, .. } => answers.push(linear.lookup(dst, src)),
            _ => apply(&mut linear, e),
        }
    }
    answers
}

/// Replays `events` through `runs` fresh instances of each strategy, timing every lookup. The runs
/// are interleaved (the first run of every strategy, then the second..., the first strategy
/// rotating), so that a noisy stretch of
/// the shared machine does not spoil every run of one strategy. `replayed` is called after each
/// replay (`runs` times the strategies in all), for a progress bar.
pub fn measure(
    strategies: &[DemuxStrategy],
    events: &[Event],
    runs: u32,
    overhead: u64,
    replayed: &dyn Fn(),
) -> Vec<Replay> {
    let lookups = events
        .iter()
        .filter(|e| matches!(e, Event::Lookup { .. }))
        .count();
    let mut out: Vec<Replay> = strategies
        .iter()
        .map(|_| Replay {
            answers: Vec::with_capacity(lookups),
            comparisons: Vec::with_capacity(lookups),
            ns: vec![u64::MAX; lookups],
            ..Replay::default()
        })
        .collect();
    let k = strategies.len();
    for run in 0..runs.max(1) as usize {
        // The strategy that goes first rotates from run to run.
        for j in 0..k {
            let i = (run + j) % k;
            replay_timed(strategies[i], events, run == 0, &mut out[i]);
            replayed();
        }
    }
    for r in &mut out {
        for ns in &mut r.ns {
            *ns = ns.saturating_sub(overhead);
        }
    }
    out
}

/// One timed replay on a fresh instance; the first also records answers, comparisons and counters.
fn replay_timed(strategy: DemuxStrategy, events: &[Event], first: bool, out: &mut Replay) {
    let initial = initial_events(events);
    let mut d = strategy.build();
    for e in &events[..initial] {
        apply(d.as_mut(), e);
    }
    if first {
        out.initial_chains = d.chain_lengths();
    }
    let mut k = 0;
    for e in &events[initial..] {
        let Event::Lookup { dst, src, .. } = *e else {
            apply(d.as_mut(), e);
            continue;
        };
        let before = d.stats().comparisons;
        let t0 = Instant::now();
        let got = d.lookup(black_box(dst), black_box(src));
        let t1 = Instant::now();
        let got = black_box(got);
        let ns = (t1 - t0).as_nanos() as u64;
        out.ns[k] = out.ns[k].min(ns);
        if first {
            out.answers.push(got);
            out.comparisons.push(d.stats().comparisons - before);
        }
        k += 1;
    }
    if first {
        out.stats = d.stats();
    }
}

/// One lookup, kept out of line so that callgrind can count exactly what happens inside it (the
/// indirect call through the strategy's vtable and everything the strategy does).
#[inline(never)]
pub fn counted_lookup(d: &mut dyn Demux, dst: SocketAddrV4, src: SocketAddrV4) -> Option<SocketId> {
    d.lookup(dst, src)
}

/// The name pattern of [`counted_lookup`] for callgrind's `--toggle-collect`.
pub const COUNTED_LOOKUP_PATTERN: &str = "*demux_sim::replay::counted_lookup*";

/// Replays `events` through `d` once with every lookup going through [`counted_lookup`]; returns the
/// number of lookups.
pub fn replay_counted(d: &mut dyn Demux, events: &[Event]) -> usize {
    let mut lookups = 0;
    for e in events {
        match *e {
            Event::Lookup { dst, src, .. } => {
                black_box(counted_lookup(d, black_box(dst), black_box(src)));
                lookups += 1;
            }
            _ => apply(d, e),
        }
    }
    lookups
}

/// A strategy that does nothing: replayed under callgrind, it measures what [`counted_lookup`] costs
/// around a strategy (the call overhead included in every instruction count).
#[derive(Debug, Default)]
pub struct NullDemux;

impl Demux for NullDemux {
    fn insert(&mut self, _id: SocketId, _pcb: Pcb) {}

    fn remove(&mut self, _id: SocketId, _pcb: &Pcb) {}

    fn lookup(&mut self, _dst: SocketAddrV4, _src: SocketAddrV4) -> Option<SocketId> {
        None
    }

    fn lookup_all(&mut self, _dst: SocketAddrV4, _src: SocketAddrV4, _out: &mut Vec<SocketId>) {}

    fn stats(&self) -> DemuxStats {
        DemuxStats::default()
    }
}

/// The `p`-th percentile (0 to 100, nearest rank) of `values`, or 0 if empty.
pub fn percentile(values: &[u64], p: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The mean of `values`, or 0 if empty.
pub fn mean(values: &[u64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<u64>() as f64 / values.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile(&v, 90.0), 9);
        assert_eq!(percentile(&v, 50.0), 5);
        assert_eq!(percentile(&v, 100.0), 10);
        assert_eq!(percentile(&[7], 90.0), 7);
        assert_eq!(percentile(&[], 90.0), 0);
        assert_eq!(mean(&v), 5.5);
    }
}
