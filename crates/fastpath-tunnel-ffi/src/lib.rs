//! The C API of fastpath's transparent proxy (crate `fastpath-tunnel`), for VPN apps written in C,
//! Kotlin (JNI), Swift or Go (cgo): `include/fastpath_tunnel.h`, generated from this file by cbindgen
//! (`cargo xtask header`; a test of the xtask crate fails when the committed header is
//! stale). Link with `-lfastpath_tunnel_ffi` (the shared library) or the static
//! `libfastpath_tunnel_ffi.a` (with `-lpthread -ldl -lm`).
//!
//! ```c
//! struct fastpath_tunnel_config config = {0};     // zero: every default
//! config.addr = "10.66.0.2/24";                    // the tunnel's address on the TUN link
//! config.proxy = "socks5://127.0.0.1:1080";        // NULL: direct
//! struct fastpath_tunnel *t = fastpath_tunnel_start(tun_fd, &config);
//! if (!t) fprintf(stderr, "%s\n", fastpath_tunnel_last_error());
//! ...
//! struct fastpath_tunnel_stats s;
//! fastpath_tunnel_stats(t, &s);                    // any thread, while it runs
//! fastpath_tunnel_stop(t);                         // any thread; returns at once
//! fastpath_tunnel_free(t);                         // waits for it to stop, then frees
//! ```
//!
//! The rules: the descriptor passed to `fastpath_tunnel_start` belongs to the tunnel from then on,
//! whether it starts or not (it is closed when the tunnel is freed, or at once on failure); it must be
//! a TUN descriptor attached to its interface, opened with `IFF_TUN | IFF_NO_PI` (and `IFF_VNET_HDR`
//! for checksum and segmentation offloads; without it the tunnel reads and writes bare packets).
//! `fastpath_tunnel_stop` and `fastpath_tunnel_stats` may be called from any thread, at the same time
//! as each other; `fastpath_tunnel_free` once, when no other call on the handle is under way. Strings
//! are read during the call only. Every function returns an error rather than unwind: a panic inside
//! is caught and reported as `FASTPATH_TUNNEL_ERROR_PANIC`. The last error of the calling thread is
//! `fastpath_tunnel_last_error()` (a message) and `fastpath_tunnel_last_error_code()`.
//!
//! `unsafe` is in this crate only where C hands pointers over, each block with a `// SAFETY:` comment.

#![cfg(target_os = "linux")]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
// The C names of the header.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use ::fastpath_tunnel::{Config, ErrorKind, Protect, Routes, Stats, Tunnel, Upstream};

/// Success.
pub const FASTPATH_TUNNEL_OK: c_int = 0;
/// The configuration cannot work (a malformed address, proxy or route; limits of 0 are defaults).
pub const FASTPATH_TUNNEL_ERROR_CONFIG: c_int = -1;
/// The descriptor is not a TUN descriptor the tunnel can use.
pub const FASTPATH_TUNNEL_ERROR_DESCRIPTOR: c_int = -2;
/// The tunnel failed to start, or failed while it ran.
pub const FASTPATH_TUNNEL_ERROR_RUN: c_int = -3;
/// A null pointer where one was needed.
pub const FASTPATH_TUNNEL_ERROR_NULL: c_int = -4;
/// A bug: a panic inside the library, caught at the boundary.
pub const FASTPATH_TUNNEL_ERROR_PANIC: c_int = -5;

/// Flag: no writes through io_uring (plain `write`s).
pub const FASTPATH_TUNNEL_NO_IO_URING: u32 = 1;
/// Flag: no checksum or segmentation offload, even on an `IFF_VNET_HDR` descriptor.
pub const FASTPATH_TUNNEL_NO_OFFLOAD: u32 = 2;

