//! AVX2 kernels (x86-64) for the checksum and for the fused copy and checksum: the wide loads of
//! Kay & Pasquale (paper 001, figure 11) taken to 32-byte vectors, and the fused loop of
//! Partridge & Pink (paper 000 §7.1) with vector loads and stores.
//!
//! # How a vector is summed
//!
//! The kernels sum little-endian 16-bit words with `vpmaddwd` (`_mm256_madd_epi16`), which
//! multiplies signed 16-bit words by 1 and adds adjacent pairs into 32-bit lanes: one
//! instruction does both the widening and half the additions. The words are unsigned, so each is
//! first XORed with `0x8000`, which maps `w` to the signed value `w - 32768`; every 32-bit pair
//! sum then comes out exactly 65536 too small, a constant put back once per block. That is
//! three vector instructions per 32 bytes (xor, madd, add), against four for splitting 32-bit
//! halves into 64-bit lanes with a mask and a shift. Measured on the project's AMD EPYC, the
//! madd form summed 1536 bytes at about 80 GB/s against 40, and 65536 bytes at 100 against 89.
//!
//! Four accumulators take the vectors in turn (the register pipelining of paper 001, widened),
//! 256 bytes per iteration: eight vectors and four accumulators per iteration ran 10-50%
//! faster than four and two, most of all in the fused copy loop. To keep the signed 32-bit
//! lanes from overflowing, the input is processed in blocks of [`BLOCK`] bytes; each block's
//! lanes are widened to 64 bits and added, with end-around carry, into a scalar accumulator.
//! Bytes after the last whole vector go through the scalar tail of the parent module.
//!
//! The fused copy aligns its stores (see [`copy_and_sum_avx2`]) and hides the loaded value from
//! the optimizer (see [`opaque`]) so that the loop stays fused.
//!
//! The AVX-512 kernels (`avx512.rs`) widen these to 64-byte vectors.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use core::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_add_epi64, _mm256_castsi256_si128, _mm256_cvtepi32_epi64,
    _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_set1_epi16,
    _mm256_setzero_si256, _mm256_storeu_si256, _mm256_xor_si256, _mm_add_epi64, _mm_cvtsi128_si64,
    _mm_extract_epi64,
};
use std::sync::atomic::{AtomicU8, Ordering};

use super::{adc, copy_sum_tail, fold64, sum_tail};

/// Bytes per iteration of the main loops: eight 32-byte vectors.
const GROUP: usize = 256;

/// Bytes per block: 2^19 bytes, 16384 vectors, a multiple of [`GROUP`]. Each vector adds one
/// `vpmaddwd` result, a value in `[-65536, 65534]`, to one of four accumulators, so a 32-bit
/// lane receives at most 4096 + 7 results per block and stays within `±4103 * 65536 < 2^31`.
const BLOCK: usize = 1 << 19;

/// Per 32-byte vector, the eight pair sums come out 65536 too small each (see the module doc).
const BIAS_PER_VECTOR: i64 = 8 * 65536;

const UNKNOWN: u8 = 0;
const ABSENT: u8 = 1;
const PRESENT: u8 = 2;

/// Whether the CPU has a feature: `UNKNOWN` until first asked, then cached. Shared by the AVX2
/// and AVX-512 tokens.
pub(super) struct CachedFeature(AtomicU8);

impl CachedFeature {
    pub(super) const fn new() -> CachedFeature {
        CachedFeature(AtomicU8::new(UNKNOWN))
    }

    /// Whether the feature is present: `detect` (CPUID, through `is_x86_feature_detected!`) runs
    /// once; after that this is one relaxed atomic load and a predictable branch. A race on the
    /// first calls is harmless: every thread stores the same answer.
    #[inline(always)]
    pub(super) fn get(&self, detect: fn() -> bool) -> bool {
        match self.0.load(Ordering::Relaxed) {
            PRESENT => true,
            ABSENT => false,
            _ => self.detect_slow(detect),
        }
    }

    #[cold]
    #[inline(never)]
    fn detect_slow(&self, detect: fn() -> bool) -> bool {
        let present = detect();
        self.0
            .store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
        present
    }
}

/// Whether this CPU has AVX2.
static AVX2: CachedFeature = CachedFeature::new();

/// A token proving that this CPU has AVX2: it can only be obtained from [`Avx2::detect`], so
/// holding one is what makes calling the AVX2 kernels sound.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2(());

