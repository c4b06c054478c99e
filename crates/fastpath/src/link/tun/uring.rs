//! The TUN link's writes through io_uring ([`TunConfig::io_uring`](super::TunConfig)).
//!
//! A TUN descriptor has no `sendmmsg`: without io_uring every packet sent costs a `write`, a system
//! call each (175 ns of entry and exit alone on the project's VM). Here the link queues a write per
//! packet in a ring and hands the whole batch over with one `io_uring_enter`. TUN takes a write at once,
//! so the completions are there when the call returns, and the buffers go back to the pool then.
//!
//! Only writes. Reads through the ring were tried and lost: a packet arrival wakes every read waiting in
//! the ring, one takes the packet and the others go back to waiting, so a request/response server over
//! io_uring reads served 0.7x-0.8x the transactions of one doing `read`s, and 1.09x-1.31x with
//! writes alone (`fastpath bench tcp`, the README has the figures). A multishot read into a ring of
//! provided buffers (Linux 6.7) has no herd, but it halved UDP discard (`bench tun`): each packet has
//! the sending thread queue work for the reader's and kick it. Outside the stack
//! (`examples/tun_io_trial.rs reads`), with the completion work deferred to the reader
//! (`IORING_SETUP_DEFER_TASKRUN`) or queued without a kick (`IORING_SETUP_COOP_TASKRUN`), the same
//! read is level with a `read` per packet (0.93x-1.05x): there was no system call's worth to win.
//!
//! A kernel thread polling the submission queue (`IORING_SETUP_SQPOLL`) takes the writes, and the
//! work the kernel does on them, off the stack's thread. Tried with a 100 ms idle time
//! (`bench tcp --rounds 3`, 2026-11-26): one connection's request/response rose to 1.43x plain
//! writes, but with 100 connections it fell to 0.69x, and chargen to 0.86x: on two cores the polling
//! thread takes the CPU the kernel client needs. Not kept.
//!
//! A batch of fewer than [`MIN_BATCH`] packets goes by `writev` instead: an `io_uring_enter` costs
//! about 1.6x a `write` for one packet, and pays from 4 up.
//!
//! A buffer lent to the kernel lives in [`Uring`]'s slots until its completion comes back. A write that
//! cannot complete at once (none can on TUN, but the descriptor could be anything) stays in its slot;
//! dropping the ring cancels what is still in flight and reaps every completion before the buffers go,
//! or leaks them if the kernel cannot say it is done with them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

use crate::buf::PacketBuf;

/// Writes in flight at most. The completion queue (twice the submission queue) always has room for
/// all of them.
const SLOTS: usize = 128;

/// The fewest packets a transmit hands to the ring; fewer go by `writev`. An `io_uring_enter` costs
/// about as much as 880 ns of `write`s (`examples/tun_io_trial.rs writes`, AMD EPYC, Linux 6.18: a
/// `write` 1,037 ns a packet, one write per enter 1,644, 32 per enter 788), made back from 4 packets
/// up.
pub(super) const MIN_BATCH: usize = 4;

/// A cancellation's `user_data` (a write's is its slot).
const CANCEL: u64 = 1 << 32;

/// The ring, and the buffers it has lent to the kernel.
pub(super) struct Uring {
    ring: IoUring,
    fd: types::Fd,
    /// By slot: the buffer a write sends from, while the kernel has it.
    slots: Vec<Option<PacketBuf>>,
    free: Vec<u32>,
    /// Operations pushed but not yet submitted.
    queued: usize,
    /// Cancellations (made only when the ring goes) pushed whose completions have not been reaped.
    /// The writes the kernel still owes a completion are the buffers in `slots` ([`Self::held`]).
    cancels: usize,
    /// Writes queued since the ring was made.
    written: u64,
}

