//! The Ethernet link layer: what a link that carries frames (TAP, AF_XDP) needs between it and IP.
//! Framing is `wire::ethernet` (Ethernet II with an 802.1Q tag) and ARP's message `wire::arp`;
//! [`neighbor`] is the neighbour cache that ARP and IPv6 neighbour discovery share, a pure state
//! machine with its bounds, and [`arp`] answers and learns from ARP messages over it (a message in,
//! at most one out). The IP layers stay unaware of all of it.

pub mod arp;
pub mod interface;
pub mod ndp;
pub mod neighbor;

pub use arp::{arp_input, ArpDrop, ArpInterface, ArpOutcome};
pub use interface::{EthernetConfig, EthernetCounters, EthernetEvent, EthernetInterface, FrameIn};
pub use ndp::{ndp_input, NdpDrop, NdpInterface, NdpOutcome, RouterInfo};
pub use neighbor::{Heard, NeighborAction, NeighborCache, NeighborConfig, NeighborState, Resolved};
