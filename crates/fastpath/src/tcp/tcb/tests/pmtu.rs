//! Path MTU discovery at the block (RFC 1191 §6.4, RFC 5927 §5.2): which sequence numbers a
//! "fragmentation needed" may quote, and what a smaller path MTU does to the MSS and to the data in
//! flight.

use super::*;

use super::open::mss_only;

const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

#[test]
fn only_a_sequence_number_in_flight_is_accepted() {
    let mut h = Harness::established();
    // Nothing in flight: nothing is.
    assert!(!h.tcb.in_flight(S) && !h.tcb.in_flight(S - 1));
    h.write(3 * MSS as usize);
    h.send_all();
    assert!(h.tcb.in_flight(S));
    assert!(h.tcb.in_flight(S + 3 * MSS - 1));
    assert!(
        !h.tcb.in_flight(S + 3 * MSS),
        "SND.NXT itself is not in flight"
    );
    assert!(!h.tcb.in_flight(S - 1), "below SND.UNA");
    assert!(!h.tcb.in_flight(S.wrapping_add(1 << 31)));
    recv!(h, seg(ACK, R, S + MSS, 65535));
    assert!(!h.tcb.in_flight(S) && h.tcb.in_flight(S + MSS));
}

#[test]
fn a_smaller_path_mtu_resends_what_is_in_flight_at_the_new_size_without_a_window_cut() {
    let mut h = Harness::established();
    h.write(3 * MSS as usize);
    assert_eq!(h.send_all().len(), 3);
    let (cwnd, ssthresh, rto) = (h.tcb.cc.cwnd, h.tcb.cc.ssthresh, h.tcb.rto);
    // Not smaller than the path MTU in use: nothing changes.
    assert!(!h.tcb.path_mtu_reduced(1500));
    assert!(h.tcb.path_mtu_reduced(1000));
    assert_eq!(h.tcb.info().mss, 960);
    // Everything from SND.UNA again, 960 bytes at a time (the first one retransmitted, the rest
    // counted the same way), and then the rest of the buffer, which was never sent.
    send!(h, out(ACK, S, R, 65535), 960);
    send!(h, out(ACK, S + 960, R, 65535), 960);
    send!(h, out(ACK, S + 1920, R, 65535), 960);
    send!(h, out(ACK, S + 2880, R, 65535), 960);
    send!(
        h,
        out(ACK | PSH, S + 3840, R, 65535),
        3 * MSS as usize - 3840
    );
    send!(h, None);
    assert_eq!(h.counters.retrans_segs, 5);
    assert_eq!(h.counters.timeouts + h.counters.fast_recoveries, 0);
    assert_eq!(
        (h.tcb.cc.cwnd, h.tcb.cc.ssthresh, h.tcb.rto),
        (cwnd, ssthresh, rto)
    );
    // New data goes in the new size too.
    recv!(h, seg(ACK, R, S + 3 * MSS, 65535));
    h.write(2000);
    send!(h, out(ACK, S + 3 * MSS, R, 65535), 960);
}

#[test]
fn the_peer_mss_still_bounds_and_nothing_in_flight_means_nothing_to_send() {
    // The peer offered 536: a path of 1000 leaves the MSS where it was.
    let mut h = Harness::connect(plain());
    h.send().expect("SYN");
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 65535);
    syn_ack.options.mss = Some(536);
    recv!(h, syn_ack);
    h.send().expect("ACK");
    h.write(2 * 536);
    h.send_all();
    assert!(!h.tcb.path_mtu_reduced(1000));
    assert_eq!(h.tcb.info().mss, 536);
    send!(h, None);
    // 552 (Linux's floor) gives 512.
    assert!(h.tcb.path_mtu_reduced(552));
    assert_eq!(h.tcb.info().mss, 512);
    send!(h, out(ACK, S, R, 65535), 512);

    // An idle connection learns the size, and has nothing to resend.
    let mut h = Harness::established();
    assert!(!h.tcb.path_mtu_reduced(1000));
    assert_eq!(h.tcb.info().mss, 960);
    send!(h, None);
}

