//! ICMPv4: echo, the errors this host sends (port and protocol unreachable, reassembly time exceeded),
//! the errors it acts on (unreachables reported to connected sockets), and the output rate limit.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;

use crate::buf::PacketBuf;
use crate::config::Limits;
use crate::ipv4::reassembly::Expired;
use crate::ipv4::Delivery;
use crate::ipv4::LOOPBACK;
use crate::stack::Stack;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::icmpv4::{self, DstUnreachable, TimeExceeded};
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

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub(crate) struct RateLimit {
    rate: u64,
    burst: u64,
    /// Tokens, in millionths.
    micro_tokens: u64,
    last: Instant,
}

impl RateLimit {
    pub(crate) fn new(rate: u32, burst: u32) -> RateLimit {
        RateLimit {
            rate: rate as u64,
            burst: burst as u64,
            micro_tokens: burst as u64 * 1_000_000,
            last: Instant::ZERO,
        }
    }

    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.total_micros().saturating_sub(self.last.total_micros());
        self.last = self.last.max(now);
        self.micro_tokens =
            (self.micro_tokens + elapsed.saturating_mul(self.rate)).min(self.burst * 1_000_000);
        if self.micro_tokens >= 1_000_000 {
            self.micro_tokens -= 1_000_000;
            true
        } else {
            false
        }
    }
}

/// ICMP state of a stack.
#[derive(Debug)]
pub(crate) struct IcmpState {
    limit: RateLimit,
    replies: VecDeque<EchoReply>,
    replies_max: usize,
}

impl IcmpState {
    pub(crate) fn new(limits: &Limits) -> IcmpState {
        IcmpState {
            limit: RateLimit::new(limits.icmp_rate_per_sec, limits.icmp_burst),
            replies: VecDeque::new(),
            replies_max: limits.echo_reply_queue,
        }
    }
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

impl Stack {
    pub(crate) fn icmp_input(&mut self, buf: PacketBuf, ip: &Ipv4Repr, delivery: Delivery) {
        self.counters.icmp.in_msgs += 1;
        let packet = match Icmpv4Packet::new_checked(buf.data()) {
            Ok(p) => p,
            Err(_) => return self.drop_packet(buf, DropReason::IcmpTruncated),
        };
        let repr = match Icmpv4Repr::parse(&packet) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => {
                return self.drop_packet(buf, DropReason::IcmpBadChecksum)
            }
            Err(_) => return self.drop_packet(buf, DropReason::IcmpUnhandled),
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                self.counters.icmp.in_echos += 1;
                if delivery == Delivery::Broadcast {
                    return self.drop_packet(buf, DropReason::IcmpBroadcastEcho);
                }
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if self
                    .icmp_output(ip.src_addr, Some(ip.dst_addr), &reply, true)
                    .is_ok()
                {
                    self.counters.icmp.out_echo_reps += 1;
                }
            }
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                self.counters.icmp.in_echo_reps += 1;
                if self.icmp.replies.len() >= self.icmp.replies_max {
                    self.counters.drops.add(DropReason::IcmpEchoReplyDropped);
                } else {
                    let reply = EchoReply {
                        from: ip.src_addr,
                        ident,
                        seq_no,
                        data: data.to_vec(),
                    };
                    self.icmp.replies.push_back(reply);
                }
            }
            Icmpv4Repr::DstUnreachable { reason, data, .. } => {
                self.counters.icmp.in_dest_unreachs += 1;
                let error = match reason {
                    DstUnreachable::PortUnreachable => Some(io::ErrorKind::ConnectionRefused),
                    DstUnreachable::HostUnreachable => Some(io::ErrorKind::HostUnreachable),
                    DstUnreachable::NetUnreachable => Some(io::ErrorKind::NetworkUnreachable),
                    _ => None,
                };
                match icmpv4::parse_quoted(data) {
                    Ok((quoted, head)) if quoted.protocol == IpProtocol::Udp => {
                        if let Some(kind) = error {
                            self.udp_report_error(&quoted, &head, kind);
                        }
                    }
                    Ok((quoted, head)) if quoted.protocol == IpProtocol::Tcp => {
                        let hard = matches!(
                            reason,
                            DstUnreachable::PortUnreachable | DstUnreachable::ProtoUnreachable
                        );
                        if let (Some(kind), true) =
                            (error.or(Some(io::ErrorKind::ConnectionRefused)), hard)
                        {
                            self.tcp_report_error(&quoted, &head, kind);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => self.counters.drops.add(DropReason::IcmpUnhandled),
                }
            }
            Icmpv4Repr::TimeExceeded { .. } => self.counters.icmp.in_time_excds += 1,
        }
        self.pool.free(buf);
    }

