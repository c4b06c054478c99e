//! What the Linux links (TUN, AF_XDP) share of the operating system: work done inside a network
//! namespace on a short-lived thread of its own, `struct ifreq` for the interface ioctls, and
//! errors that say which call failed. No `unsafe` here: the calls that need it stay in each link's
//! `sys.rs`.

use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::stat::Mode;

/// Runs `f` in namespace `netns` (a name `ip netns` knows, looked up in `/var/run/netns/`, or a
/// path), on a thread called `thread` that enters it and ends, so that the caller's threads never
/// move; `None` runs it here. Descriptors `f` opens keep working from any thread.
pub(crate) fn in_netns<T: Send + 'static>(
    netns: Option<&str>,
    thread: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let Some(ns) = netns else {
        return f();
    };
    let path = if ns.contains('/') {
        PathBuf::from(ns)
    } else {
        PathBuf::from("/var/run/netns").join(ns)
    };
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            enter_netns(&path)?;
            f()
        })?
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

/// Moves the calling thread into the network namespace at `path`. Only this thread moves.
fn enter_netns(path: &Path) -> io::Result<()> {
    let ns = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| with_context(e, &format!("opening namespace {}", path.display())))?;
    nix::sched::setns(ns, CloneFlags::CLONE_NEWNET)
        .map_err(|e| with_context(e, &format!("entering namespace {}", path.display())))
}

/// `e` as an I/O error that names what failed.
pub(crate) fn with_context(e: Errno, what: &str) -> io::Error {
    let err = io::Error::from(e);
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

/// `struct ifreq` as the TUN and interface ioctls read it: the name, then a 24-byte union of
/// which a `short`, an `int`, a `sockaddr` or a pointer at its start is used. Sized and aligned
/// like the 64-bit kernel's (40 bytes), which is at least as large as every ABI's, and fully
/// initialized, so the kernel never reads uninitialized memory.
#[repr(C, align(8))]
pub(crate) struct IfReq {
    pub(crate) name: [u8; libc::IFNAMSIZ],
    pub(crate) data: [u8; 24],
}

impl IfReq {
    /// A request for interface `name` (empty: the kernel picks one, for `TUNSETIFF`); fails if the
    /// name does not fit with its terminating NUL.
    pub(crate) fn new(name: &str) -> io::Result<IfReq> {
        let bytes = name.as_bytes();
        if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "bad interface name `{name}` (at most {} bytes, no NUL)",
                    libc::IFNAMSIZ - 1
                ),
            ));
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        req.name[..bytes.len()].copy_from_slice(bytes);
        Ok(req)
    }

    /// The name as the kernel left it (up to the first NUL).
    pub(crate) fn name(&self) -> String {
        let end = self
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}
