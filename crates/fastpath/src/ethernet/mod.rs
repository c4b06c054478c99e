//! The Ethernet link layer: what a link that carries frames (TAP, AF_XDP) needs between it and IP.
//! Framing is `wire::ethernet` (Ethernet II with an 802.1Q tag) and ARP's message `wire::arp`;
//! [`neighbor`] is the neighbour cache that ARP and IPv6 neighbour discovery share, a pure state
//! machine with its bounds. The IP layers stay unaware of all of it.

pub mod neighbor;

pub use neighbor::{Heard, NeighborAction, NeighborCache, NeighborConfig, NeighborState, Resolved};
