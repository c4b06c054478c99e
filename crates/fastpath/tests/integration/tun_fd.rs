//! A real TUN interface's descriptor, lent out through `AsFd`, waited on with `poll` as an event loop
//! would: it is non-blocking, it turns readable when the kernel sends a packet into the interface, and
//! the packet that made it readable is the one the link receives.
//!
//! Needs root, `/dev/net/tun` and `ip`; without them the test prints why and passes, unless
//! `FASTPATH_REQUIRE_TUN=1`, when it fails.
#![cfg(target_os = "linux")]

use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fastpath::link::Link;
use fastpath::{TunConfig, TunLink};
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// True when the machine can run the test; otherwise prints why and returns false, or panics when
/// `FASTPATH_REQUIRE_TUN=1`.
fn environment_ok(test: &str) -> bool {
    let mut missing = Vec::new();
    // The owner of /proc/self is the process's effective user.
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        missing.push("root");
    }
    if !Path::new("/dev/net/tun").exists() {
        missing.push("/dev/net/tun");
    }
    let ip = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if ip.is_err() {
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

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// A network namespace of the test's own, deleted on drop.
struct Netns(String);

impl Netns {
    fn create() -> Netns {
        let name = format!("fp-fd-{}", std::process::id());
        ip(&["netns", "add", &name]);
        Netns(name)
    }

    fn path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(&self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Sends one UDP datagram from a kernel socket in namespace `ns` (a thread of its own enters it).
fn kernel_send(ns: PathBuf, to: (Ipv4Addr, u16), payload: &'static [u8]) {
    std::thread::spawn(move || {
        let f = std::fs::File::open(&ns).expect("open the namespace");
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind");
        s.send_to(payload, to).expect("send_to");
    })
    .join()
    .expect("the sending thread");
}

#[test]
fn a_tun_descriptor_polls_readable_when_the_kernel_sends() {
    if !environment_ok("a_tun_descriptor_polls_readable_when_the_kernel_sends") {
        return;
    }
    let ns = Netns::create();
    let mut link = TunLink::open(&TunConfig {
        name: "fpfd0".into(),
        netns: Some(ns.0.clone()),
        offload: false,
        ..TunConfig::default()
    })
    .expect("open the TUN link");
    ip(&["-n", &ns.0, "addr", "add", "10.9.0.1/24", "dev", "fpfd0"]);
    ip(&["-n", &ns.0, "link", "set", "fpfd0", "up"]);

    // Writes go through io_uring by default, and waiting stays on the device's own descriptor.
    assert!(
        link.io_uring_enabled(),
        "a kernel of 5.6 or later writes through io_uring"
    );
    let fd = link.as_fd();
    assert_eq!(fd.as_raw_fd(), link.as_raw_fd());
    assert_eq!(link.handle().as_fd().as_raw_fd(), link.as_raw_fd());
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).expect("F_GETFL"));
    assert!(flags.contains(OFlag::O_NONBLOCK), "{flags:?}");
    assert!(flags.contains(OFlag::O_RDWR), "{flags:?}");

    let payload: &[u8] = b"to the fastpath side";
    kernel_send(ns.path(), (Ipv4Addr::new(10, 9, 0, 2), 9), payload);

    // Wait as an event loop would, on the lent descriptor; then the link must receive the datagram.
    // The kernel may send other packets of its own (IPv6 router solicitations): skip them.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut batch = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no UDP datagram from the kernel in 5 s");
        let mut fds = [PollFd::new(link.as_fd(), PollFlags::POLLIN)];
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let n = poll(&mut fds, PollTimeout::from(ms)).expect("poll");
        assert_eq!(n, 1, "poll timed out with nothing readable");
        assert!(fds[0].revents().unwrap().contains(PollFlags::POLLIN));
        batch.clear();
        assert!(
            link.receive(&mut batch, 64) > 0,
            "poll said readable, the link read nothing"
        );
        if let Some(p) = batch.iter().find(|p| {
            let d = p.data();
            d.len() >= 28 && d[9] == 17 && d[16..20] == [10, 9, 0, 2] && d[28..] == *payload
        }) {
            break p.data().to_vec();
        }
    };
    assert_eq!(&found[22..24], &9u16.to_be_bytes(), "destination port");
    // Drained: nothing left to make the descriptor readable.
    let mut fds = [PollFd::new(link.as_fd(), PollFlags::POLLIN)];
    let more = poll(&mut fds, PollTimeout::ZERO).expect("poll");
    if more > 0 {
        batch.clear();
        assert!(
            link.receive(&mut batch, 64) > 0,
            "readable means receivable"
        );
    }
}
