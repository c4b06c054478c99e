//! ICMPv4: echo and timestamp (reflecting record route and timestamp options), the errors this host
//! sends (port and protocol unreachable, reassembly time exceeded, parameter problem about bad
//! options), the errors it acts on (unreachables reported to connected sockets), and the limits on
//! the errors it sends (`ErrorLimit` in `ip`: a global budget and one per destination; replies to
//! echo and timestamp requests are not limited).
//!
//! `Icmp` is called with a narrow context (`IcmpCx`) and returns what must be sent
//! (`IcmpOut`, for the stack to hand to IPv4) or reported to a transport (`IcmpInput::Report`):
//! it sends nothing itself and knows no socket.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;

use crate::buf::{BufferPool, PacketBuf};
use crate::config::Limits;
use crate::ip::{ErrorLimit, IcmpError};
use crate::ipv4::{Delivery, Ipv4, NextHop, LOOPBACK};
use crate::reassembly::Ipv4Expired;
use crate::secret::SecretKey;
use crate::stats::{DropReason, Drops, IcmpCounters};
use crate::time::Instant;
use crate::wire::icmpv4::{self, DstUnreachable, TimeExceeded};
use crate::wire::ipv4opt::{self, Found, Options};
use crate::wire::{Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Repr, WireError};

/// An echo reply received for a request this host sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EchoReply {
    /// Who replied.
    pub from: Ipv4Addr,
    /// Identifier, as sent.
    pub ident: u16,
    /// Sequence number, as sent.
    pub seq_no: u16,
    /// The data that came back.
    pub data: Vec<u8>,
}

/// What ICMP is handed for each call: the clock, the buffer pool, its counters and the drops, and
/// IPv4 to route and check addresses with (read only: sending is the stack's).
pub(crate) struct IcmpCx<'a> {
    pub(crate) now: Instant,
    pub(crate) pool: &'a mut BufferPool,
    pub(crate) counters: &'a mut IcmpCounters,
    pub(crate) drops: &'a mut Drops,
    pub(crate) ip: &'a Ipv4,
}

/// An ICMP message ready for IPv4 output.
#[derive(Debug)]
pub(crate) struct IcmpOut {
    pub(crate) buf: PacketBuf,
    pub(crate) hop: NextHop,
    pub(crate) src: Ipv4Addr,
    pub(crate) dst: Ipv4Addr,
    /// IP options for the header: an echo reply's record route and timestamp (usually none).
    pub(crate) options: Options,
}

/// What an arriving ICMP message asks of the stack.
#[derive(Debug)]
pub(crate) enum IcmpInput {
    /// Nothing more (a reply queued for the application, a counted message, a drop).
    Done,
    /// Send this (an echo reply).
    Send(IcmpOut),
    /// An error about a datagram this host sent, quoted as `quoted` and its first 8 transport bytes:
    /// tell the transport's socket (`protocol` is UDP or TCP).
    Report {
        protocol: IpProtocol,
        quoted: Ipv4Repr,
        head: [u8; 8],
        error: IcmpError,
    },
    /// A "fragmentation needed" (RFC 1191) about a datagram this host sent, quoted as `quoted` and
    /// its first 8 transport bytes: the path to `quoted.dst_addr` takes at most `mtu` bytes, if the
    /// transport (`protocol`, UDP or TCP) finds the quote plausible (RFC 5927 §5).
    PathMtu {
        protocol: IpProtocol,
        quoted: Ipv4Repr,
        head: [u8; 8],
        mtu: usize,
    },
    /// A redirect from `router`: `destination` is better reached through `gateway`, if the stack
    /// finds the redirect acceptable.
    Redirect {
        router: Ipv4Addr,
        destination: Ipv4Addr,
        gateway: Ipv4Addr,
    },
}

/// The ICMP layer: the limits on the errors it sends and the echo replies waiting for the
/// application.
#[derive(Debug)]
pub(crate) struct Icmp {
    limit: ErrorLimit,
    replies: VecDeque<EchoReply>,
    replies_max: usize,
}

/// The quote an ICMP error carries: the offending datagram's IP header and its first 8 payload bytes
/// (RFC 792). The header is rebuilt from `ip`, so a reassembled datagram is quoted as a whole.
fn quote(ip: &Ipv4Repr, payload: &[u8]) -> ([u8; 28], usize) {
    let mut q = [0u8; 28];
    let n = payload.len().min(8);
    let quoted = Ipv4Repr {
        payload_len: ip.payload_len,
        ..*ip
    };
    quoted.emit(&mut q[..20]);
    let sum = crate::checksum::rfc1071(&q[..20]);
    q[10..12].copy_from_slice(&(!sum).to_be_bytes());
    q[20..20 + n].copy_from_slice(&payload[..n]);
    (q, 20 + n)
}

