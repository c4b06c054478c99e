//! The listener on its own: a segment in, the exact action out (and for a new connection, the exact
//! SYN-ACK its block then sends, or the exact connection a cookie rebuilds).

use std::net::Ipv4Addr;

use super::*;
use crate::buf::BufferMode;
use crate::stats::{Drops, TcpCounters};
use crate::tcp::tcb::tests::{hop, plain, IRS, LOCAL, REMOTE};
use crate::wire::tcp::FastOpenOption;

fn seg(flags: Flags, seq: u32, ack: u32, mss: Option<u16>) -> TcpRepr {
    TcpRepr {
        src_port: REMOTE.port(),
        dst_port: LOCAL.port(),
        seq,
        ack,
        flags,
        window: 16384,
        urgent: 0,
        options: TcpOptions {
            mss,
            ..TcpOptions::default()
        },
    }
}

/// What a listener's context borrows, with a fixed key so that every ISN and cookie is known.
struct Fixture {
    cfg: TcpConfig,
    isn: IsnGenerator,
    last_cookie: Option<Instant>,
    now: Instant,
    room: bool,
    route: bool,
    hold_pressure: Option<Pressure>,
    /// Bytes of data in the segment decided on.
    data: usize,
}

/// The Fast Open key of the fixture.
const FAST_OPEN_KEY: [u8; 16] = [9; 16];

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            cfg: plain(),
            isn: IsnGenerator::new(SecretKey::from_bytes([7; 16])),
            last_cookie: None,
            now: Instant::from_secs(100),
            room: true,
            route: true,
            hold_pressure: None,
            data: 0,
        }
    }

    fn decide(&mut self, l: &Listener, repr: &TcpRepr) -> ListenAction<Ipv4Addr> {
        let mut cx = ListenCx {
            now: self.now,
            cfg: &self.cfg,
            isn: &self.isn,
            last_cookie: &mut self.last_cookie,
            room: self.room,
            hop: self.route.then(hop),
            hold_pressure: self.hold_pressure,
            fast_open_key: SecretKey::from_bytes(FAST_OPEN_KEY),
            data: self.data,
        };
        l.on_segment(&mut cx, LOCAL, REMOTE, repr)
    }

    /// The first segment block `tcb` sends.
    fn first_segment(&self, tcb: &mut Tcb) -> Option<TcpRepr> {
        let mut pool = BufferPool::new(BufferMode::Pool, 16);
        let (mut counters, mut drops) = (TcpCounters::default(), Drops::default());
        let mut cx = Cx {
            now: self.now,
            cfg: &self.cfg,
            pool: &mut pool,
            counters: &mut counters,
            drops: &mut drops,
            max_ooo: 16,
        };
        tcb.next_segment(&mut cx, None).map(|o| o.repr)
    }
}

fn listener(backlog: usize, hold: bool) -> Listener {
    Listener::new(LOCAL, backlog, hold)
}

/// A listener with a full SYN queue.
fn full(backlog: usize) -> Listener {
    let mut l = listener(backlog, false);
    l.half_open = (0..backlog as u32).collect();
    l
}

fn expect_drop(action: ListenAction<Ipv4Addr>) -> DropReason {
    match action {
        ListenAction::Drop(reason) => reason,
        other => panic!("expected a drop, got {other:?}"),
    }
}

fn expect_reset(action: ListenAction<Ipv4Addr>) -> DropReason {
    match action {
        ListenAction::Reset(reason) => reason,
        other => panic!("expected a reset, got {other:?}"),
    }
}

#[test]
fn a_syn_opens_a_connection_whose_syn_ack_is_exact() {
    let mut f = Fixture::new();
    let ListenAction::Open(mut tcb) =
        f.decide(&listener(4, false), &seg(Flags::SYN, IRS, 0, Some(1400)))
    else {
        panic!("a new connection")
    };
    assert_eq!(tcb.state, State::SynReceived);
    assert!(!tcb.held);
    let iss = f.isn.isn(LOCAL, REMOTE, f.now);
    let expected = TcpRepr {
        src_port: LOCAL.port(),
        dst_port: REMOTE.port(),
        seq: iss,
        ack: IRS + 1,
        flags: Flags::SYN | Flags::ACK,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
    };
    assert_eq!(f.first_segment(&mut tcb), Some(expected));
    assert_eq!(tcb.mss, 1400, "the peer's MSS");
    assert_eq!(f.last_cookie, None, "no cookie sent");
}

