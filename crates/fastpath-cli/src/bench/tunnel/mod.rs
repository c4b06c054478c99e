//! `fastpath bench tunnel`: iperf3 (a client and a server nobody here wrote) through transparent
//! proxies, beside the kernel routing the same traffic itself.
//!
//! Namespace OUT holds the "internet": 10.77.0.2 on its loopback interface, where an `iperf3 -s` and
//! this program's own servers listen. Each path has an application namespace of its own, from which
//! the clients run:
//!
//! - **kernel**: a veth pair from the application namespace into OUT, the kernel routing: the ceiling.
//! - **fastpath**: `fastpath tunnel` running in OUT, its TUN interface in the application namespace.
//! - **gVisor**: xjasonlyu/tun2socks (gVisor's netstack) running in OUT in `direct://` mode, its TUN
//!   interface moved into the application namespace; found with `--tun2socks PATH`, in `PATH`, or
//!   built from the Go module proxy with `--build-tun2socks` (the bench says plainly when it has
//!   none, and leaves the row out).
//! - **lwIP**: hev-socks5-tunnel with Debian's dante as its SOCKS5 server, both in OUT (see
//!   [`lwip`]); the row is left out, with the reason, when either is missing.
//! - **tun2proxy**: tun2proxy 0.8.3 (the `ipstack` stack) with a dante of its own, the same way (see
//!   [`ipstack`]).
//! - **netstack-smoltcp**: netstack-smoltcp 0.2.4's own program (its example `forward-offload-linux`),
//!   relaying through the kernel's sockets; TCP rows only (see [`netstack`]).
//! - **fastpath, N queues** (with `--queues N`): `fastpath tunnel --queues N` beside the one-queue
//!   tunnel.
//! - **fastpath, plain writes** (with `--plain-writes`): `fastpath tunnel --io-uring off`, a `write`
//!   per packet to the TUN device, beside the default's io_uring writes.
//!
//! Rows, every path once per round, interleaved, medians quoted, each run started once the machine is
//! quiet (90% idle over 200 ms, waiting 5 s at most: an unpaced UDP test leaves a proxy and its
//! server busy for a while after it): TCP upload and download with 1 and 4
//! streams (Gbit/s, iperf3's receiver side); UDP at 64 and 1400 bytes sent unpaced (datagrams/s
//! delivered, and the share lost; for a proxy also the share of what the kernel's TUN queue handed
//! it that reached the server, and the share the kernel dropped at that queue, from the TUN
//! interface's transmit counters, and the share dropped at a full socket in OUT, from OUT's
//! `RcvbufErrors`: relayed, and lost because iperf3's server, or a proxy's SOCKS5 server, did not
//! keep up); connections per second (a client connecting, sending 64 bytes,
//! reading 64 back and closing, 8 at a time). For a proxy, each row also gives its processes' CPU
//! seconds per GB moved (from `/proc/PID/stat`, summed over the proxy, its SOCKS5 server if it
//! has one, and their children); at the end, its peak RSS (summed over those processes, so an
//! overcount for a forking server) and its memory per idle connection (growth of the proportional
//! set size over `--idle` connections held open, 10,000 by default, to a server whose kernel
//! completes the handshakes and keeps them in its accept queue).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use serde::Serialize;

use super::common;
use crate::bench::common::outln;
use crate::netns::{self, Namespace};

mod ipstack;
mod lwip;
mod measure;
mod netstack;

use measure::*;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const IPERF_PORT: u16 = 5201;
const ECHO_PORT: u16 = 7;
/// The server that answers and closes first, and its answer's size (a small web page's, headers
/// included).
const CLOSING_PORT: u16 = 80;
const CLOSING_ANSWER: usize = 760;
const HOLD_PORT: u16 = 9;

