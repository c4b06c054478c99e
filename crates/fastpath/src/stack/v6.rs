//! The stack's routing for IPv6: a packet IPv6 accepted to its upper layer, ICMPv6's answers and
//! errors back to IPv6, and the calls that configure IPv6 addresses and routes.

use std::io;
use std::net::Ipv6Addr;

use super::{Family, Stack, TcpFamily};
use crate::buf::PacketBuf;
use crate::icmpv6::{Icmp6Cx, Icmp6Error, Icmp6Input, Icmp6Out};
use crate::ip::Delivery;
use crate::ipv6::Ipv6;
use crate::ipv6::{Accepted6, Input6, Ip6Cx, NextHop6};
use crate::route::{InterfaceId, Ipv6Cidr, Route, RoutingTable};
use crate::stats::DropReason;
use crate::wire::icmpv6::{param_problem, unreachable};
use crate::wire::{IpProtocol, Ipv6Repr};

/// Splits a stack's fields into IPv6's context and the devices: `ip6_cx!(self)` gives
/// `(ip6, cx, devices)`.
macro_rules! ip6_cx {
    ($s:expr) => {
        (
            &mut $s.ip6,
            Ip6Cx {
                now: $s.now,
                pool: &mut $s.pool,
                counters: &mut $s.counters.ip6,
                drops: &mut $s.counters.drops,
            },
            &mut $s.devices,
        )
    };
}

/// Splits a stack's fields into ICMPv6's context: `icmp6_cx!(self)` gives `(icmp6, cx)`.
macro_rules! icmp6_cx {
    ($s:expr) => {
        (
            &mut $s.icmp6,
            Icmp6Cx {
                now: $s.now,
                pool: &mut $s.pool,
                counters: &mut $s.counters.icmp6,
                drops: &mut $s.counters.drops,
                ip: &$s.ip6,
            },
        )
    };
}

