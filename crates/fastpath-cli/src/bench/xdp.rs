//! `fastpath bench xdp`: what the receiving side costs per datagram on AF_XDP, on TUN, in the
//! kernel, and with no stack at all.
//!
//! A kernel UDP socket (10.7.0.1) sends datagrams of `--size` bytes as fast as it can to the discard
//! port (9) of 10.7.0.2, 64 to a `send` with `UDP_SEGMENT` (the kernel cuts them before they reach
//! any of the servers) so that one sender outpaces every receiver and the receivers are measured
//! busy rather than woken for each datagram, each server in namespaces of its own, all created first and then measured
//! in turn, round after round (the median round is quoted):
//!
//! - **fastpath on AF_XDP**: a veth pair, the kernel's end without transmit checksum offload (so
//!   its frames carry finished checksums), an AF_XDP socket on fastpath's end in copy mode and a
//!   stack on a thread of its own, ARP answered by the stack;
//! - **fastpath on TUN**, offload on, as `bench tun`'s default;
//! - **linux over veth**: a kernel socket reading in a thread;
//! - **the AF_XDP ceiling**: a thread that reads the AF_XDP socket and drops every frame (its
//!   buffer recycled, as a stack's is), counting those to the discard port: no stack (the kernel's side has a permanent neighbour entry, as
//!   nothing answers ARP).
//!
//! For each: datagrams received per second, **CPU nanoseconds per datagram in the server's
//! threads** (`/proc/self/task/TID/schedstat`: the stack's, or the kernel socket reader's, their
//! system calls included) and **on the whole machine** (`/proc/stat`: every core's busy time,
//! the sender's and the kernel's receive work included), both over datagrams received. On veth
//! the kernel's copy into the AF_XDP ring runs in the sender's context, so it is in the machine's
//! figure and not in the server's.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket as KernelSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::buf::{BufferMode, BufferPool};
use fastpath::link::{Link, TunConfig, TunLink, XdpConfig, XdpLink};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use serde::Serialize;

use super::common::{self, cpu_ns, own_schedstat};
use crate::bench::common::outln;
use crate::netns::{self, Namespace};
use crate::serve::{binding, SERVER_RECV_BUFFER};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
const DISCARD: u16 = 9;
/// Datagrams per `send` (at most 64 KiB in all).
const GSO_SEGMENTS: usize = 64;

/// Options of `fastpath bench xdp`.
#[derive(Args, Debug)]
pub struct XdpArgs {
    /// Seconds per measurement, 0.05 to 3600 [default: 1; with --quick: 0.2].
    #[arg(long, value_parser = common::parse_measure_seconds)]
    seconds: Option<f64>,
    /// Rounds, every server once per round; the median is quoted [default: 5; with --quick: 1].
    #[arg(long, value_parser = common::count(1, 1000))]
    rounds: Option<usize>,
    /// Datagram payload in bytes (1 to 1472).
    #[arg(long, default_value_t = 64, value_parser = common::count(1, 1472))]
    size: usize,
    /// A short run (0.2 s, one round); explicit options win over it.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error).
    #[arg(long)]
    json: Option<String>,
}

/// One server's medians.
#[derive(Clone, Debug, Serialize)]
pub struct XdpRow {
    /// `fastpath AF_XDP`, `fastpath TUN`, `linux veth` or `ceiling AF_XDP`.
    pub server: String,
    /// Datagram payload in bytes.
    pub size: usize,
    /// Datagrams per second the server received.
    pub datagrams_per_s: f64,
    /// Datagrams per second the client sent.
    pub sent_per_s: f64,
    /// CPU nanoseconds of the server's threads per datagram received.
    pub server_ns_per_datagram: f64,
    /// CPU nanoseconds of the whole machine (every core's busy time) per datagram received.
    pub machine_ns_per_datagram: f64,
}

/// A server and the client facing it.
struct Target {
    label: &'static str,
    client: KernelSocket,
    received: Arc<AtomicU64>,
    threads: Arc<Mutex<Vec<std::path::PathBuf>>>,
}

impl Target {
    fn server_cpu_ns(&self) -> u64 {
        let threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        threads.iter().map(|p| cpu_ns(p)).sum()
    }
}

/// Namespaces and threads; on drop the threads stop first, then the namespaces go.
struct Bed {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Result<(), String>>>,
    namespaces: Vec<Namespace>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            if let Ok(Err(e)) = t.join() {
                eprintln!("fastpath: bench xdp: server: {e}");
            }
        }
    }
}

