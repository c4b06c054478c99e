//! fastpath and the Linux kernel on either side of an Ethernet link, a TAP interface (`fastpath serve
//! --tap`) or a veth pair whose fastpath end is read and written through AF_XDP sockets (`--xdp`):
//! fastpath a host on the link that the kernel finds by ARP and neighbour discovery, and that finds
//! the kernel the same way. The kernel pings it (plain, fragmented, over IPv6), echoes UDP
//! datagrams of every interesting size through it, is refused at a closed port, moves TCP streams
//! both families; fastpath connects out through the kernel as its IPv6 router and learns a smaller
//! path MTU from it. Each test runs `serve` in a namespace of its own.
//!
//! These tests need root, `/dev/net/tun`, `ip` and `ping`. Without them they print why and pass, unless
//! `FASTPATH_REQUIRE_TUN=1` (CI sets it), when they fail.
#![cfg(target_os = "linux")]

mod tun_common;

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use tun_common::*;

const KERNEL6: &str = "fd00:7::1/64";
const FASTPATH6: &str = "fd00:7::2";

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

/// `ip netns exec NETNS ping [-6] -s SIZE ADDR`; panics unless every reply came.
fn ping(netns: &str, v6: bool, size: usize, addr: &str) {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns, "ping"]);
    if v6 {
        cmd.arg("-6");
    }
    let out = cmd
        .args([
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "1",
            "-s",
            &size.to_string(),
            addr,
        ])
        .output()
        .expect("run ping");
    assert!(
        out.status.success(),
        "ping -s {size} {addr} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ seed ^ (i >> 8)) as u8)
        .collect()
}

/// Echoes datagrams of sizes around one frame and well past it (fragmented both ways).
fn echo_every_size(sock: &UdpSocket, echo: SocketAddr) {
    let mut buf = vec![0u8; 65536];
    for (i, &len) in [0usize, 1, 1452, 1472, 1473, 3000, 20_000, 65_000]
        .iter()
        .enumerate()
    {
        let data = pattern(len, i);
        sock.send_to(&data, echo).expect("send");
        let (n, from) = sock
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("no echo of {len} bytes from {echo}: {e}"));
        assert_eq!(from, echo);
        assert!(n == len && buf[..n] == data[..], "echo of {len} bytes");
    }
}

/// The kernel sends `len` bytes to fastpath's TCP echo at `to` and reads them back.
fn tcp_echo(netns: &str, to: SocketAddr, len: usize) {
    in_netns(netns, move || {
        let s = TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut w = s.try_clone().unwrap();
        let data = pattern(len, 3);
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            w.write_all(&sent).expect("write");
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::with_capacity(len);
        let mut r = s;
        r.read_to_end(&mut got).expect("read the echo");
        writer.join().unwrap();
        assert!(got == data, "{} of {len} bytes echoed intact", got.len());
    });
}

