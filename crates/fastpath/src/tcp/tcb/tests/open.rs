//! Opening: the arrows of RFC 9293's state diagram out of CLOSED, LISTEN, SYN-SENT and SYN-RECEIVED.

use super::*;

pub(super) fn mss_only() -> TcpOptions {
    TcpOptions {
        mss: Some(MSS as u16),
        ..TcpOptions::default()
    }
}

#[test]
fn active_open_syn_sent_to_established() {
    let mut h = Harness::connect(plain());
    assert_eq!(h.tcb.state, State::SynSent);
    let mut syn = out(SYN, ISS, 0, 65535);
    syn.options = mss_only();
    send!(h, syn);
    send!(h, None);
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
    syn_ack.options = mss_only();
    recv!(h, syn_ack);
    assert_eq!(h.tcb.state, State::Established);
    send!(h, out(ACK, ISS + 1, IRS + 1, 65535));
    send!(h, None);
    assert_eq!(h.tcb.info().snd_wnd, 8192);
    assert_eq!(h.tcb.deadline(), None, "nothing outstanding, no timer");
}

#[test]
fn active_open_offers_every_option_switched_on() {
    let mut h = Harness::connect(TcpConfig::default());
    let (syn, _) = h.send().unwrap();
    assert_eq!(syn.flags, SYN);
    assert_eq!(syn.options.mss, Some(MSS as u16));
    // 1 MiB of receive buffer needs a shift of 5 (65535 << 4 falls short by 16 bytes).
    assert_eq!(syn.options.window_scale, Some(5));
    assert!(syn.options.sack_permitted);
    assert_eq!(syn.options.timestamps.map(|(_, ecr)| ecr), Some(0));
    // The window of a SYN is never scaled.
    assert_eq!(syn.window, 65535);
}

#[test]
fn passive_open_syn_received_to_established() {
    let mut syn = seg(SYN, IRS, 0, 16384);
    syn.options = mss_only();
    let mut h = Harness::accept(plain(), &syn);
    assert_eq!(h.tcb.state, State::SynReceived);
    let mut syn_ack = out(SYN | ACK, ISS, IRS + 1, 65535);
    syn_ack.options = mss_only();
    send!(h, syn_ack);
    send!(h, None);
    recv!(
        h,
        seg(ACK, IRS + 1, ISS + 1, 16384),
        b"",
        Verdict::Established
    );
    assert_eq!(h.tcb.state, State::Established);
    assert_eq!(h.tcb.info().snd_wnd, 16384);
    send!(h, None);
}

#[test]
fn after_a_passive_open_the_latest_timestamp_is_echoed() {
    let mut syn = seg(SYN, IRS, 0, 16384);
    syn.options = TcpOptions {
        mss: Some(1460),
        timestamps: Some((100, 0)),
        ..TcpOptions::default()
    };
    let mut h = Harness::accept(TcpConfig::default(), &syn);
    let (syn_ack, _) = h.send().unwrap();
    assert_eq!(syn_ack.options.timestamps.map(|(_, ecr)| ecr), Some(100));
    let mut ack = seg(ACK, IRS + 1, ISS + 1, 16384);
    ack.options.timestamps = Some((200, 0));
    recv!(h, ack, b"", Verdict::Established);
    let mut data = seg(ACK, IRS + 1, ISS + 1, 16384);
    data.options.timestamps = Some((300, 0));
    recv!(h, data, b"hello");
    h.write(5);
    let (reply, _) = h.send().unwrap();
    // TS.Recent is the data segment's, not the SYN's (Linux echoes 300 too).
    assert_eq!(reply.options.timestamps.map(|(_, ecr)| ecr), Some(300));
}