#[derive(Args, Debug)]
pub struct TunnelArgs {
    /// Seconds per iperf3 run.
    #[arg(long, value_parser = common::parse_measure_seconds)]
    seconds: Option<f64>,
    #[arg(long, value_parser = common::count(1, 100))]
    rounds: Option<usize>,
    /// Idle connections held open to measure memory per connection.
    #[arg(long, value_parser = common::count(0, 15000))]
    idle: Option<usize>,
    /// gVisor's tun2socks binary (xjasonlyu/tun2socks v2.6.0).
    #[arg(long)]
    tun2socks: Option<PathBuf>,
    /// Build gVisor's tun2socks from the Go module proxy when none is found (into
    /// `target/peers/tun2socks`).
    #[arg(long)]
    build_tun2socks: bool,
    /// The lwIP row's program: hev-socks5-tunnel from the `tun2socks` crate 0.1.10, as built by
    /// `--build-lwip` (it also needs dante's `danted`: apt-get install dante-server).
    #[arg(long)]
    lwip: Option<PathBuf>,
    /// Build the lwIP row's program with cargo when none is found (into `target/peers/lwip`).
    #[arg(long)]
    build_lwip: bool,
    /// tun2proxy's binary (`tun2proxy-bin`, version 0.8.3, on the ipstack stack).
    #[arg(long)]
    tun2proxy: Option<PathBuf>,
    /// Install tun2proxy 0.8.3 with cargo when none is found (into `target/peers/tun2proxy`).
    #[arg(long)]
    build_tun2proxy: bool,
    /// netstack-smoltcp 0.2.4's example program `forward-offload-linux`, built before.
    #[arg(long)]
    netstack_smoltcp: Option<PathBuf>,
    /// Build netstack-smoltcp's example from its crates.io package when none is found (into
    /// `target/peers/netstack-smoltcp`).
    #[arg(long)]
    build_netstack_smoltcp: bool,
    /// Also run fastpath's tunnel with this many TUN queues (a stack on each), as a row of its own
    /// beside the one-queue tunnel. 1 (the default) leaves it out.
    #[arg(long, default_value_t = 1, value_parser = common::count(1, 256))]
    queues: usize,
    /// Also run fastpath's tunnel with a `write` per packet to its TUN device (`--io-uring off`), as
    /// a row of its own beside the default, whose writes go through io_uring.
    #[arg(long)]
    plain_writes: bool,
    #[arg(long)]
    quick: bool,
    /// Write the rows as JSON to this path (`-`: standard output, the tables then go to standard
    /// error). The path is opened before anything is measured.
    #[arg(long)]
    json: Option<String>,
}

impl TunnelArgs {
    fn plan(&self) -> (f64, usize, usize) {
        let (secs, rounds, idle) = if self.quick {
            (1.0, 1, 500)
        } else {
            (5.0, 3, 10_000)
        };
        (
            self.seconds.unwrap_or(secs),
            self.rounds.unwrap_or(rounds),
            self.idle.unwrap_or(idle),
        )
    }
}

/// One row: a workload through one path, the median over rounds.
#[derive(Clone, Debug, Serialize)]
pub struct TunnelRow {
    pub path: String,
    pub workload: String,
    /// Gbit/s (TCP), datagrams/s delivered (UDP) or connections/s.
    pub value: f64,
    pub unit: String,
    /// UDP: the share of datagrams sent that were lost.
    pub lost: Option<f64>,
    /// A proxy's CPU seconds per GB moved (TCP and UDP rows).
    pub cpu_s_per_gb: Option<f64>,
    /// UDP through a proxy: datagrams delivered as a share of the packets the kernel's TUN queue
    /// handed the proxy (the TUN interface's transmit count: what the proxy itself lost, beside
    /// what the kernel dropped before it).
    pub delivered_of_handed: Option<f64>,
    /// UDP through a proxy: the share of packets the kernel dropped at the TUN queue because the
    /// proxy did not read them in time (the interface's transmit drops).
    pub tun_queue_dropped: Option<f64>,
    /// UDP through a proxy: datagrams the kernel dropped at a socket in OUT whose receive buffer was
    /// full (OUT's `RcvbufErrors`: iperf3's server, or a proxy's SOCKS5 server), as a share of what
    /// the TUN queue handed the proxy: relayed, and lost because the receiver did not keep up.
    pub server_socket_dropped: Option<f64>,
}

