//! The neighbour cache: which link-layer address an IP neighbour has, and whether that is still
//! known to hold. One state machine serves ARP (RFC 826, with Linux's use of neighbour
//! unreachability detection for it) and IPv6 neighbour discovery (RFC 4861 §7.3): the states
//! INCOMPLETE, REACHABLE, STALE, DELAY and PROBE, solicitations on timers, packets held while an
//! address is resolved, all of it bounded.
//!
//! Pure, as the TCB is: the caller says what happened (a packet to send, an answer heard, the
//! clock) and is told what to do (send this packet to that address, send a solicitation, drop
//! these packets). Nothing here builds a frame.
//!
//! Against the known attacks: an answer (ARP reply, neighbour advertisement) for an address we
//! did not ask about creates nothing (spoofed replies, RFC 6583's cache exhaustion by answers); a
//! scan that makes us resolve many addresses fills at most [`NeighborConfig::max_entries`], and
//! then the oldest entries that are not being resolved make room, while entries being resolved
//! are never evicted for newer ones (RFC 6583 §7.1: prefer the established ones); each
//! resolution holds at most [`NeighborConfig::queue_bytes`] of packets, the oldest dropped first
//! (Linux's `unres_qlen_bytes`); a neighbour that does not answer is given up after its
//! solicitations, its packets dropped. One solicitation goes per timer tick at most, whatever
//! the packets queued: no amplification.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::buf::PacketBuf;
pub use crate::config::NeighborConfig;
use crate::time::Instant;
use crate::wire::MacAddr;

/// Where an entry stands (RFC 4861 §7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborState {
    /// Being resolved: `sent` solicitations so far, the next due at `next`.
    Incomplete {
        /// Solicitations sent.
        sent: u8,
        /// When the next is due.
        next: Instant,
    },
    /// Confirmed until `until`.
    Reachable {
        /// When the confirmation runs out.
        until: Instant,
    },
    /// Known but unconfirmed; used as is, and probed once used.
    Stale,
    /// Used while stale: probed at `until` unless confirmed first.
    Delay {
        /// When the first probe goes.
        until: Instant,
    },
    /// Being confirmed by unicast probes.
    Probe {
        /// Probes sent.
        sent: u8,
        /// When the next is due.
        next: Instant,
    },
}

#[derive(Debug)]
struct Entry {
    state: NeighborState,
    mac: Option<MacAddr>,
    queue: VecDeque<PacketBuf>,
    queued: usize,
    /// When it was last used or learned, for choosing what to evict.
    touched: Instant,
}

impl Entry {
    /// A new entry with nothing held.
    fn new(state: NeighborState, mac: Option<MacAddr>, now: Instant) -> Entry {
        Entry {
            state,
            mac,
            queue: VecDeque::new(),
            queued: 0,
            touched: now,
        }
    }
}

/// What [`NeighborCache::resolve`] says to do with a packet for a neighbour.
#[derive(Debug)]
pub enum Resolved {
    /// Send it to this address now.
    Send(PacketBuf, MacAddr),
    /// Held until the address is known; `solicit` when a first (broadcast or multicast)
    /// solicitation must go now. `dropped` is what the bounded queue let go to make room (to count).
    Held {
        /// A solicitation is due now.
        solicit: bool,
        /// Packets dropped from the queue, oldest first.
        dropped: Vec<PacketBuf>,
    },
    /// The cache is full of addresses being resolved: the packet is given back, to drop.
    Full(PacketBuf),
}

/// What the clock asks of the cache ([`NeighborCache::poll`]).
#[derive(Debug)]
pub enum NeighborAction<A> {
    /// Solicit `addr`: broadcast or multicast when `unicast` is `None`, else to that address.
    Solicit {
        /// The neighbour's protocol address.
        addr: A,
        /// Where a unicast probe goes.
        unicast: Option<MacAddr>,
    },
    /// `addr` did not answer: the packets held for it are dropped (to count, and to answer with
    /// ICMP's address unreachable for the first, as RFC 4861 §7.2.2 and Linux do).
    Failed {
        /// The neighbour's protocol address.
        addr: A,
        /// The packets that were waiting.
        dropped: Vec<PacketBuf>,
    },
}

