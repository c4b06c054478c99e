//! A SOCKS5 client (RFC 1928), for the tunnel's SOCKS5 upstreams (`fastpath tunnel --socks5`): no
//! authentication (method 0), or a user name and password (method 2, RFC 1929) when the tunnel has
//! them; the CONNECT command for TCP and UDP ASSOCIATE for UDP; destinations as IPv4 or IPv6
//! addresses, or as names (address type 3) for fake DNS addresses.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const VERSION: u8 = 5;
pub const CONNECT: u8 = 1;
pub const UDP_ASSOCIATE: u8 = 3;
const NO_AUTHENTICATION: u8 = 0;
const USER_PASSWORD: u8 = 2;
/// The version of RFC 1929's sub-negotiation.
const USER_PASSWORD_VERSION: u8 = 1;

/// A user name and password for RFC 1929, each 1 to 255 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Checks the lengths RFC 1929 allows.
    pub fn new(user: String, password: String) -> Result<Credentials, String> {
        for (what, v) in [("user name", &user), ("password", &password)] {
            if v.is_empty() || v.len() > 255 {
                return Err(format!(
                    "a SOCKS5 {what} is 1 to 255 bytes (RFC 1929), not {}",
                    v.len()
                ));
            }
        }
        Ok(Credentials { user, password })
    }

    /// Without the length checks, for a password still to come ([`Credentials::new`] checks it then).
    pub(crate) fn unchecked(user: String, password: String) -> Credentials {
        Credentials { user, password }
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The sub-negotiation request: version, the name, the password, each behind its length.
    pub fn request(&self) -> Vec<u8> {
        let mut m = vec![USER_PASSWORD_VERSION, self.user.len() as u8];
        m.extend_from_slice(self.user.as_bytes());
        m.push(self.password.len() as u8);
        m.extend_from_slice(self.password.as_bytes());
        m
    }
}
const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_V6: u8 = 4;

/// Where a request or a datagram goes: an address, or a name (at most 255 bytes) and a port, for the
/// server to resolve (RFC 1928's address type 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Addr(SocketAddr),
    Name(String, u16),
}

/// `target` as RFC 1928 writes it: ATYP, the address or the name's length and the name, the port.
pub fn encode_target(target: &Target, out: &mut Vec<u8>) {
    match target {
        Target::Addr(a) => encode_addr(*a, out),
        Target::Name(name, port) => {
            let name = &name.as_bytes()[..name.len().min(255)];
            out.push(ATYP_DOMAIN);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
            out.extend_from_slice(&port.to_be_bytes());
        }
    }
}

