//! [`Tunnel`]: the configuration, starting the queues' threads, stopping them, and the statistics.

use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::thread::JoinHandle;

use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Ipv6Cidr};

use crate::queue::{LinkWrapper, Published, Queue};
use crate::settings::*;
use crate::stats::Stats;

/// How the tunnel runs. [`Config::new`] gives the defaults `fastpath tunnel` has.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// fastpath's own address on the TUN link, with the link's prefix (the applications' side has
    /// another address of it): it answers ping there. Default 10.66.0.2/24.
    pub addr: Ipv4Cidr,
    /// fastpath's own IPv6 address on the link, with its prefix, to relay IPv6 too (the
    /// applications' routes decide what reaches the interface; without an address, IPv6 is still
    /// intercepted, but the stack has no IPv6 address to answer ping from).
    pub addr6: Option<Ipv6Cidr>,
    /// The interface's MTU, for a descriptor given to [`Tunnel::start`] (the tunnel neither sets nor
    /// reads it): packets larger are dropped. Default 1500.
    pub mtu: usize,
    /// Checksum and segmentation offload on a descriptor opened with `IFF_VNET_HDR` (none is possible
    /// without it). Default on.
    pub offload: bool,
    /// Writes to the TUN descriptor through io_uring where the kernel allows it. Default on.
    pub io_uring: bool,
    /// Where each destination goes: directly (the default), through SOCKS5 or HTTP proxies.
    pub routes: Routes,
    /// Answer DNS queries for IPv4 addresses with addresses of this range, each standing for its
    /// name (see [`crate::fake_dns`]); must not overlap the link's prefix.
    pub fake_dns: Option<Ipv4Cidr>,
    /// Bind every outgoing kernel socket to this interface (`SO_BINDTODEVICE`).
    pub bind_interface: Option<String>,
    /// How long a destination (or proxy) has to accept a TCP connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Silence after which a UDP flow expires. Default 60 s.
    pub udp_idle: Duration,
    /// TCP connections relayed at once, at most (shared out among queues). Default 16,384.
    pub max_tcp_flows: usize,
    /// UDP flows relayed at once, at most (shared out among queues). Default 1,024.
    pub max_udp_flows: usize,
    /// Called with every socket the tunnel opens towards the network (to destinations and proxies),
    /// before it connects, on the queue's thread; an error fails that connection or flow. A VPN app
    /// on Android calls `VpnService.protect` here, so that the tunnel's own traffic does not loop
    /// back into the VPN. Default none.
    pub protect: Option<crate::Protect>,
}

impl Config {
    /// The defaults, with fastpath at `addr` on the link.
    pub fn new(addr: Ipv4Cidr) -> Config {
        Config {
            addr,
            addr6: None,
            mtu: 1500,
            offload: true,
            io_uring: true,
            routes: Routes::default(),
            fake_dns: None,
            bind_interface: None,
            connect_timeout: Duration::from_secs(10),
            udp_idle: Duration::from_secs(60),
            max_tcp_flows: 16_384,
            max_udp_flows: 1024,
            protect: None,
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config::new(Ipv4Cidr::new(Ipv4Addr::new(10, 66, 0, 2), 24))
    }
}

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The configuration cannot work (checked before anything starts).
    Config,
    /// The descriptor is not one the tunnel can use (not TUN, no `IFF_NO_PI`, closed).
    Descriptor,
    /// A queue failed to start, or failed while running.
    Run,
}

/// Why the tunnel did not start, or stopped with an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Stops a [`Tunnel`] from any thread; cheap to clone. Stopping twice is harmless.
#[derive(Clone, Debug)]
pub struct StopHandle(Arc<tokio::sync::watch::Sender<bool>>);

impl StopHandle {
    /// Tells every queue to stop; returns at once ([`Tunnel::join`] waits for them).
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// Whether [`stop`](StopHandle::stop) was called.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }
}

