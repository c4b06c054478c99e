//! fastpath's TCP against the Linux kernel's, over a TUN interface: the kernel as client (echo,
//! discard, chargen, a closed port, a thousand connections at once) and as server (fastpath's
//! `serve --connect` client), at MTU 1500 and 9000, with checksum offload on and off, and through a
//! wire that loses, duplicates, reorders and corrupts packets. Every byte is checked.
//!
//! Needs root, `/dev/net/tun` and `ip`; see `tun_common::environment_ok`.
#![cfg(target_os = "linux")]

mod tun_common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::Duration;

use nix::sys::signal::Signal;
use tun_common::*;

/// Byte `i` of the pattern `fastpath serve`'s chargen and client send (the same function as
/// `tcp_services::pattern_byte`: it is the contract between the two).
fn pattern_byte(i: u64) -> u8 {
    ((i % 251) as u8) ^ ((i / 251) as u8).rotate_left(3)
}

fn pattern(at: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|k| pattern_byte(at + k)).collect()
}

fn fastpath_addr(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(FASTPATH, port))
}

/// The kernel connects to fastpath's echo port, sends `len` bytes while reading the echo, and
/// checks every byte that comes back. Returns the seconds it took.
fn kernel_echo(netns: &str, len: usize) -> f64 {
    in_netns(netns, move || {
        let start = std::time::Instant::now();
        let s = TcpStream::connect_timeout(&fastpath_addr(ECHO), Duration::from_secs(5))
            .expect("connect to fastpath echo");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let mut at = 0u64;
            while (at as usize) < len {
                let chunk = pattern(at, (len - at as usize).min(1 << 20));
                w.write_all(&chunk).expect("write to fastpath echo");
                at += chunk.len() as u64;
            }
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut r = s;
        let mut got = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).expect("read the echo");
            if n == 0 {
                break;
            }
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(
                    b,
                    pattern_byte(got + k as u64),
                    "echo byte {}",
                    got + k as u64
                );
            }
            got += n as u64;
        }
        writer.join().unwrap();
        assert_eq!(got, len as u64, "echoed bytes");
        start.elapsed().as_secs_f64()
    })
}

/// The kernel sends `len` bytes to discard, then reads chargen's pattern for `len` bytes.
fn kernel_discard_and_chargen(netns: &str, len: usize) {
    in_netns(netns, move || {
        let mut s = TcpStream::connect_timeout(&fastpath_addr(DISCARD), Duration::from_secs(5))
            .expect("connect to discard");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(&pattern(0, len)).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        assert_eq!(s.read(&mut [0u8; 16]).expect("discard closes"), 0);

        let mut s = TcpStream::connect_timeout(&fastpath_addr(19), Duration::from_secs(5))
            .expect("connect to chargen");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        while (got as usize) < len {
            let n = s.read(&mut buf).expect("read chargen");
            assert!(n > 0, "chargen closed early");
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(
                    b,
                    pattern_byte(got + k as u64),
                    "chargen byte {}",
                    got + k as u64
                );
            }
            got += n as u64;
        }
    })
}

/// A port with no listener: the kernel's connect is refused by fastpath's RST.
fn kernel_refused(netns: &str) {
    in_netns(netns, || {
        let err = TcpStream::connect_timeout(&fastpath_addr(5555), Duration::from_secs(5))
            .expect_err("connect to a closed port");
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    })
}

/// `n` connections open at once, each echoing its own 8 bytes.
fn kernel_many(netns: &str, n: usize) {
    in_netns(netns, move || {
        let mut conns = Vec::new();
        for i in 0..n {
            let s = TcpStream::connect_timeout(&fastpath_addr(ECHO), Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            conns.push(s);
        }
        for (i, s) in conns.iter_mut().enumerate() {
            s.write_all(&(i as u64).to_be_bytes()).unwrap();
        }
        for (i, s) in conns.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            s.read_exact(&mut b).unwrap();
            assert_eq!(u64::from_be_bytes(b), i as u64);
        }
        for s in &conns {
            s.shutdown(Shutdown::Write).unwrap();
        }
        for s in conns.iter_mut() {
            assert_eq!(s.read(&mut [0u8; 1]).unwrap(), 0);
        }
    })
}

/// An echo server in the kernel, in `netns`, on `port`: one thread per connection.
fn kernel_echo_server(netns: &str, port: u16) {
    let listener = in_netns(netns, move || {
        TcpListener::bind(SocketAddrV4::new(KERNEL, port)).expect("kernel listen")
    });
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { break };
            std::thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
}

const BULK: usize = 64 << 20;

