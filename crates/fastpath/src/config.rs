//! One configuration for the whole stack, with a named switch for each technique from the papers.
//!
//! [`StackConfig::default`] is the fastest correct choice of every switch; [`StackConfig::classic`] is
//! the 4.3BSD path the papers started from, so an experiment can compare the two (and every step between)
//! within one build.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::buf::BufferMode;
use crate::checksum::Algorithm;
use crate::demux::DemuxStrategy;
use crate::secret::SecretKey;

/// How data is copied between the application and packet buffers, and when it is checksummed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CopyChecksum {
    /// Copy, then checksum in a second pass on send; on receive, verify when the datagram arrives and
    /// copy when the application reads it. The 4.3BSD way.
    Separate,
    /// One loop copies and checksums (Partridge & Pink, paper 000 §7.1; Chase et al., paper 002 §2.2).
    /// On send the user's data is summed as it is copied into the packet. On receive, verification is
    /// deferred to the copy into the caller's buffer (paper 000 §7.1.1): a datagram that fails is dropped
    /// and counted, and the call takes the next one or returns `WouldBlock`; the caller's buffer may
    /// have been written even then.
    #[default]
    Fused,
}

/// When UDP checksums may be left out or left to the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChecksumPolicy {
    /// Let a link that offers checksum offload complete transport checksums (paper 002 §3.2), and trust
    /// packets a link marks as already verified.
    pub use_offload: bool,
    /// Kay & Pasquale's rule (paper 001, "Eliminating Checksum Redundancy"): send UDP without a checksum when the next hop is the
    /// destination and the link is CRC-protected, since the link's CRC then covers the whole path.
    /// Off by default: the CRC does not cover the host's own memory and buses, or a router that is
    /// later put in the path, which is what the end-to-end checksum is for.
    pub eliminate_on_protected_hop: bool,
}

impl Default for ChecksumPolicy {
    fn default() -> Self {
        ChecksumPolicy {
            use_offload: true,
            eliminate_on_protected_hop: false,
        }
    }
}

/// Which algorithm grows the congestion window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CongestionAlgorithm {
    /// RFC 5681 congestion avoidance: one segment per round trip; halve on loss.
    NewReno,
    /// RFC 9438: a cubic function of the time since the last loss, with a Reno-friendly floor;
    /// multiply by 0.7 on loss.
    #[default]
    Cubic,
}

/// How a TCP sender decides a segment is lost before its retransmission timer says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LossDetection {
    /// RFC 6675 (and RFC 5681's three duplicate ACKs, RFC 6582's NewReno without SACK): a segment
    /// is lost once DupThresh (3) segments above it are SACKed.
    DupAck,
    /// RACK-TLP (RFC 8985), as Linux's default: with SACK, a segment is lost once one sent after it
    /// is delivered and a reordering window has passed, and a tail loss probe two round trips after
    /// the last transmission finds a lost tail; without SACK the duplicate-ACK rules apply. The
    /// tail loss probe has its own switch, [`TcpConfig::tail_loss_probe`].
    #[default]
    Rack,
}

/// Explicit Congestion Notification for TCP (RFC 3168): whether connections ask for it and
/// whether they agree when the peer asks (Linux's `net.ipv4.tcp_ecn`: 1, 2, 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Neither ask nor agree.
    Off,
    /// Agree when the peer's SYN asks, never ask (Linux's default, 2).
    #[default]
    Accept,
    /// Ask in our SYNs and agree when asked (1).
    On,
}

