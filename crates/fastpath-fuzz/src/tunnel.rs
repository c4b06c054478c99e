//! The tunnel's parsers of bytes from outside the stack (crate `fastpath-tunnel`): a SOCKS5 server's
//! replies and datagram headers (RFC 1928, RFC 1929), read by `fastpath tunnel --socks5`, an HTTP
//! proxy's response to CONNECT (RFC 9110 §9.3.6), and the DNS queries the fake DNS of `fastpath
//! tunnel --fake-dns` answers.

use std::future::Future;
use std::io;
use std::net::Ipv4Addr;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use fastpath_tunnel::fake_dns::{Answer, FakeDns};
use fastpath_tunnel::http_connect::{self, Response, MAX_RESPONSE};
use fastpath_tunnel::socks5::{self, Credentials, Target};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Input;

/// A server that answers with the bytes of the input, whatever the client says, and keeps what the
/// client wrote. Every call is ready at once, so the client's conversation finishes in one poll.
struct Script<'a> {
    replies: &'a [u8],
    written: Vec<u8>,
}

impl AsyncRead for Script<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = buf.remaining().min(self.replies.len());
        buf.put_slice(&self.replies[..n]);
        self.replies = &self.replies[n..];
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Polls `f` once: everything it waits on is ready, so it must be done.
fn run_once<T>(f: impl Future<Output = T>) -> T {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the client waited on a server that had answered everything"),
    }
}

/// SOCKS5. The first byte picks the credentials (none, or a user and password), the command
/// (CONNECT, UDP ASSOCIATE) and the target (IPv4, IPv6, a name); the rest is the server's whole side
/// of the conversation. Then the same bytes go to the address, target and UDP-header parsers.
pub fn socks5(data: &[u8]) {
    let mut input = Input::new(data);
    let choice = input.u8();
    let script = input.rest();
    let credentials = (choice & 1 == 1)
        .then(|| Credentials::new("fp".into(), "pw".into()).expect("valid credentials"));
    let command = if choice & 2 == 0 {
        socks5::CONNECT
    } else {
        socks5::UDP_ASSOCIATE
    };
    let target = match (choice >> 2) % 3 {
        0 => Target::Addr("192.0.2.7:443".parse().expect("an address")),
        1 => Target::Addr("[2001:db8::7]:53".parse().expect("an address")),
        _ => Target::Name("example.com".into(), 80),
    };
    let mut server = Script {
        replies: script,
        written: Vec::new(),
    };
    let result = run_once(socks5::request(
        &mut server,
        credentials.as_ref(),
        command,
        &target,
    ));
    // The client offered what it has, and asked for nothing else first.
    let greeting: &[u8] = if credentials.is_some() {
        &[socks5::VERSION, 2, 0, 2]
    } else {
        &[socks5::VERSION, 1, 0]
    };
    assert!(
        server.written.starts_with(greeting),
        "greeting {:?}",
        server.written
    );
    // Its request, once made, is well formed and for the target asked.
    let mut request = vec![socks5::VERSION, command, 0];
    socks5::encode_target(&target, &mut request);
    let after_greeting = &server.written[greeting.len()..];
    assert!(
        after_greeting.is_empty()
            || after_greeting.ends_with(&request)
            || (credentials.is_some() && after_greeting == credentials.as_ref().unwrap().request()),
        "wrote {after_greeting:?}"
    );
    if result.is_ok() {
        assert!(
            after_greeting.ends_with(&request),
            "a bound address with no request"
        );
    }

    // The parsers: lengths within the input, and what they read encodes back to the same bytes.
    if let Ok((addr, n)) = socks5::decode_addr(script) {
        assert!(n <= script.len());
        let mut again = Vec::new();
        socks5::encode_addr(addr, &mut again);
        assert_eq!(again, script[..n]);
    }
    if let Ok((target, n)) = socks5::decode_target(script) {
        assert!(n <= script.len());
        let mut again = Vec::new();
        socks5::encode_target(&target, &mut again);
        assert_eq!(again, script[..n]);
    }
    if let Ok((from, payload)) = socks5::parse_udp(script) {
        let mut again = Vec::new();
        socks5::udp_header(&from, &mut again);
        again.extend_from_slice(payload);
        assert_eq!(again, script);
    }
}

