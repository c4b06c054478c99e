//! Interception: datagrams to other hosts' addresses, queued for the application (a transparent
//! proxy), and datagrams it sends from such addresses.

use super::*;

/// The queue of intercepted datagrams, bounded in bytes.
#[derive(Debug)]
pub(crate) struct InterceptQueue<A> {
    pub(crate) rx: std::collections::VecDeque<Intercepted<A>>,
    pub(crate) bytes: usize,
    pub(crate) limit: usize,
}

/// An intercepted datagram: its payload (the buffer's window, checksum verified), its sender and the
/// destination it was sent to.
#[derive(Debug)]
pub(crate) struct Intercepted<A> {
    pub(crate) buf: PacketBuf,
    pub(crate) from: (A, u16),
    pub(crate) to: (A, u16),
}

impl<N: Network> Table<N> {
    /// Queues an intercepted datagram (to another host's address) for the application, if interception
    /// of UDP is on; no socket of the host's is looked at, and nothing answers it.
    #[inline(never)]
    pub(super) fn intercepted(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        mut buf: PacketBuf,
        from: N::Socket,
        to: N::Socket,
        pending: Option<u16>,
    ) {
        let Some(queue) = &mut self.intercept else {
            return cx.drop(buf, DropReason::UdpInterceptOff);
        };
        // The queue is the application's: verify a deferred checksum now rather than keep its sum.
        if !deferred_ok(pending, &buf.data()[8..]) {
            return cx.drop(buf, DropReason::UdpBadChecksum);
        }
        let size = buf.truesize();
        if queue.bytes + size > queue.limit {
            return cx.drop(buf, DropReason::UdpInterceptQueueFull);
        }
        buf.pull_front(8);
        queue.bytes += size;
        self.hints.note(INTERCEPT_HINT);
        queue.rx.push_back(Intercepted {
            buf,
            from: (N::Addr::ip(&from), N::Addr::port(&from)),
            to: (N::Addr::ip(&to), N::Addr::port(&to)),
        });
        cx.counters.udp.in_datagrams += 1;
    }

    /// Turns interception of UDP on (with a queue of at most `limit` bytes) or off (what is queued
    /// is freed).
    pub(crate) fn set_intercept(&mut self, limit: Option<usize>, pool: &mut BufferPool) {
        match limit {
            Some(limit) => match &mut self.intercept {
                Some(q) => q.limit = limit,
                None => {
                    self.intercept = Some(InterceptQueue {
                        rx: Default::default(),
                        bytes: 0,
                        limit,
                    })
                }
            },
            None => {
                for d in self.intercept.take().into_iter().flat_map(|q| q.rx) {
                    pool.free(d.buf);
                }
            }
        }
    }

    /// The next intercepted datagram, if any.
    pub(crate) fn pop_intercepted(&mut self) -> Option<Intercepted<N::Addr>> {
        let queue = self.intercept.as_mut()?;
        let d = queue.rx.pop_front()?;
        queue.bytes -= d.buf.truesize();
        Some(d)
    }

    /// Sends `payload` from `from`, another host's address (the destination of an intercepted flow),
    /// to `to`: allowed while interception of UDP is on.
    pub(crate) fn send_from(
        &mut self,
        cx: &mut UdpCx<impl Transmit, N>,
        mut payload: Payload<'_, '_>,
        from: N::Socket,
        to: N::Socket,
    ) -> io::Result<usize>
    where
        N: UdpFamily,
    {
        if self.intercept.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "sending from another host's address needs interception of UDP on",
            ));
        }
        let len = payload.len();
        if len > N::MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram of {len} bytes exceeds {}", N::MAX_PAYLOAD),
            ));
        }
        for (a, what) in [(from, "source"), (to, "destination")] {
            if N::Addr::port(&a) == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{what} {a}: port 0"),
                ));
            }
            if N::Addr::ip(&a).is_wildcard() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!("{what} {a}: a wildcard address or port 0"),
                ));
            }
        }
        if cx.ip.is_broadcast(N::Addr::ip(&to)) {
            return Err(broadcast_denied());
        }
        let pcb = Pcb {
            local_addr: N::Addr::ip(&from),
            local_port: N::Addr::port(&from),
            remote_addr: N::Addr::ip(&to),
            remote_port: N::Addr::port(&to),
        };
        let tx = tx_route(self.cfg, cx, pcb, UdpOptions::default(), to)?;
        let s = Self::handle(UdpSocket::NO_INDEX, 0);
        output(&self.cfg, None, cx, s, &tx, pcb, &mut payload, len);
        Ok(len)
    }
}
