//! Soak: millions of datagrams of random sizes (mostly small, a few fragmented, a few up to 65,507
//! bytes) both ways between two stacks on an in-memory pair that loses 1% of packets and reorders
//! 5%, with every datagram that arrives checked byte for byte. Afterwards:
//!
//! - memory in use returns to its level: nothing in reassembly, socket queues or on the wire, the heap
//!   (measured by a counting global allocator) back to where it was after the warm-up, give or take
//!   what the pools' free lists hold, and back to where it started once the stacks are dropped;
//! - the counters add up, each way: every datagram sent was read, or dropped under a named reason
//!   (reassembly timeout or eviction), or lost on the wire: a datagram in one packet, or one whose
//!   fragments were all lost, by the link's own count, which the taps on either end of the pair
//!   confirm packet for packet.
//!
//! 10 million datagrams by default (about 5 seconds in release on the project's 2-core VM);
//! `FASTPATH_SOAK_DATAGRAMS=N` sets another number. The test binary has this one test, so that the
//! allocator counts nothing else.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fastpath::buf::PacketBuf;
use fastpath::link::{Impairments, Link, LinkCapabilities, PairEnd, PairStats};
use fastpath::{DropReason, Instant, Ipv4Cidr, Stack, StackConfig, UdpOptions, UdpSocket};

// ---------------------------------------------------------------------------------------------
// Heap in use, counted.

struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = IN_USE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards every call unchanged to the system allocator; it only counts the bytes in use.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which System.alloc needs.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    // SAFETY: as alloc.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    // SAFETY: `ptr` came from this allocator, that is from System, with this layout.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    // SAFETY: `ptr` came from System with `layout`; the caller upholds realloc's contract.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn heap() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Taps: what crosses each end of the pair, packet by packet.

/// Packets one tap saw going one way.
#[derive(Clone, Debug, Default)]
struct Seen {
    packets: u64,
    /// UDP datagrams in one packet.
    whole: u64,
    fragments: u64,
    icmp: u64,
    /// The IP identifier of every fragment since the last `take`.
    idents: Vec<u16>,
}

impl Seen {
    fn record(&mut self, p: &PacketBuf) {
        let d = p.data();
        self.packets += 1;
        if u16::from_be_bytes([d[6], d[7]]) & 0x3fff != 0 {
            self.fragments += 1;
            self.idents.push(u16::from_be_bytes([d[4], d[5]]));
        } else if d[9] == 17 {
            self.whole += 1;
        } else {
            self.icmp += 1;
        }
    }
}

#[derive(Debug, Default)]
struct TapLog {
    sent: Seen,
    received: Seen,
    /// The pair's own counters of the direction this end sends on, and the packets waiting towards
    /// this end, as of the tap's last call.
    wire: PairStats,
    pending: usize,
}

/// A link that passes everything to one end of a pair and records it on the way.
struct Tap {
    end: PairEnd,
    log: Arc<Mutex<TapLog>>,
}

impl Link for Tap {
    fn capabilities(&self) -> LinkCapabilities {
        self.end.capabilities()
    }

    fn transmit(&mut self, batch: &mut Vec<PacketBuf>) -> usize {
        let mut log = self.log.lock().unwrap();
        for p in batch.iter() {
            log.sent.record(p);
        }
        let dropped = self.end.transmit(batch);
        log.wire = self.end.tx_stats();
        dropped
    }

    fn receive(&mut self, batch: &mut Vec<PacketBuf>, max: usize) -> usize {
        let from = batch.len();
        let n = self.end.receive(batch, max);
        let mut log = self.log.lock().unwrap();
        for p in &batch[from..] {
            log.received.record(p);
        }
        log.wire = self.end.tx_stats();
        log.pending = self.end.pending();
        n
    }
}

// ---------------------------------------------------------------------------------------------
// The traffic.

/// A 64-bit mix of `x` (splitmix64's finalizer): sizes and payloads are functions of the datagram's
/// index, so the receiver knows what to expect without the sender keeping anything.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The size of datagram `index`: 90% 8 to 256 bytes, 9% up to 1472 (one packet at MTU 1500), 0.9% up
/// to 8972 (fragmented), 0.1% up to 65,507.
fn size(dir: u8, index: u64) -> usize {
    let r = mix(index ^ u64::from(dir) << 60);
    let pick = r % 1000;
    let within = (r >> 16) as usize;
    match pick {
        0..900 => 8 + within % 249,
        900..990 => 257 + within % (1472 - 256),
        990..999 => 1473 + within % (8972 - 1472),
        _ => 8973 + within % (65507 - 8972),
    }
}

/// Bytes every payload is cut from, at an offset that depends on the index.
const POOL_LEN: usize = 1 << 17;

