//! An HTTP CONNECT client (RFC 9110 §9.3.6), for the tunnel's HTTP proxy upstreams: on a fresh
//! connection to the proxy, `CONNECT host:port HTTP/1.1` (with `Proxy-Authorization: Basic`, RFC
//! 7617, when the tunnel has a user name and password), then the proxy's response, read strictly and
//! bounded: a status line `HTTP/1.x NNN reason`, header lines (a token, a colon, visible text; no
//! folding), an empty line, every line ended by CRLF, at most [`MAX_RESPONSE`] bytes in all, interim
//! (1xx) responses skipped. A 2xx means the tunnel is open (any body framing a 2xx announces is
//! ignored, as RFC 9110 says it must be); anything else fails the connect:
//!
//! - 403 (forbidden) and 407 (the proxy wants, or refused, credentials) as a SOCKS5 server's "not
//!   allowed" and a refused password: `PermissionDenied`, which the tunnel answers with an ICMP
//!   administratively prohibited;
//! - 504 (the proxy's connect timed out): `TimedOut`; every other status, and a response that breaks
//!   the rules: a refusal (`ConnectionRefused`, `InvalidData`), answered with a RST.
//!
//! The response is read without reading past it: the destination's first bytes may follow it in the
//! same segment (a server that speaks first), and they belong to the application. The reads peek,
//! and take off the socket only what is header.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::rules::Auth;
use crate::socks5::Target;

/// Most bytes of response (status lines and headers, interim responses included) read from a proxy.
pub const MAX_RESPONSE: usize = 16 * 1024;

/// A proxy's final response, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The final status code (not 1xx).
    pub status: u16,
    /// Bytes from the start of the input to the end of its empty line: the interim responses and the
    /// final one's head.
    pub len: usize,
}

/// `target` as the request target of a CONNECT (RFC 9110's authority form): `host:port`, an IPv6
/// address in brackets. A name must be letters, digits, `-`, `_` and dots (the fake DNS's names
/// are).
pub fn authority(target: &Target) -> io::Result<String> {
    match target {
        Target::Addr(a) => Ok(a.to_string()),
        Target::Name(name, port) => {
            let ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
            if !ok {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "HTTP CONNECT: a name that cannot be a host",
                ));
            }
            Ok(format!("{name}:{port}"))
        }
    }
}

/// The CONNECT request for `target`, with basic authentication when `auth` is given.
pub fn request(target: &Target, auth: Option<&Auth>) -> io::Result<Vec<u8>> {
    let host = authority(target)?;
    let mut r = format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n");
    if let Some(a) = auth {
        let credentials = base64(format!("{}:{}", a.user, a.password).as_bytes());
        r.push_str(&format!("Proxy-Authorization: Basic {credentials}\r\n"));
    }
    r.push_str("\r\n");
    Ok(r.into_bytes())
}

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Parses a proxy's response from the front of `data`: `Ok(Some)` once a final response's head is
/// complete, `Ok(None)` while more bytes are needed (and fewer than [`MAX_RESPONSE`] have come),
/// `Err` as soon as the bytes break the rules or the limit is passed. Never reads past `data`.
pub fn parse_response(data: &[u8]) -> Result<Option<Response>, String> {
    let mut at = 0;
    loop {
        match parse_one(&data[at..])? {
            None => {
                return if data.len() >= MAX_RESPONSE {
                    Err(format!("a response longer than {MAX_RESPONSE} bytes"))
                } else {
                    Ok(None)
                };
            }
            Some((status, len)) => {
                at += len;
                if at > MAX_RESPONSE {
                    return Err(format!("a response longer than {MAX_RESPONSE} bytes"));
                }
                if status >= 200 {
                    return Ok(Some(Response { status, len: at }));
                }
                // An interim response: the final one follows.
            }
        }
    }
}

