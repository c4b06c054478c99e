//! The C side: the function table packetdrill's shared-object mode fills in through
//! `packetdrill_interface_init`, laid out field for field as packetdrill declares it, and one
//! `extern "C"` function per entry, each turning C arguments into [`Shim`] calls. Failures set the
//! thread's `errno` and return -1, as the system calls they stand in for. No panic crosses into C:
//! every entry runs under `catch_unwind` and answers `EIO` if its body panicked.
//!
//! The library also exports `getsockopt` itself, for when it is preloaded (`LD_PRELOAD`, as the
//! runner does): packetdrill's `%{ ... }%` code blocks read `TCP_INFO`, `TCP_CC_INFO` and
//! `SO_MEMINFO` with the C library's `getsockopt` on the socket's descriptor, not through the table.
//! A descriptor of the live shim (`CURRENT`) is answered from the stack; any other goes on to the
//! next `getsockopt` (the C library's). packetdrill's `dlopen` of the preloaded file returns the
//! preloaded copy (the loader matches the file), so both see one `CURRENT`. It exports `sendfile`
//! the same way: packetdrill calls it directly too.
//!
//! `fcntl` and `ioctl` are variadic in C. They are defined here with one fixed `c_long` third
//! argument: on the Linux targets (x86-64 and AArch64 System V ABIs) a variadic integer or pointer
//! argument is passed exactly where a fixed one is, so the callee reads what the caller passed.

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use libc::{
    iovec, msghdr, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t, timeval, useconds_t,
};

use crate::shim::{Errno, ErrorQueued, Shim, ShimConfig, SOF_TIMESTAMPING_OPT_TSONLY};

/// packetdrill's `struct packetdrill_interface` (its `packetdrill.h`), in the same order.
#[repr(C)]
#[allow(missing_docs)]
pub struct PacketdrillInterface {
    pub userdata: *mut c_void,
    pub free: unsafe extern "C" fn(*mut c_void),
    pub socket: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int) -> c_int,
    pub bind: unsafe extern "C" fn(*mut c_void, c_int, *const sockaddr, socklen_t) -> c_int,
    pub listen: unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int,
    pub accept: unsafe extern "C" fn(*mut c_void, c_int, *mut sockaddr, *mut socklen_t) -> c_int,
    pub connect: unsafe extern "C" fn(*mut c_void, c_int, *const sockaddr, socklen_t) -> c_int,
    pub read: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, size_t) -> ssize_t,
    pub readv: unsafe extern "C" fn(*mut c_void, c_int, *const iovec, c_int) -> ssize_t,
    pub recv: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, size_t, c_int) -> ssize_t,
    pub recvfrom: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        *mut c_void,
        size_t,
        c_int,
        *mut sockaddr,
        *mut socklen_t,
    ) -> ssize_t,
    pub recvmsg: unsafe extern "C" fn(*mut c_void, c_int, *mut msghdr, c_int) -> ssize_t,
    pub write: unsafe extern "C" fn(*mut c_void, c_int, *const c_void, size_t) -> ssize_t,
    pub writev: unsafe extern "C" fn(*mut c_void, c_int, *const iovec, c_int) -> ssize_t,
    pub send: unsafe extern "C" fn(*mut c_void, c_int, *const c_void, size_t, c_int) -> ssize_t,
    pub sendto: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        *const c_void,
        size_t,
        c_int,
        *const sockaddr,
        socklen_t,
    ) -> ssize_t,
    pub sendmsg: unsafe extern "C" fn(*mut c_void, c_int, *const msghdr, c_int) -> ssize_t,
    pub fcntl: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_long) -> c_int,
    pub ioctl: unsafe extern "C" fn(*mut c_void, c_int, c_ulong, c_long) -> c_int,
    pub close: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub shutdown: unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int,
    pub getsockopt: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        c_int,
        c_int,
        *mut c_void,
        *mut socklen_t,
    ) -> c_int,
    pub setsockopt:
        unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *const c_void, socklen_t) -> c_int,
    pub poll: unsafe extern "C" fn(*mut c_void, *mut pollfd, nfds_t, c_int) -> c_int,
    pub netdev_send: unsafe extern "C" fn(*mut c_void, *const c_void, size_t) -> c_int,
    pub netdev_receive:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *mut size_t, *mut i64) -> c_int,
    pub usleep: unsafe extern "C" fn(*mut c_void, useconds_t) -> c_int,
    pub gettimeofday: unsafe extern "C" fn(*mut c_void, *mut timeval, *mut c_void) -> c_int,
    pub epoll_create: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub epoll_ctl: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *mut c_void) -> c_int,
    pub epoll_wait: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, c_int, c_int) -> c_int,
    pub pipe: unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int,
    pub splice: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        *mut i64,
        c_int,
        *mut i64,
        size_t,
        c_uint,
    ) -> ssize_t,
}

/// The shim `packetdrill_interface_init` made and `free` has not freed yet, for [`getsockopt`].
static CURRENT: AtomicPtr<Shim> = AtomicPtr::new(std::ptr::null_mut());

