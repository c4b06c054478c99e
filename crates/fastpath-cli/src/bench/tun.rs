//! `fastpath bench tun`: the Linux kernel as the client, fastpath behind a TUN interface as the server,
//! and beside it the kernel serving the same client itself over a veth pair.
//!
//! Every server runs in this process, each in network namespaces of its own, all at once; the client is
//! a kernel UDP socket (10.7.0.1) in the server's peer namespace, driven from this thread:
//!
//! - fastpath: a TUN interface per configuration (offload on or off, batching on or off: `rx_batch` and
//!   `tx_batch` 32 or 1; and offload, batching and UDP segmentation offload on receive), a stack in a
//!   thread of its own serving discard (port 9) and echo (port 7) at 10.7.0.2, sleeping in `poll(2)` on
//!   the TUN descriptor when idle.
//! - linux: a veth pair between a client namespace and a server namespace, kernel sockets at 10.7.0.2 in
//!   threads of their own (one per port, blocking), with the same 8 MiB receive queues as fastpath's.
//!   veth offers checksum offload, so the kernel computes no UDP checksum on this path.
//!
//! Workloads, for each datagram size: **discard**, the client sends as fast as it can for the run's
//! duration and the server counts what it receives (datagrams/s received; the send rate is reported
//! beside it); **discard-gso**, the same with a client socket set to `UDP_SEGMENT`, which hands the
//! kernel up to 64 datagrams (at most 64 KiB) per `send` to segment (only the USO configuration gets
//! them from the TUN interface unsegmented; veth passes them on whole to the receiving socket, which
//! segments them); **echo**, the client sends a window of datagrams, reads the echoes back (20 ms timeout,
//! a missing echo is counted lost) and repeats. Gbit/s counts UDP payload. Every (server, workload,
//! size) runs once per round, interleaved, and the median round is quoted.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket as KernelSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::buf::BufferDepot;
use fastpath::link::{TunConfig, TunHandle, TunLink};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use serde::Serialize;

use super::common;
use crate::netns::{self, Namespace};
use crate::serve::{binding, SERVER_RECV_BUFFER};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
const ECHO: u16 = 7;
const DISCARD: u16 = 9;
/// How long an echo client waits for a missing echo before counting it lost.
const ECHO_TIMEOUT: Duration = Duration::from_millis(20);
/// Datagrams per `send` in the discard-gso workload (at most 64 KiB in all).
const GSO_SEGMENTS: usize = 64;

/// Options of `fastpath bench tun`.
#[derive(Args, Debug)]
pub struct TunArgs {
    /// Seconds per measurement, 0.05 to 3600 [default: 1; with --quick: 0.2].
    #[arg(long, value_parser = common::parse_measure_seconds)]
    seconds: Option<f64>,
    /// Rounds; every (server, workload, size) runs once per round and the median is quoted [default:
    /// 5; with --quick: 1].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Datagram sizes in bytes (1 to 1472: one packet at MTU 1500).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1472],
          value_parser = common::count(1, 1472))]
    sizes: Vec<usize>,
    /// Echo datagrams the client keeps in flight, 1 to 4096.
    #[arg(long, default_value_t = 32, value_parser = common::count(1, 4096))]
    window: usize,
    /// A short run (0.2 s per measurement, one round) for tests and CI; explicit options win over it:
    /// it only fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-` for standard output).
    #[arg(long)]
    json: Option<String>,
}

impl TunArgs {
    /// Seconds per measurement and rounds: what was given, else the default or the quick run's.
    fn plan(&self) -> (f64, usize) {
        let (secs, rounds) = if self.quick { (0.2, 1) } else { (1.0, 5) };
        (self.seconds.unwrap_or(secs), self.rounds.unwrap_or(rounds))
    }
}

/// One measurement's median.
#[derive(Clone, Debug, Serialize)]
pub struct TunRow {
    /// `discard` or `echo`.
    pub workload: String,
    /// Datagram payload in bytes.
    pub size: usize,
    /// `fastpath` or `linux`.
    pub server: String,
    /// fastpath's checksum offload over TUN (none for linux).
    pub offload: Option<bool>,
    /// fastpath's batching (`rx_batch`/`tx_batch` 32, else 1; none for linux).
    pub batching: Option<bool>,
    /// fastpath's UDP segmentation offload on receive (none for linux).
    pub uso: Option<bool>,
    /// Datagrams per second received by the server (discard) or echoed back to the client (echo).
    pub datagrams_per_s: f64,
    /// The same in Gbit/s of UDP payload.
    pub gbit_per_s: f64,
    /// Discard: datagrams per second the client sent. Echo: the same as `datagrams_per_s`.
    pub offered_per_s: f64,
    /// Echo: datagrams lost per run (median). Discard: datagrams sent but not received.
    pub lost: f64,
    /// `datagrams_per_s` over linux's for the same workload and size.
    pub ratio_vs_linux: f64,
}

