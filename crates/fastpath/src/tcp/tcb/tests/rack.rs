//! RACK-TLP (RFC 8985), proportional rate reduction (RFC 6937) and D-SACK (RFC 2883): a segment
//! in, the exact segments out, at the exact times.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

/// The tests' configuration with SACK, RACK-TLP, PRR and D-SACK on.
fn rack() -> TcpConfig {
    TcpConfig {
        sack: true,
        loss_detection: LossDetection::Rack,
        tail_loss_probe: true,
        prr: true,
        dsack: true,
        linux_push: false,
        ..plain()
    }
}

fn established() -> Harness {
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    Harness::established_with(rack(), peer)
}

fn m(i: u32) -> u32 {
    S + i * MSS
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Sends what is owed; the sequence numbers and lengths.
fn sent(h: &mut Harness) -> Vec<(u32, usize)> {
    h.send_all()
        .into_iter()
        .map(|(r, d)| (r.seq, d.len()))
        .collect()
}

/// A duplicate ACK with SACK blocks.
fn sack(h: &mut Harness, ack: u32, blocks: &[(u32, u32)]) {
    let mut d = seg(ACK, R, ack, 65535);
    for (i, &b) in blocks.iter().enumerate() {
        d.options.sack[i] = b;
    }
    d.options.sack_count = blocks.len() as u8;
    recv!(h, d);
}

/// Ten segments, all sent at once (the initial window).
fn ten_sent(h: &mut Harness) -> Instant {
    h.write(10 * MSS as usize);
    let t0 = h.now;
    assert_eq!(sent(h).len(), 10);
    t0
}

#[test]
fn one_segment_sacked_marks_the_hole_lost_after_a_quarter_of_the_least_rtt() {
    let mut h = established();
    let t0 = ten_sent(&mut h);
    // The handshake measured 1 ms (its floor): srtt and the least RTT.
    assert_eq!(h.tcb.info().min_rtt, Some(Duration::from_millis(1)));
    h.advance(us(1000));
    sack(&mut h, S, &[(m(1), m(2))]);
    assert_eq!(sent(&mut h), []);
    // Segment 0 was sent before segment 1, which took 1 ms: lost once 1 ms and the reordering
    // window (a quarter of the least RTT) have passed since it went, 250 us from now; Linux arms
    // the timer in whole milliseconds, rounded up, and 2 ms later (`TCP_TIMEOUT_MIN`).
    assert_eq!(h.tcb.deadline(), Some(t0 + us(1000 + 1000 + 2000)));
    h.fire();
    assert_eq!(sent(&mut h), [(S, MSS as usize)]);
    assert_eq!(h.counters.rack_reorder_timeouts, 1);
    assert_eq!(h.counters.rack_lost, 1);
    assert_eq!(h.counters.fast_recoveries, 1);
    // The retransmission timer runs (200 ms from the last transmission of data that started the
    // flight), nothing else.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
}

/// Three segments SACKed mark the hole lost at once (no reordering seen); PRR then sends one
/// segment for every two delivered while the flight is above ssthresh, and slow-starts back to it
/// below; the retransmission, lost too, is found when a segment sent after it is SACKed.
#[test]
fn prr_paces_recovery_and_rack_finds_a_lost_retransmission() {
    // Without limited transmit, so that nothing new goes before recovery.
    let cfg = TcpConfig {
        limited_transmit: false,
        ..rack()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    h.write(20 * MSS as usize);
    assert_eq!(sent(&mut h).len(), 10);
    let mut out = Vec::new();
    for i in 1..=9 {
        h.advance(us(100));
        sack(&mut h, S, &[(m(1), m(i + 1))]);
        out.push(sent(&mut h).into_iter().map(|(s, _)| s).collect::<Vec<_>>());
    }
    let none: Vec<u32> = Vec::new();
    assert_eq!(
        out,
        [
            none.clone(),
            none.clone(),
            vec![S],
            none.clone(),
            none.clone(),
            vec![m(10)],
            vec![m(11)],
            vec![m(12)],
            vec![m(13)],
        ]
    );
    // NewReno's ssthresh: half the flight of ten.
    assert_eq!(h.tcb.info().ssthresh, 5 * MSS);
    assert_eq!(h.counters.rack_lost, 1);
    // Segment 10 (sent after the retransmission) SACKed: the retransmission is lost too, and goes
    // again in the same recovery rather than at the retransmission timeout.
    h.advance(us(100));
    sack(&mut h, S, &[(m(1), m(11))]);
    let again = sent(&mut h);
    assert_eq!(again.first(), Some(&(S, MSS as usize)));
    assert_eq!(h.counters.rack_lost, 2);
    assert_eq!(h.counters.timeouts, 0);
    assert_eq!(h.counters.fast_recoveries, 1);
    // The ACK of everything ends recovery with the window at ssthresh.
    h.advance(us(100));
    let high = h.tcb.snd_max.0;
    recv!(h, seg(ACK, R, high, 65535));
    assert_eq!(h.tcb.recover, None);
    assert_eq!(h.tcb.info().cwnd, 5 * MSS);
}

#[test]
fn a_lost_tail_is_probed_two_rtts_after_the_last_transmission() {
    let mut h = established();
    let t0 = ten_sent(&mut h);
    // Two smoothed RTTs (1 ms each) and 2 ms: the probe, in place of the retransmission timer.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(4)));
    h.fire();
    // Nothing new to send: the last segment again.
    assert_eq!(sent(&mut h), [(m(9), MSS as usize)]);
    assert_eq!(h.counters.loss_probes, 1);
    assert_eq!(h.counters.timeouts, 0);
    // The retransmission timer starts again from the probe.
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_millis(200)));
    // Its ACK SACKs it: segments 0..9 are missing, and the probe's SACK starts recovery at once.
    h.advance(us(1000));
    sack(&mut h, S, &[(m(9), m(10))]);
    assert_eq!(sent(&mut h).first(), Some(&(S, MSS as usize)));
    assert_eq!(h.counters.fast_recoveries, 1);
}

