//! IPv6 between the Linux kernel and fastpath over a TUN interface (`fastpath serve --kernel-addr6
//! --addr6`): the kernel's `ping -6` is answered, and what the kernel sends on a link as it comes up
//! (multicast listener reports, router solicitations) is dropped by name, not misread.
//!
//! These tests need root, `/dev/net/tun`, `ip` and `ping`. Without them they print why and pass, unless
//! `FASTPATH_REQUIRE_TUN=1`, as in CI, where they fail.

mod tun_common;

use std::fs::File;
use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use tun_common::*;

const KERNEL6: &str = "fd00:7::1/64";
const FASTPATH6: &str = "fd00:7::2";

/// The counter `what` in section `section` (`ip6:`, `icmp6:`) of `serve`'s output: the indented lines
/// after the section's own.
fn counter_in(output: &str, section: &str, what: &str) -> u64 {
    let lines: Vec<&str> = output
        .lines()
        .skip_while(|l| *l != section)
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .collect();
    counter(&lines.join("\n"), what)
}

/// `ip netns exec NETNS ping -6 ...`; panics unless every reply came.
fn ping6(netns: &str, size: usize) {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "1",
        ])
        .args(["-s", &size.to_string(), FASTPATH6])
        .output()
        .expect("run ping -6");
    assert!(
        out.status.success(),
        "ping -6 -s {size} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kernel UDP socket in namespace `netns`, bound to `local`.
fn kernel_socket(netns: &str, local: SocketAddr) -> UdpSocket {
    let path = PathBuf::from("/var/run/netns").join(netns);
    let socket = std::thread::spawn(move || {
        let ns = File::open(&path).expect("open namespace");
        nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).expect("setns");
        UdpSocket::bind(local)
    })
    .join()
    .expect("namespace thread")
    .expect("bind in namespace");
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    socket
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ seed ^ (i >> 8)) as u8)
        .collect()
}

/// Sizes echoed over IPv6: the edges of one packet at MTU 1500 (1452 bytes of payload), fragmented
/// sizes, the largest.
const SIZES: &[usize] = &[0, 1, 100, 1452, 1453, 3000, 8000, 20_000, 65_000];

/// Echoes every size through fastpath's dual-stack echo socket over IPv6, then once over IPv4 (the
/// same socket, through a v4-mapped address), each checked byte for byte.
fn echo_every_size(netns: &str) {
    let echo: SocketAddr = format!("[{FASTPATH6}]:{ECHO}").parse().unwrap();
    let sock = kernel_socket(netns, "[fd00:7::1]:0".parse().unwrap());
    let mut buf = vec![0u8; 65536];
    for (i, &len) in SIZES.iter().enumerate() {
        let data = pattern(len, i);
        sock.send_to(&data, echo).expect("send");
        let (n, from) = sock
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("no echo of {len} bytes: {e}"));
        assert_eq!(from, echo);
        assert_eq!(n, len, "echo of {len} bytes came back as {n}");
        assert!(buf[..n] == data[..], "echo of {len} bytes differs");
    }
    let sock4 = kernel_socket(netns, SocketAddrV4::new(KERNEL, 0).into());
    let echo4: SocketAddr = SocketAddrV4::new(FASTPATH, ECHO).into();
    for (i, &len) in [5usize, 3000].iter().enumerate() {
        let data = pattern(len, i);
        sock4.send_to(&data, echo4).expect("send");
        let (n, from) = sock4.recv_from(&mut buf).expect("an IPv4 echo");
        assert_eq!((n, from), (len, echo4));
        assert!(buf[..n] == data[..]);
    }
    // A closed port: the kernel's connected socket hears ICMPv6 port unreachable as refused.
    let closed = kernel_socket(netns, "[fd00:7::1]:0".parse().unwrap());
    closed
        .connect(format!("[{FASTPATH6}]:4444").parse::<SocketAddr>().unwrap())
        .unwrap();
    closed.send(b"anyone there?").unwrap();
    let err = closed
        .recv(&mut buf)
        .expect_err("a reply from a closed port");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
}

#[test]
fn kernel_echoes_udp_over_ipv6_with_offload_on_and_off() {
    if !environment_ok("kernel_echoes_udp_over_ipv6_with_offload_on_and_off") {
        return;
    }
    for offload in ["on", "off"] {
        let ns = TestNetns::create();
        let server = Server::start(
            &ns.0,
            &[
                "--kernel-addr6",
                KERNEL6,
                "--addr6",
                FASTPATH6,
                "--offload",
                offload,
            ],
        );
        ping6(&ns.0, 4000);
        echo_every_size(&ns.0);
        let out = server.stop(Signal::SIGTERM);
        assert!(out.contains("stopped (signal)"), "{out}");
        // The kernel fragmented what was larger than the MTU and fastpath reassembled it; fastpath
        // fragmented its echoes and the kernel reassembled them.
        let big = SIZES.iter().filter(|&&s| s + 48 > 1500).count() as u64;
        assert!(
            counter_in(&out, "ip6:", "packets reassembled") >= big,
            "{out}"
        );
        assert!(
            counter_in(&out, "ip6:", "packets fragmented") >= big,
            "{out}"
        );
        assert_eq!(counter(&out, "udp: bad checksum"), 0, "{out}");
        assert_eq!(counter(&out, "udp: zero checksum over ipv6"), 0, "{out}");
        assert!(
            counter_in(&out, "icmp6:", "destination unreachable sent") >= 1,
            "{out}"
        );
    }
}

