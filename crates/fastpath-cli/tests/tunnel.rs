//! `fastpath tunnel` end to end. The test makes namespace OUT, whose loopback interface holds the
//! "internet" (10.77.0.2 and fd77::2, with TCP and UDP echo servers on port 7 and an HTTP server on
//! 8080), and runs `fastpath tunnel` inside OUT, given namespace APP, whose default routes
//! lead into its TUN interface. Everything an application in APP sends to OUT's servers is
//! terminated by fastpath and relayed through OUT's kernel sockets: the test checks the bytes, the
//! addresses the applications see, resets, ping, curl, many connections at once, and the summary.
//!
//! Needs root, `/dev/net/tun`, `ip`, `ping` and `curl`; without them it prints why and passes, unless
//! `FASTPATH_REQUIRE_TUN=1` (CI sets it), when it fails.
#![cfg(target_os = "linux")]

mod tun_common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tun_common::*;

fn ip(ns: &str, args: &[&str]) {
    let ok = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip -n {ns} {args:?}");
}

/// OUT's servers, on threads that entered it: TCP echo and UDP echo on port 7, HTTP on 8080 (a
/// body of `HTTP_BODY` bytes), both families on one socket each.
const HTTP_BODY: usize = 1 << 20;

fn start_servers(out: &str) {
    let (tcp, udp, http, sink) = in_netns(out, || {
        let tcp = TcpListener::bind("[::]:7").expect("TCP echo");
        let udp = UdpSocket::bind("[::]:7").expect("UDP echo");
        let http = TcpListener::bind("[::]:8080").expect("HTTP");
        let sink = UdpSocket::bind("[::]:10").expect("UDP sink");
        (tcp, udp, http, sink)
    });
    // Room for a burst: the tunnel sends a flow's queued datagrams in one segmented send (and the
    // echo gets bursts of large datagrams).
    nix::sys::socket::setsockopt(&sink, nix::sys::socket::sockopt::RcvBuf, &(4 << 20)).unwrap();
    nix::sys::socket::setsockopt(&udp, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20)).unwrap();
    std::thread::spawn(move || udp_sink(sink));
    std::thread::spawn(move || {
        for conn in tcp.incoming() {
            let Ok(mut conn) = conn else { break };
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let _ = std::io::copy(&mut conn, &mut w);
                let _ = w.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            let _ = udp.send_to(&buf[..n], from);
        }
    });
    std::thread::spawn(move || {
        for conn in http.incoming() {
            let Ok(conn) = conn else { break };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let mut w = conn;
                let _ = write!(
                    w,
                    "HTTP/1.1 200 OK\r\nContent-Length: {HTTP_BODY}\r\nConnection: close\r\n\r\n"
                );
                let _ = w.write_all(&vec![b'f'; HTTP_BODY]);
            });
        }
    });
}

/// Counts the datagrams of a burst, each numbered in its first four bytes and filled with
/// [`pattern`]; answers `?` with "COUNT BYTES IN-ORDER" and starts counting afresh.
fn udp_sink(sink: UdpSocket) {
    let mut buf = vec![0u8; 65536];
    let (mut count, mut bytes, mut in_order) = (0u32, 0usize, true);
    while let Ok((n, from)) = sink.recv_from(&mut buf) {
        if &buf[..n] == b"?" {
            let _ = sink.send_to(format!("{count} {bytes} {in_order}").as_bytes(), from);
            (count, bytes, in_order) = (0, 0, true);
            continue;
        }
        let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
        in_order &= seq == count && buf[4..n] == pattern(n - 4, seq as usize)[..];
        count += 1;
        bytes += n;
    }
}

/// `fastpath tunnel` running in OUT, making APP; stopped (SIGTERM, then SIGKILL) on drop.
struct Tunnel {
    child: Child,
    lines: mpsc::Receiver<String>,
    app: String,
}

impl Tunnel {
    fn start(out: &str, app: &str, extra: &[&str]) -> Tunnel {
        Tunnel::start_with_env(out, app, extra, &[])
    }

    fn start_with_env(out: &str, app: &str, extra: &[&str], env: &[(&str, &str)]) -> Tunnel {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                out,
                env!("CARGO_BIN_EXE_fastpath"),
                "tunnel",
            ])
            .args(["--netns", app, "--duration", "300"])
            .args(["--kernel-addr6", "fd66::1/64", "--addr6", "fd66::2"])
            .args(["--udp-idle", "2"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn fastpath tunnel");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(20))
            .expect("fastpath tunnel says it is ready");
        assert!(first.starts_with("fastpath tunnel: ready"), "{first}");
        Tunnel {
            child,
            lines,
            app: app.to_string(),
        }
    }

    /// SIGTERM; the summary it printed.
    fn stop(mut self) -> String {
        // `ip netns exec` runs fastpath in its own process (exec): the pid is fastpath's.
        nix::sys::signal::kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the tunnel did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(self.child.wait().unwrap().success());
        let mut out = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            out.push(line);
        }
        out.join("\n")
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if netns_exists(&self.app) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.app])
                .status();
        }
    }
}

/// Namespace OUT with the "internet" on its loopback (10.77.0.2 and fd77::2) and its servers.
fn internet() -> TestNetns {
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.2/32", "dev", "lo"]);
    ip(&out.0, &["-6", "addr", "add", "fd77::2/128", "dev", "lo"]);
    start_servers(&out.0);
    out
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed) ^ (i >> 11)) as u8)
        .collect()
}

/// Echoes `len` bytes through `to`, writing and reading at once; true if they came back intact.
fn tcp_echo(to: SocketAddr, len: usize) -> bool {
    let mut conn = TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let data = pattern(len, to.port() as usize);
    let mut w = conn.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut back = Vec::with_capacity(len);
    conn.read_to_end(&mut back).expect("the echo");
    writer.join().unwrap();
    back == data
}

