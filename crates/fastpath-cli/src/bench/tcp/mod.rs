//! `fastpath bench tcp`: TCP bulk throughput and request/response rates.
//!
//! Three parts, each interleaved by rounds, medians quoted:
//!
//! - **pair**: fastpath to fastpath over the in-memory pair, one thread polling both stacks, a bulk
//!   transfer at each MTU with paper 002's options: `classic` (the 4.3BSD configuration: no header
//!   prediction, separate RFC 1071 checksums), `default` (checksums computed, fused with the copy
//!   out of the send buffer; received data handed over in place), `offload` (the link completes
//!   and vouches for checksums: no checksum work on the host). Gbit/s and CPU ns per byte (both stacks
//!   together, since one thread runs both).
//! - **tun** (root): a kernel client in a namespace sends bulk to a discard server: fastpath behind a
//!   TUN interface with offload (checksum and TSO) on and off, its writes through io_uring as by
//!   default and, in rows of their own, a `write` per packet; smoltcp 0.14 behind the same kind of
//!   TUN interface, and the kernel itself over a veth pair. Gbit/s and the ratio to the kernel.
//! - **rr** (root): the kernel client's 64-byte request/response transactions per second with 1 and
//!   100 connections, against fastpath's and smoltcp's echo over TUN and the kernel's over veth.
//!
//! Beside the stacks the TUN parts run the **ceiling** ([`super::ceiling`]), a stateless responder
//! that writes one reply per packet it reads and does nothing else: for request/response, the most
//! any stack that reads and writes the device a packet at a time could reach here; a second one hands
//! its replies over in one `io_uring_enter` a batch, as fastpath does by default. For bulk it is no
//! bound (it acknowledges every segment, where a stack may acknowledge less often and so spare the
//! kernel sender work). With `--queues N`, the several-streams bulk and request/response also run
//! against fastpath and the ceiling with N queues.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use serde::Serialize;

use super::common;
use crate::bench::common::outln;

/// Echo sockets the smoltcp server keeps listening (one per connection, as smoltcp accepts).
const ECHO_SOCKETS: usize = 128;

/// Options of `fastpath bench tcp`.
#[derive(Args, Debug)]
pub struct TcpArgs {
    /// Seconds per TUN measurement, 0.05 to 3600 [default: 1; with --quick: 0.2].
    #[arg(long, value_parser = common::parse_measure_seconds)]
    seconds: Option<f64>,
    /// Rounds; the median is quoted [default: 5; with --quick: 1].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// MTUs of the in-memory pair, 576 to 65535 (576: the packet every IPv4 host takes and TCP's
    /// default MSS of 536 assumes, room for the headers, options and payload).
    #[arg(long, value_delimiter = ',', default_values_t = [1500usize, 9000, 65535],
          value_parser = common::parse_mtu)]
    mtus: Vec<usize>,
    /// MiB per pair transfer [default: 64; with --quick: 32: less is mostly slow start].
    #[arg(long, value_parser = common::count(1, 1 << 20))]
    mib: Option<usize>,
    /// Also run fastpath with this many TUN queues (a stack per queue, each on a thread of its own)
    /// and a bulk transfer over `--streams` connections at once against it, against one queue and
    /// against linux. 1 (the default) leaves both out.
    #[arg(long, default_value_t = 1, value_parser = common::count(1, 256))]
    queues: usize,
    /// Connections of the several-streams bulk transfer (with `--queues`).
    #[arg(long, default_value_t = 4, value_parser = common::count(1, 64))]
    streams: usize,
    /// Only the in-memory pair (no root needed).
    #[arg(long, conflicts_with = "rr_only")]
    pair_only: bool,
    /// Only request/response over TUN: no pair, no bulk (a quarter of the time; for looking at one
    /// figure, or at the servers' system calls from outside with `perf stat --per-thread` on the
    /// `syscalls:` tracepoints). With `--queues`, against the several queues too.
    #[arg(long)]
    rr_only: bool,
    /// Also fastpath on AF_XDP over a veth pair ([`testbed::Testbed::fastpath_xdp`]), at MTU 1500
    /// and at `--xdp-mtu`, its transmit checksums offloaded; and at `--xdp-mtu` computing them
    /// itself, the offload's baseline.
    #[arg(long)]
    xdp: bool,
    /// The second AF_XDP server's MTU (with `--xdp`), 1501 to 65535: frames of several chunks, in
    /// place of the segmentation offload TUN has.
    #[arg(long, default_value_t = XDP_JUMBO_MTU, value_parser = common::count(1501, 65535))]
    xdp_mtu: usize,
    /// Only the AF_XDP servers of `--xdp`, beside fastpath on TUN with offload and the kernel over
    /// veth: no pair, no other server (more rounds of the AF_XDP figures in less time).
    #[arg(long, conflicts_with_all = ["rr_only", "pair_only"])]
    xdp_only: bool,
    /// A short run (one round, 4 MiB, 0.2 s) for tests and CI; explicit options win over it: it only
    /// fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

