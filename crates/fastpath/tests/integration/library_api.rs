//! fastpath as a library: `std::io::Read`/`Write` on TCP and connected UDP sockets driven by generic
//! code, addresses given as anything `ToSocketAddrs` takes, the types a user needs at the crate root,
//! and the drop counters' `Debug`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use crate::common::{payload, A, B};
// Everything from the crate root: what the README's examples and a first program need.
use fastpath::{
    DropReason, Impairments, Instant, Ipv4Cidr, LinkCapabilities, PairEnd, Stack, StackConfig,
    TcpState, TcpStream,
};

/// Two stacks on an in-memory pair, A (10.0.0.1) and B (10.0.0.2), built from root re-exports only.
fn pair() -> (Stack, Stack) {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 4096, Impairments::default());
    let mut a = Stack::new(StackConfig::default());
    a.add_interface("pair0", ea, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(StackConfig::default());
    b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
    (a, b)
}

/// Moves the clock on by a millisecond and polls both stacks until they are quiet.
fn step(a: &mut Stack, b: &mut Stack, now: &mut Instant) {
    *now = *now + Duration::from_millis(1);
    for _ in 0..1000 {
        if a.poll(*now) + b.poll(*now) == 0 {
            return;
        }
    }
    panic!("the stacks did not settle");
}

/// A connection from A to B's `port`, established. Addresses given as a string and as a tuple.
fn connect(a: &mut Stack, b: &mut Stack, now: &mut Instant, port: u16) -> (TcpStream, TcpStream) {
    let listener = b.tcp_listen(format!("10.0.0.2:{port}"), 8).unwrap();
    let client = a.tcp_connect(("10.0.0.2", port)).unwrap();
    for _ in 0..100 {
        step(a, b, now);
        if let Ok((server, peer)) = b.tcp_listener(listener).accept() {
            assert_eq!(peer.ip(), A);
            assert_eq!(a.tcp(client).state().unwrap(), TcpState::Established);
            return (client, server);
        }
    }
    panic!("no connection");
}

