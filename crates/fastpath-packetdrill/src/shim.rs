//! The socket layer packetdrill talks to, in safe Rust: one [`Stack`] on an in-memory link whose other
//! end is the test, descriptors mapped to its TCP handles, Linux errno values, and a virtual clock.
//!
//! Every call takes the one lock, so packetdrill's two threads (the main one, which injects and sniffs
//! packets and sleeps, and the one that runs blocking system calls) see one consistent stack. A
//! blocking call waits on a condition variable, which the other thread signals whenever it moved the
//! stack; if nothing happens for a while in real time, the waiting call drives the clock itself to the
//! stack's next timer (or its own timeout), so a blocking call on the main thread still completes.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fastpath::buf::PacketBuf;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::{
    CongestionState, ConnectionInfo, DropReason, Ecn, FastOpenConfig, Instant, Ipv4Cidr, Ipv6Cidr,
    PathMtuDiscovery, Stack, StackConfig, TcpListener, TcpSocketOptions, TcpState, TcpStream,
    TxTimestamp, TxTimestampKind, TxTimestamping, WriteFlags,
};

/// Linux's default `IP_MTU_DISCOVER` for a TCP socket (`ip_no_pmtu_disc` 0).
const IP_PMTUDISC_WANT: i32 = 1;

/// The connection's path MTU discovery for an `IP_MTU_DISCOVER` value: `DONT` (0) none;
/// `WANT`, `DO` and `PROBE` (1 to 3) the usual, as Linux's TCP takes them; `INTERFACE` and `OMIT`
/// (4, 5) don't-fragment with the MSS kept whatever ICMP says (Linux's `ip_sk_accept_pmtu`).
fn path_mtu_discovery(value: i32) -> PathMtuDiscovery {
    match value {
        0 => PathMtuDiscovery::Dont,
        4 | 5 => PathMtuDiscovery::Interface,
        _ => PathMtuDiscovery::Discover,
    }
}

/// An errno value, as Linux numbers it.
pub type Errno = i32;

/// Where the virtual clock starts, in microseconds (what `gettimeofday` reports first).
pub const CLOCK_START_MICROS: u64 = 1_000_000_000;

/// How far `netdev_receive` lets virtual time run, waiting for the stack to send something, before it
/// gives up (packetdrill then reports a parse error for the packet it expected).
pub const RECEIVE_LIMIT_MICROS: u64 = 300_000_000;

/// How long (real time) a blocking call waits for the other thread to move things before it drives
/// the virtual clock itself.
const IDLE_REAL: Duration = Duration::from_millis(20);

/// The shim's addresses: the stack's own, and the prefixes of the remote side it routes to.
#[derive(Clone, Debug)]
pub struct ShimConfig {
    /// The stack's IPv4 address (packetdrill's `--local_ip`).
    pub local4: Ipv4Addr,
    /// The stack's IPv6 address (packetdrill's `--local_ip` in IPv6 runs).
    pub local6: Ipv6Addr,
    /// The remote IPv4 prefix (packetdrill's `--remote_ip` lies in it).
    pub remote4: Ipv4Cidr,
    /// The remote IPv6 prefix.
    pub remote6: Ipv6Cidr,
    /// The link's MTU (1500; packetdrill's IPv6 runs use 1520, which keeps the MSS at 1460).
    pub mtu: usize,
    /// The stack's configuration.
    pub stack: StackConfig,
}

impl Default for ShimConfig {
    fn default() -> ShimConfig {
        ShimConfig {
            // packetdrill's run_all.py addresses: the suite's Fast Open cookies (`TFO_COOKIE`) are
            // the ones Linux makes for them.
            local4: Ipv4Addr::new(192, 168, 0, 1),
            local6: "fd3d:a0b:17d6::1".parse().unwrap_or(Ipv6Addr::LOCALHOST),
            remote4: Ipv4Cidr::new(Ipv4Addr::new(192, 0, 2, 0), 24),
            remote6: "fd3d:fa7b:d17d::/48"
                .parse()
                .unwrap_or_else(|_| Ipv6Cidr::new(Ipv6Addr::UNSPECIFIED, 0)),
            mtu: 1500,
            stack: linux_like(),
        }
    }
}

/// The stack's configuration for the suite: the default, with the receive buffer of the suite's
/// `defaults.sh` (`tcp_rmem` up to 15 MiB), which gives the window scale Linux offers (8).
/// (`delack=0` in `so_flags` turns delayed ACKs off.)
pub fn linux_like() -> StackConfig {
    let mut c = StackConfig::default();
    c.tcp.recv_buffer = 15 * 1024 * 1024;
    c
}

impl ShimConfig {
    /// Reads packetdrill's `--so_flags` string: space- or comma-separated `local4=A`, `local6=A`,
    /// `remote4=P/len`, `remote6=P/len`, `delack=MS` (the delayed-ACK timer in milliseconds, 0 for
    /// none), `mtu=N`. Unknown words are an error.
    pub fn parse_flags(flags: &str) -> Result<ShimConfig, String> {
        let mut c = ShimConfig::default();
        for word in flags.split([' ', ',']).filter(|w| !w.is_empty()) {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| format!("so_flags: `{word}` is not key=value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("so_flags: {key}: {e}");
            match key {
                "local4" => c.local4 = value.parse().map_err(|e| bad(&e))?,
                "local6" => c.local6 = value.parse().map_err(|e| bad(&e))?,
                "remote4" => {
                    let (ip, len) = value.split_once('/').unwrap_or((value, "24"));
                    let ip: Ipv4Addr = ip.parse().map_err(|e| bad(&e))?;
                    let len: u8 = len.parse().map_err(|e| bad(&e))?;
                    c.remote4 = Ipv4Cidr::new(ip, len);
                }
                "remote6" => c.remote6 = value.parse().map_err(|e| bad(&e))?,
                "mtu" => c.mtu = value.parse().map_err(|e| bad(&e))?,
                "delack" => {
                    let ms: u64 = value.parse().map_err(|e| bad(&e))?;
                    c.stack.tcp.delayed_ack = (ms > 0).then(|| Duration::from_millis(ms));
                }
                _ => return Err(format!("so_flags: unknown key `{key}`")),
            }
        }
        Ok(c)
    }
}

#[derive(Debug)]
enum Sock {
    /// `socket()` made it; `bind` may have given it an address.
    Fresh {
        v6: bool,
        bound: Option<SocketAddr>,
    },
    Listener(TcpListener),
    Stream {
        stream: TcpStream,
        /// A connect was started and its outcome not yet reported.
        connecting: bool,
    },
}

impl Fd {
    /// The options set on the socket, as the stack takes them.
    fn options(&self) -> TcpSocketOptions {
        TcpSocketOptions {
            send_buffer: self.sndbuf_set.then_some(self.sndbuf.max(0) as usize),
            recv_buffer: self.rcvbuf_set.then_some((self.rcvbuf / 2).max(0) as usize),
            max_segment: self.maxseg,
            syn_retries: self.syn_count,
            tos: self.tos,
            path_mtu_discovery: path_mtu_discovery(self.pmtudisc),
        }
    }
}

#[derive(Debug)]
struct Fd {
    sock: Sock,
    /// Made `AF_INET6`: IPv4 peers are reported v4-mapped.
    v6: bool,
    nonblock: bool,
    nodelay: bool,
    reuse_addr: bool,
    /// `shutdown(SHUT_RD)` was called: reads that would wait return 0.
    read_shut: bool,
    /// `SO_SNDBUF` and `SO_RCVBUF` as Linux reports them (doubled), and whether the application
    /// set them (then they are applied to the stack's socket).
    sndbuf: i32,
    rcvbuf: i32,
    /// `TCP_INQ`: `recvmsg` reports the bytes left to read.
    inq: bool,
    /// `TCP_FASTOPEN_CONNECT`: `connect` with a cookie in hand returns at once, and the first write
    /// opens the connection with its data in the SYN.
    fast_open_connect: bool,
    /// Such a `connect` made, to this address: the connection waits for the first write.
    deferred_to: Option<SocketAddr>,
    /// `TCP_FASTOPEN`'s queue length, applied when it listens.
    fast_open: Option<usize>,
    sndbuf_set: bool,
    rcvbuf_set: bool,
    /// `TCP_MAXSEG` as set.
    maxseg: Option<u16>,
    /// `TCP_NOTSENT_LOWAT` (0: none) and `TCP_USER_TIMEOUT` (ms, 0: none) as set.
    notsent_lowat: u32,
    user_timeout_ms: u32,
    /// `SO_ZEROCOPY`: `MSG_ZEROCOPY` sends ask for completion notifications.
    zerocopy: bool,
    /// `TCP_CORK` as set.
    cork: bool,
    /// `SO_KEEPALIVE`, and `TCP_KEEPIDLE`, `TCP_KEEPINTVL` (seconds) and `TCP_KEEPCNT` as set (0:
    /// the stack's).
    keepalive: bool,
    keepalive_times: (u32, u32, u32),
    /// `TCP_SYNCNT` as set.
    syn_count: Option<u32>,
    /// `SO_TIMESTAMPING`'s flags as set.
    timestamping: u32,
    /// `SO_MARK` as set: kept and reported; a user-space stack has no routing policy to mark for.
    mark: i32,
    /// `IP_TOS` (or `IPV6_TCLASS`) as set, its ECN bits clear (a stream socket's are TCP's).
    tos: u8,
    /// `IP_MTU_DISCOVER` as set (Linux's `IP_PMTUDISC_*` value).
    pmtudisc: i32,
    /// A real descriptor (on `/dev/null`) whose number is this socket's: packetdrill closes the
    /// sockets still open at the end of a script with the real `close`, so the number must be one.
    placeholder: Option<OwnedFd>,
}

struct State {
    stack: Stack,
    raw: PairEnd,
    /// Virtual time, microseconds.
    now: u64,
    /// Bumped whenever the stack was polled or a descriptor changed: waiters compare it.
    generation: u64,
    fds: BTreeMap<i32, Fd>,
    /// epoll instances, by their descriptor.
    epolls: BTreeMap<i32, Epoll>,
    /// Packets the stack sent, with the virtual time they left.
    out: VecDeque<(Vec<u8>, u64)>,
    /// Calls blocked right now (on another thread).
    waiting: usize,
    /// Bumped by every call that may unblock a waiting one (a packet in, a socket call, the clock).
    input: u64,
    /// `input` as the blocked call last saw it when it tried: the clock waits until it is current.
    tried: u64,
    /// The counters last published for the runner's stand-in for `nstat`.
    nstat_published: [u64; NSTAT.len()],
}

/// The kernel counters (by `nstat`'s names) the suite's scripts read, and the stack's counts that
/// stand for them.
const NSTAT: [(&str, DropReason); 1] = [("TcpExtOutOfWindowIcmps", DropReason::TcpIcmpOutOfWindow)];

thread_local! {
    /// When a call that blocked completed, in virtual time: the next `gettimeofday` on the same
    /// thread reports it, since packetdrill reads the clock just after the call returns, and the
    /// other thread may have run the clock on in between.
    static COMPLETED_AT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The shim: one stack, its descriptors and its clock, shared by packetdrill's threads.
pub struct Shim {
    state: Mutex<State>,
    changed: Condvar,
}

impl std::fmt::Debug for Shim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shim").finish_non_exhaustive()
    }
}

