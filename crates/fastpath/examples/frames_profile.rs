//! The receiving side alone, on a link that carries bare IP packets or Ethernet frames: `datagrams`
//! 64-byte UDP datagrams (IPv4, checksummed) handed to a stack `batch` at a time (32 unless given)
//! through the raw end of an in-memory pair, polled and discarded. Usage: `frames_profile
//! [datagrams] [0|1] [batch] [idle]` (1: Ethernet frames, resolved neighbours and all; a batch of 1
//! is a lightly loaded stack, one poll a datagram; `idle` polls that find nothing follow each
//! batch, as in an event loop that polls until a poll has no work); with callgrind, the difference of two counts is the cost of
//! a datagram, and the difference between the two links the Ethernet layer's.

use fastpath::buf::PacketBuf;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd};
use fastpath::wire::MacAddr;
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};

const US: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 2]);
const PEER: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(100_000);
    let ethernet = args.next().unwrap_or(0) == 1;
    let per_poll = args.next().unwrap_or(32).max(1);
    let idle = args.next().unwrap_or(0);
    let caps = LinkCapabilities::plain(1500);
    let (mut raw, end) = if ethernet {
        PairEnd::ethernet_pair(caps, 1 << 12, Impairments::default(), [PEER, US])
    } else {
        PairEnd::pair(caps, 1 << 12, Impairments::default())
    };
    let mut stack = Stack::new(StackConfig::default());
    stack.add_interface("eth0", end, Ipv4Cidr::new([10, 0, 0, 2].into(), 24));
    let sock = stack.udp_bind("10.0.0.2:9").expect("bind");
    // 10.0.0.1:5000 to 10.0.0.2:9, 64 bytes of payload, checksums done.
    let mut packet = vec![
        0x45, 0, 0, 92, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let sum = fastpath::checksum::rfc1071(&packet);
    packet[10..12].copy_from_slice(&(!sum).to_be_bytes());
    let mut udp = vec![0x13, 0x88, 0, 9, 0, 72, 0, 0];
    udp.extend_from_slice(&[0xa5; 64]);
    let pseudo = [10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 72];
    let sum = fastpath::checksum::add(
        fastpath::checksum::rfc1071(&pseudo),
        fastpath::checksum::rfc1071(&udp),
    );
    udp[6..8].copy_from_slice(&(!sum).to_be_bytes());
    packet.extend_from_slice(&udp);
    let mut frame = Vec::new();
    if ethernet {
        frame.extend_from_slice(&US.0);
        frame.extend_from_slice(&PEER.0);
        frame.extend_from_slice(&[0x08, 0x00]);
    }
    frame.extend_from_slice(&packet);
    let now = Instant::from_secs(10);
    stack.poll(now);
    let mut batch = Vec::with_capacity(per_poll);
    let mut got = 0;
    let mut sent = 0;
    while sent < n {
        let k = per_poll.min(n - sent);
        batch.extend((0..k).map(|_| PacketBuf::from_slice(&frame)));
        raw.transmit(&mut batch);
        sent += k;
        stack.poll(now);
        while stack.udp(sock).recv_from_with(|_, _| ()).is_ok() {
            got += 1;
        }
        for _ in 0..idle {
            stack.poll(now);
        }
    }
    assert_eq!(got, n, "{:?}", stack.counters().drops);
    if std::env::var_os("FRAMES_PROFILE_COUNTERS").is_some() {
        eprintln!("{}", stack.counters());
    }
}