#[test]
fn passive_open_answers_only_the_options_offered() {
    let mut syn = seg(SYN, IRS, 0, 16384);
    syn.options = TcpOptions {
        mss: Some(1000),
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::accept(TcpConfig::default(), &syn);
    let (syn_ack, _) = h.send().unwrap();
    assert_eq!(syn_ack.options.window_scale, None);
    assert_eq!(syn_ack.options.timestamps, None);
    assert!(syn_ack.options.sack_permitted);
    assert_eq!(h.tcb.mss, 1000);
    assert!(h.tcb.info().sack && !h.tcb.info().window_scaling && !h.tcb.info().timestamps);
}

#[test]
fn syn_received_retransmitted_syn_resends_the_syn_ack() {
    let syn = seg(SYN, IRS, 0, 16384);
    let mut h = Harness::accept(plain(), &syn);
    let (first, _) = h.send().unwrap();
    recv!(h, syn);
    let (again, _) = h.send().unwrap();
    assert_eq!(again, first);
    assert_eq!(h.counters.retrans_segs, 1);
}

#[test]
fn syn_received_unacceptable_ack_is_answered_by_rst() {
    let mut h = Harness::accept(plain(), &seg(SYN, IRS, 0, 16384));
    h.send().unwrap();
    recv!(
        h,
        seg(ACK, IRS + 1, ISS + 500, 16384),
        b"",
        Verdict::Reset {
            seq: ISS + 500,
            ack: None
        }
    );
    assert_eq!(h.tcb.state, State::SynReceived);
}

#[test]
fn syn_received_rst_closes_the_child() {
    // For a passive open this is RFC 9293's SYN-RECEIVED → LISTEN: the listener stays, the child goes.
    let mut h = Harness::accept(plain(), &seg(SYN, IRS, 0, 16384));
    h.send().unwrap();
    recv!(h, seg(RST, IRS + 1, 0, 0), b"", Verdict::Remove);
    assert_eq!(h.tcb.state, State::Closed);
    assert_eq!(h.tcb.error, Some(io::ErrorKind::ConnectionRefused));
    assert_eq!(h.tcb.deadline(), None);
}

/// Crossing SYNs (RFC 9293 §3.5, figure 8): SYN-SENT → SYN-RECEIVED, our SYN-ACK; the peer's
/// SYN-ACK acknowledging our SYN completes the open (its SYN, which we have, draws the ACK); the
/// peer's later ACK is a duplicate, not answered.
#[test]
fn simultaneous_open_syn_sent_to_syn_received_to_established() {
    let mut h = Harness::connect(plain());
    h.send().unwrap();
    // The peer's SYN crosses ours.
    let mut syn = seg(SYN, IRS, 0, 16384);
    syn.options = mss_only();
    recv!(h, syn);
    assert_eq!(h.tcb.state, State::SynReceived);
    let mut syn_ack = out(SYN | ACK, ISS, IRS + 1, 65535);
    syn_ack.options = mss_only();
    send!(h, syn_ack);
    recv!(
        h,
        seg(SYN | ACK, IRS, ISS + 1, 16384),
        b"",
        Verdict::Established
    );
    assert_eq!(h.tcb.state, State::Established);
    assert_eq!(h.tcb.info().snd_wnd, 16384, "a SYN's window is not scaled");
    send!(h, out(ACK, ISS + 1, IRS + 1, 65535));
    recv!(h, seg(ACK, IRS + 1, ISS + 1, 16384));
    send!(h, None);
    assert_eq!(h.drops.get(DropReason::TcpChallenged), 0);
}

/// Crossing SYNs when ours carried Fast Open data, as Linux answers them: our SYN-ACK is the SYN
/// again without the option or the data; the peer's SYN-ACK that acknowledges the data completes
/// the open, and our ACK (after the data) reports the peer's SYN as a duplicate (a D-SACK); a
/// SYN-ACK acknowledging less is challenged instead.
#[test]
fn crossing_syns_with_fast_open_data_are_answered_as_linux() {
    use crate::wire::tcp::FastOpenOption;
    let cookie = FastOpenOption::new(&[1, 2, 3, 4, 5, 6, 7, 8], false);
    let crossed = || {
        let mut h = Harness::connect(TcpConfig {
            sack: true,
            dsack: true,
            ..plain()
        });
        h.tcb.write(&[7u8; 100]).unwrap();
        h.tcb.syn_fast_open = Some(cookie);
        h.tcb.syn_data = 100;
        let (syn, len) = h.send().expect("SYN");
        assert_eq!((syn.options.fast_open, len.len()), (Some(cookie), 100));
        let mut syn = seg(SYN, IRS, 0, 16384);
        syn.options = mss_only();
        syn.options.sack_permitted = true;
        recv!(h, syn, b"not taken");
        let mut syn_ack = out(SYN | ACK, ISS, IRS + 1, 65535);
        syn_ack.options = mss_only();
        syn_ack.options.sack_permitted = true;
        send!(h, syn_ack);
        h
    };
    let mut h = crossed();
    recv!(
        h,
        seg(SYN | ACK, IRS, ISS + 101, 16384),
        b"",
        Verdict::Established
    );
    let mut ack = out(ACK, ISS + 101, IRS + 1, 65535);
    ack.options.sack[0] = (IRS, IRS + 1);
    ack.options.sack_count = 1;
    send!(h, ack);
    send!(h, None);
    // Acknowledging only the SYN: not the SYN-ACK of everything sent, so a SYN to challenge.
    let mut h = crossed();
    recv!(h, seg(SYN | ACK, IRS, ISS + 1, 16384));
    assert_eq!(h.tcb.state, State::SynReceived);
    assert_eq!(h.drops.get(DropReason::TcpChallenged), 1);
}

#[test]
fn syn_sent_rst_with_acceptable_ack_refuses() {
    let mut h = Harness::connect(plain());
    h.send().unwrap();
    recv!(h, seg(RST | ACK, 0, ISS + 1, 0), b"", Verdict::Remove);
    assert_eq!(h.tcb.error, Some(io::ErrorKind::ConnectionRefused));
    assert_eq!(h.counters.attempt_fails, 1);
}

#[test]
fn syn_sent_ignores_rst_without_ack_and_bare_acks() {
    let mut h = Harness::connect(plain());
    h.send().unwrap();
    recv!(h, seg(RST, 0, 0, 0));
    recv!(h, seg(ACK, IRS, ISS + 1, 0));
    assert_eq!(h.tcb.state, State::SynSent);
    assert_eq!(h.drops.get(DropReason::TcpUnexpected), 2);
    send!(h, None);
}

#[test]
fn syn_sent_unacceptable_ack_is_answered_by_rst() {
    let mut h = Harness::connect(plain());
    h.send().unwrap();
    recv!(
        h,
        seg(SYN | ACK, IRS, ISS, 8192),
        b"",
        Verdict::Reset {
            seq: ISS,
            ack: None
        }
    );
    assert_eq!(h.tcb.state, State::SynSent);
}

#[test]
fn syn_is_retransmitted_with_backoff_then_the_connect_fails() {
    let mut h = Harness::connect(plain());
    let t0 = h.now;
    let (syn, _) = h.send().unwrap();
    // 1 s initial RTO, doubled each time (RFC 6298 §5.5); 6 retries.
    for (i, at) in [1u64, 3, 7, 15, 31, 63].into_iter().enumerate() {
        assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_secs(at)));
        assert_eq!(h.fire(), Verdict::Continue);
        send!(h, syn);
        assert_eq!(h.counters.retrans_segs, i as u64 + 1);
    }
    // The seventh timeout: 64 s capped at max_rto (60 s).
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_secs(123)));
    assert_eq!(h.fire(), Verdict::Remove);
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
    assert_eq!(h.counters.attempt_fails, 1);
}

