//! `fastpath demo`: the smoke test a newcomer runs.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant as WallClock};

use clap::Args;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use indicatif::{ProgressBar, ProgressStyle};

/// Options of `fastpath demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// MTU of the in-memory link.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(68..))]
    mtu: u16,
    /// Send every `step`-th size from 1 to 65507 (1 sends them all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    step: u32,
    /// Use the 4.3BSD `classic` configuration instead of the fastest default.
    #[arg(long)]
    classic: bool,
}

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const ECHO_PORT: u16 = 7;

/// Polls both stacks until neither moves a packet.
fn settle(a: &mut Stack, b: &mut Stack, now: Instant) {
    while a.poll(now) + b.poll(now) > 0 {}
}

/// Runs the demo; an error means a datagram went missing or came back wrong.
pub fn run(args: &DemoArgs) -> Result<(), String> {
    let config = if args.classic {
        StackConfig::classic()
    } else {
        StackConfig::default()
    };
    let (end_a, end_b) = PairEnd::pair(
        LinkCapabilities::plain(args.mtu as usize),
        65536,
        Impairments::default(),
    );
    let mut a = Stack::new(config.clone());
    a.add_interface("pair0", end_a, Ipv4Cidr::new(A, 24));
    let mut b = Stack::new(config);
    b.add_interface("pair0", end_b, Ipv4Cidr::new(B, 24));
    let depot = fastpath::buf::BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    println!(
        "two stacks, A {A} and B {B}, on an in-memory link with MTU {}; configuration: {}",
        args.mtu,
        if args.classic { "classic" } else { "default" }
    );

    let client = a
        .udp_bind(SocketAddrV4::new(A, 0))
        .map_err(|e| e.to_string())?;
    let server = b
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ECHO_PORT))
        .map_err(|e| e.to_string())?;
    let echo = SocketAddrV4::new(B, ECHO_PORT);

    let sizes: Vec<usize> = (1..=65507)
        .step_by(args.step as usize)
        .chain([65507])
        .collect();
    let bar = ProgressBar::new(sizes.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len}").expect("valid template"),
    );
    bar.set_message("echoing datagrams");

    let started = WallClock::now();
    let now = Instant::ZERO;
    let mut sent_bytes = 0u64;
    let mut out = vec![0u8; 65536];
    let mut pattern = vec![0u8; 65507];
    let mut last = 0;
    for (i, &len) in sizes.iter().enumerate() {
        if len == last {
            continue;
        }
        last = len;
        for (j, byte) in pattern[..len].iter_mut().enumerate() {
            *byte = (j.wrapping_mul(31) ^ len ^ i) as u8;
        }
        a.udp(client)
            .send_to(&pattern[..len], echo)
            .map_err(|e| format!("send of {len} bytes: {e}"))?;
        settle(&mut a, &mut b, now);
        // B's application echoes what it received.
        let (n, from) = b
            .udp(server)
            .recv_from(&mut out)
            .map_err(|e| format!("B received nothing for {len} bytes: {e}"))?;
        b.udp(server)
            .send_to(&out[..n], from)
            .map_err(|e| e.to_string())?;
        settle(&mut a, &mut b, now);
        let (m, _) = a
            .udp(client)
            .recv_from(&mut out)
            .map_err(|e| format!("no echo of {len} bytes: {e}"))?;
        if m != len || out[..m] != pattern[..len] {
            return Err(format!(
                "the echo of {len} bytes came back wrong ({m} bytes)"
            ));
        }
        sent_bytes += len as u64;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    println!(
        "echoed {} datagrams of 1 to 65507 bytes ({:.1} MB each way) in {:.2?}; every payload verified",
        sizes.len().min(65507),
        sent_bytes as f64 / 1e6,
        elapsed
    );

    a.send_echo_request(B, 0x1234, 1, b"fastpath ping")
        .map_err(|e| e.to_string())?;
    settle(&mut a, &mut b, now + Duration::from_millis(1));
    match a.recv_echo_reply() {
        Some(r) if r.from == B && r.seq_no == 1 && r.data == b"fastpath ping" => {
            println!(
                "ping {B}: echo reply, seq {}, {} bytes",
                r.seq_no,
                r.data.len()
            )
        }
        other => return Err(format!("ping {B}: no proper reply ({other:?})")),
    }

    let closed = SocketAddrV4::new(B, 9999);
    a.udp(client)
        .send_to(b"anyone?", closed)
        .map_err(|e| e.to_string())?;
    settle(&mut a, &mut b, now + Duration::from_millis(2));
    println!(
        "datagram to closed port {closed}: B answered port unreachable ({} sent)",
        b.counters().icmp.out_dest_unreachs
    );

    for (name, stack) in [("A", &a), ("B", &b)] {
        println!("\n--- counters of {name} ---\n{}", stack.counters());
        println!("{}", buffer_line(stack));
    }
    Ok(())
}

/// One line on a stack's buffers: the pool's counters and what it holds free.
pub fn buffer_line(stack: &Stack) -> String {
    let (pool, free, bytes) = stack.pool_stats();
    format!(
        "buffers: {} reused, {} allocated, {} recycled, {} released; {free} free ({} KiB)",
        pool.reused,
        pool.allocated,
        pool.recycled,
        pool.released,
        bytes / 1024
    )
}
