//! Links: what moves IP packets in and out of a stack, a batch at a time.
//!
//! Links carry bare IP packets (no link-layer header), like a Linux TUN device, or Ethernet frames
//! ([`Medium`]), like a TAP device. Each packet travels
//! with its [`PacketMeta`](crate::buf::PacketMeta), the offload metadata a virtio-net header would carry.
//! Moving packets in batches is the user-space form of interrupt coalescing (paper 002 §2.1): the
//! per-wake-up cost is paid once per batch, not once per packet.

#[cfg(target_os = "linux")]
mod bpf;
mod impaired;
mod loopback;
#[cfg(target_os = "linux")]
mod os;
mod pair;
#[cfg(target_os = "linux")]
mod published;
#[cfg(target_os = "linux")]
pub mod tun;
#[cfg(target_os = "linux")]
pub mod xdp;

pub use impaired::{Impaired, ImpairedStats};
pub use loopback::Loopback;
pub use pair::{Impairments, PairEnd, PairStats};
#[cfg(target_os = "linux")]
pub use tun::{TunConfig, TunHandle, TunLink, TunStats};
#[cfg(target_os = "linux")]
pub use xdp::{disable_tx_checksum, XdpConfig, XdpHandle, XdpLink, XdpStats};

use std::task::Waker;

use crate::buf::PacketBuf;
use crate::wire::MacAddr;

/// What a link can do, as the stack sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkCapabilities {
    /// Largest IP packet the link carries, in bytes (up to 65535).
    pub mtu: usize,
    /// The link completes transport checksums of packets marked
    /// [`ChecksumOffload::Partial`](crate::buf::ChecksumOffload::Partial) (paper 002 §3.2).
    pub tx_checksum_offload: bool,
    /// The link protects every packet end to end with a strong check of its own (a CRC), so a single-hop
    /// datagram may go without a transport checksum under Kay & Pasquale's rule (paper 001).
    pub crc_protected: bool,
    /// The link cuts TCP segments larger than the MTU (marked with
    /// [`PacketMeta::gso_size`](crate::buf::PacketMeta::gso_size)) into MTU-sized ones: TCP
    /// segmentation offload (paper 002 §3.3).
    pub tso: bool,
}

impl LinkCapabilities {
    /// A link with `mtu`, no offloads, no CRC.
    pub const fn plain(mtu: usize) -> LinkCapabilities {
        LinkCapabilities {
            mtu,
            tx_checksum_offload: false,
            crc_protected: false,
            tso: false,
        }
    }
}

/// What a link's packets are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    /// Bare IP packets, as a TUN device carries them: the kernel or the peer routes.
    Ip,
    /// Ethernet II frames (a TAP device, an AF_XDP socket), the stack's own hardware address
    /// given: the stack frames what it sends and resolves its neighbours (`ethernet/`).
    /// [`LinkCapabilities::mtu`] is still the largest IP packet; a frame is up to 18 bytes more
    /// (the header and an 802.1Q tag). A packet's [`PacketMeta`](crate::buf::PacketMeta)
    /// checksum offsets count from the frame's first byte.
    Ethernet(MacAddr),
}

/// A packet link.
pub trait Link: Send {
    /// What the link can do.
    fn capabilities(&self) -> LinkCapabilities;

    /// What its packets are: bare IP packets (the default) or Ethernet frames.
    fn medium(&self) -> Medium {
        Medium::Ip
    }

    /// Takes every packet out of `batch` and sends it. Returns how many it had to drop because its
    /// queue was full (the stack counts them); what a simulated wire loses is the wire's to count.
    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize;

    /// Appends up to `max` received packets to `batch`; returns how many.
    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize;

    /// Keeps `waker` (or forgets the one kept, with `None`) to wake when packets arrive for
    /// [`Link::receive`] from outside the stack's calls: an [`PairEnd`] wakes it when its other end
    /// transmits, so that an event loop over in-memory links may sleep until then. A link that
    /// cannot tell ignores it (the default): a TUN link's descriptor is waited on instead.
    fn set_rx_waker(&mut self, waker: Option<Waker>) {
        let _ = waker;
    }
}

impl<L: Link + ?Sized> Link for Box<L> {
    fn capabilities(&self) -> LinkCapabilities {
        (**self).capabilities()
    }

    fn medium(&self) -> Medium {
        (**self).medium()
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        (**self).transmit(batch)
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        (**self).receive(batch, max)
    }

    fn set_rx_waker(&mut self, waker: Option<Waker>) {
        (**self).set_rx_waker(waker)
    }
}

/// An interface's link as the stack holds it: the stack's own loopback is not behind a `dyn Link` but
/// held by the stack itself (`Stack::lo`), whose output and input reach its queue directly, one packet
/// at a time with no batch in between (the path every local datagram takes); any other link is behind a
/// `dyn Link`.
pub(crate) enum StackLink {
    /// The loopback interface every stack has, held in the stack.
    Local,
    /// Any other link (a loopback added with `add_interface` included).
    Dyn(Box<dyn Link>),
}

impl StackLink {
    #[inline]
    pub(crate) fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        match self {
            // Never called: the stack queues loopback packets itself. Were it called, the packets
            // would be reported dropped rather than lost uncounted.
            StackLink::Local => {
                let n = batch.len();
                batch.clear();
                n
            }
            StackLink::Dyn(l) => l.transmit(batch),
        }
    }

    #[inline]
    pub(crate) fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        match self {
            StackLink::Local => 0,
            StackLink::Dyn(l) => l.receive(batch, max),
        }
    }

    /// [`Link::set_rx_waker`]; the stack's own loopback needs none (its packets are the stack's).
    pub(crate) fn set_rx_waker(&mut self, waker: Option<Waker>) {
        if let StackLink::Dyn(l) = self {
            l.set_rx_waker(waker);
        }
    }
}
