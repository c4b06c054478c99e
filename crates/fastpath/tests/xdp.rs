//! The AF_XDP link on a veth pair: one end (`vx`, in a namespace of its own) held by an
//! [`XdpLink`], the other (`vk`, in a second namespace) the kernel's, with the address 10.77.0.1.
//! The kernel reaches the link's side, 10.77.0.2, through a permanent neighbour entry (no ARP).
//!
//! Needs root, `ip` and AF_XDP on veth (native XDP, copy mode); without them each test prints why
//! and passes, unless `FASTPATH_REQUIRE_TUN=1`, when it fails.
#![cfg(target_os = "linux")]

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use etherparse::{LinkSlice, NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use fastpath::buf::ChecksumOffload;
use fastpath::link::{disable_tx_checksum, Link, Medium, XdpConfig, XdpLink};
use fastpath::PacketBuf;

const KERNEL: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const OURS: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

fn require() -> bool {
    std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1")
}

/// Skips (returns false, printing why) or fails, as `FASTPATH_REQUIRE_TUN` says.
fn skip(test: &str, why: &str) -> bool {
    let why = format!("{test}: {why}");
    if require() {
        panic!("{why} (FASTPATH_REQUIRE_TUN=1)");
    }
    eprintln!("skipping {why}");
    false
}

/// True when the machine can run the tests: root and `ip`.
fn environment_ok(test: &str) -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let ip = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    match (root, ip) {
        (true, true) => true,
        (false, _) => skip(test, "needs root"),
        (true, false) => skip(test, "needs ip"),
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip_output(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}", args.join(" "));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two namespaces of the test's own joined by a veth pair, deleted (with the pair) on drop.
struct Veth {
    /// The link's side: `vx`.
    xdp_ns: String,
    /// The kernel's side: `vk`, 10.77.0.1/24.
    kernel_ns: String,
}

impl Veth {
    fn create(mtu: u32) -> Veth {
        Veth::with_queues(mtu, 1)
    }

    /// A pair whose ends have `queues` RX and TX queues each.
    fn with_queues(mtu: u32, queues: u32) -> Veth {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let veth = Veth {
            xdp_ns: format!("fpxdp-{pid}-{n}x"),
            kernel_ns: format!("fpxdp-{pid}-{n}k"),
        };
        ip(&["netns", "add", &veth.xdp_ns]);
        ip(&["netns", "add", &veth.kernel_ns]);
        let q = queues.to_string();
        ip(&[
            "-n",
            &veth.xdp_ns,
            "link",
            "add",
            "vx",
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            "vk",
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "netns",
            &veth.kernel_ns,
        ]);
        let mtu = mtu.to_string();
        for (ns, dev) in [(&veth.xdp_ns, "vx"), (&veth.kernel_ns, "vk")] {
            // No IPv6 addresses: nothing sent unasked (router solicitations, MLD reports).
            ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"]);
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        ip(&[
            "-n",
            &veth.kernel_ns,
            "addr",
            "add",
            "10.77.0.1/24",
            "dev",
            "vk",
        ]);
        veth
    }

    fn kernel_path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.kernel_ns)
    }

    fn xdp_path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.xdp_ns)
    }

    /// The kernel side's hardware address.
    fn kernel_mac(&self) -> [u8; 6] {
        let out = ip_output(&["-n", &self.kernel_ns, "-br", "link", "show", "vk"]);
        let text = out
            .split_whitespace()
            .nth(2)
            .expect("ip -br link: the address");
        let mut mac = [0u8; 6];
        for (b, part) in mac.iter_mut().zip(text.split(':')) {
            *b = u8::from_str_radix(part, 16).expect("a hex byte");
        }
        mac
    }

    /// The kernel reaches `addr` at `mac` without ARP.
    fn neighbour(&self, addr: Ipv4Addr, mac: [u8; 6]) {
        let lladdr = mac.map(|b| format!("{b:02x}")).join(":");
        let addr = addr.to_string();
        ip(&[
            "-n",
            &self.kernel_ns,
            "neigh",
            "add",
            &addr,
            "lladdr",
            &lladdr,
            "dev",
            "vk",
            "nud",
            "permanent",
        ]);
    }

    fn config(&self) -> XdpConfig {
        XdpConfig {
            ifname: "vx".into(),
            netns: Some(self.xdp_ns.clone()),
            ..XdpConfig::default()
        }
    }

    /// Opens the link; `None` (after printing why, or failing when required) if this kernel has no
    /// AF_XDP or native XDP on veth.
    fn open(&self, test: &str, config: &XdpConfig) -> Option<XdpLink> {
        match XdpLink::open(config) {
            Ok(link) => Some(link),
            Err(e) => {
                skip(test, &format!("no AF_XDP link on veth here: {e}"));
                None
            }
        }
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        for ns in [&self.xdp_ns, &self.kernel_ns] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A UDP socket of the kernel in namespace `ns`, bound to `addr` (a thread of its own enters the
/// namespace; the socket works from any thread).
fn kernel_socket(ns: PathBuf, addr: SocketAddrV4) -> UdpSocket {
    std::thread::spawn(move || {
        let f = std::fs::File::open(&ns).expect("open the namespace");
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        UdpSocket::bind(addr).expect("bind")
    })
    .join()
    .expect("the namespace thread")
}

/// A UDP/IPv4 datagram in a frame, as etherparse sees it.
struct Udp {
    dst_mac: [u8; 6],
    from: SocketAddrV4,
    to: SocketAddrV4,
    payload: Vec<u8>,
    /// The UDP checksum verifies.
    verifies: bool,
}

fn parse_udp(frame: &[u8]) -> Option<Udp> {
    let p = SlicedPacket::from_ethernet(frame).ok()?;
    let Some(LinkSlice::Ethernet2(eth)) = &p.link else {
        return None;
    };
    let dst_mac = eth.destination();
    let Some(NetSlice::Ipv4(v4)) = &p.net else {
        return None;
    };
    let Some(TransportSlice::Udp(udp)) = &p.transport else {
        return None;
    };
    let header = v4.header().to_header();
    let verifies = udp
        .to_header()
        .calc_checksum_ipv4(&header, udp.payload())
        .is_ok_and(|sum| sum == udp.checksum());
    Some(Udp {
        dst_mac,
        from: SocketAddrV4::new(header.source.into(), udp.source_port()),
        to: SocketAddrV4::new(header.destination.into(), udp.destination_port()),
        payload: udp.payload().to_vec(),
        verifies,
    })
}

/// Receives from `link` until `done` says so or `limit` passes; every frame goes to `seen`.
fn receive_until(
    link: &mut XdpLink,
    limit: Duration,
    mut seen: impl FnMut(&PacketBuf) -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    let mut batch = Vec::new();
    while Instant::now() < deadline {
        link.wait(Some(Duration::from_millis(20))).expect("wait");
        batch.clear();
        link.receive(&mut batch, 64);
        for frame in &batch {
            if seen(frame) {
                return true;
            }
        }
    }
    false
}

/// A UDP/IPv4 frame from the link's side to the kernel's.
fn udp_frame(src_mac: [u8; 6], dst_mac: [u8; 6], dport: u16, payload: &[u8]) -> Vec<u8> {
    let builder = PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv4(OURS.octets(), KERNEL.octets(), 64)
        .udp(5555, dport);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut frame, payload).expect("build the frame");
    frame
}

#[test]
fn receives_the_kernel_s_udp_datagrams() {
    let test = "receives_the_kernel_s_udp_datagrams";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(1500);
    let Some(mut link) = veth.open(test, &veth.config()) else {
        return;
    };
    let Medium::Ethernet(mac) = link.medium() else {
        panic!("an AF_XDP link carries Ethernet frames");
    };
    assert!(!link.zero_copy(), "copy mode unless asked");
    assert!(!link.multi_buffer(), "1500 bytes fit a 4096-byte chunk");
    assert_eq!(link.capabilities().mtu, 1500, "the interface's MTU");
    assert_eq!(link.handle().as_fd().as_raw_fd(), link.as_raw_fd());
    assert!(
        link.attached_by_bpf_link(),
        "Linux 5.9 and later have XDP links"
    );
    veth.neighbour(OURS, mac.0);
    // The kernel completes its checksums, so the frames verify.
    disable_tx_checksum(Some(&veth.kernel_ns), "vk").expect("ethtool tx off");

    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 4000));
    const N: usize = 100;
    for i in 0..N {
        sock.send_to(format!("datagram {i}").as_bytes(), (OURS, 7777))
            .expect("send_to");
    }
    let mut got = [false; N];
    let mut count = 0;
    let all = receive_until(&mut link, Duration::from_secs(3), |frame| {
        if let Some(Udp {
            dst_mac,
            from,
            to,
            payload,
            verifies,
        }) = parse_udp(frame.data())
        {
            assert_eq!(dst_mac, mac.0, "to our address");
            assert_eq!(from, SocketAddrV4::new(KERNEL, 4000));
            assert_eq!(to, SocketAddrV4::new(OURS, 7777));
            assert!(verifies, "a complete UDP checksum");
            let text = String::from_utf8(payload).expect("text");
            let i: usize = text["datagram ".len()..].parse().expect("a number");
            assert!(!got[i], "datagram {i} twice");
            got[i] = true;
            count += 1;
        }
        count == N
    });
    assert!(all, "received {count} of {N} datagrams");
    let stats = link.stats();
    assert!(stats.rx_frames >= N as u64, "{stats:?}");
    assert_eq!(
        stats.rx_drop_bad_desc + stats.rx_drop_oversize,
        0,
        "{stats:?}"
    );
    assert_eq!(stats.kernel_rx_dropped, 0, "{stats:?}");
    assert_eq!(link.handle().stats().rx_frames, stats.rx_frames);
}

