//! The PSH flag as Linux sets it (`TcpConfig::linux_push`): each case is one measured against Linux
//! 6.18 with packetdrill's scripts (a peer MSS of 1000, segments as the wire carries them once GSO
//! has cut Linux's packets).

use super::*;

/// Our first data byte is 1 in these tests' numbers, as in packetdrill's.
const S: u32 = ISS;
const R: u32 = IRS + 1;

/// A passive open from a peer offering an MSS of 1000, whose handshake took `rtt_ms`.
pub(super) fn server(cfg: TcpConfig, rtt_ms: u64) -> Harness {
    let mut syn = seg(SYN, IRS, 0, 65535);
    syn.options.mss = Some(1000);
    let mut h = Harness::accept(cfg, &syn);
    h.send().expect("SYN-ACK");
    h.advance(Duration::from_millis(rtt_ms));
    recv!(h, seg(ACK, R, S + 1, 65535), b"", Verdict::Established);
    assert_eq!(h.tcb.info().mss, 1000);
    h
}

/// Checks the segments owed now, exactly: `(psh, first, end)` in relative sequence numbers, each
/// an ACK.
pub(super) fn expect(h: &mut Harness, segments: &[(bool, u32, u32)]) {
    for &(psh, first, end) in segments {
        let flags = if psh { ACK | PSH } else { ACK };
        send!(h, out(flags, S + first, R, 65535), (end - first) as usize);
    }
    send!(h, None);
}

pub(super) fn ack(h: &mut Harness, n: u32) {
    recv!(h, seg(ACK, R, S + n, 65535));
}

/// Ten segments as five packets of two, PSH on each packet's last.
fn first_ten(h: &mut Harness) {
    let segments: Vec<_> = (0..10)
        .map(|i| (i % 2 == 1, 1 + i * 1000, 1001 + i * 1000))
        .collect();
    expect(h, &segments);
}

/// slow_start/slow-start-ack-per-1pkt.pkt: a 100 ms RTT paces two segments per packet; the ten of
/// the initial window go as five packets (`P. 1:10001(10000)` to packetdrill, which joins them),
/// and each ACK of one segment lets a packet of two go, with PSH.
#[test]
fn linux_push_marks_every_packet_of_two_in_slow_start() {
    let mut h = server(plain(), 100);
    h.write(30000);
    first_ten(&mut h);
    h.advance(Duration::from_millis(105));
    ack(&mut h, 1001);
    expect(&mut h, &[(false, 10001, 11001), (true, 11001, 12001)]);
    ack(&mut h, 2001);
    expect(&mut h, &[(false, 12001, 13001), (true, 13001, 14001)]);
    h.advance(Duration::from_millis(5));
    ack(&mut h, 3001);
    expect(&mut h, &[(false, 14001, 15001), (true, 15001, 16001)]);
}

/// fast_retransmit/fr-4pkt-fack-last-byte.pkt: the segments of a write, then retransmitted after a
/// timeout: only where the write ended does a retransmission carry PSH (`. 1:1001`,
/// `. 1001:3001`, `P. 3001:4001`); with a window of two segments, Linux sends one per packet.
#[test]
fn linux_push_retransmissions_carry_it_where_the_write_ended() {
    let mut h = server(plain(), 100);
    h.write(4000);
    expect(
        &mut h,
        &[
            (false, 1, 1001),
            (true, 1001, 2001),
            (false, 2001, 3001),
            (true, 3001, 4001),
        ],
    );
    h.fire();
    expect(&mut h, &[(false, 1, 1001)]);
    ack(&mut h, 1001);
    expect(&mut h, &[(false, 1001, 2001), (false, 2001, 3001)]);
    ack(&mut h, 3001);
    expect(&mut h, &[(true, 3001, 4001)]);
}

/// cubic/cubic-rto-ss-ca-cwnd-bump.pkt: after a timeout, a window of two or three segments sends
/// at most half of it at once, one segment per packet, without PSH (`. 2001:4001`, `. 4001:6001`);
/// at four, packets of two again, with PSH (`P. 6001:8001`).
#[test]
fn linux_push_small_windows_send_single_segments_without_it() {
    let cfg = TcpConfig {
        congestion: CongestionAlgorithm::Cubic,
        ..plain()
    };
    let mut h = server(cfg, 100);
    h.write(1000);
    expect(&mut h, &[(true, 1, 1001)]);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 1001);
    h.write(1000);
    expect(&mut h, &[(true, 1001, 2001)]);
    h.fire();
    expect(&mut h, &[(true, 1001, 2001)]);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 2001);
    assert_eq!(h.tcb.info().cwnd, 2000);
    // Still in slow start (Linux: ssthresh 7 segments).
    assert!(h.tcb.info().ssthresh >= 7000);
    h.write(200000);
    expect(&mut h, &[(false, 2001, 3001), (false, 3001, 4001)]);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 3001);
    expect(&mut h, &[(false, 4001, 5001), (false, 5001, 6001)]);
    h.advance(Duration::from_millis(2));
    ack(&mut h, 4001);
    expect(&mut h, &[(false, 6001, 7001), (true, 7001, 8001)]);
}