/// A running tunnel: its queues' threads, their counters, the way to stop them. Dropping it stops
/// it and waits for the queues.
pub struct Tunnel {
    stop: StopHandle,
    threads: Vec<JoinHandle<Result<(), String>>>,
    published: Vec<Arc<Published>>,
    fake_dns: Option<Arc<Mutex<FakeDns>>>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("queues", &self.published.len())
            .field("stopped", &self.stop.is_stopped())
            .finish_non_exhaustive()
    }
}

impl Tunnel {
    /// Starts the tunnel on `fd`, an open TUN descriptor attached to its interface (see
    /// `fastpath::link::TunLink::from_fd` for what it must have been opened with: `IFF_TUN |
    /// IFF_NO_PI`, and `IFF_VNET_HDR` for offloads), which the tunnel owns from now on (closed when it
    /// stops, or now if it fails). Returns once the stack is ready; the interface's addresses, routes
    /// and state are the caller's (the applications' side of the link, and routes into it). The
    /// queues' threads are started from the calling thread, so the kernel sockets the tunnel opens
    /// towards the network are in its network namespace.
    pub fn start(fd: OwnedFd, config: Config) -> Result<Tunnel, Error> {
        let tun = TunConfig {
            mtu: config.mtu,
            offload: config.offload,
            io_uring: config.io_uring,
            ..TunConfig::default()
        };
        let link = TunLink::from_fd(fd, &tun)
            .map_err(|e| Error::new(ErrorKind::Descriptor, e.to_string()))?;
        Tunnel::start_links(vec![link], config, None)
    }

    /// Starts the tunnel on the links of one interface: one, or one per queue of a multi-queue
    /// interface (`TunLink::open_queues`, which shares the ephemeral ports the way
    /// [`stack_for_queue`](crate::stack_for_queue) takes them), each wrapped by `wrap` if given.
    /// [`Config::mtu`], `offload` and `io_uring` are the links' own here. Returns once every queue's
    /// stack is ready, or stops them all if one fails.
    pub fn start_links(
        links: Vec<TunLink>,
        config: Config,
        wrap: Option<LinkWrapper>,
    ) -> Result<Tunnel, Error> {
        let queues = links.len();
        let invalid = |m: String| Error::new(ErrorKind::Config, m);
        if config.max_tcp_flows == 0 || config.max_udp_flows == 0 {
            return Err(invalid("the flow limits must be at least 1".into()));
        }
        if config.connect_timeout.is_zero() {
            return Err(invalid("the connect timeout must be above 0".into()));
        }
        if config.routes.upstreams().any(Upstream::needs_password) {
            return Err(invalid("a proxy's user name has no password".into()));
        }
        let fake_dns = match config.fake_dns {
            Some(range) => {
                check_fake_dns(range, config.addr).map_err(invalid)?;
                let mut table = FakeDns::new(range.addr, range.prefix_len).map_err(invalid)?;
                table.reserve(config.addr.addr).map_err(invalid)?;
                Some(Arc::new(Mutex::new(table)))
            }
            None => None,
        };
        if queues == 0 {
            return Err(invalid("no TUN link to run on".into()));
        }
        let settings = Settings {
            routes: config.routes,
            bind_interface: config.bind_interface,
            connect_timeout: config.connect_timeout,
            udp_idle: config.udp_idle.max(Duration::from_millis(1)),
            max_udp_flows: config.max_udp_flows.div_ceil(queues),
            max_tcp_flows: config.max_tcp_flows.div_ceil(queues),
            fake_dns: fake_dns.clone(),
            protect: config.protect,
        };
        let queue = Queue {
            dev: links[0].name().to_string(),
            cidr: config.addr,
            v6: config.addr6,
            settings,
            wrap,
        };
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut tunnel = Tunnel {
            stop: StopHandle(Arc::new(stop_tx)),
            threads: Vec::new(),
            published: Vec::new(),
            fake_dns,
        };
        for (q, link) in links.into_iter().enumerate() {
            let (queue, ready, stop) = (queue.clone(), ready_tx.clone(), stop_rx.clone());
            let published = Arc::new(Published::default());
            tunnel.published.push(published.clone());
            let thread = std::thread::Builder::new()
                .name(format!("tunnel-q{q}"))
                .spawn(move || queue.run(link, (q, queues), stop, ready, published))
                .map_err(|e| {
                    Error::new(ErrorKind::Run, format!("starting queue {q}'s thread: {e}"))
                });
            match thread {
                Ok(t) => tunnel.threads.push(t),
                Err(e) => {
                    tunnel.stop();
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        // Every queue says whether it started; a thread that ended without a word panicked.
        let mut started = Ok(());
        for _ in 0..queues {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => started = Err(e),
                Err(_) => started = Err("a queue's thread ended before it started".to_string()),
            }
            if started.is_err() {
                break;
            }
        }
        if let Err(e) = started {
            tunnel.stop();
            let _ = tunnel.join_threads();
            return Err(Error::new(ErrorKind::Run, e));
        }
        Ok(tunnel)
    }

    /// A handle that stops the tunnel from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Tells the queues to stop; returns at once.
    pub fn stop(&self) {
        self.stop.stop();
    }

    /// True once every queue's thread has ended (after a stop, or a failure).
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }

    /// The counters now (see [`Stats`] for how current each is).
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for p in &self.published {
            let totals = p.tally.totals();
            s.totals += totals;
            s.queues.push(totals);
            let (counters, connections) = *p.stack.lock().unwrap_or_else(|e| e.into_inner());
            s.drops += counters.drops.total();
            s.counters.push(counters);
            s.connections += connections;
            if let Some(tun) = &*p.tun.lock().unwrap_or_else(|e| e.into_inner()) {
                s.tun.add(&tun.stats());
            }
        }
        if let Some(fake) = &self.fake_dns {
            s.names = fake.lock().unwrap_or_else(|e| e.into_inner()).len();
        }
        s
    }