/// `addr` as RFC 1928 writes it: ATYP, the address, the port.
pub fn encode_addr(addr: SocketAddr, out: &mut Vec<u8>) {
    match addr.ip() {
        IpAddr::V4(a) => {
            out.push(ATYP_V4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(ATYP_V6);
            out.extend_from_slice(&a.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// Reads an address or a name (ATYP, address, port) from the front of `b`; returns it and its
/// length. A name must be text (ASCII without control characters).
pub fn decode_target(b: &[u8]) -> Result<(Target, usize), String> {
    if b.first() != Some(&ATYP_DOMAIN) {
        return decode_addr(b).map(|(a, n)| (Target::Addr(a), n));
    }
    let len = usize::from(*b.get(1).ok_or("truncated name")?);
    let name = b.get(2..2 + len).ok_or("truncated name")?;
    let port = b.get(2 + len..4 + len).ok_or("truncated name")?;
    if name.is_empty() || !name.iter().all(|c| c.is_ascii_graphic()) {
        return Err("a name that is not text".into());
    }
    let name = String::from_utf8_lossy(name).into_owned();
    Ok((
        Target::Name(name, u16::from_be_bytes([port[0], port[1]])),
        4 + len,
    ))
}

/// Reads an address (ATYP, address, port) from the front of `b`; returns it and its length. A
/// domain name (ATYP 3) is refused here ([`decode_target`] reads one).
pub fn decode_addr(b: &[u8]) -> Result<(SocketAddr, usize), String> {
    let port = |at: usize| -> Result<u16, String> {
        b.get(at..at + 2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]))
            .ok_or_else(|| "truncated address".to_string())
    };
    match b.first() {
        Some(&ATYP_V4) => {
            let a: [u8; 4] = b
                .get(1..5)
                .and_then(|s| s.try_into().ok())
                .ok_or("truncated IPv4 address")?;
            Ok(((Ipv4Addr::from(a), port(5)?).into(), 7))
        }
        Some(&ATYP_V6) => {
            let a: [u8; 16] = b
                .get(1..17)
                .and_then(|s| s.try_into().ok())
                .ok_or("truncated IPv6 address")?;
            Ok(((Ipv6Addr::from(a), port(17)?).into(), 19))
        }
        Some(t) => Err(format!("address type {t} not supported")),
        None => Err("no address".into()),
    }
}

/// Appends the header in front of every UDP datagram to and from the relay (RFC 1928 §7): RSV, FRAG
/// 0, the destination (or, from the relay, the source).
pub fn udp_header(target: &Target, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0, 0]);
    encode_target(target, out);
}

/// Splits a datagram from the relay into its source and payload. Fragments (FRAG not 0) are
/// refused, as RFC 1928 allows a client that does not reassemble to.
pub fn parse_udp(datagram: &[u8]) -> Result<(Target, &[u8]), String> {
    match datagram {
        [0, 0, 0, rest @ ..] => {
            let (from, n) = decode_target(rest)?;
            Ok((from, &rest[n..]))
        }
        [_, _, frag, ..] if *frag != 0 => Err("a fragmented datagram".into()),
        _ => Err("a malformed datagram header".into()),
    }
}

/// What a server's reply code means (RFC 1928 §6).
fn reply_error(code: u8) -> io::Error {
    let (kind, what) = match code {
        1 => (io::ErrorKind::Other, "general SOCKS server failure"),
        2 => (
            io::ErrorKind::PermissionDenied,
            "connection not allowed by ruleset",
        ),
        3 => (io::ErrorKind::NetworkUnreachable, "network unreachable"),
        4 => (io::ErrorKind::HostUnreachable, "host unreachable"),
        5 => (io::ErrorKind::ConnectionRefused, "connection refused"),
        6 => (io::ErrorKind::TimedOut, "TTL expired"),
        7 => (io::ErrorKind::Unsupported, "command not supported"),
        8 => (io::ErrorKind::Unsupported, "address type not supported"),
        _ => (io::ErrorKind::Other, "unknown reply"),
    };
    io::Error::new(kind, format!("SOCKS5: {what} ({code})"))
}

fn protocol(what: impl Into<String>) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("SOCKS5: {}", what.into()),
    )
}

