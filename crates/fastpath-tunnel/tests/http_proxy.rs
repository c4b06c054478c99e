//! The tunnel as a library, through an HTTP proxy's CONNECT and with a route by destination. The
//! test makes namespace OUT, whose loopback holds the "network" (10.79.0.2 with a TCP echo server on
//! port 7 and an HTTP CONNECT proxy on 3128, written here on tokio; 10.79.0.4 with another echo
//! server), and APP, the applications' namespace, with a TUN interface the test opens there
//! (`TunLink::open`, with virtio-net headers) and whose descriptor (a duplicate, the link dropped)
//! it hands to `Tunnel::start` from a thread in OUT, so that the tunnel's kernel sockets are OUT's.
//! The default route is the proxy, with basic authentication; 10.79.0.4/32 goes direct. From APP:
//! an echo through the proxy, byte for byte; a destination the proxy forbids (403) fails the
//! connect as prohibited, one it cannot reach (502) is refused; the direct route bypasses the
//! proxy; UDP routed to the proxy is dropped and counted; every socket towards the network passes
//! the protect hook.
//!
//! Needs root, `/dev/net/tun` and `ip`; without them it prints why and passes, unless
//! `FASTPATH_REQUIRE_TUN=1` (CI sets it), when it fails.
#![cfg(target_os = "linux")]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastpath::link::{TunConfig, TunLink};
use fastpath_tunnel::{Config, Protect, Routes, Tunnel, Upstream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn environment_ok(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    let ok =
        root && Path::new("/dev/net/tun").exists() && Command::new("ip").arg("-V").output().is_ok();
    if !ok {
        if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
            panic!("{test}: needs root, /dev/net/tun and ip(8) (FASTPATH_REQUIRE_TUN=1)");
        }
        eprintln!("skipping {test}: needs root, /dev/net/tun and ip(8)");
    }
    ok
}

/// A network namespace made for the test, removed on drop.
struct Netns(String);

impl Netns {
    fn create(role: &str) -> Netns {
        let name = format!("fp-http-{role}-{}", std::process::id());
        // One a killed run left behind (quietly: usually there is none).
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        assert!(Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success()));
        Netns(name)
    }

    fn ip(&self, args: &[&str]) {
        let ok = Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip -n {} {args:?}", self.0);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Moves the calling thread into namespace `ns`.
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

/// Runs `f` on a thread in namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
    .join()
    .unwrap()
}

const CREDENTIALS: &str = "Basic ZnA6c2VjcmV0"; // fp:secret

/// OUT's servers, on a thread of their own that stays there: echo on 10.79.0.2:7 and 10.79.0.4:7,
/// the proxy on 10.79.0.2:3128. Returns the request lines the proxy saw.
fn start_servers(out: &str) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (ns, log) = (out.to_string(), seen.clone());
    std::thread::spawn(move || {
        enter(&ns);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            for at in ["10.79.0.2:7", "10.79.0.4:7"] {
                let echo = tokio::net::TcpListener::bind(at).await.unwrap();
                tokio::spawn(async move {
                    while let Ok((mut c, _)) = echo.accept().await {
                        tokio::spawn(async move {
                            let (mut r, mut w) = c.split();
                            let _ = tokio::io::copy(&mut r, &mut w).await;
                            let _ = w.shutdown().await;
                        });
                    }
                });
            }
            let proxy = tokio::net::TcpListener::bind("10.79.0.2:3128")
                .await
                .unwrap();
            ready_tx.send(()).unwrap();
            while let Ok((c, _)) = proxy.accept().await {
                tokio::spawn(proxy_session(c, log.clone()));
            }
        });
    });
    ready.recv().unwrap();
    seen
}

/// One CONNECT: the request head, the credentials checked, then 403 for port 9, 502 for port 8,
/// else a connection to the target and 200, and the bytes relayed both ways.
async fn proxy_session(mut c: tokio::net::TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if c.read_exact(&mut byte).await.is_err() || head.len() > 8192 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let request = head.lines().next().unwrap_or_default().to_string();
    seen.lock().unwrap().push(request.clone());
    let authorized = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case(&format!("proxy-authorization: {CREDENTIALS}")));
    let target = request.split(' ').nth(1).unwrap_or_default().to_string();
    let answer = |status: &str| format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
    if !request.starts_with("CONNECT ") || !authorized {
        let _ = c
            .write_all(answer("407 Proxy Authentication Required").as_bytes())
            .await;
        return;
    }
    let port = target.rsplit(':').next().unwrap_or_default();
    if port == "9" {
        let _ = c.write_all(answer("403 Forbidden").as_bytes()).await;
        return;
    }
    let upstream = match (port, tokio::net::TcpStream::connect(&target).await) {
        ("8", _) | (_, Err(_)) => {
            let _ = c.write_all(answer("502 Bad Gateway").as_bytes()).await;
            return;
        }
        (_, Ok(u)) => u,
    };
    let mut upstream = upstream;
    // The head and the first bytes of the tunnel in one write: the client must not read past it.
    if c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut c, &mut upstream).await;
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + (i >> 10)) as u8).collect()
}