fn set_errno(e: Errno) {
    // SAFETY: `__errno_location` returns the calling thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f`, turning `Err(errno)` into `errno` and -1, and a panic into `EIO` and -1.
fn guard<T: From<i8>>(f: impl FnOnce() -> Result<T, Errno>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            T::from(-1)
        }
        Err(_) => {
            set_errno(libc::EIO);
            T::from(-1)
        }
    }
}

/// # Safety
/// `ud` must be the pointer `packetdrill_interface_init` stored, not yet freed.
unsafe fn shim<'a>(ud: *mut c_void) -> Result<&'a Shim, Errno> {
    if ud.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller guarantees `ud` is the live `Box<Shim>` made in `packetdrill_interface_init`;
    // the shim is only ever used through shared references (it locks inside).
    Ok(unsafe { &*(ud as *const Shim) })
}

/// Reads a C socket address.
///
/// # Safety
/// `addr` must be null or point to `len` readable bytes.
unsafe fn read_sockaddr(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddr, Errno> {
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `addr` points to at least a `sockaddr`'s family field (the caller's promise of `len`
    // bytes is checked against each structure's size before it is read).
    let family = c_int::from(unsafe { (*addr).sa_family });
    let len = len as usize;
    match family {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: `len` covers a `sockaddr_in`; `read_unaligned` needs no alignment.
            let a = unsafe { std::ptr::read_unaligned(addr as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Ok(SocketAddrV4::new(ip, u16::from_be(a.sin_port)).into())
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: `len` covers a `sockaddr_in6`; `read_unaligned` needs no alignment.
            let a = unsafe { std::ptr::read_unaligned(addr as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Ok(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )
            .into())
        }
        libc::AF_INET | libc::AF_INET6 => Err(libc::EINVAL),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// Writes a socket address the way the kernel does: truncated to `*len`, with `*len` set to the full
/// size. Null pointers are skipped.
///
/// # Safety
/// `addr` and `len` must be null or valid, `addr` for `*len` bytes.
unsafe fn write_sockaddr(a: SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let mut storage: libc::sockaddr_storage =
        // SAFETY: `sockaddr_storage` is plain data, valid all zero.
        unsafe { std::mem::zeroed() };
    let size = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `storage` is larger than and aligned for any socket address.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: the caller gave `len` valid and `addr` writable for `*len` bytes; we copy at most that.
    unsafe {
        let room = (*len as usize).min(size);
        std::ptr::copy_nonoverlapping(&storage as *const _ as *const u8, addr as *mut u8, room);
        *len = size as socklen_t;
    }
}

/// # Safety
/// `iov` must be null or point to `n` valid `iovec`s.
unsafe fn iovecs<'a>(iov: *const iovec, n: c_int) -> Result<&'a [iovec], Errno> {
    if n < 0 {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(iov, n as usize) })
}

fn total_len(iov: &[iovec]) -> usize {
    iov.iter().map(|v| v.iov_len).sum()
}

/// Gathers the bytes `iov` describes.
///
/// # Safety
/// Each entry must describe readable memory.
unsafe fn gather(iov: &[iovec]) -> Vec<u8> {
    let mut v = Vec::with_capacity(total_len(iov));
    for e in iov {
        if e.iov_len > 0 && !e.iov_base.is_null() {
            // SAFETY: the caller's promise.
            v.extend_from_slice(unsafe {
                std::slice::from_raw_parts(e.iov_base as *const u8, e.iov_len)
            });
        }
    }
    v
}

/// Scatters `data` over `iov`.
///
/// # Safety
/// Each entry must describe writable memory.
unsafe fn scatter(data: &[u8], iov: &[iovec]) {
    let mut rest = data;
    for e in iov {
        if rest.is_empty() {
            break;
        }
        let n = e.iov_len.min(rest.len());
        if n > 0 && !e.iov_base.is_null() {
            // SAFETY: the caller's promise; `n` is within the entry.
            unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), e.iov_base as *mut u8, n) };
        }
        rest = &rest[n..];
    }
}

/// # Safety
/// `buf` must be null (with `count` 0) or writable for `count` bytes.
unsafe fn buf_mut<'a>(buf: *mut c_void, count: size_t) -> Result<&'a mut [u8], Errno> {
    if count == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, count) })
}

/// # Safety
/// `buf` must be null (with `count` 0) or readable for `count` bytes.
unsafe fn buf_ref<'a>(buf: *const c_void, count: size_t) -> Result<&'a [u8], Errno> {
    if count == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(buf as *const u8, count) })
}

fn ssize(n: usize) -> Result<ssize_t, Errno> {
    ssize_t::try_from(n).map_err(|_| libc::EOVERFLOW)
}

// Every function below is called by packetdrill with the `userdata` it was given and arguments that
// follow the C prototypes of the system calls they stand for; each `unsafe` block relies on that.

