//! The async front on a real TUN interface: the kernel, in a namespace of the test's own, talks TCP and
//! UDP over IPv4 and IPv6 to an async echo server on fastpath (one dual-stack listener and socket),
//! which sleeps on the TUN descriptor through tokio's reactor.
//!
//! Needs root, `/dev/net/tun` and `ip`; without them it prints why and passes, unless
//! `FASTPATH_REQUIRE_TUN=1` (as in CI), where it fails.
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Stack, StackConfig, TunHandle};
use fastpath_tokio::{Net, TcpListener, UdpSocket};

fn environment_ok() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let tun = Path::new("/dev/net/tun").exists();
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if root && tun && ip {
        return true;
    }
    let why = format!("needs root ({root}), /dev/net/tun ({tun}) and ip ({ip})");
    if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
        panic!("{why} (FASTPATH_REQUIRE_TUN=1)");
    }
    eprintln!("skipping: {why}");
    false
}

/// A namespace removed on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(ns: &str, args: &[&str]) {
    let ok = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip -n {ns} {args:?}");
}

/// Runs `f` on a thread inside namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(path).expect("open the namespace");
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("the namespace's thread")
}

/// A namespace of the test's own with a TUN interface `dev` in it: the kernel at 10.`net`.0.1/24 and
/// fd00:`net`::1/64, and a stack at .2 and ::2 on the interface's other end.
fn kernel_and_stack(tag: &str, dev: &str, net: u8) -> (Netns, Stack, TunHandle) {
    let ns = Netns(format!("fp-tokio-{tag}-{}", std::process::id()));
    assert!(Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .is_ok_and(|s| s.success()));
    let link = TunLink::open(&TunConfig {
        name: dev.into(),
        netns: Some(ns.0.clone()),
        mtu: 1500,
        offload: true,
        uso: false,
        io_uring: true,
        tap: None,
    })
    .expect("a TUN interface");
    ip(
        &ns.0,
        &["addr", "add", &format!("10.{net}.0.1/24"), "dev", dev],
    );
    ip(
        &ns.0,
        &[
            "-6",
            "addr",
            "add",
            &format!("fd00:{net}::1/64"),
            "dev",
            dev,
            "nodad",
        ],
    );
    ip(&ns.0, &["link", "set", "dev", dev, "up"]);
    let tun = link.handle();
    let mut stack = Stack::new(StackConfig::default());
    let v4: Ipv4Cidr = format!("10.{net}.0.2/24").parse().unwrap();
    let iface = stack.add_interface(dev, link, v4);
    stack
        .add_ipv6_address(iface, format!("fd00:{net}::2/64").parse().unwrap())
        .unwrap();
    (ns, stack, tun)
}

/// Runs `serve` on a thread of its own (a current-thread runtime and a `LocalSet`, the front's model)
/// until the returned sender is used or dropped. `serve` binds its sockets before it returns its
/// future, and this returns once it has.
fn serve_on_thread<F>(
    stack: Stack,
    tun: TunHandle,
    serve: impl FnOnce(Net) -> F + Send + 'static,
) -> (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
)
where
    F: std::future::Future<Output = ()> + 'static,
{
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let net = Net::with_tun(stack, tun).unwrap();
            tokio::task::spawn_local(net.clone().drive());
            tokio::task::spawn_local(serve(net));
            bound_tx.send(()).unwrap();
            let _ = stop_rx.await;
        })
    });
    bound_rx.recv().expect("the server binds its sockets");
    (stop_tx, thread)
}

#[test]
fn kernel_clients_over_both_families_reach_an_async_echo_server_on_tun() {
    if !environment_ok() {
        return;
    }
    let (ns, stack, tun) = kernel_and_stack("echo", "fpa0", 9);

    let (stop, server) = serve_on_thread(stack, tun, |net| {
        let any: SocketAddr = "[::]:7".parse().unwrap();
        let listener = TcpListener::bind(&net, any, 64).unwrap();
        let udp = UdpSocket::bind(&net, any).unwrap();
        async move {
            tokio::task::spawn_local(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
                    let _ = udp.send_to(&buf[..n], peer).await;
                }
            });
            while let Ok((conn, _)) = listener.accept().await {
                tokio::task::spawn_local(async move {
                    let (mut r, mut w) = tokio::io::split(conn);
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
                });
            }
        }
    });

    for server_addr in ["10.9.0.2:7", "[fd00:9::2]:7"] {
        let to: SocketAddr = server_addr.parse().unwrap();
        let echoed = in_netns(&ns.0, move || {
            let mut conn =
                std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
            conn.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 13 + i / 4093) as u8).collect();
            let mut w = conn.try_clone().unwrap();
            let sent = data.clone();
            let writer = std::thread::spawn(move || {
                w.write_all(&sent).unwrap();
                w.shutdown(std::net::Shutdown::Write).unwrap();
            });
            let mut back = Vec::new();
            conn.read_to_end(&mut back).expect("the echo");
            writer.join().unwrap();
            let udp = std::net::UdpSocket::bind(if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" })
                .unwrap();
            udp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            udp.send_to(b"datagram", to).unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = udp.recv_from(&mut buf).expect("a UDP echo");
            (back == data, buf[..n].to_vec(), from)
        });
        assert!(echoed.0, "8 MiB echoed intact over {server_addr}");
        assert_eq!(echoed.1, b"datagram");
        assert_eq!(echoed.2, to);
    }
    stop.send(()).unwrap();
    server.join().unwrap();
}

