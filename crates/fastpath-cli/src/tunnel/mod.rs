//! `fastpath tunnel`: a transparent proxy ("tun2socks") on fastpath's async front.
//!
//! The applications live in a network namespace (made if missing, and then removed on exit) whose
//! default routes, IPv4 and IPv6, lead into a TUN interface. fastpath, on the other end, intercepts
//! on it (`fastpath::api::intercept`): it terminates every TCP connection and UDP flow the
//! applications open, whatever their destination, and this program relays each to that destination
//! through the host kernel's sockets (from the namespace `fastpath tunnel` runs in, optionally bound
//! to `--bind-interface`).
//!
//! - TCP: each intercepted connection gets a kernel connection to its destination (from the
//!   application's own port when the kernel allows it); bytes are relayed both ways without a copy
//!   here, between the stack's buffers and the kernel socket, so a slow reader on one side slows the
//!   writer on the other: nothing buffers without bound; an end of stream becomes a half-close on
//!   the other side,
//!   and an error or a reset on either side becomes a reset on the other. The application's SYN is
//!   held (`Stack::tcp_intercept_holding`) until the destination answered the tunnel's own connect,
//!   and then answered as the destination answered: a SYN-ACK when it accepted; a RST when it
//!   refused; an ICMP network, host or administratively prohibited unreachable when the kernel (or
//!   the SOCKS5 server) found it unreachable or not allowed; and nothing when it did not answer
//!   within `--connect-timeout` (the application's SYN again starts a new attempt, until its own
//!   connect times out). So the application sees what it would without the tunnel.
//! - UDP: each (application socket, destination) pair is a flow with a kernel socket connected to
//!   the destination; replies are sent back from the destination's address, and a destination's
//!   refusal (ICMP port unreachable) as a port unreachable to the application. A flow idle for
//!   `--udp-idle` expires; at most `--max-udp-flows` exist at once (datagrams of further flows are
//!   dropped, counted).
//! - fastpath's own address answers ping; nothing else intercepted but TCP and UDP is answered.
//!
//! It stops on SIGINT or SIGTERM, or after `--duration`, and prints what it relayed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Ipv6Cidr, StackConfig};
use fastpath_tokio::{Net, TcpListener, TcpStream, UdpIntercept};
use tokio::io::AsyncWriteExt;

use crate::fake_dns::{Answer, FakeDns};
use crate::netns::Namespace;
use crate::pcap_tap::PcapTap;
use crate::socks5::{self, Target};

mod tcp;
mod udp;

use tcp::tcp_loop;
use udp::udp_loop;

