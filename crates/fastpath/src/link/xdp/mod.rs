//! The AF_XDP link: Ethernet frames in and out of one queue of a network interface through an
//! AF_XDP socket, past the kernel's stack. Linux only (`cfg(target_os = "linux")`).
//!
//! [`XdpLink::open`] sets up, in the interface's network namespace:
//!
//! - a UMEM (frames' memory shared with the kernel) cut into chunks of [`XdpConfig::frame_size`]
//!   bytes: one chunk per slot of the fill ring for receiving, one per slot of the TX ring for
//!   sending;
//! - the AF_XDP socket with its four rings (fill, RX, TX, completion), bound to the queue in copy
//!   mode (`XDP_COPY`), or zero-copy first if [`XdpConfig::zero_copy`] asks and the driver allows
//!   it ([`XdpLink::zero_copy`] says which it got);
//! - an XSKMAP holding the socket at the queue's index, and the XDP program of `program.rs`, which
//!   redirects the frames the stack owns (to the interface's address, broadcast, IPv6 multicast) to
//!   the socket of the queue they arrive on and passes everything else to the kernel. It is attached
//!   in native (driver) mode through a BPF link (`BPF_LINK_CREATE`, Linux 5.9), or through netlink
//!   (`RTM_SETLINK` with `IFLA_XDP`) on a kernel without XDP links; dropping the last link of the
//!   interface detaches it.
//!
//! [`XdpLink::open_queues`] does the same for several queues: a socket (and UMEM) per queue, one map
//! and one program for all of them, a link per queue for a stack per queue.
//!
//! Receiving copies each frame out of its chunk into a [`PacketBuf`] from the link's
//! [`BufferPool`] (the frame, from its Ethernet header on, at [`HEADROOM`]) and gives the chunk
//! straight back to the fill ring. Transmitting copies each frame into a free transmit chunk, posts a
//! descriptor per chunk on the TX ring, and kicks the kernel with one `sendto(MSG_DONTWAIT)` per
//! batch (copy mode sends in that call); finished chunks come back on the completion ring. A full TX
//! ring drops the frame, counted ([`XdpStats::tx_drop_ring_full`]).
//!
//! **Checksums.** Received frames are marked [`ChecksumOffload::None`]: the stack verifies every
//! transport checksum. That is not only caution: a frame a kernel socket sent through a veth pair
//! arrives with its UDP or TCP checksum partial (the kernel left it to a device that never computed
//! it), and nothing in the frame or its descriptor says so. Such frames fail verification; turn off
//! the sending side's checksum offload ([`disable_tx_checksum`], `ethtool -K PEER tx off`) so that
//! the kernel completes them before they leave.
//!
//! Sending, the link offers transmit checksum offload ([`XdpConfig::tx_checksum_offload`], on by
//! default): the UMEM is registered with room for transmit metadata in front of each transmit
//! chunk's frame (`XDP_UMEM_TX_METADATA_LEN`, Linux 6.8), and a frame whose UDP or TCP checksum
//! the stack left partial asks there for it to be completed (`XDP_TXMD_FLAGS_CHECKSUM`, the sum's
//! start and place counted from the frame's first byte). In copy mode the kernel turns that into
//! its own partial-checksum mark, which a veth peer's stack takes as it takes a local sender's,
//! and which a NIC, or the kernel in software, completes. A kernel without transmit metadata, or a
//! socket in zero-copy mode (whose driver may not read the request), leaves the offload off, and
//! the stack computes every checksum; a frame with a partial checksum handed to such a link from
//! elsewhere is completed by the link before it goes.
//!
//! **Frames larger than a chunk.** A chunk holds a received frame of up to `frame_size` − 256 bytes
//! (the kernel keeps `XDP_PACKET_HEADROOM` in front). When the MTU (the link's or the interface's,
//! whichever is larger), plus 18 bytes of Ethernet header and VLAN tag, needs more, the link turns on
//! multi-buffer frames: `XDP_USE_SG` on the socket, `BPF_F_XDP_HAS_FRAGS` on the program. A received
//! frame then arrives as several descriptors (all but the last marked `XDP_PKT_CONTD`), joined here
//! into one buffer; a frame to send is split over as many chunks.
//!
//! Descriptors from the kernel are checked like any input: one outside the link's receive chunks, or
//! one whose frame would outgrow the MTU, is dropped and counted in [`XdpStats`], never a panic.
//!
//! The interface must be up, and its MTU is left as it is (set it with `ip link set NAME mtu M`);
//! [`XdpConfig::mtu`] only tells the stack what to send. The socket's descriptor is what
//! [`XdpLink::wait`] polls and what [`AsFd`] lends to an event loop.
//!
//! **Several queues.** The interface decides which queue a frame arrives on, so the replies to a
//! connection one queue's stack opened may reach another's. With [`XdpConfig::ephemeral_ports`],
//! the links of one interface hand such frames to the queue whose share of the ephemeral ports
//! holds their destination port (`steer.rs`); give each queue's stack that share.
//!
//! The files: `sys.rs`, the system calls, the UMEM and the rings (the link's only `unsafe` code);
//! `program.rs`, the XDP program and its interpreter tests; `steer.rs`, the hand-over between
//! queues; `stats.rs`, [`XdpStats`]; this one, the link.

