//! The async front over an in-memory pair: two stacks, each with its `Net` and driver, on one
//! current-thread runtime.

use std::net::SocketAddr;
use std::time::Duration;

use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Ipv4Cidr, Stack, StackConfig};
use fastpath_tokio::{Net, TcpListener, TcpStream, UdpSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::LocalSet;

/// A (10.0.0.1, 2001:db8::1) and B (10.0.0.2, 2001:db8::2), their drivers running on `local`.
fn two_nets(local: &LocalSet, impair: Impairments) -> (Net, Net) {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 65536, impair);
    let make = |end: PairEnd, v4: &str, v6: &str| {
        let mut s = Stack::new(StackConfig::default());
        let i = s.add_interface("pair0", end, v4.parse::<Ipv4Cidr>().unwrap());
        s.add_ipv6_address(i, v6.parse().unwrap()).unwrap();
        Net::new(s)
    };
    let a = make(ea, "10.0.0.1/24", "2001:db8::1/64");
    let b = make(eb, "10.0.0.2/24", "2001:db8::2/64");
    local.spawn_local(a.clone().drive());
    local.spawn_local(b.clone().drive());
    (a, b)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 997) as u8).collect()
}

#[test]
fn tcp_echo_of_a_mebibyte_over_both_families() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, b) = two_nets(&local, Impairments::default());
        for server in ["10.0.0.2:7", "[2001:db8::2]:7"] {
            let server: SocketAddr = server.parse().unwrap();
            let listener = TcpListener::bind(&b, server, 16).unwrap();
            // The echo server: one connection, split, copied back until the client's FIN.
            let echo = tokio::task::spawn_local(async move {
                let (mut conn, peer) = listener.accept().await.unwrap();
                assert_eq!(conn.peer_addr().unwrap(), peer);
                assert_eq!(conn.local_addr().unwrap(), server);
                let (mut r, mut w) = conn.split();
                let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
                w.shutdown().await.unwrap();
                (n, peer)
            });
            let conn = TcpStream::connect(&a, server).await.unwrap();
            assert_eq!(conn.peer_addr().unwrap(), server);
            let (mut r, mut w) = tokio::io::split(conn);
            let data = pattern(1 << 20);
            let sent = data.clone();
            let writer = tokio::task::spawn_local(async move {
                w.write_all(&sent).await.unwrap();
                w.shutdown().await.unwrap();
                w
            });
            let mut back = Vec::new();
            tokio::time::timeout(Duration::from_secs(30), r.read_to_end(&mut back))
                .await
                .expect("the echo in time")
                .unwrap();
            assert!(back == data, "1 MiB back intact from {server}");
            let _w = writer.await.unwrap();
            let (n, peer) = echo.await.unwrap();
            assert_eq!(n, 1 << 20);
            assert_eq!(peer.is_ipv6(), server.is_ipv6());
        }
    }));
}

#[test]
fn zero_copy_reads_and_writes_carry_a_mebibyte_and_see_the_end() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, b) = two_nets(&local, Impairments::default());
        let server: SocketAddr = "10.0.0.2:9".parse().unwrap();
        let listener = TcpListener::bind(&b, server, 16).unwrap();
        // The receiver takes at most 1000 bytes per offer, so most offers are taken in part.
        let sink = tokio::task::spawn_local(async move {
            let (conn, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut partial = 0;
            loop {
                let mut offered = 0;
                let n = conn
                    .read_with(|data| {
                        offered += 1;
                        let take = data.len().min(1000);
                        got.extend_from_slice(&data[..take]);
                        partial += usize::from(take < data.len());
                        take
                    })
                    .await
                    .unwrap();
                if offered == 0 {
                    assert_eq!(n, 0, "nothing taken at the end");
                    break;
                }
            }
            (got, partial)
        });
        let conn = TcpStream::connect(&a, server).await.unwrap();
        let data = pattern(1 << 20);
        let mut at = 0;
        while at < data.len() {
            let n = conn
                .write_with(4096, |room| {
                    let n = room.len().min(data.len() - at);
                    room[..n].copy_from_slice(&data[at..at + n]);
                    n
                })
                .await
                .unwrap();
            assert!(n <= 4096, "at most the maximum asked for");
            at += n;
        }
        let mut w = &conn;
        w.shutdown().await.unwrap();
        let (got, partial) = tokio::time::timeout(Duration::from_secs(30), sink)
            .await
            .expect("the end in time")
            .unwrap();
        assert!(got == data, "1 MiB intact, {} bytes", got.len());
        assert!(partial > 100, "offers taken in part: {partial}");
    }));
}

