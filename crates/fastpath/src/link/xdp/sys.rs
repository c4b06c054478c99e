//! The operating-system interface of the AF_XDP link: its only `unsafe` code.
//!
//! What is here: the AF_XDP socket and its options (`XDP_UMEM_REG`, the ring sizes,
//! `XDP_MMAP_OFFSETS`, `XDP_STATISTICS`), the UMEM (an anonymous mapping the kernel copies frames
//! into and out of) and the four rings (shared mappings of the socket), `bind`, the `sendto` that
//! kicks transmission, the interface ioctls (index, hardware address, MTU, ethtool's transmit
//! checksum), and `bpf(2)` for the XSKMAP, the XDP program and the link that attaches it.
//!
//! The rings and the UMEM are memory the kernel writes while we read it. They are never seen as Rust
//! references wider than what we own at the moment: a ring slot is read or written through a raw
//! pointer with volatile accesses, indices through atomics (the kernel's `smp_load_acquire` and
//! `smp_store_release` pair with our `Acquire` and `Release`), and a UMEM chunk becomes a slice only
//! while it is ours (taken from the RX or completion ring, not yet handed back), bounds checked
//! against the mapping first.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{AddressFamily, SockFlag, SockType};

use crate::link::os::{with_context, IfReq};

pub(super) use libc::xdp_desc as Desc;
pub(super) use libc::xdp_statistics as KernelStats;

// ---------------------------------------------------------------------------------------------
// Interface ioctls.

/// A request for interface `name`, which must be named.
fn ifreq(name: &str) -> io::Result<IfReq> {
    if name.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an interface name is needed",
        ));
    }
    IfReq::new(name)
}

/// A datagram socket of the calling thread's namespace, for the interface ioctls.
fn ioctl_socket() -> io::Result<OwnedFd> {
    nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| with_context(e, "socket for interface ioctls"))
}

/// One `SIOCG*`/`SIOCS*` ioctl on interface `name` of the calling thread's namespace; returns the
/// request as the kernel left it.
fn interface_ioctl(name: &str, request: libc::c_ulong, mut req: IfReq) -> io::Result<IfReq> {
    let sock = ioctl_socket()?;
    // SAFETY: `sock` is an open socket; each request used here (SIOCGIFINDEX, SIOCGIFHWADDR,
    // SIOCGIFMTU, SIOCETHTOOL) reads and may write a `struct ifreq`, and `req` is a live, initialized
    // value at least that large, borrowed mutably for the call. SIOCETHTOOL's pointer in the union is
    // the caller's (see `disable_tx_checksum`).
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request, &mut req as *mut IfReq) };
    Errno::result(rc).map_err(|e| with_context(e, &format!("ioctl {request:#x} on {name}")))?;
    Ok(req)
}

/// The index of interface `name` (SIOCGIFINDEX).
pub(super) fn if_index(name: &str) -> io::Result<u32> {
    let req = interface_ioctl(name, libc::SIOCGIFINDEX, ifreq(name)?)?;
    let index = i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]);
    u32::try_from(index).map_err(|_| io::ErrorKind::InvalidData.into())
}

/// The hardware (MAC) address of interface `name` (SIOCGIFHWADDR): the `sa_data` of a `sockaddr`.
pub(super) fn hardware_address(name: &str) -> io::Result<[u8; 6]> {
    let req = interface_ioctl(name, libc::SIOCGIFHWADDR, ifreq(name)?)?;
    let family = u16::from_ne_bytes([req.data[0], req.data[1]]);
    if family != libc::ARPHRD_ETHER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not an Ethernet interface (hardware type {family})"),
        ));
    }
    let mut mac = [0; 6];
    mac.copy_from_slice(&req.data[2..8]);
    Ok(mac)
}

/// The MTU of interface `name` (SIOCGIFMTU).
pub(super) fn mtu(name: &str) -> io::Result<usize> {
    let req = interface_ioctl(name, libc::SIOCGIFMTU, ifreq(name)?)?;
    let mtu = i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]);
    usize::try_from(mtu).map_err(|_| io::ErrorKind::InvalidData.into())
}