#[test]
fn applications_reach_the_network_through_the_tunnel() {
    if !environment_ok("applications_reach_the_network_through_the_tunnel") {
        return;
    }
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var("FASTPATH_REQUIRE_TUN").as_deref() != Ok("1"),
            "curl is missing (FASTPATH_REQUIRE_TUN=1)"
        );
        eprintln!("skipping: needs curl");
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.2/32", "dev", "lo"]);
    ip(&out.0, &["-6", "addr", "add", "fd77::2/128", "dev", "lo"]);
    // A second address whose route has the MTU of an Ethernet path, for datagrams larger than it.
    ip(&out.0, &["addr", "add", "10.77.0.3/32", "dev", "lo"]);
    ip(
        &out.0,
        &[
            "route",
            "replace",
            "local",
            "10.77.0.3",
            "dev",
            "lo",
            "table",
            "local",
            "mtu",
            "lock",
            "1500",
        ],
    );
    start_servers(&out.0);
    // APP is made here: a namespace `ip netns add` makes inside the tunnel's `ip netns exec` stays in
    // that command's mount namespace, where this test's threads could not enter it.
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);

    // TCP: 64 MiB each way over IPv4, 16 MiB over IPv6, byte for byte.
    assert!(in_netns(&app, || tcp_echo(
        "10.77.0.2:7".parse().unwrap(),
        64 << 20
    )));
    assert!(in_netns(&app, || tcp_echo(
        "[fd77::2]:7".parse().unwrap(),
        16 << 20
    )));

    // UDP of every size class, both families; the answer comes from the destination's address.
    for server in ["10.77.0.2:7", "[fd77::2]:7"] {
        let to: SocketAddr = server.parse().unwrap();
        let answers = in_netns(&app, move || {
            let any = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            let s = UdpSocket::bind(any).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = vec![0u8; 65536];
            [1usize, 1472, 1473, 8000, 65000]
                .iter()
                .map(|&n| {
                    let data = pattern(n, n);
                    s.send_to(&data, to).unwrap();
                    let (got, from) = s.recv_from(&mut buf).expect("a UDP answer");
                    (n, buf[..got] == data[..], from)
                })
                .collect::<Vec<_>>()
        });
        for (n, intact, from) in answers {
            assert!(intact, "{n} bytes over {server}");
            assert_eq!(from, to, "the answer's source");
        }
    }

    // A burst of one flow: 300 datagrams of 1,000 bytes and a last one of 500, all delivered, in
    // order and intact (the tunnel sends such bursts with UDP segmentation offload).
    // The burst's socket and the one that asks for the count below go to the same destination:
    // fixed ports keep them two flows (an ephemeral port may be handed out again once closed).
    let burst = in_netns(&app, || {
        let s = UdpSocket::bind("0.0.0.0:40010").unwrap();
        s.connect("10.77.0.2:10").unwrap();
        for seq in 0..301u32 {
            let len = if seq == 300 { 500 } else { 1000 };
            let mut d = seq.to_be_bytes().to_vec();
            d.extend(pattern(len - 4, seq as usize));
            s.send(&d).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.send(b"?").unwrap();
        let mut buf = [0u8; 64];
        let n = s.recv(&mut buf).expect("the sink's count");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    assert_eq!(
        burst, "301 300500 true",
        "the sink's count, bytes and order"
    );
    // A burst of datagrams larger than the outgoing route's MTU (1500, to 10.77.0.3): the kernel
    // refuses to segment them (EMSGSIZE), so the tunnel sends that flow's datagrams one at a time
    // (the kernel fragments each), and all arrive. The count is asked for through 10.77.0.2.
    let large = in_netns(&app, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect("10.77.0.3:10").unwrap();
        for seq in 0..40u32 {
            let mut d = seq.to_be_bytes().to_vec();
            d.extend(pattern(2996, seq as usize));
            s.send(&d).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        let q = UdpSocket::bind("0.0.0.0:40011").unwrap();
        q.connect("10.77.0.2:10").unwrap();
        q.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        q.send(b"?").unwrap();
        let mut buf = [0u8; 64];
        let n = q.recv(&mut buf).expect("the sink's count");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    assert_eq!(
        large, "40 120000 true",
        "large datagrams past the route's MTU"
    );

    // A UDP port nobody listens on: the application's connected socket learns of the refusal.
    let udp_refused = in_netns(&app, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect("10.77.0.2:9").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.send(b"anyone?").unwrap();
        s.recv(&mut [0u8; 16]).map_err(|e| e.kind())
    });
    assert_eq!(udp_refused, Err(ErrorKind::ConnectionRefused));

    // A closed port: the tunnel held the application's SYN until the destination refused, and
    // then refused it too: its connect fails as it would without the tunnel.
    let refused = in_netns(&app, || {
        let to: SocketAddr = "10.77.0.2:9".parse().unwrap();
        TcpStream::connect_timeout(&to, Duration::from_secs(5)).map(|_| ())
    });
    assert_eq!(
        refused.map_err(|e| e.kind()),
        Err(ErrorKind::ConnectionRefused)
    );

    // 2,000 connections open at once, each echoing its own bytes.
    let many = in_netns(&app, || {
        let to: SocketAddr = "10.77.0.2:7".parse().unwrap();
        let mut conns: Vec<TcpStream> = (0..2000)
            .map(|_| TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect"))
            .collect();
        for (i, c) in conns.iter_mut().enumerate() {
            c.write_all(format!("connection {i:04}").as_bytes())
                .unwrap();
        }
        let mut echoed = 0;
        for (i, c) in conns.iter_mut().enumerate() {
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 15];
            if c.read_exact(&mut buf).is_ok() && buf == *format!("connection {i:04}").as_bytes() {
                echoed += 1;
            }
        }
        echoed
    });
    assert_eq!(many, 2000, "connections echoed");

    // Ping fastpath's own address (waiting up to 5 s: once in CI, right after the 2,000 connections
    // closed, two pings in 2 s went unanswered); curl a page from OUT's HTTP server.
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &app,
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "5",
            "10.66.0.2",
        ])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
    for url in ["http://10.77.0.2:8080/", "http://[fd77::2]:8080/"] {
        let curl = Command::new("ip")
            .args([
                "netns",
                "exec",
                &app,
                "curl",
                "-sS",
                "--max-time",
                "10",
                url,
            ])
            .output()
            .unwrap();
        assert!(
            curl.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&curl.stderr)
        );
        assert_eq!(curl.stdout.len(), HTTP_BODY, "{url}'s body");
    }

    let summary = tunnel.stop();
    let tcp_line = summary
        .lines()
        .find(|l| l.starts_with("tcp: "))
        .expect(&summary);
    let relayed: u64 = tcp_line[5..].split(' ').next().unwrap().parse().unwrap();
    // The echoes, the closed port, the 2,000, the two pages.
    assert_eq!(relayed, 2 + 1 + 2000 + 2, "{summary}");
    assert!(
        tcp_line.contains("(1 refused, 0 unreachable, 0 timed out, 0 reset"),
        "{summary}"
    );
    assert!(summary.contains("udp: 6 flows"), "{summary}");
    // The large datagrams' flow, and only it, had its segmented send refused.
    assert!(summary.contains("(1 flows refused them)"), "{summary}");
    // The burst went out in segmented sends (how many depends on how the tunnel's reads fell).
    let segmented: Vec<u64> = summary
        .lines()
        .find(|l| l.starts_with("udp: "))
        .and_then(|l| l.split("; ").nth(1))
        .map(|t| t.split(' ').filter_map(|w| w.parse().ok()).collect())
        .expect(&summary);
    assert!(
        segmented.len() == 2 && segmented[1] >= 1 && segmented[0] > segmented[1],
        "{summary}"
    );
    assert!(summary.contains(", 1 refused)"), "{summary}");
    let tun_left = Command::new("ip")
        .args(["-n", &app, "link", "show", "fpt0"])
        .output()
        .unwrap();
    assert!(
        !tun_left.status.success(),
        "the TUN interface goes with the tunnel"
    );
}