/// `ip -n NETNS neigh show ADDR`: the kernel's neighbour entry for `addr`.
fn neighbour(netns: &str, addr: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", netns, "neigh", "show", addr])
        .output()
        .expect("ip neigh");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything the kernel does with fastpath over a TAP interface (`link` ["--tap"], with offloads
/// `offload`) or AF_XDP (["--xdp", "fpt0"], no offloads).
fn kernel_talks_to_fastpath(link: &[&str], offload: bool, extra: &[&str]) {
    let ns = TestNetns::create();
    let mut args = link.to_vec();
    args.extend([
        "--kernel-addr6",
        KERNEL6,
        "--addr6",
        FASTPATH6,
        "--offload",
        if offload { "on" } else { "off" },
    ]);
    args.extend_from_slice(extra);
    let server = Server::start(&ns.0, &args);
    ping(&ns.0, false, 56, "10.7.0.2");
    ping(&ns.0, false, 4000, "10.7.0.2");
    ping(&ns.0, true, 56, FASTPATH6);
    ping(&ns.0, true, 3000, FASTPATH6);
    // The kernel learned fastpath's hardware address by ARP and by neighbour discovery.
    let (n4, n6) = (neighbour(&ns.0, "10.7.0.2"), neighbour(&ns.0, FASTPATH6));
    for n in [&n4, &n6] {
        assert!(n.contains("lladdr "), "{n4}{n6}");
    }
    let sock = kernel_socket(&ns.0, SocketAddrV4::new(KERNEL, 0).into());
    echo_every_size(&sock, SocketAddrV4::new(FASTPATH, ECHO).into());
    let sock6 = kernel_socket(&ns.0, "[fd00:7::1]:0".parse().unwrap());
    echo_every_size(&sock6, "[fd00:7::2]:7".parse().unwrap());
    // A closed port: the port unreachable reaches the kernel's connected socket.
    sock.connect(SocketAddrV4::new(FASTPATH, 4444)).unwrap();
    sock.send(b"anyone there?").unwrap();
    let err = sock
        .recv(&mut [0u8; 64])
        .expect_err("a reply from a closed port");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    tcp_echo(&ns.0, "10.7.0.2:7".parse().unwrap(), 8 << 20);
    tcp_echo(&ns.0, "[fd00:7::2]:7".parse().unwrap(), 2 << 20);
    let out = server.stop(Signal::SIGTERM);
    assert!(out.contains("stopped (signal)"), "{out}");
    assert!(counter(&out, "arp replies sent") >= 1, "{out}");
    assert!(counter(&out, "neighbor advertisements sent") >= 1, "{out}");
    assert!(counter(&out, "datagrams reassembled") >= 3, "{out}");
    assert!(counter(&out, "datagrams fragmented") >= 3, "{out}");
    assert_eq!(counter(&out, "tcp: bad checksum"), 0, "{out}");
    assert_eq!(counter(&out, "udp: bad checksum"), 0, "{out}");
    assert_eq!(counter(&out, "arp: malformed"), 0, "{out}");
    assert_eq!(counter(&out, "ndp: invalid message"), 0, "{out}");
    assert_eq!(counter(&out, "ethernet: malformed frame"), 0, "{out}");
    assert_eq!(counter(&out, "dropped: bad checksum offsets"), 0, "{out}");
    let offloaded = [
        "received with checksum partial (NEEDS_CSUM)",
        "sent with checksum offloaded (NEEDS_CSUM)",
        "sent as TCP segmentation offload (GSO)",
    ];
    for what in offloaded {
        let n = counter(&out, what);
        assert!(if offload { n > 0 } else { n == 0 }, "{what}: {n}\n{out}");
    }
    if link[0] == "--xdp" {
        for refused in [
            "dropped: bad descriptor",
            "dropped: larger than the mtu",
            "dropped: tx ring full",
            "kick errors",
        ] {
            assert_eq!(counter(&out, refused), 0, "{refused}:\n{out}");
        }
        assert!(counter(&out, "frames received") > 1000, "{out}");
    }
}

#[test]
fn the_kernel_finds_fastpath_by_arp_and_ndp_and_talks_to_it_with_offloads() {
    if environment_ok("the_kernel_finds_fastpath_by_arp_and_ndp_and_talks_to_it_with_offloads") {
        kernel_talks_to_fastpath(&["--tap"], true, &[]);
    }
}

#[test]
fn the_kernel_talks_to_fastpath_over_tap_without_offloads() {
    if environment_ok("the_kernel_talks_to_fastpath_over_tap_without_offloads") {
        kernel_talks_to_fastpath(&["--tap"], false, &[]);
    }
}

/// fastpath, a client on the link, resolves the kernel by neighbour discovery, and through it as
/// its IPv6 router reaches a host on a narrower link: the kernel's packet too big lowers fastpath's
/// segment size and the stream arrives intact. Over TAP and over AF_XDP.
#[test]
fn fastpath_resolves_its_router_and_learns_a_smaller_path_mtu_over_frames() {
    if !environment_ok("fastpath_resolves_its_router_and_learns_a_smaller_path_mtu_over_frames") {
        return;
    }
    for link in [&["--tap"][..], &["--xdp", "fpt0"]] {
        router_and_path_mtu(link);
    }
}

fn router_and_path_mtu(link: &[&str]) {
    let ns = TestNetns::create();
    let far = TestNetns::create();
    let ip_in = |n: &str, args: &[&str]| {
        let ok = Command::new("ip")
            .args(["-n", n])
            .args(args)
            .status()
            .expect("ip");
        assert!(ok.success(), "ip {args:?}");
    };
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
    let listener = in_netns(&far.0, || {
        std::net::TcpListener::bind("[fd00:9::2]:7777").expect("listen in far")
    });
    let echo = echo_one(listener);
    let mut args = link.to_vec();
    args.extend([
        "--kernel-addr6",
        KERNEL6,
        "--addr6",
        FASTPATH6,
        "--connect",
        "[fd00:9::2]:7777",
        "--send",
        "2097152",
    ]);
    let server = Server::start(&ns.0, &args);
    let out = server.wait_exit(Duration::from_secs(60));
    echo.join().unwrap();
    assert!(
        out.contains("2097152 bytes echoed back, intact"),
        "{link:?}: {out}"
    );
    assert!(counter(&out, "path mtus learned") >= 1, "{link:?}: {out}");
    // Its own two addresses checked, and the router resolved.
    assert!(counter(&out, "neighbor solicitations sent") >= 3, "{out}");
}

/// Addresses from a real router's advertisements: radvd, in the namespace on the TAP interface's
/// kernel end, advertises `fd00:77::/64` (autonomous, on-link); fastpath forms an address from it
/// (the modified EUI-64 identifier) and, with `--temporary-addresses`, a temporary one (RFC 8981),
/// then connects to a kernel echo server on that prefix. With `prefer` the kernel sees the
/// connection come from the temporary address (an identifier that is not EUI-64), with `form`
/// from the prefix's own (RFC 6724 rule 7 either way).
#[test]
fn fastpath_forms_its_addresses_from_radvd_s_advertisements() {
    if !environment_ok("fastpath_forms_its_addresses_from_radvd_s_advertisements") {
        return;
    }
    let radvd = ["/usr/sbin/radvd", "/sbin/radvd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(radvd) = radvd else {
        let why = "fastpath_forms_its_addresses_from_radvd_s_advertisements: needs radvd";
        if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
            panic!("{why} (FASTPATH_REQUIRE_TUN=1)");
        }
        eprintln!("skipping {why}");
        return;
    };
    // Both at once, each in a namespace of its own: most of each run is waiting.
    let runs: Vec<_> = [("prefer", true), ("form", false)]
        .into_iter()
        .map(|(mode, temporary)| {
            let run = std::thread::spawn(move || source_under_radvd(radvd, mode));
            (mode, temporary, run)
        })
        .collect();
    for (mode, temporary, run) in runs {
        let source = run.join().expect("a run under radvd");
        let segments = source.segments();
        assert_eq!(segments[..4], [0xfd00, 0x77, 0, 0], "{mode}: {source}");
        let eui64 = segments[5] & 0xff == 0xff && segments[6] >> 8 == 0xfe;
        assert_eq!(eui64, !temporary, "{mode}: {source}");
    }
}

/// Runs `serve --tap --temporary-addresses MODE` beside radvd and returns the address its
/// connection to the kernel came from.
fn source_under_radvd(radvd: &'static str, mode: &'static str) -> std::net::Ipv6Addr {
    let ns = TestNetns::create();
    let mut args = vec!["--tap", "--kernel-addr6", KERNEL6, "--addr6", FASTPATH6];
    args.extend([
        "--temporary-addresses",
        mode,
        "--connect",
        "[fd00:77::1]:7777",
    ]);
    args.extend(["--send", "65536", "--connect-delay", "7"]);
    let server = Server::start(&ns.0, &args);
    let ip = |a: &[&str]| {
        let ok = Command::new("ip")
            .args(["-n", &ns.0])
            .args(a)
            .status()
            .expect("ip");
        assert!(ok.success(), "ip {a:?}");
    };
    ip(&["-6", "addr", "add", "fd00:77::1/64", "dev", "fpt0", "nodad"]);
    let ok = Command::new("ip")
        .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
        .arg("net.ipv6.conf.all.forwarding=1")
        .status()
        .expect("sysctl");
    assert!(ok.success());
    // radvd needs the interface's own link-local address, checked for duplicates first.
    let started = std::time::Instant::now();
    loop {
        let out = Command::new("ip")
            .args([
                "-n", &ns.0, "-6", "addr", "show", "dev", "fpt0", "scope", "link",
            ])
            .output()
            .expect("ip addr");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("fe80::") && !text.contains("tentative") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = std::env::temp_dir().join(format!("fastpath-radvd-{}", ns.0));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("radvd.conf");
    std::fs::write(
        &conf,
        "interface fpt0 {\n  AdvSendAdvert on;\n  MinRtrAdvInterval 3;\n  MaxRtrAdvInterval 4;\n  \
         AdvDefaultLifetime 0;\n  prefix fd00:77::/64 {\n    AdvOnLink on;\n    \
         AdvAutonomous on;\n    AdvPreferredLifetime 3600;\n    AdvValidLifetime 7200;\n  };\n};\n",
    )
    .unwrap();
    let listener = in_netns(&ns.0, || {
        std::net::TcpListener::bind("[fd00:77::1]:7777").expect("listen in the namespace")
    });
    let accepted = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        peer
    });
    let mut router = Command::new("ip")
        .args(["netns", "exec", &ns.0, radvd, "-n", "-m", "stderr", "-C"])
        .arg(&conf)
        .arg("-p")
        .arg(dir.join("radvd.pid"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start radvd");
    let out = server.wait_exit(Duration::from_secs(60));
    let _ = router.kill();
    let _ = router.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.contains("65536 bytes echoed back, intact"),
        "{mode}: {out}"
    );
    assert!(
        counter(&out, "router advertisements received") >= 1,
        "{out}"
    );
    assert!(
        counter(&out, "temporary addresses formed") >= 1,
        "{mode}: {out}"
    );
    match accepted.join().unwrap() {
        SocketAddr::V6(peer) => *peer.ip(),
        other => panic!("{other}"),
    }
}

#[test]
fn the_kernel_talks_to_fastpath_on_af_xdp() {
    if environment_ok("the_kernel_talks_to_fastpath_on_af_xdp") {
        kernel_talks_to_fastpath(&["--xdp", "fpt0"], false, &[]);
    }
}

/// Two queues on the veth, an AF_XDP socket and a stack on each: the kernel's connections spread
/// by the veth's hash, over IPv4 and IPv6, and every one of them is served, whichever queue the
/// answers to a stack's ARP requests and neighbour solicitations reach.
#[test]
fn af_xdp_with_a_stack_per_queue_serves_connections_on_both() {
    if !environment_ok("af_xdp_with_a_stack_per_queue_serves_connections_on_both") {
        return;
    }
    stack_per_queue(&["--xdp", "fpt0"]);
}

/// AF_XDP with two queues, the kernel's end of the veth made to send everything on its second
/// queue (XPS), so that every reply to the connection queue 0's stack opens arrives on queue 1:
/// queue 1's link hands them over, and the echo comes back intact.
#[test]
fn af_xdp_hands_a_connection_s_replies_to_the_queue_that_opened_it() {
    if !environment_ok("af_xdp_hands_a_connection_s_replies_to_the_queue_that_opened_it") {
        return;
    }
    let out = connect_on_two_queues(&["--xdp", "fpt0"], Some("fpt0k"));
    let handed = out
        .lines()
        .filter_map(|l| l.trim().strip_suffix(" frames handed to another queue"))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum::<u64>();
    assert!(handed > 100, "{out}");
}

/// TAP with two queues: the steering program reads past the Ethernet header, so connections to
/// fastpath spread over both stacks, and one fastpath opens comes back to the stack that opened it.
#[test]
fn tap_with_a_stack_per_queue_serves_connections_on_both_and_keeps_its_own() {
    if !environment_ok("tap_with_a_stack_per_queue_serves_connections_on_both_and_keeps_its_own") {
        return;
    }
    stack_per_queue(&["--tap"]);
    connect_on_two_queues(&["--tap"], None);
}

/// A thread that accepts one connection on `listener` and echoes it until the peer closes.
fn echo_one(listener: std::net::TcpListener) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    })
}

