//! The stack's devices: each interface's link and transmit queue, the link layer of those whose
//! medium is Ethernet, and the loopback's own queue.

use std::task::Waker;

use super::Stack;
use crate::addr::IpAddress;
use crate::buf::PacketBuf;
use crate::ethernet::EthernetInterface;
use crate::ipv4::{Transmit, LOOPBACK};
use crate::link::{Loopback, StackLink};
use crate::route::InterfaceId;
use crate::time::Instant;

/// A network interface's link side: its name, link and the packets queued for it.
pub(crate) struct Device {
    pub(crate) name: String,
    pub(crate) link: StackLink,
    pub(crate) txq: Vec<PacketBuf>,
    /// The link layer, for a link whose medium is Ethernet: what the stack sends is framed and
    /// its neighbours resolved here, on the way into `txq`.
    pub(crate) eth: Option<Box<EthernetInterface>>,
}

/// Every device, by [`InterfaceId`]; the loopback (interface 0) is driven directly.
pub(crate) struct Devices {
    pub(crate) list: Vec<Device>,
    /// The loopback interface's link (interface 0, `StackLink::Local`).
    pub(crate) lo: Loopback,
    /// Packets queued for a link before its transmit call.
    pub(crate) tx_batch: usize,
    /// Some link's queue may hold packets: without it, [`Self::flush`] has nothing to look at.
    pub(crate) queued: bool,
    /// Given to every link, those added later included ([`Stack::set_link_waker`]).
    pub(crate) rx_waker: Option<Waker>,
    /// The time of the stack's last `poll`, for the Ethernet interfaces' timers.
    pub(crate) now: Instant,
    /// Some interface is Ethernet (has `eth`).
    pub(crate) ethernet: bool,
}

impl Devices {
    /// Hands every queued packet to its link now; returns how many there were and how many the links
    /// dropped.
    #[inline(always)]
    pub(crate) fn flush(&mut self) -> (usize, usize) {
        if !self.queued {
            return (0, 0);
        }
        self.queued = false;
        let (mut n, mut dropped) = (0, 0);
        // The loopback's packets went straight to its queue: only the other links have queues.
        for dev in self.list.iter_mut().skip(1) {
            if !dev.txq.is_empty() {
                layer!(Send, Link);
                n += dev.txq.len();
                dropped += dev.link.transmit(&mut dev.txq);
            }
        }
        (n, dropped)
    }

    /// [`Transmit::transmit`] for any interface but loopback.
    #[inline(never)]
    fn transmit_link<A: IpAddress>(
        &mut self,
        iface: InterfaceId,
        hop: A,
        packet: PacketBuf,
    ) -> usize {
        let dev = &mut self.list[iface.0];
        match &mut dev.eth {
            None => dev.txq.push(packet),
            Some(eth) => eth.output(hop.socket_addr(0).ip(), packet, self.now, &mut dev.txq),
        }
        self.queued = true;
        if dev.txq.len() < self.tx_batch {
            return 0;
        }
        layer!(Send, Link);
        dev.link.transmit(&mut dev.txq)
    }
}

impl Transmit for Devices {
    #[inline(always)]
    fn transmit<A: IpAddress>(
        &mut self,
        iface: InterfaceId,
        next_hop: A,
        packet: PacketBuf,
    ) -> usize {
        if iface == LOOPBACK {
            // Straight to the loopback's queue: the next `poll` reads it there.
            layer!(Send, Link);
            return usize::from(self.lo.push(packet).is_err());
        }
        self.transmit_link(iface, next_hop, packet)
    }
}

impl Stack {
    /// Gives every link, and every link added later, `waker` to wake when packets arrive for it from
    /// outside the stack's calls ([`Link::set_rx_waker`](crate::link::Link::set_rx_waker): an
    /// in-memory pair's other end transmitting), or takes it back with `None`. An event loop over
    /// such links sleeps until the waker or [`Stack::next_deadline`] instead of looking at them at a
    /// fixed interval.
    pub fn set_link_waker(&mut self, waker: Option<Waker>) {
        for dev in &mut self.devices.list {
            dev.link.set_rx_waker(waker.clone());
        }
        self.devices.rx_waker = waker;
    }
}
