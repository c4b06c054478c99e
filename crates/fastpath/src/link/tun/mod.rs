//! The Linux TUN link: the stack's packets in and out of a kernel network interface. Linux only
//! (`cfg(target_os = "linux")`).
//!
//! [`TunLink`] opens `/dev/net/tun` with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`: every packet read or
//! written is a bare IPv4 or IPv6 packet behind a 12-byte virtio-net header (virtio 1.0's layout, with
//! `num_buffers`, which we never use; 12 rather than 10 bytes so the header is the one
//! [`HEADROOM`] was sized for). The header carries the checksum offload state that
//! [`PacketMeta`](crate::buf::PacketMeta) models (paper 002 §3.2):
//!
//! - with offload on, the link tells the kernel `TUN_F_CSUM` and reports
//!   [`LinkCapabilities::tx_checksum_offload`]. A packet the stack sends with
//!   [`ChecksumOffload::Partial`] goes out with `VIRTIO_NET_HDR_F_NEEDS_CSUM`, `csum_start` and
//!   `csum_offset`, and nobody computes its checksum: the kernel delivers it locally as verified. A
//!   packet the kernel sends with `NEEDS_CSUM` (its own UDP sockets leave the checksum to the device)
//!   is checked against the packet and marked `Partial`; one with `DATA_VALID` is marked
//!   [`ChecksumOffload::Valid`].
//! - with offload off, the kernel completes every checksum before handing us a packet, the link
//!   ignores `DATA_VALID`, and the stack checksums everything itself.
//!
//! UDP segmentation offload (`TUN_F_USO4 | TUN_F_USO6`, Linux 6.2) is probed when the link opens
//! ([`TunLink::uso_available`]) and used on receive only if [`TunConfig::uso`] asks: a kernel socket
//! with `UDP_SEGMENT` then hands over up to 64 KiB of datagrams as one GSO packet in one read, and the
//! link splits it into the datagrams it stands for (each with its own IP and UDP header: lengths, and
//! over IPv4 the identifier and header checksum; the UDP checksum left partial). Only receive: the
//! stack fragments large datagrams at the IP layer and never builds a segmented super-packet to send.
//! A UDP GSO packet with USO off is dropped and counted, and so is one whose segment size is 0 or past
//! the MTU, whose lengths disagree, or that stands for more than [`UDP_MAX_SEGMENTS`] datagrams.
//!
//! TCP segmentation offload works both ways with offload on (`TUN_F_TSO4 | TUN_F_TSO6`, paper 002
//! §3.3): the stack hands the kernel segments of up to 64 KiB marked `VIRTIO_NET_HDR_GSO_TCPV4` or
//! `_TCPV6` for it to cut, and takes the kernel's own TCP GSO packets whole, as one segment (GRO's
//! effect), reading them straight into large buffers while they keep coming.
//!
//! Packets from the kernel are input to be checked like any other: a read shorter than the virtio
//! header, a packet that filled the whole buffer (it may have been cut), checksum offsets that point
//! outside the packet or into its IP header, and GSO packets not asked for are dropped, each under its
//! own counter in [`TunStats`], never a panic. A partial checksum in bounds on anything but a whole UDP
//! datagram (the one shape the stack trusts as partial) is completed by the link, as a device would.
//! The header's fields are in host byte order, TUN's default for the legacy header.
//!
//! Reads and writes move a batch per call: [`Link::receive`] reads until `max` packets or `EAGAIN`,
//! [`Link::transmit`] writes every packet it is given. A read lands in a buffer from the link's
//! [`BufferPool`] with the virtio header in the last 12 bytes of the headroom and the packet right
//! behind it, where the stack wants it. Writes go through io_uring by default
//! ([`TunConfig::io_uring`]): each packet's virtio header is written into its headroom and one
//! `io_uring_enter` hands the kernel the whole batch; without a ring, a `writev` per packet gathers the
//! header (on the stack) and the packet. Neither copies the packet in user space (splitting a GSO
//! packet does copy each datagram into a buffer of its own). The descriptor is non-blocking;
//! [`TunLink::wait`] (or [`TunHandle::wait`], once the link belongs to a stack) sleeps in `poll` until a
//! packet arrives, and both lend the descriptor ([`AsFd`], [`AsRawFd`]) to an event loop (epoll, mio,
//! tokio's `AsyncFd`) that would rather wait for it with others.
//!
//! The interface is created in a network namespace by moving a short-lived thread into it (`setns`)
//! and opening the device there; the thread then ends, and the process's other threads never leave
//! their namespace. The descriptor keeps working from any thread, and the interface disappears when the
//! link (and every [`TunHandle`]) is dropped. Bringing the interface up and giving the kernel's side an
//! address is left to the caller (`ip -n NS addr add ... dev NAME; ip -n NS link set NAME up`).
//!
//! [`TunLink::open_queues`] opens one interface with several queues (`IFF_MULTI_QUEUE`), a link per
//! queue for a stack per core, and attaches the steering program of [`steer`], which decides which
//! queue (so which stack) gets each packet the kernel sends.
//!
//! [`TunLink::from_fd`] takes a descriptor someone else opened (a VPN app's), with or without
//! `IFF_VNET_HDR` (`adopt.rs`: without it, bare packets and no offload).
//!
//! The files: `vnet.rs`, the virtio-net header (layout, flags, GSO types, and what a received one says
//! about its packet); `gso.rs`, segmentation offload (TSO marked on transmit, TCP GSO packets taken
//! whole and UDP ones split on receive); `steer.rs`, the multi-queue steering program and the
//! ephemeral port shares; `stats.rs`, [`TunStats`]; `sys.rs`, the system calls, and `uring.rs`, the
//! ring the writes go through (the link's only `unsafe` code); `adopt.rs`, a link over a descriptor
//! opened elsewhere; this one, the link itself: opening, batching, buffers (its tests in
//! `tests.rs`).