/// How the tunnel runs. Zero (or NULL) in any field means its default; strings are UTF-8, read
/// during `fastpath_tunnel_start` only.
#[repr(C)]
pub struct fastpath_tunnel_config {
    /// The tunnel's own IPv4 address on the TUN link with the link's prefix, such as
    /// "10.66.0.2/24" (the default); it answers ping there.
    pub addr: *const c_char,
    /// Its IPv6 address with the prefix, such as "fd66::2/64"; NULL: none.
    pub addr6: *const c_char,
    /// The interface's MTU (the tunnel neither sets nor reads it); 0: 1500.
    pub mtu: u32,
    /// Where flows go unless a route says otherwise: "direct" (NULL),
    /// `socks5://[USER[:PASSWORD]@]IP:PORT` or `http://[USER[:PASSWORD]@]IP:PORT` (HTTP CONNECT, TCP
    /// only: UDP routed there is dropped).
    pub proxy: *const c_char,
    /// Routes by destination, one "MATCH=UPSTREAM" per line (a prefix, an address or a domain;
    /// "default=UPSTREAM" sets the default; '#' starts a comment line); the first match decides.
    pub routes: *const c_char,
    /// The fake DNS range, such as "198.18.0.0/15": DNS queries for IPv4 addresses are answered
    /// with addresses standing for the names; NULL: off.
    pub fake_dns: *const c_char,
    /// Bind every outgoing socket to this interface (SO_BINDTODEVICE); NULL: no binding. A VPN app
    /// on Android protects its sockets instead (`VpnService.protect` or an excluded app).
    pub bind_interface: *const c_char,
    /// Milliseconds a destination has to accept a TCP connection; 0: 10,000.
    pub connect_timeout_ms: u32,
    /// Milliseconds of silence after which a UDP flow expires; 0: 60,000.
    pub udp_idle_ms: u32,
    /// TCP connections relayed at once, at most; 0: 16,384.
    pub max_tcp_flows: u32,
    /// UDP flows relayed at once, at most; 0: 1,024.
    pub max_udp_flows: u32,
    /// `FASTPATH_TUNNEL_NO_IO_URING`, `FASTPATH_TUNNEL_NO_OFFLOAD`, or 0.
    pub flags: u32,
    /// Called with every socket the tunnel opens towards the network (to destinations and proxies),
    /// before it connects, from the tunnel's own threads: returns 0 to go on, anything else to fail
    /// that connection or flow. On Android, call `VpnService.protect(fd)` here (through JNI) so that
    /// the tunnel's traffic does not loop back into the VPN. NULL: none.
    pub protect: Option<unsafe extern "C" fn(context: *mut c_void, fd: c_int) -> c_int>,
    /// Passed to `protect` as it is; must stay valid, and usable from any thread, until the tunnel
    /// is freed.
    pub protect_context: *mut c_void,
}

/// The protect hook's context, handed to the tunnel's threads.
#[derive(Clone, Copy)]
struct Context(*mut c_void);

// SAFETY: the header requires `protect_context` to be usable from any thread until the tunnel is
// freed; this crate never dereferences it, only passes it back to the caller's function.
#[allow(unsafe_code)]
unsafe impl Send for Context {}
// SAFETY: as for `Send`: shared only to be passed back, never read here.
#[allow(unsafe_code)]
unsafe impl Sync for Context {}

/// The Rust hook a C `protect` function stands for.
#[allow(unsafe_code)]
fn protect_hook(f: unsafe extern "C" fn(*mut c_void, c_int) -> c_int, context: Context) -> Protect {
    Protect::new(move |socket: BorrowedFd<'_>| {
        let context = context;
        // SAFETY: the caller's function, called as the header describes it: with its context and a
        // descriptor that stays open during the call (the socket is borrowed).
        match unsafe { f(context.0, socket.as_raw_fd()) } {
            0 => Ok(()),
            rc => Err(std::io::Error::other(format!(
                "the protect hook refused the socket ({rc})"
            ))),
        }
    })
}