#[test]
fn kernel_pings_fastpath_over_ipv6() {
    if !environment_ok("kernel_pings_fastpath_over_ipv6") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(&ns.0, &["--kernel-addr6", KERNEL6, "--addr6", FASTPATH6]);
    ping6(&ns.0, 56);
    ping6(&ns.0, 1000);
    let out = server.stop(Signal::SIGTERM);
    assert!(out.contains("stopped (signal)"), "{out}");
    assert!(
        counter_in(&out, "icmp6:", "echo replies sent") >= 6,
        "{out}"
    );
    assert!(
        counter_in(&out, "icmp6:", "echo requests received") >= 6,
        "{out}"
    );
    // Nothing IPv6 was malformed or misread.
    for bad in [
        "ipv6: truncated",
        "ipv6: bad source address",
        "ipv6: extension header truncated",
        "icmpv6: bad checksum",
        "icmpv6: truncated",
    ] {
        assert_eq!(counter(&out, bad), 0, "{bad}:\n{out}");
    }
}

#[test]
fn serve_refuses_bad_ipv6_addresses() {
    let fastpath = env!("CARGO_BIN_EXE_fastpath");
    for (kernel, addr, why) in [
        ("fd00:7::1/64", "fd00:8::2", "outside the kernel's prefix"),
        ("fd00:7::1/64", "fd00:7::1", "the kernel's own address"),
        ("fd00:7::1/64", "ff02::1", "not a unicast address"),
        ("fd00:7::1/127", "fd00:7::0", "leaves no room"),
    ] {
        let out = Command::new(fastpath)
            .args(["serve", "--netns", "fp-never-made", "--duration", "0"])
            .args(["--kernel-addr6", kernel, "--addr6", addr])
            .output()
            .expect("run fastpath serve");
        assert!(!out.status.success(), "{kernel} {addr} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{kernel} {addr}: {err}");
    }
    // One without the other is a usage error.
    let out = Command::new(fastpath)
        .args(["serve", "--addr6", "fd00:7::2", "--duration", "0"])
        .output()
        .expect("run fastpath serve");
    assert!(!out.status.success());
}

/// A kernel TCP client in `netns` sends `len` bytes of a pattern to fastpath's echo port over IPv6
/// and reads them back, checking every byte; returns the seconds it took.
fn tcp_echo6(netns: &str, len: usize) -> f64 {
    in_netns(netns, move || {
        use std::io::{Read, Write};
        let to: SocketAddr = format!("[{FASTPATH6}]:{ECHO}").parse().unwrap();
        let started = std::time::Instant::now();
        let mut conn = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5))
            .expect("connect over IPv6");
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut writer = conn.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let chunk = pattern(1 << 20, 3);
            let mut sent = 0;
            while sent < len {
                let n = chunk.len().min(len - sent);
                writer.write_all(&chunk[..n]).expect("write");
                sent += n;
            }
            writer.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let expected = pattern(1 << 20, 3);
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        loop {
            let n = conn.read(&mut buf).expect("read the echo");
            if n == 0 {
                break;
            }
            for (i, &b) in buf[..n].iter().enumerate() {
                let at = (got + i) % (1 << 20);
                assert_eq!(b, expected[at], "byte {} of the echo", got + i);
            }
            got += n;
        }
        sender.join().unwrap();
        assert_eq!(got, len, "the whole echo");
        started.elapsed().as_secs_f64()
    })
}

#[test]
fn kernel_tcp_echo_of_64_mib_over_ipv6_with_offload_on_and_off() {
    if !environment_ok("kernel_tcp_echo_of_64_mib_over_ipv6_with_offload_on_and_off") {
        return;
    }
    for offload in ["on", "off"] {
        let ns = TestNetns::create();
        let server = Server::start(
            &ns.0,
            &[
                "--kernel-addr6",
                KERNEL6,
                "--addr6",
                FASTPATH6,
                "--offload",
                offload,
            ],
        );
        let secs = tcp_echo6(&ns.0, 64 << 20);
        eprintln!("64 MiB echoed over IPv6 with offload {offload} in {secs:.2} s");
        let out = server.stop(Signal::SIGTERM);
        assert!(out.contains("1 connections accepted"), "{out}");
        assert_eq!(counter(&out, "tcp: bad checksum"), 0, "{out}");
        let tso = counter(&out, "packets segmented by the link (tso)");
        if offload == "on" {
            assert!(tso > 0, "TSO over IPv6:\n{out}");
        } else {
            assert_eq!(tso, 0, "{out}");
        }
    }
}

