//! `TCP_NOTSENT_LOWAT` and `TCP_USER_TIMEOUT`.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

#[test]
fn a_low_water_mark_holds_writes_while_that_much_is_unsent() {
    let mut h = Harness::established();
    h.tcb.set_notsent_lowat(Some(4000));
    assert_eq!(h.tcb.notsent_lowat(), Some(4000));
    // Nothing unsent: a write takes what the buffer has room for.
    h.write(20 * MSS as usize);
    assert!(!h.tcb.writable(), "20 segments written, none sent");
    assert_eq!(
        h.tcb.write(b"x").unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    // Ten go (the initial window); ten wait, still above the mark.
    assert_eq!(h.send_all().len(), 10);
    assert!(!h.tcb.writable());
    // The ACK of all ten lets the other ten go: nothing unsent, writable again.
    recv!(h, seg(ACK, R, S + 10 * MSS, 65535));
    assert_eq!(h.send_all().len(), 10);
    assert!(h.tcb.writable());
    h.tcb.set_notsent_lowat(None);
    h.write(3 * MSS as usize);
    assert!(h.tcb.writable(), "no mark: only the buffer limits");
}

#[test]
fn the_user_timeout_aborts_at_the_first_timeout_past_it_whatever_the_retries() {
    // One retry would end it at the second timeout without a user timeout.
    let cfg = TcpConfig {
        max_retries: 1,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    h.tcb.set_user_timeout(Some(Duration::from_millis(1000)));
    assert_eq!(h.tcb.user_timeout(), Some(Duration::from_millis(1000)));
    let t0 = h.now;
    h.write(100);
    h.send_all();
    // Timeouts at 200, 600 (400 later), 1400 ms: the third finds 1.4 s unacknowledged.
    assert_eq!(h.fire(), Verdict::Continue);
    h.send_all();
    assert_eq!(h.fire(), Verdict::Continue);
    h.send_all();
    assert!(matches!(h.fire(), Verdict::Reset { .. }));
    assert_eq!(h.now, t0 + Duration::from_millis(1400));
    assert_eq!(h.tcb.state, State::Closed);
    assert_eq!(h.tcb.take_error(), Some(io::ErrorKind::TimedOut));
}

#[test]
fn an_acknowledgment_restarts_the_user_timeout() {
    let mut h = Harness::established();
    h.tcb.set_user_timeout(Some(Duration::from_millis(500)));
    h.write(2 * MSS as usize);
    h.send_all();
    h.advance(Duration::from_millis(150));
    recv!(h, seg(ACK, R, S + MSS, 65535));
    // 200 ms after the ACK the timer fires: 200 ms unacknowledged, less than 500.
    assert_eq!(h.fire(), Verdict::Continue);
    assert_eq!(h.tcb.state, State::Established);
    assert!(!h.tcb.user_timeout_expired(h.now));
    h.advance(Duration::from_millis(300));
    assert!(h.tcb.user_timeout_expired(h.now));
}

#[test]
fn the_user_timeout_counts_from_the_data_not_from_the_handshake() {
    // An active open: the SYN was outstanding once, acknowledged by the SYN-ACK.
    let mut h = Harness::established();
    h.tcb.set_user_timeout(Some(Duration::from_millis(300)));
    h.advance(Duration::from_secs(10));
    h.write(100);
    h.send_all();
    // The first timeout, 200 ms after the data: not 10 s after the SYN.
    assert_eq!(h.fire(), Verdict::Continue);
    assert_eq!(h.tcb.state, State::Established);
}

/// A synchronized connection gives up by time, as Linux's `retransmits_timed_out`: after what
/// `max_retries` timeouts take from the least RTO doubling up to the greatest (522.2 s under the
/// defaults, 15 from 200 ms up to 60 s; 1.4 s for two from 200 ms), whatever its own RTO. With a 1 s RTO that is at the second
/// timeout, 3 s on, after one retransmission, where counting would have allowed two.
#[test]
fn retransmissions_give_up_by_time_not_by_count() {
    use crate::tcp::tcb::recovery::give_up_after;
    let defaults = TcpConfig::default();
    assert_eq!(
        give_up_after(&defaults, defaults.max_retries),
        Duration::from_millis(522_200)
    );
    assert_eq!(
        give_up_after(&defaults, defaults.orphan_retries),
        Duration::from_millis(102_200)
    );
    let cfg = TcpConfig {
        max_retries: 2,
        ..plain()
    };
    assert_eq!(give_up_after(&cfg, 2), Duration::from_millis(1400));
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    h.tcb.rto = 1_000_000_000;
    let t0 = h.now;
    h.write(100);
    h.send_all();
    assert_eq!(h.fire(), Verdict::Continue);
    assert_eq!(h.send_all().len(), 1);
    assert!(matches!(h.fire(), Verdict::Reset { .. }));
    assert_eq!(h.now, t0 + Duration::from_secs(3));
    assert_eq!(h.tcb.take_error(), Some(io::ErrorKind::TimedOut));
}

/// RFC 6069, as Linux's `tcp_ld_RTO_revert`: after two timeouts (the RTO doubled twice), a
/// network or host unreachable about SND.UNA undoes one doubling, and the timer runs that much
/// from the last retransmission; a second, when that time is past, makes it due at once. One about
/// another sequence number, or with nothing backed off, changes nothing.
#[test]
fn an_unreachable_about_the_segment_retransmitted_undoes_a_doubling() {
    let mut h = Harness::established();
    let rto = Duration::from_nanos(h.tcb.rto);
    h.write(100);
    h.send_all();
    let cfg = h.cfg.clone();
    assert!(!h.tcb.revert_backoff(S, &cfg, h.now), "not backed off");
    for _ in 0..2 {
        h.fire();
        assert_eq!(h.send_all().len(), 1);
    }
    let last = h.now;
    assert_eq!(h.tcb.info().backoff, 2);
    assert_eq!(h.tcb.deadline(), Some(last + rto * 4));
    assert!(!h.tcb.revert_backoff(S + 1, &cfg, h.now), "not SND.UNA");
    assert!(h.tcb.revert_backoff(S, &cfg, h.now));
    assert_eq!(h.tcb.info().backoff, 1);
    assert_eq!(h.tcb.deadline(), Some(last + rto * 2));
    h.advance(rto + rto / 2);
    assert!(h.tcb.revert_backoff(S, &cfg, h.now));
    assert_eq!(h.tcb.info().backoff, 0);
    assert_eq!(h.tcb.deadline(), Some(h.now), "its time is past: due now");
    assert!(
        !h.tcb.revert_backoff(S, &cfg, h.now),
        "nothing left to undo"
    );
    assert_eq!(h.fire(), Verdict::Continue);
    assert_eq!(h.send_all().len(), 1, "sent again at once");
}

/// An orphan (closed by the application with data unacknowledged) takes `orphan_retries`, not
/// `max_retries`, as Linux's `tcp_orphan_retries`: with one, it is given up at the second timeout
/// (0.6 s from 200 ms), where a connection the application holds goes on.
#[test]
fn an_orphan_is_given_up_after_its_own_retries() {
    for orphan in [false, true] {
        let cfg = TcpConfig {
            orphan_retries: 1,
            ..plain()
        };
        let mut h = Harness::established_with(cfg, TcpOptions::default());
        h.write(100);
        h.send_all();
        h.tcb.orphan = orphan;
        assert_eq!(h.fire(), Verdict::Continue);
        h.send_all();
        let second = h.fire();
        assert_eq!(
            matches!(second, Verdict::Reset { .. }),
            orphan,
            "orphan {orphan}"
        );
    }
}

/// A soft ICMP error is forgotten at any ACK that is not old, even one on a segment that takes no
/// window (out of order, below one that came before), as Linux's `tcp_ack` forgets it; an old ACK
/// leaves it.
#[test]
fn a_soft_error_is_forgotten_at_the_peers_next_ack() {
    let mut h = Harness::established();
    h.write(100);
    h.send_all();
    recv!(h, seg(ACK, R, S + 100, 65535));
    recv!(h, seg(ACK, R + 1000, S + 100, 65535), b"far");
    h.tcb.soft_error = Some(io::ErrorKind::HostUnreachable);
    recv!(h, seg(ACK, R, S, 65535));
    assert_eq!(
        h.tcb.soft_error,
        Some(io::ErrorKind::HostUnreachable),
        "old"
    );
    recv!(h, seg(ACK, R + 500, S + 100, 65535), b"middle");
    assert_eq!(h.tcb.soft_error, None);
}
