//! The TCP API, shaped like `std::net::TcpListener` and `TcpStream`: every call is non-blocking and
//! returns `io::ErrorKind::WouldBlock` when it would wait; `readable` and `writable` tell when to try.
//! Nothing moves until the stack is polled. A handle borrows the whole stack for the call; the work
//! is TCP's (`crate::tcp`), reached through the stack.

use std::io;
use std::net::{SocketAddrV4, ToSocketAddrs};

use crate::stack::Stack;
use crate::tcp::{ConnectionInfo, State, Tcb, TcpListener, TcpStream};

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "no such TCP socket (closed)")
}

impl Stack {
    /// Listens on `local` (address `0.0.0.0` for all of the host's addresses) with room for `backlog`
    /// half-open and as many established, unaccepted connections (capped by the configured limit).
    /// `local` is anything [`ToSocketAddrs`] takes, resolved to its first IPv4 address as for
    /// [`udp_bind`](Stack::udp_bind).
    pub fn tcp_listen(
        &mut self,
        local: impl ToSocketAddrs,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        let local = crate::addr::ipv4(&local)?;
        let (index, generation) =
            self.tcp
                .listen(&self.ip, self.config.limits.tcp_backlog, local, backlog)?;
        Ok(TcpListener { index, generation })
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
    /// as for [`tcp_listen`](Stack::tcp_listen).
    pub fn tcp_connect(&mut self, remote: impl ToSocketAddrs) -> io::Result<TcpStream> {
        self.tcp_connect_from(
            SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
            remote,
        )
    }

    /// Opens a connection from `local` (address or port may be unspecified) to `remote`, both as for
    /// [`tcp_listen`](Stack::tcp_listen).
    pub fn tcp_connect_from(
        &mut self,
        local: impl ToSocketAddrs,
        remote: impl ToSocketAddrs,
    ) -> io::Result<TcpStream> {
        let local = crate::addr::ipv4(&local)?;
        let remote = crate::addr::ipv4(&remote)?;
        let (index, generation) = self.tcp_connect_v4(local, remote)?;
        Ok(TcpStream { index, generation })
    }

    /// A connection handle for calls: `stack.tcp(s).read(..)`.
    pub fn tcp(&mut self, stream: TcpStream) -> TcpStreamRef<'_> {
        TcpStreamRef {
            stack: self,
            stream,
        }
    }

    /// TCP connections in the table, in every state.
    pub fn tcp_connections(&self) -> usize {
        self.tcp.connections()
    }
}

/// A listener borrowed for a call.
#[derive(Debug)]
pub struct TcpListenerRef<'a> {
    stack: &'a mut Stack,
    listener: TcpListener,
}