impl Stack {
    /// Gives interface `iface` the IPv6 address `cidr.addr`, with a route to its prefix on the link
    /// (none for a /128). Loopback has `::1` from the start. On an Ethernet interface the address
    /// is first checked for duplicates (RFC 4862 §5.4; [`EthernetConfig::dad_transmits`]) and is
    /// used once no other node has claimed it, a second later by default.
    ///
    /// [`EthernetConfig::dad_transmits`]: crate::config::EthernetConfig::dad_transmits
    pub fn add_ipv6_address(&mut self, iface: InterfaceId, cidr: Ipv6Cidr) -> io::Result<()> {
        if iface.0 >= self.devices.list.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such interface",
            ));
        }
        if cidr.addr.is_unspecified() || cidr.addr.is_multicast() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} cannot be an interface address", cidr.addr),
            ));
        }
        // An Ethernet interface checks the address for duplicates first.
        if !self.ethernet_add_ipv6(iface, cidr) {
            self.ip6.add_address(iface, cidr, true);
        }
        Ok(())
    }

    /// Takes the IPv6 address `addr` from interface `iface`, with the route to its prefix that
    /// [`Self::add_ipv6_address`] gave it. Packets
    /// to it are no longer ours, and connections from it have no source; on an Ethernet interface
    /// it is no longer answered for, its duplicate check stops if it was still being checked, and
    /// its solicited-node group is left (reported to multicast routers, RFC 3810). Fails with
    /// `NotFound` when `iface` has no such address (usable or being checked).
    pub fn remove_ipv6_address(&mut self, iface: InterfaceId, addr: Ipv6Addr) -> io::Result<()> {
        let (now, i) = (self.now, iface.0);
        if i >= self.devices.list.len()
            || (iface == crate::ip::LOOPBACK && addr == Ipv6Addr::LOCALHOST)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such interface, or loopback's ::1",
            ));
        }
        let (mut on_link, mut found) = (true, false);
        if let Some(eth) = self.devices.list[i].eth.as_mut() {
            on_link = !eth.is_autoconfigured(addr);
            found = eth.remove_ipv6(addr, now);
        }
        found |= self.ip6.remove_address(iface, addr, on_link);
        if !found {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{addr} is not an address of that interface"),
            ));
        }
        Ok(())
    }

    /// Adds an IPv6 route to `dest` through `gateway` (or directly, if `None`) on `iface`.
    pub fn add_ipv6_route(
        &mut self,
        dest: Ipv6Cidr,
        gateway: Option<Ipv6Addr>,
        iface: InterfaceId,
    ) -> io::Result<()> {
        if iface.0 >= self.devices.list.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such interface",
            ));
        }
        self.ip6.add_route(Route {
            dest,
            gateway,
            iface,
        });
        Ok(())
    }

    /// The IPv6 routing table.
    pub fn ipv6_routes(&self) -> &RoutingTable<Ipv6Addr> {
        &self.ip6.routes
    }

    /// The IPv6 addresses of interface `iface`, with their prefixes.
    pub fn ipv6_addresses(&self, iface: InterfaceId) -> &[Ipv6Cidr] {
        self.ip6
            .ifaces
            .get(iface.0)
            .map_or(&[][..], |f| &f.addrs[..])
    }

    /// Input: one packet whose version field is 6, through IPv6 to its upper layer.
    #[inline(never)]
    pub(crate) fn ipv6_input(&mut self, iface: InterfaceId, mut packet: PacketBuf) {
        if let Some(ip) = self
            .ip6
            .input_predicted::<17>(&mut self.counters.ip6, iface, &mut packet)
        {
            let (udp, mut cx) = <Ipv6 as Family>::udp(self);
            let addresses = (ip.src_addr, ip.dst_addr);
            if let Some(unwanted) = udp.input(&mut cx, packet, addresses, Delivery::Unicast) {
                let a = Accepted6 {
                    buf: unwanted,
                    ip: Ipv6Repr {
                        payload_len: ip.payload_len,
                        ..ip
                    },
                    delivery: Delivery::Unicast,
                    header_len: crate::wire::ipv6::HEADER_LEN,
                    named_at: 6,
                };
                self.refuse6(a, Icmp6Error::Unreachable(unreachable::PORT));
            }
            return;
        }
        self.ipv6_input_general(iface, packet);
    }

    /// [`Self::ipv6_input`] for a packet UDP's header prediction did not take: TCP's (out of line,
    /// so that UDP's path stays as short as it was), then the general path.
    #[inline(never)]
    fn ipv6_input_general(&mut self, iface: InterfaceId, mut packet: PacketBuf) {
        if let Some(ip) = self
            .ip6
            .input_predicted::<6>(&mut self.counters.ip6, iface, &mut packet)
        {
            // The ECN field travels with the segment for TCP (RFC 3168).
            packet.meta.set_ecn(ip.traffic_class);
            let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
            return tcp.input(
                &mut cx,
                packet,
                (ip.src_addr, ip.dst_addr),
                Delivery::Unicast,
            );
        }
        let (ip6, mut cx, _) = ip6_cx!(self);
        match ip6.input(&mut cx, iface, packet) {
            Input6::Deliver(accepted) => self.deliver6(accepted),
            Input6::Done => {}
            Input6::ParamProblem {
                packet,
                ip,
                code,
                pointer,
            } => {
                let error = Icmp6Error::ParamProblem {
                    code,
                    pointer,
                    multicast_ok: code == param_problem::OPTION,
                };
                let delivery = if ip.dst_addr.is_multicast() {
                    Delivery::Broadcast
                } else {
                    Delivery::Unicast
                };
                self.icmp6_send_error(error, packet.data(), &ip, delivery);
                self.pool.free(packet);
            }
        }
    }

    /// Hands a packet IPv6 accepted to its upper layer; an unknown one is answered with a parameter
    /// problem pointing at the next header field that named it (RFC 8200 §4).
    fn deliver6(&mut self, a: Accepted6) {
        if a.delivery == Delivery::Intercepted
            && !matches!(a.ip.next_header, IpProtocol::Udp | IpProtocol::Tcp)
        {
            return self.drop_packet(a.buf, DropReason::InterceptedOther);
        }
        match a.ip.next_header {
            IpProtocol::Icmpv6 => self.icmp6_input(a.buf, &a.ip, a.delivery),
            IpProtocol::Udp => self.udp6_input(a),
            IpProtocol::Tcp => {
                let mut buf = a.buf;
                buf.meta.set_ecn(a.ip.traffic_class);
                let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
                tcp.input(&mut cx, buf, (a.ip.src_addr, a.ip.dst_addr), a.delivery);
            }
            _ => {
                let error = Icmp6Error::ParamProblem {
                    code: param_problem::NEXT_HEADER,
                    pointer: a.named_at,
                    multicast_ok: false,
                };
                self.refuse6(a, error)
            }
        }
    }

    /// Input: one UDP datagram over IPv6; one no socket wants is answered with a port unreachable.
    fn udp6_input(&mut self, a: Accepted6) {
        let (udp, mut cx) = <Ipv6 as Family>::udp(self);
        let addresses = (a.ip.src_addr, a.ip.dst_addr);
        if let Some(unwanted) = udp.input(&mut cx, a.buf, addresses, a.delivery) {
            let a = Accepted6 { buf: unwanted, ..a };
            self.refuse6(a, Icmp6Error::Unreachable(unreachable::PORT));
        }
    }

    /// Answers an accepted packet no upper layer takes with `error` (rules and rate permitting), and
    /// drops it, counted.
    #[inline(never)]
    fn refuse6(&mut self, a: Accepted6, error: Icmp6Error) {
        let Accepted6 {
            mut buf,
            ip,
            delivery,
            header_len,
            ..
        } = a;
        let reason = match ip.next_header {
            IpProtocol::Udp => DropReason::UdpNoSocket,
            IpProtocol::Tcp => DropReason::TcpNoSocket,
            _ => DropReason::Ipv6UnknownProtocol,
        };
        // The headers are still in front of the window: quote the packet as it arrived (a
        // reassembled one has none there, and gets no error).
        if header_len > 0 {
            buf.push_front(header_len);
            self.icmp6_send_error(error, buf.data(), &ip, delivery);
        }
        self.drop_packet(buf, reason);
    }

    /// Input: one ICMPv6 message; what it asks for is sent, or reported to the transport it is about.
    fn icmp6_input(&mut self, buf: PacketBuf, ip: &Ipv6Repr, delivery: Delivery) {
        let (icmp6, mut cx) = icmp6_cx!(self);
        match icmp6.input(&mut cx, buf, ip, delivery) {
            Icmp6Input::Done => {}
            Icmp6Input::Send(out) => self.icmp6_send(out),
            Icmp6Input::TooBig { quoted, mtu } => {
                let mtu = usize::try_from(mtu).unwrap_or(usize::MAX);
                let addresses = (quoted.ip.src_addr, quoted.ip.dst_addr);
                if quoted.upper == IpProtocol::Tcp {
                    // RFC 5927 §5.2 as for IPv4: only about a segment in flight; the connection
                    // resends at the smaller MSS at once.
                    let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
                    tcp.report_path_mtu(&mut cx, addresses, &quoted.head, mtu);
                } else {
                    // UDP and ICMPv6 (our echo replies) fragment to it from now on.
                    let (ip6, mut cx, _) = ip6_cx!(self);
                    ip6.learn_path_mtu(&mut cx, quoted.ip.dst_addr, mtu);
                }
            }
            Icmp6Input::Report { quoted, error } => {
                let addresses = (quoted.ip.src_addr, quoted.ip.dst_addr);
                if quoted.upper == IpProtocol::Udp {
                    if !self
                        .udp
                        .v6
                        .report_error(addresses, &quoted.head, error.kind)
                    {
                        self.counters.drops.add(DropReason::UdpIcmpNoSocket);
                    }
                } else {
                    let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
                    tcp.report_error(&mut cx, addresses, &quoted.head, error);
                }
            }
        }
    }

    /// A destination unreachable of `code` about `packet` (an IPv6 header `ip` and what follows), as
    /// if it had arrived for this host: for interception's answers on the application's behalf.
    pub(crate) fn icmp6_unreachable(&mut self, code: u8, packet: &[u8], ip: &Ipv6Repr) {
        let error = Icmp6Error::Unreachable(code);
        self.icmp6_send_error(error, packet, ip, Delivery::Unicast);
    }

    /// Sends an ICMPv6 error about `packet` (from its IPv6 header) when ICMPv6's rules and rate allow.
    fn icmp6_send_error(
        &mut self,
        error: Icmp6Error,
        packet: &[u8],
        ip: &Ipv6Repr,
        delivery: Delivery,
    ) {
        let (icmp6, mut cx) = icmp6_cx!(self);
        let addresses = (ip.src_addr, ip.dst_addr);
        if let Some(out) = icmp6.error(&mut cx, error, packet, addresses, delivery) {
            self.icmp6_send(out);
        }
    }

    /// Discards the IPv6 reassemblies whose time is up, answering each whose first fragment came
    /// with a time exceeded (RFC 8200 §4.5), and forgets expired path MTUs.
    #[cold]
    #[inline(never)]
    pub(crate) fn expire_ipv6(&mut self) {
        let (ip6, mut cx, _) = ip6_cx!(self);
        for e in ip6.expire(&mut cx) {
            let quoted = e.quoted();
            // The destination was ours: unicast unless it was a group.
            let delivery = if e.key.dst.is_multicast() {
                Delivery::Broadcast
            } else {
                Delivery::Unicast
            };
            let (icmp6, mut cx) = icmp6_cx!(self);
            let error = Icmp6Error::TimeExceeded(crate::wire::icmpv6::time_exceeded::REASSEMBLY);
            if let Some(out) = icmp6.error(&mut cx, error, quoted, (e.key.src, e.key.dst), delivery)
            {
                self.icmp6_send(out);
            }
        }
    }

    fn icmp6_send(&mut self, out: Icmp6Out) {
        self.ipv6_output(out.buf, &out.hop, out.src, out.dst, IpProtocol::Icmpv6);
    }

    /// Output: an upper layer's message in `buf`, through IPv6 to `hop`'s link.
    pub(crate) fn ipv6_output(
        &mut self,
        buf: PacketBuf,
        hop: &NextHop6,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: IpProtocol,
    ) {
        let (ip6, mut cx, devices) = ip6_cx!(self);
        ip6.output(&mut cx, devices, buf, hop, src, dst, next_header);
    }
}
