//! Flow control: the window's edges, window scaling, delayed ACKs, window updates, Nagle and
//! zero-window probing.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

/// An established connection with a 4096-byte receive buffer (no scaling: the window is the buffer).
fn small_window() -> Harness {
    let cfg = TcpConfig {
        recv_buffer: 4096,
        ..plain()
    };
    let h = Harness::established_with(cfg, TcpOptions::default());
    assert_eq!(h.tcb.rcv_adv.0, R + 4096);
    h
}

#[test]
fn a_segment_straddling_the_right_edge_is_trimmed() {
    let mut h = small_window();
    recv!(h, seg(ACK, R, S, 65535), &[1; 1000]);
    send!(h, None);
    // 4000 bytes and a FIN, of which 3096 fit: the rest and the FIN are dropped.
    recv!(h, seg(ACK | FIN, R + 1000, S, 65535), &[2; 4000]);
    assert_eq!(h.rcv_nxt(), R + 4096);
    assert_eq!(h.tcb.rx.bytes, 4096);
    assert_eq!(h.tcb.state, State::Established);
    send!(h, out(ACK, S, R + 4096, 0));
}

#[test]
fn a_closed_window_takes_only_the_ack_of_a_segment_at_its_edge() {
    let mut h = small_window();
    h.write(500);
    send!(h, out(ACK | PSH, S, R, 4096), 500);
    recv!(h, seg(ACK, R, S, 65535), &[1; 4096]);
    send!(h, out(ACK, S + 500, R + 4096, 0));
    // At the edge: the data goes, the ACK is taken, and an ACK answers.
    recv!(h, seg(ACK, R + 4096, S + 500, 65535), b"more");
    assert_eq!(h.tcb.rx.bytes, 4096);
    assert!(h.tcb.all_acked());
    send!(h, out(ACK, S + 500, R + 4096, 0));
    assert_eq!(h.drops.get(DropReason::TcpOutOfWindow), 1);
    // Past the edge: nothing is taken, and a duplicate ACK answers (data is always answered).
    recv!(h, seg(ACK, R + 4097, S + 500, 100), b"more");
    assert_eq!(h.tcb.info().snd_wnd, 65535);
    send!(h, out(ACK, S + 500, R + 4096, 0));
    // A pure ACK at the edge of a closed window is acceptable (RFC 9293's first case).
    recv!(h, seg(ACK, R + 4096, S + 500, 1000));
    assert_eq!(h.tcb.info().snd_wnd, 1000);
    send!(h, None);
}

#[test]
fn reading_reopens_the_window_with_an_update() {
    let mut h = small_window();
    recv!(h, seg(ACK, R, S, 65535), &[1; 4096]);
    send!(h, out(ACK, S, R + 4096, 0));
    // Reading less than min(buffer/2, MSS) moves nothing (receiver silly window avoidance).
    let mut buf = [0u8; 1000];
    assert_eq!(h.tcb.rx.read(&mut buf, &mut h.pool), 1000);
    assert!(!h.tcb.after_read());
    send!(h, None);
    let mut buf = [0u8; 2000];
    assert_eq!(h.tcb.rx.read(&mut buf, &mut h.pool), 2000);
    assert!(h.tcb.after_read());
    send!(h, out(ACK, S, R + 4096, 3000));
}

#[test]
fn a_read_while_the_window_is_wide_open_sends_no_update() {
    let mut h = small_window();
    recv!(h, seg(ACK | PSH, R, S, 65535), &[1; 1000]);
    h.fire();
    send!(h, out(ACK, S, R + 1000, 3096));
    // 3096 of 4096 still open: reading the 1000 bytes owes the peer nothing; the next ACK for data
    // carries the new edge.
    let mut buf = [0u8; 2000];
    assert_eq!(h.tcb.rx.read(&mut buf, &mut h.pool), 1000);
    assert!(!h.tcb.after_read());
    send!(h, None);
    // 2000 more leave 1096 open (under half): the read that frees them doubles that, and is
    // answered at once.
    recv!(h, seg(ACK | PSH, R + 1000, S, 65535), &[2; 2000]);
    h.fire();
    send!(h, out(ACK, S, R + 3000, 1096));
    assert_eq!(h.tcb.rx.read(&mut buf, &mut h.pool), 2000);
    assert!(h.tcb.after_read());
    send!(h, out(ACK, S, R + 3000, 4096));
}

