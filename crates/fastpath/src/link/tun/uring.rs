//! The TUN link's reads and writes through io_uring ([`TunConfig::io_uring`](super::TunConfig)).
//!
//! A TUN descriptor has no `recvmmsg`: without io_uring every packet costs a `read` or a `write`, a
//! system call each (175 ns of entry and exit alone on the project's VM). Here the link keeps
//! [`ARMED_READS`] reads waiting in the ring, each with a receive buffer lent to the kernel, and queues a
//! write per packet it sends; one `io_uring_enter` hands the kernel every write of a batch and re-arms
//! the reads. The kernel fills an armed read when a packet comes (it waits on the device itself, as
//! `poll` would, though the descriptor is non-blocking), and the stack picks the packets up as
//! completions, with no system call, at its next receive.
//!
//! Waiting changes with it: a packet no longer leaves the device readable (an armed read takes it), so
//! the stack sleeps on the ring's descriptor, readable when completions wait, instead of the device's.
//! Write completions are reaped as soon as the writes are submitted (TUN takes a write at once), so a
//! sleeping stack is woken by what it received, not by what it sent.
//!
//! Buffers lent to the kernel live in [`Uring`]'s slots until their completion comes back; dropping the
//! ring cancels the reads still waiting and reaps every completion before the buffers go (or leaks
//! them, if the kernel cannot say it is done with them).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use io_uring::{opcode, types, IoUring};

use crate::buf::PacketBuf;

/// Reads kept waiting in the ring.
pub(super) const ARMED_READS: usize = 32;

/// Operations in flight at most: the armed reads and the writes of a batch. The completion queue (twice
/// the submission queue) always has room for all of them.
const SLOTS: usize = 128;

/// Marks a write's `user_data` (the low half is the slot).
const WRITE: u64 = 1 << 32;

/// A cancellation's `user_data`.
const CANCEL: u64 = 1 << 33;

/// The ring, and the buffers it has lent to the kernel.
pub(super) struct Uring {
    ring: IoUring,
    fd: types::Fd,
    /// By slot: the buffer a read fills or a write sends from, while the kernel has it.
    slots: Vec<Option<PacketBuf>>,
    free: Vec<u32>,
    reads: usize,
    /// Operations pushed but not yet submitted.
    queued: usize,
    /// Operations submitted and not yet completed (cancellations included).
    in_flight: usize,
    /// Reads completed and not yet taken: the buffer and the kernel's result.
    done: VecDeque<(PacketBuf, i32)>,
}

impl Uring {
    /// A ring for `fd`, which must outlive it.
    pub(super) fn new(fd: BorrowedFd<'_>) -> io::Result<Uring> {
        Ok(Uring {
            ring: IoUring::new(SLOTS as u32)?,
            fd: types::Fd(fd.as_raw_fd()),
            slots: (0..SLOTS).map(|_| None).collect(),
            free: (0..SLOTS as u32).rev().collect(),
            reads: 0,
            queued: 0,
            in_flight: 0,
            done: VecDeque::new(),
        })
    }

    /// A descriptor of the ring that is readable when completions wait, for `poll` and event loops.
    pub(super) fn wake_fd(&self) -> io::Result<OwnedFd> {
        // SAFETY: the ring's descriptor is open for as long as `self`; it is borrowed only to be
        // duplicated, and the duplicate is an `OwnedFd` of its own.
        let fd = unsafe { BorrowedFd::borrow_raw(self.ring.as_raw_fd()) };
        fd.try_clone_to_owned()
    }

    /// Reads waiting in the ring.
    pub(super) fn reads(&self) -> usize {
        self.reads
    }

    /// Lends `buf` to a read that fills its window. Gives it back when no slot is free.
    pub(super) fn read(&mut self, mut buf: PacketBuf) -> Result<(), PacketBuf> {
        let Some(&slot) = self.free.last() else {
            return Err(buf);
        };
        let window = buf.data_mut();
        let op = opcode::Read::new(self.fd, window.as_mut_ptr(), window.len() as u32)
            .build()
            .user_data(u64::from(slot));
        // SAFETY: the read writes into `buf`'s heap storage, which moves into slot `slot` below and
        // stays there, untouched, until the read's completion is reaped; a `PacketBuf`'s storage does
        // not move when the value does. The submission queue has room for every slot.
        if unsafe { self.ring.submission().push(&op) }.is_err() {
            return Err(buf);
        }
        self.free.pop();
        self.slots[slot as usize] = Some(buf);
        self.reads += 1;
        self.queued += 1;
        Ok(())
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
            .user_data(WRITE | u64::from(slot));
        // SAFETY: as for reads: the kernel reads `buf`'s storage, which stays in its slot, unchanged,
        // until the write's completion is reaped.
        if unsafe { self.ring.submission().push(&op) }.is_err() {
            return Err(buf);
        }
        self.free.pop();
        self.slots[slot as usize] = Some(buf);
        self.queued += 1;
        Ok(())
    }