/// A SOCKS5 server for the test (RFC 1928, no authentication): CONNECT and UDP ASSOCIATE, IPv4
/// addresses and names (`echo.test` is 10.77.0.2; others have no address), counting what it relayed.
#[derive(Default)]
struct Socks5Counts {
    /// The names asked for, in order.
    names: std::sync::Mutex<Vec<String>>,
    /// Sessions that offered the wrong password (the server requires `fp` / `secret`).
    bad_password: std::sync::atomic::AtomicUsize,
    connects: std::sync::atomic::AtomicUsize,
    refused: std::sync::atomic::AtomicUsize,
    datagrams: std::sync::atomic::AtomicUsize,
}

/// The test server's resolver.
fn resolve(name: &[u8]) -> [u8; 4] {
    if name == b"echo.test" {
        [10, 77, 0, 2]
    } else {
        [0, 0, 0, 0]
    }
}

fn read_addr(c: &mut TcpStream, counts: &Socks5Counts) -> std::io::Result<SocketAddr> {
    let mut atyp = [0u8; 1];
    c.read_exact(&mut atyp)?;
    let ip = match atyp[0] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a)?;
            a
        }
        3 => {
            let mut len = [0u8; 1];
            c.read_exact(&mut len)?;
            let mut name = vec![0u8; len[0] as usize];
            c.read_exact(&mut name)?;
            counts
                .names
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&name).into_owned());
            resolve(&name)
        }
        other => panic!("the tunnel asks for IPv4 addresses or names here, not type {other}"),
    };
    let mut port = [0u8; 2];
    c.read_exact(&mut port)?;
    Ok(SocketAddr::from((ip, u16::from_be_bytes(port))))
}

fn reply(c: &mut TcpStream, code: u8, bound: SocketAddr) -> std::io::Result<()> {
    let SocketAddr::V4(b) = bound else {
        panic!("IPv4 only")
    };
    let mut r = vec![5, code, 0, 1];
    r.extend_from_slice(&b.ip().octets());
    r.extend_from_slice(&b.port().to_be_bytes());
    c.write_all(&r)
}

/// Copies `from` to `to` until the end of the stream, then half-closes `to`.
fn relay_bytes(mut from: TcpStream, mut to: TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            to.shutdown(std::net::Shutdown::Write)?;
            return Ok(total);
        }
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

