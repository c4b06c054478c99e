//! Path MTU discovery (RFC 1191, RFC 5927 §5.2) between two stacks whose wire the test holds: it
//! forwards every packet from one raw end to the other, and may play a router with a smaller MTU
//! that drops datagrams with DF too large for it and answers with "fragmentation needed" (built with
//! etherparse, an independent implementation), or forge such messages.

use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::common::*;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{DropReason, Instant, Ipv4Cidr, Stack, StackConfig, TcpStream};

/// The router that sends "fragmentation needed" (on the link, as a router on the path would be).
const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);

/// A (10.0.0.1) and B (10.0.0.2) on links of 1500 bytes, each link's other end held by the test.
struct Wire {
    a: Stack,
    b: Stack,
    ra: PairEnd,
    rb: PairEnd,
    now: Instant,
    /// The router's MTU from A to B, once it is in the path.
    router_mtu: Option<usize>,
    /// Every packet A sent (after the router's verdict: forwarded or not).
    from_a: Vec<Vec<u8>>,
    /// Packets from A the router dropped as too large.
    too_big: usize,
}

impl Wire {
    fn new(config: StackConfig) -> Wire {
        let caps = LinkCapabilities::plain(1500);
        let (ra, ea) = PairEnd::pair(caps, 65536, Impairments::default());
        let (rb, eb) = PairEnd::pair(caps, 65536, Impairments::default());
        let mut a = Stack::new(config.clone());
        a.add_interface("pair0", ea, Ipv4Cidr::new(A, 24));
        let mut b = Stack::new(config);
        b.add_interface("pair0", eb, Ipv4Cidr::new(B, 24));
        // Timers count from a stack's last poll: bring both clocks to the start.
        let now = Instant::from_secs(1);
        a.poll(now);
        b.poll(now);
        Wire {
            a,
            b,
            ra,
            rb,
            now,
            router_mtu: None,
            from_a: Vec::new(),
            too_big: 0,
        }
    }

    /// Polls both stacks once and moves what they sent across, through the router.
    fn step(&mut self) -> usize {
        let mut moved = self.a.poll(self.now) + self.b.poll(self.now);
        for p in capture(&mut self.ra) {
            moved += 1;
            match self.router_mtu {
                Some(mtu) if p.len() > mtu && dont_frag(&p) => {
                    self.too_big += 1;
                    let icmp = frag_needed(ROUTER, A, mtu as u16, &p);
                    inject(&mut self.ra, &icmp);
                }
                _ => inject(&mut self.rb, &p),
            }
            self.from_a.push(p);
        }
        for p in capture(&mut self.rb) {
            moved += 1;
            inject(&mut self.ra, &p);
        }
        moved
    }