    /// Hands the kernel what was queued, without waiting: one `io_uring_enter`, none with nothing
    /// queued.
    pub(super) fn submit(&mut self) -> io::Result<()> {
        while self.queued > 0 {
            match self.ring.submit() {
                Ok(n) => {
                    self.queued -= n.min(self.queued);
                    self.in_flight += n;
                    if n == 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes every completion: reads go to the queue [`Self::next_read`] empties, writes to `sent`
    /// with the kernel's result.
    pub(super) fn reap(&mut self, sent: &mut Vec<(PacketBuf, i32)>) {
        for cqe in self.ring.completion() {
            self.in_flight -= 1;
            let data = cqe.user_data();
            if data == CANCEL {
                continue;
            }
            let slot = (data & 0xffff_ffff) as u32;
            let Some(buf) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
                continue;
            };
            self.free.push(slot);
            if data & WRITE != 0 {
                sent.push((buf, cqe.result()));
            } else {
                self.reads -= 1;
                self.done.push_back((buf, cqe.result()));
            }
        }
    }

    /// The oldest completed read: its buffer (the window it was lent) and the kernel's result.
    pub(super) fn next_read(&mut self) -> Option<(PacketBuf, i32)> {
        self.done.pop_front()
    }
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring")
            .field("reads", &self.reads)
            .field("queued", &self.queued)
            .field("in_flight", &self.in_flight)
            .field("done", &self.done.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Cancel the reads still waiting, then reap until the kernel holds nothing.
        let reading: Vec<u64> = (0..SLOTS)
            .filter(|&s| self.slots[s].is_some())
            .map(|s| s as u64)
            .collect();
        for data in reading {
            let op = opcode::AsyncCancel::new(data).build().user_data(CANCEL);
            // SAFETY: a cancellation lends the kernel no memory.
            if unsafe { self.ring.submission().push(&op) }.is_ok() {
                self.queued += 1;
            }
        }
        let mut sent = Vec::new();
        while self.queued > 0 || self.in_flight > 0 {
            let queued = self.queued;
            match self.ring.submit_and_wait(1) {
                Ok(n) => {
                    self.in_flight += n;
                    self.queued = queued - n.min(queued);
                }
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
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::net::UnixDatagram;
    use std::time::{Duration, Instant};

    use super::super::testing::{fake_kernel, framed, needs_csum, partial_udp};
    use super::super::vnet::{VnetHeader, VIRTIO_NET_HDR_F_NEEDS_CSUM, VNET_HEADER_LEN};
    use super::super::TunLink;
    use super::ARMED_READS;
    use crate::buf::{ChecksumOffload, PacketBuf, HEADROOM};
    use crate::link::Link;

    fn ring_link(offload: bool) -> (TunLink, UnixDatagram) {
        let (mut link, kernel) = fake_kernel(offload);
        link.enable_uring().unwrap();
        (link, kernel)
    }

    /// Waits and receives until `n` packets came or 5 seconds passed.
    fn receive_all(link: &mut TunLink, n: usize) -> Vec<PacketBuf> {
        let mut batch = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while batch.len() < n && Instant::now() < deadline {
            link.wait(Some(Duration::from_millis(100))).unwrap();
            link.receive(&mut batch, 64);
        }
        batch
    }

    #[test]
    fn reads_through_the_ring_land_where_the_stack_wants_them_and_bad_frames_are_counted() {
        let (mut link, kernel) = ring_link(true);
        assert!(link.io_uring_enabled());
        let good = partial_udp(b"hello, ring");
        let plain = VnetHeader::default();
        kernel
            .send(&framed(&needs_csum(20, 6), good.data()))
            .unwrap();
        kernel.send(&[1, 2, 3]).unwrap(); // shorter than the virtio header
        kernel.send(&framed(&plain, &[0x45; 3000])).unwrap(); // past the buffer
        let gso = VnetHeader {
            gso_type: 1,
            gso_size: 1000,
            ..plain
        };
        kernel.send(&framed(&gso, good.data())).unwrap(); // not asked for
        kernel.send(&framed(&plain, good.data())).unwrap();
        kernel.send(&framed(&plain, good.data())).unwrap();
        let batch = receive_all(&mut link, 3);
        let states: Vec<_> = batch.iter().map(|p| p.meta.checksum).collect();
        assert_eq!(
            states,
            [
                ChecksumOffload::Partial {
                    start: 20,
                    offset: 6
                },
                ChecksumOffload::None,
                ChecksumOffload::None
            ]
        );
        for p in &batch {
            assert_eq!(p.data(), good.data());
            assert_eq!(p.headroom(), HEADROOM, "where the stack expects it");
        }
        let s = link.stats();
        assert_eq!((s.rx_packets, s.rx_reads), (3, 6), "{s:?}");
        assert_eq!(
            (s.rx_drop_truncated, s.rx_drop_oversize, s.rx_drop_gso),
            (1, 1, 1),
            "{s:?}"
        );
        assert_eq!(
            link.uring.as_ref().unwrap().reads(),
            ARMED_READS,
            "every read re-armed"
        );
    }

    #[test]
    fn writes_go_out_with_their_headers_and_their_completions_wake_nobody() {
        let (mut link, kernel) = ring_link(true);
        let mut batch: Vec<PacketBuf> = (0..8u8).map(|i| partial_udp(&[i; 20])).collect();
        for p in &mut batch {
            p.meta.checksum = ChecksumOffload::Partial {
                start: 20,
                offset: 6,
            };
        }
        let sent: Vec<Vec<u8>> = batch.iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(link.transmit(&mut batch), 0);
        assert!(batch.is_empty());
        assert_eq!(link.stats().tx_packets, 8);
        assert!(
            !link.wait(Some(Duration::from_millis(20))).unwrap(),
            "nothing received: the writes' completions were reaped"
        );
        for packet in sent {
            let mut frame = [0u8; 256];
            let n = kernel.recv(&mut frame).unwrap();
            let header = VnetHeader::parse(frame[..VNET_HEADER_LEN].try_into().unwrap());
            assert_eq!(header.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
            assert_eq!((header.csum_start, header.csum_offset), (20, 6));
            assert_eq!(&frame[VNET_HEADER_LEN..n], &packet[..]);
        }
        // A buffer without room for the header in front goes out gathered, as without the ring.
        let packet = partial_udp(b"bare");
        let mut bare = PacketBuf::with_storage(vec![0; packet.len()], 0);
        bare.extend_from_slice(packet.data());
        let mut bare = vec![bare];
        assert_eq!(link.transmit(&mut bare), 0);
        let mut frame = [0u8; 256];
        let n = kernel.recv(&mut frame).unwrap();
        assert_eq!(&frame[VNET_HEADER_LEN..n], partial_udp(b"bare").data());
        assert_eq!(link.stats().tx_packets, 9);
    }

    #[test]
    fn a_wait_on_the_ring_wakes_when_a_packet_comes() {
        let (mut link, kernel) = ring_link(true);
        let handle = link.handle();
        assert_eq!(handle.as_raw_fd(), link.as_raw_fd());
        assert_ne!(
            link.as_raw_fd(),
            link.shared.fd.as_fd().as_raw_fd(),
            "the ring's descriptor is waited on, not the device's"
        );
        assert!(!handle.wait(Some(Duration::from_millis(1))).unwrap());
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            kernel
                .send(&framed(&VnetHeader::default(), partial_udp(b"ping").data()))
                .unwrap();
            kernel
        });
        let start = Instant::now();
        assert!(handle.wait(Some(Duration::from_secs(5))).unwrap());
        assert!(start.elapsed() < Duration::from_secs(4));
        let _kernel = sender.join().unwrap();
        let mut batch = Vec::new();
        assert_eq!(link.receive(&mut batch, 8), 1);
        assert!(
            !handle.wait(Some(Duration::from_millis(20))).unwrap(),
            "quiet once received"
        );
    }
}