/// What a destination unreachable about a TCP segment tells TCP, as Linux's `tcp_v4_err` takes
/// it (its `icmp_err_convert` table, with `io::ErrorKind`s for the errno values that have one): the
/// error; whether it ends a half-open connection whose SYN-ACK it quotes (`tcp_req_err`: a network
/// or host unreachable does, a port unreachable does not); whether it undoes a doubling of the
/// retransmission timeout (the same two, RFC 6069). "Fragmentation needed" is path MTU
/// discovery's, not an error; an undefined code (past 15) is ignored.
fn tcp_unreachable(reason: DstUnreachable) -> Option<IcmpError> {
    use io::ErrorKind::{ConnectionRefused, HostUnreachable, NetworkUnreachable, Unsupported};
    let kind = match reason {
        DstUnreachable::NetUnreachable | DstUnreachable::HostUnreachable => {
            let kind = if reason == DstUnreachable::NetUnreachable {
                NetworkUnreachable
            } else {
                HostUnreachable
            };
            return Some(IcmpError {
                kind,
                ends_half_open: true,
                reverts_backoff: true,
            });
        }
        DstUnreachable::ProtoUnreachable | DstUnreachable::PortUnreachable => ConnectionRefused,
        DstUnreachable::FragRequired => return None,
        // Source route failed.
        DstUnreachable::Other(5) => Unsupported,
        // Network unknown, administratively prohibited, unreachable for the type of service.
        DstUnreachable::Other(6 | 9 | 11) => NetworkUnreachable,
        // Host unknown or isolated, administratively prohibited, unreachable for the type of
        // service, communication prohibited, precedence violation or cut-off.
        DstUnreachable::Other(7 | 8 | 10 | 12..=15) => HostUnreachable,
        DstUnreachable::Other(_) => return None,
    };
    Some(IcmpError::report(kind))
}

/// A time exceeded or parameter problem quoting `data`: reported to TCP as `kind` (ending a
/// half-open connection too), nothing to UDP (as Linux's `__udp4_lib_err` without `IP_RECVERR`).
/// The message itself is counted by its type, whatever it quotes.
fn tcp_report(data: &[u8], kind: io::ErrorKind) -> IcmpInput {
    match icmpv4::parse_quoted(data) {
        Ok((quoted, head)) if quoted.protocol == IpProtocol::Tcp => IcmpInput::Report {
            protocol: IpProtocol::Tcp,
            quoted,
            head,
            error: IcmpError {
                ends_half_open: true,
                ..IcmpError::report(kind)
            },
        },
        _ => IcmpInput::Done,
    }
}

/// Milliseconds since midnight UT, as timestamps carry them (RFC 791 §3.1, RFC 792); from a clock
/// that says it is before 1970, any value with the high-order bit set, as RFC 791 allows for a time
/// not relative to midnight UT.
fn ms_since_midnight_ut() -> u32 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => (d.as_millis() % 86_400_000) as u32,
        Err(_) => 0x8000_0000,
    }
}

/// The options of the reply to a request (echo or timestamp) that came in `ip` with `options`:
/// its record route and timestamp, with this host's entries (RFC 1122 §3.2.2.6; the reply comes
/// from the address the request was sent to). `None` when they cannot be echoed.
fn reply_options(
    cx: &IcmpCx,
    ip: &Ipv4Repr,
    options: Option<(&Options, Found)>,
) -> Option<Options> {
    let Some((area, found)) = options else {
        return Some(Options::NONE);
    };
    let own = |a| cx.ip.is_own_address(a);
    ipv4opt::echo(
        area.as_slice(),
        found,
        ip.dst_addr,
        ms_since_midnight_ut(),
        own,
    )
}

/// RFC 1122 §3.2.2: no error to a source that is not a unicast host.
fn unicast_source(src: Ipv4Addr) -> bool {
    !(src.is_unspecified() || src.is_broadcast() || src.is_multicast())
}

impl Icmp {
    /// The layer, its per-destination error limit keyed by `key`.
    pub(crate) fn new(limits: &Limits, key: SecretKey) -> Icmp {
        Icmp {
            limit: ErrorLimit::new(limits, key),
            replies: VecDeque::new(),
            replies_max: limits.echo_reply_queue,
        }
    }

