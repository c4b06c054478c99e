//! `Impaired`: any link with a lossy wire spliced in, both ways, for testing TCP against a real peer
//! (the kernel over TUN) where `tc netem` is not available.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::pair::complete_checksum;
use super::{Impairments, Link, LinkCapabilities, Medium};
use crate::buf::{ChecksumOffload, PacketBuf};
use crate::rng::Rng;

/// What an [`Impaired`] link did, per direction (`[received, transmitted]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairedStats {
    /// Packets dropped.
    pub lost: [u64; 2],
    /// Extra copies delivered.
    pub duplicated: [u64; 2],
    /// Packets held back behind the next one.
    pub reordered: [u64; 2],
    /// Packets with one bit flipped.
    pub corrupted: [u64; 2],
}

/// Wraps a link; applies `impair` to every packet it receives and transmits. Corruption happens
/// after any offloaded checksum has been completed, as it would on a wire, so the receiver's check
/// still catches it.
pub struct Impaired<L: Link> {
    inner: L,
    impair: Impairments,
    rng: Rng,
    stats: ImpairedStats,
    /// Received packets waiting to be handed over (a held-back packet goes after the next one), with
    /// the time each may go.
    rx: VecDeque<(Instant, PacketBuf)>,
    /// Added to every received packet's trip (wall-clock time: the link is real).
    delay: Duration,
    held_rx: Option<PacketBuf>,
    scratch: Vec<PacketBuf>,
}

impl<L: Link> Impaired<L> {
    /// `inner` with `impair` on both directions.
    pub fn new(inner: L, impair: Impairments) -> Impaired<L> {
        Impaired {
            inner,
            rng: Rng::new(impair.seed),
            impair,
            stats: ImpairedStats::default(),
            rx: VecDeque::new(),
            delay: Duration::ZERO,
            held_rx: None,
            scratch: Vec::new(),
        }
    }

    /// Also delays every received packet by `delay` (a longer path; packets keep their order unless
    /// reordered).
    pub fn with_delay(mut self, delay: Duration) -> Impaired<L> {
        self.delay = delay;
        self
    }

    /// What the impairments did so far.
    pub fn stats(&self) -> ImpairedStats {
        self.stats
    }

    /// Applies loss, corruption and duplication to one packet (direction `dir`), appending what
    /// survives to `out`; reordering is the caller's.
    fn mangle(&mut self, mut p: PacketBuf, dir: usize, out: &mut Vec<PacketBuf>) {
        let im = self.impair;
        if self.rng.chance(im.loss) {
            self.stats.lost[dir] += 1;
            return;
        }
        if im.corrupt > 0.0 && self.rng.chance(im.corrupt) && !p.is_empty() {
            if let ChecksumOffload::Partial { start, offset } = p.meta.checksum() {
                complete_checksum(&mut p, start as usize, offset as usize);
            }
            // A corrupted packet is no longer one a link vouched for.
            p.meta.set_checksum(ChecksumOffload::None);
            let bit = self.rng.below(p.len() as u64 * 8) as usize;
            p.data_mut()[bit / 8] ^= 1 << (bit % 8);
            self.stats.corrupted[dir] += 1;
        }
        if self.rng.chance(im.duplicate) {
            self.stats.duplicated[dir] += 1;
            out.push(p.duplicate());
        }
        out.push(p);
    }
}

impl<L: Link> Link for Impaired<L> {
    fn capabilities(&self) -> LinkCapabilities {
        self.inner.capabilities()
    }

    fn medium(&self) -> Medium {
        self.inner.medium()
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut out = std::mem::take(&mut self.scratch);
        for p in batch.drain(..) {
            self.mangle(p, 1, &mut out);
            let n = out.len();
            if n >= 2 && self.rng.chance(self.impair.reorder) {
                out.swap(n - 1, n - 2);
                self.stats.reordered[1] += 1;
            }
        }
        let dropped = self.inner.transmit(&mut out);
        out.clear();
        self.scratch = out;
        dropped
    }

    fn set_rx_waker(&mut self, waker: Option<std::task::Waker>) {
        // Woken on the inner link's arrivals; a delayed packet is due later, at no one's wake-up.
        self.inner.set_rx_waker(waker);
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let mut got = std::mem::take(&mut self.scratch);
        self.inner.receive(&mut got, max);
        let mut mangled = Vec::with_capacity(got.len());
        for p in got.drain(..) {
            self.mangle(p, 0, &mut mangled);
        }
        self.scratch = got;
        let due = Instant::now() + self.delay;
        for p in mangled {
            if self.held_rx.is_none() && self.rng.chance(self.impair.reorder) {
                self.held_rx = Some(p);
                self.stats.reordered[0] += 1;
                continue;
            }
            self.rx.push_back((due, p));
            if let Some(h) = self.held_rx.take() {
                self.rx.push_back((due, h));
            }
        }
        // A held packet does not wait for ever: it goes at the next quiet receive.
        if self.rx.is_empty() {
            if let Some(h) = self.held_rx.take() {
                self.rx.push_back((due, h));
            }
        }
        let now = Instant::now();
        let mut n = 0;
        while n < max && self.rx.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = self.rx.pop_front().expect("a front packet");
            batch.push(p);
            n += 1;
        }
        n
    }
}
