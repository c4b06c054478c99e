//! The TCP API, shaped like `std::net::TcpListener` and `TcpStream`: every call is non-blocking and
//! returns `io::ErrorKind::WouldBlock` when it would wait; `readable` and `writable` tell when to try.
//! Nothing moves until the stack is polled. A handle borrows the whole stack for the call; the work
//! is TCP's (`crate::tcp`), reached through the stack.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::ops::RangeInclusive;

use crate::addr::{self, IpAddress};
use crate::api::intercept::Unreachable;
use crate::ipv4::Ipv4;
use crate::ipv6::Ipv6;
use crate::stack::{Stack, TcpFamily};
use crate::tcp::{
    ConnectionInfo, Listener, State, Tcb, TcpListenOptions, TcpListener, TcpSocketOptions,
    TcpStream, TxTimestamp, TxTimestamping, WriteFlags,
};

/// Runs `$body` with `$t` bound to the connection's block, in the handle's family.
macro_rules! with_tcb {
    ($self:ident, $t:ident => $body:expr) => {
        if $self.stream.v6 {
            let $t = $self.tcb_in::<Ipv6>()?;
            $body
        } else {
            let $t = $self.tcb_in::<Ipv4>()?;
            $body
        }
    };
}

fn not_held() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "the connection is not held")
}

/// Linux's bounds on `TCP_MAXSEG` (`TCP_MIN_MSS`, `MAX_TCP_WINDOW`).
const MAX_SEGMENT_BOUNDS: std::ops::RangeInclusive<u16> = 88..=32767;

fn check_max_segment(mss: u16) -> io::Result<()> {
    if MAX_SEGMENT_BOUNDS.contains(&mss) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the MSS limit is outside 88..=32767",
        ))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "no such TCP socket (closed)")
}

impl Stack {
    /// Listens on `local` (the wildcard, `0.0.0.0` or `[::]`, for all of the host's addresses in its
    /// family) with room for `backlog` half-open and as many established, unaccepted connections
    /// (capped by the configured limit). `local` is anything [`ToSocketAddrs`] takes; its first
    /// address's family is the listener's, as for [`udp_bind`](Stack::udp_bind). An IPv6 listener
    /// takes IPv6 connections only (as `IPV6_V6ONLY`).
    pub fn tcp_listen(
        &mut self,
        local: impl ToSocketAddrs,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        self.tcp_listen_with(local, backlog, TcpListenOptions::default())
    }

    /// [`tcp_listen`](Stack::tcp_listen) with `options`. An IPv6 listener on `[::]` without
    /// `only_v6` is dual-stack: it also listens on `0.0.0.0` and the same port (and fails, as Linux,
    /// if that port is taken in IPv4).
    pub fn tcp_listen_with(
        &mut self,
        local: impl ToSocketAddrs,
        backlog: usize,
        options: TcpListenOptions,
    ) -> io::Result<TcpListener> {
        match addr::any(&local)? {
            SocketAddr::V4(a) => {
                let (index, generation) = self.tcp_listen_in::<Ipv4>(a, backlog)?;
                Ok(TcpListener {
                    index,
                    generation,
                    v6: false,
                    v4_half: None,
                })
            }
            SocketAddr::V6(a) => {
                let (index, generation) = self.tcp_listen_in::<Ipv6>(a, backlog)?;
                let mut listener = TcpListener {
                    index,
                    generation,
                    v6: true,
                    v4_half: None,
                };
                if a.ip().is_unspecified() && !options.only_v6 {
                    let port = self.tcp_listener(listener).local_addr().map(|l| l.port())?;
                    let any4 = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
                    match self.tcp_listen_in::<Ipv4>(any4, backlog) {
                        Ok(half) => listener.v4_half = Some(half),
                        Err(e) => {
                            self.tcp6.remove(index);
                            return Err(io::Error::new(
                                e.kind(),
                                format!(
                                    "[::]:{port} takes IPv4 too, and 0.0.0.0:{port} is taken: {e} \
                                     (set only_v6 to listen on IPv6 alone)"
                                ),
                            ));
                        }
                    }
                }
                Ok(listener)
            }
        }
    }

