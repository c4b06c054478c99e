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
    let (ea, eb) = PairEnd::pair(caps, 1 << 16, Impairments::default());
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
    let deadline = WallClock::now() + Duration::from_secs(60);
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
    while got < bytes {
        // The application fills the send buffer in place and takes received data in place.
        while sent < bytes {
            let max = (bytes - sent).min(1 << 20) as usize;
            match a.tcp(c).write_with(max, |buf| buf.len()) {
                Ok(0) | Err(_) => break,
                Ok(n) => sent += n as u64,
            }
        }
        a.poll(Instant::now());
        b.poll(Instant::now());
        while let Ok(n) = b.tcp(s).read_with(|d| d.len()) {
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        if WallClock::now() > deadline {
            return Err(format!("pair transfer stalled at {got} of {bytes} bytes"));
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The TUN part's servers, each in its own namespaces and threads.
#[cfg(target_os = "linux")]
mod testbed {
    use super::*;
    use crate::netns::{self, Namespace};
    use crate::tcp_services::TcpServices;
    use fastpath::link::{TunConfig, TunLink};

    pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
    /// The server's IPv6 address, where it has one (the client is `fd00:7::1`).
    pub const SERVER6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0xfd00, 7, 0, 0, 0, 0, 0, 2);

    /// A server and the namespace its client must run in.
    pub struct Server {
        pub stack: &'static str,
        pub config: String,
        /// TUN queues, a stack on each (1 for every other server).
        pub queues: usize,
        /// It serves chargen on port 19.
        pub chargen: bool,
        pub client_ns: String,
        /// Bytes the discard service received.
        pub received: Arc<AtomicU64>,
        pub echo: bool,
        /// It serves over IPv6 too (at [`SERVER6`]).
        pub ipv6: bool,
        /// Only request/response runs against it.
        pub rr_only: bool,
    }

    /// Namespaces and threads; on drop the threads stop, then the namespaces go.
    pub struct Testbed {
        pub stop: Arc<AtomicBool>,
        pub servers: Vec<Server>,
        threads: Vec<JoinHandle<Result<(), String>>>,
        namespaces: Vec<Namespace>,
    }

    impl Drop for Testbed {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            for t in self.threads.drain(..) {
                if let Ok(Err(e)) = t.join() {
                    eprintln!("fastpath: bench tcp: server: {e}");
                }
            }
        }
    }

    impl Testbed {
        pub fn new() -> Testbed {
            Testbed {
                stop: Arc::new(AtomicBool::new(false)),
                servers: Vec::new(),
                threads: Vec::new(),
                namespaces: Vec::new(),
            }
        }

        fn namespace(&mut self) -> Result<String, String> {
            let name = format!("fp-btcp-{}-{}", std::process::id(), self.namespaces.len());
            self.namespaces.push(Namespace::ensure(&name)?);
            Ok(name)
        }

        /// Starts a server thread named `name` (shown by `top -H` and in `perf` profiles).
        fn spawn(
            &mut self,
            name: String,
            f: impl FnOnce() -> Result<(), String> + Send + 'static,
        ) -> Result<(), String> {
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| format!("a server thread: {e}"))?;
            self.threads.push(thread);
            Ok(())
        }

        fn ip(ns: &str, args: &[&str]) -> Result<(), String> {
            let mut all = vec!["-n", ns];
            all.extend_from_slice(args);
            netns::run_ip(&all)
        }

        /// A new namespace holding a TUN interface `name` with `queues` queues (10.7.0.1/24 on the
        /// kernel's side, and fd00:7::1/64 when `ipv6`), up, its writes through io_uring
        /// when `io_uring`; the namespace and the queues.
        fn tun(
            &mut self,
            name: &str,
            offload: bool,
            queues: usize,
            ipv6: bool,
            io_uring: bool,
        ) -> Result<(String, Vec<TunLink>), String> {
            let ns = self.namespace()?;
            let links = TunLink::open_queues(
                &TunConfig {
                    name: name.into(),
                    netns: Some(ns.clone()),
                    mtu: 1500,
                    offload,
                    uso: false,
                    io_uring,
                },
                queues,
                &StackConfig::default().ephemeral_ports,
            )
            .map_err(|e| format!("TUN interface in {ns}: {e}"))?;
            Self::ip(&ns, &["addr", "add", "10.7.0.1/24", "dev", name])?;
            if ipv6 {
                Self::ip(
                    &ns,
                    &["-6", "addr", "add", "fd00:7::1/64", "dev", name, "nodad"],
                )?;
            }
            Self::ip(&ns, &["link", "set", "dev", name, "up"])?;
            Ok((ns, links))
        }

        /// fastpath serving echo (7) and discard (9) on a TUN interface, its writes through
        /// io_uring as by default ([`TunConfig::io_uring`]).
        pub fn fastpath(&mut self, offload: bool) -> Result<(), String> {
            self.fastpath_queues(offload, 1)
        }

        /// fastpath on a TUN interface with `queues` queues: a stack per queue, each on a thread of
        /// its own, every one serving echo and discard.
        pub fn fastpath_queues(&mut self, offload: bool, queues: usize) -> Result<(), String> {
            self.fastpath_server(offload, queues, true)
        }

        /// fastpath with a `write` per packet on its TUN link, as without io_uring.
        pub fn fastpath_plain(&mut self, offload: bool) -> Result<(), String> {
            self.fastpath_server(offload, 1, false)
        }

        fn fastpath_server(
            &mut self,
            offload: bool,
            queues: usize,
            io_uring: bool,
        ) -> Result<(), String> {
            let device = if io_uring { "fpt0" } else { "fpw0" };
            let (ns, links) = self.tun(device, offload, queues, true, io_uring)?;
            let received = Arc::new(AtomicU64::new(0));
            for (q, mut link) in links.into_iter().enumerate() {
                let (stop, count) = (self.stop.clone(), received.clone());
                let tun = link.handle();
                let name = format!(
                    "fp-{}-{}{q}",
                    if offload { "on" } else { "off" },
                    if io_uring { "q" } else { "plain" }
                );
                self.spawn(name, move || -> Result<(), String> {
                    let mut stack = crate::queues::stack_for_queue(
                        &mut link,
                        StackConfig::default(),
                        q,
                        queues,
                    )?;
                    let iface = stack.add_interface(device, link, Ipv4Cidr::new(SERVER, 24));
                    stack
                        .add_ipv6_address(iface, fastpath::Ipv6Cidr::new(SERVER6, 64))
                        .map_err(|e| e.to_string())?;
                    let mut services = TcpServices::listen_dual(&mut stack, 7, 9, 19)?;
                    let mut counted = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let mut work = stack.poll(Instant::now());
                        work += services.run(&mut stack);
                        stack.flush();
                        // Once per pass that discarded something: the stacks share this counter.
                        let discarded = services.totals.discarded;
                        if discarded > counted {
                            count.fetch_add(discarded - counted, Ordering::Relaxed);
                            counted = discarded;
                        }
                        if work == 0 {
                            let nap =
                                stack
                                    .next_deadline()
                                    .map_or(Duration::from_millis(20), |d| {
                                        d.saturating_since(Instant::now())
                                            .min(Duration::from_millis(20))
                                    });
                            tun.wait(Some(nap)).map_err(|e| e.to_string())?;
                        }
                    }
                    Ok(())
                })?;
            }
            let on = if offload { "offload on" } else { "offload off" };
            self.servers.push(Server {
                stack: "fastpath",
                config: if queues > 1 {
                    format!("{on}, {queues} queues")
                } else if io_uring {
                    on.to_string()
                } else {
                    format!("{on}, plain writes")
                },
                queues,
                chargen: true,
                client_ns: ns,
                received,
                echo: true,
                ipv6: true,
                rr_only: false,
            });
            Ok(())
        }

        /// The ceiling ([`super::super::ceiling`]): a stateless responder on a TUN interface with
        /// offload and `queues` queues, a thread each, serving echo and discard over IPv4; its
        /// writes through io_uring when `io_uring`.
        pub fn ceiling(&mut self, queues: usize, io_uring: bool) -> Result<(), String> {
            let device = if io_uring { "fpu0" } else { "fpc0" };
            let (ns, links) = self.tun(device, true, queues, false, io_uring)?;
            let received = Arc::new(AtomicU64::new(0));
            for (q, link) in links.into_iter().enumerate() {
                let (stop, count) = (self.stop.clone(), received.clone());
                let name = if io_uring {
                    format!("ceiling-uring{q}")
                } else {
                    format!("ceiling-q{q}")
                };
                self.spawn(name, move || {
                    super::super::ceiling::serve(link, &stop, &count)
                })?;
            }
            self.servers.push(Server {
                stack: "ceiling",
                config: match (queues > 1, io_uring) {
                    (true, false) => format!("stateless, {queues} queues"),
                    (true, true) => format!("stateless, io_uring, {queues} queues"),
                    (false, false) => "stateless".to_string(),
                    (false, true) => "stateless, io_uring".to_string(),
                },
                queues,
                chargen: false,
                client_ns: ns,
                received,
                echo: true,
                ipv6: false,
                // With io_uring: request/response only.
                rr_only: io_uring,
            });
            Ok(())
        }

        /// The kernel serving discard and echo over a veth pair from the client's namespace.
        pub fn linux(&mut self) -> Result<(), String> {
            let client_ns = self.namespace()?;
            let server_ns = self.namespace()?;
            Self::ip(
                &client_ns,
                &[
                    "link", "add", "fpv0", "type", "veth", "peer", "name", "fpv1", "netns",
                    &server_ns,
                ],
            )?;
            Self::ip(&client_ns, &["addr", "add", "10.7.0.1/24", "dev", "fpv0"])?;
            Self::ip(&server_ns, &["addr", "add", "10.7.0.2/24", "dev", "fpv1"])?;
            Self::ip(
                &client_ns,
                &["-6", "addr", "add", "fd00:7::1/64", "dev", "fpv0", "nodad"],
            )?;
            Self::ip(
                &server_ns,
                &["-6", "addr", "add", "fd00:7::2/64", "dev", "fpv1", "nodad"],
            )?;
            Self::ip(&client_ns, &["link", "set", "dev", "fpv0", "up"])?;
            Self::ip(&server_ns, &["link", "set", "dev", "fpv1", "up"])?;
            let received = Arc::new(AtomicU64::new(0));
            let addrs: [SocketAddr; 4] = [
                SocketAddrV4::new(SERVER, 9).into(),
                SocketAddrV4::new(SERVER, 7).into(),
                SocketAddrV4::new(SERVER, 19).into(),
                (SERVER6, 9).into(),
            ];
            for at in addrs {
                let port = at.port();
                let listener = netns::within(&server_ns, move || TcpListener::bind(at))?
                    .map_err(|e| format!("kernel listen: {e}"))?;
                listener.set_nonblocking(true).map_err(|e| e.to_string())?;
                let (stop, count) = (self.stop.clone(), received.clone());
                self.spawn(format!("linux-{port}"), move || -> Result<(), String> {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok((mut s, _)) = listener.accept() else {
                            std::thread::sleep(Duration::from_millis(2));
                            continue;
                        };
                        let (stop, count) = (stop.clone(), count.clone());
                        std::thread::spawn(move || {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                            let mut buf = vec![0u8; 1 << 18];
                            // Chargen: send until the client goes away.
                            while port == 19 && !stop.load(Ordering::Relaxed) {
                                if s.write_all(&buf).is_err() {
                                    return;
                                }
                            }
                            while !stop.load(Ordering::Relaxed) {
                                match s.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(n) if port == 7 => {
                                        if s.write_all(&buf[..n]).is_err() {
                                            break;
                                        }
                                    }
                                    Ok(n) => {
                                        count.fetch_add(n as u64, Ordering::Relaxed);
                                    }
                                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                                    Err(_) => break,
                                }
                            }
                        });
                    }
                    Ok(())
                })?;
            }
            self.servers.push(Server {
                stack: "linux",
                config: "veth".into(),
                queues: 1,
                chargen: true,
                client_ns,
                received,
                echo: true,
                ipv6: true,
                rr_only: false,
            });
            Ok(())
        }

        /// smoltcp 0.14 serving discard on a TUN interface (no virtio header: no offloads).
        pub fn smoltcp(&mut self) -> Result<(), String> {
            use smoltcp::iface::{Config, Interface, SocketSet};
            use smoltcp::phy::{Medium, TunTapInterface};
            use smoltcp::socket::tcp;
            use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
            use std::os::fd::AsRawFd;

            let ns = self.namespace()?;
            let received = Arc::new(AtomicU64::new(0));
            let (stop, count) = (self.stop.clone(), received.clone());
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let ns_name = ns.clone();
            self.spawn("smoltcp".into(), move || -> Result<(), String> {
                // smoltcp's device is not `Send`: this thread makes it inside the namespace and keeps it.
                let setup = || -> Result<TunTapInterface, String> {
                    netns::enter(&netns::path(&ns_name))?;
                    let device = TunTapInterface::new("fps0", Medium::Ip)
                        .map_err(|e| format!("smoltcp TUN interface: {e}"))?;
                    Self::ip(&ns_name, &["link", "set", "dev", "fps0", "mtu", "1500"])?;
                    Self::ip(&ns_name, &["addr", "add", "10.7.0.1/24", "dev", "fps0"])?;
                    Self::ip(&ns_name, &["link", "set", "dev", "fps0", "up"])?;
                    Ok(device)
                };
                let mut device = match setup() {
                    Ok(d) => {
                        let _ = ready_tx.send(Ok(()));
                        d
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let now = || smoltcp::time::Instant::now();
                let mut iface =
                    Interface::new(Config::new(HardwareAddress::Ip), &mut device, now());
                iface.update_ip_addrs(|a| {
                    let _ = a.push(IpCidr::new(IpAddress::v4(10, 7, 0, 2), 24));
                });
                let mut sockets = SocketSet::new(Vec::new());
                let new_socket = |port: u16, rx: usize, tx: usize| {
                    let mut s = tcp::Socket::new(
                        tcp::SocketBuffer::new(vec![0; rx]),
                        tcp::SocketBuffer::new(vec![0; tx]),
                    );
                    let _ = s.listen(port);
                    s
                };
                // smoltcp listens with one socket per connection: a discard socket, and enough echo
                // sockets for the 100-connection request/response run.
                let discard = || new_socket(9, 1 << 20, 1 << 16);
                let echo = || new_socket(7, 1 << 14, 1 << 14);
                let mut echoes: Vec<_> = (0..ECHO_SOCKETS).map(|_| sockets.add(echo())).collect();
                let mut handle = sockets.add(discard());
                // Chargen: sends what its send buffer holds (zeros, as the kernel's chargen here
                // does) for as long as the client reads; one connection at a time.
                let chargen = || new_socket(19, 1 << 14, 1 << 20);
                let mut generator = sockets.add(chargen());
                let fd = device.as_raw_fd();
                let mut total = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    iface.poll(now(), &mut device, &mut sockets);
                    let s = sockets.get_mut::<tcp::Socket>(handle);
                    let mut got = 0;
                    while let Ok(n) = s.recv(|b| (b.len(), b.len())) {
                        if n == 0 {
                            break;
                        }
                        got += n;
                    }
                    if !s.is_active() && !s.is_listening() {
                        sockets.remove(handle);
                        handle = sockets.add(discard());
                    } else if s.state() == tcp::State::CloseWait {
                        // The client finished sending: finish too.
                        s.close();
                    }
                    total += got as u64;
                    count.store(total, Ordering::Relaxed);
                    // Echo: take what the send buffer has room for, and send it back.
                    let mut echoed = 0;
                    for h in echoes.iter_mut() {
                        let s = sockets.get_mut::<tcp::Socket>(*h);
                        let room = s.send_capacity() - s.send_queue();
                        let mut tmp = [0u8; 4096];
                        let want = room.min(tmp.len());
                        if let Ok(n) = s.recv_slice(&mut tmp[..want]) {
                            if n > 0 {
                                let _ = s.send_slice(&tmp[..n]);
                                echoed += n;
                            }
                        }
                        if !s.is_active() && !s.is_listening() {
                            sockets.remove(*h);
                            *h = sockets.add(echo());
                        } else if s.state() == tcp::State::CloseWait && s.send_queue() == 0 {
                            s.close();
                        }
                    }
                    let s = sockets.get_mut::<tcp::Socket>(generator);
                    let mut generated = 0;
                    while s.may_send() {
                        match s.send(|b| (b.len(), b.len())) {
                            Ok(n) if n > 0 => generated += n,
                            _ => break,
                        }
                    }
                    let _ = s.recv(|b| (b.len(), ()));
                    if !s.is_active() && !s.is_listening() {
                        sockets.remove(generator);
                        generator = sockets.add(chargen());
                    } else if s.state() == tcp::State::CloseWait {
                        s.close();
                    }
                    if got == 0 && echoed == 0 && generated == 0 {
                        let delay = iface.poll_delay(now(), &sockets).map_or(
                            Duration::from_millis(20),
                            |d| {
                                Duration::from_micros(d.total_micros())
                                    .min(Duration::from_millis(20))
                            },
                        );
                        let _ = smoltcp::phy::wait(fd, Some(delay.into()));
                    }
                }
                Ok(())
            })?;
            ready
                .recv()
                .map_err(|_| "the smoltcp thread died".to_string())??;
            self.servers.push(Server {
                stack: "smoltcp",
                config: "tun".into(),
                queues: 1,
                chargen: true,
                client_ns: ns,
                received,
                echo: true,
                ipv6: false,
                rr_only: false,
            });
            Ok(())
        }
    }

    /// The kernel client sends to discard for `secs`, over IPv6 when `ipv6`; returns payload Gbit/s
    /// as received.
    pub fn bulk(server: &Server, secs: f64, ipv6: bool) -> Result<f64, String> {
        let before = server.received.load(Ordering::Relaxed);
        let to: SocketAddr = if ipv6 {
            (SERVER6, 9).into()
        } else {
            SocketAddrV4::new(SERVER, 9).into()
        };
        let mut s = netns::within(&server.client_ns, move || {
            TcpStream::connect_timeout(&to, Duration::from_secs(5))
        })?
        .map_err(|e| format!("{} {}: connect: {e}", server.stack, server.config))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let chunk = vec![0x5au8; 1 << 18];
        let start = WallClock::now();
        let mut sent = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            s.write_all(&chunk)
                .map_err(|e| format!("{} {}: write: {e}", server.stack, server.config))?;
            sent += chunk.len() as u64;
        }
        let _ = s.shutdown(Shutdown::Write);
        arrived(server, before, sent, start)
    }

    /// Waits (up to 20 s) until the discard server has received the `sent` bytes sent since `start`
    /// (its count was `before` then); returns payload Gbit/s over the whole time.
    fn arrived(server: &Server, before: u64, sent: u64, start: WallClock) -> Result<f64, String> {
        let deadline = WallClock::now() + Duration::from_secs(20);
        while server.received.load(Ordering::Relaxed) - before < sent {
            if WallClock::now() > deadline {
                return Err(format!(
                    "{} {}: {} of {sent} bytes arrived",
                    server.stack,
                    server.config,
                    server.received.load(Ordering::Relaxed) - before
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(sent as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9)
    }

    /// `streams` kernel connections send to discard at once for `secs`, a thread each; returns payload
    /// Gbit/s as received, all streams together.
    pub fn bulk_streams(server: &Server, secs: f64, streams: usize) -> Result<f64, String> {
        let before = server.received.load(Ordering::Relaxed);
        let to: SocketAddr = SocketAddrV4::new(SERVER, 9).into();
        let conns = netns::within(&server.client_ns, move || {
            (0..streams)
                .map(|_| TcpStream::connect_timeout(&to, Duration::from_secs(5)))
                .collect::<Result<Vec<_>, _>>()
        })?
        .map_err(|e| format!("{} {}: connect: {e}", server.stack, server.config))?;
        let start = WallClock::now();
        let sent: u64 = std::thread::scope(|scope| {
            let threads: Vec<_> = conns
                .into_iter()
                .map(|mut s| {
                    scope.spawn(move || -> Result<u64, String> {
                        s.set_write_timeout(Some(Duration::from_secs(10)))
                            .map_err(|e| e.to_string())?;
                        let chunk = vec![0x5au8; 1 << 18];
                        let mut sent = 0u64;
                        while start.elapsed().as_secs_f64() < secs {
                            s.write_all(&chunk).map_err(|e| format!("write: {e}"))?;
                            sent += chunk.len() as u64;
                        }
                        let _ = s.shutdown(Shutdown::Write);
                        Ok(sent)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().map_err(|_| "a sender panicked".to_string())?)
                .sum::<Result<u64, String>>()
        })
        .map_err(|e| format!("{} {}: {e}", server.stack, server.config))?;
        arrived(server, before, sent, start)
    }

    /// The kernel client reads from the server's chargen (port 19) for `secs`: the server sends bulk.
    /// Returns payload Gbit/s as the client read it.
    pub fn pull(server: &Server, secs: f64) -> Result<f64, String> {
        let to: SocketAddr = SocketAddrV4::new(SERVER, 19).into();
        let mut s = netns::within(&server.client_ns, move || {
            TcpStream::connect_timeout(&to, Duration::from_secs(5))
        })?
        .map_err(|e| format!("{} {}: chargen connect: {e}", server.stack, server.config))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 1 << 18];
        let start = WallClock::now();
        let mut got = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            match s.read(&mut buf) {
                Ok(0) => return Err(format!("{} {}: chargen ended", server.stack, server.config)),
                Ok(n) => got += n as u64,
                Err(e) => return Err(format!("{} {}: read: {e}", server.stack, server.config)),
            }
        }
        let rate = got as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9;
        let _ = s.shutdown(Shutdown::Both);
        Ok(rate)
    }

    /// A measurement and where the CPU went while it ran.
    #[derive(Clone, Copy, Debug)]
    pub struct Accounted {
        /// What the measurement returned (Gbit/s).
        pub value: f64,
        /// Cores this thread (the kernel client) used, its system calls included.
        pub client: f64,
        /// Cores the rest of the process (the server under test) used in user space and in the
        /// kernel.
        pub server_user: f64,
        pub server_system: f64,
    }

    /// Runs `measure` (a client on this thread against one server) and accounts for the CPU.
    pub fn accounted(measure: impl FnOnce() -> Result<f64, String>) -> Result<Accounted, String> {
        let (thread_before, process_before) = (common::thread_cpu_ns(), common::process_cpu_ns());
        let start = WallClock::now();
        let value = measure()?;
        let elapsed = start.elapsed().as_secs_f64();
        let (cu, cs) = common::thread_cpu_ns();
        let (pu, ps) = common::process_cpu_ns();
        let cores = |ns: u64| ns as f64 / 1e9 / elapsed;
        Ok(Accounted {
            value,
            client: cores((cu + cs).saturating_sub(thread_before.0 + thread_before.1)),
            server_user: cores(pu.saturating_sub(process_before.0 + cu - thread_before.0)),
            server_system: cores(ps.saturating_sub(process_before.1 + cs - thread_before.1)),
        })
    }

    /// What one request/response run measured.
    #[derive(Clone, Copy, Debug)]
    pub struct RrRun {
        /// Transactions per second.
        pub rate: f64,
        /// Cores the client's thread used: its system calls, and the kernel's TCP work they run.
        pub client: f64,
        /// Cores the rest of the process used (the server under test; the others are idle), in user
        /// space and in the kernel.
        pub server_user: f64,
        pub server_system: f64,
    }

    /// 64-byte transactions over `n` connections to echo for `secs`.
    pub fn rr(server: &Server, n: usize, secs: f64) -> Result<RrRun, String> {
        let mut conns = netns::within(&server.client_ns, move || {
            (0..n)
                .map(|_| {
                    TcpStream::connect_timeout(
                        &SocketAddr::V4(SocketAddrV4::new(SERVER, 7)),
                        Duration::from_secs(5),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })?
        .map_err(|e| format!("{} rr connect: {e}", server.stack))?;
        for c in &conns {
            c.set_nodelay(true).map_err(|e| e.to_string())?;
            c.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(|e| e.to_string())?;
        }
        let msg = [7u8; 64];
        let mut back = [0u8; 64];
        let (client_before, process_before) = (common::thread_cpu_ns(), common::process_cpu_ns());
        let start = WallClock::now();
        let mut done = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            for c in conns.iter_mut() {
                c.write_all(&msg).map_err(|e| e.to_string())?;
            }
            for c in conns.iter_mut() {
                c.read_exact(&mut back)
                    .map_err(|e| format!("{} rr read: {e}", server.stack))?;
            }
            done += n as u64;
        }
        let elapsed = start.elapsed().as_secs_f64();
        let (cu, cs) = common::thread_cpu_ns();
        let (pu, ps) = common::process_cpu_ns();
        let cores = |ns: u64| ns as f64 / 1e9 / elapsed;
        let client = cores((cu + cs).saturating_sub(client_before.0 + client_before.1));
        let server_user = cores(pu.saturating_sub(process_before.0 + cu - client_before.0));
        let server_system = cores(ps.saturating_sub(process_before.1 + cs - client_before.1));
        for c in &conns {
            let _ = c.shutdown(Shutdown::Both);
        }
        Ok(RrRun {
            rate: done as f64 / elapsed,
            client,
            server_user,
            server_system,
        })
    }
}

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
    if args.rr_only {
        #[cfg(target_os = "linux")]
        return measure_tun(rounds, secs, args.queues, args.streams, true);
        #[cfg(not(target_os = "linux"))]
        return Err("--rr-only measures over a TUN device, which needs Linux".into());
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
    rows.extend(measure_tun(rounds, secs, args.queues, args.streams, false)?);
    #[cfg(not(target_os = "linux"))]
    let _ = secs;
    Ok(rows)
}

#[cfg(target_os = "linux")]
fn measure_tun(
    rounds: usize,
    secs: f64,
    queues: usize,
    streams: usize,
    rr_only: bool,
) -> Result<Vec<TcpRow>, String> {
    use testbed::*;
    crate::netns::check_privileges("bench tcp's TUN part")
        .map_err(|e| format!("{e} (or pass --pair-only for the in-memory part alone)"))?;
    let mut bed = Testbed::new();
    bed.fastpath(true)?;
    bed.fastpath(false)?;
    bed.smoltcp()?;
    bed.linux()?;
    bed.ceiling(1, false)?;
    bed.fastpath_plain(true)?;
    bed.fastpath_plain(false)?;
    bed.ceiling(1, true)?;
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
            mtu: 1500,
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
            mtu: 1500,
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
                mtu: 1500,
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

/// A one-connection bulk row at MTU 1500 from `samples` (medians), against `baseline` Gbit/s.
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
        mtu: 1500,
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
        outln!("a kernel client sending bulk to a discard server at MTU 1500");
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
        outln!("the server sending bulk (chargen) to a kernel client reading at MTU 1500");
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