/// A server under test and the client socket facing it.
struct Target {
    label: &'static str,
    offload: Option<bool>,
    batching: Option<bool>,
    uso: Option<bool>,
    client: KernelSocket,
    /// The client for discard-gso: a socket that will have `UDP_SEGMENT` set.
    gso_client: KernelSocket,
    received: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Result<(), String>>>,
    tun: Option<TunHandle>,
}

/// Every namespace made and every thread started; on drop, threads stop first, then namespaces go.
struct Testbed {
    stop: Arc<AtomicBool>,
    targets: Vec<Target>,
    namespaces: Vec<Namespace>,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in &mut self.targets {
            for th in t.threads.drain(..) {
                if let Ok(Err(e)) = th.join() {
                    eprintln!("fastpath: bench tun: {} server: {e}", t.label);
                }
            }
        }
        self.targets.clear();
        // Namespaces (and the veth pair inside them) are removed as `namespaces` drops.
    }
}

fn new_namespace(bed: &mut Testbed) -> Result<String, String> {
    let name = format!("fp-bench-{}-{}", std::process::id(), bed.namespaces.len());
    let ns = Namespace::ensure(&name)?;
    bed.namespaces.push(ns);
    Ok(name)
}

/// A kernel socket at `addr` in namespace `ns`.
fn socket_in(ns: &str, addr: SocketAddrV4) -> Result<KernelSocket, String> {
    netns::within(ns, move || KernelSocket::bind(addr))?
        .map_err(|e| format!("binding {addr} in {ns}: {e}"))
}

/// Makes a kernel socket's receive queue `bytes` deep, past `rmem_max` (we are root).
fn deepen(sock: &KernelSocket, bytes: usize) -> Result<(), String> {
    nix::sys::socket::setsockopt(sock, nix::sys::socket::sockopt::RcvBufForce, &bytes)
        .map_err(|e| format!("SO_RCVBUFFORCE: {e}"))
}

