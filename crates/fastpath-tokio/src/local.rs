//! The single-threaded front: a [`Net`] and its handles are `!Send` and live on one thread, in a
//! [`tokio::task::LocalSet`] (`spawn_local` the driver, [`Net::drive`], and the tasks that use
//! sockets). The stack sits in a `RefCell`: a handle's call borrows it, with no lock and no atomic
//! operation. This is the front for a program that fits on one thread (the `Send` front costs more
//! on the multi-threaded runtime; `docs/tokio.md` has the figures), and the one the transparent
//! proxy (`fastpath tunnel`) runs on, a stack per thread.
//! The same types are at the crate's root.
//!
//! [`crate::net`] is the front whose handles are `Send`, for `tokio::spawn` on any runtime.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[cfg(target_os = "linux")]
use fastpath::TunHandle;
use fastpath::{Instant, Stack, TcpState};
#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::ready::{idle, link_waker, would_block, Interest, Waiters, NAP};
#[cfg(target_os = "linux")]
use crate::ready::{register_tun, TunFd};

struct Inner {
    stack: RefCell<Stack>,
    /// Parked tasks, by the socket they wait on.
    waiters: RefCell<Waiters>,
    /// The wakers `wake_ready` takes out of `waiters`, kept for its allocation.
    ready: RefCell<Vec<Waker>>,
    /// Kicks the driver: a handle gave the stack something to send, or changed a timer, or a link
    /// received packets from outside (an in-memory pair's other end transmitted).
    kick: Arc<Notify>,
    #[cfg(target_os = "linux")]
    tun: Option<AsyncFd<TunFd>>,
}

/// A stack, its driver and its sockets' wakers. Cheap to clone (a reference).
#[derive(Clone)]
pub struct Net {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("waiters", &self.inner.waiters.borrow().len())
            .field("tun", &self.has_tun())
            .finish_non_exhaustive()
    }
}

impl Net {
    /// An async front for `stack`, whose links are in-memory (or driven from outside): the driver
    /// sleeps until the stack's next deadline, a handle's call, or a link's wake-up
    /// ([`Stack::set_link_waker`]: an in-memory pair wakes it when its other end transmits).
    pub fn new(stack: Stack) -> Net {
        Net::with(
            stack,
            #[cfg(target_os = "linux")]
            None,
        )
    }

    /// An async front for `stack`, one of whose links is the TUN interface `tun` is a handle to (from
    /// `TunLink::handle`): the driver wakes when its descriptor is readable. Must be called inside a
    /// tokio runtime with I/O enabled. Linux only, as TUN links are.
    #[cfg(target_os = "linux")]
    pub fn with_tun(stack: Stack, tun: TunHandle) -> io::Result<Net> {
        let fd = register_tun(tun)?;
        Ok(Net::with(stack, Some(fd)))
    }

    fn with(mut stack: Stack, #[cfg(target_os = "linux")] tun: Option<AsyncFd<TunFd>>) -> Net {
        stack.set_ready_hints(true);
        let kick = Arc::new(Notify::new());
        stack.set_link_waker(Some(link_waker(&kick)));
        Net {
            inner: Rc::new(Inner {
                stack: RefCell::new(stack),
                waiters: RefCell::new(Waiters::new()),
                ready: RefCell::new(Vec::new()),
                kick,
                #[cfg(target_os = "linux")]
                tun,
            }),
        }
    }

    /// Whether the driver sleeps on a TUN interface's descriptor.
    fn has_tun(&self) -> bool {
        #[cfg(target_os = "linux")]
        let tun = self.inner.tun.is_some();
        #[cfg(not(target_os = "linux"))]
        let tun = false;
        tun
    }

    /// Runs `f` on the stack (for its configuration calls, counters and the like). Do not call a
    /// handle's method inside `f`.
    pub fn with_stack<R>(&self, f: impl FnOnce(&mut Stack) -> R) -> R {
        // Whatever `f` changed, no hint may say so: test every parked task next time.
        self.inner.waiters.borrow_mut().scan_all_next();
        let result = f(&mut self.inner.stack.borrow_mut());
        self.kick();
        result
    }