    /// Input: one ICMP message (the IP payload in `buf`), addressed as `delivery`, and the IP
    /// options that an echo reply reflects (checked by IPv4: the area and what it found), if any.
    pub(crate) fn input(
        &mut self,
        cx: &mut IcmpCx,
        buf: PacketBuf,
        ip: &Ipv4Repr,
        delivery: Delivery,
        options: Option<(&Options, Found)>,
    ) -> IcmpInput {
        cx.counters.in_msgs += 1;
        let outcome = self.parse_and_act(cx, &buf, ip, delivery, options);
        cx.pool.free(buf);
        outcome
    }

    fn parse_and_act(
        &mut self,
        cx: &mut IcmpCx,
        buf: &PacketBuf,
        ip: &Ipv4Repr,
        delivery: Delivery,
        options: Option<(&Options, Found)>,
    ) -> IcmpInput {
        let drop = |cx: &mut IcmpCx, reason| {
            cx.drops.add(reason);
            IcmpInput::Done
        };
        let packet = match Icmpv4Packet::new_checked(buf.data()) {
            Ok(p) => p,
            Err(_) => return drop(cx, DropReason::IcmpTruncated),
        };
        let repr = match Icmpv4Repr::parse(&packet) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => return drop(cx, DropReason::IcmpBadChecksum),
            Err(_) => return drop(cx, DropReason::IcmpUnhandled),
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                cx.counters.in_echos += 1;
                if delivery == Delivery::Broadcast {
                    return drop(cx, DropReason::IcmpBroadcastEcho);
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let Some(reply_options) = reply_options(cx, ip, options) else {
                    return drop(cx, DropReason::IcmpEchoOptions);
                };
                match self.output(cx, ip.src_addr, Some(ip.dst_addr), &reply, false) {
                    Ok(mut out) => {
                        out.options = reply_options;
                        cx.counters.out_echo_reps += 1;
                        IcmpInput::Send(out)
                    }
                    Err(_) => IcmpInput::Done,
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                cx.counters.in_echo_reps += 1;
                if self.replies.len() >= self.replies_max {
                    return drop(cx, DropReason::IcmpEchoReplyDropped);
                }
                self.replies.push_back(EchoReply {
                    from: ip.src_addr,
                    ident,
                    seq_no,
                    data: data.to_vec(),
                });
                IcmpInput::Done
            }
            Icmpv4Repr::DstUnreachable {
                reason: DstUnreachable::FragRequired,
                next_hop_mtu,
                data,
            } => {
                cx.counters.in_dest_unreachs += 1;
                if !cx.ip.cfg.path_mtu_discovery {
                    return drop(cx, DropReason::IcmpFragNeededIgnored);
                }
                match icmpv4::parse_quoted(data) {
                    Ok((quoted, head))
                        if matches!(quoted.protocol, IpProtocol::Udp | IpProtocol::Tcp) =>
                    {
                        // An old router says no MTU (RFC 1191 §5): guess the plateau below the
                        // quoted datagram's total length (RFC 1191 §7).
                        let mtu = match next_hop_mtu {
                            0 => {
                                let total = u16::from_be_bytes([data[2], data[3]]);
                                crate::pmtu::ipv4_plateau_below(total)
                            }
                            mtu => mtu,
                        };
                        IcmpInput::PathMtu {
                            protocol: quoted.protocol,
                            quoted,
                            head,
                            mtu: usize::from(mtu),
                        }
                    }
                    Ok(_) => IcmpInput::Done,
                    Err(_) => drop(cx, DropReason::IcmpUnhandled),
                }
            }
            Icmpv4Repr::DstUnreachable { reason, data, .. } => {
                cx.counters.in_dest_unreachs += 1;
                match icmpv4::parse_quoted(data) {
                    // UDP: the errors a socket can be told about.
                    Ok((quoted, head)) if quoted.protocol == IpProtocol::Udp => {
                        let kind = match reason {
                            DstUnreachable::PortUnreachable => io::ErrorKind::ConnectionRefused,
                            DstUnreachable::HostUnreachable => io::ErrorKind::HostUnreachable,
                            DstUnreachable::NetUnreachable => io::ErrorKind::NetworkUnreachable,
                            _ => return IcmpInput::Done,
                        };
                        IcmpInput::Report {
                            protocol: IpProtocol::Udp,
                            quoted,
                            head,
                            error: IcmpError::report(kind),
                        }
                    }
                    Ok((quoted, head)) if quoted.protocol == IpProtocol::Tcp => {
                        match tcp_unreachable(reason) {
                            Some(error) => IcmpInput::Report {
                                protocol: IpProtocol::Tcp,
                                quoted,
                                head,
                                error,
                            },
                            None => IcmpInput::Done,
                        }
                    }
                    Ok(_) => IcmpInput::Done,
                    Err(_) => drop(cx, DropReason::IcmpUnhandled),
                }
            }
            // TCP is told of both (a connection being made fails), as Linux's `tcp_v4_err`.
            Icmpv4Repr::TimeExceeded { data, .. } => {
                cx.counters.in_time_excds += 1;
                tcp_report(data, io::ErrorKind::HostUnreachable)
            }
            Icmpv4Repr::ParamProblem { data, .. } => {
                cx.counters.in_parm_probs += 1;
                tcp_report(data, io::ErrorKind::InvalidData)
            }
            // Every code is taken as a host redirect for the quoted destination, as Linux takes
            // them (RFC 1812 §5.2.7.2: routers send no network redirects); the stack decides.
            Icmpv4Repr::Redirect { gateway, data, .. } => {
                cx.counters.in_redirects += 1;
                match icmpv4::parse_quoted(data) {
                    Ok((quoted, _)) => IcmpInput::Redirect {
                        router: ip.src_addr,
                        destination: quoted.dst_addr,
                        gateway,
                    },
                    Err(_) => drop(cx, DropReason::IcmpUnhandled),
                }
            }
            // RFC 792: the request's originate timestamp, and the times it was received and the
            // reply sent (one reading, as Linux gives); not to a broadcast, as echo (Linux's
            // `icmp_echo_ignore_broadcasts` covers both); not rate-limited, as echo.
            Icmpv4Repr::Timestamp {
                ident,
                seq_no,
                data,
            } => {
                cx.counters.in_timestamps += 1;
                if delivery == Delivery::Broadcast {
                    return drop(cx, DropReason::IcmpBroadcastEcho);
                }
                let Some(originate) = data.get(..4) else {
                    return drop(cx, DropReason::IcmpTruncated);
                };
                let now = ms_since_midnight_ut().to_be_bytes();
                let mut times = [0u8; 12];
                times[..4].copy_from_slice(originate);
                times[4..8].copy_from_slice(&now);
                times[8..].copy_from_slice(&now);
                let reply = Icmpv4Repr::TimestampReply {
                    ident,
                    seq_no,
                    data: &times,
                };
                let Some(reply_options) = reply_options(cx, ip, options) else {
                    return drop(cx, DropReason::IcmpEchoOptions);
                };
                match self.output(cx, ip.src_addr, Some(ip.dst_addr), &reply, false) {
                    Ok(mut out) => {
                        out.options = reply_options;
                        cx.counters.out_timestamp_reps += 1;
                        IcmpInput::Send(out)
                    }
                    Err(_) => IcmpInput::Done,
                }
            }
            Icmpv4Repr::TimestampReply { .. } => {
                cx.counters.in_timestamp_reps += 1;
                IcmpInput::Done
            }
        }
    }

