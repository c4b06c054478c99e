//! IPv4 options (RFC 791 §3.1, RFC 1122 §3.2.1.8) through a whole stack, its peer the test itself
//! on a raw in-memory pair: malformed options draw a parameter problem pointing at the byte at fault
//! (as Linux's `ip_options_compile` names it) and are counted; unknown options are skipped; record
//! route and timestamp options in an echo request come back in the reply with this host's entries
//! (RFC 1122 §3.2.2.6); timestamp requests are answered (RFC 792), options echoed too. Every reply
//! is read back with `etherparse`, an independent parser.

use std::net::Ipv4Addr;

use crate::common::*;
use fastpath::link::{LinkCapabilities, PairEnd};
use fastpath::{DropReason, Instant, Stack, StackConfig};

const T0: Instant = Instant::ZERO;

fn host() -> (Stack, PairEnd) {
    stack_and_raw(StackConfig::default(), LinkCapabilities::plain(1500))
}

fn exchange(b: &mut Stack, raw: &mut PairEnd, packet: &[u8]) -> Vec<Vec<u8>> {
    inject(raw, packet);
    while b.poll(T0) > 0 {}
    capture(raw)
}

/// `packet` (a 20-byte header and its payload) with `options` (a multiple of 4 bytes) in its header.
fn with_options(packet: &[u8], options: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let mut p = packet[..20].to_vec();
    p.extend_from_slice(options);
    p.extend_from_slice(&packet[20..]);
    p[0] = 0x40 | ((20 + options.len()) / 4) as u8;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[10..12].fill(0);
    let header_len = usize::from(p[0] & 0xf) * 4;
    let sum = fastpath::checksum::rfc1071(&p[..header_len]);
    p[10..12].copy_from_slice(&(!sum).to_be_bytes());
    p
}

fn echo_request(seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0x12, 0x34];
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let sum = fastpath::checksum::rfc1071(&m);
    m[2..4].copy_from_slice(&(!sum).to_be_bytes());
    ip_packet(A, B, 1, &m)
}

/// Reads a packet the stack sent with etherparse: its IPv4 header (whose checksum is checked here,
/// as etherparse does not) and its ICMP type and payload.
fn read_icmp(p: &[u8]) -> (etherparse::Ipv4Header, etherparse::Icmpv4Type, Vec<u8>) {
    let sliced = etherparse::SlicedPacket::from_ip(p).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv4(ip)) = sliced.net else {
        panic!("not IPv4: {p:?}");
    };
    let header = ip.header().to_header();
    assert_eq!(header.header_checksum, header.calc_header_checksum());
    assert_eq!(usize::from(header.total_len), p.len());
    let Some(etherparse::TransportSlice::Icmpv4(icmp)) = sliced.transport else {
        panic!("not ICMP");
    };
    assert_eq!(
        icmp.checksum(),
        icmp.icmp_type().calc_checksum(icmp.payload())
    );
    (header, icmp.icmp_type(), icmp.payload().to_vec())
}