/// The tunnel's counters, filled by `fastpath_tunnel_stats`. The relays' are current; the stack's
/// (`stack_drops`, `stack_connections`) at most a quarter of a second old while it runs.
#[repr(C)]
#[derive(Default)]
pub struct fastpath_tunnel_stats {
    /// TCP connections relayed (their destination tried), open now, refused (RST), answered with
    /// an ICMP unreachable, left unanswered (timed out), reset while relayed, refused past the limit.
    pub tcp_flows: u64,
    pub tcp_live: u64,
    pub tcp_refused: u64,
    pub tcp_unreachable: u64,
    pub tcp_timed_out: u64,
    pub tcp_reset: u64,
    pub tcp_over_limit: u64,
    /// Connections whose handshake came first (a SYN flood had held SYNs at their bound), their
    /// destination asked after.
    pub tcp_handshake_first: u64,
    /// TCP bytes from the applications, and to them.
    pub tcp_up: u64,
    pub tcp_down: u64,
    /// UDP flows opened, expired; datagrams over the flow limit, not sent, refused by their
    /// destination (passed on as port unreachable).
    pub udp_flows: u64,
    pub udp_expired: u64,
    pub udp_over_limit: u64,
    pub udp_send_failed: u64,
    pub udp_refused: u64,
    /// UDP bytes from the applications, and to them.
    pub udp_up: u64,
    pub udp_down: u64,
    /// Datagrams dropped because their route is an HTTP proxy.
    pub udp_no_proxy: u64,
    /// Fake DNS: queries answered, flows to an address no name has, names held.
    pub dns_answered: u64,
    pub dns_unknown: u64,
    pub dns_names: u64,
    /// Packets the stack dropped (every reason), connections in its tables.
    pub stack_drops: u64,
    pub stack_connections: u64,
    /// The TUN descriptor: packets and bytes read (from the applications) and written (to them),
    /// packets dropped there.
    pub tun_rx_packets: u64,
    pub tun_rx_bytes: u64,
    pub tun_tx_packets: u64,
    pub tun_tx_bytes: u64,
    pub tun_dropped: u64,
}

/// A running tunnel (opaque).
pub struct fastpath_tunnel {
    tunnel: Tunnel,
}

thread_local! {
    /// The calling thread's last error: its code and message.
    static LAST_ERROR: RefCell<(c_int, CString)> = RefCell::new((FASTPATH_TUNNEL_OK, CString::default()));
}

/// Records `code` and `message` as the calling thread's last error, and returns the code.
fn fail(code: c_int, message: impl Into<String>) -> c_int {
    // A message with a NUL inside is cut there.
    let mut bytes = message.into().into_bytes();
    if let Some(nul) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(nul);
    }
    let message = CString::new(bytes).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = (code, message));
    code
}

/// Runs `f`, turning a panic into `FASTPATH_TUNNEL_ERROR_PANIC` (`on_panic` is returned then).
fn guarded<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            fail(
                FASTPATH_TUNNEL_ERROR_PANIC,
                format!("fastpath-tunnel panicked (a bug): {what}"),
            );
            on_panic
        }
    }
}

/// A C string field: `None` for NULL.
#[allow(unsafe_code)]
fn string(p: *const c_char, field: &str) -> Result<Option<String>, String> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller passes NULL or a NUL-terminated string that stays valid and unchanged
    // during `fastpath_tunnel_start` (the header says so); NULL was handled above.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(|s| Some(s.to_string()))
        .map_err(|_| format!("{field}: not UTF-8"))
}

