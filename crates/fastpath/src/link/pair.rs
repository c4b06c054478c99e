//! An in-memory pair of links joining two stacks, with seeded impairments for tests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Link, LinkCapabilities};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::rng::Rng;

/// What the wire does to packets, each a probability per packet, from a seed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairments {
    /// Drop the packet.
    pub loss: f64,
    /// Deliver it twice.
    pub duplicate: f64,
    /// Deliver it ahead of the packet queued before it.
    pub reorder: f64,
    /// Flip one random bit of it.
    pub corrupt: f64,
    /// Seed of the generator.
    pub seed: u64,
}

/// Counters of one direction of a pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    /// Packets handed to the wire.
    pub sent: u64,
    /// Packets taken off the wire by the receiver.
    pub delivered: u64,
    /// Dropped because the queue was full.
    pub queue_full: u64,
    /// Dropped by the loss impairment.
    pub lost: u64,
    /// Extra copies made by the duplication impairment.
    pub duplicated: u64,
    /// Packets moved ahead by the reordering impairment.
    pub reordered: u64,
    /// Packets with a bit flipped.
    pub corrupted: u64,
    /// Checksums the "hardware" completed in software because the wire corrupts packets.
    pub checksums_completed: u64,
}

#[derive(Debug)]
struct Wire {
    queue: VecDeque<PacketBuf>,
    stats: PairStats,
    rng: Rng,
}

/// One end of an in-memory pair. Packets transmitted on one end are received on the other.
#[derive(Debug)]
pub struct PairEnd {
    tx: Arc<Mutex<Wire>>,
    rx: Arc<Mutex<Wire>>,
    caps: LinkCapabilities,
    limit: usize,
    impair: Impairments,
}

impl PairEnd {
    /// Two joined ends with the same capabilities, each direction queueing at most `limit` packets.
    pub fn pair(caps: LinkCapabilities, limit: usize, impair: Impairments) -> (PairEnd, PairEnd) {
        let wire = |seed| {
            Arc::new(Mutex::new(Wire {
                queue: VecDeque::with_capacity(limit.min(4096)),
                stats: PairStats::default(),
                rng: Rng::new(seed),
            }))
        };
        let a_to_b = wire(impair.seed);
        let b_to_a = wire(impair.seed ^ 0x5555_5555);
        let a = PairEnd {
            tx: a_to_b.clone(),
            rx: b_to_a.clone(),
            caps,
            limit,
            impair,
        };
        let b = PairEnd {
            tx: b_to_a,
            rx: a_to_b,
            caps,
            limit,
            impair,
        };
        (a, b)
    }

    /// Counters of the direction this end transmits on.
    pub fn tx_stats(&self) -> PairStats {
        lock(&self.tx).stats
    }

    /// Packets waiting on the wire towards this end.
    pub fn pending(&self) -> usize {
        lock(&self.rx).queue.len()
    }
}

/// Completes a checksum left partial for offload: the field holds the pseudo-header sum, so summing from
/// `start` to the end and complementing gives the field's value. A zero result is sent as `0xffff` (its
/// ones'-complement equal), because zero means "no checksum" to UDP.
pub(crate) fn complete_checksum(packet: &mut PacketBuf, start: usize, offset: usize) {
    let data = packet.data_mut();
    if start + offset + 2 > data.len() {
        return;
    }
    let field = !crate::checksum::fast(&data[start..]);
    let field = if field == 0 { 0xffff } else { field };
    data[start + offset..start + offset + 2].copy_from_slice(&field.to_be_bytes());
    packet.meta.set_checksum(ChecksumOffload::None);
}

fn lock(wire: &Mutex<Wire>) -> MutexGuard<'_, Wire> {
    // A panic while holding the lock cannot leave a queue of packets inconsistent.
    wire.lock().unwrap_or_else(|e| e.into_inner())
}

impl Link for PairEnd {
    fn capabilities(&self) -> LinkCapabilities {
        self.caps
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut dropped = 0;
        let mut wire = lock(&self.tx);
        let wire = &mut *wire;
        let im = self.impair;
        for mut packet in batch.drain(..) {
            wire.stats.sent += 1;
            if im.loss > 0.0 && wire.rng.chance(im.loss) {
                wire.stats.lost += 1;
                continue;
            }
            if im.corrupt > 0.0 {
                // Real offload hardware computes the checksum before the wire, so corruption on the
                // wire is still caught by the receiver: do the same.
                if let ChecksumOffload::Partial { start, offset } = packet.meta.checksum() {
                    complete_checksum(&mut packet, start as usize, offset as usize);
                    wire.stats.checksums_completed += 1;
                }
                if wire.rng.chance(im.corrupt) && !packet.is_empty() {
                    let bit = wire.rng.below(packet.len() as u64 * 8) as usize;
                    packet.data_mut()[bit / 8] ^= 1 << (bit % 8);
                    wire.stats.corrupted += 1;
                }
            }
            let copy =
                (im.duplicate > 0.0 && wire.rng.chance(im.duplicate)).then(|| packet.duplicate());
            wire.stats.duplicated += copy.is_some() as u64;
            for p in std::iter::once(packet).chain(copy) {
                if wire.queue.len() >= self.limit {
                    wire.stats.queue_full += 1;
                    dropped += 1;
                    continue;
                }
                wire.queue.push_back(p);
                if im.reorder > 0.0 && wire.queue.len() >= 2 && wire.rng.chance(im.reorder) {
                    let n = wire.queue.len();
                    wire.queue.swap(n - 1, n - 2);
                    wire.stats.reordered += 1;
                }
            }
        }
        dropped
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let mut wire = lock(&self.rx);
        let n = max.min(wire.queue.len());
        for _ in 0..n {
            batch.extend(wire.queue.pop_front());
        }
        wire.stats.delivered += n as u64;
        n
    }
}