/// TCP's switches and timers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Jacobson's header prediction (paper 000 §2, after Jacobson's 4.3BSD-Reno `tcp_input`): on an
    /// established connection, an in-order segment that only acknowledges data, or carries the next
    /// data (acknowledging nothing new, or new data outside loss recovery, as each segment of a
    /// request/response exchange does, which Jacobson's two cases leave to the general path), is
    /// handled by a short path that skips the general state machine. The share of segments that take
    /// it is counted.
    pub header_prediction: bool,
    /// The congestion controller of new connections.
    pub congestion: CongestionAlgorithm,
    /// Slow start's growth per ACK, at most this many MSS (RFC 3465 §2.3's L, which it sets to 2);
    /// `None`, the default, grows the window by every byte an ACK acknowledges, as Linux does, so
    /// that a stretch ACK (one for ten segments, after a receiver's GRO) does not slow slow start
    /// down: ten segments acknowledged at once let 20 go, where L = 2 lets 12.
    pub slow_start_ack_limit: Option<u32>,
    /// Offer and use selective acknowledgments (RFC 2018) and SACK-based loss recovery (RFC 6675).
    pub sack: bool,
    /// Offer and use timestamps (RFC 7323 §3, §4, §5: RTT measurement and PAWS).
    pub timestamps: bool,
    /// Offer and use window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Delay ACKs of in-order data by up to this long, acknowledging at least every second full segment
    /// (RFC 9293 §3.8.6.3, RFC 1122 §4.2.3.2). `None` acknowledges every segment at once.
    pub delayed_ack: Option<std::time::Duration>,
    /// Answer SYNs with SYN cookies when a listener's queue of half-open connections is full, instead
    /// of dropping them (RFC 4987 §3.6).
    pub syn_cookies: bool,
    /// Segment bulk data into packets larger than the MSS and let the link cut them (TCP segmentation
    /// offload, paper 002 §3.3), when the link offers it.
    pub segmentation_offload: bool,
    /// Kay & Pasquale's checksum elimination for TCP (paper 001), negotiated with the historic RFC 1146
    /// alternate checksum option. Experimental and off: it is only used when both ends ask for it and
    /// the route is a single CRC-protected hop, and no other stack speaks it.
    pub alt_checksum: bool,
    /// Lower bound of the retransmission timeout (RFC 6298 §2.4 says 1 s; Linux and most stacks use
    /// 200 ms).
    pub min_rto: Duration,
    /// Apply `min_rto` to the RTO's variance term rather than to the whole: RTO = SRTT + max(4 ·
    /// RTTVAR, `min_rto`), as Linux computes it (`tcp_set_rto`: its `mdev_max` is floored at
    /// `tcp_rto_min`), so that a steady RTT, whose variance decays to nothing, still leaves a margin
    /// above it and its jitter does not cause spurious timeouts. Off: RFC 6298 §2.3's SRTT + max(G,
    /// 4 · RTTVAR), the whole bounded below by `min_rto` (§2.4). With two 100 ms samples the RTO is
    /// 300 ms on, 250 ms off.
    pub rto_min_on_variance: bool,
    /// Retransmission timeout before any RTT is measured (RFC 6298 §2.1).
    pub initial_rto: Duration,
    /// Upper bound of the retransmission timeout (RFC 6298 §2.5).
    pub max_rto: Duration,
    /// When an established connection that gets no acknowledgment is abandoned (RFC 1122
    /// §4.2.3.5's R2): after as long as this many retransmission timeouts take from `min_rto`,
    /// doubling up to `max_rto`, as Linux counts `tcp_retries2` (by time, whatever the
    /// connection's own RTO; 522.2 s for 15 under these defaults).
    pub max_retries: u32,
    /// `max_retries` for a connection the application has closed with data unacknowledged (an
    /// orphan, which nobody waits for), and the window probes it sends unanswered: Linux's
    /// `tcp_orphan_retries` (8 where the sysctl says 0), so that orphans, which hold buffers no
    /// one reads, are given up sooner (102.2 s of retransmissions under the defaults).
    pub orphan_retries: u32,
    /// Retransmissions of a SYN before a connect fails.
    pub syn_retries: u32,
    /// The maximum segment lifetime; TIME-WAIT lasts twice this (RFC 9293 §3.4.2).
    pub msl: Duration,
    /// How long an orphaned connection (closed by the application) waits in FIN-WAIT-2 for the peer's
    /// FIN (Linux's `tcp_fin_timeout`).
    pub fin_wait2_timeout: Duration,
    /// Default send buffer per connection, in bytes.
    pub send_buffer: usize,
    /// Default receive buffer per connection, in bytes: the most the window will offer.
    pub recv_buffer: usize,
    /// Keep-alive (RFC 1122 §4.2.3.6), for sockets that turn it on: idle time before the first probe,
    /// time between probes, and unanswered probes before the connection is dropped.
    pub keepalive: (Duration, Duration, u32),
    /// Challenge ACKs (RFC 5961 §7) a connection sends per second at most.
    pub challenge_acks_per_sec: u32,
    /// Least time between two duplicate ACKs a connection sends in answer to segments without data
    /// that fail a check (outside the window, an old timestamp, an ACK of data never sent): Linux's
    /// `tcp_invalid_ratelimit`, 500 ms. Two hosts (or one host talking to itself through a forged
    /// packet) that each find the other's ACKs unacceptable would otherwise ACK each other for ever.
    /// Segments with data or a FIN are always answered (they are not part of such a loop).
    pub invalid_ack_interval: Duration,
    /// TCP Fast Open (RFC 7413): data in the SYN.
    pub fast_open: FastOpenConfig,
    /// Linux's quick-ACK mode: the first data of a connection, and the first after a silence
    /// longer than the RTO, are acknowledged at once, segment by segment (up to 16 segments), rather
    /// than by the delayed-ACK rule (RFC 1122 §4.2.3.2, RFC 5681 §4.2), so that a peer in slow start
    /// or restarting after idle gets its ACK clock going without waiting out the delayed-ACK timer.
    pub quick_ack: bool,
    /// Set PSH on outgoing data as Linux does (measured against Linux 6.18 with packetdrill), rather
    /// than only on the segment that empties the send buffer (off). The rule:
    ///
    /// - Each write marks its last byte (Linux's `tcp_push` → `tcp_mark_push`); a write appended to
    ///   data not yet sent takes over the previous write's mark. A segment of one MSS or less that
    ///   holds a marked byte carries PSH, first transmission or retransmission alike.
    /// - Linux sends data as packets of several segments (TSO/GSO), and every packet of more than
    ///   one segment carries PSH, which segmentation leaves on its last segment only. With TSO here,
    ///   such a packet carries PSH; without, the stack works out the packet Linux would have sent
    ///   (`tcp_write_xmit`: the segments the congestion window leaves, at most half the window at
    ///   once as `tcp_cwnd_test`, at most what the pacing rate sends in a millisecond as
    ///   `tcp_tso_autosize`, within the peer's window) and sets PSH on its last segment when it has
    ///   several.
    /// - A window probe carrying data carries PSH (`tcp_write_wakeup`).
    ///
    /// Not followed: `MSG_MORE` and `MSG_EOR`, which the stack's API has no way to ask for, and
    /// the odd mark inside a long write that Linux's forced push (`forced_push`, half the largest
    /// window the peer offered) sometimes leaves: measured, 100 KB writes sent one segment at a
    /// time carried PSH only where they ended, but a write after a timeout (packetdrill's
    /// `cubic-rto-ss-ca-cwnd-bump`) had marks 16 to 18 KB apart, by a rule not pinned down.
    pub linux_push: bool,
    /// The fewest segments per packet in `linux_push`'s model of Linux's packets, whatever the
    /// pacing rate (Linux's `net.ipv4.tcp_min_tso_segs`, 2).
    pub min_tso_segments: u32,
    /// Loss detection (RFC 8985's RACK, the default, or RFC 6675's duplicate-ACK rule).
    pub loss_detection: LossDetection,
    /// The tail loss probe (RFC 8985 §7) with RACK: two smoothed RTTs after the last transmission
    /// with nothing acknowledged, one segment goes (new data, else the last segment again) so
    /// that a lost tail is repaired by SACK recovery rather than by the retransmission timeout.
    pub tail_loss_probe: bool,
    /// Proportional rate reduction (RFC 6937) sizes what recovery sends on each ACK, rather than
    /// RFC 6675's "pipe below cwnd" with cwnd halved at once.
    pub prr: bool,
    /// D-SACK (RFC 2883): a duplicate segment is reported as the first SACK block of the ACK it
    /// draws, and D-SACKs received widen RACK's reordering window.
    pub dsack: bool,
    /// Limited transmit (RFC 3042), as Linux counts what is in flight: before recovery, a segment
    /// SACKed (or, without SACK, one per duplicate ACK) has left the network, so each duplicate ACK
    /// lets a new segment go within the congestion window, and the receiver's answers to it keep
    /// the ACK clock going (and show a loss by RACK or a third duplicate ACK) where the window would
    /// otherwise stop everything.
    pub limited_transmit: bool,
    /// Nagle's algorithm (RFC 896, RFC 1122 §4.2.3.4) with Minshall's change, as Linux's
    /// `tcp_nagle_check`: a partial segment waits only while a partial segment sent before it is
    /// unacknowledged, not while any data is, so the tail of a write larger than a segment goes
    /// with its full segments instead of after their ACK. Off: the classic rule, anything
    /// unacknowledged holds it. (`TCP_NODELAY` turns either off for its socket.)
    pub minshall_nagle: bool,
    /// Grow the congestion window only while it is used (Linux's `tcp_is_cwnd_limited`, in the
    /// spirit of RFC 7661): when sending was held back by the window in the current round trip, or
    /// in slow start while the window is below twice the most in flight. An application-limited
    /// sender (request/response, a trickle) keeps the window it has used instead of growing it
    /// without bound on ACKs that never tested it.
    pub cwnd_validation: bool,
    /// Restart the congestion window after idle (RFC 5681 §4.1, as Linux's
    /// `tcp_slow_start_after_idle`, on by default there): data sent after more than an RTO with
    /// nothing in flight starts from a window halved for each RTO of idle time, down to the initial
    /// window, since the old one no longer measures the path and would go as one burst.
    pub restart_after_idle: bool,
    /// HyStart for CUBIC (Linux's default, `tcp_cubic`'s `hystart`): slow start ends before the
    /// first loss when the ACK train shows the path full or the RTT rises within a round trip.
    pub hystart: bool,
    /// Probe a closed window as Linux does (`tcp_xmit_probe_skb`): a segment with the sequence
    /// number before SND.UNA and no data, which the peer answers with an ACK carrying its window,
    /// and data follows as soon as a window opens. Off: RFC 9293 §3.8.6.1's probe of one new byte
    /// past the closed window.
    pub window_probe_without_data: bool,
    /// Explicit Congestion Notification (RFC 3168): a connection that negotiated it sends its new
    /// data ECN-capable (ECT(0)), echoes a congestion mark (CE) it receives with ECE until the
    /// sender's CWR, and answers an echo as it would a loss, once per window, without losing
    /// anything.
    pub ecn: Ecn,
}

