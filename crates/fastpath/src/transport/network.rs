//! What a transport needs of the IP layer of one address family, as a trait: UDP is written once over
//! it and monomorphized for IPv4 and IPv6, so IPv4's per-datagram code is the code it was when UDP
//! spoke IPv4 alone, and IPv6 is a second instance rather than `if v6` threaded through UDP.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::buf::{BufferPool, PacketBuf};
use crate::demux::TableAddress;
use crate::ip::{NextHop, Transmit};
use crate::ipv4::{HeaderTemplate, IpCx, Ipv4};
use crate::ipv6::{HeaderTemplate6, Ip6Cx, Ipv6};
use crate::route::InterfaceId;
use crate::stats::{Counters, DropReason};
use crate::time::Instant;
use crate::wire::IpProtocol;

/// An IP layer as a transport uses it.
pub(crate) trait Network {
    /// The family's address.
    type Addr: TableAddress<Socket = Self::Socket>;
    /// The family's socket address.
    type Socket: Copy + Eq + std::hash::Hash + fmt::Debug + fmt::Display + Into<SocketAddr>;
    /// The header template a transport keeps for a destination.
    type Template: Copy + fmt::Debug;
    /// The IP header in front of a transport's datagram (20, 40).
    const HEADER_LEN: usize;
    /// Whether a UDP datagram may go without a checksum: yes for IPv4 (RFC 768), never for IPv6
    /// (RFC 8200 §8.1, which also makes receivers drop one that does).
    const UDP_CHECKSUM_OPTIONAL: bool;

    /// Where a packet to `dst` goes, its MTU lowered to the path MTU known at `now`.
    fn route(&self, dst: Self::Addr, now: Instant) -> Result<NextHop<Self::Addr>, DropReason>;
    /// Where a packet to `dst` goes, with the link's MTU (what TCP's MSS option advertises).
    fn route_link(&self, dst: Self::Addr) -> Result<NextHop<Self::Addr>, DropReason>;
    /// The path MTU to `dst` known at `now`, or `link_mtu`.
    fn path_mtu(&self, dst: Self::Addr, link_mtu: usize, now: Instant) -> usize;
    /// Bumped whenever routes, addresses or path MTUs change.
    fn route_epoch(&self) -> u32;
    /// A "fragmentation needed" or "packet too big" a transport found plausible says packets to `dst`
    /// (first hop `link_mtu`) must be at most `mtu` bytes: the path MTU now in use, or `None` when
    /// `mtu` is below the family's floor (both counted).
    fn learn_path_mtu(
        &mut self,
        now: Instant,
        dst: Self::Addr,
        mtu: usize,
        link_mtu: usize,
        counters: &mut Counters,
    ) -> Option<usize>;

    /// Refuses to bind to an address that is not the wildcard or one of the host's.
    fn check_local_address(&self, addr: Self::Addr) -> io::Result<()>;
    /// True for an address sending to needs the broadcast option (IPv4's broadcasts; none in IPv6).
    fn is_broadcast(&self, addr: Self::Addr) -> bool;
    /// True for an address that must not leave the host (127/8, `::1`).
    fn is_loopback(addr: Self::Addr) -> bool;
    /// The header template for `src` to `dst` out of `iface` carrying `protocol`, with type of
    /// service (IPv6's traffic class) `tos`.
    fn template(
        &self,
        iface: InterfaceId,
        src: Self::Addr,
        dst: Self::Addr,
        protocol: IpProtocol,
        tos: u8,
    ) -> Self::Template;
    /// Hands a transport's datagram to IP, with its template.
    #[allow(clippy::too_many_arguments)]
    fn output(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Self::Addr>,
        template: &Self::Template,
    );
    /// Hands a TCP segment to IP (IPv4: with DF when `dont_frag` and the stack's path MTU
    /// discovery are on, RFC 1191 §3).
    #[allow(clippy::too_many_arguments)]
    fn output_segment(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Self::Addr>,
        addresses: (Self::Addr, Self::Addr),
        dont_frag: bool,
    );
}

impl Network for Ipv4 {
    type Addr = Ipv4Addr;
    type Socket = std::net::SocketAddrV4;
    type Template = HeaderTemplate;
    const HEADER_LEN: usize = 20;
    const UDP_CHECKSUM_OPTIONAL: bool = true;