    /// A listener handle for calls: `stack.tcp_listener(l).accept()`.
    pub fn tcp_listener(&mut self, listener: TcpListener) -> TcpListenerRef<'_> {
        TcpListenerRef {
            stack: self,
            listener,
        }
    }

    /// Opens a connection to `remote` from an ephemeral port (the SYN leaves at the next poll). Like
    /// every timer, the SYN's retransmission timer counts from the time of the last `poll`. `remote`
    /// as for [`tcp_listen`](Stack::tcp_listen): its first address's family is the connection's.
    pub fn tcp_connect(&mut self, remote: impl ToSocketAddrs) -> io::Result<TcpStream> {
        match addr::any(&remote)? {
            SocketAddr::V4(r) => {
                self.tcp_connect_from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), r)
            }
            SocketAddr::V6(r) => {
                self.tcp_connect_from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0), r)
            }
        }
    }

    /// Opens a connection from `local` (address or port may be unspecified) to `remote`, both as for
    /// [`tcp_listen`](Stack::tcp_listen), in `local`'s family.
    pub fn tcp_connect_from(
        &mut self,
        local: impl ToSocketAddrs,
        remote: impl ToSocketAddrs,
    ) -> io::Result<TcpStream> {
        self.tcp_connect_with(local, remote, TcpSocketOptions::default())
    }

    /// [`tcp_connect_from`](Stack::tcp_connect_from) with per-connection `options`, in effect
    /// from the SYN on (its MSS and window scale follow them). `InvalidInput` for an MSS limit
    /// outside 88 to 32767.
    pub fn tcp_connect_with(
        &mut self,
        local: impl ToSocketAddrs,
        remote: impl ToSocketAddrs,
        options: TcpSocketOptions,
    ) -> io::Result<TcpStream> {
        if let Some(mss) = options.max_segment {
            check_max_segment(mss)?;
        }
        let ((index, generation), v6) = match addr::any(&local)? {
            SocketAddr::V4(l) => {
                let remote = addr::ipv4(&remote)?;
                (self.tcp_connect_in::<Ipv4>(l, remote, &options)?, false)
            }
            SocketAddr::V6(l) => {
                let remote = addr::ipv6(&remote)?;
                (self.tcp_connect_in::<Ipv6>(l, remote, &options)?, true)
            }
        };
        Ok(TcpStream {
            index,
            generation,
            v6,
        })
    }

    /// Opens a connection to `remote` that tries TCP Fast Open (RFC 7413) with `data`: if the stack
    /// holds a cookie from this server (from an earlier connection to it), the SYN carries as much of
    /// `data` as fits in one segment, and the server may hand it to its application at once; if not,
    /// the SYN asks for a cookie and carries none. Returns the connection and how many bytes of
    /// `data` the SYN carries (0 without a cookie, or when `FastOpenConfig::client` is off): the rest
    /// is the caller's to write once the connection is established. Data the server does not
    /// acknowledge with its SYN-ACK is sent again after the handshake.
    pub fn tcp_connect_fast_open(
        &mut self,
        remote: impl ToSocketAddrs,
        options: TcpSocketOptions,
        data: &[u8],
    ) -> io::Result<(TcpStream, usize)> {
        if let Some(mss) = options.max_segment {
            check_max_segment(mss)?;
        }
        let ((index, generation, n), v6) = match addr::any(&remote)? {
            SocketAddr::V4(r) => {
                let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
                let opened = self.tcp_connect_fast_open_in::<Ipv4>(local, r, &options, data)?;
                (opened, false)
            }
            SocketAddr::V6(r) => {
                let local = SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0);
                let opened = self.tcp_connect_fast_open_in::<Ipv6>(local, r, &options, data)?;
                (opened, true)
            }
        };
        let stream = TcpStream {
            index,
            generation,
            v6,
        };
        Ok((stream, n))
    }

    /// Whether a Fast Open connect to `remote` would carry data in its SYN now: the client side is
    /// on and the stack holds a cookie from that server (or sends data without one).
    pub fn tcp_fast_open_ready(&self, remote: SocketAddr) -> bool {
        let cfg = &self.config().tcp.fast_open;
        if !cfg.client {
            return false;
        }
        if cfg.client_without_cookie {
            return true;
        }
        match remote {
            SocketAddr::V4(r) => self.tcp.fast_open_cookie_held(*r.ip()),
            SocketAddr::V6(r) => self.tcp6.fast_open_cookie_held(*r.ip()),
        }
    }

    /// Forgets what the Fast Open client learned of servers (their cookies, MSS and the option
    /// format to ask in), as `ip tcp_metrics flush` does Linux's.
    pub fn tcp_fast_open_forget(&mut self) {
        self.tcp.fast_open_forget();
        self.tcp6.fast_open_forget();
    }

    /// A connection handle for calls: `stack.tcp(s).read(..)`.
    pub fn tcp(&mut self, stream: TcpStream) -> TcpStreamRef<'_> {
        TcpStreamRef {
            stack: self,
            stream,
        }
    }

    /// TCP connections in the tables, in every state.
    pub fn tcp_connections(&self) -> usize {
        self.tcp.connections() + self.tcp6.connections()
    }
}

/// A listener borrowed for a call.
#[derive(Debug)]
pub struct TcpListenerRef<'a> {
    stack: &'a mut Stack,
    listener: TcpListener,
}