/// One response head: its status and length, `None` if incomplete.
fn parse_one(data: &[u8]) -> Result<Option<(u16, usize)>, String> {
    let mut lines = Lines { data, at: 0 };
    let Some(status_line) = lines.next()? else {
        // What there is must still be able to start a status line.
        let prefix = b"HTTP/1.";
        let n = data.len().min(prefix.len());
        if data[..n] != prefix[..n] {
            return Err("not an HTTP/1.x response".into());
        }
        return Ok(None);
    };
    let status = parse_status_line(status_line)?;
    loop {
        match lines.next()? {
            None => return Ok(None),
            Some([]) => return Ok(Some((status, lines.at))),
            Some(line) => check_field(line)?,
        }
    }
}

/// The CRLF-ended lines of a response head, without their CRLF.
struct Lines<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Lines<'a> {
    /// The next complete line; `None` if it has not all come. A CR not before LF, or an LF not after
    /// CR, is an error.
    fn next(&mut self) -> Result<Option<&'a [u8]>, String> {
        let rest = &self.data[self.at..];
        for (i, &c) in rest.iter().enumerate() {
            match c {
                b'\n' => return Err("a line ended by LF alone".into()),
                b'\r' => match rest.get(i + 1) {
                    None => return Ok(None),
                    Some(b'\n') => {
                        self.at += i + 2;
                        return Ok(Some(&rest[..i]));
                    }
                    Some(_) => return Err("a CR in a line".into()),
                },
                _ => {}
            }
        }
        Ok(None)
    }
}

/// `HTTP/1.x NNN reason` (the reason may be empty, and its space with it): the status code.
fn parse_status_line(line: &[u8]) -> Result<u16, String> {
    let bad = || {
        format!(
            "a malformed status line `{}`",
            String::from_utf8_lossy(&line[..line.len().min(64)])
        )
    };
    let rest = line.strip_prefix(b"HTTP/1.").ok_or_else(bad)?;
    let [minor, b' ', d0, d1, d2, reason @ ..] = rest else {
        return Err(bad());
    };
    if !minor.is_ascii_digit() || ![d0, d1, d2].iter().all(|d| d.is_ascii_digit()) {
        return Err(bad());
    }
    let status = u16::from(d0 - b'0') * 100 + u16::from(d1 - b'0') * 10 + u16::from(d2 - b'0');
    if !(100..=599).contains(&status) {
        return Err(bad());
    }
    match reason {
        [] => {}
        [b' ', text @ ..] if text.iter().all(|&c| is_text(c)) => {}
        _ => return Err(bad()),
    }
    Ok(status)
}

/// Visible text, spaces and tabs, and bytes past ASCII (RFC 9110's `obs-text`).
fn is_text(c: u8) -> bool {
    c == b'\t' || c == b' ' || (0x21..=0x7e).contains(&c) || c >= 0x80
}

/// A header field line: a token, a colon, a value of text. A line starting with white space
/// (obsolete folding) is refused.
fn check_field(line: &[u8]) -> Result<(), String> {
    let colon = line
        .iter()
        .position(|&c| c == b':')
        .ok_or("a header line without a colon")?;
    let name = &line[..colon];
    let tchar = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    if name.is_empty() || !name.iter().all(|&c| tchar(c)) {
        return Err("a header field name that is not a token".into());
    }
    if !line[colon + 1..].iter().all(|&c| is_text(c)) {
        return Err("a header field value with a control character".into());
    }
    Ok(())
}

/// What a final status other than 2xx means for the connect (see the [module](self)).
pub fn status_error(status: u16) -> io::Error {
    let (kind, what) = match status {
        403 => (io::ErrorKind::PermissionDenied, "forbidden"),
        407 => (
            io::ErrorKind::PermissionDenied,
            "proxy authentication required (or refused)",
        ),
        504 => (io::ErrorKind::TimedOut, "gateway timeout"),
        _ => (io::ErrorKind::ConnectionRefused, "the proxy refused"),
    };
    io::Error::new(kind, format!("HTTP CONNECT: {what} ({status})"))
}