/// The fake DNS over a range of 4 to 256 addresses (so that it wraps), with one of them reserved,
/// fed datagrams: each record is a length byte and that many bytes.
pub fn dns(data: &[u8]) {
    let mut input = Input::new(data);
    let prefix = 24 + input.below(7) as u8;
    let network = Ipv4Addr::new(198, 18, 0, 0);
    let mut table = FakeDns::new(network, prefix).expect("a valid range");
    let reserved = Ipv4Addr::from(u32::from(network) + 1 + input.below(3) as u32);
    table.reserve(reserved).expect("room is left");
    let usable = (1usize << (32 - prefix)) - 2;
    while !input.is_empty() {
        let len = input.u8() as usize;
        let query = input.bytes(len);
        match table.answer(query) {
            Answer::Pass => {}
            Answer::Reply(r) => check_reply(&table, reserved, query, &r),
        }
        assert!(
            table.len() <= usable,
            "{} names in {usable} addresses",
            table.len()
        );
    }
}

fn check_reply(table: &FakeDns, reserved: Ipv4Addr, query: &[u8], r: &[u8]) {
    assert!(r.len() >= 12 && query.len() >= 12);
    assert_eq!(r[..2], query[..2], "the query's ID");
    assert_eq!(
        r[2] & 0xfa,
        0x80,
        "a response to a standard query, not truncated"
    );
    assert_eq!(r[2] & 1, query[2] & 1, "RD copied");
    let count = |i: usize| u16::from_be_bytes([r[i], r[i + 1]]);
    assert_eq!(count(4), 1, "one question");
    let answers = count(6);
    assert!(answers <= 1);
    assert_eq!((count(8), count(10)), (0, 0));
    // The question, as asked: the reply holds it after the header, then the answer if any.
    let answer_len = if answers == 1 { 16 } else { 0 };
    let question = &r[12..r.len() - answer_len];
    assert_eq!(
        question,
        &query[12..12 + question.len()],
        "the question echoed"
    );
    if answers == 1 {
        let a = &r[r.len() - 16..];
        assert_eq!(
            a[..10],
            [0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 10],
            "a pointer, A, IN, TTL 10"
        );
        assert_eq!(a[10..12], [0, 4]);
        let addr = Ipv4Addr::new(a[12], a[13], a[14], a[15]);
        assert!(table.contains(addr), "{addr} out of the range");
        assert_ne!(addr, reserved, "a reserved address handed out");
        assert!(table.name_of(addr).is_some(), "{addr} stands for no name");
    }
}

/// HTTP CONNECT: the input is a proxy's whole answer. The response parser must never panic nor read
/// past the input; a response it accepts is final (2xx to 5xx), ends with its empty line, lies
/// within the input and the bound, and parses the same alone and with anything after it; while it
/// asks for more, fewer bytes than the bound have come. The same bytes as a name must make a
/// CONNECT request with no line break in it, or none at all.
pub fn http_connect(data: &[u8]) {
    match http_connect::parse_response(data) {
        Ok(Some(Response { status, len })) => {
            assert!((200..=599).contains(&status), "status {status}");
            assert!(len <= data.len() && len <= MAX_RESPONSE, "{len}");
            assert!(data[..len].ends_with(b"\r\n\r\n"));
            let alone = http_connect::parse_response(&data[..len]);
            assert_eq!(alone, Ok(Some(Response { status, len })));
            let _ = http_connect::status_error(status);
        }
        Ok(None) => assert!(data.len() < MAX_RESPONSE, "unbounded: {}", data.len()),
        Err(_) => {}
    }
    let name = String::from_utf8_lossy(data).into_owned();
    if let Ok(request) = http_connect::request(&Target::Name(name, 443), None) {
        let head = &request[..request.len() - 4];
        let lines = head.split(|&c| c == b'\n').count();
        assert_eq!(lines, 2, "the request line and Host, nothing injected");
    }
}