    /// Sends an ICMP message to `dst` from `src` (or the route's source). Rate-limited messages (replies
    /// and errors) may be suppressed, counted.
    pub(crate) fn icmp_output(
        &mut self,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
        repr: &Icmpv4Repr<'_>,
        rate_limited: bool,
    ) -> Result<(), DropReason> {
        if rate_limited && !self.icmp.limit.allow(self.now) {
            self.counters.drops.add(DropReason::IcmpRateLimited);
            return Err(DropReason::IcmpRateLimited);
        }
        let hop = match self.route(dst) {
            Ok(hop) => hop,
            Err(reason) => {
                self.counters.drops.add(reason);
                return Err(reason);
            }
        };
        // The address the message answers, if it is ours and may leave on the route's interface
        // (127/8 never leaves the host); else the route's.
        let src = src
            .filter(|s| self.ip.is_own_address(*s) && (hop.iface == LOOPBACK || !s.is_loopback()))
            .unwrap_or(hop.src);
        let len = repr.buffer_len();
        let mut buf = self.pool.alloc(len);
        repr.emit(buf.extend(len));
        self.counters.icmp.out_msgs += 1;
        self.ipv4_output(buf, &hop, src, dst, IpProtocol::Icmp);
        Ok(())
    }

    /// Sends a destination unreachable about the datagram `ip` whose payload starts with `payload`,
    /// unless RFC 1122 §3.2.2 forbids an error about it (a source that is not a unicast host).
    pub(crate) fn icmp_send_error(
        &mut self,
        reason: DstUnreachable,
        ip: &Ipv4Repr,
        payload: &[u8],
    ) {
        let src = ip.src_addr;
        if src.is_unspecified() || src.is_broadcast() || src.is_multicast() {
            return;
        }
        let (q, n) = quote(ip, payload);
        let repr = Icmpv4Repr::DstUnreachable {
            reason,
            next_hop_mtu: 0,
            data: &q[..n],
        };
        if self
            .icmp_output(src, Some(ip.dst_addr), &repr, true)
            .is_ok()
        {
            self.counters.icmp.out_dest_unreachs += 1;
        }
    }

    /// Sends a fragment reassembly time exceeded about a datagram that timed out, unless it was
    /// addressed to a broadcast, was itself an ICMP error (RFC 1122 §3.2.2: no ICMP error about
    /// either) or came from a source that is not a unicast host.
    pub(crate) fn icmp_send_time_exceeded(&mut self, expired: &Expired) {
        let (src, dst) = (expired.key.src, expired.key.dst);
        if src.is_unspecified() || src.is_broadcast() || src.is_multicast() {
            return;
        }
        if dst.is_broadcast()
            || dst.is_multicast()
            || self.ip.ifaces.iter().any(|f| f.broadcast == Some(dst))
        {
            return;
        }
        // Nor about an ICMP error (RFC 1122 §3.2.2): of ICMP, only queries (echo, timestamp,
        // information, address mask) are answered with an error, as Linux does.
        let header_len = usize::from(expired.quote[0] & 0x0f) * 4;
        if expired.key.protocol == 1
            && expired.quote_len > header_len
            && !matches!(expired.quote[header_len], 0 | 8 | 13..=18)
        {
            return;
        }
        let repr = Icmpv4Repr::TimeExceeded {
            reason: TimeExceeded::FragReassembly,
            data: &expired.quote[..expired.quote_len],
        };
        if self
            .icmp_output(src, Some(expired.key.dst), &repr, true)
            .is_ok()
        {
            self.counters.icmp.out_time_excds += 1;
        }
    }

    /// Sends an ICMP echo request (ping) to `dst`. Replies are read with
    /// [`recv_echo_reply`](Stack::recv_echo_reply) after a `poll`.
    pub fn send_echo_request(
        &mut self,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> io::Result<()> {
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
        self.icmp_output(dst, None, &repr, false).map_err(|_| {
            io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                format!("no route to {dst}"),
            )
        })?;
        self.counters.icmp.out_echos += 1;
        Ok(())
    }

    /// The oldest echo reply received and not yet read.
    pub fn recv_echo_reply(&mut self) -> Option<EchoReply> {
        self.icmp.replies.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_allows_a_burst_then_the_rate() {
        let mut r = RateLimit::new(10, 3);
        let t0 = Instant::from_secs(1);
        assert_eq!((0..10).filter(|_| r.allow(t0)).count(), 3);
        assert!(!r.allow(t0));
        // 100 ms buys one token at 10 a second.
        assert!(r.allow(Instant::from_millis(1100)));
        assert!(!r.allow(Instant::from_millis(1100)));
        assert_eq!(
            (0..10).filter(|_| r.allow(Instant::from_secs(100))).count(),
            3
        );
    }
}
