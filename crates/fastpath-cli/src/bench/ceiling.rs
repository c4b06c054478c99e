//! The ceiling of a TUN benchmark: a stateless TCP responder that does the least any TCP server must
//! do for each packet the kernel client sends (read it from the TUN device, write one reply) and
//! nothing else. No connection state, no buffers, no timers, no checksum checks: each reply is the
//! received packet rewritten in place. Whatever rate the kernel client reaches against it, no stack
//! that reads and writes the device one packet per system call can beat on the same machine, which
//! tells how far a target is from what the set-up allows (`bench tcp`'s `ceiling` rows). For UDP the
//! ceiling is simpler still: `bench tun` reads the packets and drops them ([`udp_to_port`] counts
//! those to its discard port).
//!
//! It answers a SYN with a SYN-ACK (MSS 1460, and window scaling when the SYN offered it), a FIN
//! with a FIN-ACK, data to port 7 (echo, up to [`ECHO_MAX`] bytes) with the same data, other data
//! with an ACK of it (discard), and nothing else (pure ACKs, resets, anything not TCP over IPv4).
//! Being stateless it is exact only where the client has one request outstanding per connection
//! (request/response) or only sends (discard): a reply's sequence number is the acknowledgment the
//! client just sent, which is our next byte only when all we sent has arrived.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fastpath::buf::{BufferDepot, BufferMode, BufferPool};
use fastpath::checksum;
use fastpath::link::{Link, TunLink};
use fastpath::PacketBuf;

/// The largest echoed segment; longer data is only acknowledged.
pub const ECHO_MAX: usize = 1460;
/// The responder's initial sequence number, the same for every connection.
pub const ISN: u32 = 0x4000_0000;
/// The window shift offered in a SYN-ACK when the SYN offered scaling: 65,535 << 7 is 8 MiB.
const WINDOW_SHIFT: u8 = 7;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// What [`respond`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// The buffer now holds the reply; `discarded` bytes of data were acknowledged and dropped.
    Reply { discarded: usize },
    /// Nothing to send (not TCP over IPv4, malformed, a reset or a pure ACK).
    Nothing,
}

/// Rewrites `buf`, a packet the client sent, into the reply, in place.
pub fn respond(buf: &mut PacketBuf) -> Response {
    let Some(reply) = plan(buf.data()) else {
        return Response::Nothing;
    };
    let header_len = if reply.flags & SYN != 0 { 28 } else { 20 };
    let keep = if reply.echo { reply.payload.len() } else { 0 };
    let new_len = 20 + header_len + keep;
    if new_len > buf.len() + buf.tailroom() {
        return Response::Nothing;
    }
    if new_len > buf.len() {
        buf.extend(new_len - buf.len());
    }
    let d = buf.data_mut();
    // The payload first (it moves left, or stays), then the headers over what preceded it.
    d.copy_within(
        reply.payload.start..reply.payload.start + keep,
        20 + header_len,
    );
    let (src, dst) = (reply.src, reply.dst);
    let ip: &mut [u8; 20] = (&mut d[..20]).try_into().expect("20 bytes");
    *ip = [0; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(new_len as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&dst);
    ip[16..20].copy_from_slice(&src);
    let sum = checksum::ipv4_header_sum(ip);
    ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
    let t = &mut d[20..20 + header_len];
    t[0..2].copy_from_slice(&reply.dst_port.to_be_bytes());
    t[2..4].copy_from_slice(&reply.src_port.to_be_bytes());
    t[4..8].copy_from_slice(&reply.seq.to_be_bytes());
    t[8..12].copy_from_slice(&reply.ack.to_be_bytes());
    t[12] = ((header_len / 4) as u8) << 4;
    t[13] = reply.flags;
    t[14..16].copy_from_slice(&0xffffu16.to_be_bytes());
    t[16..20].fill(0);
    if header_len == 28 {
        // MSS 1460, then window scaling (after a NOP) or four NOPs.
        t[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]);
        if reply.scale {
            t[24..28].copy_from_slice(&[1, 3, 3, WINDOW_SHIFT]);
        } else {
            t[24..28].fill(1);
        }
    }
    buf.truncate(new_len);
    buf.meta = Default::default();
    let d = buf.data_mut();
    let tcp_len = (new_len - 20) as u16;
    let pseudo = checksum::pseudo_header_sum(
        std::net::Ipv4Addr::from(dst),
        std::net::Ipv4Addr::from(src),
        6,
        tcp_len,
    );
    let sum = checksum::add(pseudo, checksum::fast(&d[20..]));
    d[36..38].copy_from_slice(&(!sum).to_be_bytes());
    Response::Reply {
        discarded: if reply.echo { 0 } else { reply.payload.len() },
    }
}

