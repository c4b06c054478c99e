//! The Ethernet link layer: what a link that carries frames (TAP, AF_XDP, the in-memory
//! `ethernet_pair`) needs between it and IP. Framing is `wire::ethernet` (Ethernet II with an
//! 802.1Q tag), and the messages `wire::arp` and `wire::ndp`. [`neighbor`] is the neighbour cache
//! that ARP and IPv6 neighbour discovery share, a pure state machine with its bounds; [`arp`] and
//! [`ndp`] answer and learn over it (a message in, at most one out); [`interface`] is one
//! interface's link layer, which the stack holds for each such link and calls with the clock: the
//! input filter, resolution on output, duplicate address detection. The IP layers stay unaware of
//! all of it. See `docs/ethernet.md`.

pub mod arp;
pub mod board;
pub mod interface;
pub mod ndp;
pub mod neighbor;

pub use arp::{arp_input, ArpDrop, ArpInterface, ArpOutcome};
pub use board::NeighborBoard;
pub use interface::{EthernetConfig, EthernetCounters, EthernetEvent, EthernetInterface, FrameIn};
pub use ndp::{ndp_input, NdpDrop, NdpInterface, NdpOutcome, Redirect, RouterInfo};
pub use neighbor::{Heard, NeighborAction, NeighborCache, NeighborConfig, NeighborState, Resolved};
