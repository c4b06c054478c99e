//! What `bench tunnel` runs through each path and how it reads the result: the workloads (iperf3
//! TCP and UDP both ways, connections per second, memory per idle connection), samples of CPU time,
//! memory and drops, and their medians.

use super::*;

#[derive(Clone, Copy, Debug)]
pub(super) enum Workload {
    Tcp {
        reverse: bool,
        streams: usize,
    },
    Udp {
        size: usize,
    },
    Connections,
    /// Short connections to a server that answers and closes first, as an HTTP/1.0 server does
    /// (the proxy's side of each ends in TIME-WAIT), 50 at a time as `ab -c 50` makes them.
    ServerCloses,
}

impl Workload {
    fn name(&self) -> String {
        match *self {
            Workload::Tcp { reverse, streams } => format!(
                "tcp {} {streams} stream{}",
                if reverse { "download" } else { "upload" },
                if streams > 1 { "s" } else { "" }
            ),
            Workload::Udp { size } => format!("udp {size} B unpaced"),
            Workload::Connections => "connections (64 B request/response)".into(),
            Workload::ServerCloses => format!(
                "connections (50 at a time, the server answers {CLOSING_ANSWER} B and closes first)"
            ),
        }
    }
}

pub(super) fn workloads() -> Vec<Workload> {
    vec![
        Workload::Tcp {
            reverse: false,
            streams: 1,
        },
        Workload::Tcp {
            reverse: true,
            streams: 1,
        },
        Workload::Tcp {
            reverse: false,
            streams: 4,
        },
        Workload::Tcp {
            reverse: true,
            streams: 4,
        },
        Workload::Udp { size: 64 },
        Workload::Udp { size: 1400 },
        Workload::Connections,
        Workload::ServerCloses,
    ]
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Sample {
    value: f64,
    lost: Option<f64>,
    cpu_s_per_gb: Option<f64>,
    delivered_of_handed: Option<f64>,
    tun_queue_dropped: Option<f64>,
    server_socket_dropped: Option<f64>,
}

/// The UDP datagrams the kernel of `ns` dropped at a full socket receive buffer (`RcvbufErrors` in
/// `/proc/net/snmp`).
pub(super) fn udp_rcvbuf_errors(ns: &Namespace) -> Option<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "cat", "/proc/net/snmp"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next()?, udp.next()?);
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// A TUN interface's transmit counters in its namespace: packets the kernel queued for the
/// program reading the device, and packets it dropped because that queue was full.
pub(super) fn tun_transmit(path: &PathUnderTest) -> Option<(f64, f64)> {
    let dev = path.tun?;
    let read = |counter: &str| -> Option<f64> {
        let out = Command::new("ip")
            .args(["netns", "exec", path.app.name(), "cat"])
            .arg(format!("/sys/class/net/{dev}/statistics/{counter}"))
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((read("tx_packets")?, read("tx_dropped")?))
}

/// CPU seconds a process has used (user and system), with those of its children that have ended
/// and been waited for (a forking server's finished workers), from `/proc/PID/stat` (in 1/100 s).
/// Waits (5 s at most) until the machine's processors were at least 90% idle over 200 ms.
pub(super) fn wait_until_quiet() {
    // (idle, total) jiffies of all processors, from /proc/stat's first line.
    let sample = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal ...
        let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
        Some((idle, fields.iter().take(8).sum()))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let Some((i0, t0)) = sample() else { return };
        std::thread::sleep(Duration::from_millis(200));
        let Some((i1, t1)) = sample() else { return };
        if t1 > t0 && (i1 - i0) as f64 >= 0.9 * (t1 - t0) as f64 {
            return;
        }
    }
}

pub(super) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<f64>().ok())
        .sum::<Option<f64>>()?;
    Some(ticks / 100.0)
}

pub(super) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let v = l.strip_prefix(field)?.trim_start_matches(':').trim();
        v.split_whitespace().next()?.parse().ok()
    })
}

