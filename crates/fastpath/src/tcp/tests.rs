//! The table's deadline structure: a timer visits only the connections that are due, and
//! `next_deadline` is never later than the earliest deadline of all, and earlier only by the entry of
//! a connection whose deadline moved later, which costs one timer run.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use super::*;
use crate::buf::{BufferMode, BufferPool};
use crate::link::LinkCapabilities;
use crate::route::{InterfaceId, Ipv4Cidr};

const IDLE: usize = 10_000;

/// Where the layer's packets go: counted and dropped.
#[derive(Default)]
struct Sink(usize);

impl Transmit for Sink {
    fn transmit<A: IpAddress>(
        &mut self,
        _iface: InterfaceId,
        _hop: A,
        _packet: PacketBuf,
    ) -> usize {
        self.0 += 1;
        0
    }
}

/// The TCP layer alone, with what its context borrows: IPv4 with one 1500-byte interface, a pool,
/// counters, the configuration and a sink for its packets.
struct Layer {
    tcp: Tcp,
    ip: Ipv4,
    pool: BufferPool,
    counters: Counters,
    config: StackConfig,
    sink: Sink,
    now: Instant,
}

impl Layer {
    /// Runs `f` with the layer and its context.
    fn with<R>(&mut self, f: impl FnOnce(&mut Tcp, &mut TcpCx<Sink>) -> R) -> R {
        let mut cx = TcpCx {
            now: self.now,
            cfg: &self.config.tcp,
            max_connections: self.config.limits.tcp_connections,
            max_ooo: self.config.limits.tcp_out_of_order,
            pool: &mut self.pool,
            counters: &mut self.counters,
            ip: &mut self.ip,
            out: &mut self.sink,
        };
        f(&mut self.tcp, &mut cx)
    }

    /// What `Stack::poll` does for TCP's timers at `at`.
    fn poll(&mut self, at: Instant) {
        self.now = at;
        if self.tcp.next_deadline().is_some_and(|d| d <= at) {
            self.with(|tcp, cx| tcp.timers(cx));
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.tcp.next_deadline()
    }
}

/// The layer with `n` established connections (rebuilt as from SYN cookies), each with keep-alive
/// armed `idle(i)` from now. Returns the layer and the slots.
fn stack_with(n: usize, idle: impl Fn(usize) -> Duration) -> (Layer, Vec<u32>) {
    let config = StackConfig::default();
    let mut ip = Ipv4::new(&config, crate::secret::SecretKey::from_bytes([1; 16]));
    ip.add_interface(
        Ipv4Cidr::new(Ipv4Addr::LOCALHOST, 8),
        LinkCapabilities::plain(65535),
    );
    ip.add_interface(
        Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24),
        LinkCapabilities::plain(1500),
    );
    let hop = ip.route(Ipv4Addr::new(10, 0, 0, 2)).unwrap();
    let mut stack = Layer {
        tcp: Tcp::new(&config, crate::secret::SecretKey::from_bytes([3; 16])),
        ip,
        pool: BufferPool::new(BufferMode::Pool, 64),
        counters: Counters::default(),
        config,
        sink: Sink::default(),
        now: Instant::ZERO,
    };
    let mut slots = Vec::new();
    for i in 0..n {
        let local = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
        let remote = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 1024 + i as u16);
        let ack = TcpRepr {
            src_port: remote.port(),
            dst_port: local.port(),
            seq: 1000,
            ack: 5001,
            flags: Flags::ACK,
            window: 65535,
            urgent: 0,
            options: TcpOptions::default(),
        };
        let mut tcb = Tcb::from_cookie(local, remote, hop, &ack, 1460, &stack.config.tcp);
        tcb.set_keepalive(true, stack.now, idle(i));
        tcb.orphan = true;
        let pcb = pcb_of(&tcb);
        let (index, _) = stack.tcp.insert(Entry::Conn(Box::new(tcb)), pcb);
        stack.tcp.schedule(index);
        slots.push(index);
    }
    (stack, slots)
}

/// The earliest deadline, by looking at every connection.
fn scan(stack: &mut Layer) -> Option<Instant> {
    (0..stack.tcp.slots.capacity() as u32)
        .filter_map(|i| stack.tcp.tcb(i).and_then(|t| t.deadline()))
        .min()
}

#[test]
fn a_timer_visits_only_the_connection_that_is_due() {
    // Connection 0 is due in 10 s, the others in 2 hours and more.
    let (mut stack, slots) = stack_with(IDLE + 1, |i| {
        if i == 0 {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(7200) + Duration::from_millis(i as u64)
        }
    });
    let t0 = stack.now;
    assert_eq!(stack.next_deadline(), Some(t0 + Duration::from_secs(10)));
    assert_eq!(stack.next_deadline(), scan(&mut stack));
    assert!(stack.tcp.timers.len() <= IDLE + 1);

    // Before the deadline, nothing is visited.
    stack.poll(t0 + Duration::from_secs(9));
    assert_eq!(stack.tcp.timer_visits, 0);

    // At it, exactly one connection: it sends its keep-alive probe and re-arms 75 s later.
    let t1 = t0 + Duration::from_secs(10);
    stack.poll(t1);
    assert_eq!(stack.tcp.timer_visits, 1);
    assert_eq!(stack.counters.tcp.out_segs, 1);
    assert_eq!(stack.next_deadline(), Some(t1 + Duration::from_secs(75)));
    assert_eq!(stack.next_deadline(), scan(&mut stack));

    // Removing the earliest moves the next deadline to the next one, without a scan.
    stack.with(|tcp, cx| tcp.abort_with_reset(cx, slots[0]));
    assert_eq!(stack.tcp.connections(), IDLE);
    let first_idle = t0 + Duration::from_secs(7200) + Duration::from_millis(1);
    assert_eq!(stack.next_deadline(), Some(first_idle));
    assert_eq!(stack.next_deadline(), scan(&mut stack));
    stack.poll(first_idle);
    assert_eq!(stack.tcp.timer_visits, 2);
    assert_eq!(stack.next_deadline(), scan(&mut stack));
}