unsafe extern "C" fn pd_free(ud: *mut c_void) {
    if ud.is_null() {
        return;
    }
    let _ = CURRENT.compare_exchange(
        ud as *mut Shim,
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `ud` came from `Box::into_raw` in `packetdrill_interface_init` and is freed once.
        let shim = unsafe { Box::from_raw(ud as *mut Shim) };
        shim.forget_placeholders();
        drop(shim);
    }));
}

unsafe extern "C" fn pd_socket(ud: *mut c_void, domain: c_int, ty: c_int, proto: c_int) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.socket(domain, ty, proto))
}

unsafe extern "C" fn pd_bind(
    ud: *mut c_void,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> c_int {
    guard(|| {
        // SAFETY: packetdrill passes a socket address of `len` bytes.
        let a = unsafe { read_sockaddr(addr, len) }?;
        // SAFETY: see above.
        unsafe { shim(ud) }?.bind(fd, a).map(|()| 0)
    })
}

unsafe extern "C" fn pd_listen(ud: *mut c_void, fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.listen(fd, backlog).map(|()| 0))
}

unsafe extern "C" fn pd_accept(
    ud: *mut c_void,
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    guard(|| {
        // SAFETY: see above.
        let (n, peer) = unsafe { shim(ud) }?.accept(fd)?;
        // SAFETY: packetdrill passes null or a buffer of `*len` bytes.
        unsafe { write_sockaddr(peer, addr, len) };
        Ok(n)
    })
}

unsafe extern "C" fn pd_connect(
    ud: *mut c_void,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> c_int {
    guard(|| {
        // SAFETY: packetdrill passes a socket address of `len` bytes.
        let a = unsafe { read_sockaddr(addr, len) }?;
        // SAFETY: see above.
        unsafe { shim(ud) }?.connect(fd, a).map(|()| 0)
    })
}

unsafe extern "C" fn pd_read(ud: *mut c_void, fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    guard(|| {
        // SAFETY: `buf` is writable for `n` bytes, as for read(2).
        let b = unsafe { buf_mut(buf, n) }?;
        // SAFETY: see above.
        ssize(unsafe { shim(ud) }?.read(fd, b)?)
    })
}

unsafe extern "C" fn pd_recv(
    ud: *mut c_void,
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    _flags: c_int,
) -> ssize_t {
    // SAFETY: as for read.
    unsafe { pd_read(ud, fd, buf, n) }
}

unsafe extern "C" fn pd_recvfrom(
    ud: *mut c_void,
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    _flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    // SAFETY: as for read.
    let r = unsafe { pd_read(ud, fd, buf, n) };
    if r >= 0 {
        let peer = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: see above.
            unsafe { shim(ud) }.and_then(|s| s.addrs(fd)).ok()
        }));
        if let Ok(Some((_, peer))) = peer {
            // SAFETY: packetdrill passes null or a buffer of `*len` bytes.
            unsafe { write_sockaddr(peer, addr, len) };
        }
    }
    r
}

unsafe extern "C" fn pd_readv(ud: *mut c_void, fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    guard(|| {
        // SAFETY: `iov` holds `n` entries of writable memory, as for readv(2).
        let iov = unsafe { iovecs(iov, n) }?;
        let mut tmp = vec![0u8; total_len(iov)];
        // SAFETY: see above.
        let got = unsafe { shim(ud) }?.read(fd, &mut tmp)?;
        // SAFETY: as above.
        unsafe { scatter(&tmp[..got], iov) };
        ssize(got)
    })
}

/// Linux's `struct sock_extended_err` (`<linux/errqueue.h>`).
#[repr(C)]
#[derive(Clone, Copy)]
struct SockExtendedErr {
    ee_errno: u32,
    ee_origin: u8,
    ee_type: u8,
    ee_code: u8,
    ee_pad: u8,
    ee_info: u32,
    ee_data: u32,
}

/// What Linux's `IP_RECVERR` control message carries: the error and the offender's address (all
/// zero for a completion notification), `sockaddr_in6` for an `AF_INET6` socket.
#[repr(C)]
#[derive(Clone, Copy)]
struct ErrorMessage<Offender: Copy> {
    ee: SockExtendedErr,
    offender: Offender,
}

/// `SO_EE_ORIGIN_ZEROCOPY` and `SO_EE_CODE_ZEROCOPY_COPIED`.
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// `SO_EE_ORIGIN_TIMESTAMPING`.
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;