/// `TCP_SYNCNT` (fastopen/client/blocking-connect-bypass-errno.pkt): one retry, so the connect
/// fails at the second timeout, 3 s after the SYN, not the stack's 123 s.
#[test]
fn the_connections_own_syn_retries_end_the_connect_sooner() {
    let mut h = Harness::connect(plain());
    let cfg = h.cfg.clone();
    let options = TcpSocketOptions {
        syn_retries: Some(1),
        ..TcpSocketOptions::default()
    };
    h.tcb.apply_options(&options, &cfg);
    let t0 = h.now;
    let (syn, _) = h.send().unwrap();
    assert_eq!(h.fire(), Verdict::Continue);
    send!(h, syn);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_secs(3)));
    assert_eq!(h.fire(), Verdict::Remove);
    assert_eq!(h.tcb.error, Some(io::ErrorKind::TimedOut));
}

/// `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`: the connection's own keep-alive timings.
#[test]
fn the_connections_own_keepalive_times() {
    let mut h = Harness::established();
    let cfg = h.cfg.clone();
    let t0 = h.now;
    h.tcb.set_keepalive(true, t0, h.tcb.keepalive_times(&cfg).0);
    let times = (Duration::from_secs(5), Duration::from_secs(2), 1);
    h.tcb.set_keepalive_times(Some(times), t0, &cfg);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_secs(5)));
    assert_eq!(h.fire(), Verdict::Continue);
    h.send_all();
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_secs(7)));
    assert!(matches!(h.fire(), Verdict::Reset { .. }));
}