/// TCP Fast Open (RFC 7413): a client that holds a cookie from an earlier connection to a server
/// sends its first data in the SYN, and the server hands that data to the application before the
/// handshake completes, saving a round trip. The cookie is a keyed PRF of the two addresses (§4.1.2),
/// so only a client that received one at its address can make the server keep state for its data.
/// The fields are Linux's `net.ipv4.tcp_fastopen` bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastOpenConfig {
    /// Clients may use it (`TcpStream`s that connect with data), asking for a cookie when they hold
    /// none (Linux's bit 0x1).
    pub client: bool,
    /// Listeners that turn it on take data in SYNs (Linux's 0x2).
    pub server: bool,
    /// Clients send data in the SYN without a cookie (Linux's 0x4), for servers known to take it.
    pub client_without_cookie: bool,
    /// Servers take SYN data without a valid cookie (Linux's 0x200): only where every client is
    /// trusted, since the cookie is what stops a spoofed SYN from making a server act on its data.
    pub server_without_cookie: bool,
    /// Every listener takes it, with this many connections at most whose SYN data was taken before
    /// their handshake completed (Linux's 0x400, the number in its upper 16 bits), without the
    /// application asking.
    pub every_listener: Option<usize>,
    /// The server's cookie key, in the byte order of Linux's `tcp_fastopen_key` (its four 32-bit
    /// words little-endian), so that a server's cookies can be checked against Linux's; `None`, the
    /// default, uses a key derived from the stack's secret.
    pub key: Option<[u8; 16]>,
}

