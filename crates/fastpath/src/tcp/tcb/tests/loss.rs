//! Loss recovery: the retransmission timeout, fast retransmit, NewReno's partial ACKs, SACK holes,
//! RTT measurement.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

/// Writes and sends `n` full segments; checks each.
fn send_segments(h: &mut Harness, n: u32) {
    h.write((n * MSS) as usize);
    for i in 0..n {
        let flags = if i == n - 1 { ACK | PSH } else { ACK };
        send!(h, out(flags, S + i * MSS, R, 65535), MSS as usize);
    }
    send!(h, None);
}

fn dupack(h: &mut Harness, sack: &[(u32, u32)]) {
    let mut d = seg(ACK, R, S, 65535);
    for (i, &b) in sack.iter().enumerate() {
        d.options.sack[i] = b;
    }
    d.options.sack_count = sack.len() as u8;
    recv!(h, d);
}

#[test]
fn the_initial_window_is_ten_segments() {
    let mut h = Harness::established();
    assert_eq!(h.tcb.info().cwnd, 10 * MSS);
    h.write(12 * MSS as usize);
    assert_eq!(h.send_all().len(), 10);
}

#[test]
fn the_retransmission_timeout_resends_the_first_segment_and_doubles() {
    let mut h = Harness::established();
    let t0 = h.now;
    send_segments(&mut h, 2);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
    h.fire();
    send!(h, out(ACK, S, R, 65535), MSS as usize);
    // One segment of congestion window after a timeout.
    send!(h, None);
    assert_eq!(h.tcb.info().cwnd, MSS);
    // NewReno: ssthresh = max(FlightSize / 2, 2 · SMSS) (RFC 5681 §3.1).
    assert_eq!(h.tcb.info().ssthresh, 2 * MSS);
    assert_eq!(h.tcb.info().rto, Duration::from_millis(400));
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(600)));
    h.fire();
    send!(h, out(ACK, S, R, 65535), MSS as usize);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(1400)));
    assert_eq!(h.tcb.info().retransmits, 2);
    assert_eq!(h.counters.timeouts, 2);
    // The ACK of the retransmission lets the second segment go again (it was sent back too).
    recv!(h, seg(ACK, R, S + MSS, 65535));
    send!(h, out(ACK | PSH, S + MSS, R, 65535), MSS as usize);
}

