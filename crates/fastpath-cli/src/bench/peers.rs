//! `fastpath bench peers`: one datagram workload through three stacks in one process: fastpath,
//! smoltcp (another user-space stack in Rust) and the Linux kernel.
//!
//! A sender and a receiver share one host's loopback and exchange datagrams of 64, 512 and 1472 bytes,
//! once with only those two sockets bound and once with 400 (the other 398 bound on other ports and idle,
//! as the receiving host's other services). The sender calls `send_to` and the receiver reads every
//! datagram back; a run counts what arrived and its datagrams per second.
//!
//! - `fastpath`: `Stack::new(StackConfig::default())` and its built-in loopback (127.0.0.1); `burst`
//!   `send_to` calls, one `poll`, then `recv_from` until the queue is empty.
//! - `smoltcp`: its `phy::Loopback` device (`Medium::Ip`), an `Interface` with 127.0.0.1/8 and a
//!   `SocketSet` of UDP sockets; `burst` `send_slice` calls, one `Interface::poll`, then `recv_slice` until
//!   empty. Its `poll` reads the device before it lets the sockets send, so a datagram is read one poll
//!   after it was sent: one poll per burst in the steady state, as for fastpath.
//! - `linux`: `std::net::UdpSocket`s bound to 127.0.0.1:0, blocking, in one thread: send one datagram,
//!   receive it, and so on (burst 1). A datagram the kernel drops is counted as lost, not fatal.
//!
//! Every socket is bound to 127.0.0.1 (not the wildcard), the sender and receiver first, then the idle
//! ones: the order a linear socket list favours. Fastpath and smoltcp must deliver every datagram.
//! Every (stack, size, sockets, burst) runs once per round, interleaved, and the median round is quoted.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket as KernelSocket};
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::{Instant, Stack, StackConfig};
use serde::{Deserialize, Serialize};
use smoltcp::iface::{Config as SmolConfig, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Loopback as SmolLoopback, Medium};
use smoltcp::socket::udp as smol_udp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};

use super::common;
use crate::bench::common::{out, outln};

/// Largest datagram payload the experiment sends: one Ethernet MTU, unfragmented.
pub const MAX_SIZE: usize = 1472;

/// Port of the receiving socket in the user-space stacks.
const RECEIVER_PORT: u16 = 5000;
/// Port of the sending socket in the user-space stacks.
const SENDER_PORT: u16 = 5001;
/// First port of the idle sockets in the user-space stacks.
const IDLE_FIRST_PORT: u16 = 20_000;
/// How long the kernel receiver waits for a datagram before counting it lost.
const LINUX_LOSS_TIMEOUT: Duration = Duration::from_millis(100);

/// Options of `fastpath bench peers`.
#[derive(Args, Debug)]
pub struct PeersArgs {
    /// Datagrams per measurement for fastpath and smoltcp [default: 200000; with --quick: 10000].
    #[arg(long, value_parser = common::count(1, u32::MAX as u64))]
    datagrams: Option<usize>,
    /// Datagrams per measurement for linux (a system call each way makes it ~40x slower) [default:
    /// 50000; with --quick: 2500].
    #[arg(long, value_parser = common::count(1, u32::MAX as u64))]
    linux_datagrams: Option<usize>,
    /// Rounds; every (stack, size, sockets, burst) runs once per round and the median is quoted
    /// [default: 5; with --quick: 3].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Datagram sizes in bytes (1 to 1472).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512, 1472],
          value_parser = common::count(1, MAX_SIZE as u64))]
    sizes: Vec<usize>,
    /// Bound UDP sockets per host: the sender, the receiver and idle others (2 to 45537).
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 400],
          value_parser = common::count(2, (u16::MAX - IDLE_FIRST_PORT) as u64 + 2))]
    sockets: Vec<usize>,
    /// The larger burst for fastpath and smoltcp: datagrams sent between polls (burst 1 always runs),
    /// 1 to 1024.
    #[arg(long, default_value_t = 32, value_parser = common::count(1, 1024))]
    burst: usize,
    /// A short run (10,000 and 2,500 datagrams, 3 rounds) for tests and CI; explicit options win over
    /// it: it only fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
    /// Address families: 4 (127.0.0.1), 6 (`::1`), or both, each measured in the same rounds.
    #[arg(long, value_delimiter = ',', default_values_t = [4u8, 6],
          value_parser = clap::builder::TypedValueParser::map(
              clap::builder::PossibleValuesParser::new(["4", "6"]),
              |s: String| s.parse::<u8>().expect("4 or 6")))]
    families: Vec<u8>,
}

