//! What a poll costs with nothing to do, for counting instructions: `idle_poll N MODE` runs N rounds
//! of `Stack::poll` on a stack with one bound UDP socket (MODE 1), of a `recv_from` on its empty queue
//! (MODE 2), or both (MODE 3). With callgrind, run it with two counts and divide the difference of the
//! totals by the difference of the counts, as for `peers_profile`.

use std::net::{Ipv4Addr, SocketAddr};

use fastpath::{Instant, Stack, StackConfig};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(100_000);
    let mode = args.next().unwrap_or(3);
    let mut stack = Stack::new(StackConfig::default());
    let at = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 5000);
    let receiver = stack.udp_bind(at).expect("bind");
    let mut sink = [0u8; 2048];
    let mut work = 0;
    for _ in 0..n {
        if mode & 1 != 0 {
            work += stack.poll(Instant::ZERO);
        }
        if mode & 2 != 0 && stack.udp(receiver).recv_from(&mut sink).is_ok() {
            work += 1;
        }
    }
    assert_eq!(work, 0, "an idle stack has nothing to do");
}