    /// Steps until `done`, the clock moving 100 µs a step, or to the next timer when all is quiet.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Wire) -> bool) {
        let end = self.now + limit;
        loop {
            let moved = self.step();
            if done(self) {
                return;
            }
            assert!(self.now < end, "not done after {limit:?} of virtual time");
            if moved == 0 && self.step() == 0 {
                let next = [self.a.next_deadline(), self.b.next_deadline()]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(end);
                self.now = next.max(self.now + Duration::from_micros(1)).min(end);
            } else {
                self.now = self.now + Duration::from_micros(100);
            }
        }
    }

    /// A connection from A to B's port `port`: (A's end, B's end).
    fn connect(&mut self, port: u16) -> (TcpStream, TcpStream) {
        let l = self.b.tcp_listen(sa(B, port), 16).unwrap();
        let c = self.a.tcp_connect(sa(B, port)).unwrap();
        let mut server = None;
        self.run_until(Duration::from_secs(10), |w| {
            if server.is_none() {
                server = w.b.tcp_listener(l).accept().ok();
            }
            server.is_some() && w.a.tcp(c).is_established()
        });
        (c, server.unwrap().0)
    }

    /// Sends `data` from A's `tx` to B's `rx` and returns what B read to the end of the stream;
    /// `during` runs after every step with the bytes B has read so far.
    fn transfer(
        &mut self,
        tx: TcpStream,
        rx: TcpStream,
        data: &[u8],
        mut during: impl FnMut(&mut Wire, usize),
    ) -> Vec<u8> {
        let (mut sent, mut closed) = (0, false);
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        self.run_until(Duration::from_secs(60), |w| {
            while sent < data.len() {
                match w.a.tcp(tx).write(&data[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write: {e}"),
                }
            }
            if sent == data.len() && !closed {
                w.a.tcp(tx).shutdown_write().unwrap();
                closed = true;
            }
            loop {
                match w.b.tcp(rx).read(&mut buf) {
                    Ok(0) => return true,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            during(w, got.len());
            false
        });
        got
    }

    /// Sends `n` bytes from A's `tx` and returns the data segments A sent for them (not delivered).
    fn send_held(&mut self, tx: TcpStream, n: usize) -> Vec<Vec<u8>> {
        self.a.tcp(tx).write(&payload(n, 9)).unwrap();
        self.a.poll(self.now);
        capture(&mut self.ra)
            .into_iter()
            .filter(|p| p[9] == 6 && tcp_payload_len(p) > 0)
            .collect()
    }
}

fn dont_frag(ip: &[u8]) -> bool {
    ip[6] & 0x40 != 0
}

fn tcp_payload_len(ip: &[u8]) -> usize {
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    total - ihl - usize::from(ip[ihl + 12] >> 4) * 4
}

/// An ICMP "fragmentation needed" from `from` to `to` with next-hop MTU `mtu`, quoting `offending`'s
/// IP header and first 8 payload bytes (RFC 792, RFC 1191 §4).
fn frag_needed(from: Ipv4Addr, to: Ipv4Addr, mtu: u16, offending: &[u8]) -> Vec<u8> {
    let ihl = usize::from(offending[0] & 0x0f) * 4;
    let unreachable =
        etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: mtu };
    let builder = etherparse::PacketBuilder::ipv4(from.octets(), to.octets(), 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(unreachable));
    let mut out = Vec::new();
    builder.write(&mut out, &offending[..ihl + 8]).unwrap();
    out
}

#[test]
fn a_router_with_a_smaller_mtu_shrinks_the_segments_and_the_transfer_completes() {
    let mut w = Wire::new(StackConfig::default());
    let (tx, rx) = w.connect(80);
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1448);
    let data = payload(2 << 20, 1);
    // A third of the way in, a router with an MTU of 1000 appears on the path.
    let mut learned_at = None;
    let got = w.transfer(tx, rx, &data, |w, read| {
        if read > data.len() / 3 && w.router_mtu.is_none() {
            w.router_mtu = Some(1000);
        }
        if learned_at.is_none() && w.a.counters().ip.path_mtu.learned > 0 {
            learned_at = Some(w.from_a.len());
        }
    });
    assert!(got == data, "the stream arrived intact");
    let learned_at = learned_at.expect("the path MTU was learned");
    let c = *w.a.counters();
    assert_eq!(c.ip.path_mtu.learned, 1);
    assert_eq!(c.drops.get(DropReason::TcpIcmpOutOfWindow), 0);
    assert!(w.too_big > 0);
    // Every TCP packet carried DF; full-sized ones before, none above 1000 bytes after.
    assert!(w.from_a.iter().all(|p| dont_frag(p)));
    assert!(w.from_a[..learned_at].iter().any(|p| p.len() == 1500));
    let after = &w.from_a[learned_at..];
    assert!(after.len() > 100);
    assert!(after.iter().all(|p| p.len() <= 1000), "a packet over 1000");
    assert!(after.iter().any(|p| p.len() == 1000));
    // MTU − 40 − the timestamp option.
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1000 - 40 - 12);
    // What was in flight went again at once: no retransmission timeout.
    assert_eq!(c.tcp.timeouts, 0);

    // A new connection to B starts with the smaller MSS.
    let (tx2, rx2) = w.connect(81);
    assert_eq!(w.a.tcp(tx2).info().unwrap().mss, 948);
    let start = w.from_a.len();
    let data2 = payload(200_000, 2);
    let got2 = w.transfer(tx2, rx2, &data2, |_, _| {});
    assert!(got2 == data2);
    assert!(w.from_a[start..].iter().all(|p| p.len() <= 1000));
    assert_eq!(w.too_big, w.a.counters().ip.path_mtu.ignored as usize + 1);
}

