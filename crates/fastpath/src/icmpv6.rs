//! ICMPv6 (RFC 4443): echo, the errors this host sends (destination unreachable, parameter problem,
//! time exceeded), the errors it acts on (reported to transports; packet too big for path MTU
//! discovery), the discovery messages it drops by name, and the limits on the errors it sends that
//! ICMPv4 has too (a global budget and one per destination; echo replies are not limited).
//!
//! The sibling of `icmp.rs`: `Icmpv6` is called with a narrow context (`Icmp6Cx`) and returns what must
//! be sent (`Icmp6Out`, for the stack to hand to IPv6) or reported (`Icmp6Input::Report`).

use std::io;
use std::net::Ipv6Addr;

use crate::buf::{BufferPool, PacketBuf};
use crate::config::Limits;
use crate::ip::{Delivery, ErrorLimit, IcmpError};
use crate::ipv6::{Ipv6, NextHop6};
use crate::secret::SecretKey;
use crate::stats::{DropReason, Drops, Icmp6Counters};
use crate::time::Instant;
use crate::wire::icmpv6::{self, kind, unreachable, Icmpv6Repr, Quoted, MAX_QUOTE};
use crate::wire::ipv6::HEADER_LEN as IPV6_HEADER_LEN;
use crate::wire::ipv6ext;
use crate::wire::{IpProtocol, Ipv6Repr, WireError};

/// What ICMPv6 is handed for each call: the clock, the buffer pool, its counters and the drops, and
/// IPv6 to route and check addresses with (read only: sending is the stack's).
pub(crate) struct Icmp6Cx<'a> {
    pub(crate) now: Instant,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut Icmp6Counters,
    pub(crate) drops: &'a mut Drops,
    pub(crate) ip: &'a Ipv6,
}

/// An ICMPv6 message ready for IPv6 output.
#[derive(Debug)]
pub(crate) struct Icmp6Out {
    pub(crate) buf: PacketBuf,
    pub(crate) hop: NextHop6,
    pub(crate) src: Ipv6Addr,
    pub(crate) dst: Ipv6Addr,
}

/// What an arriving ICMPv6 message asks of the stack.
#[derive(Debug)]
pub(crate) enum Icmp6Input {
    /// Nothing more (a counted message, a drop).
    Done,
    /// Send this (an echo reply).
    Send(Icmp6Out),
    /// An error about a packet this host sent: tell the transport (`quoted.upper` is UDP or TCP).
    Report { quoted: Quoted, error: IcmpError },
    /// Packet too big (RFC 8201): the path to `quoted.ip.dst_addr` carries at most `mtu` bytes.
    TooBig { quoted: Quoted, mtu: u32 },
}

/// What a destination unreachable of `code` about a TCP segment tells TCP, as Linux's
/// `icmpv6_err_convert` and `tcp_v6_err` take it (with `io::ErrorKind`s for its errno values): the
/// error; whether it is fatal (it then ends a half-open connection whose SYN-ACK it quotes; codes
/// past those defined are protocol errors, fatal); whether it undoes a doubling of the
/// retransmission timeout (no route, RFC 6069).
fn tcp_unreachable(code: u8) -> IcmpError {
    use io::ErrorKind::{
        ConnectionRefused, HostUnreachable, InvalidData, NetworkUnreachable, PermissionDenied,
    };
    let (kind, ends_half_open) = match code {
        unreachable::NO_ROUTE => (NetworkUnreachable, false),
        // Beyond the scope of the source address (once "not a neighbour"), address unreachable.
        2 | unreachable::ADDRESS => (HostUnreachable, false),
        unreachable::PORT => (ConnectionRefused, true),
        // Administratively prohibited, source address failed policy, reject route.
        unreachable::PROHIBITED | 5 | 6 => (PermissionDenied, true),
        _ => (InvalidData, true),
    };
    IcmpError {
        kind,
        ends_half_open,
        reverts_backoff: code == unreachable::NO_ROUTE,
    }
}

/// A time exceeded or parameter problem quoting `data`: reported to TCP as `kind`, nothing to UDP
/// (as Linux's `__udp6_lib_err` without `IPV6_RECVERR`).
fn tcp_report(data: &[u8], kind: io::ErrorKind, ends_half_open: bool) -> Icmp6Input {
    match icmpv6::parse_quoted(data) {
        Ok(quoted) if quoted.upper == IpProtocol::Tcp => Icmp6Input::Report {
            quoted,
            error: IcmpError {
                ends_half_open,
                ..IcmpError::report(kind)
            },
        },
        _ => Icmp6Input::Done,
    }
}

/// An error this host may send about a packet it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Icmp6Error {
    /// Destination unreachable with this code ([`unreachable`]).
    Unreachable(u8),
    /// Parameter problem with this code and pointer; `multicast_ok` for an unknown option whose
    /// action bits ask for the error even about a packet to a group (RFC 4443 §2.4(e.3)).
    ParamProblem {
        code: u8,
        pointer: u32,
        multicast_ok: bool,
    },
    /// Time exceeded with this code.
    TimeExceeded(u8),
}

