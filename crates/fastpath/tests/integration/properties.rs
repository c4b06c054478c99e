//! Property tests over the whole stack.

use std::time::Duration;

use crate::common::*;
use fastpath::link::{Impairments, LinkCapabilities};
use fastpath::{DropReason, Instant, StackConfig};
use proptest::prelude::*;

/// Datagrams are tagged with their index in the first 4 bytes so the receiver knows what to expect.
fn tagged(index: u32, len: usize) -> Vec<u8> {
    let mut v = payload(len.max(4), index as u64);
    v[..4].copy_from_slice(&index.to_be_bytes());
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the sizes, MTU and impairments, every datagram that arrives is one that was sent, intact
    /// (or, when the wire corrupts, with the checksum of the one sent), at most once unless the wire
    /// duplicates; without loss or corruption every one arrives; nothing is left in reassembly after
    /// the timeout.
    #[test]
    fn datagrams_arrive_intact_or_not_at_all(
        sizes in prop::collection::vec(prop_oneof![4usize..600, 4usize..9000, 60000usize..=65507], 1..40),
        mtu in prop_oneof![Just(576usize), Just(1500), Just(9000), Just(65535)],
        loss in prop_oneof![Just(0.0), 0.0f64..0.1],
        reorder in 0.0f64..0.3,
        duplicate in 0.0f64..0.2,
        corrupt in prop_oneof![Just(0.0), 0.0f64..0.05],
        seed in any::<u64>(),
        classic in any::<bool>(),
    ) {
        let config = if classic { StackConfig::classic() } else { StackConfig::default() };
        let impair = Impairments { loss, reorder, duplicate, corrupt, seed };
        let (mut a, mut b) = two_stacks(config, LinkCapabilities::plain(mtu), impair);
        let tx = a.udp_bind(sa(A, 0)).unwrap();
        let rx = b.udp_bind(sa(B, 7)).unwrap();
        let mut seen = vec![false; sizes.len()];
        let mut out = vec![0u8; 65536];
        let mut now = Instant::ZERO;
        for (i, &len) in sizes.iter().enumerate() {
            a.udp(tx).send_to(&tagged(i as u32, len), sa(B, 7)).unwrap();
            now = now + Duration::from_millis(1);
            settle(&mut a, &mut b, now);
            while let Ok(n) = b.udp(rx).recv(&mut out) {
                prop_assert!(n >= 4);
                let index = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
                prop_assert!(index < sizes.len(), "unknown datagram");
                let sent = tagged(index as u32, sizes[index]);
                if corrupt == 0.0 {
                    prop_assert_eq!(&out[..n], &sent[..], "corrupted");
                } else {
                    // Bit errors in two fragments can cancel in the ones'-complement sum (the Internet
                    // checksum's known blind spot): what is delivered is what the checksum vouches for.
                    prop_assert_eq!(n, sent.len());
                    prop_assert_eq!(fastpath::checksum::rfc1071(&out[..n]), fastpath::checksum::rfc1071(&sent));
                }
                prop_assert!(!seen[index] || duplicate > 0.0, "delivered twice without duplication");
                seen[index] = true;
            }
        }
        if loss == 0.0 && corrupt == 0.0 {
            prop_assert!(seen.iter().all(|&s| s), "lost without loss: {:?}", seen);
        }
        settle(&mut a, &mut b, now + Duration::from_secs(60));
        prop_assert_eq!(b.reassembly_stats(), (0, 0));
        prop_assert_eq!(b.counters().drops.get(DropReason::LinkQueueFull), 0);
    }

    /// Arbitrary fragment sequences never panic, never exceed the caps, and whatever completes is the
    /// datagram's exact bytes.
    #[test]
    fn arbitrary_fragments_are_handled_within_bounds(
        frags in prop::collection::vec((0u16..4, 0usize..40, 1usize..40, any::<bool>()), 1..300),
    ) {
        use fastpath::buf::{BufferMode, BufferPool};
        use fastpath::reassembly::{Ipv4FragmentKey, Outcome, ReassemblyTable};
        let limits = fastpath::config::Limits {
            reassembly_datagrams: 3,
            reassembly_bytes: 20 * 2048,
            ..Default::default()
        };
        let mut table = ReassemblyTable::new(&limits);
        let mut pool = BufferPool::new(BufferMode::Pool, 64);
        let mut drops = fastpath::stats::Drops::default();
        for (ident, off8, len8, more) in frags {
            // Datagram `ident` has byte k equal to (k + ident) as u8, so any reassembled datagram is checkable.
            let (offset, len) = (off8 * 8, len8 * 8 - if more { 0 } else { ident as usize });
            let body: Vec<u8> = (offset..offset + len).map(|k| (k + ident as usize) as u8).collect();
            let key = Ipv4FragmentKey { src: A, dst: B, protocol: 17, ident };
            let mut buf = pool.alloc(len);
            buf.extend_from_slice(&body);
            match table.insert(key, offset, more, &[0x45; 20], buf, Instant::ZERO, &mut pool, &mut drops) {
                Outcome::Complete(d) => {
                    let d = d.payload;
                    let expect: Vec<u8> = (0..d.len()).map(|k| (k + ident as usize) as u8).collect();
                    prop_assert_eq!(d.data(), &expect[..]);
                    pool.free(d);
                }
                Outcome::Held | Outcome::Dropped(_) => {}
            }
            prop_assert!(table.len() <= 3 && table.bytes_held() <= 20 * 2048);
        }
        table.expire(Instant::ZERO + Duration::from_secs(31), &mut pool, |_| {});
        prop_assert_eq!((table.len(), table.bytes_held()), (0, 0));
    }

    /// The same hostile fragments through a whole stack: no panic, caps hold, nothing left afterwards.
    #[test]
    fn arbitrary_fragments_through_the_stack(
        frags in prop::collection::vec((0u16..4, 0usize..200, 0usize..120, any::<bool>()), 1..200),
    ) {
        let mut config = StackConfig::default();
        config.limits.reassembly_datagrams = 3;
        config.limits.reassembly_bytes = 20 * 2048;
        let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
        for (ident, off8, len, more) in frags {
            let offset = off8 * 8;
            let body: Vec<u8> = (offset..offset + len).map(|k| (k + ident as usize) as u8).collect();
            let mut p = ip_packet(A, B, 17, &body);
            p[4..6].copy_from_slice(&ident.to_be_bytes());
            let field = (off8 as u16) | if more { 0x2000 } else { 0 };
            p[6..8].copy_from_slice(&field.to_be_bytes());
            p[10] = 0;
            p[11] = 0;
            let sum = fastpath::checksum::rfc1071(&p[..20]);
            p[10..12].copy_from_slice(&(!sum).to_be_bytes());
            inject(&mut raw, &p);
            b.poll(Instant::ZERO);
            let (n, bytes) = b.reassembly_stats();
            prop_assert!(n <= 3 && bytes <= 20 * 2048);
        }
        b.poll(Instant::ZERO + Duration::from_secs(31));
        prop_assert_eq!(b.reassembly_stats(), (0, 0));
    }
}