mod program;
mod stats;
mod steer;
#[allow(unsafe_code)]
mod sys;

use std::io;
use std::ops::RangeInclusive;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;

use super::pair::complete_checksum;
use super::published::Published;
use super::{Link, LinkCapabilities, Medium};
#[cfg(doc)]
use crate::buf::HEADROOM;
use crate::buf::{BufferDepot, BufferMode, BufferPool, ChecksumOffload, PacketBuf};
use crate::wire::MacAddr;

pub use stats::XdpStats;

/// Bytes the kernel keeps in front of a received frame in its chunk (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: usize = 256;

/// Bytes a frame adds to the IP packet it carries: the Ethernet header and an 802.1Q tag.
const FRAME_OVERHEAD: usize = 18;

/// Most chunks one frame may span (the kernel's `MAX_SKB_FRAGS` plus the head).
const MAX_FRAGMENTS: usize = 18;

/// Queue indices the link binds stay below this (the XSKMAP has a slot for each).
const MAX_QUEUE_INDEX: u32 = 4096;

/// Smallest MTU IPv4 allows.
const MIN_MTU: usize = 68;

/// Free receive buffers the link's own pool keeps.
const POOL_FREE_BUFFERS: usize = 256;

/// How to open an [`XdpLink`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface (a veth end, a NIC), which must exist and be up.
    pub ifname: String,
    /// Network namespace the interface is in: a name as `ip netns` knows it (looked up in
    /// `/var/run/netns/`) or a path (anything with a `/`). `None`: the calling thread's own.
    pub netns: Option<String>,
    /// The queue to bind ([`XdpLink::open_queues`]: the first of the queues), below 4096.
    pub queue: u32,
    /// Bytes per UMEM chunk: a power of two from 2048 to 4096 (the page size).
    pub frame_size: u32,
    /// Slots of the RX ring (a power of two).
    pub rx_ring: u32,
    /// Slots of the TX ring (a power of two), and transmit chunks.
    pub tx_ring: u32,
    /// Slots of the fill ring (a power of two), and receive chunks.
    pub fill_ring: u32,
    /// Slots of the completion ring (a power of two).
    pub completion_ring: u32,
    /// The IP MTU the stack is told, at most the interface's; `None`: the interface's.
    pub mtu: Option<usize>,
    /// Try zero-copy (`XDP_ZEROCOPY`) first, falling back to copy mode where the driver has no
    /// zero-copy support (`EOPNOTSUPP`). Off: copy mode.
    pub zero_copy: bool,
    /// Transmit checksum offload through AF_XDP's transmit metadata (Linux 6.8): the stack leaves
    /// UDP and TCP checksums partial and each frame asks for its sum to be completed
    /// (`XDP_TXMD_FLAGS_CHECKSUM`), by the kernel in copy mode (whose socket buffer then carries it
    /// as a partial checksum, like any local sender's). Used in copy mode only, where every kernel
    /// with the metadata honours it; in zero-copy mode (and on older kernels) the stack computes
    /// the checksums. [`XdpLink::tx_checksum_offload`] says which. Paper 002 §3.2's checksum
    /// offload, on this link.
    pub tx_checksum_offload: bool,
    /// With `tx_checksum_offload`: the kernel computes each offloaded checksum in software before
    /// the frame leaves (`XDP_UMEM_TX_SW_CSUM`), so that the frame carries a complete sum. For
    /// checking the offsets the link gives; slower.
    pub kernel_software_checksum: bool,
    /// With several queues: the stacks' ephemeral ports, shared out among the queues by
    /// [`ephemeral_share`](crate::link::tun::ephemeral_share), each queue's stack taking its share
    /// ([`StackConfig::ephemeral_ports`](crate::StackConfig::ephemeral_ports)). A link that
    /// receives a TCP or UDP frame to a port of another queue's share hands it to that queue, so
    /// that the replies to a connection a stack opened reach it (see the module's notes). `None`:
    /// each frame goes to the stack of the queue it arrived on.
    pub ephemeral_ports: Option<RangeInclusive<u16>>,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            ifname: String::new(),
            netns: None,
            queue: 0,
            frame_size: 4096,
            rx_ring: 1024,
            tx_ring: 1024,
            fill_ring: 1024,
            completion_ring: 1024,
            mtu: None,
            zero_copy: false,
            tx_checksum_offload: true,
            kernel_software_checksum: false,
            ephemeral_ports: None,
        }
    }
}

