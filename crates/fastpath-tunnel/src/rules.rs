//! Which way each connection or flow leaves: an [`Upstream`] (`direct`, a SOCKS5 server, an HTTP
//! proxy's CONNECT) chosen per destination by [`Routes`]: rules matching the destination's address
//! (a prefix, IPv4 or IPv6) or, for an address of the fake DNS range, the name it stands for (a
//! domain and its subdomains), tried in the order given; the first that matches decides, else the
//! default.
//!
//! The text forms, shared by the command line, a rules file and the C API:
//!
//! - an upstream: `direct`, `socks5://[USER[:PASSWORD]@]IP:PORT`, `http://[USER[:PASSWORD]@]IP:PORT`
//!   (the proxy by address, IPv6 in brackets; a user name without a password leaves the password
//!   to be filled in by the caller, as the command line does from the environment);
//! - a rule: `MATCH=UPSTREAM`, where MATCH is a prefix (`10.0.0.0/8`, `2001:db8::/32`), an address
//!   (a prefix of its full length), or a domain: `example.com` matches the name and every name
//!   under it, `*.example.com` only the names under it (never `badexample.com`); case is ignored, and
//!   a trailing dot;
//! - a rules text ([`Routes::parse_rules`]): a rule per line; blank lines and lines starting with `#`
//!   are skipped; `default=UPSTREAM` sets the default.
//!
//! A domain rule can only match a connection whose destination is a fake DNS address (without
//! `--fake-dns` the tunnel sees addresses, never names); a prefix rule matches the address the
//! application connected to, and so never a fake DNS address's name.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::socks5::{self, Target};

/// A user name and password for a proxy (SOCKS5's RFC 1929, or HTTP basic authentication).
#[derive(Clone, PartialEq, Eq)]
pub struct Auth {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the password.
        f.debug_struct("Auth")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Where a connection or flow goes from the tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// Straight to the destination, from the namespace the tunnel runs in.
    Direct,
    /// Through a SOCKS5 server (RFC 1928): TCP by CONNECT, UDP by UDP ASSOCIATE.
    Socks5 {
        addr: SocketAddr,
        auth: Option<socks5::Credentials>,
    },
    /// Through an HTTP proxy's CONNECT (RFC 9110 §9.3.6), optionally with basic authentication. TCP
    /// only: a UDP flow routed here is dropped (counted as `udp_no_proxy`).
    Http {
        addr: SocketAddr,
        auth: Option<Auth>,
    },
}

impl Upstream {
    /// Parses the text form (see the [module](self)); a user name without a password gets an empty
    /// password, for the caller to fill in ([`Upstream::needs_password`], [`Upstream::set_password`]).
    pub fn parse(s: &str) -> Result<Upstream, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("direct") {
            return Ok(Upstream::Direct);
        }
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!("`{s}` is not an upstream: direct, socks5://IP:PORT or http://IP:PORT")
        })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (auth, host) = match rest.rsplit_once('@') {
            Some((auth, host)) => {
                let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
                if user.is_empty() {
                    return Err(format!("`{s}`: an empty user name"));
                }
                (Some((user.to_string(), password.to_string())), host)
            }
            None => (None, rest),
        };
        let addr: SocketAddr = host.parse().map_err(|_| {
            format!("`{s}`: the proxy must be an IP address and a port (IPv6 in brackets), not `{host}`")
        })?;
        match scheme.to_ascii_lowercase().as_str() {
            "socks5" => Ok(Upstream::Socks5 {
                addr,
                auth: match auth {
                    None => None,
                    // Checked once the password is known (it may come later).
                    Some((u, p)) if p.is_empty() => Some(socks5::Credentials::unchecked(u, p)),
                    Some((u, p)) => Some(socks5::Credentials::new(u, p)?),
                },
            }),
            "http" => Ok(Upstream::Http {
                addr,
                auth: auth.map(|(user, password)| Auth { user, password }),
            }),
            other => Err(format!(
                "`{s}`: scheme `{other}` not supported (direct, socks5, http)"
            )),
        }
    }

    /// True when it has a user name and no password yet.
    pub fn needs_password(&self) -> bool {
        match self {
            Upstream::Direct => false,
            Upstream::Socks5 { auth, .. } => auth.as_ref().is_some_and(|a| a.password().is_empty()),
            Upstream::Http { auth, .. } => auth.as_ref().is_some_and(|a| a.password.is_empty()),
        }
    }

    /// Gives a user name without a password its password (checked for SOCKS5's limits).
    pub fn set_password(&mut self, password: &str) -> Result<(), String> {
        match self {
            Upstream::Socks5 { auth: Some(a), .. } if a.password().is_empty() => {
                *a = socks5::Credentials::new(a.user().to_string(), password.to_string())?;
            }
            Upstream::Http { auth: Some(a), .. } if a.password.is_empty() => {
                a.password = password.to_string();
            }
            _ => {}
        }
        Ok(())
    }
}

