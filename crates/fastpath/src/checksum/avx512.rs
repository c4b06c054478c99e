//! AVX-512 kernels (x86-64 with AVX-512F and AVX-512BW) for the checksum and the fused copy and
//! checksum: the AVX2 kernels of [`super::x86`] widened to 64-byte vectors, with masked loads and
//! stores for the ragged ends.
//!
//! # What changes from AVX2
//!
//! - **64-byte vectors.** The words are summed the same way (`vpmaddwd` on words XORed with
//!   `0x8000`, a bias of 65536 per 32-bit lane put back once per block; see the AVX2 module's
//!   doc), sixteen lanes per vector. Eight vectors and four accumulators per iteration: 512 bytes.
//! - **No scalar head or tail.** AVX-512BW loads and stores bytes under a mask, and a masked-off
//!   byte is neither read nor written (nor can it fault). The ragged end is one masked vector, and so
//!   is the head that aligns the loop: the first `64 - (address mod 64)` bytes go through one
//!   masked vector, after which every load (for the sum) or every store (for the fused copy) lands
//!   inside one cache line. A masked-off byte loads as zero, which adds nothing to the sum, and the
//!   bias is the same for every vector, so a masked vector is summed like a whole one. When that head
//!   is odd, the rest of the data sits at odd stream offsets and its sum is byte-swapped (RFC 1071
//!   §2(B); paper 002 §3.2).
//!
//! The kernels are only reached through an [`Avx512`] token, which only exists when the CPU has
//! both features.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use super::x86::CachedFeature;
use super::{adc, fold64};
use core::arch::x86_64::{
    __m512i, __mmask64, _mm512_add_epi32, _mm512_add_epi64, _mm512_castsi512_si256,
    _mm512_cvtepi32_epi64, _mm512_extracti64x4_epi64, _mm512_loadu_si512, _mm512_madd_epi16,
    _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8, _mm512_reduce_add_epi64, _mm512_set1_epi16,
    _mm512_set_epi8, _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_storeu_si512,
    _mm512_xor_si512,
};

/// Bytes per vector.
const VECTOR: usize = 64;

/// Bytes per iteration of the main loops: eight vectors.
const GROUP: usize = 8 * VECTOR;

/// Bytes per block: 2^19 bytes, 8192 vectors, a multiple of [`GROUP`]. Each vector adds one
/// `vpmaddwd` result, a value in `[-65536, 65534]`, to one of four accumulators, so a 32-bit lane
/// receives at most 2048 + 9 results per block (the head, single and tail vectors included) and stays
/// within `±2057 * 65536 < 2^31`.
const BLOCK: usize = 1 << 19;

/// Per 64-byte vector, the sixteen pair sums come out 65536 too small each.
const BIAS_PER_VECTOR: i64 = 16 * 65536;

/// Whether this CPU has AVX-512F and AVX-512BW.
static AVX512: CachedFeature = CachedFeature::new();

/// A token proving that this CPU has AVX-512F and AVX-512BW: it can only be obtained from
/// [`Avx512::detect`], so holding one is what makes calling the kernels sound.
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx512(());

impl Avx512 {
    /// `Some` when the CPU has AVX-512F and AVX-512BW (detected once, then cached).
    #[inline(always)]
    pub(super) fn detect() -> Option<Avx512> {
        AVX512
            .get(|| {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
            })
            .then_some(Avx512(()))
    }

    /// The checksum of `data` by the AVX-512 kernel (any length).
    #[inline]
    pub(super) fn sum(self, data: &[u8]) -> u16 {
        // SAFETY: `sum_avx512` only needs the CPU to support AVX-512F and AVX-512BW, and an
        // `Avx512` token exists only when runtime detection found both.
        let acc = unsafe { sum_avx512(data) };
        super::finish(acc)
    }

    /// Copies `src` into `dst` and returns the checksum of `src`, by the fused AVX-512 kernel.
    #[inline]
    pub(super) fn copy_and_sum(self, dst: &mut [u8], src: &[u8]) -> u16 {
        assert_eq!(dst.len(), src.len());
        // SAFETY: as for `sum`: the token proves the CPU has both features.
        let acc = unsafe { copy_and_sum_avx512(dst, src) };
        super::finish(acc)
    }
}

/// The mask selecting the first `len` bytes of a vector (`len` at most 64).
#[inline]
fn first(len: usize) -> __mmask64 {
    debug_assert!(len <= VECTOR);
    if len == 0 {
        0
    } else {
        u64::MAX >> (VECTOR - len)
    }
}