/// The Rust configuration a C one stands for.
fn config(c: &fastpath_tunnel_config) -> Result<Config, String> {
    let mut config = Config::default();
    if let Some(a) = string(c.addr, "addr")? {
        config.addr = a.parse().map_err(|e| format!("addr `{a}`: {e}"))?;
    }
    if let Some(a) = string(c.addr6, "addr6")? {
        config.addr6 = Some(a.parse().map_err(|e| format!("addr6 `{a}`: {e}"))?);
    }
    if c.mtu != 0 {
        config.mtu = c.mtu as usize;
    }
    let mut routes = Routes::default();
    if let Some(text) = string(c.routes, "routes")? {
        routes
            .parse_rules(&text)
            .map_err(|e| format!("routes: {e}"))?;
    }
    if let Some(p) = string(c.proxy, "proxy")? {
        routes.default = Upstream::parse(&p).map_err(|e| format!("proxy: {e}"))?;
    }
    config.routes = routes;
    if let Some(r) = string(c.fake_dns, "fake_dns")? {
        config.fake_dns = Some(r.parse().map_err(|e| format!("fake_dns `{r}`: {e}"))?);
    }
    config.bind_interface = string(c.bind_interface, "bind_interface")?;
    if c.connect_timeout_ms != 0 {
        config.connect_timeout = Duration::from_millis(c.connect_timeout_ms.into());
    }
    if c.udp_idle_ms != 0 {
        config.udp_idle = Duration::from_millis(c.udp_idle_ms.into());
    }
    if c.max_tcp_flows != 0 {
        config.max_tcp_flows = c.max_tcp_flows as usize;
    }
    if c.max_udp_flows != 0 {
        config.max_udp_flows = c.max_udp_flows as usize;
    }
    config.protect = c
        .protect
        .map(|f| protect_hook(f, Context(c.protect_context)));
    config.io_uring = c.flags & FASTPATH_TUNNEL_NO_IO_URING == 0;
    config.offload = c.flags & FASTPATH_TUNNEL_NO_OFFLOAD == 0;
    Ok(config)
}

/// Starts the tunnel on `fd`, an open TUN descriptor (see the header's introduction), with
/// `cfg` (NULL: every default). Returns once it is ready, or NULL on failure, with
/// `fastpath_tunnel_last_error()` saying why. The descriptor is the tunnel's from now on, even on
/// failure (then closed at once); a negative one fails with `FASTPATH_TUNNEL_ERROR_DESCRIPTOR`.
///
/// # Safety
///
/// `fd` is an open descriptor the caller gives up; `cfg` is NULL or points at a valid
/// configuration whose strings are NULL or NUL-terminated, all unchanged during the call.
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn fastpath_tunnel_start(
    fd: c_int,
    cfg: *const fastpath_tunnel_config,
) -> *mut fastpath_tunnel {
    guarded(std::ptr::null_mut(), || {
        if fd < 0 {
            fail(FASTPATH_TUNNEL_ERROR_DESCRIPTOR, format!("descriptor {fd}"));
            return std::ptr::null_mut();
        }
        // SAFETY: the caller hands over `fd`, an open descriptor it no longer uses (the header says
        // the tunnel owns it from this call on); it is not negative.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let parsed = if cfg.is_null() {
            Ok(Config::default())
        } else {
            // SAFETY: a non-null `cfg` points at a `struct fastpath_tunnel_config` the caller
            // keeps valid and unchanged during this call.
            config(unsafe { &*cfg })
        };
        let config = match parsed {
            Ok(c) => c,
            Err(e) => {
                fail(FASTPATH_TUNNEL_ERROR_CONFIG, e);
                return std::ptr::null_mut();
            }
        };
        match Tunnel::start(fd, config) {
            Ok(tunnel) => {
                fail(FASTPATH_TUNNEL_OK, "");
                Box::into_raw(Box::new(fastpath_tunnel { tunnel }))
            }
            Err(e) => {
                let code = match e.kind {
                    ErrorKind::Config => FASTPATH_TUNNEL_ERROR_CONFIG,
                    ErrorKind::Descriptor => FASTPATH_TUNNEL_ERROR_DESCRIPTOR,
                    _ => FASTPATH_TUNNEL_ERROR_RUN,
                };
                fail(code, e.message);
                std::ptr::null_mut()
            }
        }
    })
}

/// Asks the tunnel to stop and returns at once (`fastpath_tunnel_free` waits for it). Any thread;
/// harmless twice; NULL is ignored.
///
/// # Safety
///
/// `tunnel` is NULL or a handle from `fastpath_tunnel_start` not yet freed.
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn fastpath_tunnel_stop(tunnel: *const fastpath_tunnel) {
    guarded((), || {
        // SAFETY: NULL or a handle from `fastpath_tunnel_start` not yet freed (the header's rule);
        // only shared access is taken, and the tunnel is safe to share between threads.
        if let Some(t) = unsafe { tunnel.as_ref() } {
            t.tunnel.stop();
        }
    })
}

