//! `fastpath demux-sim` and `fastpath bench demux`, run as a user runs them.

use std::borrow::Cow;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use serde_json::Value;

fn fastpath(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .output()
        .expect("the fastpath binary runs")
}

/// Runs fastpath with `--json -` among `args`; returns the parsed JSON array and standard error.
fn json_of(args: &[&str]) -> (Vec<Value>, String) {
    let out = fastpath(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fastpath {args:?} failed:\n{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on standard output");
    (v.as_array().expect("a JSON array").clone(), stderr)
}

fn num(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {row}"))
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fastpath-test-{}-{name}", std::process::id()))
}

#[test]
fn synthetic_traces_match_table_1() {
    let expected = [
        ("cleon", 85_975, 0.85, 327),
        ("gaia", 106_969, 0.99, 266),
        ("lennon", 61_437, 0.96, 414),
        ("siwenna", 143_830, 0.99, 17),
    ];
    for (name, lookups, share, pcbs) in expected {
        let (rows, stderr) = json_of(&[
            "demux-sim",
            "--synthetic",
            name,
            "--runs",
            "1",
            "--json",
            "-",
        ]);
        assert!(stderr.contains("table 4"), "{stderr}");
        assert_eq!(rows.len(), 8, "every strategy by default");
        assert_eq!(rows[0]["strategy"], "linear");
        for row in &rows {
            assert_eq!(num(row, "lookups") as usize, lookups, "{name}: {row}");
            assert!(
                (num(row, "server_share") - share).abs() < 0.01,
                "{name}: {row}"
            );
            assert_eq!(num(row, "initial_pcbs") as usize, pcbs, "{name}");
            assert_eq!(num(row, "mismatches"), 0.0, "{name}: {row}");
            assert_eq!(num(row, "model_mismatches"), 0.0, "{name}: {row}");
            assert!(num(row, "mean_comparisons") >= 1.0);
            assert!(num(row, "mean_ns") >= 0.0 && num(row, "p90_ns") >= 0.0);
            assert!(row.get("speedup_vs_linear").is_some());
            assert!(row.get("mean_instructions").is_none());
        }
    }
}

/// An IPv4 datagram of protocol `proto` with `payload` after the header.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 7, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn udp(src: SocketAddrV4, dst: SocketAddrV4) -> Vec<u8> {
    let data = b"fastpath";
    let mut u = Vec::new();
    u.extend_from_slice(&src.port().to_be_bytes());
    u.extend_from_slice(&dst.port().to_be_bytes());
    u.extend_from_slice(&(8 + data.len() as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    ipv4(*src.ip(), *dst.ip(), 17, &u)
}

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Datagrams to SERVER in the capture: 200 to servers, 40 replies to clients, 25 fully specified.
const LOOKUPS: usize = 265;
const MALFORMED: usize = 5;

/// Ethernet frames: server traffic on four well-known ports, replies to the host's clients, two fully
/// specified flows, datagrams to another host, TCP, ARP, and malformed packets.
fn capture_frames() -> Vec<Vec<u8>> {
    let sa = |a: Ipv4Addr, p: u16| SocketAddrV4::new(a, p);
    let remote = |i: usize| Ipv4Addr::new(10, 0, 1, (i % 20) as u8 + 10);
    let mut frames = Vec::new();
    let mut flow = 0;
    for i in 0..200 {
        let port = [53, 123, 161, 514][i % 4];
        frames.push(ethernet(
            0x0800,
            &udp(sa(remote(i), 2000 + (i % 7) as u16), sa(SERVER, port)),
        ));
        if i % 5 == 0 {
            let client_port = 30_000 + (i / 5) as u16;
            frames.push(ethernet(
                0x0800,
                &udp(sa(Ipv4Addr::new(10, 0, 2, 53), 53), sa(SERVER, client_port)),
            ));
        }
        if i % 8 == 3 && flow < 25 {
            let (local, peer) = if flow % 5 < 3 {
                (40_000, sa(Ipv4Addr::new(10, 0, 3, 1), 6000))
            } else {
                (40_001, sa(Ipv4Addr::new(10, 0, 3, 2), 6001))
            };
            frames.push(ethernet(0x0800, &udp(peer, sa(SERVER, local))));
            flow += 1;
        }
        if i % 7 == 0 {
            let other = sa(Ipv4Addr::new(10, 0, 0, 2), 53);
            frames.push(ethernet(0x0800, &udp(sa(remote(i), 3000), other)));
        }
        if i % 20 == 0 {
            frames.push(ethernet(0x0800, &ipv4(remote(i), SERVER, 6, &[0; 20])));
            frames.push(ethernet(0x0806, &[0; 28]));
        }
    }
    assert_eq!(flow, 25);
    let good = udp(sa(remote(1), 2000), sa(SERVER, 53));
    let mut bad_ihl = good.clone();
    bad_ihl[0] = 0x43;
    let mut long_udp = good.clone();
    long_udp[25] = 200;
    let malformed = [
        ethernet(0x0800, &good[..10]),
        ethernet(0x0800, &bad_ihl),
        ethernet(0x0800, &long_udp),
        ethernet(0x0800, &good[..24]),
        vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0],
    ];
    assert_eq!(malformed.len(), MALFORMED);
    for (k, m) in malformed.into_iter().enumerate() {
        frames.insert(37 * (k + 1), m);
    }
    frames
}

fn write_pcap(path: &PathBuf, frames: &[Vec<u8>]) {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(File::create(path).unwrap(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let t = Duration::from_micros(1_000 * i as u64);
        w.write_packet(&PcapPacket::new(t, f.len() as u32, f))
            .unwrap();
    }
}

fn write_pcapng(path: &PathBuf, frames: &[Vec<u8>]) {
    let mut w = PcapNgWriter::new(File::create(path).unwrap()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 65535))
        .unwrap();
    for (i, f) in frames.iter().enumerate() {
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_micros(1_000 * i as u64),
            original_len: f.len() as u32,
            data: Cow::Borrowed(f),
            options: vec![],
        };
        w.write_pcapng_block(block).unwrap();
    }
}

fn check_capture_rows(rows: &[Value], stderr: &str) {
    assert!(
        stderr.contains(&format!("{MALFORMED} malformed")),
        "{stderr}"
    );
    assert_eq!(rows.len(), 8);
    for row in rows {
        assert_eq!(num(row, "lookups") as usize, LOOKUPS, "{row}");
        assert_eq!(num(row, "mismatches"), 0.0, "{row}");
        assert_eq!(num(row, "model_mismatches"), 0.0, "{row}");
        assert_eq!(num(row, "initial_pcbs"), 4.0, "{row}");
        assert!((num(row, "server_share") - 200.0 / LOOKUPS as f64).abs() < 1e-9);
    }
}

#[test]
fn pcap_and_pcapng_captures_replay_alike() {
    let frames = capture_frames();
    let pcap = temp_path("trace.pcap");
    let pcapng = temp_path("trace.pcapng");
    write_pcap(&pcap, &frames);
    write_pcapng(&pcapng, &frames);
    let mut means = Vec::new();
    for path in [&pcap, &pcapng] {
        let file = path.to_str().unwrap();
        let args = [
            "demux-sim",
            "--trace",
            file,
            "--local",
            "10.0.0.1",
            "--runs",
            "1",
            "--json",
            "-",
        ];
        let (rows, stderr) = json_of(&args);
        check_capture_rows(&rows, &stderr);
        means.push(num(&rows[0], "mean_comparisons"));
    }
    assert_eq!(means[0], means[1], "pcap and pcapng hold the same trace");

    // Without --local, the busiest destination is the server, and the report says so.
    let (rows, stderr) = json_of(&[
        "demux-sim",
        "--trace",
        pcap.to_str().unwrap(),
        "--strategies",
        "linear",
        "--runs",
        "1",
        "--json",
        "-",
    ]);
    assert!(
        stderr.contains("10.0.0.1") && stderr.contains("most frequent"),
        "{stderr}"
    );
    assert_eq!(rows.len(), 1);
    assert_eq!(num(&rows[0], "lookups") as usize, LOOKUPS);

    // A capture cut off mid-packet still replays what it holds.
    let bytes = std::fs::read(&pcap).unwrap();
    let cut = temp_path("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3 + 5]).unwrap();
    let out = fastpath(&[
        "demux-sim",
        "--trace",
        cut.to_str().unwrap(),
        "--local",
        "10.0.0.1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("damaged"), "{text}");

    // Not a capture at all: a clear error, no panic.
    let junk = temp_path("junk.pcap");
    std::fs::write(&junk, b"this is not a capture file at all").unwrap();
    let out = fastpath(&["demux-sim", "--trace", junk.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not a pcap or pcapng capture"), "{err}");

    for p in [pcap, pcapng, cut, junk] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn instructions_are_counted_when_valgrind_is_there() {
    let valgrind = Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|o| o.status.success()) {
        eprintln!("valgrind is not installed: skipping the --instructions test");
        return;
    }
    let pcap = temp_path("instr.pcap");
    write_pcap(&pcap, &capture_frames());
    let (rows, _) = json_of(&[
        "demux-sim",
        "--trace",
        pcap.to_str().unwrap(),
        "--local",
        "10.0.0.1",
        "--strategies",
        "linear",
        "--runs",
        "1",
        "--instructions",
        "--json",
        "-",
    ]);
    let _ = std::fs::remove_file(pcap);
    let instr = num(&rows[0], "mean_instructions");
    // Linear examines about six PCBs per lookup here: tens of instructions, not thousands.
    assert!(instr > 10.0 && instr < 1000.0, "{instr}");
    assert_eq!(num(&rows[0], "speedup_instructions_vs_linear"), 1.0);
}

#[test]
fn bench_demux_produces_numbers() {
    let (cells, _) = json_of(&[
        "bench",
        "demux",
        "--sockets",
        "1,64",
        "--rounds",
        "3",
        "--round-ms",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(cells.len(), 2 * 8);
    for cell in &cells {
        let sockets = num(cell, "sockets");
        assert!(sockets == 1.0 || sockets == 64.0);
        assert!(num(cell, "ns_per_lookup") > 0.0, "{cell}");
        assert!(num(cell, "mean_comparisons") >= 1.0, "{cell}");
        assert!(num(cell, "lookups_per_round") >= 1000.0, "{cell}");
        assert_eq!(num(cell, "mismatches"), 0.0, "{cell}");
    }
}

/// With standard error not a terminal (a pipe here), the progress bars of `bench demux` and
/// `demux-sim` draw nothing: standard error holds the report alone, without carriage returns or
/// escape sequences.
#[test]
fn no_progress_bar_off_a_terminal() {
    for args in [
        &[
            "bench",
            "demux",
            "--sockets",
            "16",
            "--rounds",
            "2",
            "--json",
            "-",
        ][..],
        &[
            "demux-sim",
            "--synthetic",
            "gaia",
            "--runs",
            "1",
            "--json",
            "-",
        ],
    ] {
        let (_, stderr) = json_of(args);
        assert!(
            !stderr.contains('\r') && !stderr.contains('\x1b'),
            "{args:?} drew a progress bar into a pipe:\n{stderr:?}"
        );
        assert!(stderr.contains("linear"), "{args:?}: no report:\n{stderr}");
    }
}

/// A capture of real fastpath traffic: stack A (10.0.0.1) talks to the server host 10.0.0.2, whose wire
/// the test holds; every packet that reaches that wire is written to a pcap (raw IPv4 link type) and
/// replayed through every strategy.
#[test]
fn a_capture_of_fastpath_traffic_replays_without_mismatches() {
    use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
    use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};

    let (wire, end) = PairEnd::pair(LinkCapabilities::plain(1500), 65536, Impairments::default());
    let mut a = Stack::new(StackConfig::default());
    a.add_interface("pair0", end, Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24));
    let server = Ipv4Addr::new(10, 0, 0, 2);
    let mut sent = 0usize;
    // Requests from clients on ephemeral ports to the server's well-known ports.
    let clients: Vec<_> = (0..8).map(|_| a.udp_bind("10.0.0.1:0").unwrap()).collect();
    for round in 0..20u16 {
        for (i, &c) in clients.iter().enumerate() {
            let port = [53, 123, 69, 161, 514][(i + round as usize) % 5];
            a.udp(c)
                .send_to(b"request", SocketAddrV4::new(server, port))
                .unwrap();
            sent += 1;
        }
    }
    // Replies from well-known services to the server host's own clients (ephemeral ports).
    let ntp = a.udp_bind("10.0.0.1:123").unwrap();
    for k in 0..30u16 {
        a.udp(ntp)
            .send_to(b"reply", SocketAddrV4::new(server, 40000 + k))
            .unwrap();
        sent += 1;
    }
    // A flow between two non-well-known ports: a fully specified PCB on the server host.
    let peer = a.udp_bind("10.0.0.1:50000").unwrap();
    for _ in 0..25 {
        a.udp(peer)
            .send_to(b"flow", SocketAddrV4::new(server, 50001))
            .unwrap();
        sent += 1;
    }
    a.poll(Instant::ZERO);
    let mut wire = wire;
    let mut packets = Vec::new();
    wire.receive(&mut packets, usize::MAX);
    assert_eq!(packets.len(), sent);

    let path = temp_path("fastpath-traffic.pcap");
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap();
    for (i, p) in packets.iter().enumerate() {
        let ts = Duration::from_micros(i as u64 * 100);
        w.write_packet(&PcapPacket::new(ts, p.len() as u32, p.data()))
            .unwrap();
    }
    drop(w);
    let (rows, stderr) = json_of(&[
        "demux-sim",
        "--trace",
        path.to_str().unwrap(),
        "--local",
        "10.0.0.2",
        "--json",
        "-",
    ]);
    assert_eq!(rows.len(), 8, "{stderr}");
    for row in &rows {
        assert_eq!(num(row, "lookups") as usize, sent, "{row}");
        assert_eq!(num(row, "mismatches"), 0.0, "{row}");
    }
    let _ = std::fs::remove_file(path);
}
