//! fastpath and the Linux kernel on either side of a TUN interface: `fastpath serve` runs as a child
//! process in a network namespace of its own per test, and the kernel pings it, echoes UDP datagrams of
//! every interesting size through it (fragmented both ways above the MTU), is told a port is closed,
//! and the pcap file is checked packet by packet.
//!
//! The kernel's sockets are opened from a thread that entered the namespace (`setns`): a socket stays
//! in the namespace it was created in, whichever thread then uses it. Every namespace is removed by a
//! guard, also when a test fails.
//!
//! These tests need root, `/dev/net/tun`, `ip` and `ping`. Without them they print why and pass, unless
//! `FASTPATH_REQUIRE_TUN=1` (CI sets it), when they fail.
#![cfg(target_os = "linux")]

mod tun_common;

use std::fs::File;
use std::io::ErrorKind;
use std::net::{SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use tun_common::*;

/// A kernel UDP socket in namespace `netns`, bound to the kernel's address.
fn kernel_socket(netns: &str) -> UdpSocket {
    let path = PathBuf::from("/var/run/netns").join(netns);
    let socket = std::thread::spawn(move || {
        let ns = File::open(&path).expect("open namespace");
        nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).expect("setns");
        UdpSocket::bind(SocketAddrV4::new(KERNEL, 0))
    })
    .join()
    .expect("namespace thread")
    .expect("bind in namespace");
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    socket
}

/// `ip netns exec NETNS ping ...`; panics unless every reply came.
fn ping(netns: &str, size: usize) {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-c", "3", "-i", "0.2", "-W", "1",
        ])
        .args(["-s", &size.to_string(), "10.7.0.2"])
        .output()
        .expect("run ping");
    assert!(
        out.status.success(),
        "ping -s {size} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ seed ^ (i >> 8)) as u8)
        .collect()
}

/// Sizes echoed: empty, the edges of one frame at MTU 1500 and 9000, fragmented sizes, the largest.
const SIZES: &[usize] = &[
    0, 1, 100, 1472, 1473, 1480, 3000, 8000, 8972, 8973, 9000, 20_000, 32_768, 65_507,
];

/// Echoes every size in `SIZES` through fastpath and checks each comes back intact from the echo port.
fn echo_every_size(netns: &str) {
    let sock = kernel_socket(netns);
    let echo = SocketAddrV4::new(FASTPATH, ECHO);
    let mut buf = vec![0u8; 65536];
    for (i, &len) in SIZES.iter().enumerate() {
        let data = pattern(len, i);
        sock.send_to(&data, echo).expect("send");
        let (n, from) = sock
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("no echo of {len} bytes: {e}"));
        assert_eq!(from, std::net::SocketAddr::V4(echo));
        assert_eq!(n, len, "echo of {len} bytes came back as {n}");
        assert!(buf[..n] == data[..], "echo of {len} bytes differs");
    }
    // The discard port swallows what it gets: nothing comes back.
    sock.send_to(b"into the void", SocketAddrV4::new(FASTPATH, DISCARD))
        .unwrap();
}

/// A connected kernel socket learns of fastpath's port unreachable as ConnectionRefused.
fn closed_port_refuses(netns: &str) {
    let sock = kernel_socket(netns);
    sock.connect(SocketAddrV4::new(FASTPATH, 4444)).unwrap();
    sock.send(b"anyone there?").unwrap();
    let mut buf = [0u8; 64];
    let err = sock.recv(&mut buf).expect_err("a reply from a closed port");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
}

/// Everything one configuration must do: ping (plain and fragmented), echo every size, refuse a
/// closed port; then the counters must show fragmentation both ways and offload exactly when on.
fn interop(mtu: u32, offload: bool) {
    let ns = TestNetns::create();
    let server = Server::start(
        &ns.0,
        &[
            "--mtu",
            &mtu.to_string(),
            "--offload",
            if offload { "on" } else { "off" },
        ],
    );
    ping(&ns.0, 56);
    ping(&ns.0, 4000);
    echo_every_size(&ns.0);
    closed_port_refuses(&ns.0);
    let out = server.stop(Signal::SIGTERM);

    assert!(out.contains("stopped (signal)"), "{out}");
    // The kernel fragmented what was larger than the MTU, and fastpath reassembled it; fastpath
    // fragmented its echoes, and the kernel reassembled them (they came back whole).
    let big = SIZES.iter().filter(|&&s| s + 28 > mtu as usize).count() as u64;
    assert!(counter(&out, "datagrams reassembled") >= big, "{out}");
    assert!(counter(&out, "datagrams fragmented") >= big, "{out}");
    assert!(counter(&out, "echo replies sent") >= 6, "{out}");
    assert_eq!(counter(&out, "destination unreachable sent"), 1, "{out}");
    assert!(out.contains(", 1 discarded"), "{out}");
    let partial_in = counter(&out, "received with checksum partial (NEEDS_CSUM)");
    let offloaded_out = counter(&out, "sent with checksum offloaded (NEEDS_CSUM)");
    if offload {
        // The kernel's unfragmented UDP datagrams arrive with the checksum left partial, and
        // fastpath's unfragmented echoes leave with it offloaded.
        let small = SIZES.len() as u64 - big;
        assert!(partial_in >= small, "{out}");
        assert!(offloaded_out >= small, "{out}");
    } else {
        assert_eq!(partial_in, 0, "{out}");
        assert_eq!(offloaded_out, 0, "{out}");
        assert_eq!(
            counter(&out, "received with checksum valid (DATA_VALID)"),
            0
        );
    }
    for refused in [
        "dropped: shorter than the virtio header",
        "dropped: larger than the buffer",
        "dropped: bad checksum offsets",
        "dropped: GSO packet",
        "read errors",
        "write errors",
    ] {
        assert_eq!(counter(&out, refused), 0, "{refused}:\n{out}");
    }
    assert_eq!(counter(&out, "udp: bad checksum"), 0, "{out}");
}