/// Loads all of `bytes` (at most 64) into the low bytes of a vector, the rest zero.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn load_part(bytes: &[u8]) -> __m512i {
    assert!(bytes.len() <= VECTOR);
    // SAFETY: the mask enables exactly the first `bytes.len()` bytes, all inside `bytes`; a
    // masked-off byte is not read and cannot fault, and the load has no alignment requirement.
    unsafe { _mm512_maskz_loadu_epi8(first(bytes.len()), bytes.as_ptr().cast::<i8>()) }
}

/// Stores the low `bytes.len()` bytes (at most 64) of `v` into `bytes`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn store_part(bytes: &mut [u8], v: __m512i) {
    assert!(bytes.len() <= VECTOR);
    // SAFETY: the mask enables exactly the first `bytes.len()` bytes, all inside `bytes`, which
    // is borrowed exclusively; a masked-off byte is not written and cannot fault.
    unsafe { _mm512_mask_storeu_epi8(bytes.as_mut_ptr().cast::<i8>(), first(bytes.len()), v) }
}

/// Loads the `k`-th 64-byte vector of `chunk` (unaligned).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn load(chunk: &[u8], k: usize) -> __m512i {
    let bytes: &[u8; VECTOR] = chunk[VECTOR * k..VECTOR * (k + 1)]
        .try_into()
        .expect("a 64-byte range is 64 bytes");
    // SAFETY: `bytes` is a reference to 64 readable bytes, exactly what the load reads, and
    // `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast::<__m512i>()) }
}

/// Stores `v` as the `k`-th 64-byte vector of `chunk` (unaligned).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn store(chunk: &mut [u8], k: usize, v: __m512i) {
    let bytes: &mut [u8; VECTOR] = (&mut chunk[VECTOR * k..VECTOR * (k + 1)])
        .try_into()
        .expect("a 64-byte range is 64 bytes");
    // SAFETY: `bytes` is an exclusive reference to 64 writable bytes, exactly what the store
    // writes, and `storeu` has no alignment requirement.
    unsafe { _mm512_storeu_si512(bytes.as_mut_ptr().cast::<__m512i>(), v) }
}

/// Returns `v` unchanged, through an empty `asm!` block the optimizer cannot see into, so the
/// fused loop is not split into a `memcpy` and a summing loop (see the AVX2 module's `opaque`).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn opaque(mut v: __m512i) -> __m512i {
    // SAFETY: the assembly is empty: it touches no memory, no stack, no flags and no register
    // but `v`'s own, which it leaves unchanged.
    unsafe {
        core::arch::asm!(
            "/* {0} */",
            inout(zmm_reg) v,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    v
}

/// The sixteen signed pair sums of the little-endian 16-bit words of `v`, each 65536 below the
/// true unsigned pair sum.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn pair_sums(v: __m512i) -> __m512i {
    _mm512_madd_epi16(
        _mm512_xor_si512(v, _mm512_set1_epi16(i16::MIN)),
        _mm512_set1_epi16(1),
    )
}

/// Four lane accumulators and the number of vectors they have taken.
struct Lanes {
    acc: [__m512i; 4],
    vectors: usize,
}

impl Lanes {
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn new() -> Lanes {
        Lanes {
            acc: [_mm512_setzero_si512(); 4],
            vectors: 0,
        }
    }

    /// Adds one vector's pair sums to accumulator `k % 4`.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn add(&mut self, k: usize, v: __m512i) {
        self.acc[k % 4] = _mm512_add_epi32(self.acc[k % 4], pair_sums(v));
        self.vectors += 1;
    }

    /// The exact sum of the little-endian words of every vector taken.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn total(&self) -> u64 {
        let lanes = _mm512_add_epi32(
            _mm512_add_epi32(self.acc[0], self.acc[1]),
            _mm512_add_epi32(self.acc[2], self.acc[3]),
        );
        let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(lanes));
        let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(lanes));
        let biased = _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
        // The biased lane sum plus the bias is the true (non-negative) sum, below 2^35.
        (biased + self.vectors as i64 * BIAS_PER_VECTOR) as u64
    }
}

/// Swaps the two bytes of every 16-bit word of `v`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn swap_words(v: __m512i) -> __m512i {
    let pattern = _mm512_set_epi8(
        14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7,
        4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10,
        11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1,
    );
    _mm512_shuffle_epi8(v, pattern)
}

/// The head vector as the rest of the data will see it: when the head is odd, every later byte
/// sits at the other half of its stream word, so the rest is summed in a frame shifted by one
/// byte. Rather than swap the rest's sum, the head's words are swapped into that frame (one
/// shuffle), everything is summed together in one set of lanes, and the total is swapped back
/// once at the end (RFC 1071 §2(B): swapping commutes with ones'-complement addition).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn in_rest_frame(head: usize, v: __m512i) -> __m512i {
    if head & 1 == 1 {
        swap_words(v)
    } else {
        v
    }
}