/// `struct ethtool_value`: a command and its value.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `ETHTOOL_STXCSUM`: set the transmit checksum offload.
const ETHTOOL_STXCSUM: u32 = 0x17;

/// Turns off transmit checksum offload of interface `name` (`ethtool -K NAME tx off`).
pub(super) fn disable_tx_checksum(name: &str) -> io::Result<()> {
    let mut value = EthtoolValue {
        cmd: ETHTOOL_STXCSUM,
        data: 0,
    };
    let mut req = ifreq(name)?;
    let ptr = &mut value as *mut EthtoolValue as u64;
    req.data[..8].copy_from_slice(&ptr.to_ne_bytes());
    // `value` is alive across the ioctl, which reads it through the pointer in `ifr_data`.
    interface_ioctl(name, libc::SIOCETHTOOL, req).map(drop)
}

// ---------------------------------------------------------------------------------------------
// The UMEM.

/// The UMEM: `len` bytes of anonymous memory, page aligned, registered with the socket and cut into
/// chunks. Unmapped when dropped (the kernel keeps its own pin on the pages for as long as a socket
/// uses them).
#[derive(Debug)]
pub(super) struct Umem {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: `Umem` owns its mapping outright; nothing else in the process refers to it, so it may move
// to another thread (the namespace thread creates it, the link's user uses it).
unsafe impl Send for Umem {}

impl Umem {
    /// Maps `len` bytes (a multiple of the page size), populated so the first frames do not fault.
    pub(super) fn new(len: usize) -> io::Result<Umem> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches no
        // existing memory; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::new(
                io::Error::last_os_error().kind(),
                format!(
                    "mapping a UMEM of {len} bytes: {}",
                    io::Error::last_os_error()
                ),
            ));
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or(io::ErrorKind::OutOfMemory)?;
        Ok(Umem { base, len })
    }

    /// The frame at `addr`, `len` bytes, if it lies inside the UMEM. The caller owns that chunk (it
    /// came off the RX ring and has not gone back to the fill ring), so the kernel does not write it.
    pub(super) fn frame(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let start = usize::try_from(addr).ok()?;
        let end = start.checked_add(len as usize)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `start..end` lies inside the mapping (checked above); the chunk is ours until it
        // goes back to the fill ring, which needs `&mut self` of the link, so nothing writes it while
        // the slice lives.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(start), end - start) })
    }

    /// The frame at `addr` for writing `len` bytes, if it lies inside the UMEM. The caller owns that
    /// chunk (a free transmit chunk: not on the TX ring, or back from the completion ring).
    pub(super) fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `start..end` lies inside the mapping (checked above); the chunk is a free transmit
        // chunk the kernel neither reads nor writes until its descriptor is posted, after the slice
        // is gone; `&mut self` keeps any other slice of the UMEM from living meanwhile.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), end - start) })
    }

    fn addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are the mapping `new` made, unmapped once; no slice of it outlives
        // `self` (they borrow it).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

// ---------------------------------------------------------------------------------------------
// The rings.

/// One ring mapped from the socket: a producer index, a consumer index and `size` (a power of two)
/// slots of `T` (`u64` chunk addresses for the fill and completion rings, [`Desc`] for RX and TX).
#[derive(Debug)]
struct RingMap<T> {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    slots: NonNull<T>,
    mask: u32,
}

// SAFETY: the mapping is owned by this value alone (the kernel's side aside, which is synchronized
// through the atomics), so it may move to another thread.
unsafe impl<T: Send> Send for RingMap<T> {}

