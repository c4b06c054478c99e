//! What the tunnel counts: [`Tally`], one queue's counters, bumped by its relays and readable from
//! any thread while they run, and [`Totals`], the same as plain numbers, which the queues add up;
//! [`Stats`], what [`Tunnel::stats`](crate::Tunnel::stats) reports: the totals, each queue's share,
//! the stacks' drops and the TUN links' counters.

use std::sync::atomic::{AtomicU64, Ordering};

use fastpath::link::TunStats;

/// A counter written by one thread (its queue's) and read by any. Written as a load and a store,
/// not an atomic add: a plain `add` in the machine code, as a `Cell` was, since no other thread
/// writes it.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed)
    }
}

/// Adds `n` to `c` (from its queue's thread only).
pub(crate) fn add(c: &Counter, n: u64) {
    c.set(c.get() + n);
}

/// Defines `Tally`, what one queue's relays count, and `Totals`, the same as plain numbers.
macro_rules! tally {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// What one queue relayed.
        #[derive(Debug, Default)]
        pub(crate) struct Tally {
            $(pub(crate) $name: Counter,)*
        }

        /// What the tunnel relayed: one queue's, or all of theirs added up.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct Totals {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Tally {
            pub(crate) fn totals(&self) -> Totals {
                Totals {
                    $($name: self.$name.get(),)*
                }
            }
        }

        impl std::ops::AddAssign for Totals {
            fn add_assign(&mut self, other: Totals) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

tally! {
    /// TCP connections relayed (their destination was tried).
    tcp_flows,
    /// Connections being relayed now.
    tcp_live,
    /// Held connections answered with a RST (the destination or the proxy refused).
    tcp_refused,
    /// Held connections answered with an ICMP unreachable.
    tcp_unreachable,
    /// Held connections left unanswered: no answer within the connect timeout.
    tcp_timed_out,
    /// Relayed connections ended by a reset or an error on either side.
    tcp_reset,
    /// Connections reset at once, past the connection limit.
    tcp_over_limit,
    /// Connections whose handshake came first (held SYNs at their bound, answered with a cookie),
    /// their destination asked after.
    tcp_handshake_first,
    /// Bytes from the applications to their destinations.
    tcp_up,
    /// Bytes from the destinations to the applications.
    tcp_down,
    /// UDP flows opened.
    udp_flows,
    /// Flows expired after their idle time.
    udp_expired,
    /// Datagrams dropped past the flow limit.
    udp_over_limit,
    /// Datagrams not sent (either way), and flows that could not be opened.
    udp_send_failed,
    /// Port unreachables passed to the applications.
    udp_refused,
    /// UDP payload bytes from the applications.
    udp_up,
    /// UDP payload bytes to the applications.
    udp_down,
    /// Sends with UDP segmentation offload.
    udp_segmented_sends,
    /// The datagrams those sends carried.
    udp_segmented_datagrams,
    /// Flows whose segmented send the kernel refused, sent one datagram at a time since.
    udp_segmenting_refused,
    /// Datagrams dropped because their route is an HTTP proxy, which carries no UDP.
    udp_no_proxy,
    /// DNS queries the fake DNS answered.
    dns_answered,
    /// Connections and flows to an address of the fake DNS range that no name has (any more): a
    /// host unreachable for a connection, the datagram dropped.
    dns_unknown,
}

/// What [`Tunnel::stats`](crate::Tunnel::stats) reports. The relay counters are current; the
/// stacks' counters (`drops`, `counters`, `connections`) are as of their last publication, at most
/// [`PUBLISH_EVERY`](crate::PUBLISH_EVERY) old while the tunnel runs and final once it stopped.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// What every queue relayed, added up.
    pub totals: Totals,
    /// Each queue's own.
    pub queues: Vec<Totals>,
    /// Each queue's stack's counters (drops by reason among them).
    pub counters: Vec<fastpath::Counters>,
    /// Packets the stacks dropped, every reason and queue added up.
    pub drops: u64,
    /// Connections in the stacks' tables (relayed, closing, in TIME-WAIT).
    pub connections: usize,
    /// Names the fake DNS table holds (0 without fake DNS).
    pub names: usize,
    /// The TUN links' counters, added up over the queues (packets and bytes each way, drops).
    pub tun: TunTotals,
}

/// The TUN links' counters that a VPN app shows, added up over the queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TunTotals {
    /// Packets and bytes read from the TUN descriptor (from the applications).
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Packets and bytes written to it (to the applications).
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets the link dropped, either way (malformed, oversize, a full queue, errors).
    pub dropped: u64,
}

impl TunTotals {
    pub(crate) fn add(&mut self, s: &TunStats) {
        self.rx_packets += s.rx_packets;
        self.rx_bytes += s.rx_bytes;
        self.tx_packets += s.tx_packets;
        self.tx_bytes += s.tx_bytes;
        self.dropped += s.rx_dropped() + s.tx_drop_full + s.tx_errors + s.rx_errors;
    }
}
