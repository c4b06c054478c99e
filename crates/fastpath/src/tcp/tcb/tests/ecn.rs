//! Explicit Congestion Notification (RFC 3168): the handshake's negotiation, ECT(0) on new data,
//! the receiver's echo of a congestion mark until CWR, and the sender's one reduction per window.

use super::*;
use crate::config::Ecn;
use crate::tcp::tcb::{ECN_CE, ECN_ECT0};

const ECE: Flags = Flags::ECE;
const CWR: Flags = Flags::CWR;
const S: u32 = ISS + 1;
const R: u32 = IRS + 1;

/// A SYN or SYN-ACK of ours: the MSS option and nothing else (the tests' options are off).
fn syn(flags: Flags, seq: u32, ack: u32) -> TcpRepr {
    let mut r = out(flags, seq, ack, 65535);
    r.options.mss = Some(MSS as u16);
    r
}

fn ecn(mode: Ecn) -> TcpConfig {
    TcpConfig {
        ecn: mode,
        ..plain()
    }
}

/// An active open that asked for ECN; the SYN-ACK agrees when `agree`.
fn client(agree: bool) -> Harness {
    let mut h = Harness::connect(ecn(Ecn::On));
    send!(h, syn(SYN | ECE | CWR, ISS, 0));
    assert_eq!(h.last_ecn, 0, "a SYN is never ECN-capable");
    let flags = if agree { SYN | ACK | ECE } else { SYN | ACK };
    let mut syn_ack = seg(flags, IRS, S, 65535);
    syn_ack.options.mss = Some(MSS as u16);
    recv!(h, syn_ack);
    send!(h, out(ACK, S, R, 65535));
    h
}

#[test]
fn an_agreed_connection_sends_new_data_ect0_and_retransmissions_without() {
    let mut h = client(true);
    h.write(1000);
    send!(h, out(ACK | PSH, S, R, 65535), 1000);
    assert_eq!(h.last_ecn, ECN_ECT0);
    h.fire();
    send!(h, out(ACK | PSH, S, R, 65535), 1000);
    assert_eq!(h.last_ecn, 0, "a retransmission is not ECN-capable");
}

#[test]
fn a_syn_ack_without_ece_leaves_ecn_off() {
    let mut h = client(false);
    h.write(1000);
    send!(h, out(ACK | PSH, S, R, 65535), 1000);
    assert_eq!(h.last_ecn, 0);
}

#[test]
fn a_retransmitted_syn_gives_up_asking() {
    let mut h = Harness::connect(ecn(Ecn::On));
    send!(h, syn(SYN | ECE | CWR, ISS, 0));
    h.fire();
    send!(h, syn(SYN, ISS, 0));
    recv!(h, seg(SYN | ACK | ECE, IRS, S, 65535));
    send!(h, out(ACK, S, R, 65535));
    h.write(10);
    h.send();
    assert_eq!(h.last_ecn, 0);
}

#[test]
fn a_passive_open_agrees_only_when_allowed() {
    let setup = seg(SYN | ECE | CWR, IRS, 0, 65535);
    let mut h = Harness::accept(ecn(Ecn::Accept), &setup);
    send!(h, syn(SYN | ACK | ECE, ISS, R));
    let mut h = Harness::accept(ecn(Ecn::Off), &setup);
    send!(h, syn(SYN | ACK, ISS, R));
    // A SYN with ECE alone is no ECN-setup SYN.
    let mut h = Harness::accept(ecn(Ecn::Accept), &seg(SYN | ECE, IRS, 0, 65535));
    send!(h, syn(SYN | ACK, ISS, R));
}

#[test]
fn a_congestion_mark_is_echoed_until_cwr() {
    let mut h = client(true);
    h.ecn_in = ECN_CE;
    recv!(h, seg(ACK, R, S, 65535), b"abc");
    assert_eq!(h.counters.ecn_ce_received, 1);
    // Acknowledged at once, with ECE.
    send!(h, out(ACK | ECE, S, R + 3, 65532));
    h.ecn_in = ECN_ECT0;
    recv!(h, seg(ACK, R + 3, S, 65535), b"def");
    h.fire();
    send!(h, out(ACK | ECE, S, R + 6, 65529));
    // The peer's CWR ends the echo.
    recv!(h, seg(ACK | CWR, R + 6, S, 65535), b"ghi");
    h.fire();
    send!(h, out(ACK, S, R + 9, 65526));
}

#[test]
fn an_echo_reduces_the_window_once_per_window_and_the_next_data_says_cwr() {
    let mut h = client(true);
    h.write(4 * MSS as usize);
    let sent = h.send_all().len();
    assert_eq!(sent, 4);
    let cwnd = h.tcb.cc.cwnd;
    recv!(h, seg(ACK | ECE, R, S + MSS, 65535));
    assert_eq!(h.counters.ecn_reductions, 1);
    assert!(h.tcb.cc.cwnd < cwnd, "the window shrank");
    let reduced = h.tcb.cc.cwnd;
    // Another echo within the same window changes nothing.
    recv!(h, seg(ACK | ECE, R, S + 2 * MSS, 65535));
    assert_eq!(h.counters.ecn_reductions, 1);
    assert!(h.tcb.cc.cwnd >= reduced);
    recv!(h, seg(ACK, R, S + 4 * MSS, 65535));
    h.write(100);
    let (repr, _) = h.send().expect("new data");
    assert!(repr.flags.contains(CWR));
    assert_eq!(h.last_ecn, ECN_ECT0);
    // Nothing was retransmitted: no loss.
    assert_eq!(h.counters.retrans_segs, 0);
}