#[test]
fn transmits_frames_the_kernel_receives() {
    let test = "transmits_frames_the_kernel_receives";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(1500);
    let Some(mut link) = veth.open(test, &veth.config()) else {
        return;
    };
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 9999));
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let (ours, theirs) = (link.mac().0, veth.kernel_mac());
    // One frame, then a batch larger than copy mode sends per kick.
    for batch_len in [1usize, 200] {
        let mut batch: Vec<PacketBuf> = (0..batch_len)
            .map(|i| {
                PacketBuf::from_slice(&udp_frame(
                    ours,
                    theirs,
                    9999,
                    format!("frame {i}").as_bytes(),
                ))
            })
            .collect();
        assert_eq!(link.transmit(&mut batch), 0, "nothing dropped");
        assert!(batch.is_empty(), "transmit takes every frame");
        let mut buf = [0u8; 2048];
        let mut seen = vec![false; batch_len];
        for _ in 0..batch_len {
            let (n, from) = sock.recv_from(&mut buf).unwrap_or_else(|e| {
                panic!(
                    "the kernel received {} of {batch_len}: {e}; {:?}",
                    seen.iter().filter(|&&s| s).count(),
                    link.stats()
                )
            });
            assert_eq!(from, std::net::SocketAddr::from((OURS, 5555)));
            let text = std::str::from_utf8(&buf[..n]).expect("text");
            let i: usize = text["frame ".len()..].parse().expect("a number");
            assert!(!seen[i]);
            seen[i] = true;
        }
    }
    let stats = link.stats();
    assert_eq!(stats.tx_frames, 201, "{stats:?}");
    assert_eq!(
        stats.tx_drop_ring_full + stats.tx_drop_oversize,
        0,
        "{stats:?}"
    );
    assert_eq!(stats.kernel_tx_invalid_descs, 0, "{stats:?}");

    // A frame larger than the MTU allows is dropped and counted, not sent; not a full queue.
    let mut big = vec![PacketBuf::from_slice(&udp_frame(
        ours, theirs, 9999, &[0; 1600],
    ))];
    assert_eq!(link.transmit(&mut big), 0);
    assert_eq!(link.stats().tx_drop_oversize, 1);
    assert_eq!(link.stats().tx_frames, 201);

    // The stack is never promised more than the interface carries.
    drop(link);
    let err = XdpLink::open(&XdpConfig {
        mtu: Some(1501),
        ..veth.config()
    })
    .expect_err("an MTU past the interface's");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn frames_not_for_the_stack_stay_with_the_kernel() {
    let test = "frames_not_for_the_stack_stay_with_the_kernel";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(1500);
    // The link's side kernel has an address too, and a socket in an IPv4 multicast group.
    ip(&[
        "-n",
        &veth.xdp_ns,
        "addr",
        "add",
        "10.77.0.9/24",
        "dev",
        "vx",
    ]);
    let Some(mut link) = veth.open(test, &veth.config()) else {
        return;
    };
    let mac = link.mac().0;
    let group = Ipv4Addr::new(239, 1, 2, 3);
    let listener = kernel_socket(
        veth.xdp_path(),
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4444),
    );
    listener
        .join_multicast_v4(&group, &Ipv4Addr::new(10, 77, 0, 9))
        .expect("join the group");
    listener
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    veth.neighbour(OURS, mac);
    let other = Ipv4Addr::new(10, 77, 0, 3);
    veth.neighbour(other, [0x02, 0, 0, 0, 0, 0x99]);
    ip(&[
        "-n",
        &veth.kernel_ns,
        "route",
        "add",
        "239.0.0.0/8",
        "dev",
        "vk",
    ]);

    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 4001));
    for _ in 0..20 {
        sock.send_to(b"to someone else", (other, 7777))
            .expect("send");
    }
    sock.send_to(b"to the group", (group, 4444)).expect("send");
    // The group's datagram reached the kernel's socket: passed, not redirected.
    let mut buf = [0u8; 64];
    let (n, _) = listener
        .recv_from(&mut buf)
        .expect("the kernel's multicast socket receives");
    assert_eq!(&buf[..n], b"to the group");
    // Last, a marker to our address: the link sees it and nothing sent before it.
    sock.send_to(b"marker", (OURS, 7777)).expect("send");
    let mut others = 0;
    let marked = receive_until(&mut link, Duration::from_secs(3), |frame| {
        match parse_udp(frame.data()) {
            Some(udp) if udp.payload == b"marker" => true,
            Some(_) => {
                others += 1;
                false
            }
            None => false,
        }
    });
    assert!(marked, "the marker arrived");
    assert_eq!(
        others, 0,
        "frames to another address or an IPv4 group redirected"
    );

    // Dropping the link detaches the program; the interface can be opened again.
    drop(link);
    let shown = ip_output(&["-n", &veth.xdp_ns, "link", "show", "vx"]);
    assert!(!shown.contains("prog/xdp"), "still attached: {shown}");
    let again = XdpLink::open(&veth.config()).expect("open again");
    drop(again);
}