pub(super) fn measure(
    iperf: &Path,
    out: &Namespace,
    path: &PathUnderTest,
    w: &Workload,
    secs: f64,
) -> Result<Sample, String> {
    let cpu_before = path.cpu_seconds();
    let tun_before = tun_transmit(path);
    let server_before = udp_rcvbuf_errors(out);
    let mut handed = None;
    let (value, lost, bytes) = match *w {
        Workload::Tcp { reverse, streams } => {
            let mut args = vec!["-P".to_string(), streams.to_string()];
            if reverse {
                args.push("-R".into());
            }
            let j = iperf_client(iperf, path, secs, &args)?;
            let sum = &j["end"]["sum_received"];
            let bits = sum["bits_per_second"].as_f64().unwrap_or(0.0);
            let bytes = sum["bytes"].as_f64().unwrap_or(0.0);
            (bits / 1e9, None, bytes)
        }
        Workload::Udp { size } => {
            // A 4 MiB socket buffer at both ends (this machine's rmem_max), so that the server's
            // own queue is not where a burst is lost.
            let args: Vec<String> = ["-u", "-b", "0", "-w", "4M", "-l"]
                .iter()
                .map(|s| s.to_string())
                .chain([size.to_string()])
                .collect();
            let j = iperf_client(iperf, path, secs, &args)?;
            let sum = &j["end"]["sum"];
            let packets = sum["packets"].as_f64().unwrap_or(0.0);
            let lost = sum["lost_packets"].as_f64().unwrap_or(0.0);
            let seconds = sum["seconds"].as_f64().unwrap_or(secs).max(1e-3);
            let delivered = (packets - lost).max(0.0);
            let share = if packets > 0.0 { lost / packets } else { 1.0 };
            if let (Some((p0, d0)), Some((p1, d1))) = (tun_before, tun_transmit(path)) {
                let (queued, dropped) = (p1 - p0, d1 - d0);
                let at_server = match (server_before, udp_rcvbuf_errors(out)) {
                    (Some(a), Some(b)) => Some((b - a) / queued),
                    _ => None,
                };
                if queued > 0.0 {
                    handed = Some((
                        (delivered / queued).min(1.0),
                        dropped / (queued + dropped),
                        at_server,
                    ));
                }
            }
            (delivered / seconds, Some(share), delivered * size as f64)
        }
        Workload::Connections => (connections_per_second(path, secs, false)?, None, 0.0),
        Workload::ServerCloses => (connections_per_second(path, secs, true)?, None, 0.0),
    };
    let cpu_s_per_gb = match (cpu_before, path.cpu_seconds()) {
        (Some(a), Some(b)) if bytes > 0.0 => Some((b - a) / (bytes / 1e9)),
        _ => None,
    };
    Ok(Sample {
        value,
        lost,
        cpu_s_per_gb,
        delivered_of_handed: handed.map(|h| h.0),
        tun_queue_dropped: handed.map(|h| h.1),
        server_socket_dropped: handed.and_then(|h| h.2),
    })
}

pub(super) fn iperf_client(
    iperf: &Path,
    path: &PathUnderTest,
    secs: f64,
    extra: &[String],
) -> Result<serde_json::Value, String> {
    // A server may still be busy with the last test: try again for a while.
    for attempt in 0.. {
        let out = Command::new("ip")
            .args(["netns", "exec", path.app.name()])
            .arg(iperf)
            .args(["-c", &SERVER.to_string(), "-J"])
            .args(["-p", &(IPERF_PORT + path.index).to_string()])
            .args(["-t", &format!("{secs}")])
            .args(extra)
            .output()
            .map_err(|e| format!("iperf3: {e}"))?;
        let j: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("{}: iperf3's output: {e}", path.name))?;
        match j["error"].as_str() {
            None => return Ok(j),
            Some(e) if e.contains("busy") && attempt < 20 => {
                std::thread::sleep(Duration::from_millis(500))
            }
            Some(e) => return Err(format!("{}: iperf3 {}: {e}", path.name, extra.join(" "))),
        }
    }
    unreachable!("the loop returns")
}

