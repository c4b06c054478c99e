//! With the buffer pool, sending and receiving a 64-byte datagram allocates nothing once warm
//! (paper 000 §6.4). A counting global allocator proves it; the heap mode, which must allocate, proves
//! the counter counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::buf::BufferMode;
use fastpath::{Instant, Stack, StackConfig};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; it only counts, per thread.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which System.alloc needs.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    // SAFETY: `ptr` came from this allocator, that is from System, with this layout.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    // SAFETY: `ptr` came from System with `layout`; the caller upholds realloc's contract.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
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