/// `frame` (from [`udp_frame`]) with its UDP checksum left partial, as a stack leaves it for a link
/// that offers the offload: the field holds the pseudo-header's sum, and the buffer says where the
/// sum starts (the UDP header, counted from the frame's first byte) and where it goes.
fn partial_udp(frame: &[u8]) -> PacketBuf {
    let mut frame = frame.to_vec();
    let udp_len = (frame.len() - 34) as u16;
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&OURS.octets());
    pseudo.extend_from_slice(&KERNEL.octets());
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    let sum = fastpath::checksum::rfc1071(&pseudo);
    frame[40..42].copy_from_slice(&sum.to_be_bytes());
    let mut buf = PacketBuf::from_slice(&frame);
    buf.meta.set_checksum(ChecksumOffload::Partial {
        start: 34,
        offset: 6,
    });
    buf
}

/// Transmit checksum offload through AF_XDP's transmit metadata: frames whose UDP checksum is only
/// the pseudo-header's reach a kernel socket whole, one chunk or several. With the kernel told to
/// compute offloaded sums itself (`kernel_software_checksum`), the frame leaves with the sum the
/// metadata asked for at the place it named, which the kernel's UDP then verifies: a request naming
/// the wrong place fails that check and is dropped, so the offsets are what the kernel used. (A
/// multi-chunk frame carries its request in its first chunk only, with the same offsets.)
#[test]
fn checksums_offloaded_through_transmit_metadata() {
    let test = "checksums_offloaded_through_transmit_metadata";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(9000);
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 9999));
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let payload: Vec<u8> = (0..8000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut buf = vec![0u8; 9000];
    for software in [false, true] {
        let config = XdpConfig {
            kernel_software_checksum: software,
            ..veth.config()
        };
        let Some(mut link) = veth.open(test, &config) else {
            return;
        };
        assert!(
            link.tx_checksum_offload() && link.capabilities().tx_checksum_offload,
            "copy mode on a kernel with transmit metadata (6.8) offers the offload"
        );
        let (ours, theirs) = (link.mac().0, veth.kernel_mac());
        // The kernel's software sum runs when the frame's first chunk is in, before the rest (Linux
        // 6.18): with it, only frames of one chunk are checked.
        let sizes: &[usize] = if software { &[64, 1400] } else { &[64, 8000] };
        for &size in sizes {
            let frame = udp_frame(ours, theirs, 9999, &payload[..size]);
            let mut batch = vec![partial_udp(&frame)];
            assert_eq!(link.transmit(&mut batch), 0);
            let (n, _) = sock.recv_from(&mut buf).unwrap_or_else(|e| {
                panic!(
                    "software {software}, {size} bytes: the kernel received nothing: {e}; {:?}",
                    link.stats()
                )
            });
            assert_eq!(&buf[..n], &payload[..size]);
        }
        assert_eq!(link.stats().tx_checksum_offloaded, 2);
        if software {
            // The sum asked for at the IPv4 header's identification field instead: the UDP
            // checksum stays partial, and the kernel's UDP drops the datagram.
            let frame = udp_frame(ours, theirs, 9999, &payload[..64]);
            let mut wrong = partial_udp(&frame);
            wrong.meta.set_checksum(ChecksumOffload::Partial {
                start: 18,
                offset: 0,
            });
            assert_eq!(link.transmit(&mut vec![wrong]), 0);
            assert!(
                sock.recv_from(&mut buf).is_err(),
                "a checksum computed where the metadata said is what the kernel verified"
            );
        }
        drop(link);
    }
    // Off: the link offers nothing, and the stack computes every checksum; a partial one handed to
    // it anyway is completed by the link, and the kernel's UDP verifies it.
    let Some(mut link) = veth.open(
        test,
        &XdpConfig {
            tx_checksum_offload: false,
            ..veth.config()
        },
    ) else {
        return;
    };
    assert!(!link.tx_checksum_offload());
    let (ours, theirs) = (link.mac().0, veth.kernel_mac());
    let frame = udp_frame(ours, theirs, 9999, &payload[..300]);
    assert_eq!(link.transmit(&mut vec![partial_udp(&frame)]), 0);
    let (n, _) = sock
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("completed by the link: {e}; {:?}", link.stats()));
    assert_eq!(&buf[..n], &payload[..300]);
    assert_eq!(link.stats().tx_checksum_offloaded, 0);
}