    /// How many times the driver has tested whether a parked task's socket is ready: with the
    /// stack's readiness hints, about one per socket touched, not one per parked task per poll. For
    /// tests and diagnostics.
    pub fn readiness_checks(&self) -> u64 {
        self.inner.waiters.borrow().checks()
    }

    /// The driver: polls the stack, wakes the tasks whose sockets are ready, and sleeps until there is
    /// something to do. Runs until dropped; spawn it with `tokio::task::spawn_local`.
    pub async fn drive(self) {
        loop {
            let work = self.inner.stack.borrow_mut().poll(Instant::now());
            self.wake_ready();
            if work > 0 {
                tokio::task::yield_now().await;
                continue;
            }
            let now = Instant::now();
            let timer = self
                .inner
                .stack
                .borrow()
                .next_deadline()
                .map(|d| d.saturating_since(now));
            let nap = timer.map_or(NAP, |t| t.min(NAP));
            idle(
                &self.inner.kick,
                #[cfg(target_os = "linux")]
                self.inner.tun.as_ref(),
                nap,
            )
            .await;
        }
    }

    /// Wakes every task whose socket is now ready, and forgets its waiter. Only the tasks parked on
    /// sockets the stack hinted at are tested, unless the hints are incomplete, the stack was used
    /// directly, or [`FULL_SCAN_EVERY`] passed: then every parked task is.
    fn wake_ready(&self) {
        let inner = &self.inner;
        let mut ready = inner.ready.borrow_mut();
        inner
            .waiters
            .borrow_mut()
            .take_ready(&mut inner.stack.borrow_mut(), &mut ready);
        // Woken tasks run later (the driver yields first): nothing borrowed here is borrowed by them
        // now.
        for w in ready.drain(..) {
            w.wake();
        }
    }

    /// Leaves `cx`'s waker for `interest` (replacing one the same task left before) under each of
    /// the socket's keys.
    fn wait(&self, interest: Interest, cx: &Context<'_>) {
        self.inner.waiters.borrow_mut().park(interest, cx.waker());
    }

    /// Tells the driver the stack has something new to do.
    fn kick(&self) {
        self.inner.kick.notify_one();
    }
}

/// Runs `f`, a non-blocking call, until it does not return `WouldBlock`, waiting for `interest` in
/// between.
fn poll_io<R>(
    net: &Net,
    interest: Interest,
    cx: &Context<'_>,
    f: impl FnOnce(&mut Stack) -> io::Result<R>,
) -> Poll<io::Result<R>> {
    let result = f(&mut net.inner.stack.borrow_mut());
    match result {
        Err(e) if would_block(&e) => {
            net.wait(interest, cx);
            Poll::Pending
        }
        other => Poll::Ready(other),
    }
}

/// A UDP socket of a [`Net`].
#[derive(Debug)]
pub struct UdpSocket {
    net: Net,
    socket: fastpath::UdpSocket,
}

impl UdpSocket {
    /// Binds a socket to `local` (see `Stack::udp_bind`: its family is the address's).
    pub fn bind(net: &Net, local: SocketAddr) -> io::Result<UdpSocket> {
        let socket = net.inner.stack.borrow_mut().udp_bind(local)?;
        Ok(UdpSocket {
            net: net.clone(),
            socket,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.net
            .inner
            .stack
            .borrow_mut()
            .udp(self.socket)
            .local_addr()
    }

    /// Sends `buf` to `to` (never waits: the datagram is queued for the link, and the driver sends it).
    pub async fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        let n = self
            .net
            .inner
            .stack
            .borrow_mut()
            .udp(self.socket)
            .send_to(buf, to)?;
        self.net.kick();
        Ok(n)
    }

    /// Receives a datagram into `buf`: its length and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| {
            poll_io(&self.net, Interest::UdpRead(self.socket), cx, |s| {
                s.udp(self.socket).recv_from(buf)
            })
        })
        .await
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        if let Ok(mut stack) = self.net.inner.stack.try_borrow_mut() {
            let _ = stack.udp(self.socket).close();
        }
    }
}