fn socks5_session(mut c: TcpStream, counts: &Socks5Counts) -> std::io::Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut head = [0u8; 2];
    c.read_exact(&mut head)?;
    let mut methods = vec![0u8; head[1] as usize];
    c.read_exact(&mut methods)?;
    // User name and password required (RFC 1929): `fp` and `secret`.
    assert!(
        head[0] == 5 && methods.contains(&2),
        "a SOCKS5 greeting offering method 2: {methods:?}"
    );
    c.write_all(&[5, 2])?;
    let mut ver_len = [0u8; 2];
    c.read_exact(&mut ver_len)?;
    let mut user = vec![0u8; ver_len[1] as usize];
    c.read_exact(&mut user)?;
    let mut len = [0u8; 1];
    c.read_exact(&mut len)?;
    let mut password = vec![0u8; len[0] as usize];
    c.read_exact(&mut password)?;
    if ver_len[0] != 1 || user != b"fp" || password != b"secret" {
        counts.bad_password.fetch_add(1, Relaxed);
        return c.write_all(&[1, 1]);
    }
    c.write_all(&[1, 0])?;
    let mut req = [0u8; 3];
    c.read_exact(&mut req)?;
    let target = read_addr(&mut c, counts)?;
    match req[1] {
        1 => match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
            Ok(up) => {
                counts.connects.fetch_add(1, Relaxed);
                reply(&mut c, 0, up.local_addr()?)?;
                let (a, b) = (c.try_clone()?, up.try_clone()?);
                let t = std::thread::spawn(move || relay_bytes(a, b));
                let _ = relay_bytes(up, c);
                let _ = t.join();
            }
            Err(_) => {
                counts.refused.fetch_add(1, Relaxed);
                reply(&mut c, 5, "0.0.0.0:0".parse().unwrap())?;
            }
        },
        3 => {
            let relay = UdpSocket::bind("10.77.0.2:0")?;
            reply(&mut c, 0, relay.local_addr()?)?;
            relay.set_read_timeout(Some(Duration::from_millis(100)))?;
            let mut client: Option<SocketAddr> = None;
            let mut buf = vec![0u8; 65536];
            c.set_nonblocking(true)?;
            loop {
                // The association ends with its control connection.
                match c.read(&mut [0u8; 1]) {
                    Ok(0) => return Ok(()),
                    Err(e) if e.kind() != ErrorKind::WouldBlock => return Ok(()),
                    _ => {}
                }
                let Ok((n, from)) = relay.recv_from(&mut buf) else {
                    continue;
                };
                if client.is_none() || client == Some(from) {
                    client = Some(from);
                    // RSV, FRAG 0, then an IPv4 address or a name, and the port.
                    let (ip, at) = match &buf[..4] {
                        [0, 0, 0, 1] => ([buf[4], buf[5], buf[6], buf[7]], 8),
                        [0, 0, 0, 3] => {
                            let len = buf[4] as usize;
                            let name = &buf[5..5 + len];
                            counts
                                .names
                                .lock()
                                .unwrap()
                                .push(String::from_utf8_lossy(name).into_owned());
                            (resolve(name), 5 + len)
                        }
                        other => panic!("a datagram header {other:?}"),
                    };
                    let to = SocketAddr::from((ip, u16::from_be_bytes([buf[at], buf[at + 1]])));
                    relay.send_to(&buf[at + 2..n], to)?;
                } else if let (Some(client), SocketAddr::V4(src)) = (client, from) {
                    let mut d = vec![0, 0, 0, 1];
                    d.extend_from_slice(&src.ip().octets());
                    d.extend_from_slice(&src.port().to_be_bytes());
                    d.extend_from_slice(&buf[..n]);
                    relay.send_to(&d, client)?;
                }
                counts.datagrams.fetch_add(1, Relaxed);
            }
        }
        other => panic!("SOCKS5 command {other}"),
    }
    Ok(())
}

/// OUT's loopback at 10.77.0.2 with the echo servers, and the test's SOCKS5 server at
/// 10.77.0.2:1080; what the server counts.
fn start_out_with_socks5(out: &TestNetns) -> std::sync::Arc<Socks5Counts> {
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.2/32", "dev", "lo"]);
    start_servers(&out.0);
    let counts = std::sync::Arc::new(Socks5Counts::default());
    // The server's threads live in OUT: the connections it opens to destinations must start there.
    let c = counts.clone();
    let ns_path = format!("/var/run/netns/{}", out.0);
    let (bound_tx, bound_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&ns_path).expect("open OUT");
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let socks = TcpListener::bind("10.77.0.2:1080").expect("SOCKS5");
        bound_tx.send(()).unwrap();
        for conn in socks.incoming() {
            let Ok(conn) = conn else { break };
            let c = c.clone();
            std::thread::spawn(move || {
                let _ = socks5_session(conn, &c);
            });
        }
    });
    bound_rx.recv().unwrap();
    counts
}