/// Generic writer code: writes what fits of `data`, returns how much, stops at `WouldBlock`.
fn write_some<W: Write>(w: &mut W, data: &[u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < data.len() {
        match w.write(&data[done..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    w.flush()?;
    Ok(done)
}

#[test]
fn generic_io_code_moves_a_stream_both_ways() {
    let (mut a, mut b) = pair();
    let mut now = Instant::ZERO;
    let (client, server) = connect(&mut a, &mut b, &mut now, 80);

    // A to B: 3 MiB through a 1 MiB send buffer, so writes meet WouldBlock and must wait for polls; B
    // reads with io::copy into a Vec, which stops at WouldBlock with what it copied kept, and returns
    // Ok at the end of the stream.
    let data = payload(3 << 20, 1);
    let (mut sent, mut would_block, mut copy_calls) = (0, 0, 0);
    let mut got = Vec::new();
    for _ in 0..100_000 {
        if sent < data.len() {
            let n = write_some(&mut a.tcp(client), &data[sent..]).unwrap();
            would_block += (n < data.len() - sent) as usize;
            sent += n;
            if sent == data.len() {
                a.tcp(client).shutdown_write().unwrap();
            }
        }
        step(&mut a, &mut b, &mut now);
        copy_calls += 1;
        match io::copy(&mut b.tcp(server), &mut got) {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("io::copy: {e}"),
        }
    }
    assert!(
        got == data,
        "{} bytes of {} arrived intact",
        got.len(),
        data.len()
    );
    assert!(would_block > 0, "the send buffer filled at least once");
    assert!(copy_calls > 1, "io::copy returned WouldBlock at least once");

    // B to A: write_all of what fits in the send buffer succeeds at once; A gathers it with
    // read_to_end until the end of the stream. A write! of formatted text goes through the same path.
    let reply = payload(200_000, 2);
    b.tcp(server).write_all(&reply).unwrap();
    write!(b.tcp(server), "{} bytes", reply.len()).unwrap();
    b.tcp(server).shutdown_write().unwrap();
    let mut back = Vec::new();
    let mut ended = false;
    for _ in 0..10_000 {
        step(&mut a, &mut b, &mut now);
        match a.tcp(client).read_to_end(&mut back) {
            Ok(_) => {
                ended = true;
                break;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("read_to_end: {e}"),
        }
    }
    assert!(ended, "read_to_end saw the end of the stream");
    assert_eq!(back.len(), reply.len() + "200000 bytes".len());
    assert!(back[..reply.len()] == reply[..]);
    assert_eq!(&back[reply.len()..], b"200000 bytes");

    // Nothing to read is WouldBlock, not Ok(0): Ok(0) means the end.
    let (c2, s2) = connect(&mut a, &mut b, &mut now, 81);
    let mut buf = [0u8; 16];
    assert_eq!(
        Read::read(&mut b.tcp(s2), &mut buf).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // A write_all larger than the send buffer stops with WouldBlock (what fitted stays queued).
    let big = vec![7u8; 3 << 20];
    assert_eq!(
        a.tcp(c2).write_all(&big).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert!(a.tcp(c2).unacknowledged().unwrap() > 0);
    // A closed handle is an error through the traits too.
    a.tcp(c2).abort();
    assert_eq!(
        Write::write(&mut a.tcp(c2), b"x").unwrap_err().kind(),
        ErrorKind::NotConnected
    );
}

#[test]
fn connected_udp_sockets_read_and_write_a_datagram_per_call() {
    let (mut a, mut b) = pair();
    let mut now = Instant::ZERO;
    let sa = a.udp_bind((Ipv4Addr::UNSPECIFIED, 4000)).unwrap();
    let sb = b.udp_bind("10.0.0.2:5000").unwrap();
    a.udp(sa).connect("10.0.0.2:5000").unwrap();
    b.udp(sb)
        .connect(SocketAddr::V4(SocketAddrV4::new(A, 4000)))
        .unwrap();

    a.udp(sa).write_all(b"one").unwrap();
    write!(a.udp(sa), "two").unwrap();
    let n = a
        .udp(sa)
        .write_vectored(&[io::IoSlice::new(b"th"), io::IoSlice::new(b"ree")])
        .unwrap();
    assert_eq!(n, 5);
    a.udp(sa).flush().unwrap();
    step(&mut a, &mut b, &mut now);

    let mut buf = [0u8; 64];
    let n = b.udp(sb).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"one", "one datagram per read");
    // read_to_end takes every datagram waiting, then stops at WouldBlock with them appended.
    let mut rest = Vec::new();
    let e = b.udp(sb).read_to_end(&mut rest).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    assert_eq!(rest, b"twothree");

    // The other way, through io::copy from a reader.
    io::copy(&mut &b"reply"[..], &mut b.udp(sb)).unwrap();
    step(&mut a, &mut b, &mut now);
    assert_eq!(a.udp(sa).read(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"reply");

    // An unconnected socket has nowhere to write.
    let loose = a.udp_bind("10.0.0.1:0").unwrap();
    assert_eq!(
        a.udp(loose).write(b"x").unwrap_err().kind(),
        ErrorKind::NotConnected
    );
}

#[test]
fn addresses_are_anything_to_socket_addrs_in_the_sockets_family() {
    let (mut a, mut b) = pair();
    let mut now = Instant::ZERO;
    let server = b.udp_bind(SocketAddrV4::new(B, 7)).unwrap();
    let client = a.udp_bind("10.0.0.1:0").unwrap();
    let port = a.udp(client).local_addr().unwrap().port();
    assert_ne!(port, 0, "port 0 from a string is still ephemeral");

    // Every form of the destination reaches the same socket.
    let v4 = SocketAddrV4::new(B, 7);
    a.udp(client).send_to(b"1", v4).unwrap();
    a.udp(client).send_to(b"2", SocketAddr::V4(v4)).unwrap();
    a.udp(client).send_to(b"3", "10.0.0.2:7").unwrap();
    a.udp(client).send_to(b"4", (B, 7)).unwrap();
    a.udp(client).send_to(b"5", ("10.0.0.2", 7)).unwrap();
    a.udp(client)
        .send_to(
            b"6",
            &[
                SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 7, 0, 0)),
                SocketAddr::V4(v4),
            ][..],
        )
        .unwrap();
    a.udp(client)
        .send_to_vectored(&[io::IoSlice::new(b"7")], "10.0.0.2:7")
        .unwrap();
    a.udp(client)
        .send_to_with(1, "10.0.0.2:7", |room| room[0] = b'8')
        .unwrap();
    step(&mut a, &mut b, &mut now);
    let mut got = Vec::new();
    let mut buf = [0u8; 8];
    while let Ok((n, from)) = b.udp(server).recv_from(&mut buf) {
        assert_eq!(from, SocketAddrV4::new(A, port).into());
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"12345678");

    // IPv6 only, to an IPv4 socket or connection: refused, saying why, and nothing is sent.
    let sent = a.counters().udp.out_datagrams;
    let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 7, 0, 0));
    for e in [
        a.udp(client).send_to(b"x", v6).unwrap_err(),
        a.udp(client).send_to(b"x", "[::1]:7").unwrap_err(),
        a.udp(client).connect(v6).unwrap_err(),
        a.tcp_connect_from("10.0.0.1:0", v6).unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::AddrNotAvailable, "{e}");
        assert!(e.to_string().contains("IPv6"), "{e}");
    }
    assert_eq!(a.counters().udp.out_datagrams, sent);
    // A bind to an IPv6 address makes an IPv6 socket, a listen an IPv6 listener.
    let six = a.udp_bind("[::]:0").unwrap();
    assert!(a.udp(six).local_addr().unwrap().is_ipv6());
    let l6 = a.tcp_listen("[::]:80", 1).unwrap();
    assert_eq!(
        a.tcp_listener(l6).local_addr().unwrap(),
        "[::]:80".parse().unwrap()
    );
    // Not an address at all.
    assert_eq!(
        a.udp_bind("10.0.0.1").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );

    // TCP from a given local address, given as a tuple, to a string.
    let listener = b.tcp_listen(("0.0.0.0", 443), 4).unwrap();
    let c = a.tcp_connect_from((A, 40443), "10.0.0.2:443").unwrap();
    for _ in 0..50 {
        step(&mut a, &mut b, &mut now);
    }
    let (_, peer) = b.tcp_listener(listener).accept().unwrap();
    assert_eq!(peer, SocketAddrV4::new(A, 40443).into());
    assert!(a.tcp(c).is_established());
}

#[test]
fn drops_debug_shows_the_reasons_counted_by_label() {
    let (mut a, mut b) = pair();
    assert_eq!(format!("{:?}", b.counters().drops), "Drops {}");
    let client = a.udp_bind("10.0.0.1:0").unwrap();
    for _ in 0..3 {
        a.udp(client).send_to(b"nobody", "10.0.0.2:9").unwrap();
    }
    let mut now = Instant::ZERO;
    step(&mut a, &mut b, &mut now);
    let drops = b.counters().drops;
    assert_eq!(drops.get(DropReason::UdpNoSocket), 3);
    assert_eq!(drops.total(), 3, "{drops:?}");
    assert_eq!(format!("{drops:?}"), r#"Drops {"udp: no socket": 3}"#);
    assert!(format!("{drops:#?}").contains("\"udp: no socket\": 3,"));
}