/// fastpath at 10.7.0.2 on a new TUN interface in a new namespace, in a thread of its own.
fn fastpath_target(
    bed: &mut Testbed,
    label: &'static str,
    offload: bool,
    batching: bool,
    uso: bool,
) -> Result<Target, String> {
    let ns = new_namespace(bed)?;
    let mut link = TunLink::open(&TunConfig {
        name: "fpb0".into(),
        netns: Some(ns.clone()),
        mtu: 1500,
        offload,
        uso,
    })
    .map_err(|e| format!("TUN interface in {ns}: {e}"))?;
    if uso && !link.uso_enabled() {
        return Err(
            "this kernel does not offer UDP segmentation offload on TUN (Linux 6.2+)".into(),
        );
    }
    let tun = link.handle();
    let ip = |args: &[&str]| {
        let mut all = vec!["-n", ns.as_str()];
        all.extend_from_slice(args);
        crate::netns::run_ip(&all)
    };
    ip(&["addr", "add", "10.7.0.1/24", "dev", "fpb0"])?;
    let _ = std::process::Command::new("ip")
        .args(["netns", "exec", &ns, "sysctl", "-qw"])
        .arg("net.ipv6.conf.fpb0.disable_ipv6=1")
        .output();
    ip(&["link", "set", "dev", "fpb0", "up"])?;
    let client = socket_in(&ns, SocketAddrV4::new(CLIENT, 0))?;
    let gso_client = socket_in(&ns, SocketAddrV4::new(CLIENT, 0))?;

    let received = Arc::new(AtomicU64::new(0));
    let (stop, count, handle) = (bed.stop.clone(), received.clone(), tun.clone());
    let thread = std::thread::spawn(move || -> Result<(), String> {
        let mut config = StackConfig::default();
        if !batching {
            config.rx_batch = 1;
            config.tx_batch = 1;
        }
        let mut stack = Stack::new(config);
        let depot = BufferDepot::new();
        link.set_buffer_depot(depot.clone());
        stack.set_buffer_depot(depot);
        stack.add_interface("fpb0", link, Ipv4Cidr::new(SERVER, 24));
        let echo = binding(&mut stack, ECHO)?;
        let discard = binding(&mut stack, DISCARD)?;
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let mut work = stack.poll(Instant::now());
            while let Ok((n, from)) = stack.udp(echo).recv_from(&mut buf) {
                let _ = stack.udp(echo).send_to(&buf[..n], from);
                work += 1;
            }
            let mut n = 0;
            while stack.udp(discard).recv_from_with(|_, _| ()).is_ok() {
                n += 1;
            }
            count.fetch_add(n, Ordering::Relaxed);
            stack.flush();
            if work + n as usize == 0 {
                handle
                    .wait(Some(Duration::from_millis(20)))
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    });
    Ok(Target {
        label,
        offload: Some(offload),
        batching: Some(batching),
        uso: Some(uso),
        client,
        gso_client,
        received,
        threads: vec![thread],
        tun: Some(tun),
    })
}

/// The kernel at 10.7.0.2 over a veth pair from the client's namespace to a server namespace, with a
/// blocking thread per port.
fn linux_target(bed: &mut Testbed) -> Result<Target, String> {
    let client_ns = new_namespace(bed)?;
    let server_ns = new_namespace(bed)?;
    let ipn = |ns: &str, args: &[&str]| {
        let mut all = vec!["-n", ns];
        all.extend_from_slice(args);
        crate::netns::run_ip(&all)
    };
    ipn(
        &client_ns,
        &[
            "link", "add", "fpv0", "type", "veth", "peer", "name", "fpv1", "netns", &server_ns,
        ],
    )?;
    ipn(&client_ns, &["addr", "add", "10.7.0.1/24", "dev", "fpv0"])?;
    ipn(&server_ns, &["addr", "add", "10.7.0.2/24", "dev", "fpv1"])?;
    ipn(&client_ns, &["link", "set", "dev", "fpv0", "up"])?;
    ipn(&server_ns, &["link", "set", "dev", "fpv1", "up"])?;
    let client = socket_in(&client_ns, SocketAddrV4::new(CLIENT, 0))?;
    let gso_client = socket_in(&client_ns, SocketAddrV4::new(CLIENT, 0))?;

    let received = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for port in [DISCARD, ECHO] {
        let sock = socket_in(&server_ns, SocketAddrV4::new(SERVER, port))?;
        deepen(&sock, SERVER_RECV_BUFFER)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| e.to_string())?;
        let (stop, count) = (bed.stop.clone(), received.clone());
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::Relaxed) {
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) if port == ECHO => {
                        let _ = sock.send_to(&buf[..n], from);
                    }
                    Ok(_) => {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {}
                }
            }
            Ok(())
        }));
    }
    Ok(Target {
        label: "linux over veth",
        offload: None,
        batching: None,
        uso: None,
        client,
        gso_client,
        received,
        threads,
        tun: None,
    })
}

/// Reads whatever is left in the client's queue (late echoes of an earlier run).
fn drain(sock: &KernelSocket) {
    let mut buf = [0u8; 2048];
    let _ = sock.set_nonblocking(true);
    while sock.recv(&mut buf).is_ok() {}
    let _ = sock.set_nonblocking(false);
}

