//! Counters for every layer, in the manner of `netstat -s`, and every drop by its reason.

use std::fmt;

macro_rules! drop_reasons {
    ($($(#[doc = $doc:literal])* $name:ident => $label:literal,)*) => {
        /// Why a packet (or a datagram) was dropped. Every drop in the stack is counted under one of these.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];

            /// A short lowercase label, as printed by the CLI.
            pub const fn label(self) -> &'static str {
                match self {
                    $(DropReason::$name => $label,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// IPv4: shorter than a header, or than its IHL says.
    Ipv4Truncated => "ipv4: truncated",
    /// IPv4: version field is not 4.
    Ipv4BadVersion => "ipv4: bad version",
    /// IPv4: IHL below 5 or past the packet.
    Ipv4BadHeaderLength => "ipv4: bad header length",
    /// IPv4: total length below the header length or past the packet.
    Ipv4BadTotalLength => "ipv4: bad total length",
    /// IPv4: header checksum does not verify.
    Ipv4BadChecksum => "ipv4: bad header checksum",
    /// IPv4: arrived with TTL 0.
    Ipv4TtlZero => "ipv4: ttl zero",
    /// IPv4: source is a broadcast or multicast address, or a loopback address on another interface
    /// than loopback.
    Ipv4BadSource => "ipv4: bad source address",
    /// IPv4: a packet from outside (any interface but loopback) whose source is one of this host's own
    /// addresses: a spoofed packet such as the "LAND" attack, which would make the host answer itself.
    /// Linux drops these too (as martians).
    Ipv4OwnSource => "ipv4: own address as source from outside",
    /// IPv4: destination is none of ours (this host does not forward), or a loopback address on
    /// another interface than loopback.
    Ipv4NotForUs => "ipv4: not for this host",
    /// IPv4: malformed options (RFC 1122 §3.2.1.8: an option length that cannot be, a record
    /// route, source route or timestamp pointer out of range, a timestamp overflow count that would
    /// overflow), answered with an ICMP parameter problem.
    Ipv4BadOptions => "ipv4: bad options",
    /// IPv4: protocol this stack does not speak.
    Ipv4UnknownProtocol => "ipv4: unknown protocol",
    /// IPv4 output: no route to the destination.
    Ipv4NoRoute => "ipv4: no route",
    /// IPv4 output: the link's transmit queue was full.
    LinkQueueFull => "link: transmit queue full",
    /// Fragment: bad length (a non-final fragment not a multiple of 8 bytes, or empty).
    FragmentBadLength => "fragment: bad length",
    /// Fragment: would extend the datagram past 65535 bytes (ping of death).
    FragmentTooBig => "fragment: datagram past 65535 bytes",
    /// Fragment: a first fragment too short to hold the transport header.
    FragmentTinyFirst => "fragment: tiny first fragment",
    /// Fragment: an exact duplicate of one already held (the duplicate is dropped).
    FragmentDuplicate => "fragment: duplicate",
    /// Reassembly: fragments overlapped; the whole datagram was discarded.
    ReassemblyOverlap => "reassembly: overlapping fragments",
    /// Reassembly: timed out with fragments missing.
    ReassemblyTimeout => "reassembly: timeout",
    /// Reassembly: evicted to stay within the limits on datagrams or bytes.
    ReassemblyEvicted => "reassembly: evicted by limits",
    /// Reassembly: more fragments than a datagram may have.
    ReassemblyTooManyFragments => "reassembly: too many fragments",
    /// Reassembly: final fragments disagree on the datagram's length.
    ReassemblyInconsistent => "reassembly: inconsistent length",
    /// UDP: shorter than its header.
    UdpTruncated => "udp: truncated",
    /// UDP: length field below 8 or past the IP payload.
    UdpBadLength => "udp: bad length",
    /// UDP: checksum does not verify (on arrival, or deferred to the copy to the application).
    UdpBadChecksum => "udp: bad checksum",
    /// UDP: no socket for the destination port (ICMP port unreachable is sent, rate permitting).
    UdpNoSocket => "udp: no socket",
    /// UDP: an ICMP error quoting a datagram of no socket of ours (Linux counts it in `InErrors`).
    UdpIcmpNoSocket => "udp: icmp error for no socket",
    /// UDP over IPv6: a zero checksum, which IPv6 does not allow (RFC 8200 §8.1).
    UdpZeroChecksumIpv6 => "udp: zero checksum over ipv6",
    /// UDP: the socket's receive queue was full.
    UdpQueueFull => "udp: receive queue full",
    /// UDP: intercepted (to another host's address, on an intercepting interface) with interception
    /// of UDP off.
    UdpInterceptOff => "udp: intercepted, interception off",
    /// UDP: the queue of intercepted datagrams was full.
    UdpInterceptQueueFull => "udp: intercept queue full",
    /// ICMP: shorter than its header.
    IcmpTruncated => "icmp: truncated",
    /// ICMP, ICMPv6 or another protocol intercepted (to another host's address, on an intercepting
    /// interface): only TCP and UDP are intercepted.
    InterceptedOther => "ip: intercepted, not tcp or udp",
    /// ICMP: checksum does not verify.
    IcmpBadChecksum => "icmp: bad checksum",
    /// ICMP: a type this stack does not handle, or a malformed error message.
    IcmpUnhandled => "icmp: unhandled type",
    /// ICMP: a redirect not taken (RFC 1122 §3.2.2.2, and Linux's `secure_redirects`): not from
    /// the gateway the destination goes through, or to a gateway that is not on the link and
    /// already a gateway of a route, or about a destination or gateway that is ours, a broadcast
    /// or a group.
    IcmpRedirectRejected => "icmp: redirect not taken",
    /// ICMP: an echo or timestamp request sent to a broadcast address (ignored, RFC 1122 §3.2.2.6,
    /// as Linux's `icmp_echo_ignore_broadcasts`).
    IcmpBroadcastEcho => "icmp: broadcast echo request",
    /// ICMP: an echo or timestamp request whose record route or timestamp option has room for part
    /// of an entry only, so that the reply's cannot be filled in (Linux sends no reply either).
    IcmpEchoOptions => "icmp: request options cannot be echoed",
    /// ICMP: an echo reply nobody was waiting for, or the reply queue was full.
    IcmpEchoReplyDropped => "icmp: echo reply dropped",
    /// ICMP output: an error held back by the global budget (`Limits::icmp_rate_per_sec`,
    /// `icmp_burst`; Linux's `RateLimitGlobal`).
    IcmpRateLimited => "icmp: error rate-limited (all destinations)",
    /// ICMP output: an error held back by its destination's own budget (`Limits::icmp_peer_interval`,
    /// `icmp_peer_burst`; Linux's `RateLimitHost`).
    IcmpPeerRateLimited => "icmp: error rate-limited (its destination)",
    /// ICMP: a "fragmentation needed" while `path_mtu_discovery` is off (nothing is sent with DF).
    IcmpFragNeededIgnored => "icmp: frag needed, path mtu discovery off",
    /// Path MTU: a "fragmentation needed" quoting a datagram of no socket or connection of ours.
    PathMtuNoSocket => "pmtu: frag needed for no socket",
    /// Path MTU: a next-hop MTU below the floor (`Limits::path_mtu_floor`; RFC 5927 §3, a forged
    /// message must not shrink segments to nothing).
    PathMtuBelowFloor => "pmtu: mtu below the floor",
    /// Path MTU: a next-hop MTU not smaller than the path MTU in use (RFC 1191 §6.3: never raised by
    /// a "fragmentation needed").
    PathMtuNotSmaller => "pmtu: mtu not below the path mtu",
    /// IPv6: shorter than the fixed header, or than its payload length says.
    Ipv6Truncated => "ipv6: truncated",
    /// IPv6: a source no packet may have: multicast, or loopback or unspecified from a link.
    Ipv6BadSource => "ipv6: bad source address",
    /// IPv6: one of this host's own addresses as the source of a packet from a link.
    Ipv6OwnSource => "ipv6: own address as source from outside",
    /// IPv6: to an address that is not this host's, nor a group it belongs to.
    Ipv6NotForUs => "ipv6: not for this host",
    /// IPv6: an extension header runs past the packet.
    Ipv6ExtensionTruncated => "ipv6: extension header truncated",
    /// IPv6: an extension header with a bad field, an unrecognized next header or an unknown option
    /// that asks for an error: answered with ICMPv6 parameter problem (RFC 8200 §4).
    Ipv6ParameterProblem => "ipv6: parameter problem",
    /// IPv6: an unknown option whose action bits say discard silently (RFC 8200 §4.2).
    Ipv6UnknownOption => "ipv6: unknown option (discard)",
    /// IPv6: a routing header of type 0 with segments left (RFC 5095).
    Ipv6RoutingType0 => "ipv6: routing header type 0",
    /// IPv6: more extension headers, options or padding than the limits allow.
    Ipv6ChainTooLong => "ipv6: extension header chain past the limits",
    /// IPv6: an upper-layer protocol this host does not speak (answered with a parameter problem,
    /// code 1, after IPv6 delivered it).
    Ipv6UnknownProtocol => "ipv6: unknown next header",
    /// IPv6: next header 59, nothing to deliver (RFC 8200 §4.7).
    Ipv6NoNextHeader => "ipv6: no next header",
    /// IPv6: a first fragment without the whole header chain (RFC 7112 §5).
    Ipv6IncompleteChain => "ipv6: first fragment with an incomplete header chain",
    /// IPv6: a fragment while reassembly is not available.
    Ipv6Fragment => "ipv6: fragment (no reassembly)",
    /// IPv6 output: no route to the destination, or no source address for it.
    Ipv6NoRoute => "ipv6: no route",
    /// ICMPv6: shorter than its header.
    Icmpv6Truncated => "icmpv6: truncated",
    /// ICMPv6: checksum (with the pseudo-header) does not verify.
    Icmpv6BadChecksum => "icmpv6: bad checksum",
    /// ICMPv6: an error message of a type this stack does not handle, an unknown informational type,
    /// or an error whose quote cannot be read.
    Icmpv6Unhandled => "icmpv6: unhandled type",
    /// ICMPv6: router solicitation, advertisement or redirect: this host is not a router and
    /// configures its addresses itself (as the kernel sends on a TUN link when it comes up).
    Icmpv6RouterDiscovery => "icmpv6: router discovery ignored",
    /// ICMPv6: neighbour solicitation or advertisement: a TUN link has no link-layer addresses to
    /// resolve (the kernel's duplicate address detection sends these).
    Icmpv6NeighborDiscovery => "icmpv6: neighbour discovery ignored",
    /// ICMPv6: multicast listener discovery (queries and reports): this host joins no groups beyond
    /// all-nodes, which needs no report (RFC 3810 §6).
    Icmpv6ListenerDiscovery => "icmpv6: multicast listener discovery ignored",
    /// ICMPv6: an echo reply nobody was waiting for.
    Icmpv6EchoReplyDropped => "icmpv6: echo reply dropped",
    /// ICMPv6 output: an error held back by the global budget (`Limits::icmp_rate_per_sec`,
    /// `icmp_burst`).
    Icmpv6RateLimited => "icmpv6: error rate-limited (all destinations)",
    /// ICMPv6 output: an error held back by its destination's own budget
    /// (`Limits::icmp_peer_interval`, `icmp_peer_burst`).
    Icmpv6PeerRateLimited => "icmpv6: error rate-limited (its destination)",
    /// TCP: shorter than its header.
    TcpTruncated => "tcp: truncated",
    /// TCP: data offset below 5 words or past the segment, or malformed options.
    TcpBadHeader => "tcp: bad header or options",
    /// TCP: checksum does not verify.
    TcpBadChecksum => "tcp: bad checksum",
    /// TCP: to a broadcast address, or from an address no connection may have.
    TcpBadAddress => "tcp: broadcast or bad address",
    /// TCP: no connection or listener for it (a RST is sent unless it was one).
    TcpNoSocket => "tcp: no socket",
    /// TCP: intercepted (to another host's address, on an intercepting interface) with no
    /// intercepting listener and no connection for it.
    TcpInterceptOff => "tcp: intercepted, no intercepting listener",
    /// TCP: an impossible combination of control bits (SYN with FIN or RST).
    TcpBadFlags => "tcp: bad flags",
    /// TCP: sequence numbers outside the receive window (an ACK is sent, RFC 9293 §3.10.7.4).
    TcpOutOfWindow => "tcp: outside the window",
    /// TCP: an old timestamp (PAWS, RFC 7323 §5).
    TcpPaws => "tcp: old timestamp (paws)",
    /// TCP: a SYN-ACK echoing a timestamp our SYN never carried (answered with a RST, as Linux's
    /// `PAWSActiveRejected`).
    TcpBadEcho => "tcp: syn-ack echoes a timestamp never sent",
    /// TCP: acknowledges data never sent, or far older than the window (RFC 5961 §5).
    TcpBadAck => "tcp: unacceptable ack",
    /// TCP: a RST or SYN that did not match exactly, answered with a challenge ACK (RFC 5961 §3, §4).
    TcpChallenged => "tcp: rst or syn challenged",
    /// TCP: a segment without ACK on a synchronized connection.
    TcpNoAck => "tcp: no ack bit",
    /// TCP: a listener's queues were full (and SYN cookies off or the ACK not a valid cookie).
    TcpListenOverflow => "tcp: listen queue full",
    /// TCP: an ACK to a listener that is not a valid SYN cookie, while cookies sent may be valid
    /// (answered with RST).
    TcpBadCookie => "tcp: bad syn cookie",
    /// TCP: an ACK to a listener, matching no connection, when no SYN cookie has been sent for two
    /// minutes: a segment of a connection gone (answered with RST, RFC 9293 §3.10.7.2).
    TcpStrayAck => "tcp: ack to a listener, no connection",
    /// TCP: the connection table was full.
    TcpTooManyConnections => "tcp: too many connections",
    /// TCP: the out-of-order queue was full.
    TcpOutOfOrderFull => "tcp: out-of-order queue full",
    /// TCP: the receive queue was past its bound (data beyond what the window allowed).
    TcpReceiveQueueFull => "tcp: receive queue full",
    /// TCP: data for a connection the application has closed (answered with RST).
    TcpDataAfterClose => "tcp: data after close",
    /// TCP: an ICMP error quoting a sequence number not in flight, outside `[SND.UNA, SND.NXT)` (RFC
    /// 5927 §5.2; Linux's `OutOfWindowIcmps`).
    TcpIcmpOutOfWindow => "tcp: icmp quotes a sequence not in flight",
    /// TCP: an ICMP error quoting a segment of no connection of ours (Linux counts it in
    /// `InErrors`).
    TcpIcmpNoConnection => "tcp: icmp error for no connection",
    /// TCP: a segment the state machine has no use for (after the connection's end, a SYN-ACK
    /// without a SYN sent, ...).
    TcpUnexpected => "tcp: unexpected segment",
    /// Ethernet: a frame shorter than its header, an 802.3 length or a stacked (Q-in-Q) tag.
    EthernetMalformed => "ethernet: malformed frame",
    /// Ethernet: to another host's address, or a group we do not listen to.
    EthernetNotForUs => "ethernet: not for us",
    /// Ethernet: from a group address, or from our own (a loop, or a reflection).
    EthernetBadSource => "ethernet: bad or own source address",
    /// Ethernet: tagged with another VLAN than ours (or tagged when we have none, or untagged
    /// when we have one).
    EthernetOtherVlan => "ethernet: other vlan",
    /// Ethernet: a type other than IPv4, IPv6 or ARP.
    EthernetUnknownType => "ethernet: unknown ethertype",
    /// ARP: not an Ethernet/IPv4 message, or truncated.
    ArpMalformed => "arp: malformed",
    /// ARP: the sender's hardware address is a group or zero address.
    ArpBadSender => "arp: bad sender address",
    /// ARP: from our own hardware address.
    ArpFromUs => "arp: from us",
    /// ARP: another host claims one of our addresses (a conflict, or spoofing).
    ArpConflict => "arp: claims our address",
    /// Neighbour discovery: a hop limit other than 255 (from off the link; RFC 4861 §7.1).
    NdpNotFromLink => "ndp: hop limit not 255",
    /// Neighbour discovery: bad checksum.
    NdpBadChecksum => "ndp: bad checksum",
    /// Neighbour discovery: a message RFC 4861 §6.1 or §7.1 says to discard (a code other than 0,
    /// too short, an option of length 0, a multicast target, a source or destination the message
    /// may not have).
    NdpMalformed => "ndp: invalid message",
    /// Neighbour discovery: from our own hardware address.
    NdpFromUs => "ndp: from us",
    /// Neighbour discovery: another node claims one of our addresses.
    NdpConflict => "ndp: claims our address",
    /// Neighbour discovery: a solicitation for an address that is not ours.
    NdpNotOurs => "ndp: solicitation for another address",
    /// Neighbour discovery: a router solicitation (for routers; we are a host).
    NdpForRouters => "ndp: router solicitation",
    /// Neighbour discovery: a redirect from a router that is not the destination's first hop
    /// now, or for a destination the application routed itself (RFC 4861 §8.1).
    NdpRedirectNotFirstHop => "ndp: redirect not from the first hop",
    /// Neighbour discovery: a solicitation not sent, for want of an address of ours to send it
    /// from (every address still being checked).
    NdpNoSource => "ndp: no source address for a solicitation",
    /// Neighbour cache: full of addresses being resolved; the packet had nowhere to wait.
    NeighborTableFull => "neighbor: table full",
    /// Neighbour cache: a packet waiting for an address was pushed out by newer ones (the queue's
    /// byte bound, Linux's `unres_qlen_bytes`).
    NeighborQueueFull => "neighbor: resolution queue full",
    /// Neighbour cache: the neighbour never answered; what waited for it is dropped.
    NeighborUnreachable => "neighbor: unreachable",
}

/// Drop counts, one per [`DropReason`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Drops([u64; DropReason::ALL.len()]);

impl fmt::Debug for Drops {
    /// Only the reasons with a non-zero count, by label: `Drops {"udp: no socket": 3}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Drops ")?;
        f.debug_map()
            .entries(self.nonzero().map(|(r, n)| (r.label(), n)))
            .finish()
    }
}

impl Default for Drops {
    fn default() -> Self {
        Drops([0; DropReason::ALL.len()])
    }
}

impl Drops {
    /// Counts one drop.
    #[inline]
    pub fn add(&mut self, reason: DropReason) {
        self.0[reason as usize] += 1;
    }

    /// Drops counted for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }

    /// Adds `other`'s counts to these and zeroes `other`'s.
    pub fn take_from(&mut self, other: &mut Drops) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter_mut()) {
            *a += std::mem::take(b);
        }
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Reasons with a non-zero count.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// IPv4 counters (RFC 4293 names in spirit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpCounters {
    /// Packets received from links.
    pub in_receives: u64,
    /// Datagrams delivered to ICMP or UDP.
    pub in_delivers: u64,
    /// Datagrams handed down by ICMP and UDP.
    pub out_requests: u64,
    /// Packets handed to links (fragments count one each).
    pub out_packets: u64,
    /// Datagrams fragmented on output.
    pub frag_oks: u64,
    /// Fragments created on output.
    pub frag_creates: u64,
    /// Fragments received.
    pub reasm_reqds: u64,
    /// Datagrams reassembled.
    pub reasm_oks: u64,
    /// Packets input checked on the general path: every packet when `input_header_prediction` is
    /// off, only those not of the predicted shape when it is on.
    pub in_unpredicted: u64,
    /// Datagrams whose header output wrote field by field: every one when `output_header_template`
    /// is off, only fragmented ones when it is on.
    pub out_untemplated: u64,
    /// IPv4 header sums computed by the general checksum routine rather than in line
    /// (`inline_header_checksum` off, or headers with options).
    pub header_sums_by_routine: u64,
    /// The path MTU cache.
    pub path_mtu: PathMtuCounters,
}

/// A path MTU cache's counters (RFC 1191, RFC 8201).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathMtuCounters {
    /// Path MTUs lowered by a "fragmentation needed" (or "packet too big").
    pub learned: u64,
    /// Messages whose MTU was refused: below the floor, or not smaller than the path MTU in use
    /// (each also counted as a drop by its reason).
    pub ignored: u64,
    /// Entries that expired (the path MTU goes back to the link's).
    pub expired: u64,
    /// Entries evicted to make room for a new destination.
    pub evicted: u64,
}

/// IPv6 counters (RFC 4293's `ipSystemStatsTable` for IPv6, in part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ip6Counters {
    /// Packets received from links.
    pub in_receives: u64,
    /// Packets delivered to ICMPv6, UDP or TCP.
    pub in_delivers: u64,
    /// Packets to a multicast group of this host.
    pub in_mcast_pkts: u64,
    /// Extension headers walked on input.
    pub in_ext_headers: u64,
    /// Atomic fragments processed at once (RFC 6946).
    pub in_atomic_fragments: u64,
    /// Packets that took the general input path: header prediction off, or not the common shape
    /// (a UDP datagram or TCP segment right after the fixed header, to one of this host's unicast
    /// addresses).
    pub in_unpredicted: u64,
    /// Packets handed down by ICMPv6, UDP and TCP.
    pub out_requests: u64,
    /// Packets handed to links (fragments count one each).
    pub out_packets: u64,
    /// Fragments received.
    pub reasm_reqds: u64,
    /// Packets reassembled.
    pub reasm_oks: u64,
    /// Packets fragmented on output.
    pub frag_oks: u64,
    /// Fragments created on output.
    pub frag_creates: u64,
    /// The path MTU cache (RFC 8201).
    pub path_mtu: PathMtuCounters,
}

/// ICMPv6 counters (RFC 4293's `icmpStatsTable` for IPv6, in part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Icmp6Counters {
    /// Messages received.
    pub in_msgs: u64,
    /// Echo requests received.
    pub in_echos: u64,
    /// Echo replies received.
    pub in_echo_reps: u64,
    /// Errors received (destination unreachable, packet too big, time exceeded, parameter problem).
    pub in_errors: u64,
    /// Packet too big messages received.
    pub in_pkt_too_bigs: u64,
    /// Neighbour, router and multicast listener discovery messages received (and ignored).
    pub in_discovery: u64,
    /// Messages sent.
    pub out_msgs: u64,
    /// Echo replies sent.
    pub out_echo_reps: u64,
    /// Destination unreachable messages sent.
    pub out_dest_unreachs: u64,
    /// Parameter problem messages sent.
    pub out_param_probs: u64,
    /// Time exceeded messages sent.
    pub out_time_excds: u64,
}