#[derive(Args, Debug)]
pub struct TunnelArgs {
    /// The applications' network namespace (created if missing, and then removed on exit). Their
    /// names need a resolver they reach through the tunnel: one in /etc/netns/NAME/resolv.conf
    /// (ip-netns(8)), or --fake-dns.
    #[arg(long, default_value = "fptun")]
    netns: String,
    /// The TUN interface's name.
    #[arg(long, default_value = "fpt0")]
    tun: String,
    /// The kernel's address on the TUN interface (the applications' source address), with the
    /// link's prefix.
    #[arg(long, default_value = "10.66.0.1/24")]
    kernel_addr: Ipv4Cidr,
    /// fastpath's own address on the link (it answers ping).
    #[arg(long, default_value = "10.66.0.2")]
    addr: Ipv4Addr,
    /// The kernel's IPv6 address on the link, with its prefix: carries IPv6 through the tunnel too.
    #[arg(long, requires = "addr6")]
    kernel_addr6: Option<Ipv6Cidr>,
    /// fastpath's own IPv6 address on the link.
    #[arg(long, requires = "kernel_addr6")]
    addr6: Option<Ipv6Addr>,
    /// The TUN interface's MTU (segmentation offload carries up to 64 KiB per packet whatever it is).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(1280..=65535))]
    mtu: u32,
    /// Relay through this SOCKS5 server (RFC 1928; no authentication unless --socks5-user gives a
    /// user name): TCP with CONNECT, UDP with UDP ASSOCIATE. Without it, flows go straight to their
    /// destinations.
    #[arg(long, value_name = "ADDR:PORT")]
    socks5: Option<SocketAddr>,
    /// Authenticate to the SOCKS5 server with this user name (RFC 1929); the password is read from
    /// the environment variable FASTPATH_SOCKS5_PASSWORD, so that it does not show in the process
    /// list.
    #[arg(long, requires = "socks5", value_name = "USER")]
    socks5_user: Option<String>,
    /// Answer the applications' DNS queries for IPv4 addresses (UDP to port 53, whatever the server)
    /// with addresses of this range, each standing for its name, and connect to the name when an
    /// application connects to one of them: through SOCKS5 the proxy resolves it (no query leaves
    /// outside the proxy), directly the host's resolver does. Queries for IPv6 addresses get none.
    /// 198.18.0.0/15 (set aside for benchmarking, RFC 2544) is the usual range.
    #[arg(long, value_name = "CIDR")]
    fake_dns: Option<Ipv4Cidr>,
    /// Bind every outgoing kernel socket to this interface (`SO_BINDTODEVICE`).
    #[arg(long)]
    bind_interface: Option<String>,
    /// Seconds to wait for a destination to accept a TCP connection (above 0).
    #[arg(long, default_value_t = 10.0, value_parser = crate::bench::common::parse_positive)]
    connect_timeout: f64,
    /// Seconds of silence after which a UDP flow expires.
    #[arg(long, default_value_t = 60.0, value_parser = crate::bench::common::parse_non_negative)]
    udp_idle: f64,
    /// UDP flows relayed at once, at most (at least 1).
    #[arg(long, default_value_t = 1024, value_parser = flow_limit)]
    max_udp_flows: usize,
    /// TCP connections relayed at once, at most (at least 1; further ones are reset). Each holds a
    /// kernel socket: the tunnel raises its descriptor limit to the hard limit, and says so if that
    /// is still too low.
    #[arg(long, default_value_t = 16384, value_parser = flow_limit)]
    max_tcp_flows: usize,
    /// Queues of the TUN interface (IFF_MULTI_QUEUE), 1 to 256: a stack and its relays per queue, each
    /// on a thread of its own; the kernel keeps each flow on one queue. `--max-tcp-flows` and
    /// `--max-udp-flows` are shared out among the queues.
    #[arg(long, default_value_t = 1, value_parser = crate::bench::common::count(1, 256))]
    queues: usize,
    /// Writes to the TUN interface through io_uring: a batch of packets in one system call, in place
    /// of a `write` each (left off, with a note, where the kernel refuses a ring).
    #[arg(long, value_enum, default_value_t = crate::serve::OnOff::On)]
    io_uring: crate::serve::OnOff,
    /// Write every packet on the TUN interface to this pcap file (with --queues 1 only).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = crate::bench::common::parse_non_negative)]
    duration: Option<f64>,
}

