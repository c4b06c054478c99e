//! A bulk TCP transfer between two stacks on an in-memory pair, through each front and through a
//! plain poll loop, interleaved: `cargo run --release -p fastpath-tokio --example pair_bench --
//! [MIB] [ROUNDS] [copy]` (100 MiB, 7 rounds by default).
//!
//! Every round runs the four ways once, in an order that rotates from round to round, and times
//! the transfer from the established connection to the last byte read:
//!
//! - `poll`: one thread polls both stacks and moves the bytes itself, as `fastpath bench tcp`'s pair
//!   does;
//! - `local`: the `LocalSet` front (`fastpath_tokio::Net`), a current-thread runtime;
//! - `send-mt`: the `Send` front (`fastpath_tokio::net`) on the multi-threaded runtime, 2 workers,
//!   the writer and reader spawned with `tokio::spawn`;
//! - `send-ct`: the `Send` front on a current-thread runtime (the lock's cost without a second
//!   thread).
//!
//! The application fills the send buffer in place and takes received bytes in place (`write_with`,
//! `read_with`), as the CLI's pair bench does; with `copy`, it writes from and reads into a 64 KiB
//! buffer of its own (`write`/`read`, and `AsyncWriteExt::write`/`AsyncReadExt::read` on the
//! fronts). It prints each round's seconds, then the medians, their ratios to `poll`, and the median of
//! each round's ratio to that round's `poll`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant as WallClock};

use fastpath::buf::BufferDepot;
use fastpath::link::{Impairments, LinkCapabilities, PairEnd};
use fastpath::{Instant, Ipv4Cidr, Stack, StackConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5001);
const CHUNK: usize = 64 << 10;

/// Two stacks on a pair (MTU 1500, default configuration), sharing a buffer depot as the CLI's pair
/// bench does.
fn stacks() -> (Stack, Stack) {
    let (ea, eb) = PairEnd::pair(
        LinkCapabilities::plain(1500),
        1 << 16,
        Impairments::default(),
    );
    let mut a = Stack::new(StackConfig::default());
    a.add_interface("pair0", ea, Ipv4Cidr::new(Ipv4Addr::new(10, 0, 0, 1), 24));
    let mut b = Stack::new(StackConfig::default());
    b.add_interface("pair0", eb, Ipv4Cidr::new(*SERVER.ip(), 24));
    let depot = BufferDepot::new();
    a.set_buffer_depot(depot.clone());
    b.set_buffer_depot(depot);
    (a, b)
}

/// The plain poll loop; seconds.
fn poll_loop(bytes: u64, copy: bool) -> f64 {
    let (mut a, mut b) = stacks();
    let l = b.tcp_listen(SERVER, 4).unwrap();
    let c = a.tcp_connect(SERVER).unwrap();
    let s = loop {
        a.poll(Instant::now());
        b.poll(Instant::now());
        if let Ok((s, _)) = b.tcp_listener(l).accept() {
            break s;
        }
    };
    let mut buf = vec![7u8; CHUNK];
    let start = WallClock::now();
    let (mut sent, mut got) = (0u64, 0u64);
    while got < bytes {
        while sent < bytes {
            let max = (bytes - sent).min(CHUNK as u64) as usize;
            let n = if copy {
                a.tcp(c).write(&buf[..max])
            } else {
                a.tcp(c).write_with(max, |room| room.len())
            };
            match n {
                Ok(0) | Err(_) => break,
                Ok(n) => sent += n as u64,
            }
        }
        a.poll(Instant::now());
        b.poll(Instant::now());
        loop {
            let n = if copy {
                b.tcp(s).read(&mut buf)
            } else {
                b.tcp(s).read_with(|d| d.len())
            };
            match n {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
    }
    start.elapsed().as_secs_f64()
}

/// The `LocalSet` front; seconds.
fn local_front(bytes: u64, copy: bool) -> f64 {
    use fastpath_tokio::{Net, TcpListener, TcpStream};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let (a, b) = stacks();
        let (a, b) = (Net::new(a), Net::new(b));
        tokio::task::spawn_local(a.clone().drive());
        tokio::task::spawn_local(b.clone().drive());
        let listener = TcpListener::bind(&b, SocketAddr::V4(SERVER), 4).unwrap();
        let mut conn = TcpStream::connect(&a, SocketAddr::V4(SERVER))
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let start = WallClock::now();
        let writer = tokio::task::spawn_local(async move {
            let buf = vec![7u8; CHUNK];
            let mut sent = 0u64;
            while sent < bytes {
                let max = (bytes - sent).min(CHUNK as u64) as usize;
                sent += if copy {
                    conn.write(&buf[..max]).await.unwrap()
                } else {
                    conn.write_with(max, |room| room.len()).await.unwrap()
                } as u64;
            }
            conn
        });
        let mut buf = vec![0u8; CHUNK];
        let mut got = 0u64;
        while got < bytes {
            got += if copy {
                server.read(&mut buf).await.unwrap()
            } else {
                server.read_with(|d| d.len()).await.unwrap()
            } as u64;
        }
        let took = start.elapsed().as_secs_f64();
        drop(writer.await.unwrap());
        took
    })
}

