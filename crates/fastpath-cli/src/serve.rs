//! `fastpath serve`: fastpath as a host on a TUN interface, talking to the Linux kernel.
//!
//! The interface is created inside a network namespace (made if missing, and then removed on exit),
//! the kernel's side gets `--kernel-addr` and is brought up with `ip -n NS ...`, and a stack with the
//! TUN interface at `--addr` answers pings, echoes UDP and TCP (RFC 862), discards UDP and TCP (RFC 863)
//! and serves TCP chargen (RFC 864: a bulk sender, for measurements); datagrams to other ports get an
//! ICMP port unreachable, segments a RST. With `--connect`, it also opens a TCP connection to the
//! kernel, sends `--send` bytes of a pattern and checks that they come back (the peer must echo). It
//! stops on SIGINT or SIGTERM, or after `--duration`, and prints its counters.
//!
//! With `--queues N`, the interface has N queues and N stacks serve it, one per queue on a thread of its
//! own (queue 0's on the main thread), each with its own share of the ephemeral ports; the kernel's
//! steering program (`fastpath::link::tun::steer`) keeps every flow on one of them. `--connect` runs
//! on queue 0; when queue 0 stops, the others do too. The summary adds up the queues, then prints each
//! queue's counters.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use clap::{Args, ValueEnum};
use fastpath::config::TemporaryMode;
use fastpath::ethernet::{EthernetCounters, NeighborBoard};
use fastpath::link::{
    Impaired, Impairments, Link, TunConfig, TunHandle, TunLink, XdpConfig, XdpHandle, XdpLink,
};
use fastpath::wire::MacAddr;
use fastpath::{
    Counters, Instant, InterfaceId, Ipv4Cidr, Ipv6Cidr, Stack, StackConfig, UdpOptions, UdpSocket,
};

use crate::netns::Namespace;
use crate::pcap_tap::PcapTap;
use crate::tcp_services::{TcpServices, TcpTotals};

/// On or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// `--temporary-addresses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Temporary {
    /// None.
    Off,
    /// Formed, not preferred.
    Form,
    /// Formed and preferred.
    Prefer,
}

