//! The UDP socket API, shaped like `std::net::UdpSocket`: every call is non-blocking and returns
//! `io::ErrorKind::WouldBlock` when there is nothing to read. A handle borrows the whole stack for the
//! call; the work is UDP's (`crate::udp`), reached through the stack, in the socket's family.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, ToSocketAddrs};

use crate::addr::{self, IpAddress};
use crate::ipv4::Ipv4;
use crate::ipv6::Ipv6;
use crate::stack::{Family, Stack};
use crate::transport::network::Network;
use crate::udp::{closed, Payload, SocketCounters, SocketState, UdpOptions, UdpSocket};

impl Stack {
    /// Binds a UDP socket to `local` with default options. Port 0 picks an ephemeral port; the
    /// wildcard address (`0.0.0.0`, `[::]`) receives on every address of the host in its family.
    ///
    /// `local` is anything [`ToSocketAddrs`] takes (`SocketAddrV4`, `"127.0.0.1:9"`, `"[::1]:9"`,
    /// `(Ipv4Addr::LOCALHOST, 9)`, ...): the first address it resolves to is used, and its family is
    /// the socket's: an IPv4 socket sends and receives IPv4, an IPv6 socket IPv6. A host name is
    /// resolved by the system, which may block.
    pub fn udp_bind(&mut self, local: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        self.udp_bind_with(local, UdpOptions::default())
    }

    /// Binds a UDP socket with `options` (set before binding, such as `reuse_address`). `local` as for
    /// [`udp_bind`](Stack::udp_bind).
    pub fn udp_bind_with(
        &mut self,
        local: impl ToSocketAddrs,
        options: UdpOptions,
    ) -> io::Result<UdpSocket> {
        let local = addr::any(&local)?;
        if self.udp.dual_stack_conflict(local, options) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{local}: the port is held in the other family by a dual-stack socket or \
                     for one (set only_v6 on the IPv6 socket, or reuse_address on both)"
                ),
            ));
        }
        match local {
            SocketAddr::V4(local) => self.udp_bind_in::<Ipv4>(local, options),
            SocketAddr::V6(local) => self.udp_bind_in::<Ipv6>(local, options),
        }
    }

    /// A handle to call socket methods on, in the manner of `std::net::UdpSocket`.
    pub fn udp(&mut self, socket: UdpSocket) -> UdpSocketRef<'_> {
        UdpSocketRef {
            stack: self,
            socket,
        }
    }
}

/// A socket of a stack, borrowed for a call: `stack.udp(sock).send_to(..)`.
#[derive(Debug)]
pub struct UdpSocketRef<'a> {
    pub(crate) stack: &'a mut Stack,
    pub(crate) socket: UdpSocket,
}

/// Calls `$f::<Ipv4>` or `$f::<Ipv6>` by the socket's family.
macro_rules! by_family {
    ($self:ident . $f:ident ( $($arg:expr),* )) => {
        if $self.socket.v6() {
            $self.$f::<Ipv6>($($arg),*)
        } else {
            $self.$f::<Ipv4>($($arg),*)
        }
    };
}