#[test]
fn kernel_interop_mtu_1500_offload_on() {
    if environment_ok("kernel_interop_mtu_1500_offload_on") {
        interop(1500, true);
    }
}

#[test]
fn kernel_interop_mtu_1500_offload_off() {
    if environment_ok("kernel_interop_mtu_1500_offload_off") {
        interop(1500, false);
    }
}

#[test]
fn kernel_interop_mtu_9000_offload_on() {
    if environment_ok("kernel_interop_mtu_9000_offload_on") {
        interop(9000, true);
    }
}

#[test]
fn kernel_interop_mtu_9000_offload_off() {
    if environment_ok("kernel_interop_mtu_9000_offload_off") {
        interop(9000, false);
    }
}

#[test]
fn kernel_interop_mtu_65535_offload_on() {
    if environment_ok("kernel_interop_mtu_65535_offload_on") {
        interop(65535, true);
    }
}

/// With UDP segmentation offload on, a kernel socket set to `UDP_SEGMENT` hands over ten datagrams as
/// one GSO packet; fastpath splits it and echoes each of the ten. Ordinary traffic still works.
#[test]
fn kernel_interop_uso() {
    if !environment_ok("kernel_interop_uso") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(&ns.0, &["--uso", "on"]);
    echo_every_size(&ns.0);
    let sock = kernel_socket(&ns.0);
    nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::UdpGsoSegment, &1000)
        .expect("UDP_SEGMENT");
    let data = pattern(9_500, 77);
    sock.send_to(&data, SocketAddrV4::new(FASTPATH, ECHO))
        .unwrap();
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
    assert_eq!(counter(&out, "dropped: GSO packet"), 0, "{out}");
}

/// `bench tun --quick` measures every server and workload and writes sane JSON rows.
#[test]
fn bench_tun_quick() {
    if !environment_ok("bench_tun_quick") {
        return;
    }
    let (pid, text, rows) = bench_rows(&["bench", "tun", "--quick", "--json", "-"]);
    // 3 workloads x 2 sizes x (5 fastpath configurations + linux).
    assert_eq!(rows.len(), 36, "{text}");
    for r in &rows {
        let rate = r["datagrams_per_s"].as_f64().unwrap();
        assert!(rate.is_finite() && rate > 0.0, "{r}");
        assert!(r["ratio_vs_linux"].as_f64().unwrap() > 0.0, "{r}");
    }
    let namespaces = std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("fp-bench-{pid}-")))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(namespaces, 0, "bench tun removed its namespaces");
}

/// `serve` creates a missing namespace and removes it when stopped, and stops on SIGINT or at the end
/// of `--duration` with its counters printed.
#[test]
fn serve_cleans_up_what_it_created() {
    if !environment_ok("serve_cleans_up_what_it_created") {
        return;
    }
    let name = unique_netns();
    assert!(!netns_exists(&name));
    let server = Server::start(&name, &[]);
    assert!(netns_exists(&name), "serve created the namespace");
    ping(&name, 56);
    let out = server.stop(Signal::SIGINT);
    assert!(out.contains("stopped (signal)"), "{out}");
    assert!(counter(&out, "echo replies sent") >= 3, "{out}");
    assert!(!netns_exists(&name), "serve removed the namespace it made");

    // A namespace that was there before is left alone, and --duration ends the run.
    let ns = TestNetns::create();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["serve", "--netns", &ns.0, "--duration", "0.5"])
        .output()
        .expect("run serve");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("stopped (duration)"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(netns_exists(&ns.0), "a namespace serve did not make stays");
    let link = Command::new("ip")
        .args(["-n", &ns.0, "link", "show", "fp0"])
        .output()
        .unwrap();
    assert!(!link.status.success(), "the TUN interface went with serve");
}

