//! The `Send` front (`fastpath_tokio::net`) over an in-memory pair, on the multi-threaded runtime:
//! two stacks, each with its `Net` and driver, and every task started with `tokio::spawn`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Ipv4Cidr, Stack, StackConfig};
use fastpath_tokio::net::{
    Net, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream, UdpIntercept, UdpSocket,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The handles cross threads.
const _: () = {
    const fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Net>();
    send_sync::<TcpListener>();
    send_sync::<TcpStream>();
    send_sync::<OwnedReadHalf>();
    send_sync::<OwnedWriteHalf>();
    send_sync::<UdpSocket>();
};

/// A (10.0.0.1, 2001:db8::1) and B (10.0.0.2, 2001:db8::2), their drivers spawned on the current
/// runtime.
fn two_nets() -> (Net, Net) {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 65536, Impairments::default());
    let make = |end: PairEnd, v4: &str, v6: &str| {
        let mut s = Stack::new(StackConfig::default());
        let i = s.add_interface("pair0", end, v4.parse::<Ipv4Cidr>().unwrap());
        s.add_ipv6_address(i, v6.parse().unwrap()).unwrap();
        Net::new(s)
    };
    (
        make(ea, "10.0.0.1/24", "2001:db8::1/64"),
        make(eb, "10.0.0.2/24", "2001:db8::2/64"),
    )
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 997) as u8).collect()
}

/// An echo server written as for `tokio::net` (accept, spawn, split, copy), and a client that writes
/// and reads from two spawned tasks with the owned halves: a mebibyte back intact over both families.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_of_a_mebibyte_with_spawned_tasks_over_both_families() {
    let (a, b) = two_nets();
    for server in ["10.0.0.2:7", "[2001:db8::2]:7"] {
        let server: SocketAddr = server.parse().unwrap();
        let listener = TcpListener::bind(&b, server).await.unwrap();
        assert_eq!(listener.local_addr().unwrap(), server);
        let echo = tokio::spawn(async move {
            let (mut conn, peer) = listener.accept().await.unwrap();
            assert_eq!(conn.peer_addr().unwrap(), peer);
            let (mut r, mut w) = conn.split();
            let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
            (n, peer)
        });
        let conn = TcpStream::connect(&a, server).await.unwrap();
        assert_eq!(conn.peer_addr().unwrap(), server);
        let local = conn.local_addr().unwrap();
        let (mut r, mut w) = conn.into_split();
        let data = pattern(1 << 20);
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            w.write_all(&sent).await.unwrap();
            w.shutdown().await.unwrap();
            w
        });
        let reader = tokio::spawn(async move {
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            (back, r)
        });
        let (back, r) = tokio::time::timeout(Duration::from_secs(30), reader)
            .await
            .expect("the echo in time")
            .unwrap();
        assert!(back == data, "1 MiB back intact from {server}");
        let w = writer.await.unwrap();
        let (n, peer) = echo.await.unwrap();
        assert_eq!(n, 1 << 20);
        assert_eq!(peer, local);
        let conn = r.reunite(w).expect("the halves of one stream");
        assert_eq!(conn.local_addr().unwrap(), local);
    }
}

/// Halves of two different streams are not reunited; dropping an owned writing half sends FIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_reunite_only_with_their_own_and_a_dropped_writer_ends_the_stream() {
    let (a, b) = two_nets();
    let listener = TcpListener::bind(&b, "10.0.0.2:9").await.unwrap();
    let sink = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..2 {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut all = Vec::new();
            conn.read_to_end(&mut all).await.unwrap();
            got.push(all);
        }
        got
    });
    let one = TcpStream::connect(&a, "10.0.0.2:9").await.unwrap();
    let two = TcpStream::connect(&a, "10.0.0.2:9").await.unwrap();
    let (r1, mut w1) = one.into_split();
    let (r2, w2) = two.into_split();
    let e = r1.reunite(w2).unwrap_err();
    assert!(e.to_string().contains("not from the same stream"));
    let (r1, w2) = (e.0, e.1);
    w1.write_all(b"first").await.unwrap();
    // Dropping the writing halves is their FIN: the sink reads each stream to its end.
    drop((w1, w2));
    let got = tokio::time::timeout(Duration::from_secs(10), sink)
        .await
        .expect("both streams ended")
        .unwrap();
    let mut got = got;
    got.sort();
    assert_eq!(got, vec![b"".to_vec(), b"first".to_vec()]);
    drop((r1, r2));
}

/// UDP over both families between tasks on different workers, and 200 round trips that each wait
/// on the other stack's driver: with no timer due, only the pair's wake-up (not the 100 ms backstop)
/// can make them quick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_round_trips_are_woken_by_the_link() {
    let (a, b) = two_nets();
    for (from, to) in [
        ("10.0.0.1:0", "10.0.0.2:53"),
        ("[2001:db8::1]:0", "[2001:db8::2]:53"),
    ] {
        let server = UdpSocket::bind(&b, to).await.unwrap();
        let client = UdpSocket::bind(&a, from).await.unwrap();
        let echo = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..200 {
                let (n, peer) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], peer).await.unwrap();
            }
        });
        let started = Instant::now();
        let mut buf = [0u8; 64];
        for i in 0..200u32 {
            client.send_to(&i.to_be_bytes(), to).await.unwrap();
            let (n, peer) =
                tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
                    .await
                    .expect("the reply in time")
                    .unwrap();
            assert_eq!(&buf[..n], &i.to_be_bytes());
            assert_eq!(peer, to.parse().unwrap());
        }
        let took = started.elapsed();
        echo.await.unwrap();
        // 200 naps of the 100 ms backstop would take 20 s.
        assert!(
            took < Duration::from_secs(2),
            "200 round trips took {took:?}"
        );
    }
}

