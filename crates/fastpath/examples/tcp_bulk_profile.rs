//! A TCP bulk transfer between two stacks over the in-memory pair, alone, for counting instructions
//! per byte: the client writes as much as its send buffer takes, both stacks poll (the client's
//! first), the server reads everything, until `mib` MiB have arrived; buffers return to the sender
//! through a depot, as in `bench tcp`'s pair.
//! Usage: `tcp_bulk_profile [mib] [mtu] [4|6]` (defaults 64, 1500, 4). With callgrind, run it with
//! two sizes and divide the difference of the totals by the difference of bytes, as for
//! `tcp_rr_profile`. The clock advances by a microsecond a step, so that no timer fires and the
//! count is the same on every run.

mod common;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use fastpath::{Instant, Stack};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let mib = args.next().unwrap_or(64);
    let mtu = args.next().unwrap_or(1500);
    let v6 = args.next() == Some(6);
    let (mut a, mut b, server_addr) = common::two_stacks(mtu, v6);
    // Buffers go back to the sender through a depot, as in `bench tcp`'s pair.
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    let server_addr = SocketAddr::new(server_addr, 9);
    let mut now = Instant::ZERO;
    let mut tick = |a: &mut Stack, b: &mut Stack| {
        now = now + Duration::from_micros(1);
        a.poll(now);
        b.poll(now);
    };
    let listener = b.tcp_listen(server_addr, 4).expect("listen");
    let client = a.tcp_connect(server_addr).expect("connect");
    let server = loop {
        tick(&mut a, &mut b);
        if let Ok((s, _)) = b.tcp_listener(listener).accept() {
            break s;
        }
    };
    let total = mib << 20;
    let chunk = vec![0x5au8; 64 << 10];
    let mut buf = vec![0u8; 256 << 10];
    let (mut sent, mut got) = (0, 0);
    while got < total {
        while sent < total {
            let n = (total - sent).min(chunk.len());
            match a.tcp(client).write(&chunk[..n]) {
                Ok(0) => break,
                Ok(k) => sent += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        tick(&mut a, &mut b);
        loop {
            match b.tcp(server).read(&mut buf) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        tick(&mut b, &mut a);
    }
    assert_eq!(got, total);
}
