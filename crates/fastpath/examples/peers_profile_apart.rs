//! `peers_profile` with `send_to`, `poll` and `recv_from` called through function pointers the
//! compiler cannot see through, so that they stay out of line as in a larger program (the `fastpath`
//! CLI's bench, an application); alone in `peers_profile` the compiler inlines the whole stack into
//! `main`. Usage: `peers_profile_apart [datagrams] [burst] [size] [4|6]` (defaults 100000, 1, 64, 4);
//! with callgrind, as for `peers_profile` (the difference of two counts).

mod peers_loop;

use std::hint::black_box;
use std::io;
use std::net::SocketAddr;

use fastpath::{Instant, Stack, UdpSocket};

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
    type SendTo = fn(&mut Stack, UdpSocket, &[u8], SocketAddr) -> io::Result<usize>;
    type Poll = fn(&mut Stack);
    type RecvFrom = fn(&mut Stack, UdpSocket, &mut [u8]) -> io::Result<(usize, SocketAddr)>;
    let (send_to, poll, recv_from): (SendTo, Poll, RecvFrom) =
        black_box((send_to, poll, recv_from));
    peers_loop::run(send_to, poll, recv_from);
}