impl Bed {
    fn namespace(&mut self) -> Result<String, String> {
        let name = format!("fp-bxdp-{}-{}", std::process::id(), self.namespaces.len());
        self.namespaces.push(Namespace::ensure(&name)?);
        Ok(name)
    }

    /// Starts a server thread that registers itself in `threads` and runs `f`.
    fn spawn(
        &mut self,
        name: &str,
        threads: &Arc<Mutex<Vec<std::path::PathBuf>>>,
        f: impl FnOnce(&AtomicBool) -> Result<(), String> + Send + 'static,
    ) -> Result<(), String> {
        let (stop, registry) = (self.stop.clone(), threads.clone());
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if let Some(path) = own_schedstat() {
                    registry
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(path);
                }
                f(&stop)
            })
            .map_err(|e| format!("a server thread: {e}"))?;
        self.threads.push(thread);
        Ok(())
    }

    /// A veth pair `dev`/`dev`k in a new namespace, the kernel's end (`dev`k) at 10.7.0.1/24
    /// without transmit checksum offload; the namespace and an AF_XDP link on `dev`.
    fn veth_xdp(&mut self, dev: &str) -> Result<(String, XdpLink), String> {
        let ns = self.namespace()?;
        let kernel = format!("{dev}k");
        let ip = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            netns::run_ip(&all)
        };
        ip(&["link", "add", dev, "type", "veth", "peer", "name", &kernel])?;
        ip(&["addr", "add", "10.7.0.1/24", "dev", &kernel])?;
        for d in [dev, kernel.as_str()] {
            ip(&["link", "set", "dev", d, "up"])?;
        }
        fastpath::link::disable_tx_checksum(Some(&ns), &kernel).map_err(|e| e.to_string())?;
        let link = XdpLink::open(&XdpConfig {
            ifname: dev.into(),
            netns: Some(ns.clone()),
            ..XdpConfig::default()
        })
        .map_err(|e| format!("AF_XDP on {dev} in {ns}: {e}"))?;
        Ok((ns, link))
    }

    fn target(&self, label: &'static str, ns: &str) -> Result<Target, String> {
        let client = netns::within(ns, move || KernelSocket::bind(SocketAddrV4::new(CLIENT, 0)))?
            .map_err(|e| format!("binding the client in {ns}: {e}"))?;
        Ok(Target {
            label,
            client,
            received: Arc::new(AtomicU64::new(0)),
            threads: Arc::new(Mutex::new(Vec::new())),
        })
    }

    fn fastpath_xdp(&mut self) -> Result<Target, String> {
        let (ns, mut link) = self.veth_xdp("fpx0")?;
        let t = self.target("fastpath AF_XDP", &ns)?;
        let (count, handle) = (t.received.clone(), link.handle());
        self.spawn("fp-xdp", &t.threads, move |stop| {
            let mut stack = Stack::new(StackConfig::default());
            let depot = fastpath::buf::BufferDepot::new();
            link.set_buffer_depot(depot.clone());
            stack.set_buffer_depot(depot);
            stack.add_interface("fpx0", link, Ipv4Cidr::new(SERVER, 24));
            discard(stack, stop, &count, |nap| handle.wait(Some(nap)))
        })?;
        Ok(t)
    }

    fn fastpath_tun(&mut self) -> Result<Target, String> {
        let ns = self.namespace()?;
        let mut link = TunLink::open(&TunConfig {
            name: "fpt0".into(),
            netns: Some(ns.clone()),
            ..TunConfig::default()
        })
        .map_err(|e| format!("TUN interface in {ns}: {e}"))?;
        for args in [
            &["addr", "add", "10.7.0.1/24", "dev", "fpt0"][..],
            &["link", "set", "dev", "fpt0", "up"],
        ] {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            netns::run_ip(&all)?;
        }
        let t = self.target("fastpath TUN", &ns)?;
        let (count, handle) = (t.received.clone(), link.handle());
        self.spawn("fp-tun", &t.threads, move |stop| {
            let stack = crate::queues::stack_for_queue(&mut link, StackConfig::default(), 0, 1)?;
            let mut stack = stack;
            stack.add_interface("fpt0", link, Ipv4Cidr::new(SERVER, 24));
            discard(stack, stop, &count, |nap| handle.wait(Some(nap)))
        })?;
        Ok(t)
    }

    fn linux(&mut self) -> Result<Target, String> {
        let (client_ns, server_ns) = (self.namespace()?, self.namespace()?);
        let ipn = |ns: &str, args: &[&str]| {
            let mut all = vec!["-n", ns];
            all.extend_from_slice(args);
            netns::run_ip(&all)
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
        let t = self.target("linux veth", &client_ns)?;
        let at = SocketAddrV4::new(SERVER, DISCARD);
        let sock = netns::within(&server_ns, move || KernelSocket::bind(at))?
            .map_err(|e| format!("binding {at}: {e}"))?;
        nix::sys::socket::setsockopt(
            &sock,
            nix::sys::socket::sockopt::RcvBufForce,
            &SERVER_RECV_BUFFER,
        )
        .map_err(|e| format!("SO_RCVBUFFORCE: {e}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| e.to_string())?;
        let count = t.received.clone();
        self.spawn("linux", &t.threads, move |stop| {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if sock.recv(&mut buf).is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })?;
        Ok(t)
    }

    fn ceiling(&mut self) -> Result<Target, String> {
        let (ns, mut link) = self.veth_xdp("fpc0")?;
        // Nothing answers ARP for the ceiling.
        let mac = link.mac().to_string();
        netns::run_ip(&[
            "-n",
            &ns,
            "neigh",
            "add",
            "10.7.0.2",
            "lladdr",
            &mac,
            "dev",
            "fpc0k",
            "nud",
            "permanent",
        ])?;
        let t = self.target("ceiling AF_XDP", &ns)?;
        let count = t.received.clone();
        self.spawn("ceiling-xdp", &t.threads, move |stop| {
            // The frames' buffers go back to the link through a depot, as a stack's do.
            let depot = fastpath::buf::BufferDepot::new();
            link.set_buffer_depot(depot.clone());
            let mut pool = BufferPool::new(BufferMode::Pool, 256);
            pool.set_depot(depot);
            let mut batch = Vec::with_capacity(64);
            while !stop.load(Ordering::Relaxed) {
                if link.receive(&mut batch, 64) == 0 {
                    link.wait(Some(Duration::from_millis(20)))
                        .map_err(|e| e.to_string())?;
                    continue;
                }
                let mut n = 0;
                for f in batch.drain(..) {
                    let d = f.data();
                    let ours = d.len() > 14
                        && d[12..14] == [0x08, 0x00]
                        && super::ceiling::udp_to_port(&d[14..]) == Some(DISCARD);
                    n += u64::from(ours);
                    pool.free(f);
                }
                count.fetch_add(n, Ordering::Relaxed);
            }
            Ok(())
        })?;
        Ok(t)
    }
}

/// A stack serving discard on port 9 until `stop`, counting datagrams in `count`.
fn discard(
    mut stack: Stack,
    stop: &AtomicBool,
    count: &AtomicU64,
    wait: impl Fn(Duration) -> std::io::Result<bool>,
) -> Result<(), String> {
    let sock = binding(&mut stack, DISCARD)?;
    while !stop.load(Ordering::Relaxed) {
        let work = stack.poll(Instant::now());
        let mut n = 0;
        while stack.udp(sock).recv_from_with(|_, _| ()).is_ok() {
            n += 1;
        }
        if n > 0 {
            count.fetch_add(n, Ordering::Relaxed);
        }
        stack.flush();
        if work + n as usize == 0 {
            wait(Duration::from_millis(20)).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Busy and total time of every core so far, in clock ticks (`/proc/stat`'s first line).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle and iowait are the fourth and fifth.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// The counter once it stops moving: the server finished what was queued.
fn settled(count: &AtomicU64) -> u64 {
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = count.load(Ordering::Relaxed);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// One run: (received/s, sent/s, server ns per datagram, machine ns per datagram).
fn run_once(t: &Target, size: usize, secs: f64) -> Result<[f64; 4], String> {
    // Each send hands the kernel up to 64 datagrams to segment (`UDP_SEGMENT`): one sender then
    // outpaces any of the receivers, which are measured busy, not woken for every datagram.
    let per_send = GSO_SEGMENTS.min(65507 / size);
    nix::sys::socket::setsockopt(
        &t.client,
        nix::sys::socket::sockopt::UdpGsoSegment,
        &(size as i32),
    )
    .map_err(|e| format!("UDP_SEGMENT: {e}"))?;
    let data = vec![0x5a; size * per_send];
    let to = SocketAddrV4::new(SERVER, DISCARD);
    let before = t.received.load(Ordering::Relaxed);
    let server_before = t.server_cpu_ns();
    let machine_before = machine_ticks();
    let started = WallClock::now();
    let limit = Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while started.elapsed() < limit {
        for _ in 0..4 {
            if t.client.send_to(&data, to).is_ok() {
                sent += per_send as u64;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let got = settled(&t.received) - before;
    let server_ns = t.server_cpu_ns() - server_before;
    let machine_after = machine_ticks();
    if got == 0 {
        return Err(format!("{}: nothing reached the discard server", t.label));
    }
    // Clock ticks are USER_HZ, 100 a second on Linux.
    let machine_ns = (machine_after.0 - machine_before.0) as f64 * 1e7;
    Ok([
        got as f64 / elapsed,
        sent as f64 / elapsed,
        server_ns as f64 / got as f64,
        machine_ns / got as f64,
    ])
}

/// Runs the experiment and returns its rows.
pub fn measure(args: &XdpArgs) -> Result<Vec<XdpRow>, String> {
    netns::check_privileges("bench xdp")?;
    let (secs, rounds) = if args.quick { (0.2, 1) } else { (1.0, 5) };
    let (secs, rounds) = (args.seconds.unwrap_or(secs), args.rounds.unwrap_or(rounds));
    let mut bed = Bed {
        stop: Arc::new(AtomicBool::new(false)),
        threads: Vec::new(),
        namespaces: Vec::new(),
    };
    let targets = vec![
        bed.fastpath_xdp()?,
        bed.fastpath_tun()?,
        bed.linux()?,
        bed.ceiling()?,
    ];
    // ARP and the first packets before anything is timed.
    for t in &targets {
        let _ = t
            .client
            .send_to(&[0; 8], SocketAddrV4::new(SERVER, DISCARD));
    }
    std::thread::sleep(Duration::from_millis(300));
    let bar = common::progress((rounds * targets.len()) as u64, "bench xdp");
    let mut samples = vec![Vec::new(); targets.len()];
    for _ in 0..rounds {
        for (i, t) in targets.iter().enumerate() {
            samples[i].push(run_once(t, args.size, secs)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let rows = targets
        .iter()
        .zip(&samples)
        .map(|(t, s)| {
            let m = |k: usize| common::median(&s.iter().map(|x| x[k]).collect::<Vec<_>>());
            XdpRow {
                server: t.label.to_string(),
                size: args.size,
                datagrams_per_s: m(0),
                sent_per_s: m(1),
                server_ns_per_datagram: m(2),
                machine_ns_per_datagram: m(3),
            }
        })
        .collect();
    drop(bed);
    Ok(rows)
}

/// Prints the rows and the ratios the targets are about.
pub fn print(rows: &[XdpRow]) {
    outln!(
        "{:<18} {:>14} {:>14} {:>20} {:>21}",
        "server",
        "received k/s",
        "sent k/s",
        "server CPU ns/dgram",
        "machine CPU ns/dgram"
    );
    for r in rows {
        outln!(
            "{:<18} {:>14.1} {:>14.1} {:>20.0} {:>21.0}",
            r.server,
            r.datagrams_per_s / 1e3,
            r.sent_per_s / 1e3,
            r.server_ns_per_datagram,
            r.machine_ns_per_datagram
        );
    }
    let find = |s: &str| rows.iter().find(|r| r.server == s);
    if let (Some(x), Some(t), Some(c)) = (
        find("fastpath AF_XDP"),
        find("fastpath TUN"),
        find("ceiling AF_XDP"),
    ) {
        outln!();
        outln!(
            "fastpath's CPU per datagram: AF_XDP / TUN = {:.2}, AF_XDP / ceiling = {:.2}; machine: AF_XDP / TUN = {:.2}",
            x.server_ns_per_datagram / t.server_ns_per_datagram,
            x.server_ns_per_datagram / c.server_ns_per_datagram,
            x.machine_ns_per_datagram / t.machine_ns_per_datagram
        );
    }
}

pub fn run(args: &XdpArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header(
        "bench xdp: a kernel UDP sender against fastpath on AF_XDP and on TUN, the kernel over veth, and an AF_XDP reader with no stack",
    );
    let rows = measure(args)?;
    outln!(
        "{} B datagrams; the median of interleaved rounds\n",
        args.size
    );
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
