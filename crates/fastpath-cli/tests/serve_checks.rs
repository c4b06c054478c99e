//! `fastpath serve` refuses a prefix another interface of the namespace already routes, reports why a
//! `--connect` failed (and exits non-zero), and removes a namespace a killed `serve` left behind.
//!
//! These need root, `/dev/net/tun` and `ip`. Without them they print why and pass, unless
//! `FASTPATH_REQUIRE_TUN=1`, when they fail. Every namespace is removed by a guard, also on failure.
#![cfg(target_os = "linux")]

mod tun_common;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tun_common::*;

/// One test at a time: concurrent `ip netns add` and `del` race over the /run/netns mount.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `fastpath serve --netns NETNS args...` to the end (`--duration` bounds it).
fn serve(netns: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["serve", "--netns", netns])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run fastpath serve")
}

fn explain(out: &Output) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// True when this machine can run the test (root, `/dev/net/tun`, `ip`); otherwise prints why and
/// returns false, or panics if `FASTPATH_REQUIRE_TUN=1`. (No `ping` needed, unlike `environment_ok`.)
fn tun_ok(test: &str) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        missing.push("/dev/net/tun");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        missing.push("ip");
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

/// A datagram from the kernel in `netns` to the UDP echo port of `addr` comes back.
fn echoes(netns: &str, addr: &str) -> bool {
    let to: std::net::SocketAddr = format!("{addr}:7").parse().unwrap();
    in_netns(netns, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").expect("bind in namespace");
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        sock.send_to(b"still there?", to).expect("send");
        let mut buf = [0u8; 64];
        matches!(sock.recv_from(&mut buf), Ok((12, from)) if from == to)
    })
}

#[test]
fn serve_refuses_a_prefix_the_namespace_already_routes() {
    if !tun_ok("serve_refuses_a_prefix_the_namespace_already_routes") {
        return;
    }
    let _serial = serial();
    let ns = TestNetns::create();
    let first = Server::start(&ns.0, &[]);
    // The same prefix, and one inside it, on a second interface: the kernel would route to one only.
    for (kernel, addr) in [("10.7.0.1/24", "10.7.0.3"), ("10.7.0.129/25", "10.7.0.130")] {
        let out = serve(
            &ns.0,
            &[
                "--tun",
                "fpt1",
                "--kernel-addr",
                kernel,
                "--addr",
                addr,
                "--duration",
                "2",
            ],
        );
        assert!(
            !out.status.success(),
            "{kernel} accepted:\n{}",
            explain(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("fpt0"), "{}", explain(&out));
        assert!(stderr.contains("10.7.0.0/24"), "{}", explain(&out));
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("ready"),
            "{}",
            explain(&out)
        );
    }
    // Another prefix in the same namespace is fine.
    let out = serve(
        &ns.0,
        &[
            "--tun",
            "fpt1",
            "--kernel-addr",
            "10.8.0.1/24",
            "--addr",
            "10.8.0.2",
            "--duration",
            "0.5",
        ],
    );
    assert!(out.status.success(), "{}", explain(&out));
    // And the first server still answers.
    assert!(
        echoes(&ns.0, "10.7.0.2"),
        "the first server stopped answering"
    );
    first.stop(Signal::SIGTERM);
}