#[test]
fn a_syn_ack_echoing_a_timestamp_never_sent_is_reset_and_the_real_one_taken() {
    let mut h = Harness::connect(TcpConfig::default());
    let (syn, _) = h.send().unwrap();
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
    syn_ack.options = TcpOptions {
        mss: Some(MSS as u16),
        // An echo of a value we never sent: two billion milliseconds before our clock.
        timestamps: Some((
            1,
            syn.options
                .timestamps
                .unwrap()
                .0
                .wrapping_sub(2_000_000_000),
        )),
        ..TcpOptions::default()
    };
    // fastopen/client/synack-data.pkt: `R 1001:1001(0)`, the SYN-ACK's acknowledgment as the
    // sequence number, and the connection still waits.
    recv!(
        h,
        syn_ack,
        b"",
        Verdict::Reset {
            seq: ISS + 1,
            ack: None
        }
    );
    assert_eq!(h.tcb.state, State::SynSent);
    assert_eq!(h.drops.get(DropReason::TcpBadEcho), 1);
    let info = h.tcb.info();
    assert_eq!(info.srtt, None, "no sample taken");
    assert_eq!(info.rto, Duration::from_secs(1));
    // The real SYN-ACK, 10 ms later, echoing our SYN's timestamp.
    h.advance(Duration::from_millis(10));
    syn_ack.options.timestamps = Some((2, syn.options.timestamps.unwrap().0));
    recv!(h, syn_ack);
    assert_eq!(h.tcb.state, State::Established);
}

/// A Fast Open client (RFC 7413 §4.1): the first SYN carries the cookie and the data; a SYN-ACK that
/// acknowledges it all establishes the connection with nothing left to send, its own cookie handed
/// to the stack (`FastOpenLearned`); a retransmitted SYN is a plain one.
#[test]
fn fast_open_client_sends_data_in_the_syn() {
    use crate::wire::tcp::FastOpenOption;
    let cookie = FastOpenOption::new(&[1, 2, 3, 4, 5, 6, 7, 8], false);
    let connect = || {
        let mut h = Harness::connect(plain());
        assert_eq!(h.tcb.write(&[7u8; 100]).unwrap(), 100);
        h.tcb.syn_fast_open = Some(cookie);
        h.tcb.syn_data = 100;
        h
    };
    let mut h = connect();
    let mut syn = out(SYN, ISS, 0, 65535);
    syn.options = mss_only();
    syn.options.fast_open = Some(cookie);
    send!(h, syn, 100);
    send!(h, None);
    // The retransmission: SYN alone, no option, no data.
    h.fire();
    send!(h, {
        let mut s = out(SYN, ISS, 0, 65535);
        s.options = mss_only();
        s
    });
    // The server took the data: ACK = ISS + 101.
    let mut h = connect();
    h.send().expect("SYN");
    let new_cookie = FastOpenOption::new(&[9; 8], false);
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 101, 8192);
    syn_ack.options = mss_only();
    syn_ack.options.fast_open = Some(new_cookie);
    recv!(h, syn_ack, b"", Verdict::FastOpenLearned);
    assert!(h.tcb.fast_open, "its SYN data was acknowledged");
    assert_eq!(h.tcb.info().delivered, 1, "the SYN with its data: one");
    assert_eq!(
        h.tcb.syn_fast_open,
        Some(new_cookie),
        "for the stack's cache"
    );
    send!(h, out(ACK, ISS + 101, IRS + 1, 65535));
    send!(h, None);
}

