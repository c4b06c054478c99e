//! Network namespaces for `serve` and `bench tun`: made with `ip netns`, removed by a guard, entered by
//! threads of their own.
//!
//! A namespace this program creates has its creator recorded in `/run/fastpath/netns/NAME` (pid and
//! process start time). A process killed outright (SIGKILL) cannot remove its namespace; the next run
//! that wants the name finds the creator gone, removes the leftover namespace and creates it anew. A
//! namespace without a record (made by someone else) is used as it is and left in place. A record
//! whose namespace is gone (removed by someone else, such as `ip netns del`, while its creator was
//! killed or is gone) and whose creator is gone is deleted by the next run that creates a namespace.

use std::fs::{self, File};
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
        let record = owner_record(name);
        if path(name).exists() {
            match fs::read_to_string(&record) {
                Ok(owner) if !alive(&owner) => {
                    let pid = owner.split_whitespace().next().unwrap_or("?");
                    eprintln!(
                        "fastpath: removing stale namespace {name}: the fastpath that created it \
                         (pid {pid}) is gone"
                    );
                    run_ip_with_host_mounts(&["netns", "del", name])?;
                    let _ = fs::remove_file(&record);
                }
                _ => {
                    return Ok(Namespace {
                        name: name.to_string(),
                        created: false,
                    })
                }
            }
        }
        // Recorded first, so that a namespace never exists without its creator's record.
        let me = own_record()?;
        fs::create_dir_all(OWNERS)
            .and_then(|_| fs::write(&record, &me))
            .map_err(|e| format!("recording the namespace in {}: {e}", record.display()))?;
        if let Err(e) = run_ip_with_host_mounts(&["netns", "add", name]) {
            // Someone else may have created it meanwhile: keep their record.
            if fs::read_to_string(&record).is_ok_and(|r| r == me) {
                let _ = fs::remove_file(&record);
            }
            return Err(e);
        }
        remove_orphaned_records(Path::new(OWNERS));
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
        self.ip_output(args).map(|_| ())
    }

    /// Runs `ip -n NAME args...` and returns its output.
    pub fn ip_output(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip_output(&all)
    }
}

/// Refuses up front, in plain words, to do what needs root, the TUN device and ip(8) without them:
/// `what` (`serve`, `bench tun`...) would otherwise fail on the first step that needs one, with a
/// message about that step (a permission denied on a file under /run).
pub fn check_privileges(what: &str) -> Result<(), String> {
    let root = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    let mut missing = Vec::new();
    if !root {
        missing.push("it is not running as root");
    }
    if !Path::new("/dev/net/tun").exists() {
        missing.push("there is no /dev/net/tun");
    }
    if !on_path("ip") {
        missing.push("ip(8) is not installed (Debian: apt-get install iproute2)");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what} needs root, /dev/net/tun and ip(8): {}",
            missing.join("; ")
        ))
    }
}

/// Whether an executable `name` is in a directory of `PATH`.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Where the creators of namespaces are recorded.
const OWNERS: &str = "/run/fastpath/netns";

/// The file recording who created namespace `name`.
fn owner_record(name: &str) -> PathBuf {
    Path::new(OWNERS).join(name)
}

/// Deletes the records in `owners` that stand for nothing: the namespace is gone and so is the
/// process that created it. (A record whose creator still runs is kept: it may be about to create
/// its namespace.)
fn remove_orphaned_records(owners: &Path) {
    let Ok(entries) = fs::read_dir(owners) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let record = entry.path();
        let orphaned =
            !path(&name).exists() && fs::read_to_string(&record).is_ok_and(|owner| !alive(&owner));
        if orphaned {
            let _ = fs::remove_file(&record);
        }
    }
}

/// The start time of process `pid` (clock ticks after boot), if it exists.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it. The
    // start time is field 22, the 20th after the name.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process's record: "PID START".
fn own_record() -> Result<String, String> {
    let pid = std::process::id();
    let start = start_time(pid).ok_or("reading /proc/self/stat")?;
    Ok(format!("{pid} {start}\n"))
}

