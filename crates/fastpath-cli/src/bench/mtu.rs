//! `fastpath bench mtu`: bulk UDP and TCP between two stacks at MTUs from 1500 to 65535 bytes, with and
//! without each data-path optimization (Chase, Gallatin & Yocum, paper 002 figures 2 and 3).
//!
//! UDP: each datagram fills one packet (MTU - 28 bytes of payload). TCP: one connection, the MSS from
//! the MTU; `zero-copy` there means the application fills the send buffer in place and reads received
//! data from the buffers it arrived in (one copy remains, out of the send buffer into the segment, because
//! the data must stay until acknowledged; it is the one fused with the checksum). The options: `none` (copy, then checksum in
//! a separate pass, on both sides); `fused` (copy and checksum in one loop); `offload` (the link takes
//! the checksum: copies only); `zero-copy` (the application writes into and reads from the stack's
//! buffers, which are checksummed in software); `offload+zero-copy` (the stack touches no payload byte
//! at all). Each runs twice: as is, and with the application touching every byte it sends and receives,
//! as a real application does. Built with `--features instrument`, the CPU time per byte is also split
//! by category, as in the paper's figure 3.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant as WallClock;

use clap::Args;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{CopyChecksum, Instant, Ipv4Cidr, Stack, StackConfig};
use serde::{Deserialize, Serialize};

use super::common;
use crate::bench::common::{out, outln};

/// Options of `fastpath bench mtu`.
#[derive(Args, Debug)]
pub struct MtuArgs {
    /// MTUs to measure, 576 to 65535.
    #[arg(long, value_delimiter = ',', default_values_t = [1500usize, 4096, 8192, 16384, 32768, 65535],
          value_parser = common::parse_mtu)]
    mtus: Vec<usize>,
    /// Protocols to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("udp"), String::from("tcp")],
          value_parser = ["udp", "tcp"])]
    protocols: Vec<String>,
    /// MiB of payload per measurement [default: 256; with --quick: 8].
    #[arg(long, value_parser = common::count(1, 1 << 20))]
    mib: Option<usize>,
    /// Rounds; the median is quoted [default: 5; with --quick: 3].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// A short run (8 MiB, 3 rounds) for tests and CI; explicit options win over it: it only fills in
    /// what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

impl MtuArgs {
    /// The defaults (or the quick run), for `bench all`.
    pub fn for_all(quick: bool) -> MtuArgs {
        MtuArgs {
            mtus: vec![1500, 4096, 8192, 16384, 32768, 65535],
            protocols: vec!["udp".into(), "tcp".into()],
            mib: None,
            rounds: None,
            quick,
            json: None,
        }
    }

    /// MTUs measured.
    pub fn mtus(&self) -> &[usize] {
        &self.mtus
    }
}

/// The protocol of rows written before TCP was measured.
fn udp() -> String {
    "udp".into()
}

/// One row.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct MtuRow {
    /// `udp` or `tcp` (`udp` in rows written before TCP was measured).
    #[serde(default = "udp")]
    pub protocol: String,
    /// Link MTU.
    pub mtu: usize,
    /// The optimizations (and `+touch` when the application touches every byte).
    pub options: String,
    /// Median payload throughput, Gbit/s.
    pub gbit_per_s: f64,
    /// CPU ns per payload byte, sender and receiver together (one thread does both).
    pub ns_per_byte: f64,
    /// With the `instrument` feature: ns per byte by category (checksum, copy, copy+checksum, buffers,
    /// other protocol processing), sender and receiver together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub categories: Option<Categories>,
}