/// A server that acknowledges only the SYN (it did not take the data): the data goes again at once,
/// carrying the handshake's ACK, as Linux's `tcp_rcv_fastopen_synack` does; data in the SYN-ACK is
/// taken.
#[test]
fn fast_open_client_resends_data_the_syn_ack_did_not_acknowledge() {
    let mut h = Harness::connect(plain());
    h.tcb.write(&[7u8; 100]).unwrap();
    h.tcb.syn_data = 100;
    h.send().expect("SYN with data");
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
    syn_ack.options = mss_only();
    recv!(h, syn_ack, b"hello", Verdict::FastOpenLearned);
    assert!(!h.tcb.fast_open);
    send!(h, out(ACK | PSH, ISS + 1, IRS + 6, 65535 - 5), 100);
    assert_eq!(h.counters.retrans_segs, 1, "counted as a retransmission");
}

/// A writer waiting for the connection (`expect_write`, Linux's pending writer): the SYN-ACK's ACK
/// is not sent alone but rides on the data written next, and the connection is interactive from then
/// on: the peer's answer is acknowledged by the delayed-ACK rule, not at once.
#[test]
fn a_waiting_writer_carries_the_handshakes_ack() {
    let cfg = TcpConfig {
        quick_ack: true,
        ..plain()
    };
    let mut h = Harness::connect(cfg);
    h.send().expect("SYN");
    h.tcb.expect_write();
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
    syn_ack.options = mss_only();
    recv!(h, syn_ack);
    assert_eq!(h.tcb.state, State::Established);
    send!(h, None);
    h.write(100);
    send!(h, out(ACK | PSH, ISS + 1, IRS + 1, 65535), 100);
    recv!(h, seg(ACK | PSH, IRS + 1, ISS + 101, 8192), &[0; 50]);
    send!(h, None);
}

/// Data sent in a SYN without a cookie (the cookie-less mode): a cookie the server sends unasked is
/// not taken for the cache, as Linux ignores it (fastopen/client/cookie-less-sendto.pkt); the
/// server's MSS still is.
#[test]
fn fast_open_client_ignores_a_cookie_it_did_not_ask_for() {
    use crate::wire::tcp::FastOpenOption;
    let mut h = Harness::connect(plain());
    h.tcb.write(&[7u8; 100]).unwrap();
    h.tcb.syn_data = 100;
    let syn = h.send().expect("SYN with data").0;
    assert_eq!(syn.options.fast_open, None, "no cookie, no request");
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 101, 8192);
    syn_ack.options = mss_only();
    syn_ack.options.fast_open = Some(FastOpenOption::new(&[9; 8], false));
    recv!(h, syn_ack, b"", Verdict::FastOpenLearned);
    assert!(h.tcb.fast_open, "its data was acknowledged");
    assert_eq!(h.tcb.syn_fast_open, None, "the unasked cookie is not kept");
}

/// A cookie request (kind 34, no data) that the SYN-ACK leaves without any Fast Open option: the
/// next request is to go in the experimental option (Linux's `try_exp`,
/// fastopen/client/fallback-exp-opt.pkt); a SYN-ACK with a cookie leaves nothing to try.
#[test]
fn fast_open_client_tries_the_other_format_after_an_unanswered_request() {
    use crate::wire::tcp::FastOpenOption;
    for (answer, try_exp) in [(None, 1), (Some(FastOpenOption::new(&[9; 8], false)), 0)] {
        let mut h = Harness::connect(plain());
        h.tcb.write(&[7u8; 100]).unwrap();
        h.tcb.syn_fast_open = Some(FastOpenOption::new(&[], false));
        h.send().expect("SYN with a request");
        let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
        syn_ack.options = mss_only();
        syn_ack.options.fast_open = answer;
        recv!(h, syn_ack, b"", Verdict::FastOpenLearned);
        assert_eq!(h.tcb.fast_open_try_exp, try_exp);
        assert_eq!(h.tcb.syn_fast_open, answer);
    }
}