/// Linux's errno for an error of the stack's API.
pub fn errno_of(e: &io::Error) -> Errno {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    use io::ErrorKind::*;
    match e.kind() {
        WouldBlock => libc::EAGAIN,
        ConnectionRefused => libc::ECONNREFUSED,
        ConnectionReset => libc::ECONNRESET,
        ConnectionAborted => libc::ECONNABORTED,
        TimedOut => libc::ETIMEDOUT,
        NotConnected => libc::ENOTCONN,
        BrokenPipe => libc::EPIPE,
        AddrInUse => libc::EADDRINUSE,
        AddrNotAvailable => libc::EADDRNOTAVAIL,
        InvalidInput => libc::EINVAL,
        HostUnreachable => libc::EHOSTUNREACH,
        NetworkUnreachable => libc::ENETUNREACH,
        OutOfMemory => libc::ENOMEM,
        Unsupported => libc::EOPNOTSUPP,
        PermissionDenied => libc::EACCES,
        InvalidData => libc::EPROTO,
        _ => libc::EIO,
    }
}

impl State {
    fn instant(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    /// Polls the stack at the current virtual time and collects what it sent.
    fn step(&mut self) {
        let now = self.instant();
        for _ in 0..64 {
            if self.stack.poll(now) == 0 {
                break;
            }
        }
        self.stack.flush();
        let mut batch = Vec::new();
        self.raw.receive(&mut batch, usize::MAX);
        for p in batch {
            self.out.push_back((p.data().to_vec(), self.now));
        }
        self.generation += 1;
        self.publish_counters();
    }

    /// Writes the counters of [`NSTAT`] to the file `FASTPATH_PD_NSTAT` names, when they changed:
    /// the runner's stand-in for `nstat` reads them there, as `nstat` reads the kernel's, and a
    /// script's `nstat` command runs after the packet before it was taken in.
    fn publish_counters(&mut self) {
        let drops = &self.stack.counters().drops;
        let now = NSTAT.map(|(_, reason)| drops.get(reason));
        if now == self.nstat_published {
            return;
        }
        self.nstat_published = now;
        if let Some(path) = std::env::var_os("FASTPATH_PD_NSTAT") {
            let text: String = NSTAT
                .iter()
                .zip(now)
                .map(|((name, _), value)| format!("{name} {value}\n"))
                .collect();
            let _ = std::fs::write(path, text);
        }
    }

    /// Runs virtual time forward to `target`, firing every timer due on the way at its own time.
    fn advance_to(&mut self, target: u64) {
        for _ in 0..100_000 {
            match self.stack.next_deadline() {
                Some(d) if d.total_micros() <= target => {
                    let before = self.now;
                    self.now = self.now.max(d.total_micros());
                    self.step();
                    if self.now == before && self.stack.next_deadline() == Some(d) {
                        break; // a deadline in the past that polling did not clear
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(target);
        self.step();
    }

    fn fd(&mut self, fd: i32) -> Result<&mut Fd, Errno> {
        self.fds.get_mut(&fd).ok_or(libc::EBADF)
    }

    /// Takes the sysctls the script set that the stack has switches for (`net.ipv4.tcp_fastopen`,
    /// `tcp_fastopen_key`, `tcp_timestamps`, `tcp_sack`, `tcp_window_scaling`, `tcp_ecn`, `tcp_slow_start_after_idle`,
    /// `tcp_min_tso_segs`),
    /// from the network namespace the runner gives each script, into the stack's configuration.
    /// Those it cannot read (no `/proc`) leave the configuration as it is.
    fn sysctls(&mut self) {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
                .ok()
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        let key = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen_key")
            .ok()
            .and_then(|k| parse_fast_open_key(&k));
        let tcp = self.stack.tcp_config_mut();
        if let Some(flags) = read("tcp_fastopen") {
            tcp.fast_open = fast_open_from_sysctl(flags);
            tcp.fast_open.key = key;
        }
        if let Some(on) = read("tcp_timestamps") {
            tcp.timestamps = on != 0;
        }
        if let Some(on) = read("tcp_sack") {
            tcp.sack = on != 0;
        }
        if let Some(on) = read("tcp_window_scaling") {
            tcp.window_scaling = on != 0;
        }
        if let Some(mode) = read("tcp_ecn") {
            tcp.ecn = match mode {
                0 => Ecn::Off,
                1 => Ecn::On,
                _ => Ecn::Accept,
            };
        }
        if let Some(on) = read("tcp_slow_start_after_idle") {
            tcp.restart_after_idle = on != 0;
        }
        if let Some(segs) = read("tcp_min_tso_segs") {
            tcp.min_tso_segments = segs.max(1);
        }
        // `ip tcp_metrics flush` (the runner's stand-in for `ip` leaves this file): the Fast Open
        // client's cache stands for the kernel's metrics.
        if let Some(flushed) = std::env::var_os("FASTPATH_PD_METRICS_FLUSHED") {
            if std::fs::remove_file(flushed).is_ok() {
                self.stack.tcp_fast_open_forget();
            }
        }
    }

    fn insert(&mut self, sock: Sock, v6: bool, nonblock: bool) -> Result<i32, Errno> {
        let placeholder = OwnedFd::from(
            std::fs::File::open("/dev/null")
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?,
        );
        let n = placeholder.as_raw_fd();
        self.fds.insert(
            n,
            Fd {
                sock,
                v6,
                nonblock,
                nodelay: false,
                reuse_addr: false,
                read_shut: false,
                sndbuf: 2 * 16384,
                rcvbuf: 2 * 131072,
                inq: false,
                fast_open_connect: false,
                deferred_to: None,
                fast_open: None,
                sndbuf_set: false,
                rcvbuf_set: false,
                maxseg: None,
                notsent_lowat: 0,
                user_timeout_ms: 0,
                zerocopy: false,
                cork: false,
                keepalive: false,
                keepalive_times: (0, 0, 0),
                syn_count: None,
                timestamping: 0,
                mark: 0,
                tos: 0,
                pmtudisc: IP_PMTUDISC_WANT,
                placeholder: Some(placeholder),
            },
        );
        Ok(n)
    }

    /// Applies the socket options set on `fd` to its stream or listener in the stack (a fresh
    /// socket keeps them until `connect` or `listen`). Linux's `SO_SNDBUF` limits the bytes queued
    /// (its doubled value, as Linux counts); its doubled `SO_RCVBUF` is half overhead, so the
    /// stack's receive buffer (the window) is the value set.
    fn apply_options(&mut self, fd: i32) -> Result<(), Errno> {
        let TcpSocketOptions {
            send_buffer: send,
            recv_buffer: recv,
            max_segment: maxseg,
            ..
        } = self.fd(fd)?.options();
        let defaults = self.stack.config().tcp.keepalive;
        let e = self.fd(fd)?;
        let lowat = (e.notsent_lowat > 0).then_some(e.notsent_lowat);
        let user_timeout =
            (e.user_timeout_ms > 0).then(|| Duration::from_millis(u64::from(e.user_timeout_ms)));
        let cork = e.cork;
        let (tos, pmtu) = (e.tos, path_mtu_discovery(e.pmtudisc));
        let keepalive = e.keepalive;
        let (idle, interval, count) = e.keepalive_times;
        let keepalive_times = (idle, interval, count) != (0, 0, 0);
        let times = (
            if idle > 0 {
                Duration::from_secs(idle.into())
            } else {
                defaults.0
            },
            if interval > 0 {
                Duration::from_secs(interval.into())
            } else {
                defaults.1
            },
            if count > 0 { count } else { defaults.2 },
        );
        let io = |r: io::Result<()>| r.map_err(|e| errno_of(&e));
        match e.sock {
            Sock::Fresh { .. } => {}
            Sock::Stream { stream, .. } => {
                let mut t = self.stack.tcp(stream);
                if let Some(b) = send {
                    io(t.set_send_buffer(b))?;
                }
                if let Some(b) = recv {
                    io(t.set_recv_buffer(b))?;
                }
                if let Some(m) = maxseg {
                    io(t.set_max_segment(m))?;
                }
                io(t.set_notsent_lowat(lowat))?;
                io(t.set_user_timeout(user_timeout))?;
                io(t.set_tos(tos))?;
                io(t.set_path_mtu_discovery(pmtu))?;
                if cork {
                    io(t.set_cork(true))?;
                }
                if keepalive_times {
                    io(t.set_keepalive_times(Some(times)))?;
                }
                if keepalive {
                    io(t.set_keepalive(true))?;
                }
            }
            // A listener's `TCP_NOTSENT_LOWAT` and `TCP_USER_TIMEOUT` stay with the shim, which
            // hands them on at `accept`.
            Sock::Listener(l) => {
                let mut t = self.stack.tcp_listener(l);
                if let Some(b) = send {
                    io(t.set_send_buffer(b))?;
                }
                if let Some(b) = recv {
                    io(t.set_recv_buffer(b))?;
                }
                if let Some(m) = maxseg {
                    io(t.set_max_segment(m))?;
                }
                io(t.set_tos(tos))?;
                io(t.set_path_mtu_discovery(pmtu))?;
            }
        }
        Ok(())
    }

    fn stream(&mut self, fd: i32) -> Result<TcpStream, Errno> {
        match self.fd(fd)?.sock {
            Sock::Stream { stream, .. } => Ok(stream),
            Sock::Listener(_) => Err(libc::ENOTCONN),
            Sock::Fresh { .. } => Err(libc::ENOTCONN),
        }
    }

    /// The events epoll instance `epfd` reports now (see [`Shim::epoll_wait`]).
    fn epoll_ready(&mut self, epfd: i32, max: usize) -> Vec<(u32, u64)> {
        let fds: Vec<(i32, Interest)> = match self.epolls.get(&epfd) {
            Some(ep) => ep.interest.iter().map(|(&fd, &i)| (fd, i)).collect(),
            None => return Vec::new(),
        };
        let mut out = Vec::new();
        for (fd, mut i) in fds {
            if out.len() >= max {
                break;
            }
            if i.fired {
                continue;
            }
            let wanted = (i.events as i16) | libc::POLLERR | libc::POLLHUP;
            let mask = (self.revents(fd, i.events as i16) & wanted) as u16 as u32;
            let (received, acked) = match self.fds.get(&fd).map(|e| &e.sock) {
                Some(&Sock::Stream { stream, .. }) => self
                    .stack
                    .tcp(stream)
                    .info()
                    .map_or((0, 0), |x| (x.bytes_received, x.bytes_acked)),
                _ => (0, 0),
            };
            let report = if i.events & EPOLLET != 0 {
                let happened = i.armed || received > i.last_in || acked > i.last_acked;
                happened && mask != 0
            } else {
                mask != 0
            };
            if !report {
                continue;
            }
            out.push((mask, i.data));
            i.armed = false;
            i.last_in = received;
            i.last_acked = acked;
            i.fired = i.events & EPOLLONESHOT != 0;
            if let Some(ep) = self.epolls.get_mut(&epfd) {
                ep.interest.insert(fd, i);
            }
        }
        out
    }

    /// What `poll` reports for `fd`.
    fn revents(&mut self, fd: i32, events: i16) -> i16 {
        let Ok(entry) = self.fd(fd) else {
            return libc::POLLNVAL;
        };
        let mut r: i16 = 0;
        match entry.sock {
            // A deferred Fast Open connect is writable: the write opens it.
            Sock::Fresh { .. } if entry.deferred_to.is_some() => r |= libc::POLLOUT,
            Sock::Fresh { .. } => r |= libc::POLLOUT | libc::POLLHUP,
            Sock::Listener(l) => {
                if self.stack.tcp_listener(l).readable() {
                    r |= libc::POLLIN;
                }
            }
            Sock::Stream { stream, .. } => {
                let mut t = self.stack.tcp(stream);
                let state = t.state();
                // An error not yet reported (Linux's `sk_err`).
                if t.has_error() {
                    r |= libc::POLLERR;
                }
                match state {
                    // Linux's `tcp_poll` of a closed socket: shut down both ways, so hung up,
                    // readable (to the end), and writable (a write fails at once).
                    Err(_) | Ok(TcpState::Closed) => {
                        r |= libc::POLLHUP | libc::POLLIN | libc::POLLRDHUP | libc::POLLOUT
                    }
                    Ok(s) => {
                        if t.readable() {
                            r |= libc::POLLIN;
                        }
                        // A completion notification or a timestamp waits in the error queue.
                        if t.has_completed() || t.has_tx_timestamp() {
                            r |= libc::POLLERR;
                        }
                        if s.is_synchronized() && t.writable() {
                            r |= libc::POLLOUT;
                        }
                        if matches!(
                            s,
                            TcpState::TimeWait | TcpState::LastAck | TcpState::Closing
                        ) {
                            r |= libc::POLLHUP;
                        }
                        // The peer's FIN arrived: Linux's `RCV_SHUTDOWN`.
                        if matches!(
                            s,
                            TcpState::CloseWait
                                | TcpState::LastAck
                                | TcpState::Closing
                                | TcpState::TimeWait
                        ) {
                            r |= libc::POLLIN | libc::POLLRDHUP;
                        }
                    }
                }
            }
        }
        r & (events | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL)
    }
}

/// `SOF_TIMESTAMPING_*` flags the shim acts on (`<linux/net_tstamp.h>`).
pub const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
pub const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
pub const SOF_TIMESTAMPING_TX_SCHED: u32 = 1 << 8;
pub const SOF_TIMESTAMPING_TX_ACK: u32 = 1 << 9;
pub const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;

/// What `recvmsg(MSG_ERRQUEUE)` reads: a completion notification (the range of `MSG_ZEROCOPY`
/// send numbers) or a transmit timestamp (its key 0 without `SOF_TIMESTAMPING_OPT_ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorQueued {
    Completed(u32, u32),
    Timestamp(TxTimestamp),
}

impl ErrorQueued {
    /// Linux's `SCM_TSTAMP_*` value of a timestamp's kind.
    pub fn tstamp_kind(kind: TxTimestampKind) -> u32 {
        match kind {
            TxTimestampKind::Sent => 0,
            TxTimestampKind::Scheduled => 1,
            TxTimestampKind::Acked => 2,
        }
    }
}

/// A v4-mapped IPv6 address as the IPv4 address it stands for; others unchanged.
fn unmap(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(ip) => SocketAddrV4::new(ip, v6.port()).into(),
            None => a,
        },
        a => a,
    }
}

/// An IPv4 address as an IPv6 socket reports it (v4-mapped), if `v6`.
fn map_if(v6: bool, a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) if v6 => {
            SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0).into()
        }
        a => a,
    }
}

