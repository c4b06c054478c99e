//! The stack: interfaces, routes, buffers, sockets and counters, driven by [`Stack::poll`].
//!
//! A stack is single-threaded and poll-driven. Socket calls never block: they queue packets for the
//! links or take datagrams that `poll` delivered. `poll` moves packets: it hands queued output to the
//! links and runs input for everything the links received, a batch at a time, until they are quiet.

use std::io;
use std::net::Ipv4Addr;

mod devices;
mod ethernet;
mod v6;

use crate::buf::{BufferDepot, BufferPool, PacketBuf, PoolStats};
use crate::config::StackConfig;
use crate::icmp::{EchoReply, Icmp, IcmpCx, IcmpInput, IcmpOut};
use crate::icmpv6::Icmpv6;
use crate::ip::IcmpError;
use crate::ipv4::{Delivery, Input4, IpCx, Ipv4, NextHop};
use crate::ipv6::Ipv6;
use crate::link::{Link, LinkCapabilities, Loopback, Medium, StackLink};
use crate::reassembly::Ipv4Expired;
use crate::route::{InterfaceId, Ipv4Cidr, Route, RoutingTable};
use crate::secret::SecretKey;
use crate::stats::{Counters, DropReason};
use crate::tcp::{Tcp, TcpCx};
use crate::time::Instant;
use crate::transport::network::Network;
use crate::transport::ports::Ports;
use crate::udp::{Payload, RecvCx, Table, Udp, UdpCx, UdpFamily, UdpOptions, UdpSocket};
use crate::wire::icmpv4::DstUnreachable;
use crate::wire::ipv4opt::{Found, Options};
use crate::wire::{IpProtocol, Ipv4Repr};
use devices::Device;
pub(crate) use devices::Devices;

pub use crate::ipv4::LOOPBACK;

/// How many rounds of receive batches one `poll` runs at most before returning, so that a flood cannot
/// keep the caller inside `poll` for ever.
const POLL_ROUNDS: usize = 64;

/// A user-space UDP/TCP/IP host: its devices, its layers (IPv4 with ICMP, IPv6 with ICMPv6, UDP,
/// TCP), the buffer pool and the counters. The layers own their state; the stack is the one place that routes between
/// them (a datagram IPv4 accepted to its transport, a transport's reply or error back to IPv4).
pub struct Stack {
    pub(crate) config: StackConfig,
    pub(crate) devices: Devices,
    pub(crate) ip: Ipv4,
    pub(crate) pool: BufferPool,
    pub(crate) udp: Udp,
    pub(crate) tcp: Tcp,
    pub(crate) tcp6: Tcp<Ipv6>,
    pub(crate) icmp: Icmp,
    pub(crate) ip6: Ipv6,
    pub(crate) icmp6: Icmpv6,
    pub(crate) counters: Counters,
    /// The key of RFC 7217's interface identifiers (`EthernetConfig::stable_privacy`).
    pub(crate) privacy_key: SecretKey,
    pub(crate) now: Instant,
    rx_batch: Vec<PacketBuf>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field(
                "interfaces",
                &self
                    .devices
                    .list
                    .iter()
                    .zip(&self.ip.ifaces)
                    .map(|(d, a)| (&d.name, a.cidr))
                    .collect::<Vec<_>>(),
            )
            .field("routes", &self.ip.routes)
            .finish_non_exhaustive()
    }
}

/// Splits a stack's fields into ICMP's context: `icmp_cx!(self)` gives `(icmp, cx)`.
macro_rules! icmp_cx {
    ($s:expr) => {
        (
            &mut $s.icmp,
            IcmpCx {
                now: $s.now,
                pool: &mut $s.pool,
                counters: &mut $s.counters.icmp,
                drops: &mut $s.counters.drops,
                ip: &$s.ip,
            },
        )
    };
}

/// Splits a stack's fields into UDP's context for IPv4: `udp_cx!(self)` gives `(table, cx)`.
macro_rules! udp_cx {
    ($s:expr) => {
        (
            &mut $s.udp.v4,
            UdpCx {
                now: $s.now,
                pool: &mut $s.pool,
                counters: &mut $s.counters,
                ip: &mut $s.ip,
                out: &mut $s.devices,
            },
        )
    };
}

