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

mod peers_loop;

use fastpath::Instant;

fn main() {
    peers_loop::run(
        |stack, socket, data, to| stack.udp(socket).send_to(data, to),
        |stack| {
            stack.poll(Instant::ZERO);
        },
        |stack, socket, sink| stack.udp(socket).recv_from(sink),
    );
}
