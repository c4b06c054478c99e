//! `fastpath bench sweep`: where the time goes, by message size (Kay & Pasquale, paper 001 figures 1-10;
//! paper 004).
//!
//! A client sends a message to the host under test, which sends the same message back, for 40 message
//! sizes from 1 to 8192 bytes over a link with MTU 1500 (larger messages are fragmented). The time per
//! message is given for the send side and the receive side; built with `--features instrument`, it is
//! split by operation (checksum, copy, fused copy+checksum, buffers, other) and by layer (socket, UDP,
//! IP, link), as in the paper's figures. Then the paper's table 1: one-way throughput of 8192-byte
//! messages with the checksum as 4.3BSD computed it, optimized, and eliminated.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant as WallClock;

use clap::Args;
use fastpath::checksum::Algorithm;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{CopyChecksum, Instant, Ipv4Cidr, Stack, StackConfig, UdpOptions};
use serde::{Deserialize, Serialize};

use super::common;
use crate::bench::common::outln;

/// Options of `fastpath bench sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Round trips per size per round (the paper repeated each message 100 times) [default: 2000;
    /// with --quick: 100].
    #[arg(long, value_parser = common::count(1, u32::MAX as u64))]
    round_trips: Option<usize>,
    /// Rounds; the median is quoted [default: 5; with --quick: 3].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Link MTU, 576 to 65535.
    #[arg(long, default_value_t = 1500, value_parser = common::parse_mtu)]
    mtu: usize,
    /// Measure the 4.3BSD `classic` configuration instead of the default.
    #[arg(long)]
    classic: bool,
    /// A short run (100 round trips, 3 rounds) for tests and CI; explicit options win over it: it only
    /// fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

impl SweepArgs {
    /// The defaults (or the quick run), for `bench all`.
    pub fn for_all(quick: bool) -> SweepArgs {
        SweepArgs {
            round_trips: None,
            rounds: None,
            mtu: 1500,
            classic: false,
            quick,
            json: None,
        }
    }
}

/// One row: a message size and side, or a throughput measurement.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct SweepRow {
    /// `per-message` or `throughput`.
    pub table: String,
    /// Message size in bytes.
    pub size: usize,
    /// `send` or `receive` (per-message rows).
    pub side: String,
    /// Median ns per message on this side (per-message rows).
    pub ns_per_message: f64,
    /// With `instrument`: ns per message by operation: checksum, copy, copy+checksum, buffers, other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_ns: Option<[f64; 5]>,
    /// With `instrument`: ns per message by layer: socket, udp, ip, link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers_ns: Option<[f64; 4]>,
    /// `classic`, `optimized` or `eliminated` (throughput rows).
    pub checksum: String,
    /// MB/s (10^6 bytes per second) of payload (throughput rows).
    pub mbytes_per_s: f64,
}

/// The 40 message sizes: 1 byte, then 39 steps up to 8192.
pub fn sizes() -> Vec<usize> {
    std::iter::once(1)
        .chain((1..40).map(|k| (8192 * k + 19) / 39))
        .collect()
}

/// Instrumented cycles per side: the four operations, other, then the four layers.
type Cycles = [[u64; 9]; 2];

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn stacks(config: &StackConfig, mtu: usize) -> (Stack, Stack) {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(mtu), 4096, Impairments::default());
    let mut a = Stack::new(config.clone());
    a.add_interface("pair0", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config.clone());
    b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    (a, b)
}

fn settle(a: &mut Stack, b: &mut Stack) {
    while a.poll(Instant::ZERO) + b.poll(Instant::ZERO) > 0 {}
}

