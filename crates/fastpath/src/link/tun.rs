//! The Linux TUN link: the stack's packets in and out of a kernel network interface.
//!
//! [`TunLink`] opens `/dev/net/tun` with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`: every packet read or
//! written is a bare IPv4 packet behind a 12-byte virtio-net header (virtio 1.0's layout, with
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
//! link splits it into the datagrams it stands for (each with its own IPv4 and UDP header, lengths and
//! IP identifier, its checksum left partial). Only receive: the stack fragments large datagrams at the
//! IP layer and never builds a segmented super-packet to send. A GSO packet of any other kind, or one
//! with USO off, is dropped and counted, and so is a UDP GSO packet whose segment size is 0 or past the
//! MTU, whose lengths disagree, or that stands for more than [`UDP_MAX_SEGMENTS`] datagrams.
//!
//! Packets from the kernel are input to be checked like any other: a read shorter than the virtio
//! header, a packet that filled the whole buffer (it may have been cut), checksum offsets that point
//! outside the packet or into its IPv4 header, and GSO packets not asked for are dropped, each under its
//! own counter in [`TunStats`], never a panic. A partial checksum in bounds on anything but a whole UDP
//! datagram (the one shape the stack trusts as partial) is completed by the link, as a device would.
//! The header's fields are in host byte order, TUN's default for the legacy header.
//!
//! Reads and writes move a batch per call: [`Link::receive`] reads until `max` packets or `EAGAIN`,
//! [`Link::transmit`] writes every packet it is given. A read lands in a buffer from the link's
//! [`BufferPool`] with the virtio header in the last 12 bytes of the headroom and the packet right
//! behind it, where the stack wants it; a write gathers the header (on the stack) and the packet with
//! `writev`. Neither copies the packet in user space (splitting a GSO packet does copy each datagram
//! into a buffer of its own). The descriptor is non-blocking;
//! [`TunLink::wait`] (or [`TunHandle::wait`], once the link belongs to a stack) sleeps in `poll` until a
//! packet arrives, and both lend the descriptor ([`AsFd`], [`AsRawFd`]) to an event loop (epoll, mio,
//! tokio's `AsyncFd`) that would rather wait for it with others.
//!
//! The interface is created in a network namespace by moving a short-lived thread into it (`setns`)
//! and opening the device there; the thread then ends, and the process's other threads never leave
//! their namespace. The descriptor keeps working from any thread, and the interface disappears when the
//! link (and every [`TunHandle`]) is dropped. Bringing the interface up and giving the kernel's side an
//! address is left to the caller (`ip -n NS addr add ... dev NAME; ip -n NS link set NAME up`).

#[allow(unsafe_code)]
mod sys;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::errno::Errno;

use super::pair::complete_checksum;
use super::{Link, LinkCapabilities};
use crate::buf::{BufferDepot, BufferMode, BufferPool, ChecksumOffload, PacketBuf, HEADROOM};
use crate::checksum;
use std::net::Ipv4Addr;

/// Bytes of the virtio-net header in front of every packet (`struct virtio_net_hdr_v1`, with
/// `num_buffers`).
pub const VNET_HEADER_LEN: usize = 12;

/// Largest MTU a TUN interface (and IPv4) allows.
pub const MAX_MTU: usize = 65535;

/// Smallest MTU IPv4 allows.
pub const MIN_MTU: usize = 68;

const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

/// Most datagrams one GSO packet may stand for (Linux's `UDP_MAX_SEGMENTS`).
pub const UDP_MAX_SEGMENTS: usize = 128;

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
}

impl Default for TunConfig {
    fn default() -> TunConfig {
        TunConfig {
            name: String::new(),
            netns: None,
            mtu: 1500,
            offload: true,
            uso: false,
        }
    }
}

/// Counters of a TUN link. The `rx_drop_*` counters are packets from the kernel the link refused; the
/// stack never sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunStats {
    /// Packets read and handed to the stack.
    pub rx_packets: u64,
    /// Bytes of those packets (IP packets, without the virtio header).
    pub rx_bytes: u64,
    /// `read` calls, including the ones that found nothing (`EAGAIN`).
    pub rx_reads: u64,
    /// Received with `NEEDS_CSUM` and passed on as [`ChecksumOffload::Partial`].
    pub rx_partial: u64,
    /// Received with `DATA_VALID` and passed on as [`ChecksumOffload::Valid`].
    pub rx_data_valid: u64,
    /// Received with `NEEDS_CSUM` on something other than a UDP datagram the stack can trust as
    /// partial (or with offload off): the link completed the checksum itself.
    pub rx_checksums_completed: u64,
    /// Dropped: shorter than the virtio header.
    pub rx_drop_truncated: u64,
    /// Dropped: the packet filled the whole buffer, so it may have been cut.
    pub rx_drop_oversize: u64,
    /// Dropped: `csum_start`/`csum_offset` point outside the packet or into its IP header.
    pub rx_drop_bad_checksum_offsets: u64,
    /// GSO packets (UDP segmentation offload) split into datagrams.
    pub rx_gso_packets: u64,
    /// Datagrams those GSO packets were split into (counted in `rx_packets` too).
    pub rx_gso_segments: u64,
    /// Dropped: a GSO packet of a kind not asked for (TCP, or UDP with USO off).
    pub rx_drop_gso: u64,
    /// TCP GSO packets (larger than the MTU) taken whole.
    pub rx_tso_packets: u64,
    /// Dropped: a UDP GSO packet that does not add up: a segment size of 0 or past the MTU, more than
    /// [`UDP_MAX_SEGMENTS`] segments, lengths that disagree, not a whole UDP/IPv4 datagram.
    pub rx_drop_gso_malformed: u64,
    /// `read` failures other than `EAGAIN` and `EINTR`.
    pub rx_errors: u64,
    /// Packets written.
    pub tx_packets: u64,
    /// Bytes of those packets (IP packets, without the virtio header).
    pub tx_bytes: u64,
    /// Written with `NEEDS_CSUM`: the checksum left to the kernel.
    pub tx_offloaded: u64,
    /// Packets sent as TCP segmentation offload (GSO TCPV4), for the kernel to cut.
    pub tx_tso: u64,
    /// Partial checksums the link completed because offload is off.
    pub tx_checksums_completed: u64,
    /// Dropped because the kernel would not take them now (`EAGAIN`); the stack counts them too.
    pub tx_drop_full: u64,
    /// `write` failures other than `EAGAIN` (the interface down, a packet the kernel refused).
    pub tx_errors: u64,
}