#[test]
fn multi_buffer_frames_for_a_jumbo_mtu() {
    let test = "multi_buffer_frames_for_a_jumbo_mtu";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(9000);
    let Some(mut link) = veth.open(test, &veth.config()) else {
        return;
    };
    assert!(link.multi_buffer(), "9018 bytes need three chunks of 4096");
    assert_eq!(link.capabilities().mtu, 9000);
    let (ours, theirs) = (link.mac().0, veth.kernel_mac());
    veth.neighbour(OURS, ours);
    disable_tx_checksum(Some(&veth.kernel_ns), "vk").expect("ethtool tx off");

    // Receive: one 8000-byte datagram, joined from its pieces.
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 9999));
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let payload: Vec<u8> = (0..8000u32).map(|i| (i * 7 % 251) as u8).collect();
    sock.send_to(&payload, (OURS, 7777)).expect("send_to");
    let got = receive_until(&mut link, Duration::from_secs(3), |frame| {
        parse_udp(frame.data()).is_some_and(|udp| {
            assert!(udp.verifies, "a complete checksum");
            udp.payload == payload
        })
    });
    assert!(got, "the jumbo datagram arrived whole: {:?}", link.stats());
    assert!(link.stats().rx_multi_buffer >= 1);

    // Transmit: one 8000-byte datagram, split over chunks.
    let mut batch = vec![PacketBuf::from_slice(&udp_frame(
        ours, theirs, 9999, &payload,
    ))];
    assert_eq!(link.transmit(&mut batch), 0);
    let mut buf = vec![0u8; 9000];
    let (n, _) = sock
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("the kernel received nothing: {e}; {:?}", link.stats()));
    assert_eq!(&buf[..n], &payload[..]);
    assert_eq!(link.stats().tx_multi_buffer, 1);
}