/// A family as the stack routes it to UDP: the family's socket table and UDP's context with the
/// family's IP layer, split out of the stack's fields.
pub(crate) trait Family: UdpFamily {
    fn udp(s: &mut Stack) -> (&mut Table<Self>, UdpCx<'_, Devices, Self>);
    /// The family's socket table, the shared ports and the family's IP layer, for a bind.
    fn bind_parts(s: &mut Stack) -> (&mut Table<Self>, &mut Ports, &Self);
    /// The family's socket table and what a receive call frees to and counts in.
    #[inline(always)]
    fn udp_rx(s: &mut Stack) -> (&mut Table<Self>, RecvCx<'_>) {
        (
            Self::split(&mut s.udp).0,
            RecvCx {
                pool: &mut s.pool,
                counters: &mut s.counters,
            },
        )
    }
}

impl Family for Ipv4 {
    #[inline(always)]
    fn udp(s: &mut Stack) -> (&mut Table<Ipv4>, UdpCx<'_, Devices, Ipv4>) {
        udp_cx!(s)
    }
    fn bind_parts(s: &mut Stack) -> (&mut Table<Ipv4>, &mut Ports, &Ipv4) {
        (&mut s.udp.v4, &mut s.udp.ports, &s.ip)
    }
}

impl Family for Ipv6 {
    fn udp(s: &mut Stack) -> (&mut Table<Ipv6>, UdpCx<'_, Devices, Ipv6>) {
        (
            &mut s.udp.v6,
            UdpCx {
                now: s.now,
                pool: &mut s.pool,
                counters: &mut s.counters,
                ip: &mut s.ip6,
                out: &mut s.devices,
            },
        )
    }
    fn bind_parts(s: &mut Stack) -> (&mut Table<Ipv6>, &mut Ports, &Ipv6) {
        (&mut s.udp.v6, &mut s.udp.ports, &s.ip6)
    }
}

/// Splits a stack's fields into TCP's context: `tcp_cx!(self)` gives `(tcp, cx)`.
macro_rules! tcp_cx {
    ($s:expr) => {
        (
            &mut $s.tcp,
            TcpCx {
                now: $s.now,
                cfg: &$s.config.tcp,
                max_connections: $s.config.limits.tcp_connections,
                max_ooo: $s.config.limits.tcp_out_of_order,
                pool: &mut $s.pool,
                counters: &mut $s.counters,
                ip: &mut $s.ip,
                out: &mut $s.devices,
            },
        )
    };
}

/// Splits a stack's fields into IPv4's context and the devices: `ip_cx!(self)` gives
/// `(ip, cx, devices)`.
macro_rules! ip_cx {
    ($s:expr) => {
        (
            &mut $s.ip,
            IpCx {
                now: $s.now,
                pool: &mut $s.pool,
                counters: &mut $s.counters.ip,
                drops: &mut $s.counters.drops,
            },
            &mut $s.devices,
        )
    };
}

/// A family as the stack routes it to TCP: the family's table and TCP's context with the family's IP
/// layer, split out of the stack's fields.
pub(crate) trait TcpFamily: Network + Sized + 'static {
    fn tcp(s: &mut Stack) -> (&mut Tcp<Self>, TcpCx<'_, Devices, Self>);
    fn table(s: &mut Stack) -> &mut Tcp<Self>;
    /// The family's table and the buffer pool, for a read.
    fn table_pool(s: &mut Stack) -> (&mut Tcp<Self>, &mut BufferPool);
    fn listen_parts(s: &mut Stack) -> (&mut Tcp<Self>, &Self);
}

impl TcpFamily for Ipv4 {
    #[inline(always)]
    fn tcp(s: &mut Stack) -> (&mut Tcp<Ipv4>, TcpCx<'_, Devices, Ipv4>) {
        tcp_cx!(s)
    }
    #[inline(always)]
    fn table(s: &mut Stack) -> &mut Tcp<Ipv4> {
        &mut s.tcp
    }
    fn listen_parts(s: &mut Stack) -> (&mut Tcp<Ipv4>, &Ipv4) {
        (&mut s.tcp, &s.ip)
    }
    #[inline(always)]
    fn table_pool(s: &mut Stack) -> (&mut Tcp<Ipv4>, &mut BufferPool) {
        (&mut s.tcp, &mut s.pool)
    }
}

impl TcpFamily for Ipv6 {
    fn tcp(s: &mut Stack) -> (&mut Tcp<Ipv6>, TcpCx<'_, Devices, Ipv6>) {
        (
            &mut s.tcp6,
            TcpCx {
                now: s.now,
                cfg: &s.config.tcp,
                max_connections: s.config.limits.tcp_connections,
                max_ooo: s.config.limits.tcp_out_of_order,
                pool: &mut s.pool,
                counters: &mut s.counters,
                ip: &mut s.ip6,
                out: &mut s.devices,
            },
        )
    }
    fn table(s: &mut Stack) -> &mut Tcp<Ipv6> {
        &mut s.tcp6
    }
    fn listen_parts(s: &mut Stack) -> (&mut Tcp<Ipv6>, &Ipv6) {
        (&mut s.tcp6, &s.ip6)
    }
    fn table_pool(s: &mut Stack) -> (&mut Tcp<Ipv6>, &mut BufferPool) {
        (&mut s.tcp6, &mut s.pool)
    }
}

impl Stack {
    /// A stack with `config` and one interface, loopback (`lo`, 127.0.0.1/8, MTU 65535).
    pub fn new(config: StackConfig) -> Stack {
        let mut pool = BufferPool::new(config.buffers, config.limits.pool_free_buffers);
        pool.limit_free_bytes(config.limits.pool_free_bytes);
        let udp = Udp::new(&config);
        let secret = config.secret.unwrap_or_else(SecretKey::random);
        let tcp = Tcp::new(&config, secret.derive("tcp4"));
        let tcp6 = Tcp::new(&config, secret.derive("tcp6"));
        let icmp = Icmp::new(&config.limits, secret.derive("icmp4"));
        let lo = Loopback::new(65535, config.limits.loopback_queue);
        let lo_caps = lo.capabilities();
        let mut stack = Stack {
            devices: Devices {
                list: Vec::new(),
                lo,
                tx_batch: config.tx_batch,
                queued: false,
                rx_waker: None,
                now: Instant::ZERO,
                ethernet: false,
            },
            ip: Ipv4::new(&config, secret.derive("ipv4")),
            pool,
            udp,
            tcp,
            tcp6,
            icmp,
            ip6: Ipv6::new(&config, secret.derive("ipv6")),
            icmp6: Icmpv6::new(&config.limits, secret.derive("icmp6")),
            counters: Counters::default(),
            privacy_key: secret.derive("stable-privacy"),
            now: Instant::ZERO,
            rx_batch: Vec::with_capacity(config.rx_batch),
            config,
        };
        stack.add_link(
            "lo",
            StackLink::Local,
            lo_caps,
            Ipv4Cidr::new(Ipv4Addr::LOCALHOST, 8),
        );
        stack
    }