/// How an answer was heard (RFC 4861 §7.2.5, and ARP as Linux treats it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// An answer to our solicitation (an ARP reply, a solicited advertisement): confirms
    /// reachability.
    Solicited,
    /// Told without asking (an unsolicited advertisement or gratuitous ARP), or learned from the
    /// neighbour's own request to us: the address, not its reachability.
    Unsolicited,
}

/// The neighbour cache for protocol addresses `A` (see the module's notes).
#[derive(Debug)]
pub struct NeighborCache<A> {
    cfg: NeighborConfig,
    entries: HashMap<A, Entry>,
    /// No timer is due before this: the earliest deadline set since `poll` last worked them out
    /// (maybe earlier than any left), so that asking costs nothing per packet, whatever the size
    /// of the cache.
    hint: Option<Instant>,
}

impl<A: Copy + Eq + Hash> NeighborCache<A> {
    /// An empty cache.
    pub fn new(cfg: NeighborConfig) -> NeighborCache<A> {
        NeighborCache {
            cfg,
            entries: HashMap::new(),
            hint: None,
        }
    }

    /// How long a confirmation holds and the time between solicitations from now on (a router's
    /// advertisement of them, RFC 4861 §6.3.4).
    pub fn set_timers(&mut self, reachable: std::time::Duration, retrans: std::time::Duration) {
        self.cfg.reachable = reachable;
        self.cfg.retrans = retrans;
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The state of `addr`'s entry, if any.
    pub fn state(&self, addr: A) -> Option<NeighborState> {
        self.entries.get(&addr).map(|e| e.state)
    }

    /// The link-layer address known for `addr`, if any.
    pub fn mac(&self, addr: A) -> Option<MacAddr> {
        self.entries.get(&addr).and_then(|e| e.mac)
    }

    /// A packet for `addr`: send it now, or hold it while `addr` is resolved.
    pub fn resolve(&mut self, addr: A, packet: PacketBuf, now: Instant) -> Resolved {
        let cfg = self.cfg;
        if let Some(e) = self.entries.get_mut(&addr) {
            e.touched = now;
            match (e.state, e.mac) {
                (NeighborState::Reachable { until }, Some(mac)) if now < until => {
                    return Resolved::Send(packet, mac);
                }
                (NeighborState::Reachable { .. } | NeighborState::Stale, Some(mac)) => {
                    // Used while unconfirmed: sent as is, probed a little later (§7.3.3).
                    let until = now + cfg.delay_first_probe;
                    e.state = NeighborState::Delay { until };
                    self.note(until);
                    return Resolved::Send(packet, mac);
                }
                (NeighborState::Delay { .. } | NeighborState::Probe { .. }, Some(mac)) => {
                    return Resolved::Send(packet, mac);
                }
                _ => {
                    let dropped = hold(e, packet, cfg.queue_bytes);
                    return Resolved::Held {
                        solicit: false,
                        dropped,
                    };
                }
            }
        }
        if self.entries.len() >= cfg.max_entries && !self.evict_one() {
            return Resolved::Full(packet);
        }
        self.note(now + cfg.retrans);
        let incomplete = NeighborState::Incomplete {
            sent: 1,
            next: now + cfg.retrans,
        };
        let mut e = Entry::new(incomplete, None, now);
        let dropped = hold(&mut e, packet, cfg.queue_bytes);
        self.entries.insert(addr, e);
        Resolved::Held {
            solicit: true,
            dropped,
        }
    }

    /// Makes room for a new entry: the least recently used one that is not being resolved.
    fn evict_one(&mut self) -> bool {
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| !matches!(e.state, NeighborState::Incomplete { .. }))
            .min_by_key(|(_, e)| e.touched)
            .map(|(&a, _)| a);
        victim.is_some_and(|a| self.entries.remove(&a).is_some())
    }

