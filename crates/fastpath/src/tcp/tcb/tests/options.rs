//! Per-connection socket options: the send and receive buffers, the MSS limit.

use super::*;

fn scaling() -> TcpConfig {
    TcpConfig {
        window_scaling: true,
        ..plain()
    }
}

#[test]
fn an_mss_limit_before_the_syn_lowers_the_offer_the_send_mss_and_the_initial_window() {
    let mut h = Harness::connect(plain());
    h.tcb.set_max_segment(Some(1100));
    let (syn, _) = h.send().expect("SYN");
    assert_eq!(syn.options.mss, Some(1100));
    let mut syn_ack = seg(SYN | ACK, IRS, ISS + 1, 65535);
    syn_ack.options.mss = Some(1460);
    recv!(h, syn_ack);
    let i = h.tcb.info();
    assert_eq!((i.mss, i.advertised_mss), (1100, 1100));
    assert_eq!(i.cwnd, 10 * 1100);
    assert_eq!(h.tcb.max_segment(), Some(1100));
}

#[test]
fn an_mss_limit_after_the_handshake_lowers_the_send_mss_only() {
    let mut h = Harness::established();
    h.tcb.set_max_segment(Some(1000));
    let i = h.tcb.info();
    assert_eq!((i.mss, i.advertised_mss), (1000, 1460));
    h.write(3000);
    let sizes: Vec<usize> = h.send_all().iter().map(|(_, d)| d.len()).collect();
    assert_eq!(sizes, [1000, 1000, 1000]);
}

#[test]
fn a_listeners_options_shape_the_syn_ack() {
    let mut syn = seg(SYN, IRS, 0, 65535);
    syn.options.mss = Some(1300);
    syn.options.window_scale = Some(7);
    let mut h = Harness::accept(scaling(), &syn);
    let options = TcpSocketOptions {
        send_buffer: Some(5000),
        recv_buffer: Some(1 << 20),
        max_segment: Some(1100),
        syn_retries: None,
        ..TcpSocketOptions::default()
    };
    let cfg = h.cfg.clone();
    h.tcb.apply_options(&options, &cfg);
    let (syn_ack, _) = h.send().expect("SYN-ACK");
    assert_eq!(syn_ack.options.mss, Some(1100));
    // 65535 << 4 is just short of 1 MiB.
    assert_eq!(syn_ack.options.window_scale, Some(5));
    assert_eq!(h.tcb.info().mss, 1100);
    recv!(
        h,
        seg(ACK, IRS + 1, ISS + 1, 65535),
        b"",
        Verdict::Established
    );
    assert_eq!(
        h.tcb.write(&[0; 8000]).unwrap(),
        5000,
        "the send buffer holds 5000"
    );
}

#[test]
fn a_receive_buffer_set_before_the_syn_fixes_the_window_scale_and_after_it_does_not() {
    let mut h = Harness::connect(scaling());
    h.tcb.set_recv_buffer(200_000, &scaling());
    let (syn, _) = h.send().expect("SYN");
    assert_eq!(syn.options.window_scale, Some(2));
    assert_eq!(syn.window, 65535);
    h.tcb.set_recv_buffer(4 << 20, &scaling());
    let (again, _) = {
        h.fire();
        h.send().expect("the SYN again")
    };
    assert_eq!(
        again.options.window_scale,
        Some(2),
        "the scale offered stays"
    );
}

#[test]
fn a_smaller_send_buffer_than_what_is_queued_blocks_writes_until_acknowledged() {
    let mut h = Harness::established();
    h.write(3000);
    h.tcb.set_send_buffer(2000);
    assert!(!h.tcb.writable());
    assert_eq!(
        h.tcb.write(b"x").unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    h.send_all();
    recv!(h, seg(ACK, IRS + 1, ISS + 1 + 2 * MSS, 65535));
    assert_eq!(h.tcb.write(&[0; 5000]).unwrap(), 2000 - 80);
}