/// Each malformation Linux refuses draws a parameter problem (type 12, code 0) whose pointer names
/// the byte at fault, quoting the header with its options; the datagram is dropped and counted, and
/// a UDP datagram so sent never reaches its socket.
#[test]
fn malformed_options_draw_a_parameter_problem_at_the_byte_at_fault() {
    let cases: &[(&[u8], u8, &str)] = &[
        (&[1, 0x99, 0, 0], 21, "length 0"),
        (&[0x99, 1, 0, 0], 20, "length 1"),
        (&[1, 1, 0x99, 3], 22, "length past the header"),
        (&[7, 7, 3, 0, 0, 0, 0, 0], 22, "record route pointer 3"),
        (&[7, 2, 0, 0], 21, "record route too short"),
        (&[68, 8, 4, 0, 0, 0, 0, 0], 22, "timestamp pointer 4"),
        (
            &[68, 8, 5, 1, 0, 0, 0, 0],
            22,
            "no room for address and time",
        ),
        (
            &[68, 8, 9, 0xf0, 0, 0, 0, 0],
            23,
            "timestamp overflow count at 15",
        ),
    ];
    for (i, (options, pointer, what)) in cases.iter().enumerate() {
        let (mut b, mut raw) = host();
        let s = b.udp_bind(sa(B, 9)).unwrap();
        let p = with_options(&udp_packet(sa(A, 1000), sa(B, 9), b"opts"), options);
        let out = exchange(&mut b, &mut raw, &p);
        assert_eq!(out.len(), 1, "{what}");
        let (ip, kind, quote) = read_icmp(&out[0]);
        assert_eq!((ip.source, ip.destination), (B.octets(), A.octets()));
        assert_eq!(
            kind,
            etherparse::Icmpv4Type::ParameterProblem(
                etherparse::icmpv4::ParameterProblemHeader::PointerIndicatesError(*pointer)
            ),
            "{what}"
        );
        // The header with its options, and 8 bytes of payload.
        let header_len = 20 + options.len();
        assert_eq!(quote, &p[..header_len + 8], "{what}");
        let c = b.counters();
        assert_eq!(c.drops.get(DropReason::Ipv4BadOptions), 1, "{what}");
        assert_eq!(c.icmp.out_parm_probs, 1);
        let mut buf = [0u8; 16];
        assert!(b.udp(s).recv(&mut buf).is_err(), "{what}: delivered");
        // Sent to the broadcast address: dropped, counted, unanswered.
        let mut bc = udp_packet(sa(A, 1000), sa(Ipv4Addr::new(10, 0, 0, 255), 9), b"x");
        bc = with_options(&bc, options);
        assert!(exchange(&mut b, &mut raw, &bc).is_empty(), "{what}");
        assert_eq!(
            b.counters().drops.get(DropReason::Ipv4BadOptions),
            2,
            "case {i}"
        );
    }
}

/// Options this host does not know (and no-ops, and the end of the list) are skipped: the datagram
/// is delivered, and a ping answered without options.
#[test]
fn unknown_options_are_ignored() {
    let (mut b, mut raw) = host();
    let s = b.udp_bind(sa(B, 9)).unwrap();
    let options = [0x99, 6, 1, 2, 3, 4, 1, 0];
    let p = with_options(&udp_packet(sa(A, 1000), sa(B, 9), b"kept"), &options);
    assert!(exchange(&mut b, &mut raw, &p).is_empty());
    let mut buf = [0u8; 16];
    let n = b.udp(s).recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"kept");
    let out = exchange(
        &mut b,
        &mut raw,
        &with_options(&echo_request(1, b"hi"), &options),
    );
    assert_eq!(out.len(), 1);
    let (ip, kind, _) = read_icmp(&out[0]);
    assert!(matches!(kind, etherparse::Icmpv4Type::EchoReply(_)));
    assert!(ip.options.is_empty(), "nothing to echo");
    assert_eq!(b.counters().drops.total(), 0);
}

/// `ping -R`: the reply carries the record route back, this host entered as the request arrived
/// and as the reply left, after the sender's own entry.
#[test]
fn record_route_comes_back_in_the_echo_reply() {
    let (mut b, mut raw) = host();
    let mut rr = vec![1, 7, 39, 8];
    rr.extend_from_slice(&A.octets());
    rr.extend_from_slice(&[0; 32]);
    let out = exchange(
        &mut b,
        &mut raw,
        &with_options(&echo_request(7, b"route"), &rr),
    );
    assert_eq!(out.len(), 1);
    let (ip, kind, payload) = read_icmp(&out[0]);
    let etherparse::Icmpv4Type::EchoReply(echo) = kind else {
        panic!("not an echo reply");
    };
    assert_eq!((echo.id, echo.seq), (0x1234, 7));
    assert_eq!(payload, b"route");
    assert_eq!((ip.source, ip.destination), (B.octets(), A.octets()));
    let mut want = vec![7, 39, 16];
    want.extend_from_slice(&A.octets());
    want.extend_from_slice(&B.octets());
    want.extend_from_slice(&B.octets());
    want.extend_from_slice(&[0; 24]);
    want.push(0);
    assert_eq!(ip.options.as_slice(), &want[..]);
}