/// The stacks compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// This project's stack.
    Fastpath,
    /// The smoltcp crate's stack.
    Smoltcp,
    /// The Linux kernel, through `std::net::UdpSocket`.
    Linux,
}

impl PeersArgs {
    /// The defaults (or the quick run), for `bench all`.
    pub fn for_all(quick: bool) -> PeersArgs {
        PeersArgs {
            datagrams: None,
            linux_datagrams: None,
            rounds: None,
            sizes: vec![64, 512, 1472],
            sockets: vec![2, 400],
            burst: 32,
            quick,
            json: None,
            families: vec![4, 6],
        }
    }
}

impl Peer {
    /// The name used in the table and the JSON rows.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Fastpath => "fastpath",
            Peer::Smoltcp => "smoltcp",
            Peer::Linux => "linux",
        }
    }
}

/// One row of the results.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PeersRow {
    /// Stack name: `fastpath`, `smoltcp` or `linux`.
    pub stack: String,
    /// Address family: 4 (over 127.0.0.1) or 6 (over `::1`).
    pub family: u8,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Bound UDP sockets on the host (sender and receiver included).
    pub sockets: usize,
    /// Datagrams sent between polls of the stack (1 for linux: one system call each).
    pub burst: usize,
    /// Median, over the rounds, of datagrams received per second.
    pub datagrams_per_s: f64,
    /// Nanoseconds per datagram, sent and received, at that median.
    pub ns_per_datagram: f64,
    /// Fastpath's datagrams/s with the same family, size, sockets and burst (burst 1 for linux) divided
    /// by this row's; 1.0 for fastpath's own rows.
    pub ratio_fastpath_over_this: f64,
    /// Datagrams sent in the timed runs, all rounds together.
    pub sent: u64,
    /// Datagrams received in the timed runs, all rounds together (below `sent` only for linux's losses).
    pub received: u64,
}

/// What one timed run measured.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    sent: usize,
    received: usize,
    elapsed: Duration,
}

/// Turns an I/O error into this experiment's error message, prefixed with `what`.
fn io_err(what: &str) -> impl FnOnce(io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The datagrams of a warm-up pass before each timed run (pools, queues and caches filled).
fn warmup_count(n: usize) -> usize {
    n.min(1000)
}

/// Checks that a received datagram has the length sent.
fn check_len(peer: Peer, got: usize, want: usize) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{}: received a {got}-byte datagram, sent {want}",
            peer.name()
        ))
    }
}

/// Fastpath: sends `n` datagrams of `size` bytes in bursts of `burst`, with `sockets` bound.
fn fastpath_run(
    lo: IpAddr,
    size: usize,
    sockets: usize,
    burst: usize,
    n: usize,
) -> Result<Outcome, String> {
    let mut stack = Stack::new(StackConfig::default());
    let receiver = stack
        .udp_bind(SocketAddr::new(lo, RECEIVER_PORT))
        .map_err(io_err("fastpath: binding the receiver"))?;
    let sender = stack
        .udp_bind(SocketAddr::new(lo, SENDER_PORT))
        .map_err(io_err("fastpath: binding the sender"))?;
    for i in 0..sockets.saturating_sub(2) {
        stack
            .udp_bind(SocketAddr::new(lo, idle_port(i)))
            .map_err(io_err("fastpath: binding an idle socket"))?;
    }
    let to = SocketAddr::new(lo, RECEIVER_PORT);
    let data = vec![0xa5u8; size];
    let mut sink = vec![0u8; 2048];
    let mut pass = |stack: &mut Stack, n: usize| -> Result<usize, String> {
        let mut sent = 0;
        let mut received = 0;
        while sent < n {
            let k = burst.min(n - sent);
            for _ in 0..k {
                stack
                    .udp(sender)
                    .send_to(&data, to)
                    .map_err(io_err("fastpath: send_to"))?;
            }
            sent += k;
            stack.poll(Instant::ZERO);
            while let Ok((len, _)) = stack.udp(receiver).recv_from(&mut sink) {
                check_len(Peer::Fastpath, len, size)?;
                received += 1;
            }
        }
        Ok(received)
    };
    pass(&mut stack, warmup_count(n))?;
    let started = WallClock::now();
    let received = pass(&mut stack, n)?;
    let elapsed = started.elapsed();
    if stack.counters().drops.total() != 0 {
        return Err(format!(
            "fastpath: {received} of {n} datagrams delivered; drops:\n{}",
            stack.counters()
        ));
    }
    Ok(Outcome {
        sent: n,
        received,
        elapsed,
    })
}