    /// Adds an interface with address and prefix `cidr`, and the route to its prefix. A link whose
    /// [`Medium`] is Ethernet gets a link layer of its own (ARP for `cidr`,
    /// neighbour discovery, a link-local IPv6 address from its hardware address, checked for
    /// duplicates first; see [`Stack::ethernet`]).
    pub fn add_interface(
        &mut self,
        name: &str,
        link: impl Link + 'static,
        cidr: Ipv4Cidr,
    ) -> InterfaceId {
        let caps = link.capabilities();
        let medium = link.medium();
        let iface = self.add_link(name, StackLink::Dyn(Box::new(link)), caps, cidr);
        if let Medium::Ethernet(mac) = medium {
            self.attach_ethernet(iface, mac, cidr);
        }
        iface
    }

    fn add_link(
        &mut self,
        name: &str,
        link: StackLink,
        caps: LinkCapabilities,
        cidr: Ipv4Cidr,
    ) -> InterfaceId {
        let mut link = link;
        if let Some(waker) = &self.devices.rx_waker {
            link.set_rx_waker(Some(waker.clone()));
        }
        self.devices.list.push(Device {
            name: name.to_string(),
            link,
            txq: Vec::with_capacity(self.config.tx_batch),
            eth: None,
        });
        self.ip6.add_interface(caps);
        self.ip.add_interface(cidr, caps)
    }

