//! Every experiment runs in `--quick` mode and writes sane JSON rows. These check shape and sanity (every
//! configuration delivered every datagram, figures positive and finite), never speed.

use std::process::Command;

use serde_json::Value;

fn run(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .output()
        .expect("run fastpath");
    assert!(
        out.status.success(),
        "fastpath {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    // With `--json -` standard output is the JSON array and nothing else; the tables went to
    // standard error.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("bench {}", args[1])),
        "fastpath {args:?}: the table is not on standard error:\n{stderr}"
    );
    serde_json::from_str::<Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("standard output of {args:?} is not JSON alone: {e}\n{text}"))
}

fn positive(row: &Value, field: &str) -> f64 {
    let v = row[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {row}"));
    assert!(v.is_finite() && v > 0.0, "{field} = {v} in {row}");
    v
}

#[test]
fn bench_udp_quick() {
    let rows = run(&["bench", "udp", "--quick", "--json", "-"]);
    let configs: Vec<&str> = rows
        .iter()
        .filter(|r| r["size"] == 64)
        .map(|r| r["config"].as_str().unwrap())
        .collect();
    assert_eq!(configs.first(), Some(&"classic"));
    assert_eq!(configs.last(), Some(&"default"));
    assert_eq!(configs.len(), 7);
    assert_eq!(rows.len(), 7 * 4);
    for r in &rows {
        positive(r, "ns_per_datagram");
        positive(r, "datagrams_per_s");
        positive(r, "improvement_vs_classic");
    }
}

#[test]
fn bench_checksum_quick() {
    let rows = run(&["bench", "checksum", "--quick", "--json", "-"]);
    for name in [
        "rfc1071",
        "unrolled32",
        "wide",
        "memcpy",
        "copy-then-checksum",
        "copy+checksum",
    ] {
        for bytes in [20, 64, 512, 1500, 8192, 65536, 16 << 20] {
            let r = rows
                .iter()
                .find(|r| r["algorithm"] == name && r["bytes"] == bytes)
                .unwrap_or_else(|| panic!("{name} at {bytes}"));
            positive(r, "gbytes_per_s");
        }
    }
    assert!(rows
        .iter()
        .any(|r| r["algorithm"] == "ipv4-inline" && r["bytes"] == 20));
}

#[test]
fn bench_mtu_quick() {
    let rows = run(&[
        "bench",
        "mtu",
        "--quick",
        "--mtus",
        "1500,9000",
        "--json",
        "-",
    ]);
    // Two MTUs, five options each with and without touching the data, for UDP and TCP.
    assert_eq!(rows.len(), 2 * 10 * 2);
    for protocol in ["udp", "tcp"] {
        assert_eq!(
            rows.iter().filter(|r| r["protocol"] == protocol).count(),
            20
        );
    }
    for r in &rows {
        positive(r, "gbit_per_s");
        assert!(r["options"].as_str().is_some());
    }
}

#[test]
fn bench_sweep_quick() {
    let rows = run(&["bench", "sweep", "--quick", "--json", "-"]);
    let per: Vec<&Value> = rows
        .iter()
        .filter(|r| r["table"] == "per-message")
        .collect();
    assert_eq!(per.len(), 40 * 2);
    assert_eq!(per.first().unwrap()["size"], 1);
    assert_eq!(per.last().unwrap()["size"], 8192);
    for r in &per {
        positive(r, "ns_per_message");
    }
    let t: Vec<&str> = rows
        .iter()
        .filter(|r| r["table"] == "throughput")
        .map(|r| r["checksum"].as_str().unwrap())
        .collect();
    assert_eq!(t, ["classic", "optimized", "eliminated"]);
}

#[test]
fn bench_all_quick_writes_a_report_with_figures() {
    let dir = std::env::temp_dir().join(format!("fastpath-report-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "all", "--quick", "--report"])
        .arg(&dir)
        .output()
        .expect("run fastpath");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join("REPORT.md")).expect("REPORT.md");
    for section in [
        "## udp",
        "## checksum",
        "## mtu",
        "## sweep",
        "## demux",
        "## peers",
    ] {
        assert!(report.contains(section), "missing {section}");
    }
    for figure in [
        "udp.svg",
        "checksum.svg",
        "mtu.svg",
        "sweep.svg",
        "demux.svg",
    ] {
        let svg =
            std::fs::read_to_string(dir.join(figure)).unwrap_or_else(|e| panic!("{figure}: {e}"));
        assert!(
            svg.starts_with("<svg") && svg.contains("<path") || svg.contains("<polyline"),
            "{figure} has no drawing"
        );
        assert!(report.contains(figure), "REPORT.md does not show {figure}");
    }
    for rows in [
        "udp.json",
        "checksum.json",
        "mtu.json",
        "sweep.json",
        "demux.json",
    ] {
        let v: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join(rows)).expect(rows))
                .expect("JSON");
        assert!(!v.is_empty(), "{rows} is empty");
    }
    // Ticks are whole numbers (no "100.0"), and the udp figure is a bar chart with the
    // configurations' names under it.
    for figure in ["udp.svg", "checksum.svg", "mtu.svg", "demux.svg"] {
        let svg = std::fs::read_to_string(dir.join(figure)).unwrap();
        for t in texts(&svg) {
            assert!(
                !(t.ends_with(".0") && t.parse::<f64>().is_ok()),
                "{figure} has a tick {t}"
            );
        }
    }
    let udp = std::fs::read_to_string(dir.join("udp.svg")).unwrap();
    assert!(udp.matches("<rect").count() >= 7 * 4, "udp.svg has no bars");
    let labels = texts(&udp);
    for name in ["classic", "pcb-caches", "default", "64 B"] {
        assert!(
            labels.iter().any(|t| t == name),
            "udp.svg: no {name} in {labels:?}"
        );
    }
    let checksum = texts(&std::fs::read_to_string(dir.join("checksum.svg")).unwrap());
    assert!(
        checksum.iter().any(|t| t == "16 MiB") && checksum.iter().any(|t| t == "1 KiB"),
        "checksum.svg: no KiB and MiB ticks in {checksum:?}"
    );

    // --from-json writes the same report and figures again from the JSON rows alone.
    for written in [
        "REPORT.md",
        "udp.svg",
        "checksum.svg",
        "mtu.svg",
        "sweep.svg",
        "demux.svg",
    ] {
        std::fs::remove_file(dir.join(written)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "all", "--from-json", "--report"])
        .arg(&dir)
        .output()
        .expect("run fastpath");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = std::fs::read_to_string(dir.join("REPORT.md")).expect("REPORT.md again");
    assert_eq!(again, report, "--from-json wrote another report");
    for figure in [
        "udp.svg",
        "checksum.svg",
        "mtu.svg",
        "sweep.svg",
        "demux.svg",
    ] {
        assert!(
            dir.join(figure).exists(),
            "--from-json did not draw {figure}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The texts of an SVG figure (plotters writes each `<text ...>` element's content on a line of its
/// own).
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[test]
fn bench_all_from_json_needs_a_report_directory() {
    let dir = std::env::temp_dir().join(format!("fastpath-empty-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "all", "--from-json", "--report"])
        .arg(&dir)
        .output()
        .expect("run fastpath");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--from-json") && stderr.contains("udp.json"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Root and `/dev/net/tun`, for the TUN parts; without them (and without `FASTPATH_REQUIRE_TUN=1`)
/// only the in-memory part runs, and the test says so.
fn tun_available(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    let ok = root && std::path::Path::new("/dev/net/tun").exists();
    if !ok {
        if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
            panic!("{test}: needs root and /dev/net/tun (FASTPATH_REQUIRE_TUN=1)");
        }
        eprintln!("{test}: no root or /dev/net/tun: the in-memory part only");
    }
    ok
}

#[test]
fn bench_tcp_quick() {
    let full = tun_available("bench_tcp_quick");
    let mut args = vec!["bench", "tcp", "--quick", "--mib", "2", "--json", "-"];
    if full {
        args.extend(["--queues", "2", "--xdp", "--xdp-mtu", "9000"]);
    } else {
        args.push("--pair-only");
    }
    let rows = run(&args);
    let pair: Vec<&Value> = rows.iter().filter(|r| r["experiment"] == "pair").collect();
    assert_eq!(pair.len(), 3 * 3, "three configurations at three MTUs");
    for r in &pair {
        positive(r, "gbit_per_s");
        positive(r, "ns_per_byte");
    }
    if full {
        let stacks: Vec<&str> = rows
            .iter()
            .filter(|r| r["experiment"] == "tun")
            .map(|r| r["stack"].as_str().unwrap())
            .collect();
        assert_eq!(
            stacks,
            [
                "fastpath", "fastpath", "smoltcp", "linux", "ceiling", "fastpath", "fastpath",
                "fastpath", "fastpath", "fastpath"
            ]
        );
        for r in rows.iter().filter(|r| r["experiment"] != "pair") {
            positive(r, "ratio");
        }
        // The second and third AF_XDP servers' frames span three chunks each, and their rows say
        // their MTU.
        let jumbo: Vec<&Value> = rows
            .iter()
            .filter(|r| {
                r["config"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("AF_XDP, MTU 9000"))
            })
            .collect();
        assert_eq!(
            jumbo.len(),
            8,
            "bulk both ways and rr with 1 and 100, twice"
        );
        assert!(jumbo.iter().all(|r| r["mtu"] == 9000));
        // 1 and 100 connections against each echo server: fastpath with offload on and off (writes
        // through io_uring), smoltcp, linux, the ceiling, fastpath with a write per packet and
        // offload on and off, the ceiling with io_uring writes, and (--queues 2) fastpath and the
        // ceiling with two queues.
        let rr: Vec<String> = rows
            .iter()
            .filter(|r| r["experiment"] == "rr" && r["connections"] == 100)
            .map(|r| {
                format!(
                    "{} {}",
                    r["stack"].as_str().unwrap(),
                    r["config"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            rr,
            [
                "fastpath offload on",
                "fastpath offload off",
                "smoltcp tun",
                "linux veth",
                "ceiling stateless",
                "fastpath offload on, plain writes",
                "fastpath offload off, plain writes",
                "ceiling stateless, io_uring",
                "fastpath AF_XDP",
                "fastpath AF_XDP, MTU 9000",
                "fastpath AF_XDP, MTU 9000, checksums in software",
                "fastpath offload on, 2 queues",
                "ceiling stateless, 2 queues",
            ]
        );
        assert_eq!(
            rows.iter().filter(|r| r["experiment"] == "rr").count(),
            2 * rr.len()
        );
        // --queues 2: four streams against one queue, linux, the ceiling, and two queues of each.
        let streams: Vec<&str> = rows
            .iter()
            .filter(|r| r["experiment"] == "tun-streams")
            .map(|r| r["config"].as_str().unwrap())
            .collect();
        assert_eq!(
            streams,
            [
                "offload on",
                "veth",
                "stateless",
                "offload on, 2 queues",
                "stateless, 2 queues"
            ]
        );
        // The other direction: fastpath's chargen and the kernel's, read by a kernel client.
        let send: Vec<&str> = rows
            .iter()
            .filter(|r| r["experiment"] == "tun-send")
            .map(|r| r["stack"].as_str().unwrap())
            .collect();
        assert_eq!(
            send,
            [
                "fastpath", "fastpath", "smoltcp", "linux", "fastpath", "fastpath", "fastpath",
                "fastpath", "fastpath"
            ]
        );
    }
}

/// `bench tcp --xdp-only`: no pair, and only the AF_XDP servers beside fastpath on TUN and Linux.
#[test]
fn bench_tcp_xdp_only() {
    if !tun_available("bench_tcp_xdp_only") {
        return;
    }
    let rows = run(&[
        "bench",
        "tcp",
        "--xdp-only",
        "--quick",
        "--seconds",
        "0.1",
        "--xdp-mtu",
        "4000",
        "--json",
        "-",
    ]);
    assert!(rows.iter().all(|r| r["experiment"] != "pair"));
    let bulk: Vec<String> = rows
        .iter()
        .filter(|r| r["experiment"] == "tun")
        .map(|r| {
            format!(
                "{} {}",
                r["stack"].as_str().unwrap(),
                r["config"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        bulk,
        [
            "fastpath offload on",
            "linux veth",
            "fastpath AF_XDP",
            "fastpath AF_XDP, MTU 4000",
            "fastpath AF_XDP, MTU 4000, checksums in software",
        ]
    );
    for r in &rows {
        positive(r, "ratio");
    }
}

/// `bench xdp --quick`: the four servers, each with a rate and CPU figures.
#[test]
fn bench_xdp_quick() {
    if !tun_available("bench_xdp_quick") {
        return;
    }
    let rows = run(&["bench", "xdp", "--quick", "--json", "-"]);
    let servers: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(
        servers,
        [
            "fastpath AF_XDP",
            "fastpath TUN",
            "linux veth",
            "ceiling AF_XDP"
        ]
    );
    for r in &rows {
        positive(r, "datagrams_per_s");
        positive(r, "server_ns_per_datagram");
        positive(r, "machine_ns_per_datagram");
    }
}

#[test]
fn bench_tcp_rr_only() {
    if !tun_available("bench_tcp_rr_only") {
        return;
    }
    let rows = run(&[
        "bench",
        "tcp",
        "--rr-only",
        "--quick",
        "--seconds",
        "0.1",
        "--json",
        "-",
    ]);
    // Request/response alone: no pair, no bulk; 1 and 100 connections against the eight one-queue
    // servers.
    assert!(rows.iter().all(|r| r["experiment"] == "rr"), "{rows:?}");
    assert_eq!(rows.len(), 2 * 8);
    for r in &rows {
        positive(r, "transactions_per_s");
        positive(r, "ratio");
    }
}