#[test]
fn rates() {
    let test = "rates";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(1500);
    let Some(mut link) = veth.open(test, &veth.config()) else {
        return;
    };
    veth.neighbour(OURS, link.mac().0);
    disable_tx_checksum(Some(&veth.kernel_ns), "vk").expect("ethtool tx off");
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 4002));
    let window = Duration::from_millis(500);
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < window {
            for _ in 0..64 {
                if sock.send_to(&[0u8; 18], (OURS, 7777)).is_ok() {
                    sent += 1;
                }
            }
        }
        sent
    });
    let start = Instant::now();
    let mut received = 0u64;
    let mut batch = Vec::new();
    while start.elapsed() < window + Duration::from_millis(100) {
        batch.clear();
        received += link.receive(&mut batch, 64) as u64;
        if batch.is_empty() {
            link.wait(Some(Duration::from_millis(1))).expect("wait");
        }
    }
    let sent = sender.join().expect("sender");
    let stats = link.stats();
    eprintln!(
        "receive_rate: {received} of {sent} datagrams in {:?} ({:.0} frames/s received); \
         kernel: rx ring full {}, fill ring empty {}",
        window,
        received as f64 / window.as_secs_f64(),
        stats.kernel_rx_ring_full,
        stats.kernel_rx_fill_ring_empty_descs
    );
    assert!(received > 0);

    // Transmit: batches of 64 minimal frames to a kernel socket that is never read (the kernel
    // drops what its buffer cannot hold; the link's count is what it handed over).
    let theirs = veth.kernel_mac();
    let _sink = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 9));
    let frame = udp_frame(link.mac().0, theirs, 9, &[0u8; 18]);
    let before = link.stats();
    let start = Instant::now();
    let mut batch = Vec::with_capacity(64);
    let mut dropped = 0;
    while start.elapsed() < window {
        batch.extend((0..64).map(|_| PacketBuf::from_slice(&frame)));
        dropped += link.transmit(&mut batch);
    }
    let elapsed = start.elapsed();
    let stats = link.stats();
    let sent = stats.tx_frames - before.tx_frames;
    eprintln!(
        "transmit_rate: {sent} frames in {elapsed:?} ({:.0} frames/s), {dropped} dropped at a full \
         ring, {} kicks",
        sent as f64 / elapsed.as_secs_f64(),
        stats.tx_kicks - before.tx_kicks
    );
    assert!(sent > 0);
    assert_eq!(stats.kernel_tx_invalid_descs, 0, "{stats:?}");
}

