//! What both fronts share: what a parked task waits for, the table of parked tasks the driver
//! wakes from the stack's readiness hints, the waker the links call, and a TUN descriptor as tokio's
//! reactor takes it.

use std::collections::HashMap;
#[cfg(target_os = "linux")]
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

#[cfg(target_os = "linux")]
use fastpath::TunHandle;
use fastpath::{ReadyKey, Stack, TcpState};
#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// The longest a driver sleeps when no timer is due sooner: the backstop for a link that cannot wake
/// it (a custom link without [`fastpath::link::Link::set_rx_waker`], an `Impaired` link's delayed
/// packets). An in-memory pair and a TUN descriptor wake the driver themselves.
pub(crate) const NAP: Duration = Duration::from_millis(100);

/// How often the driver tests every parked task, whatever the stack's readiness hints say: the
/// backstop for a change no hint reports (a handle dropped while another task waited on it; a call
/// through `with_stack` is covered at once).
const FULL_SCAN_EVERY: Duration = Duration::from_millis(100);

/// What a task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    /// A datagram (or an error) to read on a UDP socket.
    UdpRead(fastpath::UdpSocket),
    /// Bytes, the end of the stream or an error to read on a connection.
    Read(fastpath::TcpStream),
    /// Room in a connection's send buffer (or its end).
    Write(fastpath::TcpStream),
    /// A connection established or failed.
    Connect(fastpath::TcpStream),
    /// A connection to accept.
    Accept(fastpath::TcpListener),
    /// An intercepted datagram to read.
    Intercepted,
}

impl Interest {
    /// The readiness keys of the socket waited on: one, or two for a dual-stack listener.
    fn keys(self) -> impl Iterator<Item = ReadyKey> {
        let (one, two) = match self {
            Interest::UdpRead(s) => (s.ready_key(), None),
            Interest::Read(s) | Interest::Write(s) | Interest::Connect(s) => (s.ready_key(), None),
            Interest::Accept(l) => {
                let mut keys = l.ready_keys();
                let first = keys.next().unwrap_or(ReadyKey::INTERCEPTED);
                (first, keys.next())
            }
            Interest::Intercepted => (ReadyKey::INTERCEPTED, None),
        };
        std::iter::once(one).chain(two)
    }

    /// Whether the interest is satisfied now.
    fn is_ready(self, stack: &mut Stack) -> bool {
        match self {
            Interest::UdpRead(s) => {
                // An error pending or gone socket count as ready: the next call returns it.
                stack.udp(s).queued().map_or(true, |(n, _)| n > 0)
            }
            Interest::Read(s) => {
                let mut t = stack.tcp(s);
                t.readable() || t.state().is_err()
            }
            Interest::Write(s) => {
                let mut t = stack.tcp(s);
                t.writable() || t.state().map_or(true, |st| st == TcpState::Closed)
            }
            Interest::Connect(s) => {
                let mut t = stack.tcp(s);
                t.is_established() || t.state().map_or(true, |st| st == TcpState::Closed)
            }
            Interest::Accept(l) => stack.tcp_listener(l).readable(),
            Interest::Intercepted => stack.udp_intercepted_readable(),
        }
    }
}

/// The parked tasks of one stack, by the socket they wait on (a dual-stack listener's under both its
/// keys), and what the driver needs to find the ready ones.
pub(crate) struct Waiters {
    parked: HashMap<ReadyKey, Vec<(Interest, Waker)>>,
    /// The stack's readiness hints, kept for the allocation.
    hints: Vec<ReadyKey>,
    /// Test every parked task next time (the stack was used directly).
    scan_all: bool,
    /// When every parked task was last tested.
    last_scan: std::time::Instant,
    /// Readiness tests run so far.
    checks: u64,
}

impl Waiters {
    pub(crate) fn new() -> Waiters {
        Waiters {
            parked: HashMap::new(),
            hints: Vec::new(),
            scan_all: false,
            last_scan: std::time::Instant::now(),
            checks: 0,
        }
    }

    /// Leaves `waker` for `interest` (replacing one the same task left before) under each of the
    /// socket's keys.
    pub(crate) fn park(&mut self, interest: Interest, waker: &Waker) {
        for key in interest.keys() {
            let list = self.parked.entry(key).or_default();
            match list
                .iter_mut()
                .find(|(i, w)| *i == interest && w.will_wake(waker))
            {
                Some(slot) => slot.1.clone_from(waker),
                None => list.push((interest, waker.clone())),
            }
        }
    }