/// Options of `fastpath serve`.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    /// Name of the TUN interface to create.
    #[arg(long, default_value = "fp0")]
    tun: String,
    /// Network namespace to create it in (created if missing, and then removed on exit). fastpath
    /// records the namespaces it creates in /run/fastpath/netns/NAME (pid and start time): if that
    /// process is gone (killed with SIGKILL, say), the next run removes the leftover namespace and
    /// creates it anew. A namespace fastpath did not create is used as it is and left in place.
    #[arg(long, default_value = "fp")]
    netns: String,
    /// The kernel's address and prefix on the interface. Refused if the namespace already routes an
    /// overlapping prefix (a default route aside) through another interface.
    #[arg(long, default_value = "10.7.0.1/24")]
    kernel_addr: Ipv4Cidr,
    /// fastpath's address: another host address inside the kernel's prefix (not its network or
    /// broadcast address, below /31).
    #[arg(long, default_value = "10.7.0.2")]
    addr: Ipv4Addr,
    /// The kernel's IPv6 address and prefix on the interface (for example `fd00:7::1/64`). Without it
    /// IPv6 is turned off on the interface, and what IPv6 arrives is dropped by name.
    #[arg(long, requires = "addr6")]
    kernel_addr6: Option<Ipv6Cidr>,
    /// fastpath's IPv6 address, inside the kernel's IPv6 prefix (needs `--kernel-addr6`).
    #[arg(long, requires = "kernel_addr6")]
    addr6: Option<Ipv6Addr>,
    /// MTU of the interface, 68 to 65535 (1280 at least with IPv6).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(68..=65535))]
    mtu: u32,
    /// Checksum offload between the kernel and fastpath (virtio-net NEEDS_CSUM / DATA_VALID).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    offload: OnOff,
    /// UDP segmentation offload on receive (Linux 6.2+, needs --offload on): the kernel hands over the
    /// datagrams a `UDP_SEGMENT` socket sends as one GSO packet, and fastpath splits it.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    uso: OnOff,
    /// Writes to the TUN device through io_uring: a batch of packets in one system call, in place of a
    /// `write` each (left off, with a note, where the kernel refuses a ring).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    io_uring: OnOff,
    /// UDP echo port (RFC 862).
    #[arg(long, default_value_t = 7)]
    echo: u16,
    /// UDP discard port (RFC 863).
    #[arg(long, default_value_t = 9)]
    discard: u16,
    /// TCP chargen port (RFC 864): sends a byte pattern for as long as the client reads.
    #[arg(long, default_value_t = 19)]
    chargen: u16,
    /// Open a TCP connection to this address (an echo server) and check the echo of `--send` bytes;
    /// stop when it is done. If it fails, the cause is printed and the exit status is 1.
    #[arg(long)]
    connect: Option<SocketAddr>,
    /// Bytes the `--connect` client sends.
    #[arg(long, default_value_t = 1 << 20)]
    send: u64,
    /// Impair the link both ways, as a lossy wire would: `loss=P,duplicate=P,reorder=P,corrupt=P,seed=N`
    /// (probabilities per packet; any subset), and `delay=MS` on what fastpath receives. For testing
    /// where `tc netem` is not available.
    #[arg(long, value_parser = parse_impairments)]
    impair: Option<(Impairments, Duration)>,
    /// Seconds to wait after `ready` before the `--connect` client connects.
    #[arg(long, default_value_t = 0.0, value_parser = crate::bench::common::parse_non_negative)]
    connect_delay: f64,
    /// Queues of the TUN or TAP interface (IFF_MULTI_QUEUE) or of the veth with --xdp, 1 to 256: one
    /// stack per queue, each on a thread of its own with its own tables and buffers; the kernel
    /// spreads flows over them (see `fastpath::link::tun::steer`).
    #[arg(long, default_value_t = 1, value_parser = crate::bench::common::count(1, 256))]
    queues: usize,
    /// Record every packet in and out in this pcap file (raw IP, IPv4 and IPv6; with --queues 1 only).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// A TAP interface in place of TUN: Ethernet frames, fastpath a host on the link that answers
    /// ARP and neighbour discovery itself.
    #[arg(long, conflicts_with = "xdp")]
    tap: bool,
    /// AF_XDP on a veth pair in place of TUN: IFACE names fastpath's end, the kernel's end is the
    /// same name with `k` after it; frames go past the kernel's stack to an AF_XDP socket per queue,
    /// fastpath a host on the link as with `--tap` (copy mode on veth, no offloads).
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    /// Temporary IPv6 addresses (RFC 8981) beside those formed from a router's prefixes, on
    /// Ethernet links (`--tap`, `--xdp`): `form` them, or `prefer` them as the source of new
    /// traffic (Linux's `use_tempaddr` 1 and 2).
    #[arg(long, value_enum, default_value_t = Temporary::Off)]
    temporary_addresses: Temporary,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long, value_parser = crate::bench::common::parse_non_negative)]
    duration: Option<f64>,
}

/// Prints a line on standard output. A closed output is ignored: the server goes on, and cleans up
/// its interface and namespace when it stops.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stdout(), $($arg)*);
    }};
}

/// Receive queue of the echo and discard sockets: room for a burst from the kernel, which can send
/// faster than one poll's worth of datagrams is read.
pub const SERVER_RECV_BUFFER: usize = 8 << 20;

/// A server socket on `port` of every IPv4 address, with a deep receive queue.
pub fn binding(stack: &mut Stack, port: u16) -> Result<UdpSocket, String> {
    binding_on(stack, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port).into())
}

/// A server socket on `local` with a deep receive queue; on `[::]`, a dual-stack socket that serves
/// IPv4 too.
pub fn binding_on(stack: &mut Stack, local: SocketAddr) -> Result<UdpSocket, String> {
    let port = local.port();
    let sock = stack
        .udp_bind(local)
        .map_err(|e| format!("binding UDP port {port}: {e}"))?;
    stack
        .udp(sock)
        .set_options(UdpOptions {
            recv_buffer_bytes: Some(SERVER_RECV_BUFFER),
            ..UdpOptions::default()
        })
        .map_err(|e| e.to_string())?;
    Ok(sock)
}

/// Says on stderr how many of `links` write without io_uring when it was asked for (`serve` and
/// `tunnel`): the kernel refused their rings.
pub(crate) fn note_io_uring(asked: OnOff, links: &[TunLink]) {
    let refused = links.iter().filter(|l| !l.io_uring_enabled()).count();
    if asked == OnOff::On && refused > 0 {
        eprintln!(
            "fastpath: io_uring left off on {refused} of {} queues (the kernel refused a ring): a \
             write per packet there",
            links.len()
        );
    }
}