impl<T: Copy> RingMap<T> {
    /// Maps the ring of `size` slots at page offset `pgoff` of socket `fd`, laid out as `off` says.
    fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<RingMap<T>> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a shared mapping of the socket's ring at the offset the kernel defines for it; the
        // kernel checks the length against the ring it allocated. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("mapping an AF_XDP ring: {err}"),
            ));
        }
        let map = NonNull::new(ptr.cast::<u8>()).ok_or(io::ErrorKind::OutOfMemory)?;
        let at = |offset: u64| -> io::Result<NonNull<u8>> {
            if offset as usize >= map_len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "an AF_XDP ring offset past its mapping",
                ));
            }
            // SAFETY: `offset` is inside the mapping (checked).
            Ok(unsafe { map.add(offset as usize) })
        };
        let ring = RingMap {
            map,
            map_len,
            producer: at(off.producer)?.cast(),
            consumer: at(off.consumer)?.cast(),
            slots: at(off.desc)?.cast(),
            mask: size - 1,
        };
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the producer index is an aligned `u32` inside the mapping, which lives as long as
        // `self`; the kernel and we access it only atomically.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// The slot for index `i` (taken modulo the size, so always inside the ring).
    fn slot(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask` is below the ring's size, and the mapping holds `size` slots from
        // `slots` on.
        unsafe { self.slots.as_ptr().add((i & self.mask) as usize) }
    }
}

impl<T> Drop for RingMap<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping `map` made, unmapped once; the references handed out borrow `self`.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// A ring we fill and the kernel empties: the fill ring and the TX ring.
#[derive(Debug)]
pub(super) struct Producer<T> {
    ring: RingMap<T>,
    /// Our producer index (published by [`Producer::submit`]).
    head: u32,
    /// The consumer index as last read, plus the ring's size: `head` may run up to it.
    limit: u32,
}

impl<T: Copy> Producer<T> {
    fn new(ring: RingMap<T>) -> Producer<T> {
        let head = ring.producer().load(Ordering::Relaxed);
        let limit = ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(ring.mask + 1);
        Producer { ring, head, limit }
    }

    /// How many slots are free, reading the kernel's consumer index again if fewer than `want`.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let free = self.limit.wrapping_sub(self.head);
        if free >= want {
            return free;
        }
        let size = self.ring.mask + 1;
        self.limit = self
            .ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(size);
        self.limit.wrapping_sub(self.head)
    }

    /// Writes `item` into the `i`-th free slot (not yet visible to the kernel). `i` below what
    /// [`Producer::free`] returned.
    pub(super) fn write(&mut self, i: u32, item: T) {
        debug_assert!(i < self.limit.wrapping_sub(self.head));
        // SAFETY: the slot is inside the ring, and free (between our producer index and the
        // kernel's consumer index plus the size), so the kernel does not read it until `submit`.
        unsafe {
            self.ring
                .slot(self.head.wrapping_add(i))
                .write_volatile(item)
        };
    }

    /// Hands the first `n` written slots to the kernel.
    pub(super) fn submit(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
        self.ring.producer().store(self.head, Ordering::Release);
    }

    /// Slots submitted and not yet consumed by the kernel.
    pub(super) fn outstanding(&self) -> u32 {
        self.head
            .wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }
}

/// A ring the kernel fills and we empty: the RX ring and the completion ring.
#[derive(Debug)]
pub(super) struct Consumer<T> {
    ring: RingMap<T>,
    /// Our consumer index (published by [`Consumer::release`]).
    tail: u32,
    /// The kernel's producer index as last read.
    limit: u32,
}

impl<T: Copy> Consumer<T> {
    fn new(ring: RingMap<T>) -> Consumer<T> {
        let tail = ring.consumer().load(Ordering::Relaxed);
        Consumer {
            limit: tail,
            ring,
            tail,
        }
    }

    /// How many entries are ready, reading the kernel's producer index again if fewer than `want`.
    pub(super) fn available(&mut self, want: u32) -> u32 {
        // A kernel claiming more than the ring holds is believed only up to the ring's size.
        let size = self.ring.mask + 1;
        let ready = self.limit.wrapping_sub(self.tail).min(size);
        if ready >= want {
            return ready;
        }
        self.limit = self.ring.producer().load(Ordering::Acquire);
        self.limit.wrapping_sub(self.tail).min(size)
    }

    /// The `i`-th ready entry. `i` below what [`Consumer::available`] returned.
    pub(super) fn read(&self, i: u32) -> T {
        // SAFETY: the slot is inside the ring and ready (between our consumer index and the
        // kernel's producer index, read with `Acquire`), so the kernel does not write it until
        // `release`.
        unsafe { self.ring.slot(self.tail.wrapping_add(i)).read_volatile() }
    }

    /// Gives the first `n` ready slots back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        self.tail = self.tail.wrapping_add(n);
        self.ring.consumer().store(self.tail, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------------
// The socket.

/// What [`Socket::open`] asks for.
pub(super) struct SocketParams {
    pub ifindex: u32,
    pub queue: u32,
    pub chunk_size: u32,
    pub chunks: u32,
    pub rx_size: u32,
    pub tx_size: u32,
    pub fill_size: u32,
    pub completion_size: u32,
    /// `XDP_ZEROCOPY` (else `XDP_COPY`).
    pub zero_copy: bool,
    /// `XDP_USE_SG`: frames may span several chunks.
    pub multi_buffer: bool,
    /// Ask for [`TX_METADATA_LEN`] bytes of transmit metadata in front of each transmit
    /// descriptor's frame (`XDP_UMEM_TX_METADATA_LEN`, Linux 6.8), for checksum offload.
    pub tx_metadata: bool,
    /// With `tx_metadata`: `XDP_UMEM_TX_SW_CSUM`, the kernel computes an offloaded checksum itself
    /// in copy mode instead of leaving it to the device.
    pub kernel_software_checksum: bool,
}

/// Bytes of transmit metadata in front of a frame: `struct xsk_tx_metadata` (a 64-bit `flags`,
/// then the request's `csum_start` and `csum_offset`, 16-bit, and since Linux 6.15 a 64-bit launch
/// time), 24 bytes, a multiple of 8 as the kernel requires.
pub(super) const TX_METADATA_LEN: u32 = 24;

/// Writes the transmit metadata asking for checksum offload into `meta` (the
/// [`TX_METADATA_LEN`] bytes in front of a frame): the device (or in copy mode the kernel) sums
/// from `start` (counted from the frame's first byte) to the end and stores the result at
/// `start + offset`.
pub(super) fn write_checksum_request(meta: &mut [u8], start: u16, offset: u16) {
    meta.fill(0);
    meta[..8].copy_from_slice(&u64::from(libc::XDP_TXMD_FLAGS_CHECKSUM).to_ne_bytes());
    meta[8..10].copy_from_slice(&start.to_ne_bytes());
    meta[10..12].copy_from_slice(&offset.to_ne_bytes());
}

/// An AF_XDP socket with its UMEM and rings, bound to a queue.
#[derive(Debug)]
pub(super) struct Socket {
    pub rx: Consumer<Desc>,
    pub tx: Producer<Desc>,
    pub fill: Producer<u64>,
    pub completion: Consumer<u64>,
    /// After the rings: the socket closes once they are unmapped (and every handle is gone).
    pub fd: Arc<OwnedFd>,
    /// Last: unmapped after the socket is closed.
    pub umem: Umem,
    /// The UMEM was registered with transmit metadata ([`SocketParams::tx_metadata`] asked and
    /// the kernel has it).
    pub tx_metadata: bool,
}

fn setsockopt<T>(fd: BorrowedFd<'_>, name: libc::c_int, value: &T, what: &str) -> io::Result<()> {
    // SAFETY: `value` is a live, initialized `T` of the size passed, which the kernel reads for the
    // SOL_XDP option `name` (each caller passes the type that option takes).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    Errno::result(rc)
        .map(drop)
        .map_err(|e| with_context(e, what))
}

/// `getsockopt(SOL_XDP, name)` into a zeroed `T`; returns it and the length the kernel wrote.
fn getsockopt<T: Default>(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<(T, usize)> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, a live `T` of that size, and the
    // length it wrote into `len`; `T` is a plain C struct for which any bytes are valid.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    Errno::result(rc).map_err(|e| with_context(e, &format!("getsockopt(SOL_XDP, {name})")))?;
    Ok((value, len as usize))
}

/// `xdp_mmap_offsets` with a `Default` (libc's has none).
#[derive(Default)]
#[repr(C)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[derive(Default, Clone, Copy)]
#[repr(C)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

impl RingOffset {
    fn libc(self) -> libc::xdp_ring_offset {
        libc::xdp_ring_offset {
            producer: self.producer,
            consumer: self.consumer,
            desc: self.desc,
            flags: self.flags,
        }
    }
}

/// `xdp_statistics` with a `Default`.
#[derive(Default)]
#[repr(C)]
struct Statistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

impl Socket {
    /// Creates the socket in the calling thread's namespace, registers a new UMEM, sizes and maps
    /// the rings, and binds to `params.queue` of `params.ifindex`.
    pub(super) fn open(params: &SocketParams) -> io::Result<Socket> {
        // SAFETY: socket(2) with constant arguments; the result is checked, then owned.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("creating an AF_XDP socket: {err}"),
            ));
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = params.chunk_size as usize * params.chunks as usize;
        let umem = Umem::new(len)?;
        let mut reg = libc::xdp_umem_reg {
            addr: umem.addr(),
            len: len as u64,
            chunk_size: params.chunk_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let b = fd.as_fd();
        let mut tx_metadata = false;
        if params.tx_metadata {
            let mut with = reg;
            with.flags = libc::XDP_UMEM_TX_METADATA_LEN;
            if params.kernel_software_checksum {
                with.flags |= libc::XDP_UMEM_TX_SW_CSUM;
            }
            with.tx_metadata_len = TX_METADATA_LEN;
            // A kernel older than 6.8 refuses the flag (EINVAL): registered without.
            tx_metadata = setsockopt(b, libc::XDP_UMEM_REG, &with, "XDP_UMEM_REG").is_ok();
        }
        if !tx_metadata {
            reg.flags = 0;
            setsockopt(b, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        }
        setsockopt(
            b,
            libc::XDP_UMEM_FILL_RING,
            &params.fill_size,
            "fill ring size",
        )?;
        setsockopt(
            b,
            libc::XDP_UMEM_COMPLETION_RING,
            &params.completion_size,
            "completion ring size",
        )?;
        setsockopt(b, libc::XDP_RX_RING, &params.rx_size, "RX ring size")?;
        setsockopt(b, libc::XDP_TX_RING, &params.tx_size, "TX ring size")?;
        let (off, got) = getsockopt::<MmapOffsets>(b, libc::XDP_MMAP_OFFSETS)?;
        if got < std::mem::size_of::<MmapOffsets>() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "XDP_MMAP_OFFSETS without ring flags (a kernel older than 5.4)",
            ));
        }
        let rx = RingMap::map(
            b,
            libc::XDP_PGOFF_RX_RING as u64,
            &off.rx.libc(),
            params.rx_size,
        )?;
        let tx = RingMap::map(
            b,
            libc::XDP_PGOFF_TX_RING as u64,
            &off.tx.libc(),
            params.tx_size,
        )?;
        let fill = RingMap::map(
            b,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            &off.fr.libc(),
            params.fill_size,
        )?;
        let completion = RingMap::map(
            b,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            &off.cr.libc(),
            params.completion_size,
        )?;
        let mut flags = if params.zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
        if params.multi_buffer {
            flags |= libc::XDP_USE_SG;
        }
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: params.ifindex,
            sxdp_queue_id: params.queue,
            sxdp_shared_umem_fd: 0,
        };
        // A socket of the queue closed just before leaves it bound until the kernel's deferred
        // release of its UMEM runs (`EBUSY` meanwhile): tried again for up to a second.
        let mut tries = 0;
        let rc = loop {
            // SAFETY: bind(2) reads `size_of::<sockaddr_xdp>()` bytes from `addr`, a live,
            // initialized value.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if rc == 0 || Errno::last() != Errno::EBUSY || tries == 100 {
                break rc;
            }
            tries += 1;
            std::thread::sleep(Duration::from_millis(10));
        };
        Errno::result(rc).map_err(|e| {
            with_context(
                e,
                &format!(
                    "binding the AF_XDP socket to queue {} ({})",
                    params.queue,
                    if params.zero_copy {
                        "zero-copy"
                    } else {
                        "copy"
                    }
                ),
            )
        })?;
        Ok(Socket {
            rx: Consumer::new(rx),
            tx: Producer::new(tx),
            fill: Producer::new(fill),
            completion: Consumer::new(completion),
            fd: Arc::new(fd),
            umem,
            tx_metadata,
        })
    }
}

/// The kernel's counters of socket `fd` (`XDP_STATISTICS`); the fields a kernel too old to have
/// them left zero.
pub(super) fn statistics(fd: BorrowedFd<'_>) -> io::Result<KernelStats> {
    let (s, _) = getsockopt::<Statistics>(fd, libc::XDP_STATISTICS)?;
    Ok(KernelStats {
        rx_dropped: s.rx_dropped,
        rx_invalid_descs: s.rx_invalid_descs,
        tx_invalid_descs: s.tx_invalid_descs,
        rx_ring_full: s.rx_ring_full,
        rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
        tx_ring_empty_descs: s.tx_ring_empty_descs,
    })
}

/// Asks the kernel to send what the TX ring holds (`sendto` with no data, `MSG_DONTWAIT`). In copy
/// mode the kernel sends in that call, a bounded batch at a time (`EAGAIN` when it stopped with
/// more left).
pub(super) fn kick(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: sendto(2) with no buffer and no address: the kernel reads no memory of ours.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    Errno::result(rc).map(drop)
}

/// Waits until `fd` (or `also`) is readable or `timeout` passes (`None`: for ever). True when
/// readable; false on timeout or when a signal interrupted the wait.
pub(super) fn wait_readable(
    fd: BorrowedFd<'_>,
    also: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let timeout = match timeout {
        None => PollTimeout::NONE,
        // Round up, so a short positive timeout does not become a busy poll.
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    let mut fds = [
        PollFd::new(fd, PollFlags::POLLIN),
        PollFd::new(also.unwrap_or(fd), PollFlags::POLLIN),
    ];
    let n = if also.is_some() { 2 } else { 1 };
    match nix::poll::poll(&mut fds[..n], timeout) {
        Ok(0) | Err(Errno::EINTR) => Ok(false),
        Ok(_) => Ok(fds[..n].iter().any(|f| {
            f.revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLERR))
        })),
        Err(e) => Err(e.into()),
    }
}

// ---------------------------------------------------------------------------------------------
// bpf(2).

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_MAP_TYPE_XSKMAP`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP`, the attach type of an XDP link.
const BPF_XDP: u32 = 37;
/// `BPF_F_XDP_HAS_FRAGS`: the program handles multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `XDP_FLAGS_DRV_MODE`: native (driver) mode.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr` as one 128-byte block the commands below fill field by field (the kernel reads
/// what it knows of the size passed and requires the rest to be zero).
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> BpfAttr {
        BpfAttr([0; 128])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// `bpf(cmd, attr)`; a new descriptor for the commands that return one.
///
/// # Safety
///
/// Every pointer in `attr` must point at memory the command may read (or, for the log buffer,
/// write) as the kernel's documentation of `cmd` says, alive for the call.
unsafe fn bpf(cmd: libc::c_long, attr: &BpfAttr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialized 128-byte block; what it points at is the caller's
    // promise.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const BpfAttr,
            std::mem::size_of::<BpfAttr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(rc: libc::c_long) -> io::Result<OwnedFd> {
    let raw = RawFd::try_from(rc).map_err(|_| io::ErrorKind::InvalidData)?;
    // SAFETY: the bpf commands that return a descriptor return a new one nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Creates an XSKMAP of `entries` slots (keyed by queue index, valued by socket descriptor).
pub(super) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut attr = BpfAttr::new();
    // map_type, key_size, value_size, max_entries.
    attr.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries);
    // map_name (at 32): for bpftool.
    attr.0[32..40].copy_from_slice(b"fastpath");
    // SAFETY: BPF_MAP_CREATE's attributes hold no pointers.
    let rc = unsafe { bpf(BPF_MAP_CREATE, &attr) }
        .map_err(|e| io::Error::new(e.kind(), format!("creating the XSKMAP: {e}")))?;
    owned(rc)
}

/// Puts socket `xsk` into `map` at `queue`.
pub(super) fn xskmap_insert(
    map: BorrowedFd<'_>,
    queue: u32,
    xsk: BorrowedFd<'_>,
) -> io::Result<()> {
    let key = queue;
    let value: u32 = xsk.as_raw_fd() as u32;
    let mut attr = BpfAttr::new();
    // map_fd, (pad), key, value, flags (BPF_ANY).
    attr.u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &value as *const u32 as u64)
        .u64(24, 0);
    // SAFETY: the kernel reads 4 bytes at `key` and 4 at `value` (the map's sizes), both alive for
    // the call.
    unsafe { bpf(BPF_MAP_UPDATE_ELEM, &attr) }
        .map(drop)
        .map_err(|e| io::Error::new(e.kind(), format!("putting the socket in the XSKMAP: {e}")))
}

/// Loads `insns` as an XDP program (for an XDP link; with `frags`, one that takes multi-buffer
/// frames). When the verifier refuses it, the error carries the verifier's log.
pub(super) fn load_xdp_program(insns: &[[u8; 8]], frags: bool) -> io::Result<OwnedFd> {
    let license = c"MIT OR Apache-2.0";
    let mut log = vec![0u8; 1 << 16];
    let insn_cnt = u32::try_from(insns.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let mut attr = BpfAttr::new();
    // prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version, prog_flags,
    // prog_name[16] (at 48), prog_ifindex (64), expected_attach_type (68).
    attr.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insn_cnt)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .u32(44, if frags { BPF_F_XDP_HAS_FRAGS } else { 0 })
        .u32(68, BPF_XDP);
    attr.0[48..60].copy_from_slice(b"fastpath_xsk");
    // SAFETY: the kernel reads `insn_cnt` instructions at `insns`, the NUL-terminated `license`, and
    // writes at most `log_size` bytes into `log`; all three outlive the call.
    match unsafe { bpf(BPF_PROG_LOAD, &attr) } {
        Ok(rc) => owned(rc),
        Err(err) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                err.kind(),
                format!("loading the XDP program: {err}: {}", text.trim()),
            ))
        }
    }
}

