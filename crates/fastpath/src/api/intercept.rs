//! Interception: the stack as the far end of every connection and flow that arrives on an
//! interface, whatever its destination. This is what a transparent proxy (a "tun2socks") needs: the
//! applications behind a TUN interface talk to the whole network, and the stack terminates each TCP
//! connection and UDP flow in their place, as if it were the host they addressed, so the program
//! can relay it.
//!
//! [`Stack::set_intercept`] marks an interface: IP takes a packet to any unicast address arriving
//! there (both families), not only to the host's own. Such a packet reaches only:
//! - TCP's intercepting listener ([`Stack::tcp_intercept`]): a SYN to any address and port that no
//!   connection of its own claims becomes a connection whose local address is the destination the
//!   peer asked for (`TcpStreamRef::addrs`), accepted like any other. Segments of such a connection
//!   find it through the demultiplexer as every connection's do (its four-tuple): no scan, no table
//!   of its own. A listener on one of the host's ports never takes it.
//! - UDP's intercept queue ([`Stack::udp_intercept`]): datagrams to any address and port, each read
//!   with its sender and the destination it was sent to ([`Stack::udp_recv_intercepted`]), answered
//!   from that destination ([`Stack::udp_send_from`]).
//!
//! Anything else intercepted (ICMP, other protocols) is dropped, counted as
//! [`DropReason::InterceptedOther`](crate::DropReason::InterceptedOther); nothing intercepted is answered with an ICMP error
//! unless the application asks (a held SYN's [`unreachable`](crate::TcpStreamRef::unreachable), a
//! datagram's [`Stack::udp_intercepted_unreachable`]). Limits: the
//! listener's backlog and the stack's connection limit for TCP (SYN cookies when the backlog is
//! full, as any listener); [`Limits::udp_intercept_queue_bytes`](crate::config::Limits) for UDP;
//! drops are counted as `TcpInterceptOff`, `UdpInterceptOff` and `UdpInterceptQueueFull`.

use std::io::{self, IoSlice};
use std::net::SocketAddr;

use crate::addr::IpAddress;
use crate::ipv4::Ipv4;
use crate::ipv6::Ipv6;
use crate::route::InterfaceId;
use crate::stack::{Family, Stack, TcpFamily};
use crate::tcp::TcpListener;
use crate::udp::{Intercepted, Payload};
use crate::wire::icmpv6::unreachable;
use crate::wire::{DstUnreachable, IpProtocol, Ipv4Repr, Ipv6Repr};

/// A packet an ICMP error is about, rebuilt: its addresses, protocol and length, and the first 8
/// bytes of its transport header (what RFC 792 asks an error to quote, and what its receiver matches
/// the error on).
struct Quote {
    from: SocketAddr,
    to: SocketAddr,
    protocol: IpProtocol,
    payload_len: usize,
    head: [u8; 8],
}

/// Why a held connection's destination cannot be reached, for
/// [`TcpStreamRef::unreachable`](crate::TcpStreamRef::unreachable): the ICMP destination
/// unreachable its peer gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// No route to the destination's network: ICMP code 0 (ICMPv6: no route, 0). Linux reports
    /// `ENETUNREACH`.
    Network,
    /// The host does not answer: ICMP code 1 (ICMPv6: address unreachable, 3). `EHOSTUNREACH`.
    Host,
    /// A policy forbids it: ICMP code 13 (ICMPv6: administratively prohibited, 1). `EHOSTUNREACH`.
    Prohibited,
}

impl Unreachable {
    /// The unreachable a failed connect's error stands for, if it stands for one: `None` for a
    /// refusal (answer that with a RST) and for anything else.
    pub fn of(error: &io::Error) -> Option<Unreachable> {
        match error.kind() {
            io::ErrorKind::NetworkUnreachable => Some(Unreachable::Network),
            io::ErrorKind::HostUnreachable => Some(Unreachable::Host),
            io::ErrorKind::PermissionDenied => Some(Unreachable::Prohibited),
            _ => None,
        }
    }
}