/// One round of `n` round trips of `size` bytes: ns per message, and the instrumented profile.
fn round_trips(
    config: &StackConfig,
    mtu: usize,
    size: usize,
    n: usize,
) -> Result<(f64, Option<Cycles>), String> {
    let (mut a, mut b) = stacks(config, mtu);
    let client = a
        .udp_bind(SocketAddrV4::new(A, 0))
        .map_err(|e| e.to_string())?;
    let server = b
        .udp_bind(SocketAddrV4::new(B, 7))
        .map_err(|e| e.to_string())?;
    let echo = SocketAddrV4::new(B, 7);
    let msg = vec![0x42u8; size];
    let mut buf = vec![0u8; 8192];
    let mut once = |a: &mut Stack, b: &mut Stack| -> Result<(), String> {
        a.udp(client)
            .send_to(&msg, echo)
            .map_err(|e| e.to_string())?;
        settle(a, b);
        let (n, from) = b
            .udp(server)
            .recv_from(&mut buf)
            .map_err(|e| format!("server: {e}"))?;
        b.udp(server)
            .send_to(&buf[..n], from)
            .map_err(|e| e.to_string())?;
        settle(a, b);
        let m = a
            .udp(client)
            .recv(&mut buf)
            .map_err(|e| format!("client: {e}"))?;
        if m != size {
            return Err(format!("echo of {size} bytes came back with {m}"));
        }
        Ok(())
    };
    for _ in 0..10 {
        once(&mut a, &mut b)?;
    }
    #[cfg(feature = "instrument")]
    fastpath::instrument::take();
    let started = WallClock::now();
    for _ in 0..n {
        once(&mut a, &mut b)?;
    }
    let ns = started.elapsed().as_nanos() as f64 / (2 * n) as f64;
    #[cfg(feature = "instrument")]
    {
        let p = fastpath::instrument::take();
        let mut out: Cycles = [[0; 9]; 2];
        for ((o, ops), layers) in out.iter_mut().zip(&p.ops).zip(&p.layers) {
            o[..4].copy_from_slice(ops);
            o[4] = layers.iter().sum::<u64>().saturating_sub(ops.iter().sum());
            // The sweep is UDP: the TCP layer (the fifth) stays empty.
            o[5..].copy_from_slice(&layers[..4]);
        }
        return Ok((ns, Some(out)));
    }
    #[allow(unreachable_code)]
    Ok((ns, None))
}