mod adopt;
mod gso;
mod stats;
pub mod steer;
#[allow(unsafe_code)]
mod sys;
#[allow(unsafe_code)]
mod uring;
mod vnet;

use std::collections::VecDeque;
use std::io;
use std::ops::RangeInclusive;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;

use super::pair::complete_checksum;
use super::published::Published;
use super::{Link, LinkCapabilities, Medium};
use crate::buf::{BufferDepot, BufferMode, BufferPool, ChecksumOffload, PacketBuf, HEADROOM};
use crate::wire::MacAddr;
use gso::Frame;
use vnet::{
    classify_rx, RxChecksum, VnetHeader, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_NONE,
};

pub use gso::UDP_MAX_SEGMENTS;
pub use stats::TunStats;
pub use steer::ephemeral_share;
pub use vnet::VNET_HEADER_LEN;

/// Largest MTU a TUN interface (and IPv4) allows.
pub const MAX_MTU: usize = 65535;

/// Small packets read in a row into large buffers before the link goes back to small reads.
const SMALL_IN_LARGE: u32 = 8;

/// Smallest MTU IPv4 allows.
pub const MIN_MTU: usize = 68;

/// Most queues a TUN interface takes (the kernel's `MAX_TAP_QUEUES`).
pub const MAX_QUEUES: usize = 256;

/// Free receive buffers the link's own pool keeps.
const POOL_FREE_BUFFERS: usize = 256;

/// How to create a [`TunLink`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunConfig {
    /// Interface name, at most 15 bytes; empty lets the kernel pick `tunN`.
    pub name: String,
    /// Network namespace to create the interface in: a name as `ip netns` knows it (looked up in
    /// `/var/run/netns/`) or a path (anything with a `/`, such as `/proc/PID/ns/net`). `None`: the
    /// calling thread's own.
    pub netns: Option<String>,
    /// MTU to give the interface, [`MIN_MTU`] to [`MAX_MTU`].
    pub mtu: usize,
    /// Checksum offload: `TUN_F_CSUM` towards the kernel, [`LinkCapabilities::tx_checksum_offload`]
    /// towards the stack.
    pub offload: bool,
    /// UDP segmentation offload on receive (`TUN_F_USO4 | TUN_F_USO6`, Linux 6.2): the kernel may hand
    /// over a UDP datagram sent with `UDP_SEGMENT` as one GSO packet of up to 64 KiB, which the link
    /// splits into the datagrams it stands for. Needs `offload`; left off, with no error, if the
    /// kernel refuses it ([`TunLink::uso_enabled`] says which).
    pub uso: bool,
    /// Writes through io_uring (`uring.rs`): a batch of packets handed to the kernel in one system
    /// call, in place of a `write` each. Reads, waits and offloads are unchanged. On by default; left
    /// off, with no error, where the kernel refuses a ring or has no write through one (before
    /// Linux 5.6, or with `kernel.io_uring_disabled`), and on any queue of several whose ring fails
    /// (`RLIMIT_MEMLOCK` bounds rings before 5.12): [`TunLink::io_uring_enabled`] says which, queue by
    /// queue. A ring the kernel stops taking writes from later is given up the same way.
    pub io_uring: bool,
    /// A TAP interface (`IFF_TAP`) in place of a TUN one: Ethernet frames in and out, the stack
    /// being a host on the link with this hardware address (it answers ARP and neighbour
    /// discovery for itself; see [`Medium::Ethernet`]). With `offload`, checksums go partial both
    /// ways and the stack's TCP segments go to the kernel to cut (TSO), as on TUN; the kernel's
    /// own large segments are not taken whole (it cuts them first), and UDP segmentation offload
    /// is TUN's only. Several queues work as on TUN, the steering program reading past the
    /// Ethernet header; ARP and neighbour discovery go to queue 0, so give the queues' stacks one
    /// [`NeighborBoard`](crate::ethernet::NeighborBoard).
    pub tap: Option<MacAddr>,
}