#[test]
fn the_tunnel_relays_through_a_socks5_server() {
    if !environment_ok("the_tunnel_relays_through_a_socks5_server") {
        return;
    }
    let out = TestNetns::create();
    let counts = start_out_with_socks5(&out);
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let socks = ["--socks5", "10.77.0.2:1080", "--socks5-user", "fp"];
    let tunnel = Tunnel::start_with_env(
        &out.0,
        &app,
        &socks,
        &[("FASTPATH_SOCKS5_PASSWORD", "secret")],
    );

    assert!(in_netns(&app, || tcp_echo(
        "10.77.0.2:7".parse().unwrap(),
        4 << 20
    )));
    let answers = in_netns(&app, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = vec![0u8; 65536];
        [1usize, 1400, 8000]
            .iter()
            .map(|&n| {
                let data = pattern(n, n);
                s.send_to(&data, "10.77.0.2:7").unwrap();
                let (got, from) = s.recv_from(&mut buf).expect("a UDP answer");
                buf[..got] == data[..] && from == "10.77.0.2:7".parse().unwrap()
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(answers, [true, true, true], "UDP through the association");
    // A destination that refuses the server: its refusal (SOCKS5 reply 5) refuses the application's
    // connect.
    let refused = in_netns(&app, || {
        TcpStream::connect_timeout(&"10.77.0.2:9".parse().unwrap(), Duration::from_secs(5))
            .map(|_| ())
            .map_err(|e| e.kind())
    });
    assert_eq!(refused, Err(ErrorKind::ConnectionRefused));
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(
        counts.connects.load(Relaxed),
        1,
        "the echo went through the server"
    );
    assert_eq!(counts.refused.load(Relaxed), 1);
    assert_eq!(counts.datagrams.load(Relaxed), 6, "3 datagrams each way");
    assert_eq!(counts.bad_password.load(Relaxed), 0);
    let summary = tunnel.stop();
    assert!(summary.contains("(1 refused, 0 unreachable"), "{summary}");

    // The wrong password: the server refuses it, and the application's connect fails as if a
    // router had prohibited it (ICMP code 13, which Linux reports as "no route to host"). (The
    // first tunnel took its namespace with it.)
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start_with_env(
        &out.0,
        &app,
        &socks,
        &[("FASTPATH_SOCKS5_PASSWORD", "guess")],
    );
    let denied = in_netns(&app, || {
        TcpStream::connect_timeout(&"10.77.0.2:7".parse().unwrap(), Duration::from_secs(5))
            .map(|_| ())
            .map_err(|e| e.kind())
    });
    assert_eq!(denied, Err(ErrorKind::HostUnreachable));
    assert_eq!(counts.bad_password.load(Relaxed), 1);
    assert_eq!(counts.connects.load(Relaxed), 1, "nothing went through");
    drop(tunnel);
}

/// A DNS query for `name` of `qtype` (1, A; 28, AAAA) sent from APP to a server that does not exist;
/// the answer's address, if it has one.
fn ask(app: &str, name: &'static str, qtype: u16) -> Option<std::net::Ipv4Addr> {
    in_netns(app, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut q = vec![0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0]);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        s.send_to(&q, "192.0.2.53:53").unwrap();
        let mut r = [0u8; 512];
        let (n, from) = s.recv_from(&mut r).expect("an answer");
        assert_eq!(
            from,
            "192.0.2.53:53".parse().unwrap(),
            "from the server asked"
        );
        assert_eq!(&r[..2], &[0xab, 0xcd]);
        assert_eq!(r[3] & 0x0f, 0, "no error");
        (r[7] == 1).then(|| std::net::Ipv4Addr::new(r[n - 4], r[n - 3], r[n - 2], r[n - 1]))
    })
}

#[test]
fn fake_dns_hands_names_to_the_socks5_server_and_to_the_hosts_resolver() {
    if !environment_ok("fake_dns_hands_names_to_the_socks5_server_and_to_the_hosts_resolver") {
        return;
    }
    let out = TestNetns::create();
    let counts = start_out_with_socks5(&out);

    // Through SOCKS5: the name goes to the server, which resolves it.
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start_with_env(
        &out.0,
        &app,
        &[
            "--socks5",
            "10.77.0.2:1080",
            "--socks5-user",
            "fp",
            "--fake-dns",
            "198.18.0.0/15",
        ],
        &[("FASTPATH_SOCKS5_PASSWORD", "secret")],
    );
    let fake = ask(&app, "Echo.Test", 1).expect("an address for the name");
    assert_eq!(fake, std::net::Ipv4Addr::new(198, 18, 0, 1));
    assert_eq!(
        ask(&app, "echo.test", 1),
        Some(fake),
        "the same name, the same address"
    );
    assert_eq!(ask(&app, "echo.test", 28), None, "no IPv6 address");
    assert!(in_netns(&app, move || tcp_echo((fake, 7).into(), 1 << 20)));
    let udp_back = in_netns(&app, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.send_to(b"by name", (fake, 7)).unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = s.recv_from(&mut buf).expect("a UDP answer");
        (buf[..n].to_vec(), from)
    });
    assert_eq!(udp_back, (b"by name".to_vec(), (fake, 7).into()));
    // An address of the range that no name has: no route to that host.
    let unknown = in_netns(&app, || {
        TcpStream::connect_timeout(&"198.19.0.9:7".parse().unwrap(), Duration::from_secs(5))
            .map(|_| ())
            .map_err(|e| e.kind())
    });
    assert_eq!(unknown, Err(ErrorKind::HostUnreachable));
    assert_eq!(
        *counts.names.lock().unwrap(),
        ["echo.test", "echo.test"],
        "the connection and the datagrams' association named it"
    );
    let summary = tunnel.stop();
    assert!(
        summary
            .contains("dns: 3 queries answered, 1 names held, 1 flows to an address no name has"),
        "{summary}"
    );

    // Directly: the host's resolver (`localhost`, whose addresses in OUT hold the echo server).
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &["--fake-dns", "198.18.0.0/15"]);
    let fake = ask(&app, "localhost", 1).expect("an address for the name");
    assert!(in_netns(&app, move || tcp_echo((fake, 7).into(), 1 << 20)));
    let summary = tunnel.stop();
    assert!(summary.contains("dns: 1 queries answered"), "{summary}");
    assert!(summary.contains("tcp: 1 connections relayed"), "{summary}");
}

/// The tunnel's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_slow_reader_behind_the_tunnel_keeps_its_memory_bounded() {
    if !environment_ok("a_slow_reader_behind_the_tunnel_keeps_its_memory_bounded") {
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.2/32", "dev", "lo"]);
    // A fast sender: 256 MiB to whoever connects, as fast as the connection takes it.
    let chargen = in_netns(&out.0, || {
        TcpListener::bind("10.77.0.2:19").expect("chargen")
    });
    std::thread::spawn(move || {
        if let Ok((mut c, _)) = chargen.accept() {
            let block = vec![b'c'; 1 << 16];
            for _ in 0..4096 {
                if c.write_all(&block).is_err() {
                    break;
                }
            }
        }
    });
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);
    let pid = tunnel.child.id();
    let before = rss_kib(pid);
    // Read 64 KiB every 20 ms for 3 s (about 3 MiB/s) while the server could send gigabits.
    let (read, peak) = in_netns(&app, move || {
        let mut c = TcpStream::connect("10.77.0.2:19").expect("connect");
        let mut buf = vec![0u8; 1 << 16];
        let (mut read, mut peak) = (0usize, 0u64);
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            read += c.read(&mut buf).expect("read");
            peak = peak.max(rss_kib(pid));
            std::thread::sleep(Duration::from_millis(20));
        }
        (read, peak)
    });
    assert!(read > 1 << 20, "the reader got {read} bytes");
    // fastpath's send buffer (1 MiB), the relay's 64 KiB and the stack's pool are all that may grow;
    // the kernel's socket buffers hold the rest of the backlog outside the tunnel's memory.
    let growth = peak.saturating_sub(before);
    eprintln!(
        "tunnel RSS {before} KiB before, {peak} KiB at most with a slow reader; {read} bytes read"
    );
    assert!(
        growth < 16 << 10,
        "the tunnel grew by {growth} KiB (from {before} KiB) for a slow reader"
    );
    let summary = tunnel.stop();
    assert!(summary.contains("tcp: 1 connections relayed"), "{summary}");
}