impl TunStats {
    /// Packets from the kernel the link dropped, all reasons together.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_drop_truncated
            + self.rx_drop_oversize
            + self.rx_drop_bad_checksum_offsets
            + self.rx_drop_gso
            + self.rx_drop_gso_malformed
    }
}

impl fmt::Display for TunStats {
    /// One counter per line, like the stack's counters; zeros left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tun:")?;
        for (n, what) in [
            (self.rx_packets, "packets received"),
            (self.rx_bytes, "bytes received"),
            (self.rx_reads, "reads"),
            (
                self.rx_partial,
                "received with checksum partial (NEEDS_CSUM)",
            ),
            (
                self.rx_data_valid,
                "received with checksum valid (DATA_VALID)",
            ),
            (
                self.rx_checksums_completed,
                "received checksums completed by the link",
            ),
            (
                self.rx_drop_truncated,
                "dropped: shorter than the virtio header",
            ),
            (self.rx_drop_oversize, "dropped: larger than the buffer"),
            (
                self.rx_drop_bad_checksum_offsets,
                "dropped: bad checksum offsets",
            ),
            (self.rx_gso_packets, "GSO packets split"),
            (self.rx_gso_segments, "datagrams split from GSO packets"),
            (self.rx_drop_gso, "dropped: GSO packet"),
            (self.rx_tso_packets, "TCP GSO packets taken whole (GRO)"),
            (self.rx_drop_gso_malformed, "dropped: malformed GSO packet"),
            (self.rx_errors, "read errors"),
            (self.tx_packets, "packets sent"),
            (self.tx_bytes, "bytes sent"),
            (
                self.tx_offloaded,
                "sent with checksum offloaded (NEEDS_CSUM)",
            ),
            (self.tx_tso, "sent as TCP segmentation offload (GSO)"),
            (
                self.tx_checksums_completed,
                "sent checksums completed by the link",
            ),
            (self.tx_drop_full, "dropped: kernel queue full"),
            (self.tx_errors, "write errors"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        Ok(())
    }
}

/// What a link and its handles share: the descriptor, the name, the published counters.
#[derive(Debug)]
struct Shared {
    fd: OwnedFd,
    name: String,
    stats: Mutex<TunStats>,
}

impl Shared {
    fn stats(&self) -> MutexGuard<'_, TunStats> {
        // Counters are plain numbers: a panic elsewhere cannot leave them inconsistent.
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
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
        *self.shared.stats()
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

/// A Linux TUN interface as a [`Link`]. See the [module documentation](self).
#[derive(Debug)]
pub struct TunLink {
    shared: Arc<Shared>,
    caps: LinkCapabilities,
    offload: bool,
    uso_available: bool,
    /// UDP segmentation offload is on: reads gather into `scratch` too, and GSO packets are split.
    uso: bool,
    pool: BufferPool,
    /// A receive buffer left over from a read that found nothing (or a dropped packet), for the next.
    spare: Option<PacketBuf>,
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
        if !(MIN_MTU..=MAX_MTU).contains(&config.mtu) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("MTU {} outside {MIN_MTU}..={MAX_MTU}", config.mtu),
            ));
        }
        let (name, mtu, offload) = (config.name.clone(), config.mtu, config.offload);
        let want_uso = config.uso && offload;
        let setup = move || -> io::Result<(OwnedFd, String, bool, bool)> {
            let flags = libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
            let (fd, name) = sys::open_tun(&name, flags)?;
            sys::set_vnet_header_len(fd.as_fd(), VNET_HEADER_LEN)?;
            // Probe USO and TSO, then set exactly the offloads we handle.
            let uso_available =
                sys::set_offload(fd.as_fd(), sys::TUN_F_CSUM | sys::TUN_F_USO).is_ok();
            let tso_available =
                sys::set_offload(fd.as_fd(), sys::TUN_F_CSUM | sys::TUN_F_TSO4).is_ok();
            let mut flags = match (offload, want_uso && uso_available) {
                (false, _) => 0,
                (true, false) => sys::TUN_F_CSUM,
                (true, true) => sys::TUN_F_CSUM | sys::TUN_F_USO,
            };
            if offload && tso_available {
                flags |= sys::TUN_F_TSO4;
            }
            sys::set_offload(fd.as_fd(), flags)?;
            sys::set_mtu(&name, mtu)?;
            Ok((fd, name, uso_available, offload && tso_available))
        };
        let (fd, name, uso_available, tso_rx) = match &config.netns {
            None => setup()?,
            Some(ns) => {
                let path = if ns.contains('/') {
                    PathBuf::from(ns)
                } else {
                    PathBuf::from("/var/run/netns").join(ns)
                };
                // A thread of its own enters the namespace, creates the interface there and ends: the
                // caller's threads stay where they are.
                std::thread::Builder::new()
                    .name("tun-netns".into())
                    .spawn(move || {
                        sys::enter_netns(&path)?;
                        setup()
                    })?
                    .join()
                    .map_err(|_| io::Error::other("the namespace thread panicked"))??
            }
        };
        let mut link = TunLink::over(fd, name, mtu, offload);
        link.uso_available = uso_available;
        if want_uso && uso_available {
            link.enable_uso();
        }
        if tso_rx {
            link.enable_tso_rx();
        }
        Ok(link)
    }

    /// A link over an open descriptor that reads and writes packets behind virtio-net headers.
    fn over(fd: OwnedFd, name: String, mtu: usize, offload: bool) -> TunLink {
        TunLink {
            shared: Arc::new(Shared {
                fd,
                name,
                stats: Mutex::new(TunStats::default()),
            }),
            caps: LinkCapabilities {
                mtu,
                tx_checksum_offload: offload,
                crc_protected: false,
                // The kernel takes GSO packets from a vnet-header TUN reader whose checksum is partial.
                tso: offload,
            },
            offload,
            uso_available: false,
            uso: false,
            tso_rx: false,
            pool: BufferPool::new(BufferMode::Pool, POOL_FREE_BUFFERS),
            spare: None,
            rx_capacity: mtu + 1,
            scratch: Vec::new(),
            pending: VecDeque::new(),
            stats: TunStats::default(),
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
        *self.shared.stats() = self.stats;
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

/// Why the link refused a packet from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxDrop {
    BadChecksumOffsets,
    Gso,
    GsoMalformed,
}

/// What the virtio header said about a packet's checksum, once checked against the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxChecksum {
    /// As [`PacketMeta`](crate::buf::PacketMeta) will carry it.
    Meta(ChecksumOffload),
    /// The link completed a partial checksum itself.
    Completed,
}