#[test]
fn curl_fetches_pages_from_a_hyper_server_on_fastpath() {
    if !environment_ok() {
        return;
    }
    if Command::new("curl").arg("--version").output().is_err() {
        if std::env::var("FASTPATH_REQUIRE_TUN").as_deref() == Ok("1") {
            panic!("curl is missing (FASTPATH_REQUIRE_TUN=1)");
        }
        eprintln!("skipping: needs curl");
        return;
    }
    let (ns, stack, tun) = kernel_and_stack("http", "fph0", 11);
    let (stop, server) = serve_on_thread(stack, tun, |net| {
        let any: SocketAddr = "[::]:80".parse().unwrap();
        let listener = TcpListener::bind(&net, any, 64).unwrap();
        async move {
            while let Ok((conn, peer)) = listener.accept().await {
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let body = format!("{} {} from {peer}\n", req.method(), req.uri().path());
                    let body = body.repeat(if req.uri().path() == "/big" {
                        20_000
                    } else {
                        1
                    });
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(hyper::body::Bytes::from(body)),
                        ))
                    }
                });
                tokio::task::spawn_local(async move {
                    let io = hyper_util::rt::TokioIo::new(conn);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        }
    });

    for (url, client) in [
        ("http://10.11.0.2/hello", "10.11.0.1"),
        ("http://[fd00:11::2]/hello", "fd00:11::1"),
        ("http://10.11.0.2/big", "10.11.0.1"),
    ] {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                "curl",
                "-sS",
                "--max-time",
                "10",
                url,
            ])
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let body = String::from_utf8(out.stdout).expect("a text body");
        let first = body.lines().next().unwrap_or_default();
        let path = url.rsplit('/').next().unwrap();
        assert!(
            first.starts_with(&format!("GET /{path} from ")) && first.contains(client),
            "{url} answered {first:?}"
        );
        let lines = if path == "big" { 20_000 } else { 1 };
        assert_eq!(body.lines().count(), lines, "{url}'s whole body");
    }
    stop.send(()).unwrap();
    server.join().unwrap();
}

/// The `Send` front on TUN: an echo server written as for `tokio::net`, its tasks spawned on the
/// multi-threaded runtime, answers the kernel's TCP and UDP clients over both families (8 MiB each
/// way over TCP). The driver sleeps on the descriptor through the reactor.
#[test]
fn kernel_clients_reach_a_send_echo_server_on_the_multi_threaded_runtime() {
    use fastpath_tokio::net;
    if !environment_ok() {
        return;
    }
    let (ns, stack, tun) = kernel_and_stack("send", "fps0", 13);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The server's tasks run on the runtime's workers once spawned; this thread is the client's.
    runtime.block_on(async {
        let net = net::Net::with_tun(stack, tun).unwrap();
        let listener = net::TcpListener::bind(&net, "[::]:7").await.unwrap();
        let udp = net::UdpSocket::bind(&net, "[::]:7").await.unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
                let _ = udp.send_to(&buf[..n], peer).await;
            }
        });
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = socket.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
                });
            }
        });
    });

    for server_addr in ["10.13.0.2:7", "[fd00:13::2]:7"] {
        let to: SocketAddr = server_addr.parse().unwrap();
        let echoed = in_netns(&ns.0, move || {
            let mut conn =
                std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect");
            conn.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 + i / 4091) as u8).collect();
            let mut w = conn.try_clone().unwrap();
            let sent = data.clone();
            let writer = std::thread::spawn(move || {
                w.write_all(&sent).unwrap();
                w.shutdown(std::net::Shutdown::Write).unwrap();
            });
            let mut back = Vec::new();
            conn.read_to_end(&mut back).expect("the echo");
            writer.join().unwrap();
            let udp = std::net::UdpSocket::bind(if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" })
                .unwrap();
            udp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            udp.send_to(b"datagram", to).unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = udp.recv_from(&mut buf).expect("a UDP echo");
            (back == data, buf[..n].to_vec(), from)
        });
        assert!(echoed.0, "8 MiB echoed intact over {server_addr}");
        assert_eq!(echoed.1, b"datagram");
        assert_eq!(echoed.2, to);
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
}
