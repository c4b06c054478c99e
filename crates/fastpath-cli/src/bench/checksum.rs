//! `fastpath bench checksum`: every checksum routine in GB/s, and the fused copy+checksum against a
//! copy alone (Partridge & Pink, paper 000 table 8; Kay & Pasquale, paper 001).

use std::hint::black_box;
use std::time::Instant as WallClock;

use clap::Args;
use fastpath::checksum::{self, Algorithm};
use serde::{Deserialize, Serialize};

use super::common;
use crate::bench::common::{out, outln};

/// Options of `fastpath bench checksum`.
#[derive(Args, Debug)]
pub struct ChecksumArgs {
    /// Rounds; every routine runs once per round, interleaved, and the median is quoted [default: 15;
    /// with --quick: 3].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// A short run (3 rounds, fewer bytes per measurement) for tests and CI; explicit options win over
    /// it: it only fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

impl ChecksumArgs {
    /// The defaults (or the quick run), for `bench all`.
    pub fn for_all(quick: bool) -> ChecksumArgs {
        ChecksumArgs {
            rounds: None,
            quick,
            json: None,
        }
    }
}

/// One row: a routine at one length.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ChecksumRow {
    /// Routine: an algorithm's name, `ipv4-inline`, `memcpy`, `copy-then-checksum` or `copy+checksum`.
    pub algorithm: String,
    /// Bytes per call.
    pub bytes: usize,
    /// Median GB/s (10^9 bytes per second).
    pub gbytes_per_s: f64,
    /// Median ns per byte.
    pub ns_per_byte: f64,
}

/// The lengths measured: a header, small and large datagrams, a jumbo frame, a 64 KiB segment, and
/// 16 MiB (out of cache).
pub const LENGTHS: [usize; 7] = [20, 64, 512, 1500, 8192, 65536, 16 << 20];

/// Partridge & Pink's table 8: copy ns/byte, copy and checksum ns/byte, uncached.
pub const PAPER_TABLE_8: [(&str, f64, f64); 6] = [
    ("HP9000/370", 122.0, 144.0),
    ("Sparcstation1", 164.0, 177.0),
    ("Sparcstation2", 109.0, 109.0),
    ("HP9000/720", 54.0, 54.0),
    ("DECstation 5000/133", 82.5, 99.5),
    ("DECstation 2100", 288.0, 292.0),
];

/// A routine under test: works on `len` bytes of `src` (and `dst`, for copies).
type Routine = fn(&mut [u8], &[u8]);

fn routines() -> Vec<(String, Routine)> {
    let mut v: Vec<(String, Routine)> = Vec::new();
    for alg in Algorithm::ALL {
        if !alg.is_available() {
            continue;
        }
        let f: Routine = match alg {
            Algorithm::Rfc1071 => |_, s| {
                black_box(checksum::rfc1071(s));
            },
            Algorithm::Unrolled32 => |_, s| {
                black_box(checksum::unrolled32(s));
            },
            Algorithm::Wide => |_, s| {
                black_box(checksum::wide(s));
            },
            Algorithm::Avx2 => |_, s| {
                black_box(Algorithm::Avx2.sum(s));
            },
            Algorithm::Avx512 => |_, s| {
                black_box(Algorithm::Avx512.sum(s));
            },
        };
        v.push((alg.name().to_string(), f));
    }
    v.push(("fast".into(), |_, s| {
        black_box(checksum::fast(s));
    }));
    v.push(("memcpy".into(), |d, s| {
        d.copy_from_slice(s);
        black_box(&d);
    }));
    v.push(("copy-then-checksum".into(), |d, s| {
        d.copy_from_slice(s);
        black_box(checksum::fast(d));
    }));
    v.push(("copy+checksum".into(), |d, s| {
        black_box(checksum::copy_and_sum(d, s));
    }));
    // Each vector width's fused loop on its own, so the two can be compared where both run.
    if Algorithm::Avx2.is_available() {
        v.push(("copy+checksum avx2".into(), |d, s| {
            black_box(Algorithm::Avx2.copy_and_sum(d, s));
        }));
    }
    if Algorithm::Avx512.is_available() {
        v.push(("copy+checksum avx512".into(), |d, s| {
            black_box(Algorithm::Avx512.copy_and_sum(d, s));
        }));
    }
    v
}

/// The offset into the destination buffer at which copies land: 8 bytes past a 32-byte boundary, and
/// 2048 + 8 bytes past the source modulo 4096.
fn dst_offset(src: usize, dst: usize) -> usize {
    let want = (src + 2048 + 8) % 4096;
    (want + 4096 - dst % 4096) % 4096
}

