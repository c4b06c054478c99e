//! One effect per switch: each of `StackConfig`'s technique switches, turned from its default, changes
//! the counters of the path it names and no other. The same traffic runs with the default
//! configuration and with one switch changed: UDP between two stacks over a pair (one destination, so
//! the route cache has something to keep, and two datagrams large enough to be fragmented), UDP over
//! loopback (which offers checksum offload and counts as CRC-protected), and a TCP transfer over the
//! pair. The switches whose effect is speed alone, with the same packets and the same counters
//! (`checksum`, the routine; `demux`, the strategy), are covered by the checksum tests and
//! `demux_equivalence.rs`.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::common::*;
use fastpath::buf::BufferMode;
use fastpath::config::CopyChecksum;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{Instant, Stack, StackConfig};

/// The counters that show which path a technique took, summed over both stacks, by name.
fn observe(a: &Stack, b: &Stack) -> Vec<(&'static str, u64)> {
    let (ca, cb) = (a.counters(), b.counters());
    let both = |f: fn(&fastpath::Counters) -> u64| f(ca) + f(cb);
    vec![
        ("ip.in_unpredicted", both(|c| c.ip.in_unpredicted)),
        ("ip.out_untemplated", both(|c| c.ip.out_untemplated)),
        (
            "ip.header_sums_by_routine",
            both(|c| c.ip.header_sums_by_routine),
        ),
        ("udp.route_lookups", both(|c| c.udp.route_lookups)),
        ("udp.pseudo_connects", both(|c| c.udp.pseudo_connects)),
        (
            "udp.out_checksum_separate",
            both(|c| c.udp.out_checksum_separate),
        ),
        (
            "udp.in_checksum_on_arrival",
            both(|c| c.udp.in_checksum_on_arrival),
        ),
        (
            "udp.out_checksum_offloaded",
            both(|c| c.udp.out_checksum_offloaded),
        ),
        (
            "udp.in_checksum_offloaded",
            both(|c| c.udp.in_checksum_offloaded),
        ),
        ("udp.out_no_checksum", both(|c| c.udp.out_no_checksum)),
        ("udp.in_no_checksum", both(|c| c.udp.in_no_checksum)),
        (
            "tcp.out_checksum_separate",
            both(|c| c.tcp.out_checksum_separate),
        ),
        (
            "tcp.predicted",
            both(|c| c.tcp.predicted_acks + c.tcp.predicted_data),
        ),
        (
            "buffers.allocated",
            a.pool_stats().0.allocated + b.pool_stats().0.allocated,
        ),
    ]
}

/// The traffic, with `config` on both stacks; the technique counters after it.
fn run(config: StackConfig) -> Vec<(&'static str, u64)> {
    let (mut a, mut b) = two_stacks(
        config,
        LinkCapabilities::plain(1500),
        Impairments::default(),
    );
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 65536];
    // UDP over the pair: 20 small datagrams to one place, and 2 that are fragmented.
    let rx = b.udp_bind(sa(B, 9)).unwrap();
    let tx = a.udp_bind(sa(A, 0)).unwrap();
    for i in 0..22 {
        let len = if i < 20 { 100 } else { 3000 };
        a.udp(tx).send_to(&payload(len, i), sa(B, 9)).unwrap();
        settle(&mut a, &mut b, now);
        assert_eq!(b.udp(rx).recv(&mut buf).unwrap(), len);
    }
    // UDP over loopback.
    let lo = Ipv4Addr::LOCALHOST;
    let lrx = a.udp_bind(sa(lo, 7)).unwrap();
    let ltx = a.udp_bind(sa(lo, 0)).unwrap();
    for i in 0..10 {
        a.udp(ltx).send_to(&payload(200, i), sa(lo, 7)).unwrap();
        settle(&mut a, &mut b, now);
        assert_eq!(a.udp(lrx).recv(&mut buf).unwrap(), 200);
    }
    // TCP over the pair: 64 KiB one way, then both close.
    let l = b.tcp_listen(sa(B, 80), 4).unwrap();
    let c = a.tcp_connect(sa(B, 80)).unwrap();
    settle(&mut a, &mut b, now);
    let (s, _) = b.tcp_listener(l).accept().unwrap();
    let data = payload(64 << 10, 99);
    let mut sent = 0;
    let mut got = 0;
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += a.tcp(c).write(&data[sent..]).unwrap_or(0);
        }
        now = now + Duration::from_millis(1);
        a.poll(now);
        b.poll(now);
        while let Ok(n) = b.tcp(s).read(&mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == data.len() {
            break;
        }
    }
    assert_eq!(got, data.len());
    a.tcp(c).close();
    b.tcp(s).close();
    settle(&mut a, &mut b, now);
    observe(&a, &b)
}