/// A connect to a port nothing listens on fails as refused; a name resolves (`localhost`, over the
/// stack's own loopback) and a connected UDP socket sends and receives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connect_names_and_a_connected_udp_socket() {
    let (a, _b) = two_nets();
    let e = TcpStream::connect(&a, "10.0.0.2:9").await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);

    let one = UdpSocket::bind(&a, "127.0.0.1:0").await.unwrap();
    let two = UdpSocket::bind(&a, "127.0.0.1:0").await.unwrap();
    one.connect(two.local_addr().unwrap()).await.unwrap();
    two.connect(one.local_addr().unwrap()).await.unwrap();
    assert_eq!(one.peer_addr().unwrap(), two.local_addr().unwrap());
    one.send(b"over loopback").await.unwrap();
    let mut buf = [0u8; 32];
    let n = two.recv(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"over loopback");

    let listener = TcpListener::bind(&a, ("127.0.0.1", 80)).await.unwrap();
    let accept = tokio::spawn(async move { listener.accept().await.map(|(_, peer)| peer) });
    let conn = TcpStream::connect(&a, "localhost:80").await.unwrap();
    assert_eq!(
        accept.await.unwrap().unwrap(),
        conn.local_addr().unwrap(),
        "connected through a resolved name"
    );
}

/// A client that writes two mebibytes and drops its stream and its `Net` while half of them wait for
/// the server's window (the server reads only after 300 ms): its driver keeps the stack until the
/// connection is done, so the server still reads all of it and the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_whose_handles_are_all_dropped_still_finishes_its_connections() {
    let (a, b) = two_nets();
    let listener = TcpListener::bind(&b, "10.0.0.2:9").await.unwrap();
    let sink = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut all = Vec::new();
        conn.read_to_end(&mut all).await.unwrap();
        all
    });
    let mut conn = TcpStream::connect(&a, "10.0.0.2:9").await.unwrap();
    // A mebibyte fills the server's receive buffer, the other the client's send buffer.
    let data = pattern(2 << 20);
    conn.write_all(&data).await.unwrap();
    drop((conn, a));
    let got = tokio::time::timeout(Duration::from_secs(30), sink)
        .await
        .expect("the stream ended in time")
        .unwrap();
    assert!(got == data, "{} of {} bytes", got.len(), data.len());
}

/// A reaches everything through B, which intercepts on the link: a held connection confirmed and
/// served, one answered as unreachable and its SYN sent again refused; a datagram to another host's address received
/// by B with its destination and answered from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interception_holds_confirms_refuses_and_answers_udp() {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 65536, Impairments::default());
    let mut sa = Stack::new(StackConfig::default());
    let ia = sa.add_interface("pair0", ea, "10.0.0.1/24".parse().unwrap());
    sa.add_route(
        Ipv4Cidr::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
        Some(std::net::Ipv4Addr::new(10, 0, 0, 2)),
        ia,
    )
    .unwrap();
    let mut sb = Stack::new(StackConfig::default());
    let ib = sb.add_interface("pair0", eb, "10.0.0.2/24".parse().unwrap());
    sb.set_intercept(ib, true).unwrap();
    let (a, b) = (Net::new(sa), Net::new(sb));

    let listener = TcpListener::intercept_holding(&b, 16).unwrap();
    let proxy = tokio::spawn(async move {
        let (mut served, _) = listener.accept().await.unwrap();
        assert!(served.is_held(), "nothing answered the SYN yet");
        assert_eq!(
            served.local_addr().unwrap(),
            "198.51.100.7:443".parse().unwrap()
        );
        served.confirm().unwrap();
        let mut request = [0u8; 5];
        served.read_exact(&mut request).await.unwrap();
        served.write_all(&request).await.unwrap();
        served.shutdown().await.unwrap();
        let (unreachable, _) = listener.accept().await.unwrap();
        unreachable
            .unreachable(fastpath::Unreachable::Host)
            .unwrap();
        let (refused, _) = listener.accept().await.unwrap();
        refused.abort();
        served
    });
    let mut conn = TcpStream::connect(&a, "198.51.100.7:443").await.unwrap();
    conn.write_all(b"hello").await.unwrap();
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"hello");
    // fastpath's connect, as Linux's, fails at once on the ICMP host unreachable the proxy
    // answers with; the next one the proxy refuses with a RST.
    let unreachs = || a.with_stack(|s| s.counters().icmp.in_dest_unreachs);
    let before = unreachs();
    let e = TcpStream::connect(&a, "198.51.100.8:443")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::HostUnreachable);
    assert_eq!(unreachs(), before + 1, "the ICMP error");
    let e = TcpStream::connect(&a, "198.51.100.9:443")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    drop(proxy.await.unwrap());

    let intercept = UdpIntercept::new(&b);
    let app = UdpSocket::bind(&a, "10.0.0.1:0").await.unwrap();
    app.send_to(b"query", "203.0.113.5:53").await.unwrap();
    let mut buf = [0u8; 64];
    let (n, from, dst) = tokio::time::timeout(Duration::from_secs(5), intercept.recv(&mut buf))
        .await
        .expect("the datagram intercepted")
        .unwrap();
    assert_eq!(&buf[..n], b"query");
    assert_eq!(from, app.local_addr().unwrap());
    assert_eq!(dst, "203.0.113.5:53".parse().unwrap());
    intercept.send_from(b"answer", dst, from).unwrap();
    let (n, peer) = tokio::time::timeout(Duration::from_secs(5), app.recv_from(&mut buf))
        .await
        .expect("the answer")
        .unwrap();
    assert_eq!(&buf[..n], b"answer");
    assert_eq!(peer, dst, "answered from the destination asked for");
}
