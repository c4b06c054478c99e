//! A multi-queue TUN interface with one stack per queue, against the kernel: flows spread over the
//! queues, each stays with its stack, and connections a stack opens get their replies on its queue,
//! even after the kernel's own flow memory (about 3 s) has forgotten them.
//!
//! Needs root and `/dev/net/tun`; skips with a printed reason without them, and fails under
//! `FASTPATH_REQUIRE_TUN=1` (CI sets it).
#![cfg(target_os = "linux")]

mod tun_common;

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant as WallClock};

use fastpath::link::tun::ephemeral_share;
use fastpath::link::{TunConfig, TunLink};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use tun_common::*;

/// A kernel TCP echo server on `KERNEL:port` in `netns`, a thread per connection.
fn kernel_echo_server(netns: &str, port: u16) {
    let listener = in_netns(netns, move || {
        TcpListener::bind(SocketAddrV4::new(KERNEL, port))
    })
    .expect("bind the kernel's echo server");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// The number after `what` in `line` ("... 9 datagrams echoed ...": the word before).
fn number_before(line: &str, what: &str) -> u64 {
    let at = line
        .find(what)
        .unwrap_or_else(|| panic!("`{what}` in `{line}`"));
    line[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a number before `{what}` in `{line}`"))
}

#[test]
fn serve_spreads_flows_over_two_queues_and_its_active_open_works() {
    if !environment_ok("serve_spreads_flows_over_two_queues_and_its_active_open_works") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(
        &ns.0,
        &[
            "--queues",
            "2",
            "--connect",
            "10.7.0.1:7007",
            "--connect-delay",
            "3",
            "--send",
            "4000000",
        ],
    );
    kernel_echo_server(&ns.0, 7007);
    let netns = ns.0.clone();
    in_netns(&netns, || {
        // 40 UDP flows and 40 TCP connections, each from a port of its own.
        for i in 0..40u8 {
            let sock = UdpSocket::bind(SocketAddrV4::new(KERNEL, 0)).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let data = vec![i; 100 + usize::from(i)];
            sock.send_to(&data, SocketAddrV4::new(FASTPATH, ECHO))
                .unwrap();
            let mut buf = [0u8; 2048];
            let n = sock.recv(&mut buf).expect("a UDP echo");
            assert_eq!(&buf[..n], &data[..]);
        }
        for i in 0..40u8 {
            let mut c = TcpStream::connect_timeout(
                &SocketAddrV4::new(FASTPATH, ECHO).into(),
                Duration::from_secs(3),
            )
            .expect("connect to fastpath's echo");
            c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let data = vec![i; 3000];
            c.write_all(&data).unwrap();
            let mut back = vec![0u8; data.len()];
            c.read_exact(&mut back).expect("a TCP echo");
            assert_eq!(back, data);
        }
    });
    let out = server.wait_exit(Duration::from_secs(30));
    assert!(out.contains("2 queues, a stack on each"), "{out}");
    assert!(
        out.contains("client: 4000000 bytes sent, 4000000 bytes echoed back, intact"),
        "{out}"
    );
    assert!(out.contains("40 datagrams echoed"), "{out}");
    assert!(out.contains("tcp: 40 connections accepted"), "{out}");
    // Both queues served some of each: the kernel's flow hash spread them.
    let queues: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("--- queue "))
        .collect();
    assert_eq!(queues.len(), 2, "{out}");
    for q in &queues {
        assert!(number_before(q, "datagrams echoed") >= 5, "{out}");
        assert!(number_before(q, "connections accepted") >= 5, "{out}");
    }
    // No stack reset a connection it did not know (a flow steered to the wrong queue would be).
    let resets = out
        .lines()
        .filter(|l| l.trim().ends_with(" resets sent"))
        .count();
    assert_eq!(resets, 0, "{out}");
}

/// Four connections from each of two stacks on two queues of one interface, to a kernel echo
/// server: every one gets its replies after an idle gap longer than the kernel's flow memory.
#[test]
fn active_opens_from_every_queue_come_back_to_their_stack() {
    if !environment_ok("active_opens_from_every_queue_come_back_to_their_stack") {
        return;
    }
    let ns = TestNetns::create();
    let ephemeral = StackConfig::default().ephemeral_ports;
    let links = TunLink::open_queues(
        &TunConfig {
            name: "fpq0".into(),
            netns: Some(ns.0.clone()),
            ..TunConfig::default()
        },
        2,
        &ephemeral,
    )
    .expect("a two-queue TUN interface");
    let ip = |args: &[&str]| {
        let ok = std::process::Command::new("ip")
            .args(["-n", &ns.0])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip {args:?}");
    };
    ip(&["addr", "add", "10.7.0.1/24", "dev", "fpq0"]);
    ip(&["link", "set", "dev", "fpq0", "up"]);
    kernel_echo_server(&ns.0, 7008);

    let threads: Vec<_> = links
        .into_iter()
        .enumerate()
        .map(|(q, link)| {
            let share = ephemeral_share(&ephemeral, q, 2).unwrap();
            std::thread::spawn(move || -> Result<fastpath::Counters, String> {
                let tun = link.handle();
                let mut stack = Stack::new(StackConfig {
                    ephemeral_ports: share.clone(),
                    ..StackConfig::default()
                });
                stack.add_interface("fpq0", link, Ipv4Cidr::new(FASTPATH, 24));
                let to = SocketAddrV4::new(KERNEL, 7008);
                let mut conns: Vec<_> = (0..4)
                    .map(|_| stack.tcp_connect(to).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?;
                let run = |stack: &mut Stack, until: WallClock, round: u8| {
                    let mut got = vec![0usize; conns.len()];
                    let mut sent = vec![false; conns.len()];
                    loop {
                        stack.poll(Instant::now());
                        for (i, c) in conns.iter().enumerate() {
                            let mut s = stack.tcp(*c);
                            if !sent[i] && s.is_established() {
                                s.write(&[round; 500]).map_err(|e| e.to_string())?;
                                sent[i] = true;
                            }
                            let mut buf = [0u8; 1000];
                            if let Ok(n) = s.read(&mut buf) {
                                if buf[..n].iter().any(|&b| b != round) {
                                    return Err(format!("queue {q}: a wrong byte"));
                                }
                                got[i] += n;
                            }
                            if let Ok(Some(e)) = s.take_error() {
                                return Err(format!("queue {q}, connection {i}: {e}"));
                            }
                        }
                        stack.flush();
                        if got.iter().all(|&n| n == 500) {
                            return Ok(());
                        }
                        if WallClock::now() > until {
                            return Err(format!("queue {q}, round {round}: echoed {got:?}"));
                        }
                        let _ = tun.wait(Some(Duration::from_millis(10)));
                    }
                };
                let later = || WallClock::now() + Duration::from_secs(10);
                run(&mut stack, later(), 1)?;
                // Idle past the kernel's automatic flow steering's memory (3 s), polling for timers.
                let idle = WallClock::now() + Duration::from_millis(3500);
                while WallClock::now() < idle {
                    stack.poll(Instant::now());
                    let _ = tun.wait(Some(Duration::from_millis(50)));
                }
                run(&mut stack, later(), 2)?;
                for c in conns.drain(..) {
                    let (local, _) = stack.tcp(c).addrs().map_err(|e| e.to_string())?;
                    if !share.contains(&local.port()) {
                        return Err(format!(
                            "queue {q} used port {} outside {share:?}",
                            local.port()
                        ));
                    }
                    stack.tcp(c).close();
                }
                Ok(*stack.counters())
            })
        })
        .collect();
    for (q, t) in threads.into_iter().enumerate() {
        let counters = t
            .join()
            .expect("a stack's thread")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counters.tcp.out_rsts, 0, "queue {q} reset something");
        assert_eq!(counters.tcp.active_opens, 4, "queue {q}");
    }
}

/// `bench tun --queues 2` runs the several-senders workload against fastpath and against the ceiling
/// (a reader that drops what it reads), each on one queue and on two, and against linux.
#[test]
fn bench_tun_with_two_queues_measures_the_ceiling_beside_fastpath() {
    if !environment_ok("bench_tun_with_two_queues_measures_the_ceiling_beside_fastpath") {
        return;
    }
    let (_, text, rows) = bench_rows(&[
        "bench",
        "tun",
        "--quick",
        "--queues",
        "2",
        "--senders",
        "2",
        "--sizes",
        "64",
        "--json",
        "-",
    ]);
    let senders: Vec<(String, u64)> = rows
        .iter()
        .filter(|r| r["workload"] == "discard-senders")
        .map(|r| {
            let rate = r["datagrams_per_s"].as_f64().unwrap();
            assert!(rate.is_finite() && rate > 0.0, "{r}");
            assert!(r["server_cores"].as_f64().unwrap() > 0.0, "{r}");
            (
                r["server"].as_str().unwrap().to_string(),
                r["queues"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = [
        ("fastpath", 1),
        ("fastpath", 2),
        ("ceiling", 1),
        ("ceiling", 2),
        ("linux", 0),
    ]
    .iter()
    .map(|&(s, q)| (s.to_string(), q))
    .collect();
    assert_eq!(senders, expected, "{text}");
    // The ceiling runs only the several-senders workload.
    assert!(rows
        .iter()
        .all(|r| r["server"] != "ceiling" || r["workload"] == "discard-senders"));
    assert!(text.contains("ceiling: 2 queues over 1"), "{text}");
}