fn sockaddr_any(v6: bool) -> SocketAddr {
    if v6 {
        SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0).into()
    } else {
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into()
    }
}

/// The outcome of one try of a blocking operation.
enum Try<T> {
    Done(Result<T, Errno>),
    /// Not yet: wait, unless the descriptor is non-blocking (then fail with this errno).
    Wait(Errno),
}

impl Shim {
    /// A shim with `config`'s addresses on a fresh stack, its clock at [`CLOCK_START_MICROS`].
    pub fn new(config: ShimConfig) -> Shim {
        let (raw, end) = PairEnd::pair(
            LinkCapabilities::plain(config.mtu),
            65536,
            Impairments::default(),
        );
        let mut stack = Stack::new(config.stack.clone());
        let iface = stack.add_interface("pd0", end, Ipv4Cidr::new(config.local4, 16));
        // The remote prefix is reached straight over the link (it carries IP packets, no neighbours).
        let _ = stack.add_route(config.remote4, None, iface);
        let _ = stack.add_ipv6_address(iface, Ipv6Cidr::new(config.local6, 48));
        let _ = stack.add_ipv6_route(config.remote6, None, iface);
        let mut state = State {
            stack,
            raw,
            now: CLOCK_START_MICROS,
            generation: 0,
            fds: BTreeMap::new(),
            epolls: BTreeMap::new(),
            out: VecDeque::new(),
            waiting: 0,
            input: 0,
            tried: 0,
            nstat_published: [0; NSTAT.len()],
        };
        state.step();
        Shim {
            state: Mutex::new(state),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` under the lock, then polls the stack and wakes waiters.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut g = self.lock();
        let r = f(&mut g);
        g.step();
        g.input += 1;
        drop(g);
        self.changed.notify_all();
        r
    }

    /// Tries `op` until it is done; if it would block, fails with its errno on a non-blocking
    /// descriptor, or waits. `deadline` (virtual µs) ends the wait with `Ok(timeout)`.
    fn blocking<T>(
        &self,
        fd: i32,
        deadline: Option<u64>,
        timeout: Option<T>,
        mut op: impl FnMut(&mut State) -> Try<T>,
    ) -> Result<T, Errno> {
        let mut g = self.lock();
        let nonblock = match g.fds.get(&fd) {
            Some(e) => e.nonblock,
            None => return Err(libc::EBADF),
        };
        let mut timeout = timeout;
        let mut waited = false;
        g.waiting += 1;
        let result = loop {
            g.tried = g.input;
            let r = op(&mut g);
            g.step();
            self.changed.notify_all();
            match r {
                Try::Done(r) => break r,
                Try::Wait(e) if nonblock => break Err(e),
                Try::Wait(_) => {}
            }
            if let Some(d) = deadline {
                if g.now >= d {
                    if let Some(t) = timeout.take() {
                        break Ok(t);
                    }
                }
            }
            g = self.wait(g, deadline);
            waited = true;
        };
        g.waiting -= 1;
        if waited {
            COMPLETED_AT.set(Some(g.now));
        }
        result
    }

    /// Before the clock runs on: lets a call blocked on the other thread try again first, if
    /// something happened since it last tried (bounded, in case it is not scheduled).
    fn let_waiters_try<'a>(&'a self, mut g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        for _ in 0..25 {
            if g.waiting == 0 || g.tried >= g.input {
                break;
            }
            self.changed.notify_all();
            g = self
                .changed
                .wait_timeout(g, Duration::from_millis(2))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        g
    }

    /// Waits for the other thread to move things; if nothing moves for a while, drives the clock to
    /// the stack's next timer or `deadline`, whichever comes first.
    fn wait<'a>(
        &'a self,
        g: MutexGuard<'a, State>,
        deadline: Option<u64>,
    ) -> MutexGuard<'a, State> {
        let generation = g.generation;
        let (mut g, _) = self
            .changed
            .wait_timeout(g, IDLE_REAL)
            .unwrap_or_else(|e| e.into_inner());
        if g.generation == generation {
            let next = g.stack.next_deadline().map(|d| d.total_micros());
            let target = match (next, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(t) = target {
                let t = t.max(g.now + 1);
                g.advance_to(t);
            }
        }
        g
    }

    // ---- the clock ----

    /// `gettimeofday`: the virtual time in microseconds. Each call moves it on by one microsecond
    /// (packetdrill spins on the clock for the last microseconds before an event).
    pub fn now_micros(&self) -> u64 {
        if let Some(t) = COMPLETED_AT.take() {
            return t;
        }
        let mut g = self.lock();
        g.now += 1;
        if g.stack
            .next_deadline()
            .is_some_and(|d| d.total_micros() <= g.now)
        {
            g.step();
            drop(g);
            self.changed.notify_all();
            return self.lock().now;
        }
        g.now
    }

    /// `usleep`: runs virtual time forward by `micros`, firing timers at their times.
    pub fn usleep(&self, micros: u64) {
        let g = self.lock();
        let mut g = self.let_waiters_try(g);
        let t = g.now + micros;
        g.advance_to(t);
        g.input += 1;
        drop(g);
        self.changed.notify_all();
    }

    // ---- the link ----

    /// `netdev_send`: hands an IP packet to the stack, which takes it at once.
    pub fn netdev_send(&self, packet: &[u8]) {
        self.with(|s| {
            s.raw.transmit(&mut vec![PacketBuf::from_slice(packet)]);
        })
    }

    /// `netdev_receive`: the next packet the stack sent and the virtual time it left. With nothing
    /// queued, virtual time runs on timer by timer (up to [`RECEIVE_LIMIT_MICROS`]) until the stack
    /// sends something; `None` if it does not.
    pub fn netdev_receive(&self) -> Option<(Vec<u8>, u64)> {
        let mut g = self.lock();
        let limit = g.now + RECEIVE_LIMIT_MICROS;
        loop {
            g.step();
            if let Some(p) = g.out.pop_front() {
                return Some(p);
            }
            if g.waiting > 0 && g.tried < g.input {
                // A call blocked on the other thread may be about to act (write, close): let it.
                g = self.let_waiters_try(g);
                if g.tried >= g.input {
                    continue;
                }
            }
            match g.stack.next_deadline() {
                Some(d) if d.total_micros() <= limit => {
                    let t = d.total_micros().max(g.now + 1);
                    g.advance_to(t);
                    g.input += 1;
                    self.changed.notify_all();
                }
                _ => return None,
            }
        }
    }

    /// Packets the stack has sent and nobody took yet (for tests).
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        let mut g = self.lock();
        g.step();
        g.out.drain(..).map(|(p, _)| p).collect()
    }

    // ---- sockets ----

    /// `socket(domain, type, protocol)`: TCP over `AF_INET` or `AF_INET6` only.
    pub fn socket(&self, domain: i32, ty: i32, protocol: i32) -> Result<i32, Errno> {
        let v6 = match domain {
            libc::AF_INET => false,
            libc::AF_INET6 => true,
            _ => return Err(libc::EAFNOSUPPORT),
        };
        let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        if base != libc::SOCK_STREAM {
            return Err(libc::EPROTONOSUPPORT);
        }
        if protocol != 0 && protocol != libc::IPPROTO_TCP {
            return Err(libc::EPROTONOSUPPORT);
        }
        let nonblock = ty & libc::SOCK_NONBLOCK != 0;
        self.with(|s| s.insert(Sock::Fresh { v6, bound: None }, v6, nonblock))
    }

    /// `bind(fd, addr)`: remembered until `listen` or `connect`.
    pub fn bind(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno> {
        self.with(|s| match &mut s.fd(fd)?.sock {
            Sock::Fresh { bound, v6 } => {
                if bound.is_some() {
                    return Err(libc::EINVAL);
                }
                if addr.is_ipv6() != *v6 {
                    return Err(libc::EINVAL);
                }
                *bound = Some(addr);
                Ok(())
            }
            _ => Err(libc::EINVAL),
        })
    }

    /// `listen(fd, backlog)`.
    pub fn listen(&self, fd: i32, backlog: i32) -> Result<(), Errno> {
        self.with(|s| {
            let entry = s.fd(fd)?;
            let (v6, bound) = match entry.sock {
                Sock::Fresh { v6, bound } => (v6, bound),
                Sock::Listener(_) => return Ok(()),
                Sock::Stream { .. } => return Err(libc::EINVAL),
            };
            let local = bound.map(unmap).unwrap_or_else(|| sockaddr_any(v6));
            let backlog = usize::try_from(backlog.max(1)).unwrap_or(1);
            let fast_open = entry.fast_open;
            s.sysctls();
            let l = s
                .stack
                .tcp_listen(local, backlog)
                .map_err(|e| errno_of(&e))?;
            if fast_open.is_some() {
                s.stack
                    .tcp_listener(l)
                    .set_fast_open(fast_open)
                    .map_err(|e| errno_of(&e))?;
            }
            s.fd(fd)?.sock = Sock::Listener(l);
            s.apply_options(fd)
        })
    }

    /// `accept(fd)`: a new descriptor and the peer's address.
    pub fn accept(&self, fd: i32) -> Result<(i32, SocketAddr), Errno> {
        self.blocking(fd, None, None, |s| {
            let (l, v6) = match s.fd(fd) {
                Ok(Fd {
                    sock: Sock::Listener(l),
                    v6,
                    ..
                }) => (*l, *v6),
                Ok(_) => return Try::Done(Err(libc::EINVAL)),
                Err(e) => return Try::Done(Err(e)),
            };
            match s.stack.tcp_listener(l).accept() {
                Ok((stream, peer)) => {
                    let parent = s.fds.get(&fd).map(|e| {
                        (
                            (e.sndbuf, e.rcvbuf, e.sndbuf_set, e.rcvbuf_set, e.maxseg),
                            (e.notsent_lowat, e.user_timeout_ms),
                            (e.zerocopy, e.cork, e.mark, e.tos, e.pmtudisc),
                            (e.keepalive, e.keepalive_times),
                        )
                    });
                    let n = s.insert(
                        Sock::Stream {
                            stream,
                            connecting: false,
                        },
                        v6,
                        false,
                    );
                    // The connection took the listener's options (as Linux's child socket does).
                    if let (Ok(n), Some((p, q, r, k))) = (&n, parent) {
                        if let Ok(e) = s.fd(*n) {
                            (e.sndbuf, e.rcvbuf, e.sndbuf_set, e.rcvbuf_set, e.maxseg) = p;
                            (e.notsent_lowat, e.user_timeout_ms) = q;
                            (e.zerocopy, e.cork, e.mark, e.tos, e.pmtudisc) = r;
                            (e.keepalive, e.keepalive_times) = k;
                        }
                        // The stack gave the connection the listener's buffers and MSS limit
                        // already; the shim hands on the others here.
                        let _ = s.apply_options(*n);
                    }
                    Try::Done(n.map(|n| (n, map_if(v6, peer))))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Try::Wait(libc::EAGAIN),
                Err(e) => Try::Done(Err(errno_of(&e))),
            }
        })
    }

    /// `connect(fd, addr)`: `EINPROGRESS` on a non-blocking descriptor; otherwise waits for the
    /// handshake's outcome.
    pub fn connect(&self, fd: i32, addr: SocketAddr) -> Result<(), Errno> {
        let started = self.with(|s| {
            let entry = s.fd(fd)?;
            match entry.sock {
                // A deferred Fast Open connect is a connect made (Linux: `EISCONN`).
                Sock::Fresh { .. } if entry.deferred_to.is_some() => Err(libc::EISCONN),
                Sock::Fresh { v6, bound } => {
                    if addr.is_ipv6() != v6 {
                        return Err(libc::EAFNOSUPPORT);
                    }
                    let nodelay = entry.nodelay;
                    let options = entry.options();
                    let fast_open = entry.fast_open_connect;
                    // An IPv6 socket reaches an IPv4 peer by its v4-mapped address, over IPv4.
                    let remote = unmap(addr);
                    let local = bound
                        .map(unmap)
                        .filter(|l| l.is_ipv6() == remote.is_ipv6() || !l.ip().is_unspecified())
                        .unwrap_or_else(|| sockaddr_any(remote.is_ipv6()));
                    s.sysctls();
                    if fast_open && s.stack.tcp_fast_open_ready(remote) {
                        // Linux's TCP_FASTOPEN_CONNECT with a cookie: connected, as far as the
                        // application knows; the first write sends the SYN with its data.
                        s.fd(fd)?.deferred_to = Some(addr);
                        return Ok(None);
                    }
                    let stream = if fast_open {
                        // No cookie yet: the SYN asks for one.
                        s.stack
                            .tcp_connect_fast_open(remote, options, &[])
                            .map(|(stream, _)| stream)
                    } else {
                        s.stack.tcp_connect_with(local, remote, options)
                    }
                    .map_err(|e| errno_of(&e))?;
                    if nodelay {
                        let _ = s.stack.tcp(stream).set_nodelay(true);
                    }
                    s.fd(fd)?.sock = Sock::Stream {
                        stream,
                        connecting: true,
                    };
                    // The options the SYN does not depend on.
                    s.apply_options(fd)?;
                    Ok(Some(true))
                }
                Sock::Stream { connecting, .. } => {
                    if connecting {
                        Ok(Some(false))
                    } else {
                        Err(libc::EISCONN)
                    }
                }
                Sock::Listener(_) => Err(libc::EISCONN),
            }
        })?;
        match started {
            // A deferred Fast Open connect.
            None => Ok(()),
            Some(started) => self.finish_connect(fd, started),
        }
    }

    /// The rest of `connect`: waits (if blocking) for the handshake's outcome.
    fn finish_connect(&self, fd: i32, started: bool) -> Result<(), Errno> {
        self.blocking(fd, None, None, |s| {
            let stream = match s.stream(fd) {
                Ok(st) => st,
                Err(e) => return Try::Done(Err(e)),
            };
            let mut t = s.stack.tcp(stream);
            let outcome = if t.is_established() {
                Some(Ok(()))
            } else {
                match t.take_error() {
                    Ok(Some(e)) => Some(Err(errno_of(&e))),
                    Err(e) => Some(Err(errno_of(&e))),
                    Ok(None) => match t.state() {
                        Ok(TcpState::SynSent) | Ok(TcpState::SynReceived) => None,
                        Ok(_) => Some(Err(libc::ECONNREFUSED)),
                        Err(e) => Some(Err(errno_of(&e))),
                    },
                }
            };
            match outcome {
                Some(r) => {
                    if let Ok(Fd {
                        sock: Sock::Stream { connecting, .. },
                        ..
                    }) = s.fd(fd)
                    {
                        *connecting = false;
                    }
                    Try::Done(r)
                }
                None => Try::Wait(if started {
                    libc::EINPROGRESS
                } else {
                    libc::EALREADY
                }),
            }
        })
    }

    /// `sendto(fd, buf, MSG_FASTOPEN, to)`: on a socket not yet connected, connects to `to` trying
    /// TCP Fast Open with `buf` (Linux's `tcp_sendmsg_fastopen`). Non-blocking, it returns what the
    /// SYN carries, or `EINPROGRESS` when it carries nothing (no cookie yet: the SYN asks for one);
    /// blocking, it waits for the handshake and then writes the rest. On a connected socket the flag
    /// is ignored.
    pub fn send_fast_open(
        &self,
        fd: i32,
        buf: &[u8],
        to: Option<SocketAddr>,
        dontwait: bool,
    ) -> Result<usize, Errno> {
        let sent = self.with(|s| {
            let entry = s.fd(fd)?;
            let options = entry.options();
            // A deferred Fast Open connect is made now.
            entry.deferred_to = None;
            let (v6, bound, nodelay, nonblock) = match entry.sock {
                Sock::Fresh { v6, bound } => (v6, bound, entry.nodelay, entry.nonblock || dontwait),
                Sock::Stream { stream, .. } => {
                    let connecting = matches!(s.stack.tcp(stream).state(), Ok(TcpState::SynSent));
                    return if connecting {
                        Err(libc::EALREADY)
                    } else {
                        Ok(None)
                    };
                }
                Sock::Listener(_) => return Err(libc::EPIPE),
            };
            let addr = to.ok_or(libc::EDESTADDRREQ)?;
            if addr.is_ipv6() != v6 {
                return Err(libc::EAFNOSUPPORT);
            }
            s.sysctls();
            if !s.stack.config().tcp.fast_open.client {
                return Err(libc::EOPNOTSUPP);
            }
            if bound.is_some_and(|b| b.port() != 0) {
                // The stack picks the port of a Fast Open connection.
                return Err(libc::EINVAL);
            }
            let (stream, n) = s
                .stack
                .tcp_connect_fast_open(unmap(addr), options, buf)
                .map_err(|e| errno_of(&e))?;
            if nodelay {
                let _ = s.stack.tcp(stream).set_nodelay(true);
            }
            s.fd(fd)?.sock = Sock::Stream {
                stream,
                connecting: true,
            };
            Ok(Some((n, nonblock)))
        })?;
        match sent {
            None => self.write(fd, buf),
            Some((n, true)) if n > 0 => Ok(n),
            Some((_, true)) => Err(libc::EINPROGRESS),
            Some((n, false)) => {
                // The caller waits to write the rest: Linux's pending writer, whose ACK of the
                // SYN-ACK rides on that data. The data is queued now, so that it leaves as the
                // SYN-ACK arrives, whichever thread carries the SYN-ACK in (the blocked call's
                // thread may wake later in real time).
                let mut queued = n;
                if n < buf.len() {
                    queued += self.with(|s| {
                        let stream = s.stream(fd)?;
                        let mut t = s.stack.tcp(stream);
                        t.expect_write().map_err(|e| errno_of(&e))?;
                        Ok::<usize, Errno>(t.write_all_possible(&buf[n..]).unwrap_or(0))
                    })?;
                }
                self.finish_connect(fd, true)?;
                if queued == buf.len() {
                    Ok(queued)
                } else {
                    self.write(fd, &buf[queued..]).map(|m| queued + m)
                }
            }
        }
    }

    /// With `TCP_INQ` on, what `recvmsg`'s `TCP_CM_INQ` control message says after a read: the
    /// bytes left to read, or 1 when none are left and the peer's FIN has come (Linux's
    /// `tcp_inq_hint`); `None` with it off.
    pub fn inq_hint(&self, fd: i32) -> Result<Option<i32>, Errno> {
        self.with(|s| {
            if !s.fd(fd)?.inq {
                return Ok(None);
            }
            let stream = s.stream(fd)?;
            let mut t = s.stack.tcp(stream);
            let left = t.available().unwrap_or(0);
            let fin = matches!(
                t.state(),
                Ok(TcpState::CloseWait
                    | TcpState::LastAck
                    | TcpState::Closing
                    | TcpState::TimeWait)
            );
            let hint = if left == 0 && fin { 1 } else { left };
            Ok(Some(i32::try_from(hint).unwrap_or(i32::MAX)))
        })
    }

    /// `recvmsg(fd, MSG_ERRQUEUE)`: the next completion notification, as the range of `MSG_ZEROCOPY`
    /// send numbers acknowledged, or the next transmit timestamp; with whether the socket is
    /// `AF_INET6` (its control message is then IPv6's) and its `SO_TIMESTAMPING` flags; `EAGAIN`
    /// when there is none (it never waits, as on Linux).
    pub fn recv_error_queue(&self, fd: i32) -> Result<(bool, ErrorQueued, u32), Errno> {
        self.with(|s| {
            let entry = s.fd(fd)?;
            let (v6, flags) = (entry.v6, entry.timestamping);
            let Ok(stream) = s.stream(fd) else {
                return Err(libc::EAGAIN);
            };
            let mut t = s.stack.tcp(stream);
            if let Ok(Some(stamp)) = t.take_tx_timestamp() {
                let key = if flags & SOF_TIMESTAMPING_OPT_ID != 0 {
                    stamp.key
                } else {
                    0
                };
                let stamp = ErrorQueued::Timestamp(TxTimestamp { key, ..stamp });
                return Ok((v6, stamp, flags));
            }
            match t.take_completed() {
                Ok(Some(range)) => Ok((
                    v6,
                    ErrorQueued::Completed(*range.start(), *range.end()),
                    flags,
                )),
                _ => Err(libc::EAGAIN),
            }
        })
    }

    /// `read(fd, buf)`: `Ok(0)` at the end of the stream.
    pub fn read(&self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.blocking(fd, None, None, |s| {
            let stream = match s.stream(fd) {
                Ok(st) => st,
                // A deferred Fast Open connect has nothing to read yet.
                Err(_) if s.fds.get(&fd).is_some_and(|e| e.deferred_to.is_some()) => {
                    return Try::Wait(libc::EAGAIN)
                }
                Err(e) => return Try::Done(Err(e)),
            };
            let read_shut = s.fds.get(&fd).is_some_and(|e| e.read_shut);
            match s.stack.tcp(stream).read(buf) {
                Ok(n) => Try::Done(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && read_shut => Try::Done(Ok(0)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Try::Wait(libc::EAGAIN),
                Err(e) => Try::Done(Err(errno_of(&e))),
            }
        })
    }

    /// `write(fd, buf)`: a blocking descriptor waits until all of `buf` is queued.
    pub fn write(&self, fd: i32, buf: &[u8]) -> Result<usize, Errno> {
        self.send(fd, buf, 0)
    }

    /// `send(fd, buf, flags)`: `write` with `MSG_MORE`, `MSG_EOR` and `MSG_ZEROCOPY` (the last
    /// asks for a completion notification when the socket has `SO_ZEROCOPY`, as on Linux).
    pub fn send(&self, fd: i32, buf: &[u8], flags: i32) -> Result<usize, Errno> {
        let r = self.send_flagged(fd, buf, flags);
        self.after_send(fd, flags, r)
    }

    /// After a send (`r` its result), a `MSG_ZEROCOPY` one that queued bytes asks to hear when they are acknowledged.
    pub fn after_send(&self, fd: i32, flags: i32, r: Result<usize, Errno>) -> Result<usize, Errno> {
        if flags & libc::MSG_ZEROCOPY != 0 && matches!(r, Ok(n) if n > 0) {
            self.with(|s| {
                if s.fd(fd)?.zerocopy {
                    let stream = s.stream(fd)?;
                    s.stack
                        .tcp(stream)
                        .notify_acked()
                        .map_err(|e| errno_of(&e))?;
                }
                Ok::<_, Errno>(())
            })?;
        }
        r
    }

    fn send_flagged(&self, fd: i32, buf: &[u8], flags: i32) -> Result<usize, Errno> {
        let flags_typed = WriteFlags {
            more: flags & libc::MSG_MORE != 0,
            end_of_record: flags & libc::MSG_EOR != 0,
            notify_acked: false,
        };
        // A deferred Fast Open connect: this write opens the connection.
        let deferred = self.with(|s| Ok::<_, Errno>(s.fd(fd)?.deferred_to.take()))?;
        if let Some(to) = deferred {
            return self.send_fast_open(fd, buf, Some(to), false);
        }
        let mut done = 0;
        self.blocking(fd, None, None, |s| {
            let stream = match s.stream(fd) {
                Ok(st) => st,
                // Linux's `sk_stream_wait_connect`: a socket never connected is a broken pipe.
                Err(libc::ENOTCONN) if matches!(s.fds.get(&fd), Some(e) if matches!(e.sock, Sock::Fresh { .. })) => {
                    return Try::Done(Err(libc::EPIPE))
                }
                Err(e) => return Try::Done(Err(e)),
            };
            if let Ok(Some(e)) = s.stack.tcp(stream).take_error() {
                return Try::Done(Err(errno_of(&e)));
            }
            // A connection being made takes no data yet (Linux waits for it, or says EAGAIN).
            if matches!(s.stack.tcp(stream).state(), Ok(TcpState::SynSent)) {
                return Try::Wait(libc::EAGAIN);
            }
            let nonblock = s.fds.get(&fd).is_some_and(|e| e.nonblock)
                || flags & libc::MSG_DONTWAIT != 0;
            match s.stack.tcp(stream).write_flagged(&buf[done..], flags_typed) {
                Ok(n) => {
                    done += n;
                    if done == buf.len() || nonblock {
                        Try::Done(Ok(done))
                    } else {
                        Try::Wait(libc::EAGAIN)
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if done > 0 && nonblock {
                        Try::Done(Ok(done))
                    } else {
                        Try::Wait(libc::EAGAIN)
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => Try::Done(Err(libc::EPIPE)),
                Err(e) => Try::Done(Err(errno_of(&e))),
            }
        })
    }

    /// `close(fd)`.
    pub fn close(&self, fd: i32) -> Result<(), Errno> {
        self.with(|s| {
            if s.epolls.remove(&fd).is_some() {
                return Ok(());
            }
            let entry = s.fds.remove(&fd).ok_or(libc::EBADF)?;
            // A closed descriptor leaves every interest list (Linux: once its last reference goes).
            for ep in s.epolls.values_mut() {
                ep.interest.remove(&fd);
            }
            match entry.sock {
                Sock::Fresh { .. } => {}
                Sock::Listener(l) => s.stack.tcp_listener(l).close(),
                Sock::Stream { stream, .. } => s.stack.tcp(stream).close(),
            }
            Ok(())
        })
    }

    /// `shutdown(fd, how)`: `SHUT_WR` and `SHUT_RDWR` send a FIN; `SHUT_RD` does nothing yet.
    pub fn shutdown(&self, fd: i32, how: i32) -> Result<(), Errno> {
        self.with(|s| {
            let stream = s.stream(fd)?;
            if how == libc::SHUT_RD || how == libc::SHUT_RDWR {
                s.fd(fd)?.read_shut = true;
            }
            match how {
                libc::SHUT_RD => Ok(()),
                libc::SHUT_WR | libc::SHUT_RDWR => s
                    .stack
                    .tcp(stream)
                    .shutdown_write()
                    .map_err(|e| errno_of(&e)),
                _ => Err(libc::EINVAL),
            }
        })
    }

    /// `fcntl(fd, cmd, arg)`: `F_GETFL` and `F_SETFL` (`O_NONBLOCK`).
    pub fn fcntl(&self, fd: i32, cmd: i32, arg: i64) -> Result<i32, Errno> {
        self.with(|s| {
            let entry = s.fd(fd)?;
            match cmd {
                libc::F_GETFL => {
                    Ok(libc::O_RDWR | if entry.nonblock { libc::O_NONBLOCK } else { 0 })
                }
                libc::F_SETFL => {
                    entry.nonblock = arg & i64::from(libc::O_NONBLOCK) != 0;
                    Ok(0)
                }
                libc::F_GETFD | libc::F_SETFD => Ok(0),
                _ => Err(libc::EINVAL),
            }
        })
    }

    /// `getsockopt` for integer options: `SO_ERROR`, `SO_TYPE`, `SO_REUSEADDR`, `TCP_NODELAY`.
    pub fn getsockopt(&self, fd: i32, level: i32, name: i32) -> Result<i32, Errno> {
        self.with(|s| {
            let tcp = s.stack.config().tcp.clone();
            let entry = s.fd(fd)?;
            let (sock, nodelay, reuse) = (&entry.sock, entry.nodelay, entry.reuse_addr);
            let (sndbuf, rcvbuf) = (entry.sndbuf, entry.rcvbuf);
            let maxseg = entry.maxseg;
            let (lowat, user_timeout) = (entry.notsent_lowat, entry.user_timeout_ms);
            match (level, name) {
                (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => {
                    Ok(i32::try_from(lowat).unwrap_or(i32::MAX))
                }
                (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
                    Ok(i32::try_from(user_timeout).unwrap_or(i32::MAX))
                }
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => Ok(sndbuf),
                // The connection's send MSS; before there is one, the limit set, or Linux's
                // default.
                (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match *sock {
                    Sock::Stream { stream, .. } => s
                        .stack
                        .tcp(stream)
                        .info()
                        .map(|i| i32::try_from(i.mss).unwrap_or(i32::MAX))
                        .map_err(|e| errno_of(&e)),
                    _ => Ok(maxseg.map_or(536, i32::from)),
                },
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => Ok(rcvbuf),
                (libc::SOL_SOCKET, libc::SO_TYPE) => Ok(libc::SOCK_STREAM),
                (libc::SOL_SOCKET, libc::SO_REUSEADDR) => Ok(i32::from(reuse)),
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => Ok(i32::from(nodelay)),
                (libc::IPPROTO_TCP, TCP_INQ) => Ok(i32::from(entry.inq)),
                (libc::IPPROTO_TCP, libc::TCP_CORK) => Ok(i32::from(entry.cork)),
                (libc::SOL_SOCKET, libc::SO_ZEROCOPY) => Ok(i32::from(entry.zerocopy)),
                (libc::SOL_SOCKET, libc::SO_MARK) => Ok(entry.mark),
                (libc::SOL_IP, libc::IP_TOS) | (libc::SOL_IPV6, libc::IPV6_TCLASS) => {
                    Ok(i32::from(entry.tos))
                }
                (libc::SOL_IP, libc::IP_MTU_DISCOVER) => Ok(entry.pmtudisc),
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => Ok(i32::from(entry.keepalive)),
                (libc::IPPROTO_TCP, libc::TCP_SYNCNT) => {
                    let default = tcp.syn_retries;
                    Ok(entry.syn_count.unwrap_or(default) as i32)
                }
                (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => {
                    let default = tcp.keepalive.0.as_secs() as u32;
                    Ok(Some(entry.keepalive_times.0)
                        .filter(|&v| v > 0)
                        .unwrap_or(default) as i32)
                }
                (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => {
                    let default = tcp.keepalive.1.as_secs() as u32;
                    Ok(Some(entry.keepalive_times.1)
                        .filter(|&v| v > 0)
                        .unwrap_or(default) as i32)
                }
                (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => {
                    let default = tcp.keepalive.2;
                    Ok(Some(entry.keepalive_times.2)
                        .filter(|&v| v > 0)
                        .unwrap_or(default) as i32)
                }
                (libc::SOL_SOCKET, libc::SO_TIMESTAMPING) => Ok(entry.timestamping as i32),
                (libc::SOL_SOCKET, libc::SO_ERROR) => match *sock {
                    Sock::Stream { stream, .. } => match s.stack.tcp(stream).take_error() {
                        Ok(Some(e)) => Ok(errno_of(&e)),
                        _ => Ok(0),
                    },
                    _ => Ok(0),
                },
                _ => Err(libc::ENOPROTOOPT),
            }
        })
    }

    /// True when `fd` is one of the shim's descriptors.
    pub fn owns(&self, fd: i32) -> bool {
        self.lock().fds.contains_key(&fd)
    }

    /// `getsockopt` as the bytes the kernel would write: `TCP_INFO` (Linux's `struct tcp_info`, see
    /// [`tcp_info_bytes`]), `TCP_CC_INFO` (nothing: no congestion control here reports extra
    /// figures), `SO_MEMINFO` (nine `u32`s, see [`meminfo_bytes`]), and the integer options of
    /// [`Shim::getsockopt`] as a native-endian `int`.
    pub fn getsockopt_bytes(&self, fd: i32, level: i32, name: i32) -> Result<Vec<u8>, Errno> {
        match (level, name) {
            (libc::IPPROTO_TCP, libc::TCP_INFO) => self.with(|s| {
                let now = s.instant();
                let entry = s.fd(fd)?;
                let state = match entry.sock {
                    Sock::Fresh { .. } => return Ok(tcp_info_bytes(LINUX_CLOSE, None, now)),
                    Sock::Listener(_) => return Ok(tcp_info_bytes(LINUX_LISTEN, None, now)),
                    Sock::Stream { stream, .. } => s.stack.tcp(stream).info(),
                };
                Ok(match state {
                    Ok(info) => tcp_info_bytes(linux_state(info.state), Some(&info), now),
                    Err(_) => tcp_info_bytes(LINUX_CLOSE, None, now),
                })
            }),
            (libc::IPPROTO_TCP, TCP_CC_INFO) => self.with(|s| s.fd(fd).map(|_| Vec::new())),
            (libc::SOL_SOCKET, SO_MEMINFO) => self.with(|s| {
                let entry = s.fd(fd)?;
                let (sndbuf, rcvbuf) = (entry.sndbuf, entry.rcvbuf);
                let (queued_in, queued_out) = match entry.sock {
                    Sock::Stream { stream, .. } => {
                        let mut t = s.stack.tcp(stream);
                        let rx = t.available().unwrap_or(0);
                        let tx = t
                            .info()
                            .map(|i| i.unacked.saturating_add(i.not_sent))
                            .unwrap_or(0);
                        (rx, tx as usize)
                    }
                    _ => (0, 0),
                };
                Ok(meminfo_bytes(queued_in, rcvbuf, queued_out, sndbuf))
            }),
            _ => self
                .getsockopt(fd, level, name)
                .map(|v| v.to_ne_bytes().to_vec()),
        }
    }

    /// `setsockopt` for integer options: `SO_REUSEADDR`, `TCP_NODELAY`, `SO_KEEPALIVE`.
    pub fn setsockopt(&self, fd: i32, level: i32, name: i32, value: i32) -> Result<(), Errno> {
        self.with(|s| {
            let entry = s.fd(fd)?;
            let on = value != 0;
            match (level, name) {
                (libc::SOL_SOCKET, libc::SO_REUSEADDR) => {
                    entry.reuse_addr = on;
                    Ok(())
                }
                // Doubled as Linux does, with its floors (`SOCK_MIN_SNDBUF`, `SOCK_MIN_RCVBUF`).
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                    entry.sndbuf = value.max(2304).saturating_mul(2);
                    entry.sndbuf_set = true;
                    s.apply_options(fd)
                }
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
                    entry.rcvbuf = value.max(1152).saturating_mul(2);
                    entry.rcvbuf_set = true;
                    s.apply_options(fd)
                }
                // 0 turns it off (Linux then uses its sysctl, unlimited by default).
                (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => {
                    entry.notsent_lowat = value as u32;
                    s.apply_options(fd)
                }
                // Milliseconds, 0 for none; negative is EINVAL, as on Linux.
                (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
                    entry.user_timeout_ms = u32::try_from(value).map_err(|_| libc::EINVAL)?;
                    s.apply_options(fd)
                }
                // Linux's bounds: 88 (`TCP_MIN_MSS`) to 32767 (`MAX_TCP_WINDOW`).
                (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
                    let mss = u16::try_from(value)
                        .ok()
                        .filter(|m| (88..=32767).contains(m))
                        .ok_or(libc::EINVAL)?;
                    entry.maxseg = Some(mss);
                    s.apply_options(fd)
                }
                // The queue of connections taken by Fast Open and not yet established.
                (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => {
                    let pending = usize::try_from(value).map_err(|_| libc::EINVAL)?;
                    let pending = (pending > 0).then_some(pending);
                    entry.fast_open = pending;
                    match entry.sock {
                        Sock::Listener(l) => s
                            .stack
                            .tcp_listener(l)
                            .set_fast_open(pending)
                            .map_err(|e| errno_of(&e)),
                        Sock::Fresh { .. } => Ok(()),
                        Sock::Stream { .. } => Err(libc::EINVAL),
                    }
                }
                // `MSG_ZEROCOPY` sends are copied, and notified as acknowledged (Linux's
                // `SO_EE_CODE_ZEROCOPY_COPIED`).
                (libc::SOL_SOCKET, libc::SO_ZEROCOPY) => {
                    entry.zerocopy = on;
                    Ok(())
                }
                (libc::SOL_SOCKET, libc::SO_MARK) => {
                    entry.mark = value;
                    Ok(())
                }
                // The byte's DSCP; the ECN bits of a stream socket are TCP's, kept as they were
                // (Linux's `do_ip_setsockopt`). IPv6's -1 is the default, 0.
                (libc::SOL_IP, libc::IP_TOS) | (libc::SOL_IPV6, libc::IPV6_TCLASS) => {
                    let v = match (level, value) {
                        (libc::SOL_IPV6, -1) => 0,
                        (libc::SOL_IPV6, 0..=255) => value as u8,
                        (libc::SOL_IPV6, _) => return Err(libc::EINVAL),
                        _ => value as u8,
                    };
                    entry.tos = v & !3;
                    s.apply_options(fd)
                }
                // Linux's values, `IP_PMTUDISC_DONT` (0) to `IP_PMTUDISC_OMIT` (5).
                (libc::SOL_IP, libc::IP_MTU_DISCOVER) => {
                    if !(0..=5).contains(&value) {
                        return Err(libc::EINVAL);
                    }
                    entry.pmtudisc = value;
                    s.apply_options(fd)
                }
                // Software transmit timestamps: scheduled, sent and acknowledged, keyed by byte
                // (`SOF_TIMESTAMPING_OPT_ID`); hardware and receive timestamps are not generated.
                (libc::SOL_SOCKET, libc::SO_TIMESTAMPING) => {
                    let flags = value as u32;
                    let stream = match entry.sock {
                        Sock::Stream { stream, .. } => stream,
                        // Linux refuses `OPT_ID` on a socket not connected (its key starts at the
                        // connection's next byte).
                        _ if flags & SOF_TIMESTAMPING_OPT_ID != 0 => return Err(libc::EINVAL),
                        _ => {
                            entry.timestamping = flags;
                            return Ok(());
                        }
                    };
                    entry.timestamping = flags;
                    let on = TxTimestamping {
                        scheduled: flags & SOF_TIMESTAMPING_TX_SCHED != 0,
                        sent: flags & SOF_TIMESTAMPING_TX_SOFTWARE != 0,
                        acked: flags & SOF_TIMESTAMPING_TX_ACK != 0,
                    };
                    s.stack
                        .tcp(stream)
                        .set_tx_timestamps(on)
                        .map_err(|e| errno_of(&e))
                }
                (libc::IPPROTO_TCP, libc::TCP_CORK) => {
                    entry.cork = on;
                    match entry.sock {
                        Sock::Stream { stream, .. } => {
                            s.stack.tcp(stream).set_cork(on).map_err(|e| errno_of(&e))
                        }
                        _ => Ok(()),
                    }
                }
                (libc::IPPROTO_TCP, TCP_INQ) => {
                    entry.inq = on;
                    Ok(())
                }
                (libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT) => {
                    if !matches!(entry.sock, Sock::Fresh { .. }) {
                        return Err(libc::EISCONN);
                    }
                    entry.fast_open_connect = on;
                    s.sysctls();
                    if on && !s.stack.config().tcp.fast_open.client {
                        return Err(libc::EOPNOTSUPP);
                    }
                    Ok(())
                }
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
                    entry.nodelay = on;
                    if let Sock::Stream { stream, .. } = entry.sock {
                        s.stack
                            .tcp(stream)
                            .set_nodelay(on)
                            .map_err(|e| errno_of(&e))?;
                    }
                    Ok(())
                }
                // Kept for a socket not connected yet (and handed to `accept`'s), applied at once
                // to a connection.
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
                    entry.keepalive = on;
                    match entry.sock {
                        Sock::Stream { stream, .. } => s
                            .stack
                            .tcp(stream)
                            .set_keepalive(on)
                            .map_err(|e| errno_of(&e)),
                        _ => Ok(()),
                    }
                }
                // Linux's bounds: 1 to 32767 seconds (`MAX_TCP_KEEPIDLE`, `MAX_TCP_KEEPINTVL`),
                // 1 to 127 probes (`MAX_TCP_KEEPCNT`).
                (
                    libc::IPPROTO_TCP,
                    libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT,
                ) => {
                    let max = if name == libc::TCP_KEEPCNT {
                        127
                    } else {
                        32767
                    };
                    let v = u32::try_from(value)
                        .ok()
                        .filter(|v| (1..=max).contains(v))
                        .ok_or(libc::EINVAL)?;
                    match name {
                        libc::TCP_KEEPIDLE => entry.keepalive_times.0 = v,
                        libc::TCP_KEEPINTVL => entry.keepalive_times.1 = v,
                        _ => entry.keepalive_times.2 = v,
                    }
                    s.apply_options(fd)
                }
                // Linux's bound: 1 to 127 (`MAX_TCP_SYNCNT`); for the next `connect`, or the
                // one under way.
                (libc::IPPROTO_TCP, libc::TCP_SYNCNT) => {
                    let v = u32::try_from(value)
                        .ok()
                        .filter(|v| (1..=127).contains(v))
                        .ok_or(libc::EINVAL)?;
                    entry.syn_count = Some(v);
                    match entry.sock {
                        Sock::Stream { stream, .. } => s
                            .stack
                            .tcp(stream)
                            .set_syn_retries(Some(v))
                            .map_err(|e| errno_of(&e)),
                        _ => Ok(()),
                    }
                }
                _ => Err(libc::ENOPROTOOPT),
            }
        })
    }

    /// `poll(fds, timeout_ms)`: fills each entry's `revents` (third field); returns how many are
    /// ready. A negative timeout waits without end; the timeout runs in virtual time.
    pub fn poll(&self, fds: &mut [(i32, i16, i16)], timeout_ms: i32) -> Result<usize, Errno> {
        Ok(self.wait_ready(timeout_ms, |g| {
            let mut n = 0;
            for (fd, events, revents) in fds.iter_mut() {
                *revents = g.revents(*fd, *events);
                if *revents != 0 {
                    n += 1;
                }
            }
            n
        }))
    }

    /// Runs the stack and asks `ready` until it finds something (a non-zero count, a non-empty
    /// list) or `timeout_ms` of virtual time have passed (negative: no limit), as `poll` and
    /// `epoll_wait` wait; returns its last answer.
    fn wait_ready<T: Default + PartialEq>(
        &self,
        timeout_ms: i32,
        mut ready: impl FnMut(&mut State) -> T,
    ) -> T {
        let mut g = self.lock();
        let deadline = u64::try_from(timeout_ms).ok().map(|ms| g.now + ms * 1000);
        g.waiting += 1;
        let mut waited = false;
        let found = loop {
            g.tried = g.input;
            g.step();
            let found = ready(&mut g);
            if found != T::default() || deadline.is_some_and(|d| g.now >= d) {
                break found;
            }
            g = self.wait(g, deadline);
            waited = true;
        };
        g.waiting -= 1;
        if waited {
            COMPLETED_AT.set(Some(g.now));
        }
        found
    }

    /// `epoll_create`: a new epoll instance.
    pub fn epoll_create(&self, size: i32) -> Result<i32, Errno> {
        if size <= 0 {
            return Err(libc::EINVAL);
        }
        self.with(|s| {
            let placeholder = OwnedFd::from(
                std::fs::File::open("/dev/null")
                    .map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?,
            );
            let n = placeholder.as_raw_fd();
            let ep = Epoll {
                _placeholder: placeholder,
                interest: BTreeMap::new(),
            };
            s.epolls.insert(n, ep);
            Ok(n)
        })
    }

    /// `epoll_ctl(epfd, op, fd, events, data)`.
    pub fn epoll_ctl(
        &self,
        epfd: i32,
        op: i32,
        fd: i32,
        events: u32,
        data: u64,
    ) -> Result<(), Errno> {
        self.with(|s| {
            if !s.fds.contains_key(&fd) {
                return Err(libc::EBADF);
            }
            let ep = s.epolls.get_mut(&epfd).ok_or(libc::EINVAL)?;
            let fresh = Interest {
                events,
                data,
                armed: true,
                fired: false,
                last_in: 0,
                last_acked: 0,
            };
            match op {
                libc::EPOLL_CTL_ADD if ep.interest.contains_key(&fd) => Err(libc::EEXIST),
                libc::EPOLL_CTL_ADD => {
                    ep.interest.insert(fd, fresh);
                    Ok(())
                }
                libc::EPOLL_CTL_MOD => {
                    let i = ep.interest.get_mut(&fd).ok_or(libc::ENOENT)?;
                    *i = fresh;
                    Ok(())
                }
                libc::EPOLL_CTL_DEL => ep.interest.remove(&fd).map(|_| ()).ok_or(libc::ENOENT),
                _ => Err(libc::EINVAL),
            }
        })
    }

    /// `epoll_wait(epfd, max, timeout_ms)`: the ready descriptors' events and data, at most `max`,
    /// waiting in virtual time. Level-triggered, an interest reports while its descriptor is ready;
    /// edge-triggered (`EPOLLET`), when something happened since the last report (data arrived,
    /// data sent was acknowledged, or the interest was just added or changed), with the whole
    /// ready mask as Linux reports it; `EPOLLONESHOT` disarms it after one report.
    pub fn epoll_wait(
        &self,
        epfd: i32,
        max: usize,
        timeout_ms: i32,
    ) -> Result<Vec<(u32, u64)>, Errno> {
        if !self.with(|s| Ok::<_, Errno>(s.epolls.contains_key(&epfd)))? {
            return Err(libc::EINVAL);
        }
        Ok(self.wait_ready(timeout_ms, |g| g.epoll_ready(epfd, max)))
    }

    /// `ioctl(FIONREAD)` (`SIOCINQ`): bytes ready to read; `ioctl(TIOCOUTQ)` (`SIOCOUTQ`): bytes
    /// not yet acknowledged (the stack reports whether any are, not how many, when it cannot say).
    pub fn ioctl_int(&self, fd: i32, request: u64) -> Result<i32, Errno> {
        self.with(|s| {
            let stream = s.stream(fd).map_err(|_| libc::EINVAL)?;
            let mut t = s.stack.tcp(stream);
            let n = match request {
                libc::FIONREAD => t.available(),
                libc::TIOCOUTQ => t.unacknowledged(),
                _ => return Err(libc::ENOTTY),
            }
            .map_err(|e| errno_of(&e))?;
            Ok(i32::try_from(n).unwrap_or(i32::MAX))
        })
    }

    /// `ioctl(FIONBIO)`: sets or clears non-blocking mode.
    pub fn set_nonblocking(&self, fd: i32, on: bool) -> Result<(), Errno> {
        self.with(|s| {
            s.fd(fd)?.nonblock = on;
            Ok(())
        })
    }

    /// The local or peer address of `fd`, for tests.
    pub fn addrs(&self, fd: i32) -> Result<(SocketAddr, SocketAddr), Errno> {
        let mut g = self.lock();
        let stream = g.stream(fd)?;
        g.stack.tcp(stream).addrs().map_err(|e| errno_of(&e))
    }

    /// Forgets the placeholder descriptors without closing them: packetdrill closes the ones still
    /// open itself at the end of a script, before it frees the shim.
    pub fn forget_placeholders(&self) {
        let mut g = self.lock();
        for entry in g.fds.values_mut() {
            if let Some(fd) = entry.placeholder.take() {
                std::mem::forget(fd);
            }
        }
    }

    /// The virtual time without moving it (for tests).
    pub fn peek_now(&self) -> u64 {
        self.lock().now
    }
}

/// An epoll instance: the descriptors it watches.
#[derive(Debug)]
struct Epoll {
    /// A real descriptor (on `/dev/null`) whose number is the instance's.
    _placeholder: OwnedFd,
    interest: BTreeMap<i32, Interest>,
}

/// One descriptor an epoll instance watches.
#[derive(Clone, Copy, Debug)]
struct Interest {
    events: u32,
    data: u64,
    /// Just added or changed: the next wait reports what is ready.
    armed: bool,
    /// A one-shot interest that has reported: silent until changed.
    fired: bool,
    /// Bytes received and acknowledged at the last report (edge-triggered).
    last_in: u64,
    last_acked: u64,
}

const EPOLLET: u32 = 1 << 31;
const EPOLLONESHOT: u32 = 1 << 30;

/// Linux's `net.ipv4.tcp_fastopen` bits as fastpath's settings: 0x1 client, 0x2 server, 0x4 client
/// without a cookie, 0x200 server without a cookie, 0x400 every listener with the queue length in
/// the upper 16 bits.
pub fn fast_open_from_sysctl(flags: u32) -> FastOpenConfig {
    FastOpenConfig {
        client: flags & 0x1 != 0,
        server: flags & 0x2 != 0,
        client_without_cookie: flags & 0x4 != 0,
        server_without_cookie: flags & 0x200 != 0,
        every_listener: (flags & 0x400 != 0).then_some((flags >> 16) as usize),
        key: None,
    }
}

/// Linux's `tcp_fastopen_key` (`xxxxxxxx-xxxxxxxx-xxxxxxxx-xxxxxxxx`, a backup key after a comma
/// ignored) as the 16 bytes of `FastOpenConfig::key`: each 32-bit word little-endian.
pub fn parse_fast_open_key(text: &str) -> Option<[u8; 16]> {
    let primary = text.trim().split(',').next()?;
    let mut key = [0u8; 16];
    let mut words = primary.split('-');
    for chunk in key.chunks_exact_mut(4) {
        let word = u32::from_str_radix(words.next()?, 16).ok()?;
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    words.next().is_none().then_some(key)
}

/// Linux's `TCP_INQ` option number, and its control message's type (`TCP_CM_INQ`), `linux/tcp.h`.
pub const TCP_INQ: i32 = 36;

/// Linux's `TCP_CC_INFO` option number (`linux/tcp.h`).
pub const TCP_CC_INFO: i32 = 26;

/// Linux's `SO_MEMINFO` option number (`asm-generic/socket.h`).
pub const SO_MEMINFO: i32 = 55;

/// Linux's `tcpi_state` numbers (`include/net/tcp_states.h`).
const LINUX_CLOSE: u8 = 7;
const LINUX_LISTEN: u8 = 10;

fn linux_state(s: TcpState) -> u8 {
    match s {
        TcpState::Established => 1,
        TcpState::SynSent => 2,
        TcpState::SynReceived => 3,
        TcpState::FinWait1 => 4,
        TcpState::FinWait2 => 5,
        TcpState::TimeWait => 6,
        TcpState::Closed => LINUX_CLOSE,
        TcpState::CloseWait => 8,
        TcpState::LastAck => 9,
        TcpState::Closing => 11,
    }
}

/// The size of `struct tcp_info` as packetdrill declares it (Linux 6.x's, with the ECN counters at
/// the end): packetdrill asserts that `getsockopt` filled all of it.
pub const TCP_INFO_LEN: usize = 280;

/// Linux's "infinite" slow-start threshold, as `tcpi_snd_ssthresh` reports it.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux's `struct tcp_info` for a connection in Linux `state` with figures `info` (none for a
/// socket that is not a connection: only the state is filled in), `now` being the clock for the
/// "milliseconds since" fields. Linux counts in segments what the stack counts in bytes: those are
/// divided by the send MSS (rounded up, so a partly filled segment counts as one, as Linux counts
/// packets). Fields the stack does not know stay 0: `ato`, `fackets`, `last_ack_sent`,
/// `rcv_ssthresh`, `rcv_rtt`, `rcv_space`, the pacing rates, `delivered`, the ECN and D-SACK
/// counters, `rehash`, `total_rto*`.
pub fn tcp_info_bytes(state: u8, info: Option<&ConnectionInfo>, now: Instant) -> Vec<u8> {
    let mut b = vec![0u8; TCP_INFO_LEN];
    b[0] = state;
    let Some(i) = info else {
        return b;
    };
    let put32 =
        |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    let put64 =
        |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let micros = |d: std::time::Duration| sat(d.as_micros() as u64);
    let since_ms = |t: Option<Instant>| {
        t.map_or(0, |t| {
            sat(now.total_micros().saturating_sub(t.total_micros()) / 1000)
        })
    };
    let mss = i.mss.max(1);
    let segments = |bytes: u32| bytes.div_ceil(mss);
    b[1] = match i.congestion_state {
        CongestionState::Open => 0,
        CongestionState::Disorder => 1,
        CongestionState::Recovery => 3,
        CongestionState::Loss => 4,
    };
    b[2] = u8::try_from(i.backoff).unwrap_or(u8::MAX); // icsk_retransmits
    b[3] = u8::try_from(i.probes).unwrap_or(u8::MAX);
    b[4] = u8::try_from(i.backoff).unwrap_or(u8::MAX);
    b[5] = u8::from(i.timestamps)
        | u8::from(i.sack) << 1
        | u8::from(i.window_scaling) << 2
        | u8::from(i.syn_data) << 5;
    b[6] = (i.snd_window_shift & 0xf) | (i.rcv_window_shift & 0xf) << 4;
    put32(&mut b, 8, micros(i.rto));
    put32(&mut b, 16, i.mss);
    // Linux estimates the peer's MSS as the largest segment seen, capped by ours.
    put32(&mut b, 20, i.largest_segment_in.min(i.advertised_mss));
    put32(&mut b, 24, segments(i.unacked));
    put32(&mut b, 28, segments(i.sacked));
    put32(&mut b, 32, segments(i.lost));
    put32(&mut b, 36, segments(i.retransmitted_out));
    put32(&mut b, 44, since_ms(i.last_data_sent));
    put32(&mut b, 52, since_ms(i.last_data_received));
    put32(&mut b, 56, since_ms(i.last_ack_received));
    put32(&mut b, 60, i.path_mtu);
    put32(&mut b, 68, i.srtt.map_or(0, micros));
    put32(&mut b, 72, micros(i.rttvar));
    let ssthresh = if i.ssthresh >= INFINITE_SSTHRESH {
        INFINITE_SSTHRESH
    } else {
        i.ssthresh / mss
    };
    put32(&mut b, 76, ssthresh);
    put32(&mut b, 80, i.cwnd / mss);
    put32(&mut b, 84, i.advertised_mss);
    put32(&mut b, 88, i.dupack_threshold);
    put32(&mut b, 100, sat(i.retransmits));
    put64(&mut b, 120, i.bytes_acked);
    put64(&mut b, 128, i.bytes_received);
    put32(&mut b, 136, sat(i.segments_out));
    put32(&mut b, 140, sat(i.segments_in));
    put32(&mut b, 144, i.not_sent);
    put32(&mut b, 148, i.min_rtt.map_or(u32::MAX, micros));
    put32(&mut b, 152, sat(i.data_segments_in));
    put32(&mut b, 156, sat(i.data_segments_out));
    put64(&mut b, 168, i.busy_time.as_micros() as u64);
    put64(&mut b, 176, i.rwnd_limited.as_micros() as u64);
    put64(&mut b, 184, i.sndbuf_limited.as_micros() as u64);
    put32(&mut b, 192, sat(i.delivered));
    put64(&mut b, 200, i.bytes_sent);
    put64(&mut b, 208, i.bytes_retransmitted);
    put32(&mut b, 216, sat(i.dsack_dups));
    put32(&mut b, 220, sat(i.reorderings));
    put32(&mut b, 228, i.snd_wnd);
    put32(&mut b, 232, i.rcv_wnd);
    b
}

/// Linux's `SO_MEMINFO` (`SK_MEMINFO_*`, nine `u32`s): bytes queued to read, the receive buffer,
/// bytes queued to send (as both allocated and queued), the send buffer; the rest 0.
pub fn meminfo_bytes(queued_in: usize, rcvbuf: i32, queued_out: usize, sndbuf: i32) -> Vec<u8> {
    let sat = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let vals = [
        sat(queued_in),
        rcvbuf.max(0) as u32,
        sat(queued_out),
        sndbuf.max(0) as u32,
        0,
        sat(queued_out),
        0,
        0,
        0,
    ];
    vals.iter().flat_map(|v| v.to_ne_bytes()).collect()
}