#[test]
fn each_switch_changes_the_path_it_names_and_no_other() {
    type Change = fn(&mut StackConfig);
    let switches: &[(&str, Change, &[&str])] = &[
        (
            "input_header_prediction",
            |c| c.input_header_prediction = false,
            &["ip.in_unpredicted"],
        ),
        (
            "output_header_template",
            |c| c.output_header_template = false,
            &["ip.out_untemplated"],
        ),
        (
            // With the route cache on: the cached route's header template honours it too.
            "inline_header_checksum",
            |c| c.inline_header_checksum = false,
            &["ip.header_sums_by_routine"],
        ),
        (
            "output_route_cache",
            |c| c.output_route_cache = false,
            &["udp.route_lookups"],
        ),
        (
            // Connecting for the datagram works its route out again each time.
            "sendto_pseudo_connect",
            |c| c.sendto_pseudo_connect = true,
            &["udp.pseudo_connects", "udp.route_lookups"],
        ),
        (
            "copy_checksum",
            |c| c.copy_checksum = CopyChecksum::Separate,
            &[
                "udp.out_checksum_separate",
                "udp.in_checksum_on_arrival",
                "tcp.out_checksum_separate",
            ],
        ),
        (
            "buffers",
            |c| c.buffers = BufferMode::Heap,
            &["buffers.allocated"],
        ),
        (
            "checksum_policy.use_offload",
            |c| c.checksum_policy.use_offload = false,
            &["udp.out_checksum_offloaded", "udp.in_checksum_offloaded"],
        ),
        (
            // Loopback counts as a CRC-protected single hop: no checksum there, offloaded or not.
            "checksum_policy.eliminate_on_protected_hop",
            |c| c.checksum_policy.eliminate_on_protected_hop = true,
            &[
                "udp.out_no_checksum",
                "udp.in_no_checksum",
                "udp.out_checksum_offloaded",
                "udp.in_checksum_offloaded",
            ],
        ),
        (
            "tcp.header_prediction",
            |c| c.tcp.header_prediction = false,
            &["tcp.predicted"],
        ),
    ];
    let base = run(StackConfig::default());
    for (name, change, named) in switches {
        let mut config = StackConfig::default();
        change(&mut config);
        let changed = run(config);
        for ((counter, before), (_, after)) in base.iter().zip(&changed) {
            if named.contains(counter) {
                assert_ne!(before, after, "{name} did not change {counter}");
            } else {
                assert_eq!(
                    before, after,
                    "{name} changed {counter} too ({before} -> {after})"
                );
            }
        }
    }
}

/// The interaction the layers issue named: with the route cache on, `inline_header_checksum` still
/// decides how the cached route's IPv4 headers are summed (before, the cache summed in line always).
#[test]
fn inline_header_checksum_applies_to_the_route_cache_too() {
    for inline in [true, false] {
        let config = StackConfig {
            inline_header_checksum: inline,
            ..StackConfig::default()
        };
        assert!(config.output_route_cache && config.output_header_template);
        let (mut a, mut b) = two_stacks(
            config,
            LinkCapabilities::plain(1500),
            Impairments::default(),
        );
        let _rx = b.udp_bind(sa(B, 9)).unwrap();
        let tx = a.udp_bind(sa(A, 0)).unwrap();
        for i in 0..50 {
            a.udp(tx).send_to(&payload(64, i), sa(B, 9)).unwrap();
        }
        settle(&mut a, &mut b, Instant::ZERO);
        let c = a.counters();
        assert_eq!(c.udp.route_lookups, 1, "one route, then the cache");
        let expected = if inline { 0 } else { 50 };
        assert_eq!(c.ip.header_sums_by_routine, expected, "inline {inline}");
    }
}
