//! `fastpath tunnel`: the transparent proxy ("tun2socks") of the `fastpath-tunnel` crate, on a TUN
//! interface this program makes.
//!
//! The applications live in a network namespace (made if missing, and then removed on exit) whose
//! default routes, IPv4 and IPv6, lead into a TUN interface; the tunnel, on the other end,
//! intercepts every TCP connection and UDP flow they open and relays it to its destination through
//! the host kernel's sockets (from the namespace `fastpath tunnel` runs in), directly or through the
//! proxies the routes name (`fastpath_tunnel::rules`). This file is the command's part: the options,
//! the namespace and the interface (`ip`), the descriptor limit, the signals, and the summary of
//! what was relayed, printed when it stops (SIGINT, SIGTERM or `--duration`).

use std::io::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use fastpath::link::{Link, TunConfig, TunLink};
use fastpath::{Ipv4Cidr, Ipv6Cidr, StackConfig};
use fastpath_tunnel::{Config, Routes, Stats, Tunnel, Upstream};

use crate::netns::Namespace;
use crate::pcap_tap::PcapTap;

#[derive(Args, Debug)]
pub struct TunnelArgs {
    /// The applications' network namespace (created if missing, and then removed on exit). Their
    /// names need a resolver they reach through the tunnel: one in /etc/netns/NAME/resolv.conf
    /// (ip-netns(8)), or --fake-dns.
    #[arg(long, default_value = "fptun")]
    netns: String,
    /// The TUN interface's name.
    #[arg(long, default_value = "fpt0")]
    tun: String,
    /// The kernel's address on the TUN interface (the applications' source address), with the
    /// link's prefix.
    #[arg(long, default_value = "10.66.0.1/24")]
    kernel_addr: Ipv4Cidr,
    /// fastpath's own address on the link (it answers ping).
    #[arg(long, default_value = "10.66.0.2")]
    addr: Ipv4Addr,
    /// The kernel's IPv6 address on the link, with its prefix: carries IPv6 through the tunnel too.
    #[arg(long, requires = "addr6")]
    kernel_addr6: Option<Ipv6Cidr>,
    /// fastpath's own IPv6 address on the link.
    #[arg(long, requires = "kernel_addr6")]
    addr6: Option<Ipv6Addr>,
    /// The TUN interface's MTU (segmentation offload carries up to 64 KiB per packet whatever it is).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(1280..=65535))]
    mtu: u32,
    /// Relay through this SOCKS5 server (RFC 1928; no authentication unless --socks5-user gives a
    /// user name): TCP with CONNECT, UDP with UDP ASSOCIATE. Without it, flows go straight to their
    /// destinations.
    #[arg(long, value_name = "ADDR:PORT")]
    socks5: Option<SocketAddr>,
    /// Authenticate to the SOCKS5 server with this user name (RFC 1929); the password is read from
    /// the environment variable FASTPATH_SOCKS5_PASSWORD, so that it does not show in the process
    /// list.
    #[arg(long, requires = "socks5", value_name = "USER")]
    socks5_user: Option<String>,
    /// Where flows go unless a --route says otherwise: `direct` (the default),
    /// `socks5://[USER@]IP:PORT` (as --socks5), or `http://[USER@]IP:PORT`, an HTTP proxy's CONNECT
    /// (RFC 9110; basic authentication with a user name). An HTTP proxy carries TCP only: UDP flows
    /// routed to one are dropped (counted in the summary). A user name's password is read from
    /// FASTPATH_PROXY_PASSWORD.
    #[arg(long, value_name = "UPSTREAM", conflicts_with = "socks5")]
    proxy: Option<String>,
    /// A route by destination, MATCH=UPSTREAM, repeatable: the first route that matches a connection
    /// or flow decides its upstream, else --proxy does. MATCH is a prefix (10.0.0.0/8,
    /// 2001:db8::/32) or an address, or, with --fake-dns, a domain: `example.com` matches the name
    /// and every name under it, `*.example.com` only the names under it. UPSTREAM as for --proxy.
    #[arg(long = "route", value_name = "MATCH=UPSTREAM")]
    routes: Vec<String>,
    /// Routes from a file, tried before any --route: a MATCH=UPSTREAM per line, `default=UPSTREAM`
    /// for the default, blank lines and `#` comments skipped.
    #[arg(long, value_name = "FILE")]
    routes_file: Option<PathBuf>,
    /// Answer the applications' DNS queries for IPv4 addresses (UDP to port 53, whatever the server)
    /// with addresses of this range, each standing for its name, and connect to the name when an
    /// application connects to one of them: through SOCKS5 the proxy resolves it (no query leaves
    /// outside the proxy), directly the host's resolver does. Queries for IPv6 addresses get none.
    /// 198.18.0.0/15 (set aside for benchmarking, RFC 2544) is the usual range.
    #[arg(long, value_name = "CIDR")]
    fake_dns: Option<Ipv4Cidr>,
    /// Bind every outgoing kernel socket to this interface (`SO_BINDTODEVICE`).
    #[arg(long)]
    bind_interface: Option<String>,
    /// Seconds to wait for a destination to accept a TCP connection (above 0).
    #[arg(long, default_value_t = 10.0, value_parser = crate::bench::common::parse_positive)]
    connect_timeout: f64,
    /// Seconds of silence after which a UDP flow expires.
    #[arg(long, default_value_t = 60.0, value_parser = crate::bench::common::parse_non_negative)]
    udp_idle: f64,
    /// UDP flows relayed at once, at most (at least 1).
    #[arg(long, default_value_t = 1024, value_parser = flow_limit)]
    max_udp_flows: usize,
    /// TCP connections relayed at once, at most (at least 1; further ones are reset). Each holds a
    /// kernel socket: the tunnel raises its descriptor limit to the hard limit, and says so if that
    /// is still too low.
    #[arg(long, default_value_t = 16384, value_parser = flow_limit)]
    max_tcp_flows: usize,
    /// Queues of the TUN interface (IFF_MULTI_QUEUE), 1 to 256: a stack and its relays per queue, each
    /// on a thread of its own; the kernel keeps each flow on one queue. `--max-tcp-flows` and
    /// `--max-udp-flows` are shared out among the queues.
    #[arg(long, default_value_t = 1, value_parser = crate::bench::common::count(1, 256))]
    queues: usize,
    /// Writes to the TUN interface through io_uring: a batch of packets in one system call, in place
    /// of a `write` each (left off, with a note, where the kernel refuses a ring).
    #[arg(long, value_enum, default_value_t = crate::serve::OnOff::On)]
    io_uring: crate::serve::OnOff,
    /// Write every packet on the TUN interface to this pcap file (with --queues 1 only).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = crate::bench::common::parse_non_negative)]
    duration: Option<f64>,
}