/// One measurement's median.
#[derive(Clone, Debug, Serialize)]
pub struct TcpRow {
    /// `pair`, `tun` or `rr`.
    pub experiment: String,
    /// `fastpath`, `smoltcp` or `linux`.
    pub stack: String,
    /// The configuration (`classic`, `default`, `offload`, `offload off`, ...).
    pub config: String,
    /// Link MTU.
    pub mtu: usize,
    /// Connections (rr).
    pub connections: usize,
    /// Payload Gbit/s (bulk).
    pub gbit_per_s: f64,
    /// CPU ns per payload byte (pair: one thread runs both stacks).
    pub ns_per_byte: f64,
    /// Transactions per second (rr).
    pub transactions_per_s: f64,
    /// Against the part's baseline (`classic` for pair, `linux` for tun and rr).
    pub ratio: f64,
    /// rr: cores the kernel client's thread used (0 elsewhere).
    pub client_cores: f64,
    /// rr: cores the rest of the process used, the server under test (0 elsewhere).
    pub server_cores: f64,
    /// rr: of those, the cores in user space (the stack itself; the rest is its system calls).
    pub server_user_cores: f64,
}

/// `--xdp-mtu`'s default: the largest frame the AF_XDP link sends whole in 16 chunks, near the 64 KiB
/// segments TUN's offload moves.
const XDP_JUMBO_MTU: usize = 65000;

const PAIR_CONFIGS: [&str; 3] = ["classic", "default", "offload"];

/// A bulk transfer of `bytes` between two stacks over a pair; returns seconds.
fn pair_bulk(config_name: &str, mtu: usize, bytes: u64) -> Result<f64, String> {
    let config = if config_name == "classic" {
        StackConfig::classic()
    } else {
        StackConfig::default()
    };
    let mut caps = LinkCapabilities::plain(mtu);
    caps.tx_checksum_offload = config_name == "offload";
    let limit = Duration::from_secs(60);
    pair_transfer(config, caps, Impairments::default(), bytes, limit).map(|run| run.seconds)
}

/// What [`pair_transfer`] measured.
pub struct PairRun {
    /// From the handshake's end to the last byte read.
    pub seconds: f64,
    /// Seconds spent waiting between two reads that brought data, in the waits of 1 ms or more,
    /// by length: under 10 ms (a reordering timer, a tail loss probe), 10 to 100 ms (a delayed
    /// ACK), 100 ms or more (a retransmission timeout). A clean transfer has none.
    pub waits: [f64; 3],
    /// The sending stack, for its counters.
    pub sender: Stack,
}

impl PairRun {
    /// The class in `waits` of a wait of `seconds` (1 ms or more).
    fn wait_class(seconds: f64) -> usize {
        match seconds {
            s if s < 0.010 => 0,
            s if s < 0.100 => 1,
            _ => 2,
        }
    }
}