    /// An ICMP message to `dst` from `src` (or the route's source), ready for IPv4. An `error` may be
    /// held back by the limits ([`ErrorLimit`]), counted.
    pub(crate) fn output(
        &mut self,
        cx: &mut IcmpCx,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
        repr: &Icmpv4Repr<'_>,
        error: bool,
    ) -> Result<IcmpOut, DropReason> {
        let hop = match cx.ip.route(dst) {
            Ok(hop) => hop,
            Err(reason) => {
                cx.drops.add(reason);
                return Err(reason);
            }
        };
        if error {
            let reasons = (DropReason::IcmpRateLimited, DropReason::IcmpPeerRateLimited);
            if let Err(reason) = self.limit.allow(&dst.octets(), hop.iface, cx.now, reasons) {
                cx.drops.add(reason);
                return Err(reason);
            }
        }
        // The address the message answers, if it is ours and may leave on the route's interface
        // (127/8 never leaves the host); else the route's.
        let src = src
            .filter(|s| cx.ip.is_own_address(*s) && (hop.iface == LOOPBACK || !s.is_loopback()))
            .unwrap_or(hop.src);
        let len = repr.buffer_len();
        let mut buf = cx.pool.alloc(len);
        repr.emit(buf.extend(len));
        cx.counters.out_msgs += 1;
        Ok(IcmpOut {
            buf,
            hop,
            src,
            dst,
            options: Options::NONE,
        })
    }