/// One discard run: (received/s, sent/s, sent but not received). With `gso`, each `send` carries
/// [`GSO_SEGMENTS`] datagrams (fewer if they would pass 64 KiB) for the kernel to segment.
fn discard_run(t: &Target, size: usize, secs: f64, gso: bool) -> Result<(f64, f64, f64), String> {
    let (client, per_send) = if gso {
        nix::sys::socket::setsockopt(
            &t.gso_client,
            nix::sys::socket::sockopt::UdpGsoSegment,
            &(size as i32),
        )
        .map_err(|e| format!("UDP_SEGMENT: {e}"))?;
        (&t.gso_client, GSO_SEGMENTS.min(65507 / size))
    } else {
        (&t.client, 1)
    };
    let data = vec![0x5a; size * per_send];
    let to = SocketAddrV4::new(SERVER, DISCARD);
    let before = t.received.load(Ordering::Relaxed);
    let started = WallClock::now();
    let limit = Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while started.elapsed() < limit {
        for _ in 0..64 / per_send.min(64) {
            if client.send_to(&data, to).is_ok() {
                sent += per_send as u64;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Let the server finish what is queued for it.
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = t.received.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    let got = last - before;
    if got == 0 {
        return Err(format!("{}: nothing reached the discard server", t.label));
    }
    Ok((
        got as f64 / elapsed,
        sent as f64 / elapsed,
        sent.saturating_sub(got) as f64,
    ))
}

/// One echo run: (echoes/s, lost).
fn echo_run(t: &Target, size: usize, secs: f64, window: usize) -> Result<(f64, f64), String> {
    let data = vec![0xa5; size];
    let to = SocketAddrV4::new(SERVER, ECHO);
    let mut buf = vec![0u8; 2048];
    drain(&t.client);
    t.client
        .set_read_timeout(Some(ECHO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let started = WallClock::now();
    let limit = Duration::from_secs_f64(secs);
    let (mut got, mut lost) = (0u64, 0u64);
    while started.elapsed() < limit {
        for _ in 0..window {
            t.client
                .send_to(&data, to)
                .map_err(|e| format!("{}: send: {e}", t.label))?;
        }
        let mut k = 0;
        while k < window {
            match t.client.recv(&mut buf) {
                Ok(_) => k += 1,
                Err(_) => break,
            }
        }
        got += k as u64;
        lost += (window - k) as u64;
    }
    let elapsed = started.elapsed().as_secs_f64();
    if got == 0 {
        return Err(format!("{}: no echo came back", t.label));
    }
    Ok((got as f64 / elapsed, lost as f64))
}

pub(crate) fn check_environment() -> Result<(), String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    if !root || !std::path::Path::new("/dev/net/tun").exists() {
        return Err("bench tun needs root, /dev/net/tun and ip(8)".into());
    }
    Ok(())
}

/// Runs the experiment and returns its rows.
pub fn measure(args: &TunArgs) -> Result<Vec<TunRow>, String> {
    check_environment()?;
    let (secs, rounds) = args.plan();
    if let Some(&bad) = args.sizes.iter().find(|&&s| s == 0 || s > 1472) {
        return Err(format!("size {bad} outside 1..=1472"));
    }
    let window = args.window;
    let mut bed = Testbed {
        stop: Arc::new(AtomicBool::new(false)),
        targets: Vec::new(),
        namespaces: Vec::new(),
    };
    for (label, offload, batching, uso) in [
        ("fastpath offload+batching+USO", true, true, true),
        ("fastpath offload+batching", true, true, false),
        ("fastpath offload", true, false, false),
        ("fastpath batching", false, true, false),
        ("fastpath, neither", false, false, false),
    ] {
        let t = fastpath_target(&mut bed, label, offload, batching, uso)?;
        bed.targets.push(t);
    }
    let t = linux_target(&mut bed)?;
    bed.targets.push(t);

    let workloads = ["discard", "discard-gso", "echo"];
    let cells = workloads.len() * args.sizes.len() * bed.targets.len();
    let bar = common::progress((rounds * cells) as u64, "bench tun");
    // samples[cell] = (rate, offered, lost) per round
    let mut samples: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); cells];
    for _ in 0..rounds {
        let mut cell = 0;
        for w in workloads {
            for &size in &args.sizes {
                for t in &bed.targets {
                    let s = if w != "echo" {
                        discard_run(t, size, secs, w == "discard-gso")?
                    } else {
                        let (rate, lost) = echo_run(t, size, secs, window)?;
                        (rate, rate, lost)
                    };
                    samples[cell].push(s);
                    cell += 1;
                    bar.inc(1);
                }
            }
        }
    }
    bar.finish_and_clear();

    let mut rows = Vec::new();
    let mut cell = 0;
    for w in workloads {
        for &size in &args.sizes {
            let first = rows.len();
            for t in &bed.targets {
                let s = &samples[cell];
                let rate = common::median(&s.iter().map(|x| x.0).collect::<Vec<_>>());
                rows.push(TunRow {
                    workload: w.to_string(),
                    size,
                    server: if t.tun.is_some() { "fastpath" } else { "linux" }.to_string(),
                    offload: t.offload,
                    batching: t.batching,
                    uso: t.uso,
                    datagrams_per_s: rate,
                    gbit_per_s: rate * size as f64 * 8.0 / 1e9,
                    offered_per_s: common::median(&s.iter().map(|x| x.1).collect::<Vec<_>>()),
                    lost: common::median(&s.iter().map(|x| x.2).collect::<Vec<_>>()),
                    ratio_vs_linux: f64::NAN,
                });
                cell += 1;
            }
            let linux = rows.last().map_or(f64::NAN, |r| r.datagrams_per_s);
            for r in &mut rows[first..] {
                r.ratio_vs_linux = r.datagrams_per_s / linux;
            }
        }
    }
    let link_stats: Vec<String> = bed
        .targets
        .iter()
        .filter_map(|t| {
            let s = t.tun.as_ref()?.stats();
            Some(format!(
                "{}: {} read ({} from {} GSO packets), {} written, {} reads ({:.2} per packet), {} partial in, {} offloaded out, {} refused",
                t.label,
                s.rx_packets,
                s.rx_gso_segments,
                s.rx_gso_packets,
                s.tx_packets,
                s.rx_reads,
                s.rx_reads as f64 / s.rx_packets.max(1) as f64,
                s.rx_partial,
                s.tx_offloaded,
                s.rx_dropped()
            ))
        })
        .collect();
    drop(bed);
    println!("TUN link counters over the whole run:");
    for l in link_stats {
        println!("  {l}");
    }
    println!();
    Ok(rows)
}

/// Prints the rows: one line per server, one column per workload and size.
pub fn print(rows: &[TunRow]) {
    let columns = common::distinct(rows.iter().map(|r| (r.workload.clone(), r.size)));
    type Server = (String, Option<bool>, Option<bool>, Option<bool>);
    let servers: Vec<Server> = common::distinct(
        rows.iter()
            .map(|r| (r.server.clone(), r.offload, r.batching, r.uso)),
    );
    let on = |b: bool| if b { "on" } else { "off" };
    let label = |s: &Server| match (s.1, s.2, s.3) {
        (Some(o), Some(b), Some(true)) => {
            format!("fastpath, offload {}, batching {}, USO", on(o), on(b))
        }
        (Some(o), Some(b), _) => format!("fastpath, offload {}, batching {}", on(o), on(b)),
        _ => "linux over veth".to_string(),
    };
    let find = |s: &Server, c: &(String, usize)| {
        rows.iter().find(|r| {
            r.server == s.0
                && r.offload == s.1
                && r.batching == s.2
                && r.uso == s.3
                && r.workload == c.0
                && r.size == c.1
        })
    };
    for (title, cell) in [
        ("thousands of datagrams/s", 0),
        ("Gbit/s of UDP payload", 1),
        ("ratio to linux", 2),
    ] {
        print!("{:<44}", title);
        for c in &columns {
            print!("{:>20}", format!("{} {} B", c.0, c.1));
        }
        println!();
        for s in &servers {
            print!("{:<44}", label(s));
            for c in &columns {
                let text = find(s, c).map_or(String::new(), |r| match cell {
                    0 => format!("{:.0}", r.datagrams_per_s / 1e3),
                    1 => format!("{:.3}", r.gbit_per_s),
                    _ => format!("{:.2}x", r.ratio_vs_linux),
                });
                print!("{text:>20}");
            }
            println!();
        }
        println!();
    }
    println!("client sent, thousands of datagrams/s (the rows above, in order):");
    for c in columns.iter().filter(|c| c.0 != "echo") {
        let sent: Vec<String> = servers
            .iter()
            .filter_map(|s| find(s, c).map(|r| format!("{:.0}", r.offered_per_s / 1e3)))
            .collect();
        println!("  {} {} B: {}", c.0, c.1, sent.join(" / "));
    }
}

/// `fastpath bench tun`.
pub fn run(args: &TunArgs) -> Result<(), String> {
    common::header(
        "bench tun: a kernel UDP client against fastpath over TUN, and against the kernel over veth",
    );
    let rows = measure(args)?;
    let (secs, rounds) = args.plan();
    println!(
        "{secs} s per run, median of {rounds} interleaved rounds; echo keeps {} datagrams in flight\n",
        args.window
    );
    print(&rows);
    if let Some(path) = &args.json {
        common::write_json(path, &rows)?;
    }
    Ok(())
}
