//! No misdelivery: for random sequences of bind, connect, disconnect, close, send and incoming
//! datagrams, every demultiplexing strategy returns exactly the socket `linear` (4.3BSD's
//! `in_pcblookup`) returns, and the same set for broadcasts; for IPv4 and for IPv6 addresses (each
//! strategy is generic over the family).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};

use fastpath::demux::{Demux, DemuxStrategy, Pcb, SocketId, TableAddress};
use proptest::prelude::*;

const LOCAL: [Ipv4Addr; 3] = [
    Ipv4Addr::UNSPECIFIED,
    Ipv4Addr::new(10, 0, 0, 1),
    Ipv4Addr::new(10, 0, 0, 2),
];
const REMOTE: [Ipv4Addr; 4] = [
    Ipv4Addr::new(10, 0, 0, 9),
    Ipv4Addr::new(192, 0, 2, 1),
    Ipv4Addr::new(192, 0, 2, 2),
    Ipv4Addr::UNSPECIFIED,
];
/// 53 and 117 share a chain mod 64; 40000 is an ephemeral port.
const PORTS: [u16; 5] = [53, 117, 54, 1000, 40000];
const REMOTE_PORTS: [u16; 4] = [53, 1000, 5000, 0];

#[derive(Clone, Debug)]
enum Op {
    Bind {
        addr: usize,
        port: usize,
    },
    /// Connect as the stack does: a wildcard local address becomes 10.0.0.1.
    Connect {
        sock: usize,
        addr: usize,
        port: usize,
    },
    /// Connect keeping a wildcard local address (a shape the demultiplexer must handle too).
    ConnectAnyLocal {
        sock: usize,
        addr: usize,
        port: usize,
    },
    Disconnect {
        sock: usize,
    },
    Close {
        sock: usize,
    },
    Sent {
        sock: usize,
    },
    Datagram {
        dst: usize,
        dport: usize,
        src: usize,
        sport: usize,
    },
    Broadcast {
        dport: usize,
        src: usize,
        sport: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..5usize).prop_map(|(addr, port)| Op::Bind { addr, port }),
        2 => (any::<usize>(), 0..3usize, 0..3usize).prop_map(|(sock, addr, port)| Op::Connect { sock, addr, port }),
        1 => (any::<usize>(), 0..3usize, 0..3usize).prop_map(|(sock, addr, port)| Op::ConnectAnyLocal { sock, addr, port }),
        1 => any::<usize>().prop_map(|sock| Op::Disconnect { sock }),
        1 => any::<usize>().prop_map(|sock| Op::Close { sock }),
        1 => any::<usize>().prop_map(|sock| Op::Sent { sock }),
        8 => (0..3usize, 0..5usize, 0..4usize, 0..4usize).prop_map(|(dst, dport, src, sport)| Op::Datagram { dst, dport, src, sport }),
        1 => (0..5usize, 0..4usize, 0..4usize).prop_map(|(dport, src, sport)| Op::Broadcast { dport, src, sport }),
    ]
}

/// The socket table as the stack keeps it: slots reused after close, a bound address to go back to.
struct Model<A: TableAddress> {
    sockets: Vec<Option<(Pcb<A>, A)>>,
    free: Vec<u32>,
    demuxes: Vec<(DemuxStrategy, Box<dyn Demux<A>>)>,
    /// The family's address for each IPv4 address of the constants above.
    addr: fn(Ipv4Addr) -> A,
}

/// IPv6 stand-ins for the IPv4 constants: `::` for the wildcard, `2001:db8::` plus the IPv4 address
/// otherwise (each stays distinct).
fn v6(a: Ipv4Addr) -> Ipv6Addr {
    if a.is_unspecified() {
        Ipv6Addr::UNSPECIFIED
    } else {
        let [a, b, c, d] = a.octets();
        Ipv6Addr::new(
            0x2001,
            0xdb8,
            0,
            0,
            0,
            0,
            u16::from_be_bytes([a, b]),
            u16::from_be_bytes([c, d]),
        )
    }
}

impl<A: TableAddress> Model<A> {
    fn new(addr: fn(Ipv4Addr) -> A) -> Model<A> {
        Model {
            sockets: Vec::new(),
            free: Vec::new(),
            demuxes: DemuxStrategy::ALL.iter().map(|s| (*s, s.build())).collect(),
            addr,
        }
    }