/// Fills `*out` with the tunnel's counters. Any thread, while it runs or after it stopped. Returns
/// 0, or `FASTPATH_TUNNEL_ERROR_NULL`.
///
/// # Safety
///
/// `tunnel` is NULL or a handle not yet freed; `out` is NULL or points at writable memory for a
/// `struct fastpath_tunnel_stats` that nothing else uses during the call.
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn fastpath_tunnel_stats(
    tunnel: *const fastpath_tunnel,
    out: *mut fastpath_tunnel_stats,
) -> c_int {
    guarded(FASTPATH_TUNNEL_ERROR_PANIC, || {
        // SAFETY: NULL or a live handle, shared access only (as in `fastpath_tunnel_stop`).
        let Some(t) = (unsafe { tunnel.as_ref() }) else {
            return fail(FASTPATH_TUNNEL_ERROR_NULL, "no tunnel");
        };
        // SAFETY: NULL or a pointer to a `struct fastpath_tunnel_stats` the caller owns, writable
        // and not read by anyone else during the call.
        let Some(out) = (unsafe { out.as_mut() }) else {
            return fail(
                FASTPATH_TUNNEL_ERROR_NULL,
                "nowhere to write the statistics",
            );
        };
        *out = stats_of(&t.tunnel.stats());
        FASTPATH_TUNNEL_OK
    })
}

/// The C form of the counters.
fn stats_of(s: &Stats) -> fastpath_tunnel_stats {
    let t = &s.totals;
    fastpath_tunnel_stats {
        tcp_flows: t.tcp_flows,
        tcp_live: t.tcp_live,
        tcp_refused: t.tcp_refused,
        tcp_unreachable: t.tcp_unreachable,
        tcp_timed_out: t.tcp_timed_out,
        tcp_reset: t.tcp_reset,
        tcp_over_limit: t.tcp_over_limit,
        tcp_handshake_first: t.tcp_handshake_first,
        tcp_up: t.tcp_up,
        tcp_down: t.tcp_down,
        udp_flows: t.udp_flows,
        udp_expired: t.udp_expired,
        udp_over_limit: t.udp_over_limit,
        udp_send_failed: t.udp_send_failed,
        udp_refused: t.udp_refused,
        udp_up: t.udp_up,
        udp_down: t.udp_down,
        udp_no_proxy: t.udp_no_proxy,
        dns_answered: t.dns_answered,
        dns_unknown: t.dns_unknown,
        dns_names: s.names as u64,
        stack_drops: s.drops,
        stack_connections: s.connections as u64,
        tun_rx_packets: s.tun.rx_packets,
        tun_rx_bytes: s.tun.rx_bytes,
        tun_tx_packets: s.tun.tx_packets,
        tun_tx_bytes: s.tun.tx_bytes,
        tun_dropped: s.tun.dropped,
    }
}

/// Stops the tunnel if it runs, waits for it, closes its descriptor and frees the handle. Returns
/// 0, or `FASTPATH_TUNNEL_ERROR_RUN` if it had failed while running (the last error says how).
/// NULL is ignored. The handle is invalid afterwards.
///
/// # Safety
///
/// `tunnel` is NULL or a handle not yet freed, with no other call on it under way.
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn fastpath_tunnel_free(tunnel: *mut fastpath_tunnel) -> c_int {
    guarded(FASTPATH_TUNNEL_ERROR_PANIC, || {
        if tunnel.is_null() {
            return FASTPATH_TUNNEL_OK;
        }
        // SAFETY: a handle from `fastpath_tunnel_start` (Box::into_raw), freed once, with no other
        // call on it under way (the header's rule): ownership comes back here.
        let t = unsafe { Box::from_raw(tunnel) };
        match t.tunnel.join() {
            Ok(_) => FASTPATH_TUNNEL_OK,
            Err(e) => fail(FASTPATH_TUNNEL_ERROR_RUN, e.message),
        }
    })
}

