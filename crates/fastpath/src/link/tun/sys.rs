//! The operating-system interface of the TUN link: its only `unsafe` code (the crate's other `unsafe`
//! is the AVX2 checksum, `checksum/x86.rs`, and the cycle counter in `instrument.rs`).
//!
//! `nix` provides safe wrappers for opening files, `read`, `writev`, `poll`, `setns` and sockets; what it
//! has no safe form for are the TUN and interface ioctls, which take a request number and a pointer the
//! kernel reads (and, for `TUNSETIFF`, writes back), and `bpf(2)`, which loads the steering program of a
//! multi-queue interface. Each of those is one small function here.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{AddressFamily, SockFlag, SockType};
use nix::sys::stat::Mode;

use crate::link::os::{with_context, IfReq};

/// `TUN_F_CSUM`: the reader accepts packets whose transport checksum is left partial (`NEEDS_CSUM`).
pub(super) const TUN_F_CSUM: libc::c_uint = libc::TUN_F_CSUM;
/// `TUN_F_USO4 | TUN_F_USO6`: UDP segmentation offload; the kernel accepts the two only together.
pub(super) const TUN_F_USO: libc::c_uint = libc::TUN_F_USO4 | libc::TUN_F_USO6;
/// `TUN_F_TSO4`: the reader takes TCP/IPv4 segments larger than the MTU (GSO), up to 64 KiB: the
/// kernel hands over what its TCP sent as one packet instead of cutting it.
pub(super) const TUN_F_TSO4: libc::c_uint = libc::TUN_F_TSO4;
/// `TUN_F_TSO6`: the same for TCP/IPv6.
pub(super) const TUN_F_TSO6: libc::c_uint = libc::TUN_F_TSO6;

/// Opens `/dev/net/tun` non-blocking and attaches it to a new TUN interface named `name` (the kernel
/// picks `tunN` if `name` is empty) with `flags` (`IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`). Returns the
/// descriptor and the interface's name. The interface lives, in the calling thread's network
/// namespace, until the descriptor is closed.
pub(super) fn open_tun(name: &str, flags: libc::c_int) -> io::Result<(OwnedFd, String)> {
    let fd = nix::fcntl::open(
        "/dev/net/tun",
        OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| with_context(e, "opening /dev/net/tun"))?;
    let mut req = IfReq::new(name)?;
    let flags = flags as libc::c_short;
    req.data[..2].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: `fd` is an open /dev/net/tun descriptor; TUNSETIFF reads and writes back a `struct ifreq`,
    // and `req` is a live, initialized value at least that large, borrowed mutably for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReq) };
    Errno::result(rc).map_err(|e| with_context(e, &format!("TUNSETIFF `{name}`")))?;
    Ok((fd, req.name()))
}

/// The interface a TUN descriptor is attached to and its `IFF_*` flags (TUNGETIFF), for a descriptor
/// someone else opened. Fails (`ENOTTY`, `EBADFD`, `EINVAL`) on a descriptor that is not an attached
/// TUN or TAP device.
pub(super) fn get_iff(fd: BorrowedFd<'_>) -> io::Result<(String, libc::c_int)> {
    let mut req = IfReq::new("")?;
    // SAFETY: TUNGETIFF writes a `struct ifreq` (the name and the flags) through the pointer, which
    // points at `req`, a live, initialized value at least that large, borrowed mutably for the call.
    // On a descriptor that is not a TUN device the ioctl fails and writes nothing.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNGETIFF, &mut req as *mut IfReq) };
    Errno::result(rc).map_err(|e| with_context(e, "TUNGETIFF (is this a TUN descriptor?)"))?;
    let flags = libc::c_short::from_ne_bytes([req.data[0], req.data[1]]);
    // The flags are a `short` in the kernel's ABI; as an `int`, bit for bit, to compare with libc's.
    Ok((req.name(), libc::c_int::from(flags as libc::c_ushort)))
}

/// Makes `fd` non-blocking (`O_NONBLOCK`), keeping its other status flags.
pub(super) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Sets the size of the virtio-net header in front of every packet read or written (TUNSETVNETHDRSZ).
pub(super) fn set_vnet_header_len(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
    let len = libc::c_int::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `fd` is a TUN descriptor; TUNSETVNETHDRSZ reads one `int` from the pointer, which points
    // at `len`, alive for the call.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETVNETHDRSZ,
            &len as *const libc::c_int,
        )
    };
    Errno::result(rc)
        .map(drop)
        .map_err(|e| with_context(e, "TUNSETVNETHDRSZ"))
}

/// Tells the kernel which offloads this reader handles (TUNSETOFFLOAD with `TUN_F_*` flags): with
/// `TUN_F_CSUM` it may hand us packets with partial checksums; without it, it completes them first.
pub(super) fn set_offload(fd: BorrowedFd<'_>, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: `fd` is a TUN descriptor; TUNSETOFFLOAD takes its argument by value (an unsigned long
    // of flags), so no memory is shared with the kernel.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            libc::c_ulong::from(flags),
        )
    };
    Errno::result(rc)
        .map(drop)
        .map_err(|e| with_context(e, "TUNSETOFFLOAD"))
}