    /// Adds a route to `dest` through `gateway` (or directly, if `None`) on `iface`.
    pub fn add_route(
        &mut self,
        dest: Ipv4Cidr,
        gateway: Option<Ipv4Addr>,
        iface: InterfaceId,
    ) -> io::Result<()> {
        if iface.0 >= self.devices.list.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such interface",
            ));
        }
        self.ip.add_route(Route {
            dest,
            gateway,
            iface,
        });
        Ok(())
    }

    /// Shares free buffers with the other stacks given the same depot: for stacks joined by an
    /// in-memory pair, whose buffers travel from the sender's pool to the receiver's.
    pub fn set_buffer_depot(&mut self, depot: BufferDepot) {
        self.pool.set_depot(depot);
    }

    /// The routing table.
    pub fn routes(&self) -> &RoutingTable {
        &self.ip.routes
    }

    /// Name, address and capabilities of every interface.
    pub fn interfaces(
        &self,
    ) -> impl Iterator<Item = (InterfaceId, &str, Ipv4Cidr, LinkCapabilities)> {
        self.devices
            .list
            .iter()
            .zip(&self.ip.ifaces)
            .enumerate()
            .map(|(i, (d, a))| (InterfaceId(i), d.name.as_str(), a.cidr, a.caps))
    }

    /// The configuration.
    pub fn config(&self) -> &StackConfig {
        &self.config
    }

    /// TCP's configuration, to change while the stack runs, as Linux's `net.ipv4.tcp_*` sysctls
    /// are: the switches a connection takes at its start (timestamps, SACK, window scaling, buffer
    /// sizes, Fast Open) apply to connections opened from then on; the others (timers, limits) to
    /// every connection at its next use of them.
    pub fn tcp_config_mut(&mut self) -> &mut crate::config::TcpConfig {
        &mut self.config.tcp
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The buffer pool's counters, and the free buffers and bytes it holds.
    pub fn pool_stats(&self) -> (PoolStats, usize, usize) {
        let (n, bytes) = self.pool.held();
        (self.pool.stats(), n, bytes)
    }

    /// Hands every free buffer the pool keeps back to the heap, and returns how many bytes that was.
    /// The pool keeps at most `pool_free_buffers` buffers and `pool_free_bytes` bytes of each size
    /// class anyway ([`Limits`](crate::config::Limits)); this is for a program that knows it will be
    /// quiet for a while. The next packets allocate again.
    pub fn release_free_buffers(&mut self) -> usize {
        self.pool.release_free()
    }

    /// Datagrams being reassembled, and the bytes of buffers they hold.
    pub fn reassembly_stats(&self) -> (usize, usize) {
        (self.ip.reassembly.len(), self.ip.reassembly.bytes_held())
    }

    /// [`reassembly_stats`](Self::reassembly_stats) for IPv6's table: packets held, bytes held.
    pub fn ipv6_reassembly_stats(&self) -> (usize, usize) {
        (self.ip6.reassembly.len(), self.ip6.reassembly.bytes_held())
    }

    /// The time of the last `poll`.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Runs the stack: sends queued output, then processes received packets a batch at a time until the
    /// links are quiet (or a bound on rounds is reached), then runs timers. Returns the number of
    /// packets moved, received and handed to links: zero means there was nothing to do.
    pub fn poll(&mut self, now: Instant) -> usize {
        self.now = now;
        self.devices.now = now;
        let mut processed = self.flush();
        processed += self.input_rounds();
        if self.devices.ethernet {
            self.ethernet_timers(now);
            processed += self.flush();
        }
        if self.ip.next_deadline().is_some_and(|d| d <= now) {
            self.expire_reassembly();
            processed += self.flush();
        }
        if self.ip6.next_deadline().is_some_and(|d| d <= now) {
            self.expire_ipv6();
            processed += self.flush();
        }
        if self.tcp_next_deadline().is_some_and(|d| d <= now) {
            self.tcp_timers();
            processed += self.flush();
        }
        // What the timers sent to this host itself (an ICMP error about our own datagram, a
        // segment of a connection with ourselves) is taken in now: a poll that returns 0 has left
        // nothing to do.
        if !self.devices.lo.is_empty() {
            processed += self.input_rounds_again();
        }
        processed
    }

    /// [`Self::input_rounds`] once more, for what the timers sent to this host (rare: kept out of
    /// line).
    #[inline(never)]
    fn input_rounds_again(&mut self) -> usize {
        self.input_rounds()
    }

    /// Input a batch at a time until the links are quiet (or a bound on rounds is reached), with the
    /// output it causes handed to the links; returns the packets moved.
    #[inline(always)]
    fn input_rounds(&mut self) -> usize {
        let max = self.config.rx_batch;
        let mut processed = 0;
        for _ in 0..POLL_ROUNDS {
            layer!(Receive, Link);
            // The loopback first, straight from its queue: no batch in between.
            let mut got = 0;
            while got < max {
                let Some(packet) = self.devices.lo.pop() else {
                    break;
                };
                self.ipv4_input(LOOPBACK, packet);
                got += 1;
            }
            self.tcp_flush_dirty();
            // A full batch means the link may hold more.
            let mut more = got == max;
            if self.devices.list.len() > 1 {
                let (n, full) = self.receive_links(max);
                got += n;
                more |= full;
            }
            let sent = self.flush();
            processed += got + sent;
            // Quiet when every link came up short and input queued nothing new (a reply to ourselves
            // over loopback would need another round).
            if !more && sent == 0 && self.devices.lo.is_empty() {
                break;
            }
        }
        layer!();
        processed
    }

    /// One round of input from every interface but loopback: up to `max` packets each. Returns how
    /// many, and whether some link filled a batch (and may hold more).
    #[inline(never)]
    fn receive_links(&mut self, max: usize) -> (usize, bool) {
        let mut batch = std::mem::take(&mut self.rx_batch);
        let (mut got, mut more) = (0, false);
        for i in 1..self.devices.list.len() {
            layer!(Receive, Link);
            let n = self.devices.list[i].link.receive(&mut batch, max);
            if n == 0 {
                continue;
            }
            more |= n == max;
            got += n;
            if self.devices.list[i].eth.is_some() {
                self.ethernet_input(i, &mut batch);
            }
            for packet in batch.drain(..) {
                self.ipv4_input(InterfaceId(i), packet);
            }
            self.tcp_flush_dirty();
        }
        self.rx_batch = batch;
        (got, more)
    }

    /// The earliest time a timer (TCP retransmission, delayed ACK, reassembly expiry, ...) wants
    /// `poll` to run, if any: a caller may sleep until then when the links are quiet. It is never
    /// later than a timer's deadline, and may be earlier: a TCP connection whose timer moved later
    /// (as a segment's arrival or an ACK moves it) is looked at when its earlier deadline comes,
    /// once, so that busy connections cost no timer work per segment. Such a `poll` does nothing
    /// else, and the next deadline is then later.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.ip.next_deadline(),
            self.ip6.next_deadline(),
            self.tcp_next_deadline(),
            self.ethernet_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Hands every queued output packet to its link now; returns how many there were.
    pub fn flush(&mut self) -> usize {
        let (n, dropped) = self.devices.flush();
        for _ in 0..dropped {
            self.counters.drops.add(DropReason::LinkQueueFull);
        }
        n
    }

    /// Feeds one received IP packet to the stack as if `iface` had received it (for tests, fuzzing and
    /// links driven from outside). An IP packet, also on an Ethernet interface: its link layer is
    /// passed by.
    pub fn receive(&mut self, iface: InterfaceId, packet: PacketBuf) {
        if iface.0 < self.devices.list.len() {
            self.ipv4_input(iface, packet);
            self.tcp_flush_dirty();
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Routing between the layers.

    /// Input: one packet from `iface`, through IPv4 to its transport.
    #[inline(always)]
    pub(crate) fn ipv4_input(&mut self, iface: InterfaceId, mut packet: PacketBuf) {
        if let Some(repr) = self
            .ip
            .input_predicted::<17>(&mut self.counters.ip, iface, &mut packet)
        {
            return self.udp_input(packet, &repr, Delivery::Unicast);
        }
        // Not IPv4's common shape: IPv6's (by the version field), or IPv4's general path.
        if packet.data().first().is_some_and(|b| b >> 4 == 6) {
            return self.ipv6_input(iface, packet);
        }
        self.ipv4_input_general(iface, packet);
    }

    /// [`Self::ipv4_input`] for a packet UDP's header prediction did not take: TCP's (out of line,
    /// so that UDP's path, inlined into `poll`, stays as short as it was), then the general path.
    #[inline(never)]
    fn ipv4_input_general(&mut self, iface: InterfaceId, mut packet: PacketBuf) {
        if let Some(repr) = self
            .ip
            .input_predicted::<6>(&mut self.counters.ip, iface, &mut packet)
        {
            return self.tcp_input(packet, &repr, Delivery::Unicast);
        }
        let (ip, mut cx, _) = ip_cx!(self);
        match ip.input(&mut cx, iface, packet) {
            Input4::Nothing => {}
            Input4::Deliver((buf, repr, delivery)) => self.deliver(buf, &repr, delivery),
            Input4::WithOptions((buf, repr, delivery), options, found) => {
                if repr.protocol == IpProtocol::Icmp && delivery != Delivery::Intercepted {
                    self.icmp_input(buf, &repr, delivery, Some((&options, found)));
                } else {
                    self.deliver(buf, &repr, delivery);
                }
            }
            Input4::BadOptions {
                packet,
                repr,
                delivery,
                pointer,
            } => self.bad_options(packet, &repr, delivery, pointer),
        }
    }

    /// A packet whose options are malformed: dropped, counted, and answered with a parameter
    /// problem when it was sent to this host's unicast address (RFC 1122 §3.2.1.8, as Linux does).
    #[cold]
    #[inline(never)]
    fn bad_options(&mut self, packet: PacketBuf, repr: &Ipv4Repr, delivery: Delivery, pointer: u8) {
        if delivery == Delivery::Unicast {
            let (icmp, mut cx) = icmp_cx!(self);
            if let Some(out) = icmp.param_problem(&mut cx, repr, packet.data(), pointer) {
                self.icmp_send(out);
            }
        }
        self.drop_packet(packet, DropReason::Ipv4BadOptions);
    }

    /// Hands a datagram IPv4 accepted to its protocol.
    #[inline(always)]
    fn deliver(&mut self, buf: PacketBuf, repr: &Ipv4Repr, delivery: Delivery) {
        match repr.protocol {
            IpProtocol::Udp => self.udp_input(buf, repr, delivery),
            IpProtocol::Tcp => self.tcp_input(buf, repr, delivery),
            IpProtocol::Icmp if delivery != Delivery::Intercepted => {
                self.icmp_input(buf, repr, delivery, None)
            }
            _ => self.unknown_protocol(buf, repr, delivery),
        }
    }

    #[inline(never)]
    fn unknown_protocol(&mut self, buf: PacketBuf, repr: &Ipv4Repr, delivery: Delivery) {
        match delivery {
            Delivery::Intercepted => return self.drop_packet(buf, DropReason::InterceptedOther),
            Delivery::Unicast => {
                self.icmp_send_error(DstUnreachable::ProtoUnreachable, repr, buf.data())
            }
            Delivery::Broadcast => {}
        }
        self.drop_packet(buf, DropReason::Ipv4UnknownProtocol);
    }

    /// Output: a transport's datagram in `buf`, through IPv4 to `hop`'s link.
    #[inline]
    pub(crate) fn ipv4_output(
        &mut self,
        buf: PacketBuf,
        hop: &NextHop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
    ) {
        let (ip, mut cx, devices) = ip_cx!(self);
        ip.output(&mut cx, devices, buf, hop, src, dst, protocol, false);
    }

    /// Discards the reassemblies whose time is up and sends ICMP time exceeded for them; forgets the
    /// path MTUs past their time. Rare: kept out of `poll`'s line.
    #[cold]
    #[inline(never)]
    pub(crate) fn expire_reassembly(&mut self) {
        let (ip, mut cx, _) = ip_cx!(self);
        for e in ip.expire(&mut cx) {
            self.icmp_send_time_exceeded(&e);
        }
    }

    /// Input: one UDP datagram; one no socket wants is answered with a port unreachable.
    #[inline(always)]
    pub(crate) fn udp_input(&mut self, buf: PacketBuf, ip: &Ipv4Repr, delivery: Delivery) {
        let (udp, mut cx) = udp_cx!(self);
        if let Some(unwanted) = udp.input(&mut cx, buf, (ip.src_addr, ip.dst_addr), delivery) {
            self.udp_unreachable(unwanted, ip);
        }
    }

    /// A datagram no IPv4 socket took: a dual-stack IPv6 socket's, or answered with a port
    /// unreachable.
    #[inline(never)]
    fn udp_unreachable(&mut self, buf: PacketBuf, ip: &Ipv4Repr) {
        let mut cx = UdpCx {
            now: self.now,
            pool: &mut self.pool,
            counters: &mut self.counters,
            ip: &mut self.ip,
            out: &mut self.devices,
        };
        let Some(buf) = self
            .udp
            .v6
            .input_mapped(&mut cx, buf, (ip.src_addr, ip.dst_addr))
        else {
            return;
        };
        self.icmp_send_error(DstUnreachable::PortUnreachable, ip, buf.data());
        self.drop_packet(buf, DropReason::UdpNoSocket);
    }

    /// Sends `payload` from dual-stack IPv6 socket `s` to an IPv4 host, over IPv4.
    pub(crate) fn udp_send_mapped(
        &mut self,
        s: UdpSocket,
        payload: Payload<'_, '_>,
        dst: std::net::SocketAddrV4,
    ) -> io::Result<usize> {
        let mut cx = UdpCx {
            now: self.now,
            pool: &mut self.pool,
            counters: &mut self.counters,
            ip: &mut self.ip,
            out: &mut self.devices,
        };
        self.udp.v6.send_mapped(&mut cx, s, payload, dst)
    }

    /// Sends `payload` as one datagram from `s` (of family `N`) to `dst` (or to its peer if `None`).
    #[inline(always)]
    pub(crate) fn udp_send<N: Family>(
        &mut self,
        s: UdpSocket,
        payload: Payload<'_, '_>,
        dst: Option<N::Socket>,
    ) -> io::Result<usize> {
        let (udp, mut cx) = N::udp(self);
        udp.send(&mut cx, s, payload, dst)
    }

    /// Connects `s` (of family `N`) to `remote`.
    pub(crate) fn udp_connect<N: Family>(
        &mut self,
        s: UdpSocket,
        remote: N::Socket,
    ) -> io::Result<()> {
        let (udp, mut cx) = N::udp(self);
        udp.connect(&mut cx, s, remote)
    }

    /// Undoes a connect.
    pub(crate) fn udp_disconnect<N: Family>(&mut self, s: UdpSocket) -> io::Result<()> {
        N::udp(self).0.disconnect(s)
    }

    /// Binds a UDP socket of family `N`.
    pub(crate) fn udp_bind_in<N: Family>(
        &mut self,
        local: N::Socket,
        options: UdpOptions,
    ) -> io::Result<UdpSocket> {
        let (table, ports, ip) = N::bind_parts(self);
        table.bind(ports, ip, local, options)
    }

    fn udp_report_error(&mut self, quoted: &Ipv4Repr, head: &[u8; 8], kind: io::ErrorKind) {
        let addresses = (quoted.src_addr, quoted.dst_addr);
        if !self.udp.v4.report_error(addresses, head, kind) {
            self.counters.drops.add(DropReason::UdpIcmpNoSocket);
        }
    }

    /// Input: one TCP segment.
    pub(crate) fn tcp_input(&mut self, mut buf: PacketBuf, ip: &Ipv4Repr, delivery: Delivery) {
        // The ECN field travels with the segment for TCP (RFC 3168).
        if ip.tos & 3 != 0 {
            buf.meta.set_ecn(ip.tos);
        }
        let (tcp, mut cx) = tcp_cx!(self);
        tcp.input(&mut cx, buf, (ip.src_addr, ip.dst_addr), delivery);
    }

    /// Sends what the connections touched by the last input batch owe (batched ACK processing).
    #[inline]
    pub(crate) fn tcp_flush_dirty(&mut self) {
        if self.tcp.has_dirty() {
            let (tcp, mut cx) = tcp_cx!(self);
            tcp.flush_dirty(&mut cx);
        }
        if self.tcp6.has_dirty() {
            self.tcp6_flush_dirty();
        }
    }

    #[inline(never)]
    fn tcp6_flush_dirty(&mut self) {
        let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
        tcp.flush_dirty(&mut cx);
    }

    /// Runs due TCP timers, both families'.
    fn tcp_timers(&mut self) {
        let (tcp, mut cx) = tcp_cx!(self);
        tcp.timers(&mut cx);
        let (tcp, mut cx) = <Ipv6 as TcpFamily>::tcp(self);
        tcp.timers(&mut cx);
    }

    /// The earliest TCP timer.
    fn tcp_next_deadline(&self) -> Option<Instant> {
        match (self.tcp.next_deadline(), self.tcp6.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Opens a connection of family `N` from `local` to `remote` (the SYN leaves now); its slot and
    /// generation.
    pub(crate) fn tcp_connect_in<N: TcpFamily>(
        &mut self,
        local: N::Socket,
        remote: N::Socket,
        options: &crate::tcp::TcpSocketOptions,
    ) -> io::Result<(u32, u32)> {
        let (tcp, mut cx) = N::tcp(self);
        tcp.connect(&mut cx, local, remote, options, None)
            .map(|(index, generation, _)| (index, generation))
    }

    /// Opens a connection in family `N` that tries TCP Fast Open with `data`: its slot, generation,
    /// and how many bytes of `data` the SYN carries.
    pub(crate) fn tcp_connect_fast_open_in<N: TcpFamily>(
        &mut self,
        local: N::Socket,
        remote: N::Socket,
        options: &crate::tcp::TcpSocketOptions,
        data: &[u8],
    ) -> io::Result<(u32, u32, usize)> {
        let (tcp, mut cx) = N::tcp(self);
        tcp.connect(&mut cx, local, remote, options, Some(data))
    }

    /// Listens on `local` in family `N`; the listener's slot and generation.
    pub(crate) fn tcp_listen_in<N: TcpFamily>(
        &mut self,
        local: N::Socket,
        backlog: usize,
    ) -> io::Result<(u32, u32)> {
        let max = self.config.limits.tcp_backlog;
        let (tcp, ip) = N::listen_parts(self);
        tcp.listen(ip, max, local, backlog)
    }

    /// Sends everything connection `index` (of family `N`) owes and the windows allow.
    pub(crate) fn tcp_output<N: TcpFamily>(&mut self, index: u32) {
        let (tcp, mut cx) = N::tcp(self);
        tcp.output(&mut cx, index);
    }

    /// A connection is done: freed, or kept unhooked for the application to see its end.
    pub(crate) fn tcp_finish<N: TcpFamily>(&mut self, index: u32) {
        let (tcp, mut cx) = N::tcp(self);
        tcp.finish(&mut cx, index);
    }

    /// Answers held connection `index`'s SYN.
    pub(crate) fn tcp_confirm<N: TcpFamily>(&mut self, index: u32) {
        let (tcp, mut cx) = N::tcp(self);
        tcp.confirm(&mut cx, index);
    }

    /// Drops held connection `index` without a word to its peer.
    pub(crate) fn tcp_drop_held<N: TcpFamily>(&mut self, index: u32) {
        let (tcp, mut cx) = N::tcp(self);
        tcp.drop_held(&mut cx, index);
    }

    /// Aborts connection `index` with a RST to the peer.
    pub(crate) fn tcp_abort_with_reset<N: TcpFamily>(&mut self, index: u32) {
        let (tcp, mut cx) = N::tcp(self);
        tcp.abort_with_reset(&mut cx, index);
    }

    fn tcp_report_error(&mut self, quoted: &Ipv4Repr, head: &[u8; 8], error: IcmpError) {
        let (tcp, mut cx) = tcp_cx!(self);
        tcp.report_error(&mut cx, (quoted.src_addr, quoted.dst_addr), head, error);
    }

    /// Input: one ICMP message, with the IP options an echo reply reflects; what it asks for is sent,
    /// or reported to the transport it is about.
    pub(crate) fn icmp_input(
        &mut self,
        buf: PacketBuf,
        ip: &Ipv4Repr,
        delivery: Delivery,
        options: Option<(&Options, Found)>,
    ) {
        let (icmp, mut cx) = icmp_cx!(self);
        match icmp.input(&mut cx, buf, ip, delivery, options) {
            IcmpInput::Done => {}
            IcmpInput::Send(out) => self.icmp_send(out),
            IcmpInput::Report {
                protocol,
                quoted,
                head,
                error,
            } => match protocol {
                IpProtocol::Udp => self.udp_report_error(&quoted, &head, error.kind),
                _ => self.tcp_report_error(&quoted, &head, error),
            },
            IcmpInput::PathMtu {
                protocol,
                quoted,
                head,
                mtu,
            } => match protocol {
                IpProtocol::Udp => {
                    let (udp, mut cx) = udp_cx!(self);
                    udp.report_path_mtu(&mut cx, &quoted, &head, mtu);
                }
                _ => {
                    let (tcp, mut cx) = tcp_cx!(self);
                    let addresses = (quoted.src_addr, quoted.dst_addr);
                    tcp.report_path_mtu(&mut cx, addresses, &head, mtu);
                }
            },
            IcmpInput::Redirect {
                router,
                destination,
                gateway,
            } => self.icmp_redirect(router, destination, gateway),
        }
    }

    /// A redirect (RFC 1122 §3.2.2.2), taken as Linux takes one under its defaults
    /// (`accept_redirects`, `secure_redirects`): only from the gateway the destination's route
    /// goes through now, for a destination that is not ours, a broadcast or a group, to another
    /// gateway that is on the same link (reached straight over that interface) and already the
    /// gateway of a route there. The destination then goes through it by a host route of its
    /// own, one of at most `route::MAX_REDIRECTS`. Nothing is sent in answer.
    fn icmp_redirect(&mut self, router: Ipv4Addr, destination: Ipv4Addr, gateway: Ipv4Addr) {
        let ip = &self.ip;
        let special = |a: Ipv4Addr| {
            a.is_multicast() || a.is_unspecified() || ip.is_broadcast(a) || ip.is_own_address(a)
        };
        let iface = ip.route(destination).ok().and_then(|hop| {
            let to_gateway = ip.route(gateway).ok()?;
            let known = ip
                .routes
                .routes()
                .iter()
                .any(|r| r.gateway == Some(gateway) && r.iface == hop.iface);
            let acceptable = hop.next_hop == router
                && router != destination
                && gateway != router
                && !special(destination)
                && !special(gateway)
                && to_gateway.iface == hop.iface
                && to_gateway.next_hop == gateway
                && known;
            acceptable.then_some(hop.iface)
        });
        let taken =
            iface.is_some_and(|iface| self.ip.redirect(destination, gateway, iface, self.now));
        if !taken {
            self.counters.drops.add(DropReason::IcmpRedirectRejected);
        }
    }

    fn icmp_send(&mut self, out: IcmpOut) {
        if out.options.is_empty() {
            return self.ipv4_output(out.buf, &out.hop, out.src, out.dst, IpProtocol::Icmp);
        }
        let (ip, mut cx, devices) = ip_cx!(self);
        let options = out.options.as_slice();
        ip.output_with_options(
            &mut cx,
            devices,
            out.buf,
            &out.hop,
            out.src,
            out.dst,
            IpProtocol::Icmp,
            options,
        );
    }

    /// Sends a destination unreachable about the datagram `ip` whose payload starts with `payload`
    /// (when ICMP's rules and rate limit allow).
    pub(crate) fn icmp_send_error(
        &mut self,
        reason: DstUnreachable,
        ip: &Ipv4Repr,
        payload: &[u8],
    ) {
        let (icmp, mut cx) = icmp_cx!(self);
        if let Some(out) = icmp.unreachable(&mut cx, reason, ip, payload) {
            self.icmp_send(out);
        }
    }

    fn icmp_send_time_exceeded(&mut self, expired: &Ipv4Expired) {
        let (icmp, mut cx) = icmp_cx!(self);
        if let Some(out) = icmp.time_exceeded(&mut cx, expired) {
            self.icmp_send(out);
        }
    }

    /// Sends an ICMP echo request (ping) to `dst`. Replies are read with
    /// [`recv_echo_reply`](Stack::recv_echo_reply) after a `poll`.
    pub fn send_echo_request(
        &mut self,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> io::Result<()> {
        let (icmp, mut cx) = icmp_cx!(self);
        let out = icmp.echo_request(&mut cx, dst, ident, seq_no, data)?;
        self.icmp_send(out);
        Ok(())
    }

    /// The oldest echo reply received and not yet read.
    pub fn recv_echo_reply(&mut self) -> Option<EchoReply> {
        self.icmp.take_reply()
    }

    /// Counts a drop and recycles the buffer.
    #[inline]
    pub(crate) fn drop_packet(&mut self, buf: PacketBuf, reason: DropReason) {
        timed!(Buffers);
        self.counters.drops.add(reason);
        self.pool.free(buf);
    }
}