/// `recvmsg(MSG_ERRQUEUE)`: one completion notification, or one transmit timestamp (Linux's
/// `SCM_TIMESTAMPING` control message, then the `IP_RECVERR` one), as Linux's `IP_RECVERR` (or
/// `IPV6_RECVERR`) control message, no data.
///
/// # Safety
/// `m` is a valid `msghdr` whose `msg_control`, when not null, holds `msg_controllen` writable
/// bytes.
unsafe fn recv_error_queue(shim: &Shim, fd: c_int, m: &mut msghdr) -> Result<ssize_t, Errno> {
    let (v6, queued, timestamping) = shim.recv_error_queue(fd)?;
    let (err, stamp) = match queued {
        ErrorQueued::Completed(lo, hi) => (
            SockExtendedErr {
                ee_errno: 0,
                ee_origin: SO_EE_ORIGIN_ZEROCOPY,
                ee_type: 0,
                ee_code: SO_EE_CODE_ZEROCOPY_COPIED,
                ee_pad: 0,
                ee_info: lo,
                ee_data: hi,
            },
            None,
        ),
        ErrorQueued::Timestamp(t) => (
            SockExtendedErr {
                ee_errno: libc::ENOMSG as u32,
                ee_origin: SO_EE_ORIGIN_TIMESTAMPING,
                ee_type: 0,
                ee_code: 0,
                ee_pad: 0,
                ee_info: ErrorQueued::tstamp_kind(t.kind),
                ee_data: t.key,
            },
            Some(t.at.total_micros()),
        ),
    };
    // SAFETY: all-zero bytes are a valid (unspecified) socket address.
    let (v4, v6_addr): (libc::sockaddr_in, libc::sockaddr_in6) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    let size = if v6 {
        std::mem::size_of::<ErrorMessage<libc::sockaddr_in6>>()
    } else {
        std::mem::size_of::<ErrorMessage<libc::sockaddr_in>>()
    } as u32;
    let stamp_size = std::mem::size_of::<[libc::timespec; 3]>() as u32;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe {
        libc::CMSG_SPACE(size) as usize + stamp.map_or(0, |_| libc::CMSG_SPACE(stamp_size) as usize)
    };
    // A timestamp comes with the packet it stamps, which an empty buffer truncates (Linux's
    // `SOF_TIMESTAMPING_OPT_TSONLY` leaves the packet out).
    m.msg_flags = libc::MSG_ERRQUEUE;
    if stamp.is_some() && timestamping & SOF_TIMESTAMPING_OPT_TSONLY == 0 {
        m.msg_flags |= libc::MSG_TRUNC;
    }
    if m.msg_control.is_null() || m.msg_controllen < space {
        // Linux truncates the control data and says so.
        m.msg_flags |= libc::MSG_CTRUNC;
        m.msg_controllen = 0;
        return Ok(0);
    }
    let (level, ty) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    // SAFETY: `msg_control` holds `msg_controllen` writable bytes, enough for the control
    // messages written (checked above); the CMSG macros stay within it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        if let Some(micros) = stamp {
            let ts = libc::timespec {
                tv_sec: (micros / 1_000_000) as libc::time_t,
                tv_nsec: ((micros % 1_000_000) * 1000) as libc::c_long,
            };
            let none = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SO_TIMESTAMPING;
            (*c).cmsg_len = libc::CMSG_LEN(stamp_size) as _;
            std::ptr::write_unaligned(
                libc::CMSG_DATA(c) as *mut [libc::timespec; 3],
                [ts, none, none],
            );
            c = libc::CMSG_NXTHDR(m, c);
        }
        (*c).cmsg_level = level;
        (*c).cmsg_type = ty;
        (*c).cmsg_len = libc::CMSG_LEN(size) as _;
        if v6 {
            let msg = ErrorMessage {
                ee: err,
                offender: v6_addr,
            };
            std::ptr::write_unaligned(
                libc::CMSG_DATA(c) as *mut ErrorMessage<libc::sockaddr_in6>,
                msg,
            );
        } else {
            let msg = ErrorMessage {
                ee: err,
                offender: v4,
            };
            std::ptr::write_unaligned(
                libc::CMSG_DATA(c) as *mut ErrorMessage<libc::sockaddr_in>,
                msg,
            );
        }
    }
    m.msg_controllen = space as _;
    Ok(0)
}

unsafe extern "C" fn pd_recvmsg(
    ud: *mut c_void,
    fd: c_int,
    msg: *mut msghdr,
    flags: c_int,
) -> ssize_t {
    guard(|| {
        if msg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: `msg` is a valid `msghdr`, as for recvmsg(2).
        let m = unsafe { &mut *msg };
        if flags & libc::MSG_ERRQUEUE != 0 {
            // SAFETY: `ud` is the shim and `m` a valid `msghdr`, as above.
            return unsafe { recv_error_queue(shim(ud)?, fd, m) };
        }
        // SAFETY: its iovecs describe writable memory.
        let iov = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
        let mut tmp = vec![0u8; total_len(iov)];
        // SAFETY: see above.
        let got = unsafe { shim(ud) }?.read(fd, &mut tmp)?;
        // SAFETY: as above.
        unsafe { scatter(&tmp[..got], iov) };
        m.msg_flags = 0;
        // SAFETY: see above.
        let inq = unsafe { shim(ud) }?.inq_hint(fd)?;
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<c_int>() as u32) } as usize;
        match inq {
            Some(hint) if !m.msg_control.is_null() && m.msg_controllen >= space => {
                // SAFETY: `msg_control` holds `msg_controllen` writable bytes, enough for one
                // control message with an int (checked above), as for recvmsg(2); the CMSG macros
                // stay within it.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(m);
                    (*c).cmsg_level = libc::SOL_TCP;
                    (*c).cmsg_type = crate::shim::TCP_INQ;
                    (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<c_int>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut c_int, hint);
                }
                m.msg_controllen = space as _;
            }
            _ => m.msg_controllen = 0,
        }
        ssize(got)
    })
}