/// The ICMPv6 layer: the limits on the errors it sends.
#[derive(Debug)]
pub(crate) struct Icmpv6 {
    limit: ErrorLimit,
}

impl Icmpv6 {
    /// The layer, its per-destination error limit keyed by `key`.
    pub(crate) fn new(limits: &Limits, key: SecretKey) -> Icmpv6 {
        Icmpv6 {
            limit: ErrorLimit::new(limits, key),
        }
    }

    /// Input: one ICMPv6 message (the upper-layer payload in `buf`) in a packet `ip`.
    pub(crate) fn input(
        &mut self,
        cx: &mut Icmp6Cx,
        buf: PacketBuf,
        ip: &Ipv6Repr,
        delivery: Delivery,
    ) -> Icmp6Input {
        cx.counters.in_msgs += 1;
        let outcome = self.parse_and_act(cx, buf.data(), ip, delivery);
        cx.pool.free(buf);
        outcome
    }

    fn parse_and_act(
        &mut self,
        cx: &mut Icmp6Cx,
        bytes: &[u8],
        ip: &Ipv6Repr,
        delivery: Delivery,
    ) -> Icmp6Input {
        let drop = |cx: &mut Icmp6Cx, reason| {
            cx.drops.add(reason);
            Icmp6Input::Done
        };
        let repr = match Icmpv6Repr::parse(bytes, ip.src_addr, ip.dst_addr) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => return drop(cx, DropReason::Icmpv6BadChecksum),
            Err(_) => return drop(cx, DropReason::Icmpv6Truncated),
        };
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                cx.counters.in_echos += 1;
                // To a group, answered from the route's address (RFC 4443 §4.2), as Linux does.
                let src = (delivery == Delivery::Unicast).then_some(ip.dst_addr);
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                match self.output(cx, ip.src_addr, src, &reply, false) {
                    Ok(out) => {
                        cx.counters.out_echo_reps += 1;
                        Icmp6Input::Send(out)
                    }
                    Err(_) => Icmp6Input::Done,
                }
            }
            Icmpv6Repr::EchoReply { .. } => {
                cx.counters.in_echo_reps += 1;
                drop(cx, DropReason::Icmpv6EchoReplyDropped)
            }
            Icmpv6Repr::DstUnreachable { code, data } => {
                cx.counters.in_errors += 1;
                match icmpv6::parse_quoted(data) {
                    Ok(quoted) if quoted.upper == IpProtocol::Udp => {
                        let kind = match code {
                            unreachable::PORT => io::ErrorKind::ConnectionRefused,
                            unreachable::NO_ROUTE => io::ErrorKind::NetworkUnreachable,
                            unreachable::ADDRESS => io::ErrorKind::HostUnreachable,
                            unreachable::PROHIBITED => io::ErrorKind::PermissionDenied,
                            _ => return Icmp6Input::Done,
                        };
                        Icmp6Input::Report {
                            quoted,
                            error: IcmpError::report(kind),
                        }
                    }
                    Ok(quoted) if quoted.upper == IpProtocol::Tcp => Icmp6Input::Report {
                        quoted,
                        error: tcp_unreachable(code),
                    },
                    Ok(_) => Icmp6Input::Done,
                    Err(_) => drop(cx, DropReason::Icmpv6Unhandled),
                }
            }
            Icmpv6Repr::PacketTooBig { mtu, data } => {
                cx.counters.in_errors += 1;
                cx.counters.in_pkt_too_bigs += 1;
                match icmpv6::parse_quoted(data) {
                    Ok(quoted) => Icmp6Input::TooBig { quoted, mtu },
                    Err(_) => drop(cx, DropReason::Icmpv6Unhandled),
                }
            }
            // TCP is told of both (a connection being made fails), as Linux's `tcp_v6_err`; the
            // message is counted whatever it quotes.
            Icmpv6Repr::TimeExceeded { data, .. } => {
                cx.counters.in_errors += 1;
                tcp_report(data, io::ErrorKind::HostUnreachable, false)
            }
            Icmpv6Repr::ParamProblem { data, .. } => {
                cx.counters.in_errors += 1;
                tcp_report(data, io::ErrorKind::InvalidData, true)
            }
            Icmpv6Repr::Other { msg_type, .. } => {
                let reason = match msg_type {
                    kind::ROUTER_SOLICIT | kind::ROUTER_ADVERT | kind::REDIRECT => {
                        DropReason::Icmpv6RouterDiscovery
                    }
                    kind::NEIGHBOR_SOLICIT | kind::NEIGHBOR_ADVERT => {
                        DropReason::Icmpv6NeighborDiscovery
                    }
                    kind::MLD_QUERY | kind::MLD_REPORT | kind::MLD_DONE | kind::MLD2_REPORT => {
                        DropReason::Icmpv6ListenerDiscovery
                    }
                    _ => return drop(cx, DropReason::Icmpv6Unhandled),
                };
                cx.counters.in_discovery += 1;
                drop(cx, reason)
            }
        }
    }

    /// An ICMPv6 message to `dst` from `src` (or the route's source), ready for IPv6. An `error` may be
    /// held back by the limits ([`ErrorLimit`]), counted.
    pub(crate) fn output(
        &mut self,
        cx: &mut Icmp6Cx,
        dst: Ipv6Addr,
        src: Option<Ipv6Addr>,
        repr: &Icmpv6Repr<'_>,
        error: bool,
    ) -> Result<Icmp6Out, DropReason> {
        // Sized by the path MTU: IPv6 routers do not fragment (RFC 8201).
        let hop = match cx.ip.route(dst) {
            Ok(hop) => cx.ip.along_path(hop, dst, cx.now),
            Err(reason) => {
                cx.drops.add(reason);
                return Err(reason);
            }
        };
        if error {
            let reasons = (
                DropReason::Icmpv6RateLimited,
                DropReason::Icmpv6PeerRateLimited,
            );
            if let Err(reason) = self.limit.allow(&dst.octets(), hop.iface, cx.now, reasons) {
                cx.drops.add(reason);
                return Err(reason);
            }
        }
        // The address the message answers, if it is ours and may leave on the route's interface
        // (`::1` never leaves the host); else the route's.
        let src = src
            .filter(|s| {
                cx.ip.is_own_address(*s)
                    && (hop.iface == crate::ip::LOOPBACK || *s != Ipv6Addr::LOCALHOST)
            })
            .unwrap_or(hop.src);
        let len = repr.buffer_len();
        let mut buf = cx.pool.alloc(len);
        repr.emit(buf.extend(len), src, dst);
        cx.counters.out_msgs += 1;
        Ok(Icmp6Out { buf, hop, src, dst })
    }

    /// An error about the received `packet` (its bytes from the IPv6 header, from `src` to `dst`,
    /// addressed as `delivery`), unless RFC 4443 §2.4(e) forbids one: about an ICMPv6 error or redirect, about a
    /// packet to a group (but for a parameter problem the option asked for), or from a source that
    /// does not name one node (unspecified, multicast). The quote is as much of the packet as fits the
    /// minimum MTU (§2.4(c)).
    pub(crate) fn error(
        &mut self,
        cx: &mut Icmp6Cx,
        error: Icmp6Error,
        packet: &[u8],
        (src, dst): (Ipv6Addr, Ipv6Addr),
        delivery: Delivery,
    ) -> Option<Icmp6Out> {
        if src.is_unspecified() || src.is_multicast() {
            return None;
        }
        let group_ok = matches!(
            error,
            Icmp6Error::ParamProblem {
                multicast_ok: true,
                ..
            }
        );
        if delivery != Delivery::Unicast && !group_ok {
            return None;
        }
        // Is the packet an ICMPv6 error or redirect? Its chain may be one IPv6 refused, so skip the
        // extension headers by length alone; a type that cannot be read counts as an error, unless
        // it is in a later fragment (RFC 8200 §4.5, RFC 7112 §5: a first fragment without its
        // upper-layer header is answered, whatever that header is), as Linux decides.
        let rest = packet.get(IPV6_HEADER_LEN..).unwrap_or(&[]);
        let first = IpProtocol::from(packet.get(6).copied().unwrap_or(59));
        if let Some((IpProtocol::Icmpv6, at, fragment)) = ipv6ext::skip_noting_fragment(rest, first)
        {
            match rest.get(at) {
                Some(&t) if !Icmpv6Repr::is_error(t) && t != kind::REDIRECT => {}
                None if fragment => {}
                _ => return None,
            }
        }
        let data = &packet[..packet.len().min(MAX_QUOTE)];
        let repr = match error {
            Icmp6Error::Unreachable(code) => Icmpv6Repr::DstUnreachable { code, data },
            Icmp6Error::ParamProblem { code, pointer, .. } => Icmpv6Repr::ParamProblem {
                code,
                pointer,
                data,
            },
            Icmp6Error::TimeExceeded(code) => Icmpv6Repr::TimeExceeded { code, data },
        };
        let from = (delivery == Delivery::Unicast).then_some(dst);
        let out = self.output(cx, src, from, &repr, true).ok()?;
        match error {
            Icmp6Error::Unreachable(_) => cx.counters.out_dest_unreachs += 1,
            Icmp6Error::ParamProblem { .. } => cx.counters.out_param_probs += 1,
            Icmp6Error::TimeExceeded(_) => cx.counters.out_time_excds += 1,
        }
        Some(out)
    }
}