/// Undoes [`in_rest_frame`] on the final accumulator.
#[inline]
fn to_stream_frame(head: usize, acc: u64) -> u64 {
    if head & 1 == 1 {
        u64::from(fold64(acc).swap_bytes())
    } else {
        acc
    }
}

/// The 64-bit ones'-complement accumulator of the little-endian words of `data`.
#[target_feature(enable = "avx512f,avx512bw")]
fn sum_avx512(data: &[u8]) -> u64 {
    // One masked vector brings the loads to a 64-byte boundary (an empty head loads as zeros,
    // which the bias accounts for like any other vector).
    let head = data.as_ptr().align_offset(VECTOR).min(data.len());
    let (hbytes, mut rest) = data.split_at(head);
    let mut carry_in = Some(in_rest_frame(head, load_part(hbytes)));
    let mut acc = 0u64;
    loop {
        let (block, r) = rest.split_at(rest.len().min(BLOCK));
        // The lanes are made afresh per block, inside the loop, so they stay in registers.
        let mut lanes = Lanes::new();
        if let Some(v) = carry_in.take() {
            lanes.add(0, v);
        }
        sum_block(&mut lanes, block);
        acc = adc(acc, lanes.total());
        if r.is_empty() {
            return to_stream_frame(head, acc);
        }
        rest = r;
    }
}

/// Adds the little-endian words of `block` (at most [`BLOCK`] bytes), the last partial vector
/// included, to `lanes`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn sum_block(lanes: &mut Lanes, block: &[u8]) {
    debug_assert!(block.len() <= BLOCK);
    let mut groups = block.chunks_exact(GROUP);
    for g in &mut groups {
        for k in 0..8 {
            lanes.add(k, load(g, k));
        }
    }
    let mut singles = groups.remainder().chunks_exact(VECTOR);
    // A fixed accumulator: with a varying index the four would live in memory, not registers.
    for s in &mut singles {
        lanes.add(1, load(s, 0));
    }
    let tail = singles.remainder();
    if !tail.is_empty() {
        lanes.add(3, load_part(tail));
    }
}

/// [`sum_avx512`] fused with copying `src` into `dst` (equal lengths): each vector is loaded
/// once, stored, and summed. The head vector aligns the stores, which matter more than the loads
/// (a store straddling two cache lines costs the most).
#[target_feature(enable = "avx512f,avx512bw")]
fn copy_and_sum_avx512(dst: &mut [u8], src: &[u8]) -> u64 {
    let dst = &mut dst[..src.len()];
    let head = dst.as_ptr().align_offset(VECTOR).min(src.len());
    let (dhead, mut dst) = dst.split_at_mut(head);
    let (shead, mut src) = src.split_at(head);
    let v = opaque(load_part(shead));
    store_part(dhead, v);
    let mut carry_in = Some(in_rest_frame(head, v));
    let mut acc = 0u64;
    loop {
        let n = src.len().min(BLOCK);
        let (sblock, s) = src.split_at(n);
        let (dblock, d) = dst.split_at_mut(n);
        let mut lanes = Lanes::new();
        if let Some(v) = carry_in.take() {
            lanes.add(0, v);
        }
        copy_sum_block(&mut lanes, dblock, sblock);
        acc = adc(acc, lanes.total());
        if s.is_empty() {
            return to_stream_frame(head, acc);
        }
        (src, dst) = (s, d);
    }
}

/// [`sum_block`] fused with copying `src` into `dst` (equal lengths).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn copy_sum_block(lanes: &mut Lanes, dst: &mut [u8], src: &[u8]) {
    debug_assert!(src.len() <= BLOCK);
    let dst = &mut dst[..src.len()];
    let mut dgroups = dst.chunks_exact_mut(GROUP);
    let mut sgroups = src.chunks_exact(GROUP);
    for (d, s) in (&mut dgroups).zip(&mut sgroups) {
        for k in 0..8 {
            let v = opaque(load(s, k));
            store(d, k, v);
            lanes.add(k, v);
        }
    }
    let mut dsingles = dgroups.into_remainder().chunks_exact_mut(VECTOR);
    let mut ssingles = sgroups.remainder().chunks_exact(VECTOR);
    for (d, s) in (&mut dsingles).zip(&mut ssingles) {
        let v = opaque(load(s, 0));
        store(d, 0, v);
        lanes.add(1, v);
    }
    let (dtail, stail) = (dsingles.into_remainder(), ssingles.remainder());
    if !stail.is_empty() {
        let v = opaque(load_part(stail));
        store_part(dtail, v);
        lanes.add(3, v);
    }
}