/// The calling thread's last error message ("" if none), valid until its next call into this
/// library; never NULL.
#[no_mangle]
#[allow(unsafe_code)]
pub extern "C" fn fastpath_tunnel_last_error() -> *const c_char {
    guarded(c"".as_ptr(), || LAST_ERROR.with(|e| e.borrow().1.as_ptr()))
}

/// The calling thread's last error code (0 if the last call succeeded).
#[no_mangle]
#[allow(unsafe_code)]
pub extern "C" fn fastpath_tunnel_last_error_code() -> c_int {
    guarded(FASTPATH_TUNNEL_ERROR_PANIC, || {
        LAST_ERROR.with(|e| e.borrow().0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zeroed_configuration_is_the_default() {
        let c = fastpath_tunnel_config {
            addr: std::ptr::null(),
            addr6: std::ptr::null(),
            mtu: 0,
            proxy: std::ptr::null(),
            routes: std::ptr::null(),
            fake_dns: std::ptr::null(),
            bind_interface: std::ptr::null(),
            connect_timeout_ms: 0,
            udp_idle_ms: 0,
            max_tcp_flows: 0,
            max_udp_flows: 0,
            flags: 0,
            protect: None,
            protect_context: std::ptr::null_mut(),
        };
        let got = config(&c).unwrap();
        let def = Config::default();
        assert_eq!(
            (got.addr, got.mtu, got.max_tcp_flows, got.connect_timeout),
            (def.addr, def.mtu, def.max_tcp_flows, def.connect_timeout)
        );
        assert_eq!(got.routes, Routes::default());
    }

    #[test]
    #[allow(unsafe_code)]
    fn errors_are_reported_not_unwound() {
        // SAFETY: a negative descriptor and no configuration.
        assert!(unsafe { fastpath_tunnel_start(-1, std::ptr::null()) }.is_null());
        assert_eq!(
            fastpath_tunnel_last_error_code(),
            FASTPATH_TUNNEL_ERROR_DESCRIPTOR
        );
        let (ours, _theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(ours);
        let proxy = c"gopher://1.2.3.4:70";
        let c = fastpath_tunnel_config {
            proxy: proxy.as_ptr(),
            ..zeroed()
        };
        // SAFETY: a descriptor given up, a configuration with one string, alive for the call.
        assert!(unsafe { fastpath_tunnel_start(fd, &c) }.is_null());
        assert_eq!(
            fastpath_tunnel_last_error_code(),
            FASTPATH_TUNNEL_ERROR_CONFIG
        );
        // SAFETY: the library's message is a NUL-terminated string valid until the next call.
        let message = unsafe { CStr::from_ptr(fastpath_tunnel_last_error()) };
        assert!(message.to_str().unwrap().contains("gopher"), "{message:?}");
        let mut s = fastpath_tunnel_stats::default();
        // SAFETY: NULL handles, which the functions refuse or ignore.
        unsafe {
            assert_eq!(
                fastpath_tunnel_stats(std::ptr::null(), &mut s),
                FASTPATH_TUNNEL_ERROR_NULL
            );
            assert_eq!(
                fastpath_tunnel_free(std::ptr::null_mut()),
                FASTPATH_TUNNEL_OK
            );
        }
        assert_eq!(guarded(7, || panic!("boom")), 7);
        assert_eq!(
            fastpath_tunnel_last_error_code(),
            FASTPATH_TUNNEL_ERROR_PANIC
        );
    }

    fn zeroed() -> fastpath_tunnel_config {
        fastpath_tunnel_config {
            addr: std::ptr::null(),
            addr6: std::ptr::null(),
            mtu: 0,
            proxy: std::ptr::null(),
            routes: std::ptr::null(),
            fake_dns: std::ptr::null(),
            bind_interface: std::ptr::null(),
            connect_timeout_ms: 0,
            udp_idle_ms: 0,
            max_tcp_flows: 0,
            max_udp_flows: 0,
            flags: 0,
            protect: None,
            protect_context: std::ptr::null_mut(),
        }
    }
}