    /// `addr` has link-layer address `mac`, heard as `heard`. Returns the packets that waited for
    /// it (to send to `mac`). An answer for an address with no entry creates none: we did not ask.
    pub fn heard(&mut self, addr: A, mac: MacAddr, heard: Heard, now: Instant) -> Vec<PacketBuf> {
        let cfg = self.cfg;
        let Some(e) = self.entries.get_mut(&addr) else {
            return Vec::new();
        };
        let changed = e.mac.is_some_and(|m| m != mac);
        e.mac = Some(mac);
        e.touched = now;
        e.state = match (heard, e.state) {
            (Heard::Solicited, _) => NeighborState::Reachable {
                until: now + cfg.reachable,
            },
            (Heard::Unsolicited, NeighborState::Incomplete { .. }) => NeighborState::Stale,
            // A new address unasked makes a confirmed entry stale; the same one changes nothing.
            (Heard::Unsolicited, state) if !changed => state,
            (Heard::Unsolicited, _) => NeighborState::Stale,
        };
        e.queued = 0;
        e.queue.drain(..).collect()
    }

    /// A neighbour advertisement for `addr` giving `mac` (RFC 4861 §7.2.5): taken as
    /// [`heard`](Self::heard) takes an answer, except that one without the override flag does not
    /// replace an address the entry already has. It only makes a REACHABLE entry STALE (the
    /// neighbour may have moved, so the next use probes it), and changes nothing else: the
    /// flag is how a proxy's or anycast answer avoids taking the place of the owner's.
    pub fn advertised(
        &mut self,
        addr: A,
        mac: MacAddr,
        (solicited, override_): (bool, bool),
        now: Instant,
    ) -> Vec<PacketBuf> {
        let Some(e) = self.entries.get_mut(&addr) else {
            return Vec::new();
        };
        if !override_ && e.mac.is_some_and(|m| m != mac) {
            if matches!(e.state, NeighborState::Reachable { .. }) {
                e.state = NeighborState::Stale;
            }
            return Vec::new();
        }
        let heard = if solicited {
            Heard::Solicited
        } else {
            Heard::Unsolicited
        };
        self.heard(addr, mac, heard, now)
    }

    /// An answer for `addr` that came to another stack of this interface ([`NeighborBoard`]):
    /// taken as [`Heard::Solicited`] if this cache is itself asking (INCOMPLETE or PROBE), and
    /// ignored otherwise. Returns the packets that waited.
    ///
    /// [`NeighborBoard`]: super::board::NeighborBoard
    pub fn answered(&mut self, addr: A, mac: MacAddr, now: Instant) -> Vec<PacketBuf> {
        let asking = self.entries.get(&addr).is_some_and(|e| {
            matches!(
                e.state,
                NeighborState::Incomplete { .. } | NeighborState::Probe { .. }
            )
        });
        if !asking {
            return Vec::new();
        }
        self.heard(addr, mac, Heard::Solicited, now)
    }

    /// Learns `addr`'s address from its own request to us (RFC 826's merge; RFC 4861 §7.2.3 for a
    /// solicitation with a source address option): a STALE entry, made only if there is room or
    /// an entry not being resolved to make room with. An entry already there is updated as an
    /// unsolicited answer would update it, and the packets that waited for it are returned.
    pub fn learn(&mut self, addr: A, mac: MacAddr, now: Instant) -> Vec<PacketBuf> {
        if self.entries.contains_key(&addr) {
            return self.heard(addr, mac, Heard::Unsolicited, now);
        }
        if self.entries.len() >= self.cfg.max_entries && !self.evict_one() {
            return Vec::new();
        }
        self.entries
            .insert(addr, Entry::new(NeighborState::Stale, Some(mac), now));
        Vec::new()
    }