/// Runs the experiment and returns its rows (also used by `bench all`).
pub fn measure(args: &ChecksumArgs) -> Result<Vec<ChecksumRow>, String> {
    let rounds = args.rounds.unwrap_or(if args.quick { 3 } else { 15 });
    // Bytes processed per measurement: enough that a timer read is noise.
    let per_measure: usize = if args.quick { 1 << 20 } else { 64 << 20 };
    let big = 16 << 20;
    let mut src = vec![0u8; big + 64];
    fastpath::rng::Rng::new(8).fill(&mut src);
    let mut dst = vec![0u8; big + 8192];
    dst.fill(1);
    let routines = routines();
    let bar = common::progress((rounds * LENGTHS.len()) as u64, "bench checksum");
    let mut samples = vec![vec![Vec::new(); routines.len() + 1]; LENGTHS.len()];
    for _ in 0..rounds {
        for (li, &len) in LENGTHS.iter().enumerate() {
            let iters = (per_measure / len).max(2);
            // Copies go to an address 8 bytes past a 32-byte boundary, as a packet payload would, and
            // half a page away from the source modulo 4096: with both at the same page offset, loads
            // alias earlier stores ("4K aliasing") and some memcpy implementations slow down tenfold.
            let d0 = dst_offset(src.as_ptr() as usize, dst.as_ptr() as usize);
            for (ri, (_, f)) in routines.iter().enumerate() {
                let t = WallClock::now();
                for _ in 0..iters {
                    f(&mut dst[d0..d0 + len], black_box(&src[..len]));
                }
                samples[li][ri].push(t.elapsed().as_secs_f64() / (iters * len) as f64);
            }
            if len == 20 {
                let h: [u8; 20] = src[..20].try_into().expect("20 bytes");
                let t = WallClock::now();
                for _ in 0..iters {
                    black_box(checksum::ipv4_header_sum(black_box(&h)));
                }
                samples[li][routines.len()].push(t.elapsed().as_secs_f64() / (iters * len) as f64);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (li, &len) in LENGTHS.iter().enumerate() {
        let names = routines
            .iter()
            .map(|(n, _)| n.clone())
            .chain(std::iter::once("ipv4-inline".to_string()));
        for (ri, name) in names.enumerate() {
            if samples[li][ri].is_empty() {
                continue;
            }
            let secs_per_byte = common::median(&samples[li][ri]);
            rows.push(ChecksumRow {
                algorithm: name,
                bytes: len,
                gbytes_per_s: 1e-9 / secs_per_byte,
                ns_per_byte: secs_per_byte * 1e9,
            });
        }
    }
    Ok(rows)
}

fn label(len: usize) -> String {
    match len {
        n if n >= 1 << 20 => format!("{} MiB", n >> 20),
        n => format!("{n}"),
    }
}

/// Prints the throughput table and the table-8 comparison.
pub fn print(rows: &[ChecksumRow]) {
    out!("{:<20}", "GB/s");
    for len in LENGTHS {
        out!("{:>9}", label(len));
    }
    outln!();
    let names = common::distinct(rows.iter().map(|r| r.algorithm.as_str()));
    for name in names {
        out!("{name:<20}");
        for len in LENGTHS {
            match rows.iter().find(|r| r.algorithm == name && r.bytes == len) {
                Some(r) => out!("{:>9.2}", r.gbytes_per_s),
                None => out!("{:>9}", "-"),
            }
        }
        outln!();
    }
    outln!("\nfused copy+checksum against a copy alone (paper 000 table 8 layout):");
    outln!(
        "{:<28}{:>14}{:>26}{:>18}",
        "",
        "copy ns/byte",
        "copy and checksum ns/byte",
        "additional cost"
    );
    for len in [1500, 65536, 16 << 20] {
        let find = |n: &str| {
            rows.iter()
                .find(|r| r.algorithm == n && r.bytes == len)
                .map(|r| r.ns_per_byte)
        };
        if let (Some(copy), Some(fused), Some(separate)) = (
            find("memcpy"),
            find("copy+checksum"),
            find("copy-then-checksum"),
        ) {
            outln!(
                "{:<28}{:>14.4}{:>26.4}{:>17.0}%   (copy then checksum: {:.0}%)",
                format!("fastpath, {} bytes", label(len)),
                copy,
                fused,
                (fused / copy - 1.0) * 100.0,
                (separate / copy - 1.0) * 100.0
            );
        }
    }
    for (system, copy, both) in PAPER_TABLE_8 {
        outln!(
            "{:<28}{:>14.1}{:>26.1}{:>17.0}%",
            format!("paper: {system}"),
            copy,
            both,
            (both / copy - 1.0) * 100.0
        );
    }
}

/// `fastpath bench checksum`.
pub fn run(args: &ChecksumArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header("bench checksum: Internet checksum routines and the fused copy (papers 000 §7 and table 8, 001)");
    let rows = measure(args)?;
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
