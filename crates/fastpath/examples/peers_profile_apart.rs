//! `peers_profile` with `send_to`, `poll` and `recv_from` called through function pointers the
//! compiler cannot see through, so that they stay out of line as in a larger program (the `fastpath`
//! CLI's bench, an application); alone in `peers_profile` the compiler inlines the whole stack into
//! `main`. Usage: `peers_profile_apart [datagrams] [burst] [size] [4|6]` (defaults 100000, 1, 64, 4);
//! with callgrind, as for `peers_profile` (the difference of two counts).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use std::hint::black_box;
use std::io;

use fastpath::{Instant, Stack, StackConfig, UdpSocket};

fn send_to(stack: &mut Stack, socket: UdpSocket, data: &[u8], to: SocketAddr) -> io::Result<usize> {
    stack.udp(socket).send_to(data, to)
}

fn poll(stack: &mut Stack) {
    stack.poll(Instant::ZERO);
}

fn recv_from(
    stack: &mut Stack,
    socket: UdpSocket,
    sink: &mut [u8],
) -> io::Result<(usize, SocketAddr)> {
    stack.udp(socket).recv_from(sink)
}

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
    type SendTo = fn(&mut Stack, UdpSocket, &[u8], SocketAddr) -> io::Result<usize>;
    type Poll = fn(&mut Stack);
    type RecvFrom = fn(&mut Stack, UdpSocket, &mut [u8]) -> io::Result<(usize, SocketAddr)>;
    let calls: (SendTo, Poll, RecvFrom) = black_box((send_to, poll, recv_from));
    run(n, burst, size, lo, calls.0, calls.1, calls.2);
}

/// Sends `n` datagrams in bursts of `burst` and receives them, through the three calls given.
fn run(
    n: usize,
    burst: usize,
    size: usize,
    lo: IpAddr,
    send_to: impl Fn(&mut Stack, UdpSocket, &[u8], SocketAddr) -> io::Result<usize>,
    poll: impl Fn(&mut Stack),
    recv_from: impl Fn(&mut Stack, UdpSocket, &mut [u8]) -> io::Result<(usize, SocketAddr)>,
) {
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