impl Avx2 {
    /// `Some` when the CPU has AVX2 (detected once, then cached).
    #[inline(always)]
    pub(super) fn detect() -> Option<Avx2> {
        AVX2.get(|| std::is_x86_feature_detected!("avx2"))
            .then_some(Avx2(()))
    }

    /// The checksum of `data` by the AVX2 kernel (any length).
    #[inline]
    pub(super) fn sum(self, data: &[u8]) -> u16 {
        // SAFETY: `sum_avx2` only needs the CPU to support AVX2, and an `Avx2` token exists only
        // when runtime detection found it.
        let acc = unsafe { sum_avx2(data) };
        super::finish(acc)
    }

    /// Copies `src` into `dst` and returns the checksum of `src`, by the fused AVX2 kernel.
    /// The lengths must be equal (checked by the caller; checked again here).
    #[inline]
    pub(super) fn copy_and_sum(self, dst: &mut [u8], src: &[u8]) -> u16 {
        assert_eq!(dst.len(), src.len());
        // SAFETY: `copy_and_sum_avx2` only needs the CPU to support AVX2, and an `Avx2` token
        // exists only when runtime detection found it.
        let acc = unsafe { copy_and_sum_avx2(dst, src) };
        super::finish(acc)
    }
}

/// Loads the `k`-th 32-byte vector of `chunk` (unaligned).
#[target_feature(enable = "avx2")]
#[inline]
fn load(chunk: &[u8], k: usize) -> __m256i {
    let bytes: &[u8; 32] = chunk[32 * k..32 * k + 32]
        .try_into()
        .expect("a 32-byte range is 32 bytes");
    // SAFETY: `bytes` is a reference to 32 readable bytes, exactly what the load reads, and
    // `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast::<__m256i>()) }
}

/// Stores `v` as the `k`-th 32-byte vector of `chunk` (unaligned).
#[target_feature(enable = "avx2")]
#[inline]
fn store(chunk: &mut [u8], k: usize, v: __m256i) {
    let bytes: &mut [u8; 32] = (&mut chunk[32 * k..32 * k + 32])
        .try_into()
        .expect("a 32-byte range is 32 bytes");
    // SAFETY: `bytes` is an exclusive reference to 32 writable bytes, exactly what the store
    // writes, and `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_si256(bytes.as_mut_ptr().cast::<__m256i>(), v) }
}