#[test]
fn frames_past_the_link_s_mtu_are_dropped_and_counted() {
    let test = "frames_past_the_link_s_mtu_are_dropped_and_counted";
    if !environment_ok(test) {
        return;
    }
    // The interface takes 9000 bytes; the stack was promised 1500.
    let veth = Veth::create(9000);
    let config = XdpConfig {
        mtu: Some(1500),
        ..veth.config()
    };
    let Some(mut link) = veth.open(test, &config) else {
        return;
    };
    assert_eq!(link.capabilities().mtu, 1500);
    assert!(
        link.multi_buffer(),
        "the interface's frames need several chunks"
    );
    veth.neighbour(OURS, link.mac().0);
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 4004));
    sock.send_to(&[7u8; 8000], (OURS, 7777)).expect("send");
    sock.send_to(b"after", (OURS, 7777)).expect("send");
    let mut large = 0;
    let got = receive_until(&mut link, Duration::from_secs(2), |frame| {
        large += usize::from(frame.len() > 1518);
        parse_udp(frame.data()).is_some_and(|udp| udp.payload == b"after")
    });
    assert!(got, "the small datagram after the large one");
    assert_eq!(large, 0, "nothing larger than the MTU handed to the stack");
    let stats = link.stats();
    assert_eq!(stats.rx_drop_oversize, 1, "{stats:?}");
    assert_eq!(stats.rx_multi_buffer, 0, "{stats:?}");
}