#[test]
fn a_burst_arms_the_probe_once_when_it_ends_for_the_whole_flight() {
    let mut h = established();
    h.write(10 * MSS as usize);
    let t0 = h.now;
    let burst = h.send_burst();
    assert_eq!(burst.len(), 10);
    assert_eq!(burst[9], (m(9), MSS as usize));
    // Armed at the burst's end for ten segments in flight: two RTTs and 2 ms, no delayed-ACK
    // allowance (that is for a single segment), in the retransmission timer's place.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(4)));
    assert_eq!(h.tcb.timers.get(Timer::Retransmit), None);
    h.fire();
    assert_eq!(sent(&mut h), [(m(9), MSS as usize)]);
    assert_eq!(h.counters.loss_probes, 1);
}

#[test]
fn a_probe_sends_new_data_when_there_is_some_whatever_the_congestion_window() {
    let mut h = established();
    h.write(12 * MSS as usize);
    let t0 = h.now;
    assert_eq!(sent(&mut h).len(), 10);
    h.now = t0 + Duration::from_millis(4);
    h.timer();
    assert_eq!(sent(&mut h), [(m(10), MSS as usize)]);
    assert_eq!(h.counters.loss_probes, 1);
    assert_eq!(h.counters.retrans_segs, 0);
}

#[test]
fn a_single_segment_in_flight_waits_for_the_delayed_ack_before_its_probe() {
    let mut h = established();
    h.write(100);
    let t0 = h.now;
    assert_eq!(sent(&mut h), [(S, 100)]);
    // 2 · 1 ms + 200 ms for a delayed ACK, but no later than the retransmission timer (200 ms),
    // which the probe replaces.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
    h.fire();
    assert_eq!(sent(&mut h), [(S, 100)]);
    assert_eq!((h.counters.loss_probes, h.counters.timeouts), (1, 0));
    // The congestion window is whole: a probe is no timeout.
    assert_eq!(h.tcb.info().cwnd, 10 * MSS);
    // The ACK of the probe, and nothing more runs.
    recv!(h, seg(ACK, R, S + 100, 65535));
    assert_eq!(h.tcb.deadline(), None);
}