/// Short connections per second for `secs`: 8 clients, each connecting, sending 64 bytes, reading
/// them back and closing; or, when `server_closes`, 50 clients, each reading the closing server's
/// answer to its end.
pub(super) fn connections_per_second(
    path: &PathUnderTest,
    secs: f64,
    server_closes: bool,
) -> Result<f64, String> {
    let done = Arc::new(AtomicU64::new(0));
    let end = WallClock::now() + Duration::from_secs_f64(secs);
    let clients = if server_closes { 50 } else { 8 };
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let done = done.clone();
            let ns = path.app.name().to_string();
            std::thread::spawn(move || {
                netns::within(&ns, move || {
                    let port = if server_closes {
                        CLOSING_PORT
                    } else {
                        ECHO_PORT
                    };
                    let to = SocketAddr::from(SocketAddrV4::new(SERVER, port));
                    let mut answer = Vec::with_capacity(CLOSING_ANSWER);
                    while WallClock::now() < end {
                        let ok = TcpStream::connect_timeout(&to, Duration::from_secs(2))
                            .and_then(|mut c| {
                                c.set_read_timeout(Some(Duration::from_secs(2)))?;
                                c.write_all(&[7u8; 64])?;
                                if server_closes {
                                    answer.clear();
                                    c.read_to_end(&mut answer)?;
                                    if answer.len() != CLOSING_ANSWER {
                                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                                    }
                                    Ok(())
                                } else {
                                    c.read_exact(&mut [0u8; 64])
                                }
                            })
                            .is_ok();
                        if ok {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
        })
        .collect();
    let start = WallClock::now();
    for t in threads {
        t.join()
            .map_err(|_| "a client thread panicked")?
            .map_err(|e| e.to_string())?;
    }
    let elapsed = start.elapsed().as_secs_f64().max(secs);
    Ok(done.load(Ordering::Relaxed) as f64 / elapsed)
}

/// The proxy's growth in proportional set size over `n` idle connections held open through it
/// (those the application's connect completed: a proxy that answers the SYN first may not have
/// opened the other side of every one), and its peak RSS.
pub(super) fn memory(path: &PathUnderTest, n: usize) -> Result<MemoryRow, String> {
    let before = path.pss_kib().ok_or("no proxy")?;
    let held = netns::within(path.app.name(), move || {
        let to = SocketAddr::from(SocketAddrV4::new(SERVER, HOLD_PORT));
        // A proxy that stalls a while (a SOCKS5 server forking its workers) is waited for: the
        // holding stops after 5 connects in a row fail (3 s each).
        let mut held = Vec::with_capacity(n);
        let mut failed = 0;
        while held.len() < n && failed < 5 {
            match TcpStream::connect_timeout(&to, Duration::from_secs(3)) {
                Ok(s) => {
                    held.push(s);
                    failed = 0;
                }
                Err(_) => failed += 1,
            }
        }
        held
    })
    .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(500));
    let after = path.pss_kib().unwrap_or(0);
    let count = held.len();
    drop(held);
    std::thread::sleep(Duration::from_millis(500));
    Ok(MemoryRow {
        path: path.name.clone(),
        peak_rss_kib: path.status_kib("VmHWM").unwrap_or(0),
        final_rss_kib: 0,
        idle_connections: count,
        bytes_per_idle_connection: (count > 0)
            .then(|| (after.saturating_sub(before) * 1024) as f64 / count as f64),
    })
}

pub(super) fn summarize(path: &str, w: &Workload, samples: &[Sample]) -> TunnelRow {
    let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
    let lost: Vec<f64> = samples.iter().filter_map(|s| s.lost).collect();
    let cpu: Vec<f64> = samples.iter().filter_map(|s| s.cpu_s_per_gb).collect();
    let handed: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.delivered_of_handed)
        .collect();
    let queue: Vec<f64> = samples.iter().filter_map(|s| s.tun_queue_dropped).collect();
    let server: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.server_socket_dropped)
        .collect();
    TunnelRow {
        path: path.to_string(),
        workload: w.name(),
        value: common::median(&values),
        unit: match w {
            Workload::Tcp { .. } => "Gbit/s",
            Workload::Udp { .. } => "datagrams/s",
            Workload::Connections | Workload::ServerCloses => "connections/s",
        }
        .into(),
        lost: (!lost.is_empty()).then(|| common::median(&lost)),
        cpu_s_per_gb: (!cpu.is_empty()).then(|| common::median(&cpu)),
        delivered_of_handed: (!handed.is_empty()).then(|| common::median(&handed)),
        tun_queue_dropped: (!queue.is_empty()).then(|| common::median(&queue)),
        server_socket_dropped: (!server.is_empty()).then(|| common::median(&server)),
    }
}
