//! The loop `peers_profile` and `peers_profile_apart` share: arguments `[datagrams] [burst] [size]
//! [4|6]` (defaults 100000, 1, 64, 4), then `datagrams` datagrams of `size` bytes sent from
//! 127.0.0.1:5001 (or `[::1]:5001`) to port 5000 of the same address in bursts of `burst`, a poll
//! after each burst, and everything queued received after each poll.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use fastpath::{Stack, StackConfig, UdpSocket};

/// Runs the loop through the three calls given. Always inlined, so that calls the compiler can see
/// through are inlined into the caller's `main` with it.
#[inline(always)]
pub fn run(
    send_to: impl Fn(&mut Stack, UdpSocket, &[u8], SocketAddr) -> io::Result<usize>,
    poll: impl Fn(&mut Stack),
    recv_from: impl Fn(&mut Stack, UdpSocket, &mut [u8]) -> io::Result<(usize, SocketAddr)>,
) {
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
            send_to(&mut stack, sender, &data, to).expect("send_to");
        }
        sent += k;
        poll(&mut stack);
        while let Ok((len, _)) = recv_from(&mut stack, receiver, &mut sink) {
            assert_eq!(len, size);
            received += 1;
        }
    }
    assert_eq!(received, n);
    assert_eq!(stack.counters().drops.total(), 0);
}