    #[inline]
    fn route(&self, dst: Ipv4Addr, now: Instant) -> Result<NextHop<Ipv4Addr>, DropReason> {
        // Fragment to the path MTU when one is known (RFC 1191; Linux's `ip_skb_dst_mtu`).
        Ipv4::route(self, dst).map(|hop| self.along_path(hop, dst, now))
    }
    #[inline]
    fn route_link(&self, dst: Ipv4Addr) -> Result<NextHop<Ipv4Addr>, DropReason> {
        Ipv4::route(self, dst)
    }
    #[inline]
    fn path_mtu(&self, dst: Ipv4Addr, link_mtu: usize, now: Instant) -> usize {
        self.path_mtu.path_mtu(dst, link_mtu, now)
    }
    #[inline(always)]
    fn route_epoch(&self) -> u32 {
        self.route_epoch
    }
    fn learn_path_mtu(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        mtu: usize,
        link_mtu: usize,
        counters: &mut Counters,
    ) -> Option<usize> {
        Ipv4::learn_path_mtu(
            self,
            now,
            dst,
            mtu,
            link_mtu,
            &mut counters.ip.path_mtu,
            &mut counters.drops,
        )
    }
    fn check_local_address(&self, addr: Ipv4Addr) -> io::Result<()> {
        Ipv4::check_local_address(self, addr)
    }
    #[inline]
    fn is_broadcast(&self, addr: Ipv4Addr) -> bool {
        Ipv4::is_broadcast(self, addr)
    }
    #[inline]
    fn is_loopback(addr: Ipv4Addr) -> bool {
        addr.is_loopback()
    }
    #[inline]
    fn template(
        &self,
        _iface: InterfaceId,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        tos: u8,
    ) -> HeaderTemplate {
        HeaderTemplate::new(self, src, dst, protocol, false).with_tos(tos)
    }
    #[inline(always)]
    fn output(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Ipv4Addr>,
        template: &HeaderTemplate,
    ) {
        let mut cx = IpCx {
            now,
            pool,
            counters: &mut counters.ip,
            drops: &mut counters.drops,
        };
        self.output_prepared(&mut cx, out, buf, hop, template);
    }
    #[inline]
    fn output_segment(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Ipv4Addr>,
        (src, dst): (Ipv4Addr, Ipv4Addr),
        dont_frag: bool,
    ) {
        let mut cx = IpCx {
            now,
            pool,
            counters: &mut counters.ip,
            drops: &mut counters.drops,
        };
        let dont_frag = dont_frag && self.cfg.path_mtu_discovery;
        self.output(&mut cx, out, buf, hop, src, dst, IpProtocol::Tcp, dont_frag);
    }
}

impl Network for Ipv6 {
    type Addr = Ipv6Addr;
    type Socket = std::net::SocketAddrV6;
    type Template = HeaderTemplate6;
    const HEADER_LEN: usize = 40;
    const UDP_CHECKSUM_OPTIONAL: bool = false;

    fn route(&self, dst: Ipv6Addr, now: Instant) -> Result<NextHop<Ipv6Addr>, DropReason> {
        Ipv6::route(self, dst).map(|hop| self.along_path(hop, dst, now))
    }
    fn route_link(&self, dst: Ipv6Addr) -> Result<NextHop<Ipv6Addr>, DropReason> {
        Ipv6::route(self, dst)
    }
    fn path_mtu(&self, dst: Ipv6Addr, link_mtu: usize, now: Instant) -> usize {
        self.path_mtu.path_mtu(dst, link_mtu, now)
    }
    fn route_epoch(&self) -> u32 {
        self.route_epoch
    }
    fn learn_path_mtu(
        &mut self,
        now: Instant,
        dst: Ipv6Addr,
        mtu: usize,
        link_mtu: usize,
        counters: &mut Counters,
    ) -> Option<usize> {
        Ipv6::learn_path_mtu_at(
            self,
            now,
            dst,
            mtu,
            link_mtu,
            &mut counters.ip6.path_mtu,
            &mut counters.drops,
        )
    }
    fn check_local_address(&self, addr: Ipv6Addr) -> io::Result<()> {
        Ipv6::check_local_address(self, addr)
    }
    fn is_broadcast(&self, _: Ipv6Addr) -> bool {
        false
    }
    fn is_loopback(addr: Ipv6Addr) -> bool {
        addr.is_loopback()
    }
    fn template(
        &self,
        iface: InterfaceId,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        protocol: IpProtocol,
        tos: u8,
    ) -> HeaderTemplate6 {
        HeaderTemplate6::new(self, iface, src, dst, protocol).with_traffic_class(tos)
    }
    #[inline(always)]
    fn output(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Ipv6Addr>,
        template: &HeaderTemplate6,
    ) {
        let mut cx = Ip6Cx {
            now,
            pool,
            counters: &mut counters.ip6,
            drops: &mut counters.drops,
        };
        self.output_prepared(&mut cx, out, buf, hop, template);
    }
    fn output_segment(
        &mut self,
        now: Instant,
        pool: &mut BufferPool,
        counters: &mut Counters,
        out: &mut impl Transmit,
        buf: PacketBuf,
        hop: &NextHop<Ipv6Addr>,
        (src, dst): (Ipv6Addr, Ipv6Addr),
        _dont_frag: bool,
    ) {
        let mut cx = Ip6Cx {
            now,
            pool,
            counters: &mut counters.ip6,
            drops: &mut counters.drops,
        };
        self.output(&mut cx, out, buf, hop, src, dst, IpProtocol::Tcp);
    }
}