/// One-way throughput of `size`-byte messages, MB/s.
fn throughput(
    config: &StackConfig,
    no_checksum: bool,
    mtu: usize,
    size: usize,
    n: usize,
) -> Result<f64, String> {
    let (mut a, mut b) = stacks(config, mtu);
    let opts = UdpOptions {
        no_checksum,
        ..UdpOptions::default()
    };
    let tx = a
        .udp_bind_with(SocketAddrV4::new(A, 0), opts)
        .map_err(|e| e.to_string())?;
    let rx = b
        .udp_bind_with(
            SocketAddrV4::new(B, 9),
            UdpOptions {
                recv_buffer_bytes: Some(64 << 20),
                ..opts
            },
        )
        .map_err(|e| e.to_string())?;
    let to = SocketAddrV4::new(B, 9);
    let msg = vec![0x17u8; size];
    let mut buf = vec![0u8; size];
    let started = WallClock::now();
    let (mut sent, mut got) = (0, 0);
    while sent < n {
        for _ in 0..16.min(n - sent) {
            a.udp(tx).send_to(&msg, to).map_err(|e| e.to_string())?;
            sent += 1;
        }
        settle(&mut a, &mut b);
        while b.udp(rx).recv(&mut buf).is_ok() {
            got += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if got != n {
        return Err(format!("{got} of {n} messages arrived"));
    }
    Ok((n * size) as f64 / secs / 1e6)
}

/// Runs the experiment and returns its rows (also used by `bench all`).
pub fn measure(args: &SweepArgs) -> Result<Vec<SweepRow>, String> {
    let (n, rounds) = if args.quick { (100, 3) } else { (2000, 5) };
    let (n, rounds) = (args.round_trips.unwrap_or(n), args.rounds.unwrap_or(rounds));
    let config = if args.classic {
        StackConfig::classic()
    } else {
        StackConfig::default()
    };
    let sizes = sizes();
    let bar = common::progress((rounds * (sizes.len() + 3)) as u64, "bench sweep");
    let mut samples: Vec<Vec<(f64, Option<Cycles>)>> = vec![Vec::new(); sizes.len()];
    let variants = [
        (
            "classic",
            StackConfig {
                checksum: Algorithm::Rfc1071,
                copy_checksum: CopyChecksum::Separate,
                ..StackConfig::default()
            },
            false,
        ),
        ("optimized", StackConfig::default(), false),
        ("eliminated", StackConfig::default(), true),
    ];
    let mut tput = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (i, &size) in sizes.iter().enumerate() {
            samples[i].push(round_trips(&config, args.mtu, size, n)?);
            bar.inc(1);
        }
        for (i, (_, c, elim)) in variants.iter().enumerate() {
            tput[i].push(throughput(c, *elim, args.mtu, 8192, n * 10)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let hz = common::cycles_per_ns();
    let mut rows = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let s = &samples[i];
        let total = common::median(&s.iter().map(|x| x.0).collect::<Vec<_>>());
        for (side, name) in ["send", "receive"].into_iter().enumerate() {
            let part = |k: usize| {
                common::median(
                    &s.iter()
                        .map(|x| x.1.map_or(0.0, |p| p[side][k] as f64))
                        .collect::<Vec<_>>(),
                ) / hz
                    / (2 * n) as f64
            };
            let instrumented = s[0].1.is_some();
            let ops = instrumented.then(|| [part(0), part(1), part(2), part(3), part(4)]);
            let layers = instrumented.then(|| [part(5), part(6), part(7), part(8)]);
            let side_ns = layers.map_or(total / 2.0, |l| l.iter().sum());
            rows.push(SweepRow {
                table: "per-message".into(),
                size,
                side: name.into(),
                ns_per_message: side_ns,
                ops_ns: ops,
                layers_ns: layers,
                ..SweepRow::default()
            });
        }
    }
    for (i, (name, _, _)) in variants.iter().enumerate() {
        rows.push(SweepRow {
            table: "throughput".into(),
            size: 8192,
            checksum: name.to_string(),
            mbytes_per_s: common::median(&tput[i]),
            ..SweepRow::default()
        });
    }
    Ok(rows)
}

/// Prints the per-message and throughput tables.
pub fn print(rows: &[SweepRow]) {
    let per: Vec<&SweepRow> = rows.iter().filter(|r| r.table == "per-message").collect();
    let instrumented = per.iter().any(|r| r.ops_ns.is_some());
    if instrumented {
        outln!("ns per message by operation (paper 001 figures 1-5) and by layer (figures 6-10)");
        outln!(
            "{:>6} {:<8}{:>9}{:>9}{:>9}{:>9}{:>9}  |{:>8}{:>8}{:>8}{:>8}  | non-data-touching",
            "size",
            "side",
            "checksum",
            "copy",
            "copy+ck",
            "buffers",
            "other",
            "socket",
            "udp",
            "ip",
            "link"
        );
        for r in &per {
            let o = r.ops_ns.expect("instrumented");
            let l = r.layers_ns.expect("instrumented");
            let touching = o[0] + o[1] + o[2];
            let share = 100.0 * (1.0 - touching / r.ns_per_message.max(f64::MIN_POSITIVE));
            outln!(
                "{:>6} {:<8}{:>9.1}{:>9.1}{:>9.1}{:>9.1}{:>9.1}  |{:>8.1}{:>8.1}{:>8.1}{:>8.1}  | {:>5.0}%",
                r.size, r.side, o[0], o[1], o[2], o[3], o[4], l[0], l[1], l[2], l[3], share
            );
        }
        let shares: Vec<f64> = per
            .iter()
            .map(|r| {
                let o = r.ops_ns.expect("instrumented");
                1.0 - (o[0] + o[1] + o[2]) / r.ns_per_message.max(f64::MIN_POSITIVE)
            })
            .collect();
        outln!(
            "non-data-touching share of stack time, mean over the 40 sizes: {:.0}% (paper 004: 60% for UDP over a realistic size mix)",
            100.0 * shares.iter().sum::<f64>() / shares.len() as f64
        );
    } else {
        outln!("ns per message (half a round trip); build with `--features instrument` for the split by operation and layer");
        outln!("{:>6}{:>14}", "size", "ns/message");
        for r in per.iter().filter(|r| r.side == "send") {
            outln!("{:>6}{:>14.1}", r.size, 2.0 * r.ns_per_message);
        }
    }
    outln!("\none-way throughput, 8192-byte messages (paper 001 table 1 layout):");
    let t: Vec<&SweepRow> = rows.iter().filter(|r| r.table == "throughput").collect();
    let base = t.first().map_or(1.0, |r| r.mbytes_per_s);
    for r in &t {
        outln!(
            "  checksum {:<11}{:>10.0} MB/s ({:+.0}%)",
            r.checksum,
            r.mbytes_per_s,
            (r.mbytes_per_s / base - 1.0) * 100.0
        );
    }
    outln!("  paper 001, UDP on a DECstation 5000/200: unmodified 2.4 MB/s, optimized checksum 3.2 (+33%), eliminated 4.1 (+71%)");
}

/// `fastpath bench sweep`.
pub fn run(args: &SweepArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header("bench sweep: request/response over 40 message sizes, time by operation and layer (papers 001, 004)");
    let rows = measure(args)?;
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