#[test]
fn a_slow_destination_behind_the_tunnel_keeps_its_memory_bounded() {
    if !environment_ok("a_slow_destination_behind_the_tunnel_keeps_its_memory_bounded") {
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.3/32", "dev", "lo"]);
    let sink = in_netns(&out.0, || TcpListener::bind("10.77.0.3:9").expect("sink"));
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);
    let pid = tunnel.child.id();
    let before = rss_kib(pid);
    // A fast sender: counting bytes, as fast as the connection takes them, until the sink closes.
    let writer = std::thread::spawn(move || {
        in_netns(&app, || {
            let mut c = TcpStream::connect("10.77.0.3:9").expect("connect");
            let mut block = vec![0u8; 1 << 16];
            let mut at = 0u64;
            loop {
                for b in block.iter_mut() {
                    *b = (at % 251) as u8;
                    at += 1;
                }
                if c.write_all(&block).is_err() {
                    return;
                }
            }
        })
    });
    // The destination reads 64 KiB every 20 ms for 3 s (about 3 MiB/s) and checks every byte.
    let (mut c, _) = sink.accept().expect("accept");
    let mut buf = vec![0u8; 1 << 16];
    let (mut read, mut peak) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        let n = c.read(&mut buf).expect("read");
        for (i, b) in buf[..n].iter().enumerate() {
            assert_eq!(
                *b,
                ((read + i as u64) % 251) as u8,
                "byte {}",
                read + i as u64
            );
        }
        read += n as u64;
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(read > 1 << 20, "the destination got {read} bytes");
    // The backlog waits in the connection's receive buffer (1 MiB, its window closed) and in the
    // kernel's socket buffers; the relay holds no buffer of its own.
    let growth = peak.saturating_sub(before);
    eprintln!(
        "tunnel RSS {before} KiB before, {peak} KiB at most with a slow destination; {read} bytes read"
    );
    assert!(
        growth < 16 << 10,
        "the tunnel grew by {growth} KiB (from {before} KiB) for a slow destination"
    );
    drop(c);
    writer
        .join()
        .expect("the writer stops once the sink is gone");
    let summary = tunnel.stop();
    assert!(summary.contains("tcp: 1 connections relayed"), "{summary}");
}

/// A TCP connection from `port` (bound before connecting) to `to`.
fn connect_from(port: u16, to: SocketAddr) -> std::io::Result<TcpStream> {
    use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn};
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )?;
    bind(fd.as_raw_fd(), &SockaddrIn::new(0, 0, 0, 0, port))?;
    let SocketAddr::V4(to) = to else {
        unreachable!("IPv4 only")
    };
    connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    Ok(TcpStream::from(fd))
}

#[test]
fn upstream_connections_leave_from_the_applications_port_when_it_is_free() {
    if !environment_ok("upstream_connections_leave_from_the_applications_port_when_it_is_free") {
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    ip(&out.0, &["addr", "add", "10.77.0.4/32", "dev", "lo"]);
    let server = in_netns(&out.0, || {
        TcpListener::bind("10.77.0.4:80").expect("server")
    });
    // A listener on the port the second connection comes from, in the tunnel's namespace: that port
    // cannot be the upstream connection's there.
    let taken = in_netns(&out.0, || {
        TcpListener::bind("0.0.0.0:41235").expect("taken")
    });
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);
    let to: SocketAddr = "10.77.0.4:80".parse().unwrap();
    for (port, same) in [(41234u16, true), (41235, false)] {
        let mut c = in_netns(&app, move || connect_from(port, to)).expect("connect");
        let (mut s, peer) = server.accept().expect("accept");
        assert_eq!(
            peer.port() == port,
            same,
            "from {peer} for the application's {port}"
        );
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
    }
    drop(taken);
    let summary = tunnel.stop();
    assert!(summary.contains("tcp: 2 connections relayed"), "{summary}");
}

#[test]
fn unreachable_and_silent_destinations_are_unreachable_and_silent_for_the_application() {
    if !environment_ok(
        "unreachable_and_silent_destinations_are_unreachable_and_silent_for_the_application",
    ) {
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    // 10.99.0.0/24 leads into a TUN interface nobody reads: what goes there is lost without a word.
    ip(&out.0, &["tuntap", "add", "dev", "void0", "mode", "tun"]);
    ip(&out.0, &["link", "set", "void0", "up"]);
    ip(&out.0, &["route", "add", "10.99.0.0/24", "dev", "void0"]);
    // The kernel's own answers: no route (EHOSTUNREACH, both families), and a policy (EACCES).
    ip(&out.0, &["route", "add", "unreachable", "10.98.0.0/24"]);
    ip(&out.0, &["route", "add", "prohibit", "10.97.0.0/24"]);
    ip(&out.0, &["-6", "route", "add", "unreachable", "fd98::/64"]);
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &["--connect-timeout", "1"]);
    let connect = |to: &str| {
        let to: SocketAddr = to.parse().unwrap();
        in_netns(&app, move || {
            let start = Instant::now();
            let result = TcpStream::connect_timeout(&to, Duration::from_millis(2500));
            (result.map(|_| ()).map_err(|e| e.kind()), start.elapsed())
        })
    };
    // The tunnel's connect failed at once, and so does the application's, with the same error.
    for (to, kind) in [
        ("10.98.0.9:80", ErrorKind::HostUnreachable),
        ("10.97.0.9:80", ErrorKind::HostUnreachable),
        ("[fd98::9]:80", ErrorKind::HostUnreachable),
    ] {
        let (result, waited) = connect(to);
        assert_eq!(result, Err(kind), "{to}");
        assert!(waited < Duration::from_secs(1), "{to}: after {waited:?}");
    }
    // No answer: the tunnel gives up after --connect-timeout and says nothing, so the
    // application's own connect times out. (Each SYN it sends again after the tunnel gave up starts
    // another attempt: Linux sends them a second apart at first, `tcp_syn_linear_timeouts`.)
    let (result, waited) = connect("10.99.0.9:80");
    assert_eq!(result, Err(ErrorKind::TimedOut));
    assert!(waited >= Duration::from_millis(2400), "after {waited:?}");
    // The last attempt ends a --connect-timeout after the application's last SYN.
    std::thread::sleep(Duration::from_millis(1200));
    let summary = tunnel.stop();
    let tcp_line = summary
        .lines()
        .find(|l| l.starts_with("tcp: "))
        .expect(&summary);
    assert!(
        tcp_line.contains("(0 refused, 3 unreachable, "),
        "{summary}"
    );
    assert!(
        tcp_line.contains(
            " timed out, 0 reset, 0 over the limit, 0 handshake first, 0 open at exit, 0 in the \
             stack's tables)"
        ),
        "nothing left behind: {summary}"
    );
    let timed_out: u64 = tcp_line
        .split("unreachable, ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3).contains(&timed_out), "{summary}");
}

/// `--queues 2`: a stack per queue; connections and flows spread over both, and every one is relayed.
#[test]
fn two_queues_share_the_flows_and_relay_them_all() {
    if !environment_ok("two_queues_share_the_flows_and_relay_them_all") {
        return;
    }
    let out = internet();
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &["--queues", "2"]);
    for server in ["10.77.0.2:7", "[fd77::2]:7"] {
        let to: SocketAddr = server.parse().unwrap();
        let all = in_netns(&app, move || (0..50).all(|_| tcp_echo(to, 3000)));
        assert!(all, "50 echoes through {server}");
    }
    let answered = in_netns(&app, || {
        // All 40 sockets stay open to the end, so each has its own port and is its own flow (a
        // socket closed early may hand its port to a later one, which the tunnel rightly sees as
        // the same flow).
        let sockets: Vec<UdpSocket> = (0..40)
            .map(|_| UdpSocket::bind("0.0.0.0:0").unwrap())
            .collect();
        (0u8..)
            .zip(&sockets)
            .filter(|&(i, s)| {
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                s.send_to(&[i; 100], "10.77.0.2:7").unwrap();
                let mut buf = [0u8; 200];
                s.recv(&mut buf).is_ok_and(|n| buf[..n] == [i; 100])
            })
            .count()
    });
    assert_eq!(answered, 40, "UDP echoes");
    let summary = tunnel.stop();
    assert!(
        summary.contains("tcp: 100 connections relayed (0 refused"),
        "{summary}"
    );
    assert!(summary.contains("udp: 40 flows"), "{summary}");
    // Both stacks relayed some of each: "queues: A / B tcp connections, C / D udp flows".
    let shares: Vec<u64> = summary
        .lines()
        .find(|l| l.starts_with("queues: "))
        .expect(&summary)
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(shares.len(), 4, "{summary}");
    assert!(shares.iter().all(|&n| n >= 5), "{summary}");
}

