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
//! [`DropReason::InterceptedOther`](crate::DropReason::InterceptedOther); nothing intercepted is answered with an ICMP error. Limits: the
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
use crate::wire::{DstUnreachable, IpProtocol, Ipv4Repr, Ipv6Repr};

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
        let max = self.config.limits.tcp_backlog;
        let (index, generation) =
            <Ipv6 as TcpFamily>::table(self).listen_intercept(max, backlog)?;
        match <Ipv4 as TcpFamily>::table(self).listen_intercept(max, backlog) {
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
    /// itself. Sent from the host's address on the route, under the ICMP rate limit. Needs
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
        match (app, dst) {
            (SocketAddr::V4(app), SocketAddr::V4(dst)) => {
                let ip = Ipv4Repr {
                    src_addr: *app.ip(),
                    dst_addr: *dst.ip(),
                    protocol: IpProtocol::Udp,
                    payload_len: usize::from(udp_len),
                    ttl: 64,
                    tos: 0,
                    ident: 0,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                };
                self.icmp_send_error(DstUnreachable::PortUnreachable, &ip, &udp);
            }
            (SocketAddr::V6(app), SocketAddr::V6(dst)) => {
                let ip = Ipv6Repr {
                    src_addr: *app.ip(),
                    dst_addr: *dst.ip(),
                    next_header: IpProtocol::Udp,
                    payload_len: usize::from(udp_len),
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                };
                let mut quoted = [0u8; 48];
                ip.emit(&mut quoted[..40]);
                quoted[40..].copy_from_slice(&udp);
                self.icmp6_unreachable_port(&quoted, &ip);
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{app} and {dst} are of different families"),
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