/// Turns off transmit checksum offload of interface `ifname` in namespace `netns` (`None`: the
/// calling thread's), as `ethtool -K IFNAME tx off` does: the kernel then completes the UDP and TCP
/// checksums of what its sockets send through it. For the kernel's end of a veth pair whose other
/// end an [`XdpLink`] holds, so that the frames reaching the link carry complete checksums (see the
/// [module documentation](self)).
pub fn disable_tx_checksum(netns: Option<&str>, ifname: &str) -> io::Result<()> {
    let name = ifname.to_owned();
    crate::link::os::in_netns(netns, "xdp-netns", move || sys::disable_tx_checksum(&name))
}

/// How the program is attached.
#[derive(Debug)]
enum Attached {
    /// Through a BPF link: closing it detaches the program.
    Link { _fd: OwnedFd },
    /// Through netlink, where the kernel has no XDP links (before Linux 5.9): detached explicitly.
    Netlink(sys::NetlinkXdp),
}

/// The program and map every queue of an interface shares. Dropping it detaches the program
/// first, then closes the program and the map.
#[derive(Debug)]
struct Attachment {
    attached: Attached,
    program: OwnedFd,
    _map: OwnedFd,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if let Attached::Netlink(netlink) = &self.attached {
            // Nothing more to do if it fails: the interface (or its namespace) is gone.
            let _ = netlink.detach(self.program.as_fd());
        }
    }
}

/// What a link and its handles share.
#[derive(Debug)]
struct Shared {
    fd: Arc<OwnedFd>,
    stats: Published<{ XdpStats::WORDS }>,
    /// With [`XdpConfig::ephemeral_ports`] and several queues: the interface's exchange, and this
    /// link's place in it.
    exchange: Option<(Arc<steer::Exchange>, usize)>,
}

impl Shared {
    /// Waits until a frame is on the RX ring or in the exchange's inbox (see [`XdpLink::wait`]).
    fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        sys::wait_readable(self.fd.as_fd(), self.exchange_fd(), timeout)
    }

    /// The eventfd of this link's inbox in the exchange, if it is in one.
    fn exchange_fd(&self) -> Option<BorrowedFd<'_>> {
        self.exchange.as_ref().map(|(x, q)| x.wake_fd(*q))
    }

    fn stats(&self) -> XdpStats {
        XdpStats::from_words(self.stats.load())
    }

    /// The published counters with the kernel's read now (left as they were if that fails).
    fn read(&self) -> XdpStats {
        let mut stats = self.stats();
        if let Ok(k) = sys::statistics(self.fd.as_fd()) {
            stats.set_kernel(&k);
        }
        stats
    }
}

/// A handle on an [`XdpLink`] that stays with the caller once the link itself has been given to a
/// [`Stack`](crate::Stack): to sleep until a frame arrives, and to read the counters. It shares the
/// socket: while a handle lives, the socket stays open and its queue bound, link dropped or not.
#[derive(Clone, Debug)]
pub struct XdpHandle {
    shared: Arc<Shared>,
}

impl XdpHandle {
    /// Sleeps until a frame is waiting or `timeout` passes (`None`: no limit); see
    /// [`XdpLink::wait`].
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.shared.wait(timeout)
    }

    /// The counters as of the link's last `receive` or `transmit`, with the kernel's read now.
    pub fn stats(&self) -> XdpStats {
        self.shared.read()
    }
}

/// One queue of a network interface as a [`Link`] of Ethernet frames, through an AF_XDP socket. See
/// the [module documentation](self).
#[derive(Debug)]
pub struct XdpLink {
    /// First: the program is detached (when this is the interface's last link) before the socket
    /// closes.
    attachment: Arc<Attachment>,
    sock: sys::Socket,
    shared: Arc<Shared>,
    mac: MacAddr,
    caps: LinkCapabilities,
    queue: u32,
    zero_copy: bool,
    multi_buffer: bool,
    frame_size: u64,
    /// Where a frame starts in a transmit chunk: after the transmit metadata when the checksum
    /// offload is on, else at the chunk's start.
    tx_data_offset: u64,
    /// Receive chunks are `[0, rx_end)` of the UMEM, transmit chunks `[rx_end, tx_end)`.
    rx_end: u64,
    tx_end: u64,
    /// Largest frame carried: the MTU, the Ethernet header and a VLAN tag.
    max_frame: usize,
    /// Receive chunks taken off the RX ring, to go back to the fill ring (at most one per receive
    /// chunk).
    recycle: Vec<u64>,
    /// Free transmit chunks (at most one per transmit chunk).
    tx_free: Vec<u64>,
    /// A multi-buffer frame being joined, and whether it is already condemned (too large).
    partial: Option<PacketBuf>,
    partial_dropping: bool,
    pool: BufferPool,
    stats: XdpStats,
}