/// Packets read per `receive`.
const READ_BATCH: usize = 64;

/// A pool that gives what the ceiling does not send back to `link`'s own, as a stack's does
/// ([`crate::queues::stack_for_queue`]): without it every packet dropped would be a heap
/// allocation and free that no stack pays.
fn recycler(link: &mut TunLink) -> BufferPool {
    let depot = BufferDepot::new();
    link.set_buffer_depot(depot.clone());
    let mut pool = BufferPool::new(BufferMode::Pool, 1024);
    pool.set_depot(depot);
    pool
}

/// The ceiling on one TUN queue until `stop`: [`respond`] to each packet read, a `read` per packet
/// and a `write` per reply (in batches of the link's own), or one `io_uring_enter` for a batch of
/// replies when the link was opened with [`TunConfig::io_uring`](fastpath::link::TunConfig). Adds
/// the bytes discarded to `received`.
pub fn serve(link: TunLink, stop: &AtomicBool, received: &AtomicU64) -> Result<(), String> {
    let mut out = Vec::new();
    each_batch(link, stop, |link, pool, batch| {
        let mut discarded = 0;
        for mut p in batch.drain(..) {
            match respond(&mut p) {
                Response::Reply { discarded: n } => {
                    discarded += n;
                    out.push(p);
                }
                Response::Nothing => pool.free(p),
            }
        }
        link.transmit(&mut out);
        if discarded > 0 {
            received.fetch_add(discarded as u64, Ordering::Relaxed);
        }
    })
}

/// Receives on `link` a batch at a time until `stop`, sleeping while it is quiet, and hands each
/// batch to `f` with the link and the pool that takes back what `f` does not send.
fn each_batch(
    mut link: TunLink,
    stop: &AtomicBool,
    mut f: impl FnMut(&mut TunLink, &mut BufferPool, &mut Vec<PacketBuf>),
) -> Result<(), String> {
    let mut pool = recycler(&mut link);
    let mut batch = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if link.receive(&mut batch, READ_BATCH) == 0 {
            link.wait(Some(Duration::from_millis(20)))
                .map_err(|e| e.to_string())?;
            continue;
        }
        f(&mut link, &mut pool, &mut batch);
    }
    Ok(())
}

/// The UDP ceiling on one TUN queue until `stop`: reads every packet and drops it, adding those
/// that are datagrams to `port` ([`udp_to_port`]) to `count`.
pub fn drop_all(
    link: TunLink,
    stop: &AtomicBool,
    port: u16,
    count: &AtomicU64,
) -> Result<(), String> {
    each_batch(link, stop, |_, pool, batch| {
        let mut n = 0;
        for p in batch.drain(..) {
            n += u64::from(udp_to_port(p.data()) == Some(port));
            pool.free(p);
        }
        count.fetch_add(n, Ordering::Relaxed);
    })
}

/// The destination port of a UDP datagram over IPv4, unfragmented (the UDP ceiling of `bench tun`
/// counts those to its discard port); `None` for anything else.
pub fn udp_to_port(d: &[u8]) -> Option<u16> {
    let ihl = usize::from(d.first()? & 0x0f) * 4;
    if d[0] >> 4 != 4 || ihl < 20 || *d.get(9)? != 17 {
        return None;
    }
    if u16::from_be_bytes([*d.get(6)?, *d.get(7)?]) & 0x3fff != 0 {
        return None;
    }
    Some(u16::from_be_bytes([*d.get(ihl + 2)?, *d.get(ihl + 3)?]))
}

/// A reply worked out from a received packet.
struct Plan {
    src: [u8; 4],
    dst: [u8; 4],
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    /// The SYN offered window scaling.
    scale: bool,
    /// The received data, as a range of the packet.
    payload: std::ops::Range<usize>,
    /// The data goes back (echo).
    echo: bool,
}