/// UDP counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// Datagrams queued to sockets.
    pub in_datagrams: u64,
    /// Datagrams read by applications.
    pub in_read: u64,
    /// Datagrams sent.
    pub out_datagrams: u64,
    /// Datagrams sent with no checksum (socket option or Kay & Pasquale's rule).
    pub out_no_checksum: u64,
    /// Datagrams sent with the checksum left to the link.
    pub out_checksum_offloaded: u64,
    /// Datagrams received whose checksum the link vouched for.
    pub in_checksum_offloaded: u64,
    /// Datagrams received with no checksum (zero field).
    pub in_no_checksum: u64,
    /// Datagrams verified in full on arrival (`copy_checksum` separate), not while copied out.
    pub in_checksum_on_arrival: u64,
    /// Datagrams sent with their checksum in a pass of its own after the copy (`copy_checksum`
    /// separate), not fused with it.
    pub out_checksum_separate: u64,
    /// Routes worked out for a send (next hop, source, checksum mode, header template): once per
    /// destination with `output_route_cache`, once per datagram without.
    pub route_lookups: u64,
    /// Sends that connected the socket for the datagram and disconnected it after
    /// (`sendto_pseudo_connect`, 4.3BSD's way).
    pub pseudo_connects: u64,
}

/// ICMP counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IcmpCounters {
    /// Messages received.
    pub in_msgs: u64,
    /// Echo requests received.
    pub in_echos: u64,
    /// Echo replies received.
    pub in_echo_reps: u64,
    /// Destination unreachable messages received.
    pub in_dest_unreachs: u64,
    /// Time exceeded messages received.
    pub in_time_excds: u64,
    /// Parameter problem messages received.
    pub in_parm_probs: u64,
    /// Redirects received (taken or not: `icmp: redirect not taken`).
    pub in_redirects: u64,
    /// Timestamp requests received.
    pub in_timestamps: u64,
    /// Timestamp replies received.
    pub in_timestamp_reps: u64,
    /// Messages sent.
    pub out_msgs: u64,
    /// Echo requests sent.
    pub out_echos: u64,
    /// Echo replies sent.
    pub out_echo_reps: u64,
    /// Destination unreachable messages sent.
    pub out_dest_unreachs: u64,
    /// Time exceeded messages sent.
    pub out_time_excds: u64,
    /// Parameter problem messages sent.
    pub out_parm_probs: u64,
    /// Timestamp replies sent.
    pub out_timestamp_reps: u64,
}

