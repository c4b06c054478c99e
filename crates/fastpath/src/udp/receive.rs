//! The application's side of a socket: datagrams taken off its queue (copied out, or lent in the
//! stack's buffer), verified as they are copied when their checksum was deferred (Partridge & Pink
//! §7.1.1), its pending error, its options, its close. The API layer calls one of these per
//! operation.

use std::io::IoSliceMut;

use super::*;
use crate::transport::checksum::{copy_and_verify, copy_and_verify_one};

/// What a receive call is handed: the pool the datagrams' buffers go back to, and the counters.
pub(crate) struct RecvCx<'a> {
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut Counters,
}

impl RecvCx<'_> {
    /// A datagram whose deferred checksum failed: freed and counted.
    fn bad_checksum<A>(&mut self, dg: RxDatagram<A>, socket: &mut SocketCounters) {
        self.pool.free(dg.buf);
        socket.bad_checksum += 1;
        self.counters.drops.add(DropReason::UdpBadChecksum);
    }
}

impl<N: Network> Table<N> {
    /// `recv_from`: the next datagram copied into `buf` (bytes past its length are discarded) and
    /// its sender. An empty queue is checked first: a reader calls until `WouldBlock`, so at one
    /// datagram per poll half the calls find nothing.
    #[inline(always)]
    pub(crate) fn recv_from(
        &mut self,
        cx: &mut RecvCx<'_>,
        s: UdpSocket,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr)> {
        let socket = self.get_mut(s).ok_or_else(closed)?;
        if let Some(kind) = socket.take_error() {
            return Err(kind.into());
        }
        let Some(dg) = socket.rx.pop_front() else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        socket.rx_bytes -= dg.buf.truesize();
        if dg.pending.is_some() {
            return self.recv_deferred(cx, s, dg, buf);
        }
        let payload = dg.buf.data();
        let n = buf.len().min(payload.len());
        {
            timed!(Copy);
            crate::buf::copy(&mut buf[..n], &payload[..n]);
        }
        {
            timed!(Buffers);
            cx.pool.free(dg.buf);
        }
        cx.counters.udp.in_read += 1;
        // The sender's address built as the `SocketAddr` returned, in place: built as the family's
        // socket address and converted after, an IPv6 one was shuffled through the stack in moves
        // that the CPU could not forward (a quarter of `recv_from`'s time over IPv6).
        Ok((n, dg.from.0.socket_addr(dg.from.1)))
    }

    /// [`Self::recv_from`] for a datagram whose checksum was deferred to this copy: verified as it
    /// is copied; one that fails is dropped, counted, and the next one tried.
    #[inline(never)]
    fn recv_deferred(
        &mut self,
        cx: &mut RecvCx<'_>,
        s: UdpSocket,
        mut dg: RxDatagram<N::Addr>,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr)> {
        let alg = self.cfg.checksum.algorithm();
        loop {
            let (n, ok) = copy_and_verify_one(alg, dg.pending, dg.buf.data(), buf);
            if ok {
                {
                    timed!(Buffers);
                    cx.pool.free(dg.buf);
                }
                cx.counters.udp.in_read += 1;
                return Ok((n, dg.from.0.socket_addr(dg.from.1)));
            }
            let socket = self.get_mut(s).ok_or_else(closed)?;
            cx.bad_checksum(dg, &mut socket.counters);
            if let Some(kind) = socket.take_error() {
                return Err(kind.into());
            }
            dg = socket.rx.pop_front().ok_or(io::ErrorKind::WouldBlock)?;
            socket.rx_bytes -= dg.buf.truesize();
        }
    }

    /// Zero-copy receive (paper 002 §3.1): the next datagram whose checksum holds, lent to `read`
    /// in the stack's buffer with its sender; returns what `read` returns.
    pub(crate) fn recv_with<R>(
        &mut self,
        cx: &mut RecvCx<'_>,
        s: UdpSocket,
        read: impl FnOnce(&[u8], SocketAddr) -> R,
    ) -> io::Result<R> {
        let socket = self.get_mut(s).ok_or_else(closed)?;
        if let Some(kind) = socket.take_error() {
            return Err(kind.into());
        }
        loop {
            let dg = socket.rx.pop_front().ok_or(io::ErrorKind::WouldBlock)?;
            socket.rx_bytes -= dg.buf.truesize();
            if deferred_ok(dg.pending, dg.buf.data()) {
                let result = read(dg.buf.data(), dg.from.0.socket_addr(dg.from.1));
                cx.pool.free(dg.buf);
                cx.counters.udp.in_read += 1;
                return Ok(result);
            }
            cx.bad_checksum(dg, &mut socket.counters);
        }
    }

    /// Takes (or, with `peek`, copies without taking) the next datagram whose checksum holds into
    /// `bufs`. A datagram whose deferred checksum fails is dropped and counted, and the next one is
    /// tried (paper 000 §7.1.1); `bufs` may have been written even then.
    #[inline(always)]
    pub(crate) fn read(
        &mut self,
        cx: &mut RecvCx<'_>,
        s: UdpSocket,
        bufs: &mut [IoSliceMut<'_>],
        peek: bool,
    ) -> io::Result<(usize, N::Socket)> {
        let alg = self.cfg.checksum.algorithm();
        let socket = self.get_mut(s).ok_or_else(closed)?;
        if let Some(kind) = socket.take_error() {
            return Err(kind.into());
        }
        loop {
            let Some(dg) = socket.rx.front_mut() else {
                return Err(io::ErrorKind::WouldBlock.into());
            };
            let (copied, ok) = copy_and_verify(alg, dg.pending, dg.buf.data(), bufs);
            let from = dg.from.0.socket(dg.from.1);
            if ok && peek {
                dg.pending = None;
                return Ok((copied, from));
            }
            let dg = socket.rx.pop_front().expect("front exists");
            socket.rx_bytes -= dg.buf.truesize();
            if ok {
                {
                    timed!(Buffers);
                    cx.pool.free(dg.buf);
                }
                cx.counters.udp.in_read += 1;
                return Ok((copied, from));
            }
            cx.bad_checksum(dg, &mut socket.counters);
        }
    }

    /// Takes socket `s`'s pending error (from an ICMP error about a datagram it sent, connected).
    pub(crate) fn take_error(&mut self, s: UdpSocket) -> io::Result<Option<io::Error>> {
        let socket = self.get_mut(s).ok_or_else(closed)?;
        Ok(socket.take_error().map(io::Error::from))
    }

    /// Changes the options that can change after binding; `reuse_address` keeps the value it was
    /// bound with, and no receive buffer size means the stack's default.
    pub(crate) fn set_options(&mut self, s: UdpSocket, options: UdpOptions) -> io::Result<()> {
        let default = self.cfg.rx_queue_bytes;
        let socket = self.get_mut(s).ok_or_else(closed)?;
        socket.tx_cache = None;
        socket.options = UdpOptions {
            reuse_address: socket.options.reuse_address,
            recv_buffer_bytes: options.recv_buffer_bytes.or(Some(default)),
            ..options
        };
        Ok(())
    }
}

impl Udp {
    /// Closes socket `s` of family `N`, freeing what it had queued.
    pub(crate) fn close<N: UdpFamily>(
        &mut self,
        s: UdpSocket,
        pool: &mut BufferPool,
    ) -> io::Result<()> {
        let state = self.remove::<N>(s).ok_or_else(closed)?;
        for dg in state.rx {
            pool.free(dg.buf);
        }
        Ok(())
    }
}