fn plan(d: &[u8]) -> Option<Plan> {
    let ip = d.get(..20)?;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 6 || total > d.len() || total < ihl + 20 {
        return None;
    }
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return None; // a fragment
    }
    let tcp = &d[ihl..total];
    let doff = usize::from(tcp[12] >> 4) * 4;
    if doff < 20 || doff > tcp.len() {
        return None;
    }
    let be32 = |at: usize| u32::from_be_bytes([tcp[at], tcp[at + 1], tcp[at + 2], tcp[at + 3]]);
    let (seq, ack) = (be32(4), be32(8));
    let flags = tcp[13];
    let src_port = u16::from_be_bytes([tcp[0], tcp[1]]);
    let dst_port = u16::from_be_bytes([tcp[2], tcp[3]]);
    let payload = ihl + doff..total;
    let len = payload.len() as u32;
    let base = Plan {
        src: ip[12..16].try_into().ok()?,
        dst: ip[16..20].try_into().ok()?,
        src_port,
        dst_port,
        seq: ack,
        ack: seq.wrapping_add(len),
        flags: ACK,
        scale: false,
        payload: payload.clone(),
        echo: false,
    };
    if flags & RST != 0 {
        None
    } else if flags & SYN != 0 {
        if flags & ACK != 0 {
            return None;
        }
        Some(Plan {
            seq: ISN,
            ack: seq.wrapping_add(1),
            flags: SYN | ACK,
            scale: offers_window_scale(&tcp[20..doff]),
            payload: payload.start..payload.start,
            ..base
        })
    } else if flags & FIN != 0 {
        Some(Plan {
            ack: seq.wrapping_add(len).wrapping_add(1),
            flags: FIN | ACK,
            ..base
        })
    } else if flags & ACK == 0 || len == 0 {
        None
    } else if dst_port == 7 && payload.len() <= ECHO_MAX {
        Some(Plan {
            flags: ACK | PSH,
            echo: true,
            ..base
        })
    } else {
        Some(base)
    }
}