/// Sets interface `name`'s MTU (SIOCSIFMTU on a socket of the calling thread's network namespace,
/// which must be the interface's).
pub(super) fn set_mtu(name: &str, mtu: usize) -> io::Result<()> {
    let sock = nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| with_context(e, "socket for SIOCSIFMTU"))?;
    let mut req = IfReq::new(name)?;
    let mtu = libc::c_int::try_from(mtu).map_err(|_| io::ErrorKind::InvalidInput)?;
    req.data[..4].copy_from_slice(&mtu.to_ne_bytes());
    // SAFETY: `sock` is an open socket; SIOCSIFMTU reads a `struct ifreq` (name and `ifr_mtu`) from the
    // pointer, and `req` is a live, initialized value at least as large, borrowed for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFMTU, &mut req as *mut IfReq) };
    Errno::result(rc)
        .map(drop)
        .map_err(|e| with_context(e, &format!("setting the MTU of {name} to {mtu}")))
}

/// One `read`: the next packet, or `EAGAIN` when there is none.
#[inline]
pub(super) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    nix::unistd::read(fd, buf)
}

/// One `readv` into two pieces: the receive buffer, then `rest` for what does not fit (a GSO packet).
#[inline]
pub(super) fn read_two(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    rest: &mut [u8],
) -> Result<usize, Errno> {
    nix::sys::uio::readv(fd, &mut [IoSliceMut::new(buf), IoSliceMut::new(rest)])
}

/// One `writev` of a packet in two pieces: the virtio-net header and the IP packet, gathered by the
/// kernel so neither is copied into a staging buffer first.
#[inline]
pub(super) fn write_packet(
    fd: BorrowedFd<'_>,
    header: &[u8],
    packet: &[u8],
) -> Result<usize, Errno> {
    nix::sys::uio::writev(fd, &[IoSlice::new(header), IoSlice::new(packet)])
}

/// Waits until `fd` is readable or `timeout` passes (`None`: for ever). Returns true when readable;
/// false on timeout or when a signal interrupted the wait.
pub(super) fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let timeout = match timeout {
        None => PollTimeout::NONE,
        // Round up, so a short positive timeout does not become a busy poll.
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, timeout) {
        Ok(0) | Err(Errno::EINTR) => Ok(false),
        Ok(_) => Ok(fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLERR))),
        Err(e) => Err(e.into()),
    }
}

/// `BPF_PROG_LOAD`'s part of `union bpf_attr`, the fields up to `prog_flags`, then zeros to 128 bytes
/// (the kernel reads what it knows of the size we pass and requires nothing else).
#[repr(C, align(8))]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    rest: [u8; 88],
}

/// `BPF_PROG_LOAD`, the `bpf(2)` command number.
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_PROG_TYPE_SOCKET_FILTER`: the type a TUN steering program must have.
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;

/// Loads `insns` (eBPF instructions, 8 bytes each) as a socket-filter program and returns its
/// descriptor. When the verifier refuses it, the error carries the verifier's log.
pub(super) fn load_socket_filter(
    insns: &[[u8; 8]],
    license: &std::ffi::CStr,
) -> io::Result<OwnedFd> {
    let mut log = vec![0u8; 1 << 16];
    let insn_cnt = u32::try_from(insns.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SOCKET_FILTER,
        insn_cnt,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        kern_version: 0,
        prog_flags: 0,
        rest: [0; 88],
    };
    // SAFETY: bpf(BPF_PROG_LOAD) reads `size_of::<ProgLoadAttr>()` bytes from `attr`, a live,
    // fully initialized value; through it, `insn_cnt` instructions from `insns`, the NUL-terminated
    // `license`, and it writes at most `log_size` bytes into `log`. All three outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &attr as *const ProgLoadAttr,
            std::mem::size_of::<ProgLoadAttr>(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        return Err(io::Error::new(
            err.kind(),
            format!("loading the steering program: {err}: {}", text.trim()),
        ));
    }
    let raw = libc::c_int::try_from(rc).map_err(|_| io::ErrorKind::InvalidData)?;
    // SAFETY: on success bpf(BPF_PROG_LOAD) returns a new descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

/// Makes `prog` (a socket-filter program) choose the queue of every packet the kernel sends into the
/// multi-queue interface behind `fd` (TUNSETSTEERINGEBPF): the queue is its return value modulo the
/// number of queues. The interface keeps its own reference; `prog` may be closed afterwards.
pub(super) fn set_steering(fd: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    let raw: libc::c_int = prog.as_raw_fd();
    // SAFETY: `fd` is a TUN descriptor; TUNSETSTEERINGEBPF reads one `int` (a program descriptor)
    // from the pointer, which points at `raw`, alive for the call.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETSTEERINGEBPF,
            &raw as *const libc::c_int,
        )
    };
    Errno::result(rc)
        .map(drop)
        .map_err(|e| with_context(e, "TUNSETSTEERINGEBPF"))
}