/// Runs the server until a signal or the duration.
pub fn run(args: &ServeArgs) -> Result<(), String> {
    // `main` gave SIGPIPE its default action; the server must outlive a closed output to clean up.
    // SAFETY: no other thread exists yet; SIG_IGN is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let kernel = args.kernel_addr;
    check_addresses(kernel, args.addr)?;
    let v6 = match (args.kernel_addr6, args.addr6) {
        (Some(k), Some(a)) => {
            check_addresses6(k, a)?;
            if args.mtu < 1280 {
                return Err(format!(
                    "--mtu {} is below IPv6's minimum of 1280 (RFC 8200 §5)",
                    args.mtu
                ));
            }
            Some((k, a))
        }
        _ => None,
    };
    if args.echo == args.discard {
        return Err("--echo and --discard must be different ports".into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while shutting down exits at once.
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }

    if args.queues > 1 && args.pcap.is_some() {
        return Err("--pcap records one queue's link: use it with --queues 1".into());
    }
    crate::netns::check_privileges("serve")?;
    let ns = Namespace::ensure(&args.netns)?;
    check_routes(&ns, kernel)?;
    let offload = args.offload == OnOff::On;
    let (links, name) = if let Some(iface) = &args.xdp {
        open_xdp(args, iface, &ns)?
    } else {
        open_tun(args, &ns, offload)?
    };
    let kernel_cidr = format!("{}/{}", kernel.addr, kernel.prefix_len);
    ns.ip(&["addr", "add", &kernel_cidr, "dev", &name])?;
    match v6 {
        // The kernel's IPv6 address, without duplicate address detection (the only other host on the
        // link is fastpath, which does not answer it).
        Some((k, _)) => ns.ip(&["-6", "addr", "add", &k.to_string(), "dev", &name, "nodad"])?,
        // The link carries IPv4 only: keep the kernel from sending IPv6 router and listener messages
        // on it (harmless if IPv6 is not there at all).
        None => {
            let _ = Command::new("ip")
                .args(["netns", "exec", ns.name(), "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{name}.disable_ipv6=1"))
                .output();
        }
    }
    ns.ip(&["link", "set", "dev", &name, "up"])?;

    // One stack per queue, each on a thread of its own (queue 0's on this one), sharing nothing but
    // the flag that stops them.
    let queues = links.len();
    let done = Arc::new(AtomicBool::new(false));
    let started = WallClock::now();
    let deadline = args
        .duration
        .map(|s| started + Duration::from_secs_f64(s.max(0.0)));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut links = links.into_iter().enumerate();
    let (_, first) = links.next().expect("at least one queue");
    let ctx = ShardContext {
        args: Arc::new(args.clone()),
        v6,
        queues,
        stop: stop.clone(),
        done: done.clone(),
        deadline,
        board: NeighborBoard::new(),
    };
    let mut threads = Vec::new();
    for (q, link) in links {
        let (ctx, ready) = (ctx.clone(), ready_tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("fastpath-q{q}"))
                .spawn(move || -> Result<ShardReport, String> {
                    // Send the set-up's outcome, and end if it failed.
                    let shard = Shard::new(link, &ctx, q);
                    let ok = shard.as_ref().map(drop).map_err(|e| e.clone());
                    let _ = ready.send(ok.clone());
                    drop(ready);
                    ok?;
                    Ok(shard?.run(&ctx, None))
                })
                .map_err(|e| format!("starting queue {q}'s thread: {e}"))?,
        );
    }
    drop(ready_tx);
    let first = Shard::new(first, &ctx, 0);
    let setups: Vec<Result<(), String>> = ready_rx.iter().take(queues - 1).collect();
    let first = match (first, setups.into_iter().find_map(Result::err)) {
        (Ok(first), None) => first,
        (Err(e), _) | (Ok(_), Some(e)) => {
            done.store(true, Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            return Err(e);
        }
    };
    if let Some((k, a)) = v6 {
        say!("ipv6 {a} (kernel {k})");
    }
    if queues > 1 {
        say!("{queues} queues, a stack on each");
    }
    say!(
        "ready {} via {name} in {} (kernel {kernel_cidr})",
        args.addr,
        ns.name()
    );
    let _ = io::stdout().flush();

    let pcap_count = first.pcap_count.clone();
    let mut reports = vec![first.run(&ctx, args.connect)];
    done.store(true, Ordering::Relaxed);
    for (q, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(Ok(report)) => reports.push(report),
            Ok(Err(e)) => return Err(format!("queue {}: {e}", q + 1)),
            Err(_) => return Err(format!("queue {}'s thread panicked", q + 1)),
        }
    }
    let elapsed = started.elapsed();
    // Closing the links removed the interface (and flushed the pcap file).
    let why = reports[0].why;
    let (mut echoed, mut discarded, mut send_errors) = (0u64, 0u64, 0u64);
    let mut t = TcpTotals::default();
    for r in &reports {
        echoed += r.echoed;
        discarded += r.discarded;
        send_errors += r.send_errors;
        t.accepted += r.tcp.accepted;
        t.echoed += r.tcp.echoed;
        t.discarded += r.tcp.discarded;
        t.generated += r.tcp.generated;
        t.errors += r.tcp.errors;
    }
    t.client = reports[0].tcp.client;
    t.client_error = reports[0].tcp.client_error.clone();
    say!(
        "stopped ({why}) after {:.1} s: {echoed} datagrams echoed, {discarded} discarded{}",
        elapsed.as_secs_f64(),
        if send_errors > 0 {
            format!(", {send_errors} echo errors")
        } else {
            String::new()
        }
    );
    say!(
        "tcp: {} connections accepted, {} bytes echoed, {} discarded, {} generated, {} errors",
        t.accepted,
        t.echoed,
        t.discarded,
        t.generated,
        t.errors
    );
    let mut failure = None;
    if let Some((sent, back, ok)) = t.client {
        let verdict = if ok {
            "intact".to_string()
        } else {
            let cause = t
                .client_error
                .clone()
                .unwrap_or_else(|| format!("not finished when stopped ({why})"));
            let verdict = format!("FAILED: {cause}");
            failure = Some(cause);
            verdict
        };
        say!("client: {sent} bytes sent, {back} bytes echoed back, {verdict}");
    }
    for (q, r) in reports.iter().enumerate() {
        if queues > 1 {
            say!(
                "\n--- queue {q}: {} datagrams echoed, {} discarded, {} connections accepted ---",
                r.echoed,
                r.discarded,
                r.tcp.accepted
            );
        }
        say!("\n--- counters ---\n{}", r.counters);
        if let Some(e) = &r.ethernet {
            let _ = write!(io::stdout(), "{e}");
        }
        let _ = write!(io::stdout(), "{}", r.tun);
        say!("{}", r.buffers);
    }
    if let (Some(count), Some(path)) = (pcap_count, &args.pcap) {
        say!(
            "pcap: {} packets in {}",
            count.load(Ordering::Relaxed),
            path.display()
        );
    }
    let _ = io::stdout().flush();
    drop(ns);
    match (failure, args.connect) {
        (Some(cause), Some(to)) => Err(format!("--connect {to} failed: {cause}")),
        _ => Ok(()),
    }
}