impl TcpListenerRef<'_> {
    fn listener_in<N: TcpFamily>(&mut self) -> Option<&mut Listener<N::Addr>> {
        let TcpListener {
            index, generation, ..
        } = self.listener;
        N::table(self.stack).listener_mut(index, generation)
    }

    /// Takes an established connection off the queue, with the peer's address (v4-mapped for an
    /// IPv4 connection a dual-stack IPv6 listener took).
    pub fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        if !self.listener.v6 {
            return self.accept_in::<Ipv4>(self.listener);
        }
        match self.accept_in::<Ipv6>(self.listener) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        let Some((index, generation)) = self.listener.v4_half else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let half = TcpListener {
            index,
            generation,
            v6: false,
            v4_half: None,
        };
        let (stream, peer) = self.accept_in::<Ipv4>(half)?;
        let peer = match peer {
            SocketAddr::V4(p) => SocketAddrV6::new(p.ip().to_ipv6_mapped(), p.port(), 0, 0).into(),
            p => p,
        };
        Ok((stream, peer))
    }

    fn accept_in<N: TcpFamily>(
        &mut self,
        listener: TcpListener,
    ) -> io::Result<(TcpStream, SocketAddr)> {
        let TcpListener {
            index, generation, ..
        } = listener;
        match N::table(self.stack).accept(index, generation) {
            None => Err(closed()),
            Some(None) => Err(io::ErrorKind::WouldBlock.into()),
            Some(Some((index, generation, remote))) => Ok((
                TcpStream {
                    index,
                    generation,
                    v6: listener.v6,
                },
                remote.into(),
            )),
        }
    }

    /// Turns TCP Fast Open (RFC 7413) on for this listener, with at most `pending` connections
    /// taken by it whose handshake has not completed (Linux's `TCP_FASTOPEN` option), or off
    /// (`None`). A SYN with a valid cookie then hands its data to the application at once: the
    /// connection is ready for `accept` before its handshake completes, and may send. The stack's
    /// `FastOpenConfig` still decides whether servers take it at all.
    pub fn set_fast_open(&mut self, pending: Option<usize>) -> io::Result<()> {
        let halves = [
            Some((
                self.listener.index,
                self.listener.generation,
                self.listener.v6,
            )),
            self.listener.v4_half.map(|(i, g)| (i, g, false)),
        ];
        for (index, generation, v6) in halves.into_iter().flatten() {
            let l = if v6 {
                self.stack
                    .tcp6
                    .listener_mut(index, generation)
                    .map(|l| &mut l.fast_open)
            } else {
                self.stack
                    .tcp
                    .listener_mut(index, generation)
                    .map(|l| &mut l.fast_open)
            };
            *l.ok_or_else(closed)? = pending;
        }
        Ok(())
    }

    /// The address listened on.
    pub fn local_addr(&mut self) -> io::Result<SocketAddr> {
        if self.listener.v6 {
            Ok(self.listener_in::<Ipv6>().ok_or_else(closed)?.local.into())
        } else {
            Ok(self.listener_in::<Ipv4>().ok_or_else(closed)?.local.into())
        }
    }

    /// Changes the socket options the listener's connections start with, in both halves of a
    /// dual-stack listener.
    fn set_options(&mut self, f: impl Fn(&mut TcpSocketOptions)) -> io::Result<()> {
        let (index, generation) = (self.listener.index, self.listener.generation);
        let found = if self.listener.v6 {
            self.stack
                .tcp6
                .listener_mut(index, generation)
                .map(|l| f(&mut l.options))
        } else {
            self.stack
                .tcp
                .listener_mut(index, generation)
                .map(|l| f(&mut l.options))
        };
        found.ok_or_else(closed)?;
        if let Some((index, generation)) = self.listener.v4_half {
            if let Some(l) = self.stack.tcp.listener_mut(index, generation) {
                f(&mut l.options);
            }
        }
        Ok(())
    }

    /// The send buffer of connections accepted from now on, bytes (see
    /// [`TcpStreamRef::set_send_buffer`]).
    pub fn set_send_buffer(&mut self, bytes: usize) -> io::Result<()> {
        self.set_options(|o| o.send_buffer = Some(bytes))
    }

    /// The receive buffer of connections accepted from now on, bytes: it also fixes the window
    /// scale their SYN-ACK offers (see [`TcpStreamRef::set_recv_buffer`]).
    pub fn set_recv_buffer(&mut self, bytes: usize) -> io::Result<()> {
        self.set_options(|o| o.recv_buffer = Some(bytes))
    }

    /// Limits the MSS of connections accepted from now on (`TCP_MAXSEG`): their SYN-ACK offers at
    /// most `mss`, and they send segments of at most `mss`. `InvalidInput` outside Linux's bounds
    /// (88 to 32767).
    pub fn set_max_segment(&mut self, mss: u16) -> io::Result<()> {
        check_max_segment(mss)?;
        self.set_options(|o| o.max_segment = Some(mss))
    }

    /// The type of service of connections accepted from now on, their SYN-ACK included (`IP_TOS`;
    /// see [`TcpStreamRef::set_tos`]).
    pub fn set_tos(&mut self, tos: u8) -> io::Result<()> {
        self.set_options(|o| o.tos = tos & !3)
    }

    /// Path MTU discovery for connections accepted from now on (`IP_MTU_DISCOVER`).
    pub fn set_path_mtu_discovery(&mut self, mode: crate::tcp::PathMtuDiscovery) -> io::Result<()> {
        self.set_options(|o| o.path_mtu_discovery = mode)
    }

    /// True when `accept` has a connection to return.
    pub fn readable(&mut self) -> bool {
        let half_ready = self.listener.v4_half.is_some_and(|(index, generation)| {
            self.stack
                .tcp
                .listener_mut(index, generation)
                .is_some_and(|l| !l.ready.is_empty())
        });
        half_ready
            || if self.listener.v6 {
                self.listener_in::<Ipv6>()
                    .is_some_and(|l| !l.ready.is_empty())
            } else {
                self.listener_in::<Ipv4>()
                    .is_some_and(|l| !l.ready.is_empty())
            }
    }

    /// Stops listening (both halves of a dual-stack listener): connections not yet accepted are
    /// reset.
    pub fn close(mut self) {
        let (index, generation) = (self.listener.index, self.listener.generation);
        if self.listener.v6 {
            self.close_in::<Ipv6>(index, generation)
        } else {
            self.close_in::<Ipv4>(index, generation)
        }
        if let Some((index, generation)) = self.listener.v4_half {
            self.close_in::<Ipv4>(index, generation)
        }
    }

    fn close_in<N: TcpFamily>(&mut self, index: u32, generation: u32) {
        let Some(l) = N::table(self.stack).listener_mut(index, generation) else {
            return;
        };
        // Its children, established and half-open, are known to it: no scan of the table.
        let mut children: Vec<u32> = l.ready.drain(..).map(|id| id.0).collect();
        children.append(&mut l.half_open);
        N::table(self.stack).remove(index);
        for child in children {
            self.stack.tcp_abort_with_reset::<N>(child);
        }
    }
}

