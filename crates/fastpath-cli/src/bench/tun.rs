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
//!
//! With `--queues N` (N > 1), one more fastpath server has N TUN queues and a stack on each, and one
//! more workload runs: **discard-senders**, `--senders` kernel sockets sending at once from threads of
//! their own, each 64 datagrams per `send` (`UDP_SEGMENT`), against fastpath with one queue
//! (offload and batching), with N, and against linux. Beside the rates it reports the cores the
//! server's threads and the senders used (from `/proc/.../schedstat`) and datagrams per CPU-second of
//! the server's threads: on a machine whose cores the senders share, that is the figure that says what
//! more cores would give. The same workload also runs against the **ceiling** on one queue and on N:
//! threads that read the queues and drop what they read, with no stack behind them
//! ([`super::ceiling`]). What N queues give it over one is the most any stack could gain from them on
//! this machine, with these senders sharing its cores.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket as KernelSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::link::{TunConfig, TunHandle, TunLink};
use fastpath::{Instant, Ipv4Cidr, StackConfig};
use serde::Serialize;

use super::common::{self, cpu_ns, own_schedstat};
use crate::bench::common::{out, outln};
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
    /// Also run fastpath with this many TUN queues (a stack per queue, each on a thread of its own),
    /// and a workload from several kernel senders at once (`discard-senders`) against it, against
    /// one queue and against linux. 1 (the default) leaves both out.
    #[arg(long, default_value_t = 1, value_parser = common::count(1, 256))]
    queues: usize,
    /// Sender threads (each its own socket and port) in the `discard-senders` workload.
    #[arg(long, default_value_t = 2, value_parser = common::count(1, 64))]
    senders: usize,
    /// A short run (0.2 s per measurement, one round) for tests and CI; explicit options win over it:
    /// it only fills in what is not given.
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
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
    /// `fastpath`, `ceiling` (see [`super::ceiling`]) or `linux`.
    pub server: String,
    /// fastpath's checksum offload over TUN (none for linux).
    pub offload: Option<bool>,
    /// fastpath's batching (`rx_batch`/`tx_batch` 32, else 1; none for linux).
    pub batching: Option<bool>,
    /// fastpath's UDP segmentation offload on receive (none for linux).
    pub uso: Option<bool>,
    /// fastpath's TUN queues, a stack on each (none for linux).
    pub queues: Option<usize>,
    /// Sender threads (`discard-senders`; 1 otherwise).
    pub senders: usize,
    /// Datagrams per second received by the server (discard) or echoed back to the client (echo).
    pub datagrams_per_s: f64,
    /// The same in Gbit/s of UDP payload.
    pub gbit_per_s: f64,
    /// Discard: datagrams per second the client sent. Echo: the same as `datagrams_per_s`.
    pub offered_per_s: f64,
    /// Echo: datagrams lost per run (median). Discard: datagrams sent but not received.
    pub lost: f64,
    /// `discard-senders`: cores the server's threads used (fastpath's stacks, or the kernel's socket
    /// readers; the kernel's own receive work in the senders' context is not in it). NaN otherwise.
    pub server_cores: f64,
    /// `discard-senders`: cores the sender threads used (system calls and the kernel's sending path).
    pub sender_cores: f64,
    /// `discard-senders`: datagrams received per CPU-second of the server's threads.
    pub per_server_cpu_s: f64,
    /// `datagrams_per_s` over linux's for the same workload and size.
    pub ratio_vs_linux: f64,
}