    fn sa(&self, a: Ipv4Addr, port: u16) -> A::Socket {
        (self.addr)(a).socket(port)
    }

    fn live(&self, pick: usize) -> Option<u32> {
        let live: Vec<u32> = (0..self.sockets.len() as u32)
            .filter(|&i| self.sockets[i as usize].is_some())
            .collect();
        (!live.is_empty()).then(|| live[pick % live.len()])
    }

    fn set_pcb(&mut self, id: u32, pcb: Pcb<A>) {
        let (old, bound) = self.sockets[id as usize].expect("live");
        for (_, d) in &mut self.demuxes {
            d.remove(SocketId(id), &old);
            d.insert(SocketId(id), pcb);
        }
        self.sockets[id as usize] = Some((pcb, bound));
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Bind { addr, port } => {
                let pcb = Pcb::bound(self.sa(LOCAL[addr], PORTS[port]));
                let id = self.free.pop().unwrap_or_else(|| {
                    self.sockets.push(None);
                    (self.sockets.len() - 1) as u32
                });
                self.sockets[id as usize] = Some((pcb, (self.addr)(LOCAL[addr])));
                for (_, d) in &mut self.demuxes {
                    d.insert(SocketId(id), pcb);
                }
            }
            Op::Connect { sock, addr, port } | Op::ConnectAnyLocal { sock, addr, port } => {
                if let Some(id) = self.live(sock) {
                    let (pcb, _) = self.sockets[id as usize].unwrap();
                    let keep_any = matches!(op, Op::ConnectAnyLocal { .. });
                    let local_addr = if pcb.local_addr.is_wildcard() && !keep_any {
                        (self.addr)(LOCAL[1])
                    } else {
                        pcb.local_addr
                    };
                    let new = Pcb {
                        local_addr,
                        remote_addr: (self.addr)(REMOTE[addr]),
                        remote_port: REMOTE_PORTS[port],
                        ..pcb
                    };
                    self.set_pcb(id, new);
                }
            }
            Op::Disconnect { sock } => {
                if let Some(id) = self.live(sock) {
                    let (pcb, bound) = self.sockets[id as usize].unwrap();
                    self.set_pcb(id, Pcb::bound(bound.socket(pcb.local_port)));
                }
            }
            Op::Close { sock } => {
                if let Some(id) = self.live(sock) {
                    let (pcb, _) = self.sockets[id as usize].take().unwrap();
                    for (_, d) in &mut self.demuxes {
                        d.remove(SocketId(id), &pcb);
                    }
                    self.free.push(id);
                }
            }
            Op::Sent { sock } => {
                if let Some(id) = self.live(sock) {
                    let (pcb, _) = self.sockets[id as usize].unwrap();
                    for (_, d) in &mut self.demuxes {
                        d.sent(SocketId(id), &pcb);
                    }
                }
            }
            Op::Datagram {
                dst,
                dport,
                src,
                sport,
            } => {
                let dst_addr = [LOCAL[1], LOCAL[2], Ipv4Addr::new(127, 0, 0, 1)][dst];
                let dst = self.sa(dst_addr, PORTS[dport]);
                let src = self.sa(REMOTE[src], REMOTE_PORTS[sport]);
                let mut answers = self
                    .demuxes
                    .iter_mut()
                    .map(|(s, d)| (*s, d.lookup(dst, src)));
                let (_, expected) = answers.next().expect("linear first");
                for (strategy, got) in answers {
                    prop_assert_eq!(
                        got,
                        expected,
                        "{} disagrees with linear for {:?} -> {:?}",
                        strategy,
                        src,
                        dst
                    );
                }
            }
            Op::Broadcast { dport, src, sport } => {
                let dst = self.sa(Ipv4Addr::new(10, 0, 0, 255), PORTS[dport]);
                let src = self.sa(REMOTE[src], REMOTE_PORTS[sport]);
                let mut sets = Vec::new();
                for (s, d) in &mut self.demuxes {
                    let mut out = Vec::new();
                    d.lookup_all(dst, src, &mut out);
                    out.sort();
                    sets.push((*s, out));
                }
                for (s, set) in &sets[1..] {
                    prop_assert_eq!(set, &sets[0].1, "{} broadcast set differs", s);
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_agrees_with_linear(ops in prop::collection::vec(op(), 1..120)) {
        assert_eq!(DemuxStrategy::ALL[0], DemuxStrategy::Linear);
        let mut model = Model::new(|a| a);
        for op in &ops {
            model.apply(op)?;
        }
    }

    #[test]
    fn every_strategy_agrees_with_linear_for_ipv6(ops in prop::collection::vec(op(), 1..120)) {
        let mut model = Model::new(v6);
        for op in &ops {
            model.apply(op)?;
        }
    }
}

/// The cache-hiding case of paper 000 §6.3.1: a wildcard server and a connected socket on the same port.
/// A cache that held the wildcard PCB after a datagram from elsewhere would hide the connected one.
#[test]
fn cache_hiding_is_detected() {
    for &strategy in DemuxStrategy::ALL {
        let mut d = strategy.build();
        let server = Pcb::bound("0.0.0.0:53".parse().unwrap());
        let conn = Pcb {
            local_addr: LOCAL[1],
            local_port: 53,
            remote_addr: REMOTE[1],
            remote_port: 1000,
        };
        d.insert(SocketId(0), server);
        d.insert(SocketId(1), conn);
        let to = SocketAddrV4::new(LOCAL[1], 53);
        for _ in 0..3 {
            assert_eq!(
                d.lookup(to, SocketAddrV4::new(REMOTE[2], 7)),
                Some(SocketId(0)),
                "{strategy}"
            );
            d.sent(SocketId(0), &server);
            assert_eq!(
                d.lookup(to, SocketAddrV4::new(REMOTE[1], 1000)),
                Some(SocketId(1)),
                "{strategy}"
            );
        }
    }
}

/// Lookups that every strategy answers from its cache or its first probe still agree after many
/// sockets come and go, with the stack's own socket table in the loop.
#[test]
fn strategies_in_the_stack_deliver_alike() {
    use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
    use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig, UdpOptions};
    for &demux in DemuxStrategy::ALL {
        let config = StackConfig {
            demux,
            ..StackConfig::default()
        };
        let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 1024, Impairments::default());
        let (mut a, mut b) = (Stack::new(config.clone()), Stack::new(config));
        a.add_interface("p", ea, Ipv4Cidr::new(REMOTE[0], 24));
        b.add_interface("p", eb, Ipv4Cidr::new(LOCAL[1], 24));
        let reuse = UdpOptions {
            reuse_address: true,
            ..UdpOptions::default()
        };
        let wild = b.udp_bind_with("0.0.0.0:53", reuse).unwrap();
        let local = b
            .udp_bind_with(SocketAddrV4::new(LOCAL[1], 53), reuse)
            .unwrap();
        let conn = b
            .udp_bind_with(SocketAddrV4::new(LOCAL[1], 53), reuse)
            .unwrap();
        b.udp(conn)
            .connect(SocketAddrV4::new(REMOTE[0], 999))
            .unwrap();
        let others: Vec<_> = (0..50)
            .map(|p| b.udp_bind(SocketAddrV4::new(LOCAL[1], 2000 + p)).unwrap())
            .collect();
        let c999 = a.udp_bind(SocketAddrV4::new(REMOTE[0], 999)).unwrap();
        let c998 = a.udp_bind(SocketAddrV4::new(REMOTE[0], 998)).unwrap();
        let mut buf = [0u8; 8];
        for round in 0..3 {
            a.udp(c999)
                .send_to(b"x", SocketAddrV4::new(LOCAL[1], 53))
                .unwrap();
            a.udp(c998)
                .send_to(b"y", SocketAddrV4::new(LOCAL[1], 53))
                .unwrap();
            a.udp(c998)
                .send_to(b"z", SocketAddrV4::new(LOCAL[1], 2000 + round))
                .unwrap();
            while a.poll(Instant::ZERO) + b.poll(Instant::ZERO) > 0 {}
            assert_eq!(b.udp(conn).recv(&mut buf).unwrap(), 1, "{demux}");
            assert_eq!(b.udp(local).recv(&mut buf).unwrap(), 1, "{demux}");
            assert!(b.udp(wild).recv(&mut buf).is_err(), "{demux}");
            assert_eq!(
                b.udp(others[round as usize]).recv(&mut buf).unwrap(),
                1,
                "{demux}"
            );
        }
    }
}