/// Interception of UDP on a [`Net`] (`Stack::udp_intercept`): datagrams to any address and port
/// arriving on an interface that intercepts, each with its sender and the destination it was sent
/// to, and answers sent from such a destination. Interception of UDP is on while this lives.
#[derive(Debug)]
pub struct UdpIntercept {
    net: Net,
}

impl UdpIntercept {
    /// Turns interception of UDP on.
    pub fn new(net: &Net) -> UdpIntercept {
        net.inner.stack.borrow_mut().udp_intercept(true);
        UdpIntercept { net: net.clone() }
    }

    /// Receives the next intercepted datagram into `buf`: its length, its sender and its
    /// destination. Cancellation-safe.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        poll_fn(|cx| {
            poll_io(&self.net, Interest::Intercepted, cx, |s| {
                s.udp_recv_intercepted(buf)
            })
        })
        .await
    }

    /// Receives an intercepted datagram if one is queued, without waiting: `WouldBlock` when
    /// none is. For draining a burst after [`UdpIntercept::recv`] returned its first datagram.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        self.net.inner.stack.borrow_mut().udp_recv_intercepted(buf)
    }

    /// Tells the application at `app` that destination `dst` refused its datagram of `len` bytes
    /// (an ICMP port unreachable; see `Stack::udp_intercepted_unreachable`).
    pub fn unreachable(&self, app: SocketAddr, dst: SocketAddr, len: usize) -> io::Result<()> {
        self.net
            .inner
            .stack
            .borrow_mut()
            .udp_intercepted_unreachable(app, dst, len)?;
        self.net.kick();
        Ok(())
    }

    /// Sends `buf` from `from` (an intercepted destination) to `to` (never waits).
    pub fn send_from(&self, buf: &[u8], from: SocketAddr, to: SocketAddr) -> io::Result<usize> {
        let n = self
            .net
            .inner
            .stack
            .borrow_mut()
            .udp_send_from(buf, from, to)?;
        self.net.kick();
        Ok(n)
    }
}

impl Drop for UdpIntercept {
    fn drop(&mut self) {
        if let Ok(mut stack) = self.net.inner.stack.try_borrow_mut() {
            stack.udp_intercept(false);
        }
    }
}

/// A listening TCP socket of a [`Net`].
#[derive(Debug)]
pub struct TcpListener {
    net: Net,
    listener: fastpath::TcpListener,
}

impl TcpListener {
    /// Listens on `local` with room for `backlog` connections (see `Stack::tcp_listen`).
    pub fn bind(net: &Net, local: SocketAddr, backlog: usize) -> io::Result<TcpListener> {
        let listener = net.inner.stack.borrow_mut().tcp_listen(local, backlog)?;
        Ok(TcpListener {
            net: net.clone(),
            listener,
        })
    }

    /// The stack's intercepting listener (`Stack::tcp_intercept`): it accepts connections to any
    /// address and port arriving on an interface that intercepts (`Stack::set_intercept`); each
    /// stream's [`TcpStream::addrs`] gives the destination its peer asked for as the local address.
    pub fn intercept(net: &Net, backlog: usize) -> io::Result<TcpListener> {
        let listener = net.inner.stack.borrow_mut().tcp_intercept(backlog)?;
        Ok(TcpListener {
            net: net.clone(),
            listener,
        })
    }

