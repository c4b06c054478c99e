//! `fastpath demux-sim`: Dixon & Calvert's trace-driven demultiplexing simulation (paper 003 §2).
//!
//! A trace (a pcap/pcapng capture, or a synthetic stream modelled on one of the paper's servers) is a
//! list of datagrams arriving at one host; the §2.4 population model ([`population`]) turns it into
//! binds, lookups and removes; every selected strategy replays those events from a fresh instance
//! ([`replay`]) and is scored as the paper scores it: per lookup, PCB comparisons, nanoseconds, and on
//! request instructions counted by callgrind ([`callgrind`]); every answer is checked against the
//! linear reference. The report follows the layout of the paper's tables 2 to 5.

pub mod callgrind;
pub mod population;
pub mod replay;
pub mod synthetic;
pub mod trace;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::Args;
use fastpath::demux::{Demux, DemuxStrategy};
use serde::Serialize;

use population::{Datagram, Event, Population};
use synthetic::{Profile, TraceName};

/// The seed of `--synthetic` when `--seed` is not given (the traces were taken on 7 April 1995).
pub const DEFAULT_SEED: u64 = 19_950_407;

/// Options of `fastpath demux-sim`: a trace to replay, `--trace FILE` or `--synthetic NAME` (one of
/// the two is required).
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["trace", "synthetic"])))]
pub struct DemuxSimArgs {
    /// Replay a pcap or pcapng capture (as `tcpdump -w` writes it): its IPv4 UDP datagrams to the
    /// server host.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The server host of the capture: datagrams to this address are the trace. Without it, the most
    /// frequent unicast UDP destination.
    #[arg(long, value_name = "ADDR", requires = "trace")]
    local: Option<Ipv4Addr>,
    /// Replay a synthetic trace modelled on one of the paper's servers (tables 1 and 4).
    #[arg(long, value_name = "NAME")]
    synthetic: Option<TraceName>,
    /// Seed of the synthetic trace [default: 19950407].
    #[arg(long, value_name = "N", requires = "synthetic")]
    seed: Option<u64>,
    /// Strategies to run, comma-separated [default: all]; linear, the reference, always runs.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    strategies: Vec<DemuxStrategy>,
    /// Timed replays per strategy; each lookup keeps its fastest time.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Also count instructions per lookup with valgrind's callgrind (the paper's metric; slow).
    #[arg(long)]
    instructions: bool,
    /// Write the results as JSON to PATH (`-`: standard output, the table then goes to standard
    /// error).
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
    /// Internal: replay one strategy (or `null`) once, for callgrind.
    #[arg(long, hide = true, value_name = "STRATEGY")]
    replay_one: Option<String>,
}

/// A trace, loaded.
struct Source {
    /// What it is, for the report.
    label: String,
    /// Lines describing where it came from.
    notes: Vec<String>,
    /// The datagrams to the server host, in arrival order.
    datagrams: Vec<Datagram>,
    /// The paper's figures, for a synthetic trace.
    profile: Option<&'static Profile>,
    /// The options that load the same trace again (for the callgrind child).
    options: Vec<OsString>,
}