/// Returns `v` unchanged, through an empty `asm!` block the optimizer cannot see into.
///
/// Without it LLVM recognises that the fused loop stores exactly what it loads, and splits it
/// into a `memcpy` call followed by a summing loop: two passes over the data, the very thing
/// fusion avoids (Partridge & Pink, paper 000 §7.1: "reads each word into a register, adds the
/// word to the running checksum, and then writes the word"). Measured here, the split form ran
/// at half the speed of the fused loop on L1-resident 1500-byte copies.
#[target_feature(enable = "avx2")]
#[inline]
fn opaque(mut v: __m256i) -> __m256i {
    // SAFETY: the assembly is empty: it touches no memory, no stack, no flags and no register
    // but `v`'s own, which it leaves unchanged.
    unsafe {
        core::arch::asm!(
            "/* {0} */",
            inout(ymm_reg) v,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    v
}

/// The eight signed pair sums of the little-endian 16-bit words of `v`, each 65536 below the
/// true unsigned pair sum.
#[target_feature(enable = "avx2")]
#[inline]
fn pair_sums(v: __m256i) -> __m256i {
    _mm256_madd_epi16(
        _mm256_xor_si256(v, _mm256_set1_epi16(i16::MIN)),
        _mm256_set1_epi16(1),
    )
}

/// Sum of the eight signed 32-bit lanes of `v`, exactly, in 64 bits.
#[target_feature(enable = "avx2")]
#[inline]
fn lanes_sum(v: __m256i) -> i64 {
    let lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
    let hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(v));
    let s = _mm256_add_epi64(lo, hi);
    let t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
    _mm_cvtsi128_si64(t) + _mm_extract_epi64::<1>(t)
}

/// Exact sum of the little-endian 16-bit words of a block's vectors, from its four lane
/// accumulators and its vector count.
#[target_feature(enable = "avx2")]
#[inline]
fn block_total(acc: [__m256i; 4], vectors: usize) -> u64 {
    let lanes = _mm256_add_epi32(
        _mm256_add_epi32(acc[0], acc[1]),
        _mm256_add_epi32(acc[2], acc[3]),
    );
    // The biased lane sum plus the bias is the true (non-negative) sum, below 2^35.
    (lanes_sum(lanes) + vectors as i64 * BIAS_PER_VECTOR) as u64
}

/// The 64-bit ones'-complement accumulator of the little-endian words of `data`.
#[target_feature(enable = "avx2")]
fn sum_avx2(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut rest = data;
    while rest.len() > BLOCK {
        let (block, r) = rest.split_at(BLOCK);
        acc = adc(acc, sum_vectors(block));
        rest = r;
    }
    let (vectors, tail) = rest.split_at(rest.len() & !31);
    acc = adc(acc, sum_vectors(vectors));
    sum_tail(acc, tail)
}

/// Exact sum of the little-endian 16-bit words of `block`, a whole number of 32-byte vectors
/// and at most [`BLOCK`] bytes.
#[target_feature(enable = "avx2")]
#[inline]
fn sum_vectors(block: &[u8]) -> u64 {
    debug_assert!(block.len().is_multiple_of(32) && block.len() <= BLOCK);
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut groups = block.chunks_exact(GROUP);
    for g in &mut groups {
        for k in 0..8 {
            acc[k % 4] = _mm256_add_epi32(acc[k % 4], pair_sums(load(g, k)));
        }
    }
    for s in groups.remainder().chunks_exact(32) {
        acc[0] = _mm256_add_epi32(acc[0], pair_sums(load(s, 0)));
    }
    block_total(acc, block.len() / 32)
}

/// [`sum_avx2`] fused with copying `src` into `dst` (equal lengths): each vector is loaded once,
/// stored, and summed.
///
/// The destination is aligned first: up to 31 leading bytes go through the scalar fused tail,
/// so every 32-byte store lands inside one cache line (a store straddling two lines halved the
/// loop's throughput in our measurements, 24 against 47 GB/s at 1500 bytes). When that head
/// is odd, the rest of the data sits at odd stream offsets and its sum is byte-swapped, as for
/// any piece at an odd offset (RFC 1071 §2(B); paper 002 §3.2).
#[target_feature(enable = "avx2")]
fn copy_and_sum_avx2(dst: &mut [u8], src: &[u8]) -> u64 {
    // Also tells the optimizer the lengths are equal, so one set of bounds checks serves both.
    let dst = &mut dst[..src.len()];
    let head = dst.as_ptr().align_offset(32).min(src.len());
    let (dhead, mut dst) = dst.split_at_mut(head);
    let (shead, mut src) = src.split_at(head);
    let head_acc = copy_sum_tail(0, dhead, shead);

    let mut acc = 0u64;
    while src.len() > BLOCK {
        let (sblock, s) = src.split_at(BLOCK);
        let (dblock, d) = dst.split_at_mut(BLOCK);
        acc = adc(acc, copy_sum_vectors(dblock, sblock));
        (src, dst) = (s, d);
    }
    let n = src.len() & !31;
    let (svec, stail) = src.split_at(n);
    let (dvec, dtail) = dst.split_at_mut(n);
    acc = adc(acc, copy_sum_vectors(dvec, svec));
    acc = copy_sum_tail(acc, dtail, stail);
    if head & 1 == 1 {
        acc = u64::from(fold64(acc).swap_bytes());
    }
    adc(head_acc, acc)
}

/// [`sum_vectors`] fused with copying `src` into `dst` (equal lengths).
#[target_feature(enable = "avx2")]
#[inline]
fn copy_sum_vectors(dst: &mut [u8], src: &[u8]) -> u64 {
    debug_assert!(src.len().is_multiple_of(32) && src.len() <= BLOCK);
    let dst = &mut dst[..src.len()];
    let mut acc = [_mm256_setzero_si256(); 4];
    let mut dgroups = dst.chunks_exact_mut(GROUP);
    let mut sgroups = src.chunks_exact(GROUP);
    for (d, s) in (&mut dgroups).zip(&mut sgroups) {
        for k in 0..8 {
            let v = opaque(load(s, k));
            store(d, k, v);
            acc[k % 4] = _mm256_add_epi32(acc[k % 4], pair_sums(v));
        }
    }
    let dsingles = dgroups.into_remainder().chunks_exact_mut(32);
    let ssingles = sgroups.remainder().chunks_exact(32);
    for (d, s) in dsingles.zip(ssingles) {
        let v = opaque(load(s, 0));
        store(d, 0, v);
        acc[0] = _mm256_add_epi32(acc[0], pair_sums(v));
    }
    block_total(acc, src.len() / 32)
}