#[test]
fn the_duplicate_ack_rule_is_one_switch_away() {
    let cfg = TcpConfig {
        loss_detection: LossDetection::DupAck,
        tail_loss_probe: false,
        ..rack()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    let t0 = ten_sent(&mut h);
    h.advance(us(1000));
    sack(&mut h, S, &[(m(1), m(2))]);
    assert_eq!(sent(&mut h), []);
    // No reordering timer and no probe: the retransmission timer alone.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
    sack(&mut h, S, &[(m(1), m(3))]);
    sack(&mut h, S, &[(m(1), m(4))]);
    assert_eq!(sent(&mut h), [(S, MSS as usize)]);
}

#[test]
fn a_duplicate_segment_is_reported_as_a_dsack() {
    let mut h = established();
    let data = [7u8; 100];
    recv!(h, seg(ACK | PSH, R, S, 65535), &data);
    h.send_all();
    // The same segment again: its ACK carries it as the first SACK block.
    recv!(h, seg(ACK | PSH, R, S, 65535), &data);
    let (ack, _) = h.send().expect("an ACK");
    assert_eq!(ack.ack, R + 100);
    assert_eq!(ack.options.sack_blocks(), [(R, R + 100)]);
    assert_eq!(h.counters.dsacks_sent, 1);
    // Once.
    recv!(h, seg(ACK, R + 100, S, 65535), &data[..10]);
    h.fire();
    let (ack, _) = h.send().expect("the delayed ACK");
    assert_eq!(ack.options.sack_blocks(), []);
    // Out of order, held, then again: the D-SACK first, the block it repeats after it.
    recv!(h, seg(ACK, R + 200, S, 65535), &data);
    h.send_all();
    recv!(h, seg(ACK, R + 200, S, 65535), &data);
    let (ack, _) = h.send().expect("an ACK");
    assert_eq!(
        ack.options.sack_blocks(),
        [(R + 200, R + 300), (R + 200, R + 300)]
    );
}

/// A D-SACK is counted; it widens RACK's window only for a duplicate the sender made on a path
/// seen to reorder (`rack.rs` tests the widening): here nothing was sent twice, so the network
/// copied the segment.
#[test]
fn a_dsack_for_a_segment_never_sent_twice_leaves_the_reordering_window() {
    let mut h = established();
    ten_sent(&mut h);
    h.advance(us(1000));
    recv!(h, seg(ACK, R, m(2), 65535));
    assert_eq!(h.counters.dsacks_received, 0);
    // A D-SACK below the cumulative ACK.
    sack(&mut h, m(2), &[(S, m(1))]);
    assert_eq!(h.counters.dsacks_received, 1);
    let min_rtt = h.tcb.info().min_rtt.unwrap();
    let reo = h.tcb.rack.reo_wnd(false, 1, min_rtt, min_rtt);
    assert_eq!(reo, min_rtt / 4);
}

/// Limited transmit (RFC 3042) as Linux counts the flight: each duplicate ACK's SACKed segment has
/// left the network, so one new segment goes for it; the ACK that then covers them grows the window
/// only by what it newly delivered (packetdrill's limited-transmit-sack).
#[test]
fn each_duplicate_ack_lets_a_new_segment_go_and_delivery_is_counted_once() {
    let mut h = established();
    h.write(15 * MSS as usize);
    assert_eq!(sent(&mut h).len(), 10);
    h.advance(us(1000));
    sack(&mut h, S, &[(m(1), m(2))]);
    assert_eq!(sent(&mut h), [(m(10), MSS as usize)]);
    sack(&mut h, S, &[(m(1), m(3))]);
    assert_eq!(sent(&mut h), [(m(11), MSS as usize)]);
    // Reordering after all: the ACK of three segments delivers one not SACKed before.
    recv!(h, seg(ACK, R, m(3), 65535));
    assert_eq!(h.tcb.info().cwnd, 11 * MSS);
    // Nine in flight (3..12) under a window of eleven: two more.
    assert_eq!(sent(&mut h), [(m(12), MSS as usize), (m(13), MSS as usize)]);
    assert_eq!(h.counters.retrans_segs, 0);
}

/// A duplicate segment (a retransmission the receiver had) starts quick-ACK mode again, as
/// Linux's `tcp_enter_quickack_mode`: the ACKs after it go at once, not after the delayed-ACK time.
#[test]
fn a_duplicate_segment_starts_quick_acks_again() {
    let cfg = TcpConfig {
        quick_ack: true,
        ..rack()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    let data = [1u8; 100];
    let mut seq = R;
    // The quick ACKs of the connection's start, used up.
    for _ in 0..QUICK_ACKS {
        recv!(h, seg(ACK, seq, S, 65535), &data);
        seq += 100;
        assert!(h.send().is_some(), "a quick ACK");
    }
    recv!(h, seg(ACK, seq, S, 65535), &data);
    seq += 100;
    assert!(h.send().is_none(), "delayed now");
    // A duplicate: answered at once with its D-SACK, and so is the next segment.
    recv!(h, seg(ACK, seq - 100, S, 65535), &data);
    assert!(h.send().is_some());
    recv!(h, seg(ACK, seq, S, 65535), &data);
    let (ack, _) = h.send().expect("a quick ACK again");
    assert_eq!(ack.ack, seq + 100);
}

/// A data segment that carries a D-SACK leaves room for it: the options never push it past the
/// MTU (a full segment with the block had to be fragmented).
#[test]
fn a_segment_carrying_a_dsack_leaves_room_for_it() {
    let mut h = established();
    let data = [7u8; 100];
    recv!(h, seg(ACK | PSH, R, S, 65535), &data);
    h.send_all();
    h.write(2 * MSS as usize);
    recv!(h, seg(ACK | PSH, R, S, 65535), &data);
    let (first, payload) = h.send().expect("data with the D-SACK");
    assert_eq!(first.options.sack_blocks(), [(R, R + 100)]);
    // At least a block's room (two NOPs, kind, length, eight bytes) below the MSS.
    assert!(payload.len() <= MSS as usize - 12, "{}", payload.len());
}

/// A reordering timeout that starts recovery sizes the window as an ACK delivering one segment
/// would (Linux's `tcp_rack_reo_timeout` calls `tcp_cwnd_reduction` so): one retransmission goes,
/// not all that fits under ssthresh, and each later SACK lets one more go; a SACK for a segment far
/// below the highest SACKed raises the reordering degree (sack/sack-shift-sacked-7-3-4-8-9-fack.pkt).
#[test]
fn a_reordering_timeout_that_starts_recovery_sends_one_retransmission() {
    let mut h = established();
    let t0 = ten_sent(&mut h);
    h.advance(us(1000));
    sack(&mut h, S, &[(m(7), m(8))]);
    assert_eq!(sent(&mut h), []);
    h.fire();
    assert!(h.now > t0);
    assert_eq!(h.counters.rack_lost, 7, "segments 0 to 6, sent before 7");
    assert_eq!(h.counters.fast_recoveries, 1);
    assert_eq!(sent(&mut h), [(S, MSS as usize)]);
    h.advance(us(100));
    assert_eq!(h.tcb.info().dupack_threshold, 3);
    sack(&mut h, S, &[(m(3), m(4)), (m(7), m(8))]);
    assert_eq!(sent(&mut h), [(m(1), MSS as usize)]);
    // Segment 3 arrived behind 7 (from its start to 7's end, five segments): the reordering
    // degree, as Linux's `tcpi_reordering` has it.
    assert_eq!(h.tcb.info().dupack_threshold, 5);
    assert_eq!(h.tcb.info().reorderings, 1);
    h.advance(us(100));
    sack(&mut h, S, &[(m(3), m(5)), (m(7), m(8))]);
    assert_eq!(sent(&mut h), [(m(2), MSS as usize)]);
}

/// A SACK below the highest SACKed shows the path reordering by seven segments, more than
/// DupThresh: from that ACK on, data SACKed grows the window as data acknowledged does, outside
/// recovery (Linux's `tcp_may_raise_cwnd`), and each delivery counts once
/// (cubic/cubic-rack-reo-timeout-retrans-failed-incoming-data.pkt).
#[test]
fn on_a_path_seen_to_reorder_a_sack_grows_the_window() {
    let mut h = established();
    ten_sent(&mut h);
    let cwnd = h.tcb.info().cwnd;
    h.advance(us(500));
    sack(&mut h, S, &[(m(9), m(10))]);
    assert_eq!(h.tcb.info().cwnd, cwnd, "no reordering seen yet");
    sack(&mut h, S, &[(m(3), m(4)), (m(9), m(10))]);
    let i = h.tcb.info();
    assert_eq!((i.dupack_threshold, i.reorderings), (7, 1));
    assert_eq!(i.cwnd, cwnd + MSS, "the segment SACKed now");
    assert_eq!(h.counters.fast_recoveries, 0);
    recv!(h, seg(ACK, R, m(10), 65535));
    let i = h.tcb.info();
    assert_eq!(i.cwnd, cwnd + 9 * MSS, "the eight not SACKed before");
    assert_eq!(i.reorderings, 2, "segments 0 to 8 acknowledged behind 9");
}

/// A Fast Open SYN's data that the SYN-ACK acknowledged only in part goes again at once, and is
/// then a retransmission in RACK's record like any other: SACKs for everything after it mark it
/// lost and send it again, as Linux does (fastopen/client/syn-data-partial-or-over-ack.pkt). The
/// connection's figures count it as retransmitted and outstanding until then.
#[test]
fn syn_data_acknowledged_in_part_is_recovered_by_rack_like_any_retransmission() {
    let mut h = Harness::connect(rack());
    h.tcb.write(&[7u8; 1500]).unwrap();
    h.tcb.syn_data = 1500;
    let (syn, data) = h.send().expect("SYN with data");
    assert_eq!((syn.flags, data.len()), (SYN, 1500));
    h.advance(Duration::from_millis(10));
    // The server took 100 bytes.
    let mut syn_ack = seg(SYN | ACK, IRS, S + 100, 65535);
    syn_ack.options = TcpOptions {
        mss: Some(MSS as u16),
        sack_permitted: true,
        ..TcpOptions::default()
    };
    recv!(h, syn_ack, b"", Verdict::FastOpenLearned);
    // The rest at once, in one segment as it went in the SYN.
    assert_eq!(sent(&mut h), [(S + 100, 1400)]);
    assert_eq!(h.tcb.info().retransmitted_out, 1400);
    h.write(3 * MSS as usize);
    assert_eq!(sent(&mut h).len(), 3);
    // Everything after the resent segment arrives, 10 ms later.
    h.advance(Duration::from_millis(10));
    sack(&mut h, S + 100, &[(S + 1500, S + 1500 + 3 * MSS)]);
    assert_eq!(sent(&mut h), [(S + 100, 1400)]);
    assert_eq!(h.counters.rack_lost, 1);
    assert_eq!(h.tcb.info().retransmitted_out, 1400);
    recv!(h, seg(ACK, R, S + 1500 + 3 * MSS, 65535));
    assert_eq!(h.tcb.info().retransmitted_out, 0);
}
