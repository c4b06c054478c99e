//! The fastpath side of `fastpath bench peers`, alone, for counting instructions per datagram:
//! `send_to`, `poll`, `recv_from` of `size`-byte datagrams on one stack's loopback with the sender and
//! receiver bound to 127.0.0.1 (or `::1` with a fourth argument of 6), in bursts of `burst`. Usage:
//! `peers_profile [datagrams] [burst] [size] [4|6]` (defaults 100000, 1, 64, 4). With callgrind, run it twice
//! with different datagram counts and divide the difference of the totals by the difference of counts:
//! `valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out target/release/examples/peers_profile`.
//!
//! Alone here, with one call site each, `send_to`, `poll` and `recv_from` are inlined into `main`
//! and the destination and size folded in. A program with a second call site calls them out of line:
//! `peers_profile_apart` counts that case.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use fastpath::{Instant, Stack, StackConfig};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(100_000);
    let burst = args.next().unwrap_or(1).max(1);
    let size = args.next().unwrap_or(64);
    let lo: IpAddr = match args.next().unwrap_or(4) {
        6 => Ipv6Addr::LOCALHOST.into(),
        _ => Ipv4Addr::LOCALHOST.into(),
    };
    let mut stack = Stack::new(StackConfig::default());
    let to = SocketAddr::new(lo, 5000);
    let receiver = stack.udp_bind(to).expect("bind the receiver");
    let sender = stack
        .udp_bind(SocketAddr::new(lo, 5001))
        .expect("bind the sender");
    let data = vec![0xa5u8; size];
    let mut sink = vec![0u8; 2048];
    let mut received = 0;
    let mut sent = 0;
    while sent < n {
        let k = burst.min(n - sent);
        for _ in 0..k {
            stack.udp(sender).send_to(&data, to).expect("send_to");
        }
        sent += k;
        stack.poll(Instant::ZERO);
        while let Ok((len, _)) = stack.udp(receiver).recv_from(&mut sink) {
            assert_eq!(len, size);
            received += 1;
        }
    }
    assert_eq!(received, n);
    assert_eq!(stack.counters().drops.total(), 0);
}