fn load(args: &DemuxSimArgs) -> Result<Source, String> {
    if let Some(name) = args.synthetic {
        let seed = args.seed.unwrap_or(DEFAULT_SEED);
        let profile = name.profile();
        let t = synthetic::generate(name, seed);
        return Ok(Source {
            label: profile.name.to_string(),
            notes: vec![format!(
                "trace: synthetic {} (seed {seed}; modelled on the paper's {}: {}), server {} with {} \
                 server ports",
                profile.name,
                profile.name,
                profile.services,
                t.local,
                t.server_ports.len()
            )],
            datagrams: t.datagrams,
            profile: Some(profile),
            options: vec![
                "--synthetic".into(),
                profile.name.into(),
                "--seed".into(),
                seed.to_string().into(),
            ],
        });
    }
    let path = args
        .trace
        .as_ref()
        .ok_or("give --trace FILE or --synthetic NAME")?;
    let (all, summary) = trace::read_capture(path)?;
    let links: Vec<String> = summary
        .link_types
        .iter()
        .map(|&l| trace::link_name(l))
        .collect();
    let mut notes = vec![format!(
        "trace: {} ({}, {}): {} packets, {} IPv4 UDP datagrams; skipped {} other packets, {} later \
         fragments, {} malformed{}",
        path.display(),
        summary.format,
        links.join(", "),
        summary.packets,
        summary.udp,
        summary.other,
        summary.fragments,
        summary.malformed,
        if summary.unsupported_link > 0 {
            format!(", {} on unsupported links", summary.unsupported_link)
        } else {
            String::new()
        }
    )];
    if let Some(e) = &summary.stopped_by {
        notes.push(format!(
            "the capture is damaged; reading stopped there: {e}"
        ));
    }
    let local = match args.local {
        Some(a) => {
            notes.push(format!("server host {a} (--local)"));
            a
        }
        None => {
            let (a, n) = trace::busiest_destination(&all)
                .ok_or_else(|| format!("{}: no unicast IPv4 UDP datagrams", path.display()))?;
            notes.push(format!(
                "server host {a}: no --local given, so the most frequent UDP destination ({n} of {} \
                 datagrams)",
                all.len()
            ));
            a
        }
    };
    let datagrams: Vec<Datagram> = all.into_iter().filter(|d| *d.dst.ip() == local).collect();
    if datagrams.is_empty() {
        return Err(format!(
            "{}: no IPv4 UDP datagrams to {local}",
            path.display()
        ));
    }
    let mut options: Vec<OsString> = vec!["--trace".into(), path.clone().into()];
    options.extend(["--local".into(), local.to_string().into()]);
    Ok(Source {
        label: path.display().to_string(),
        notes,
        datagrams,
        profile: None,
        options,
    })
}

/// One strategy's results, as `--json` writes them.
#[derive(Clone, Debug, Serialize)]
struct StrategyResult {
    strategy: String,
    trace: String,
    lookups: usize,
    server_share: f64,
    initial_pcbs: usize,
    mean_comparisons: f64,
    p90_comparisons: u64,
    mean_ns: f64,
    p90_ns: u64,
    /// Mean ns of linear over mean ns of this strategy (absent when this one measures as 0).
    speedup_vs_linear: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_instructions: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    speedup_instructions_vs_linear: Option<f64>,
    cache_hits: u64,
    cache_hit_rate: f64,
    mismatches: usize,
    /// Lookups whose answer is not the socket the population model delivers to.
    model_mismatches: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    chains: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chain_min: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chain_max: Option<usize>,
}

/// The strategies to run: the chosen ones (all by default), linear first.
fn selected(args: &DemuxSimArgs) -> Vec<DemuxStrategy> {
    let mut list = vec![DemuxStrategy::Linear];
    let chosen = if args.strategies.is_empty() {
        DemuxStrategy::ALL
    } else {
        &args.strategies[..]
    };
    for &s in chosen {
        if !list.contains(&s) {
            list.push(s);
        }
    }
    list
}

/// Min and max over the non-empty chains, and the number of empty ones.
fn chain_shape(chains: &[usize]) -> (usize, usize, usize) {
    let used = chains.iter().copied().filter(|&c| c > 0);
    let min = used.clone().min().unwrap_or(0);
    let max = used.max().unwrap_or(0);
    let empty = chains.iter().filter(|&&c| c == 0).count();
    (min, max, empty)
}

fn population_notes(pop: &Population, profile: Option<&Profile>) -> Vec<String> {
    let pct = |n: usize| 100.0 * n as f64 / pop.lookups.max(1) as f64;
    let mut notes = vec![
        format!(
            "{} lookups: {} to servers ({:.1}%), {} replies to clients ({:.1}%), {} to {} fully \
             specified PCBs ({:.2}%)",
            pop.lookups,
            pop.server_lookups,
            pct(pop.server_lookups),
            pop.client_lookups,
            pct(pop.client_lookups),
            pop.fully_specified_lookups,
            pop.fully_specified_pcbs,
            pct(pop.fully_specified_lookups)
        ),
        format!(
            "PCBs (paper §2.4): {} server PCBs bound at the start; {} client PCBs bound for one reply \
             each; {:.1}% of lookups go to the socket of the lookup before",
            pop.initial_pcbs,
            pop.client_binds,
            pct(pop.repeats)
        ),
    ];
    let (min, max, empty) = chain_shape(&synthetic::chains_by_port(&pop.server_ports));
    let mut t4 = format!(
        "table 4: single list length {}; 64 chains (local port mod 64): min {min}, max {max}{}",
        pop.initial_pcbs,
        if empty > 0 {
            format!(" (non-empty chains; {empty} empty)")
        } else {
            String::new()
        }
    );
    if let Some(p) = profile {
        let _ = write!(
            t4,
            "   [paper: {}, min {}, max {}]",
            p.pcbs, p.chain_min, p.chain_max
        );
    }
    notes.push(t4);
    if let Some(p) = profile {
        notes.push(format!(
            "table 1: {} lookups, {}% to servers   [paper: {}, {}%]",
            pop.lookups,
            (pop.server_share() * 100.0).round(),
            p.lookups,
            p.server_percent
        ));
    }
    notes
}