/// Parses a limit on flows relayed at once: 1 to 2^24 (0 would relay nothing).
fn flow_limit(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1 << 24).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{s}` is not a number of flows from 1 to {} (0 would relay nothing)",
            1 << 24
        )),
    }
}

/// Refuses a fake DNS range that overlaps the link's prefix: its pool would hand out the kernel's
/// and fastpath's own addresses as answers, and the applications would reach the link instead of
/// the names.
fn check_fake_dns(range: Ipv4Cidr, kernel: Ipv4Cidr) -> Result<(), String> {
    let (range_net, range_mask) = crate::serve::network(range);
    let (link_net, link_mask) = crate::serve::network(kernel);
    // Two prefixes overlap when the shorter one holds the other's network.
    let mask = range_mask & link_mask;
    if range_net & mask == link_net & mask {
        return Err(format!(
            "--fake-dns {range} overlaps the tunnel's link {} (--kernel-addr {kernel}): its \
             addresses would stand for names and the link's own (the kernel's, fastpath's) be \
             handed out as answers; give a range outside it, such as 198.18.0.0/15",
            crate::serve::prefix(kernel)
        ));
    }
    Ok(())
}

/// Refuses a `--bind-interface` that does not exist, rather than fail on every connection later.
fn check_bind_interface(name: &str) -> Result<(), String> {
    match nix::net::if_::if_nametoindex(name) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "--bind-interface {name}: no such network interface here ({e}); `ip link` lists them"
        )),
    }
}

/// The routes the options give: --routes-file's, then every --route, the default from --proxy or
/// --socks5; passwords filled in from the environment.
fn routes(args: &TunnelArgs) -> Result<Routes, String> {
    let mut routes = Routes::default();
    if let Some(path) = &args.routes_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--routes-file {}: {e}", path.display()))?;
        routes
            .parse_rules(&text)
            .map_err(|e| format!("--routes-file {}: {e}", path.display()))?;
    }
    for r in &args.routes {
        routes
            .rules
            .push(fastpath_tunnel::Rule::parse(r).map_err(|e| format!("--route {e}"))?);
    }
    if let Some(p) = &args.proxy {
        routes.default = Upstream::parse(p).map_err(|e| format!("--proxy {e}"))?;
    }
    if let Some(addr) = args.socks5 {
        let auth = match &args.socks5_user {
            None => None,
            Some(user) => {
                let password = std::env::var("FASTPATH_SOCKS5_PASSWORD").map_err(|_| {
                    "--socks5-user needs the password in FASTPATH_SOCKS5_PASSWORD".to_string()
                })?;
                Some(fastpath_tunnel::socks5::Credentials::new(
                    user.clone(),
                    password,
                )?)
            }
        };
        routes.default = Upstream::Socks5 { addr, auth };
    }
    if routes.upstreams().any(Upstream::needs_password) {
        let password = std::env::var("FASTPATH_PROXY_PASSWORD").map_err(|_| {
            "a proxy with a user name needs the password in FASTPATH_PROXY_PASSWORD".to_string()
        })?;
        for u in routes.upstreams_mut() {
            if u.needs_password() {
                u.set_password(&password)?;
            }
        }
    }
    Ok(routes)
}

/// How the banner says where flows go by default.
fn relaying(routes: &Routes) -> String {
    let default = match &routes.default {
        Upstream::Direct => "directly".to_string(),
        Upstream::Socks5 { addr, .. } => format!("through the SOCKS5 server at {addr}"),
        Upstream::Http { addr, .. } => format!("through the HTTP proxy at {addr}"),
    };
    match routes.rules.len() {
        0 => default,
        n => format!("{default} ({n} routes by destination)"),
    }
}

pub fn run(args: &TunnelArgs) -> Result<(), String> {
    // SAFETY: no other thread exists yet; SIG_IGN is a valid disposition. A relay writing to a
    // closed kernel socket must get EPIPE, not end the program.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    raise_descriptor_limit(args.max_tcp_flows + args.max_udp_flows);
    let kernel = args.kernel_addr;
    crate::serve::check_addresses(kernel, args.addr)?;
    let v6 = match (args.kernel_addr6, args.addr6) {
        (Some(k), Some(a)) => {
            crate::serve::check_addresses6(k, a)?;
            Some((k, a))
        }
        _ => None,
    };
    if let Some(range) = args.fake_dns {
        check_fake_dns(range, kernel)?;
    }
    if let Some(name) = &args.bind_interface {
        check_bind_interface(name)?;
    }
    if args.queues > 1 && args.pcap.is_some() {
        return Err("--pcap records one queue's link: use it with --queues 1".into());
    }
    let routes = routes(args)?;
    crate::netns::check_privileges("tunnel")?;
    let ns = Namespace::ensure(&args.netns)?;
    let ephemeral = StackConfig::default().ephemeral_ports;
    let links = TunLink::open_queues(
        &TunConfig {
            name: args.tun.clone(),
            netns: Some(ns.name().to_string()),
            mtu: args.mtu as usize,
            offload: true,
            uso: false,
            io_uring: args.io_uring == crate::serve::OnOff::On,
            tap: None,
        },
        args.queues,
        &ephemeral,
    )
    .map_err(|e| format!("creating TUN interface {} in {}: {e}", args.tun, ns.name()))?;
    crate::serve::note_io_uring(args.io_uring, &links);
    let dev = links[0].name().to_string();
    ns.ip(&["addr", "add", &kernel.to_string(), "dev", &dev])?;
    if let Some((k, _)) = v6 {
        ns.ip(&["-6", "addr", "add", &k.to_string(), "dev", &dev, "nodad"])?;
    }
    ns.ip(&["link", "set", "dev", &dev, "up"])?;
    // Everything the applications send that is not on the link goes into the tunnel.
    ns.ip(&["route", "replace", "default", "dev", &dev])?;
    if v6.is_some() {
        ns.ip(&["-6", "route", "replace", "default", "dev", &dev])?;
    }

    let queues = links.len();
    let banner = format!(
        "fastpath tunnel: ready; namespace {} routes through {dev} (fastpath at {}{}{}), relaying {}{}",
        ns.name(),
        args.addr,
        v6.map(|(_, a)| format!(" and {a}")).unwrap_or_default(),
        if queues > 1 {
            format!(", {queues} queues with a stack each")
        } else {
            String::new()
        },
        relaying(&routes),
        args.bind_interface
            .as_ref()
            .map(|i| format!(" through {i}"))
            .unwrap_or_default()
    );
    let mut config = Config::new(Ipv4Cidr::new(args.addr, kernel.prefix_len));
    config.addr6 = v6.map(|(k, a)| Ipv6Cidr::new(a, k.prefix_len));
    config.routes = routes;
    config.fake_dns = args.fake_dns;
    config.bind_interface = args.bind_interface.clone();
    config.connect_timeout = Duration::from_secs_f64(args.connect_timeout);
    config.udp_idle = Duration::from_secs_f64(args.udp_idle.max(0.001));
    config.max_tcp_flows = args.max_tcp_flows;
    config.max_udp_flows = args.max_udp_flows;
    let wrap: Option<fastpath_tunnel::LinkWrapper> = args.pcap.clone().map(|path| {
        Arc::new(move |link: TunLink, _queue: usize| {
            PcapTap::create(link, &path)
                .map(|tap| Box::new(tap) as Box<dyn Link>)
                .map_err(|e| format!("creating {}: {e}", path.display()))
        }) as fastpath_tunnel::LinkWrapper
    });
    // The signals are caught before the tunnel says it is ready, so that one sent on seeing the
    // banner stops it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let (mut int, mut term) = runtime
        .block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            Ok::<_, io::Error>((
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ))
        })
        .map_err(|e| e.to_string())?;
    let tunnel = Tunnel::start_links(links, config, wrap).map_err(|e| e.to_string())?;
    say(&banner);
    let duration = args.duration.map(Duration::from_secs_f64);
    runtime.block_on(async {
        let end = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = end => {}
        }
    });
    let stats = tunnel.join().map_err(|e| e.to_string())?;
    summary(&stats, args.fake_dns.is_some());
    drop(ns);
    Ok(())
}

/// Prints what was relayed and the stacks' drops.
fn summary(s: &Stats, fake_dns: bool) {
    let t = &s.totals;
    say(&format!(
        "tcp: {} connections relayed ({} refused, {} unreachable, {} timed out, {} reset, {} over the \
         limit, {} handshake first, {} open at exit, {} in the stack's tables), {} bytes up, {} down",
        t.tcp_flows,
        t.tcp_refused,
        t.tcp_unreachable,
        t.tcp_timed_out,
        t.tcp_reset,
        t.tcp_over_limit,
        t.tcp_handshake_first,
        t.tcp_live,
        s.connections,
        t.tcp_up,
        t.tcp_down
    ));
    say(&format!(
        "udp: {} flows ({} expired, {} datagrams over the flow limit, {} not sent, {} refused), {} bytes \
         up, {} down; {} datagrams up in {} segmented sends ({} flows refused them){}",
        t.udp_flows,
        t.udp_expired,
        t.udp_over_limit,
        t.udp_send_failed,
        t.udp_refused,
        t.udp_up,
        t.udp_down,
        t.udp_segmented_datagrams,
        t.udp_segmented_sends,
        t.udp_segmenting_refused,
        if t.udp_no_proxy > 0 {
            format!(
                "; {} datagrams dropped, routed to an HTTP proxy",
                t.udp_no_proxy
            )
        } else {
            String::new()
        }
    ));
    if fake_dns {
        say(&format!(
            "dns: {} queries answered, {} names held, {} flows to an address no name has",
            t.dns_answered, s.names, t.dns_unknown
        ));
    }
    let queues = s.queues.len();
    if queues > 1 {
        let list = |f: fn(&fastpath_tunnel::Totals) -> u64| {
            s.queues
                .iter()
                .map(|q| f(q).to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        };
        say(&format!(
            "queues: {} tcp connections, {} udp flows",
            list(|q| q.tcp_flows),
            list(|q| q.udp_flows)
        ));
    }
    say(&format!("drops in the stack: {}", s.drops));
    for (q, c) in s.counters.iter().enumerate() {
        for (reason, n) in c.drops.nonzero() {
            if queues > 1 {
                say(&format!("  {n:>10}  {} (queue {q})", reason.label()));
            } else {
                say(&format!("  {n:>10}  {}", reason.label()));
            }
        }
    }
}

/// Every relayed flow holds a kernel socket: lift the soft limit on descriptors to the hard one (as
/// Go's runtime does for gVisor's tun2socks), and warn when `flows` may still not fit.
fn raise_descriptor_limit(flows: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let limit = getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s);
    let needed = flows as u64 + 64;
    if limit < needed {
        eprintln!(
            "fastpath tunnel: at most {limit} descriptors (ulimit -n), fewer than the {needed} \
             that --max-tcp-flows and --max-udp-flows may use: flows past it fail and are reset"
        );
    }
}

fn say(line: &str) {
    let mut out = io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn a_fake_dns_range_overlapping_the_link_is_refused() {
        let link = cidr("10.66.0.1/24");
        for range in [
            "10.66.0.0/16",
            "10.66.0.0/24",
            "10.66.0.128/25",
            "10.0.0.0/8",
        ] {
            let e = check_fake_dns(cidr(range), link).unwrap_err();
            assert!(
                e.contains("--fake-dns") && e.contains("10.66.0.0/24"),
                "{e}"
            );
        }
        for range in ["198.18.0.0/15", "10.66.1.0/24", "10.67.0.0/16"] {
            assert_eq!(check_fake_dns(cidr(range), link), Ok(()), "{range}");
        }
    }

    fn args(list: &[&str]) -> TunnelArgs {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: TunnelArgs,
        }
        <Command as clap::Parser>::parse_from(std::iter::once("tunnel").chain(list.iter().copied()))
            .args
    }

    #[test]
    fn routes_come_from_the_file_then_each_route_with_the_default_from_the_options() {
        let file = std::env::temp_dir().join(format!("fp-routes-{}", std::process::id()));
        std::fs::write(
            &file,
            "# the office\n10.0.0.0/8 = direct\ndefault=socks5://127.0.0.1:1080\n",
        )
        .unwrap();
        let a = args(&[
            "--routes-file",
            file.to_str().unwrap(),
            "--route",
            "*.example.com=http://192.0.2.1:3128",
            "--proxy",
            "http://192.0.2.2:8080",
        ]);
        let r = routes(&a).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(r.rules.len(), 2);
        assert_eq!(r.rules[0].upstream, Upstream::Direct);
        assert_eq!(
            r.rules[1].matches,
            fastpath_tunnel::Match::parse("*.example.com").unwrap()
        );
        // --proxy sets the default over the file's.
        assert_eq!(r.default, Upstream::parse("http://192.0.2.2:8080").unwrap());
        assert_eq!(
            relaying(&r),
            "through the HTTP proxy at 192.0.2.2:8080 (2 routes by destination)"
        );
        let r = routes(&args(&["--socks5", "127.0.0.1:1080"])).unwrap();
        assert_eq!(relaying(&r), "through the SOCKS5 server at 127.0.0.1:1080");
        assert_eq!(relaying(&routes(&args(&[])).unwrap()), "directly");
        let e = routes(&args(&["--routes-file", "/nonexistent/routes"])).unwrap_err();
        assert!(e.starts_with("--routes-file /nonexistent/routes"), "{e}");
    }

    #[test]
    fn flow_limits_of_zero_are_refused() {
        assert!(flow_limit("0").is_err());
        assert_eq!(flow_limit("1"), Ok(1));
        assert!(flow_limit("-1").is_err());
    }
}
