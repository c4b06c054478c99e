//! The async front on a real TUN interface: the kernel, in a namespace of the test's own, talks TCP and
//! UDP over IPv4 and IPv6 to an async echo server on fastpath (one dual-stack listener and socket),
//! which sleeps on the TUN descriptor through tokio's reactor.
//!
//! Needs root, `/dev/net/tun` and `ip`; without them it prints why and passes, unless
//! `FASTPATH_REQUIRE_TUN=1` (as in CI), where it fails.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fastpath::link::{TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Stack, StackConfig};
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

#[test]
fn kernel_clients_over_both_families_reach_an_async_echo_server_on_tun() {
    if !environment_ok() {
        return;
    }
    let ns = Netns(format!("fp-tokio-{}", std::process::id()));
    assert!(Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .is_ok_and(|s| s.success()));
    let link = TunLink::open(&TunConfig {
        name: "fpa0".into(),
        netns: Some(ns.0.clone()),
        mtu: 1500,
        offload: true,
        uso: false,
    })
    .expect("a TUN interface");
    ip(&ns.0, &["addr", "add", "10.9.0.1/24", "dev", "fpa0"]);
    ip(
        &ns.0,
        &["-6", "addr", "add", "fd00:a::1/64", "dev", "fpa0", "nodad"],
    );
    ip(&ns.0, &["link", "set", "dev", "fpa0", "up"]);
    let tun = link.handle();
    let mut stack = Stack::new(StackConfig::default());
    let iface = stack.add_interface("fpa0", link, "10.9.0.2/24".parse::<Ipv4Cidr>().unwrap());
    stack
        .add_ipv6_address(iface, "fd00:a::2/64".parse().unwrap())
        .unwrap();

    // The server: its own thread, a current-thread runtime and a LocalSet, until told to stop.
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let net = Net::with_tun(stack, tun).unwrap();
            tokio::task::spawn_local(net.clone().drive());
            let any: SocketAddr = "[::]:7".parse().unwrap();
            let listener = TcpListener::bind(&net, any, 64).unwrap();
            let udp = UdpSocket::bind(&net, any).unwrap();
            tokio::task::spawn_local(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
                    let _ = udp.send_to(&buf[..n], peer).await;
                }
            });
            tokio::task::spawn_local(async move {
                loop {
                    let Ok((conn, _)) = listener.accept().await else {
                        break;
                    };
                    tokio::task::spawn_local(async move {
                        let (mut r, mut w) = tokio::io::split(conn);
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                        let _ = tokio::io::AsyncWriteExt::shutdown(&mut w).await;
                    });
                }
            });
            let _ = stop_rx.await;
            net.with_stack(|s| s.counters().drops.total())
        })
    });

    for server_addr in ["10.9.0.2:7", "[fd00:a::2]:7"] {
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
    stop_tx.send(()).unwrap();
    let drops = server.join().unwrap();
    eprintln!("drops at the server: {drops}");
}
