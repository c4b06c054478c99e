//! The TUN part's servers, each in its own namespaces and threads: fastpath (offload on and off,
//! io_uring or a write per packet, one or N queues), smoltcp, the kernel over veth, and the ceiling.

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
    /// The link's MTU (TUN's offload moves segments of up to 64 KiB whatever it is).
    pub mtu: usize,
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
                tap: None,
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
                let mut stack =
                    crate::queues::stack_for_queue(&mut link, StackConfig::default(), q, queues)?;
                let iface = stack.add_interface(device, link, Ipv4Cidr::new(SERVER, 24));
                stack
                    .add_ipv6_address(iface, fastpath::Ipv6Cidr::new(SERVER6, 64))
                    .map_err(|e| e.to_string())?;
                serve(stack, &stop, &count, |nap| tun.wait(Some(nap)))
            })?;
        }
        let on = if offload { "offload on" } else { "offload off" };
        self.servers.push(Server {
            mtu: 1500,
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

    /// fastpath on AF_XDP: a veth pair in a new namespace with MTU `mtu` on both ends, the
    /// kernel's end (`fpx0k`, 10.7.0.1/24) without transmit checksum offload, an AF_XDP socket on
    /// fastpath's end (`fpx0`, copy mode; frames of several chunks above 3,822 bytes) and a stack
    /// serving echo, discard and chargen over IPv4; its transmit checksums offloaded through the
    /// socket's metadata when `offload` ([`fastpath::link::XdpConfig::tx_checksum_offload`]).
    pub fn fastpath_xdp(&mut self, mtu: usize, offload: bool) -> Result<(), String> {
        let ns = self.namespace()?;
        Self::ip(
            &ns,
            &[
                "link", "add", "fpx0", "type", "veth", "peer", "name", "fpx0k",
            ],
        )?;
        Self::ip(&ns, &["addr", "add", "10.7.0.1/24", "dev", "fpx0k"])?;
        let mtu_arg = mtu.to_string();
        for dev in ["fpx0", "fpx0k"] {
            Self::ip(&ns, &["link", "set", "dev", dev, "mtu", &mtu_arg, "up"])?;
        }
        fastpath::link::disable_tx_checksum(Some(&ns), "fpx0k").map_err(|e| e.to_string())?;
        let mut link = fastpath::link::XdpLink::open(&fastpath::link::XdpConfig {
            ifname: "fpx0".into(),
            netns: Some(ns.clone()),
            tx_checksum_offload: offload,
            ..fastpath::link::XdpConfig::default()
        })
        .map_err(|e| format!("AF_XDP on fpx0 in {ns}: {e}"))?;
        let received = Arc::new(AtomicU64::new(0));
        let (stop, count) = (self.stop.clone(), received.clone());
        let handle = link.handle();
        self.spawn("fp-xdp".into(), move || -> Result<(), String> {
            let mut stack = Stack::new(StackConfig::default());
            let depot = fastpath::buf::BufferDepot::new();
            link.set_buffer_depot(depot.clone());
            stack.set_buffer_depot(depot);
            stack.add_interface("fpx0", link, Ipv4Cidr::new(SERVER, 24));
            serve(stack, &stop, &count, |nap| handle.wait(Some(nap)))
        })?;
        self.servers.push(Server {
            mtu,
            stack: "fastpath",
            config: match (mtu, offload) {
                (1500, true) => "AF_XDP".into(),
                (_, true) => format!("AF_XDP, MTU {mtu}"),
                (_, false) => format!("AF_XDP, MTU {mtu}, checksums in software"),
            },
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
            mtu: 1500,
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
                "link", "add", "fpv0", "type", "veth", "peer", "name", "fpv1", "netns", &server_ns,
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
            mtu: 1500,
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
            let mut iface = Interface::new(Config::new(HardwareAddress::Ip), &mut device, now());
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
                    let delay = iface
                        .poll_delay(now(), &sockets)
                        .map_or(Duration::from_millis(20), |d| {
                            Duration::from_micros(d.total_micros()).min(Duration::from_millis(20))
                        });
                    let _ = smoltcp::phy::wait(fd, Some(delay.into()));
                }
            }
            Ok(())
        })?;
        ready
            .recv()
            .map_err(|_| "the smoltcp thread died".to_string())??;
        self.servers.push(Server {
            mtu: 1500,
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

/// A server stack's loop: echo (7), discard (9) and chargen (19) until `stop`, the bytes discarded
/// added to `count`; `wait` sleeps on the link until a packet comes or the time given passes.
fn serve(
    mut stack: Stack,
    stop: &AtomicBool,
    count: &AtomicU64,
    wait: impl Fn(Duration) -> std::io::Result<bool>,
) -> Result<(), String> {
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
            let nap = stack
                .next_deadline()
                .map_or(Duration::from_millis(20), |d| {
                    d.saturating_since(Instant::now())
                        .min(Duration::from_millis(20))
                });
            wait(nap).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