impl Default for FastOpenConfig {
    fn default() -> Self {
        FastOpenConfig {
            client: true,
            server: true,
            client_without_cookie: false,
            server_without_cookie: false,
            every_listener: None,
            key: None,
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            header_prediction: true,
            congestion: CongestionAlgorithm::Cubic,
            slow_start_ack_limit: None,
            sack: true,
            timestamps: true,
            window_scaling: true,
            delayed_ack: Some(Duration::from_millis(40)),
            syn_cookies: true,
            segmentation_offload: true,
            alt_checksum: false,
            min_rto: Duration::from_millis(200),
            rto_min_on_variance: true,
            initial_rto: Duration::from_secs(1),
            max_rto: Duration::from_secs(60),
            max_retries: 15,
            orphan_retries: 8,
            syn_retries: 6,
            msl: Duration::from_secs(30),
            fin_wait2_timeout: Duration::from_secs(60),
            send_buffer: 1 << 20,
            recv_buffer: 1 << 20,
            keepalive: (Duration::from_secs(7200), Duration::from_secs(75), 9),
            challenge_acks_per_sec: 10,
            invalid_ack_interval: Duration::from_millis(500),
            fast_open: FastOpenConfig::default(),
            quick_ack: true,
            linux_push: true,
            min_tso_segments: 2,
            loss_detection: LossDetection::Rack,
            tail_loss_probe: true,
            prr: true,
            dsack: true,
            limited_transmit: true,
            minshall_nagle: true,
            cwnd_validation: true,
            restart_after_idle: true,
            hystart: true,
            window_probe_without_data: true,
            ecn: Ecn::Accept,
        }
    }
}

