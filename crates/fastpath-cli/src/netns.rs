//! Network namespaces for `serve` and `bench tun`: made with `ip netns`, removed by a guard, entered by
//! threads of their own.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sched::CloneFlags;

/// A network namespace managed by `ip netns`; removed on drop if this process created it.
pub struct Namespace {
    name: String,
    created: bool,
}

impl Namespace {
    /// Uses namespace `name`, creating it if it does not exist.
    pub fn ensure(name: &str) -> Result<Namespace, String> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(format!("bad namespace name `{name}`"));
        }
        if path(name).exists() {
            return Ok(Namespace {
                name: name.to_string(),
                created: false,
            });
        }
        run_ip(&["netns", "add", name])?;
        Ok(Namespace {
            name: name.to_string(),
            created: true,
        })
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args...`.
    pub fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run_ip(&all)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.created {
            if let Err(e) = run_ip(&["netns", "del", &self.name]) {
                eprintln!("fastpath: removing namespace {}: {e}", self.name);
            }
        }
    }
}

/// Runs `ip args...`; its error output becomes the error.
pub fn run_ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Where `ip netns` keeps namespace `name`.
pub fn path(name: &str) -> PathBuf {
    Path::new("/var/run/netns").join(name)
}

/// Runs `f` on a new thread that has entered namespace `name`, and returns its result: sockets it
/// opens belong to that namespace, whichever thread uses them later.
pub fn within<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let path = path(name);
    std::thread::spawn(move || {
        enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| "a namespace thread panicked".to_string())?
}

/// Moves the calling thread into the namespace at `path`, for good.
pub fn enter(path: &Path) -> Result<(), String> {
    let ns = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("entering {}: {e}", path.display()))
}