/// TCP's `ActiveOpens` in the namespace the calling thread is in.
fn active_opens() -> u64 {
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "ActiveOpens")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// A TCP SYN from `src`:`sport` to `dst`:80 in an IPv4 header, checksums filled.
fn forged_syn(src: [u8; 4], dst: [u8; 4], sport: u16, seq: u32) -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ipv4(src, dst, 64)
        .tcp(sport, 80, seq, 64240)
        .syn();
    let mut out = Vec::new();
    builder.write(&mut out, &[]).unwrap();
    out
}

#[test]
fn a_syn_flood_from_the_applications_does_not_deny_their_connections() {
    if !environment_ok("a_syn_flood_from_the_applications_does_not_deny_their_connections") {
        return;
    }
    let out = internet();
    // The flood's destinations lead into a TUN interface nobody reads: every connection the tunnel
    // opened for a flooding SYN would wait there until --connect-timeout.
    ip(&out.0, &["tuntap", "add", "dev", "void0", "mode", "tun"]);
    ip(&out.0, &["link", "set", "void0", "up"]);
    ip(&out.0, &["route", "add", "10.99.0.0/24", "dev", "void0"]);
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    // Fewer relayed connections allowed than the flood has SYNs: without a bound on held SYNs, the
    // flood alone would fill the table, and every connection after it would be refused.
    let tunnel = Tunnel::start(
        &out.0,
        &app,
        &["--connect-timeout", "2", "--max-tcp-flows", "3000"],
    );
    let opens_before = in_netns(&out.0, active_opens);
    const SYNS: u32 = 8000;
    // From the applications' namespace, as hping3 --flood --rand-dest would: SYNs with their own
    // address and random ports to random hosts of 10.99.0.0/24, sent through a raw socket (the
    // kernel answers the SYN-ACKs that come back with resets: it has no such connections).
    in_netns(&app, || {
        use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};
        let raw = socket(
            AddressFamily::Inet,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::Raw,
        )
        .expect("a raw socket");
        let mut x: u32 = 0x9e37_79b9;
        for i in 0..SYNS {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let dst = [10, 99, 0, (x % 254 + 1) as u8];
            let syn = forged_syn([10, 66, 0, 1], dst, 1024 + (x >> 16) as u16 % 60000, x);
            let to = nix::sys::socket::SockaddrIn::new(10, 99, 0, dst[3], 80);
            // A full TUN queue drops some: that is part of a flood.
            let _ = nix::sys::socket::sendto(
                std::os::fd::AsRawFd::as_raw_fd(&raw),
                &syn,
                &to,
                nix::sys::socket::MsgFlags::empty(),
            );
            if i % 500 == 499 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    // During the flood's aftermath (its held SYNs still waiting on their destinations) and after
    // it, the applications' connections are relayed.
    let echo: SocketAddr = "10.77.0.2:7".parse().unwrap();
    for round in 0..5 {
        let ok = in_netns(&app, move || tcp_echo(echo, 10_000));
        assert!(ok, "connection {round} during the flood");
    }
    let opens = in_netns(&out.0, active_opens) - opens_before;
    eprintln!("{opens} kernel connections opened for {SYNS} flooding SYNs");
    assert!(
        opens <= 1024 + 5 + 16,
        "{opens} kernel connections opened for {SYNS} flooding SYNs: the held ones are bounded"
    );
    std::thread::sleep(Duration::from_millis(2500));
    for round in 0..3 {
        let ok = in_netns(&app, move || tcp_echo(echo, 10_000));
        assert!(ok, "connection {round} after the flood");
    }
    let summary = tunnel.stop();
    let tcp_line = summary
        .lines()
        .find(|l| l.starts_with("tcp: "))
        .expect(&summary);
    assert!(tcp_line.contains(" 0 over the limit, "), "{summary}");
    let handshake_first: u64 = tcp_line
        .split(" over the limit, ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect(tcp_line);
    assert!(
        handshake_first >= 5,
        "the connections during the flood completed their handshake first: {summary}"
    );
    drop(app_ns);
}

/// An HTTP/1.0 server that closes first: for each connection, reads the request (up to its blank
/// line), writes a response with a body of `body` bytes and closes.
fn start_closing_http(listener: TcpListener, body: usize) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {body}\r\n\r\n");
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&vec![b'x'; body]);
            });
        }
    });
}