unsafe extern "C" fn pd_write(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
) -> ssize_t {
    guard(|| {
        // SAFETY: `buf` is readable for `n` bytes, as for write(2).
        let b = unsafe { buf_ref(buf, n) }?;
        // SAFETY: see above.
        ssize(unsafe { shim(ud) }?.write(fd, b)?)
    })
}

unsafe extern "C" fn pd_send(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    guard(|| {
        // SAFETY: `buf` is readable for `n` bytes, as for send(2).
        let b = unsafe { buf_ref(buf, n) }?;
        // SAFETY: see above.
        ssize(unsafe { shim(ud) }?.send(fd, b, flags)?)
    })
}

unsafe extern "C" fn pd_sendto(
    ud: *mut c_void,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if flags & libc::MSG_FASTOPEN == 0 {
        // SAFETY: as for send (a connected stream ignores the address, as Linux does).
        return unsafe { pd_send(ud, fd, buf, n, flags) };
    }
    guard(|| {
        // SAFETY: `buf` is readable for `n` bytes, as for sendto(2).
        let data = unsafe { buf_ref(buf, n) }?;
        // SAFETY: a non-null `addr` holds at least its family field, as for sendto(2).
        if !addr.is_null() && c_int::from(unsafe { (*addr).sa_family }) == libc::AF_UNSPEC {
            return Err(libc::EOPNOTSUPP);
        }
        let to = if addr.is_null() {
            None
        } else {
            // SAFETY: packetdrill passes a socket address of `len` bytes.
            Some(unsafe { read_sockaddr(addr, len) }?)
        };
        let dontwait = flags & libc::MSG_DONTWAIT != 0;
        // SAFETY: see above.
        let shim = unsafe { shim(ud) }?;
        let r = shim.send_fast_open(fd, data, to, dontwait);
        ssize(shim.after_send(fd, flags, r)?)
    })
}

unsafe extern "C" fn pd_writev(ud: *mut c_void, fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    guard(|| {
        // SAFETY: `iov` holds `n` entries of readable memory, as for writev(2).
        let iov = unsafe { iovecs(iov, n) }?;
        // SAFETY: as above.
        let data = unsafe { gather(iov) };
        // SAFETY: see above.
        ssize(unsafe { shim(ud) }?.write(fd, &data)?)
    })
}

unsafe extern "C" fn pd_sendmsg(
    ud: *mut c_void,
    fd: c_int,
    msg: *const msghdr,
    flags: c_int,
) -> ssize_t {
    guard(|| {
        if msg.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: `msg` is a valid `msghdr`, as for sendmsg(2).
        let m = unsafe { &*msg };
        // SAFETY: its iovecs describe readable memory.
        let iov = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
        // SAFETY: as above.
        let data = unsafe { gather(iov) };
        if flags & libc::MSG_FASTOPEN != 0 {
            let name = m.msg_name as *const sockaddr;
            // SAFETY: a non-null `msg_name` holds `msg_namelen` bytes of address, as for sendmsg(2).
            let to = (!name.is_null())
                .then(|| unsafe { read_sockaddr(name, m.msg_namelen) })
                .transpose()?;
            let dontwait = flags & libc::MSG_DONTWAIT != 0;
            // SAFETY: see above.
            let shim = unsafe { shim(ud) }?;
            let r = shim.send_fast_open(fd, &data, to, dontwait);
            return ssize(shim.after_send(fd, flags, r)?);
        }
        // SAFETY: see above.
        ssize(unsafe { shim(ud) }?.send(fd, &data, flags)?)
    })
}

unsafe extern "C" fn pd_fcntl(ud: *mut c_void, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.fcntl(fd, cmd, arg))
}

unsafe extern "C" fn pd_ioctl(ud: *mut c_void, fd: c_int, req: c_ulong, arg: c_long) -> c_int {
    guard(|| {
        // SAFETY: see above.
        let sh = unsafe { shim(ud) }?;
        let ptr = arg as *mut c_int;
        if ptr.is_null() {
            return Err(libc::EFAULT);
        }
        match req {
            libc::FIONBIO => {
                // SAFETY: FIONBIO's argument points to an int, as for ioctl(2).
                let on = unsafe { std::ptr::read_unaligned(ptr) } != 0;
                sh.set_nonblocking(fd, on).map(|()| 0)
            }
            _ => {
                let v = sh.ioctl_int(fd, req)?;
                // SAFETY: FIONREAD's and TIOCOUTQ's argument points to an int.
                unsafe { std::ptr::write_unaligned(ptr, v) };
                Ok(0)
            }
        }
    })
}

