//! Steering between the queues of one AF_XDP interface, in the links: replies to a connection a
//! stack opened reach that stack, whichever queue the interface put them on.
//!
//! An interface picks a frame's receive queue by its own hash (a NIC's RSS; on a veth, the queue
//! the kernel's sender transmitted on, which follows a per-socket random hash), and an AF_XDP
//! socket can only take frames of the queue it is bound to. For a connection to a listening port
//! that does not matter: every stack listens, and the one the hash picks serves it. A connection a
//! stack opens itself is another matter: its replies land on whichever queue the hash picks, and
//! the stack there knows nothing of it and answers with a reset.
//!
//! So, as the TUN steering program does in the kernel (`link/tun/steer.rs`), each stack takes its
//! ephemeral ports from its own share of the range ([`ephemeral_share`]), and the links of one
//! interface share an [`Exchange`]: a link that receives a TCP or UDP frame (IPv4, or IPv6 with no
//! extension header; not a fragment) to a port in another queue's share hands it to that queue's
//! inbox instead of its own stack, and wakes that queue's thread through an eventfd. Everything
//! else stays where it arrived. An inbox holds at most [`INBOX_FRAMES`] frames; past that a frame
//! is dropped and counted.
//!
//! [`ephemeral_share`]: crate::link::tun::ephemeral_share

use std::ops::RangeInclusive;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::buf::PacketBuf;

/// Most frames waiting in one queue's inbox.
pub(super) const INBOX_FRAMES: usize = 4096;

/// One queue's inbox: frames other queues' links received for it.
#[derive(Debug)]
struct Inbox {
    frames: Mutex<Vec<PacketBuf>>,
    /// Frames were put in since the owner last looked (the eventfd was, or is being, written).
    pending: AtomicBool,
    wake: EventFd,
}

/// What the links of one interface share to hand each other frames (see the module's notes).
#[derive(Debug)]
pub(super) struct Exchange {
    /// Each queue's share of the ephemeral ports, in queue order.
    shares: Vec<RangeInclusive<u16>>,
    inboxes: Vec<Inbox>,
}

impl Exchange {
    /// An exchange between queues that own `shares` of the ephemeral ports, in queue order.
    pub(super) fn new(shares: Vec<RangeInclusive<u16>>) -> std::io::Result<Exchange> {
        let inboxes = shares
            .iter()
            .map(|_| {
                Ok(Inbox {
                    frames: Mutex::new(Vec::new()),
                    pending: AtomicBool::new(false),
                    wake: EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?,
                })
            })
            .collect::<nix::Result<Vec<Inbox>>>()?;
        Ok(Exchange { shares, inboxes })
    }

    /// The queue whose stack owns `frame`'s destination port, if it is one of the shares.
    pub(super) fn owner(&self, frame: &[u8]) -> Option<usize> {
        let port = destination_port(frame)?;
        self.shares.iter().position(|s| s.contains(&port))
    }

    /// Puts `frame` in queue `to`'s inbox and wakes it; false (the frame dropped) when the inbox
    /// is full.
    pub(super) fn give(&self, to: usize, frame: PacketBuf) -> bool {
        let inbox = &self.inboxes[to];
        {
            let mut frames = inbox.frames.lock().unwrap_or_else(|e| e.into_inner());
            if frames.len() >= INBOX_FRAMES {
                return false;
            }
            frames.push(frame);
        }
        // Written once until the owner looks: a wake-up, not a count.
        if !inbox.pending.swap(true, Ordering::AcqRel) {
            let _ = inbox.wake.write(1);
        }
        true
    }

    /// Moves up to `max` frames of queue `queue`'s inbox into `batch`; returns how many.
    pub(super) fn take(&self, queue: usize, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let inbox = &self.inboxes[queue];
        if !inbox.pending.swap(false, Ordering::AcqRel) {
            return 0;
        }
        // The eventfd is cleared before the inbox is emptied: a frame given after this read
        // writes it again, so no wake-up is lost.
        let _ = inbox.wake.read();
        let mut frames = inbox.frames.lock().unwrap_or_else(|e| e.into_inner());
        let n = frames.len().min(max);
        batch.extend(frames.drain(..n));
        if !frames.is_empty() {
            // The rest at the next `receive`, which the full batch makes come at once.
            inbox.pending.store(true, Ordering::Release);
        }
        n
    }

    /// The eventfd that becomes readable when frames are given to queue `queue`.
    pub(super) fn wake_fd(&self, queue: usize) -> BorrowedFd<'_> {
        self.inboxes[queue].wake.as_fd()
    }
}

