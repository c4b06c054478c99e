//! Against blind attacks and loops: RFC 5961's RST, SYN and ACK checks, the challenge ACK limit,
//! the out-of-window duplicate ACK limit, PAWS.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

#[test]
fn an_in_window_rst_draws_a_challenge_ack() {
    let mut h = Harness::established();
    recv!(h, seg(RST, R + 100, 0, 0));
    assert_eq!(h.tcb.state, State::Established);
    send!(h, out(ACK, S, R, 65535));
    assert_eq!(h.counters.challenge_acks, 1);
    assert_eq!(h.drops.get(DropReason::TcpChallenged), 1);
}

#[test]
fn an_out_of_window_rst_is_dropped_silently() {
    let mut h = Harness::established();
    recv!(h, seg(RST, R + 70_000, 0, 0));
    recv!(h, seg(RST, R - 1, 0, 0));
    send!(h, None);
    assert_eq!(h.drops.get(DropReason::TcpOutOfWindow), 2);
    assert_eq!(h.tcb.state, State::Established);
}

#[test]
fn a_syn_on_a_synchronized_connection_draws_a_challenge_ack_whatever_its_sequence() {
    for seq in [R, R + 1000, R + 1_000_000, R - 10] {
        let mut h = Harness::established();
        recv!(h, seg(SYN, seq, 0, 65535));
        assert_eq!(h.tcb.state, State::Established);
        send!(h, out(ACK, S, R, 65535));
        assert_eq!(h.counters.challenge_acks, 1);
    }
}

#[test]
fn challenge_acks_are_limited_per_second() {
    let mut h = Harness::established();
    let mut sent = 0;
    for i in 0..25 {
        recv!(h, seg(RST, R + 10 + i, 0, 0));
        sent += h.send_all().len();
    }
    assert_eq!(sent, 10);
    assert_eq!(h.counters.challenge_acks, 10);
    // The next second has a new allowance.
    h.advance(Duration::from_secs(1));
    recv!(h, seg(SYN, R, 0, 0));
    send!(h, out(ACK, S, R, 65535));
}

#[test]
fn an_ack_of_unsent_data_is_answered_and_the_segment_dropped() {
    let mut h = Harness::established();
    h.write(100);
    send!(h, out(ACK | PSH, S, R, 65535), 100);
    recv!(h, seg(ACK, R, S + 5000, 65535), b"data");
    send!(h, out(ACK, S + 100, R, 65535));
    assert_eq!(h.tcb.rx.bytes, 0, "the data is dropped with it");
    assert_eq!(h.drops.get(DropReason::TcpBadAck), 1);
    assert_eq!(h.tcb.info().snd_wnd, 65535);
}

#[test]
fn an_ack_far_below_the_window_is_challenged() {
    let mut h = Harness::established();
    recv!(h, seg(ACK, R, S.wrapping_sub(100_000), 65535));
    send!(h, out(ACK, S, R, 65535));
    assert_eq!(h.counters.challenge_acks, 1);
    assert_eq!(h.drops.get(DropReason::TcpBadAck), 1);
}

#[test]
fn out_of_window_pure_acks_are_answered_at_most_once_per_interval() {
    let mut h = Harness::established();
    let stray = seg(ACK, R + 100_000, S, 65535);
    recv!(h, stray);
    send!(h, out(ACK, S, R, 65535));
    h.advance(Duration::from_millis(499));
    recv!(h, stray);
    send!(h, None);
    assert_eq!(h.counters.invalid_acks_skipped, 1);
    h.advance(Duration::from_millis(1));
    recv!(h, stray);
    send!(h, out(ACK, S, R, 65535));
}

#[test]
fn out_of_window_data_is_always_answered() {
    let mut h = Harness::established();
    for _ in 0..3 {
        recv!(h, seg(ACK, R + 100_000, S, 65535), b"x");
        send!(h, out(ACK, S, R, 65535));
    }
    // An old duplicate (all below RCV.NXT) as well.
    recv!(h, seg(ACK, R - 10, S, 65535), b"old");
    send!(h, out(ACK, S, R, 65535));
    assert_eq!(h.counters.invalid_acks_skipped, 0);
}

/// An established connection with timestamps, the peer's last value 100.
fn with_timestamps() -> Harness {
    let cfg = TcpConfig {
        timestamps: true,
        ..plain()
    };
    let peer = TcpOptions {
        timestamps: Some((100, 0)),
        ..TcpOptions::default()
    };
    Harness::established_with(cfg, peer)
}

#[test]
fn timestamps_are_echoed_and_shrink_the_mss() {
    let mut h = with_timestamps();
    assert_eq!(h.tcb.mss, MSS - 12);
    h.write(10);
    let (repr, _) = h.send().unwrap();
    assert_eq!(repr.options.timestamps.map(|(_, ecr)| ecr), Some(100));
}

#[test]
fn paws_drops_a_segment_with_an_old_timestamp() {
    let mut h = with_timestamps();
    let mut old = seg(ACK, R, S, 65535);
    old.options.timestamps = Some((99, 0));
    recv!(h, old, b"stale");
    assert_eq!(h.tcb.rx.bytes, 0);
    assert_eq!(h.drops.get(DropReason::TcpPaws), 1);
    let (ack, _) = h.send().unwrap();
    assert_eq!((ack.flags, ack.seq, ack.ack), (ACK, S, R));
    assert_eq!(ack.options.timestamps.map(|(_, ecr)| ecr), Some(100));
    // A newer one is taken, and its value echoed from then on.
    let mut new = seg(ACK, R, S, 65535);
    new.options.timestamps = Some((101, 0));
    recv!(h, new, b"fresh");
    assert_eq!(h.tcb.rx.bytes, 5);
    h.advance(Duration::from_millis(40));
    h.timer();
    let (ack, _) = h.send().unwrap();
    assert_eq!((ack.seq, ack.ack), (S, R + 5));
    assert_eq!(ack.options.timestamps.map(|(_, ecr)| ecr), Some(101));
}

#[test]
fn paws_does_not_apply_to_rst() {
    let mut h = with_timestamps();
    let mut rst = seg(RST, R, 0, 0);
    rst.options.timestamps = Some((1, 0));
    recv!(h, rst, b"", Verdict::Remove);
}