impl Default for TunConfig {
    fn default() -> TunConfig {
        TunConfig {
            name: String::new(),
            netns: None,
            mtu: 1500,
            offload: true,
            uso: false,
            io_uring: true,
            tap: None,
        }
    }
}

/// What a link and its handles share: the descriptor, the name, the published counters.
#[derive(Debug)]
struct Shared {
    fd: OwnedFd,
    name: String,
    stats: Published<{ TunStats::WORDS }>,
}

impl Shared {
    fn stats(&self) -> TunStats {
        TunStats::from_words(self.stats.load())
    }
}

/// A handle on a [`TunLink`] that stays with the caller once the link itself has been given to a
/// [`Stack`](crate::Stack): to sleep until a packet arrives, and to read the counters.
#[derive(Clone, Debug)]
pub struct TunHandle {
    shared: Arc<Shared>,
}

impl TunHandle {
    /// Sleeps until a packet can be read or `timeout` passes (`None`: no limit). Returns true when a
    /// packet is waiting; false on timeout or when a signal interrupted the wait (so a loop can look at
    /// its signal flags).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        sys::wait_readable(self.shared.fd.as_fd(), timeout)
    }

    /// The counters as of the link's last `receive` or `transmit`.
    pub fn stats(&self) -> TunStats {
        self.shared.stats()
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

/// A Linux TUN interface as a [`Link`]. See the [module documentation](self).
#[derive(Debug)]
pub struct TunLink {
    /// With [`TunConfig::io_uring`]. First, so that it is dropped (what it holds cancelled and
    /// reaped) before the descriptor is closed.
    uring: Option<uring::Uring>,
    /// Write completions reaped and not yet counted.
    sent: Vec<(PacketBuf, i32)>,
    shared: Arc<Shared>,
    caps: LinkCapabilities,
    medium: Medium,
    /// Bytes of link header before the IP header: 14 on a TAP interface (Ethernet), else 0.
    l2: usize,
    offload: bool,
    /// Bytes of virtio-net header in front of every packet read or written: [`VNET_HEADER_LEN`], or
    /// 0 for a descriptor opened without `IFF_VNET_HDR` ([`TunLink::from_fd`]), which carries bare
    /// packets and no offload.
    vnet_len: usize,
    uso_available: bool,
    /// UDP segmentation offload is on: reads gather into `scratch` too, and GSO packets are split.
    uso: bool,
    pool: BufferPool,
    /// A receive buffer left over from a read that found nothing (or a dropped packet), for the next.
    spare: Option<PacketBuf>,
    /// With TSO taken whole: large TCP packets are arriving, so reads go straight into a large
    /// buffer (`spare_large`, or one from the pool's 64 KiB class) and nothing is gathered; a small
    /// packet read that way is copied into a small buffer. Set by a packet that had to be gathered;
    /// cleared after [`SMALL_IN_LARGE`] small packets in a row.
    large_reads: bool,
    small_in_a_row: u32,
    spare_large: Option<PacketBuf>,
    /// Bytes asked of the pool for a receive buffer: one more than the MTU, so that a packet that fills
    /// the buffer is known to be too large.
    rx_capacity: usize,
    /// Whole TCP GSO packets are taken (see [`TunLink::enable_tso_rx`]).
    tso_rx: bool,
    /// With USO: where the rest of a packet larger than the receive buffer lands (a GSO packet of up to
    /// 64 KiB), so that ordinary packets still arrive in right-sized buffers with nothing copied.
    scratch: Vec<u8>,
    /// Segments of a split GSO packet not yet handed to the stack (a batch holds at most `max`).
    pending: VecDeque<PacketBuf>,
    stats: TunStats,
}

impl TunLink {
    /// Creates the interface `config` describes, in its namespace, with its MTU and offloads.
    ///
    /// Needs `CAP_NET_ADMIN` (root) and `/dev/net/tun`. Fails if the name is taken in that namespace.
    pub fn open(config: &TunConfig) -> io::Result<TunLink> {
        let mut links = TunLink::open_with(config, 1, &(0..=0))?;
        Ok(links.pop().expect("one queue"))
    }

    /// Creates the interface `config` describes with `queues` queues (`IFF_MULTI_QUEUE`, 1 to
    /// [`MAX_QUEUES`]) and returns one link per queue, each with its own descriptor, buffer pool and
    /// counters, for a stack of its own on a thread of its own.
    ///
    /// The kernel hands each packet to the queue a steering program picks (see [`steer`] for the rule):
    /// replies to a connection the stack on queue `q` opened come back to it as long as that stack
    /// takes its ephemeral ports from [`ephemeral_share`]`(ephemeral, q, queues)`; connections to a
    /// listening port, which every stack should have, spread by a hash of the peer's address and port.
    /// `ephemeral` is the range the stacks would use alone ([`StackConfig::ephemeral_ports`]).
    ///
    /// [`StackConfig::ephemeral_ports`]: crate::StackConfig::ephemeral_ports
    pub fn open_queues(
        config: &TunConfig,
        queues: usize,
        ephemeral: &RangeInclusive<u16>,
    ) -> io::Result<Vec<TunLink>> {
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{queues} queues: a TUN interface takes 1 to {MAX_QUEUES}"),
            ));
        }
        if ephemeral_share(ephemeral, 0, queues).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ephemeral ports {ephemeral:?} cannot be shared by {queues} queues"),
            ));
        }
        TunLink::open_with(config, queues, ephemeral)
    }

    fn open_with(
        config: &TunConfig,
        queues: usize,
        ephemeral: &RangeInclusive<u16>,
    ) -> io::Result<Vec<TunLink>> {
        if !(MIN_MTU..=MAX_MTU).contains(&config.mtu) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} outside {MIN_MTU}..={MAX_MTU}", config.mtu),
            ));
        }
        let (tap, offload) = (config.tap, config.offload);
        let (name, mtu) = (config.name.clone(), config.mtu);
        let io_uring = config.io_uring;
        let want_uso = config.uso && offload && tap.is_none();
        let steering = (queues > 1).then(|| steer::program(ephemeral, queues, tap.is_some()));
        let setup = move || -> io::Result<(Vec<OwnedFd>, String, bool, bool)> {
            let kind = if tap.is_some() {
                libc::IFF_TAP
            } else {
                libc::IFF_TUN
            };
            let mut flags = kind | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
            if queues > 1 {
                flags |= libc::IFF_MULTI_QUEUE;
            }
            let mut fds = Vec::with_capacity(queues);
            let mut name = name;
            let (mut uso_available, mut tso_available) = (false, false);
            for _ in 0..queues {
                // The first open creates the interface (and learns its name); the others attach to it.
                let (fd, created) = sys::open_tun(&name, flags)?;
                name = created;
                sys::set_vnet_header_len(fd.as_fd(), VNET_HEADER_LEN)?;
                // Probe USO and TSO, then set exactly the offloads we handle.
                uso_available =
                    sys::set_offload(fd.as_fd(), sys::TUN_F_CSUM | sys::TUN_F_USO).is_ok();
                tso_available = sys::set_offload(
                    fd.as_fd(),
                    sys::TUN_F_CSUM | sys::TUN_F_TSO4 | sys::TUN_F_TSO6,
                )
                .is_ok();
                let mut offloads = match (offload, want_uso && uso_available) {
                    (false, _) => 0,
                    (true, false) => sys::TUN_F_CSUM,
                    (true, true) => sys::TUN_F_CSUM | sys::TUN_F_USO,
                };
                // The kernel's TCP GSO packets are taken whole on TUN only: on TAP a frame of a
                // 64 KiB packet would not fit the large buffers.
                if offload && tso_available && tap.is_none() {
                    offloads |= sys::TUN_F_TSO4 | sys::TUN_F_TSO6;
                }
                sys::set_offload(fd.as_fd(), offloads)?;
                fds.push(fd);
            }
            if let Some(program) = &steering {
                let insns: Vec<[u8; 8]> = program.iter().map(|i| i.encode()).collect();
                let prog = sys::load_socket_filter(&insns, c"MIT OR Apache-2.0")?;
                sys::set_steering(fds[0].as_fd(), prog.as_fd())?;
            }
            sys::set_mtu(&name, mtu)?;
            Ok((
                fds,
                name,
                uso_available,
                offload && tso_available && tap.is_none(),
            ))
        };
        // A thread of its own enters the namespace, creates the interface there and ends: the
        // caller's threads stay where they are.
        let (fds, name, uso_available, tso_rx) =
            crate::link::os::in_netns(config.netns.as_deref(), "tun-netns", setup)?;
        Ok(fds
            .into_iter()
            .map(|fd| {
                let mut link = TunLink::over(fd, name.clone(), mtu, offload);
                if let Some(mac) = tap {
                    link.medium = Medium::Ethernet(mac);
                    link.l2 = crate::wire::ethernet::HEADER_LEN;
                    // A frame is the packet and up to 18 bytes of header and VLAN tag.
                    link.rx_capacity = mtu + 18 + 1;
                }
                link.uso_available = uso_available;
                if want_uso && uso_available {
                    link.enable_uso();
                }
                if tso_rx {
                    link.enable_tso_rx();
                }
                if io_uring {
                    // A kernel without io_uring (or with it turned off) leaves plain writes.
                    let _ = link.enable_uring();
                }
                link
            })
            .collect())
    }

    /// A link over an open descriptor that reads and writes packets behind virtio-net headers.
    fn over(fd: OwnedFd, name: String, mtu: usize, offload: bool) -> TunLink {
        TunLink {
            uring: None,
            sent: Vec::new(),
            shared: Arc::new(Shared {
                fd,
                name,
                stats: Published::new(),
            }),
            caps: LinkCapabilities {
                mtu,
                tx_checksum_offload: offload,
                crc_protected: false,
                // The kernel takes GSO packets from a vnet-header TUN reader whose checksum is partial.
                tso: offload,
            },
            medium: Medium::Ip,
            l2: 0,
            offload,
            vnet_len: VNET_HEADER_LEN,
            uso_available: false,
            uso: false,
            tso_rx: false,
            pool: BufferPool::new(BufferMode::Pool, POOL_FREE_BUFFERS),
            spare: None,
            large_reads: false,
            small_in_a_row: 0,
            spare_large: None,
            rx_capacity: mtu + 1,
            scratch: Vec::new(),
            pending: VecDeque::new(),
            stats: TunStats::default(),
        }
    }

    /// Keeps a receive buffer that carried nothing for the next read: a large one as the large
    /// spare, any other as the small one.
    fn keep(&mut self, buf: PacketBuf) {
        if buf.truesize() > HEADROOM + MAX_MTU {
            self.spare_large = Some(buf);
        } else {
            self.spare = Some(buf);
        }
    }

    /// Reads gather into a 64 KiB scratch area past the receive buffer, and GSO packets are split.
    fn enable_uso(&mut self) {
        self.uso = true;
        self.scratch = vec![0; VNET_HEADER_LEN + MAX_MTU + 1];
    }

    /// Reads gather into the scratch area too, and a TCP GSO packet (up to 64 KiB) is handed to the
    /// stack whole, as one large segment: GRO's effect, done by the kernel's TSO (paper 002 §3.3).
    fn enable_tso_rx(&mut self) {
        self.tso_rx = true;
        if self.scratch.is_empty() {
            self.scratch = vec![0; VNET_HEADER_LEN + MAX_MTU + 1];
        }
    }

    /// Writes go through a ring ([`TunConfig::io_uring`]).
    fn enable_uring(&mut self) -> io::Result<()> {
        self.uring = Some(uring::Uring::new(self.shared.fd.as_fd())?);
        Ok(())
    }

    /// Whether writes go through io_uring.
    pub fn io_uring_enabled(&self) -> bool {
        self.uring.is_some()
    }

    /// True when the kernel may hand over TCP segments larger than the MTU (offload on, and the
    /// kernel offers `TUN_F_TSO4`).
    pub fn tso_rx_enabled(&self) -> bool {
        self.tso_rx
    }

    /// The interface's name (the kernel's choice if the configuration left it empty).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// A handle for waiting and counters that outlives giving the link to a stack.
    pub fn handle(&self) -> TunHandle {
        TunHandle {
            shared: self.shared.clone(),
        }
    }

    /// Sleeps until a packet can be read or `timeout` passes; see [`TunHandle::wait`].
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        sys::wait_readable(self.shared.fd.as_fd(), timeout)
    }

    /// The counters.
    pub fn stats(&self) -> TunStats {
        self.stats
    }

    /// Whether the kernel accepted UDP segmentation offload when probed (Linux 6.2 and later).
    pub fn uso_available(&self) -> bool {
        self.uso_available
    }

    /// Whether UDP segmentation offload is on ([`TunConfig::uso`], if the kernel has it).
    pub fn uso_enabled(&self) -> bool {
        self.uso
    }

    /// Shares free buffers with a stack given the same depot
    /// ([`Stack::set_buffer_depot`](crate::Stack::set_buffer_depot)): received buffers are freed by
    /// the stack, transmitted ones by the link, so with a depot neither side keeps allocating.
    pub fn set_buffer_depot(&mut self, depot: BufferDepot) {
        self.pool.set_depot(depot);
    }

    fn publish(&self) {
        self.shared.stats.store(self.stats.to_words());
    }
}