#[test]
fn frag_needed_quoting_a_sequence_not_in_flight_changes_nothing() {
    let mut w = Wire::new(StackConfig::default());
    let (tx, rx) = w.connect(80);
    let data = payload(100_000, 3);
    let got = w.transfer(tx, rx, &data, |_, _| {});
    assert!(got == data);
    // Quote a segment A sent long ago, whose data B has acknowledged (RFC 5927 §5.2: a blind
    // attacker's guess looks like this).
    let old = w
        .from_a
        .iter()
        .find(|p| tcp_payload_len(p) > 1000)
        .unwrap()
        .clone();
    let before = *w.a.counters();
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &old));
    w.a.poll(w.now);
    let c = w.a.counters();
    assert_eq!(c.drops.get(DropReason::TcpIcmpOutOfWindow), 1);
    assert_eq!(c.ip.path_mtu, before.ip.path_mtu);
    // A connection that is still open sends full segments.
    let (tx, _rx) = w.connect(81);
    let old = w.from_a.iter().rev().find(|p| p[9] == 6).unwrap().clone();
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &old));
    w.a.poll(w.now);
    assert_eq!(
        w.a.counters().drops.get(DropReason::TcpIcmpOutOfWindow),
        2,
        "nothing in flight"
    );
    let held = w.send_held(tx, 20_000);
    assert!(held.iter().all(|p| p.len() == 1500 && dont_frag(p)));
    assert_eq!(w.a.counters().ip.path_mtu.learned, 0);
}

#[test]
fn an_mtu_below_the_floor_is_ignored_and_zero_means_the_plateau_below() {
    let mut w = Wire::new(StackConfig::default());
    let (tx, _rx) = w.connect(80);
    let held = w.send_held(tx, 10 * 1448);
    assert_eq!(held.len(), 10);
    // In flight, but 500 is below the floor (552).
    inject(&mut w.ra, &frag_needed(ROUTER, A, 500, &held[3]));
    w.a.poll(w.now);
    let c = *w.a.counters();
    assert_eq!(c.drops.get(DropReason::PathMtuBelowFloor), 1);
    assert_eq!((c.ip.path_mtu.learned, c.ip.path_mtu.ignored), (0, 1));
    assert!(capture(&mut w.ra).is_empty(), "nothing resent");
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1448);
    // Not smaller than the path MTU in use: ignored too.
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1500, &held[3]));
    w.a.poll(w.now);
    assert_eq!(w.a.counters().drops.get(DropReason::PathMtuNotSmaller), 1);
    // An old router's zero (RFC 1191 §5): the plateau below 1500, 1492 (RFC 1191 §7). The ten
    // segments go again, cut to the new size, with the congestion window as it was.
    let cwnd = w.a.tcp(tx).info().unwrap().cwnd;
    inject(&mut w.ra, &frag_needed(ROUTER, A, 0, &held[0]));
    w.a.poll(w.now);
    assert_eq!(w.a.counters().ip.path_mtu.learned, 1);
    let info = w.a.tcp(tx).info().unwrap();
    assert_eq!((info.mss, info.cwnd), (1492 - 52, cwnd));
    let resent: Vec<_> = capture(&mut w.ra)
        .into_iter()
        .filter(|p| tcp_payload_len(p) > 0)
        .collect();
    let bytes: usize = resent.iter().map(|p| tcp_payload_len(p)).sum();
    assert_eq!(bytes, 10 * 1448);
    assert!(resent.iter().all(|p| p.len() <= 1492 && dont_frag(p)));
    assert!(w.a.counters().tcp.retrans_segs >= 10);
}

#[test]
fn with_the_switch_off_tcp_goes_without_df_and_frag_needed_is_ignored() {
    let config = StackConfig {
        path_mtu_discovery: false,
        ..StackConfig::default()
    };
    let mut w = Wire::new(config);
    let (tx, _rx) = w.connect(80);
    let held = w.send_held(tx, 5 * 1448);
    assert!(!held.is_empty());
    assert!(w.from_a.iter().chain(&held).all(|p| !dont_frag(p)));
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &held[0]));
    w.a.poll(w.now);
    let c = w.a.counters();
    assert_eq!(c.drops.get(DropReason::IcmpFragNeededIgnored), 1);
    assert_eq!(c.ip.path_mtu.learned, 0);
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1448);
}

