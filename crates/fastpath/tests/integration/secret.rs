//! Every secret-derived value comes from the stack's key: two stacks with random keys send different
//! initial sequence numbers and IPv4 identifications for the same connection, two stacks given the
//! same key send the same ones.

use crate::common::*;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use fastpath::link::LinkCapabilities;
use fastpath::secret::SecretKey;
use fastpath::{Instant, StackConfig};

/// The SYN a new stack with `config` sends to 10.0.0.1:80: its sequence number and its IPv4
/// identification.
fn first_syn(config: StackConfig) -> (u32, u16) {
    let (mut b, mut raw) = stack_and_raw(config, LinkCapabilities::plain(1500));
    b.tcp_connect(sa(A, 80)).expect("connect");
    b.poll(Instant::ZERO);
    b.flush();
    let out = capture(&mut raw);
    assert_eq!(out.len(), 1, "one SYN");
    let sliced = SlicedPacket::from_ip(&out[0]).expect("parses");
    let (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(tcp))) =
        (&sliced.net, &sliced.transport)
    else {
        panic!("not TCP over IPv4")
    };
    assert!(tcp.syn() && !tcp.ack());
    (tcp.sequence_number(), ip.header().identification())
}

#[test]
fn stacks_with_random_keys_differ() {
    let (a, b) = (
        first_syn(StackConfig::default()),
        first_syn(StackConfig::default()),
    );
    // Equal by chance once in 2^32 (the ISN) times 2^16 (the identification).
    assert!(a != b, "{a:?} from both stacks");
    assert_ne!(a.0, b.0, "initial sequence numbers");
}

#[test]
fn stacks_with_one_key_agree_and_another_key_differs() {
    let keyed = |k: u8| StackConfig {
        secret: Some(SecretKey::from_bytes([k; 16])),
        ..StackConfig::default()
    };
    assert_eq!(first_syn(keyed(1)), first_syn(keyed(1)));
    assert_ne!(first_syn(keyed(1)).0, first_syn(keyed(2)).0);
}