impl fmt::Display for Upstream {
    /// The text form without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Upstream::Direct => write!(f, "direct"),
            Upstream::Socks5 { addr, auth } => match auth {
                Some(a) => write!(f, "socks5://{}@{addr}", a.user()),
                None => write!(f, "socks5://{addr}"),
            },
            Upstream::Http { addr, auth } => match auth {
                Some(a) => write!(f, "http://{}@{addr}", a.user),
                None => write!(f, "http://{addr}"),
            },
        }
    }
}

/// What a rule matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// Addresses within a prefix (of either family).
    Prefix(IpAddr, u8),
    /// A domain, lower case without a trailing dot; with `subdomains_only` (`*.example.com`) the
    /// domain itself does not match.
    Domain {
        suffix: String,
        subdomains_only: bool,
    },
}

impl Match {
    /// Parses a prefix, an address or a domain (see the [module](self)).
    pub fn parse(s: &str) -> Result<Match, String> {
        let s = s.trim();
        if let Some((addr, len)) = s.split_once('/') {
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("`{s}`: not a prefix (address/length)"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`{s}`: a prefix length is 0 to {max}"))?;
            return Ok(Match::Prefix(addr, len));
        }
        if let Ok(addr) = s.parse::<IpAddr>() {
            return Ok(Match::Prefix(addr, if addr.is_ipv4() { 32 } else { 128 }));
        }
        let (name, subdomains_only) = match s.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (s.strip_prefix('.').unwrap_or(s), false),
        };
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        };
        if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
            return Err(format!(
                "`{s}` is neither a prefix, an address nor a domain name"
            ));
        }
        Ok(Match::Domain {
            suffix: name,
            subdomains_only,
        })
    }

    /// Whether a connection to `target` matches.
    pub fn matches(&self, target: &Target) -> bool {
        match (self, target) {
            (Match::Prefix(net, len), Target::Addr(a)) => in_prefix(a.ip(), *net, *len),
            (
                Match::Domain {
                    suffix,
                    subdomains_only,
                },
                Target::Name(name, _),
            ) => domain_matches(name, suffix, *subdomains_only),
            _ => false,
        }
    }
}

/// Whether `name` is `suffix` (unless `subdomains_only`) or a name under it, ignoring case and a
/// trailing dot.
fn domain_matches(name: &str, suffix: &str, subdomains_only: bool) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.len() == suffix.len() {
        return !subdomains_only && name.eq_ignore_ascii_case(suffix);
    }
    name.len() > suffix.len()
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
        && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// Whether `ip` lies in `net`/`len` (an IPv4 prefix holds no IPv6 address, nor the reverse).
fn in_prefix(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// One rule: what it matches and where that goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub matches: Match,
    pub upstream: Upstream,
}

impl Rule {
    /// Parses `MATCH=UPSTREAM`.
    pub fn parse(s: &str) -> Result<Rule, String> {
        let (m, u) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not a rule: MATCH=UPSTREAM"))?;
        Ok(Rule {
            matches: Match::parse(m)?,
            upstream: Upstream::parse(u)?,
        })
    }
}

/// The rules and the default: where each destination goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    pub default: Upstream,
    pub rules: Vec<Rule>,
}

impl Default for Routes {
    /// Everything direct.
    fn default() -> Routes {
        Routes::all(Upstream::Direct)
    }
}

impl Routes {
    /// Everything through `upstream`.
    pub fn all(upstream: Upstream) -> Routes {
        Routes {
            default: upstream,
            rules: Vec::new(),
        }
    }

    /// The upstream for a connection or flow to `target`: the first rule's that matches, else the
    /// default.
    pub fn choose(&self, target: &Target) -> &Upstream {
        self.rules
            .iter()
            .find(|r| r.matches.matches(target))
            .map_or(&self.default, |r| &r.upstream)
    }