/// `--pcap` records every packet in and out: checked with etherparse, and with tshark if installed.
#[test]
fn pcap_holds_every_packet() {
    if !environment_ok("pcap_holds_every_packet") {
        return;
    }
    let ns = TestNetns::create();
    let pcap = std::env::temp_dir().join(format!("{}.pcap", ns.0));
    let server = Server::start(
        &ns.0,
        &["--offload", "off", "--pcap", pcap.to_str().unwrap()],
    );
    let sock = kernel_socket(&ns.0);
    let echo = SocketAddrV4::new(FASTPATH, ECHO);
    let mut buf = vec![0u8; 65536];
    for (i, len) in [100usize, 3000].into_iter().enumerate() {
        let data = pattern(len, i);
        sock.send_to(&data, echo).unwrap();
        let (n, _) = sock.recv_from(&mut buf).expect("echo");
        assert_eq!(&buf[..n], &data[..]);
    }
    closed_port_refuses(&ns.0);
    ping(&ns.0, 56);
    let out = server.stop(Signal::SIGTERM);
    let recorded: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("pcap: ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no pcap line:\n{out}"));

    let packets = read_pcap(&pcap);
    assert_eq!(packets.len(), recorded, "{out}");
    let (mut udp_in, mut udp_out, mut frags_in, mut frags_out) = (0, 0, 0, 0);
    let (mut echo_req, mut echo_rep, mut unreachable) = (0, 0, 0);
    for p in &packets {
        let ip = etherparse::Ipv4Slice::from_slice(p).expect("IPv4 packet");
        let h = ip.header();
        let inbound = h.destination_addr() == FASTPATH;
        assert!(
            (inbound && h.source_addr() == KERNEL)
                || (h.source_addr() == FASTPATH && h.destination_addr() == KERNEL),
            "{:?} -> {:?}",
            h.source_addr(),
            h.destination_addr()
        );
        if ip.payload().fragmented {
            if inbound {
                frags_in += 1;
            } else {
                frags_out += 1;
            }
            continue;
        }
        match h.protocol() {
            etherparse::IpNumber::UDP => {
                let udp = etherparse::UdpSlice::from_slice(ip.payload().payload).unwrap();
                // Offload is off: every checksum in the capture is complete.
                let sum = udp_checksum(h.source(), h.destination(), ip.payload().payload);
                assert_eq!(sum, 0xffff, "UDP checksum");
                if inbound {
                    udp_in += 1;
                } else {
                    assert_eq!(udp.source_port(), ECHO);
                    udp_out += 1;
                }
            }
            etherparse::IpNumber::ICMP => {
                let icmp = etherparse::Icmpv4Slice::from_slice(ip.payload().payload).unwrap();
                match icmp.type_u8() {
                    8 => echo_req += 1,
                    0 => echo_rep += 1,
                    3 => unreachable += 1,
                    t => panic!("ICMP type {t}"),
                }
            }
            other => panic!("protocol {other:?}"),
        }
    }
    // 100 bytes whole each way, 3000 bytes as 3 fragments each way at MTU 1500, the closed port's
    // datagram, 3 pings.
    assert_eq!((udp_in, udp_out), (2, 1), "udp");
    assert_eq!((frags_in, frags_out), (3, 3), "fragments");
    assert_eq!((echo_req, echo_rep, unreachable), (3, 3, 1), "icmp");

    if let Ok(t) = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .output()
    {
        let text = String::from_utf8_lossy(&t.stdout);
        assert!(
            t.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&t.stderr)
        );
        assert_eq!(text.lines().count(), packets.len(), "{text}");
        assert_eq!(text.matches("Echo (ping) request").count(), 3, "{text}");
        assert_eq!(text.matches("Echo (ping) reply").count(), 3, "{text}");
        assert!(text.contains("Port unreachable"), "{text}");
    } else {
        eprintln!("tshark not installed: the pcap was checked with etherparse only");
    }
    let _ = std::fs::remove_file(&pcap);
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut reader = pcap_file::pcap::PcapReader::new(File::open(path).expect("pcap file"))
        .expect("pcap header");
    assert_eq!(reader.header().datalink, pcap_file::DataLink::RAW);
    let mut packets = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.expect("pcap record");
        assert_eq!(p.orig_len as usize, p.data.len(), "whole packets");
        packets.push(p.data.into_owned());
    }
    packets
}

/// The UDP checksum over the pseudo-header and `udp` (0xffff when it verifies).
fn udp_checksum(src: [u8; 4], dst: [u8; 4], udp: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut add = |bytes: &[u8]| {
        for pair in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        }
    };
    add(&src);
    add(&dst);
    add(&[0, 17]);
    add(&(udp.len() as u16).to_be_bytes());
    add(udp);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}