    /// The neighbour `addr` is reachable, as an upper layer saw it (TCP's acknowledgments of new
    /// data, RFC 4861 §7.3.1): no probe needed.
    pub fn confirm(&mut self, addr: A, now: Instant) {
        let reachable = self.cfg.reachable;
        if let Some(e) = self.entries.get_mut(&addr) {
            if e.mac.is_some() {
                e.state = NeighborState::Reachable {
                    until: now + reachable,
                };
            }
        }
    }

    /// A timer is set for `at`.
    fn note(&mut self, at: Instant) {
        self.hint = Some(self.hint.map_or(at, |h| h.min(at)));
    }

    /// The earliest time [`poll`](Self::poll) may have something to do: never later than a
    /// timer's deadline, sometimes earlier (a timer that an answer stopped). Costs nothing however
    /// many entries there are.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.hint
    }

    /// The earliest deadline of every entry, worked out.
    fn earliest(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.state {
                NeighborState::Incomplete { next, .. } | NeighborState::Probe { next, .. } => {
                    Some(next)
                }
                NeighborState::Delay { until } => Some(until),
                _ => None,
            })
            .min()
    }

    /// Runs the timers due at `now`: solicitations to send, addresses given up.
    pub fn poll(&mut self, now: Instant) -> Vec<NeighborAction<A>> {
        let cfg = self.cfg;
        let mut actions = Vec::new();
        let mut gone = Vec::new();
        for (&addr, e) in self.entries.iter_mut() {
            match e.state {
                NeighborState::Incomplete { sent, next } if next <= now => {
                    if sent < cfg.max_multicast_solicit {
                        e.state = NeighborState::Incomplete {
                            sent: sent + 1,
                            next: now + cfg.retrans,
                        };
                        actions.push(NeighborAction::Solicit {
                            addr,
                            unicast: None,
                        });
                    } else {
                        e.queued = 0;
                        actions.push(NeighborAction::Failed {
                            addr,
                            dropped: e.queue.drain(..).collect(),
                        });
                        gone.push(addr);
                    }
                }
                NeighborState::Delay { until } if until <= now => {
                    e.state = NeighborState::Probe {
                        sent: 1,
                        next: now + cfg.retrans,
                    };
                    actions.push(NeighborAction::Solicit {
                        addr,
                        unicast: e.mac,
                    });
                }
                NeighborState::Probe { sent, next } if next <= now => {
                    if sent < cfg.max_unicast_solicit {
                        e.state = NeighborState::Probe {
                            sent: sent + 1,
                            next: now + cfg.retrans,
                        };
                        actions.push(NeighborAction::Solicit {
                            addr,
                            unicast: e.mac,
                        });
                    } else {
                        // Unreachable (RFC 4861 §7.3.3): the entry goes, and those who route
                        // through it learn (a router is passed over, §6.3.6).
                        actions.push(NeighborAction::Failed {
                            addr,
                            dropped: e.queue.drain(..).collect(),
                        });
                        gone.push(addr);
                    }
                }
                _ => {}
            }
        }
        for addr in gone {
            self.entries.remove(&addr);
        }
        self.hint = self.earliest();
        actions
    }
}