/// The TUN descriptor the link reads and writes, non-blocking, for registering with `poll`, `epoll`,
/// mio or tokio (interest in readability: a packet is waiting for [`Link::receive`]). Read or write it
/// only through the link: a packet taken from it directly is lost to the stack. Edge-triggered users
/// must drain it, by receiving (polling the stack) until a `receive` finds nothing.
impl AsFd for TunLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

/// The descriptor as a raw number; see [`AsFd`](#impl-AsFd-for-TunLink).
impl AsRawFd for TunLink {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

/// The link's descriptor, still there once the link belongs to a [`Stack`](crate::Stack): to register
/// it with an event loop in place of [`TunHandle::wait`]. The same rules as for the link's
/// [`AsFd`](TunLink#impl-AsFd-for-TunLink) apply.
impl AsFd for TunHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

/// The descriptor as a raw number; see [`AsFd`](#impl-AsFd-for-TunHandle).
impl AsRawFd for TunHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

impl Link for TunLink {
    fn capabilities(&self) -> LinkCapabilities {
        self.caps
    }

    fn medium(&self) -> Medium {
        self.medium
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        // A short batch goes by `writev`, unless the ring holds writes it would overtake.
        if self
            .uring
            .as_ref()
            .is_some_and(|ring| batch.len() >= uring::MIN_BATCH || ring.held() > 0)
        {
            return self.transmit_uring(batch);
        }
        let mut dropped = 0;
        for mut packet in batch.drain(..) {
            let header = self.tx_header(&mut packet);
            dropped += usize::from(!self.write_gathered(&header, packet));
        }
        self.publish();
        dropped
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        if self.uring.as_ref().is_some_and(uring::Uring::pending) {
            // Writes a passing shortage left queued: handed over now, not at the next transmit.
            self.submit_uring();
        }
        let mut got = 0;
        while got < max {
            if let Some(segment) = self.pending.pop_front() {
                self.stats.rx_packets += 1;
                self.stats.rx_partial += 1;
                self.stats.rx_bytes += segment.len() as u64;
                batch.push(segment);
                got += 1;
                continue;
            }
            let large = self.large_reads;
            let mut buf = if large {
                match self.spare_large.take() {
                    Some(buf) => buf,
                    None => self.pool.alloc(MAX_MTU),
                }
            } else {
                match self.spare.take() {
                    Some(buf) => buf,
                    None => self.pool.alloc(self.rx_capacity),
                }
            };
            // The window covers everything from the virtio header's place in the headroom to the end.
            buf.reset(HEADROOM - self.vnet_len);
            let room = buf.tailroom();
            buf.extend(room);
            self.stats.rx_reads += 1;
            let fd = self.shared.fd.as_fd();
            let read = if self.uso || self.tso_rx {
                sys::read_two(fd, buf.data_mut(), &mut self.scratch)
            } else {
                sys::read(fd, buf.data_mut())
            };
            let n = match read {
                Ok(n) => n,
                Err(Errno::EINTR) => {
                    self.keep(buf);
                    continue;
                }
                Err(e) => {
                    if e != Errno::EAGAIN {
                        self.stats.rx_errors += 1;
                    }
                    self.keep(buf);
                    break;
                }
            };
            if n < self.vnet_len {
                self.stats.rx_drop_truncated += 1;
                self.keep(buf);
                continue;
            }
            let header = if self.vnet_len == 0 {
                // A bare packet: what a header saying nothing would say.
                VnetHeader::default()
            } else {
                let mut header = [0; VNET_HEADER_LEN];
                header.copy_from_slice(&buf.data()[..VNET_HEADER_LEN]);
                VnetHeader::parse(&header)
            };
            let tcp_gso = vnet::is_tcp_gso(header.gso_type) && self.tso_rx;
            if header.gso_type != VIRTIO_NET_HDR_GSO_NONE && self.uso && !tcp_gso {
                let result = if n >= room + self.scratch.len() {
                    Err(None)
                } else {
                    let frame = Frame {
                        head: &buf.data()[VNET_HEADER_LEN..n.min(room)],
                        tail: &self.scratch[..n.saturating_sub(room)],
                    };
                    gso::split_udp_gso(
                        &header,
                        &frame,
                        self.caps.mtu,
                        &mut self.pool,
                        &mut self.pending,
                    )
                    .map_err(Some)
                };
                match result {
                    Ok(segments) => {
                        self.stats.rx_gso_packets += 1;
                        self.stats.rx_gso_segments += segments as u64;
                    }
                    Err(None) => self.stats.rx_drop_oversize += 1,
                    Err(Some(reason)) => self.stats.count_drop(reason),
                }
                self.keep(buf);
                continue;
            }
            if tcp_gso && n > room {
                // A large TCP segment in a small buffer: gathered into one from the 64 KiB class,
                // a copy of the whole packet; the next reads go straight into large buffers.
                let len = n - VNET_HEADER_LEN;
                if n >= room + self.scratch.len() || len > MAX_MTU {
                    self.stats.rx_drop_oversize += 1;
                    self.keep(buf);
                    continue;
                }
                let frame = Frame {
                    head: &buf.data()[VNET_HEADER_LEN..room],
                    tail: &self.scratch[..n - room],
                };
                let big = gso::join_tcp_gso(&frame, &mut self.pool);
                self.keep(buf);
                buf = big;
                self.large_reads = true;
                self.small_in_a_row = 0;
            } else if n >= room {
                // The kernel fills what fits and reports the whole length: either way, cut or not, it
                // is larger than anything this link's MTU lets in.
                self.stats.rx_drop_oversize += 1;
                self.keep(buf);
                continue;
            } else if large && !tcp_gso {
                // A small packet in a large buffer: copied into a small one (at most a small
                // buffer's worth, as a small read would take), the large one kept for the next read.
                let mut small = match self.spare.take() {
                    Some(b) => b,
                    None => self.pool.alloc(self.rx_capacity),
                };
                small.reset(HEADROOM);
                if n - VNET_HEADER_LEN >= small.tailroom() {
                    self.stats.rx_drop_oversize += 1;
                    self.spare = Some(small);
                    self.keep(buf);
                    continue;
                }
                small.extend_from_slice(&buf.data()[VNET_HEADER_LEN..n]);
                self.keep(buf);
                buf = small;
                self.stats.rx_small_copied += 1;
                self.small_in_a_row += 1;
                if self.small_in_a_row >= SMALL_IN_LARGE {
                    self.large_reads = false;
                    if let Some(b) = self.spare_large.take() {
                        self.pool.free(b);
                    }
                }
            } else {
                buf.truncate(n);
                buf.pull_front(self.vnet_len);
                if large {
                    self.stats.rx_tso_direct += 1;
                    self.small_in_a_row = 0;
                }
            }
            if tcp_gso {
                self.stats.rx_tso_packets += 1;
            }
            if self.accept(&header, buf, batch) {
                got += 1;
            }
        }
        self.publish();
        got
    }
}

impl TunLink {
    /// The virtio-net header `packet` goes out with: checksum offload and TSO asked of the kernel, or
    /// the checksum completed here when offload is off.
    fn tx_header(&mut self, packet: &mut PacketBuf) -> VnetHeader {
        let mut header = VnetHeader::default();
        if let ChecksumOffload::Partial { start, offset } = packet.meta.checksum() {
            if self.offload {
                header.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
                header.csum_start = start;
                header.csum_offset = offset;
                self.stats.tx_offloaded += 1;
                if packet.meta.gso_size() > 0 {
                    // TSO: the kernel cuts the segment.
                    gso::mark_tso(
                        &mut header,
                        packet.data(),
                        self.l2,
                        start,
                        packet.meta.gso_size(),
                    );
                    self.stats.tx_tso += 1;
                }
            } else {
                complete_checksum(packet, start as usize, offset as usize);
                self.stats.tx_checksums_completed += 1;
            }
        }
        header
    }