/// `link` with two queues, queue 0's stack connecting to a kernel echo server and sending 2 MiB,
/// which must come back intact; with `xps`, the kernel's interface of that name sends on its second
/// queue only. Returns the server's output.
fn connect_on_two_queues(link: &[&str], xps: Option<&str>) -> String {
    let ns = TestNetns::create();
    let listener = in_netns(&ns.0, || {
        std::net::TcpListener::bind("0.0.0.0:7777").expect("listen in the namespace")
    });
    let echo = echo_one(listener);
    let mut args = link.to_vec();
    args.extend([
        "--queues",
        "2",
        "--connect",
        "10.7.0.1:7777",
        "--send",
        "2097152",
        "--connect-delay",
        "0.5",
    ]);
    let server = Server::start(&ns.0, &args);
    if let Some(dev) = xps {
        // Every CPU to transmit queue 1, none to queue 0.
        let cpus = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(32);
        for (queue, mask) in [(0, 0u32), (1, (1u32 << cpus) - 1)] {
            let path = format!("/sys/class/net/{dev}/queues/tx-{queue}/xps_cpus");
            let ok = Command::new("ip")
                .args(["netns", "exec", &ns.0, "sh", "-c"])
                .arg(format!("echo {mask:x} > {path}"))
                .status()
                .expect("ip netns exec");
            assert!(ok.success(), "writing {path}");
        }
    }
    let out = server.wait_exit(Duration::from_secs(60));
    echo.join().unwrap();
    assert!(
        out.contains("2097152 bytes echoed back, intact"),
        "{link:?}: {out}"
    );
    out
}

