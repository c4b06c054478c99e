//! TCP on the `Send` front: a listener, a stream, and the stream's borrowed and owned halves.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use fastpath::TcpState;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{resolve, Net};
use crate::ready::{would_block, Interest};

/// The backlog of [`TcpListener::bind`], as tokio's.
const BACKLOG: usize = 1024;

/// A listening TCP socket of a [`Net`], as `tokio::net::TcpListener`.
#[derive(Debug)]
pub struct TcpListener {
    net: Net,
    listener: fastpath::TcpListener,
}

impl TcpListener {
    /// Listens on the first address `addr` resolves to that the stack accepts, with a backlog of
    /// 1,024 connections. A listener on `[::]` is dual-stack, as the stack's own.
    pub async fn bind(net: &Net, addr: impl tokio::net::ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::bind_with_backlog(net, addr, BACKLOG).await
    }

    /// [`TcpListener::bind`] with room for `backlog` connections waiting to be accepted.
    pub async fn bind_with_backlog(
        net: &Net,
        addr: impl tokio::net::ToSocketAddrs,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        let mut last = None;
        for local in resolve(addr).await? {
            match net.call(|s| s.tcp_listen(local, backlog)) {
                Ok(listener) => {
                    return Ok(TcpListener {
                        net: net.clone(),
                        listener,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::InvalidInput.into()))
    }

    /// The stack's intercepting listener (`Stack::tcp_intercept`): it accepts connections to any
    /// address and port arriving on an interface that intercepts (`Stack::set_intercept`, through
    /// [`Net::with_stack`]); each stream's [`TcpStream::local_addr`] is the destination its peer
    /// asked for. As [`crate::TcpListener::intercept`].
    pub fn intercept(net: &Net, backlog: usize) -> io::Result<TcpListener> {
        let listener = net.call(|s| s.tcp_intercept(backlog))?;
        Ok(TcpListener {
            net: net.clone(),
            listener,
        })
    }

    /// The intercepting listener holding each SYN (`Stack::tcp_intercept_holding`): every accepted
    /// stream is held, unanswered, until [`TcpStream::confirm`], [`TcpStream::abort`] (a RST),
    /// [`TcpStream::unreachable`] (an ICMP error), or its drop (silence). As
    /// [`crate::TcpListener::intercept_holding`].
    pub fn intercept_holding(net: &Net, backlog: usize) -> io::Result<TcpListener> {
        let listener = net.call(|s| s.tcp_intercept_holding(backlog))?;
        Ok(TcpListener {
            net: net.clone(),
            listener,
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.net
            .call(|s| s.tcp_listener(self.listener).local_addr())
    }

    /// Takes the next established connection, waiting for one. Cancellation-safe: a connection not
    /// taken stays queued.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Takes the next established connection, or parks `cx`'s waker until there is one.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        self.net
            .poll_io(Interest::Accept(self.listener), cx, |s| {
                s.tcp_listener(self.listener).accept()
            })
            .map_ok(|(stream, peer)| {
                (
                    TcpStream {
                        net: self.net.clone(),
                        stream,
                    },
                    peer,
                )
            })
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.net.call(|s| s.tcp_listener(self.listener).close());
        self.net.kick();
    }
}

/// A TCP connection of a [`Net`], as `tokio::net::TcpStream`: `AsyncRead` and `AsyncWrite` (also
/// through `&TcpStream`, so one task may read while another writes), [`split`](TcpStream::split)
/// into borrowed halves and [`into_split`](TcpStream::into_split) into owned ones. Dropping it
/// closes the connection: its queued data, then FIN, in the background.
#[derive(Debug)]
pub struct TcpStream {
    net: Net,
    stream: fastpath::TcpStream,
}

impl TcpStream {
    /// Connects to the addresses `addr` resolves to, one after the other, until a connection is
    /// established; the last error if none is (refused, unreachable, timed out). Dropping the future
    /// aborts the connection being opened.
    pub async fn connect(net: &Net, addr: impl tokio::net::ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for remote in resolve(addr).await? {
            match TcpStream::connect_one(net, remote).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::InvalidInput.into()))
    }

    async fn connect_one(net: &Net, remote: SocketAddr) -> io::Result<TcpStream> {
        let stream = net.call(|s| s.tcp_connect(remote))?;
        net.kick();
        let stream = TcpStream {
            net: net.clone(),
            stream,
        };
        poll_fn(|cx| {
            stream
                .net
                .poll_io(Interest::Connect(stream.stream), cx, |s| {
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

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.addrs().map(|(local, _)| local)
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.addrs().map(|(_, remote)| remote)
    }

    fn addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        self.net.call(|s| s.tcp(self.stream).addrs())
    }

    /// Turns Nagle's algorithm off (`TCP_NODELAY`) or on.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.net.call(|s| s.tcp(self.stream).set_nodelay(on))
    }

    /// True while the stream is held (from [`TcpListener::intercept_holding`]): its peer's SYN is
    /// not answered yet.
    pub fn is_held(&self) -> bool {
        self.net.call(|s| s.tcp(self.stream).is_held())
    }

    /// Answers a held stream's SYN: the handshake completes, and reads and writes work as on any
    /// stream (bytes written before the peer's last ACK are sent after it).
    pub fn confirm(&self) -> io::Result<()> {
        let result = self.net.call(|s| s.tcp(self.stream).confirm());
        self.net.kick();
        result
    }

    /// Answers a held stream's SYN with an ICMP destination unreachable of `why`, and drops it: the
    /// peer's connect fails with "no route to host" or "network unreachable".
    pub fn unreachable(&self, why: fastpath::Unreachable) -> io::Result<()> {
        let result = self.net.call(|s| s.tcp(self.stream).unreachable(why));
        self.net.kick();
        result
    }

    /// Splits the stream into a reading and a writing half that borrow it, for two futures of one
    /// task (`tokio::join!`, `select!`).
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Splits the stream into a reading and a writing half that own it, for two tasks. The
    /// connection closes when both are dropped; dropping the writing half shuts the writing side
    /// down (a FIN), as tokio's does.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let stream = Arc::new(self);
        (
            OwnedReadHalf {
                stream: stream.clone(),
            },
            OwnedWriteHalf {
                stream,
                shutdown_on_drop: true,
            },
        )
    }

    /// Aborts the connection: a RST to the peer, and what is queued either way is discarded.
    pub fn abort(&self) {
        self.net.call(|s| s.tcp(self.stream).abort());
        self.net.kick();
    }

    /// Zero-copy read: waits until the stream has bytes to read, has ended or has failed; then lends
    /// the bytes to `f` in the stack's own buffers (with the stack locked), one buffer at a time,
    /// until `f` takes less than it was offered, and returns how many it took. As
    /// [`crate::TcpStream::read_with`]: `Ok(0)` with `f` never called is the end of the stream;
    /// cancellation-safe.
    pub async fn read_with(&self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        poll_fn(|cx| {
            let offered = Cell::new(false);
            let result = self.net.poll_io(Interest::Read(self.stream), cx, |s| {
                let taken = s.tcp(self.stream).read_with(|data| {
                    offered.set(true);
                    f(data)
                });
                match taken {
                    // Bytes were there, and `f` took none of them.
                    Err(e) if would_block(&e) && offered.get() => Ok(0),
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

    /// Zero-copy write: waits until the send buffer has room, then lets `fill` write up to `max`
    /// bytes straight into it (with the stack locked) and returns how many it wrote, which may be 0.
    /// Cancellation-safe: `fill` runs only when the future completes.
    pub async fn write_with(
        &self,
        max: usize,
        mut fill: impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        poll_fn(|cx| {
            let result = self.net.poll_io(Interest::Write(self.stream), cx, |s| {
                s.tcp(self.stream).write_with(max, &mut fill)
            });
            if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
                self.net.kick();
            }
            result
        })
        .await
    }

    fn poll_read_priv(&self, cx: &Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let result = self.net.poll_io(Interest::Read(self.stream), cx, |s| {
            s.tcp(self.stream).read(buf.initialize_unfilled())
        });
        match result {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                if n > 0 {
                    // The window opened: the driver sends the update.
                    self.net.kick();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_priv(&self, cx: &Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = self.net.poll_io(Interest::Write(self.stream), cx, |s| {
            s.tcp(self.stream).write(buf)
        });
        if matches!(result, Poll::Ready(Ok(_))) {
            self.net.kick();
        }
        result
    }

    fn flush_priv(&self) -> Poll<io::Result<()>> {
        // Written bytes are queued in the connection; the driver sends them as the windows allow.
        self.net.kick();
        Poll::Ready(Ok(()))
    }

    fn shutdown_priv(&self) -> Poll<io::Result<()>> {
        let result = self.net.call(|s| s.tcp(self.stream).shutdown_write());
        self.net.kick();
        Poll::Ready(result)
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // The connection finishes in the background (queued data, then FIN), as a closed socket does.
        self.net.call(|s| s.tcp(self.stream).close());
        self.net.kick();
    }
}

/// What the `AsyncRead` and `AsyncWrite` implementations need: the stream behind a handle.
trait Stream {
    fn tcp(&self) -> &TcpStream;
}

impl Stream for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Stream for &TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Stream for ReadHalf<'_> {
    fn tcp(&self) -> &TcpStream {
        self.0
    }
}

impl Stream for WriteHalf<'_> {
    fn tcp(&self) -> &TcpStream {
        self.0
    }
}

impl Stream for OwnedReadHalf {
    fn tcp(&self) -> &TcpStream {
        &self.stream
    }
}

impl Stream for OwnedWriteHalf {
    fn tcp(&self) -> &TcpStream {
        &self.stream
    }
}

/// Implements `AsyncRead` for each type, through its [`Stream`].
macro_rules! async_read {
    ($($t:ty),*) => {$(
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                self.tcp().poll_read_priv(cx, buf)
            }
        }
    )*};
}

/// Implements `AsyncWrite` for each type, through its [`Stream`].
macro_rules! async_write {
    ($($t:ty),*) => {$(
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_priv(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.tcp().flush_priv()
            }

            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.tcp().shutdown_priv()
            }
        }
    )*};
}

async_read!(TcpStream, &TcpStream, ReadHalf<'_>, OwnedReadHalf);
async_write!(TcpStream, &TcpStream, WriteHalf<'_>, OwnedWriteHalf);

/// The reading half of [`TcpStream::split`]: `AsyncRead`.
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of [`TcpStream::split`]: `AsyncWrite`; its `shutdown` sends FIN.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

impl ReadHalf<'_> {
    /// The stream's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// The stream's remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }
}

impl WriteHalf<'_> {
    /// The stream's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// The stream's remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }
}

/// The reading half of [`TcpStream::into_split`]: `AsyncRead`, `Send`, `'static`.
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<TcpStream>,
}

/// The writing half of [`TcpStream::into_split`]: `AsyncWrite`, `Send`, `'static`. Dropping it
/// shuts the writing side down (a FIN) unless it is [reunited](OwnedReadHalf::reunite).
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<TcpStream>,
    shutdown_on_drop: bool,
}

/// The halves given to [`OwnedReadHalf::reunite`] came from different streams; they are handed back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl std::fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves that are not from the same stream")
    }
}

impl std::error::Error for ReuniteError {}

impl OwnedReadHalf {
    /// The stream again, from its two halves; the halves back if they are of different streams.
    pub fn reunite(self, mut write: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.stream, &write.stream) {
            return Err(ReuniteError(self, write));
        }
        write.shutdown_on_drop = false;
        drop(write);
        // The write half is gone: this is the last reference.
        Arc::try_unwrap(self.stream)
            .map_err(|_| unreachable!("the two halves hold the only references"))
    }

    /// The stream's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// The stream's remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// [`TcpStream::read_with`] on this half.
    pub async fn read_with(&self, f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        self.stream.read_with(f).await
    }
}

impl OwnedWriteHalf {
    /// The stream's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// The stream's remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// [`TcpStream::write_with`] on this half.
    pub async fn write_with(
        &self,
        max: usize,
        fill: impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        self.stream.write_with(max, fill).await
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.stream.shutdown_priv();
        }
    }
}