    /// One `writev` of `header` and `packet`, counted; the buffer goes back to the pool. False when the
    /// kernel's queue was full.
    fn write_gathered(&mut self, header: &VnetHeader, packet: PacketBuf) -> bool {
        let header = header.emit();
        let mut sent = true;
        loop {
            let header = &header[..self.vnet_len];
            match sys::write_packet(self.shared.fd.as_fd(), header, packet.data()) {
                Ok(_) => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += packet.len() as u64;
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => {
                    self.stats.tx_drop_full += 1;
                    sent = false;
                }
                Err(_) => self.stats.tx_errors += 1,
            }
            break;
        }
        self.pool.free(packet);
        sent
    }

    /// Checks a received packet (the IP packet alone in `buf`) against its virtio-net header and hands
    /// it to the stack's batch, or counts why not. True when handed over.
    fn accept(
        &mut self,
        header: &VnetHeader,
        mut buf: PacketBuf,
        batch: &mut Vec<PacketBuf>,
    ) -> bool {
        match classify_rx(header, &mut buf, self.offload, self.tso_rx, self.l2) {
            Ok(state) => {
                buf.meta.set_checksum(match state {
                    RxChecksum::Meta(m) => {
                        match m {
                            ChecksumOffload::Partial { .. } => self.stats.rx_partial += 1,
                            ChecksumOffload::Valid => self.stats.rx_data_valid += 1,
                            ChecksumOffload::None => {}
                        }
                        m
                    }
                    RxChecksum::Completed => {
                        self.stats.rx_checksums_completed += 1;
                        ChecksumOffload::None
                    }
                });
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += buf.len() as u64;
                batch.push(buf);
                true
            }
            Err(reason) => {
                self.stats.count_drop(reason);
                self.keep(buf);
                false
            }
        }
    }