    /// The intercepting listener holding each SYN (`Stack::tcp_intercept_holding`): every accepted
    /// stream is held, unanswered, until [`TcpStream::confirm`], [`TcpStream::abort`] (a RST),
    /// [`TcpStream::unreachable`] (an ICMP error), or its drop (silence). A transparent proxy
    /// connects to the real destination first and answers the application as it was answered.
    pub fn intercept_holding(net: &Net, backlog: usize) -> io::Result<TcpListener> {
        let listener = net
            .inner
            .stack
            .borrow_mut()
            .tcp_intercept_holding(backlog)?;
        Ok(TcpListener {
            net: net.clone(),
            listener,
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.net
            .inner
            .stack
            .borrow_mut()
            .tcp_listener(self.listener)
            .local_addr()
    }

    /// Takes the next established connection, waiting for one.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = poll_fn(|cx| {
            poll_io(&self.net, Interest::Accept(self.listener), cx, |s| {
                s.tcp_listener(self.listener).accept()
            })
        })
        .await?;
        Ok((
            TcpStream {
                net: self.net.clone(),
                stream,
            },
            peer,
        ))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        if let Ok(mut stack) = self.net.inner.stack.try_borrow_mut() {
            stack.tcp_listener(self.listener).close();
        }
        self.net.kick();
    }
}

/// A TCP connection of a [`Net`]: `AsyncRead` and `AsyncWrite`.
#[derive(Debug)]
pub struct TcpStream {
    net: Net,
    stream: fastpath::TcpStream,
}

impl TcpStream {
    /// Opens a connection to `remote` and waits until it is established (or refused, or timed out).
    pub async fn connect(net: &Net, remote: SocketAddr) -> io::Result<TcpStream> {
        let stream = net.inner.stack.borrow_mut().tcp_connect(remote)?;
        net.kick();
        let stream = TcpStream {
            net: net.clone(),
            stream,
        };
        poll_fn(|cx| {
            poll_io(&stream.net, Interest::Connect(stream.stream), cx, |s| {
                let mut t = s.tcp(stream.stream);
                if t.is_established() {
                    return Ok(());
                }
                match t.state()? {
                    TcpState::Closed => Err(t.take_error()?.unwrap_or_else(|| {
                        io::Error::new(io::ErrorKind::ConnectionAborted, "connection closed")
                    })),
                    _ => Err(io::ErrorKind::WouldBlock.into()),
                }
            })
        })
        .await?;
        Ok(stream)
    }