#[test]
fn window_scaling_rounds_the_field_up_and_never_shrinks_the_edge() {
    let cfg = TcpConfig {
        window_scaling: true,
        ..plain()
    };
    let peer = TcpOptions {
        window_scale: Some(7),
        ..TcpOptions::default()
    };
    let mut h = Harness::connect(cfg);
    h.send().unwrap();
    let mut syn_ack = seg(SYN | ACK, IRS, S, 512);
    syn_ack.options = TcpOptions {
        mss: Some(MSS as u16),
        ..peer
    };
    recv!(h, syn_ack);
    // The window of the SYN-ACK is not scaled; later ones are.
    assert_eq!(h.tcb.info().snd_wnd, 512);
    // 1 MiB at a shift of 5.
    send!(h, out(ACK, S, R, 32768));
    recv!(h, seg(ACK, R, S, 512), &[0; 1000]);
    assert_eq!(h.tcb.info().snd_wnd, 512 << 7);
    h.fire();
    // 1 MiB - 1000 = 1047576 bytes, rounded up to 32737 units of 32 (1047584): the edge moves 8
    // bytes right rather than shrinking.
    send!(h, out(ACK, S, R + 1000, 32737));
    assert_eq!(h.tcb.rcv_adv.0, R + 1000 + 32737 * 32);
}

#[test]
fn delayed_ack_every_second_full_segment() {
    let mut h = Harness::established();
    recv!(h, seg(ACK, R, S, 65535), &[0; MSS as usize]);
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_millis(40)));
    recv!(h, seg(ACK, R + MSS, S, 65535), &[0; MSS as usize]);
    send!(h, out(ACK, S, R + 2 * MSS, 65535 - 2 * MSS as u16));
    assert_eq!(h.tcb.deadline(), None);
    assert_eq!(h.counters.predicted_data, 2);
}

#[test]
fn delayed_ack_timer() {
    let mut h = Harness::established();
    recv!(h, seg(ACK | PSH, R, S, 65535), &[0; 100]);
    send!(h, None);
    h.advance(Duration::from_millis(39));
    h.timer();
    send!(h, None);
    h.advance(Duration::from_millis(1));
    h.timer();
    send!(h, out(ACK, S, R + 100, 65435));
}