/// Whether the process a record names still runs (the same process: a reused pid has another start
/// time). A record that cannot be read is taken as alive, so that nothing is removed on a guess.
fn alive(record: &str) -> bool {
    let mut fields = record.split_whitespace();
    let (Some(Ok(pid)), Some(Ok(start))) = (
        fields.next().map(str::parse::<u32>),
        fields.next().map(str::parse::<u64>),
    ) else {
        return true;
    };
    start_time(pid) == Some(start)
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.created {
            if let Err(e) = run_ip_with_host_mounts(&["netns", "del", &self.name]) {
                eprintln!("fastpath: removing namespace {}: {e}", self.name);
            }
            let _ = fs::remove_file(owner_record(&self.name));
        }
    }
}

/// Runs `ip netns add` or `del` so that the namespace's name is seen by every process: a named
/// namespace is a bind mount on /run/netns/NAME, and a process in a mount namespace of its own (run
/// by `ip netns exec`, which makes one that receives the host's mounts but does not pass its own
/// back) would make a mount only it sees, leaving the host an empty file that cannot be entered
/// ("setting the network namespace failed: Invalid argument"). There, `ip` runs in the mount
/// namespace of the nearest ancestor process that is in another one (the shell that ran `ip netns
/// exec`), through `nsenter`; the mount then reaches this process too.
fn run_ip_with_host_mounts(args: &[&str]) -> Result<(), String> {
    let Some(mounts) = outer_mount_namespace() else {
        return run_ip(args);
    };
    let out = Command::new("nsenter")
        .arg(format!("--mount={}", mounts.display()))
        .arg("--")
        .arg("ip")
        .args(args)
        .output()
        .map_err(|e| {
            format!(
                "running nsenter (util-linux), needed to make a namespace from inside another \
                 mount namespace (ip netns exec): {e}"
            )
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nsenter --mount={} ip {}: {}",
            mounts.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The mount namespace (its `/proc/PID/ns/mnt`) of the nearest ancestor process in another mount
/// namespace than this one, if there is one: the one `ip netns exec` was run from.
fn outer_mount_namespace() -> Option<PathBuf> {
    let mounts = |pid: u32| fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    let own = fs::read_link("/proc/self/ns/mnt").ok()?;
    let mut pid = std::process::id();
    // A bounded walk: a process's parent chain ends at 1 (or at 0, outside our PID namespace).
    for _ in 0..64 {
        pid = parent_of(pid)?;
        if pid == 0 {
            return None;
        }
        if mounts(pid).is_some_and(|m| m != own) {
            return Some(PathBuf::from(format!("/proc/{pid}/ns/mnt")));
        }
    }
    None
}

/// Process `pid`'s parent, from `/proc/PID/stat` (the field after the command's closing
/// parenthesis and the state; the command may itself hold spaces and parentheses).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Runs `ip args...`; its error output becomes the error.
pub fn run_ip(args: &[&str]) -> Result<(), String> {
    ip_output(args).map(|_| ())
}

/// Runs `ip args...` and returns its output; its error output becomes the error.
pub fn ip_output(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_gone_namespaces_and_creators_are_removed() {
        let owners = std::env::temp_dir().join(format!("fastpath-owners-{}", std::process::id()));
        fs::create_dir_all(&owners).unwrap();
        // No namespace has these names; the first creator is gone (no pid 0 runs with that start
        // time), the second is this process, still running.
        let gone = "fp-unit-no-such-namespace-gone";
        let live = "fp-unit-no-such-namespace-live";
        fs::write(owners.join(gone), "999999999 12345\n").unwrap();
        fs::write(owners.join(live), own_record().unwrap()).unwrap();
        remove_orphaned_records(&owners);
        assert!(
            !owners.join(gone).exists(),
            "the orphaned record is still there"
        );
        assert!(
            owners.join(live).exists(),
            "a live creator's record was removed"
        );
        fs::remove_dir_all(&owners).unwrap();
    }
}