/// Parses a limit on flows relayed at once: 1 to 2^24 (0 would relay nothing).
fn flow_limit(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1 << 24).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{s}` is not a number of flows from 1 to {} (0 would relay nothing)",
            1 << 24
        )),
    }
}

/// Refuses a fake DNS range that overlaps the link's prefix: its pool would hand out the kernel's
/// and fastpath's own addresses as answers, and the applications would reach the link instead of
/// the names.
fn check_fake_dns(range: Ipv4Cidr, kernel: Ipv4Cidr) -> Result<(), String> {
    let (range_net, range_mask) = crate::serve::network(range);
    let (link_net, link_mask) = crate::serve::network(kernel);
    // Two prefixes overlap when the shorter one holds the other's network.
    let mask = range_mask & link_mask;
    if range_net & mask == link_net & mask {
        return Err(format!(
            "--fake-dns {range} overlaps the tunnel's link {} (--kernel-addr {kernel}): its \
             addresses would stand for names and the link's own (the kernel's, fastpath's) be \
             handed out as answers; give a range outside it, such as 198.18.0.0/15",
            crate::serve::prefix(kernel)
        ));
    }
    Ok(())
}

/// Refuses a `--bind-interface` that does not exist, rather than fail on every connection later.
fn check_bind_interface(name: &str) -> Result<(), String> {
    match nix::net::if_::if_nametoindex(name) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--bind-interface {name}: no such network interface here ({e}); `ip link` lists them"
        )),
    }
}

/// Defines `Tally`, what one stack's relays count (cells, bumped from its tasks), and `Totals`, the
/// same as plain numbers, which the stacks of several queues add up for the summary.
macro_rules! tally {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// What was relayed, for the summary.
        #[derive(Default)]
        struct Tally {
            $($(#[$doc])* $name: Cell<u64>,)*
        }

        /// A [`Tally`]'s numbers.
        #[derive(Clone, Copy, Debug, Default)]
        struct Totals {
            $($name: u64,)*
        }

        impl Tally {
            fn totals(&self) -> Totals {
                Totals {
                    $($name: self.$name.get(),)*
                }
            }
        }

        impl std::ops::AddAssign for Totals {
            fn add_assign(&mut self, other: Totals) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

tally! {
    tcp_flows,
    /// Connections being relayed now.
    tcp_live,
    /// Held connections answered with a RST (the destination refused), an ICMP unreachable, or
    /// nothing (no answer within the connect timeout).
    tcp_refused,
    tcp_unreachable,
    tcp_timed_out,
    tcp_reset,
    tcp_over_limit,
    /// Connections whose handshake came first (held SYNs at their bound, answered with a cookie),
    /// their destination asked after.
    tcp_handshake_first,
    tcp_up,
    tcp_down,
    udp_flows,
    udp_expired,
    udp_over_limit,
    udp_send_failed,
    udp_refused,
    udp_up,
    udp_down,
    /// Sends with UDP segmentation offload, and the datagrams they carried.
    udp_segmented_sends,
    udp_segmented_datagrams,
    /// Flows whose segmented send the kernel refused, sent one datagram at a time since.
    udp_segmenting_refused,
    /// DNS queries the fake DNS answered.
    dns_answered,
    /// Connections and flows to an address of the fake DNS range that no name has (any more): a
    /// host unreachable for a connection, the datagram dropped.
    dns_unknown,
}

fn add(c: &Cell<u64>, n: u64) {
    c.set(c.get() + n);
}

#[derive(Clone)]
struct Settings {
    socks5: Option<SocketAddr>,
    socks5_auth: Option<socks5::Credentials>,
    bind_interface: Option<String>,
    connect_timeout: Duration,
    udp_idle: Duration,
    max_udp_flows: usize,
    max_tcp_flows: usize,
    /// The fake DNS table, shared by every queue (a query and the connection it leads to may reach
    /// different queues).
    fake_dns: Option<Arc<Mutex<FakeDns>>>,
}

pub fn run(args: &TunnelArgs) -> Result<(), String> {
    // SAFETY: no other thread exists yet; SIG_IGN is a valid disposition. A relay writing to a
    // closed kernel socket must get EPIPE, not end the program.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    raise_descriptor_limit(args.max_tcp_flows + args.max_udp_flows);
    let kernel = args.kernel_addr;
    crate::serve::check_addresses(kernel, args.addr)?;
    let v6 = match (args.kernel_addr6, args.addr6) {
        (Some(k), Some(a)) => {
            crate::serve::check_addresses6(k, a)?;
            Some((k, a))
        }
        _ => None,
    };
    // The fake DNS table, shared by every queue; never handing out the link's own addresses.
    let fake_dns = match args.fake_dns {
        Some(range) => {
            check_fake_dns(range, kernel)?;
            let mut table = FakeDns::new(range.addr, range.prefix_len)?;
            table.reserve(kernel.addr)?;
            table.reserve(args.addr)?;
            Some(Arc::new(Mutex::new(table)))
        }
        None => None,
    };
    if let Some(name) = &args.bind_interface {
        check_bind_interface(name)?;
    }
    if args.queues > 1 && args.pcap.is_some() {
        return Err("--pcap records one queue's link: use it with --queues 1".into());
    }
    let socks5_auth = match &args.socks5_user {
        None => None,
        Some(user) => {
            let password = std::env::var("FASTPATH_SOCKS5_PASSWORD").map_err(|_| {
                "--socks5-user needs the password in FASTPATH_SOCKS5_PASSWORD".to_string()
            })?;
            Some(socks5::Credentials::new(user.clone(), password)?)
        }
    };
    crate::netns::check_privileges("tunnel")?;
    let ns = Namespace::ensure(&args.netns)?;
    let ephemeral = StackConfig::default().ephemeral_ports;
    let links = TunLink::open_queues(
        &TunConfig {
            name: args.tun.clone(),
            netns: Some(ns.name().to_string()),
            mtu: args.mtu as usize,
            offload: true,
            uso: false,
            io_uring: args.io_uring == crate::serve::OnOff::On,
        },
        args.queues,
        &ephemeral,
    )
    .map_err(|e| format!("creating TUN interface {} in {}: {e}", args.tun, ns.name()))?;
    crate::serve::note_io_uring(args.io_uring, &links);
    let dev = links[0].name().to_string();
    ns.ip(&["addr", "add", &kernel.to_string(), "dev", &dev])?;
    if let Some((k, _)) = v6 {
        ns.ip(&["-6", "addr", "add", &k.to_string(), "dev", &dev, "nodad"])?;
    }
    ns.ip(&["link", "set", "dev", &dev, "up"])?;
    // Everything the applications send that is not on the link goes into the tunnel.
    ns.ip(&["route", "replace", "default", "dev", &dev])?;
    if v6.is_some() {
        ns.ip(&["-6", "route", "replace", "default", "dev", &dev])?;
    }

    let queues = links.len();
    let settings = Settings {
        socks5: args.socks5,
        socks5_auth,
        bind_interface: args.bind_interface.clone(),
        connect_timeout: Duration::from_secs_f64(args.connect_timeout),
        udp_idle: Duration::from_secs_f64(args.udp_idle.max(0.001)),
        max_udp_flows: args.max_udp_flows.div_ceil(queues),
        max_tcp_flows: args.max_tcp_flows.div_ceil(queues),
        fake_dns: fake_dns.clone(),
    };
    let shard = Shard {
        dev: dev.clone(),
        cidr: Ipv4Cidr::new(args.addr, kernel.prefix_len),
        v6: v6.map(|(k, a)| Ipv6Cidr::new(a, k.prefix_len)),
        pcap: args.pcap.clone(),
        settings,
    };
    // Queue 0's stack runs here and waits for the signal or the duration; the others, each on a
    // thread of its own, until it tells them to stop.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut links = links.into_iter().enumerate();
    let (_, first) = links.next().expect("at least one queue");
    let mut threads = Vec::new();
    for (q, link) in links {
        let (shard, ready, stop) = (shard.clone(), ready_tx.clone(), stop_rx.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("tunnel-q{q}"))
                .spawn(move || shard.run(link, (q, queues), Stop::Watch(stop), ready))
                .map_err(|e| format!("starting queue {q}'s thread: {e}"))?,
        );
    }
    let duration = args.duration.map(Duration::from_secs_f64);
    let banner = format!(
        "fastpath tunnel: ready; namespace {} routes through {dev} (fastpath at {}{}{}), relaying {}{}",
        ns.name(),
        args.addr,
        v6.map(|(_, a)| format!(" and {a}")).unwrap_or_default(),
        if queues > 1 {
            format!(", {queues} queues with a stack each")
        } else {
            String::new()
        },
        args.socks5
            .map(|p| format!("through the SOCKS5 server at {p}"))
            .unwrap_or_else(|| "directly".into()),
        args.bind_interface
            .as_ref()
            .map(|i| format!(" through {i}"))
            .unwrap_or_default()
    );
    // Says ready once every queue's stack is; if one failed to start, stops them all.
    let (abort_tx, abort_rx) = tokio::sync::watch::channel(false);
    let announcer = std::thread::spawn(move || {
        let all: Result<Vec<()>, String> = ready_rx.iter().take(queues).collect();
        match &all {
            Ok(_) => say(&banner),
            Err(_) => {
                let _ = abort_tx.send(true);
            }
        }
        all
    });
    let first = shard.run(
        first,
        (0, queues),
        Stop::Signal(duration, stop_tx, abort_rx),
        ready_tx,
    );
    let announced = announcer
        .join()
        .map_err(|_| "the announcer panicked".to_string())?;
    let mut results = vec![first];
    for (q, t) in threads.into_iter().enumerate() {
        results.push(
            t.join()
                .map_err(|_| format!("queue {}'s thread panicked", q + 1))?,
        );
    }
    announced?;
    let mut t = Totals::default();
    let (mut counters, mut connections) = (Vec::new(), 0);
    let mut shares = Vec::new();
    for r in results {
        let r = r?;
        t += r.totals;
        connections += r.connections;
        counters.push(r.counters);
        shares.push((r.totals.tcp_flows, r.totals.udp_flows));
    }
    say(&format!(
        "tcp: {} connections relayed ({} refused, {} unreachable, {} timed out, {} reset, {} over the \
         limit, {} handshake first, {} open at exit, {} in the stack's tables), {} bytes up, {} down",
        t.tcp_flows,
        t.tcp_refused,
        t.tcp_unreachable,
        t.tcp_timed_out,
        t.tcp_reset,
        t.tcp_over_limit,
        t.tcp_handshake_first,
        t.tcp_live,
        connections,
        t.tcp_up,
        t.tcp_down
    ));
    say(&format!(
        "udp: {} flows ({} expired, {} datagrams over the flow limit, {} not sent, {} refused), {} bytes \
         up, {} down; {} datagrams up in {} segmented sends ({} flows refused them)",
        t.udp_flows,
        t.udp_expired,
        t.udp_over_limit,
        t.udp_send_failed,
        t.udp_refused,
        t.udp_up,
        t.udp_down,
        t.udp_segmented_datagrams,
        t.udp_segmented_sends,
        t.udp_segmenting_refused
    ));
    if let Some(fake) = &fake_dns {
        let names = fake.lock().unwrap_or_else(|e| e.into_inner()).len();
        say(&format!(
            "dns: {} queries answered, {names} names held, {} flows to an address no name has",
            t.dns_answered, t.dns_unknown
        ));
    }
    if queues > 1 {
        let list = |f: fn(&(u64, u64)) -> u64| {
            shares
                .iter()
                .map(|s| f(s).to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        };
        say(&format!(
            "queues: {} tcp connections, {} udp flows",
            list(|s| s.0),
            list(|s| s.1)
        ));
    }
    let drops: u64 = counters.iter().map(|c| c.drops.total()).sum();
    say(&format!("drops in the stack: {drops}"));
    for (q, c) in counters.iter().enumerate() {
        for (reason, n) in c.drops.nonzero() {
            if queues > 1 {
                say(&format!("  {n:>10}  {} (queue {q})", reason.label()));
            } else {
                say(&format!("  {n:>10}  {}", reason.label()));
            }
        }
    }
    drop(ns);
    Ok(())
}

/// What every queue's stack is built from.
#[derive(Clone)]
struct Shard {
    dev: String,
    cidr: Ipv4Cidr,
    v6: Option<Ipv6Cidr>,
    pcap: Option<PathBuf>,
    settings: Settings,
}

/// How a queue's stack learns to stop: queue 0 from the signal or the duration (and tells the
/// others), the others from queue 0.
enum Stop {
    /// The signal or the duration; tells the others on the sender; stops early if the receiver says
    /// another queue failed to start.
    Signal(
        Option<Duration>,
        tokio::sync::watch::Sender<bool>,
        tokio::sync::watch::Receiver<bool>,
    ),
    Watch(tokio::sync::watch::Receiver<bool>),
}

/// What one queue's stack relayed.
struct ShardResult {
    totals: Totals,
    counters: fastpath::Counters,
    connections: usize,
}

impl Shard {
    /// Runs a stack on `link` (queue `queue` of `queues`) and its relays until told to stop,
    /// on a current-thread runtime of its own. Sends the set-up's outcome on `ready` first.
    fn run(
        self,
        mut link: TunLink,
        (queue, queues): (usize, usize),
        stop: Stop,
        ready: std::sync::mpsc::Sender<Result<(), String>>,
    ) -> Result<ShardResult, String> {
        let fail = |e: String| {
            let _ = ready.send(Err(e.clone()));
            e
        };
        let tun = link.handle();
        let mut stack =
            crate::queues::stack_for_queue(&mut link, StackConfig::default(), queue, queues)
                .map_err(&fail)?;
        let iface = match &self.pcap {
            Some(path) => {
                let tap = PcapTap::create(link, path)
                    .map_err(|e| fail(format!("creating {}: {e}", path.display())))?;
                stack.add_interface(&self.dev, tap, self.cidr)
            }
            None => stack.add_interface(&self.dev, link, self.cidr),
        };
        if let Some(a) = self.v6 {
            stack
                .add_ipv6_address(iface, a)
                .map_err(|e| fail(format!("--addr6 {}: {e}", a.addr)))?;
        }
        stack
            .set_intercept(iface, true)
            .map_err(|e| fail(format!("intercepting on {}: {e}", self.dev)))?;
        let settings = Rc::new(self.settings);
        let tally = Rc::new(Tally::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("starting the runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        let dev = self.dev;
        let (counters, connections) = local.block_on(&runtime, async {
            let net =
                Net::with_tun(stack, tun).map_err(|e| fail(format!("registering {dev}: {e}")))?;
            tokio::task::spawn_local(net.clone().drive());
            let listener =
                TcpListener::intercept_holding(&net, 1024).map_err(|e| fail(e.to_string()))?;
            let udp = Rc::new(UdpIntercept::new(&net));
            tokio::task::spawn_local(tcp_loop(listener, settings.clone(), tally.clone()));
            tokio::task::spawn_local(udp_loop(udp, settings.clone(), tally.clone()));
            let _ = ready.send(Ok(()));
            match stop {
                Stop::Signal(duration, tell, mut abort) => {
                    // The announcer drops its sender once every queue started: then only the
                    // signal or the duration stops us.
                    let aborted = async {
                        if abort.wait_for(|&a| a).await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    };
                    let stopped = tokio::select! {
                        stopped = stop_signal(duration) => stopped,
                        _ = aborted => Ok(()),
                    };
                    let _ = tell.send(true);
                    stopped?;
                }
                Stop::Watch(mut told) => {
                    let _ = told.wait_for(|&stop| stop).await;
                }
            }
            Ok::<_, String>(net.with_stack(|s| (*s.counters(), s.tcp_connections())))
        })?;
        Ok(ShardResult {
            totals: tally.totals(),
            counters,
            connections,
        })
    }
}

/// Every relayed flow holds a kernel socket: lift the soft limit on descriptors to the hard one (as
/// Go's runtime does for gVisor's tun2socks), and warn when `flows` may still not fit.
fn raise_descriptor_limit(flows: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let limit = getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s);
    let needed = flows as u64 + 64;
    if limit < needed {
        eprintln!(
            "fastpath tunnel: at most {limit} descriptors (ulimit -n), fewer than the {needed} \
             that --max-tcp-flows and --max-udp-flows may use: flows past it fail and are reset"
        );
    }
}

fn say(line: &str) {
    let mut out = io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Waits for SIGINT, SIGTERM or the end of `duration`.
async fn stop_signal(duration: Option<Duration>) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let end = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = end => {}
    }
    Ok(())
}

/// A kernel socket of `dst`'s family, bound to the chosen interface.
fn outgoing_tcp(dst: SocketAddr, settings: &Settings) -> io::Result<tokio::net::TcpSocket> {
    let socket = match dst {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if let Some(i) = &settings.bind_interface {
        socket.bind_device(Some(i.as_bytes()))?;
    }
    Ok(socket)
}

/// Where a flow to `dst` goes: `dst` itself, or the name a fake DNS address stands for. `None` for
/// an address of the fake range that no name has.
fn target_of(dst: SocketAddr, settings: &Settings) -> Option<Target> {
    let (Some(fake), IpAddr::V4(ip)) = (&settings.fake_dns, dst.ip()) else {
        return Some(Target::Addr(dst));
    };
    let fake = fake.lock().unwrap_or_else(|e| e.into_inner());
    if !fake.contains(ip) {
        return Some(Target::Addr(dst));
    }
    fake.name_of(ip)
        .map(|name| Target::Name(name.to_string(), dst.port()))
}

fn wildcard(like: SocketAddr) -> SocketAddr {
    match like {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn a_fake_dns_range_overlapping_the_link_is_refused() {
        let link = cidr("10.66.0.1/24");
        for range in [
            "10.66.0.0/16",
            "10.66.0.0/24",
            "10.66.0.128/25",
            "10.0.0.0/8",
        ] {
            let e = check_fake_dns(cidr(range), link).unwrap_err();
            assert!(
                e.contains("--fake-dns") && e.contains("10.66.0.0/24"),
                "{e}"
            );
        }
        for range in ["198.18.0.0/15", "10.66.1.0/24", "10.67.0.0/16"] {
            assert_eq!(check_fake_dns(cidr(range), link), Ok(()), "{range}");
        }
    }

    #[test]
    fn flow_limits_of_zero_are_refused() {
        assert!(flow_limit("0").is_err());
        assert_eq!(flow_limit("1"), Ok(1));
        assert!(flow_limit("-1").is_err());
    }
}