/// TCP counters (RFC 4022 names in spirit, plus the fast paths).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Connections opened by `connect`.
    pub active_opens: u64,
    /// Connections opened by a listener.
    pub passive_opens: u64,
    /// SYNs a holding listener took without answering, for the application to confirm or refuse.
    pub held_syns: u64,
    /// Held connections the application confirmed (their SYN-ACK sent).
    pub held_confirmed: u64,
    /// Held connections the application refused: with a RST, an ICMP unreachable, or in silence.
    pub held_refused: u64,
    /// SYNs to a holding listener answered at once with a SYN cookie, held SYNs being at their bound
    /// (`Limits::tcp_held_syns`): the handshake first, the application asks the destination after.
    pub held_deferred: u64,
    /// Held connections dropped in silence to make room for a newer SYN (held SYNs at their bound,
    /// cookies off).
    pub held_replaced: u64,
    /// TIME-WAIT connections ended early to make room in a full table (`Limits::tcp_connections`).
    pub time_wait_recycled: u64,
    /// Connection attempts that failed (reset, refused or timed out before established).
    pub attempt_fails: u64,
    /// Established connections reset or timed out.
    pub estab_resets: u64,
    /// Segments received (valid header and checksum).
    pub in_segs: u64,
    /// Segments sent.
    pub out_segs: u64,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// RSTs sent.
    pub out_rsts: u64,
    /// Segments handled by header prediction as a pure ACK (paper 000 §2).
    pub predicted_acks: u64,
    /// Segments handled by header prediction as in-order data.
    pub predicted_data: u64,
    /// Loss recoveries entered before the retransmission timer: by duplicate ACKs, RFC 6675's
    /// SACK rule or RACK.
    pub fast_recoveries: u64,
    /// Segments RACK (RFC 8985) marked lost: a segment sent after them was delivered and the
    /// reordering window passed.
    pub rack_lost: u64,
    /// RACK reordering timer expiries (a look for losses once a reordering window ran out).
    pub rack_reorder_timeouts: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub loss_probes: u64,
    /// Tail loss probes that repaired a loss (their ACK went past them without a D-SACK: the window
    /// was reduced, as for a recovery).
    pub loss_probe_recoveries: u64,
    /// D-SACK blocks sent, each reporting a duplicate segment (RFC 2883).
    pub dsacks_sent: u64,
    /// D-SACK blocks received: a segment of ours arrived twice.
    pub dsacks_received: u64,
    /// Data segments that arrived marked CE (congestion experienced) and were echoed (RFC 3168).
    pub ecn_ce_received: u64,
    /// Congestion window reductions for an ECN echo (one per window at most).
    pub ecn_reductions: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Doublings of a retransmission timeout undone by an ICMP unreachable about the segment
    /// (RFC 6069).
    pub rto_reverts: u64,
    /// SYN-ACKs sent as SYN cookies.
    pub syn_cookies_sent: u64,
    /// Connections made from a valid SYN cookie.
    pub syn_cookies_ok: u64,
    /// Connections a listener took by TCP Fast Open, with their SYN's data (RFC 7413).
    pub fast_open_accepted: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Duplicate ACKs not sent for unacceptable segments without data, because the connection sent
    /// one less than `invalid_ack_interval` ago (Linux's `TCPACKSkipped*`).
    pub invalid_acks_skipped: u64,
    /// Segments sent with the checksum left to the link.
    pub out_checksum_offloaded: u64,
    /// Packets larger than the MSS handed to the link to segment (TSO).
    pub out_tso_packets: u64,
    /// Received segments whose checksum the link vouched for.
    pub in_checksum_offloaded: u64,
    /// Segments sent without a checksum (negotiated elimination, paper 001).
    pub out_no_checksum: u64,
    /// Segments taken without verifying a checksum (negotiated elimination).
    pub in_no_checksum: u64,
    /// Segments sent with their checksum in a pass of its own after the copy (`copy_checksum`
    /// separate).
    pub out_checksum_separate: u64,
    /// Timer entries that came due before their connection's deadline, which had moved later since
    /// (the price of not moving entries per segment): each cost a look and a reschedule.
    pub timer_early: u64,
}