impl TcpListenerRef<'_> {
    /// Takes an established connection off the queue, with the peer's address.
    pub fn accept(&mut self) -> io::Result<(TcpStream, SocketAddrV4)> {
        let TcpListener { index, generation } = self.listener;
        loop {
            let l = self
                .stack
                .tcp
                .listener_mut(index, generation)
                .ok_or_else(closed)?;
            let Some(child) = l.ready.pop_front() else {
                return Err(io::ErrorKind::WouldBlock.into());
            };
            let Some(tcb) = self.stack.tcp.tcb(child.0) else {
                continue;
            };
            tcb.listener = None;
            let remote = tcb.remote;
            let generation = self.stack.tcp.generation(child.0);
            return Ok((
                TcpStream {
                    index: child.0,
                    generation,
                },
                remote,
            ));
        }
    }

    /// The address listened on.
    pub fn local_addr(&mut self) -> io::Result<SocketAddrV4> {
        let TcpListener { index, generation } = self.listener;
        Ok(self
            .stack
            .tcp
            .listener_mut(index, generation)
            .ok_or_else(closed)?
            .local)
    }

    /// True when `accept` has a connection to return.
    pub fn readable(&mut self) -> bool {
        let TcpListener { index, generation } = self.listener;
        self.stack
            .tcp
            .listener_mut(index, generation)
            .is_some_and(|l| !l.ready.is_empty())
    }

    /// Stops listening: connections not yet accepted are reset.
    pub fn close(self) {
        let TcpListener { index, generation } = self.listener;
        let Some(l) = self.stack.tcp.listener_mut(index, generation) else {
            return;
        };
        // Its children, established and half-open, are known to it: no scan of the table.
        let mut children: Vec<u32> = l.ready.drain(..).map(|id| id.0).collect();
        children.append(&mut l.half_open);
        self.stack.tcp.remove(index);
        for child in children {
            self.stack.tcp_abort_with_reset(child);
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
    fn tcb(&mut self) -> io::Result<&mut Tcb> {
        let TcpStream { index, generation } = self.stream;
        match self.stack.tcp.conn_mut(index, generation) {
            Some(t) if !t.orphan => Ok(t),
            _ => Err(closed()),
        }
    }

    /// Queues `buf` for sending; returns how much fitted (`WouldBlock` if none did).
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        layer!(Send, Socket);
        let n = self.tcb()?.write(buf)?;
        self.stack.tcp_output(self.stream.index);
        layer!();
        Ok(n)
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
        let n = self.tcb()?.write_with(max, &mut fill)?;
        self.stack.tcp_output(self.stream.index);
        Ok(n)
    }

    /// Reads into `buf`. `Ok(0)` means the peer closed and everything was read; `WouldBlock`, that
    /// nothing is there yet.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        layer!(Receive, Socket);
        let TcpStream { index, generation } = self.stream;
        let stack = &mut *self.stack;
        let tcb = match stack.tcp.conn_mut(index, generation) {
            Some(t) if !t.orphan => t,
            _ => return Err(closed()),
        };
        let n = tcb.rx.read(buf, &mut stack.pool);
        let result = read_result(tcb, n, buf.is_empty());
        if n > 0 {
            tcb.after_read();
            stack.tcp_output(index);
        }
        layer!();
        result
    }

    /// Zero-copy receive (paper 002 §3.1): lends the received bytes to `f` in the buffers they
    /// arrived in; `f` returns how many it consumed. Returns the total consumed, `Ok(0)` at the end
    /// of the stream.
    pub fn read_with(&mut self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        let TcpStream { index, generation } = self.stream;
        let stack = &mut *self.stack;
        let tcb = match stack.tcp.conn_mut(index, generation) {
            Some(t) if !t.orphan => t,
            _ => return Err(closed()),
        };
        let n = tcb.rx.read_with(&mut f, &mut stack.pool);
        let result = read_result(tcb, n, false);
        if n > 0 {
            tcb.after_read();
            stack.tcp_output(index);
        }
        result
    }

    /// Shuts down writing: a FIN follows the queued data.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        let tcb = self.tcb()?;
        tcb.shutdown_write();
        let gone = tcb.state == State::Closed;
        if gone {
            self.stack.tcp_finish(self.stream.index);
        } else {
            self.stack.tcp_output(self.stream.index);
        }
        Ok(())
    }

    /// Closes the handle. The connection finishes in the background (queued data, then FIN), unless
    /// unread data is waiting, in which case it is reset at once (RFC 2525 §2.17, as BSD and Linux do).
    pub fn close(mut self) {
        let index = self.stream.index;
        let Ok(tcb) = self.tcb() else {
            return;
        };
        tcb.orphan = true;
        if tcb.state == State::Closed {
            return self.stack.tcp_finish(index);
        }
        if tcb.rx.bytes > 0 {
            return self.stack.tcp_abort_with_reset(index);
        }
        tcb.shutdown_write();
        if tcb.state == State::Closed {
            return self.stack.tcp_finish(index);
        }
        self.stack.tcp_output(index);
    }

    /// Resets the connection at once (an abortive close: `SO_LINGER` with zero time).
    pub fn abort(self) {
        let TcpStream { index, generation } = self.stream;
        if let Some(t) = self.stack.tcp.conn_mut(index, generation) {
            t.orphan = true;
            self.stack.tcp_abort_with_reset(index);
        }
    }

    /// The connection's state.
    pub fn state(&mut self) -> io::Result<State> {
        Ok(self.tcb()?.state)
    }

    /// The error that ended the connection, if one did (reset, refused, timed out).
    pub fn take_error(&mut self) -> io::Result<Option<io::Error>> {
        Ok(self.tcb()?.error.map(io::Error::from))
    }

    /// True when `read` will not return `WouldBlock`.
    pub fn readable(&mut self) -> bool {
        self.tcb().is_ok_and(|t| t.readable())
    }

    /// True when `write` can queue at least one byte.
    pub fn writable(&mut self) -> bool {
        self.tcb().is_ok_and(|t| t.writable())
    }

    /// True once the handshake completed and until the connection closes.
    pub fn is_established(&mut self) -> bool {
        self.tcb().is_ok_and(|t| t.state.is_synchronized())
    }

    /// Bytes written but not yet acknowledged by the peer.
    pub fn unacknowledged(&mut self) -> io::Result<usize> {
        let t = self.tcb()?;
        Ok(if t.all_acked() { 0 } else { t.tx.len().max(1) })
    }

    /// Bytes ready to read.
    pub fn available(&mut self) -> io::Result<usize> {
        Ok(self.tcb()?.rx.bytes)
    }

    /// Turns Nagle's algorithm off (`TCP_NODELAY`) or on.
    pub fn set_nodelay(&mut self, on: bool) -> io::Result<()> {
        self.tcb()?.nodelay = on;
        Ok(())
    }

    /// Turns keep-alive probes on or off (`SO_KEEPALIVE`), with the stack's timings.
    pub fn set_keepalive(&mut self, on: bool) -> io::Result<()> {
        let now = self.stack.now;
        let idle = self.stack.config.tcp.keepalive.0;
        self.tcb()?.set_keepalive(on, now, idle);
        let index = self.stream.index;
        self.stack.tcp_output(index);
        Ok(())
    }

    /// Local and remote addresses.
    pub fn addrs(&mut self) -> io::Result<(SocketAddrV4, SocketAddrV4)> {
        let t = self.tcb()?;
        Ok((t.local, t.remote))
    }

    /// Congestion window, RTT, options in use and other figures.
    pub fn info(&mut self) -> io::Result<ConnectionInfo> {
        Ok(self.tcb()?.info())
    }
}

fn read_result(tcb: &Tcb, n: usize, empty_buf: bool) -> io::Result<usize> {
    if n > 0 || empty_buf {
        return Ok(n);
    }
    if let Some(e) = tcb.error {
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