    /// Counts the writes the kernel has completed and gives their buffers back to the pool. Returns
    /// how many it refused for want of room.
    fn count_sent(&mut self) -> usize {
        let mut dropped = 0;
        for (buf, result) in self.sent.drain(..) {
            match result {
                n if n >= 0 => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += (buf.len() - self.vnet_len) as u64;
                }
                n if n == -libc::EAGAIN => {
                    self.stats.tx_drop_full += 1;
                    dropped += 1;
                }
                _ => self.stats.tx_errors += 1,
            }
            self.pool.free(buf);
        }
        dropped
    }

    /// [`Link::transmit`] through the ring: each packet's virtio-net header goes in its headroom, a
    /// write per packet is queued, and one `io_uring_enter` hands them all over.
    fn transmit_uring(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut dropped = 0;
        for mut packet in batch.drain(..) {
            let header = self.tx_header(&mut packet);
            let room = packet.headroom() >= self.vnet_len;
            let Some(ring) = self.uring.as_mut().filter(|_| room) else {
                // Not a buffer of the stack's (it leaves room for the header), or the ring was given
                // up in this batch: gathered by `writev`.
                dropped += usize::from(!self.write_gathered(&header, packet));
                continue;
            };
            packet
                .push_front(self.vnet_len)
                .copy_from_slice(&header.emit()[..self.vnet_len]);
            let mut packet = match ring.write(packet) {
                Ok(()) => continue,
                Err(packet) => packet,
            };
            // Every slot taken: hand over what is queued, take back what completed, try again.
            self.submit_uring();
            if let Some(ring) = self.uring.as_mut() {
                packet = match ring.write(packet) {
                    Ok(()) => continue,
                    Err(packet) => packet,
                };
            } else {
                packet.pull_front(self.vnet_len);
                dropped += usize::from(!self.write_gathered(&header, packet));
                continue;
            }
            self.stats.tx_drop_full += 1;
            dropped += 1;
            self.pool.free(packet);
        }
        // TUN takes a write at once: its completion is there already, and its buffer goes back to the
        // pool now.
        self.submit_uring();
        dropped += self.count_sent();
        self.publish();
        dropped
    }