/// Bounds on everything that grows with input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Datagrams being reassembled at once; the oldest is evicted to make room.
    pub reassembly_datagrams: usize,
    /// Bytes of buffers held by all reassemblies together; the oldest are evicted to make room.
    pub reassembly_bytes: usize,
    /// Fragments of one datagram held at once. The default admits a 65535-byte datagram at the
    /// smallest MTU IPv4 allows, 68 bytes (1366 fragments); `reassembly_bytes` is the real bound.
    pub reassembly_fragments: usize,
    /// How long a reassembly waits for its missing fragments (RFC 791 suggests 15 s; Linux uses 30 s).
    pub reassembly_timeout: Duration,
    /// Default receive queue limit of a UDP socket, in bytes of the buffers the queued datagrams hold
    /// (their truesize, as Linux counts `SO_RCVBUF`), not of their payload: a datagram that arrived
    /// from a TUN link sits in a 2 KiB buffer whatever its size. 512 KiB holds 256 such datagrams,
    /// about as many small datagrams as Linux's default of 212,992 bytes does (Linux charges about
    /// 768 bytes for a small one). A server that expects larger bursts sets `recv_buffer_bytes` in
    /// [`UdpOptions`](crate::UdpOptions); each socket counts what it dropped
    /// ([`SocketCounters::queue_full`](crate::udp::SocketCounters)).
    pub udp_rx_queue_bytes: usize,
    /// Limit of the queue of intercepted UDP datagrams (`Stack::udp_intercept`), in bytes of their
    /// buffers as `udp_rx_queue_bytes` counts them: the one queue holds every intercepted flow's
    /// datagrams until the application reads them.
    pub udp_intercept_queue_bytes: usize,
    /// ICMP and ICMPv6 error messages (destination unreachable, time exceeded, parameter problem) each
    /// of the two sends per second to all destinations together, at most (Linux's
    /// `icmp_msgs_per_sec`). Echo replies are not limited: each answers one request and is no
    /// larger than it.
    pub icmp_rate_per_sec: u32,
    /// ICMP error messages that may be sent in a burst above `icmp_rate_per_sec` (Linux's
    /// `icmp_msgs_burst`).
    pub icmp_burst: u32,
    /// Time an ICMP error to one destination host costs (Linux's `icmp_ratelimit`, 1000 ms): after
    /// a burst of `icmp_peer_burst`, a host is sent one error per interval, whatever others are sent.
    /// Errors over the loopback interface are only held by `icmp_rate_per_sec`. Zero turns the
    /// per-destination limit off.
    pub icmp_peer_interval: Duration,
    /// ICMP errors one destination may be sent in a burst (Linux's fixed 6).
    pub icmp_peer_burst: u32,
    /// Free buffers the pool keeps per size class, for reuse (see `pool_free_bytes`).
    pub pool_free_buffers: usize,
    /// Bytes of free buffers the pool keeps per size class: when a burst of traffic (a thousand
    /// connections' worth of 64 KiB segments) is over, what is above this goes back to the heap at once.
    /// With the defaults a stack keeps at most about 18 MiB of free buffers (2 MiB of 2 KiB buffers and
    /// 8 MiB in each of the two larger classes); [`Stack::release_free_buffers`](crate::Stack::release_free_buffers)
    /// hands back all of it.
    pub pool_free_bytes: usize,
    /// Packets a loopback link queues.
    pub loopback_queue: usize,
    /// Echo replies kept for [`Stack::recv_echo_reply`](crate::Stack::recv_echo_reply).
    pub echo_reply_queue: usize,
    /// TCP connections (in every state, TIME-WAIT included) a stack holds at once.
    pub tcp_connections: usize,
    /// Largest listen backlog: connections a listener holds half-open, and established but not yet
    /// accepted, each.
    pub tcp_backlog: usize,
    /// Held SYNs (`Stack::tcp_intercept_holding`: connections taken but not answered until the
    /// application has asked their destination) at once, in all and to one destination address. A
    /// SYN past either bound is answered at once with a SYN cookie when
    /// [`TcpConfig::syn_cookies`] is on, and reaches the application established, not held (counted
    /// as `held_deferred`): a flood of SYNs with forged sources then costs the application no
    /// connection of its own. With cookies off it replaces the oldest held connection (to that
    /// destination when that bound is the one met; counted as `held_replaced`).
    pub tcp_held_syns: usize,
    /// Held SYNs to one destination address at once: see `tcp_held_syns`.
    pub tcp_held_syns_per_destination: usize,
    /// Out-of-order segments one connection holds.
    pub tcp_out_of_order: usize,
    /// Destinations whose path MTU is remembered at once (RFC 1191); the oldest entry makes room.
    pub path_mtu_entries: usize,
    /// How long a learned path MTU is believed before the link's MTU is tried again (RFC 1191 §6.3:
    /// at least 5 minutes, 10 recommended; Linux's `mtu_expires`, 600 s).
    pub path_mtu_expires: Duration,
    /// The smallest next-hop MTU a "fragmentation needed" may teach: smaller ones are ignored,
    /// counted (RFC 5927 §3: a forged message must not shrink segments to a few bytes). 552 is
    /// Linux's `min_pmtu` (512 bytes of TCP payload and two 20-byte headers), just below the 576
    /// bytes every IPv4 host must take (RFC 791). Linux, given less, clamps to `min_pmtu` and stops
    /// setting DF on that route; fastpath ignores the message instead, so a path that truly carries
    /// less than this gets TCP segments through only by the router's fragmenting, which DF forbids:
    /// turn `path_mtu_discovery` off, or lower this, for such a network.
    pub path_mtu_floor: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            reassembly_datagrams: 64,
            reassembly_bytes: 4 << 20,
            reassembly_fragments: 2048,
            reassembly_timeout: Duration::from_secs(30),
            udp_rx_queue_bytes: 512 << 10,
            udp_intercept_queue_bytes: 4 << 20,
            icmp_rate_per_sec: 1000,
            icmp_burst: 50,
            icmp_peer_interval: Duration::from_secs(1),
            icmp_peer_burst: 6,
            pool_free_buffers: 1024,
            pool_free_bytes: 8 << 20,
            loopback_queue: 4096,
            echo_reply_queue: 64,
            tcp_connections: 65536,
            tcp_backlog: 4096,
            tcp_held_syns: 1024,
            tcp_held_syns_per_destination: 256,
            tcp_out_of_order: 1024,
            path_mtu_entries: 1024,
            path_mtu_expires: Duration::from_secs(600),
            path_mtu_floor: 552,
        }
    }
}