/// The TUN (or TAP) interface in the namespace, a link per queue; and the name of the kernel's
/// side, the interface itself.
fn open_tun(
    args: &ServeArgs,
    ns: &Namespace,
    offload: bool,
) -> Result<(Vec<QueueLink>, String), String> {
    let ephemeral = StackConfig::default().ephemeral_ports;
    let links = TunLink::open_queues(
        &TunConfig {
            name: args.tun.clone(),
            netns: Some(ns.name().to_string()),
            mtu: args.mtu as usize,
            offload,
            uso: args.uso == OnOff::On,
            io_uring: args.io_uring == OnOff::On,
            tap: args.tap.then(tap_mac),
        },
        args.queues,
        &ephemeral,
    )
    .map_err(|e| {
        let kind = if args.tap { "TAP" } else { "TUN" };
        format!(
            "creating {kind} interface {} in {}: {e}",
            args.tun,
            ns.name()
        )
    })?;
    if args.uso == OnOff::On && !links[0].uso_enabled() {
        eprintln!(
            "fastpath: UDP segmentation offload left off ({})",
            if offload {
                "the kernel does not offer it"
            } else {
                "it needs --offload on"
            }
        );
    }
    note_io_uring(args.io_uring, &links);
    let name = links[0].name().to_string();
    Ok((links.into_iter().map(QueueLink::Tun).collect(), name))
}