    /// Hands the ring's queued writes to the kernel and takes the completions there are. A passing
    /// shortage (`EAGAIN`, `EBUSY`) leaves the writes queued for the next call (a `receive` makes
    /// one too); any other error gives the ring up for plain writes, with the writes it held counted
    /// as errors (whether or not the kernel sent them when the ring was torn down).
    fn submit_uring(&mut self) {
        let Some(ring) = self.uring.as_mut() else {
            return;
        };
        let submitted = ring.submit();
        ring.reap(&mut self.sent);
        if submitted.is_err_and(|e| !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))) {
            self.stats.tx_errors += ring.held() as u64;
            self.uring = None;
        }
    }
}

/// Packets and a fake kernel for the tests of this module and its files.
#[cfg(test)]
mod testing {
    use std::net::Ipv4Addr;
    use std::os::fd::OwnedFd;

    use super::vnet::{VnetHeader, VIRTIO_NET_HDR_F_NEEDS_CSUM};
    use super::TunLink;
    use crate::buf::PacketBuf;
    use crate::checksum;

    /// A UDP datagram in an IPv4 packet from 10.7.0.1:5000 to 10.7.0.2:7, its checksum field holding
    /// the pseudo-header sum as a sender that offloads leaves it.
    pub(super) fn partial_udp(payload: &[u8]) -> PacketBuf {
        let (src, dst) = (Ipv4Addr::new(10, 7, 0, 1), Ipv4Addr::new(10, 7, 0, 2));
        let udp_len = 8 + payload.len();
        let mut p = vec![0u8; 20 + udp_len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src.octets());
        p[16..20].copy_from_slice(&dst.octets());
        let h = !checksum::rfc1071(&p[..20]);
        p[10..12].copy_from_slice(&h.to_be_bytes());
        p[20..22].copy_from_slice(&5000u16.to_be_bytes());
        p[22..24].copy_from_slice(&7u16.to_be_bytes());
        p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, udp_len as u16);
        p[26..28].copy_from_slice(&pseudo.to_be_bytes());
        p[28..].copy_from_slice(payload);
        PacketBuf::from_slice(&p)
    }

    pub(super) fn needs_csum(start: u16, offset: u16) -> VnetHeader {
        VnetHeader {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            csum_start: start,
            csum_offset: offset,
            ..VnetHeader::default()
        }
    }

    pub(super) fn udp_checksum_verifies(p: &PacketBuf) -> bool {
        let d = p.data();
        let src = Ipv4Addr::new(d[12], d[13], d[14], d[15]);
        let dst = Ipv4Addr::new(d[16], d[17], d[18], d[19]);
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, (d.len() - 20) as u16);
        checksum::add(pseudo, checksum::rfc1071(&d[20..])) == 0xffff
    }

    /// A link over one end of a datagram socket pair, which keeps packet boundaries like a TUN
    /// descriptor: the test plays the kernel on the other end, with headers it makes up.
    pub(super) fn fake_kernel(offload: bool) -> (TunLink, std::os::unix::net::UnixDatagram) {
        let (ours, theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.set_nonblocking(true).unwrap();
        let link = TunLink::over(OwnedFd::from(ours), "fake0".into(), 1500, offload);
        (link, theirs)
    }

    pub(super) fn framed(header: &VnetHeader, packet: &[u8]) -> Vec<u8> {
        let mut v = header.emit().to_vec();
        v.extend_from_slice(packet);
        v
    }
}

#[cfg(test)]
mod tests;
