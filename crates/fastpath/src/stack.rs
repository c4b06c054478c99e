//! The stack: interfaces, routes, buffers, sockets and counters, driven by [`Stack::poll`].
//!
//! A stack is single-threaded and poll-driven. Socket calls never block: they queue packets for the
//! links or take datagrams that `poll` delivered. `poll` moves packets: it hands queued output to the
//! links and runs input for everything the links received, a batch at a time, until they are quiet.

use std::io;
use std::net::Ipv4Addr;

use crate::buf::{BufferDepot, BufferPool, PacketBuf, PoolStats};
use crate::config::StackConfig;
use crate::icmp::IcmpState;
use crate::ipv4::ident::IdentTable;
use crate::ipv4::reassembly::ReassemblyTable;
use crate::ipv4::route::{InterfaceId, Ipv4Cidr, Route, RoutingTable};
use crate::link::{Link, LinkCapabilities, Loopback, StackLink};
use crate::stats::{Counters, DropReason};
use crate::tcp::TcpTable;
use crate::time::Instant;
use crate::udp::UdpTable;

/// How many rounds of receive batches one `poll` runs at most before returning, so that a flood cannot
/// keep the caller inside `poll` for ever.
const POLL_ROUNDS: usize = 64;

/// A network interface: a link with an address.
pub(crate) struct Interface {
    pub(crate) name: String,
    pub(crate) link: StackLink,
    pub(crate) cidr: Ipv4Cidr,
    /// The prefix's directed broadcast address, computed once.
    pub(crate) broadcast: Option<Ipv4Addr>,
    pub(crate) caps: LinkCapabilities,
    pub(crate) txq: Vec<PacketBuf>,
}

/// A user-space UDP/TCP/IPv4 host.
pub struct Stack {
    pub(crate) config: StackConfig,
    pub(crate) ifaces: Vec<Interface>,
    pub(crate) routes: RoutingTable,
    pub(crate) pool: BufferPool,
    pub(crate) reassembly: ReassemblyTable,
    pub(crate) udp: UdpTable,
    pub(crate) tcp: TcpTable,
    pub(crate) icmp: IcmpState,
    pub(crate) counters: Counters,
    pub(crate) now: Instant,
    /// The IPv4 identification counters.
    pub(crate) ident: IdentTable,
    /// Bumped whenever routes or interfaces change: sockets' cached routes from before are stale.
    pub(crate) route_epoch: u32,
    /// The loopback interface's link (interface 0, `StackLink::Local`).
    pub(crate) lo: Loopback,
    rx_batch: Vec<PacketBuf>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field(
                "interfaces",
                &self
                    .ifaces
                    .iter()
                    .map(|i| (&i.name, i.cidr))
                    .collect::<Vec<_>>(),
            )
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

/// The loopback interface every stack has.
pub const LOOPBACK: InterfaceId = InterfaceId(0);

impl Stack {
    /// A stack with `config` and one interface, loopback (`lo`, 127.0.0.1/8, MTU 65535).
    pub fn new(config: StackConfig) -> Stack {
        let mut pool = BufferPool::new(config.buffers, config.limits.pool_free_buffers);
        pool.limit_free_bytes(config.limits.pool_free_bytes);
        let reassembly = ReassemblyTable::new(&config.limits);
        let udp = UdpTable::new(&config);
        let tcp = TcpTable::new(&config, random_secret());
        let icmp = IcmpState::new(&config.limits);
        let lo = Loopback::new(65535, config.limits.loopback_queue);
        let lo_caps = lo.capabilities();
        let mut stack = Stack {
            ifaces: Vec::new(),
            routes: RoutingTable::default(),
            pool,
            reassembly,
            udp,
            tcp,
            icmp,
            counters: Counters::default(),
            now: Instant::ZERO,
            ident: IdentTable::new(random_secret()),
            route_epoch: 0,
            lo,
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

    /// Adds an interface with address and prefix `cidr`, and the route to its prefix.
    pub fn add_interface(
        &mut self,
        name: &str,
        link: impl Link + 'static,
        cidr: Ipv4Cidr,
    ) -> InterfaceId {
        let caps = link.capabilities();
        self.add_link(name, StackLink::Dyn(Box::new(link)), caps, cidr)
    }

    fn add_link(
        &mut self,
        name: &str,
        link: StackLink,
        caps: LinkCapabilities,
        cidr: Ipv4Cidr,
    ) -> InterfaceId {
        let id = InterfaceId(self.ifaces.len());
        self.route_epoch = self.route_epoch.wrapping_add(1);
        self.ifaces.push(Interface {
            name: name.to_string(),
            link,
            cidr,
            broadcast: cidr.broadcast(),
            caps,
            txq: Vec::with_capacity(self.config.tx_batch),
        });
        self.routes.add(Route {
            dest: Ipv4Cidr::new(cidr.addr, cidr.prefix_len),
            gateway: None,
            iface: id,
        });
        id
    }

    /// Adds a route to `dest` through `gateway` (or directly, if `None`) on `iface`.
    pub fn add_route(
        &mut self,
        dest: Ipv4Cidr,
        gateway: Option<Ipv4Addr>,
        iface: InterfaceId,
    ) -> io::Result<()> {
        if iface.0 >= self.ifaces.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such interface",
            ));
        }
        self.routes.add(Route {
            dest,
            gateway,
            iface,
        });
        self.route_epoch = self.route_epoch.wrapping_add(1);
        Ok(())
    }