    /// Makes the next [`Waiters::take_ready`] test every parked task: the stack was changed in a way
    /// no hint reports.
    pub(crate) fn scan_all_next(&mut self) {
        self.scan_all = true;
    }

    /// Readiness tests run so far.
    pub(crate) fn checks(&self) -> u64 {
        self.checks
    }

    /// Parked wakers (a task parked on a dual-stack listener counts twice).
    pub(crate) fn len(&self) -> usize {
        self.parked.values().map(Vec::len).sum()
    }

    /// Moves the waker of every task whose socket is now ready to `ready`, forgetting it here. Only
    /// the tasks parked on sockets the stack hinted at are tested, unless the hints are incomplete,
    /// the stack was used directly, or [`FULL_SCAN_EVERY`] passed: then every parked task is.
    pub(crate) fn take_ready(&mut self, stack: &mut Stack, ready: &mut Vec<Waker>) {
        self.hints.clear();
        let complete = stack.take_ready_hints(&mut self.hints);
        if self.parked.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        let full = !complete
            || std::mem::take(&mut self.scan_all)
            || now.duration_since(self.last_scan) >= FULL_SCAN_EVERY;
        let mut checks = 0u64;
        let mut test = |list: &mut Vec<(Interest, Waker)>| {
            list.retain(|(interest, waker)| {
                checks += 1;
                let now = interest.is_ready(stack);
                if now {
                    ready.push(waker.clone());
                }
                !now
            });
        };
        if full {
            self.last_scan = now;
            self.parked.retain(|_, list| {
                test(list);
                !list.is_empty()
            });
        } else {
            self.hints.sort_unstable();
            self.hints.dedup();
            for key in &self.hints {
                if let Some(list) = self.parked.get_mut(key) {
                    test(list);
                    if list.is_empty() {
                        self.parked.remove(key);
                    }
                }
            }
        }
        self.checks += checks;
    }
}

/// The waker a stack's links call when packets arrive for them (an in-memory pair's other end
/// transmitted): it kicks the driver.
pub(crate) struct Kick(pub(crate) Arc<Notify>);

impl Wake for Kick {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

/// A waker for the links of a stack whose driver waits on `kick`.
pub(crate) fn link_waker(kick: &Arc<Notify>) -> Waker {
    Waker::from(Arc::new(Kick(kick.clone())))
}

/// A TUN interface's descriptor as tokio's reactor takes it (the handle keeps it open).
#[cfg(target_os = "linux")]
pub(crate) struct TunFd(pub(crate) TunHandle);

#[cfg(target_os = "linux")]
impl AsRawFd for TunFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers a TUN interface's descriptor with the current runtime's reactor.
#[cfg(target_os = "linux")]
pub(crate) fn register_tun(tun: TunHandle) -> std::io::Result<AsyncFd<TunFd>> {
    #[allow(unsafe_code)]
    // SAFETY: `TunFd` owns a `TunHandle`, which holds the interface's `OwnedFd` (shared with the
    // link) open for as long as the handle lives, so the descriptor stays valid and the same for
    // the whole life of the `AsyncFd`, and `as_raw_fd` returns that one descriptor every time.
    let fd = unsafe { AsyncFd::register(TunFd(tun)) }.map_err(std::io::Error::from)?;
    Ok(fd)
}

/// Sleeps until `kick` is notified, `tun`'s descriptor turns readable, or `nap` passes: what a
/// driver does when a poll found nothing to do.
pub(crate) async fn idle(
    kick: &Notify,
    #[cfg(target_os = "linux")] tun: Option<&AsyncFd<TunFd>>,
    nap: Duration,
) {
    #[cfg(target_os = "linux")]
    if let Some(fd) = tun {
        tokio::select! {
            ready = fd.readable() => {
                // The next poll reads what is there; readiness is cleared so that the reactor
                // reports the next arrival.
                if let Ok(mut guard) = ready {
                    guard.clear_ready();
                }
            }
            _ = kick.notified() => {}
            _ = tokio::time::sleep(nap) => {}
        }
        return;
    }
    tokio::select! {
        _ = kick.notified() => {}
        _ = tokio::time::sleep(nap) => {}
    }
}

/// Whether `e` means "try again when ready".
pub(crate) fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}