    /// A destination unreachable about the datagram `ip` whose payload starts with `payload`, unless
    /// RFC 1122 §3.2.2 forbids an error about it (a source that is not a unicast host).
    pub(crate) fn unreachable(
        &mut self,
        cx: &mut IcmpCx,
        reason: DstUnreachable,
        ip: &Ipv4Repr,
        payload: &[u8],
    ) -> Option<IcmpOut> {
        if !unicast_source(ip.src_addr) {
            return None;
        }
        let (q, n) = quote(ip, payload);
        let repr = Icmpv4Repr::DstUnreachable {
            reason,
            next_hop_mtu: 0,
            data: &q[..n],
        };
        let out = self
            .output(cx, ip.src_addr, Some(ip.dst_addr), &repr, true)
            .ok()?;
        cx.counters.out_dest_unreachs += 1;
        Some(out)
    }

    /// A fragment reassembly time exceeded about a datagram that timed out, unless it was addressed
    /// to a broadcast, was itself an ICMP error (RFC 1122 §3.2.2: no ICMP error about either) or came
    /// from a source that is not a unicast host.
    pub(crate) fn time_exceeded(
        &mut self,
        cx: &mut IcmpCx,
        expired: &Ipv4Expired,
    ) -> Option<IcmpOut> {
        let (src, dst) = (expired.key.src, expired.key.dst);
        if !unicast_source(src) || dst.is_multicast() || cx.ip.is_broadcast(dst) {
            return None;
        }
        // Nor about an ICMP error (RFC 1122 §3.2.2): of ICMP, only queries (echo, timestamp,
        // information, address mask) are answered with an error, as Linux does.
        let header_len = usize::from(expired.quote[0] & 0x0f) * 4;
        if expired.key.protocol == 1
            && expired.quote_len > header_len
            && !matches!(expired.quote[header_len], 0 | 8 | 13..=18)
        {
            return None;
        }
        let repr = Icmpv4Repr::TimeExceeded {
            reason: TimeExceeded::FragReassembly,
            data: &expired.quote[..expired.quote_len],
        };
        let out = self.output(cx, src, Some(dst), &repr, true).ok()?;
        cx.counters.out_time_excds += 1;
        Some(out)
    }

    /// A parameter problem (code 0) about `packet`, a datagram as it arrived (header included) whose
    /// header `ip` describes, pointing at the byte at fault in its header: unless it came from a
    /// source that is not a unicast host, or is a fragment other than the first, or an ICMP error
    /// (RFC 1122 §3.2.2: no error about either). The quote is its header, options included, and its
    /// first 8 payload bytes.
    pub(crate) fn param_problem(
        &mut self,
        cx: &mut IcmpCx,
        ip: &Ipv4Repr,
        packet: &[u8],
        pointer: u8,
    ) -> Option<IcmpOut> {
        if !unicast_source(ip.src_addr) || ip.frag_offset != 0 {
            return None;
        }
        let header_len = usize::from(packet.first()? & 0x0f) * 4;
        if ip.protocol == IpProtocol::Icmp
            && !matches!(packet.get(header_len), Some(0 | 8 | 13..=18))
        {
            return None;
        }
        let quoted = (header_len + 8).min(header_len + ip.payload_len);
        let data = packet.get(..quoted.min(packet.len()))?;
        let repr = Icmpv4Repr::ParamProblem { pointer, data };
        let out = self
            .output(cx, ip.src_addr, Some(ip.dst_addr), &repr, true)
            .ok()?;
        cx.counters.out_parm_probs += 1;
        Some(out)
    }

    /// An echo request (ping) to `dst`, not rate-limited.
    pub(crate) fn echo_request(
        &mut self,
        cx: &mut IcmpCx,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> io::Result<IcmpOut> {
        if data.len() > 65507 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "echo data longer than 65507 bytes",
            ));
        }
        let repr = Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        };
        let out = self.output(cx, dst, None, &repr, false).map_err(|_| {
            io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("no route to {dst}"),
            )
        })?;
        cx.counters.out_echos += 1;
        Ok(out)
    }

    /// The oldest echo reply received and not yet read.
    pub(crate) fn take_reply(&mut self) -> Option<EchoReply> {
        self.replies.pop_front()
    }
}