/// `link` with two queues, a stack on each: pings in both families and 24 TCP echo connections,
/// spread over both stacks.
fn stack_per_queue(link: &[&str]) {
    let ns = TestNetns::create();
    let mut args = link.to_vec();
    args.extend([
        "--queues",
        "2",
        "--kernel-addr6",
        KERNEL6,
        "--addr6",
        FASTPATH6,
    ]);
    let server = Server::start(&ns.0, &args);
    ping(&ns.0, false, 56, "10.7.0.2");
    ping(&ns.0, true, 56, FASTPATH6);
    for _ in 0..16 {
        tcp_echo(&ns.0, "10.7.0.2:7".parse().unwrap(), 64 << 10);
    }
    for _ in 0..8 {
        tcp_echo(&ns.0, "[fd00:7::2]:7".parse().unwrap(), 64 << 10);
    }
    let out = server.stop(Signal::SIGTERM);
    assert!(
        out.contains("tcp: 24 connections accepted"),
        "{link:?}: {out}"
    );
    let per_queue: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("--- queue "))
        .filter_map(|l| {
            let n = l
                .split(" connections accepted")
                .next()?
                .rsplit(' ')
                .next()?;
            n.parse().ok()
        })
        .collect();
    assert_eq!(per_queue.len(), 2, "{out}");
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "{link:?}: {per_queue:?}\n{out}"
    );
}