#[test]
fn a_failed_connect_prints_its_cause_and_exits_non_zero() {
    if !tun_ok("a_failed_connect_prints_its_cause_and_exits_non_zero") {
        return;
    }
    let _serial = serial();
    let ns = TestNetns::create();
    // Nothing listens on the kernel's port 7778: the kernel answers the SYN with a RST.
    let out = serve(
        &ns.0,
        &[
            "--tun",
            "fpt0",
            "--kernel-addr",
            "10.7.0.1/24",
            "--addr",
            "10.7.0.2",
            "--connect",
            "10.7.0.1:7778",
            "--duration",
            "20",
        ],
    );
    assert!(!out.status.success(), "{}", explain(&out));
    assert_ne!(out.status.code(), Some(101), "{}", explain(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("stopped (client done)"),
        "{}",
        explain(&out)
    );
    assert!(
        stderr.to_lowercase().contains("refused"),
        "no cause on stderr:\n{}",
        explain(&out)
    );
    assert!(stderr.contains("10.7.0.1:7778"), "{}", explain(&out));
}

/// A `serve` child that is stopped with SIGTERM on drop, so that it removes what it created, and
/// SIGKILLed if it has not exited 10 s later (a test that wants it killed outright kills it first).
struct Killable(Child);

impl Drop for Killable {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
            let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while let Ok(None) = self.0.try_wait() {
                if Instant::now() > deadline {
                    let _ = self.0.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.wait();
    }
}

/// Whether fastpath's record of who created namespace `name` exists.
fn owner_recorded(name: &str) -> bool {
    std::path::Path::new(OWNER_RECORDS).join(name).exists()
}

/// Starts `serve` in `netns` (which it creates) and waits for `ready`.
fn start_creating(netns: &str) -> Killable {
    let mut child = Killable(
        Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args([
                "serve",
                "--netns",
                netns,
                "--tun",
                "fpt0",
                "--duration",
                "60",
            ])
            .args(["--kernel-addr", "10.7.0.1/24", "--addr", "10.7.0.2"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn fastpath serve"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read serve's output");
        if line.starts_with("ready ") {
            return child;
        }
        assert!(Instant::now() < deadline, "serve never said ready");
    }
    panic!("serve exited before ready");
}

#[test]
fn a_namespace_a_killed_serve_left_is_removed_by_the_next() {
    if !tun_ok("a_namespace_a_killed_serve_left_is_removed_by_the_next") {
        return;
    }
    let _serial = serial();
    // Removes the namespace whatever happens.
    let ns = TestNetns(unique_netns());
    let mut first = start_creating(&ns.0);
    first.0.kill().expect("SIGKILL serve");
    first.0.wait().expect("reap serve");
    assert!(netns_exists(&ns.0), "SIGKILL left no namespace to clean up");
    let out = serve(
        &ns.0,
        &[
            "--tun",
            "fpt0",
            "--kernel-addr",
            "10.7.0.1/24",
            "--addr",
            "10.7.0.2",
            "--duration",
            "0.5",
        ],
    );
    assert!(out.status.success(), "{}", explain(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stale"), "{}", explain(&out));
    assert!(
        !netns_exists(&ns.0),
        "the leftover namespace is still there:\n{}",
        explain(&out)
    );
    assert!(!owner_recorded(&ns.0), "the leftover record is still there");
}

/// A killed `serve` leaves its namespace and the record of it; when someone else then deletes the
/// namespace (`ip netns del`), the next `serve` that creates a namespace deletes the record too.
#[test]
fn a_record_whose_namespace_is_gone_is_removed_by_the_next_serve() {
    if !tun_ok("a_record_whose_namespace_is_gone_is_removed_by_the_next_serve") {
        return;
    }
    let _serial = serial();
    let ns = TestNetns(unique_netns());
    let mut first = start_creating(&ns.0);
    first.0.kill().expect("SIGKILL serve");
    first.0.wait().expect("reap serve");
    assert!(owner_recorded(&ns.0), "serve recorded no owner");
    let deleted = Command::new("ip")
        .args(["netns", "del", &ns.0])
        .status()
        .is_ok_and(|s| s.success());
    assert!(deleted, "ip netns del {}", ns.0);
    let other = TestNetns(unique_netns());
    let out = serve(
        &other.0,
        &[
            "--tun",
            "fpt0",
            "--kernel-addr",
            "10.7.0.1/24",
            "--addr",
            "10.7.0.2",
            "--duration",
            "0.2",
        ],
    );
    assert!(out.status.success(), "{}", explain(&out));
    assert!(
        !owner_recorded(&ns.0),
        "the record of a namespace that is gone, by a creator that is gone, is still there"
    );
    assert!(!owner_recorded(&other.0), "serve left its own record");
}

#[test]
fn a_namespace_a_live_serve_created_is_left_alone() {
    if !tun_ok("a_namespace_a_live_serve_created_is_left_alone") {
        return;
    }
    let _serial = serial();
    let ns = TestNetns(unique_netns());
    let _first = start_creating(&ns.0);
    let out = serve(
        &ns.0,
        &[
            "--tun",
            "fpt1",
            "--kernel-addr",
            "10.8.0.1/24",
            "--addr",
            "10.8.0.2",
            "--duration",
            "0.5",
        ],
    );
    assert!(out.status.success(), "{}", explain(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("stale"),
        "{}",
        explain(&out)
    );
    assert!(
        netns_exists(&ns.0),
        "the second serve removed the namespace"
    );
    assert!(
        echoes(&ns.0, "10.7.0.2"),
        "the first server stopped answering"
    );
    drop(_first);
    assert!(!netns_exists(&ns.0), "the first serve left its namespace");
    assert!(!owner_recorded(&ns.0), "the first serve left its record");
}