/// The cache's bounds and timers (RFC 4861 §10's constants, Linux's defaults for the bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborConfig {
    /// Entries at most (Linux's `gc_thresh3`).
    pub max_entries: usize,
    /// Bytes of packets held per address being resolved (Linux's `unres_qlen_bytes`).
    pub queue_bytes: usize,
    /// How long a confirmed address stays REACHABLE (`BaseReachableTime`: an Ethernet interface
    /// draws its ReachableTime between half and one and a half times this, RFC 4861 §6.3.2).
    pub reachable: Duration,
    /// Between solicitations (`RETRANS_TIMER`).
    pub retrans: Duration,
    /// From the first use of a STALE address to its first probe (`DELAY_FIRST_PROBE_TIME`).
    pub delay_first_probe: Duration,
    /// Broadcast or multicast solicitations before giving an INCOMPLETE address up
    /// (`MAX_MULTICAST_SOLICIT`).
    pub max_multicast_solicit: u8,
    /// Unicast probes before giving a PROBE address up (`MAX_UNICAST_SOLICIT`).
    pub max_unicast_solicit: u8,
}

impl Default for NeighborConfig {
    fn default() -> NeighborConfig {
        NeighborConfig {
            max_entries: 1024,
            queue_bytes: 212_992,
            reachable: Duration::from_secs(30),
            retrans: Duration::from_secs(1),
            delay_first_probe: Duration::from_secs(5),
            max_multicast_solicit: 3,
            max_unicast_solicit: 3,
        }
    }
}

/// How an Ethernet interface behaves (`ethernet/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetConfig {
    /// The neighbour caches' bounds and timers (ARP's and neighbour discovery's alike).
    pub neighbor: NeighborConfig,
    /// The 802.1Q VLAN the interface is on: frames go out tagged with it, and only frames tagged
    /// with it come in. `None`: untagged frames only.
    pub vlan: Option<u16>,
    /// Solicitations sent to check an IPv6 address before using it (RFC 4862's
    /// `DupAddrDetectTransmits`, 1 as Linux); 0 uses an address at once.
    pub dad_transmits: u8,
    /// Router solicitations sent once the link-local address is usable, until a router advertises
    /// itself: the first at once, the second about 4 s later (RFC 4861 §6.3.7's
    /// `RTR_SOLICITATION_INTERVAL`), then at intervals that double, each within 10% of the
    /// double, up to `router_solicitation_max_interval` (RFC 7559's backoff). `None`, the
    /// default, solicits until a router answers (Linux's `router_solicitations` of -1); `Some(3)`
    /// is RFC 4861's `MAX_RTR_SOLICITATIONS`; `Some(0)` sends none and waits for routers'
    /// periodic advertisements.
    pub router_solicitations: Option<u32>,
    /// The longest interval between router solicitations (RFC 7559's `MAX_RTR_SOLICITATION_
    /// INTERVAL`, and Linux's `router_solicitation_max_interval`: an hour).
    pub router_solicitation_max_interval: Duration,
    /// Stable, opaque interface identifiers (RFC 7217) for the addresses formed from advertised
    /// prefixes: a keyed hash (SipHash, under a key derived from [`StackConfig::secret`]) of the
    /// prefix, the hardware address and a count of duplicates met, so that an address does not
    /// carry the hardware address off the link and differs from network to network, yet stays
    /// the same on one network for as long as the secret does (give `StackConfig::secret` to keep
    /// it across restarts). A duplicate found tries the next count, up to three more times (§6).
    /// Off, the default as in Linux (`addr_gen_mode` 0): the modified EUI-64 identifier of the
    /// hardware address (RFC 4862 §5.5.3). The link-local address is formed the same way, from
    /// `fe80::/64`, as Linux forms it under `addr_gen_mode` 2 and 3.
    pub stable_privacy: bool,
    /// Temporary addresses (RFC 8981), beside the address each advertised prefix gives.
    pub temporary: TemporaryAddresses,
}