/// The destination port of a TCP or UDP frame: untagged IPv4 that is not a fragment, or IPv6 with
/// the transport header right after the fixed one. `None` for anything else, malformed included.
fn destination_port(frame: &[u8]) -> Option<u16> {
    let ip = frame.get(14..)?;
    let (protocol, transport) = match [*frame.get(12)?, *frame.get(13)?] {
        [0x08, 0x00] => {
            let first = *ip.first()?;
            let ihl = usize::from(first & 0x0f) * 4;
            let fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3fff;
            if first >> 4 != 4 || ihl < 20 || fragment != 0 {
                return None;
            }
            (*ip.get(9)?, ihl)
        }
        [0x86, 0xdd] if ip.first()? >> 4 == 6 => (*ip.get(6)?, 40),
        _ => return None,
    };
    if protocol != 6 && protocol != 17 {
        return None;
    }
    Some(u16::from_be_bytes([
        *ip.get(transport + 2)?,
        *ip.get(transport + 3)?,
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tun::ephemeral_share;

    const RANGE: RangeInclusive<u16> = 49152..=65535;

    fn exchange(queues: usize) -> Exchange {
        let shares = (0..queues)
            .map(|q| ephemeral_share(&RANGE, q, queues).unwrap())
            .collect();
        Exchange::new(shares).unwrap()
    }

    /// A frame of IPv4 (`v6` false) or IPv6 carrying `protocol` to port `dport`.
    fn frame(v6: bool, protocol: u8, dport: u16, fragment: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, protocol, 64]);
            f.extend_from_slice(&[0; 32]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 1]);
            f.extend_from_slice(&fragment.to_be_bytes());
            f.extend_from_slice(&[64, protocol, 0, 0, 10, 7, 0, 1, 10, 7, 0, 2]);
        }
        f.extend_from_slice(&7u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0; 16]);
        f
    }

    #[test]
    fn a_frame_to_a_port_of_a_share_belongs_to_that_queue_and_nothing_else_does() {
        let x = exchange(4);
        for q in 0..4 {
            let s = ephemeral_share(&RANGE, q, 4).unwrap();
            for port in [*s.start(), *s.end()] {
                for (v6, protocol) in [(false, 6), (false, 17), (true, 6), (true, 17)] {
                    assert_eq!(x.owner(&frame(v6, protocol, port, 0x4000)), Some(q));
                }
            }
        }
        // A listening port, ICMP, a fragment, an IPv6 extension header: stay where they arrive.
        assert_eq!(x.owner(&frame(false, 6, 80, 0)), None);
        assert_eq!(x.owner(&frame(false, 1, 50000, 0)), None);
        assert_eq!(x.owner(&frame(false, 17, 50000, 0x2000)), None);
        assert_eq!(x.owner(&frame(false, 17, 50000, 0x0001)), None);
        assert_eq!(x.owner(&frame(true, 0, 50000, 0)), None);
        // ARP, a tagged frame, and every truncation of a frame that would be steered.
        let mut arp = frame(false, 6, 50000, 0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(x.owner(&arp), None);
        let mut tagged = frame(false, 6, 50000, 0);
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(x.owner(&tagged), None);
        for v6 in [false, true] {
            let f = frame(v6, 6, 50000, 0);
            let whole = if v6 { 14 + 40 + 4 } else { 14 + 20 + 4 };
            for len in 0..whole {
                assert_eq!(x.owner(&f[..len]), None, "{len} bytes");
            }
            assert!(x.owner(&f[..whole]).is_some());
        }
    }

    #[test]
    fn frames_given_wake_the_queue_once_and_come_out_in_order_within_the_bound() {
        let x = exchange(2);
        let readable = |x: &Exchange| {
            let mut fds = [nix::poll::PollFd::new(
                x.wake_fd(1),
                nix::poll::PollFlags::POLLIN,
            )];
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap() == 1
        };
        assert!(!readable(&x));
        let mut batch = Vec::new();
        assert_eq!(x.take(1, &mut batch, 64), 0);
        for i in 0..100u8 {
            assert!(x.give(1, PacketBuf::from_slice(&[i])));
        }
        assert!(readable(&x));
        assert_eq!(x.take(0, &mut batch, 64), 0, "not queue 0's");
        assert_eq!(x.take(1, &mut batch, 64), 64);
        assert!(!readable(&x), "the wake-up is taken with the frames");
        assert_eq!(x.take(1, &mut batch, 64), 36, "the rest at the next look");
        let order: Vec<u8> = batch.iter().map(|b| b.data()[0]).collect();
        assert_eq!(order, (0..100).collect::<Vec<u8>>());
        assert_eq!(x.take(1, &mut batch, 64), 0);
        for _ in 0..INBOX_FRAMES {
            assert!(x.give(0, PacketBuf::from_slice(&[0])));
        }
        assert!(!x.give(0, PacketBuf::from_slice(&[0])), "bounded");
    }
}