/// Echoes `len` bytes through `to`; true if they came back intact.
fn echo(to: SocketAddr, len: usize) -> bool {
    let mut conn = TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let data = pattern(len);
    let mut w = conn.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    conn.read_to_end(&mut back).expect("the echo");
    writer.join().unwrap();
    back == data
}

#[test]
fn the_tunnel_relays_through_an_http_proxy_and_routes_by_destination() {
    if !environment_ok("the_tunnel_relays_through_an_http_proxy_and_routes_by_destination") {
        return;
    }
    let out = Netns::create("out");
    let app = Netns::create("app");
    out.ip(&["link", "set", "lo", "up"]);
    out.ip(&["addr", "add", "10.79.0.2/32", "dev", "lo"]);
    out.ip(&["addr", "add", "10.79.0.4/32", "dev", "lo"]);
    let seen = start_servers(&out.0);

    let name = format!("fphttp{}", std::process::id() % 10000);
    let link = TunLink::open(&TunConfig {
        name: name.clone(),
        netns: Some(app.0.clone()),
        ..TunConfig::default()
    })
    .expect("TUN interface in APP");
    // The descriptor as a VPN app would hand it over: another one for the same queue (opened with
    // IFF_VNET_HDR, so the tunnel's link takes the offloads), the link that opened it gone.
    let fd = nix::unistd::dup(link.as_fd()).unwrap();
    drop(link);
    app.ip(&["addr", "add", "10.66.0.1/24", "dev", &name]);
    app.ip(&["link", "set", "dev", &name, "up"]);
    app.ip(&["route", "replace", "default", "dev", &name]);

    let mut config = Config::default();
    let mut routes = Routes::all(Upstream::parse("http://fp@10.79.0.2:3128").unwrap());
    for u in routes.upstreams_mut() {
        u.set_password("secret").unwrap();
    }
    routes.parse_rules("10.79.0.4/32 = direct").unwrap();
    config.routes = routes;
    config.connect_timeout = Duration::from_secs(3);
    // Every socket towards the network goes through the hook (a VPN app's protect).
    let protected = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = protected.clone();
    config.protect = Some(Protect::new(move |_| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }));
    let tunnel = in_netns(&out.0, move || Tunnel::start(fd, config)).expect("the tunnel starts");

    // Through the proxy, byte for byte.
    assert!(in_netns(&app.0, || echo(
        "10.79.0.2:7".parse().unwrap(),
        1 << 20
    )));
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        ["CONNECT 10.79.0.2:7 HTTP/1.1"]
    );
    // Forbidden: prohibited (an ICMP administratively prohibited, which Linux reports as host
    // unreachable); the proxy cannot reach it: refused (a RST).
    let forbidden = in_netns(&app.0, || {
        TcpStream::connect_timeout(&"10.79.0.2:9".parse().unwrap(), Duration::from_secs(5))
    });
    assert_eq!(
        forbidden.unwrap_err().kind(),
        ErrorKind::HostUnreachable,
        "403"
    );
    let refused = in_netns(&app.0, || {
        TcpStream::connect_timeout(&"10.79.0.2:8".parse().unwrap(), Duration::from_secs(5))
    });
    assert_eq!(
        refused.unwrap_err().kind(),
        ErrorKind::ConnectionRefused,
        "502"
    );
    // The direct route: the proxy never hears of it.
    assert!(in_netns(&app.0, || echo(
        "10.79.0.4:7".parse().unwrap(),
        64 << 10
    )));
    assert_eq!(seen.lock().unwrap().len(), 3, "{:?}", seen.lock().unwrap());
    // UDP to a destination routed to the proxy: dropped, counted.
    in_netns(&app.0, || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.send_to(b"lost", "10.79.0.2:7").unwrap();
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tunnel.stats().totals.udp_no_proxy == 0 {
        assert!(std::time::Instant::now() < deadline, "UDP not counted");
        std::thread::sleep(Duration::from_millis(20));
    }

    let stats = tunnel.join().expect("the tunnel stops cleanly");
    let t = stats.totals;
    assert_eq!(t.tcp_flows, 4, "{t:?}");
    assert_eq!((t.tcp_unreachable, t.tcp_refused), (1, 1), "{t:?}");
    assert_eq!(t.tcp_up, (1 << 20) + (64 << 10), "{t:?}");
    assert_eq!(t.tcp_down, t.tcp_up, "{t:?}");
    assert_eq!((t.udp_flows, t.udp_no_proxy), (0, 1), "{t:?}");
    // Three connections to the proxy, one direct; no UDP socket.
    assert_eq!(protected.load(std::sync::atomic::Ordering::Relaxed), 4);
    assert!(
        stats.tun.rx_packets > 0 && stats.tun.tx_packets > 0,
        "{stats:?}"
    );
}