#[test]
fn a_connection_that_opts_out_goes_without_df_or_keeps_its_mss() {
    use fastpath::PathMtuDiscovery;
    // IP_PMTUDISC_DONT: no DF, and "fragmentation needed" leaves the connection's MSS alone
    // (the destination's path MTU is still learnt, for others).
    let mut w = Wire::new(StackConfig::default());
    let (tx, _rx) = w.connect(80);
    w.a.tcp(tx)
        .set_path_mtu_discovery(PathMtuDiscovery::Dont)
        .unwrap();
    let held = w.send_held(tx, 5 * 1448);
    assert_eq!(held.len(), 5);
    assert!(held.iter().all(|p| !dont_frag(p)));
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &held[0]));
    w.a.poll(w.now);
    assert_eq!(w.a.counters().ip.path_mtu.learned, 1);
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1448);
    assert!(capture(&mut w.ra).is_empty(), "nothing resent");
    // IP_PMTUDISC_INTERFACE: DF, and the MSS kept all the same.
    let mut w = Wire::new(StackConfig::default());
    let (tx, _rx) = w.connect(80);
    w.a.tcp(tx)
        .set_path_mtu_discovery(PathMtuDiscovery::Interface)
        .unwrap();
    let held = w.send_held(tx, 5 * 1448);
    assert!(held.iter().all(|p| dont_frag(p)));
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &held[0]));
    w.a.poll(w.now);
    assert_eq!(w.a.tcp(tx).info().unwrap().mss, 1448);
    assert_eq!(
        w.a.tcp(tx).path_mtu_discovery().unwrap(),
        PathMtuDiscovery::Interface
    );
}

#[test]
fn udp_fragments_to_the_learned_path_mtu_until_it_expires() {
    let mut w = Wire::new(StackConfig::default());
    let s = w.a.udp_bind(sa(A, 5000)).unwrap();
    w.a.udp(s).connect(sa(B, 9)).unwrap();
    let send = |w: &mut Wire| {
        w.a.udp(s).send(&payload(1400, 4)).unwrap();
        w.a.poll(w.now);
        capture(&mut w.ra)
    };
    let one = send(&mut w);
    assert_eq!(one.len(), 1);
    assert!(!dont_frag(&one[0]), "UDP goes without DF");
    // A forged quote of a datagram from a port with no socket: counted, not learned.
    let mut stranger = one[0].clone();
    stranger[20..22].copy_from_slice(&5001u16.to_be_bytes());
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &stranger));
    w.a.poll(w.now);
    assert_eq!(w.a.counters().drops.get(DropReason::PathMtuNoSocket), 1);
    // About our datagram: learned; the socket is not told (no error on its next call), and the
    // next datagrams leave in fragments of at most 1000 bytes.
    inject(&mut w.ra, &frag_needed(ROUTER, A, 1000, &one[0]));
    w.a.poll(w.now);
    assert_eq!(w.a.counters().ip.path_mtu.learned, 1);
    let fragments = send(&mut w);
    assert_eq!(fragments.len(), 2);
    assert!(fragments.iter().all(|p| p.len() <= 1000 && !dont_frag(p)));
    // They reassemble at B.
    let r = w.b.udp_bind(sa(B, 9)).unwrap();
    for p in &fragments {
        inject(&mut w.rb, p);
    }
    w.b.poll(w.now);
    let mut buf = [0u8; 2000];
    let (n, _) = w.b.udp(r).recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], &payload(1400, 4)[..]);
    // Ten minutes on, the path MTU is forgotten and datagrams go whole again.
    w.now = w.now + Duration::from_secs(599);
    assert_eq!(send(&mut w).len(), 2);
    w.now = w.now + Duration::from_secs(1);
    w.a.poll(w.now);
    assert_eq!(w.a.counters().ip.path_mtu.expired, 1);
    assert_eq!(send(&mut w).len(), 1);
}

#[test]
fn the_cache_is_bounded() {
    let config = StackConfig {
        limits: fastpath::config::Limits {
            path_mtu_entries: 4,
            ..Default::default()
        },
        ..StackConfig::default()
    };
    let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
    let s = b.udp_bind(sa(B, 5000)).unwrap();
    for i in 0..20u8 {
        let dst = Ipv4Addr::new(10, 0, 0, 100 + i);
        b.udp(s).send_to(&payload(1400, 5), sa(dst, 9)).unwrap();
        b.poll(Instant::from_secs(1));
        let sent = capture(&mut raw);
        inject(&mut raw, &frag_needed(ROUTER, B, 1000, &sent[0]));
        b.poll(Instant::from_secs(1));
    }
    let c = b.counters().ip.path_mtu;
    assert_eq!((c.learned, c.evicted), (20, 16));
    // The last four are remembered: a datagram to the newest is fragmented, to the oldest it is not.
    b.udp(s)
        .send_to(&payload(1400, 5), sa(Ipv4Addr::new(10, 0, 0, 119), 9))
        .unwrap();
    b.udp(s)
        .send_to(&payload(1400, 5), sa(Ipv4Addr::new(10, 0, 0, 100), 9))
        .unwrap();
    b.poll(Instant::from_secs(1));
    assert_eq!(capture(&mut raw).len(), 3);
}