#[test]
fn the_connection_is_abandoned_after_max_retries() {
    let cfg = TcpConfig {
        max_retries: 2,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    send_segments(&mut h, 1);
    for _ in 0..2 {
        assert_eq!(h.fire(), Verdict::Continue);
        h.send_all();
    }
    assert_eq!(
        h.fire(),
        Verdict::Reset {
            seq: S + MSS,
            ack: None
        }
    );
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
    assert_eq!(h.tcb.state, State::Closed);
}

#[test]
fn fast_retransmit_after_three_duplicate_acks() {
    let mut h = Harness::established();
    send_segments(&mut h, 5);
    for _ in 0..2 {
        dupack(&mut h, &[]);
        send!(h, None);
    }
    dupack(&mut h, &[]);
    send!(h, out(ACK, S, R, 65535), MSS as usize);
    send!(h, None);
    assert_eq!(h.counters.fast_recoveries, 1);
    // NewReno: ssthresh and cwnd half the flight.
    assert_eq!(h.tcb.info().ssthresh, 5 * MSS / 2);
    // More duplicates do not retransmit again.
    dupack(&mut h, &[]);
    send!(h, None);
}

#[test]
fn a_changed_window_is_no_duplicate_ack() {
    let mut h = Harness::established();
    send_segments(&mut h, 5);
    for w in [60000, 50000, 40000] {
        recv!(h, seg(ACK, R, S, w));
    }
    send!(h, None);
    assert_eq!(h.counters.fast_recoveries, 0);
}

#[test]
fn newreno_partial_ack_retransmits_the_next_hole() {
    let mut h = Harness::established();
    send_segments(&mut h, 5);
    for _ in 0..3 {
        dupack(&mut h, &[]);
    }
    send!(h, out(ACK, S, R, 65535), MSS as usize);
    // Partial: the second segment was lost too.
    recv!(h, seg(ACK, R, S + MSS, 65535));
    send!(h, out(ACK, S + MSS, R, 65535), MSS as usize);
    send!(h, None);
    // Full: recovery ends, cwnd deflated to min(ssthresh, flight + MSS).
    recv!(h, seg(ACK, R, S + 5 * MSS, 65535));
    assert_eq!(h.tcb.info().cwnd, 2 * MSS);
    assert_eq!(h.tcb.recover, None);
    assert!(h.tcb.all_acked());
    assert_eq!(h.tcb.deadline(), None);
}

/// SACK recovery retransmits what RFC 6675's IsLost() marks: a hole with three segments SACKed above
/// it (segment 0), not one with two (segment 2), which the partial ACK then shows lost.
#[test]
fn sack_recovery_retransmits_only_the_holes() {
    let cfg = TcpConfig {
        sack: true,
        ..plain()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    send_segments(&mut h, 5);
    // Segments 1 and 3 (of 0..5) arrive, 0 and 2 are lost, 4 arrives.
    let (s1, s2, s3, s4, end) = (S + MSS, S + 2 * MSS, S + 3 * MSS, S + 4 * MSS, S + 5 * MSS);
    dupack(&mut h, &[(s1, s2)]);
    dupack(&mut h, &[(s3, s4), (s1, s2)]);
    dupack(&mut h, &[(s3, end), (s1, s2)]);
    let retransmitted: Vec<(u32, usize)> = h
        .send_all()
        .into_iter()
        .map(|(r, d)| (r.seq, d.len()))
        .collect();
    assert_eq!(retransmitted, [(S, MSS as usize)], "the first hole only");
    recv!(h, seg(ACK, R, s2, 65535));
    let retransmitted: Vec<(u32, usize)> = h
        .send_all()
        .into_iter()
        .map(|(r, d)| (r.seq, d.len()))
        .collect();
    assert_eq!(retransmitted, [(s2, MSS as usize)], "the next hole");
    assert_eq!(h.counters.retrans_segs, 2);
}

/// A second loss found later in the same window: once three segments are SACKed above it, it is
/// marked lost and retransmitted in the same recovery (not left to the retransmission timer).
#[test]
fn sack_recovery_repairs_a_hole_found_later_in_the_window() {
    let cfg = TcpConfig {
        sack: true,
        linux_push: false,
        ..plain()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    send_segments(&mut h, 10);
    let m = |i: u32| S + i * MSS;
    // Segment 0 lost: SACKs for 1, 2, 3 start the recovery.
    for i in 1..=3 {
        dupack(&mut h, &[(m(1), m(i + 1))]);
    }
    let first: Vec<u32> = h.send_all().into_iter().map(|(r, _)| r.seq).collect();
    assert_eq!(first, [S]);
    // Segment 5 lost too: 4, 6, 7, 8 arrive.
    dupack(&mut h, &[(m(1), m(5))]);
    for i in 6..=8 {
        dupack(&mut h, &[(m(6), m(i + 1)), (m(1), m(5))]);
    }
    let second: Vec<u32> = h.send_all().into_iter().map(|(r, _)| r.seq).collect();
    assert_eq!(second, [m(5)], "the later hole, in the same recovery");
    assert_eq!(h.counters.fast_recoveries, 1);
}

#[test]
fn rtt_is_measured_from_a_timed_segment_and_sets_the_rto() {
    let mut h = Harness::established();
    h.write(100);
    h.send_all();
    h.advance(Duration::from_millis(300));
    recv!(h, seg(ACK, R, S + 100, 65535));
    let info = h.tcb.info();
    // The handshake's 0 ms counted as 1 ms; then 300 ms: srtt = 7/8 · 1 + 1/8 · 300.
    assert_eq!(info.srtt, Some(Duration::from_micros(38_375)));
    assert!(info.rto >= Duration::from_millis(200));
}

#[test]
fn the_rto_floor_applies_to_the_variance_term_as_linux_does() {
    for linux in [true, false] {
        let mut cfg = plain();
        cfg.rto_min_on_variance = linux;
        let mut h = Harness::established_with(cfg, TcpOptions::default());
        for round in 0..2u32 {
            h.write(100);
            h.send_all();
            h.advance(Duration::from_millis(100));
            recv!(h, seg(ACK, R, S + 100 * (round + 1), 65535));
        }
        let info = h.tcb.info();
        let srtt = info.srtt.unwrap();
        // 4 · RTTVAR is 162 ms here, below the 200 ms floor.
        let expected = if linux {
            srtt + Duration::from_millis(200)
        } else {
            Duration::from_millis(200)
        };
        assert_eq!(info.rto, expected, "linux: {linux}, srtt {srtt:?}");
    }
}

#[test]
fn karn_no_sample_from_a_retransmitted_segment() {
    let mut h = Harness::established();
    h.write(100);
    h.send_all();
    let before = h.tcb.info().srtt;
    h.fire();
    h.send_all();
    h.advance(Duration::from_secs(5));
    recv!(h, seg(ACK, R, S + 100, 65535));
    assert_eq!(h.tcb.info().srtt, before);
}

/// The window grows only while it is used (Linux's `tcp_is_cwnd_limited`): ACKs of an
/// application-limited flight leave it; ACKs of a flight that filled it grow it.
#[test]
fn the_congestion_window_grows_only_when_it_was_used() {
    for validation in [true, false] {
        let cfg = TcpConfig {
            cwnd_validation: validation,
            ..plain()
        };
        let mut h = Harness::established_with(cfg, TcpOptions::default());
        for i in 1..=5u32 {
            h.write(100);
            h.send_all();
            h.advance(Duration::from_millis(10));
            recv!(h, seg(ACK, R, S + 100 * i, 65535));
        }
        let expected = if validation { 10 * MSS } else { 10 * MSS + 500 };
        assert_eq!(h.tcb.info().cwnd, expected, "validation {validation}");
    }
    let cfg = TcpConfig {
        linux_push: false,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    send_segments(&mut h, 10);
    recv!(h, seg(ACK, R, S + 10 * MSS, 65535));
    assert_eq!(h.tcb.info().cwnd, 20 * MSS);
    // A window of three segments and a bit is full with three in flight (less than a segment of
    // room left, as Linux counts in segments): their ACK grows it.
    // (In congestion avoidance, where only that says whether it grows.)
    h.tcb.cc.cwnd = 3 * MSS + 100;
    h.tcb.cc.ssthresh = 2 * MSS;
    h.write(5 * MSS as usize);
    assert_eq!(h.send_all().len(), 3);
    assert!(h.tcb.cc.is_cwnd_limited());
}