/// Attaches XDP program `prog` to interface `ifindex` (of the calling thread's namespace) in native
/// (driver) mode through a BPF link (`BPF_LINK_CREATE`, Linux 5.9). The program stays attached until
/// the returned descriptor is closed. The error is the kernel's, bare (see [`no_xdp_links`]).
pub(super) fn attach_xdp(prog: BorrowedFd<'_>, ifindex: u32) -> io::Result<OwnedFd> {
    let mut attr = BpfAttr::new();
    // prog_fd, target_ifindex, attach_type, flags.
    attr.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, XDP_FLAGS_DRV_MODE);
    // SAFETY: BPF_LINK_CREATE for XDP reads no pointers.
    let rc = unsafe { bpf(BPF_LINK_CREATE, &attr) }?;
    owned(rc)
}

/// Whether a failed `BPF_LINK_CREATE` means the kernel has no XDP links (before Linux 5.9: an
/// unknown attach type, `EINVAL`), so that the older netlink attachment may do.
pub(super) fn no_xdp_links(e: &io::Error) -> bool {
    /// The kernel's `ENOTSUPP`, which it lets out of some bpf commands.
    const ENOTSUPP: i32 = 524;
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP)
    )
}

// ---------------------------------------------------------------------------------------------
// Netlink: attaching the program the older way, where the kernel has no XDP links.

