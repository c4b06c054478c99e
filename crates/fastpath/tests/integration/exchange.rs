//! Two stacks over the in-memory pair exchange datagrams of every size, fragmented above the MTU.

use std::time::Duration;

use crate::common::*;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{DropReason, Instant, StackConfig};

fn every_size(config: StackConfig, mtu: usize, sizes: impl Iterator<Item = usize>) {
    let (mut a, mut b) = two_stacks(config, LinkCapabilities::plain(mtu), Impairments::default());
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    let rx = b.udp_bind(sa(B, 7000)).unwrap();
    let mut out = vec![0u8; 65536];
    let now = Instant::ZERO;
    let mut count = 0;
    for len in sizes {
        let data = payload(len, len as u64);
        assert_eq!(a.udp(tx).send_to(&data, sa(B, 7000)).unwrap(), len);
        settle(&mut a, &mut b, now);
        let (n, from) = b
            .udp(rx)
            .recv_from(&mut out)
            .unwrap_or_else(|e| panic!("size {len}: {e}"));
        assert_eq!(n, len, "size {len}");
        assert_eq!(from, a.udp(tx).local_addr().unwrap_or(from));
        assert!(out[..n] == data[..], "payload of size {len} differs");
        count += 1;
    }
    assert_eq!(b.counters().udp.in_read, count);
    assert_eq!(b.counters().drops.total(), 0, "{}", b.counters());
    assert_eq!(b.reassembly_stats(), (0, 0));
}

#[test]
fn every_size_0_to_65507_at_mtu_1500() {
    every_size(StackConfig::default(), 1500, 0..=65507);
}

#[test]
fn classic_configuration_exchanges_the_same() {
    every_size(
        StackConfig::classic(),
        1500,
        (0..=65507).step_by(97).chain([1472, 1473, 65507]),
    );
}

#[test]
fn large_mtu_and_tiny_mtu() {
    every_size(
        StackConfig::default(),
        65535,
        (0..=65507).step_by(251).chain([65507]),
    );
    every_size(
        StackConfig::default(),
        68,
        (0..=3000).step_by(7).chain([65507]),
    );
}

#[test]
fn fragments_survive_loss_and_reordering_without_corruption_or_leftovers() {
    let impair = Impairments {
        loss: 0.05,
        reorder: 0.05,
        seed: 42,
        ..Impairments::default()
    };
    let (mut a, mut b) = two_stacks(
        StackConfig::default(),
        LinkCapabilities::plain(1500),
        impair,
    );
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    let rx = b.udp_bind(sa(B, 7000)).unwrap();
    let mut out = vec![0u8; 65536];
    let mut now = Instant::ZERO;
    let (mut sent, mut received) = (0, 0);
    for i in 0..400u64 {
        let len = 1000 + (i as usize * 7919) % 20000;
        let data = payload(len, i);
        a.udp(tx).send_to(&data, sa(B, 7000)).unwrap();
        sent += 1;
        now = now + Duration::from_millis(10);
        settle(&mut a, &mut b, now);
        while let Ok((n, _)) = b.udp(rx).recv_from(&mut out) {
            // The first 8 bytes identify which datagram this is.
            let seed = (0..400u64).find(|&s| {
                payload(8, s)[..] == out[..8.min(n)] && n == 1000 + (s as usize * 7919) % 20000
            });
            let seed = seed.expect("a datagram that was never sent, or corrupted");
            assert!(out[..n] == payload(n, seed)[..], "corrupted datagram");
            received += 1;
        }
    }
    assert!(
        received > 0 && received < sent,
        "5% loss should lose some of {sent}, not all: got {received}"
    );
    // Incomplete datagrams are held until their timeout, then released.
    assert!(b.reassembly_stats().0 > 0);
    settle(&mut a, &mut b, now + Duration::from_secs(31));
    assert_eq!(b.reassembly_stats(), (0, 0));
    assert!(b.counters().drops.get(DropReason::ReassemblyTimeout) > 0);
    assert_eq!(b.counters().drops.get(DropReason::UdpBadChecksum), 0);
}