    /// Adds the rules of a rules text (see the [module](self)); `default=` lines set the default.
    /// Errors name the line.
    pub fn parse_rules(&mut self, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |e: String| format!("line {}: {e}", i + 1);
            match line.split_once('=') {
                Some((m, u)) if m.trim().eq_ignore_ascii_case("default") => {
                    self.default = Upstream::parse(u).map_err(at)?;
                }
                _ => self.rules.push(Rule::parse(line).map_err(at)?),
            }
        }
        Ok(())
    }

    /// Every upstream named, the default first.
    pub fn upstreams(&self) -> impl Iterator<Item = &Upstream> {
        std::iter::once(&self.default).chain(self.rules.iter().map(|r| &r.upstream))
    }

    /// Every upstream named, the default first, to change (to fill in passwords, say).
    pub fn upstreams_mut(&mut self) -> impl Iterator<Item = &mut Upstream> {
        std::iter::once(&mut self.default).chain(self.rules.iter_mut().map(|r| &mut r.upstream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Target {
        Target::Name(n.into(), 443)
    }

    fn addr(a: &str) -> Target {
        Target::Addr(SocketAddr::new(a.parse().unwrap(), 80))
    }

    #[test]
    fn upstreams_parse_and_print_without_passwords() {
        assert_eq!(Upstream::parse("direct"), Ok(Upstream::Direct));
        let s = Upstream::parse("socks5://u:secret@127.0.0.1:1080").unwrap();
        assert_eq!(s.to_string(), "socks5://u@127.0.0.1:1080");
        assert!(!format!("{s:?}").contains("secret"));
        let h = Upstream::parse("http://[::1]:3128/").unwrap();
        assert_eq!(
            h,
            Upstream::Http {
                addr: "[::1]:3128".parse().unwrap(),
                auth: None
            }
        );
        let mut h = Upstream::parse("HTTP://me@10.0.0.1:8080").unwrap();
        assert!(h.needs_password());
        h.set_password("pw").unwrap();
        assert!(!h.needs_password());
        assert_eq!(
            h,
            Upstream::Http {
                addr: "10.0.0.1:8080".parse().unwrap(),
                auth: Some(Auth {
                    user: "me".into(),
                    password: "pw".into()
                })
            }
        );
        for bad in [
            "",
            "socks4://1.2.3.4:1",
            "http://proxy.example:80",
            "http://1.2.3.4",
            "socks5://@1.2.3.4:1",
            "1.2.3.4:80",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes_match_their_family_and_length() {
        let m = Match::parse("10.1.0.0/16").unwrap();
        assert!(m.matches(&addr("10.1.200.3")));
        assert!(!m.matches(&addr("10.2.0.1")));
        assert!(!m.matches(&addr("::ffff:10.1.0.1")), "not across families");
        assert!(!m.matches(&name("10.1.0.1")), "addresses never match names");
        assert!(Match::parse("0.0.0.0/0").unwrap().matches(&addr("8.8.8.8")));
        let m = Match::parse("2001:db8::/32").unwrap();
        assert!(m.matches(&addr("2001:db8:ffff::1")));
        assert!(!m.matches(&addr("2001:db9::1")));
        assert!(!m.matches(&addr("10.0.0.1")));
        assert!(Match::parse("::/0").unwrap().matches(&addr("::1")));
        let one = Match::parse("192.0.2.7").unwrap();
        assert!(one.matches(&addr("192.0.2.7")) && !one.matches(&addr("192.0.2.8")));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "a b", "-", "x..y", ""] {
            assert!(Match::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn domains_match_themselves_and_names_under_them_at_a_label() {
        let m = Match::parse("Example.COM.").unwrap();
        for yes in [
            "example.com",
            "EXAMPLE.com.",
            "www.example.com",
            "a.b.example.com",
        ] {
            assert!(m.matches(&name(yes)), "{yes}");
        }
        for no in ["badexample.com", "example.org", "com", "example.com.evil"] {
            assert!(!m.matches(&name(no)), "{no}");
        }
        assert!(!m.matches(&addr("93.184.216.34")));
        let sub = Match::parse("*.example.com").unwrap();
        assert!(sub.matches(&name("www.example.com")));
        assert!(!sub.matches(&name("example.com")));
        assert!(!sub.matches(&name("xexample.com")));
        assert_eq!(Match::parse(".example.com").unwrap(), m);
    }

    #[test]
    fn the_first_matching_rule_decides_else_the_default() {
        let mut routes = Routes::all(Upstream::parse("socks5://127.0.0.1:1080").unwrap());
        routes
            .parse_rules(
                "# local things direct\n\
                 10.0.0.0/8 = direct\n\
                 \n\
                 *.corp.example = http://10.0.0.9:3128\n\
                 corp.example=direct\n\
                 2001:db8::/32=http://[2001:db8::9]:8080\n",
            )
            .unwrap();
        assert_eq!(routes.rules.len(), 4);
        assert_eq!(routes.choose(&addr("10.9.9.9")), &Upstream::Direct);
        assert!(matches!(
            routes.choose(&name("git.corp.example")),
            Upstream::Http { .. }
        ));
        assert_eq!(routes.choose(&name("corp.example")), &Upstream::Direct);
        assert!(matches!(
            routes.choose(&addr("2001:db8::1")),
            Upstream::Http { .. }
        ));
        assert!(matches!(
            routes.choose(&addr("8.8.8.8")),
            Upstream::Socks5 { .. }
        ));
        assert!(matches!(
            routes.choose(&name("example.org")),
            Upstream::Socks5 { .. }
        ));
        routes.parse_rules("default=direct").unwrap();
        assert_eq!(routes.choose(&addr("8.8.8.8")), &Upstream::Direct);
        let e = routes.parse_rules("ok.example=direct\nnope").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