/// A proxy's memory figures.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryRow {
    pub path: String,
    /// The most resident memory the proxy's processes had during the runs, and what they had at
    /// their end (after every short connection, most of them closed by the server first).
    pub peak_rss_kib: u64,
    pub final_rss_kib: u64,
    pub idle_connections: usize,
    pub bytes_per_idle_connection: Option<f64>,
}

/// One way from the clients to OUT.
struct PathUnderTest {
    name: String,
    /// Which iperf3 server it uses (port 5201 + index).
    index: u16,
    app: Namespace,
    /// The proxy's process (none for the kernel's routing).
    proxy: Option<Child>,
    /// Processes the proxy needs (lwIP's SOCKS5 server), counted with it and stopped with it.
    helpers: Vec<Child>,
    /// The proxy's TUN interface, in `app` (none for the kernel's routing).
    tun: Option<&'static str>,
    /// A directory of the proxy's configuration files, removed with the path.
    scratch: Option<std::path::PathBuf>,
    /// Why the path has no UDP rows, if it has none.
    no_udp: Option<&'static str>,
}

impl PathUnderTest {
    /// Waits for the proxy (`who`) to make its TUN interface in OUT, then moves it into the
    /// applications' namespace with the kernel's side at `kernel_addr` and the default route through
    /// it. The move takes the interface's address and state with it: they are set again there; the
    /// proxy's descriptor keeps working.
    fn adopt_tun(&self, out: &Namespace, who: &str, kernel_addr: &str) -> Result<(), String> {
        let dev = self.tun.ok_or("a path with no TUN interface")?;
        lwip::wait_for(out, &format!("{who} to make its TUN interface"), || {
            out.ip(&["link", "show", dev]).is_ok()
        })?;
        out.ip(&["link", "set", dev, "netns", self.app.name()])?;
        self.app.ip(&["addr", "add", kernel_addr, "dev", dev])?;
        self.app.ip(&["link", "set", dev, "up"])?;
        self.app.ip(&["route", "add", "default", "dev", dev])?;
        Ok(())
    }

    /// The proxy's processes: its own, its helpers' and all their descendants (a SOCKS5 server
    /// forks workers). Empty for the kernel's routing.
    fn pids(&self) -> Vec<u32> {
        let roots: Vec<u32> = self
            .proxy
            .iter()
            .chain(&self.helpers)
            .map(Child::id)
            .collect();
        process_tree(&roots)
    }

    /// CPU seconds the proxy's processes have used.
    fn cpu_seconds(&self) -> Option<f64> {
        let pids = self.pids();
        (!pids.is_empty()).then(|| pids.iter().filter_map(|&p| cpu_seconds(p)).sum())
    }

    /// A `/proc/PID/status` figure in KiB, summed over the proxy's processes.
    fn status_kib(&self, field: &str) -> Option<u64> {
        let pids = self.pids();
        (!pids.is_empty()).then(|| pids.iter().filter_map(|&p| status_kib(p, field)).sum())
    }

    /// The proxy's proportional set size in KiB, summed over its processes: each page shared by
    /// several of them (a forking server's) counted once in all, where summing their resident
    /// sizes would count it in each.
    fn pss_kib(&self) -> Option<u64> {
        let pids = self.pids();
        (!pids.is_empty()).then(|| {
            pids.iter()
                .filter_map(|&p| {
                    let rollup = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok()?;
                    rollup.lines().find_map(|l| {
                        l.strip_prefix("Pss:")?
                            .split_whitespace()
                            .next()?
                            .parse::<u64>()
                            .ok()
                    })
                })
                .sum()
        })
    }
}