#[test]
fn out_of_order_data_is_acknowledged_at_once_with_sack_blocks() {
    let cfg = TcpConfig {
        sack: true,
        ..plain()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    let mut h = Harness::established_with(cfg, peer);
    recv!(h, seg(ACK, R + 100, S, 65535), &[0; 100]);
    assert!(h.tcb.ack_immediately);
    let mut dup = out(ACK, S, R, 65535);
    dup.options.sack[0] = (R + 100, R + 200);
    dup.options.sack_count = 1;
    send!(h, dup);
    // Filling the hole is acknowledged at once too (RFC 5681 §4.2), without blocks.
    recv!(h, seg(ACK, R, S, 65535), &[0; 100]);
    send!(h, out(ACK, S, R + 200, 65335));
}

#[test]
fn nagle_holds_a_small_segment_while_data_is_unacknowledged() {
    let mut h = Harness::established();
    h.write(100);
    send!(h, out(ACK | PSH, S, R, 65535), 100);
    h.write(100);
    send!(h, None);
    recv!(h, seg(ACK, R, S + 100, 65535));
    assert_eq!(h.counters.predicted_acks, 1);
    send!(h, out(ACK | PSH, S + 100, R, 65535), 100);
    // Without Nagle it would have gone at once.
    h.tcb.nodelay = true;
    h.write(100);
    send!(h, out(ACK | PSH, S + 200, R, 65535), 100);
}

/// Minshall's change (Linux's `tcp_nagle_check`): only a partial segment in flight holds the next
/// one; full segments in flight do not, so a write's tail goes with its full segments
/// (fastopen/client/nonblocking-sendto-over-mss.pkt). The classic rule holds it while anything is
/// unacknowledged.
#[test]
fn nagle_with_minshalls_change_holds_a_partial_segment_only_behind_another() {
    let sent = |h: &mut Harness| -> Vec<(u32, usize)> {
        h.send_all()
            .into_iter()
            .map(|(r, d)| (r.seq, d.len()))
            .collect()
    };
    let m = MSS as usize;
    let mut h = Harness::established();
    h.write(2 * m + 100);
    assert_eq!(sent(&mut h), [(S, m), (S + MSS, m), (S + 2 * MSS, 100)]);
    // Now a partial segment is in flight: the next waits for its ACK.
    h.write(100);
    assert_eq!(sent(&mut h), []);
    recv!(h, seg(ACK, R, S + 2 * MSS + 100, 65535));
    assert_eq!(sent(&mut h), [(S + 2 * MSS + 100, 100)]);

    let cfg = TcpConfig {
        minshall_nagle: false,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    h.write(2 * m + 100);
    assert_eq!(sent(&mut h), [(S, m), (S + MSS, m)]);
    recv!(h, seg(ACK, R, S + 2 * MSS, 65535));
    assert_eq!(sent(&mut h), [(S + 2 * MSS, 100)]);
}

#[test]
fn a_closed_peer_window_is_probed_with_one_byte_with_backoff() {
    let cfg = TcpConfig {
        window_probe_without_data: false,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    let t0 = h.now;
    recv!(h, seg(ACK, R, S, 0));
    assert_eq!(h.tcb.info().snd_wnd, 0);
    h.write(100);
    send!(h, None);
    // The persist timer, at the RTO (200 ms, the floor).
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
    h.fire();
    let probe = send!(h, out(ACK, S, R, 65535), 1);
    assert_eq!(probe, [0]);
    send!(h, None);
    // The probe is timed like data: at 400 ms it is taken back, the RTO doubled, and the persist
    // timer backs off: 400 ms × 2.
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(400)));
    h.fire();
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(1200)));
    h.fire();
    send!(h, out(ACK, S, R, 65535), 1);
    // The peer answers with its window still closed: alive, so the retries start again.
    recv!(h, seg(ACK, R, S, 0));
    assert_eq!(h.tcb.retries, 0);
    // The window opens: everything goes.
    recv!(h, seg(ACK, R, S + 1, 65535));
    send!(h, out(ACK | PSH, S + 1, R, 65535), 99);
}

/// Linux's probe of a closed window: the sequence number before SND.UNA and no data, backing off
/// with the persist timer; when the window opens, the data goes at once.
#[test]
fn a_closed_peer_window_is_probed_with_an_old_sequence_number_as_linux() {
    let mut h = Harness::established();
    let t0 = h.now;
    recv!(h, seg(ACK, R, S, 0));
    h.write(100);
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(200)));
    h.fire();
    send!(h, out(ACK, S - 1, R, 65535), 0);
    send!(h, None);
    // Nothing outstanding: no retransmission timer, the persist timer backs off (400 ms).
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(600)));
    h.fire();
    send!(h, out(ACK, S - 1, R, 65535), 0);
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(t0 + Duration::from_millis(1400)));
    recv!(h, seg(ACK, R, S, 0));
    assert_eq!(h.tcb.retries, 0);
    recv!(h, seg(ACK, R, S, 65535));
    send!(h, out(ACK | PSH, S, R, 65535), 100);
}

/// A request/response exchange: each segment carries data and the ACK of the last one the other way.
/// Header prediction takes them (as data that acknowledges new data), and what goes out, and the
/// connection's state after, are what the general path gives. After each segment in and out, the
/// block says at once that it owes nothing (the output path's shortcut, checked by `send`).
#[test]
fn request_and_response_segments_take_the_short_path_with_the_general_paths_result() {
    let run = |prediction: bool| {
        let mut h = Harness::established_with(
            TcpConfig {
                header_prediction: prediction,
                ..plain()
            },
            TcpOptions::default(),
        );
        h.tcb.nodelay = true;
        let mut out = Vec::new();
        for i in 0..3u32 {
            // Our request, then the peer's response that acknowledges it and carries 50 bytes.
            h.write(100);
            out.extend(h.send_all());
            h.advance(Duration::from_millis(1));
            recv!(
                h,
                seg(ACK | PSH, R + 50 * i, S + 100 * (i + 1), 65535),
                &[7; 50]
            );
            out.extend(h.send_all());
        }
        h.fire();
        out.extend(h.send_all());
        let state = (
            format!("{:?}", h.tcb.info()),
            h.tcb.snd_una,
            h.tcb.snd_nxt,
            h.tcb.rcv_nxt,
            h.tcb.rx.bytes,
            h.tcb.deadline(),
        );
        (out, state, h.counters.predicted_data, h.owed_nothing)
    };
    let (fast, fast_state, predicted, owed_nothing) = run(true);
    let (general, general_state, none, _) = run(false);
    // The last call of each `send_all`: after each request sent, each response taken in (its ACK
    // delayed), and the delayed ACK.
    assert_eq!(owed_nothing, 7);
    assert_eq!(predicted, 3, "every response took the short path");
    assert_eq!(none, 0);
    assert_eq!(fast, general);
    assert_eq!(fast_state, general_state);
    // The last response was acknowledged (by the delayed ACK), and our requests all were.
    assert_eq!(fast.last().map(|(r, _)| r.ack), Some(R + 150));
    assert_eq!(fast_state.1, fast_state.2);
    assert_eq!(fast_state.1 .0, S + 300);
}