/// The `Send` front on `runtime`, writer and reader spawned; seconds.
fn send_front(runtime: tokio::runtime::Runtime, bytes: u64, copy: bool) -> f64 {
    use fastpath_tokio::net::{Net, TcpListener, TcpStream};
    let took = runtime.block_on(async {
        let (a, b) = stacks();
        let (a, b) = (Net::new(a), Net::new(b));
        let listener = TcpListener::bind(&b, SERVER).await.unwrap();
        let mut conn = TcpStream::connect(&a, SERVER).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let start = WallClock::now();
        let writer = tokio::spawn(async move {
            let buf = vec![7u8; CHUNK];
            let mut sent = 0u64;
            while sent < bytes {
                let max = (bytes - sent).min(CHUNK as u64) as usize;
                sent += if copy {
                    conn.write(&buf[..max]).await.unwrap()
                } else {
                    conn.write_with(max, |room| room.len()).await.unwrap()
                } as u64;
            }
            conn
        });
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; CHUNK];
            let mut got = 0u64;
            while got < bytes {
                got += if copy {
                    server.read(&mut buf).await.unwrap()
                } else {
                    server.read_with(|d| d.len()).await.unwrap()
                } as u64;
            }
            server
        });
        let server = reader.await.unwrap();
        let took = start.elapsed().as_secs_f64();
        drop((writer.await.unwrap(), server));
        took
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    took
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: u64 = args.first().map_or(100, |a| a.parse().expect("MiB"));
    let rounds: usize = args.get(1).map_or(7, |a| a.parse().expect("rounds"));
    let copy = args.iter().any(|a| a == "copy");
    // `only=NAME` runs one way alone (for a profiler).
    let only = args.iter().find_map(|a| a.strip_prefix("only="));
    let bytes = mib << 20;
    let names = ["poll", "local", "send-mt", "send-ct"];
    let run = |which: usize| -> f64 {
        match which {
            0 => poll_loop(bytes, copy),
            1 => local_front(bytes, copy),
            2 => send_front(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap(),
                bytes,
                copy,
            ),
            _ => send_front(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap(),
                bytes,
                copy,
            ),
        }
    };
    println!(
        "{mib} MiB over the in-memory pair, MTU 1500, {} application, {rounds} rounds",
        if copy { "copying" } else { "zero-copy" }
    );
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        let mut line = format!("round {round}:");
        for k in 0..names.len() {
            let which = (round + k) % names.len();
            if only.is_some_and(|o| o != names[which]) {
                continue;
            }
            let s = run(which);
            secs[which].push(s);
            line += &format!(" {} {s:.3}s", names[which]);
        }
        println!("{line}");
    }
    let base = median(secs[0].clone());
    for (name, s) in names.iter().zip(&secs) {
        if s.is_empty() {
            continue;
        }
        let m = median(s.clone());
        // Each round's ratio to that round's poll loop, whose median follows the machine's load
        // from round to round less than the ratio of the medians does.
        let paired = median(s.iter().zip(&secs[0]).map(|(x, p)| x / p).collect());
        println!(
            "{name:8} median {m:.3} s ({:.2} Gbit/s), {:.2}x poll (per round: median {paired:.2}x)",
            (bytes * 8) as f64 / m / 1e9,
            m / base
        );
    }
}