#[test]
fn the_mss_follows_the_path_mtu_back_up_after_it_expires() {
    let mut h = Harness::established();
    h.tcb.sync_path_mtu(1000, 7);
    assert_eq!((h.tcb.info().mss, h.tcb.route_epoch), (960, 7));
    h.tcb.sync_path_mtu(1500, 8);
    assert_eq!(h.tcb.info().mss, MSS);
    // With timestamps the option's 12 bytes come off too.
    let ts = TcpConfig {
        timestamps: true,
        ..plain()
    };
    let mut h = Harness::established_with(
        ts,
        TcpOptions {
            timestamps: Some((1, 0)),
            ..TcpOptions::default()
        },
    );
    assert_eq!(h.tcb.info().mss, MSS - 12);
    h.tcb.sync_path_mtu(1000, 1);
    assert_eq!(h.tcb.info().mss, 1000 - 40 - 12);
}

#[test]
fn a_connection_opened_along_a_known_path_offers_and_sends_the_path() {
    let mut h = Harness::connect(plain());
    h.tcb.sync_path_mtu(1000, 1);
    let (syn, _) = h.send().expect("SYN");
    // RFC 9293 §3.7.1 bounds the MSS option by what the link can receive and leaves room below;
    // Linux offers the path's (the route's advertised MSS follows its path MTU), so the peer's
    // segments fit a symmetric path.
    assert_eq!(syn.options.mss, Some(960));
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 65535);
    syn_ack.options.mss = Some(1460);
    recv!(h, syn_ack);
    assert_eq!(h.tcb.info().mss, 960);
}

/// A "fragmentation needed" for a SYN that carried data (Fast Open): the SYN goes again at once,
/// plain, offering the MSS of the smaller path (MTU 800 less 40), and the data follows the
/// handshake at the new size; before any "fragmentation needed", the SYN offers the link's.
/// Linux does the same (fastopen/client/syn-data-icmp-unreach-frag-needed.pkt).
#[test]
fn a_syn_with_data_too_big_for_the_path_goes_again_at_once_offering_a_smaller_mss() {
    let mut h = Harness::connect(plain());
    h.tcb.write(&[7u8; 1000]).unwrap();
    h.tcb.syn_data = 1000;
    let mut syn = out(SYN, ISS, 0, 65535);
    syn.options = mss_only();
    send!(h, syn, 1000);
    assert!(h.tcb.in_flight(ISS));
    h.advance(Duration::from_millis(10));
    // Not smaller than the path MTU in use: nothing.
    assert!(!h.tcb.path_mtu_reduced(1500));
    send!(h, None);
    assert!(h.tcb.path_mtu_reduced(800));
    let mut again = out(SYN, ISS, 0, 65535);
    again.options = TcpOptions {
        mss: Some(760),
        ..TcpOptions::default()
    };
    send!(h, again);
    send!(h, None);
    assert_eq!(h.counters.retrans_segs, 1);
    // The server acknowledges the SYN only; the data goes at the new size.
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 8192);
    syn_ack.options = mss_only();
    recv!(h, syn_ack, b"", Verdict::FastOpenLearned);
    send!(h, out(ACK, ISS + 1, IRS + 1, 65535), 760);
    send!(h, out(ACK | PSH, ISS + 761, IRS + 1, 65535), 240);
    send!(h, None);
}

/// Once established, a smaller path MTU changes what we send, not what we offered.
#[test]
fn the_mss_offered_stays_once_the_handshake_is_done() {
    let mut h = Harness::established();
    let offered = h.tcb.local_mss;
    assert!(!h.tcb.path_mtu_reduced(1000), "nothing in flight");
    assert_eq!(h.tcb.local_mss, offered);
    assert_eq!(h.tcb.info().mss, 960);
}