#[test]
fn a_holding_listener_opens_a_held_connection_that_sends_nothing() {
    let mut f = Fixture::new();
    let ListenAction::Open(mut tcb) = f.decide(&listener(4, true), &seg(Flags::SYN, IRS, 0, None))
    else {
        panic!("a new connection")
    };
    assert!(tcb.held);
    assert_eq!(f.first_segment(&mut tcb), None);
}

#[test]
fn past_the_held_bound_a_syn_gets_a_cookie_at_once() {
    let mut f = Fixture::new();
    f.hold_pressure = Some(Pressure::Total);
    let ListenAction::Cookie { syn_ack, .. } =
        f.decide(&listener(4, true), &seg(Flags::SYN, IRS, 0, Some(1400)))
    else {
        panic!("a cookie SYN-ACK")
    };
    let cookie = f.isn.cookie(LOCAL, REMOTE, IRS, 1400, f.now);
    assert_eq!(
        syn_ack,
        TcpRepr {
            src_port: LOCAL.port(),
            dst_port: REMOTE.port(),
            seq: cookie,
            ack: IRS + 1,
            flags: Flags::SYN | Flags::ACK,
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1400),
                ..TcpOptions::default()
            },
        }
    );
    assert_eq!(f.last_cookie, Some(f.now));
    // The ACK that returns the cookie opens the connection established, not held.
    let ListenAction::FromCookie(tcb) = f.decide(
        &listener(4, true),
        &seg(Flags::ACK, IRS + 1, cookie + 1, None),
    ) else {
        panic!("a connection from the cookie")
    };
    assert!(!tcb.held);
    assert_eq!(tcb.state, State::Established);
}

#[test]
fn past_the_held_bound_without_cookies_a_syn_replaces_the_oldest() {
    let mut f = Fixture::new();
    f.cfg.syn_cookies = false;
    for p in [Pressure::Total, Pressure::Destination] {
        f.hold_pressure = Some(p);
        match f.decide(&listener(4, true), &seg(Flags::SYN, IRS, 0, None)) {
            ListenAction::Replace(tcb, pressure) => {
                assert!(tcb.held);
                assert_eq!(pressure, p);
            }
            other => panic!("expected a replacement, got {other:?}"),
        }
    }
}

#[test]
fn the_held_bound_does_not_concern_a_listener_that_does_not_hold() {
    let mut f = Fixture::new();
    f.hold_pressure = Some(Pressure::Total);
    let action = f.decide(&listener(4, false), &seg(Flags::SYN, IRS, 0, None));
    assert!(
        matches!(action, ListenAction::Open(ref t) if !t.held),
        "{action:?}"
    );
    assert_eq!(f.last_cookie, None);
}

#[test]
fn a_full_listener_answers_with_the_exact_cookie_syn_ack() {
    let mut f = Fixture::new();
    let action = f.decide(&full(2), &seg(Flags::SYN, IRS, 0, Some(1400)));
    let ListenAction::Cookie { syn_ack, hop } = action else {
        panic!("a cookie, got {action:?}")
    };
    assert_eq!(hop.next_hop, *REMOTE.ip());
    // 1400 is encoded as the largest cookie MSS not above it, 1360.
    let cookie = f.isn.cookie(LOCAL, REMOTE, IRS, 1400, f.now);
    let expected = TcpRepr {
        src_port: LOCAL.port(),
        dst_port: REMOTE.port(),
        seq: cookie,
        ack: IRS + 1,
        flags: Flags::SYN | Flags::ACK,
        window: 65535,
        urgent: 0,
        options: TcpOptions {
            mss: Some(1400),
            ..TcpOptions::default()
        },
    };
    assert_eq!(syn_ack, expected);
    assert_eq!(f.last_cookie, Some(f.now));
}

