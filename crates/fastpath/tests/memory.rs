//! The heap, counted by a global allocator (per thread): with the buffer pool, sending and receiving
//! a 64-byte datagram allocates nothing once warm (paper 000 §6.4), which the heap mode, which must
//! allocate, shows the counter can see; and connections in TIME-WAIT hold no buffers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};

use std::time::Duration;

use fastpath::buf::BufferMode;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig, TcpListener};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated and not freed by this thread (frees of another thread's allocations count
    /// where they happen; the tests below run each stack on one thread).
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn live(delta: i64) {
    // `try_with`: the allocator runs during thread teardown too.
    let _ = LIVE.try_with(|c| c.set(c.get() + delta));
}

// SAFETY: forwards every call unchanged to the system allocator; it only counts, per thread.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which System.alloc needs.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        live(layout.size() as i64);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    // SAFETY: `ptr` came from this allocator, that is from System, with this layout.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live(-(layout.size() as i64));
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    // SAFETY: `ptr` came from System with `layout`; the caller upholds realloc's contract.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        live(new_size as i64 - layout.size() as i64);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

/// Allocations made by `rounds` send + poll + receive rounds of 64-byte datagrams over loopback, after
/// a warm-up.
fn allocations_per_run(config: StackConfig, rounds: usize) -> u64 {
    let mut stack = Stack::new(config);
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let rx = stack.udp_bind(server).unwrap();
    let tx = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .unwrap();
    let data = [0x5a; 64];
    let mut out = [0u8; 128];
    let mut round = |stack: &mut Stack| {
        for _ in 0..8 {
            stack.udp(tx).send_to(&data, server).unwrap();
        }
        stack.poll(Instant::ZERO);
        for _ in 0..8 {
            assert_eq!(stack.udp(rx).recv(&mut out).unwrap(), 64);
        }
    };
    for _ in 0..100 {
        round(&mut stack);
    }
    let before = allocations();
    for _ in 0..rounds {
        round(&mut stack);
    }
    allocations() - before
}

#[test]
fn pooled_path_allocates_nothing_once_warm() {
    assert_eq!(allocations_per_run(StackConfig::default(), 1000), 0);
    // The pooled path of the classic configuration's other switches allocates nothing either.
    let classic_pooled = StackConfig {
        buffers: BufferMode::Pool,
        ..StackConfig::classic()
    };
    assert_eq!(allocations_per_run(classic_pooled, 1000), 0);
    // The heap mode allocates one buffer per datagram: the counter works.
    let heap = StackConfig {
        buffers: BufferMode::Heap,
        ..StackConfig::default()
    };
    assert!(allocations_per_run(heap, 1000) >= 8000);
}

/// One download of `size` bytes from B (10.0.0.2:80) to A, the server closing first: B's side ends
/// in TIME-WAIT, A's is freed once its FIN is acknowledged.
fn download(a: &mut Stack, b: &mut Stack, listener: TcpListener, now: &mut Instant, size: usize) {
    let client = a.tcp_connect("10.0.0.2:80").unwrap();
    let chunk = vec![7u8; 64 << 10];
    let mut buf = vec![0u8; 64 << 10];
    let (mut server, mut sent, mut got) = (None, 0, 0);
    let (mut server_closed, mut client_closed) = (false, false);
    for _ in 0..1_000_000 {
        *now = *now + Duration::from_micros(100);
        a.poll(*now);
        b.poll(*now);
        if server.is_none() && !server_closed {
            server = b.tcp_listener(listener).accept().ok().map(|(s, _)| s);
        }
        if let Some(s) = server {
            while sent < size {
                match b.tcp(s).write(&chunk[..chunk.len().min(size - sent)]) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            if sent == size {
                b.tcp(s).close();
                server = None;
                server_closed = true;
            }
        }
        loop {
            match a.tcp(client).read(&mut buf) {
                Ok(0) if !client_closed => {
                    a.tcp(client).close();
                    client_closed = true;
                    break;
                }
                Ok(n) if n > 0 => got += n,
                _ => break,
            }
        }
        if client_closed && a.tcp_connections() == 0 {
            assert_eq!(got, size);
            return;
        }
    }
    panic!("the download did not finish: {got} of {size} bytes");
}

/// Connections whose server sent 1 MiB and closed first stay in TIME-WAIT on the server for a minute,
/// holding no buffers and in their compact form: the heap grows by a few hundred bytes per
/// connection (477 measured: the compact entry, its slot, its demultiplexer entry), not by its
/// send ring (1 MiB each before TIME-WAIT released it) nor its whole block (877 bytes each).
#[test]
fn time_wait_connections_hold_no_buffers() {
    let (ea, eb) = PairEnd::pair(
        LinkCapabilities::plain(1500),
        1 << 16,
        Impairments::default(),
    );
    let mut a = Stack::new(StackConfig::default());
    a.add_interface("pair0", ea, Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24));
    let mut b = Stack::new(StackConfig::default());
    b.add_interface("pair0", eb, Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 2), 24));
    let listener = b.tcp_listen("10.0.0.2:80", 128).unwrap();
    let mut now = Instant::from_secs(1);
    // One first, so that the tables have grown; then the count.
    download(&mut a, &mut b, listener, &mut now, 1 << 20);
    a.release_free_buffers();
    b.release_free_buffers();
    let before = LIVE.with(|c| c.get());
    const N: usize = 20;
    for _ in 0..N {
        download(&mut a, &mut b, listener, &mut now, 1 << 20);
    }
    a.release_free_buffers();
    b.release_free_buffers();
    let grown = LIVE.with(|c| c.get()) - before;
    assert_eq!(b.tcp_connections(), N + 1, "every server side in TIME-WAIT");
    assert!(
        grown < (N as i64) * 640,
        "{grown} bytes more for {N} connections in TIME-WAIT"
    );
}