impl UdpSocketRef<'_> {
    #[inline(always)]
    fn send_payload<N: Family>(
        &mut self,
        payload: Payload<'_, '_>,
        dst: Option<N::Socket>,
    ) -> io::Result<usize> {
        layer!(Send, Socket);
        let result = self.stack.udp_send::<N>(self.socket, payload, dst);
        layer!();
        result
    }

    /// Resolves `dst` in the socket's family and sends `payload` there.
    #[inline(always)]
    fn send_payload_to(
        &mut self,
        payload: Payload<'_, '_>,
        dst: &(impl ToSocketAddrs + ?Sized),
    ) -> io::Result<usize> {
        if self.socket.v6() {
            let dst = addr::ipv6(dst)?;
            if let Some(v4) = dst.ip().to_ipv4_mapped() {
                let dst = std::net::SocketAddrV4::new(v4, dst.port());
                return self.stack.udp_send_mapped(self.socket, payload, dst);
            }
            self.send_payload::<Ipv6>(payload, Some(dst))
        } else {
            let dst = addr::ipv4(dst)?;
            self.send_payload::<Ipv4>(payload, Some(dst))
        }
    }

    /// Sends `buf` to `dst`. On an unconnected socket this never connects it, not even for a moment
    /// (Partridge & Pink §6.2), unless the `sendto_pseudo_connect` switch asks for the 4.3BSD way.
    ///
    /// `dst` is anything [`ToSocketAddrs`] takes; the first address of the socket's family it resolves
    /// to is used (see [`Stack::udp_bind`]). A `SocketAddrV4` or `SocketAddr` costs nothing extra; a
    /// host name is resolved by the system on every call, which may block: resolve it once and keep
    /// the address instead.
    #[inline]
    pub fn send_to(&mut self, buf: &[u8], dst: impl ToSocketAddrs) -> io::Result<usize> {
        self.send_payload_to(Payload::Copy(&[IoSlice::new(buf)]), &dst)
    }

    /// Sends `buf` to the connected peer.
    pub fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let payload = Payload::Copy(&[IoSlice::new(buf)]);
        by_family!(self.send_payload(payload, None))
    }

    /// Sends the concatenation of `bufs` as one datagram to `dst` (gathered and summed in one pass).
    /// `dst` as for [`send_to`](Self::send_to).
    #[inline]
    pub fn send_to_vectored(
        &mut self,
        bufs: &[IoSlice<'_>],
        dst: impl ToSocketAddrs,
    ) -> io::Result<usize> {
        self.send_payload_to(Payload::Copy(bufs), &dst)
    }

    /// Sends the concatenation of `bufs` as one datagram to the connected peer.
    pub fn send_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        by_family!(self.send_payload(Payload::Copy(bufs), None))
    }

    /// Zero-copy send (Chase et al., paper 002 §3.1): the stack lends a buffer of `len` bytes, already
    /// behind headroom for every header, and `fill` writes the payload into it; nothing is copied.
    /// `dst` as for [`send_to`](Self::send_to).
    #[inline]
    pub fn send_to_with(
        &mut self,
        len: usize,
        dst: impl ToSocketAddrs,
        mut fill: impl FnMut(&mut [u8]),
    ) -> io::Result<usize> {
        self.send_payload_to(Payload::Fill(len, &mut fill), &dst)
    }

    /// Zero-copy receive (paper 002 §3.1): hands the next datagram's payload, in the stack's own buffer,
    /// to `read` along with its sender, and returns what `read` returns. With deferred verification the
    /// checksum is verified first (a failing datagram is dropped, counted, and the next one tried).
    pub fn recv_from_with<R>(
        &mut self,
        read: impl FnOnce(&[u8], SocketAddr) -> R,
    ) -> io::Result<R> {
        if self.socket.v6() {
            self.recv_with_in::<Ipv6, R>(read)
        } else {
            self.recv_with_in::<Ipv4, R>(read)
        }
    }

    fn recv_with_in<N: Family, R>(
        &mut self,
        read: impl FnOnce(&[u8], SocketAddr) -> R,
    ) -> io::Result<R> {
        let (table, mut cx) = N::udp_rx(self.stack);
        table.recv_with(&mut cx, self.socket, read)
    }

    /// Receives one datagram into `buf`; returns its length (bytes past `buf.len()` are discarded) and
    /// its sender.
    #[inline]
    pub fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        layer!(Receive, Socket);
        let result = if self.socket.v6() {
            self.recv_one::<Ipv6>(buf)
        } else {
            self.recv_one::<Ipv4>(buf)
        };
        layer!();
        result
    }

    /// Receives one datagram into `buf`.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from(buf).map(|(n, _)| n)
    }

    /// Receives one datagram scattered over `bufs`.
    pub fn recv_vectored(
        &mut self,
        bufs: &mut [IoSliceMut<'_>],
    ) -> io::Result<(usize, SocketAddr)> {
        by_family!(self.read(bufs, false))
    }

    /// Copies the next datagram into `buf` without taking it off the queue.
    pub fn peek_from(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let bufs = &mut [IoSliceMut::new(buf)];
        by_family!(self.read(bufs, true))
    }

    /// Copies the next datagram into `buf` without taking it off the queue.
    pub fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.peek_from(buf).map(|(n, _)| n)
    }

    /// Connects the socket to `remote`: `send` goes there, and only datagrams from there are received.
    /// `remote` as for [`send_to`](Self::send_to).
    pub fn connect(&mut self, remote: impl ToSocketAddrs) -> io::Result<()> {
        if self.socket.v6() {
            let remote = addr::ipv6(&remote)?;
            self.stack.udp_connect::<Ipv6>(self.socket, remote)
        } else {
            let remote = addr::ipv4(&remote)?;
            self.stack.udp_connect::<Ipv4>(self.socket, remote)
        }
    }

    /// Undoes `connect`.
    pub fn disconnect(&mut self) -> io::Result<()> {
        if self.socket.v6() {
            self.stack.udp_disconnect::<Ipv6>(self.socket)
        } else {
            self.stack.udp_disconnect::<Ipv4>(self.socket)
        }
    }

    /// The socket's state in its family's table, and what is read of it.
    fn with<R>(
        &self,
        v4: impl FnOnce(&SocketState<Ipv4>) -> R,
        v6: impl FnOnce(&SocketState<Ipv6>) -> R,
    ) -> io::Result<R> {
        if self.socket.v6() {
            self.stack.udp.get::<Ipv6>(self.socket).map(v6)
        } else {
            self.stack.udp.get::<Ipv4>(self.socket).map(v4)
        }
        .ok_or_else(closed)
    }

    /// The local address (its IP is the wildcard when bound to it and not connected).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        fn local<N: Network>(s: &SocketState<N>) -> SocketAddr {
            s.pcb.local_addr.socket(s.pcb.local_port).into()
        }
        self.with(local, local)
    }

    /// The connected peer.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        fn peer<N: Network>(s: &SocketState<N>) -> Option<SocketAddr> {
            s.pcb.peer().map(Into::into)
        }
        self.with(peer, peer)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "socket is not connected"))
    }

    /// The options.
    pub fn options(&self) -> io::Result<UdpOptions> {
        self.with(|s| s.options, |s| s.options)
    }

    /// Changes the options that can change after binding (`broadcast`, `no_checksum`,
    /// `recv_buffer_bytes`, `tos`); `reuse_address` keeps the value it was bound with.
    pub fn set_options(&mut self, options: UdpOptions) -> io::Result<()> {
        by_family!(self.set_options_in(options))
    }

    fn set_options_in<N: Family>(&mut self, options: UdpOptions) -> io::Result<()> {
        N::udp_rx(self.stack).0.set_options(self.socket, options)
    }

    /// Takes the pending error (from an ICMP error about a datagram this connected socket sent).
    pub fn take_error(&mut self) -> io::Result<Option<io::Error>> {
        by_family!(self.take_error_in())
    }

    fn take_error_in<N: Family>(&mut self) -> io::Result<Option<io::Error>> {
        N::udp_rx(self.stack).0.take_error(self.socket)
    }

    /// Datagrams waiting, and their buffer bytes.
    pub fn queued(&self) -> io::Result<(usize, usize)> {
        self.with(|s| (s.rx.len(), s.rx_bytes), |s| (s.rx.len(), s.rx_bytes))
    }

    /// Per-socket counters.
    pub fn counters(&self) -> io::Result<SocketCounters> {
        self.with(|s| s.counters, |s| s.counters)
    }

    /// Closes the socket, dropping what it had queued.
    pub fn close(self) -> io::Result<()> {
        let stack = self.stack;
        if self.socket.v6() {
            stack.udp.close::<Ipv6>(self.socket, &mut stack.pool)
        } else {
            stack.udp.close::<Ipv4>(self.socket, &mut stack.pool)
        }
    }

    /// [`Self::recv_from`] in the socket's family.
    #[inline(always)]
    fn recv_one<N: Family>(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (table, mut cx) = N::udp_rx(self.stack);
        table.recv_from(&mut cx, self.socket, buf)
    }

    #[inline(always)]
    fn read<N: Family>(
        &mut self,
        bufs: &mut [IoSliceMut<'_>],
        peek: bool,
    ) -> io::Result<(usize, SocketAddr)> {
        layer!(Receive, Socket);
        let (table, mut cx) = N::udp_rx(self.stack);
        let result = table
            .read(&mut cx, self.socket, bufs, peek)
            .map(|(n, a)| (n, a.into()));
        layer!();
        result
    }
}
/// `std::io::Read` for a connected socket: each `read` takes one datagram from the connected peer, as
/// [`UdpSocketRef::recv`] does (bytes past `buf.len()` are discarded, so give it room for the largest
/// datagram), and `WouldBlock` when none is waiting. UDP has no end of stream: `read` never returns
/// `Ok(0)` but for an empty datagram or an empty `buf`, so `read_to_end` ends in `WouldBlock`, with every
/// datagram that was waiting appended.
impl io::Read for UdpSocketRef<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

/// `std::io::Write` for a connected socket: each `write` sends `buf` as one datagram to the connected
/// peer, as [`UdpSocketRef::send`] does (`NotConnected` on an unconnected socket), whole or not at all.
/// `write_all` therefore sends one datagram per call; `io::copy` sends one per chunk it read.
impl io::Write for UdpSocketRef<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.send_vectored(bufs)
    }

    /// Does nothing and succeeds: the datagram was handed to the stack by `write` and leaves at the
    /// next [`Stack::poll`] or [`Stack::flush`] (or earlier, once a batch of output is queued).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