    /// Shares free buffers with the other stacks given the same depot: for stacks joined by an
    /// in-memory pair, whose buffers travel from the sender's pool to the receiver's.
    pub fn set_buffer_depot(&mut self, depot: BufferDepot) {
        self.pool.set_depot(depot);
    }

    /// The routing table.
    pub fn routes(&self) -> &RoutingTable {
        &self.routes
    }

    /// Name, address and capabilities of every interface.
    pub fn interfaces(
        &self,
    ) -> impl Iterator<Item = (InterfaceId, &str, Ipv4Cidr, LinkCapabilities)> {
        self.ifaces
            .iter()
            .enumerate()
            .map(|(i, f)| (InterfaceId(i), f.name.as_str(), f.cidr, f.caps))
    }

    /// The configuration.
    pub fn config(&self) -> &StackConfig {
        &self.config
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
        (self.reassembly.len(), self.reassembly.bytes_held())
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
        let max = self.config.rx_batch;
        let mut processed = self.flush();
        for _ in 0..POLL_ROUNDS {
            layer!(Receive, Link);
            // The loopback first, straight from its queue: no batch in between.
            let mut got = 0;
            while got < max {
                let Some(packet) = self.lo.pop() else { break };
                self.ipv4_input(LOOPBACK, packet);
                got += 1;
            }
            self.tcp_flush_dirty();
            // A full batch means the link may hold more.
            let mut more = got == max;
            if self.ifaces.len() > 1 {
                let (n, full) = self.receive_links(max);
                got += n;
                more |= full;
            }
            let sent = self.flush();
            processed += got + sent;
            // Quiet when every link came up short and input queued nothing new (a reply to ourselves
            // over loopback would need another round).
            if !more && sent == 0 && self.lo.is_empty() {
                break;
            }
        }
        layer!();
        if self.reassembly.next_deadline().is_some_and(|d| d <= now) {
            self.expire_reassembly();
            processed += self.flush();
        }
        if self.tcp_next_deadline().is_some_and(|d| d <= now) {
            self.tcp_timers();
            processed += self.flush();
        }
        processed
    }

    /// One round of input from every interface but loopback: up to `max` packets each. Returns how
    /// many, and whether some link filled a batch (and may hold more).
    #[inline(never)]
    fn receive_links(&mut self, max: usize) -> (usize, bool) {
        let mut batch = std::mem::take(&mut self.rx_batch);
        let (mut got, mut more) = (0, false);
        for i in 1..self.ifaces.len() {
            layer!(Receive, Link);
            let n = self.ifaces[i].link.receive(&mut batch, max);
            more |= n == max;
            got += n;
            for packet in batch.drain(..) {
                self.ipv4_input(InterfaceId(i), packet);
            }
            self.tcp_flush_dirty();
        }
        self.rx_batch = batch;
        (got, more)
    }

    /// The earliest time a timer (TCP retransmission, delayed ACK, reassembly expiry, ...) wants
    /// `poll` to run, if any: a caller may sleep until then when the links are quiet.
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.reassembly.next_deadline(), self.tcp_next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Hands every queued output packet to its link now; returns how many there were.
    pub fn flush(&mut self) -> usize {
        let mut n = 0;
        // The loopback's packets went straight to its queue: only the other links have queues.
        for iface in self.ifaces.iter_mut().skip(1) {
            if !iface.txq.is_empty() {
                layer!(Send, Link);
                n += iface.txq.len();
                let dropped = iface.link.transmit(&mut iface.txq);
                for _ in 0..dropped {
                    self.counters.drops.add(DropReason::LinkQueueFull);
                }
            }
        }
        n
    }

    /// Queues `packet` (a whole IP packet) for `iface`; hands the queue to the link once `tx_batch`
    /// packets wait.
    #[inline(always)]
    pub(crate) fn enqueue(&mut self, iface: InterfaceId, packet: PacketBuf) {
        self.counters.ip.out_packets += 1;
        if iface == LOOPBACK {
            // Straight to the loopback's queue: the next `poll` reads it there.
            layer!(Send, Link);
            if let Err(packet) = self.lo.push(packet) {
                self.drop_packet(packet, DropReason::LinkQueueFull);
            }
            return;
        }
        self.enqueue_link(iface, packet);
    }

    /// [`Self::enqueue`] for any interface but loopback.
    #[inline(never)]
    fn enqueue_link(&mut self, iface: InterfaceId, packet: PacketBuf) {
        let f = &mut self.ifaces[iface.0];
        f.txq.push(packet);
        if f.txq.len() >= self.config.tx_batch {
            self.transmit_queue(iface);
        }
    }

    /// Hands `iface`'s queue to its link (a full batch).
    #[inline(never)]
    fn transmit_queue(&mut self, iface: InterfaceId) {
        layer!(Send, Link);
        let f = &mut self.ifaces[iface.0];
        let dropped = f.link.transmit(&mut f.txq);
        for _ in 0..dropped {
            self.counters.drops.add(DropReason::LinkQueueFull);
        }
    }

    /// Feeds one received IP packet to the stack as if `iface` had received it (for tests, fuzzing and
    /// links driven from outside).
    pub fn receive(&mut self, iface: InterfaceId, packet: PacketBuf) {
        if iface.0 < self.ifaces.len() {
            self.ipv4_input(iface, packet);
            self.tcp_flush_dirty();
        }
    }
}

/// A fresh random key for TCP's initial sequence numbers and SYN cookies (RFC 6528 §3), from the
/// randomly keyed hasher std seeds from the operating system.
fn random_secret() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let mut key = [0u64; 2];
    for (i, k) in key.iter_mut().enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        *k = h.finish();
    }
    key
}
