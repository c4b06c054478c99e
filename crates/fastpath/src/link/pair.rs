//! An in-memory pair of links joining two stacks, with seeded impairments for tests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use super::{Link, LinkCapabilities, Medium};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::rng::Rng;
use crate::wire::MacAddr;

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
    /// Woken when packets are queued for the receiving end (its [`Link::set_rx_waker`]).
    waker: Option<Waker>,
}

/// One end of an in-memory pair. Packets transmitted on one end are received on the other.
#[derive(Debug)]
pub struct PairEnd {
    tx: Arc<Mutex<Wire>>,
    rx: Arc<Mutex<Wire>>,
    caps: LinkCapabilities,
    limit: usize,
    impair: Impairments,
    medium: Medium,
}

impl PairEnd {
    /// Two joined ends with the same capabilities, each direction queueing at most `limit` packets.
    pub fn pair(caps: LinkCapabilities, limit: usize, impair: Impairments) -> (PairEnd, PairEnd) {
        let wire = |seed| {
            Arc::new(Mutex::new(Wire {
                queue: VecDeque::with_capacity(limit.min(4096)),
                stats: PairStats::default(),
                rng: Rng::new(seed),
                waker: None,
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
            medium: Medium::Ip,
        };
        let b = PairEnd {
            tx: b_to_a,
            rx: a_to_b,
            caps,
            limit,
            impair,
            medium: Medium::Ip,
        };
        (a, b)
    }

    /// Two joined ends that carry Ethernet frames, the stacks at either end having hardware
    /// addresses `macs`: a LAN of two hosts, for the Ethernet layer's tests and benchmarks.
    pub fn ethernet_pair(
        caps: LinkCapabilities,
        limit: usize,
        impair: Impairments,
        macs: [MacAddr; 2],
    ) -> (PairEnd, PairEnd) {
        let (mut a, mut b) = PairEnd::pair(caps, limit, impair);
        a.medium = Medium::Ethernet(macs[0]);
        b.medium = Medium::Ethernet(macs[1]);
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
    if start.saturating_add(offset).saturating_add(2) > data.len() {
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

    fn medium(&self) -> Medium {
        self.medium
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut dropped = 0;
        let mut guard = lock(&self.tx);
        let wire = &mut *guard;
        let im = self.impair;
        let before = wire.queue.len();
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
        // The receiver learns of the packets after the lock is released, so that its waker may do
        // anything.
        let waker = (wire.queue.len() > before)
            .then(|| wire.waker.clone())
            .flatten();
        drop(guard);
        if let Some(waker) = waker {
            waker.wake();
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

    fn set_rx_waker(&mut self, waker: Option<Waker>) {
        lock(&self.rx).waker = waker;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// Counts its wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_receiving_end_is_woken_when_the_other_transmits() {
        let (mut a, mut b) =
            PairEnd::pair(LinkCapabilities::plain(1500), 2, Impairments::default());
        let count = Arc::new(Count(AtomicUsize::new(0)));
        b.set_rx_waker(Some(Waker::from(count.clone())));
        let woken = || count.0.load(Ordering::Relaxed);
        a.transmit(&mut vec![PacketBuf::from_slice(b"one")]);
        assert_eq!(woken(), 1, "a packet queued for b");
        // b transmitting wakes a's waker (none), not b's.
        b.transmit(&mut vec![PacketBuf::from_slice(b"back")]);
        assert_eq!(woken(), 1);
        // A full queue takes nothing: no wake-up for nothing.
        a.transmit(&mut vec![PacketBuf::from_slice(b"two")]);
        assert_eq!(woken(), 2);
        assert_eq!(a.transmit(&mut vec![PacketBuf::from_slice(b"three")]), 1);
        assert_eq!(woken(), 2, "nothing queued, no wake-up");
        b.set_rx_waker(None);
        b.receive(&mut Vec::new(), 8);
        a.transmit(&mut vec![PacketBuf::from_slice(b"four")]);
        assert_eq!(woken(), 2, "the waker taken back");
    }
}
