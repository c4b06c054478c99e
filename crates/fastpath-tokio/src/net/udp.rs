//! UDP on the `Send` front.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use super::{resolve, Net};
use crate::ready::Interest;

/// A UDP socket of a [`Net`], as `tokio::net::UdpSocket`. Sending never waits (fastpath queues the
/// datagram for the link, and the driver sends it); receiving waits for a datagram.
#[derive(Debug)]
pub struct UdpSocket {
    net: Net,
    socket: fastpath::UdpSocket,
}

impl UdpSocket {
    /// Binds a socket to the first address `addr` resolves to that the stack accepts (see
    /// `Stack::udp_bind`: its family is the address's; `[::]` is dual-stack).
    pub async fn bind(net: &Net, addr: impl tokio::net::ToSocketAddrs) -> io::Result<UdpSocket> {
        let mut last = None;
        for local in resolve(addr).await? {
            match net.call(|s| s.udp_bind(local)) {
                Ok(socket) => {
                    return Ok(UdpSocket {
                        net: net.clone(),
                        socket,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::InvalidInput.into()))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.net.call(|s| s.udp(self.socket).local_addr())
    }

    /// The address given to [`UdpSocket::connect`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.net.call(|s| s.udp(self.socket).peer_addr())
    }

    /// Sends to and receives from the first address `addr` resolves to only.
    pub async fn connect(&self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<()> {
        let mut last = None;
        for remote in resolve(addr).await? {
            match self.net.call(|s| s.udp(self.socket).connect(remote)) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::ErrorKind::InvalidInput.into()))
    }

    /// Sends `buf` to the first address `target` resolves to; completes at once.
    pub async fn send_to(
        &self,
        buf: &[u8],
        target: impl tokio::net::ToSocketAddrs,
    ) -> io::Result<usize> {
        let to = resolve(target).await?[0];
        self.try_send_to(buf, to)
    }

    /// Sends `buf` to `target` now (fastpath's UDP send never waits).
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        let n = self.net.call(|s| s.udp(self.socket).send_to(buf, target))?;
        self.net.kick();
        Ok(n)
    }

    /// Sends `buf` to the connected peer; completes at once.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let n = self.net.call(|s| s.udp(self.socket).send(buf))?;
        self.net.kick();
        Ok(n)
    }

    /// Receives a datagram into `buf`: its length and its sender. Cancellation-safe.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// Receives a datagram into `buf`, or parks `cx`'s waker until one comes.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.net.poll_io(Interest::UdpRead(self.socket), cx, |s| {
            s.udp(self.socket).recv_from(buf)
        })
    }

    /// Receives a datagram from the connected peer into `buf`: its length. Cancellation-safe.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| {
            self.net.poll_io(Interest::UdpRead(self.socket), cx, |s| {
                s.udp(self.socket).recv(buf)
            })
        })
        .await
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let _ = self.net.call(|s| s.udp(self.socket).close());
    }
}

/// Interception of UDP on a [`Net`] (`Stack::udp_intercept`): datagrams to any address and port
/// arriving on an interface that intercepts, each with its sender and the destination it was sent
/// to, and answers sent from such a destination. Interception of UDP is on while this lives. As
/// [`crate::UdpIntercept`].
#[derive(Debug)]
pub struct UdpIntercept {
    net: Net,
}

impl UdpIntercept {
    /// Turns interception of UDP on.
    pub fn new(net: &Net) -> UdpIntercept {
        net.call(|s| s.udp_intercept(true));
        UdpIntercept { net: net.clone() }
    }

    /// Receives the next intercepted datagram into `buf`: its length, its sender and its
    /// destination. Cancellation-safe.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        poll_fn(|cx| {
            self.net
                .poll_io(Interest::Intercepted, cx, |s| s.udp_recv_intercepted(buf))
        })
        .await
    }

    /// Receives an intercepted datagram if one is queued, without waiting: `WouldBlock` when none
    /// is.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        self.net.call(|s| s.udp_recv_intercepted(buf))
    }

    /// Tells the application at `app` that destination `dst` refused its datagram of `len` bytes
    /// (an ICMP port unreachable; see `Stack::udp_intercepted_unreachable`).
    pub fn unreachable(&self, app: SocketAddr, dst: SocketAddr, len: usize) -> io::Result<()> {
        self.net
            .call(|s| s.udp_intercepted_unreachable(app, dst, len))?;
        self.net.kick();
        Ok(())
    }

    /// Sends `buf` from `from` (an intercepted destination) to `to` (never waits).
    pub fn send_from(&self, buf: &[u8], from: SocketAddr, to: SocketAddr) -> io::Result<usize> {
        let n = self.net.call(|s| s.udp_send_from(buf, from, to))?;
        self.net.kick();
        Ok(n)
    }
}

impl Drop for UdpIntercept {
    fn drop(&mut self) {
        self.net.call(|s| s.udp_intercept(false));
    }
}