/// A server under test and the client socket facing it.
struct Target {
    label: String,
    /// The ceiling: no stack reads the queues (see [`Reader::Null`]).
    null: bool,
    offload: Option<bool>,
    batching: Option<bool>,
    uso: Option<bool>,
    client: KernelSocket,
    /// The client for discard-gso: a socket that will have `UDP_SEGMENT` set.
    gso_client: KernelSocket,
    /// More client sockets, one per sender thread of the several-senders workload.
    senders: Vec<KernelSocket>,
    /// Datagrams the discard server received: a counter per stack (per queue), summed when read.
    received: Vec<Arc<Counter>>,
    threads: Vec<JoinHandle<Result<(), String>>>,
    /// The TUN queues' handles (none for linux).
    tun: Vec<TunHandle>,
    /// TUN queues (1 unless `--queues`; none for linux).
    queues: Option<usize>,
    /// The server threads' `/proc/self/task/TID/schedstat` paths, for their CPU time.
    server_threads: Arc<std::sync::Mutex<Vec<std::path::PathBuf>>>,
}

/// A counter on a cache line of its own, so that stacks on different cores never share one.
#[repr(align(64))]
#[derive(Default)]
struct Counter(AtomicU64);

impl Target {
    /// CPU nanoseconds the server's threads have run, all together.
    fn server_cpu_ns(&self) -> u64 {
        let threads = self
            .server_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        threads.iter().map(|p| cpu_ns(p)).sum()
    }

    /// Datagrams the discard server received so far, over every stack.
    fn received(&self) -> u64 {
        self.received
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }

    /// The TUN link counters summed over the queues; `None` for linux.
    fn tun_stats(&self) -> Option<fastpath::link::TunStats> {
        let mut all = self.tun.iter().map(TunHandle::stats);
        let mut sum = all.next()?;
        for s in all {
            sum += s;
        }
        Some(sum)
    }
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

/// What reads a TUN queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reader {
    /// A fastpath stack, batching (`rx_batch`/`tx_batch` 32) or not (1).
    Stack { batching: bool },
    /// The ceiling ([`super::ceiling`]): the packets read from the device and dropped, those to the
    /// discard port counted; no stack at all.
    Null,
}

/// At 10.7.0.2 on a new TUN interface in a new namespace, a `reader` per queue (a fastpath stack, or
/// the ceiling's), each in a thread of its own.
fn fastpath_target(
    bed: &mut Testbed,
    label: String,
    offload: bool,
    reader: Reader,
    uso: bool,
    queues: usize,
    senders: usize,
) -> Result<Target, String> {
    let ns = new_namespace(bed)?;
    let ephemeral = StackConfig::default().ephemeral_ports;
    let links = TunLink::open_queues(
        &TunConfig {
            name: "fpb0".into(),
            netns: Some(ns.clone()),
            mtu: 1500,
            offload,
            uso,
            io_uring: true,
            tap: None,
        },
        queues,
        &ephemeral,
    )
    .map_err(|e| format!("TUN interface in {ns}: {e}"))?;
    if uso && !links[0].uso_enabled() {
        return Err(
            "this kernel does not offer UDP segmentation offload on TUN (Linux 6.2+)".into(),
        );
    }
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
    let senders = (0..senders)
        .map(|_| socket_in(&ns, SocketAddrV4::new(CLIENT, 0)))
        .collect::<Result<Vec<_>, _>>()?;

    let (mut received, mut threads, mut tun) = (Vec::new(), Vec::new(), Vec::new());
    let server_threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    for (q, mut link) in links.into_iter().enumerate() {
        let count = Arc::new(Counter::default());
        received.push(count.clone());
        let handle = link.handle();
        tun.push(handle.clone());
        let stop = bed.stop.clone();
        let registry = server_threads.clone();
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            register(&registry);
            let Reader::Stack { batching } = reader else {
                return super::ceiling::drop_all(link, &stop, DISCARD, &count.0);
            };
            let mut config = StackConfig::default();
            if !batching {
                config.rx_batch = 1;
                config.tx_batch = 1;
            }
            let mut stack = crate::queues::stack_for_queue(&mut link, config, q, queues)?;
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
                if n > 0 {
                    count.0.fetch_add(n, Ordering::Relaxed);
                }
                stack.flush();
                if work + n as usize == 0 {
                    handle
                        .wait(Some(Duration::from_millis(20)))
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        }));
    }
    Ok(Target {
        label,
        null: reader == Reader::Null,
        offload: Some(offload),
        batching: match reader {
            Reader::Stack { batching } => Some(batching),
            Reader::Null => None,
        },
        uso: Some(uso),
        client,
        gso_client,
        senders,
        received,
        threads,
        tun,
        queues: Some(queues),
        server_threads,
    })
}