/// The fields of a virtio-net header we read or write, in host byte order (TUN's default for the
/// legacy header; `num_buffers`, the last two bytes, is ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct VnetHeader {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHeader {
    fn parse(b: &[u8; VNET_HEADER_LEN]) -> VnetHeader {
        VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16::from_ne_bytes([b[2], b[3]]),
            gso_size: u16::from_ne_bytes([b[4], b[5]]),
            csum_start: u16::from_ne_bytes([b[6], b[7]]),
            csum_offset: u16::from_ne_bytes([b[8], b[9]]),
        }
    }

    fn emit(&self) -> [u8; VNET_HEADER_LEN] {
        let mut b = [0; VNET_HEADER_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// Checks a received packet's virtio header against the packet and says what its checksum state is.
/// `packet` is the IP packet alone; a partial checksum the stack could not trust is completed in it.
fn classify_rx(
    header: &VnetHeader,
    packet: &mut PacketBuf,
    offload: bool,
    tso: bool,
) -> Result<RxChecksum, RxDrop> {
    let tcp_gso = tso && header.gso_type == VIRTIO_NET_HDR_GSO_TCPV4;
    if header.gso_type != VIRTIO_NET_HDR_GSO_NONE && !tcp_gso {
        return Err(RxDrop::Gso);
    }
    if tcp_gso && header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0 {
        // A GSO packet always leaves its checksum to the receiver: anything else is malformed.
        return Err(RxDrop::GsoMalformed);
    }
    if header.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        let (start, offset) = (header.csum_start as usize, header.csum_offset as usize);
        let data = packet.data();
        // The IPv4 header's own length, if the packet has one; the checksum must start past it.
        let ihl = match data.first() {
            Some(&b) if b >> 4 == 4 => (b & 0x0f) as usize * 4,
            _ => 20,
        };
        if start < ihl.max(20) || start + offset + 2 > data.len() {
            return Err(RxDrop::BadChecksumOffsets);
        }
        // The shapes the stack's UDP and TCP input can trust as partial: a whole (unfragmented) UDP
        // datagram or TCP segment whose checksum field is where its header says.
        let whole = start == ihl && u16::from_be_bytes([data[6], data[7]]) & 0x3fff == 0;
        let udp = whole && offset == 6 && start + 8 <= data.len() && data[9] == 17;
        let tcp = whole && offset == 16 && start + 20 <= data.len() && data[9] == 6;
        if offload && (udp || tcp) {
            return Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: start as u16,
                offset: offset as u16,
            }));
        }
        complete_checksum(packet, start, offset);
        return Ok(RxChecksum::Completed);
    }
    if offload && header.flags & VIRTIO_NET_HDR_F_DATA_VALID != 0 {
        return Ok(RxChecksum::Meta(ChecksumOffload::Valid));
    }
    Ok(RxChecksum::Meta(ChecksumOffload::None))
}

