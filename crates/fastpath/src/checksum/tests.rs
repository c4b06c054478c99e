//! Tests of the checksum module. `rfc1071` is the oracle for everything else.

use super::*;
use proptest::prelude::*;
use std::net::Ipv4Addr;

/// xorshift64 (Marsaglia): a small deterministic generator for test contents.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `0..=max` for tests.
    fn below_or_eq(&mut self, max: usize) -> usize {
        (self.next_u64() % (max as u64 + 1)) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let x = self.next_u64().to_le_bytes();
        let rest = chunks.into_remainder();
        let n = rest.len();
        rest.copy_from_slice(&x[..n]);
    }
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    XorShift::new(seed).fill(&mut v);
    v
}

/// A fused copy under test.
type Copier = fn(&mut [u8], &[u8]) -> u16;

/// A summing function under test.
type SumFn = fn(&[u8]) -> u16;

/// Every implementation of the plain sum that the module has, with a name for messages.
fn all_sums() -> Vec<(&'static str, SumFn)> {
    vec![
        ("unrolled32", unrolled32),
        ("wide", wide),
        ("avx2", |d| Algorithm::Avx2.sum(d)),
        ("avx512", |d| Algorithm::Avx512.sum(d)),
        ("fast", fast),
        ("fastest", |d| Algorithm::fastest().sum(d)),
    ]
}

/// The AVX2 fused copy at every length (the portable one where AVX2 is missing).
fn avx2_copy(dst: &mut [u8], src: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx2) = x86::Avx2::detect() {
        return avx2.copy_and_sum(dst, src);
    }
    copy_and_sum_portable(dst, src)
}

/// The AVX-512 fused copy at every length (the portable one where AVX-512 is missing).
fn avx512_copy(dst: &mut [u8], src: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx512) = avx512::Avx512::detect() {
        return avx512.copy_and_sum(dst, src);
    }
    copy_and_sum_portable(dst, src)
}

/// Sums `data` through a [`Checksum`] fed in up to three pieces cut at `a` and `b`, each piece
/// by a different route (fast, a chosen algorithm, the fused copy, a precomputed piece sum).
fn pieces_sum(data: &[u8], a: usize, b: usize, alg: Algorithm, scratch: &mut Vec<u8>) -> u16 {
    let mut c = Checksum::new();
    c.add_bytes(&data[..a]);
    c.add_bytes_with(alg, &data[a..b]);
    scratch.clear();
    scratch.resize(data.len() - b, 0);
    c.copy_and_add(scratch, &data[b..]);
    assert_eq!(&scratch[..], &data[b..], "copy_and_add copy");
    assert_eq!(c.len(), data.len());
    assert_eq!(c.is_empty(), data.is_empty());
    let via_add_bytes = c.sum();

    let mut d = Checksum::new();
    d.add_piece(rfc1071(&data[..a]), a);
    d.add_piece(rfc1071(&data[a..b]), b - a);
    d.add_piece(rfc1071(&data[b..]), data.len() - b);
    assert_eq!(d.sum(), via_add_bytes, "add_piece vs add_bytes");
    assert_eq!(d.checksum(), !via_add_bytes);
    via_add_bytes
}

// ---------------------------------------------------------------------------------------------
// Known values.

#[test]
fn rfc1071_vector() {
    let v = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(rfc1071(&v), 0xddf2);
    for (name, f) in all_sums() {
        assert_eq!(f(&v), 0xddf2, "{name}");
    }
    for alg in Algorithm::ALL {
        assert_eq!(alg.sum(&v), 0xddf2, "{alg}");
    }
    let mut out = [0u8; 8];
    assert_eq!(copy_and_sum(&mut out, &v), 0xddf2);
    assert_eq!(out, v);
    assert_eq!(copy_and_sum_portable(&mut out, &v), 0xddf2);
    let mut c = Checksum::new();
    c.add_bytes(&v[..1]);
    c.add_bytes(&v[1..5]);
    c.add_bytes(&v[5..]);
    assert_eq!(c.sum(), 0xddf2);
    assert_eq!(c.checksum(), 0x220d);
}