unsafe extern "C" fn pd_close(ud: *mut c_void, fd: c_int) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.close(fd).map(|()| 0))
}

unsafe extern "C" fn pd_shutdown(ud: *mut c_void, fd: c_int, how: c_int) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.shutdown(fd, how).map(|()| 0))
}

/// Copies an option's value out as the kernel does: at most `*len` bytes, `*len` set to what was
/// written.
///
/// # Safety
/// `len` must be valid and `val` writable for `*len` bytes (both checked non-null here).
unsafe fn write_option(
    bytes: &[u8],
    val: *mut c_void,
    len: *mut socklen_t,
) -> Result<c_int, Errno> {
    if val.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's promise, as for getsockopt(2).
    unsafe {
        let room = (*len as usize).min(bytes.len());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), val as *mut u8, room);
        *len = room as socklen_t;
    }
    Ok(0)
}

unsafe extern "C" fn pd_getsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    guard(|| {
        if val.is_null() || len.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: see above.
        let v = unsafe { shim(ud) }?.getsockopt_bytes(fd, level, name)?;
        // SAFETY: `len` is valid and `val` writable for `*len` bytes, as for getsockopt(2).
        unsafe { write_option(&v, val, len) }
    })
}

type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut libc::off_t, size_t) -> ssize_t;

/// The address of `name` after this library's in the lookup order (the C library's), looked up
/// once into `cache`; `None` when there is none, or when it is this library's own (`ours`).
fn next_symbol(cache: &OnceLock<usize>, name: &CStr, ours: usize) -> Option<usize> {
    let addr = *cache.get_or_init(|| {
        // SAFETY: `dlsym` with `RTLD_NEXT` and a NUL-terminated name has no other precondition.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
    });
    (addr != 0 && addr != ours).then_some(addr)
}

/// The `sendfile` after this library's in the lookup order (the C library's), or `None`.
fn next_sendfile() -> Option<SendfileFn> {
    static NEXT: OnceLock<usize> = OnceLock::new();
    let addr = next_symbol(&NEXT, c"sendfile", sendfile as SendfileFn as usize)?;
    // SAFETY: the symbol `sendfile` the loader found is the C library's function of this type.
    Some(unsafe { std::mem::transmute::<usize, SendfileFn>(addr) })
}

/// `sendfile(2)`, exported as `getsockopt` is (packetdrill calls it directly, not through its
/// interface): to one of the shim's sockets it reads the file and writes what it read (fastpath
/// copies into its send buffer); every other descriptor goes to the C library.
///
/// # Safety
/// As for sendfile(2): `offset` null or valid.
#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut libc::off_t,
    count: size_t,
) -> ssize_t {
    let current = CURRENT.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: `CURRENT` holds the live shim: set when it was made, cleared before it is freed.
        let sh = unsafe { &*current };
        let owned = catch_unwind(AssertUnwindSafe(|| sh.owns(out_fd))).unwrap_or(false);
        if owned {
            return guard(|| {
                let mut buf = vec![0u8; count.min(1 << 20)];
                // SAFETY: `buf` is writable for its length; `offset`, when not null, is valid (the
                // caller's promise).
                let got = unsafe {
                    if offset.is_null() {
                        libc::read(in_fd, buf.as_mut_ptr().cast(), buf.len())
                    } else {
                        libc::pread(in_fd, buf.as_mut_ptr().cast(), buf.len(), *offset)
                    }
                };
                if got < 0 {
                    return Err(std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO));
                }
                let sent = sh.send(out_fd, &buf[..got as usize], 0)?;
                // SAFETY: as above.
                unsafe {
                    if !offset.is_null() {
                        *offset += sent as libc::off_t;
                    } else if sent < got as usize {
                        // What the socket did not take is read again next time.
                        libc::lseek(
                            in_fd,
                            sent as libc::off_t - got as libc::off_t,
                            libc::SEEK_CUR,
                        );
                    }
                }
                ssize(sent)
            });
        }
    }
    match next_sendfile() {
        // SAFETY: the C library's sendfile, with the caller's own arguments.
        Some(next) => unsafe { next(out_fd, in_fd, offset, count) },
        None => guard(|| Err::<ssize_t, _>(libc::ENOSYS)),
    }
}

type GetsockoptFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;

/// The `getsockopt` after this library's in the lookup order (the C library's), or `None`.
fn next_getsockopt() -> Option<GetsockoptFn> {
    static NEXT: OnceLock<usize> = OnceLock::new();
    let addr = next_symbol(&NEXT, c"getsockopt", getsockopt as GetsockoptFn as usize)?;
    // SAFETY: the symbol `getsockopt` the loader found is the C library's function of this type.
    Some(unsafe { std::mem::transmute::<usize, GetsockoptFn>(addr) })
}