impl XdpLink {
    /// Opens queue [`XdpConfig::queue`] of the interface `config` names (see the
    /// [module documentation](self)).
    ///
    /// Needs `CAP_NET_ADMIN` and `CAP_BPF` (root), an interface whose driver runs XDP programs in
    /// native mode, and no other XDP program on it.
    pub fn open(config: &XdpConfig) -> io::Result<XdpLink> {
        let mut links = XdpLink::open_queues(config, 1)?;
        Ok(links.pop().expect("one queue"))
    }

    /// Opens `queues` queues of the interface, from [`XdpConfig::queue`] on, and returns a link per
    /// queue, each with its own socket, UMEM, buffer pool and counters, for a stack of its own on a
    /// thread of its own. One program serves them all, redirecting each frame to the socket of the
    /// queue the interface received it on (the interface's RSS decides which).
    pub fn open_queues(config: &XdpConfig, queues: u32) -> io::Result<Vec<XdpLink>> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        if !(2048..=4096).contains(&config.frame_size) || !config.frame_size.is_power_of_two() {
            return Err(invalid(format!(
                "frame size {}: a power of two from 2048 to 4096",
                config.frame_size
            )));
        }
        for (name, size) in [
            ("RX", config.rx_ring),
            ("TX", config.tx_ring),
            ("fill", config.fill_ring),
            ("completion", config.completion_ring),
        ] {
            if !size.is_power_of_two() || size > 1 << 16 {
                return Err(invalid(format!(
                    "{name} ring of {size} slots: a power of two up to 65536"
                )));
            }
        }
        if !(1..=256).contains(&queues) || config.queue.saturating_add(queues) > MAX_QUEUE_INDEX {
            return Err(invalid(format!("{queues} queues from {}", config.queue)));
        }
        let config = config.clone();
        let netns = config.netns.clone();
        crate::link::os::in_netns(netns.as_deref(), "xdp-netns", move || {
            open_in_namespace(&config, queues, AttachBy::Link)
        })
    }

    /// Whether the program is attached through a BPF link (else through netlink: a kernel before
    /// 5.9).
    pub fn attached_by_bpf_link(&self) -> bool {
        matches!(self.attachment.attached, Attached::Link { .. })
    }

    /// The interface's hardware address, which the stack's frames come from.
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// The queue this link is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket got zero-copy mode (else copy mode).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether frames may span several chunks (the MTU needs more than one).
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// Whether UDP and TCP checksums are left to the kernel or device ([`XdpConfig::tx_checksum_offload`]
    /// asked for it, the kernel has transmit metadata and the socket is in copy mode).
    pub fn tx_checksum_offload(&self) -> bool {
        self.caps.tx_checksum_offload
    }

    /// A handle for waiting and counters that outlives giving the link to a stack.
    pub fn handle(&self) -> XdpHandle {
        XdpHandle {
            shared: self.shared.clone(),
        }
    }

    /// Sleeps in `poll` until a frame is waiting on the RX ring (or, with
    /// [`XdpConfig::ephemeral_ports`], another queue's link has handed it one) or `timeout` passes
    /// (`None`: no limit). True when a frame is waiting; false on timeout or when a signal
    /// interrupted the wait.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.shared.wait(timeout)
    }

    /// With [`XdpConfig::ephemeral_ports`] and several queues, the eventfd that becomes readable
    /// when another queue's link hands this one a frame: an event loop waiting on the link's
    /// descriptor ([`AsFd`]) waits on this one too.
    pub fn exchange_fd(&self) -> Option<BorrowedFd<'_>> {
        self.shared.exchange_fd()
    }

    /// The counters, with the kernel's read now.
    pub fn stats(&self) -> XdpStats {
        let mut stats = self.stats;
        if let Ok(k) = sys::statistics(self.shared.fd.as_fd()) {
            stats.set_kernel(&k);
        }
        stats
    }

    /// Shares free buffers with a stack given the same depot
    /// ([`Stack::set_buffer_depot`](crate::Stack::set_buffer_depot)): received buffers are freed by
    /// the stack, transmitted ones by the link.
    pub fn set_buffer_depot(&mut self, depot: BufferDepot) {
        self.pool.set_depot(depot);
    }

    fn publish(&self) {
        self.shared.stats.store(self.stats.to_words());
    }

    /// Gives the receive chunks taken off the RX ring back to the fill ring.
    fn refill(&mut self) {
        let want = self.recycle.len() as u32;
        if want == 0 {
            return;
        }
        let n = self.sock.fill.free(want).min(want);
        for i in 0..n {
            let chunk = self.recycle.pop().expect("n <= recycle.len()");
            self.sock.fill.write(i, chunk);
        }
        self.sock.fill.submit(n);
    }

    /// Takes finished transmit chunks off the completion ring.
    fn reap_completions(&mut self) {
        let n = self.sock.completion.available(u32::MAX);
        for i in 0..n {
            let addr = self
                .sock
                .completion
                .read(i)
                .wrapping_sub(self.tx_data_offset);
            if addr < self.rx_end
                || addr >= self.tx_end
                || !addr.is_multiple_of(self.frame_size)
                || self.tx_free.len() as u64 >= (self.tx_end - self.rx_end) / self.frame_size
            {
                self.stats.tx_bad_completions += 1;
                continue;
            }
            self.tx_free.push(addr);
        }
        self.sock.completion.release(n);
    }

    /// Asks the kernel to send what the TX ring holds. Copy mode sends a bounded batch per call and
    /// says `EAGAIN` while more is left, so this calls again, a bounded number of times; what is
    /// still left goes with the next kick (every `transmit` and `receive` kicks while the TX ring
    /// is not empty).
    fn kick(&mut self) {
        let tries = self.sock.tx.outstanding() / 16 + 2;
        for _ in 0..tries {
            self.stats.tx_kicks += 1;
            match sys::kick(self.shared.fd.as_fd()) {
                Ok(()) | Err(Errno::EAGAIN) | Err(Errno::EBUSY) | Err(Errno::EINTR) => {}
                Err(Errno::ENOBUFS) => break,
                Err(_) => {
                    self.stats.tx_kick_errors += 1;
                    break;
                }
            }
            if self.sock.tx.outstanding() == 0 {
                break;
            }
        }
    }

    /// Takes one RX descriptor: the frame (or the piece of a frame) into the buffer being filled,
    /// the chunk onto the recycle list. Returns the finished frame, if this was its last piece.
    fn take(&mut self, desc: sys::Desc) -> Option<PacketBuf> {
        let more = desc.options & libc::XDP_PKT_CONTD != 0;
        let chunk = rx_chunk(desc.addr, desc.len, self.frame_size, self.rx_end);
        let frame = chunk.and_then(|_| self.sock.umem.frame(desc.addr, desc.len));
        let mut buf = self.partial.take();
        let joined = buf.is_some();
        let mut dropping = std::mem::take(&mut self.partial_dropping);
        match frame {
            None => {
                self.stats.rx_drop_bad_desc += 1;
                dropping = true;
            }
            Some(bytes) if !dropping => {
                let b = buf.get_or_insert_with(|| self.pool.alloc(self.max_frame));
                if b.len() + bytes.len() > self.max_frame {
                    self.stats.rx_drop_oversize += 1;
                    dropping = true;
                } else {
                    b.extend_from_slice(bytes);
                }
            }
            Some(_) => {}
        }
        if let Some(chunk) = chunk.filter(|_| self.recycle.len() < self.recycle.capacity()) {
            self.recycle.push(chunk);
        }
        if more {
            self.partial = Some(buf.unwrap_or_else(|| self.pool.alloc(self.max_frame)));
            self.partial_dropping = dropping;
            return None;
        }
        let mut buf = buf?;
        if dropping || buf.is_empty() {
            if !dropping {
                self.stats.rx_drop_oversize += 1;
            }
            self.pool.free(buf);
            return None;
        }
        self.stats.rx_multi_buffer += u64::from(joined);
        buf.meta.set_checksum(ChecksumOffload::None);
        Some(buf)
    }
}