/// On a fresh connection to the server: the method negotiation, then `command` for `target`;
/// returns the server's bound address (for UDP ASSOCIATE, where to send datagrams; a bound name is
/// returned as the unspecified address with its port, which the caller takes as the server's own).
pub async fn request<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    credentials: Option<&Credentials>,
    command: u8,
    target: &Target,
) -> io::Result<SocketAddr> {
    match credentials {
        None => s.write_all(&[VERSION, 1, NO_AUTHENTICATION]).await?,
        Some(_) => {
            s.write_all(&[VERSION, 2, NO_AUTHENTICATION, USER_PASSWORD])
                .await?
        }
    }
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).await?;
    match (choice, credentials) {
        ([VERSION, NO_AUTHENTICATION], _) => {}
        ([VERSION, USER_PASSWORD], Some(c)) => {
            s.write_all(&c.request()).await?;
            let mut status = [0u8; 2];
            s.read_exact(&mut status).await?;
            if status[1] != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "SOCKS5: the server refused the user name and password",
                ));
            }
        }
        _ => {
            return Err(protocol(format!(
                "the server wants method {} (offered: 0{})",
                choice[1],
                if credentials.is_some() {
                    " and 2, user name and password"
                } else {
                    ", no authentication"
                }
            )))
        }
    }
    let mut req = vec![VERSION, command, 0];
    encode_target(target, &mut req);
    s.write_all(&req).await?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await?;
    if head[0] != VERSION {
        return Err(protocol(format!("version {} in the reply", head[0])));
    }
    if head[1] != 0 {
        return Err(reply_error(head[1]));
    }
    let len = match head[3] {
        ATYP_V4 => 4,
        ATYP_V6 => 16,
        ATYP_DOMAIN => {
            let mut len = [0u8; 1];
            s.read_exact(&mut len).await?;
            let mut rest = vec![0u8; usize::from(len[0]) + 2];
            s.read_exact(&mut rest).await?;
            let port = u16::from_be_bytes([rest[rest.len() - 2], rest[rest.len() - 1]]);
            return Ok((Ipv4Addr::UNSPECIFIED, port).into());
        }
        t => return Err(protocol(format!("address type {t} in the reply"))),
    };
    let mut rest = vec![0u8; len + 2];
    s.read_exact(&mut rest).await?;
    let mut encoded = vec![head[3]];
    encoded.extend_from_slice(&rest);
    decode_addr(&encoded).map(|(a, _)| a).map_err(protocol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_checked_and_encoded_as_rfc_1929_says() {
        assert!(Credentials::new(String::new(), "p".into()).is_err());
        assert!(Credentials::new("u".into(), "x".repeat(256)).is_err());
        let c = Credentials::new("fp".into(), "secret".into()).unwrap();
        assert_eq!(c.request(), b"\x01\x02fp\x06secret");
        assert!(!format!("{c:?}").contains("secret"), "never printed");
    }

    #[test]
    fn addresses_round_trip_in_rfc_1928_form() {
        for a in ["10.1.2.3:80", "[2001:db8::7]:443"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut b = Vec::new();
            encode_addr(a, &mut b);
            assert_eq!(b[0], if a.is_ipv4() { 1 } else { 4 });
            assert_eq!(decode_addr(&b).unwrap(), (a, b.len()));
        }
        let v4: SocketAddr = "192.0.2.1:258".parse().unwrap();
        let mut b = Vec::new();
        encode_addr(v4, &mut b);
        assert_eq!(b, [1, 192, 0, 2, 1, 1, 2]);
    }

    #[test]
    fn names_are_written_and_read_as_address_type_3() {
        let t = Target::Name("example.com".into(), 443);
        let mut b = Vec::new();
        encode_target(&t, &mut b);
        assert_eq!(&b[..2], &[3, 11]);
        assert_eq!(&b[2..13], b"example.com");
        assert_eq!(&b[13..], &443u16.to_be_bytes());
        assert_eq!(decode_target(&b).unwrap(), (t.clone(), b.len()));
        let mut d = Vec::new();
        udp_header(&t, &mut d);
        d.extend_from_slice(b"x");
        assert_eq!(parse_udp(&d).unwrap(), (t, &b"x"[..]));
    }

    #[test]
    fn udp_headers_and_what_is_refused() {
        let a: SocketAddr = "198.51.100.9:53".parse().unwrap();
        let mut d = Vec::new();
        udp_header(&Target::Addr(a), &mut d);
        d.extend_from_slice(b"query");
        assert_eq!(parse_udp(&d).unwrap(), (Target::Addr(a), &b"query"[..]));
        assert!(
            parse_udp(&[0, 0, 1, 1, 10, 0, 0, 1, 0, 53]).is_err(),
            "a fragment"
        );
        assert!(
            parse_udp(&[0, 0, 0, 3, 4, b'h']).is_err(),
            "a truncated name"
        );
        assert!(parse_udp(&[0, 0, 0, 3, 0, 0, 53]).is_err(), "an empty name");
        assert!(
            parse_udp(&[0, 0, 0, 3, 1, b' ', 0, 53]).is_err(),
            "not text"
        );
        assert!(parse_udp(&[0, 0, 0, 1, 10, 0]).is_err(), "truncated");
        assert!(parse_udp(&[]).is_err());
    }
}