/// `getsockopt(2)`, exported so that a preloaded copy of this library answers for the shim's
/// descriptors (see the module's notes); every other descriptor goes to the C library.
///
/// # Safety
/// As for getsockopt(2): `len` valid and `val` writable for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let current = CURRENT.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: `CURRENT` holds the live shim: set when it was made, cleared before it is freed.
        let sh = unsafe { &*current };
        let owned = catch_unwind(AssertUnwindSafe(|| sh.owns(fd))).unwrap_or(false);
        if owned {
            return guard(|| {
                let v = sh.getsockopt_bytes(fd, level, name)?;
                // SAFETY: the caller's promise, as for getsockopt(2).
                unsafe { write_option(&v, val, len) }
            });
        }
    }
    match next_getsockopt() {
        // SAFETY: the C library's getsockopt, with the caller's own arguments.
        Some(next) => unsafe { next(fd, level, name, val, len) },
        None => guard(|| Err::<c_int, _>(libc::ENOSYS)),
    }
}

unsafe extern "C" fn pd_setsockopt(
    ud: *mut c_void,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    guard(|| {
        if val.is_null() || len == 0 {
            return Err(libc::EINVAL);
        }
        let v = if (len as usize) >= std::mem::size_of::<c_int>() {
            // SAFETY: `val` is readable for `len` bytes, at least an int, as for setsockopt(2).
            unsafe { std::ptr::read_unaligned(val as *const c_int) }
        } else if level == libc::SOL_IP {
            // Linux's IPv4 options also take a single byte (`do_ip_setsockopt`).
            // SAFETY: `val` is readable for `len` bytes, at least one.
            c_int::from(unsafe { *(val as *const u8) })
        } else {
            return Err(libc::EINVAL);
        };
        // SAFETY: see above.
        unsafe { shim(ud) }?
            .setsockopt(fd, level, name, v)
            .map(|()| 0)
    })
}

unsafe extern "C" fn pd_poll(
    ud: *mut c_void,
    fds: *mut pollfd,
    n: nfds_t,
    timeout: c_int,
) -> c_int {
    guard(|| {
        let list: &mut [pollfd] = if n == 0 {
            &mut []
        } else if fds.is_null() {
            return Err(libc::EFAULT);
        } else {
            // SAFETY: `fds` holds `n` entries, as for poll(2).
            unsafe { std::slice::from_raw_parts_mut(fds, n as usize) }
        };
        let mut v: Vec<(i32, i16, i16)> = list.iter().map(|p| (p.fd, p.events, 0)).collect();
        // SAFETY: see above.
        let ready = unsafe { shim(ud) }?.poll(&mut v, timeout)?;
        for (p, (_, _, r)) in list.iter_mut().zip(v) {
            p.revents = r;
        }
        c_int::try_from(ready).map_err(|_| libc::EOVERFLOW)
    })
}

unsafe extern "C" fn pd_netdev_send(ud: *mut c_void, buf: *const c_void, n: size_t) -> c_int {
    guard(|| {
        // SAFETY: packetdrill passes a packet of `n` bytes.
        let b = unsafe { buf_ref(buf, n) }?;
        // SAFETY: see above.
        unsafe { shim(ud) }?.netdev_send(b);
        Ok(0)
    })
}