fn fill(pool: &[u8], dir: u8, index: u64, out: &mut [u8]) {
    out[..8].copy_from_slice(&(index | u64::from(dir) << 56).to_be_bytes());
    let at = (mix(index ^ 0x5555) as usize) % (POOL_LEN - 65536);
    let n = out.len() - 8;
    out[8..].copy_from_slice(&pool[at..at + n]);
}

/// One direction of traffic: a sender, a receiver, and what each tap saw.
struct Direction {
    name: &'static str,
    dir: u8,
    tx: UdpSocket,
    rx: UdpSocket,
    to: SocketAddrV4,
    sent: u64,
    sent_whole: u64,
    sent_fragmented: u64,
    read_whole: u64,
    read_fragmented: u64,
    /// Fragmented datagrams none of whose fragments arrived.
    all_lost: u64,
    seen: Vec<bool>,
}

/// Two stacks, A (10.0.0.1) and B (10.0.0.2), on a pair with `impair`, each end tapped. No buffer
/// depot: each stack's pool is its own, so what the pools hold is what `pool_stats` says.
fn two_tapped_stacks(
    config: StackConfig,
    impair: Impairments,
) -> (Stack, Stack, Arc<Mutex<TapLog>>, Arc<Mutex<TapLog>>) {
    let (ea, eb) = PairEnd::pair(LinkCapabilities::plain(1500), 1 << 16, impair);
    let (la, lb): (Arc<Mutex<TapLog>>, Arc<Mutex<TapLog>>) = (Arc::default(), Arc::default());
    let mut a = Stack::new(config.clone());
    let tap = Tap {
        end: ea,
        log: Arc::clone(&la),
    };
    a.add_interface("pair0", tap, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config);
    let tap = Tap {
        end: eb,
        log: Arc::clone(&lb),
    };
    b.add_interface("pair0", tap, Ipv4Cidr::new(B, 24));
    (a, b, la, lb)
}

/// Sends `n` datagrams of `d`, from `from` (the sending stack).
fn send(from: &mut Stack, d: &mut Direction, pool: &[u8], n: u64, buf: &mut [u8]) {
    for _ in 0..n {
        let index = d.sent;
        let len = size(d.dir, index);
        fill(pool, d.dir, index, &mut buf[..len]);
        from.udp(d.tx).send_to(&buf[..len], d.to).expect("send");
        d.sent += 1;
        if 28 + len > 1500 {
            d.sent_fragmented += 1;
        } else {
            d.sent_whole += 1;
        }
    }
}

/// Reads everything waiting for `d` at `to` (the receiving stack), checking every byte.
fn receive(to: &mut Stack, d: &mut Direction, pool: &[u8], buf: &mut [u8], expect: &mut [u8]) {
    while let Ok(n) = to.udp(d.rx).recv(buf) {
        let tag = u64::from_be_bytes(buf[..8].try_into().unwrap());
        assert_eq!(
            (tag >> 56) as u8,
            d.dir,
            "{}: a datagram of the other direction",
            d.name
        );
        let index = tag & ((1 << 56) - 1);
        assert!(
            index < d.sent,
            "{}: datagram {index} was never sent",
            d.name
        );
        assert!(
            !d.seen[index as usize],
            "{}: datagram {index} twice",
            d.name
        );
        d.seen[index as usize] = true;
        let len = size(d.dir, index);
        assert_eq!(n, len, "{}: datagram {index}'s length", d.name);
        fill(pool, d.dir, index, &mut expect[..len]);
        assert!(
            buf[..n] == expect[..len],
            "{}: datagram {index} corrupted",
            d.name
        );
        if 28 + len > 1500 {
            d.read_fragmented += 1;
        } else {
            d.read_whole += 1;
        }
    }
}

/// Fragmented datagrams of one round (each has its own IP identifier within a round) none of whose
/// fragments arrived: the idents the sender's tap saw and the receiver's did not.
fn wholly_lost(sender: &Mutex<TapLog>, receiver: &Mutex<TapLog>) -> u64 {
    let sent = std::mem::take(&mut sender.lock().unwrap().sent.idents);
    let mut arrived = std::mem::take(&mut receiver.lock().unwrap().received.idents);
    if sent.is_empty() {
        return 0;
    }
    arrived.sort_unstable();
    let mut sent = sent;
    sent.sort_unstable();
    sent.dedup();
    sent.iter()
        .filter(|i| arrived.binary_search(i).is_err())
        .count() as u64
}

fn settle_all(a: &mut Stack, b: &mut Stack, now: Instant) {
    settle(a, b, now);
    // One more round each way so that each tap has seen the other end's last receive.
    a.poll(now);
    b.poll(now);
}