/// fast_recovery/prr-ss-30pkt-lost-1_4-11_16.pkt: in loss recovery, segments go one at a time, new
/// data (`. 10001:11001`) and retransmissions (`. 1:1001`) alike, none at the end of a write:
/// no PSH.
#[test]
fn linux_push_recovery_sends_single_segments_without_it() {
    let cfg = TcpConfig {
        sack: true,
        ..plain()
    };
    let mut syn = seg(SYN, IRS, 0, 65535);
    syn.options.mss = Some(1000);
    syn.options.sack_permitted = true;
    let mut h = Harness::accept(cfg, &syn);
    h.send().expect("SYN-ACK");
    h.advance(Duration::from_millis(10));
    recv!(h, seg(ACK, R, S + 1, 65535), b"", Verdict::Established);
    h.write(20000);
    first_ten(&mut h);
    h.advance(Duration::from_millis(10));
    let sacked = |h: &mut Harness, end: u32| {
        let mut d = seg(ACK, R, S + 1, 65535);
        d.options.sack[0] = (S + 4001, S + end);
        d.options.sack_count = 1;
        recv!(h, d);
        h.send_all()
    };
    sacked(&mut h, 5001);
    sacked(&mut h, 6001);
    let sent = sacked(&mut h, 7001);
    assert!(!sent.is_empty());
    for (repr, data) in sent.iter().chain(sacked(&mut h, 8001).iter()) {
        assert_eq!(data.len(), 1000);
        assert!(!repr.flags.contains(PSH), "{repr:?}");
    }
}

/// A write appended to data not sent yet takes over the mark of the write before it (Linux appends
/// it to the same buffer and clears that buffer's PSH first): the segment that holds the earlier
/// write's end carries none.
#[test]
fn linux_push_a_write_appended_to_unsent_data_takes_over_its_mark() {
    let mut h = server(plain(), 100);
    h.tcb.nodelay = true;
    h.write(10000);
    first_ten(&mut h);
    h.write(300);
    h.write(1000);
    send!(h, None);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 1001);
    expect(&mut h, &[(false, 10001, 11001), (true, 11001, 11301)]);
}

/// slow_start/slow-start-after-idle.pkt sets `tcp_min_tso_segs` to 10: packets of five segments,
/// half the initial window (`P. 1:5001`, `P. 5001:10001`).
#[test]
fn linux_push_packets_follow_the_least_segments_per_packet() {
    let cfg = TcpConfig {
        min_tso_segments: 10,
        ..plain()
    };
    let mut h = server(cfg, 100);
    h.write(26000);
    let segments: Vec<_> = (0..10)
        .map(|i| (i % 5 == 4, 1 + i * 1000, 1001 + i * 1000))
        .collect();
    expect(&mut h, &segments);
}

/// With TSO, a packet of several segments carries PSH (the link's segmentation leaves it on the
/// last); one of a single segment only where a write ended.
#[test]
fn linux_push_a_tso_packet_of_several_segments_carries_it() {
    let mut h = server(plain(), 100);
    h.write(30000);
    let o = with_cx!(&mut h, |tcb, cx| tcb.next_segment(cx, Some(65536))).expect("a packet");
    assert_eq!(o.segment_size, Some(1000));
    assert!(o.len >= 10000);
    assert!(o.repr.flags.contains(PSH));
}

/// Switched off: PSH only on the segment that empties the send buffer.
#[test]
fn without_linux_push_only_the_segment_that_empties_the_buffer_carries_it() {
    let cfg = TcpConfig {
        linux_push: false,
        ..plain()
    };
    let mut h = server(cfg, 100);
    h.write(4000);
    expect(
        &mut h,
        &[
            (false, 1, 1001),
            (false, 1001, 2001),
            (false, 2001, 3001),
            (true, 3001, 4001),
        ],
    );
    h.fire();
    expect(&mut h, &[(false, 1, 1001)]);
}