/// `n` requests to `to`, `threads` at a time, each on a connection of its own that the server
/// closes; the bytes of every response read to its end.
fn http_requests(to: SocketAddr, n: usize, threads: usize) -> usize {
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut total = 0;
                for _ in (t..n).step_by(threads) {
                    let mut c =
                        TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
                    let mut answer = Vec::new();
                    c.read_to_end(&mut answer).expect("the answer");
                    total += answer.len();
                }
                total
            })
        })
        .collect();
    workers.into_iter().map(|w| w.join().unwrap()).sum()
}

#[test]
fn connections_the_server_closes_first_leave_the_tunnels_memory_as_it_was() {
    if !environment_ok("connections_the_server_closes_first_leave_the_tunnels_memory_as_it_was") {
        return;
    }
    let out = internet();
    let (small, large) = in_netns(&out.0, || {
        (
            TcpListener::bind("10.77.0.2:8081").expect("HTTP"),
            TcpListener::bind("10.77.0.2:8082").expect("HTTP"),
        )
    });
    start_closing_http(small, 700);
    start_closing_http(large, 1 << 20);
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);
    let pid = tunnel.child.id();
    // A connection the application closes first frees a large send ring early (which made glibc
    // raise its mmap threshold, and later rings stay resident), then a few to warm up.
    let echo: SocketAddr = "10.77.0.2:7".parse().unwrap();
    assert!(in_netns(&app, move || tcp_echo(echo, 8 << 20)));
    let small: SocketAddr = "10.77.0.2:8081".parse().unwrap();
    let large: SocketAddr = "10.77.0.2:8082".parse().unwrap();
    in_netns(&app, move || http_requests(small, 200, 4));
    let before = rss_kib(pid);
    // 3,000 short answers and 100 of 1 MiB, each connection closed by the server: the tunnel's
    // side of each ends in TIME-WAIT.
    let (short, long) = in_netns(&app, move || {
        (http_requests(small, 3000, 8), http_requests(large, 100, 4))
    });
    assert!(short >= 3000 * 700 && long >= 100 << 20, "{short} {long}");
    let after = rss_kib(pid);
    eprintln!(
        "tunnel RSS {before} KiB before, {after} KiB after 3,100 connections closed by the server"
    );
    assert!(
        after.saturating_sub(before) < 24 << 10,
        "the tunnel grew by {} KiB (from {before} KiB) for connections that are over",
        after.saturating_sub(before)
    );
    let summary = tunnel.stop();
    assert!(
        summary.contains("tcp: 3301 connections relayed"),
        "{summary}"
    );
}

#[test]
fn a_tunnel_run_by_ip_netns_exec_makes_a_namespace_every_process_can_enter() {
    if !environment_ok("a_tunnel_run_by_ip_netns_exec_makes_a_namespace_every_process_can_enter") {
        return;
    }
    let out = TestNetns::create();
    ip(&out.0, &["link", "set", "lo", "up"]);
    // A name nobody made yet: the tunnel, run in OUT by `ip netns exec` (a mount namespace of its
    // own), makes it. Its name is for the guard to remove, should the test fail.
    let app = TestNetns(unique_netns());
    assert!(!netns_exists(&app.0));
    let tunnel = Tunnel::start(&out.0, &app.0, &[]);
    // This process, in the host's mount namespace, enters it and finds the tunnel's interface.
    let found = Command::new("ip")
        .args(["-n", &app.0, "-br", "link", "show", "fpt0"])
        .output()
        .unwrap();
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let addr = in_netns(&app.0, || {
        std::fs::read_to_string("/proc/thread-self/net/route").unwrap_or_default()
    });
    assert!(
        addr.contains("fpt0"),
        "the default route through the tunnel: {addr}"
    );
    tunnel.stop();
    // And the tunnel removed what it made.
    assert!(!netns_exists(&app.0), "{} is left behind", app.0);
}

#[test]
fn a_burst_of_large_datagrams_is_relayed_whole() {
    if !environment_ok("a_burst_of_large_datagrams_is_relayed_whole") {
        return;
    }
    let out = internet();
    let app_ns = TestNetns::create();
    let app = app_ns.0.clone();
    let tunnel = Tunnel::start(&out.0, &app, &[]);
    // 200 datagrams of 65,000 bytes to OUT's echo, 8 outstanding at a time, from a socket with an
    // 8 MiB receive buffer (as the echo's): the tunnel's own socket for the flow must hold such a
    // burst too.
    let echoed = in_netns(&app, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20))
            .unwrap();
        s.connect("10.77.0.2:7").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (mut sent, mut back) = (0, 0);
        let mut buf = vec![0u8; 65536];
        while sent < 200 {
            while sent < 200 && sent - back < 8 {
                let d = pattern(65_000, sent);
                s.send(&d).unwrap();
                sent += 1;
            }
            match s.recv(&mut buf) {
                Ok(n) => {
                    assert_eq!(n, 65_000);
                    back += 1;
                }
                // Lost: the next 8 go out anyway (the count below tells).
                Err(_) => back = sent,
            }
        }
        let mut received = back;
        while let Ok(n) = s.recv(&mut buf) {
            assert_eq!(n, 65_000);
            received += 1;
        }
        received
    });
    let summary = tunnel.stop();
    assert_eq!(echoed, 200, "of 200 datagrams echoed: {summary}");
}