#[test]
fn millions_of_datagrams_leave_nothing_behind_and_add_up() {
    let total: u64 = std::env::var("FASTPATH_SOAK_DATAGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let started = std::time::Instant::now();
    let mut rng = fastpath::rng::Rng::new(0x50a6);
    let pool = payload(POOL_LEN, 0x50a6);
    let mut buf = vec![0u8; 65536];
    let mut expect = vec![0u8; 65536];
    let per_direction = total.div_ceil(2) as usize;
    let mut seen = [vec![false; per_direction], vec![false; per_direction]];

    let heap_at_start = heap();
    let mut config = StackConfig::default();
    // A short reassembly timeout, so that a lost fragment's datagram is gone before its IP
    // identifier comes round again (65,536 datagrams take about 2 simulated seconds here).
    config.limits.reassembly_timeout = Duration::from_millis(500);
    let impair = Impairments {
        loss: 0.01,
        reorder: 0.05,
        seed: 0x50a6,
        ..Impairments::default()
    };
    let (mut a, mut b, tap_a, tap_b) = two_tapped_stacks(config, impair);
    // Deep enough receive queues that a round's datagrams always fit.
    let deep = UdpOptions {
        recv_buffer_bytes: Some(16 << 20),
        ..UdpOptions::default()
    };
    let mut dirs = [
        Direction {
            name: "A to B",
            dir: 0,
            tx: a.udp_bind(sa(A, 0)).unwrap(),
            rx: b.udp_bind_with(sa(B, 9), deep).unwrap(),
            to: sa(B, 9),
            sent: 0,
            sent_whole: 0,
            sent_fragmented: 0,
            read_whole: 0,
            read_fragmented: 0,
            all_lost: 0,
            seen: std::mem::take(&mut seen[0]),
        },
        Direction {
            name: "B to A",
            dir: 1,
            tx: b.udp_bind(sa(B, 0)).unwrap(),
            rx: a.udp_bind_with(sa(A, 9), deep).unwrap(),
            to: sa(A, 9),
            sent: 0,
            sent_whole: 0,
            sent_fragmented: 0,
            read_whole: 0,
            read_fragmented: 0,
            all_lost: 0,
            seen: std::mem::take(&mut seen[1]),
        },
    ];

    let mut now = Instant::ZERO;
    let mut heap_after_warmup = None;
    let mut round = 0u64;
    while dirs[0].sent + dirs[1].sent < total {
        round += 1;
        for (i, d) in dirs.iter_mut().enumerate() {
            let left = total.div_ceil(2) - d.sent;
            let n = (1 + rng.below(64)).min(left);
            let from = if i == 0 { &mut a } else { &mut b };
            send(from, d, &pool, n, &mut buf);
        }
        settle(&mut a, &mut b, now);
        dirs[0].all_lost += wholly_lost(&tap_a, &tap_b);
        dirs[1].all_lost += wholly_lost(&tap_b, &tap_a);
        receive(&mut b, &mut dirs[0], &pool, &mut buf, &mut expect);
        receive(&mut a, &mut dirs[1], &pool, &mut buf, &mut expect);
        now = now + Duration::from_millis(2);
        if heap_after_warmup.is_none() && dirs[0].sent + dirs[1].sent >= total / 100 {
            heap_after_warmup = Some((heap(), pool_held(&a) + pool_held(&b)));
        }
        for s in [&a, &b] {
            let (n, bytes) = s.reassembly_stats();
            let limits = &s.config().limits;
            assert!(n <= limits.reassembly_datagrams && bytes <= limits.reassembly_bytes);
        }
    }
    // Past every reassembly timeout: what was waiting for a lost fragment goes.
    let later = now + Duration::from_secs(5);
    settle_all(&mut a, &mut b, now);
    settle_all(&mut a, &mut b, later);
    for (d, s) in dirs.iter_mut().zip([&mut b, &mut a]) {
        receive(s, d, &pool, &mut buf, &mut expect);
    }

    // Nothing left anywhere.
    for (name, s) in [("A", &mut a), ("B", &mut b)] {
        assert_eq!(s.reassembly_stats(), (0, 0), "{name}: reassembly");
    }
    for (d, s) in dirs.iter().zip([&mut b, &mut a]) {
        assert_eq!(
            s.udp(d.rx).queued().unwrap(),
            (0, 0),
            "{}: a socket queue",
            d.name
        );
    }
    for log in [&tap_a, &tap_b] {
        assert_eq!(log.lock().unwrap().pending, 0, "packets left on the wire");
    }

    // The counters add up, each way.
    for (i, d) in dirs.iter().enumerate() {
        let (sender, receiver) = if i == 0 { (&a, &b) } else { (&b, &a) };
        let (tx_log, rx_log) = if i == 0 {
            (&tap_a, &tap_b)
        } else {
            (&tap_b, &tap_a)
        };
        let (tx, rx) = (tx_log.lock().unwrap(), rx_log.lock().unwrap());
        let (sc, rc) = (sender.counters(), receiver.counters());
        let wire = tx.wire;
        let name = d.name;
        // Packets: what the sender handed down went on the wire, and was delivered or lost there.
        assert_eq!(sc.drops.get(DropReason::LinkQueueFull), 0, "{name}");
        assert_eq!(
            sc.ip.out_packets, tx.sent.packets,
            "{name}: sent to the tap"
        );
        assert_eq!(
            wire.sent, tx.sent.packets,
            "{name}: the pair's count of packets sent"
        );
        assert_eq!(
            wire.sent,
            wire.delivered + wire.lost + wire.queue_full,
            "{name}: the wire"
        );
        assert_eq!((wire.duplicated, wire.queue_full), (0, 0), "{name}");
        assert_eq!(
            rx.received.packets, wire.delivered,
            "{name}: delivered to the tap"
        );
        assert_eq!(
            rc.ip.in_receives, wire.delivered,
            "{name}: received by the stack"
        );
        let lost_whole = tx.sent.whole - rx.received.whole;
        let lost_fragments = tx.sent.fragments - rx.received.fragments;
        let lost_icmp = tx.sent.icmp - rx.received.icmp;
        assert_eq!(
            wire.lost,
            lost_whole + lost_fragments + lost_icmp,
            "{name}: the taps"
        );
        // Datagrams: every one sent was read, dropped for a named reason, or lost on the wire.
        assert_eq!(sc.udp.out_datagrams, d.sent, "{name}");
        assert_eq!(
            tx.sent.whole, d.sent_whole,
            "{name}: one packet per small datagram"
        );
        assert_eq!(
            d.sent_whole,
            d.read_whole + lost_whole,
            "{name}: small datagrams:\n{rc}"
        );
        let timeouts = rc.drops.get(DropReason::ReassemblyTimeout);
        let evicted = rc.drops.get(DropReason::ReassemblyEvicted);
        assert_eq!(
            d.sent_fragmented,
            d.read_fragmented + timeouts + evicted + d.all_lost,
            "{name}: fragmented datagrams ({} wholly lost on the wire):\n{rc}",
            d.all_lost
        );
        assert_eq!(rc.ip.reasm_oks, d.read_fragmented, "{name}");
        // Nothing else was dropped at the receiver.
        let named = timeouts + evicted;
        assert_eq!(
            rc.drops.total()
                - rc.drops.get(DropReason::IcmpRateLimited)
                - rc.drops.get(DropReason::IcmpPeerRateLimited),
            named,
            "{name}:\n{rc}"
        );
        assert!(
            d.read_whole + d.read_fragmented > d.sent * 95 / 100,
            "{name}: too much lost"
        );
        assert!(
            total < 1_000_000 || (timeouts > 0 && lost_whole > 0),
            "{name}: the soak should see losses of both kinds"
        );
        println!(
            "{name}: {} sent ({} fragmented), {} read; lost on the wire: {} packets, {lost_whole} small \
             datagrams, {} fragmented ones whole; reassembly: {timeouts} timed out, {evicted} evicted",
            d.sent,
            d.sent_fragmented,
            d.read_whole + d.read_fragmented,
            wire.lost,
            d.all_lost
        );
    }

    // Memory: after the warm-up and at the end the heap holds the same, but for what the pools'
    // free lists took on meanwhile (at most `pool_free_buffers` per size class).
    let (warm_heap, warm_pools) = heap_after_warmup.expect("warmed up");
    let end_pools = pool_held(&a) + pool_held(&b);
    let end_heap = heap();
    let slack = 256 << 10;
    assert!(
        end_heap <= warm_heap + end_pools.saturating_sub(warm_pools) + slack,
        "heap after warm-up {warm_heap} (pools {warm_pools}), at the end {end_heap} (pools {end_pools})"
    );
    let peak = PEAK.load(Ordering::Relaxed) - heap_at_start;
    drop((a, b, tap_a, tap_b));
    let after = heap();
    assert!(
        after <= heap_at_start + (16 << 10),
        "the heap held {heap_at_start} bytes before the stacks, {after} after dropping them"
    );
    let [d0, d1] = &dirs;
    println!(
        "{} datagrams in {:.1?} ({round} rounds): read {} + {}, peak heap {:.1} MiB over the start, \
         {:.1} MiB after the warm-up, {:.1} MiB at the end (pools {:.1} MiB)",
        d0.sent + d1.sent,
        started.elapsed(),
        d0.read_whole + d0.read_fragmented,
        d1.read_whole + d1.read_fragmented,
        peak as f64 / (1 << 20) as f64,
        (warm_heap - heap_at_start) as f64 / (1 << 20) as f64,
        (end_heap - heap_at_start) as f64 / (1 << 20) as f64,
        end_pools as f64 / (1 << 20) as f64,
    );
}

fn pool_held(s: &Stack) -> usize {
    s.pool_stats().2
}