/// `roots` and every process descended from them (from `/proc/*/stat`'s parent fields).
fn process_tree(roots: &[u32]) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = netns::parent_of(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut tree = roots.to_vec();
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    tree
}

impl Drop for PathUnderTest {
    fn drop(&mut self) {
        for child in self.proxy.iter_mut().chain(&mut self.helpers) {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let deadline = WallClock::now() + Duration::from_secs(3);
            while let Ok(None) = child.try_wait() {
                if WallClock::now() > deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.wait();
        }
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub fn run(args: &TunnelArgs) -> Result<(), String> {
    let json = common::JsonOut::open(args.json.as_deref())?;
    common::header(
        "bench tunnel: iperf3 through fastpath tunnel, gVisor's tun2socks and lwIP's hev-socks5-tunnel, beside the kernel's routing",
    );
    let (secs, rounds, idle) = args.plan();
    let iperf = which("iperf3").ok_or(
        "iperf3 is not installed (Debian: apt-get install iperf3); it is the client and server here",
    )?;
    let iperf_version = Command::new(&iperf)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    let gvisor = find_tun2socks(args)?;
    match &gvisor {
        Ok(p) => outln!("gVisor: {}", p.display()),
        Err(why) => outln!("gVisor: no row ({why})"),
    }
    let lwip = lwip::find(args);
    match &lwip {
        Ok(l) => outln!("lwIP: {}", l.describe()),
        Err(why) => outln!("lwIP: no row ({why})"),
    }
    let t2p = ipstack::find(args);
    match &t2p {
        Ok(t) => outln!("tun2proxy (ipstack): {}", t.describe()),
        Err(why) => outln!("tun2proxy (ipstack): no row ({why})"),
    }
    let nss = netstack::find(args);
    match &nss {
        Ok(b) => outln!(
            "netstack-smoltcp: {} (no UDP rows: {})",
            b.display(),
            netstack::NO_UDP
        ),
        Err(why) => outln!("netstack-smoltcp: no row ({why})"),
    }
    outln!("iperf3: {iperf_version}");
    outln!("{secs} s per run, median of {rounds} interleaved rounds\n");

    let tag = std::process::id();
    let out = Namespace::ensure(&format!("fpb-out-{tag}"))?;
    out.ip(&["link", "set", "lo", "up"])?;
    out.ip(&["addr", "add", &format!("{SERVER}/32"), "dev", "lo"])?;
    // The idle connections wait in one accept queue.
    let _ = Command::new("ip")
        .args([
            "netns",
            "exec",
            out.name(),
            "sysctl",
            "-qw",
            "net.core.somaxconn=65535",
        ])
        .status();
    // One iperf3 server per path: a server still finishing an unpaced UDP test (it waits for the
    // datagrams that were lost) does not hold up the next path's test.
    let multi = args.queues > 1;
    // Servers 0-3: the kernel, fastpath, gVisor, lwIP; 4: fastpath with several queues; 5: tun2proxy;
    // 6: netstack-smoltcp; 7: fastpath with plain writes.
    let mut iperf_servers = (0..8u16)
        .map(|i| {
            Command::new("ip")
                .args(["netns", "exec", out.name()])
                .arg(&iperf)
                .args(["-s", "-B", &SERVER.to_string()])
                .args(["-p", &(IPERF_PORT + i).to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting iperf3 -s: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stop = Arc::new(AtomicBool::new(false));
    let hold = start_servers(out.name(), &stop)?;

    // Every path, its proxy just started.
    let make_paths = || -> Result<Vec<PathUnderTest>, String> {
        let mut paths = vec![
            kernel_path(&out, tag)?,
            fastpath_path(&out, tag, 1, true, 1)?,
        ];
        if multi {
            paths.push(fastpath_path(&out, tag, args.queues, true, 4)?);
        }
        if args.plain_writes {
            paths.push(fastpath_path(&out, tag, 1, false, 7)?);
        }
        if let Ok(t) = &t2p {
            paths.push(ipstack::path(&out, tag, t, 5)?);
        }
        if let Ok(bin) = &nss {
            paths.push(netstack::path(&out, tag, bin, 6)?);
        }
        if let Ok(bin) = &gvisor {
            paths.push(gvisor_path(&out, tag, bin)?);
        }
        if let Ok(l) = &lwip {
            paths.push(lwip::path(&out, tag, l, 3)?);
        }
        std::thread::sleep(Duration::from_millis(500));
        wait_reachable(&paths)?;
        Ok(paths)
    };

    let result = (|| {
        let paths = make_paths()?;
        let workloads = workloads();
        let mut samples: Vec<Vec<Vec<Sample>>> =
            vec![vec![Vec::new(); workloads.len()]; paths.len()];
        let bar = common::progress(
            (rounds * workloads.len() * paths.len()) as u64,
            "bench tunnel",
        );
        for _ in 0..rounds {
            for (w, workload) in workloads.iter().enumerate() {
                for (p, path) in paths.iter().enumerate() {
                    if path.no_udp.is_some() && matches!(workload, Workload::Udp { .. }) {
                        bar.inc(1);
                        continue;
                    }
                    // The last path's proxy and server may still be working off an unpaced UDP
                    // test: this run starts on a quiet machine, not beside them.
                    wait_until_quiet();
                    let s = measure(&iperf, &out, path, workload, secs)?;
                    samples[p][w].push(s);
                    bar.inc(1);
                }
            }
        }
        bar.finish_and_clear();
        let mut rows = Vec::new();
        for (p, path) in paths.iter().enumerate() {
            for (w, workload) in workloads.iter().enumerate() {
                if !samples[p][w].is_empty() {
                    rows.push(summarize(&path.name, workload, &samples[p][w]));
                }
            }
        }
        // The peak is the throughput runs'. Memory per idle connection is measured on proxies started
        // afresh: after those runs a proxy may still be handing memory back (Go's collector in
        // gVisor's, an allocator trimming its heap), which would hide what the connections hold.
        let peaks: Vec<(u64, u64)> = paths
            .iter()
            .filter(|p| p.proxy.is_some())
            .map(|p| {
                (
                    p.status_kib("VmHWM").unwrap_or(0),
                    p.status_kib("VmRSS").unwrap_or(0),
                )
            })
            .collect();
        drop(paths);
        let fresh = make_paths()?;
        let memory: Vec<MemoryRow> = fresh
            .iter()
            .filter(|p| p.proxy.is_some())
            .zip(peaks)
            .map(|(p, (peak, last))| {
                memory(p, idle).map(|m| MemoryRow {
                    peak_rss_kib: peak.max(m.peak_rss_kib),
                    final_rss_kib: last,
                    ..m
                })
            })
            .collect::<Result<_, _>>()?;
        Ok::<_, String>((rows, memory))
    })();
    stop.store(true, Ordering::Relaxed);
    for server in &mut iperf_servers {
        let _ = server.kill();
        let _ = server.wait();
    }
    drop(hold);
    let (rows, memory) = result?;
    print(&rows, &memory);
    if let Some(json) = json {
        #[derive(Serialize)]
        struct All<'a> {
            rows: &'a [TunnelRow],
            memory: &'a [MemoryRow],
        }
        json.write(&[All {
            rows: &rows,
            memory: &memory,
        }])?;
    }
    Ok(())
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// gVisor's tun2socks: given, in `PATH`, built before, or built now (`--build-tun2socks`). The
/// outer error stops the bench; the inner one says why there is no gVisor row.
fn find_tun2socks(args: &TunnelArgs) -> Result<Result<PathBuf, String>, String> {
    if let Some(p) = &args.tun2socks {
        return if p.is_file() {
            Ok(Ok(p.clone()))
        } else {
            Err(format!("--tun2socks {}: no such file", p.display()))
        };
    }
    if let Some(p) = which("tun2socks") {
        return Ok(Ok(p));
    }
    let dir = PathBuf::from("target/peers/tun2socks");
    let bin = dir.join("tun2socks");
    if bin.is_file() {
        return Ok(Ok(bin));
    }
    if !args.build_tun2socks {
        return Ok(Err(
            "tun2socks not found: give --tun2socks PATH, put it in PATH, or pass --build-tun2socks"
                .into(),
        ));
    }
    outln!(
        "building gVisor's tun2socks v2.6.0 with go into {} ...",
        dir.display()
    );
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let go = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("go")
            .args(args)
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("running go: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "go {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    let built = (|| {
        if !dir.join("go.mod").exists() {
            go(&["mod", "init", "t"])?;
        }
        go(&["get", "github.com/xjasonlyu/tun2socks/v2@v2.6.0"])?;
        go(&[
            "build",
            "-o",
            "tun2socks",
            "github.com/xjasonlyu/tun2socks/v2",
        ])
    })();
    Ok(built.map(|()| bin))
}

/// OUT's own servers: TCP echo of 64-byte requests (connections per second), a server that answers
/// a request with `CLOSING_ANSWER` bytes and closes first, and the idle connections' accept queue,
/// which is never read. The server threads stop when the bench sets `stop` (at their next
/// connection); the accept queue closes with `_hold`.
struct Servers {
    _hold: std::os::fd::OwnedFd,
    _echo: std::thread::JoinHandle<()>,
    _closing: std::thread::JoinHandle<()>,
}

fn start_servers(out: &str, stop: &Arc<AtomicBool>) -> Result<Servers, String> {
    let (echo, closing, hold) = netns::within(out, || -> Result<_, String> {
        let echo = std::net::TcpListener::bind(SocketAddrV4::new(SERVER, ECHO_PORT))
            .map_err(|e| format!("echo server: {e}"))?;
        let closing = std::net::TcpListener::bind(SocketAddrV4::new(SERVER, CLOSING_PORT))
            .map_err(|e| format!("closing server: {e}"))?;
        let hold = listen_deep(SocketAddrV4::new(SERVER, HOLD_PORT))?;
        Ok((echo, closing, hold))
    })??;
    // A blocking accept: a thread that polled would wake thousands of times a second beside the
    // proxies being measured. It ends with the process, or at the first connection after `stop`.
    let stop_echo = stop.clone();
    let thread = std::thread::spawn(move || {
        while !stop_echo.load(Ordering::Relaxed) {
            if let Ok((mut c, _)) = echo.accept() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    if c.read_exact(&mut buf).is_ok() {
                        let _ = c.write_all(&buf);
                    }
                });
            }
        }
    });
    let stop = stop.clone();
    let closing_thread = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Ok((mut c, _)) = closing.accept() {
                std::thread::spawn(move || {
                    let mut request = [0u8; 64];
                    if c.read_exact(&mut request).is_ok() {
                        let _ = c.write_all(&[b'h'; CLOSING_ANSWER]);
                    }
                });
            }
        }
    });
    Ok(Servers {
        _hold: hold,
        _echo: thread,
        _closing: closing_thread,
    })
}

/// A listening socket with an accept queue as long as the namespace allows (never accepted from).
fn listen_deep(at: SocketAddrV4) -> Result<std::os::fd::OwnedFd, String> {
    use nix::sys::socket::{
        bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
        SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .map_err(|e| format!("socket: {e}"))?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(|e| e.to_string())?;
    bind(fd.as_raw_fd(), &SockaddrIn::from(at)).map_err(|e| format!("bind: {e}"))?;
    // -1: as long as `net.core.somaxconn` (65535 in OUT) allows. (`Backlog::new(65535)` is refused
    // above the C library's SOMAXCONN, 4096, and a fallback to that held the accept queue at 4,096:
    // a proxy that connects upstream before answering its application stalled there.)
    listen(&fd, Backlog::MAXALLOWABLE).map_err(|e| format!("listen: {e}"))?;
    Ok(fd)
}

fn kernel_path(out: &Namespace, tag: u32) -> Result<PathUnderTest, String> {
    let app = Namespace::ensure(&format!("fpb-k-{tag}"))?;
    let (a, b) = (
        format!("fpbk{}a", tag % 10000),
        format!("fpbk{}b", tag % 10000),
    );
    app.ip(&[
        "link",
        "add",
        &a,
        "type",
        "veth",
        "peer",
        "name",
        &b,
        "netns",
        out.name(),
    ])?;
    app.ip(&["addr", "add", "10.88.0.1/24", "dev", &a])?;
    app.ip(&["link", "set", &a, "up"])?;
    app.ip(&["link", "set", "lo", "up"])?;
    app.ip(&["route", "add", "default", "via", "10.88.0.2"])?;
    out.ip(&["addr", "add", "10.88.0.2/24", "dev", &b])?;
    out.ip(&["link", "set", &b, "up"])?;
    Ok(PathUnderTest {
        name: "kernel".into(),
        index: 0,
        app,
        proxy: None,
        helpers: Vec::new(),
        tun: None,
        scratch: None,
        no_udp: None,
    })
}

/// fastpath's tunnel with `queues` TUN queues (a stack on each), its writes through io_uring or
/// not, on iperf3 server `index`.
fn fastpath_path(
    out: &Namespace,
    tag: u32,
    queues: usize,
    io_uring: bool,
    index: u16,
) -> Result<PathUnderTest, String> {
    let variant = if io_uring { "" } else { "w" };
    let app = Namespace::ensure(&format!("fpb-f{queues}{variant}-{tag}"))?;
    app.ip(&["link", "set", "lo", "up"])?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", out.name()])
        .arg(exe)
        .args(["tunnel", "--netns", app.name(), "--tun", "fpbt0"])
        .args(["--kernel-addr", "10.66.0.1/24", "--addr", "10.66.0.2"])
        .args(["--queues", &queues.to_string()])
        .args(["--io-uring", if io_uring { "on" } else { "off" }])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting fastpath tunnel: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut first = String::new();
    let mut stdout = BufReader::new(stdout);
    stdout.read_line(&mut first).map_err(|e| e.to_string())?;
    if !first.starts_with("fastpath tunnel: ready") {
        let _ = child.kill();
        return Err(format!("fastpath tunnel did not start: {first}"));
    }
    // The rest of its output (its summary, when it stops) goes to our standard error: read, so that
    // its writes never meet a closed pipe.
    let mut reader = stdout;
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            eprint!("[fastpath tunnel] {line}");
            line.clear();
        }
    });
    Ok(PathUnderTest {
        name: match (queues > 1, io_uring) {
            (true, _) => format!("fastpath, {queues} queues"),
            (false, true) => "fastpath".into(),
            (false, false) => "fastpath, plain writes".into(),
        },
        index,
        app,
        proxy: Some(child),
        helpers: Vec::new(),
        tun: Some("fpbt0"),
        scratch: None,
        no_udp: None,
    })
}

fn gvisor_path(out: &Namespace, tag: u32, bin: &Path) -> Result<PathUnderTest, String> {
    let app = Namespace::ensure(&format!("fpb-g-{tag}"))?;
    app.ip(&["link", "set", "lo", "up"])?;
    let dev = "fpbg0";
    let child = Command::new("ip")
        .args(["netns", "exec", out.name()])
        .arg(bin)
        .args(["-device", &format!("tun://{dev}"), "-proxy", "direct://"])
        .args(["-loglevel", "silent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))?;
    let path = PathUnderTest {
        name: "gVisor".into(),
        index: 2,
        app,
        proxy: Some(child),
        helpers: Vec::new(),
        tun: Some(dev),
        scratch: None,
        no_udp: None,
    };
    path.adopt_tun(out, "tun2socks", "10.55.0.1/24")?;
    Ok(path)
}

/// Every path reaches OUT's echo server.
fn wait_reachable(paths: &[PathUnderTest]) -> Result<(), String> {
    for p in paths {
        let ok = (0..50).any(|_| {
            let ok = netns::within(p.app.name(), || {
                let to = SocketAddr::from(SocketAddrV4::new(SERVER, ECHO_PORT));
                TcpStream::connect_timeout(&to, Duration::from_millis(500))
                    .and_then(|mut c| {
                        c.write_all(&[1u8; 64])?;
                        c.read_exact(&mut [0u8; 64])
                    })
                    .is_ok()
            })
            .unwrap_or(false);
            if !ok {
                std::thread::sleep(Duration::from_millis(100));
            }
            ok
        });
        if !ok {
            return Err(format!("{}: OUT's servers are not reachable", p.name));
        }
    }
    Ok(())
}

fn print(rows: &[TunnelRow], memory: &[MemoryRow]) {
    let paths = common::distinct(rows.iter().map(|r| r.path.clone()));
    let workloads = common::distinct(rows.iter().map(|r| r.workload.clone()));
    let cell = |r: &TunnelRow| {
        let v = if r.unit == "Gbit/s" {
            format!("{:.2} Gbit/s", r.value)
        } else {
            format!("{:.0}/s", r.value)
        };
        let lost = r
            .lost
            .map(|l| format!(" ({:.0}% lost)", l * 100.0))
            .unwrap_or_default();
        let server = r
            .server_socket_dropped
            .map(|d| format!(" ({:.1}% dropped at a full socket in OUT)", d * 100.0))
            .unwrap_or_default();
        let handed = match (r.delivered_of_handed, r.tun_queue_dropped) {
            (Some(h), Some(q)) => format!(
                "; {:.1}% of what the TUN queue handed over delivered{server}, {:.0}% dropped at \
                 the queue",
                h * 100.0,
                q * 100.0
            ),
            _ => String::new(),
        };
        let cpu = r
            .cpu_s_per_gb
            .map(|c| format!(" {c:.1} cpu-s/GB"))
            .unwrap_or_default();
        format!("{v}{lost}{cpu}{handed}")
    };
    for w in &workloads {
        outln!("{w}");
        let find = |p: &str| rows.iter().find(|r| r.path == p && &r.workload == w);
        for p in &paths {
            if let Some(r) = find(p) {
                outln!("  {p:<18} {}", cell(r));
            }
        }
        if let (Some(f), Some(g)) = (find("fastpath"), find("gVisor")) {
            outln!("  fastpath/gVisor {:.2}x", f.value / g.value);
        }
        if let (Some(f), Some(l)) = (find("fastpath"), find("lwIP")) {
            outln!("  fastpath/lwIP {:.2}x", f.value / l.value);
        }
        if let (Some(f), Some(k)) = (find("fastpath"), find("kernel")) {
            outln!("  fastpath/kernel {:.2}x", f.value / k.value);
        }
        if let (Some(f), Some(t)) = (find("fastpath"), find("tun2proxy")) {
            outln!("  fastpath/tun2proxy {:.2}x", f.value / t.value);
        }
        if let (Some(f), Some(n)) = (find("fastpath"), find("netstack-smoltcp")) {
            outln!("  fastpath/netstack-smoltcp {:.2}x", f.value / n.value);
        }
        // Several queues, plain writes: each over the default tunnel.
        for variant in paths.iter().filter(|p| p.starts_with("fastpath, ")) {
            if let (Some(m), Some(f)) = (find(variant), find("fastpath")) {
                outln!("  {}/fastpath {:.2}x", m.path, m.value / f.value);
            }
        }
    }
    outln!();
    for m in memory {
        outln!(
            "{:<18} peak RSS {} KiB, {} KiB after the runs; {} idle connections: {}",
            m.path,
            m.peak_rss_kib,
            m.final_rss_kib,
            m.idle_connections,
            m.bytes_per_idle_connection
                .map(|b| format!("{:.1} kB each", b / 1000.0))
                .unwrap_or_else(|| "-".into())
        );
    }
}
