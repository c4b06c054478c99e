//! With the `instrument` feature, a send and receive loop fills in time for every layer and every
//! operation on both sides. (Run with `cargo test -p fastpath --features instrument --test instrument`.)
#![cfg(feature = "instrument")]

use std::net::{Ipv4Addr, SocketAddrV4};

use fastpath::instrument::{self, Layer, Op, Side};
use fastpath::{Instant, Stack, StackConfig};

fn profile(config: StackConfig) -> instrument::Profile {
    let mut stack = Stack::new(config);
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let rx = stack.udp_bind(server).unwrap();
    let tx = stack
        .udp_bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .unwrap();
    let mut out = [0u8; 2048];
    instrument::take();
    for _ in 0..1000 {
        stack.udp(tx).send_to(&[7; 512], server).unwrap();
        stack.poll(Instant::ZERO);
        assert_eq!(stack.udp(rx).recv(&mut out).unwrap(), 512);
    }
    instrument::take()
}

#[test]
fn every_layer_and_operation_is_timed() {
    let p = profile(StackConfig::classic());
    for side in [Side::Send, Side::Receive] {
        for layer in [Layer::Socket, Layer::Udp, Layer::Ip, Layer::Link] {
            assert!(
                p.layers[side as usize][layer as usize] > 0,
                "{side:?} {layer:?}: {p:?}"
            );
        }
        for op in [Op::Checksum, Op::Buffers] {
            assert!(
                p.ops[side as usize][op as usize] > 0,
                "{side:?} {op:?}: {p:?}"
            );
        }
    }
    assert!(p.ops[Side::Send as usize][Op::Copy as usize] > 0);
    assert!(p.ops[Side::Receive as usize][Op::Copy as usize] > 0);
    // The default fuses copy and checksum on both sides where the link does not take the checksum
    // (loopback offers offload, like Linux's lo: turn the policy off to see the fused loops).
    let mut fused = StackConfig::default();
    fused.checksum_policy.use_offload = false;
    let p = profile(fused);
    assert!(p.ops[Side::Send as usize][Op::CopyChecksum as usize] > 0);
    assert!(p.ops[Side::Receive as usize][Op::CopyChecksum as usize] > 0);
    assert_eq!(p.ops[Side::Send as usize][Op::Copy as usize], 0);
}

#[test]
fn loopback_offload_touches_no_checksum() {
    let p = profile(StackConfig::default());
    for side in [Side::Send, Side::Receive] {
        assert_eq!(
            p.ops[side as usize][Op::CopyChecksum as usize],
            0,
            "{side:?}"
        );
        assert!(p.ops[side as usize][Op::Copy as usize] > 0, "{side:?}");
    }
}
