//! The loopback link: packets sent come straight back in.

use super::{Link, LinkCapabilities};
use crate::buf::ring::Ring;
use crate::buf::PacketBuf;

/// A loopback link with a bounded queue. Its MTU defaults to 65535, as large as IPv4 allows: nothing is
/// gained by fragmenting packets that never leave the host. Like Linux's `lo`, it offers checksum
/// offload: a packet that never leaves memory needs no transport checksum, so with the default policy
/// (`checksum_policy.use_offload`) none is computed or verified; the `classic` configuration turns the
/// policy off and checksums everything, as 4.3BSD did. It also counts as CRC-protected, so Kay &
/// Pasquale's elimination rule, when switched on, applies to it.
#[derive(Debug)]
pub struct Loopback {
    queue: Ring<PacketBuf>,
    limit: usize,
    caps: LinkCapabilities,
    dropped: u64,
}

impl Loopback {
    /// A loopback link with `mtu` whose queue holds at most `limit` packets.
    pub fn new(mtu: usize, limit: usize) -> Loopback {
        let caps = LinkCapabilities {
            mtu,
            tx_checksum_offload: true,
            crc_protected: true,
            tso: false,
        };
        Loopback {
            queue: Ring::default(),
            limit,
            caps,
            dropped: 0,
        }
    }

    /// Packets dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Queues one packet, the stack's direct path to its own loopback (no batch in between); gives it
    /// back, counted as dropped, when the queue is full.
    #[inline]
    pub(crate) fn push(&mut self, packet: PacketBuf) -> Result<(), PacketBuf> {
        if self.queue.len() < self.limit {
            self.queue.push_back(packet);
            Ok(())
        } else {
            self.dropped += 1;
            Err(packet)
        }
    }

    /// Takes the oldest queued packet.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<PacketBuf> {
        self.queue.pop_front()
    }

    /// True when nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

impl Link for Loopback {
    fn capabilities(&self) -> LinkCapabilities {
        self.caps
    }

    #[inline]
    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut dropped = 0;
        for packet in batch.drain(..) {
            if self.queue.len() < self.limit {
                self.queue.push_back(packet);
            } else {
                dropped += 1;
            }
        }
        self.dropped += dropped as u64;
        dropped
    }

    #[inline]
    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let n = max.min(self.queue.len());
        for _ in 0..n {
            batch.extend(self.queue.pop_front());
        }
        n
    }
}