/// The port of the `i`-th idle socket in the user-space stacks.
fn idle_port(i: usize) -> u16 {
    IDLE_FIRST_PORT + u16::try_from(i).expect("idle sockets fit the port space")
}

/// A smoltcp UDP socket whose buffers hold `packets` datagrams of up to `MAX_SIZE` bytes each way.
fn smoltcp_socket(packets: usize) -> smol_udp::Socket<'static> {
    // One spare datagram of room: the payload ring does not split a datagram at its end.
    let bytes = (packets + 1) * MAX_SIZE;
    let buffer = || {
        smol_udp::PacketBuffer::new(
            vec![smol_udp::PacketMetadata::EMPTY; packets],
            vec![0u8; bytes],
        )
    };
    smol_udp::Socket::new(buffer(), buffer())
}

/// smoltcp: sends `n` datagrams of `size` bytes in bursts of `burst`, with `sockets` bound.
fn smoltcp_run(
    lo: IpAddr,
    size: usize,
    sockets: usize,
    burst: usize,
    n: usize,
) -> Result<Outcome, String> {
    let mut device = SmolLoopback::new(Medium::Ip);
    let now = SmolInstant::ZERO;
    let mut iface = Interface::new(SmolConfig::new(HardwareAddress::Ip), &mut device, now);
    iface.update_ip_addrs(|addrs| {
        let cidr = match lo {
            IpAddr::V4(_) => IpCidr::new(IpAddress::v4(127, 0, 0, 1), 8),
            IpAddr::V6(_) => IpCidr::new(IpAddress::v6(0, 0, 0, 0, 0, 0, 0, 1), 128),
        };
        addrs.push(cidr).expect("room for one address");
    });
    let mut set = SocketSet::new(Vec::with_capacity(sockets.max(2)));
    let bind = |set: &mut SocketSet<'static>, packets: usize, port: u16| {
        let mut socket = smoltcp_socket(packets);
        socket
            .bind(SocketAddr::new(lo, port))
            .map_err(|e| format!("smoltcp: binding port {port}: {e}"))?;
        Ok::<SocketHandle, String>(set.add(socket))
    };
    // Room for two bursts: a burst is read one poll after it was sent.
    let receiver = bind(&mut set, 2 * burst, RECEIVER_PORT)?;
    let sender = bind(&mut set, 2 * burst, SENDER_PORT)?;
    for i in 0..sockets.saturating_sub(2) {
        bind(&mut set, 4, idle_port(i))?;
    }
    let to = SocketAddr::new(lo, RECEIVER_PORT);
    let data = vec![0xa5u8; size];
    let mut sink = vec![0u8; 2048];
    let mut pass = |n: usize| -> Result<usize, String> {
        let mut sent = 0;
        let mut received = 0;
        let mut drain = |set: &mut SocketSet<'static>, received: &mut usize| {
            let socket = set.get_mut::<smol_udp::Socket>(receiver);
            while let Ok((len, _)) = socket.recv_slice(&mut sink) {
                check_len(Peer::Smoltcp, len, size)?;
                *received += 1;
            }
            Ok::<(), String>(())
        };
        while sent < n {
            let k = burst.min(n - sent);
            let socket = set.get_mut::<smol_udp::Socket>(sender);
            for _ in 0..k {
                socket
                    .send_slice(&data, to)
                    .map_err(|e| format!("smoltcp: send_slice: {e}"))?;
            }
            sent += k;
            iface.poll(now, &mut device, &mut set);
            drain(&mut set, &mut received)?;
        }
        // The last burst is still on the device: the next poll reads it.
        for _ in 0..4 {
            if received >= n {
                break;
            }
            iface.poll(now, &mut device, &mut set);
            drain(&mut set, &mut received)?;
        }
        Ok(received)
    };
    pass(warmup_count(n))?;
    let started = WallClock::now();
    let received = pass(n)?;
    let elapsed = started.elapsed();
    Ok(Outcome {
        sent: n,
        received,
        elapsed,
    })
}

