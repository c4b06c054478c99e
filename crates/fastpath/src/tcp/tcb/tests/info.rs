//! `ConnectionInfo`: the figures `TCP_INFO` reports, from the block's own state and counters.

use super::*;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

fn sack_harness() -> Harness {
    let cfg = TcpConfig {
        sack: true,
        ..plain()
    };
    let peer = TcpOptions {
        sack_permitted: true,
        ..TcpOptions::default()
    };
    Harness::established_with(cfg, peer)
}

#[test]
fn a_fresh_connection_reports_its_state_options_and_segment_counts() {
    let h = Harness::established();
    let i = h.tcb.info();
    assert_eq!(i.state, State::Established);
    assert_eq!(i.congestion_state, CongestionState::Open);
    assert_eq!((i.mss, i.advertised_mss, i.path_mtu), (MSS, 1460, 1500));
    // SYN and the handshake's ACK out; the SYN-ACK in.
    assert_eq!((i.segments_out, i.segments_in), (2, 1));
    assert_eq!((i.data_segments_out, i.data_segments_in), (0, 0));
    // The SYN takes a sequence number but is no data.
    assert_eq!(i.bytes_acked, 0);
    assert_eq!((i.unacked, i.not_sent, i.lost, i.sacked), (0, 0, 0, 0));
    assert_eq!(i.last_ack_received, Some(h.now));
    // The SYN-ACK counts as data received, as on Linux.
    assert_eq!(
        (i.last_data_sent, i.last_data_received),
        (None, Some(h.now))
    );
    assert_eq!((i.snd_window_shift, i.rcv_window_shift), (0, 0));
    assert_eq!(i.ssthresh, u32::MAX);
    assert_eq!(i.dupack_threshold, 3);
}

#[test]
fn data_in_and_out_is_counted_with_its_times() {
    let mut h = Harness::established();
    h.write(3000);
    let t_sent = h.now;
    // Two full segments and the last 80 bytes (Nagle with Minshall's change: no partial segment
    // was in flight).
    assert_eq!(h.send_all().len(), 3);
    let i = h.tcb.info();
    assert_eq!(i.unacked, 3000);
    assert_eq!(i.not_sent, 0);
    assert_eq!((i.data_segments_out, i.bytes_sent), (3, 3000));
    assert_eq!(i.last_data_sent, Some(t_sent));
    h.advance(Duration::from_millis(50));
    recv!(h, seg(ACK, R, S + 2 * MSS, 65535), b"hello");
    let i = h.tcb.info();
    assert_eq!(i.bytes_acked, 2 * u64::from(MSS));
    assert_eq!(i.bytes_received, 5);
    assert_eq!((i.data_segments_in, i.largest_segment_in), (1, 5));
    assert_eq!(i.last_data_received, Some(h.now));
    assert_eq!(
        i.min_rtt,
        Some(Duration::from_millis(1)),
        "the handshake's 0 ms, as 1"
    );
    assert!(i.rttvar > Duration::ZERO);
}

#[test]
fn a_timeout_is_the_loss_state_until_everything_then_outstanding_is_acknowledged() {
    let mut h = Harness::established();
    h.write(2 * MSS as usize);
    h.send_all();
    h.fire();
    assert_eq!(h.send_all().len(), 1);
    let i = h.tcb.info();
    assert_eq!(i.congestion_state, CongestionState::Loss);
    assert_eq!(i.backoff, 1);
    assert_eq!(i.lost, 2 * MSS);
    assert_eq!(i.bytes_retransmitted, u64::from(MSS));
    recv!(h, seg(ACK, R, S + MSS, 65535));
    assert_eq!(h.tcb.info().congestion_state, CongestionState::Loss);
    h.send_all();
    recv!(h, seg(ACK, R, S + 2 * MSS, 65535));
    let i = h.tcb.info();
    assert_eq!(i.congestion_state, CongestionState::Open);
    assert_eq!((i.lost, i.unacked), (0, 0));
    // Both ACKs cover retransmissions: no RTT sample (Karn), so the timeout stays backed off, as
    // Linux's `icsk_backoff` does until one.
    assert_eq!(i.backoff, 1);
}