    /// Local and remote addresses.
    pub fn addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        self.net.inner.stack.borrow_mut().tcp(self.stream).addrs()
    }

    /// The local address (for an intercepted stream, the destination its peer asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.addrs().map(|(local, _)| local)
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.addrs().map(|(_, remote)| remote)
    }

    /// Splits the stream into a reading and a writing half that borrow it (as
    /// `tokio::net::TcpStream::split`), for two futures of one task.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// True while the stream is held (from [`TcpListener::intercept_holding`]): its peer's SYN is
    /// not answered yet.
    pub fn is_held(&self) -> bool {
        self.net.inner.stack.borrow_mut().tcp(self.stream).is_held()
    }

    /// Answers a held stream's SYN: the handshake completes, and reads and writes work as on any
    /// stream (bytes written before the peer's last ACK are sent after it).
    pub fn confirm(&self) -> io::Result<()> {
        self.act(|mut t| t.confirm())
    }

    /// Answers a held stream's SYN with an ICMP destination unreachable of `why`, and drops it: the
    /// peer's connect fails with "no route to host" or "network unreachable".
    pub fn unreachable(&self, why: fastpath::Unreachable) -> io::Result<()> {
        self.act(|t| t.unreachable(why))
    }

    /// Runs `f` on the connection, then wakes the driver to send what it queued.
    fn act<R>(&self, f: impl FnOnce(fastpath::TcpStreamRef<'_>) -> R) -> R {
        let result = f(self.net.inner.stack.borrow_mut().tcp(self.stream));
        self.net.kick();
        result
    }

    /// Aborts the connection: a RST to the peer, and what is queued either way is discarded. (A held
    /// stream's peer sees its connect refused.)
    pub fn abort(&self) {
        if let Ok(mut stack) = self.net.inner.stack.try_borrow_mut() {
            stack.tcp(self.stream).abort();
        }
        self.net.kick();
    }

    /// Zero-copy read (paper 002 §3.1): waits until the stream has bytes to read, has ended or has
    /// failed; then lends the bytes to `f` in the stack's own buffers, one buffer at a time, until `f`
    /// takes less than it was offered, and returns how many it took. `Ok(0)` with `f` never called is
    /// the end of the stream; with `f` called, `f` took nothing this time (a relay whose other side
    /// is full, say: wait for that side, then call again). Bytes `f` did not take stay queued, so
    /// this is cancellation-safe: dropping the future loses nothing.
    pub async fn read_with(&self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        poll_fn(|cx| {
            let offered = Cell::new(false);
            let result = poll_io(&self.net, Interest::Read(self.stream), cx, |s| {
                let taken = s.tcp(self.stream).read_with(|data| {
                    offered.set(true);
                    f(data)
                });
                match taken {
                    // Bytes were there, and `f` took none of them.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && offered.get() => Ok(0),
                    other => other,
                }
            });
            if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
                // The window opened: the driver sends the update if one is owed.
                self.net.kick();
            }
            result
        })
        .await
    }

    /// Zero-copy write (paper 002 §3.1): waits until the send buffer has room, then lets `fill`
    /// write up to `max` bytes straight into it (one contiguous stretch, which may be shorter) and
    /// returns how many it wrote, which may be 0. Cancellation-safe: `fill` runs only when the
    /// future completes.
    pub async fn write_with(
        &self,
        max: usize,
        mut fill: impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        poll_fn(|cx| {
            let result = poll_io(&self.net, Interest::Write(self.stream), cx, |s| {
                s.tcp(self.stream).write_with(max, &mut fill)
            });
            if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
                self.net.kick();
            }
            result
        })
        .await
    }

    /// Turns Nagle's algorithm off (`TCP_NODELAY`) or on.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.net
            .inner
            .stack
            .borrow_mut()
            .tcp(self.stream)
            .set_nodelay(on)
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_read(cx, buf)
    }
}

/// Reading through a shared reference, as tokio's own `TcpStream` allows: one task may read while
/// another writes through `&TcpStream`, with no lock between them.
impl AsyncRead for &TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this: &TcpStream = self.get_mut();
        let result = poll_io(&this.net, Interest::Read(this.stream), cx, |s| {
            s.tcp(this.stream).read(buf.initialize_unfilled())
        });
        match result {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                if n > 0 {
                    // The window opened: the driver sends the update.
                    this.net.kick();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_shutdown(cx)
    }
}

/// Writing through a shared reference, as tokio's own `TcpStream` allows: one task may read with
/// [`TcpStream::read_with`] while another writes, with no lock between them.
impl AsyncWrite for &TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this: &TcpStream = self.get_mut();
        let result = poll_io(&this.net, Interest::Write(this.stream), cx, |s| {
            s.tcp(this.stream).write(buf)
        });
        if matches!(result, Poll::Ready(Ok(_))) {
            this.net.kick();
        }
        result
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are queued in the connection; the driver sends them as the windows allow.
        self.net.kick();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.act(|mut t| t.shutdown_write()))
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // The connection finishes in the background (queued data, then FIN), as a closed socket does.
        if let Ok(mut stack) = self.net.inner.stack.try_borrow_mut() {
            stack.tcp(self.stream).close();
        }
        self.net.kick();
    }
}

/// The reading half of [`TcpStream::split`]: `AsyncRead`.
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of [`TcpStream::split`]: `AsyncWrite`; its `shutdown` sends FIN.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

impl ReadHalf<'_> {
    /// The stream the half borrows (for its addresses, `read_with` and the like).
    pub fn stream(&self) -> &TcpStream {
        self.0
    }
}

impl WriteHalf<'_> {
    /// The stream the half borrows (for its addresses, `write_with` and the like).
    pub fn stream(&self) -> &TcpStream {
        self.0
    }
}

impl AsyncRead for ReadHalf<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteHalf<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