#[test]
fn small_known_values() {
    assert_eq!(rfc1071(&[]), 0);
    assert_eq!(rfc1071(&[0xab]), 0xab00, "odd byte is padded on its right");
    assert_eq!(rfc1071(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    assert_eq!(rfc1071(&[0xff, 0xff]), 0xffff);
    assert_eq!(
        rfc1071(&[0xff, 0xff, 0x00, 0x01]),
        0x0001,
        "end-around carry"
    );
    for (name, f) in all_sums() {
        assert_eq!(f(&[]), 0, "{name}");
        assert_eq!(f(&[0xab]), 0xab00, "{name}");
        assert_eq!(f(&[0xff, 0xff, 0x00, 0x01]), 0x0001, "{name}");
    }
}

#[test]
fn add_is_ones_complement() {
    assert_eq!(add(0, 0), 0);
    assert_eq!(add(0xffff, 0), 0xffff);
    assert_eq!(add(0xffff, 0xffff), 0xffff);
    assert_eq!(add(0xffff, 1), 1);
    assert_eq!(add(0x8000, 0x8000), 1);
    assert_eq!(add(0x1234, 0x4321), 0x5555);
}

// ---------------------------------------------------------------------------------------------
// Exhaustive: every length 0..=2048 at every start offset 0..=63.

const MAX_LEN: usize = 2048;
const MAX_OFFSET: usize = 63;

#[test]
fn every_length_and_offset_sums() {
    let buf = random_bytes(0x5eed_0001, MAX_LEN + MAX_OFFSET + 1);
    let sums = all_sums();
    for off in 0..=MAX_OFFSET {
        for len in 0..=MAX_LEN {
            let data = &buf[off..off + len];
            let want = rfc1071(data);
            for (name, f) in &sums {
                assert_eq!(f(data), want, "{name}: len {len} offset {off}");
            }
        }
    }
}

#[test]
fn every_length_and_offset_copies() {
    let buf = random_bytes(0x5eed_0002, MAX_LEN + MAX_OFFSET + 1);
    let mut out = vec![0u8; MAX_LEN + MAX_OFFSET + 1];
    for off in 0..=MAX_OFFSET {
        // Misalign the destination differently from the source.
        let doff = (off * 7 + 3) % (MAX_OFFSET + 1);
        for len in 0..=MAX_LEN {
            let src = &buf[off..off + len];
            let want = rfc1071(src);
            let copiers: [(&str, Copier); 4] = [
                ("copy_and_sum", copy_and_sum),
                ("copy_and_sum_portable", copy_and_sum_portable),
                ("avx2 copy kernel", avx2_copy),
                ("avx512 copy kernel", avx512_copy),
            ];
            for (name, f) in copiers {
                let dst = &mut out[doff..doff + len];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = !*s;
                }
                assert_eq!(f(dst, src), want, "{name}: len {len} offset {off}");
                assert!(dst == src, "{name} copy: len {len} offset {off}");
            }
        }
    }
}

#[test]
fn every_length_and_offset_pieces() {
    let buf = random_bytes(0x5eed_0003, MAX_LEN + MAX_OFFSET + 1);
    let mut rng = XorShift::new(0x5eed_0004);
    let mut scratch = Vec::new();
    for off in 0..=MAX_OFFSET {
        for len in 0..=MAX_LEN {
            let data = &buf[off..off + len];
            let want = rfc1071(data);
            let a = rng.below_or_eq(len);
            let b = a + rng.below_or_eq(len - a);
            let alg = Algorithm::ALL[(off + len) % Algorithm::ALL.len()];
            assert_eq!(
                pieces_sum(data, a, b, alg, &mut scratch),
                want,
                "pieces {a}/{b} of len {len} offset {off} via {alg}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Long inputs: 16 MiB, random and the two folding extremes. These cross the AVX2 kernel's
// block boundary (512 KiB) many times; all-zero and all-0xff bytes drive its biased 32-bit
// lanes to their most negative and most positive values.

#[test]
fn sixteen_mib_inputs() {
    const LEN: usize = 16 << 20;
    let random = random_bytes(0x5eed_0005, LEN + 3);
    let zeros = vec![0u8; LEN];
    let ones = vec![0xffu8; LEN];
    let mut out = vec![0u8; LEN + 2];
    let inputs: [(&str, &[u8]); 5] = [
        ("random", &random[..LEN]),
        ("random+odd", &random[1..LEN + 2]),
        ("random-1", &random[3..LEN + 2]),
        ("zeros", &zeros),
        ("0xff", &ones),
    ];
    for (what, data) in inputs {
        let want = rfc1071(data);
        match what {
            "zeros" => assert_eq!(want, 0),
            "0xff" => assert_eq!(want, 0xffff),
            _ => {}
        }
        for alg in Algorithm::ALL {
            assert_eq!(alg.sum(data), want, "{alg} on 16 MiB {what}");
        }
        for (name, f) in all_sums() {
            assert_eq!(f(data), want, "{name} on 16 MiB {what}");
        }
        let dst = &mut out[1..1 + data.len()];
        dst.fill(0x55);
        assert_eq!(
            copy_and_sum(dst, data),
            want,
            "copy_and_sum on 16 MiB {what}"
        );
        assert!(&dst[..] == data, "copy_and_sum copy on 16 MiB {what}");
        dst.fill(0x55);
        assert_eq!(
            copy_and_sum_portable(dst, data),
            want,
            "portable copy on {what}"
        );
        assert!(&dst[..] == data, "portable copy on 16 MiB {what}");
        for (name, kernel) in [("avx2", avx2_copy as Copier), ("avx512", avx512_copy)] {
            dst.fill(0x55);
            assert_eq!(
                kernel(dst, data),
                want,
                "{name} copy kernel on 16 MiB {what}"
            );
            assert!(&dst[..] == data, "{name} copy kernel copy on 16 MiB {what}");
        }
        let mut c = Checksum::new();
        let (x, y) = data.split_at(LEN / 3 + 1);
        c.add_bytes(x);
        c.add_bytes(y);
        assert_eq!(c.sum(), want, "Checksum on 16 MiB {what}");
    }
}

#[test]
fn folding_extremes_every_length() {
    let zeros = vec![0u8; 4200];
    let ones = vec![0xffu8; 4200];
    for len in 0..=4200 {
        let z = &zeros[..len];
        let o = &ones[..len];
        let want_o = rfc1071(o);
        assert_eq!(rfc1071(z), 0);
        // 0xffff is negative zero: adding it changes nothing, except that it makes a zero sum
        // nonzero; an odd length adds the padded word 0xff00.
        let expected = match len {
            0 => 0,
            _ if len % 2 == 1 => 0xff00,
            _ => 0xffff,
        };
        assert_eq!(want_o, expected);
        for (name, f) in all_sums() {
            assert_eq!(f(z), 0, "{name} zeros len {len}");
            assert_eq!(f(o), want_o, "{name} 0xff len {len}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IPv4 header, pseudo-header, incremental update.

#[test]
fn ipv4_header_sum_matches_reference() {
    let mut rng = XorShift::new(0x5eed_0006);
    for _ in 0..10_000 {
        let mut h = [0u8; 20];
        rng.fill(&mut h);
        assert_eq!(ipv4_header_sum(&h), rfc1071(&h));
    }
    assert_eq!(ipv4_header_sum(&[0; 20]), 0);
    assert_eq!(ipv4_header_sum(&[0xff; 20]), 0xffff);
}

#[test]
fn ipv4_header_against_etherparse() {
    let mut rng = XorShift::new(0x5eed_0007);
    for _ in 0..1000 {
        let r = rng.next_u64();
        let src = (r as u32).to_be_bytes();
        let dst = ((r >> 32) as u32).to_be_bytes();
        let mut h = etherparse::Ipv4Header::new(
            (r >> 17) as u16 % 60000,
            (r >> 9) as u8,
            etherparse::IpNumber::UDP,
            src,
            dst,
        )
        .unwrap();
        h.identification = (r >> 40) as u16;
        let theirs = h.calc_header_checksum();
        let bytes: [u8; 20] = h.to_bytes()[..].try_into().unwrap();
        assert_eq!(!ipv4_header_sum(&bytes), theirs, "checksum field zero");
        h.header_checksum = theirs;
        let bytes: [u8; 20] = h.to_bytes()[..].try_into().unwrap();
        assert_eq!(ipv4_header_sum(&bytes), 0xffff, "verifies");
    }
}

#[test]
fn pseudo_header_matches_bytes() {
    let mut rng = XorShift::new(0x5eed_0008);
    for _ in 0..10_000 {
        let r = rng.next_u64();
        let q = rng.next_u64();
        let src = Ipv4Addr::from(r as u32);
        let dst = Ipv4Addr::from((r >> 32) as u32);
        let (proto, len) = (q as u8, (q >> 8) as u16);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0, proto]);
        bytes.extend_from_slice(&len.to_be_bytes());
        assert_eq!(pseudo_header_sum(src, dst, proto, len), rfc1071(&bytes));
    }
    let z = Ipv4Addr::UNSPECIFIED;
    assert_eq!(pseudo_header_sum(z, z, 0, 0), 0);
    let b = Ipv4Addr::BROADCAST;
    // Five words of 0xffff are negative zero; 0x00ff remains.
    assert_eq!(pseudo_header_sum(b, b, 0xff, 0xffff), 0x00ff);
}

/// The IPv6 pseudo-header of RFC 8200 §8.1, laid out byte by byte: 40 bytes, the length in 32 bits and
/// the next header after three zero bytes.
#[test]
fn ipv6_pseudo_header_matches_bytes() {
    let mut rng = XorShift::new(0x5eed_0018);
    for _ in 0..10_000 {
        let a = (rng.next_u64() as u128) << 64 | rng.next_u64() as u128;
        let b = (rng.next_u64() as u128) << 64 | rng.next_u64() as u128;
        let q = rng.next_u64();
        let (src, dst) = (std::net::Ipv6Addr::from(a), std::net::Ipv6Addr::from(b));
        let (next, len) = (q as u8, (q >> 8) as u16);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&u32::from(len).to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, next]);
        assert_eq!(bytes.len(), 40);
        assert_eq!(pseudo_header_sum(src, dst, next, len), rfc1071(&bytes));
    }
}

#[test]
fn ttl_decrement_by_update16() {
    let mut rng = XorShift::new(0x5eed_0009);
    for _ in 0..10_000 {
        let mut h = [0u8; 20];
        rng.fill(&mut h);
        h[0] = 0x45;
        h[8] |= 1; // TTL >= 1
        h[10] = 0;
        h[11] = 0;
        let field = !ipv4_header_sum(&h);
        h[10..12].copy_from_slice(&field.to_be_bytes());
        assert_eq!(ipv4_header_sum(&h), 0xffff);
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let field = update16(field, old, new);
        h[10..12].copy_from_slice(&field.to_be_bytes());
        assert_eq!(ipv4_header_sum(&h), 0xffff, "after TTL decrement");
    }
}

#[test]
fn rfc1624_example() {
    // RFC 1624 §4: m = 0x5555 -> 0x3285, the other words sum to 0xcd7a.
    let hc = !add(0xcd7a, 0x5555);
    assert_eq!(hc, 0xdd2f);
    assert_eq!(update16(hc, 0x5555, 0x3285), 0x0000);
    assert_eq!(update16(hc, 0x5555, 0x3285), !add(0xcd7a, 0x3285));
}

// ---------------------------------------------------------------------------------------------
// Algorithm.

#[test]
fn algorithm_names_and_parsing() {
    let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["rfc1071", "unrolled32", "wide", "avx2", "avx512"]);
    for alg in Algorithm::ALL {
        assert_eq!(alg.name().parse::<Algorithm>(), Ok(alg));
        assert_eq!(alg.to_string(), alg.name());
    }
    assert_eq!("fast".parse::<Algorithm>(), Ok(Algorithm::fastest()));
    assert_eq!("fastest".parse::<Algorithm>(), Ok(Algorithm::fastest()));
    assert!("sse".parse::<Algorithm>().is_err());
    assert!("AVX2".parse::<Algorithm>().is_err());
    let err = "x".parse::<Algorithm>().unwrap_err().to_string();
    assert!(err.contains("\"x\""), "{err}");
}

#[test]
fn algorithm_availability() {
    assert!(Algorithm::Rfc1071.is_available());
    assert!(Algorithm::Unrolled32.is_available());
    assert!(Algorithm::Wide.is_available());
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        Algorithm::Avx2.is_available(),
        std::is_x86_feature_detected!("avx2")
    );
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        Algorithm::Avx512.is_available(),
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    );
    #[cfg(not(target_arch = "x86_64"))]
    assert!(!Algorithm::Avx2.is_available() && !Algorithm::Avx512.is_available());
    let f = Algorithm::fastest();
    assert!(f.is_available());
    let want = if Algorithm::Avx512.is_available() {
        Algorithm::Avx512
    } else if Algorithm::Avx2.is_available() {
        Algorithm::Avx2
    } else {
        Algorithm::Wide
    };
    assert_eq!(f, want);
}

#[test]
#[should_panic(expected = "lengths differ")]
fn copy_and_sum_rejects_unequal_lengths() {
    let mut dst = [0u8; 3];
    copy_and_sum(&mut dst, &[1, 2, 3, 4]);
}

#[test]
#[should_panic(expected = "lengths differ")]
fn copy_and_sum_rejects_unequal_lengths_long() {
    let mut dst = vec![0u8; 4096];
    copy_and_sum(&mut dst, &[7; 4097]);
}

#[test]
fn checksum_add_sum_and_udp_against_etherparse() {
    let mut rng = XorShift::new(0x5eed_000a);
    for i in 0..500 {
        let payload = random_bytes(rng.next_u64(), i * 3);
        let r = rng.next_u64();
        let (src, dst) = ((r as u32).to_be_bytes(), ((r >> 32) as u32).to_be_bytes());
        let udp_len = (8 + payload.len()) as u16;
        let mut udp = etherparse::UdpHeader {
            source_port: (r >> 3) as u16,
            destination_port: (r >> 21) as u16,
            length: udp_len,
            checksum: 0,
        };
        let theirs = udp.calc_checksum_ipv4_raw(src, dst, &payload).unwrap();

        let mut c = Checksum::new();
        c.add_sum(pseudo_header_sum(
            Ipv4Addr::from(src),
            Ipv4Addr::from(dst),
            17,
            udp_len,
        ));
        assert!(c.is_empty(), "add_sum does not advance the stream");
        c.add_bytes(&udp.to_bytes());
        c.add_bytes(&payload);
        let ours = match c.checksum() {
            0 => 0xffff, // RFC 768: a computed zero is sent as all ones
            x => x,
        };
        assert_eq!(ours, theirs, "payload {}", payload.len());

        udp.checksum = theirs;
        let mut v = Checksum::new();
        v.add_sum(pseudo_header_sum(
            Ipv4Addr::from(src),
            Ipv4Addr::from(dst),
            17,
            udp_len,
        ));
        v.add_bytes(&udp.to_bytes());
        v.add_bytes(&payload);
        assert_eq!(v.sum(), 0xffff, "verifies");
    }
}

#[test]
fn add_piece_at_odd_offsets() {
    let data = random_bytes(0x5eed_000b, 301);
    let want = rfc1071(&data);
    for cut in 0..=data.len() {
        let mut c = Checksum::new();
        c.add_piece(fast(&data[..cut]), cut);
        c.add_piece(unrolled32(&data[cut..]), data.len() - cut);
        assert_eq!(c.sum(), want, "cut {cut}");
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests.

/// Cut `data` at the given points (taken modulo its length + 1, sorted) into pieces.
fn cut_points(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.push(0);
    cuts.push(len);
    cuts.sort_unstable();
    cuts
}

/// Is every 16-bit word of the (even-length) data zero?
fn all_zero(words: &[u16]) -> bool {
    words.iter().all(|&w| w == 0)
}

fn words_to_bytes(words: &[u16]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

proptest! {
    #[test]
    fn prop_checksum_over_arbitrary_splits(
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        raw_cuts in proptest::collection::vec(any::<usize>(), 0..8),
        routes in proptest::collection::vec(0u8..6, 9),
    ) {
        let cuts = cut_points(data.len(), &raw_cuts);
        let mut c = Checksum::new();
        for (i, w) in cuts.windows(2).enumerate() {
            let piece = &data[w[0]..w[1]];
            match routes[i % routes.len()] {
                0 => c.add_bytes(piece),
                1..=4 => c.add_bytes_with(Algorithm::ALL[routes[i] as usize - 1], piece),
                _ => {
                    let mut out = vec![0u8; piece.len()];
                    c.copy_and_add(&mut out, piece);
                    prop_assert_eq!(&out[..], piece);
                }
            }
        }
        prop_assert_eq!(c.len(), data.len());
        prop_assert_eq!(c.sum(), rfc1071(&data));
        prop_assert_eq!(c.checksum(), !rfc1071(&data));
    }

    #[test]
    fn prop_rfc1071_vector_any_split(cut in 0usize..=8, alg in 0usize..4, copy in any::<bool>()) {
        let v = [0x00u8, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        let mut c = Checksum::new();
        c.add_bytes_with(Algorithm::ALL[alg], &v[..cut]);
        if copy {
            let mut out = [0u8; 8];
            c.copy_and_add(&mut out[cut..], &v[cut..]);
            prop_assert_eq!(&out[cut..], &v[cut..]);
        } else {
            c.add_bytes(&v[cut..]);
        }
        prop_assert_eq!(c.sum(), 0xddf2);
        prop_assert_eq!(c.checksum(), 0x220d);
    }

    #[test]
    fn prop_all_algorithms_agree(
        data in proptest::collection::vec(any::<u8>(), 0..5000),
        skip in 0usize..64,
    ) {
        let d = &data[skip.min(data.len())..];
        let want = rfc1071(d);
        for alg in Algorithm::ALL {
            prop_assert_eq!(alg.sum(d), want);
        }
        prop_assert_eq!(fast(d), want);
        let mut out = vec![0u8; d.len()];
        prop_assert_eq!(copy_and_sum(&mut out, d), want);
        prop_assert_eq!(&out[..], d);
    }

    #[test]
    fn prop_update16_equals_recomputation(
        mut words in proptest::collection::vec(any::<u16>(), 1..64),
        index in any::<usize>(),
        new in any::<u16>(),
        zero_rest in any::<bool>(),
    ) {
        if zero_rest {
            // Push towards the folding corners: mostly zero data.
            for w in words.iter_mut().skip(1) { *w = 0; }
        }
        let i = index % words.len();
        let field = !rfc1071(&words_to_bytes(&words));
        let old = words[i];
        words[i] = new;
        let recomputed = !rfc1071(&words_to_bytes(&words));
        let updated = update16(field, old, new);
        if all_zero(&words) {
            // RFC 1624 eqn. 3 gives +0 where recomputation gives -0 (the same in ones' complement).
            prop_assert_eq!((updated, recomputed), (0x0000, 0xffff));
        } else {
            prop_assert_eq!(updated, recomputed);
        }
    }

    #[test]
    fn prop_update32_equals_recomputation(
        mut words in proptest::collection::vec(any::<u16>(), 2..64),
        index in any::<usize>(),
        new in any::<u32>(),
        zero_rest in any::<bool>(),
    ) {
        if zero_rest {
            for w in words.iter_mut().skip(2) { *w = 0; }
        }
        let i = index % (words.len() - 1);
        let field = !rfc1071(&words_to_bytes(&words));
        let old = (u32::from(words[i]) << 16) | u32::from(words[i + 1]);
        words[i] = (new >> 16) as u16;
        words[i + 1] = new as u16;
        let recomputed = !rfc1071(&words_to_bytes(&words));
        let updated = update32(field, old, new);
        if all_zero(&words) {
            prop_assert_eq!((updated, recomputed), (0x0000, 0xffff));
        } else {
            prop_assert_eq!(updated, recomputed);
        }
    }

    #[test]
    fn prop_extreme_buffers(len in 0usize..70_000, fill in prop_oneof![Just(0u8), Just(0xffu8)]) {
        let data = vec![fill; len];
        let want = rfc1071(&data);
        let expected = match (fill, len) {
            (_, 0) | (0, _) => 0,
            (_, n) if n % 2 == 1 => 0xff00,
            _ => 0xffff,
        };
        prop_assert_eq!(want, expected);
        for alg in Algorithm::ALL {
            prop_assert_eq!(alg.sum(&data), want);
        }
        prop_assert_eq!(fast(&data), want);
        let mut out = vec![!fill; len];
        prop_assert_eq!(copy_and_sum(&mut out, &data), want);
        prop_assert_eq!(out, data);
    }

    #[test]
    fn prop_add_matches_concatenation(
        a in proptest::collection::vec(any::<u8>(), 0..200),
        b in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        // For an even-length first piece, the plain ones'-complement add combines sums.
        let a = &a[..a.len() & !1];
        let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
        prop_assert_eq!(add(rfc1071(a), rfc1071(&b)), rfc1071(&whole));
    }
}

#[test]
fn every_algorithm_fuses_a_copy_correctly() {
    let buf = random_bytes(0xf00d, 4096 + 64);
    let mut out = vec![0u8; 4096 + 64];
    for alg in Algorithm::ALL {
        for len in 0..=600 {
            for off in [0usize, 1, 3, 7] {
                let src = &buf[off..off + len];
                out.fill(0);
                let got = alg.copy_and_sum(&mut out[5..5 + len], src);
                assert_eq!(got, rfc1071(src), "{alg} len {len} off {off}");
                assert_eq!(&out[5..5 + len], src, "{alg} copy len {len}");
            }
        }
    }
}

/// The stack's sum agrees with each algorithm's own at every length around the point where the
/// vector algorithms hand short inputs to the scalar loop, at odd addresses too.
#[test]
fn the_packet_sum_is_each_algorithm_s_sum() {
    let data = random_bytes(7, 2 * FAST_SIMD_MIN_LEN + 3);
    for alg in Algorithm::ALL {
        for start in [0, 1] {
            for len in 0..2 * FAST_SIMD_MIN_LEN {
                let d = &data[start..start + len];
                assert_eq!(alg.sum_packet(d), rfc1071(d), "{} at {len}", alg.name());
            }
        }
    }
}