/// Linux: sends `n` datagrams of `size` bytes, each received before the next is sent, with `sockets`
/// kernel sockets bound. Datagrams that do not arrive are counted, not fatal.
fn linux_run(lo: IpAddr, size: usize, sockets: usize, n: usize) -> Result<Outcome, String> {
    let local = SocketAddr::new(lo, 0);
    let receiver = KernelSocket::bind(local).map_err(io_err("linux: binding the receiver"))?;
    let sender = KernelSocket::bind(local).map_err(io_err("linux: binding the sender"))?;
    let idle = (0..sockets.saturating_sub(2))
        .map(|_| KernelSocket::bind(local))
        .collect::<io::Result<Vec<_>>>()
        .map_err(io_err("linux: binding an idle socket"))?;
    receiver
        .set_read_timeout(Some(LINUX_LOSS_TIMEOUT))
        .map_err(io_err("linux: setting the receive timeout"))?;
    let to = receiver
        .local_addr()
        .map_err(io_err("linux: the receiver's address"))?;
    let data = vec![0xa5u8; size];
    let mut sink = vec![0u8; 2048];
    let mut pass = |n: usize| -> Result<usize, String> {
        let mut received = 0;
        for _ in 0..n {
            sender
                .send_to(&data, to)
                .map_err(io_err("linux: send_to"))?;
            match receiver.recv_from(&mut sink) {
                Ok((len, _)) => {
                    check_len(Peer::Linux, len, size)?;
                    received += 1;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(format!("linux: recv_from: {e}")),
            }
        }
        Ok(received)
    };
    pass(warmup_count(n))?;
    let started = WallClock::now();
    let mut received = pass(n)?;
    let elapsed = started.elapsed();
    // Stragglers that arrived after their wait timed out were delivered late, not lost.
    receiver
        .set_nonblocking(true)
        .map_err(io_err("linux: set_nonblocking"))?;
    while let Ok((len, _)) = receiver.recv_from(&mut sink) {
        check_len(Peer::Linux, len, size)?;
        received += 1;
    }
    drop(idle);
    Ok(Outcome {
        sent: n,
        received: received.min(n),
        elapsed,
    })
}

/// The (stack, burst) variants measured, in table order.
fn variants(burst: usize) -> Vec<(Peer, usize)> {
    let mut v = vec![(Peer::Fastpath, 1)];
    if burst > 1 {
        v.push((Peer::Fastpath, burst));
    }
    v.push((Peer::Smoltcp, 1));
    if burst > 1 {
        v.push((Peer::Smoltcp, burst));
    }
    v.push((Peer::Linux, 1));
    v
}

/// The run's parameters after `--quick`: (datagrams for fastpath and smoltcp, for linux, rounds).
fn plan(args: &PeersArgs) -> (usize, usize, usize) {
    let (n, n_linux, rounds) = if args.quick {
        (10_000, 2_500, 3)
    } else {
        (200_000, 50_000, 5)
    };
    (
        args.datagrams.unwrap_or(n),
        args.linux_datagrams.unwrap_or(n_linux),
        args.rounds.unwrap_or(rounds),
    )
}

/// Checks the options' ranges.
fn validate(args: &PeersArgs) -> Result<(), String> {
    if args.sizes.is_empty() || args.sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
        return Err(format!("--sizes must be between 1 and {MAX_SIZE} bytes"));
    }
    let max_sockets = usize::from(u16::MAX - IDLE_FIRST_PORT) + 2;
    if args.sockets.is_empty() || args.sockets.iter().any(|&s| s < 2 || s > max_sockets) {
        return Err(format!("--sockets must be between 2 and {max_sockets}"));
    }
    if args.burst == 0 || args.burst > 1024 {
        return Err("--burst must be between 1 and 1024".to_string());
    }
    Ok(())
}