/// `ping -T tsandaddr`: address and time entered as the request arrived and as the reply left;
/// `ping -T tsonly` with a timestamp option before a record route: both come back, record route
/// first. The times are milliseconds since midnight UT.
#[test]
fn timestamps_come_back_in_the_echo_reply() {
    let (mut b, mut raw) = host();
    let mut ts = vec![68, 36, 5, 1];
    ts.extend_from_slice(&[0; 32]);
    let before = ms_since_midnight();
    let out = exchange(&mut b, &mut raw, &with_options(&echo_request(1, b""), &ts));
    let after = ms_since_midnight();
    assert_eq!(out.len(), 1);
    let (ip, _, _) = read_icmp(&out[0]);
    let o = ip.options.as_slice();
    assert_eq!(o.len(), 36);
    assert_eq!(o[..4], [68, 36, 21, 1]);
    for entry in [4, 12] {
        assert_eq!(o[entry..entry + 4], B.octets());
        let time = u32::from_be_bytes(o[entry + 4..entry + 8].try_into().unwrap());
        assert!(
            in_range(time, before, after),
            "{time} not in {before}..={after}"
        );
    }
    assert_eq!(o[20..], [0; 16]);

    let mut both = vec![68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    both.extend_from_slice(&[7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let out = exchange(
        &mut b,
        &mut raw,
        &with_options(&echo_request(2, b""), &both),
    );
    let (ip, _, _) = read_icmp(&out[0]);
    let o = ip.options.as_slice();
    assert_eq!(o.len(), 24);
    assert_eq!(o[..11], [7, 11, 12, 10, 0, 0, 2, 10, 0, 0, 2]);
    assert_eq!(o[11..14], [68, 12, 13]);
    assert_eq!(o[23], 0, "padding");
}

/// An echo request whose record route has room for one address and part of another: this host
/// enters itself as it arrives but cannot as the reply leaves, and sends no reply (as Linux does).
#[test]
fn an_option_with_room_for_part_of_an_entry_gets_no_reply() {
    let (mut b, mut raw) = host();
    let rr = [7, 9, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let out = exchange(&mut b, &mut raw, &with_options(&echo_request(1, b""), &rr));
    assert!(out.is_empty());
    assert_eq!(b.counters().drops.get(DropReason::IcmpEchoOptions), 1);
}

/// A timestamp request (type 13) is answered with a timestamp reply (type 14): identifier and
/// sequence number copied, the originate timestamp copied, the receive and transmit timestamps this
/// host's time (milliseconds since midnight UT), the reply 20 bytes whatever the request's length (as
/// Linux sends); with a record route, that comes back too. To a broadcast, or shorter than an
/// originate timestamp, it is not answered (counted).
#[test]
fn timestamp_requests_are_answered() {
    let (mut b, mut raw) = host();
    let request = |data: &[u8]| {
        let mut m = vec![13, 0, 0, 0, 0x0b, 0xad, 0, 3];
        m.extend_from_slice(data);
        let sum = fastpath::checksum::rfc1071(&m);
        m[2..4].copy_from_slice(&(!sum).to_be_bytes());
        m
    };
    let originate = 0x0123_4567u32;
    let mut data = originate.to_be_bytes().to_vec();
    data.extend_from_slice(&[0xee; 12]);
    let before = ms_since_midnight();
    let out = exchange(&mut b, &mut raw, &ip_packet(A, B, 1, &request(&data)));
    let after = ms_since_midnight();
    assert_eq!(out.len(), 1);
    let (ip, kind, _) = read_icmp(&out[0]);
    assert_eq!((ip.source, ip.destination), (B.octets(), A.octets()));
    let etherparse::Icmpv4Type::TimestampReply(t) = kind else {
        panic!("not a timestamp reply: {kind:?}");
    };
    assert_eq!((t.id, t.seq), (0x0bad, 3));
    assert_eq!(t.originate_timestamp, originate);
    assert!(in_range(t.receive_timestamp, before, after));
    assert_eq!(t.transmit_timestamp, t.receive_timestamp);
    assert_eq!(out[0].len(), 20 + 20);
    let c = b.counters();
    assert_eq!((c.icmp.in_timestamps, c.icmp.out_timestamp_reps), (1, 1));

    // With a record route.
    let rr = [7, 7, 4, 0, 0, 0, 0, 0];
    let p = with_options(&ip_packet(A, B, 1, &request(&data[..12])), &rr);
    let out = exchange(&mut b, &mut raw, &p);
    assert_eq!(out.len(), 1);
    let (ip, _, _) = read_icmp(&out[0]);
    assert_eq!(ip.options.as_slice(), &[7, 7, 8, 10, 0, 0, 2, 0]);

    // Too short, and to a broadcast.
    assert!(exchange(&mut b, &mut raw, &ip_packet(A, B, 1, &request(&[1, 2]))).is_empty());
    assert_eq!(b.counters().drops.get(DropReason::IcmpTruncated), 1);
    let bc = Ipv4Addr::new(10, 0, 0, 255);
    assert!(exchange(&mut b, &mut raw, &ip_packet(A, bc, 1, &request(&data))).is_empty());
    assert_eq!(b.counters().drops.get(DropReason::IcmpBroadcastEcho), 1);
}

fn ms_since_midnight() -> u32 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (d.as_millis() % 86_400_000) as u32
}

/// `before <= time <= after`, allowing for midnight in between.
fn in_range(time: u32, before: u32, after: u32) -> bool {
    if before <= after {
        (before..=after).contains(&time)
    } else {
        time >= before || time <= after
    }
}

/// A fragmented echo request: the reply carries back the first fragment's record route (the later
/// fragments carry none: RFC 791 does not copy it), as Linux answers.
#[test]
fn a_reassembled_echo_request_has_its_first_fragments_options_echoed() {
    let (mut b, mut raw) = host();
    let whole = echo_request(5, &payload(2000, 5));
    let icmp = &whole[20..];
    let rr = [7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let cut = (1480 - rr.len()) & !7;
    let mut first = with_options(&ip_packet(A, B, 1, &icmp[..cut]), &rr);
    let mut second = ip_packet(A, B, 1, &icmp[cut..]);
    for (p, field) in [(&mut first, 0x2000u16), (&mut second, (cut / 8) as u16)] {
        p[4..6].copy_from_slice(&0x4242u16.to_be_bytes());
        p[6..8].copy_from_slice(&field.to_be_bytes());
        let header_len = usize::from(p[0] & 0xf) * 4;
        p[10..12].fill(0);
        let sum = fastpath::checksum::rfc1071(&p[..header_len]);
        p[10..12].copy_from_slice(&(!sum).to_be_bytes());
    }
    inject(&mut raw, &second);
    inject(&mut raw, &first);
    while b.poll(T0) > 0 {}
    let out = capture(&mut raw);
    assert_eq!(b.counters().ip.reasm_oks, 1);
    assert_eq!(b.counters().icmp.out_echo_reps, 1);
    // The reply is fragmented too: its first fragment has the options.
    assert!(out.len() >= 2, "{} packets", out.len());
    let first_out = out.iter().find(|p| p[6] & 0x1f == 0 && p[7] == 0).unwrap();
    let header_len = usize::from(first_out[0] & 0xf) * 4;
    assert_eq!(
        first_out[20..header_len],
        [7, 11, 12, 10, 0, 0, 2, 10, 0, 0, 2, 0]
    );
    for p in out.iter().filter(|p| !std::ptr::eq(*p, first_out)) {
        assert_eq!(p[0], 0x45, "options in a later fragment");
    }
}