fn kernel_client(mtu: u32, offload: bool) {
    let ns = TestNetns::create();
    let server = Server::start(
        &ns.0,
        &[
            "--mtu",
            &mtu.to_string(),
            "--offload",
            if offload { "on" } else { "off" },
        ],
    );
    let secs = kernel_echo(&ns.0, BULK);
    eprintln!(
        "mtu {mtu} offload {offload}: 64 MiB echoed in {secs:.2} s ({:.2} Gbit/s each way)",
        BULK as f64 * 8.0 / secs / 1e9
    );
    kernel_discard_and_chargen(&ns.0, BULK / 4);
    kernel_refused(&ns.0);
    kernel_many(&ns.0, 1000);
    let out = server.stop(Signal::SIGTERM);
    assert!(out.contains("stopped (signal)"), "{out}");
    assert!(counter(&out, "passive opens") >= 1003, "{out}");
    assert!(out.contains(", 0 errors"), "{out}");
    assert_eq!(counter(&out, "tcp: bad checksum"), 0, "{out}");
    assert_eq!(counter(&out, "datagrams fragmented"), 0, "{out}");
    assert!(counter(&out, "resets sent") >= 1, "{out}");
    let offloaded = counter(&out, "sent with checksum offloaded (NEEDS_CSUM)");
    if offload {
        assert!(offloaded > 1000, "{out}");
        // Segmentation offload both ways: the kernel's TSO reaches fastpath whole, and fastpath's
        // large segments are cut by the kernel.
        let whole = counter(&out, "TCP GSO packets taken whole (GRO)");
        assert!(whole > 0, "{out}");
        // After the first, they are read straight into large buffers, not gathered and copied.
        let direct = counter(&out, "of those, read straight into a large buffer");
        assert!(direct * 2 > whole, "{direct} of {whole} direct: {out}");
        assert!(
            counter(&out, "sent as TCP segmentation offload (GSO)") > 0,
            "{out}"
        );
    } else {
        assert_eq!(offloaded, 0, "{out}");
    }
}

#[test]
fn tcp_kernel_client_mtu_1500_offload_on() {
    if environment_ok("tcp_kernel_client_mtu_1500_offload_on") {
        kernel_client(1500, true);
    }
}

#[test]
fn tcp_kernel_client_mtu_9000_offload_off() {
    if environment_ok("tcp_kernel_client_mtu_9000_offload_off") {
        kernel_client(9000, false);
    }
}

/// fastpath connects to the kernel's echo server and checks its pattern comes back.
fn fastpath_client(ns: &TestNetns, bytes: usize, extra: &[&str]) -> String {
    kernel_echo_server(&ns.0, 7777);
    let send = bytes.to_string();
    let mut args = vec!["--connect", "10.7.0.1:7777", "--send", &send];
    args.extend_from_slice(extra);
    let server = Server::start(&ns.0, &args);
    let out = server.wait_exit(Duration::from_secs(90));
    assert!(out.contains("stopped (client done)"), "{out}");
    assert!(
        out.contains(&format!(
            "client: {bytes} bytes sent, {bytes} bytes echoed back, intact"
        )),
        "{out}"
    );
    out
}

#[test]
fn tcp_fastpath_client_to_kernel_server() {
    if environment_ok("tcp_fastpath_client_to_kernel_server") {
        let ns = TestNetns::create();
        let out = fastpath_client(&ns, BULK, &[]);
        assert!(counter(&out, "active opens") == 1, "{out}");
    }
}

/// The wire between the kernel and fastpath loses, duplicates, reorders and corrupts packets both
/// ways, and delays what fastpath receives by 2 ms (`serve --impair`; this machine's kernel has no
/// `netem`).
const IMPAIR: &str = "loss=0.01,duplicate=0.005,reorder=0.02,corrupt=0.003,seed=7,delay=2";

#[test]
fn tcp_through_loss_duplication_reordering_corruption_and_delay() {
    if environment_ok("tcp_through_loss_duplication_reordering_corruption_and_delay") {
        let ns = TestNetns::create();
        // MTU-sized packets (no segmentation offload): thousands of them, so every impairment
        // happens.
        let server = Server::start(&ns.0, &["--impair", IMPAIR, "--offload", "off"]);
        let secs = kernel_echo(&ns.0, 4 << 20);
        eprintln!("impaired echo of 4 MiB: {secs:.1} s");
        let out = server.stop(Signal::SIGTERM);
        assert!(out.contains(", 0 errors"), "{out}");
        assert!(counter(&out, "segments retransmitted") > 0, "{out}");
        assert!(counter(&out, "tcp: bad checksum") > 0, "{out}");
        // And fastpath as the client through the same wire.
        let ns = TestNetns::create();
        // With offload, segments of up to 64 KiB cross the impaired wire whole: about 90 of them
        // carry the 4 MiB, so the loss rate is set for some to be lost whatever the ACKs around
        // them (at 3%, 0.97^86: about one run in 14 would lose none, as one did).
        let out = fastpath_client(
            &ns,
            4 << 20,
            &[
                "--impair",
                "loss=0.06,duplicate=0.01,reorder=0.03,seed=3,delay=1",
            ],
        );
        assert!(counter(&out, "segments retransmitted") > 0, "{out}");
    }
}