impl Stack {
    /// Makes interface `iface` intercept (or stop intercepting): IP takes packets to any unicast
    /// address arriving on it, in both families, and hands their TCP and UDP to
    /// [`tcp_intercept`](Stack::tcp_intercept)'s listener and [`udp_intercept`](Stack::udp_intercept)'s
    /// queue (see the [module](self)).
    pub fn set_intercept(&mut self, iface: InterfaceId, on: bool) -> io::Result<()> {
        let (Some(v4), Some(v6)) = (
            self.ip.ifaces.get_mut(iface.0),
            self.ip6.ifaces.get_mut(iface.0),
        ) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {}", iface.0),
            ));
        };
        v4.intercept = on;
        v6.intercept = on;
        Ok(())
    }

    /// The intercepting TCP listener, both families: it accepts connections to any address and port
    /// arriving on an intercepting interface. `accept` gives IPv4 peers v4-mapped, as a dual-stack
    /// listener does; `stack.tcp(s).addrs()` gives a connection's own addresses, the local one being
    /// the destination its peer asked for. One per stack; closing it stops interception of TCP.
    pub fn tcp_intercept(&mut self, backlog: usize) -> io::Result<TcpListener> {
        self.intercept_listener(backlog, false)
    }

    /// The intercepting TCP listener, as [`tcp_intercept`](Stack::tcp_intercept), holding each SYN:
    /// a SYN becomes a connection for `accept` at once, but nothing answers it until the application
    /// decides, as a transparent proxy does once it knows whether the real destination answers:
    /// - [`confirm`](crate::TcpStreamRef::confirm) sends the SYN-ACK, and the handshake goes on;
    /// - [`abort`](crate::TcpStreamRef::abort) answers with a RST: the peer's connect is refused;
    /// - [`unreachable`](crate::TcpStreamRef::unreachable) answers with an ICMP destination
    ///   unreachable: the peer's connect fails with "no route to host" (or "network unreachable");
    /// - [`close`](crate::TcpStreamRef::close) drops it without a word, as if the SYN was lost: the
    ///   peer sends it again (a new connection to decide on) until it gives up.
    ///
    /// The SYNs the peer sends again meanwhile go to the held connection and are not answered.
    /// Held connections count against the backlog and the connection limit; no SYN cookie is sent
    /// for a full backlog (a cookie would answer the SYN). Counted as `held_syns`,
    /// `held_confirmed` and `held_refused`.
    pub fn tcp_intercept_holding(&mut self, backlog: usize) -> io::Result<TcpListener> {
        self.intercept_listener(backlog, true)
    }

    fn intercept_listener(&mut self, backlog: usize, hold: bool) -> io::Result<TcpListener> {
        let max = self.config.limits.tcp_backlog;
        let (index, generation) =
            <Ipv6 as TcpFamily>::table(self).listen_intercept(max, backlog, hold)?;
        match <Ipv4 as TcpFamily>::table(self).listen_intercept(max, backlog, hold) {
            Ok(half) => Ok(TcpListener {
                index,
                generation,
                v6: true,
                v4_half: Some(half),
            }),
            Err(e) => {
                self.tcp6.remove(index);
                Err(e)
            }
        }
    }

    /// Turns interception of UDP on or off, both families. While on, datagrams to any address and
    /// port arriving on an intercepting interface are queued (within
    /// `Limits::udp_intercept_queue_bytes`) for [`udp_recv_intercepted`](Stack::udp_recv_intercepted),
    /// and [`udp_send_from`](Stack::udp_send_from) may send from other hosts' addresses. Turning it
    /// off discards what is queued.
    pub fn udp_intercept(&mut self, on: bool) {
        let limit = on.then_some(self.config.limits.udp_intercept_queue_bytes);
        self.udp.v4.set_intercept(limit, &mut self.pool);
        self.udp.v6.set_intercept(limit, &mut self.pool);
    }

    /// True when an intercepted datagram is queued.
    pub fn udp_intercepted_readable(&self) -> bool {
        let queued = |q: Option<usize>| q.is_some_and(|n| n > 0);
        queued(self.udp.v4.intercept.as_ref().map(|q| q.rx.len()))
            || queued(self.udp.v6.intercept.as_ref().map(|q| q.rx.len()))
    }

    /// Receives the next intercepted datagram into `buf`: its length (bytes past `buf.len()` are
    /// discarded, as `recv_from`), its sender, and the destination it was sent to. IPv4's queue is
    /// read before IPv6's. `WouldBlock` when none is queued; `NotConnected` when interception of UDP
    /// is off.
    pub fn udp_recv_intercepted(
        &mut self,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        if self.udp.v4.intercept.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "interception of UDP is off",
            ));
        }
        if let Some(d) = self.udp.v4.pop_intercepted() {
            return Ok(self.copy_intercepted(d, buf));
        }
        if let Some(d) = self.udp.v6.pop_intercepted() {
            return Ok(self.copy_intercepted(d, buf));
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn copy_intercepted<A: IpAddress>(
        &mut self,
        d: Intercepted<A>,
        buf: &mut [u8],
    ) -> (usize, SocketAddr, SocketAddr)
    where
        A::Socket: Into<SocketAddr>,
    {
        let data = d.buf.data();
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        self.pool.free(d.buf);
        let from = A::socket(d.from.0, d.from.1).into();
        let to = A::socket(d.to.0, d.to.1).into();
        (n, from, to)
    }

    /// Tells the application at `app` that the intercepted destination `dst` refused its datagram
    /// of `len` bytes: an ICMP port unreachable (ICMPv6 destination unreachable, port) quoting the
    /// datagram's headers, so its socket sees `ConnectionRefused` as it would from the destination
    /// itself. Sent from the host's address on the route, under the ICMP error limits. Needs
    /// interception of UDP on.
    pub fn udp_intercepted_unreachable(
        &mut self,
        app: SocketAddr,
        dst: SocketAddr,
        len: usize,
    ) -> io::Result<()> {
        if self.udp.v4.intercept.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "interception of UDP is off",
            ));
        }
        let udp_len = u16::try_from(8 + len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "longer than a datagram"))?;
        let mut udp = [0u8; 8];
        udp[..2].copy_from_slice(&app.port().to_be_bytes());
        udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        let quote = Quote {
            from: app,
            to: dst,
            protocol: IpProtocol::Udp,
            payload_len: usize::from(udp_len),
            head: udp,
        };
        self.send_unreachable(&quote, DstUnreachable::PortUnreachable, unreachable::PORT)
    }

    /// Answers the held SYN of `remote` to `local` (sequence number `seq`) with an ICMP destination
    /// unreachable of `why`. The quote is rebuilt from the connection (the SYN itself is not kept):
    /// its IP header and the first 8 bytes of its TCP header, the ports and sequence number, which
    /// is what RFC 792 asks for and what the peer matches the error on.
    pub(crate) fn tcp_held_unreachable(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seq: u32,
        why: Unreachable,
    ) {
        let mut tcp = [0u8; 8];
        tcp[..2].copy_from_slice(&remote.port().to_be_bytes());
        tcp[2..4].copy_from_slice(&local.port().to_be_bytes());
        tcp[4..].copy_from_slice(&seq.to_be_bytes());
        let (reason, code) = match why {
            Unreachable::Network => (DstUnreachable::NetUnreachable, unreachable::NO_ROUTE),
            Unreachable::Host => (DstUnreachable::HostUnreachable, unreachable::ADDRESS),
            // RFC 1812 §5.2.7.1: communication administratively prohibited.
            Unreachable::Prohibited => (DstUnreachable::Other(13), unreachable::PROHIBITED),
        };
        let quote = Quote {
            from: remote,
            to: local,
            protocol: IpProtocol::Tcp,
            // A header without options: the SYN's own length is not kept.
            payload_len: 20,
            head: tcp,
        };
        let _ = self.send_unreachable(&quote, reason, code);
    }

    /// Sends a destination unreachable (`reason` for IPv4, `code` for IPv6) about `quote`, under
    /// the ICMP rate limit.
    fn send_unreachable(
        &mut self,
        quote: &Quote,
        reason: DstUnreachable,
        code: u8,
    ) -> io::Result<()> {
        match (quote.from, quote.to) {
            (SocketAddr::V4(from), SocketAddr::V4(to)) => {
                let ip = Ipv4Repr {
                    src_addr: *from.ip(),
                    dst_addr: *to.ip(),
                    protocol: quote.protocol,
                    payload_len: quote.payload_len,
                    ttl: 64,
                    tos: 0,
                    ident: 0,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                };
                self.icmp_send_error(reason, &ip, &quote.head);
            }
            (SocketAddr::V6(from), SocketAddr::V6(to)) => {
                let ip = Ipv6Repr {
                    src_addr: *from.ip(),
                    dst_addr: *to.ip(),
                    next_header: quote.protocol,
                    payload_len: quote.payload_len,
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                };
                let mut quoted = [0u8; 48];
                ip.emit(&mut quoted[..40]);
                quoted[40..].copy_from_slice(&quote.head);
                self.icmp6_unreachable(code, &quoted, &ip);
            }
            (from, to) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{from} and {to} are of different families"),
                ))
            }
        }
        Ok(())
    }

    /// Sends `payload` as one datagram from `from`, another host's address and port (the destination
    /// of an intercepted flow, answering it), to `to`, both of one family. Needs interception of UDP
    /// on (`PermissionDenied` otherwise, as Linux needs `IP_TRANSPARENT`).
    pub fn udp_send_from(
        &mut self,
        payload: &[u8],
        from: SocketAddr,
        to: SocketAddr,
    ) -> io::Result<usize> {
        let payload = Payload::Copy(&[IoSlice::new(payload)]);
        match (from, to) {
            (SocketAddr::V4(from), SocketAddr::V4(to)) => {
                let (udp, mut cx) = <Ipv4 as Family>::udp(self);
                udp.send_from(&mut cx, payload, from, to)
            }
            (SocketAddr::V6(from), SocketAddr::V6(to)) => {
                let (udp, mut cx) = <Ipv6 as Family>::udp(self);
                udp.send_from(&mut cx, payload, from, to)
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{from} and {to} are of different families"),
            )),
        }
    }
}