impl Link for TunLink {
    fn capabilities(&self) -> LinkCapabilities {
        self.caps
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut dropped = 0;
        for mut packet in batch.drain(..) {
            let mut header = VnetHeader::default();
            if let ChecksumOffload::Partial { start, offset } = packet.meta.checksum {
                if self.offload {
                    header.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
                    header.csum_start = start;
                    header.csum_offset = offset;
                    self.stats.tx_offloaded += 1;
                    if packet.meta.gso_size > 0 {
                        // TSO: the kernel cuts the segment; `hdr_len` covers the IP and TCP headers.
                        let data = packet.data();
                        let tcp_len = data
                            .get(start as usize + 12)
                            .map_or(20, |&b| (b >> 4) as u16 * 4);
                        header.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
                        header.gso_size = packet.meta.gso_size;
                        header.hdr_len = start + tcp_len;
                        self.stats.tx_tso += 1;
                    }
                } else {
                    complete_checksum(&mut packet, start as usize, offset as usize);
                    self.stats.tx_checksums_completed += 1;
                }
            }
            let header = header.emit();
            loop {
                match sys::write_packet(self.shared.fd.as_fd(), &header, packet.data()) {
                    Ok(_) => {
                        self.stats.tx_packets += 1;
                        self.stats.tx_bytes += packet.len() as u64;
                    }
                    Err(Errno::EINTR) => continue,
                    Err(Errno::EAGAIN) => {
                        self.stats.tx_drop_full += 1;
                        dropped += 1;
                    }
                    Err(_) => self.stats.tx_errors += 1,
                }
                break;
            }
            self.pool.free(packet);
        }
        self.publish();
        dropped
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
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
            let mut buf = match self.spare.take() {
                Some(buf) => buf,
                None => self.pool.alloc(self.rx_capacity),
            };
            // The window covers everything from the virtio header's place in the headroom to the end.
            buf.reset(HEADROOM - VNET_HEADER_LEN);
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
                    self.spare = Some(buf);
                    continue;
                }
                Err(e) => {
                    if e != Errno::EAGAIN {
                        self.stats.rx_errors += 1;
                    }
                    self.spare = Some(buf);
                    break;
                }
            };
            if n < VNET_HEADER_LEN {
                self.stats.rx_drop_truncated += 1;
                self.spare = Some(buf);
                continue;
            }
            let mut header = [0; VNET_HEADER_LEN];
            header.copy_from_slice(&buf.data()[..VNET_HEADER_LEN]);
            let header = VnetHeader::parse(&header);
            let tcp_gso = header.gso_type == VIRTIO_NET_HDR_GSO_TCPV4 && self.tso_rx;
            if header.gso_type != VIRTIO_NET_HDR_GSO_NONE && self.uso && !tcp_gso {
                let result = if n >= room + self.scratch.len() {
                    Err(None)
                } else {
                    let frame = Frame {
                        head: &buf.data()[VNET_HEADER_LEN..n.min(room)],
                        tail: &self.scratch[..n.saturating_sub(room)],
                    };
                    split_udp_gso(
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
                    Err(Some(reason)) => self.count_drop(reason),
                }
                self.spare = Some(buf);
                continue;
            }
            if tcp_gso && n > room {
                // A large TCP segment: into one buffer from the 64 KiB class, the one copy GRO costs.
                let len = n - VNET_HEADER_LEN;
                if n >= room + self.scratch.len() || len > MAX_MTU {
                    self.stats.rx_drop_oversize += 1;
                    self.spare = Some(buf);
                    continue;
                }
                let mut big = self.pool.alloc(len);
                big.extend_from_slice(&buf.data()[VNET_HEADER_LEN..room]);
                big.extend_from_slice(&self.scratch[..n - room]);
                self.spare = Some(buf);
                buf = big;
            } else if n >= room {
                // The kernel fills what fits and reports the whole length: either way, cut or not, it
                // is larger than anything this link's MTU lets in.
                self.stats.rx_drop_oversize += 1;
                self.spare = Some(buf);
                continue;
            } else {
                buf.truncate(n);
                buf.pull_front(VNET_HEADER_LEN);
            }
            if tcp_gso {
                self.stats.rx_tso_packets += 1;
            }
            match classify_rx(&header, &mut buf, self.offload, self.tso_rx) {
                Ok(state) => {
                    buf.meta.checksum = match state {
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
                    };
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += buf.len() as u64;
                    batch.push(buf);
                    got += 1;
                }
                Err(reason) => {
                    self.count_drop(reason);
                    self.spare = Some(buf);
                }
            }
        }
        self.publish();
        got
    }
}

impl TunLink {
    fn count_drop(&mut self, reason: RxDrop) {
        match reason {
            RxDrop::BadChecksumOffsets => self.stats.rx_drop_bad_checksum_offsets += 1,
            RxDrop::Gso => self.stats.rx_drop_gso += 1,
            RxDrop::GsoMalformed => self.stats.rx_drop_gso_malformed += 1,
        }
    }
}

