//! Closing: FIN-WAIT-1, FIN-WAIT-2, CLOSING, TIME-WAIT, CLOSE-WAIT, LAST-ACK, and RST everywhere.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

#[test]
fn active_close_fin_wait_1_fin_wait_2_time_wait_closed() {
    let mut h = Harness::established();
    h.shutdown();
    assert_eq!(h.tcb.state, State::FinWait1);
    send!(h, out(FIN | ACK, S, R, 65535));
    send!(h, None);
    recv!(h, seg(ACK, R, S + 1, 65535));
    assert_eq!(h.tcb.state, State::FinWait2);
    assert_eq!(
        h.tcb.deadline(),
        None,
        "no FIN-WAIT-2 timeout while the application holds it"
    );
    recv!(h, seg(FIN | ACK, R, S + 1, 65535));
    assert_eq!(h.tcb.state, State::TimeWait);
    send!(h, out(ACK, S + 1, R + 1, 65535));
    // 2 MSL.
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_secs(60)));
    assert_eq!(h.fire(), Verdict::Remove);
    assert_eq!(h.tcb.state, State::Closed);
    assert_eq!(h.tcb.error, None);
}

#[test]
fn time_wait_holds_no_send_buffer() {
    let mut h = Harness::established();
    h.write(3000);
    h.shutdown();
    let mut sent = 0;
    while let Some((repr, data)) = h.send() {
        sent += data.len() + usize::from(repr.flags.contains(FIN));
    }
    assert_eq!(sent, 3001, "the data and the FIN");
    assert!(h.tcb.tx.allocated() >= 3000);
    recv!(h, seg(FIN | ACK, R, S + 3001, 65535));
    assert_eq!(h.tcb.state, State::TimeWait);
    assert_eq!(h.tcb.tx.allocated(), 0, "the send ring given back");
    send!(h, out(ACK, S + 3001, R + 1, 65535));
    // A retransmitted FIN is still answered.
    recv!(h, seg(FIN | ACK, R, S + 3001, 65535));
    send!(h, out(ACK, S + 3001, R + 1, 65535));
}

#[test]
fn fin_wait_1_closing_time_wait_on_simultaneous_close() {
    let mut h = in_state(State::FinWait1);
    recv!(h, seg(FIN | ACK, R, S, 65535));
    assert_eq!(h.tcb.state, State::Closing);
    send!(h, out(ACK, S + 1, R + 1, 65535));
    recv!(h, seg(ACK, R + 1, S + 1, 65535));
    assert_eq!(h.tcb.state, State::TimeWait);
    send!(h, None);
}

#[test]
fn fin_wait_1_to_time_wait_on_fin_acking_our_fin() {
    let mut h = in_state(State::FinWait1);
    recv!(h, seg(FIN | ACK, R, S + 1, 65535));
    assert_eq!(h.tcb.state, State::TimeWait);
    send!(h, out(ACK, S + 1, R + 1, 65535));
}

#[test]
fn passive_close_close_wait_last_ack_closed() {
    let mut h = Harness::established();
    recv!(h, seg(FIN | ACK, R, S, 65535));
    assert_eq!(h.tcb.state, State::CloseWait);
    assert!(h.tcb.readable() && h.tcb.fin_received);
    send!(h, out(ACK, S, R + 1, 65535));
    // The application may still write in CLOSE-WAIT.
    h.write(10);
    send!(h, out(ACK | PSH, S, R + 1, 65535), 10);
    h.shutdown();
    assert_eq!(h.tcb.state, State::LastAck);
    send!(h, out(FIN | ACK, S + 10, R + 1, 65535));
    recv!(h, seg(ACK, R + 1, S + 11, 65535), b"", Verdict::Remove);
    assert_eq!(h.tcb.state, State::Closed);
}

#[test]
fn data_and_fin_in_one_segment() {
    let mut h = Harness::established();
    recv!(h, seg(FIN | ACK | PSH, R, S, 65535), b"hello");
    assert_eq!(h.tcb.state, State::CloseWait);
    assert_eq!(h.tcb.rx.bytes, 5);
    // The FIN takes a sequence number, so the window's edge stays where it was.
    send!(h, out(ACK, S, R + 6, 65529));
}

#[test]
fn a_fin_ahead_of_missing_data_waits_for_it() {
    let mut h = Harness::established();
    recv!(h, seg(FIN | ACK, R + 5, S, 65535), b"world");
    assert_eq!(h.tcb.state, State::Established);
    send!(h, out(ACK, S, R, 65535));
    recv!(h, seg(ACK, R, S, 65535), b"hello");
    assert_eq!(h.tcb.state, State::CloseWait);
    send!(h, out(ACK, S, R + 11, 65524));
    assert_eq!(h.tcb.rx.bytes, 10);
}

#[test]
fn an_unacknowledged_fin_is_retransmitted() {
    let mut h = in_state(State::FinWait1);
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_millis(200)));
    h.fire();
    send!(h, out(FIN | ACK, S, R, 65535));
    assert_eq!(h.counters.retrans_segs, 1);
}

#[test]
fn an_orphan_gives_up_in_fin_wait_2() {
    let mut h = Harness::established();
    h.tcb.orphan = true;
    h.shutdown();
    send!(h, out(FIN | ACK, S, R, 65535));
    recv!(h, seg(ACK, R, S + 1, 65535));
    assert_eq!(h.tcb.state, State::FinWait2);
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_secs(60)));
    assert_eq!(h.fire(), Verdict::Remove);
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
}

#[test]
fn data_for_an_orphan_is_answered_by_rst() {
    let mut h = in_state(State::FinWait2);
    h.tcb.orphan = true;
    recv!(
        h,
        seg(ACK, R, S + 1, 65535),
        b"late",
        Verdict::Reset {
            seq: S + 1,
            ack: None
        }
    );
    assert_eq!(h.drops.get(DropReason::TcpDataAfterClose), 1);
}