impl Uring {
    /// A ring for writes to `fd`, which must outlive it. Fails where the kernel makes no ring, or
    /// makes one without `IORING_OP_WRITE` (Linux 5.1 to 5.5: every write would fail); the probe for
    /// it came in the same release (5.6).
    pub(super) fn new(fd: BorrowedFd<'_>) -> io::Result<Uring> {
        let ring = IoUring::new(SLOTS as u32)?;
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::Write::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring without IORING_OP_WRITE",
            ));
        }
        Ok(Uring {
            ring,
            fd: types::Fd(fd.as_raw_fd()),
            slots: (0..SLOTS).map(|_| None).collect(),
            free: (0..SLOTS as u32).rev().collect(),
            queued: 0,
            cancels: 0,
            written: 0,
        })
    }

    /// Queues a write of `buf`'s window (the virtio-net header and the packet). Gives it back when no
    /// slot is free.
    pub(super) fn write(&mut self, buf: PacketBuf) -> Result<(), PacketBuf> {
        let Some(&slot) = self.free.last() else {
            return Err(buf);
        };
        let data = buf.data();
        let op = opcode::Write::new(self.fd, data.as_ptr(), data.len() as u32)
            .build()
            .user_data(u64::from(slot));
        // SAFETY: the kernel reads `buf`'s heap storage, which moves into slot `slot` below and stays
        // there, unchanged, until the write's completion is reaped (a `PacketBuf`'s storage does not
        // move when the value does). The submission queue has room for every slot.
        if unsafe { self.ring.submission().push(&op) }.is_err() {
            return Err(buf);
        }
        self.free.pop();
        self.slots[slot as usize] = Some(buf);
        self.queued += 1;
        self.written += 1;
        Ok(())
    }

    /// Hands the kernel what was queued, without waiting: one `io_uring_enter`, none with nothing
    /// queued.
    pub(super) fn submit(&mut self) -> io::Result<()> {
        while self.queued > 0 {
            match self.ring.submit() {
                Ok(0) => break,
                Ok(n) => self.queued -= n.min(self.queued),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes every completion: the writes' buffers go to `sent` with the kernel's result.
    pub(super) fn reap(&mut self, sent: &mut Vec<(PacketBuf, i32)>) {
        for cqe in self.ring.completion() {
            let data = cqe.user_data();
            if data == CANCEL {
                self.cancels -= 1;
                continue;
            }
            let slot = (data & 0xffff_ffff) as u32;
            if let Some(buf) = self.slots.get_mut(slot as usize).and_then(Option::take) {
                self.free.push(slot);
                sent.push((buf, cqe.result()));
            }
        }
    }

    /// Whether writes are queued that the kernel has not been handed yet.
    pub(super) fn pending(&self) -> bool {
        self.queued > 0
    }

    /// Writes queued through the ring since it was made.
    #[cfg(test)]
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Writes the kernel holds (queued, in flight, or completed and not yet reaped).
    pub(super) fn held(&self) -> usize {
        SLOTS - self.free.len()
    }
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring")
            .field("held", &self.held())
            .field("queued", &self.queued)
            .field("cancels", &self.cancels)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Hand over what is queued (so the submission queue has room for the cancellations), cancel
        // what is still in flight, then reap until the kernel holds nothing.
        let _ = self.submit();
        let mut cancel: Vec<u64> = (0..SLOTS)
            .filter(|&s| self.slots[s].is_some())
            .map(|s| s as u64)
            .collect();
        let mut sent = Vec::new();
        loop {
            // Every cancellation the submission queue has room for; the rest after the next round,
            // so no write is waited for uncancelled.
            while let Some(&data) = cancel.last() {
                let op = opcode::AsyncCancel::new(data).build().user_data(CANCEL);
                // SAFETY: a cancellation lends the kernel no memory.
                if unsafe { self.ring.submission().push(&op) }.is_err() {
                    break;
                }
                self.queued += 1;
                self.cancels += 1;
                cancel.pop();
            }
            if self.held() == 0 && self.cancels == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(n) => self.queued -= n.min(self.queued),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Not knowing what the kernel still holds, leak the buffers rather than free them.
                    std::mem::forget(std::mem::take(&mut self.slots));
                    return;
                }
            }
            self.reap(&mut sent);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    use super::super::testing::{fake_kernel, partial_udp};
    use super::super::vnet::{VnetHeader, VIRTIO_NET_HDR_F_NEEDS_CSUM, VNET_HEADER_LEN};
    use super::super::TunLink;
    use super::MIN_BATCH;
    use crate::buf::{ChecksumOffload, PacketBuf};
    use crate::link::Link;

    fn ring_link(offload: bool) -> (TunLink, UnixDatagram) {
        let (mut link, kernel) = fake_kernel(offload);
        link.enable_uring().unwrap();
        (link, kernel)
    }

    fn partial(payload: &[u8]) -> PacketBuf {
        let mut p = partial_udp(payload);
        p.meta.set_checksum(ChecksumOffload::Partial {
            start: 20,
            offset: 6,
        });
        p
    }

    /// The next frame the link wrote: its virtio-net header and packet.
    fn next_frame(kernel: &UnixDatagram) -> (VnetHeader, Vec<u8>) {
        let mut frame = [0u8; 256];
        let n = kernel.recv(&mut frame).unwrap();
        let header = VnetHeader::parse(frame[..VNET_HEADER_LEN].try_into().unwrap());
        (header, frame[VNET_HEADER_LEN..n].to_vec())
    }

    #[test]
    fn a_batch_goes_out_through_the_ring_with_its_headers() {
        let (mut link, kernel) = ring_link(true);
        assert!(link.io_uring_enabled());
        let mut batch: Vec<PacketBuf> = (0..8u8).map(|i| partial(&[i; 20])).collect();
        let sent: Vec<Vec<u8>> = batch.iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(link.transmit(&mut batch), 0);
        assert!(batch.is_empty());
        let s = link.stats();
        assert_eq!((s.tx_packets, s.tx_offloaded), (8, 8), "{s:?}");
        assert_eq!(s.tx_bytes, sent.iter().map(|p| p.len() as u64).sum::<u64>());
        assert_eq!(link.uring.as_ref().unwrap().held(), 0, "every buffer back");
        for packet in sent {
            let (header, got) = next_frame(&kernel);
            assert_eq!(header.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
            assert_eq!((header.csum_start, header.csum_offset), (20, 6));
            assert_eq!(got, packet, "in order, intact");
        }
        // A buffer without room for the header in front goes out gathered, as without the ring.
        let packet = partial_udp(b"bare");
        let mut bare = PacketBuf::with_storage(vec![0; packet.len()], 0);
        bare.extend_from_slice(packet.data());
        assert_eq!(link.transmit(&mut vec![bare]), 0);
        assert_eq!(next_frame(&kernel).1, packet.data());
        assert_eq!(link.stats().tx_packets, 9);
        // Reads and waits are the device's, as without the ring.
        assert!(!link.wait(Some(Duration::from_millis(5))).unwrap());
    }

    #[test]
    fn a_short_batch_goes_by_writev_unless_the_ring_holds_writes_it_would_overtake() {
        let (mut link, kernel) = ring_link(true);
        let written = |link: &TunLink| link.uring.as_ref().unwrap().written();
        let batch = |from: u8, n: usize| -> Vec<PacketBuf> {
            (0..n as u8).map(|i| partial(&[from + i; 20])).collect()
        };
        let mut sent: Vec<Vec<u8>> = Vec::new();
        let mut short = batch(1, MIN_BATCH - 1);
        sent.extend(short.iter().map(|p| p.data().to_vec()));
        assert_eq!(link.transmit(&mut short), 0);
        assert_eq!(written(&link), 0, "a short batch: plain writes");
        let mut full = batch(10, MIN_BATCH);
        sent.extend(full.iter().map(|p| p.data().to_vec()));
        assert_eq!(link.transmit(&mut full), 0);
        assert_eq!(
            written(&link),
            MIN_BATCH as u64,
            "a batch of MIN_BATCH: the ring"
        );
        for p in sent {
            assert_eq!(next_frame(&kernel).1, p, "in order, intact");
        }
        assert_eq!(link.stats().tx_packets, 2 * MIN_BATCH as u64 - 1);
        // Writes waiting in the ring (a full send buffer): a lone packet joins them there.
        nix::sys::socket::setsockopt(&link.shared.fd, nix::sys::socket::sockopt::SndBuf, &4096)
            .unwrap();
        let mut batch: Vec<PacketBuf> = (0..100).map(|_| partial(&[4; 20])).collect();
        assert_eq!(link.transmit(&mut batch), 0, "fewer than the slots");
        assert!(link.uring.as_ref().unwrap().held() > 0, "some writes wait");
        let before = written(&link);
        assert_eq!(link.transmit(&mut vec![partial(&[5; 20])]), 0);
        assert_eq!(
            written(&link),
            before + 1,
            "the lone packet went into the ring"
        );
        let frames: Vec<u8> = (0..101).map(|_| next_frame(&kernel).1[28]).collect();
        assert_eq!(frames.iter().filter(|&&b| b == 5).count(), 1);
        assert_eq!(frames.iter().filter(|&&b| b == 4).count(), 100);
    }

    #[test]
    fn writes_that_wait_keep_their_buffers_until_they_complete_or_the_link_goes() {
        // A send buffer of a few datagrams on the link's end of the fake kernel: the ring keeps the
        // writes that do not fit waiting, in their slots, and refuses those past its slots.
        let (mut link, kernel) = ring_link(true);
        nix::sys::socket::setsockopt(&link.shared.fd, nix::sys::socket::sockopt::SndBuf, &4096)
            .unwrap();
        let n = 200;
        let mut batch: Vec<PacketBuf> = (0..n).map(|i| partial(&[i as u8; 20])).collect();
        let dropped = link.transmit(&mut batch);
        let held = link.uring.as_ref().unwrap().held();
        let done = link.stats().tx_packets as usize;
        assert!(held > 0, "some writes wait for room");
        assert!(dropped > 0, "the ones past the slots are refused");
        assert_eq!(done + held + dropped, n);
        assert_eq!(link.stats().tx_drop_full as usize, dropped);
        // Reading makes room: every waiting write completes, once (in whatever order the kernel
        // retries them).
        let mut got = BTreeSet::new();
        for _ in 0..done + held {
            got.insert(next_frame(&kernel).1[28]);
        }
        assert_eq!(
            got,
            (0..(done + held) as u8).collect(),
            "every packet, once"
        );
        // Their completions are counted at a later transmit.
        let mut none = Vec::new();
        for _ in 0..100 {
            link.transmit(&mut none);
            if link.stats().tx_packets as usize == done + held {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(link.stats().tx_packets as usize, done + held);
        assert_eq!(link.uring.as_ref().unwrap().held(), 0, "every buffer back");

        // Dropped with writes waiting: they are cancelled and reaped before their buffers go.
        let mut batch: Vec<PacketBuf> = (0..n).map(|i| partial(&[i as u8; 20])).collect();
        link.transmit(&mut batch);
        assert!(link.uring.as_ref().unwrap().held() > 0);
        drop(link);
        drop(kernel);
    }
}