/// A received packet in up to two pieces: the receive buffer, then the scratch area it spilled into.
struct Frame<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl Frame<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Copies `dst.len()` bytes from offset `from`; the caller keeps within `len()`.
    fn copy_to(&self, from: usize, dst: &mut [u8]) {
        let mut done = 0;
        if from < self.head.len() {
            let n = dst.len().min(self.head.len() - from);
            dst[..n].copy_from_slice(&self.head[from..from + n]);
            done = n;
        }
        if done < dst.len() {
            let at = from + done - self.head.len();
            let rest = dst.len() - done;
            dst[done..].copy_from_slice(&self.tail[at..at + rest]);
        }
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Splits a UDP GSO packet (`VIRTIO_NET_HDR_GSO_UDP_L4`: one IPv4 header, one UDP header, then the
/// payloads of several datagrams of `gso_size` bytes each, the last shorter) into those datagrams, as
/// the kernel's own segmentation would: each gets a copy of the IPv4 header with its own total length,
/// the next IP identifier and a new header checksum, and a UDP header with its own length and the
/// pseudo-header sum in the checksum field, marked [`ChecksumOffload::Partial`]. Returns how many
/// datagrams were queued on `out`; queues none if the packet does not add up.
fn split_udp_gso(
    h: &VnetHeader,
    frame: &Frame<'_>,
    mtu: usize,
    pool: &mut BufferPool,
    out: &mut VecDeque<PacketBuf>,
) -> Result<usize, RxDrop> {
    if h.gso_type != VIRTIO_NET_HDR_GSO_UDP_L4 {
        return Err(RxDrop::Gso);
    }
    let (head, len) = (frame.head, frame.len());
    if head.len() < 28 || head[0] >> 4 != 4 {
        return Err(RxDrop::GsoMalformed);
    }
    let ihl = (head[0] & 0x0f) as usize * 4;
    if ihl < 20 || ihl + 8 > head.len() {
        return Err(RxDrop::GsoMalformed);
    }
    if h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0
        || h.csum_start as usize != ihl
        || h.csum_offset != 6
    {
        return Err(RxDrop::BadChecksumOffsets);
    }
    let payload = len - ihl - 8;
    let size = h.gso_size as usize;
    if head[9] != 17
        || be16(head, 6) & 0x3fff != 0
        || be16(head, 2) as usize != len
        || be16(head, ihl + 4) as usize != len - ihl
        || size == 0
        || ihl + 8 + size > mtu
        || payload == 0
        || payload.div_ceil(size) > UDP_MAX_SEGMENTS
    {
        return Err(RxDrop::GsoMalformed);
    }
    let src = Ipv4Addr::new(head[12], head[13], head[14], head[15]);
    let dst = Ipv4Addr::new(head[16], head[17], head[18], head[19]);
    let ident = be16(head, 4);
    let segments = payload.div_ceil(size);
    for i in 0..segments {
        let at = i * size;
        let n = size.min(payload - at);
        let mut p = pool.alloc(ihl + 8 + n);
        let d = p.extend(ihl + 8 + n);
        d[..ihl + 8].copy_from_slice(&head[..ihl + 8]);
        d[2..4].copy_from_slice(&((ihl + 8 + n) as u16).to_be_bytes());
        d[4..6].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
        d[10..12].copy_from_slice(&[0, 0]);
        let sum = !checksum::fast(&d[..ihl]);
        d[10..12].copy_from_slice(&sum.to_be_bytes());
        d[ihl + 4..ihl + 6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, (8 + n) as u16);
        d[ihl + 6..ihl + 8].copy_from_slice(&pseudo.to_be_bytes());
        frame.copy_to(ihl + 8 + at, &mut d[ihl + 8..]);
        p.meta.checksum = ChecksumOffload::Partial {
            start: ihl as u16,
            offset: 6,
        };
        out.push_back(p);
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP datagram in an IPv4 packet from 10.7.0.1:5000 to 10.7.0.2:7, its checksum field holding
    /// the pseudo-header sum as a sender that offloads leaves it.
    fn partial_udp(payload: &[u8]) -> PacketBuf {
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

    fn needs_csum(start: u16, offset: u16) -> VnetHeader {
        VnetHeader {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            csum_start: start,
            csum_offset: offset,
            ..VnetHeader::default()
        }
    }

    #[test]
    fn tcp_gso_packets_are_taken_whole_only_with_tso_and_a_partial_checksum() {
        // A TCP segment larger than the MTU would be, as the kernel's TSO hands it over.
        let mut bytes = vec![0u8; 20 + 20 + 3000];
        bytes[0] = 0x45;
        let total = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        bytes[8] = 64;
        bytes[9] = 6;
        bytes[32] = 0x50;
        let mut gso = needs_csum(20, 16);
        gso.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
        gso.gso_size = 1448;
        let mut p = PacketBuf::from_slice(&bytes);
        assert_eq!(
            classify_rx(&gso, &mut p, true, true),
            Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: 20,
                offset: 16
            }))
        );
        assert_eq!(classify_rx(&gso, &mut p, true, false), Err(RxDrop::Gso));
        gso.flags = 0;
        assert_eq!(
            classify_rx(&gso, &mut p, true, true),
            Err(RxDrop::GsoMalformed)
        );
    }

    fn udp_checksum_verifies(p: &PacketBuf) -> bool {
        let d = p.data();
        let src = Ipv4Addr::new(d[12], d[13], d[14], d[15]);
        let dst = Ipv4Addr::new(d[16], d[17], d[18], d[19]);
        let pseudo = checksum::pseudo_header_sum(src, dst, 17, (d.len() - 20) as u16);
        checksum::add(pseudo, checksum::rfc1071(&d[20..])) == 0xffff
    }

    #[test]
    fn headers_round_trip() {
        let h = VnetHeader {
            flags: 3,
            gso_type: 5,
            hdr_len: 42,
            gso_size: 1400,
            csum_start: 20,
            csum_offset: 6,
        };
        assert_eq!(VnetHeader::parse(&h.emit()), h);
    }

    #[test]
    fn a_partial_udp_checksum_is_trusted_with_offload_and_completed_without() {
        let mut p = partial_udp(b"hello");
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, true, false),
            Ok(RxChecksum::Meta(ChecksumOffload::Partial {
                start: 20,
                offset: 6
            }))
        );
        assert!(!udp_checksum_verifies(&p));
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, false, false),
            Ok(RxChecksum::Completed)
        );
        assert!(udp_checksum_verifies(&p));
    }

    #[test]
    fn lying_checksum_offsets_are_dropped() {
        let len = partial_udp(b"hello").len() as u16;
        for (start, offset) in [
            (len, 0),
            (len - 1, 0),
            (20, len),
            (20, u16::MAX),
            (u16::MAX, u16::MAX),
            (10, 0), // inside the IP header
            (0, 6),
        ] {
            let mut p = partial_udp(b"hello");
            let before = p.data().to_vec();
            assert_eq!(
                classify_rx(&needs_csum(start, offset), &mut p, true, false),
                Err(RxDrop::BadChecksumOffsets),
                "start {start} offset {offset}"
            );
            assert_eq!(p.data(), &before[..], "nothing written");
        }
    }

    #[test]
    fn a_partial_checksum_of_another_shape_is_completed_by_the_link() {
        // In bounds but not the UDP layout the stack trusts (an offset of 4): the link completes the
        // sum where the header says, as a device would, and hands the packet on unmarked.
        let mut p = partial_udp(b"hello world");
        assert_eq!(
            classify_rx(&needs_csum(20, 4), &mut p, true, false),
            Ok(RxChecksum::Completed)
        );
        // A fragment is never trusted as partial either.
        let mut p = partial_udp(b"hello world");
        p.data_mut()[6] = 0x20; // more fragments
        assert_eq!(
            classify_rx(&needs_csum(20, 6), &mut p, true, false),
            Ok(RxChecksum::Completed)
        );
        // Nor is a packet too short to be an IPv4 packet, nor one with no packet at all.
        let mut p = PacketBuf::from_slice(&[0u8; 24]);
        assert_eq!(
            classify_rx(&needs_csum(20, 0), &mut p, true, false),
            Ok(RxChecksum::Completed)
        );
        let mut p = PacketBuf::from_slice(&[]);
        assert_eq!(
            classify_rx(&needs_csum(0, 0), &mut p, true, false),
            Err(RxDrop::BadChecksumOffsets)
        );
    }

    #[test]
    fn gso_packets_are_dropped_whatever_their_size() {
        for (gso_type, gso_size) in [
            (5, 0),
            (5, 1400),
            (1, 1448),
            (3, 0),
            (0x80 | 5, 100),
            (9, 1),
        ] {
            let mut p = partial_udp(&[7; 3000]);
            let h = VnetHeader {
                gso_type,
                gso_size,
                ..needs_csum(20, 6)
            };
            assert_eq!(classify_rx(&h, &mut p, true, false), Err(RxDrop::Gso));
        }
    }

    #[test]
    fn data_valid_counts_only_with_offload() {
        let h = VnetHeader {
            flags: VIRTIO_NET_HDR_F_DATA_VALID,
            ..VnetHeader::default()
        };
        let mut p = partial_udp(b"x");
        assert_eq!(
            classify_rx(&h, &mut p, true, false),
            Ok(RxChecksum::Meta(ChecksumOffload::Valid))
        );
        assert_eq!(
            classify_rx(&h, &mut p, false, false),
            Ok(RxChecksum::Meta(ChecksumOffload::None))
        );
        assert_eq!(
            classify_rx(&VnetHeader::default(), &mut p, true, false),
            Ok(RxChecksum::Meta(ChecksumOffload::None))
        );
    }

    #[test]
    fn random_headers_never_panic() {
        let mut rng = crate::rng::Rng::new(5);
        for _ in 0..20_000 {
            let mut raw = [0u8; VNET_HEADER_LEN];
            for b in &mut raw {
                *b = rng.below(256) as u8;
            }
            // Keep the flags and GSO type interesting: mostly no GSO, often NEEDS_CSUM.
            raw[1] = if rng.chance(0.8) { 0 } else { raw[1] };
            let mut h = VnetHeader::parse(&raw);
            if rng.chance(0.7) {
                h.csum_start = rng.below(80) as u16;
                h.csum_offset = rng.below(40) as u16;
            }
            let len = rng.below(64) as usize;
            let mut p = partial_udp(&vec![1; len]);
            p.truncate(rng.below(p.len() as u64 + 1) as usize);
            let _ = classify_rx(&h, &mut p, rng.chance(0.5), rng.chance(0.5));
        }
    }

    /// A link over one end of a datagram socket pair, which keeps packet boundaries like a TUN
    /// descriptor: the test plays the kernel on the other end, with headers it makes up.
    fn fake_kernel(offload: bool) -> (TunLink, std::os::unix::net::UnixDatagram) {
        let (ours, theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs.set_nonblocking(true).unwrap();
        let link = TunLink::over(OwnedFd::from(ours), "fake0".into(), 1500, offload);
        (link, theirs)
    }

    fn framed(header: &VnetHeader, packet: &[u8]) -> Vec<u8> {
        let mut v = header.emit().to_vec();
        v.extend_from_slice(packet);
        v
    }

    #[test]
    fn receive_reads_a_batch_and_refuses_bad_frames() {
        let (mut link, kernel) = fake_kernel(true);
        let good = partial_udp(b"hello, fastpath");
        let plain = VnetHeader::default();
        kernel
            .send(&framed(&needs_csum(20, 6), good.data()))
            .unwrap();
        kernel.send(&[1, 2, 3, 4, 5]).unwrap(); // shorter than the virtio header
        kernel.send(&framed(&plain, &[0x45; 3000])).unwrap(); // past the buffer
        kernel
            .send(&framed(&needs_csum(20, 60), good.data()))
            .unwrap(); // offset outside
        let gso = VnetHeader {
            gso_type: 5,
            gso_size: 0,
            ..plain
        };
        kernel.send(&framed(&gso, good.data())).unwrap();
        let valid = VnetHeader {
            flags: VIRTIO_NET_HDR_F_DATA_VALID,
            ..plain
        };
        for _ in 0..3 {
            kernel.send(&framed(&valid, good.data())).unwrap();
        }
        kernel.send(&framed(&plain, good.data())).unwrap();

        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 3), 3);
        assert_eq!(link.receive(&mut batch, 32), 2);
        assert_eq!(link.receive(&mut batch, 32), 0);
        let states: Vec<_> = batch.iter().map(|p| p.meta.checksum).collect();
        assert_eq!(
            states,
            [
                ChecksumOffload::Partial {
                    start: 20,
                    offset: 6
                },
                ChecksumOffload::Valid,
                ChecksumOffload::Valid,
                ChecksumOffload::Valid,
                ChecksumOffload::None,
            ]
        );
        for p in &batch {
            assert_eq!(p.data(), good.data());
            assert_eq!(
                p.headroom(),
                HEADROOM,
                "the packet sits where the stack expects it"
            );
        }
        let s = link.stats();
        assert_eq!(
            (s.rx_packets, s.rx_partial, s.rx_data_valid),
            (5, 1, 3),
            "{s:?}"
        );
        assert_eq!(s.rx_drop_truncated, 1);
        assert_eq!(s.rx_drop_oversize, 1);
        assert_eq!(s.rx_drop_bad_checksum_offsets, 1);
        assert_eq!(s.rx_drop_gso, 1);
        assert_eq!(s.rx_dropped(), 4);
        assert_eq!(link.handle().stats(), s, "published to handles");
    }

    #[test]
    fn transmit_asks_the_kernel_to_finish_partial_checksums_only_with_offload() {
        for offload in [true, false] {
            let (mut link, kernel) = fake_kernel(offload);
            let mut p = partial_udp(b"out we go");
            p.meta.checksum = ChecksumOffload::Partial {
                start: 20,
                offset: 6,
            };
            let sent = p.data().to_vec();
            let mut batch = vec![p, partial_udp(b"plain")];
            assert_eq!(link.transmit(&mut batch), 0);
            assert!(batch.is_empty());
            let mut frame = [0u8; 2048];
            let n = kernel.recv(&mut frame).unwrap();
            let header = VnetHeader::parse(frame[..VNET_HEADER_LEN].try_into().unwrap());
            let mut got = PacketBuf::from_slice(&frame[VNET_HEADER_LEN..n]);
            if offload {
                assert_eq!(header, needs_csum(20, 6));
                assert_eq!(got.data(), &sent[..], "the packet as the stack left it");
                complete_checksum(&mut got, 20, 6);
            } else {
                assert_eq!(header, VnetHeader::default());
            }
            assert!(udp_checksum_verifies(&got));
            let n = kernel.recv(&mut frame).unwrap();
            assert_eq!(&frame[..VNET_HEADER_LEN], &VnetHeader::default().emit());
            assert_eq!(n, VNET_HEADER_LEN + 20 + 8 + 5);
            let s = link.stats();
            assert_eq!(s.tx_packets, 2);
            assert_eq!(s.tx_offloaded, offload as u64);
            assert_eq!(s.tx_checksums_completed, !offload as u64);
        }
    }

    #[test]
    fn wait_wakes_when_a_packet_comes() {
        let (link, kernel) = fake_kernel(true);
        assert!(!link.wait(Some(Duration::from_millis(1))).unwrap());
        kernel
            .send(&framed(&VnetHeader::default(), &[0x45; 40]))
            .unwrap();
        assert!(link.handle().wait(Some(Duration::from_secs(5))).unwrap());
    }

    #[test]
    fn the_descriptor_lent_out_is_the_one_the_link_reads() {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let (mut link, kernel) = fake_kernel(true);
        let handle = link.handle();
        assert_eq!(link.as_raw_fd(), handle.as_raw_fd());
        assert_eq!(link.as_fd().as_raw_fd(), link.as_raw_fd());
        let flags = OFlag::from_bits_truncate(fcntl(link.as_fd(), FcntlArg::F_GETFL).unwrap());
        assert!(flags.contains(OFlag::O_NONBLOCK), "{flags:?}");
        fn readable(fd: BorrowedFd<'_>) -> bool {
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(100u8)).unwrap() == 1
                && fds[0].revents().unwrap().contains(PollFlags::POLLIN)
        }
        assert!(!readable(link.as_fd()), "nothing sent yet");
        kernel
            .send(&framed(&VnetHeader::default(), partial_udp(b"ping").data()))
            .unwrap();
        assert!(readable(link.as_fd()));
        assert!(readable(handle.as_fd()));
        // What made it readable is what the link receives; then it is quiet again.
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 8), 1);
        assert_eq!(batch[0].data(), partial_udp(b"ping").data());
        assert!(!readable(link.as_fd()));
    }

    fn gso_header(size: u16) -> VnetHeader {
        VnetHeader {
            gso_type: VIRTIO_NET_HDR_GSO_UDP_L4,
            gso_size: size,
            hdr_len: 28,
            ..needs_csum(20, 6)
        }
    }

    #[test]
    fn uso_splits_a_gso_packet_into_its_datagrams() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let payload: Vec<u8> = (0..3500u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut sp = partial_udp(&payload);
        sp.data_mut()[4..6].copy_from_slice(&0xfffeu16.to_be_bytes()); // IP identifier wraps
                                                                       // 12 + 3528 bytes: past the 1500-byte link's receive buffer, so it spills into the scratch area.
        kernel.send(&framed(&gso_header(1000), sp.data())).unwrap();
        kernel
            .send(&framed(
                &VnetHeader::default(),
                partial_udp(b"after").data(),
            ))
            .unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 3), 3, "a batch holds at most max");
        assert_eq!(link.receive(&mut batch, 32), 2);
        let sizes: Vec<usize> = batch.iter().map(|p| p.len()).collect();
        assert_eq!(sizes, [1028, 1028, 1028, 528, 33]);
        for (i, p) in batch[..4].iter().enumerate() {
            let d = p.data();
            assert_eq!(be16(d, 2) as usize, d.len(), "IP total length");
            assert_eq!(
                be16(d, 4),
                0xfffeu16.wrapping_add(i as u16),
                "IP identifier"
            );
            assert_eq!(checksum::rfc1071(&d[..20]), 0xffff, "IP header checksum");
            assert_eq!(be16(d, 24) as usize, d.len() - 20, "UDP length");
            assert_eq!(&d[20..24], &sp.data()[20..24], "ports");
            assert_eq!(&d[28..], &payload[i * 1000..(i * 1000 + 1000).min(3500)]);
            assert_eq!(
                p.meta.checksum,
                ChecksumOffload::Partial {
                    start: 20,
                    offset: 6
                }
            );
            let mut whole = PacketBuf::from_slice(d);
            complete_checksum(&mut whole, 20, 6);
            assert!(udp_checksum_verifies(&whole), "segment {i}");
        }
        let s = link.stats();
        assert_eq!((s.rx_gso_packets, s.rx_gso_segments), (1, 4));
        assert_eq!((s.rx_packets, s.rx_partial, s.rx_dropped()), (5, 4, 0));
    }

    #[test]
    fn malformed_gso_packets_are_dropped_and_counted() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let sp = partial_udp(&[9; 3000]);
        let mut fragment = partial_udp(&[9; 300]);
        fragment.data_mut()[6] = 0x20;
        let mut short_ip = partial_udp(&[9; 300]);
        short_ip.data_mut()[2..4].copy_from_slice(&200u16.to_be_bytes());
        let mut long_udp = partial_udp(&[9; 300]);
        long_udp.data_mut()[24..26].copy_from_slice(&400u16.to_be_bytes());
        let malformed = [
            framed(&gso_header(0), sp.data()),          // a segment size of 0
            framed(&gso_header(1473), sp.data()),       // segments past the MTU
            framed(&gso_header(10), sp.data()),         // 300 segments
            framed(&gso_header(100), fragment.data()),  // a fragment
            framed(&gso_header(100), short_ip.data()),  // IP length disagrees
            framed(&gso_header(100), long_udp.data()),  // UDP length disagrees
            framed(&gso_header(100), &sp.data()[..25]), // no UDP header
        ];
        for frame in &malformed {
            kernel.send(frame).unwrap();
        }
        let no_csum = VnetHeader {
            flags: 0,
            ..gso_header(1000)
        };
        kernel.send(&framed(&no_csum, sp.data())).unwrap();
        let tcp = VnetHeader {
            gso_type: 1,
            ..gso_header(1000)
        };
        kernel.send(&framed(&tcp, sp.data())).unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 64), 0);
        let s = link.stats();
        assert_eq!(s.rx_drop_gso_malformed, malformed.len() as u64, "{s:?}");
        assert_eq!(s.rx_drop_bad_checksum_offsets, 1);
        assert_eq!(s.rx_drop_gso, 1);
        assert_eq!(s.rx_gso_packets, 0);

        // Without USO, a GSO packet is dropped whatever it holds.
        let (mut link, kernel) = fake_kernel(true);
        kernel
            .send(&framed(&gso_header(100), partial_udp(&[1; 300]).data()))
            .unwrap();
        assert_eq!(link.receive(&mut batch, 64), 0);
        assert_eq!(link.stats().rx_drop_gso, 1);
    }

    #[test]
    fn random_frames_through_a_uso_link_never_panic() {
        let (mut link, kernel) = fake_kernel(true);
        link.enable_uso();
        let mut rng = crate::rng::Rng::new(11);
        let mut batch = Vec::new();
        for round in 0..3000 {
            let len = rng.below(4000) as usize;
            let mut p = partial_udp(&vec![3; len]).data().to_vec();
            // Damage a few bytes of the headers, sometimes.
            for _ in 0..rng.below(3) {
                let at = rng.below(28) as usize;
                p[at] = rng.below(256) as u8;
            }
            p.truncate(rng.below(p.len() as u64 + 1) as usize + rng.below(2) as usize * p.len());
            let h = VnetHeader {
                flags: rng.below(4) as u8,
                gso_type: [0, 5, 5, 1, 0x85][rng.below(5) as usize],
                hdr_len: rng.below(100) as u16,
                gso_size: [0, 1, 8, 100, 1000, 1472, 1473, 65535][rng.below(8) as usize],
                csum_start: [20, 20, 0, 24, 60, 65535][rng.below(6) as usize],
                csum_offset: [6, 6, 0, 4, 65535][rng.below(5) as usize],
            };
            kernel.send(&framed(&h, &p)).unwrap();
            if round % 8 == 7 {
                link.receive(&mut batch, 64);
                batch.clear();
            }
        }
        while link.receive(&mut batch, 64) > 0 {
            batch.clear();
        }
        let s = link.stats();
        assert!(s.rx_gso_packets > 0 && s.rx_drop_gso_malformed > 0, "{s:?}");
    }
}