/// Holds `packet` in `e`'s queue within `limit` bytes, dropping the oldest to make room; returns
/// what was dropped.
fn hold(e: &mut Entry, packet: PacketBuf, limit: usize) -> Vec<PacketBuf> {
    let mut dropped = Vec::new();
    let len = packet.len();
    if len > limit {
        dropped.push(packet);
        return dropped;
    }
    while e.queued + len > limit {
        match e.queue.pop_front() {
            Some(old) => {
                e.queued -= old.len();
                dropped.push(old);
            }
            None => break,
        }
    }
    e.queued += len;
    e.queue.push_back(packet);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0, 3]);

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, n)
    }

    fn packet(len: usize) -> PacketBuf {
        let mut p = PacketBuf::with_storage(vec![0; len + 64], 64);
        p.extend_from_slice(&vec![7; len]);
        p
    }

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn a_packet_waits_for_the_answer_then_goes() {
        let mut c = NeighborCache::new(NeighborConfig::default());
        assert!(matches!(
            c.resolve(ip(2), packet(100), at(0)),
            Resolved::Held { solicit: true, ref dropped } if dropped.is_empty()
        ));
        // A second packet waits without a second solicitation.
        assert!(matches!(
            c.resolve(ip(2), packet(100), at(1)),
            Resolved::Held { solicit: false, .. }
        ));
        let released = c.heard(ip(2), MAC, Heard::Solicited, at(5));
        assert_eq!(released.len(), 2);
        assert!(matches!(
            c.state(ip(2)),
            Some(NeighborState::Reachable { .. })
        ));
        assert!(matches!(
            c.resolve(ip(2), packet(10), at(6)),
            Resolved::Send(_, mac) if mac == MAC
        ));
    }

    #[test]
    fn an_unanswered_address_is_solicited_three_times_then_given_up() {
        let mut c = NeighborCache::new(NeighborConfig::default());
        c.resolve(ip(2), packet(100), at(0));
        assert_eq!(c.next_deadline(), Some(at(1000)));
        for t in [1000, 2000] {
            let actions = c.poll(at(t));
            assert!(matches!(
                actions[..],
                [NeighborAction::Solicit { unicast: None, .. }]
            ));
        }
        let actions = c.poll(at(3000));
        assert!(matches!(
            &actions[..],
            [NeighborAction::Failed { dropped, .. }] if dropped.len() == 1
        ));
        assert!(c.is_empty());
    }

    #[test]
    fn an_answer_another_queue_heard_completes_only_a_resolution_in_progress() {
        let mut c = NeighborCache::new(NeighborConfig::default());
        // Nothing asked: nothing made, nothing changed.
        assert!(c.answered(ip(2), MAC, at(0)).is_empty());
        assert_eq!(c.state(ip(2)), None);
        c.learn(ip(3), MAC, at(0));
        assert!(c.answered(ip(3), OTHER, at(1)).is_empty());
        assert_eq!(
            (c.state(ip(3)), c.mac(ip(3))),
            (Some(NeighborState::Stale), Some(MAC))
        );
        // Asking: the held packet goes, and the address is confirmed.
        let Resolved::Held { .. } = c.resolve(ip(4), packet(10), at(2)) else {
            panic!("held");
        };
        assert_eq!(c.answered(ip(4), MAC, at(3)).len(), 1);
        assert!(matches!(
            c.state(ip(4)),
            Some(NeighborState::Reachable { .. })
        ));
    }

    #[test]
    fn answers_we_did_not_ask_for_create_nothing() {
        let mut c: NeighborCache<Ipv4Addr> = NeighborCache::new(NeighborConfig::default());
        assert!(c.heard(ip(9), MAC, Heard::Solicited, at(0)).is_empty());
        assert!(c.heard(ip(9), MAC, Heard::Unsolicited, at(0)).is_empty());
        assert!(c.is_empty());
    }

    #[test]
    fn a_stale_address_is_used_then_probed_by_unicast() {
        let cfg = NeighborConfig::default();
        let mut c = NeighborCache::new(cfg);
        c.resolve(ip(2), packet(10), at(0));
        c.heard(ip(2), MAC, Heard::Solicited, at(0));
        // After REACHABLE_TIME it is stale: used at once, probed 5 s later.
        let later = at(31_000);
        assert!(matches!(
            c.resolve(ip(2), packet(10), later),
            Resolved::Send(_, mac) if mac == MAC
        ));
        assert!(matches!(c.state(ip(2)), Some(NeighborState::Delay { .. })));
        let probe = later + cfg.delay_first_probe;
        assert!(matches!(
            c.poll(probe)[..],
            [NeighborAction::Solicit { unicast: Some(m), .. }] if m == MAC
        ));
        // Confirmed by an upper layer before the next probe: reachable again.
        c.confirm(ip(2), probe + Duration::from_millis(10));
        assert!(matches!(
            c.state(ip(2)),
            Some(NeighborState::Reachable { .. })
        ));
        // Unconfirmed, three probes and it is gone.
        let mut c = NeighborCache::new(cfg);
        c.resolve(ip(2), packet(10), at(0));
        c.heard(ip(2), MAC, Heard::Unsolicited, at(0));
        c.resolve(ip(2), packet(10), at(1));
        let mut t = at(1) + cfg.delay_first_probe;
        for _ in 0..3 {
            assert_eq!(c.poll(t).len(), 1);
            t = t + cfg.retrans;
        }
        // Given up, and said so: whoever routes through it must learn (nothing was waiting).
        assert!(matches!(
            &c.poll(t)[..],
            [NeighborAction::Failed { addr, dropped }] if *addr == ip(2) && dropped.is_empty()
        ));
        assert!(c.is_empty());
    }

    #[test]
    fn an_unasked_new_address_makes_a_confirmed_entry_stale() {
        let mut c = NeighborCache::new(NeighborConfig::default());
        c.resolve(ip(2), packet(10), at(0));
        c.heard(ip(2), MAC, Heard::Solicited, at(0));
        c.heard(ip(2), MAC, Heard::Unsolicited, at(1));
        assert!(matches!(
            c.state(ip(2)),
            Some(NeighborState::Reachable { .. })
        ));
        c.heard(ip(2), OTHER, Heard::Unsolicited, at(2));
        assert_eq!(c.state(ip(2)), Some(NeighborState::Stale));
        assert_eq!(c.mac(ip(2)), Some(OTHER));
    }

    #[test]
    fn the_queue_keeps_the_newest_within_its_bytes() {
        let cfg = NeighborConfig {
            queue_bytes: 250,
            ..NeighborConfig::default()
        };
        let mut c = NeighborCache::new(cfg);
        c.resolve(ip(2), packet(100), at(0));
        c.resolve(ip(2), packet(100), at(0));
        let Resolved::Held { dropped, .. } = c.resolve(ip(2), packet(100), at(0)) else {
            panic!("held");
        };
        assert_eq!(dropped.len(), 1);
        assert_eq!(c.heard(ip(2), MAC, Heard::Solicited, at(1)).len(), 2);
        // A packet larger than the whole queue is dropped itself.
        let mut c = NeighborCache::new(cfg);
        let Resolved::Held { dropped, .. } = c.resolve(ip(3), packet(300), at(0)) else {
            panic!("held");
        };
        assert_eq!(dropped.len(), 1);
    }

    #[test]
    fn a_scan_fills_the_cache_only_to_its_bound_and_resolutions_are_not_evicted() {
        let cfg = NeighborConfig {
            max_entries: 4,
            ..NeighborConfig::default()
        };
        let mut c = NeighborCache::new(cfg);
        // One known neighbour, then a scan.
        c.resolve(ip(1), packet(10), at(0));
        c.heard(ip(1), MAC, Heard::Solicited, at(0));
        for n in 2..=4 {
            assert!(matches!(
                c.resolve(ip(n), packet(10), at(1)),
                Resolved::Held { .. }
            ));
        }
        // Full: the known, least recently used neighbour makes room...
        assert!(matches!(
            c.resolve(ip(5), packet(10), at(2)),
            Resolved::Held { .. }
        ));
        assert_eq!(c.len(), 4);
        assert_eq!(c.state(ip(1)), None);
        // ...and then only resolutions are left: the next address is refused.
        assert!(matches!(
            c.resolve(ip(6), packet(10), at(3)),
            Resolved::Full(_)
        ));
        assert_eq!(c.len(), 4);
    }
}