/// All of a stack's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// IPv4.
    pub ip: IpCounters,
    /// UDP.
    pub udp: UdpCounters,
    /// ICMP.
    pub icmp: IcmpCounters,
    /// IPv6.
    pub ip6: Ip6Counters,
    /// ICMPv6.
    pub icmp6: Icmp6Counters,
    /// TCP.
    pub tcp: TcpCounters,
    /// Drops by reason.
    pub drops: Drops,
}

impl fmt::Display for Counters {
    /// Prints like `netstat -s`, grouped by layer; counters that are zero are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = &self.ip;
        writeln!(f, "ip:")?;
        for (n, what) in [
            (ip.in_receives, "packets received"),
            (ip.in_delivers, "datagrams delivered"),
            (ip.out_requests, "datagrams sent"),
            (ip.out_packets, "packets sent"),
            (ip.frag_oks, "datagrams fragmented"),
            (ip.frag_creates, "fragments created"),
            (ip.reasm_reqds, "fragments received"),
            (ip.reasm_oks, "datagrams reassembled"),
            (
                ip.in_unpredicted,
                "packets checked on the general input path",
            ),
            (ip.out_untemplated, "headers written field by field"),
            (
                ip.header_sums_by_routine,
                "header sums by the general routine",
            ),
            (ip.path_mtu.learned, "path mtus learned"),
            (ip.path_mtu.ignored, "path mtu messages ignored"),
            (ip.path_mtu.expired, "path mtus expired"),
            (ip.path_mtu.evicted, "path mtus evicted"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        let udp = &self.udp;
        writeln!(f, "udp:")?;
        for (n, what) in [
            (udp.in_datagrams, "datagrams received"),
            (udp.in_read, "datagrams read"),
            (udp.out_datagrams, "datagrams sent"),
            (udp.out_no_checksum, "sent without checksum"),
            (udp.out_checksum_offloaded, "sent with checksum offloaded"),
            (
                udp.in_checksum_offloaded,
                "received with checksum verified by the link",
            ),
            (udp.in_no_checksum, "received without checksum"),
            (udp.in_checksum_on_arrival, "verified in full on arrival"),
            (
                udp.out_checksum_separate,
                "sent with a separate checksum pass",
            ),
            (udp.route_lookups, "routes worked out for sends"),
            (udp.pseudo_connects, "sends with a pseudo-connect"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        let icmp = &self.icmp;
        writeln!(f, "icmp:")?;
        for (n, what) in [
            (icmp.in_msgs, "messages received"),
            (icmp.in_echos, "echo requests received"),
            (icmp.in_echo_reps, "echo replies received"),
            (icmp.in_dest_unreachs, "destination unreachable received"),
            (icmp.in_time_excds, "time exceeded received"),
            (icmp.in_parm_probs, "parameter problems received"),
            (icmp.in_redirects, "redirects received"),
            (icmp.in_timestamps, "timestamp requests received"),
            (icmp.in_timestamp_reps, "timestamp replies received"),
            (icmp.out_msgs, "messages sent"),
            (icmp.out_echos, "echo requests sent"),
            (icmp.out_echo_reps, "echo replies sent"),
            (icmp.out_dest_unreachs, "destination unreachable sent"),
            (icmp.out_time_excds, "time exceeded sent"),
            (icmp.out_parm_probs, "parameter problems sent"),
            (icmp.out_timestamp_reps, "timestamp replies sent"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        let ip6 = &self.ip6;
        if *ip6 != Ip6Counters::default() {
            writeln!(f, "ip6:")?;
        }
        for (n, what) in [
            (ip6.in_receives, "packets received"),
            (ip6.in_delivers, "packets delivered"),
            (ip6.in_mcast_pkts, "multicast packets received"),
            (ip6.in_ext_headers, "extension headers walked"),
            (ip6.in_atomic_fragments, "atomic fragments"),
            (
                ip6.in_unpredicted,
                "packets checked on the general input path",
            ),
            (ip6.out_requests, "packets sent"),
            (ip6.out_packets, "packets handed to links"),
            (ip6.reasm_reqds, "fragments received"),
            (ip6.reasm_oks, "packets reassembled"),
            (ip6.frag_oks, "packets fragmented"),
            (ip6.frag_creates, "fragments created"),
            (ip6.path_mtu.learned, "path mtus learned"),
            (ip6.path_mtu.ignored, "path mtu messages ignored"),
            (ip6.path_mtu.expired, "path mtus expired"),
            (ip6.path_mtu.evicted, "path mtus evicted"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        let icmp6 = &self.icmp6;
        if *icmp6 != Icmp6Counters::default() {
            writeln!(f, "icmp6:")?;
        }
        for (n, what) in [
            (icmp6.in_msgs, "messages received"),
            (icmp6.in_echos, "echo requests received"),
            (icmp6.in_echo_reps, "echo replies received"),
            (icmp6.in_errors, "errors received"),
            (icmp6.in_pkt_too_bigs, "packet too big received"),
            (icmp6.in_discovery, "discovery messages ignored"),
            (icmp6.out_msgs, "messages sent"),
            (icmp6.out_echo_reps, "echo replies sent"),
            (icmp6.out_dest_unreachs, "destination unreachable sent"),
            (icmp6.out_param_probs, "parameter problems sent"),
            (icmp6.out_time_excds, "time exceeded sent"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        let tcp = &self.tcp;
        writeln!(f, "tcp:")?;
        for (n, what) in [
            (tcp.active_opens, "active opens"),
            (tcp.passive_opens, "passive opens"),
            (tcp.held_syns, "SYNs held"),
            (tcp.held_confirmed, "held connections confirmed"),
            (tcp.held_refused, "held connections refused"),
            (
                tcp.held_deferred,
                "SYNs past the held bound answered with a cookie",
            ),
            (tcp.held_replaced, "held connections replaced by newer SYNs"),
            (
                tcp.time_wait_recycled,
                "TIME-WAIT connections ended early for room",
            ),
            (tcp.attempt_fails, "failed connection attempts"),
            (tcp.estab_resets, "established connections reset"),
            (tcp.in_segs, "segments received"),
            (tcp.out_segs, "segments sent"),
            (tcp.retrans_segs, "segments retransmitted"),
            (tcp.out_rsts, "resets sent"),
            (tcp.predicted_acks, "acks by header prediction"),
            (tcp.predicted_data, "data segments by header prediction"),
            (tcp.fast_recoveries, "fast recoveries"),
            (tcp.rack_lost, "segments marked lost by rack"),
            (tcp.rack_reorder_timeouts, "rack reordering timeouts"),
            (tcp.loss_probes, "tail loss probes sent"),
            (
                tcp.loss_probe_recoveries,
                "tail loss probes that repaired a loss",
            ),
            (tcp.dsacks_sent, "d-sack blocks sent"),
            (tcp.dsacks_received, "d-sack blocks received"),
            (tcp.ecn_ce_received, "ecn congestion marks received"),
            (tcp.ecn_reductions, "ecn window reductions"),
            (tcp.timeouts, "retransmission timeouts"),
            (tcp.rto_reverts, "timeout backoffs undone by icmp"),
            (tcp.syn_cookies_sent, "syn cookies sent"),
            (tcp.syn_cookies_ok, "connections from syn cookies"),
            (tcp.fast_open_accepted, "connections taken by fast open"),
            (tcp.challenge_acks, "challenge acks sent"),
            (
                tcp.invalid_acks_skipped,
                "acks for unacceptable segments rate-limited",
            ),
            (tcp.out_checksum_offloaded, "sent with checksum offloaded"),
            (tcp.out_tso_packets, "packets segmented by the link (tso)"),
            (
                tcp.in_checksum_offloaded,
                "received with checksum verified by the link",
            ),
            (tcp.out_no_checksum, "sent without checksum (eliminated)"),
            (tcp.in_no_checksum, "received without checksum (eliminated)"),
            (
                tcp.out_checksum_separate,
                "sent with a separate checksum pass",
            ),
            (
                tcp.timer_early,
                "timer entries due before their deadline (moved later)",
            ),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        writeln!(f, "drops: {} in all", self.drops.total())?;
        for (reason, n) in self.drops.nonzero() {
            writeln!(f, "    {n} {}", reason.label())?;
        }
        Ok(())
    }
}
