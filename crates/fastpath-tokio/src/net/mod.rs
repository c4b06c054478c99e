//! The front whose handles are `Send`, shaped like `tokio::net`: [`TcpListener`], [`TcpStream`]
//! (with [`split`](TcpStream::split) and [`into_split`](TcpStream::into_split)) and
//! [`UdpSocket`], each taking the [`Net`] it belongs to as its first argument. They work on any
//! runtime, the multi-threaded one included, from tasks started with `tokio::spawn`.
//!
//! A [`Net`] keeps its stack, and the table of tasks parked on the stack's sockets, behind one
//! `std::sync::Mutex`. [`Net::new`] spawns the driver, a task that locks it to poll the stack, takes
//! the wakers of the tasks whose sockets became ready, unlocks, wakes them, and sleeps until the
//! stack's next deadline, a handle's call that gave the stack something to send, a link's wake-up (an
//! in-memory pair's other end transmitting) or a TUN descriptor turning readable. A handle's call
//! locks the same mutex for one non-blocking call on the stack and, when that would block, parks its
//! waker under the same lock, so no readiness can slip between the try and the park.
//!
//! The driver ends once every handle (the `Net`'s clones and the sockets, which hold one) is dropped
//! and the stack has no TCP connection left, so that closed streams still finish (their queued data,
//! then FIN) in the background.

mod tcp;
mod udp;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

#[cfg(target_os = "linux")]
use fastpath::TunHandle;
use fastpath::{Instant, Stack};
#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use crate::ready::{idle, link_waker, would_block, Interest, Waiters, NAP};
#[cfg(target_os = "linux")]
use crate::ready::{register_tun, TunFd};

pub use tcp::{
    OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, TcpListener, TcpStream, WriteHalf,
};
pub use udp::{UdpIntercept, UdpSocket};

/// What the mutex guards: the stack and its parked tasks, locked together.
struct Core {
    stack: Stack,
    waiters: Waiters,
}

struct Shared {
    core: Mutex<Core>,
    /// Kicks the driver: a handle gave the stack something to send or changed a timer, a link
    /// received packets from outside, or a handle was dropped.
    kick: Arc<Notify>,
}

/// A stack behind a mutex, its driver task and its sockets' wakers: `Send` and `Sync`, and cheap to
/// clone (a reference).
#[derive(Clone)]
pub struct Net {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("waiters", &self.lock().waiters.len())
            .finish_non_exhaustive()
    }
}

impl Net {
    /// An async front for `stack`, whose links are in-memory (or driven from outside), with its driver
    /// spawned on the current runtime (`tokio::spawn`). The driver sleeps until the stack's next
    /// deadline, a handle's call, or a link's wake-up ([`Stack::set_link_waker`]: an in-memory pair
    /// wakes it when its other end transmits).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn new(stack: Stack) -> Net {
        Net::start(
            stack,
            #[cfg(target_os = "linux")]
            None,
        )
    }

    /// An async front for `stack`, one of whose links is the TUN interface `tun` is a handle to (from
    /// `TunLink::handle`), with its driver spawned on the current runtime: it also wakes when the
    /// descriptor is readable. Must be called inside a tokio runtime with I/O enabled. Linux only, as
    /// TUN links are.
    #[cfg(target_os = "linux")]
    pub fn with_tun(stack: Stack, tun: TunHandle) -> io::Result<Net> {
        let fd = register_tun(tun)?;
        Ok(Net::start(stack, Some(fd)))
    }

    fn start(mut stack: Stack, #[cfg(target_os = "linux")] tun: Option<AsyncFd<TunFd>>) -> Net {
        stack.set_ready_hints(true);
        let kick = Arc::new(Notify::new());
        stack.set_link_waker(Some(link_waker(&kick)));
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                stack,
                waiters: Waiters::new(),
            }),
            kick,
        });
        tokio::spawn(drive(
            shared.clone(),
            #[cfg(target_os = "linux")]
            tun,
        ));
        Net { shared }
    }

    /// Runs `f` on the stack, locked (for its configuration calls, counters and the like), then
    /// wakes the driver for what `f` queued. Do not call a handle's method inside `f`, nor drop a
    /// handle there: the lock is held, and the call would wait for it for ever.
    pub fn with_stack<R>(&self, f: impl FnOnce(&mut Stack) -> R) -> R {
        let result = {
            let mut core = self.lock();
            // Whatever `f` changed, no hint may say so: test every parked task next time.
            core.waiters.scan_all_next();
            f(&mut core.stack)
        };
        self.kick();
        result
    }

    /// How many times the driver has tested whether a parked task's socket is ready (for tests and
    /// diagnostics; see [`crate::Net::readiness_checks`]).
    pub fn readiness_checks(&self) -> u64 {
        self.lock().waiters.checks()
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic in a call on the stack leaves it as any failed call does: usable.
        self.shared.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the stack (one non-blocking call).
    fn call<R>(&self, f: impl FnOnce(&mut Stack) -> R) -> R {
        f(&mut self.lock().stack)
    }

    /// Runs `f`, a non-blocking call on the stack; when it would block, parks `cx`'s waker for
    /// `interest` under the same lock, so that the driver's next poll cannot miss it.
    fn poll_io<R>(
        &self,
        interest: Interest,
        cx: &Context<'_>,
        f: impl FnOnce(&mut Stack) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let mut core = self.lock();
        let core = &mut *core;
        match f(&mut core.stack) {
            Err(e) if would_block(&e) => {
                core.waiters.park(interest, cx.waker());
                Poll::Pending
            }
            other => Poll::Ready(other),
        }
    }

    /// Tells the driver the stack has something new to do.
    fn kick(&self) {
        self.shared.kick.notify_one();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // The driver checks whether it is the last holder of the stack.
        self.kick();
    }
}

/// The driver: polls the stack, wakes the tasks whose sockets are ready, and sleeps until there is
/// something to do. Ends when it alone holds the stack and no TCP connection is left.
async fn drive(shared: Arc<Shared>, #[cfg(target_os = "linux")] tun: Option<AsyncFd<TunFd>>) {
    let mut ready: Vec<Waker> = Vec::new();
    loop {
        let (work, deadline, done) = {
            let mut core = shared.core.lock().unwrap_or_else(|e| e.into_inner());
            let core = &mut *core;
            let work = core.stack.poll(Instant::now());
            core.waiters.take_ready(&mut core.stack, &mut ready);
            let quiet = work == 0;
            let deadline = if quiet {
                core.stack.next_deadline()
            } else {
                None
            };
            let done =
                quiet && Arc::strong_count(&shared) == 1 && core.stack.tcp_connections() == 0;
            (work, deadline, done)
        };
        // Woken with the lock released: a woken task may run at once on another thread.
        for w in ready.drain(..) {
            w.wake();
        }
        if done {
            return;
        }
        if work > 0 {
            tokio::task::yield_now().await;
            continue;
        }
        let nap = deadline.map_or(NAP, |d| d.saturating_since(Instant::now()).min(NAP));
        idle(
            &shared.kick,
            #[cfg(target_os = "linux")]
            tun.as_ref(),
            nap,
        )
        .await;
    }
}

/// Every address `addr` resolves to (`tokio::net::lookup_host`: a `SocketAddr` or a literal costs
/// no lookup).
async fn resolve(addr: impl tokio::net::ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr).await?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(addrs)
}