unsafe extern "C" fn pd_netdev_receive(
    ud: *mut c_void,
    buf: *mut c_void,
    count: *mut size_t,
    time_usecs: *mut i64,
) -> c_int {
    guard(|| {
        if count.is_null() || time_usecs.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: `count` is valid: the buffer's size in, the packet's size out.
        let room = unsafe { *count };
        // SAFETY: `buf` is writable for `room` bytes.
        let out = unsafe { buf_mut(buf, room) }?;
        // SAFETY: see above.
        let (len, t) = match unsafe { shim(ud) }?.netdev_receive() {
            Some((p, t)) => {
                let n = p.len().min(out.len());
                out[..n].copy_from_slice(&p[..n]);
                (n, t)
            }
            None => {
                // Nothing will come: one byte that is no IP packet makes packetdrill fail the
                // expected packet with a parse error rather than wait for ever.
                if let Some(b) = out.first_mut() {
                    *b = 0;
                }
                (out.len().min(1), 0)
            }
        };
        // SAFETY: both pointers checked non-null above and valid by packetdrill's contract.
        unsafe {
            *count = len;
            *time_usecs = i64::try_from(t).unwrap_or(i64::MAX);
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_usleep(ud: *mut c_void, usec: useconds_t) -> c_int {
    // SAFETY: see above.
    guard(|| {
        unsafe { shim(ud) }
            .map(|s| s.usleep(u64::from(usec)))
            .map(|()| 0)
    })
}

unsafe extern "C" fn pd_gettimeofday(ud: *mut c_void, tv: *mut timeval, _tz: *mut c_void) -> c_int {
    guard(|| {
        if tv.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: see above.
        let now = unsafe { shim(ud) }?.now_micros();
        // SAFETY: `tv` is a valid `timeval`, as for gettimeofday(2).
        unsafe {
            (*tv).tv_sec = (now / 1_000_000) as libc::time_t;
            (*tv).tv_usec = (now % 1_000_000) as libc::suseconds_t;
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_epoll_create(ud: *mut c_void, size: c_int) -> c_int {
    // SAFETY: see above.
    guard(|| unsafe { shim(ud) }?.epoll_create(size))
}

unsafe extern "C" fn pd_epoll_ctl(
    ud: *mut c_void,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut c_void,
) -> c_int {
    guard(|| {
        let (events, data) = if op == libc::EPOLL_CTL_DEL {
            (0, 0)
        } else if ev.is_null() {
            return Err(libc::EFAULT);
        } else {
            // SAFETY: `ev` points to a `struct epoll_event`, as for epoll_ctl(2);
            // `read_unaligned`, as the structure is packed on x86-64.
            let e = unsafe { std::ptr::read_unaligned(ev as *const libc::epoll_event) };
            (e.events, e.u64)
        };
        // SAFETY: see above.
        unsafe { shim(ud) }?
            .epoll_ctl(epfd, op, fd, events, data)
            .map(|()| 0)
    })
}

unsafe extern "C" fn pd_epoll_wait(
    ud: *mut c_void,
    epfd: c_int,
    ev: *mut c_void,
    max: c_int,
    timeout: c_int,
) -> c_int {
    guard(|| {
        let max = usize::try_from(max)
            .ok()
            .filter(|&m| m > 0)
            .ok_or(libc::EINVAL)?;
        if ev.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: see above.
        let ready = unsafe { shim(ud) }?.epoll_wait(epfd, max, timeout)?;
        let out = ev as *mut libc::epoll_event;
        for (k, &(events, data)) in ready.iter().enumerate() {
            // SAFETY: `ev` holds `max` entries, as for epoll_wait(2), and `k < max`;
            // `write_unaligned`, as the structure is packed on x86-64.
            unsafe {
                std::ptr::write_unaligned(out.add(k), libc::epoll_event { events, u64: data })
            };
        }
        c_int::try_from(ready.len()).map_err(|_| libc::EOVERFLOW)
    })
}

unsafe extern "C" fn pd_pipe(_ud: *mut c_void, _fds: *mut c_int) -> c_int {
    guard(|| Err::<c_int, _>(libc::ENOSYS))
}

unsafe extern "C" fn pd_splice(
    _ud: *mut c_void,
    _fd_in: c_int,
    _off_in: *mut i64,
    _fd_out: c_int,
    _off_out: *mut i64,
    _len: size_t,
    _flags: c_uint,
) -> ssize_t {
    guard(|| Err::<ssize_t, _>(libc::ENOSYS))
}

/// Fills `ifc` with a new shim's functions; `flags` is packetdrill's `--so_flags` (see
/// [`ShimConfig::parse_flags`]), or null. A bad flag string is reported on stderr and the defaults
/// are used.
///
/// # Safety
/// `ifc` must point to a writable `struct packetdrill_interface`; `flags` must be null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn packetdrill_interface_init(
    flags: *const c_char,
    ifc: *mut PacketdrillInterface,
) {
    if ifc.is_null() {
        return;
    }
    let made = catch_unwind(|| {
        let text = if flags.is_null() {
            String::new()
        } else {
            // SAFETY: the caller's promise: a NUL-terminated string.
            unsafe { CStr::from_ptr(flags) }
                .to_string_lossy()
                .into_owned()
        };
        let config = ShimConfig::parse_flags(&text).unwrap_or_else(|e| {
            eprintln!("fastpath-packetdrill: {e}; using the defaults");
            ShimConfig::default()
        });
        let raw = Box::into_raw(Box::new(Shim::new(config)));
        CURRENT.store(raw, Ordering::Release);
        raw as *mut c_void
    });
    let userdata = made.unwrap_or(std::ptr::null_mut());
    let table = PacketdrillInterface {
        userdata,
        free: pd_free,
        socket: pd_socket,
        bind: pd_bind,
        listen: pd_listen,
        accept: pd_accept,
        connect: pd_connect,
        read: pd_read,
        readv: pd_readv,
        recv: pd_recv,
        recvfrom: pd_recvfrom,
        recvmsg: pd_recvmsg,
        write: pd_write,
        writev: pd_writev,
        send: pd_send,
        sendto: pd_sendto,
        sendmsg: pd_sendmsg,
        fcntl: pd_fcntl,
        ioctl: pd_ioctl,
        close: pd_close,
        shutdown: pd_shutdown,
        getsockopt: pd_getsockopt,
        setsockopt: pd_setsockopt,
        poll: pd_poll,
        netdev_send: pd_netdev_send,
        netdev_receive: pd_netdev_receive,
        usleep: pd_usleep,
        gettimeofday: pd_gettimeofday,
        epoll_create: pd_epoll_create,
        epoll_ctl: pd_epoll_ctl,
        epoll_wait: pd_epoll_wait,
        pipe: pd_pipe,
        splice: pd_splice,
    };
    // SAFETY: `ifc` is non-null and points to a writable interface struct (the caller's promise).
    unsafe { std::ptr::write(ifc, table) };
}