#[test]
fn kernel_udp_segmentation_offload_over_ipv6_is_split_and_echoed() {
    if !environment_ok("kernel_udp_segmentation_offload_over_ipv6_is_split_and_echoed") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(
        &ns.0,
        &[
            "--kernel-addr6",
            KERNEL6,
            "--addr6",
            FASTPATH6,
            "--uso",
            "on",
        ],
    );
    let sock = kernel_socket(&ns.0, "[fd00:7::1]:0".parse().unwrap());
    nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGsoSegment, &1000)
        .expect("UDP_SEGMENT");
    let echo: SocketAddr = format!("[{FASTPATH6}]:{ECHO}").parse().unwrap();
    let data = pattern(9_500, 77);
    sock.send_to(&data, echo).unwrap();
    let mut buf = vec![0u8; 2048];
    for (i, expected) in data.chunks(1000).enumerate() {
        let n = sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("echo of segment {i}: {e}"));
        assert_eq!(&buf[..n], expected, "segment {i}");
    }
    let out = server.stop(Signal::SIGTERM);
    assert!(counter(&out, "GSO packets split") >= 1, "{out}");
    assert!(
        counter(&out, "datagrams split from GSO packets") >= 10,
        "{out}"
    );
    assert_eq!(counter(&out, "dropped: malformed GSO packet"), 0, "{out}");
}

#[test]
fn a_closed_tcp_port_over_ipv6_refuses_the_kernel() {
    if !environment_ok("a_closed_tcp_port_over_ipv6_refuses_the_kernel") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(&ns.0, &["--kernel-addr6", KERNEL6, "--addr6", FASTPATH6]);
    let err = in_netns(&ns.0, || {
        let to: SocketAddr = format!("[{FASTPATH6}]:4444").parse().unwrap();
        std::net::TcpStream::connect_timeout(&to, Duration::from_secs(3)).unwrap_err()
    });
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    let out = server.stop(Signal::SIGTERM);
    assert!(counter(&out, "resets sent") >= 1, "{out}");
}

/// `ip -n NS ARGS...`, panicking with its output on failure.
fn ip_in(ns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip -n {ns} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn packet_too_big_from_a_kernel_router_lowers_fastpaths_mss() {
    if !environment_ok("packet_too_big_from_a_kernel_router_lowers_fastpaths_mss") {
        return;
    }
    // fastpath (fd00:7::2) -- TUN -- the kernel in `ns`, routing -- veth -- `far` (fd00:9::2), where
    // an echo server runs. The kernel forwards to `far` with an IPv6 MTU of 1280 on its side of the
    // veth (as a narrower link further along would be), while `far` itself is on a 1500-byte link and
    // offers an MSS of 1440: the kernel answers fastpath's 1500-byte packets with packet too big
    // (RFC 4443 §3.2), as a router would.
    let ns = TestNetns::create();
    let far = TestNetns::create();
    ip_in(
        &ns.0,
        &[
            "link", "add", "fpr0", "type", "veth", "peer", "name", "fpr1", "netns", &far.0,
        ],
    );
    ip_in(
        &ns.0,
        &["-6", "addr", "add", "fd00:9::1/64", "dev", "fpr0", "nodad"],
    );
    ip_in(
        &far.0,
        &["-6", "addr", "add", "fd00:9::2/64", "dev", "fpr1", "nodad"],
    );
    for (n, dev) in [(&ns.0, "fpr0"), (&far.0, "fpr1")] {
        ip_in(n, &["link", "set", "dev", dev, "up"]);
    }
    ip_in(
        &far.0,
        &["-6", "route", "add", "default", "via", "fd00:9::1"],
    );
    for setting in [
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv6.conf.fpr0.mtu=1280",
    ] {
        let ok = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sysctl", "-qw", setting])
            .status()
            .expect("sysctl");
        assert!(ok.success(), "{setting}");
    }
    // The echo server in `far`: one connection, echoed until its end.
    let listener = in_netns(&far.0, || {
        std::net::TcpListener::bind("[fd00:9::2]:7777").expect("listen in far")
    });
    let echo = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 65536];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let server = Server::start(
        &ns.0,
        &[
            "--kernel-addr6",
            KERNEL6,
            "--addr6",
            FASTPATH6,
            "--connect",
            "[fd00:9::2]:7777",
            "--send",
            "4194304",
        ],
    );
    let out = server.wait_exit(Duration::from_secs(60));
    echo.join().unwrap();
    assert!(out.contains("4194304 bytes echoed back, intact"), "{out}");
    assert!(counter_in(&out, "ip6:", "path mtus learned") >= 1, "{out}");
    assert!(
        counter_in(&out, "icmp6:", "packet too big received") >= 1,
        "{out}"
    );
}