#[test]
fn zero_copy_falls_back_to_copy_mode_on_veth() {
    let test = "zero_copy_falls_back_to_copy_mode_on_veth";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::create(1500);
    let config = XdpConfig {
        zero_copy: true,
        ..veth.config()
    };
    let Some(mut link) = veth.open(test, &config) else {
        return;
    };
    assert!(!link.zero_copy(), "veth has no zero-copy mode");
    veth.neighbour(OURS, link.mac().0);
    let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 4003));
    sock.send_to(b"copied", (OURS, 7777)).expect("send");
    let got = receive_until(&mut link, Duration::from_secs(2), |frame| {
        parse_udp(frame.data()).is_some_and(|udp| udp.payload == b"copied")
    });
    assert!(got, "a frame through the copy-mode socket");
}

#[test]
fn a_link_per_queue() {
    let test = "a_link_per_queue";
    if !environment_ok(test) {
        return;
    }
    let veth = Veth::with_queues(1500, 2);
    let mut links = match XdpLink::open_queues(&veth.config(), 2) {
        Ok(links) => links,
        Err(e) => {
            skip(test, &format!("no AF_XDP link on veth here: {e}"));
            return;
        }
    };
    assert_eq!(links.len(), 2);
    assert_eq!((links[0].queue(), links[1].queue()), (0, 1));
    assert_ne!(links[0].as_raw_fd(), links[1].as_raw_fd());
    let mac = links[0].mac();
    assert_eq!(links[1].mac(), mac);
    veth.neighbour(OURS, mac.0);
    // Sixteen sockets: the kernel picks a transmit queue of `vk` per socket, at random, and veth
    // hands each frame to the same-numbered queue of `vx`.
    const SOCKETS: u16 = 16;
    const EACH: usize = 10;
    for s in 0..SOCKETS {
        let sock = kernel_socket(veth.kernel_path(), SocketAddrV4::new(KERNEL, 5000 + s));
        for i in 0..EACH {
            sock.send_to(format!("{s} {i}").as_bytes(), (OURS, 7777))
                .expect("send");
        }
    }
    let total = usize::from(SOCKETS) * EACH;
    let mut per_queue = [0usize; 2];
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut batch = Vec::new();
    while per_queue.iter().sum::<usize>() < total && Instant::now() < deadline {
        for (q, link) in links.iter_mut().enumerate() {
            batch.clear();
            link.receive(&mut batch, 64);
            per_queue[q] += batch
                .iter()
                .filter(|f| parse_udp(f.data()).is_some_and(|udp| udp.to.port() == 7777))
                .count();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(per_queue.iter().sum::<usize>(), total, "{per_queue:?}");
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "both queues got frames: {per_queue:?}"
    );
}