/// Runs the experiment and returns its rows.
pub fn measure(args: &PeersArgs) -> Result<Vec<PeersRow>, String> {
    validate(args)?;
    let (n, n_linux, rounds) = plan(args);
    let variants = variants(args.burst);
    let cells: Vec<(u8, usize, usize)> = args
        .families
        .iter()
        .flat_map(|&f| {
            args.sockets
                .iter()
                .flat_map(move |&k| args.sizes.iter().map(move |&s| (f, s, k)))
        })
        .collect();
    let bar = common::progress(
        (rounds * cells.len() * variants.len()) as u64,
        "bench peers",
    );
    // samples[cell][variant]: one outcome per round.
    let mut samples = vec![vec![Vec::<Outcome>::new(); variants.len()]; cells.len()];
    for round in 0..rounds {
        for (ci, &(family, size, sockets)) in cells.iter().enumerate() {
            let lo: IpAddr = if family == 6 {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            // Rotate the order from round to round so that no stack always runs first.
            for j in 0..variants.len() {
                let vi = (j + round) % variants.len();
                let (peer, burst) = variants[vi];
                let outcome = match peer {
                    Peer::Fastpath => fastpath_run(lo, size, sockets, burst, n)?,
                    Peer::Smoltcp => smoltcp_run(lo, size, sockets, burst, n)?,
                    Peer::Linux => linux_run(lo, size, sockets, n_linux)?,
                };
                if peer != Peer::Linux && outcome.received != outcome.sent {
                    return Err(format!(
                        "{}: {} of {} datagrams delivered (IPv{family}, {size} bytes, {sockets} sockets, burst {burst})",
                        peer.name(),
                        outcome.received,
                        outcome.sent
                    ));
                }
                samples[ci][vi].push(outcome);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let mut rows = Vec::new();
    for (ci, &(family, size, sockets)) in cells.iter().enumerate() {
        let rate = |vi: usize| {
            let per_round: Vec<f64> = samples[ci][vi]
                .iter()
                .map(|o| o.received as f64 / o.elapsed.as_secs_f64().max(1e-12))
                .collect();
            common::median(&per_round)
        };
        let fastpath_rate = |burst: usize| {
            let vi = variants
                .iter()
                .position(|&v| v == (Peer::Fastpath, burst))
                .expect("fastpath runs every burst");
            rate(vi)
        };
        for (vi, &(peer, burst)) in variants.iter().enumerate() {
            let r = rate(vi);
            let ratio = if peer == Peer::Fastpath {
                1.0
            } else {
                fastpath_rate(burst) / r
            };
            rows.push(PeersRow {
                stack: peer.name().to_string(),
                family,
                size,
                sockets,
                burst,
                datagrams_per_s: r,
                ns_per_datagram: 1e9 / r,
                ratio_fastpath_over_this: ratio,
                sent: samples[ci][vi].iter().map(|o| o.sent as u64).sum(),
                received: samples[ci][vi].iter().map(|o| o.received as u64).sum(),
            });
        }
    }
    Ok(rows)
}

/// Finds the row of `stack` with `size`, `sockets` and `burst`.
fn find(
    rows: &[PeersRow],
    stack: Peer,
    (family, size, sockets): (u8, usize, usize),
    burst: usize,
) -> Option<&PeersRow> {
    rows.iter().find(|r| {
        r.stack == stack.name()
            && r.family == family
            && r.size == size
            && r.sockets == sockets
            && r.burst == burst
    })
}

/// Prints the table: a row per (size, sockets), millions of datagrams/s per stack and burst, then
/// fastpath's ratios over smoltcp and linux.
pub fn print(rows: &[PeersRow]) {
    let mut cells: Vec<(u8, usize, usize)> = Vec::new();
    for r in rows {
        if !cells.contains(&(r.family, r.size, r.sockets)) {
            cells.push((r.family, r.size, r.sockets));
        }
    }
    let mut bursts: Vec<usize> = rows
        .iter()
        .filter(|r| r.stack == Peer::Fastpath.name())
        .map(|r| r.burst)
        .collect();
    bursts.sort_unstable();
    bursts.dedup();
    let mut columns: Vec<(Peer, usize)> = Vec::new();
    for peer in [Peer::Fastpath, Peer::Smoltcp] {
        columns.extend(bursts.iter().map(|&b| (peer, b)));
    }
    columns.push((Peer::Linux, 1));
    let mut ratios: Vec<(Peer, usize)> = bursts.iter().map(|&b| (Peer::Smoltcp, b)).collect();
    ratios.push((Peer::Linux, 1));

    outln!(
        "millions of datagrams per second (median), and fastpath's datagrams/s over each peer's"
    );
    out!("{:>4}{:>8}{:>9} |", "ip", "size", "sockets");
    for (peer, burst) in &columns {
        out!("{:>14}", format!("{} b{burst}", peer.name()));
    }
    out!(" |");
    for (peer, burst) in &ratios {
        out!("{:>16}", format!("fp/{} b{burst}", peer.name()));
    }
    outln!();
    for &cell in &cells {
        let (family, size, sockets) = cell;
        out!(
            "{:>4}{:>8}{sockets:>9} |",
            format!("v{family}"),
            format!("{size} B")
        );
        for &(peer, burst) in &columns {
            let text = find(rows, peer, cell, burst).map_or("-".to_string(), |r| {
                format!("{:.3}", r.datagrams_per_s / 1e6)
            });
            out!("{text:>14}");
        }
        out!(" |");
        for &(peer, burst) in &ratios {
            let text = find(rows, peer, cell, burst).map_or("-".to_string(), |r| {
                format!("{:.2}x", r.ratio_fastpath_over_this)
            });
            out!("{text:>16}");
        }
        outln!();
    }
    // IPv6 against IPv4, per stack, where both were measured.
    let pairs: Vec<(usize, usize)> = common::distinct(
        cells
            .iter()
            .filter(|c| c.0 == 6 && cells.contains(&(4, c.1, c.2)))
            .map(|c| (c.1, c.2)),
    );
    if !pairs.is_empty() {
        outln!();
        outln!("IPv6's datagrams/s over IPv4's, same stack and burst (1.00x: no cost to IPv6)");
        out!("{:>12}{:>9} |", "size", "sockets");
        for (peer, burst) in &columns {
            out!("{:>14}", format!("{} b{burst}", peer.name()));
        }
        outln!();
        for &(size, sockets) in &pairs {
            out!("{:>12}{sockets:>9} |", format!("{size} B"));
            for &(peer, burst) in &columns {
                let v4 = find(rows, peer, (4, size, sockets), burst);
                let v6 = find(rows, peer, (6, size, sockets), burst);
                let text = match (v4, v6) {
                    (Some(a), Some(b)) => format!("{:.2}x", b.datagrams_per_s / a.datagrams_per_s),
                    _ => "-".to_string(),
                };
                out!("{text:>14}");
            }
            outln!();
        }
    }
    outln!();
    outln!("ns per datagram (median)");
    out!("{:>4}{:>8}{:>9} |", "ip", "size", "sockets");
    for (peer, burst) in &columns {
        out!("{:>14}", format!("{} b{burst}", peer.name()));
    }
    outln!();
    for &cell in &cells {
        let (family, size, sockets) = cell;
        out!(
            "{:>4}{:>8}{sockets:>9} |",
            format!("v{family}"),
            format!("{size} B")
        );
        for &(peer, burst) in &columns {
            let text = find(rows, peer, cell, burst)
                .map_or("-".to_string(), |r| format!("{:.1}", r.ns_per_datagram));
            out!("{text:>14}");
        }
        outln!();
    }
    outln!();
    let (sent, received) = rows
        .iter()
        .filter(|r| r.stack == Peer::Linux.name())
        .fold((0, 0), |(s, d), r| (s + r.sent, d + r.received));
    if received == sent {
        outln!("linux: every datagram delivered ({sent} in the timed runs)");
    } else {
        outln!(
            "linux: {} of {sent} datagrams lost in the timed runs (waited {} ms for each)",
            sent - received,
            LINUX_LOSS_TIMEOUT.as_millis()
        );
        for r in rows
            .iter()
            .filter(|r| r.stack == Peer::Linux.name() && r.received != r.sent)
        {
            outln!(
                "  IPv{} {} B, {} sockets: {} of {} lost",
                r.family,
                r.size,
                r.sockets,
                r.sent - r.received,
                r.sent
            );
        }
    }
    outln!("fastpath and smoltcp delivered every datagram in every run");
    outln!(
        "checksums: none of the three computes the UDP checksum on loopback (fastpath's loopback offers \
         checksum offload as Linux's lo does; smoltcp's phy::Loopback declares checksums ignored); \
         fastpath and linux still compute the IPv4 header checksum (IPv6 has none)"
    );
}

/// `fastpath bench peers`.
pub fn run(args: &PeersArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header("bench peers: send_to and receive over loopback in fastpath, smoltcp and linux");
    let rows = measure(args)?;
    let (n, n_linux, rounds) = plan(args);
    outln!(
        "{n} datagrams per run for fastpath and smoltcp, {n_linux} for linux, median of {rounds} \
         rounds; sockets: sender, receiver and idle others, all bound to 127.0.0.1 (v4) or ::1 (v6)\n"
    );
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