/// Whether temporary addresses are formed and preferred (Linux's `use_tempaddr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TemporaryMode {
    /// None (`use_tempaddr` 0, Linux's default).
    #[default]
    Off,
    /// Formed, but the prefix's stable address is the source of new traffic (`use_tempaddr` 1).
    Form,
    /// Formed and preferred as the source of new traffic to global destinations (`use_tempaddr`
    /// 2; RFC 6724 §5's rule 7).
    Prefer,
}

/// RFC 8981's temporary addresses: for each prefix a router advertises for autoconfiguration,
/// an address whose interface identifier is random (a keyed hash, under a key drawn afresh for
/// each stack, of the prefix, a count and the time, §3.3.2), so that what one host sends from
/// one network cannot be linked over time by its address. Each is preferred for at most
/// `preferred_lifetime` less a random part of it (§3.8's `DESYNC_FACTOR`, up to 0.4 of it, so
/// that hosts do not all change at once) and valid for at most `valid_lifetime`, never beyond
/// the prefix's own lifetimes; a new one is formed `REGEN_ADVANCE` (2 s plus the time three
/// duplicate checks take) before the last one is deprecated, and the old one is kept for the
/// connections that use it until its valid lifetime ends. A duplicate tries another identifier,
/// three times at most (`TEMP_IDGEN_RETRIES`). At most 16 exist at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemporaryAddresses {
    /// Whether they are formed and preferred as sources.
    pub mode: TemporaryMode,
    /// `TEMP_VALID_LIFETIME`: RFC 8981's 2 days (Linux's `temp_valid_lft` is 7).
    pub valid_lifetime: Duration,
    /// `TEMP_PREFERRED_LIFETIME`: 1 day, RFC 8981's and Linux's `temp_prefered_lft`.
    pub preferred_lifetime: Duration,
}

impl Default for TemporaryAddresses {
    fn default() -> TemporaryAddresses {
        TemporaryAddresses {
            mode: TemporaryMode::Off,
            valid_lifetime: Duration::from_secs(2 * 86_400),
            preferred_lifetime: Duration::from_secs(86_400),
        }
    }
}

impl Default for EthernetConfig {
    fn default() -> EthernetConfig {
        EthernetConfig {
            neighbor: NeighborConfig::default(),
            vlan: None,
            dad_transmits: 1,
            router_solicitations: None,
            router_solicitation_max_interval: Duration::from_secs(3600),
            stable_privacy: false,
            temporary: TemporaryAddresses::default(),
        }
    }
}

