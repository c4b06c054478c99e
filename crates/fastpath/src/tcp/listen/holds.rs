//! The bounds on held SYNs: connections a holding listener took without answering, for the
//! application to confirm or refuse once it has asked their destination (see
//! [`Tcb::held`](super::Tcb)).
//!
//! A held SYN costs more than a half-open connection: the application (a transparent proxy) opens a
//! connection of its own for each, to the destination the SYN names. A flood of SYNs with forged
//! sources and random destinations would otherwise make it open one for every SYN, until its own
//! table is full and every legitimate connection is refused. So the connections held at once are
//! bounded, in all and to any one destination; a SYN past a bound is answered at once (by a SYN
//! cookie, RFC 4987 §3.6, which keeps no state until the peer's ACK proves its address) and reaches
//! the application established rather than held, or, with cookies off, takes the place of the
//! oldest held connection (RFC 4987 §3.4's "oldest first" replacement).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use crate::addr::IpAddress;

/// Which bound a SYN meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pressure {
    /// The connections held to its destination.
    Destination,
    /// The connections held in all.
    Total,
}

/// The held connections of a table, oldest first, and how many go to each destination.
#[derive(Debug)]
pub(crate) struct Holds<A: IpAddress> {
    /// Held connections (slot, destination), oldest first.
    order: VecDeque<(u32, A)>,
    /// Held connections per destination (only destinations with some).
    per_destination: HashMap<A, u32>,
    /// The bounds: in all, and to one destination.
    max: usize,
    max_per_destination: u32,
}

impl<A: IpAddress> Holds<A> {
    /// No connection held; at most `max` at once, `max_per_destination` to one destination (each at
    /// least 1).
    pub(crate) fn new(max: usize, max_per_destination: usize) -> Holds<A> {
        Holds {
            order: VecDeque::new(),
            per_destination: HashMap::new(),
            max: max.max(1),
            max_per_destination: max_per_destination.clamp(1, u32::MAX as usize) as u32,
        }
    }

    /// Connections held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// The bound a new held connection to `dst` would pass, if any (the destination's first).
    pub(crate) fn pressure(&self, dst: A) -> Option<Pressure> {
        if self.per_destination.get(&dst).copied().unwrap_or(0) >= self.max_per_destination {
            Some(Pressure::Destination)
        } else if self.order.len() >= self.max {
            Some(Pressure::Total)
        } else {
            None
        }
    }

    /// The oldest held connection: to `dst` when the destination's bound is the one met, else of all.
    pub(crate) fn oldest(&self, dst: A, pressure: Pressure) -> Option<u32> {
        match pressure {
            Pressure::Destination => self
                .order
                .iter()
                .find(|&&(_, d)| d == dst)
                .map(|&(slot, _)| slot),
            Pressure::Total => self.order.front().map(|&(slot, _)| slot),
        }
    }

    /// Connection `slot`, to `dst`, is now held (the newest).
    pub(crate) fn add(&mut self, slot: u32, dst: A) {
        self.order.push_back((slot, dst));
        *self.per_destination.entry(dst).or_insert(0) += 1;
    }

    /// Connection `slot` is no longer held (confirmed, refused or gone); nothing if it was not.
    /// Connections are mostly confirmed in the order they came, so the search ends near the front.
    pub(crate) fn remove(&mut self, slot: u32) {
        let Some(pos) = self.order.iter().position(|&(s, _)| s == slot) else {
            return;
        };
        let Some((_, dst)) = self.order.remove(pos) else {
            return;
        };
        if let Entry::Occupied(mut e) = self.per_destination.entry(dst) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

    #[test]
    fn a_destination_meets_its_bound_before_the_total() {
        let mut h = Holds::new(4, 2);
        h.add(1, A);
        assert_eq!(h.pressure(A), None);
        h.add(2, A);
        assert_eq!(h.pressure(A), Some(Pressure::Destination));
        assert_eq!(h.pressure(B), None);
        assert_eq!(h.oldest(A, Pressure::Destination), Some(1));
        h.add(3, B);
        h.add(4, B);
        // Four held: every destination meets the total bound, A and B their own first.
        assert_eq!(
            h.pressure(Ipv4Addr::new(192, 0, 2, 3)),
            Some(Pressure::Total)
        );
        assert_eq!(h.pressure(B), Some(Pressure::Destination));
        assert_eq!(h.oldest(B, Pressure::Destination), Some(3));
        assert_eq!(h.oldest(B, Pressure::Total), Some(1));
    }

    #[test]
    fn removing_frees_the_room_and_forgets_empty_destinations() {
        let mut h = Holds::new(2, 2);
        h.add(7, A);
        h.add(8, A);
        assert_eq!(h.pressure(B), Some(Pressure::Total));
        h.remove(7);
        h.remove(7);
        h.remove(99);
        assert_eq!((h.len(), h.pressure(A)), (1, None));
        assert_eq!(h.oldest(A, Pressure::Total), Some(8));
        h.remove(8);
        assert_eq!(h.len(), 0);
        assert!(h.per_destination.is_empty());
    }

    #[test]
    fn bounds_of_zero_hold_one() {
        let mut h = Holds::new(0, 0);
        assert_eq!(h.pressure(A), None);
        h.add(1, A);
        assert_eq!(h.pressure(A), Some(Pressure::Destination));
    }
}
