//! What every program that runs a stack per TUN queue (`serve`, `tunnel`, `bench tun`, `bench tcp`)
//! does the same way: each queue's stack takes its share of the ephemeral ports, so that the steering
//! program brings its connections' replies back to it (`fastpath::link::tun::steer`), and shares free
//! buffers with its own link only. The tunnel's library has it; the other programs use it from there.

pub use fastpath_tunnel::stack_for_queue;
