//! What the TUN interop tests share: the environment check, namespaces that clean up after
//! themselves, `fastpath serve` as a child process, reading its counters, and a bench's JSON rows.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

pub const KERNEL: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 1);
pub const FASTPATH: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
pub const ECHO: u16 = 7;
pub const DISCARD: u16 = 9;

/// Runs `fastpath ARGS` (a bench with `--json -`), which must succeed, and returns its pid, the
/// tables it printed (on standard error) and the JSON rows (standard output, alone).
pub fn bench_rows(args: &[&str]) -> (u32, String, Vec<serde_json::Value>) {
    let child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the bench");
    let pid = child.id();
    let out = child.wait_with_output().expect("the bench's output");
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{json}{text}");
    let rows = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("standard output is not JSON rows alone: {e}\n{json}"));
    (pid, text, rows)
}

/// True when this machine can run the test; otherwise prints why and returns false, or panics if
/// `FASTPATH_REQUIRE_TUN=1`.
pub fn environment_ok(test: &str) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root");
    }
    if !Path::new("/dev/net/tun").exists() {
        missing.push("/dev/net/tun");
    }
    for tool in ["ip", "ping"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            missing.push(tool);
        }
    }
    if missing.is_empty() {
        return true;
    }
    let why = format!("{test}: needs {}", missing.join(", "));
    if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
        panic!("{why} (FASTPATH_REQUIRE_TUN=1)");
    }
    eprintln!("skipping {why}");
    false
}

/// A namespace name no other test (or test run) uses.
pub fn unique_netns() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "fp-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn netns_exists(name: &str) -> bool {
    Path::new("/var/run/netns").join(name).exists()
}

/// `fastpath serve` in namespace `netns`; on drop, stops it (SIGTERM, then SIGKILL) and removes the
/// namespace whoever created it.
pub struct Server {
    child: Child,
    netns: String,
    lines: Receiver<String>,
    /// Output lines read so far.
    output: Vec<String>,
}

impl Server {
    /// Starts `fastpath serve` in `netns` with `extra` options and waits for its `ready` line.
    pub fn start(netns: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(["serve", "--tun", "fpt0", "--netns", netns])
            .args(["--kernel-addr", "10.7.0.1/24", "--addr", "10.7.0.2"])
            .args(["--duration", "120"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn fastpath serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            netns: netns.to_string(),
            lines,
            output: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match server.lines.recv_timeout(left) {
                Ok(line) => {
                    let ready = line.starts_with("ready ");
                    server.output.push(line);
                    if ready {
                        break;
                    }
                }
                Err(_) => panic!(
                    "fastpath serve never said ready; it said:\n{}",
                    server.output.join("\n")
                ),
            }
        }
        // `via` names the kernel's side: the TUN or TAP interface, or with `--xdp` the veth's
        // kernel end, `fpt0k`.
        let ready = server.output.last().unwrap();
        assert!(
            ready.starts_with("ready 10.7.0.2 via fpt0")
                && ready.ends_with(&format!(" in {netns} (kernel 10.7.0.1/24)")),
            "{ready}"
        );
        server
    }

    /// Waits up to `timeout` for the server to exit by itself; returns everything it printed.
    pub fn wait_exit(mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            while let Ok(line) = self.lines.try_recv() {
                self.output.push(line);
            }
            assert!(
                Instant::now() < deadline,
                "fastpath serve did not finish in {timeout:?}:\n{}",
                self.output.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.output.push(line);
        }
        let output = self.output.join("\n");
        assert!(
            status.success(),
            "fastpath serve exited {status}:\n{output}"
        );
        output
    }

    /// Stops the server with `signal`; returns everything it printed. Panics if it did not exit
    /// cleanly.
    pub fn stop(mut self, signal: Signal) -> String {
        nix::sys::signal::kill(Pid::from_raw(self.child.id() as i32), signal).expect("signal");
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "fastpath serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.output.push(line);
        }
        let output = self.output.join("\n");
        assert!(
            status.success(),
            "fastpath serve exited {status}:\n{output}"
        );
        output
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = nix::sys::signal::kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(3);
            while let Ok(None) = self.child.try_wait() {
                if Instant::now() > deadline {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if netns_exists(&self.netns) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.netns])
                .status();
        }
    }
}

/// A namespace the test creates (so `serve` finds it and leaves it); removed on drop.
pub struct TestNetns(pub String);

impl TestNetns {
    pub fn create() -> TestNetns {
        let name = unique_netns();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {name}");
        TestNetns(name)
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        if netns_exists(&self.0) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
        // fastpath's record of who created it, should a killed fastpath have left one.
        let _ = std::fs::remove_file(Path::new(OWNER_RECORDS).join(&self.0));
    }
}

/// Where fastpath records the creators of the namespaces it makes.
pub const OWNER_RECORDS: &str = "/run/fastpath/netns";

/// The number in front of `what` in the server's counters ("    12 what").
pub fn counter(output: &str, what: &str) -> u64 {
    output
        .lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(' ')?;
            (rest == what).then(|| n.parse().ok())?
        })
        .unwrap_or(0)
}

/// Runs `f` on a thread that entered namespace `netns`: sockets it creates live there.
pub fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = PathBuf::from("/var/run/netns").join(netns);
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).expect("open namespace");
        nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("namespace thread")
}