#[test]
fn sacks_are_disorder_then_recovery_with_the_holes_lost() {
    let mut h = sack_harness();
    h.write(5 * MSS as usize);
    assert_eq!(h.send_all().len(), 5);
    let sack = |blocks: &[(u32, u32)]| {
        let mut d = seg(ACK, R, S, 65535);
        for (i, &b) in blocks.iter().enumerate() {
            d.options.sack[i] = b;
        }
        d.options.sack_count = blocks.len() as u8;
        d
    };
    recv!(h, sack(&[(S + MSS, S + 2 * MSS)]));
    let i = h.tcb.info();
    assert_eq!(i.congestion_state, CongestionState::Disorder);
    assert_eq!((i.sacked, i.lost), (MSS, 0));
    recv!(
        h,
        sack(&[(S + 3 * MSS, S + 5 * MSS), (S + MSS, S + 2 * MSS)])
    );
    recv!(
        h,
        sack(&[(S + 3 * MSS, S + 5 * MSS), (S + MSS, S + 2 * MSS)])
    );
    let i = h.tcb.info();
    assert_eq!(i.congestion_state, CongestionState::Recovery);
    assert_eq!(i.sacked, 3 * MSS);
    // Segments 0 and 2, below the highest SACK.
    assert_eq!(i.lost, 2 * MSS);
    assert_eq!(i.unacked, 5 * MSS);
}

#[test]
fn busy_time_counts_while_data_is_out_and_the_peers_window_limits_it() {
    let mut h = Harness::established();
    let t0 = h.now;
    h.write(2000);
    h.tcb.after_write(2000, 2000, t0);
    // The peer's window takes one segment: it goes, the rest waits for the window.
    recv!(h, seg(ACK, R, S, MSS as u16));
    let sent: Vec<usize> = h.send_all().iter().map(|(_, d)| d.len()).collect();
    assert_eq!(sent, [MSS as usize]);
    h.advance(Duration::from_millis(100));
    recv!(h, seg(ACK, R, S + MSS, 3000));
    // The window opened: the rest goes, receive-window limited no more.
    let sent: Vec<usize> = h.send_all().iter().map(|(_, d)| d.len()).collect();
    assert_eq!(sent, [2000 - MSS as usize]);
    h.advance(Duration::from_millis(50));
    recv!(h, seg(ACK, R, S + 2000, 3000));
    let i = h.tcb.info();
    assert_eq!(i.busy_time, Duration::from_millis(150));
    assert_eq!(i.rwnd_limited, Duration::from_millis(100));
    assert_eq!(i.sndbuf_limited, Duration::ZERO);
    // Idle now: the totals stay.
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.tcb.info_at(Some(h.now)).busy_time,
        Duration::from_millis(150)
    );
}

#[test]
fn a_write_that_does_not_fit_counts_as_send_buffer_limited_until_room_is_made() {
    let cfg = TcpConfig {
        send_buffer: 2 * MSS as usize,
        ..plain()
    };
    let mut h = Harness::established_with(cfg, TcpOptions::default());
    let t0 = h.now;
    let took = h.tcb.write(&[0; 5000]).unwrap();
    h.tcb.after_write(took, 5000, t0);
    h.send_all();
    h.advance(Duration::from_millis(30));
    assert_eq!(
        h.tcb.info_at(Some(h.now)).sndbuf_limited,
        Duration::from_millis(30)
    );
    recv!(h, seg(ACK, R, S + MSS, 65535));
    h.advance(Duration::from_millis(10));
    let i = h.tcb.info_at(Some(h.now));
    assert_eq!(i.sndbuf_limited, Duration::from_millis(30));
    assert_eq!(i.busy_time, Duration::from_millis(40));
}