/// user_timeout/user_timeout.pkt: with our FIN unacknowledged, the reset takes the segment's
/// acknowledgment as its sequence number (below our FIN's), as Linux's reset of a segment to a
/// connection that is gone.
#[test]
fn the_reset_of_data_for_an_orphan_takes_the_segments_ack() {
    let mut h = in_state(State::FinWait1);
    h.tcb.orphan = true;
    recv!(
        h,
        seg(ACK, R, S, 65535),
        b"late",
        Verdict::Reset { seq: S, ack: None }
    );
}

#[test]
fn time_wait_acknowledges_a_retransmitted_fin_and_restarts() {
    let mut h = in_state(State::TimeWait);
    h.advance(Duration::from_secs(10));
    recv!(h, seg(FIN | ACK, R, S + 1, 65535));
    send!(h, out(ACK, S + 1, R + 1, 65535));
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_secs(60)));
}

#[test]
fn time_wait_syn_past_the_old_sequence_opens_a_new_incarnation() {
    let mut h = in_state(State::TimeWait);
    // An old one is answered with an ACK.
    recv!(h, seg(SYN, R - 100, 0, 65535));
    send!(h, out(ACK, S + 1, R + 1, 65535));
    recv!(
        h,
        seg(SYN, R + 100_000, 0, 65535),
        b"",
        Verdict::Reincarnate
    );
    assert_eq!(h.tcb.state, State::Closed);
}

#[test]
fn time_wait_challenges_a_syn_ack_and_stays() {
    let mut h = in_state(State::TimeWait);
    // Past the old sequence numbers, but a SYN-ACK: no new incarnation, a challenge ACK.
    recv!(h, seg(SYN | ACK, R + 100_000, S + 1, 65535));
    send!(h, out(ACK, S + 1, R + 1, 65535));
    assert_eq!(h.tcb.state, State::TimeWait);
}

#[test]
fn an_exact_rst_resets_in_every_synchronized_state_but_time_wait() {
    for state in [
        State::Established,
        State::FinWait1,
        State::FinWait2,
        State::CloseWait,
        State::Closing,
        State::LastAck,
        State::TimeWait,
    ] {
        let mut h = in_state(state);
        let rcv_nxt = h.rcv_nxt();
        if state == State::TimeWait {
            // RFC 1337: no TIME-WAIT assassination.
            recv!(h, seg(RST, rcv_nxt, 0, 0));
            assert_eq!(h.tcb.state, State::TimeWait);
            continue;
        }
        recv!(h, seg(RST, rcv_nxt, 0, 0), b"", Verdict::Remove);
        assert_eq!(h.tcb.state, State::Closed, "{state:?}");
        assert_eq!(
            h.tcb.error,
            Some(io::ErrorKind::ConnectionReset),
            "{state:?}"
        );
        assert_eq!(h.tcb.deadline(), None, "{state:?}");
        send!(h, None);
    }
}

#[test]
fn writing_after_shutdown_is_refused() {
    let mut h = in_state(State::FinWait1);
    assert_eq!(
        h.tcb.write(b"x").unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
    assert!(!h.tcb.writable());
}

#[test]
fn keep_alive_probes_then_gives_up() {
    let mut h = Harness::established();
    let t0 = h.now;
    h.tcb.set_keepalive(true, t0, Duration::from_secs(7200));
    // Traffic, even on the fast path, restarts the idle time.
    h.now = t0 + Duration::from_secs(7000);
    recv!(h, seg(ACK, R, S, 65535), b"x");
    assert_eq!(h.counters.predicted_data, 1);
    let t1 = h.now;
    h.fire();
    assert_eq!(
        h.now,
        t1 + Duration::from_millis(40),
        "the delayed ACK first"
    );
    h.send_all();
    h.fire();
    assert_eq!(h.now, t1 + Duration::from_secs(7200));
    // A probe: an old sequence number, which draws an ACK (RFC 1122 §4.2.3.6).
    send!(h, out(ACK, S - 1, R + 1, 65534));
    for _ in 1..9 {
        let before = h.now;
        assert_eq!(h.fire(), Verdict::Continue);
        assert_eq!(h.now, before + Duration::from_secs(75));
        send!(h, out(ACK, S - 1, R + 1, 65534));
    }
    assert_eq!(h.fire(), Verdict::Reset { seq: S, ack: None });
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
}

/// With a user timeout, keep-alive gives up by the time since the peer was last heard, once a
/// probe has gone unanswered, whatever the probe count, as Linux's `tcp_keepalive_timer` does:
/// idle 10 s, probes 5 s apart, a user timeout of 12 s: a probe at 10 s, and the end at 15 s
/// (where nine probes would take until 55 s).
#[test]
fn keep_alive_with_a_user_timeout_gives_up_by_time() {
    let mut h = Harness::established();
    let t0 = h.now;
    h.tcb.set_keepalive(true, t0, Duration::from_secs(10));
    h.tcb.set_keepalive_times(
        Some((Duration::from_secs(10), Duration::from_secs(5), 9)),
        t0,
        &h.cfg.clone(),
    );
    h.tcb.set_user_timeout(Some(Duration::from_secs(12)));
    recv!(h, seg(ACK, R, S, 65535));
    assert_eq!(h.fire(), Verdict::Continue);
    assert_eq!(h.now, t0 + Duration::from_secs(10));
    send!(h, out(ACK, S - 1, R, 65535));
    assert_eq!(h.fire(), Verdict::Reset { seq: S, ack: None });
    assert_eq!(h.now, t0 + Duration::from_secs(15));
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
}