/// Quick-ACK mode (Linux's): the first data of a connection is acknowledged segment by segment,
/// up to half the receive buffer in segments (65535 / (2 × 1460): 22, capped at 16); after that the
/// delayed-ACK rule holds, until a silence longer than the RTO starts another run.
#[test]
fn quick_ack_mode_acknowledges_the_first_segments_at_once() {
    let cfg = TcpConfig {
        quick_ack: true,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    let mut seq = R;
    for i in 0..16u32 {
        recv!(h, seg(ACK | PSH, seq, S, 65535), &[0; 100]);
        seq += 100;
        let (ack, _) = h
            .send()
            .unwrap_or_else(|| panic!("segment {i} acknowledged at once"));
        assert_eq!(ack.ack, seq);
    }
    recv!(h, seg(ACK | PSH, seq, S, 65535), &[0; 100]);
    seq += 100;
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_millis(40)));
    h.fire();
    h.send().expect("the delayed ACK");
    // A silence longer than the RTO (1 s before any RTT sample): quick ACKs again.
    h.advance(Duration::from_secs(2));
    recv!(h, seg(ACK | PSH, seq, S, 65535), &[0; 100]);
    let (ack, _) = h.send().expect("acknowledged at once after the silence");
    assert_eq!(ack.ack, seq + 100);
}