/// The stack's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackConfig {
    /// The checksum routine used over payloads and, unless in-line, over IP headers (paper 001 fig. 11
    /// and today's SIMD form; see [`crate::checksum`]).
    pub checksum: Algorithm,
    /// Partridge & Pink §6.1: checksum 20-byte IPv4 headers with straight-line in-line code instead of
    /// a call to the general routine.
    pub inline_header_checksum: bool,
    /// Header prediction on input (after Van Jacobson's TCP header prediction, applied to UDP): a
    /// packet of the common shape (20-byte header, not a fragment, UDP or TCP, unicast to this host;
    /// over IPv6, UDP or TCP right after the fixed header) is checked with a few compares on its
    /// header read once as an array and handed straight to its transport (UDP's prediction first,
    /// inlined; TCP's out of line, after it); any other packet, and any packet that fails a check,
    /// takes the general path, which counts its drop (`in_unpredicted` of either family). (TCP's
    /// own header prediction, of the segment, is [`TcpConfig::header_prediction`]'s.)
    pub input_header_prediction: bool,
    /// Header templates on output: an unfragmented datagram's 20-byte IPv4 header is written in one
    /// store from its constant parts and the few fields that change (length, ident, addresses),
    /// instead of field by field from a parsed representation.
    pub output_header_template: bool,
    /// A route cache on output: each UDP socket keeps, for the last destination it sent to, the
    /// interface, MTU, source address and checksum mode, and the constant parts of the UDP and IPv4
    /// headers with their partial sums (pseudo-header included), so a `send_to` to the same place
    /// routes nothing and builds both headers from the template (with `output_header_template`).
    /// Partridge & Pink (paper 000 §6.2) found 4.3BSD's `sendto` paying for routing and PCB work on
    /// every datagram of an unconnected socket; 4.3BSD itself kept a route in a connected PCB
    /// (`inp_route`). The cache is dropped when the socket's PCB or options change and is stale once
    /// a route or interface is added.
    pub output_route_cache: bool,
    /// Paper 000 §7.1: copy and checksum in one pass, with deferred receive verification.
    pub copy_checksum: CopyChecksum,
    /// Partridge & Pink §6.2: when false (the default), `send_to` never connects the socket, even for a
    /// moment. When true, `send_to` on an unconnected socket connects it, sends and disconnects, as
    /// 4.3BSD's `udp_output` did, paying for a conflict lookup and two PCB updates per datagram.
    pub sendto_pseudo_connect: bool,
    /// Paper 000 §6.4, paper 001: recycle packet buffers, or allocate each from the heap.
    pub buffers: BufferMode,
    /// How UDP finds the socket for a datagram (paper 003; paper 000 §6.3).
    pub demux: DemuxStrategy,
    /// Checksum offload and elimination (paper 001, paper 002 §3.2).
    pub checksum_policy: ChecksumPolicy,
    /// Packets taken from a link per receive call, and queued before a link transmit call: batching,
    /// the user-space form of interrupt coalescing (paper 002 §2.1).
    pub rx_batch: usize,
    /// See `rx_batch`. Queued packets also leave at every `poll` and `flush`.
    pub tx_batch: usize,
    /// TTL of datagrams the stack originates.
    pub default_ttl: u8,
    /// Accept datagrams that arrive with TTL 0. RFC 1122 §3.2.1.7 says a host MUST NOT discard a
    /// datagram just because its TTL is below 2, and Linux delivers them (as fastpath's IPv6 does a
    /// hop limit of 0); RFC 791's "destroyed" concerns a datagram a router would forward. Off, such a
    /// datagram is dropped, counted (`ipv4: ttl zero`).
    pub accept_ttl_zero: bool,
    /// Path MTU discovery (RFC 1191), as Linux does it by default for TCP: TCP segments are sent with
    /// the don't-fragment bit, and a "fragmentation needed" (ICMP type 3 code 4) quoting a segment in
    /// flight (RFC 5927 §5.2) lowers the destination's path MTU in a bounded, expiring cache, the
    /// connection's MSS with it, and resends what is outstanding at the new size (without taking it
    /// for congestion, like Linux's `tcp_simple_retransmit`); connections opened later start with
    /// the smaller MSS. UDP never sets DF and fragments locally, to the path MTU when one is known
    /// (see [`udp`](crate::udp)). Off: nothing carries DF and "fragmentation needed" is ignored,
    /// counted (`IcmpFragNeededIgnored`), as before path MTU discovery.
    pub path_mtu_discovery: bool,
    /// Ports handed out to sockets bound to port 0 (IANA's dynamic range by default).
    pub ephemeral_ports: RangeInclusive<u16>,
    /// TCP.
    pub tcp: TcpConfig,
    /// The link layer of interfaces whose link carries Ethernet frames (TAP, AF_XDP).
    pub ethernet: EthernetConfig,
    /// Every bound.
    pub limits: Limits,
    /// The key of every secret-derived value (initial sequence numbers, SYN cookies, IP
    /// identification; see [`crate::secret`]). `None`, the default, draws a fresh random key for each
    /// stack; a fixed key is for reproducible runs only.
    pub secret: Option<SecretKey>,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            checksum: Algorithm::fastest(),
            inline_header_checksum: true,
            input_header_prediction: true,
            output_header_template: true,
            output_route_cache: true,
            copy_checksum: CopyChecksum::Fused,
            sendto_pseudo_connect: false,
            buffers: BufferMode::Pool,
            demux: DemuxStrategy::default(),
            checksum_policy: ChecksumPolicy::default(),
            rx_batch: 32,
            tx_batch: 32,
            default_ttl: 64,
            accept_ttl_zero: true,
            path_mtu_discovery: true,
            ephemeral_ports: 49152..=65535,
            tcp: TcpConfig::default(),
            ethernet: EthernetConfig::default(),
            limits: Limits::default(),
            secret: None,
        }
    }
}

impl StackConfig {
    /// The 4.3BSD path the papers started from: the reference checksum called as a routine for every
    /// header and payload, copy and checksum as separate passes, a heap allocation per packet,
    /// pseudo-connect on `send_to`, linear PCB search, one packet per link call, no offload, headers
    /// parsed and emitted field by field.
    pub fn classic() -> StackConfig {
        StackConfig {
            checksum: Algorithm::Rfc1071,
            inline_header_checksum: false,
            input_header_prediction: false,
            output_header_template: false,
            output_route_cache: false,
            copy_checksum: CopyChecksum::Separate,
            sendto_pseudo_connect: true,
            buffers: BufferMode::Heap,
            demux: DemuxStrategy::Linear,
            checksum_policy: ChecksumPolicy {
                use_offload: false,
                eliminate_on_protected_hop: false,
            },
            rx_batch: 1,
            tx_batch: 1,
            tcp: TcpConfig {
                header_prediction: false,
                segmentation_offload: false,
                loss_detection: LossDetection::DupAck,
                tail_loss_probe: false,
                prr: false,
                dsack: false,
                limited_transmit: false,
                minshall_nagle: false,
                cwnd_validation: false,
                window_probe_without_data: false,
                ecn: Ecn::Off,
                hystart: false,
                ..TcpConfig::default()
            },
            ..StackConfig::default()
        }
    }
}