/// A connection borrowed for a call.
#[derive(Debug)]
pub struct TcpStreamRef<'a> {
    stack: &'a mut Stack,
    stream: TcpStream,
}

impl TcpStreamRef<'_> {
    fn tcb_in<N: TcpFamily>(&mut self) -> io::Result<&mut Tcb<N::Addr>> {
        let TcpStream {
            index, generation, ..
        } = self.stream;
        match N::table(self.stack).conn_mut(index, generation) {
            Some(t) if !t.orphan => Ok(t),
            _ => Err(closed()),
        }
    }

    /// `tcp_output` for this connection, in its family.
    fn output(&mut self) {
        let index = self.stream.index;
        if self.stream.v6 {
            self.stack.tcp_output::<Ipv6>(index)
        } else {
            self.stack.tcp_output::<Ipv4>(index)
        }
    }

    fn finish(&mut self) {
        let index = self.stream.index;
        if self.stream.v6 {
            self.stack.tcp_finish::<Ipv6>(index)
        } else {
            self.stack.tcp_finish::<Ipv4>(index)
        }
    }

    fn abort_with_reset(&mut self) {
        let index = self.stream.index;
        if self.stream.v6 {
            self.stack.tcp_abort_with_reset::<Ipv6>(index)
        } else {
            self.stack.tcp_abort_with_reset::<Ipv4>(index)
        }
    }

    /// Queues `buf` for sending; returns how much fitted (`WouldBlock` if none did).
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        layer!(Send, Socket);
        let now = self.stack.now;
        let n = with_tcb!(self, t => {
            let r = t.write(buf);
            t.note_write(&r, buf.len(), now);
            r?
        });
        self.output();
        layer!();
        Ok(n)
    }

    /// Queues `buf` as `flags` say (Linux's `MSG_MORE`, `MSG_EOR` and `MSG_ZEROCOPY`); returns how
    /// much fitted, as [`write`](Self::write). A record's end is recorded only when all of `buf`
    /// fitted; a write with `end_of_record` waits (`WouldBlock`) while 64 records are unacknowledged.
    pub fn write_flagged(&mut self, buf: &[u8], flags: WriteFlags) -> io::Result<usize> {
        let now = self.stack.now;
        let n = with_tcb!(self, t => {
            let r = t.write_flagged(buf, flags);
            t.note_write(&r, buf.len(), now);
            r?
        });
        self.output();
        Ok(n)
    }

    /// The numbers of the writes made with [`WriteFlags::notify_acked`] that the peer has
    /// acknowledged since the last call, as one range (writes are acknowledged in order), if any.
    /// The data is always copied into the send buffer, so a caller may reuse its buffer as soon as
    /// the write returns; the notification says the bytes reached the peer (Linux reports such
    /// copied sends with `SO_EE_CODE_ZEROCOPY_COPIED`).
    pub fn take_completed(&mut self) -> io::Result<Option<RangeInclusive<u32>>> {
        Ok(with_tcb!(self, t => t.completions.take()))
    }

    /// Asks to hear (through [`take_completed`](Self::take_completed)) when everything written so
    /// far is acknowledged, as a write with [`WriteFlags::notify_acked`] does for its own bytes:
    /// for a write made of several calls. Returns the number the notification will carry.
    pub fn notify_acked(&mut self) -> io::Result<u32> {
        Ok(with_tcb!(self, t => t.notify_acked()))
    }

    /// Turns software transmit timestamps on for the bytes written from now on (Linux's
    /// `SO_TIMESTAMPING` with `SOF_TIMESTAMPING_SOFTWARE` and `OPT_ID`): for each write's last
    /// byte, the moments `on` asks for are reported by
    /// [`take_tx_timestamp`](Self::take_tx_timestamp). `TxTimestamping::default()` turns them off.
    /// At most 64 writes are followed and 64 timestamps kept; past that they are dropped.
    pub fn set_tx_timestamps(&mut self, on: TxTimestamping) -> io::Result<()> {
        with_tcb!(self, t => t.set_tx_timestamps(on));
        Ok(())
    }

    /// Turns software receive timestamps on or off (Linux's `SO_TIMESTAMPING` with
    /// `SOF_TIMESTAMPING_RX_SOFTWARE`): see [`read_timestamp`](Self::read_timestamp).
    pub fn set_rx_timestamps(&mut self, on: bool) -> io::Result<()> {
        with_tcb!(self, t => t.rx_stamps.set(on));
        Ok(())
    }

    /// With receive timestamps on, when the last byte the latest read returned arrived (became
    /// readable: a byte that came out of order, when the hole before it was filled), on the
    /// stack's clock; Linux reports it in `recvmsg`'s `SCM_TIMESTAMPING`.
    pub fn read_timestamp(&mut self) -> io::Result<Option<crate::time::Instant>> {
        Ok(with_tcb!(self, t => t.rx_stamps.last_read))
    }

    /// The oldest transmit timestamp not yet taken, if any.
    pub fn take_tx_timestamp(&mut self) -> io::Result<Option<TxTimestamp>> {
        Ok(with_tcb!(self, t => t.tx_stamps.take()))
    }

    /// Whether [`take_tx_timestamp`](Self::take_tx_timestamp) has something to report.
    pub fn has_tx_timestamp(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.tx_stamps.ready())))().unwrap_or(false)
    }

    /// Whether [`take_completed`](Self::take_completed) has something to report.
    pub fn has_completed(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.completions.ready())))().unwrap_or(false)
    }

    /// Writes as much of `buf` as fits, like `write`, repeated: returns the bytes queued.
    pub fn write_all_possible(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let mut total = 0;
        while !buf.is_empty() {
            match self.write(buf) {
                Ok(n) => {
                    total += n;
                    buf = &buf[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && total > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Zero-copy send (paper 002 §3.1): `fill` writes up to `max` bytes straight into the
    /// connection's send buffer and returns how many it wrote.
    pub fn write_with(
        &mut self,
        max: usize,
        mut fill: impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        let n = with_tcb!(self, t => t.write_with(max, &mut fill)?);
        self.output();
        Ok(n)
    }

    /// Reads into `buf`. `Ok(0)` means the peer closed and everything was read; `WouldBlock`, that
    /// nothing is there yet.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        layer!(Receive, Socket);
        let result = if self.stream.v6 {
            self.read_in::<Ipv6>(buf)
        } else {
            self.read_in::<Ipv4>(buf)
        };
        layer!();
        result
    }

    #[inline(always)]
    fn read_in<N: TcpFamily>(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let TcpStream {
            index, generation, ..
        } = self.stream;
        let (table, pool) = N::table_pool(self.stack);
        let tcb = match table.conn_mut(index, generation) {
            Some(t) if !t.orphan => t,
            _ => return Err(closed()),
        };
        let n = tcb.rx.read(buf, pool);
        if n > 0 {
            tcb.stamp_read();
        }
        let result = read_result(tcb, n, buf.is_empty());
        if n > 0 && tcb.after_read() {
            self.stack.tcp_output::<N>(index);
        }
        result
    }

    /// Zero-copy receive (paper 002 §3.1): lends the received bytes to `f` in the buffers they
    /// arrived in; `f` returns how many it consumed. Returns the total consumed, `Ok(0)` at the end
    /// of the stream.
    pub fn read_with(&mut self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        if self.stream.v6 {
            self.read_with_in::<Ipv6>(&mut f)
        } else {
            self.read_with_in::<Ipv4>(&mut f)
        }
    }

    fn read_with_in<N: TcpFamily>(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> usize,
    ) -> io::Result<usize> {
        let TcpStream {
            index, generation, ..
        } = self.stream;
        let (table, pool) = N::table_pool(self.stack);
        let tcb = match table.conn_mut(index, generation) {
            Some(t) if !t.orphan => t,
            _ => return Err(closed()),
        };
        let n = tcb.rx.read_with(f, pool);
        if n > 0 {
            tcb.stamp_read();
        }
        let result = read_result(tcb, n, false);
        if n > 0 && tcb.after_read() {
            self.stack.tcp_output::<N>(index);
        }
        result
    }

    /// Shuts down writing: a FIN follows the queued data.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        let gone = with_tcb!(self, t => {
            if t.held {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the connection is held: confirm it first",
                ));
            }
            t.shutdown_write();
            t.state == State::Closed
        });
        if gone {
            self.finish();
        } else {
            self.output();
        }
        Ok(())
    }

    /// Closes the handle. The connection finishes in the background (queued data, then FIN), unless
    /// unread data is waiting, in which case it is reset at once (RFC 2525 §2.17, as BSD and Linux do).
    /// A held connection ([`Stack::tcp_intercept_holding`]) is dropped without a word to its peer.
    pub fn close(mut self) {
        enum Then {
            Finish,
            Reset,
            Output,
            DropHeld,
        }
        let then = (|| -> io::Result<Then> {
            Ok(with_tcb!(self, t => {
                if t.held {
                    Then::DropHeld
                } else if t.state == State::Closed {
                    t.orphan = true;
                    Then::Finish
                } else if t.rx.bytes > 0 {
                    t.orphan = true;
                    Then::Reset
                } else {
                    t.orphan = true;
                    t.shutdown_write();
                    if t.state == State::Closed {
                        Then::Finish
                    } else {
                        Then::Output
                    }
                }
            }))
        })();
        match then {
            Ok(Then::Finish) => self.finish(),
            Ok(Then::Reset) => self.abort_with_reset(),
            Ok(Then::Output) => self.output(),
            Ok(Then::DropHeld) => self.drop_held(),
            Err(_) => {}
        }
    }

    fn drop_held(&mut self) {
        let index = self.stream.index;
        if self.stream.v6 {
            self.stack.tcp_drop_held::<Ipv6>(index)
        } else {
            self.stack.tcp_drop_held::<Ipv4>(index)
        }
    }

    /// True while the connection is held: its SYN taken by a holding listener
    /// ([`Stack::tcp_intercept_holding`]) and not answered yet.
    pub fn is_held(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.held)))().unwrap_or(false)
    }

    /// Confirms a held connection: its SYN-ACK goes out, and the handshake completes as any other
    /// (`is_established` then). Bytes written before are sent once it has. `InvalidInput` if the
    /// connection is not held.
    pub fn confirm(&mut self) -> io::Result<()> {
        if !with_tcb!(self, t => t.held) {
            return Err(not_held());
        }
        let index = self.stream.index;
        if self.stream.v6 {
            self.stack.tcp_confirm::<Ipv6>(index)
        } else {
            self.stack.tcp_confirm::<Ipv4>(index)
        }
        Ok(())
    }

    /// Refuses a held connection with an ICMP destination unreachable of `why` (see
    /// [`Unreachable`]), and drops it. `InvalidInput` if the
    /// connection is not held: an answered SYN can only be reset ([`abort`](Self::abort)).
    pub fn unreachable(mut self, why: Unreachable) -> io::Result<()> {
        let (held, local, remote, seq) =
            with_tcb!(self, t => (t.held, t.local.into(), t.remote.into(), t.irs.0));
        if !held {
            return Err(not_held());
        }
        self.stack.tcp_held_unreachable(local, remote, seq, why);
        self.drop_held();
        Ok(())
    }

    /// Resets the connection at once (an abortive close: `SO_LINGER` with zero time).
    pub fn abort(mut self) {
        let TcpStream {
            index, generation, ..
        } = self.stream;
        let found = if self.stream.v6 {
            self.stack
                .tcp6
                .conn_mut(index, generation)
                .map(|t| t.orphan = true)
        } else {
            self.stack
                .tcp
                .conn_mut(index, generation)
                .map(|t| t.orphan = true)
        };
        if found.is_some() {
            self.abort_with_reset();
        }
    }

    /// The connection's state.
    pub fn state(&mut self) -> io::Result<State> {
        Ok(with_tcb!(self, t => t.state))
    }

    /// Takes the error that ended the connection, if one did (reset, refused, timed out) and no
    /// `read`, `write` or earlier `take_error` has reported it yet: as Linux's `SO_ERROR`, an error
    /// is reported once.
    pub fn take_error(&mut self) -> io::Result<Option<io::Error>> {
        Ok(with_tcb!(self, t => t.take_error().map(io::Error::from)))
    }

    /// True when an error ended the connection and [`take_error`](Self::take_error) has not
    /// reported it yet (what makes Linux's `poll` say `POLLERR`).
    pub fn has_error(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.error.is_some())))().unwrap_or(false)
    }

    /// True when `read` will not return `WouldBlock`.
    pub fn readable(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.readable())))().unwrap_or(false)
    }

    /// True when `write` can queue at least one byte.
    pub fn writable(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.writable())))().unwrap_or(false)
    }

    /// True once the handshake completed and until the connection closes.
    pub fn is_established(&mut self) -> bool {
        (|| Ok::<_, io::Error>(with_tcb!(self, t => t.state.is_synchronized())))().unwrap_or(false)
    }

    /// Bytes written but not yet acknowledged by the peer.
    pub fn unacknowledged(&mut self) -> io::Result<usize> {
        Ok(with_tcb!(self, t => if t.all_acked() { 0 } else { t.tx.len().max(1) }))
    }

    /// Bytes ready to read.
    pub fn available(&mut self) -> io::Result<usize> {
        Ok(with_tcb!(self, t => t.rx.bytes))
    }

    /// Says that the application will write as soon as the connection being made is established
    /// (it waits to: Linux's writer blocked in `connect`). The handshake's ACK then waits to ride on
    /// that data rather than going alone, and the connection counts as interactive from the
    /// SYN-ACK on (its later ACKs wait to ride on answers), as Linux's `tcp_rcv_synsent_state_process`
    /// treats a pending write.
    pub fn expect_write(&mut self) -> io::Result<()> {
        with_tcb!(self, t => t.expect_write());
        Ok(())
    }

    /// Sets the byte this connection's segments carry as the IPv4 header's type of service, or
    /// IPv6's traffic class (`IP_TOS`, `IPV6_TCLASS`): its top six bits, the DSCP (RFC 2474),
    /// from the next segment on. The low two bits are the ECN field, which TCP keeps for itself
    /// (RFC 3168), so they are ignored, as Linux ignores them for a stream socket.
    pub fn set_tos(&mut self, tos: u8) -> io::Result<()> {
        with_tcb!(self, t => t.dscp = tos & !3);
        Ok(())
    }

    /// The type of service set by [`Self::set_tos`] (its DSCP; the ECN bits read 0).
    pub fn tos(&mut self) -> io::Result<u8> {
        Ok(with_tcb!(self, t => t.dscp))
    }

    /// How this connection takes part in path MTU discovery over IPv4 (`IP_MTU_DISCOVER`), from
    /// the next segment on.
    pub fn set_path_mtu_discovery(&mut self, mode: crate::tcp::PathMtuDiscovery) -> io::Result<()> {
        with_tcb!(self, t => t.pmtu = mode);
        Ok(())
    }

    /// The mode set by [`Self::set_path_mtu_discovery`].
    pub fn path_mtu_discovery(&mut self) -> io::Result<crate::tcp::PathMtuDiscovery> {
        Ok(with_tcb!(self, t => t.pmtu))
    }

    /// Turns Nagle's algorithm off (`TCP_NODELAY`) or on. Turned on, what Nagle's algorithm, cork
    /// or `MSG_MORE` held goes at once, as Linux pushes then.
    pub fn set_nodelay(&mut self, on: bool) -> io::Result<()> {
        with_tcb!(self, t => t.set_nodelay(on));
        self.push();
        Ok(())
    }

    /// Sets this connection's keep-alive timings: the idle time before the first probe, the
    /// interval between probes, and the probes unanswered before it gives up (`TCP_KEEPIDLE`,
    /// `TCP_KEEPINTVL`, `TCP_KEEPCNT`); `None` goes back to the stack's
    /// ([`TcpConfig::keepalive`](crate::config::TcpConfig::keepalive)).
    pub fn set_keepalive_times(
        &mut self,
        times: Option<(std::time::Duration, std::time::Duration, u32)>,
    ) -> io::Result<()> {
        let now = self.stack.now;
        let cfg = self.stack.config.tcp.clone();
        with_tcb!(self, t => t.set_keepalive_times(times, now, &cfg));
        Ok(())
    }

    /// Sets the SYN retransmissions before a connect gives up (`TCP_SYNCNT`; `None`: the stack's),
    /// also for a connect under way.
    pub fn set_syn_retries(&mut self, retries: Option<u32>) -> io::Result<()> {
        with_tcb!(self, t => t.set_syn_retries(retries));
        Ok(())
    }

    /// Sets `TCP_CORK`: while on, a partial segment waits for more data (full segments go); Linux
    /// caps the wait with the persist timer, and so does fastpath. Turning it off sends what waits.
    pub fn set_cork(&mut self, on: bool) -> io::Result<()> {
        with_tcb!(self, t => t.set_cork(on));
        self.push();
        Ok(())
    }

    /// Output that may send what cork and `MSG_MORE` hold, when the option just set asked for it.
    fn push(&mut self) {
        self.output();
        let _ = (|| -> io::Result<()> {
            with_tcb!(self, t => t.push_now = false);
            Ok(())
        })();
    }

    /// The `TCP_CORK` setting.
    pub fn cork(&mut self) -> io::Result<bool> {
        Ok(with_tcb!(self, t => t.cork()))
    }

    /// Turns keep-alive probes on or off (`SO_KEEPALIVE`), with the stack's timings.
    pub fn set_keepalive(&mut self, on: bool) -> io::Result<()> {
        let now = self.stack.now;
        let cfg = self.stack.config.tcp.clone();
        with_tcb!(self, t => {
            let idle = t.keepalive_times(&cfg).0;
            t.set_keepalive(on, now, idle)
        });
        self.output();
        Ok(())
    }

    /// Sets the send buffer (Linux's `SO_SNDBUF`, less its doubling for overhead): `write` queues
    /// at most `bytes` not yet acknowledged. Smaller than what is queued, writes wait until enough
    /// is acknowledged.
    pub fn set_send_buffer(&mut self, bytes: usize) -> io::Result<()> {
        with_tcb!(self, t => t.set_send_buffer(bytes));
        Ok(())
    }

    /// Sets the receive buffer, the most the window offers, bytes (Linux's `SO_RCVBUF`). The window
    /// scale stays what the SYN offered (give the buffer to [`Stack::tcp_connect_with`] to have
    /// the SYN offer a scale for it), and the window never shrinks from an edge already advertised.
    pub fn set_recv_buffer(&mut self, bytes: usize) -> io::Result<()> {
        let cfg = self.stack.config.tcp.clone();
        with_tcb!(self, t => t.set_recv_buffer(bytes, &cfg));
        self.output();
        Ok(())
    }

    /// Limits the MSS to `mss` both ways (`TCP_MAXSEG`): segments sent carry at most `mss` bytes
    /// (the SYN's MSS offer is [`Stack::tcp_connect_with`]'s). `InvalidInput` outside Linux's
    /// bounds (88 to 32767).
    pub fn set_max_segment(&mut self, mss: u16) -> io::Result<()> {
        check_max_segment(mss)?;
        with_tcb!(self, t => t.set_max_segment(Some(mss)));
        Ok(())
    }

    /// The MSS limit [`set_max_segment`](Self::set_max_segment) set, if any.
    pub fn max_segment(&mut self) -> io::Result<Option<u16>> {
        Ok(with_tcb!(self, t => t.max_segment()))
    }

    /// Sets `TCP_NOTSENT_LOWAT`: with `Some(n)`, the connection is writable (and `write` takes
    /// bytes) only while fewer than `n` bytes written are not sent yet; a write that finds fewer
    /// takes what the send buffer has room for. `None` turns it off.
    pub fn set_notsent_lowat(&mut self, lowat: Option<u32>) -> io::Result<()> {
        with_tcb!(self, t => t.set_notsent_lowat(lowat));
        Ok(())
    }

    /// The `TCP_NOTSENT_LOWAT` set, if any.
    pub fn notsent_lowat(&mut self) -> io::Result<Option<u32>> {
        Ok(with_tcb!(self, t => t.notsent_lowat()))
    }

    /// Sets `TCP_USER_TIMEOUT` (RFC 5482): with `Some(t)`, the connection is aborted
    /// (`TimedOut`) at a retransmission timeout that finds data it sent unacknowledged for `t`
    /// or more, instead of after the configured number of retries. `None` turns it off.
    pub fn set_user_timeout(&mut self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        with_tcb!(self, t => t.set_user_timeout(timeout));
        Ok(())
    }

    /// The `TCP_USER_TIMEOUT` set, if any.
    pub fn user_timeout(&mut self) -> io::Result<Option<std::time::Duration>> {
        Ok(with_tcb!(self, t => t.user_timeout()))
    }

    /// Local and remote addresses.
    pub fn addrs(&mut self) -> io::Result<(SocketAddr, SocketAddr)> {
        Ok(with_tcb!(self, t => (t.local.into(), t.remote.into())))
    }

    /// Congestion window, RTT, options in use and other figures.
    pub fn info(&mut self) -> io::Result<ConnectionInfo> {
        let now = self.stack.now;
        Ok(with_tcb!(self, t => t.info_at(Some(now))))
    }
}