/// A quick ACK is spent by each ACK sent, not by each segment (Linux's `tcp_dec_quickack_mode`
/// since 6.6): segments taken in together (a GRO packet's, or one poll's) and answered by one ACK
/// spend one. After 8 flights of three segments, 8 of the 16 are left: 8 lone segments are
/// acknowledged at once, and the next waits for the delayed-ACK timer.
#[test]
fn a_quick_ack_is_spent_by_an_ack_not_by_a_segment() {
    let cfg = TcpConfig {
        quick_ack: true,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    let mut seq = R;
    for i in 0..8u32 {
        for _ in 0..3 {
            recv!(h, seg(ACK, seq, S, 65535), &[0; 100]);
            seq += 100;
        }
        let (ack, _) = h
            .send()
            .unwrap_or_else(|| panic!("flight {i} acknowledged at once"));
        assert_eq!(ack.ack, seq);
        send!(h, None);
    }
    for i in 0..8u32 {
        recv!(h, seg(ACK, seq, S, 65535), &[0; 100]);
        seq += 100;
        let (ack, _) = h
            .send()
            .unwrap_or_else(|| panic!("lone segment {i} acknowledged at once"));
        assert_eq!(ack.ack, seq);
    }
    recv!(h, seg(ACK, seq, S, 65535), &[0; 100]);
    send!(h, None);
    assert_eq!(h.tcb.deadline(), Some(h.now + Duration::from_millis(40)));
}

/// Linux's pingpong mode: a connection that answers data within the delayed-ACK time is interactive,
/// and the peer's next data waits for the delayed ACK (to ride on the answer) even in quick-ACK mode;
/// the delayed-ACK timer firing ends it.
#[test]
fn an_interactive_connection_delays_its_acks() {
    let cfg = TcpConfig {
        quick_ack: true,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    recv!(h, seg(ACK | PSH, R, S, 65535), &[0; 100]);
    h.send().expect("quick ACK");
    h.advance(Duration::from_millis(5));
    h.write(50);
    h.send().expect("the answer");
    recv!(h, seg(ACK | PSH, R + 100, S + 50, 65535), &[0; 100]);
    send!(h, None);
    h.fire();
    h.send().expect("the delayed ACK");
    recv!(h, seg(ACK | PSH, R + 200, S + 50, 65535), &[0; 100]);
    h.send()
        .expect("quick again once the timer ended pingpong mode");
}

/// slow_start/slow-start-after-idle.pkt: after two seconds idle (several RTOs) the window of 36
/// segments restarts at the initial ten (halved per RTO of idle time, no lower than the initial
/// window), so the next write goes as ten segments, not 36.
#[test]
fn the_window_restarts_after_idle() {
    use super::push::{ack, server};
    let cfg = TcpConfig {
        restart_after_idle: true,
        ..plain()
    };
    let mut h = server(cfg, 100);
    h.write(26000);
    assert_eq!(h.send_all().len(), 10);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 10001);
    assert_eq!(h.send_all().len(), 16);
    h.advance(Duration::from_millis(100));
    ack(&mut h, 26001);
    assert_eq!(h.tcb.cc.cwnd, 36000);
    h.advance(Duration::from_secs(2));
    h.write(20000);
    assert_eq!(h.send_all().len(), 10);
    assert_eq!(h.tcb.cc.cwnd, 10000);
    // Within an RTO of the last send, no restart.
    let mut h = server(
        TcpConfig {
            restart_after_idle: true,
            ..plain()
        },
        100,
    );
    h.write(26000);
    h.send_all();
    h.advance(Duration::from_millis(100));
    ack(&mut h, 10001);
    h.send_all();
    h.advance(Duration::from_millis(100));
    ack(&mut h, 26001);
    h.advance(Duration::from_millis(50));
    h.write(20000);
    assert_eq!(h.send_all().len(), 20);
    assert_eq!(h.tcb.cc.cwnd, 36000);
}

/// A peer that keeps its window closed and answers the probes is kept for ever (RFC 1122
/// §4.2.2.17); one that stops answering is given up after `max_retries` unanswered probes, and,
/// with a user timeout, at the first probe that finds that long since the first, answered or not,
/// as Linux's `tcp_probe_timer` gives it up.
#[test]
fn a_closed_window_is_given_up_only_when_its_probes_go_unanswered() {
    let closed = |user_timeout: Option<Duration>| {
        let cfg = TcpConfig {
            max_retries: 3,
            ..plain()
        };
        let mut h = Harness::established_with(cfg, TcpOptions::default());
        h.tcb.set_user_timeout(user_timeout);
        recv!(h, seg(ACK, R, S, 0));
        h.write(100);
        send!(h, None);
        h
    };
    // Answered, with the window still closed: ten probes and more, and still there.
    let mut h = closed(None);
    for _ in 0..10 {
        assert_eq!(h.fire(), Verdict::Continue);
        send!(h, out(ACK, S - 1, R, 65535), 0);
        recv!(h, seg(ACK, R, S, 0));
        assert_eq!(h.tcb.info().probes, 0, "answered");
        send!(h, None);
    }
    assert_eq!(h.tcb.state, State::Established);
    // Unanswered: three probes, and the fourth expiry ends it.
    let mut h = closed(None);
    for n in 1..=3 {
        assert_eq!(h.fire(), Verdict::Continue);
        send!(h, out(ACK, S - 1, R, 65535), 0);
        send!(h, None);
        assert_eq!(h.tcb.info().probes, n);
    }
    assert!(matches!(h.fire(), Verdict::Reset { .. }));
    assert_eq!(h.tcb.take_error(), Some(io::ErrorKind::TimedOut));
    // A user timeout of one second: probes at 200, 600 and 1400 ms after the write, answered;
    // the third finds 1.2 s since the first and ends it.
    let mut h = closed(Some(Duration::from_secs(1)));
    let t0 = h.now;
    for _ in 0..2 {
        assert_eq!(h.fire(), Verdict::Continue);
        send!(h, out(ACK, S - 1, R, 65535), 0);
        recv!(h, seg(ACK, R, S, 0));
        send!(h, None);
    }
    assert!(matches!(h.fire(), Verdict::Reset { .. }));
    assert_eq!(h.now, t0 + Duration::from_millis(1400));
}