/// On a fresh connection to the proxy: the CONNECT for `target` and the proxy's answer. Returns
/// once the tunnel is open, with nothing past the response's head taken off the socket.
pub async fn connect(
    s: &mut tokio::net::TcpStream,
    target: &Target,
    auth: Option<&Auth>,
) -> io::Result<()> {
    s.write_all(&request(target, auth)?).await?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        let room = (MAX_RESPONSE - head.len()).min(chunk.len());
        let n = s.peek(&mut chunk[..room]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "HTTP CONNECT: the proxy closed the connection before answering",
            ));
        }
        let before = head.len();
        head.extend_from_slice(&chunk[..n]);
        let parsed = parse_response(&head).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("HTTP CONNECT: {e}"))
        })?;
        // Take off the socket what was header: all that was peeked while the head goes on, only
        // up to its end once it is complete.
        let take = parsed.map_or(n, |r| r.len - before);
        s.read_exact(&mut chunk[..take]).await?;
        if let Some(r) = parsed {
            return match r.status {
                200..=299 => Ok(()),
                status => Err(status_error(status)),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_the_authority_and_carry_basic_credentials() {
        let t = Target::Addr("[2001:db8::1]:443".parse().unwrap());
        assert_eq!(
            request(&t, None).unwrap(),
            b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"
        );
        let auth = Auth {
            user: "Aladdin".into(),
            password: "open sesame".into(),
        };
        let r = request(&Target::Name("example.com".into(), 80), Some(&auth)).unwrap();
        // RFC 7617's example.
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "CONNECT example.com:80 HTTP/1.1\r\nHost: example.com:80\r\n\
             Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n"
        );
        assert!(request(&Target::Name("a\r\nb".into(), 80), None).is_err());
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn responses_are_parsed_strictly_and_only_to_their_end() {
        let ok = b"HTTP/1.1 200 Connection established\r\nVia: x\r\n\r\nSSH-2.0";
        assert_eq!(
            parse_response(ok),
            Ok(Some(Response {
                status: 200,
                len: ok.len() - 7
            }))
        );
        assert_eq!(
            parse_response(b"HTTP/1.0 200\r\n\r\n"),
            Ok(Some(Response {
                status: 200,
                len: 16
            }))
        );
        let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 407 Proxy Auth\r\n\r\n";
        assert_eq!(
            parse_response(interim).unwrap().unwrap(),
            Response {
                status: 407,
                len: interim.len()
            }
        );
        // Every prefix of a good response needs more, never fails.
        for n in 0..ok.len() - 7 {
            assert_eq!(parse_response(&ok[..n]), Ok(None), "{n}");
        }
        for bad in [
            &b"HTTP/2 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\n\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 OK\r\n\r\n",
            b"HTTP/1.1 20x OK\r\n\r\n",
            b"HTTP/1.1 200 O\x01K\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n folded\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad name: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: \x00\r\n\r\n",
            b"HTTP/1.1 200 OK\r\rX",
            b"SSH-2.0-OpenSSH",
            b"http/1.1 200 OK\r\n\r\n",
        ] {
            assert!(
                parse_response(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
        while long.len() < MAX_RESPONSE {
            long.extend_from_slice(b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert!(parse_response(&long).is_err(), "bounded");
        long.truncate(MAX_RESPONSE - 10);
        assert_eq!(parse_response(&long), Ok(None));
    }

    #[test]
    fn statuses_fail_as_a_socks5_server_s_replies_do() {
        use fastpath::Unreachable;
        assert_eq!(
            Unreachable::of(&status_error(403)),
            Some(Unreachable::Prohibited)
        );
        assert_eq!(
            Unreachable::of(&status_error(407)),
            Some(Unreachable::Prohibited)
        );
        for s in [400, 500, 502, 503, 504] {
            assert_eq!(Unreachable::of(&status_error(s)), None, "{s}: a RST");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn connect_leaves_the_destination_s_first_bytes_on_the_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = vec![0u8; 256];
            let n = s.read(&mut req).await.unwrap();
            req.truncate(n);
            // Split across writes, the destination speaking first right behind the head.
            s.write_all(b"HTTP/1.1 200 OK\r\nX-A: b").await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            s.write_all(b"\r\n\r\nhello").await.unwrap();
            req
        });
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let target = Target::Addr("192.0.2.1:25".parse().unwrap());
        connect(&mut s, &target, None).await.unwrap();
        let mut rest = [0u8; 5];
        s.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"hello");
        let req = proxy.await.unwrap();
        assert!(req.starts_with(b"CONNECT 192.0.2.1:25 HTTP/1.1\r\n"));
    }
}