#[test]
fn udp_send_and_receive_wake_the_receiver() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, b) = two_nets(&local, Impairments::default());
        for (from, to) in [
            ("10.0.0.1:0", "10.0.0.2:53"),
            ("[2001:db8::1]:0", "[2001:db8::2]:53"),
        ] {
            let rx = UdpSocket::bind(&b, to.parse().unwrap()).unwrap();
            let tx = UdpSocket::bind(&a, from.parse().unwrap()).unwrap();
            // The receiver waits first: it is woken when the datagram arrives.
            let receiver = tokio::task::spawn_local(async move {
                let mut buf = [0u8; 64];
                let (n, peer) = rx.recv_from(&mut buf).await.unwrap();
                rx.send_to(&buf[..n], peer).await.unwrap();
                (buf[..n].to_vec(), peer)
            });
            tokio::task::yield_now().await;
            tx.send_to(b"question", to.parse().unwrap()).await.unwrap();
            let (got, peer) = receiver.await.unwrap();
            assert_eq!(got, b"question");
            assert_eq!(peer, tx.local_addr().unwrap());
            let mut buf = [0u8; 64];
            let (n, _) = tokio::time::timeout(Duration::from_secs(5), tx.recv_from(&mut buf))
                .await
                .expect("the reply in time")
                .unwrap();
            assert_eq!(&buf[..n], b"question");
        }
    }));
}

#[test]
fn a_refused_connect_is_an_error_and_a_lossy_wire_still_delivers() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, _b) = two_nets(&local, Impairments::default());
        let e = TcpStream::connect(&a, "10.0.0.2:9".parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    }));
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let impair = Impairments {
            loss: 0.02,
            reorder: 0.02,
            seed: 3,
            ..Default::default()
        };
        let (a, b) = two_nets(&local, impair);
        let listener = TcpListener::bind(&b, "10.0.0.2:9".parse().unwrap(), 4).unwrap();
        let sink = tokio::task::spawn_local(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut all = Vec::new();
            conn.read_to_end(&mut all).await.unwrap();
            all
        });
        let mut conn = TcpStream::connect(&a, "10.0.0.2:9".parse().unwrap())
            .await
            .unwrap();
        let data = pattern(200_000);
        conn.write_all(&data).await.unwrap();
        conn.shutdown().await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(60), sink)
            .await
            .expect("delivered in time")
            .unwrap();
        assert!(got == data, "intact over the lossy wire");
    }));
}

/// 1,000 tasks parked on idle UDP sockets while 200 datagrams go back and forth on another pair of
/// sockets: the driver tests the sockets the stack hints at, not every parked task after every poll.
#[test]
fn parked_tasks_are_not_tested_on_every_poll() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, b) = two_nets(&local, Impairments::default());
        let mut idle = Vec::new();
        for port in 0..1000u16 {
            let s =
                UdpSocket::bind(&b, format!("10.0.0.2:{}", 20000 + port).parse().unwrap()).unwrap();
            idle.push(tokio::task::spawn_local(async move {
                let mut buf = [0u8; 16];
                s.recv_from(&mut buf).await.map(|(n, _)| n)
            }));
        }
        tokio::task::yield_now().await;
        let before = b.readiness_checks();
        let server = UdpSocket::bind(&b, "10.0.0.2:7".parse().unwrap()).unwrap();
        let client = UdpSocket::bind(&a, "10.0.0.1:7".parse().unwrap()).unwrap();
        let echo = tokio::task::spawn_local(async move {
            let mut buf = [0u8; 64];
            for _ in 0..200 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let mut buf = [0u8; 64];
        for i in 0..200u32 {
            client
                .send_to(&i.to_be_bytes(), "10.0.0.2:7".parse().unwrap())
                .await
                .unwrap();
            let (n, _) = client.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &i.to_be_bytes());
        }
        echo.await.unwrap();
        let checks = b.readiness_checks() - before;
        // Each of the 200 round trips polls B at least once; testing every parked task each time would
        // take at least 200,000 tests. A full pass every 100 ms (the backstop) is allowed for.
        assert!(checks < 20_000, "{checks} readiness tests");
        // The parked tasks still wake: a datagram to one of them.
        client
            .send_to(b"wake", "10.0.0.2:20500".parse().unwrap())
            .await
            .unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(5), idle.swap_remove(500))
            .await
            .expect("the parked task woke")
            .unwrap()
            .unwrap();
        assert_eq!(woken, 4);
    }));
}

/// 200 UDP round trips, each waiting on the other stack's driver with no timer due: only the pair's
/// wake-up (not the 100 ms backstop) can make them quick.
#[test]
fn round_trips_are_woken_by_the_link_not_a_tick() {
    let local = LocalSet::new();
    runtime().block_on(local.run_until(async {
        let (a, b) = two_nets(&local, Impairments::default());
        let server = UdpSocket::bind(&b, "10.0.0.2:7".parse().unwrap()).unwrap();
        let client = UdpSocket::bind(&a, "10.0.0.1:7".parse().unwrap()).unwrap();
        let echo = tokio::task::spawn_local(async move {
            let mut buf = [0u8; 64];
            for _ in 0..200 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let started = std::time::Instant::now();
        let mut buf = [0u8; 64];
        for i in 0..200u32 {
            client
                .send_to(&i.to_be_bytes(), "10.0.0.2:7".parse().unwrap())
                .await
                .unwrap();
            let (n, _) = client.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &i.to_be_bytes());
        }
        let took = started.elapsed();
        echo.await.unwrap();
        // 200 naps of the 100 ms backstop would take 20 s.
        assert!(
            took < Duration::from_secs(2),
            "200 round trips took {took:?}"
        );
    }));
}