#[test]
fn a_cookie_ack_rebuilds_the_exact_connection() {
    let mut f = Fixture::new();
    let l = full(2);
    let ListenAction::Cookie { syn_ack, .. } = f.decide(&l, &seg(Flags::SYN, IRS, 0, Some(1460)))
    else {
        panic!("a cookie")
    };
    // The handshake's last ACK, a second later, with 3 bytes of data (the listener's accept queue
    // has room; only its SYN queue is full).
    f.now = f.now + std::time::Duration::from_secs(1);
    let ack = seg(Flags::ACK, IRS + 1, syn_ack.seq.wrapping_add(1), None);
    let ListenAction::FromCookie(tcb) = f.decide(&l, &ack) else {
        panic!("a connection")
    };
    assert_eq!(tcb.state, State::Established);
    assert_eq!((tcb.local, tcb.remote), (LOCAL, REMOTE));
    let iss = syn_ack.seq;
    assert_eq!(
        tcb.sequence_numbers(),
        [iss, iss.wrapping_add(1), iss.wrapping_add(1), IRS, IRS + 1]
    );
    assert_eq!(tcb.info().mss, 1460);
    assert_eq!(tcb.info().snd_wnd, 16384);
}

#[test]
fn a_bad_or_late_cookie_and_a_stray_ack_are_answered_by_rst() {
    let mut f = Fixture::new();
    let l = full(2);
    // No cookie ever sent: a stray ACK.
    let stray = seg(Flags::ACK, IRS + 1, 12345, None);
    assert_eq!(expect_reset(f.decide(&l, &stray)), DropReason::TcpStrayAck);
    let ListenAction::Cookie { syn_ack, .. } = f.decide(&l, &seg(Flags::SYN, IRS, 0, None)) else {
        panic!("a cookie")
    };
    let good = seg(Flags::ACK, IRS + 1, syn_ack.seq.wrapping_add(1), None);
    let bad = seg(Flags::ACK, IRS + 1, syn_ack.seq.wrapping_add(2), None);
    assert_eq!(expect_reset(f.decide(&l, &bad)), DropReason::TcpBadCookie);
    // A valid cookie with the accept queue full, or the table full: refused.
    let mut accepting = full(2);
    accepting.ready = [SocketId(1), SocketId(2)].into_iter().collect();
    assert_eq!(
        expect_reset(f.decide(&accepting, &good)),
        DropReason::TcpListenOverflow
    );
    f.room = false;
    assert_eq!(
        expect_reset(f.decide(&l, &good)),
        DropReason::TcpListenOverflow
    );
    f.room = true;
    // Three periods later the cookie has expired, and so has the window for checking any.
    f.now = f.now + std::time::Duration::from_secs(200);
    assert_eq!(expect_reset(f.decide(&l, &good)), DropReason::TcpStrayAck);
}

#[test]
fn other_segments_are_dropped_or_reset_as_rfc_9293_says() {
    let mut f = Fixture::new();
    let l = listener(4, false);
    assert_eq!(
        expect_drop(f.decide(&l, &seg(Flags::RST, IRS, 0, None))),
        DropReason::TcpUnexpected
    );
    assert_eq!(
        expect_reset(f.decide(&l, &seg(Flags::SYN | Flags::ACK, IRS, 9, None))),
        DropReason::TcpUnexpected
    );
    assert_eq!(
        expect_drop(f.decide(&l, &seg(Flags::FIN, IRS, 0, None))),
        DropReason::TcpUnexpected
    );
    f.route = false;
    assert_eq!(
        expect_drop(f.decide(&l, &seg(Flags::SYN, IRS, 0, None))),
        DropReason::Ipv4NoRoute
    );
    f.route = true;
    f.room = false;
    assert_eq!(
        expect_drop(f.decide(&l, &seg(Flags::SYN, IRS, 0, None))),
        DropReason::TcpTooManyConnections
    );
    f.room = true;
    // A full queue with cookies off, or a holding listener: dropped, as Linux without cookies.
    f.cfg.syn_cookies = false;
    assert_eq!(
        expect_drop(f.decide(&full(1), &seg(Flags::SYN, IRS, 0, None))),
        DropReason::TcpListenOverflow
    );
    f.cfg.syn_cookies = true;
    let mut holding = listener(1, true);
    holding.ready = [SocketId(1)].into_iter().collect();
    assert_eq!(
        expect_drop(f.decide(&holding, &seg(Flags::SYN, IRS, 0, None))),
        DropReason::TcpListenOverflow
    );
    assert_eq!(f.last_cookie, None);
}

/// A listener with Fast Open on (at most `pending` connections taken by it and not yet established).
fn fast_open_listener(pending: usize) -> Listener {
    let mut l = listener(4, false);
    l.fast_open = Some(pending);
    l
}

fn fast_open_syn(cookie: &[u8], experimental: bool) -> TcpRepr {
    let mut syn = seg(Flags::SYN, IRS, 0, Some(1400));
    syn.options.fast_open = Some(FastOpenOption::new(cookie, experimental));
    syn
}