/// `--pcap` on TAP records frames (link type Ethernet); tshark, an independent dissector, reads
/// every one of fastpath's link-layer messages as what it is, finds nothing malformed, and sees
/// ARP both ways, neighbour discovery both ways, the duplicate address check, the listener report
/// and the router solicitation. Without tshark, the frames are checked with etherparse only.
#[test]
fn tshark_reads_every_frame_fastpath_sent_on_tap() {
    if !environment_ok("tshark_reads_every_frame_fastpath_sent_on_tap") {
        return;
    }
    let ns = TestNetns::create();
    let pcap = std::env::temp_dir().join(format!("{}.pcap", ns.0));
    let server = Server::start(
        &ns.0,
        &[
            "--tap",
            "--kernel-addr6",
            KERNEL6,
            "--addr6",
            FASTPATH6,
            "--pcap",
            pcap.to_str().unwrap(),
        ],
    );
    ping(&ns.0, false, 56, "10.7.0.2");
    ping(&ns.0, true, 56, FASTPATH6);
    // Long enough for the router solicitation that follows the link-local address's check.
    std::thread::sleep(Duration::from_millis(500));
    let out = server.stop(Signal::SIGTERM);
    let bytes = std::fs::read(&pcap).expect("the pcap file");
    // The file's byte order is its magic number's.
    let big = bytes[..4] == [0xa1, 0xb2, 0xc3, 0xd4];
    let word = |at: usize| {
        let b: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    // Link type 1: Ethernet.
    assert_eq!(word(20), 1);
    let mut at = 24;
    let mut frames = 0;
    while at + 16 <= bytes.len() {
        let len = word(at + 8) as usize;
        let frame = &bytes[at + 16..at + 16 + len];
        etherparse::SlicedPacket::from_ethernet(frame)
            .unwrap_or_else(|e| panic!("frame {frames}: {e:?}"));
        frames += 1;
        at += 16 + len;
    }
    assert!(frames >= 10, "{frames} frames\n{out}");
    let tshark = Command::new("tshark").arg("-r").arg(&pcap).output();
    let _ = std::fs::remove_file(&pcap);
    let Ok(t) = tshark else {
        eprintln!("tshark not installed: the frames were checked with etherparse only");
        return;
    };
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        t.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&t.stderr)
    );
    assert!(!text.contains("Malformed"), "{text}");
    for what in [
        "Who has 10.7.0.2",
        "10.7.0.2 is at",
        "Neighbor Solicitation for fd00:7::2",
        "Neighbor Advertisement fd00:7::2",
        "Neighbor Solicitation for fe80::",
        "Multicast Listener Report Message v2",
        "Router Solicitation",
        "Echo (ping) reply",
    ] {
        assert!(text.contains(what), "no {what:?} in:\n{text}");
    }
}