/// A veth pair in the namespace with `--queues` queues each way, fastpath's end `iface` and the
/// kernel's end `iface`k without transmit checksum offload (so its frames reach AF_XDP with their
/// checksums done), and an AF_XDP link per queue of fastpath's end; returns them and the kernel's
/// end's name.
fn open_xdp(
    args: &ServeArgs,
    iface: &str,
    ns: &Namespace,
) -> Result<(Vec<QueueLink>, String), String> {
    let (ours, kernel) = (iface.to_string(), format!("{iface}k"));
    if kernel.len() > 15 || ours.is_empty() {
        return Err(format!(
            "--xdp {ours}: 1 to 14 bytes (the kernel's end adds a k)"
        ));
    }
    let q = args.queues.to_string();
    let mtu = args.mtu.to_string();
    ns.ip(&[
        "link",
        "add",
        &ours,
        "numrxqueues",
        &q,
        "numtxqueues",
        &q,
        "mtu",
        &mtu,
        "type",
        "veth",
        "peer",
        "name",
        &kernel,
        "numrxqueues",
        &q,
        "numtxqueues",
        &q,
        "mtu",
        &mtu,
    ])?;
    for dev in [&ours, &kernel] {
        ns.ip(&["link", "set", "dev", dev, "up"])?;
    }
    fastpath::link::disable_tx_checksum(Some(ns.name()), &kernel)
        .map_err(|e| format!("turning off {kernel}'s transmit checksum offload: {e}"))?;
    let links = XdpLink::open_queues(
        &XdpConfig {
            ifname: ours.clone(),
            netns: Some(ns.name().to_string()),
            // A frame to a port of another queue's share goes to that queue: the replies to a
            // connection a stack opens reach it, whichever queue the veth puts them on.
            ephemeral_ports: Some(StackConfig::default().ephemeral_ports),
            ..XdpConfig::default()
        },
        args.queues as u32,
    )
    .map_err(|e| format!("opening AF_XDP sockets on {ours} in {}: {e}", ns.name()))?;
    if links.first().is_some_and(|l| !l.zero_copy()) {
        eprintln!("fastpath: AF_XDP in copy mode on {ours} (the driver offers no zero copy)");
    }
    Ok((links.into_iter().map(QueueLink::Xdp).collect(), kernel))
}

/// One queue's link: a TUN (or TAP) queue, or an AF_XDP socket.
enum QueueLink {
    Tun(TunLink),
    Xdp(XdpLink),
}

/// What stays with a queue's stack once its link belongs to the stack: waiting and counters.
enum QueueHandle {
    Tun(TunHandle),
    Xdp(XdpHandle, String),
}

impl QueueHandle {
    fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        match self {
            QueueHandle::Tun(h) => h.wait(timeout),
            QueueHandle::Xdp(h, _) => h.wait(timeout),
        }
    }

    fn name(&self) -> &str {
        match self {
            QueueHandle::Tun(h) => h.name(),
            QueueHandle::Xdp(_, name) => name,
        }
    }

    /// The link's counters, printed.
    fn stats(&self) -> String {
        match self {
            QueueHandle::Tun(h) => h.stats().to_string(),
            QueueHandle::Xdp(h, _) => h.stats().to_string(),
        }
    }
}

impl QueueLink {
    /// The handle, and the link as the stack takes it, with a stack for queue `queue` of
    /// `queues` sharing its buffers.
    fn into_stack(
        self,
        config: StackConfig,
        queue: usize,
        queues: usize,
    ) -> Result<(QueueHandle, Box<dyn Link>, Stack), String> {
        match self {
            QueueLink::Tun(mut link) => {
                let stack = crate::queues::stack_for_queue(&mut link, config, queue, queues)?;
                Ok((QueueHandle::Tun(link.handle()), Box::new(link), stack))
            }
            QueueLink::Xdp(mut link) => {
                // Each queue's stack takes the flows the interface's hash gives it, and the
                // replies to its own connections, which the links hand it: its share of the
                // ephemeral ports says which those are.
                let mut config = config;
                config.ephemeral_ports =
                    fastpath::link::tun::ephemeral_share(&config.ephemeral_ports, queue, queues)
                        .ok_or("the ephemeral ports cannot be shared by that many queues")?;
                let stack = Stack::new(config);
                let depot = fastpath::buf::BufferDepot::new();
                link.set_buffer_depot(depot.clone());
                let mut stack = stack;
                stack.set_buffer_depot(depot);
                let handle = QueueHandle::Xdp(link.handle(), format!("xdp{queue}"));
                Ok((handle, Box::new(link), stack))
            }
        }
    }
}

