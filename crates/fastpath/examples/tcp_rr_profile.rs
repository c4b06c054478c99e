//! TCP request/response between two stacks over the in-memory pair, alone, for counting instructions
//! per transaction: the client writes `size` bytes, both stacks poll (the client's first), the server
//! reads them and writes them back, both poll (the server's first), the client reads the echo.
//! Usage: `tcp_rr_profile [transactions] [size] [connections] [4|6]` (defaults 100000, 64, 1, 4);
//! with several connections the transactions go to each in turn, one at a time, as `bench tcp`'s
//! 100 connections share one stack; 6 runs them over IPv6 (fd00::1 to fd00::2). With callgrind, run it twice with different counts and divide the
//! difference of the totals by the difference of counts, as for `peers_profile`. The clock advances
//! by a microsecond a step, so that no timer fires and the count is the same on every run.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use fastpath::{Instant, Stack};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(100_000);
    let size = args.next().unwrap_or(64);
    let connections = args.next().unwrap_or(1).max(1);
    let v6 = args.next() == Some(6);
    let (mut a, mut b, server_addr) = common::two_stacks(1500, v6);
    let server_addr = SocketAddr::new(server_addr, 7);
    // The sender's poll hands what it wrote to the link, then the receiver's takes it in.
    let mut now = Instant::ZERO;
    let mut tick = |from: &mut Stack, to: &mut Stack| {
        now = now + Duration::from_micros(1);
        from.poll(now);
        to.poll(now);
    };
    let listener = b.tcp_listen(server_addr, 4).expect("listen");
    let mut pairs = Vec::with_capacity(connections);
    for _ in 0..connections {
        let client = a.tcp_connect(server_addr).expect("connect");
        let server = loop {
            tick(&mut a, &mut b);
            if let Ok((s, _)) = b.tcp_listener(listener).accept() {
                break s;
            }
        };
        pairs.push((client, server));
    }
    let request = vec![0x5au8; size];
    let mut buf = vec![0u8; size.max(1)];
    for i in 0..n {
        let (client, server) = pairs[i % connections];
        a.tcp(client).write(&request).expect("request written");
        tick(&mut a, &mut b);
        let got = b.tcp(server).read(&mut buf).expect("request read");
        b.tcp(server).write(&buf[..got]).expect("echo written");
        tick(&mut b, &mut a);
        let back = a.tcp(client).read(&mut buf).expect("echo read");
        assert_eq!(back, size, "the whole echo in one read");
    }
}