fn valid_cookie() -> [u8; fastopen::COOKIE_LEN] {
    fastopen::cookie(
        &SecretKey::from_bytes(FAST_OPEN_KEY),
        (*REMOTE.ip()).into(),
        (*LOCAL.ip()).into(),
    )
}

/// A SYN asking for a Fast Open cookie (RFC 7413 §4.1.3) opens an ordinary connection whose SYN-ACK
/// carries the cookie, in the option kind the SYN used.
#[test]
fn a_cookie_request_is_answered_in_the_syn_ack() {
    for experimental in [false, true] {
        let mut f = Fixture::new();
        let ListenAction::Open(mut tcb) =
            f.decide(&fast_open_listener(4), &fast_open_syn(&[], experimental))
        else {
            panic!("an ordinary connection")
        };
        assert!(!tcb.fast_open);
        let syn_ack = f.first_segment(&mut tcb).expect("the SYN-ACK");
        assert_eq!(syn_ack.ack, IRS + 1);
        assert_eq!(
            syn_ack.options.fast_open,
            Some(FastOpenOption::new(&valid_cookie(), experimental))
        );
        // A listener without Fast Open answers no cookie.
        let ListenAction::Open(mut tcb) =
            f.decide(&listener(4, false), &fast_open_syn(&[], experimental))
        else {
            panic!("an ordinary connection")
        };
        assert_eq!(f.first_segment(&mut tcb).unwrap().options.fast_open, None);
    }
}

/// A SYN with a valid cookie and data is taken by Fast Open (RFC 7413 §4.2.2): its data is queued,
/// the SYN-ACK acknowledges it and carries no cookie, and the connection may send at once after it.
/// A wrong cookie gets an ordinary connection whose SYN-ACK acknowledges the SYN alone and carries
/// the right cookie; past the bound on pending connections, so does a valid one (without cookie).
#[test]
fn a_valid_cookie_hands_the_syn_data_over_before_the_handshake_ends() {
    let mut f = Fixture::new();
    f.data = 10;
    let ListenAction::FastOpen(mut tcb) = f.decide(
        &fast_open_listener(4),
        &fast_open_syn(&valid_cookie(), false),
    ) else {
        panic!("a Fast Open connection")
    };
    assert!(tcb.fast_open);
    let mut pool = BufferPool::new(BufferMode::Pool, 16);
    let (mut counters, mut drops) = (TcpCounters::default(), Drops::default());
    let mut cx = Cx {
        now: f.now,
        cfg: &f.cfg,
        pool: &mut pool,
        counters: &mut counters,
        drops: &mut drops,
        max_ooo: 16,
    };
    tcb.take_syn_data(PacketBuf::from_slice(b"0123456789"), &mut cx);
    let syn_ack = tcb.next_segment(&mut cx, None).expect("the SYN-ACK").repr;
    assert_eq!(syn_ack.flags, Flags::SYN | Flags::ACK);
    assert_eq!(syn_ack.ack, IRS + 11, "the SYN and its 10 bytes");
    assert_eq!(syn_ack.options.fast_open, None);
    assert_eq!(tcb.write(b"reply").unwrap(), 5);
    let data = tcb
        .next_segment(&mut cx, None)
        .expect("data in SYN-RECEIVED");
    assert_eq!((data.repr.seq, data.len), (syn_ack.seq.wrapping_add(1), 5));
    assert_eq!(tcb.state, State::SynReceived);

    let wrong = fast_open_syn(&[1, 2, 3, 4, 5, 6, 7, 8], true);
    let ListenAction::Open(mut tcb) = f.decide(&fast_open_listener(4), &wrong) else {
        panic!("an ordinary connection")
    };
    let syn_ack = f.first_segment(&mut tcb).expect("the SYN-ACK");
    assert_eq!(syn_ack.ack, IRS + 1, "the data is not taken");
    assert_eq!(
        syn_ack.options.fast_open,
        Some(FastOpenOption::new(&valid_cookie(), true))
    );

    let mut busy = fast_open_listener(2);
    busy.fast_open_pending = vec![7, 8];
    let ListenAction::Open(mut tcb) = f.decide(&busy, &fast_open_syn(&valid_cookie(), false))
    else {
        panic!("an ordinary connection past the bound")
    };
    assert_eq!(f.first_segment(&mut tcb).unwrap().options.fast_open, None);
}