fn paper_line(p: &Profile) -> String {
    let i = &p.paper;
    let s = |x: f64| i.linear / x;
    format!(
        "paper, {} (instructions per lookup; speed-up over linear): linear {:.1}; one-behind {:.1} \
         ({:.2}); two-cache {:.1} ({:.2}); hash-chains {:.1}, p90 {} ({:.1}); two-stage {:.1}, p90 {} \
         ({:.2})",
        p.name,
        i.linear,
        i.one_behind,
        s(i.one_behind),
        i.two_cache,
        s(i.two_cache),
        i.hash_chains.0,
        i.hash_chains.1,
        s(i.hash_chains.0),
        i.two_stage.0,
        i.two_stage.1,
        s(i.two_stage.0)
    )
}

fn ratio(base: f64, x: f64) -> Option<f64> {
    (x > 0.0 && base > 0.0).then(|| base / x)
}

fn table(rows: &[StrategyResult], instructions: bool) -> String {
    let name_width = rows
        .iter()
        .map(|r| r.strategy.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut s = String::new();
    let _ = write!(
        s,
        "{:<name_width$}  {:>9} {:>6}  {:>9} {:>7}  {:>8}",
        "strategy", "cmp mean", "p90", "ns mean", "p90", "speed-up"
    );
    if instructions {
        let _ = write!(s, "  {:>9} {:>8}", "instr", "speed-up");
    }
    let _ = writeln!(s, "  {:>10}  {:>10}", "cache hits", "mismatches");
    for r in rows {
        let _ = write!(
            s,
            "{:<name_width$}  {:>9.1} {:>6}  {:>9.1} {:>7}  {:>8}",
            r.strategy,
            r.mean_comparisons,
            r.p90_comparisons,
            r.mean_ns,
            r.p90_ns,
            r.speedup_vs_linear
                .map_or("-".to_string(), |x| format!("{x:.2}"))
        );
        if instructions {
            let _ = write!(
                s,
                "  {:>9} {:>8}",
                r.mean_instructions
                    .map_or("-".to_string(), |x| format!("{x:.1}")),
                r.speedup_instructions_vs_linear
                    .map_or("-".to_string(), |x| format!("{x:.2}"))
            );
        }
        let _ = writeln!(
            s,
            "  {:>9.1}%  {:>10}",
            r.cache_hit_rate * 100.0,
            r.mismatches
        );
    }
    s
}

/// The hidden `--replay-one` mode: one untimed replay, for callgrind.
fn replay_one(which: &str, pop: &Population) -> Result<(), String> {
    let mut d: Box<dyn Demux> = if which == "null" {
        Box::new(replay::NullDemux)
    } else {
        which.parse::<DemuxStrategy>()?.build()
    };
    let lookups = replay::replay_counted(d.as_mut(), &pop.events);
    emit(&format!("{lookups}\n"), false);
    Ok(())
}

/// Runs `demux-sim`.
pub fn run(args: &DemuxSimArgs) -> Result<(), String> {
    let source = load(args)?;
    let pop = population::build(&source.datagrams);
    if let Some(which) = &args.replay_one {
        return replay_one(which, &pop);
    }
    if args.instructions {
        callgrind::check_valgrind()?;
    }
    let json = crate::bench::common::JsonOut::open(args.json.as_deref())?;
    let strategies = selected(args);
    let json_to_stdout = args.json.as_deref() == Some("-");
    let mut report = String::new();
    for line in source
        .notes
        .iter()
        .chain(&population_notes(&pop, source.profile))
    {
        let _ = writeln!(report, "{line}");
    }
    if !args.strategies.is_empty() && !args.strategies.contains(&DemuxStrategy::Linear) {
        let _ = writeln!(report, "(linear added: it is the reference)");
    }
    emit(&report, json_to_stdout);

    let overhead = replay::timer_overhead();
    let reference = replay::reference_answers(&pop.events);
    let expected: Vec<_> = pop
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Lookup { expected, .. } => Some(Some(*expected)),
            _ => None,
        })
        .collect();
    let differing = |answers: &[Option<fastpath::demux::SocketId>], against: &[_]| {
        answers.iter().zip(against).filter(|(a, b)| a != b).count()
    };

    let bar = crate::bench::common::progress(
        u64::from(args.runs.max(1)) * strategies.len() as u64,
        "demux-sim",
    );
    let replays = replay::measure(&strategies, &pop.events, args.runs, overhead, &|| {
        bar.inc(1)
    });
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (&s, r) in strategies.iter().zip(&replays) {
        let lookups = r.answers.len();
        let (chains, chain_min, chain_max) = match &r.initial_chains {
            Some(c) => {
                let (min, max, _) = chain_shape(c);
                (Some(c.len()), Some(min), Some(max))
            }
            None => (None, None, None),
        };
        rows.push(StrategyResult {
            strategy: s.name(),
            trace: source.label.clone(),
            lookups,
            server_share: pop.server_share(),
            initial_pcbs: pop.initial_pcbs,
            mean_comparisons: replay::mean(&r.comparisons),
            p90_comparisons: replay::percentile(&r.comparisons, 90.0),
            mean_ns: replay::mean(&r.ns),
            p90_ns: replay::percentile(&r.ns, 90.0),
            speedup_vs_linear: None,
            mean_instructions: None,
            speedup_instructions_vs_linear: None,
            cache_hits: r.stats.cache_hits,
            cache_hit_rate: if r.stats.lookups > 0 {
                r.stats.cache_hits as f64 / r.stats.lookups as f64
            } else {
                0.0
            },
            mismatches: differing(&r.answers, &reference),
            model_mismatches: differing(&r.answers, &expected),
            chains,
            chain_min,
            chain_max,
        });
    }

    let mut call_overhead = None;
    if args.instructions {
        let lookups = pop.lookups as f64;
        eprintln!(
            "counting instructions with callgrind ({} strategies; this takes a while)",
            strategies.len()
        );
        call_overhead = Some(callgrind::instructions(&source.options, "null")? as f64 / lookups);
        for row in &mut rows {
            eprintln!("  callgrind: {}", row.strategy);
            let ir = callgrind::instructions(&source.options, &row.strategy)?;
            row.mean_instructions = Some(ir as f64 / lookups);
        }
    }
    let linear_ns = rows[0].mean_ns;
    let linear_ir = rows[0].mean_instructions;
    for row in &mut rows {
        row.speedup_vs_linear = ratio(linear_ns, row.mean_ns);
        row.speedup_instructions_vs_linear = match (linear_ir, row.mean_instructions) {
            (Some(base), Some(x)) => ratio(base, x),
            _ => None,
        };
    }

    let mut report = String::new();
    let _ = writeln!(
        report,
        "\nper lookup: comparisons; ns (fastest of {} runs, less {overhead} ns of timer overhead); \
         speed-up over linear from ns",
        args.runs
    );
    if let Some(o) = call_overhead {
        let _ = writeln!(
            report,
            "instructions counted by callgrind inside each lookup call, including {o:.1} of call \
             overhead (an empty strategy's count); speed-up over linear from instructions"
        );
    }
    report.push_str(&table(&rows, args.instructions));
    for row in rows.iter().filter(|r| r.chains.is_some()) {
        let _ = writeln!(
            report,
            "{}: {} chains at the start, non-empty ones min {}, max {}",
            row.strategy,
            row.chains.unwrap_or(0),
            row.chain_min.unwrap_or(0),
            row.chain_max.unwrap_or(0)
        );
    }
    if let Some(p) = source.profile {
        let _ = writeln!(report, "{}", paper_line(p));
    }
    let model = rows.iter().find(|r| r.strategy == "linear");
    if let Some(m) = model.filter(|m| m.model_mismatches > 0) {
        let _ = writeln!(
            report,
            "warning: linear delivered {} lookups elsewhere than the population model says",
            m.model_mismatches
        );
    }
    emit(&report, json_to_stdout);

    if let Some(json) = json {
        json.write(&rows)?;
    }
    let bad: Vec<&str> = rows
        .iter()
        .filter(|r| r.mismatches > 0)
        .map(|r| r.strategy.as_str())
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "answers differ from linear's for: {}",
            bad.join(", ")
        ))
    }
}

/// Prints report text to standard output, or to standard error when JSON goes to standard output. A
/// closed output (`| head`) is not an error worth a panic: what cannot be written is dropped.
pub fn emit(text: &str, to_stderr: bool) {
    if to_stderr {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}
