//! IPv6 between the Linux kernel and fastpath over a TUN interface (`fastpath serve --kernel-addr6
//! --addr6`): the kernel's `ping -6` is answered, and what the kernel sends on a link as it comes up
//! (multicast listener reports, router solicitations) is dropped by name, not misread.
//!
//! These tests need root, `/dev/net/tun`, `ip` and `ping`. Without them they print why and pass, unless
//! `FASTPATH_REQUIRE_TUN=1`, as in CI, where they fail.

mod tun_common;

use std::process::Command;

use nix::sys::signal::Signal;
use tun_common::*;

const KERNEL6: &str = "fd00:7::1/64";
const FASTPATH6: &str = "fd00:7::2";

/// The counter `what` in section `section` (`ip6:`, `icmp6:`) of `serve`'s output: the indented lines
/// after the section's own.
fn counter_in(output: &str, section: &str, what: &str) -> u64 {
    let lines: Vec<&str> = output
        .lines()
        .skip_while(|l| *l != section)
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .collect();
    counter(&lines.join("\n"), what)
}

/// `ip netns exec NETNS ping -6 ...`; panics unless every reply came.
fn ping6(netns: &str, size: usize) {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "1",
        ])
        .args(["-s", &size.to_string(), FASTPATH6])
        .output()
        .expect("run ping -6");
    assert!(
        out.status.success(),
        "ping -6 -s {size} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kernel_pings_fastpath_over_ipv6() {
    if !environment_ok("kernel_pings_fastpath_over_ipv6") {
        return;
    }
    let ns = TestNetns::create();
    let server = Server::start(&ns.0, &["--kernel-addr6", KERNEL6, "--addr6", FASTPATH6]);
    ping6(&ns.0, 56);
    ping6(&ns.0, 1000);
    let out = server.stop(Signal::SIGTERM);
    assert!(out.contains("stopped (signal)"), "{out}");
    assert!(
        counter_in(&out, "icmp6:", "echo replies sent") >= 6,
        "{out}"
    );
    assert!(
        counter_in(&out, "icmp6:", "echo requests received") >= 6,
        "{out}"
    );
    // Nothing IPv6 was malformed or misread.
    for bad in [
        "ipv6: truncated",
        "ipv6: bad source address",
        "ipv6: extension header truncated",
        "icmpv6: bad checksum",
        "icmpv6: truncated",
    ] {
        assert_eq!(counter(&out, bad), 0, "{bad}:\n{out}");
    }
}

#[test]
fn serve_refuses_bad_ipv6_addresses() {
    let fastpath = env!("CARGO_BIN_EXE_fastpath");
    for (kernel, addr, why) in [
        ("fd00:7::1/64", "fd00:8::2", "outside the kernel's prefix"),
        ("fd00:7::1/64", "fd00:7::1", "the kernel's own address"),
        ("fd00:7::1/64", "ff02::1", "not a unicast address"),
        ("fd00:7::1/127", "fd00:7::0", "leaves no room"),
    ] {
        let out = Command::new(fastpath)
            .args(["serve", "--netns", "fp-never-made", "--duration", "0"])
            .args(["--kernel-addr6", kernel, "--addr6", addr])
            .output()
            .expect("run fastpath serve");
        assert!(!out.status.success(), "{kernel} {addr} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{kernel} {addr}: {err}");
    }
    // One without the other is a usage error.
    let out = Command::new(fastpath)
        .args(["serve", "--addr6", "fd00:7::2", "--duration", "0"])
        .output()
        .expect("run fastpath serve");
    assert!(!out.status.success());
}