#[test]
fn a_deadline_that_moves_later_costs_one_early_run_and_no_heap_work() {
    let (mut stack, slots) = stack_with(3, |i| Duration::from_secs(100 + i as u64));
    let t0 = stack.now;
    let at = |secs: u64| Some(t0 + Duration::from_secs(secs));
    assert_eq!(stack.next_deadline(), at(100));
    // Connection 0's keep-alive restarts later (as a segment's arrival would restart it): its entry
    // stays where it is, so the next deadline is early (a lower bound), and nothing is pushed.
    let entries = stack.tcp.timers.len();
    stack.now = t0 + Duration::from_secs(400);
    let idle = Duration::from_secs(100);
    stack
        .tcp
        .tcb(slots[0])
        .unwrap()
        .set_keepalive(true, stack.now, idle);
    stack.tcp.schedule(slots[0]);
    assert_eq!(stack.tcp.timers.len(), entries);
    assert_eq!(stack.next_deadline(), at(100));
    assert_eq!(scan(&mut stack), at(101));
    // An earlier deadline is learned at once.
    stack
        .tcp
        .tcb(slots[2])
        .unwrap()
        .set_keepalive(true, t0, Duration::from_secs(1));
    stack.tcp.schedule(slots[2]);
    assert_eq!(stack.next_deadline(), at(1));
    assert_eq!(stack.next_deadline(), scan(&mut stack));
    // Polled at each deadline the stack gives: connection 2 probes at 1 s and again 75 s later;
    // at 100 s connection 0's old entry comes due, the run finds it not due and sends nothing,
    // and from then on the next deadline is exact again; connection 1 probes at 101 s.
    for (secs, visits, early, segments, next) in [
        (1, 1, 0, 1, 76),
        (76, 2, 0, 2, 100),
        (100, 3, 1, 2, 101),
        (101, 4, 1, 3, 151),
    ] {
        stack.poll(t0 + Duration::from_secs(secs));
        assert_eq!(stack.tcp.timer_visits, visits, "at {secs} s");
        assert_eq!(stack.counters.tcp.timer_early, early, "at {secs} s");
        assert_eq!(stack.counters.tcp.out_segs, segments, "at {secs} s");
        assert_eq!(stack.next_deadline(), at(next), "at {secs} s");
        assert!(stack.next_deadline() <= scan(&mut stack), "at {secs} s");
    }
    assert_eq!(scan(&mut stack), at(151));
    // By 500 s each of the three is due once (2 at 151 s, 1 at 176 s, 0 at 500 s) and probes.
    stack.poll(t0 + Duration::from_secs(500));
    assert_eq!(stack.tcp.timer_visits, 7);
    assert_eq!(stack.counters.tcp.out_segs, 6);
    assert_eq!(stack.next_deadline(), scan(&mut stack));
    assert!(stack.next_deadline() > at(500));
    // Heap entries stay bounded by the live connections.
    assert!(stack.tcp.timers.len() <= 2 * 3 + 64);
}

#[test]
fn a_stale_entry_left_on_top_costs_one_run_and_sends_nothing() {
    // A due at 10 s, B at 100 s, C at 200 s.
    let (mut stack, slots) = stack_with(3, |i| Duration::from_secs([10, 100, 200][i]));
    let t0 = stack.now;
    let at = |secs: u64| Some(t0 + Duration::from_secs(secs));
    // B's deadline moves to 300 s while A's entry is on top: B's entry (100 s) stays in the heap.
    stack
        .tcp
        .tcb(slots[1])
        .unwrap()
        .set_keepalive(true, t0, Duration::from_secs(300));
    stack.tcp.schedule(slots[1]);
    assert_eq!(stack.next_deadline(), at(10));
    // A has no deadline left when its entry comes due (as after a last timer that fires and arms
    // nothing): its run does nothing, and B's stale entry is on top after the pop.
    stack
        .tcp
        .tcb(slots[0])
        .unwrap()
        .set_keepalive(false, t0, Duration::ZERO);
    stack.poll(t0 + Duration::from_secs(10));
    assert_eq!(stack.next_deadline(), at(100));
    assert_eq!(scan(&mut stack), at(200));
    // The run at 100 s finds B not due and pushes it at 300 s: the deadline is exact again.
    stack.poll(t0 + Duration::from_secs(100));
    assert_eq!(stack.tcp.timer_visits, 2);
    assert_eq!(stack.counters.tcp.timer_early, 2);
    assert_eq!(stack.counters.tcp.out_segs, 0);
    assert_eq!(stack.next_deadline(), at(200));
    assert_eq!(stack.next_deadline(), scan(&mut stack));
    // A connection removed while its entry is on top leaves no wake-up behind.
    stack.with(|tcp, cx| tcp.abort_with_reset(cx, slots[2]));
    assert_eq!(stack.next_deadline(), at(300));
    assert_eq!(stack.next_deadline(), scan(&mut stack));
}