fn read_result<A: IpAddress>(tcb: &mut Tcb<A>, n: usize, empty_buf: bool) -> io::Result<usize> {
    if n > 0 || empty_buf {
        return Ok(n);
    }
    if let Some(e) = tcb.take_error() {
        return Err(e.into());
    }
    if tcb.fin_received || tcb.state == State::Closed {
        return Ok(0);
    }
    Err(io::ErrorKind::WouldBlock.into())
}

/// `std::io::Read` over [`TcpStreamRef::read`], non-blocking: generic code (`read_to_end`,
/// `io::copy`, `BufReader`) works on a connection, given that every call may return
/// `io::ErrorKind::WouldBlock` when nothing has arrived yet (poll the stack and call again; what
/// `read_to_end` appended before that stays in its vector). `Ok(0)` is the end of the stream.
impl io::Read for TcpStreamRef<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStreamRef::read(self, buf)
    }
}

/// `std::io::Write` over [`TcpStreamRef::write`], non-blocking: `write` queues what fits in the send
/// buffer and returns `WouldBlock` when none does, so `write_all` stops with `WouldBlock` part of the
/// way through a large buffer (write what remains after the next poll, or loop on `write`).
impl io::Write for TcpStreamRef<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStreamRef::write(self, buf)
    }

    /// Does nothing and succeeds: written bytes are already queued, and leave (as segments handed to
    /// the link) at the next [`Stack::poll`] or [`Stack::flush`], as the congestion and receive windows
    /// (and Nagle's algorithm, unless [`set_nodelay`](TcpStreamRef::set_nodelay)) allow.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StackConfig;
    use crate::time::Instant;

    #[test]
    fn socket_options_reach_the_syn_and_a_listeners_connections() {
        let mut stack = Stack::new(StackConfig::default());
        let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 80);
        let l = stack.tcp_listen(server, 4).unwrap();
        stack.tcp_listener(l).set_max_segment(1000).unwrap();
        stack.tcp_listener(l).set_send_buffer(5000).unwrap();
        let bad = TcpSocketOptions {
            max_segment: Some(40),
            ..TcpSocketOptions::default()
        };
        let refused = stack.tcp_connect_with("0.0.0.0:0", server, bad);
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            stack
                .tcp_listener(l)
                .set_max_segment(40)
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
        let options = TcpSocketOptions {
            max_segment: Some(1100),
            ..TcpSocketOptions::default()
        };
        let c = stack
            .tcp_connect_with("0.0.0.0:0", server, options)
            .unwrap();
        for _ in 0..4 {
            stack.poll(Instant::ZERO);
        }
        let (s, _) = stack.tcp_listener(l).accept().unwrap();
        let client = stack.tcp(c).info().unwrap();
        let accepted = stack.tcp(s).info().unwrap();
        // Each side offered its limit and sends with the smaller of the two, less the timestamps.
        assert_eq!((client.advertised_mss, client.mss), (1100, 988));
        assert_eq!((accepted.advertised_mss, accepted.mss), (1000, 988));
        assert_eq!(stack.tcp(c).max_segment().unwrap(), Some(1100));
        assert_eq!(stack.tcp(s).write(&[0; 20_000]).unwrap(), 5000);
        stack.tcp(c).set_send_buffer(100).unwrap();
        assert_eq!(stack.tcp(c).write(&[0; 1000]).unwrap(), 100);
    }
}