/// Whether TCP options carry window scaling (kind 3).
fn offers_window_scale(mut options: &[u8]) -> bool {
    while let Some(&kind) = options.first() {
        match kind {
            0 => return false,
            1 => options = &options[1..],
            _ => {
                let Some(&len) = options.get(1) else {
                    return false;
                };
                if kind == 3 {
                    return len == 3;
                }
                if len < 2 || usize::from(len) > options.len() {
                    return false;
                }
                options = &options[usize::from(len)..];
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header, PacketBuilder, SlicedPacket, TransportSlice};

    const CLIENT: [u8; 4] = [10, 7, 0, 1];
    const SERVER: [u8; 4] = [10, 7, 0, 2];

    fn packet(
        build: impl FnOnce(etherparse::PacketBuilderStep<etherparse::TcpHeader>) -> Vec<u8>,
    ) -> PacketBuf {
        let b = PacketBuilder::ipv4(CLIENT, SERVER, 64);
        let mut buf = PacketBuf::with_storage(vec![0; 2048], 64);
        buf.extend_from_slice(&build(b.tcp(40000, 7, 1000, 64240)));
        buf
    }

    fn with(
        payload: &[u8],
        f: impl FnOnce(
            etherparse::PacketBuilderStep<etherparse::TcpHeader>,
        ) -> etherparse::PacketBuilderStep<etherparse::TcpHeader>,
    ) -> impl FnOnce(etherparse::PacketBuilderStep<etherparse::TcpHeader>) -> Vec<u8> {
        let payload = payload.to_vec();
        move |b| {
            let b = f(b);
            let mut out = Vec::with_capacity(b.size(payload.len()));
            b.write(&mut out, &payload).expect("write");
            out
        }
    }

    /// The reply, parsed and with both checksums checked.
    fn reply(buf: &PacketBuf) -> (Ipv4Header, etherparse::TcpHeader, Vec<u8>) {
        let p = SlicedPacket::from_ip(buf.data()).expect("the reply parses");
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
            panic!("not IPv4");
        };
        let ip_header = ip.header().to_header();
        assert_eq!(ip_header.calc_header_checksum(), ip_header.header_checksum);
        assert_eq!(ip_header.protocol, IpNumber::TCP);
        let Some(TransportSlice::Tcp(tcp)) = p.transport else {
            panic!("not TCP");
        };
        let header = tcp.to_header();
        let expected = header
            .calc_checksum_ipv4(&ip_header, tcp.payload())
            .expect("checksum");
        assert_eq!(header.checksum, expected, "TCP checksum");
        (ip_header, header, tcp.payload().to_vec())
    }

    #[test]
    fn a_syn_gets_a_syn_ack_with_mss_and_the_offered_scaling() {
        let mut buf = packet(with(&[], |b| {
            b.syn()
                .options(&[
                    etherparse::TcpOptionElement::MaximumSegmentSize(1460),
                    etherparse::TcpOptionElement::Noop,
                    etherparse::TcpOptionElement::WindowScale(7),
                ])
                .expect("options")
        }));
        assert_eq!(respond(&mut buf), Response::Reply { discarded: 0 });
        let (ip, tcp, payload) = reply(&buf);
        assert_eq!((ip.source, ip.destination), (SERVER, CLIENT));
        assert_eq!((tcp.source_port, tcp.destination_port), (7, 40000));
        assert!(tcp.syn && tcp.ack && !tcp.fin && !tcp.rst);
        assert_eq!(
            (tcp.sequence_number, tcp.acknowledgment_number),
            (ISN, 1001)
        );
        assert!(payload.is_empty());
        let options: Vec<_> = tcp.options_iterator().map(|o| o.expect("option")).collect();
        assert!(options.contains(&etherparse::TcpOptionElement::MaximumSegmentSize(1460)));
        assert!(options.contains(&etherparse::TcpOptionElement::WindowScale(WINDOW_SHIFT)));
    }

    #[test]
    fn a_syn_without_scaling_gets_none() {
        let mut buf = packet(with(&[], |b| b.syn()));
        assert_eq!(respond(&mut buf), Response::Reply { discarded: 0 });
        let (_, tcp, _) = reply(&buf);
        let options: Vec<_> = tcp.options_iterator().map(|o| o.expect("option")).collect();
        assert!(!options
            .iter()
            .any(|o| matches!(o, etherparse::TcpOptionElement::WindowScale(_))));
    }

    #[test]
    fn data_to_echo_comes_back_at_the_acknowledged_sequence() {
        let data: Vec<u8> = (0..64).collect();
        let mut buf = packet(with(&data, |b| b.ack(ISN + 1 + 64).psh()));
        assert_eq!(respond(&mut buf), Response::Reply { discarded: 0 });
        let (_, tcp, payload) = reply(&buf);
        assert_eq!(payload, data);
        assert_eq!(
            (tcp.sequence_number, tcp.acknowledgment_number),
            (ISN + 1 + 64, 1064)
        );
        assert!(tcp.ack && tcp.psh && !tcp.syn && !tcp.fin);
    }

    #[test]
    fn data_to_discard_is_acknowledged_and_counted() {
        let mut buf = PacketBuf::with_storage(vec![0; 2048], 64);
        let b = PacketBuilder::ipv4(CLIENT, SERVER, 64)
            .tcp(40000, 9, 5000, 64240)
            .ack(ISN + 1);
        let mut bytes = Vec::new();
        b.write(&mut bytes, &[0x5a; 1000]).expect("write");
        buf.extend_from_slice(&bytes);
        assert_eq!(respond(&mut buf), Response::Reply { discarded: 1000 });
        let (ip, tcp, payload) = reply(&buf);
        assert!(payload.is_empty());
        assert_eq!(usize::from(ip.total_len), 40);
        assert_eq!(
            (tcp.sequence_number, tcp.acknowledgment_number),
            (ISN + 1, 6000)
        );
        assert!(tcp.ack && !tcp.psh);
    }

    #[test]
    fn a_fin_gets_a_fin_ack_and_pure_acks_resets_and_other_protocols_nothing() {
        let mut fin = packet(with(&[], |b| b.ack(ISN + 1).fin()));
        assert_eq!(respond(&mut fin), Response::Reply { discarded: 0 });
        let (_, tcp, _) = reply(&fin);
        assert!(tcp.fin && tcp.ack);
        assert_eq!(tcp.acknowledgment_number, 1001);
        for mut quiet in [
            packet(with(&[], |b| b.ack(ISN + 1))),
            packet(with(&[], |b| b.rst())),
            packet(with(b"late", |b| b.syn().ack(5))),
        ] {
            let before = quiet.data().to_vec();
            assert_eq!(respond(&mut quiet), Response::Nothing);
            assert_eq!(quiet.data(), &before[..], "left as it was");
        }
        let mut udp = PacketBuf::with_storage(vec![0; 256], 0);
        let mut bytes = Vec::new();
        PacketBuilder::ipv4(CLIENT, SERVER, 64)
            .udp(1, 7)
            .write(&mut bytes, b"x")
            .expect("write");
        udp.extend_from_slice(&bytes);
        assert_eq!(udp_to_port(udp.data()), Some(7));
        assert_eq!(respond(&mut udp), Response::Nothing);
        assert_eq!(udp_to_port(fin.data()), None, "TCP");
        for cut in 0..24 {
            assert_eq!(udp_to_port(&bytes[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn truncated_and_lying_headers_get_nothing() {
        let good = packet(with(b"hello", |b| b.ack(ISN + 1))).data().to_vec();
        for cut in 0..good.len() {
            let mut buf = PacketBuf::from_slice(&good[..cut]);
            assert_eq!(respond(&mut buf), Response::Nothing, "cut at {cut}");
        }
        let mut bad_doff = good.clone();
        bad_doff[32] = 0xf0; // data offset 60, past the end
        assert_eq!(
            respond(&mut PacketBuf::from_slice(&bad_doff)),
            Response::Nothing
        );
        let mut fragment = good.clone();
        fragment[6] = 0x20; // more fragments
        assert_eq!(
            respond(&mut PacketBuf::from_slice(&fragment)),
            Response::Nothing
        );
    }
}