const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
/// `XDP_FLAGS_UPDATE_IF_NOEXIST`: fail rather than replace another program.
const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
/// `XDP_FLAGS_REPLACE`: act only if the attached program is the expected one.
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// An XDP program attached through netlink (`RTM_SETLINK` with `IFLA_XDP`), detached by
/// [`NetlinkXdp::detach`]: unlike a BPF link, closing descriptors leaves it attached.
#[derive(Debug)]
pub(super) struct NetlinkXdp {
    /// A route netlink socket of the interface's namespace (a socket keeps the namespace it was
    /// made in, so the program can be detached from any thread).
    sock: OwnedFd,
    ifindex: u32,
}

impl NetlinkXdp {
    /// Attaches `prog` to interface `ifindex` of the calling thread's namespace in native mode,
    /// unless a program is attached already.
    pub(super) fn attach(prog: BorrowedFd<'_>, ifindex: u32) -> io::Result<NetlinkXdp> {
        let sock = nix::sys::socket::socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            nix::sys::socket::SockProtocol::NetlinkRoute,
        )
        .map_err(|e| with_context(e, "route netlink socket"))?;
        let attach = NetlinkXdp { sock, ifindex };
        attach
            .set_link(
                &[
                    (IFLA_XDP_FD, prog.as_raw_fd()),
                    (
                        IFLA_XDP_FLAGS,
                        (XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST) as i32,
                    ),
                ],
                1,
            )
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("attaching the XDP program in native mode (netlink): {e}"),
                )
            })?;
        Ok(attach)
    }

    /// Detaches `prog`, if it is still the interface's program.
    pub(super) fn detach(&self, prog: BorrowedFd<'_>) -> io::Result<()> {
        self.set_link(
            &[
                (IFLA_XDP_FD, -1),
                (IFLA_XDP_EXPECTED_FD, prog.as_raw_fd()),
                (
                    IFLA_XDP_FLAGS,
                    (XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE) as i32,
                ),
            ],
            2,
        )
    }

    /// One `RTM_SETLINK` on the interface with an `IFLA_XDP` nest of 4-byte attributes, and its
    /// acknowledgement.
    fn set_link(&self, xdp: &[(u16, i32)], seq: u32) -> io::Result<()> {
        use nix::sys::socket::{recv, sendto, MsgFlags, NetlinkAddr};
        let nest_len = 4 + xdp.len() * 8;
        let len = 16 + 16 + nest_len;
        let mut msg = Vec::with_capacity(len);
        // struct nlmsghdr.
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        // struct ifinfomsg: family, pad, type, index, flags, change.
        msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
        msg.extend_from_slice(&(self.ifindex as i32).to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        // The nest and its attributes.
        msg.extend_from_slice(&(nest_len as u16).to_ne_bytes());
        msg.extend_from_slice(&(IFLA_XDP | NLA_F_NESTED).to_ne_bytes());
        for &(kind, value) in xdp {
            msg.extend_from_slice(&8u16.to_ne_bytes());
            msg.extend_from_slice(&kind.to_ne_bytes());
            msg.extend_from_slice(&value.to_ne_bytes());
        }
        let fd = self.sock.as_raw_fd();
        sendto(fd, &msg, &NetlinkAddr::new(0, 0), MsgFlags::empty())
            .map_err(|e| with_context(e, "RTM_SETLINK"))?;
        let mut reply = [0u8; 4096];
        for _ in 0..16 {
            let n = recv(fd, &mut reply, MsgFlags::empty())
                .map_err(|e| with_context(e, "RTM_SETLINK's answer"))?;
            // struct nlmsghdr, then for NLMSG_ERROR the (negative) error number.
            if n < 20 {
                continue;
            }
            let kind = u16::from_ne_bytes([reply[4], reply[5]]);
            let reply_seq = u32::from_ne_bytes([reply[8], reply[9], reply[10], reply[11]]);
            if kind != NLMSG_ERROR || reply_seq != seq {
                continue;
            }
            let error = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
            return match error {
                0 => Ok(()),
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
        Err(io::Error::other("no answer to RTM_SETLINK"))
    }
}