/// The receive chunk a descriptor from the RX ring names: `None` unless its frame lies inside one
/// chunk of the receive area `[0, rx_end)` (the kernel's word is checked, not trusted).
fn rx_chunk(addr: u64, len: u32, frame_size: u64, rx_end: u64) -> Option<u64> {
    let chunk = addr - addr % frame_size;
    // Below `rx_end` first, so that the sums cannot overflow.
    (chunk < rx_end && addr + u64::from(len) <= chunk + frame_size).then_some(chunk)
}

/// How to attach the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttachBy {
    /// A BPF link, or netlink where the kernel has no XDP links.
    Link,
    /// Netlink (for the tests of that path).
    #[cfg_attr(not(test), allow(dead_code))]
    Netlink,
}

/// Opens `queues` sockets from `config.queue` on and attaches the program, in the calling thread's
/// namespace.
fn open_in_namespace(
    config: &XdpConfig,
    queues: u32,
    attach_by: AttachBy,
) -> io::Result<Vec<XdpLink>> {
    let ifname = &config.ifname;
    let ifindex = sys::if_index(ifname)?;
    let mac = sys::hardware_address(ifname)?;
    let if_mtu = sys::mtu(ifname)?;
    let mtu = config.mtu.unwrap_or(if_mtu);
    if !(MIN_MTU..=65535).contains(&mtu) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("MTU {mtu} outside {MIN_MTU}..=65535"),
        ));
    }
    if mtu > if_mtu {
        // The interface would drop the larger frames the stack was told it may send.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("MTU {mtu} larger than {ifname}'s {if_mtu}: raise the interface's first"),
        ));
    }
    let frame_size = config.frame_size as usize;
    let rx_room = frame_size - XDP_PACKET_HEADROOM;
    // The kernel hands over frames up to the interface's MTU whatever the stack is told.
    let largest = mtu.max(if_mtu) + FRAME_OVERHEAD;
    let multi_buffer = largest > rx_room;
    if largest.div_ceil(rx_room) > MAX_FRAGMENTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "MTU {} needs more than {MAX_FRAGMENTS} chunks of {frame_size} bytes a frame",
                mtu.max(if_mtu)
            ),
        ));
    }
    let map = sys::create_xskmap(config.queue + queues)?;
    let mut sockets = Vec::with_capacity(queues as usize);
    for q in config.queue..config.queue + queues {
        let mut params = sys::SocketParams {
            ifindex,
            queue: q,
            chunk_size: config.frame_size,
            chunks: config.fill_ring + config.tx_ring,
            rx_size: config.rx_ring,
            tx_size: config.tx_ring,
            fill_size: config.fill_ring,
            completion_size: config.completion_ring,
            zero_copy: config.zero_copy,
            multi_buffer,
            tx_metadata: config.tx_checksum_offload,
            kernel_software_checksum: config.kernel_software_checksum,
        };
        let sock = match sys::Socket::open(&params) {
            Err(e) if params.zero_copy && e.kind() == io::ErrorKind::Unsupported => {
                // The driver has no zero-copy mode (EOPNOTSUPP): copy mode, which every driver has.
                params.zero_copy = false;
                sys::Socket::open(&params)?
            }
            other => other?,
        };
        sys::xskmap_insert(map.as_fd(), q, sock.fd.as_fd())?;
        // Checksum requests go only where every kernel honours them: copy mode (a zero-copy
        // driver may not read them).
        let offload = sock.tx_metadata && !params.zero_copy;
        sockets.push((q, sock, params.zero_copy, offload));
    }
    let insns: Vec<[u8; 8]> = program::program(mac, map.as_raw_fd())
        .iter()
        .map(|i| i.encode())
        .collect();
    let prog = sys::load_xdp_program(&insns, multi_buffer)?;
    let by_link = match attach_by {
        AttachBy::Link => sys::attach_xdp(prog.as_fd(), ifindex),
        AttachBy::Netlink => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    let attached = match by_link {
        Ok(fd) => Attached::Link { _fd: fd },
        Err(e) if sys::no_xdp_links(&e) => {
            Attached::Netlink(sys::NetlinkXdp::attach(prog.as_fd(), ifindex)?)
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("attaching the XDP program to {ifname} in native mode: {e}"),
            ))
        }
    };
    let attachment = Arc::new(Attachment {
        attached,
        program: prog,
        _map: map,
    });
    let frame_size = u64::from(config.frame_size);
    let rx_end = u64::from(config.fill_ring) * frame_size;
    let tx_end = rx_end + u64::from(config.tx_ring) * frame_size;
    let exchange = match &config.ephemeral_ports {
        Some(range) if queues > 1 => {
            let shares = (0..queues as usize)
                .map(|q| crate::link::tun::ephemeral_share(range, q, queues as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("ephemeral ports {range:?}: fewer than {queues} queues"),
                    )
                })?;
            Some(Arc::new(steer::Exchange::new(shares)?))
        }
        _ => None,
    };
    let mut links = Vec::with_capacity(sockets.len());
    for (i, (queue, sock, zero_copy, offload)) in sockets.into_iter().enumerate() {
        let tx_data_offset = if sock.tx_metadata {
            u64::from(sys::TX_METADATA_LEN)
        } else {
            0
        };
        let shared = Arc::new(Shared {
            fd: sock.fd.clone(),
            stats: Published::new(),
            exchange: exchange.clone().map(|x| (x, i)),
        });
        let mut link = XdpLink {
            attachment: attachment.clone(),
            sock,
            shared,
            mac: MacAddr(mac),
            caps: LinkCapabilities {
                tx_checksum_offload: offload,
                ..LinkCapabilities::plain(mtu)
            },
            queue,
            zero_copy,
            multi_buffer,
            frame_size,
            tx_data_offset,
            rx_end,
            tx_end,
            max_frame: mtu + FRAME_OVERHEAD,
            recycle: Vec::with_capacity(config.fill_ring as usize),
            tx_free: (0..u64::from(config.tx_ring))
                .rev()
                .map(|i| rx_end + i * frame_size)
                .collect(),
            partial: None,
            partial_dropping: false,
            pool: BufferPool::new(BufferMode::Pool, POOL_FREE_BUFFERS),
            stats: XdpStats::default(),
        };
        // Every receive chunk to the kernel.
        link.recycle.extend(
            (0..u64::from(config.fill_ring))
                .rev()
                .map(|i| i * frame_size),
        );
        link.refill();
        links.push(link);
    }
    Ok(links)
}

