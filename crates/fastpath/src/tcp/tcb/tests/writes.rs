//! What a write may say beyond its bytes: record ends (`MSG_EOR`), cork and `MSG_MORE`, and
//! acknowledgment notifications (`MSG_ZEROCOPY`). Each case is one of packetdrill's scripts
//! (`eor/`, `nagle/`, `zerocopy/`) measured against Linux 6.18, cut down.

use super::push::{ack, expect, server};
use super::*;
use crate::tcp::writes::WriteFlags;

const EOR: WriteFlags = WriteFlags {
    more: false,
    end_of_record: true,
    notify_acked: false,
};
const MORE: WriteFlags = WriteFlags {
    more: true,
    end_of_record: false,
    notify_acked: false,
};
const NOTIFY: WriteFlags = WriteFlags {
    more: false,
    end_of_record: false,
    notify_acked: true,
};

fn write_flagged(h: &mut Harness, n: usize, flags: WriteFlags) {
    assert_eq!(h.tcb.write_flagged(&vec![7; n], flags).unwrap(), n);
}

/// eor/no-coalesce-small.pkt: the bytes before a record's end share its segment, those after it
/// do not, though they would fit.
#[test]
fn no_segment_crosses_a_record_end() {
    let mut h = server(plain(), 10);
    h.write(1400);
    write_flagged(&mut h, 400, EOR);
    h.write(1000);
    expect(
        &mut h,
        &[(false, 1, 1001), (true, 1001, 1801), (true, 1801, 2801)],
    );
}

/// eor/no-coalesce-retrans.pkt: retransmissions keep the record boundaries too.
#[test]
fn retransmissions_keep_record_ends() {
    let mut h = server(plain(), 10);
    // Nagle would hold the last small write back while the others are unacknowledged.
    h.tcb.nodelay = true;
    write_flagged(&mut h, 400, EOR);
    write_flagged(&mut h, 400, EOR);
    h.write(400);
    expect(
        &mut h,
        &[(true, 1, 401), (true, 401, 801), (true, 801, 1201)],
    );
    h.fire();
    // The window after a timeout is one segment's bytes (1000): without the records' ends one
    // segment of 1000 would go; with them, two records and what is left of the window.
    expect(
        &mut h,
        &[(true, 1, 401), (true, 401, 801), (false, 801, 1001)],
    );
    ack(&mut h, 801);
    expect(&mut h, &[(true, 1001, 1201)]);
}

/// nagle/sockopt_cork_nodelay.pkt: corked, small writes wait; the persist timer's override sends
/// them after an RTO, and uncorking sends them at once.
#[test]
fn cork_holds_partial_segments() {
    let mut h = server(plain(), 10);
    h.tcb.set_cork(true);
    h.write(40);
    h.write(40);
    expect(&mut h, &[]);
    let rto = h.tcb.rto;
    let wrote = h.now;
    assert_eq!(h.tcb.deadline(), Some(wrote + Duration::from_nanos(rto)));
    h.fire();
    expect(&mut h, &[(true, 1, 81)]);
    ack(&mut h, 81);
    h.write(40);
    expect(&mut h, &[]);
    h.tcb.set_cork(false);
    expect(&mut h, &[(true, 81, 121)]);
}

/// nagle/sendmsg_msg_more.pkt: under `MSG_MORE` full segments go and the partial tail waits,
/// without a PSH mark; the acknowledgment lets it go under the socket's own rules (here
/// `TCP_NODELAY`).
#[test]
fn more_holds_the_partial_tail_until_acknowledged() {
    let mut h = server(plain(), 10);
    h.tcb.set_nodelay(true);
    h.tcb.push_now = false;
    write_flagged(&mut h, 1500, MORE);
    expect(&mut h, &[(false, 1, 1001)]);
    write_flagged(&mut h, 50, MORE);
    expect(&mut h, &[]);
    ack(&mut h, 1001);
    expect(&mut h, &[(false, 1001, 1551)]);
    // A write without the flag ends the hold and marks PSH.
    write_flagged(&mut h, 20, MORE);
    expect(&mut h, &[]);
    h.write(20);
    expect(&mut h, &[(true, 1551, 1591)]);
}

/// zerocopy/batch.pkt: notified writes complete as the peer acknowledges their last bytes, in
/// order, reported as one range.
#[test]
fn notified_writes_complete_when_acknowledged() {
    let mut h = server(plain(), 10);
    write_flagged(&mut h, 4000, NOTIFY);
    write_flagged(&mut h, 4000, NOTIFY);
    h.send_all();
    ack(&mut h, 3001);
    assert!(!h.tcb.completions.ready());
    ack(&mut h, 4001);
    ack(&mut h, 8001);
    assert_eq!(h.tcb.completions.take(), Some(0..=1));
    assert_eq!(h.tcb.completions.take(), None);
    write_flagged(&mut h, 1, NOTIFY);
    h.send_all();
    ack(&mut h, 8002);
    assert_eq!(h.tcb.completions.take(), Some(2..=2));
}
