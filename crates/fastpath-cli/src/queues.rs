//! What every program that runs a stack per TUN queue (`serve`, `tunnel`, `bench tun`, `bench tcp`)
//! does the same way: each queue's stack takes its share of the ephemeral ports, so that the steering
//! program brings its connections' replies back to it (`fastpath::link::tun::steer`), and shares free
//! buffers with its own link only.

use fastpath::buf::BufferDepot;
use fastpath::link::tun::ephemeral_share;
use fastpath::link::TunLink;
use fastpath::{Stack, StackConfig};

/// A stack for queue `queue` of `queues`, built from `config` with its share of `config`'s ephemeral
/// ports, and `link` given a buffer depot shared with it (the caller adds the link as an interface).
pub fn stack_for_queue(
    link: &mut TunLink,
    mut config: StackConfig,
    queue: usize,
    queues: usize,
) -> Result<Stack, String> {
    config.ephemeral_ports =
        ephemeral_share(&config.ephemeral_ports, queue, queues).ok_or_else(|| {
            format!(
                "the ephemeral ports {:?} cannot be shared by {queues} queues",
                config.ephemeral_ports
            )
        })?;
    let mut stack = Stack::new(config);
    let depot = BufferDepot::new();
    link.set_buffer_depot(depot.clone());
    stack.set_buffer_depot(depot);
    Ok(stack)
}