/// `bytes` from one stack to another over the in-memory pair (impaired as `impair`), one thread
/// polling both; the application fills the send buffer in place and takes received data in place.
/// Fails if it takes longer than `limit`.
pub fn pair_transfer(
    config: StackConfig,
    caps: LinkCapabilities,
    impair: Impairments,
    bytes: u64,
    limit: Duration,
) -> Result<PairRun, String> {
    let (ea, eb) = PairEnd::pair(caps, 1 << 16, impair);
    let (ia, ib) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut a = Stack::new(config.clone());
    a.add_interface("pair0", ea, Ipv4Cidr::new(ia, 24));
    let mut b = Stack::new(config);
    b.add_interface("pair0", eb, Ipv4Cidr::new(ib, 24));
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    let now = Instant::now();
    a.poll(now);
    b.poll(now);
    let l = b
        .tcp_listen(SocketAddrV4::new(ib, 5001), 4)
        .map_err(|e| e.to_string())?;
    let c = a
        .tcp_connect(SocketAddrV4::new(ib, 5001))
        .map_err(|e| e.to_string())?;
    let deadline = WallClock::now() + limit;
    let s = loop {
        a.poll(Instant::now());
        b.poll(Instant::now());
        if let Ok((s, _)) = b.tcp_listener(l).accept() {
            break s;
        }
        if WallClock::now() > deadline {
            return Err("pair handshake did not finish".into());
        }
    };
    let start = WallClock::now();
    let (mut sent, mut got) = (0u64, 0u64);
    let mut waits = [0.0; 3];
    let mut last_data = start;
    while got < bytes {
        while sent < bytes {
            let max = (bytes - sent).min(1 << 20) as usize;
            match a.tcp(c).write_with(max, |buf| buf.len()) {
                Ok(0) | Err(_) => break,
                Ok(n) => sent += n as u64,
            }
        }
        a.poll(Instant::now());
        b.poll(Instant::now());
        let before = got;
        while let Ok(n) = b.tcp(s).read_with(|d| d.len()) {
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        let now = WallClock::now();
        if got > before {
            let wait = (now - last_data).as_secs_f64();
            if wait >= 0.001 {
                waits[PairRun::wait_class(wait)] += wait;
            }
            last_data = now;
        }
        if now > deadline {
            return Err(format!("pair transfer stalled at {got} of {bytes} bytes"));
        }
    }
    Ok(PairRun {
        seconds: start.elapsed().as_secs_f64(),
        waits,
        sender: a,
    })
}

#[cfg(target_os = "linux")]
mod testbed;

/// Runs the experiment and returns its rows.
pub fn measure(args: &TcpArgs) -> Result<Vec<TcpRow>, String> {
    let (rounds, mib, secs) = if args.quick {
        (1, 32, 0.2)
    } else {
        (5, 64, 1.0)
    };
    let (rounds, mib, secs) = (
        args.rounds.unwrap_or(rounds),
        args.mib.unwrap_or(mib),
        args.seconds.unwrap_or(secs),
    );
    let bytes = (mib as u64) << 20;
    let mut rows = Vec::new();
    if args.rr_only || args.xdp_only {
        #[cfg(target_os = "linux")]
        return measure_tun(rounds, secs, args, args.rr_only);
        #[cfg(not(target_os = "linux"))]
        return Err("--rr-only and --xdp-only measure over Linux's devices".into());
    }

    // Pair.
    let mut samples = vec![vec![Vec::new(); PAIR_CONFIGS.len()]; args.mtus.len()];
    let bar = common::progress(
        (rounds * args.mtus.len() * PAIR_CONFIGS.len()) as u64,
        "pair",
    );
    for _ in 0..rounds {
        for (m, &mtu) in args.mtus.iter().enumerate() {
            for (c, name) in PAIR_CONFIGS.iter().enumerate() {
                samples[m][c].push(pair_bulk(name, mtu, bytes)?);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    for (m, &mtu) in args.mtus.iter().enumerate() {
        let classic = common::median(&samples[m][0]);
        for (c, name) in PAIR_CONFIGS.iter().enumerate() {
            let t = common::median(&samples[m][c]);
            rows.push(TcpRow {
                experiment: "pair".into(),
                stack: "fastpath".into(),
                config: name.to_string(),
                mtu,
                connections: 1,
                gbit_per_s: bytes as f64 * 8.0 / t / 1e9,
                ns_per_byte: t * 1e9 / bytes as f64,
                transactions_per_s: 0.0,
                ratio: classic / t,
                client_cores: 0.0,
                server_cores: 0.0,
                server_user_cores: 0.0,
            });
        }
    }
    if args.pair_only {
        return Ok(rows);
    }
    #[cfg(target_os = "linux")]
    rows.extend(measure_tun(rounds, secs, args, false)?);
    #[cfg(not(target_os = "linux"))]
    let _ = secs;
    Ok(rows)
}

#[cfg(target_os = "linux")]
fn measure_tun(
    rounds: usize,
    secs: f64,
    args: &TcpArgs,
    rr_only: bool,
) -> Result<Vec<TcpRow>, String> {
    use testbed::*;
    let (queues, streams) = (args.queues, args.streams);
    crate::netns::check_privileges("bench tcp's TUN part")
        .map_err(|e| format!("{e} (or pass --pair-only for the in-memory part alone)"))?;
    let mut bed = Testbed::new();
    bed.fastpath(true)?;
    if args.xdp_only {
        bed.linux()?;
    } else {
        bed.fastpath(false)?;
        bed.smoltcp()?;
        bed.linux()?;
        bed.ceiling(1, false)?;
        bed.fastpath_plain(true)?;
        bed.fastpath_plain(false)?;
        bed.ceiling(1, true)?;
    }
    if args.xdp || args.xdp_only {
        bed.fastpath_xdp(1500, true)?;
        bed.fastpath_xdp(args.xdp_mtu, true)?;
        bed.fastpath_xdp(args.xdp_mtu, false)?;
    }
    if queues > 1 {
        bed.fastpath_queues(true, queues)?;
        bed.ceiling(queues, false)?;
    }
    if rr_only {
        for s in &mut bed.servers {
            s.rr_only = true;
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let n = bed.servers.len();
    let mut bulk = vec![Vec::new(); n];
    let mut bulk6 = vec![Vec::new(); n];
    let counts = [1usize, 100];
    let mut rr = vec![vec![Vec::new(); counts.len()]; n];
    // With --queues: several streams at once, against fastpath with offload on one queue and on
    // several, and against linux.
    let in_streams = |s: &Server| {
        queues > 1
            && !s.rr_only
            && (s.queues > 1
                || s.stack == "linux"
                || s.stack == "ceiling"
                || s.config == "offload on")
    };
    let mut multi = vec![Vec::new(); n];
    let mut pull = vec![Vec::new(); n];
    let cells = bed
        .servers
        .iter()
        .filter(|s| s.queues == 1 && !s.rr_only)
        .count()
        * 5
        + bed
            .servers
            .iter()
            .filter(|s| s.queues > 1 || s.rr_only)
            .count()
            * 2
        + bed.servers.iter().filter(|s| in_streams(s)).count();
    let bar = common::progress((rounds * cells) as u64, "tun");
    for _ in 0..rounds {
        for (i, s) in bed.servers.iter().enumerate() {
            if in_streams(s) {
                multi[i].push(testbed::bulk_streams(s, secs, streams)?);
                bar.inc(1);
            }
            for (k, &c) in counts.iter().enumerate() {
                if s.echo {
                    rr[i][k].push(testbed::rr(s, c, secs)?);
                }
                bar.inc(1);
            }
            if s.queues > 1 || s.rr_only {
                continue;
            }
            // The other direction: the server sends bulk, the kernel receives.
            if s.chargen {
                pull[i].push(testbed::accounted(|| testbed::pull(s, secs))?);
            }
            bar.inc(1);
            bulk[i].push(testbed::accounted(|| testbed::bulk(s, secs, false))?);
            bar.inc(1);
            // IPv6 beside IPv4, in the same round.
            if s.ipv6 {
                bulk6[i].push(testbed::bulk(s, secs, true)?);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let linux = bed
        .servers
        .iter()
        .position(|s| s.stack == "linux")
        .unwrap_or(0);
    let linux_bulk = common::median(&bulk[linux].iter().map(|x| x.value).collect::<Vec<_>>());
    let linux_bulk6 = common::median(&bulk6[linux]);
    let linux_multi = common::median(&multi[linux]);
    let linux_pull = common::median(&pull[linux].iter().map(|x| x.value).collect::<Vec<_>>());
    let mut rows = Vec::new();
    for (i, s) in bed.servers.iter().enumerate() {
        if !pull[i].is_empty() {
            rows.push(accounted_row("tun-send", s, &pull[i], linux_pull));
        }
    }
    for (i, s) in bed
        .servers
        .iter()
        .enumerate()
        .filter(|(i, _)| !multi[*i].is_empty())
    {
        let g = common::median(&multi[i]);
        rows.push(TcpRow {
            experiment: "tun-streams".into(),
            stack: s.stack.into(),
            config: s.config.clone(),
            mtu: s.mtu,
            connections: streams,
            gbit_per_s: g,
            ns_per_byte: 0.0,
            transactions_per_s: 0.0,
            ratio: g / linux_multi,
            client_cores: 0.0,
            server_cores: 0.0,
            server_user_cores: 0.0,
        });
    }
    for (i, s) in bed.servers.iter().enumerate() {
        if s.queues == 1 && !s.rr_only {
            rows.push(accounted_row("tun", s, &bulk[i], linux_bulk));
        }
    }
    for (i, s) in bed
        .servers
        .iter()
        .enumerate()
        .filter(|(i, s)| s.ipv6 && s.queues == 1 && !bulk6[*i].is_empty())
    {
        let g = common::median(&bulk6[i]);
        rows.push(TcpRow {
            experiment: "tun6".into(),
            stack: s.stack.into(),
            config: s.config.clone(),
            mtu: s.mtu,
            connections: 1,
            gbit_per_s: g,
            ns_per_byte: 0.0,
            transactions_per_s: 0.0,
            ratio: g / linux_bulk6,
            client_cores: 0.0,
            server_cores: 0.0,
            server_user_cores: 0.0,
        });
    }
    for (k, &c) in counts.iter().enumerate() {
        let base = common::median(&rr[linux][k].iter().map(|x| x.rate).collect::<Vec<_>>());
        for (i, s) in bed.servers.iter().enumerate().filter(|(_, s)| s.echo) {
            let of =
                |f: fn(&RrRun) -> f64| common::median(&rr[i][k].iter().map(f).collect::<Vec<_>>());
            let t = of(|x| x.rate);
            rows.push(TcpRow {
                client_cores: of(|x| x.client),
                server_cores: of(|x| x.server_user + x.server_system),
                server_user_cores: of(|x| x.server_user),
                experiment: "rr".into(),
                stack: s.stack.into(),
                config: s.config.clone(),
                mtu: s.mtu,
                connections: c,
                gbit_per_s: 0.0,
                ns_per_byte: 0.0,
                transactions_per_s: t,
                ratio: t / base,
            });
        }
    }
    Ok(rows)
}

/// A one-connection bulk row at the server's MTU from `samples` (medians), against `baseline` Gbit/s.
#[cfg(target_os = "linux")]
fn accounted_row(
    experiment: &str,
    server: &testbed::Server,
    samples: &[testbed::Accounted],
    baseline: f64,
) -> TcpRow {
    let of = |f: fn(&testbed::Accounted) -> f64| {
        common::median(&samples.iter().map(f).collect::<Vec<_>>())
    };
    let g = of(|x| x.value);
    TcpRow {
        experiment: experiment.into(),
        stack: server.stack.into(),
        config: server.config.clone(),
        mtu: server.mtu,
        connections: 1,
        gbit_per_s: g,
        ns_per_byte: 0.0,
        transactions_per_s: 0.0,
        ratio: g / baseline,
        client_cores: of(|x| x.client),
        server_cores: of(|x| x.server_user + x.server_system),
        server_user_cores: of(|x| x.server_user),
    }
}

/// Bulk rows with the cores each side used: the kernel client's thread (its system calls and the
/// kernel's TCP work they run), the server (the rest of the process) and its part in user space.
fn print_accounted(rows: &[&TcpRow]) {
    outln!(
        "{:<28} {:>10} {:>10} {:>13} {:>13} {:>11}",
        "server",
        "Gbit/s",
        "vs linux",
        "client cores",
        "server cores",
        "in user"
    );
    for r in rows {
        outln!(
            "{:<28} {:>10.2} {:>9.2}x {:>13.2} {:>13.2} {:>11.2}",
            format!("{} ({})", r.stack, r.config),
            r.gbit_per_s,
            r.ratio,
            r.client_cores,
            r.server_cores,
            r.server_user_cores
        );
    }
}

/// Prints the rows, one table per part.
pub fn print(rows: &[TcpRow]) {
    let pair: Vec<&TcpRow> = rows.iter().filter(|r| r.experiment == "pair").collect();
    if !pair.is_empty() {
        outln!("fastpath to fastpath over the in-memory pair (bulk; one thread runs both stacks)");
        outln!(
            "{:<8} {:>8} {:>10} {:>12} {:>12}",
            "config",
            "mtu",
            "Gbit/s",
            "ns/byte",
            "vs classic"
        );
        for r in &pair {
            outln!(
                "{:<8} {:>8} {:>10.2} {:>12.3} {:>11.2}x",
                r.config,
                r.mtu,
                r.gbit_per_s,
                r.ns_per_byte,
                r.ratio
            );
        }
        outln!();
    }
    let tun: Vec<&TcpRow> = rows.iter().filter(|r| r.experiment == "tun").collect();
    if !tun.is_empty() {
        outln!("a kernel client sending bulk to a discard server at MTU 1500 (AF_XDP: as its name says)");
        print_accounted(&tun);
        outln!();
    }
    let tun6: Vec<&TcpRow> = rows.iter().filter(|r| r.experiment == "tun6").collect();
    if !tun6.is_empty() {
        outln!(
            "the same over IPv6 (fd00:7::1 to fd00:7::2), and against the same server over IPv4"
        );
        outln!(
            "{:<28} {:>10} {:>10} {:>10}",
            "server",
            "Gbit/s",
            "vs linux",
            "vs IPv4"
        );
        for r in &tun6 {
            let v4 = tun
                .iter()
                .find(|t| t.stack == r.stack && t.config == r.config)
                .map_or(f64::NAN, |t| r.gbit_per_s / t.gbit_per_s);
            outln!(
                "{:<28} {:>10.2} {:>9.2}x {:>9.2}x",
                format!("{} ({})", r.stack, r.config),
                r.gbit_per_s,
                r.ratio,
                v4
            );
        }
        outln!();
    }
    let send: Vec<&TcpRow> = rows.iter().filter(|r| r.experiment == "tun-send").collect();
    if !send.is_empty() {
        outln!("the server sending bulk (chargen) to a kernel client reading at MTU 1500 (AF_XDP: as its name says)");
        print_accounted(&send);
        outln!();
    }
    let streams: Vec<&TcpRow> = rows
        .iter()
        .filter(|r| r.experiment == "tun-streams")
        .collect();
    if let Some(first) = streams.first() {
        outln!(
            "{} kernel connections at once sending bulk to discard at MTU 1500",
            first.connections
        );
        outln!("{:<34} {:>10} {:>10}", "server", "Gbit/s", "vs linux");
        for r in &streams {
            outln!(
                "{:<34} {:>10.2} {:>9.2}x",
                format!("{} ({})", r.stack, r.config),
                r.gbit_per_s,
                r.ratio
            );
        }
        let one = streams.iter().find(|r| r.config == "offload on");
        let many = streams.iter().find(|r| r.config.contains("queues"));
        if let (Some(one), Some(many)) = (one, many) {
            outln!(
                "{} over one queue: {:.2}x",
                many.config,
                many.gbit_per_s / one.gbit_per_s
            );
        }
        outln!();
    }
    let rr: Vec<&TcpRow> = rows.iter().filter(|r| r.experiment == "rr").collect();
    if !rr.is_empty() {
        outln!("64-byte request/response transactions per second (kernel client, echo server)");
        outln!(
            "{:<34} {:>6} {:>14} {:>10} {:>13} {:>13} {:>11}",
            "server",
            "conns",
            "transactions/s",
            "vs linux",
            "client cores",
            "server cores",
            "in user"
        );
        for r in &rr {
            outln!(
                "{:<34} {:>6} {:>14.0} {:>9.2}x {:>13.2} {:>13.2} {:>11.2}",
                format!("{} ({})", r.stack, r.config),
                r.connections,
                r.transactions_per_s,
                r.ratio,
                r.client_cores,
                r.server_cores,
                r.server_user_cores
            );
        }
        outln!(
            "(client: the kernel client's thread, its system calls and the kernel TCP work they run; \
             server: the rest of this process, and of that, in user space)"
        );
        // Each server's lead over smoltcp at the most connections, the ceiling's among them: no
        // stack that reads and writes the device once per packet leads by more than it does.
        let most = rr.iter().map(|r| r.connections).max().unwrap_or(0);
        let at = |stack: &str, config: &str| {
            rr.iter()
                .find(|r| r.connections == most && r.stack == stack && r.config == config)
                .map(|r| r.transactions_per_s)
        };
        if let Some(smol) = at("smoltcp", "tun") {
            for r in rr
                .iter()
                .filter(|r| r.connections == most && r.stack != "smoltcp" && r.stack != "linux")
            {
                outln!(
                    "{} ({}) over smoltcp with {most} connections: {:.2}x",
                    r.stack,
                    r.config,
                    r.transactions_per_s / smol
                );
            }
        }
    }
}

/// `fastpath bench tcp`.
pub fn run(args: &TcpArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header(
        "bench tcp: bulk transfer and request/response, fastpath against smoltcp and linux",
    );
    let rows = measure(args)?;
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
