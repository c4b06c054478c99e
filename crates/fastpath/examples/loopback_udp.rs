//! ns per 64/512/1472-byte datagram, sent with `send_to` and received with `recv_from` on one stack's
//! loopback, for the default configuration and the 4.3BSD `classic` one: a quick look until
//! `fastpath bench udp` exists. The two run interleaved, seven rounds, and the medians are printed with
//! their ratio. Run with `cargo run --release --example loopback_udp`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant as WallClock;

use fastpath::{Instant, Stack, StackConfig};

/// ns per datagram over `n` datagrams, sent 32 at a time between polls.
fn ns_per_datagram(config: StackConfig, len: usize, n: usize) -> f64 {
    let mut stack = Stack::new(config);
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let rx = stack.udp_bind(server).expect("bind");
    let tx = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .expect("bind");
    let data = vec![0x5a; len];
    let mut out = vec![0u8; 2048];
    let started = WallClock::now();
    for _ in 0..n / 32 {
        for _ in 0..32 {
            stack.udp(tx).send_to(&data, server).expect("send");
        }
        stack.poll(Instant::ZERO);
        for _ in 0..32 {
            stack.udp(rx).recv(&mut out).expect("receive");
        }
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    println!(
        "{:>6} {:>14} {:>14} {:>8}",
        "bytes", "default ns", "classic ns", "ratio"
    );
    for len in [64, 512, 1472] {
        let (mut d, mut c) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            d.push(ns_per_datagram(StackConfig::default(), len, 400_000));
            c.push(ns_per_datagram(StackConfig::classic(), len, 100_000));
        }
        let (d, c) = (median(d), median(c));
        println!("{len:>6} {d:>14.1} {c:>14.1} {:>7.2}x", c / d);
    }
}