    /// Stops the tunnel (if it was not yet), waits for every queue, and returns the final counters,
    /// or the first queue's error.
    pub fn join(mut self) -> Result<Stats, Error> {
        self.stop();
        self.join_threads()?;
        Ok(self.stats())
    }

    fn join_threads(&mut self) -> Result<(), Error> {
        let mut result = Ok(());
        for (q, t) in self.threads.drain(..).enumerate() {
            let r = match t.join() {
                Ok(r) => r,
                Err(_) => Err(format!("queue {q}'s thread panicked")),
            };
            if let (Err(e), Ok(())) = (r, &result) {
                result = Err(Error::new(ErrorKind::Run, e));
            }
        }
        result
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.stop();
        let _ = self.join_threads();
    }
}

/// Refuses a fake DNS range that overlaps the link's prefix: its pool would hand out the link's own
/// addresses as answers.
fn check_fake_dns(range: Ipv4Cidr, link: Ipv4Cidr) -> Result<(), String> {
    let mask = |len: u8| u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    let m = mask(range.prefix_len) & mask(link.prefix_len);
    if u32::from(range.addr) & m == u32::from(link.addr) & m {
        return Err(format!(
            "the fake DNS range {range} overlaps the link {link}: its addresses would stand for \
             names and the link's own be handed out as answers"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_dns_range_over_the_link_is_refused() {
        let link: Ipv4Cidr = "10.66.0.2/24".parse().unwrap();
        assert!(check_fake_dns("10.66.0.0/16".parse().unwrap(), link).is_err());
        assert!(check_fake_dns("10.66.0.128/25".parse().unwrap(), link).is_err());
        assert!(check_fake_dns("198.18.0.0/15".parse().unwrap(), link).is_ok());
    }

    #[test]
    fn a_descriptor_that_is_not_tun_is_refused_as_such() {
        let (ours, _theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let e = Tunnel::start(OwnedFd::from(ours), Config::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Descriptor, "{e}");
    }

    #[test]
    fn configurations_that_cannot_work_are_refused_before_starting() {
        let (ours, _theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let link = TunLink::from_fd(OwnedFd::from(ours), &TunConfig::default());
        assert!(link.is_err(), "not a TUN descriptor");
        let c = Config {
            fake_dns: Some("10.66.0.0/16".parse().unwrap()),
            ..Config::default()
        };
        let e = Tunnel::start_links(Vec::new(), c, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Config);
    }
}
