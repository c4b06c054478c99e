//! Throughput of every checksum routine, in GB/s: a quick look, not a benchmark (`fastpath bench
//! checksum` is the measured experiment). Run with `cargo run --release --example checksum_throughput`.
//!
//! The candidates run in turn, round after round, and each keeps its best round, so a burst of load
//! from other tenants of the machine disturbs all of them alike.

use std::hint::black_box;
use std::time::Instant;

use fastpath::checksum::{self, Algorithm};

/// GB/s of each expression evaluated over and over on `len` bytes (a macro so each timed loop is
/// inlined: an indirect call would dominate the short cases).
macro_rules! compare {
    ($len:expr; $($e:expr),+ $(,)?) => {{
        let len: usize = $len;
        let iters = (4_000_000 / (len + 32)).max(4);
        let mut best = vec![f64::MAX; [$(stringify!($e)),+].len()];
        for round in 0..25 {
            let mut k = 0usize;
            $(
                let t = Instant::now();
                for _ in 0..iters {
                    black_box($e);
                }
                if round > 0 {
                    best[k] = best[k].min(t.elapsed().as_secs_f64());
                }
                k += 1;
            )+
            let _ = k;
        }
        best.iter().map(|t| (len * iters) as f64 / t / 1e9).collect::<Vec<f64>>()
    }};
}

fn main() {
    let mut buf = vec![0u8; 1 << 17];
    fastpath::rng::Rng::new(0x5eed).fill(&mut buf);
    let mut out = vec![0u8; 1 << 17];
    // Destination 32-byte aligned plus 8: not vector-aligned.
    let doff = (32 - out.as_ptr() as usize % 32) % 32 + 8;
    println!(
        "avx2 available: {}, avx512 available: {}",
        Algorithm::Avx2.is_available(),
        Algorithm::Avx512.is_available()
    );
    let names = [
        "rfc1071",
        "unrolled32",
        "wide",
        "avx2",
        "avx512",
        "fast",
        "copy_and_sum",
        "copy_and_sum_portable",
        "copy avx2",
        "copy avx512",
        "memcpy",
    ];
    let sizes = [64, 256, 512, 1024, 1500, 8192, 65536];
    let mut table = vec![Vec::new(); names.len()];
    for n in sizes {
        let src = &buf[..n];
        let (mut o1, mut o2, mut o3) = (out.clone(), out.clone(), out.clone());
        let (mut o4, mut o5) = (out.clone(), out.clone());
        let r = compare!(n;
            checksum::rfc1071(black_box(src)),
            checksum::unrolled32(black_box(src)),
            checksum::wide(black_box(src)),
            Algorithm::Avx2.sum(black_box(src)),
            Algorithm::Avx512.sum(black_box(src)),
            checksum::fast(black_box(src)),
            checksum::copy_and_sum(&mut o1[doff..doff + n], black_box(src)),
            checksum::copy_and_sum_portable(&mut o2[doff..doff + n], black_box(src)),
            Algorithm::Avx2.copy_and_sum(&mut o4[doff..doff + n], black_box(src)),
            Algorithm::Avx512.copy_and_sum(&mut o5[doff..doff + n], black_box(src)),
            {
                o3[doff..doff + n].copy_from_slice(black_box(src));
                black_box(&mut o3);
            },
        );
        for (row, v) in table.iter_mut().zip(r) {
            row.push(v);
        }
    }
    print!("{:>22}", "bytes:");
    for n in sizes {
        print!(" {n:>9}");
    }
    println!("   (GB/s)");
    for (name, row) in names.iter().zip(&table) {
        print!("{name:>22}");
        for v in row {
            print!(" {v:9.2}");
        }
        println!();
    }
    let h: [u8; 20] = buf[..20].try_into().expect("20 bytes");
    let r = compare!(20; checksum::ipv4_header_sum(black_box(&h)), checksum::wide(black_box(&h)));
    println!(
        "20-byte header: ipv4_header_sum {:.2} GB/s, wide {:.2} GB/s",
        r[0], r[1]
    );
    out[0] = 0;
}