/// CPU ns per byte by category.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default)]
pub struct Categories {
    /// Checksumming.
    pub checksum: f64,
    /// Copying.
    pub copy: f64,
    /// Fused copy and checksum.
    pub copy_checksum: f64,
    /// Buffer allocation and freeing.
    pub buffers: f64,
    /// Everything else inside the stack.
    pub protocol: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Options {
    fused: bool,
    offload: bool,
    zero_copy: bool,
}

const OPTIONS: [(&str, Options); 5] = [
    (
        "none",
        Options {
            fused: false,
            offload: false,
            zero_copy: false,
        },
    ),
    (
        "fused",
        Options {
            fused: true,
            offload: false,
            zero_copy: false,
        },
    ),
    (
        "offload",
        Options {
            fused: false,
            offload: true,
            zero_copy: false,
        },
    ),
    (
        "zero-copy",
        Options {
            fused: false,
            offload: false,
            zero_copy: true,
        },
    ),
    (
        "offload+zero-copy",
        Options {
            fused: false,
            offload: true,
            zero_copy: true,
        },
    ),
];

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Two stacks, A and B, on an in-memory pair of `mtu` with option set `o`'s checksum choices, sharing
/// free buffers.
fn pair_stacks(mtu: usize, o: Options) -> (Stack, Stack) {
    let config = StackConfig {
        copy_checksum: if o.fused {
            CopyChecksum::Fused
        } else {
            CopyChecksum::Separate
        },
        ..StackConfig::default()
    };
    let caps = LinkCapabilities {
        tx_checksum_offload: o.offload,
        ..LinkCapabilities::plain(mtu)
    };
    let (ea, eb) = PairEnd::pair(caps, 4096, Impairments::default());
    let mut a = Stack::new(config.clone());
    a.add_interface("pair0", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config);
    b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    (a, b)
}

/// Moves `bytes` of payload from A to B; returns seconds and, when instrumented, the category cycles.
fn run_once(
    mtu: usize,
    o: Options,
    touch: bool,
    bytes: usize,
) -> Result<(f64, Option<[u64; 5]>), String> {
    let (mut a, mut b) = pair_stacks(mtu, o);
    let tx = a
        .udp_bind(SocketAddrV4::new(A, 0))
        .map_err(|e| e.to_string())?;
    let rx = b
        .udp_bind_with(
            SocketAddrV4::new(B, 9),
            fastpath::UdpOptions {
                recv_buffer_bytes: Some(64 << 20),
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
    let to = SocketAddrV4::new(B, 9);
    let size = mtu - 28;
    let count = bytes.div_ceil(size);
    let mut src = vec![0u8; size];
    let mut sink = vec![0u8; size];
    let mut check = 0u64;
    let mut received = 0usize;
    // Warm up: fill the buffer pools and queues before the clock starts.
    for _ in 0..8 {
        for _ in 0..32 {
            a.udp(tx).send_to(&src, to).map_err(|e| e.to_string())?;
        }
        a.poll(Instant::ZERO);
        b.poll(Instant::ZERO);
        while b.udp(rx).recv(&mut sink).is_ok() {}
    }
    #[cfg(feature = "instrument")]
    fastpath::instrument::take();
    let started = WallClock::now();
    let mut sent = 0;
    while sent < count {
        let burst = 32.min(count - sent);
        for k in 0..burst {
            let stamp = (sent + k) as u64;
            if o.zero_copy {
                a.udp(tx).send_to_with(size, to, |buf| {
                    if touch {
                        write_words(buf, stamp);
                    }
                })
            } else {
                if touch {
                    write_words(&mut src, stamp);
                }
                a.udp(tx).send_to(&src, to)
            }
            .map_err(|e| e.to_string())?;
        }
        sent += burst;
        a.poll(Instant::ZERO);
        b.poll(Instant::ZERO);
        loop {
            let got = if o.zero_copy {
                b.udp(rx).recv_from_with(|p, _| {
                    if touch {
                        check = check.wrapping_add(read_words(p))
                    }
                })
            } else {
                b.udp(rx).recv(&mut sink).map(|n| {
                    if touch {
                        check = check.wrapping_add(read_words(&sink[..n]));
                    }
                })
            };
            if got.is_err() {
                break;
            }
            received += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    std::hint::black_box(check);
    if received != count {
        return Err(format!(
            "MTU {mtu}: {received} of {count} datagrams arrived\n{}",
            b.counters()
        ));
    }
    Ok((secs, categories()))
}

/// Moves `bytes` over one TCP connection from A to B; returns seconds and, when instrumented, the
/// category cycles.
fn run_once_tcp(
    mtu: usize,
    o: Options,
    touch: bool,
    bytes: usize,
) -> Result<(f64, Option<[u64; 5]>), String> {
    let (mut a, mut b) = pair_stacks(mtu, o);
    a.poll(Instant::now());
    b.poll(Instant::now());
    let l = b
        .tcp_listen(SocketAddrV4::new(B, 9), 4)
        .map_err(|e| e.to_string())?;
    let c = a
        .tcp_connect(SocketAddrV4::new(B, 9))
        .map_err(|e| e.to_string())?;
    let s = loop {
        a.poll(Instant::now());
        b.poll(Instant::now());
        if let Ok((s, _)) = b.tcp_listener(l).accept() {
            break s;
        }
    };
    let mut src = vec![0u8; 1 << 16];
    let mut sink = vec![0u8; 1 << 16];
    let mut check = 0u64;
    #[cfg(feature = "instrument")]
    fastpath::instrument::take();
    let started = WallClock::now();
    let (mut sent, mut received) = (0usize, 0usize);
    let deadline = started + std::time::Duration::from_secs(120);
    while received < bytes {
        while sent < bytes {
            let max = (bytes - sent).min(src.len());
            let stamp = sent as u64;
            let n = if o.zero_copy {
                a.tcp(c).write_with(max, |buf| {
                    if touch {
                        write_words(buf, stamp);
                    }
                    buf.len()
                })
            } else {
                if touch {
                    write_words(&mut src[..max], stamp);
                }
                a.tcp(c).write(&src[..max])
            };
            match n {
                Ok(0) | Err(_) => break,
                Ok(n) => sent += n,
            }
        }
        a.poll(Instant::now());
        b.poll(Instant::now());
        loop {
            let got = if o.zero_copy {
                b.tcp(s).read_with(|d| {
                    if touch {
                        check = check.wrapping_add(read_words(d));
                    }
                    d.len()
                })
            } else {
                b.tcp(s).read(&mut sink).inspect(|&n| {
                    if touch {
                        check = check.wrapping_add(read_words(&sink[..n]));
                    }
                })
            };
            match got {
                Ok(n) if n > 0 => received += n,
                _ => break,
            }
        }
        if WallClock::now() > deadline {
            return Err(format!(
                "MTU {mtu} TCP: {received} of {bytes} bytes arrived"
            ));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    std::hint::black_box(check);
    Ok((secs, categories()))
}

/// With the `instrument` feature, the cycles since the last take by category (checksum, copy,
/// copy+checksum, buffers, other protocol work), both sides together.
fn categories() -> Option<[u64; 5]> {
    #[cfg(feature = "instrument")]
    {
        let p = fastpath::instrument::take();
        let ops = |op: usize| p.ops[0][op] + p.ops[1][op];
        let total: u64 = p.layers.iter().flatten().sum();
        let named: u64 = (0..4).map(ops).sum();
        return Some([ops(0), ops(1), ops(2), ops(3), total.saturating_sub(named)]);
    }
    #[allow(unreachable_code)]
    None
}

/// The application writing every 8-byte word of a datagram it sends.
fn write_words(buf: &mut [u8], stamp: u64) {
    let mut words = buf.chunks_exact_mut(8);
    for (i, w) in (&mut words).enumerate() {
        w.copy_from_slice(&(stamp ^ i as u64).to_le_bytes());
    }
    words.into_remainder().fill(stamp as u8);
}

/// The application reading every byte of a datagram it received.
fn read_words(buf: &[u8]) -> u64 {
    let words = buf.chunks_exact(8);
    let tail = words.remainder().iter().map(|&b| b as u64).sum::<u64>();
    words.fold(tail, |acc, w| {
        acc.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")))
    })
}

/// Runs the experiment and returns its rows (also used by `bench all`).
pub fn measure(args: &MtuArgs) -> Result<Vec<MtuRow>, String> {
    let (mib, rounds) = if args.quick { (8, 3) } else { (256, 5) };
    let (bytes, rounds) = (args.mib.unwrap_or(mib) << 20, args.rounds.unwrap_or(rounds));
    for p in &args.protocols {
        if p != "udp" && p != "tcp" {
            return Err(format!("unknown protocol `{p}` (udp or tcp)"));
        }
    }
    let cases: Vec<(bool, usize, &str, Options, bool)> = args
        .protocols
        .iter()
        .flat_map(|p| {
            let tcp = p == "tcp";
            args.mtus.iter().flat_map(move |&m| {
                OPTIONS
                    .iter()
                    .flat_map(move |&(n, o)| [(tcp, m, n, o, false), (tcp, m, n, o, true)])
            })
        })
        .collect();
    for &(tcp, mtu, ..) in &cases {
        let min = if tcp { 576 } else { 68 };
        if !(min..=65535).contains(&mtu) {
            return Err(format!("MTU {mtu} is outside {min}..=65535"));
        }
    }
    let bar = common::progress((rounds * cases.len()) as u64, "bench mtu");
    let mut samples: Vec<Vec<(f64, Option<[u64; 5]>)>> = vec![Vec::new(); cases.len()];
    for _ in 0..rounds {
        for (i, &(tcp, mtu, _, o, touch)) in cases.iter().enumerate() {
            let run = if tcp { run_once_tcp } else { run_once };
            samples[i].push(run(mtu, o, touch, bytes)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let hz = common::cycles_per_ns();
    let rows = cases
        .iter()
        .zip(&samples)
        .map(|(&(tcp, mtu, name, _, touch), s)| {
            let secs = common::median(&s.iter().map(|x| x.0).collect::<Vec<_>>());
            let categories = s[0].1.map(|_| {
                let per_byte = |k: usize| {
                    common::median(
                        &s.iter()
                            .map(|x| x.1.map_or(0.0, |c| c[k] as f64))
                            .collect::<Vec<_>>(),
                    ) / hz
                        / bytes as f64
                };
                Categories {
                    checksum: per_byte(0),
                    copy: per_byte(1),
                    copy_checksum: per_byte(2),
                    buffers: per_byte(3),
                    protocol: per_byte(4),
                }
            });
            MtuRow {
                protocol: if tcp { "tcp" } else { "udp" }.to_string(),
                mtu,
                options: if touch {
                    format!("{name}+touch")
                } else {
                    name.to_string()
                },
                gbit_per_s: bytes as f64 * 8.0 / secs / 1e9,
                ns_per_byte: secs * 1e9 / bytes as f64,
                categories,
            }
        })
        .collect();
    Ok(rows)
}

/// Prints Gbit/s by MTU and option, and the breakdown when there is one.
pub fn print(rows: &[MtuRow], mtus: &[usize]) {
    for protocol in common::distinct(rows.iter().map(|r| r.protocol.as_str())) {
        out!(
            "{:<24}",
            format!("{} Gbit/s of payload", protocol.to_uppercase())
        );
        for m in mtus {
            out!("{:>9}", m);
        }
        outln!();
        let mine: Vec<&MtuRow> = rows.iter().filter(|r| r.protocol == protocol).collect();
        let names = common::distinct(mine.iter().map(|r| r.options.as_str()));
        for name in &names {
            out!("{name:<24}");
            for m in mtus {
                let r = mine
                    .iter()
                    .find(|r| r.options == *name && r.mtu == *m)
                    .expect("row");
                out!("{:>9.2}", r.gbit_per_s);
            }
            outln!();
        }
        outln!();
    }
    outln!("\n(one thread runs sender and receiver; ns/byte = 8 / Gbit/s)");
    if rows.iter().any(|r| r.categories.is_some()) {
        outln!("\nCPU ns per byte by category (sender + receiver), paper 002 figure 3:");
        outln!(
            "{:<32}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
            "",
            "checksum",
            "copy",
            "copy+ck",
            "buffers",
            "protocol",
            "total"
        );
        for r in rows.iter().filter(|r| !r.options.ends_with("touch")) {
            let c = r.categories.expect("instrumented");
            outln!(
                "{:<32}{:>9.3}{:>9.3}{:>9.3}{:>9.3}{:>9.3}{:>9.3}",
                format!("{} MTU {} {}", r.protocol, r.mtu, r.options),
                c.checksum,
                c.copy,
                c.copy_checksum,
                c.buffers,
                c.protocol,
                r.ns_per_byte
            );
        }
    } else {
        outln!("(build with `--features instrument` for the CPU breakdown by category, paper 002 figure 3)");
    }
    outln!("\npaper 002 §4.2: with 1500-byte MTUs TCP never exceeded 740 Mb/s; 8 KB was the sweet spot; zero-copy");
    outln!("and checksum offload together reached 2 Gb/s, limited by the NIC (Myrinet, 2001).");
}

/// `fastpath bench mtu`.
pub fn run(args: &MtuArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header("bench mtu: bulk UDP and TCP over the in-memory pair by MTU and data-path optimization (paper 002 §4)");
    let rows = measure(args)?;
    print(&rows, &args.mtus);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