/// The kernel at 10.7.0.2 over a veth pair from the client's namespace to a server namespace, with a
/// blocking thread per port.
fn linux_target(bed: &mut Testbed, senders: usize) -> Result<Target, String> {
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
    let senders = (0..senders)
        .map(|_| socket_in(&client_ns, SocketAddrV4::new(CLIENT, 0)))
        .collect::<Result<Vec<_>, _>>()?;

    let received = Arc::new(Counter::default());
    let mut threads = Vec::new();
    let server_threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    for port in [DISCARD, ECHO] {
        let sock = socket_in(&server_ns, SocketAddrV4::new(SERVER, port))?;
        deepen(&sock, SERVER_RECV_BUFFER)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| e.to_string())?;
        let (stop, count) = (bed.stop.clone(), received.clone());
        let registry = server_threads.clone();
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            register(&registry);
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::Relaxed) {
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) if port == ECHO => {
                        let _ = sock.send_to(&buf[..n], from);
                    }
                    Ok(_) => {
                        count.0.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {}
                }
            }
            Ok(())
        }));
    }
    Ok(Target {
        label: "linux over veth".into(),
        null: false,
        offload: None,
        batching: None,
        uso: None,
        client,
        gso_client,
        senders,
        received: vec![received],
        threads,
        tun: Vec::new(),
        queues: None,
        server_threads,
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
    let before = t.received();
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
    let got = settled(t) - before;
    if got == 0 {
        return Err(format!("{}: nothing reached the discard server", t.label));
    }
    Ok((
        got as f64 / elapsed,
        sent as f64 / elapsed,
        sent.saturating_sub(got) as f64,
    ))
}

/// Adds the calling thread to a server's threads.
fn register(threads: &std::sync::Mutex<Vec<std::path::PathBuf>>) {
    if let Some(path) = own_schedstat() {
        threads.lock().unwrap_or_else(|e| e.into_inner()).push(path);
    }
}

/// What the discard server has received once it stops receiving (it finished what was queued).
fn settled(t: &Target) -> u64 {
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = t.received();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// A discard run from every one of the target's sender sockets at once, a thread each (flows from
/// different ports, which the kernel spreads over a multi-queue interface's queues): (received/s,
/// sent/s, sent but not received).
fn discard_senders(t: &Target, size: usize, secs: f64) -> Result<SendersRun, String> {
    let to = SocketAddrV4::new(SERVER, DISCARD);
    let before = t.received();
    let server_before = t.server_cpu_ns();
    // Each send carries up to 64 datagrams for the kernel to segment (`UDP_SEGMENT`), so that the
    // senders, who share this machine's cores with the stacks, cost little per datagram.
    let per_send = GSO_SEGMENTS.min(65507 / size);
    for sock in &t.senders {
        nix::sys::socket::setsockopt(
            sock,
            nix::sys::socket::sockopt::UdpGsoSegment,
            &(size as i32),
        )
        .map_err(|e| format!("UDP_SEGMENT: {e}"))?;
    }
    let limit = Duration::from_secs_f64(secs);
    let started = WallClock::now();
    let (sent, sender_ns) = std::thread::scope(|scope| {
        let threads: Vec<_> = t
            .senders
            .iter()
            .map(|sock| {
                scope.spawn(move || {
                    let me = own_schedstat();
                    let cpu = || me.as_deref().map_or(0, cpu_ns);
                    let at_start = cpu();
                    let data = vec![0x5a; size * per_send];
                    let mut sent = 0u64;
                    while started.elapsed() < limit {
                        for _ in 0..64 / per_send.min(64) {
                            if sock.send_to(&data, to).is_ok() {
                                sent += per_send as u64;
                            }
                        }
                    }
                    (sent, cpu() - at_start)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0)))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    let elapsed = started.elapsed().as_secs_f64();
    let got = settled(t) - before;
    // The server's CPU over the run and the drain after it (the senders' ends at the run's end).
    let server_ns = t.server_cpu_ns() - server_before;
    if got == 0 {
        return Err(format!("{}: nothing reached the discard server", t.label));
    }
    Ok(SendersRun {
        received: got as f64 / elapsed,
        sent: sent as f64 / elapsed,
        lost: sent.saturating_sub(got) as f64,
        server_cores: server_ns as f64 / 1e9 / elapsed,
        sender_cores: sender_ns as f64 / 1e9 / elapsed,
        per_server_cpu_s: got as f64 / (server_ns as f64 / 1e9),
    })
}

/// One several-senders run.
#[derive(Clone, Copy, Debug)]
struct SendersRun {
    /// Datagrams/s received and sent, datagrams lost.
    received: f64,
    sent: f64,
    lost: f64,
    /// Cores the server's threads (the stacks, or the kernel's socket readers) and the senders used.
    server_cores: f64,
    sender_cores: f64,
    /// Datagrams received per CPU-second of the server's threads.
    per_server_cpu_s: f64,
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

/// Runs the experiment and returns its rows.
pub fn measure(args: &TunArgs) -> Result<Vec<TunRow>, String> {
    netns::check_privileges("bench tun")?;
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
    let multi = args.queues > 1;
    let senders = if multi { args.senders } else { 0 };
    for (label, offload, batching, uso) in [
        ("fastpath offload+batching+USO", true, true, true),
        ("fastpath offload+batching", true, true, false),
        ("fastpath offload", true, false, false),
        ("fastpath batching", false, true, false),
        ("fastpath, neither", false, false, false),
    ] {
        // The one-queue baseline of the several-senders workload is offload+batching.
        let s = if label == "fastpath offload+batching" {
            senders
        } else {
            0
        };
        let reader = Reader::Stack { batching };
        let t = fastpath_target(&mut bed, label.into(), offload, reader, uso, 1, s)?;
        bed.targets.push(t);
    }
    if multi {
        let label = format!("fastpath offload+batching, {} queues", args.queues);
        let reader = Reader::Stack { batching: true };
        let t = fastpath_target(&mut bed, label, true, reader, false, args.queues, senders)?;
        bed.targets.push(t);
        // The ceiling on one queue and on as many, for the several-senders workload alone.
        for queues in [1, args.queues] {
            let label = format!("ceiling, {queues} queue(s)");
            let t = fastpath_target(&mut bed, label, true, Reader::Null, false, queues, senders)?;
            bed.targets.push(t);
        }
    }
    let t = linux_target(&mut bed, senders)?;
    bed.targets.push(t);

    let mut workloads = vec!["discard", "discard-gso", "echo"];
    if multi {
        workloads.push("discard-senders");
    }
    // Every (workload, size, target) that runs: the several-senders workload only where there are
    // senders.
    let mut cells = Vec::new();
    for &w in &workloads {
        for &size in &args.sizes {
            for (i, t) in bed.targets.iter().enumerate() {
                if (w != "discard-senders" || !t.senders.is_empty())
                    && (w == "discard-senders" || !t.null)
                {
                    cells.push((w, size, i));
                }
            }
        }
    }
    let bar = common::progress((rounds * cells.len()) as u64, "bench tun");
    // samples[cell] = (rate, offered, lost, server cores, sender cores, per server CPU-second) per
    // round; the CPU figures only for the several-senders workload.
    type Sample = (f64, f64, f64, f64, f64, f64);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cells.len()];
    for _ in 0..rounds {
        for (cell, &(w, size, i)) in cells.iter().enumerate() {
            let t = &bed.targets[i];
            let s = match w {
                "echo" => {
                    let (rate, lost) = echo_run(t, size, secs, window)?;
                    (rate, rate, lost, f64::NAN, f64::NAN, f64::NAN)
                }
                "discard-senders" => {
                    let r = discard_senders(t, size, secs)?;
                    let (a, b, c) = (r.received, r.sent, r.lost);
                    (a, b, c, r.server_cores, r.sender_cores, r.per_server_cpu_s)
                }
                _ => {
                    let (a, b, c) = discard_run(t, size, secs, w == "discard-gso")?;
                    (a, b, c, f64::NAN, f64::NAN, f64::NAN)
                }
            };
            samples[cell].push(s);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();

    let mut rows: Vec<TunRow> = Vec::new();
    for (cell, &(w, size, i)) in cells.iter().enumerate() {
        let t = &bed.targets[i];
        let s = &samples[cell];
        let rate = common::median(&s.iter().map(|x| x.0).collect::<Vec<_>>());
        rows.push(TunRow {
            workload: w.to_string(),
            size,
            server: if t.null {
                "ceiling"
            } else if t.queues.is_some() {
                "fastpath"
            } else {
                "linux"
            }
            .to_string(),
            offload: t.offload,
            batching: t.batching,
            uso: t.uso,
            queues: t.queues,
            senders: if w == "discard-senders" {
                t.senders.len()
            } else {
                1
            },
            datagrams_per_s: rate,
            gbit_per_s: rate * size as f64 * 8.0 / 1e9,
            offered_per_s: common::median(&s.iter().map(|x| x.1).collect::<Vec<_>>()),
            lost: common::median(&s.iter().map(|x| x.2).collect::<Vec<_>>()),
            server_cores: common::median(&s.iter().map(|x| x.3).collect::<Vec<_>>()),
            sender_cores: common::median(&s.iter().map(|x| x.4).collect::<Vec<_>>()),
            per_server_cpu_s: common::median(&s.iter().map(|x| x.5).collect::<Vec<_>>()),
            ratio_vs_linux: f64::NAN,
        });
    }
    let linux: Vec<(String, usize, f64)> = rows
        .iter()
        .filter(|r| r.server == "linux")
        .map(|r| (r.workload.clone(), r.size, r.datagrams_per_s))
        .collect();
    for r in &mut rows {
        if let Some(l) = linux.iter().find(|l| l.0 == r.workload && l.1 == r.size) {
            r.ratio_vs_linux = r.datagrams_per_s / l.2;
        }
    }
    let link_stats: Vec<String> = bed
        .targets
        .iter()
        .filter_map(|t| {
            let s = t.tun_stats()?;
            let shares = if t.tun.len() > 1 {
                let each: Vec<String> = t
                    .tun
                    .iter()
                    .map(|h| {
                        let p = h.stats().rx_packets as f64 / s.rx_packets.max(1) as f64;
                        format!("{:.0}%", p * 100.0)
                    })
                    .collect();
                format!(" (queues' shares of what was read: {})", each.join(" / "))
            } else {
                String::new()
            };
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
            ) + &shares)
        })
        .collect();
    drop(bed);
    outln!("TUN link counters over the whole run:");
    for l in link_stats {
        outln!("  {l}");
    }
    outln!();
    Ok(rows)
}

/// Prints the rows: one line per server, one column per workload and size.
pub fn print(rows: &[TunRow]) {
    let columns = common::distinct(rows.iter().map(|r| (r.workload.clone(), r.size)));
    type Server = (
        String,
        Option<bool>,
        Option<bool>,
        Option<bool>,
        Option<usize>,
    );
    let servers: Vec<Server> = common::distinct(
        rows.iter()
            .map(|r| (r.server.clone(), r.offload, r.batching, r.uso, r.queues)),
    );
    let on = |b: bool| if b { "on" } else { "off" };
    let label = |s: &Server| {
        let queues = match s.4 {
            Some(q) if q > 1 => format!(", {q} queues"),
            _ => String::new(),
        };
        match (s.1, s.2, s.3) {
            _ if s.0 == "ceiling" => format!("ceiling: read and drop{queues}"),
            (Some(o), Some(b), Some(true)) => {
                format!("fastpath, offload {}, batching {}, USO", on(o), on(b))
            }
            (Some(o), Some(b), _) => {
                format!("fastpath, offload {}, batching {}{queues}", on(o), on(b))
            }
            _ => "linux over veth".to_string(),
        }
    };
    let find = |s: &Server, c: &(String, usize)| {
        rows.iter().find(|r| {
            r.server == s.0
                && r.offload == s.1
                && r.batching == s.2
                && r.uso == s.3
                && r.queues == s.4
                && r.workload == c.0
                && r.size == c.1
        })
    };
    for (title, cell) in [
        ("thousands of datagrams/s", 0),
        ("Gbit/s of UDP payload", 1),
        ("ratio to linux", 2),
    ] {
        out!("{:<44}", title);
        for c in &columns {
            out!("{:>23}", format!("{} {} B", c.0, c.1));
        }
        outln!();
        for s in &servers {
            out!("{:<44}", label(s));
            for c in &columns {
                let text = find(s, c).map_or(String::new(), |r| match cell {
                    0 => format!("{:.0}", r.datagrams_per_s / 1e3),
                    1 => format!("{:.3}", r.gbit_per_s),
                    _ => format!("{:.2}x", r.ratio_vs_linux),
                });
                out!("{text:>23}");
            }
            outln!();
        }
        outln!();
    }
    outln!("client sent, thousands of datagrams/s (the rows above, in order):");
    for c in columns.iter().filter(|c| c.0 != "echo") {
        let sent: Vec<String> = servers
            .iter()
            .filter_map(|s| find(s, c).map(|r| format!("{:.0}", r.offered_per_s / 1e3)))
            .collect();
        outln!("  {} {} B: {}", c.0, c.1, sent.join(" / "));
    }
    // The several-senders workload: N queues over one, side by side in the same rounds.
    for c in columns.iter().filter(|c| c.0 == "discard-senders") {
        for server in ["fastpath", "ceiling"] {
            let of = |multi: bool| {
                rows.iter().find(|r| {
                    r.workload == c.0
                        && r.size == c.1
                        && r.server == server
                        && r.queues.is_some_and(|q| (q > 1) == multi)
                })
            };
            if let (Some(one), Some(many)) = (of(false), of(true)) {
                outln!(
                    "{server}: {} queues over 1, {} senders, {} B: {:.2}x the datagrams/s",
                    many.queues.unwrap_or(0),
                    many.senders,
                    c.1,
                    many.datagrams_per_s / one.datagrams_per_s
                );
            }
        }
        for r in rows.iter().filter(|r| r.workload == c.0 && r.size == c.1) {
            let who = match r.queues {
                Some(q) => format!("{}, {q} queue{}", r.server, if q > 1 { "s" } else { "" }),
                None => "linux".into(),
            };
            outln!(
                "  {who:<22} server threads {:.2} cores, senders {:.2} cores, {:.0}k datagrams per server CPU-second",
                r.server_cores,
                r.sender_cores,
                r.per_server_cpu_s / 1e3
            );
        }
    }
}

/// `fastpath bench tun`.
pub fn run(args: &TunArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header(
        "bench tun: a kernel UDP client against fastpath over TUN, and against the kernel over veth",
    );
    let rows = measure(args)?;
    let (secs, rounds) = args.plan();
    outln!(
        "{secs} s per run, median of {rounds} interleaved rounds; echo keeps {} datagrams in flight\n",
        args.window
    );
    print(&rows);
    if let Some(json) = json {
        json.write(&rows)?;
    }
    Ok(())
}