/// The AF_XDP socket's descriptor, for registering with `poll`, `epoll`, mio or tokio (interest in
/// readability: a frame is waiting for [`Link::receive`]). Use it only to wait: frames move through
/// the rings, which only the link touches.
impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

/// The descriptor as a raw number; see [`AsFd`](#impl-AsFd-for-XdpLink).
impl AsRawFd for XdpLink {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

/// The link's descriptor, still there once the link belongs to a [`Stack`](crate::Stack); the same
/// rules as for the link's [`AsFd`](XdpLink#impl-AsFd-for-XdpLink) apply.
impl AsFd for XdpHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

/// The descriptor as a raw number; see [`AsFd`](#impl-AsFd-for-XdpHandle).
impl AsRawFd for XdpHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

impl Link for XdpLink {
    fn capabilities(&self) -> LinkCapabilities {
        self.caps
    }

    fn medium(&self) -> Medium {
        Medium::Ethernet(self.mac)
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        self.reap_completions();
        let offset = self.tx_data_offset;
        // Frame bytes a transmit chunk holds, after the metadata if any.
        let room = (self.frame_size - offset) as usize;
        let mut dropped = 0;
        let mut posted = 0u32;
        for mut packet in batch.drain(..) {
            let len = packet.len();
            let pieces = len.div_ceil(room);
            if len == 0 || len > self.max_frame || (pieces > 1 && !self.multi_buffer) {
                // Not a full queue: counted here, not returned (as a TUN link's write errors).
                self.stats.tx_drop_oversize += 1;
                self.pool.free(packet);
                continue;
            }
            let need = posted + pieces as u32;
            if self.tx_free.len() < pieces || self.sock.tx.free(need) < need {
                self.stats.tx_drop_ring_full += 1;
                dropped += 1;
                self.pool.free(packet);
                continue;
            }
            // A partial checksum goes to the kernel when the link offered the offload; one handed
            // to a link that did not (a frame from elsewhere) is completed here.
            let request = match packet.meta.checksum() {
                ChecksumOffload::Partial { start, offset } if self.caps.tx_checksum_offload => {
                    Some((start, offset))
                }
                ChecksumOffload::Partial { start, offset } => {
                    complete_checksum(&mut packet, start.into(), offset.into());
                    None
                }
                _ => None,
            };
            let data = packet.data();
            for (k, piece) in data.chunks(room).enumerate() {
                let chunk = self.tx_free.pop().expect("pieces <= tx_free.len()");
                let mut options = if k + 1 < pieces {
                    libc::XDP_PKT_CONTD
                } else {
                    0
                };
                if let (0, Some((start, at))) = (k, request) {
                    let Some(meta) = self.sock.umem.frame_mut(chunk, offset as usize) else {
                        unreachable!("transmit chunks lie inside the UMEM");
                    };
                    sys::write_checksum_request(meta, start, at);
                    options |= libc::XDP_TX_METADATA;
                    self.stats.tx_checksum_offloaded += 1;
                }
                let Some(dst) = self.sock.umem.frame_mut(chunk + offset, piece.len()) else {
                    unreachable!("transmit chunks lie inside the UMEM");
                };
                dst.copy_from_slice(piece);
                self.sock.tx.write(
                    posted,
                    sys::Desc {
                        addr: chunk + offset,
                        len: piece.len() as u32,
                        options,
                    },
                );
                posted += 1;
            }
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += len as u64;
            self.stats.tx_multi_buffer += u64::from(pieces > 1);
            self.pool.free(packet);
        }
        if posted > 0 {
            self.sock.tx.submit(posted);
        }
        if self.sock.tx.outstanding() > 0 {
            self.kick();
        }
        self.reap_completions();
        self.publish();
        dropped
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        if self.sock.tx.outstanding() > 0 {
            // Frames an earlier kick left on the TX ring.
            self.kick();
            self.reap_completions();
        }
        let mut got = 0;
        if let Some((x, q)) = &self.shared.exchange {
            // What other queues' links received for this queue's stack.
            got = x.take(*q, batch, max);
            self.stats.rx_steered_in += got as u64;
        }
        let want = u32::try_from(max - got).unwrap_or(u32::MAX);
        let ready = self.sock.rx.available(want);
        if ready == 0 {
            self.stats.rx_ring_empty_polls += 1;
        }
        let mut used = 0;
        while used < ready && got < max {
            let desc = self.sock.rx.read(used);
            used += 1;
            if let Some(frame) = self.take(desc) {
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += frame.len() as u64;
                if let Some((x, q)) = &self.shared.exchange {
                    match x.owner(frame.data()) {
                        Some(owner) if owner != *q => {
                            if x.give(owner, frame) {
                                self.stats.rx_steered_out += 1;
                            } else {
                                self.stats.rx_drop_inbox_full += 1;
                            }
                            continue;
                        }
                        _ => {}
                    }
                }
                batch.push(frame);
                got += 1;
            }
        }
        self.sock.rx.release(used);
        if self.sock.fill.outstanding() == 0 {
            self.stats.fill_ring_empty += 1;
        }
        self.refill();
        self.publish();
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The netlink attachment, on a veth pair in a namespace of the test's own. Needs root and
    /// `ip`; without them the test prints why and passes, unless `FASTPATH_REQUIRE_TUN=1`.
    #[test]
    fn the_netlink_attachment_attaches_and_detaches() {
        use std::os::unix::fs::MetadataExt;
        use std::process::Command;
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        let has_ip = Command::new("ip").arg("-V").output().is_ok();
        if !root || !has_ip {
            let why = "the_netlink_attachment_attaches_and_detaches: needs root and ip";
            assert_ne!(
                std::env::var("FASTPATH_REQUIRE_TUN").as_deref(),
                Ok("1"),
                "{why}"
            );
            eprintln!("skipping {why}");
            return;
        }
        struct Netns(String);
        impl Drop for Netns {
            fn drop(&mut self) {
                let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
            }
        }
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("ip");
            assert!(out.status.success(), "ip {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let ns = Netns(format!("fpxdp-nl-{}", std::process::id()));
        ip(&["netns", "add", &ns.0]);
        ip(&[
            "-n", &ns.0, "link", "add", "vx", "type", "veth", "peer", "name", "vk",
        ]);
        ip(&["-n", &ns.0, "link", "set", "vx", "up"]);
        ip(&["-n", &ns.0, "link", "set", "vk", "up"]);
        let config = XdpConfig {
            ifname: "vx".into(),
            netns: Some(ns.0.clone()),
            ..XdpConfig::default()
        };
        let links = crate::link::os::in_netns(Some(&ns.0), "xdp-netns", move || {
            open_in_namespace(&config, 1, AttachBy::Netlink)
        })
        .expect("open with the netlink attachment");
        assert!(!links[0].attached_by_bpf_link());
        let shown = ip(&["-n", &ns.0, "link", "show", "vx"]);
        assert!(shown.contains("prog/xdp"), "attached: {shown}");
        drop(links);
        let shown = ip(&["-n", &ns.0, "link", "show", "vx"]);
        assert!(!shown.contains("prog/xdp"), "detached: {shown}");
    }

    #[test]
    fn a_partial_checksum_is_completed_where_the_link_cannot_offload_it() {
        // An Ethernet header, then a UDP-like body whose field at offset 6 holds a partial sum.
        let mut frame = vec![0u8; 14];
        let body = [0x13u8, 0x88, 0, 9, 0, 12, 0x12, 0x34, 1, 2, 3, 4];
        frame.extend_from_slice(&body);
        let mut packet = PacketBuf::from_slice(&frame);
        complete_checksum(&mut packet, 14, 6);
        // The receiver's check: the pseudo-header's sum (the 0x1234 the field held) and the body's,
        // the completed field included, make 0xffff.
        let body_sum = crate::checksum::rfc1071(&packet.data()[14..]);
        assert_eq!(crate::checksum::add(0x1234, body_sum), 0xffff);
        // Offsets past the end change nothing, and never panic.
        let before = packet.data().to_vec();
        complete_checksum(&mut packet, 14, 11);
        complete_checksum(&mut packet, usize::MAX, usize::MAX);
        assert_eq!(packet.data(), &before[..]);
    }

    #[test]
    fn descriptors_outside_the_receive_chunks_are_refused() {
        let (size, end) = (4096, 4 * 4096);
        assert_eq!(rx_chunk(256, 1514, size, end), Some(0));
        assert_eq!(rx_chunk(3 * 4096 + 256, 3840, size, end), Some(3 * 4096));
        // Past a chunk's end, in the transmit area, anywhere at all.
        assert_eq!(rx_chunk(256, 3841, size, end), None);
        assert_eq!(rx_chunk(4 * 4096, 60, size, end), None);
        assert_eq!(rx_chunk(u64::MAX, u32::MAX, size, end), None);
        assert_eq!(rx_chunk(u64::MAX - 10, 60, size, end), None);
        assert_eq!(rx_chunk(4095, u32::MAX, size, end), None);
    }

    #[test]
    fn configurations_out_of_range_are_refused_before_any_system_call() {
        let base = XdpConfig {
            ifname: "lo".into(),
            ..XdpConfig::default()
        };
        for config in [
            XdpConfig {
                frame_size: 1024,
                ..base.clone()
            },
            XdpConfig {
                frame_size: 3000,
                ..base.clone()
            },
            XdpConfig {
                rx_ring: 1000,
                ..base.clone()
            },
            XdpConfig {
                fill_ring: 0,
                ..base.clone()
            },
        ] {
            let err = XdpLink::open(&config).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{config:?}: {err}");
        }
        assert_eq!(
            XdpLink::open_queues(&base, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let last = XdpConfig {
            queue: MAX_QUEUE_INDEX - 1,
            ..base.clone()
        };
        assert_eq!(
            XdpLink::open_queues(&last, 2).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