/// fastpath's hardware address on a TAP link: locally administered and unicast (`02:` first), the
/// rest from the process id, so that two servers on one machine differ.
fn tap_mac() -> MacAddr {
    let id = std::process::id().to_be_bytes();
    MacAddr([0x02, 0x66, 0x70, id[1], id[2], id[3]])
}

/// What every queue's stack is run with.
#[derive(Clone)]
struct ShardContext {
    args: Arc<ServeArgs>,
    v6: Option<(Ipv6Cidr, Ipv6Addr)>,
    /// Queues, a stack on each.
    queues: usize,
    /// A signal came.
    stop: Arc<AtomicBool>,
    /// Queue 0's stack stopped (its client finished, or the duration passed): the others stop too.
    done: Arc<AtomicBool>,
    deadline: Option<WallClock>,
    /// Where the stacks of an Ethernet interface's queues (TAP, AF_XDP) share the neighbours'
    /// answers.
    board: NeighborBoard,
}

/// One queue's stack and the services it runs.
struct Shard {
    stack: Stack,
    tun: QueueHandle,
    echo: UdpSocket,
    discard: UdpSocket,
    tcp: TcpServices,
    pcap_count: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// What one queue's stack did, for the summary.
struct ShardReport {
    why: &'static str,
    echoed: u64,
    discarded: u64,
    send_errors: u64,
    tcp: TcpTotals,
    counters: Counters,
    /// With `--tap`.
    ethernet: Option<EthernetCounters>,
    tun: String,
    buffers: String,
}

/// On an Ethernet link, polls `stack` until duplicate address detection has let it use `addr` (a
/// second, by default), so that `ready` means ready; at once on any other link.
fn wait_for_address(stack: &mut Stack, iface: InterfaceId, addr: Ipv6Addr) -> Result<(), String> {
    let until = WallClock::now() + Duration::from_secs(5);
    while !stack.ipv6_addresses(iface).iter().any(|c| c.addr == addr) {
        if WallClock::now() > until {
            return Err(format!("--addr6 {addr}: another host on the link has it"));
        }
        stack.poll(Instant::now());
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

impl Shard {
    /// A stack on `link`, queue `queue`'s, listening on every service.
    fn new(link: QueueLink, ctx: &ShardContext, queue: usize) -> Result<Shard, String> {
        let args = &ctx.args;
        let mut config = StackConfig::default();
        config.ethernet.temporary.mode = match ctx.args.temporary_addresses {
            Temporary::Off => TemporaryMode::Off,
            Temporary::Form => TemporaryMode::Form,
            Temporary::Prefer => TemporaryMode::Prefer,
        };
        let (tun, link, mut stack) = link.into_stack(config, queue, ctx.queues)?;
        let cidr = Ipv4Cidr::new(args.addr, args.kernel_addr.prefix_len);
        let link: Box<dyn Link> = match args.impair {
            Some((impair, delay)) => Box::new(Impaired::new(link, impair).with_delay(delay)),
            None => Box::new(link),
        };
        let (iface, pcap_count) = match &args.pcap {
            Some(path) => {
                let tap = PcapTap::create(link, path)
                    .map_err(|e| format!("creating {}: {e}", path.display()))?;
                let count = tap.written();
                (stack.add_interface(tun.name(), tap, cidr), Some(count))
            }
            None => (stack.add_interface(tun.name(), link, cidr), None),
        };
        if ctx.queues > 1 {
            // With several queues of one Ethernet interface (TAP, AF_XDP), an answer to one
            // stack's question may reach another: they share them. A TUN interface has no
            // neighbours.
            stack.share_neighbors(iface, ctx.board.clone());
        }
        if let Some((k, a)) = ctx.v6 {
            stack
                .add_ipv6_address(iface, Ipv6Cidr::new(a, k.prefix_len))
                .map_err(|e| format!("--addr6 {a}: {e}"))?;
            wait_for_address(&mut stack, iface, a)?;
            // The kernel is fastpath's IPv6 router: what is not on the link goes through it.
            stack
                .add_ipv6_route("::/0".parse().expect("a prefix"), Some(k.addr), iface)
                .map_err(|e| format!("the IPv6 default route: {e}"))?;
        }
        // With IPv6, one dual-stack socket on [::] serves both families.
        let any: IpAddr = if ctx.v6.is_some() {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let echo = binding_on(&mut stack, (any, args.echo).into())?;
        let discard = binding_on(&mut stack, (any, args.discard).into())?;
        let tcp = if ctx.v6.is_some() {
            TcpServices::listen_dual(&mut stack, args.echo, args.discard, args.chargen)?
        } else {
            TcpServices::listen(&mut stack, args.echo, args.discard, args.chargen)?
        };
        Ok(Shard {
            stack,
            tun,
            echo,
            discard,
            tcp,
            pcap_count,
        })
    }

    /// Serves until a signal, the duration, queue 0's stop, or (with `connect`, queue 0 only) the
    /// client's end.
    fn run(mut self, ctx: &ShardContext, mut connect: Option<SocketAddr>) -> ShardReport {
        let args = &ctx.args;
        let stack = &mut self.stack;
        let started = WallClock::now();
        let connect_at = started + Duration::from_secs_f64(args.connect_delay.max(0.0));
        let client = connect.is_some();
        let mut buf = vec![0u8; 65536];
        let (mut echoed, mut discarded, mut send_errors) = (0u64, 0u64, 0u64);
        let why = loop {
            if ctx.stop.load(Ordering::Relaxed) {
                break "signal";
            }
            if ctx.done.load(Ordering::Relaxed) {
                break "queue 0 stopped";
            }
            let remaining = ctx
                .deadline
                .map(|d| d.saturating_duration_since(WallClock::now()));
            if remaining == Some(Duration::ZERO) {
                break "duration";
            }
            let mut work = stack.poll(Instant::now());
            if let Some(to) = connect.filter(|_| WallClock::now() >= connect_at) {
                if let Err(e) = self.tcp.connect(stack, to, args.send) {
                    self.tcp.totals.client = Some((0, 0, false));
                    self.tcp.totals.client_error = Some(e);
                    break "client done";
                }
                connect = None;
            } else if connect.is_none() && client && !self.tcp.client_running() {
                break "client done";
            }
            loop {
                match stack.udp(self.echo).recv_from(&mut buf) {
                    Ok((n, from)) => {
                        work += 1;
                        echoed += 1;
                        if stack.udp(self.echo).send_to(&buf[..n], from).is_err() {
                            send_errors += 1;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => send_errors += 1,
                }
            }
            while stack.udp(self.discard).recv_from_with(|_, _| ()).is_ok() {
                work += 1;
                discarded += 1;
            }
            work += self.tcp.run(stack);
            stack.flush();
            if work == 0 {
                // Sleep until a packet comes or a timer is due; wake now and then for the stop flags.
                let now = Instant::now();
                let timer = stack
                    .next_deadline()
                    .map_or(Duration::from_millis(100), |d| d.saturating_since(now));
                // An impaired link holds packets (delayed, or held back to reorder) that the TUN
                // descriptor knows nothing of: wake often enough to hand them over on time.
                let longest = if args.impair.is_some() {
                    Duration::from_micros(200)
                } else {
                    Duration::from_millis(100)
                };
                let nap = remaining.map_or(longest, |r| r.min(longest)).min(timer);
                if let Err(e) = self.tun.wait(Some(nap)) {
                    self.tcp.totals.errors += 1;
                    eprintln!("fastpath: waiting on {}: {e}", self.tun.name());
                    break "error";
                }
            }
        };
        let report = ShardReport {
            why,
            echoed,
            discarded,
            send_errors,
            tcp: self.tcp.totals.clone(),
            counters: *stack.counters(),
            ethernet: stack.ethernet_counters(InterfaceId(1)),
            tun: self.tun.stats(),
            buffers: crate::demo::buffer_line(stack),
        };
        // Closing the link (the last queue's closes the interface) and flushing the pcap file.
        drop(self.stack);
        report
    }
}

/// `--addr6` must be a unicast address inside the kernel's IPv6 prefix, and not the kernel's own.
pub(crate) fn check_addresses6(kernel: Ipv6Cidr, addr: Ipv6Addr) -> Result<(), String> {
    for (option, a) in [("--kernel-addr6", kernel.addr), ("--addr6", addr)] {
        if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
            return Err(format!("{option} {a} is not a unicast address for a link"));
        }
    }
    if kernel.prefix_len > 126 {
        return Err(format!(
            "--kernel-addr6 {kernel}: the prefix leaves no room for fastpath's address"
        ));
    }
    if !kernel.contains(addr) {
        return Err(format!(
            "--addr6 {addr} is outside the kernel's prefix (--kernel-addr6 {kernel})"
        ));
    }
    if addr == kernel.addr {
        return Err(format!(
            "--addr6 {addr} is the kernel's own address (--kernel-addr6 {kernel})"
        ));
    }
    Ok(())
}

/// The network address and mask of `cidr`.
pub(crate) fn network(cidr: Ipv4Cidr) -> (u32, u32) {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(cidr.prefix_len))
        .unwrap_or(0);
    (u32::from(cidr.addr) & mask, mask)
}

/// `cidr`'s prefix, host bits cleared: `10.7.0.0/24`.
pub(crate) fn prefix(cidr: Ipv4Cidr) -> String {
    format!("{}/{}", Ipv4Addr::from(network(cidr).0), cidr.prefix_len)
}

/// Refuses addresses that are not two distinct host addresses of the kernel's prefix.
pub(crate) fn check_addresses(kernel: Ipv4Cidr, addr: Ipv4Addr) -> Result<(), String> {
    let (net, mask) = network(kernel);
    let broadcast = net | !mask;
    let cidr = prefix(kernel);
    // /31 (RFC 3021) and /32 have no network or broadcast address.
    if kernel.prefix_len < 31 {
        for (option, a) in [("--kernel-addr", kernel.addr), ("--addr", addr)] {
            if u32::from(a) == net {
                return Err(format!(
                    "{option} {a} is the network address of {cidr}: give a host address"
                ));
            }
            if u32::from(a) == broadcast {
                return Err(format!(
                    "{option} {a} is the broadcast address of {cidr}: give a host address"
                ));
            }
        }
    }
    if u32::from(addr) & mask != net {
        return Err(format!(
            "--addr {addr} is outside the kernel's prefix {cidr} (--kernel-addr {kernel})"
        ));
    }
    if addr == kernel.addr {
        return Err(format!(
            "--addr {addr} is the kernel's own address (--kernel-addr {kernel}): give fastpath \
             another address in {cidr}"
        ));
    }
    Ok(())
}

/// Refuses a prefix that overlaps one the namespace already routes (a default route aside): the
/// kernel would send part or all of it to the other interface.
fn check_routes(ns: &Namespace, kernel: Ipv4Cidr) -> Result<(), String> {
    let text = ns.ip_output(&["-4", "-j", "route", "show", "table", "main"])?;
    let routes: Vec<serde_json::Value> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&text).map_err(|e| format!("reading `ip -j route`: {e}"))?
    };
    for route in &routes {
        let Some(dst) = route["dst"].as_str() else {
            continue;
        };
        let Ok(other) = dst.parse::<Ipv4Cidr>() else {
            continue; // "default", or something that is not one prefix.
        };
        let shorter = other.prefix_len.min(kernel.prefix_len);
        if shorter == 0 {
            continue;
        }
        let (a, _) = network(Ipv4Cidr::new(kernel.addr, shorter));
        let (b, _) = network(Ipv4Cidr::new(other.addr, shorter));
        if a == b {
            let via = route["dev"]
                .as_str()
                .map_or_else(|| "no interface".to_string(), |d| format!("interface {d}"));
            return Err(format!(
                "namespace {} already routes {} through {via}, which overlaps --kernel-addr {kernel} \
                 ({}): the kernel would send some packets to the wrong one. Choose another prefix \
                 or namespace",
                ns.name(),
                prefix(other),
                prefix(kernel),
            ));
        }
    }
    Ok(())
}

/// Parses `--impair`: `key=value` pairs separated by commas.
fn parse_impairments(spec: &str) -> Result<(Impairments, Duration), String> {
    let mut im = Impairments::default();
    let mut delay = Duration::ZERO;
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}`: expected key=value"))?;
        let p = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(|| format!("`{part}`: a probability from 0 to 1"))
        };
        match key {
            "loss" => im.loss = p()?,
            "duplicate" => im.duplicate = p()?,
            "reorder" => im.reorder = p()?,
            "corrupt" => im.corrupt = p()?,
            "seed" => im.seed = value.parse().map_err(|_| format!("`{part}`: a number"))?,
            "delay" => {
                let ms: f64 = value
                    .parse()
                    .ok()
                    .filter(|ms: &f64| (0.0..=10_000.0).contains(ms))
                    .ok_or_else(|| format!("`{part}`: milliseconds, 0 to 10000"))?;
                delay = Duration::from_secs_f64(ms / 1000.0);
            }
            _ => {
                return Err(format!(
                    "`{key}`: one of loss, duplicate, reorder, corrupt, seed, delay"
                ))
            }
        }
    }
    Ok((im, delay))
}
