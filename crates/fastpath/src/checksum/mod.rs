//! The Internet checksum (RFC 1071) in every form the papers measure.
//!
//! # Conventions
//!
//! Every function here that returns a *sum* returns the folded 16-bit ones'-complement sum of
//! the bytes, **not** complemented, as a number whose big-endian bytes (`sum.to_be_bytes()`) are
//! the two bytes it stands for. A header's checksum field holds the complement, `!sum`, written
//! in network byte order. A byte stream of odd length is summed as if a zero byte followed it.
//!
//! A folded sum is `0x0000` only when every byte summed was zero; any other input that adds up
//! to a multiple of `0xffff` folds to `0xffff` ("negative zero"). All the algorithms below follow
//! that rule exactly, so they agree bit for bit with [`rfc1071`], not merely modulo `0xffff`.
//! Receiving code verifies a header by checking that its sum, checksum field included, is
//! `0xffff`.
//!
//! # The techniques, and where they come from
//!
//! | function | technique | source |
//! | --- | --- | --- |
//! | [`rfc1071`] | 16-bit big-endian words, one at a time | RFC 1071 §4.1; the test oracle |
//! | [`unrolled32`] | 32-bit loads, 16x unrolled loop, two registers alternating | Kay & Pasquale, paper 001, figure 11 |
//! | [`wide`] | 64-bit loads, four independent accumulators with end-around carry | paper 001's ideas on a 64-bit CPU |
//! | [`fast`] | AVX-512 (64-byte vectors) or AVX2 (32-byte) when the CPU has them, else [`wide`] | today's form of paper 001's wide loads |
//! | [`ipv4_header_sum`] | straight-line, in-line sum of a 20-byte header | Partridge & Pink, paper 000 §6.1 |
//! | [`copy_and_sum`] | copy and checksum fused in one pass | paper 000 §7.1 and table 8; Chase et al., paper 002 §2.2 |
//! | [`Checksum`] | partial sums of scattered pieces, combined | Chase et al., paper 002 §3.2 |
//! | [`update16`], [`update32`] | incremental update of a checksum field | RFC 1624 eqn. 3 |
//!
//! The fast algorithms add little-endian machine words and swap the bytes of the folded result
//! once at the end, which RFC 1071 §2(B) shows is equivalent to summing big-endian words.
//!
//! The vector kernels are picked at run time: AVX-512 (`avx512.rs`, AVX-512F and BW) where the
//! CPU has it, AVX2 (`x86.rs`) where it has that, and the portable [`wide`] loop everywhere else
//! and for short inputs.

use std::fmt;
use std::str::FromStr;

use crate::addr::IpAddress;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx512;

#[cfg(test)]
mod tests;

/// Below this many bytes, [`fast`] uses the scalar [`wide`] loop even when AVX2 is available:
/// vector setup and the final horizontal reduction cost more than they save on short inputs.
/// Measured on the project's AMD EPYC: at 64 bytes [`wide`] ran at 12 GB/s and the AVX2 kernel
/// at 8; they broke even at 128 bytes; at 256 bytes AVX2 led by 40%.
pub const FAST_SIMD_MIN_LEN: usize = 128;

/// From this many bytes up, [`fast`] uses the AVX-512 kernel where the CPU has it (AVX2 below):
/// its masked head and tail vectors and wider final reduction cost more than they save on short
/// inputs. Measured on the project's AMD EPYC (Zen 4, whose AVX-512 units run 512-bit operations
/// as two 256-bit halves; `examples/checksum_throughput`, best of 24 rounds): at 512 bytes AVX2
/// summed 87 GB/s and AVX-512 69; at 1024 bytes 123 and 120; at 1500 bytes 127 and 154; at 8 KiB
/// 157 and 275.
pub const FAST_AVX512_MIN_LEN: usize = 1024;

/// Below this many bytes, [`copy_and_sum`] uses the portable fused loop even when AVX2 or
/// AVX-512 is available (the AVX-512 fused loop led AVX2's at every length from 256 bytes up, 35
/// against 29 GB/s at 256 and 98 against 80 at 1500, so it takes over from the same length). Measured as for [`FAST_SIMD_MIN_LEN`]: at 64 bytes the portable loop ran at 7.4
/// GB/s and the AVX2 one at 5.9; they broke even at 128 bytes; at 512 bytes AVX2 led by 70%.
pub const COPY_SIMD_MIN_LEN: usize = 128;

// ---------------------------------------------------------------------------------------------
// Shared scalar helpers (also used by the AVX2 kernels for their tails).

/// Ones'-complement addition of two 64-bit values (add, then add the carry back in).
/// The result is congruent to `a + b` modulo `2^64 - 1`, hence modulo `0xffff`, and is zero
/// only when both inputs are zero.
#[inline(always)]
fn adc(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    // Cannot overflow: when `carry` is set, `s <= 2^64 - 2`.
    s + carry as u64
}

/// Folds a 64-bit ones'-complement accumulator to 16 bits.
///
/// `x + x.rotate_right(32)` holds, in its top half, the high half plus the low half plus the
/// carry out of the low half: the end-around-carry sum of the two halves. Done twice, 64 -> 32
/// -> 16 bits, in six instructions and with no data-dependent branch. Nonzero input never folds
/// to zero.
#[inline(always)]
fn fold64(x: u64) -> u16 {
    let y = (x.wrapping_add(x.rotate_right(32)) >> 32) as u32;
    (y.wrapping_add(y.rotate_right(16)) >> 16) as u16
}

/// Folds a 32-bit sum of 16-bit words (at most 65,535 of them) to 16 bits, end-around carry
/// included.
#[inline(always)]
pub fn fold32(acc: u32) -> u16 {
    let acc = (acc & 0xffff) + (acc >> 16);
    ((acc & 0xffff) + (acc >> 16)) as u16
}

#[inline(always)]
fn le64(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn le32(bytes: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(bytes);
    u32::from_le_bytes(w)
}

#[inline(always)]
fn le16(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[0], bytes[1]])
}

/// Adds the little-endian words of `data` (which starts at an even offset of the stream) to
/// `acc`: 8 bytes at a time, then 4, 2 and 1. A last odd byte is the low byte of a little-endian
/// word, that is, it is padded with a zero on its right.
#[inline(always)]
fn sum_tail(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        acc = adc(acc, le64(w));
    }
    let rest = words.remainder();
    // At most 0xffff_ffff + 0xffff + 0xff: no overflow.
    let mut t = 0u64;
    let mut i = 0;
    if rest.len() & 4 != 0 {
        t += u64::from(le32(&rest[..4]));
        i = 4;
    }
    if rest.len() & 2 != 0 {
        t += u64::from(le16(&rest[i..i + 2]));
        i += 2;
    }
    if rest.len() & 1 != 0 {
        t += u64::from(rest[i]);
    }
    adc(acc, t)
}

/// [`sum_tail`] fused with copying `src` into `dst` (same length).
#[inline(always)]
fn copy_sum_tail(mut acc: u64, dst: &mut [u8], src: &[u8]) -> u64 {
    debug_assert_eq!(dst.len(), src.len());
    // Tells the optimizer the lengths are equal, so one set of bounds checks serves both.
    let dst = &mut dst[..src.len()];
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dw, sw) in (&mut d).zip(&mut s) {
        let w = le64(sw);
        dw.copy_from_slice(&w.to_le_bytes());
        acc = adc(acc, w);
    }
    let dst = d.into_remainder();
    let src = s.remainder();
    let mut t = 0u64;
    let mut i = 0;
    if src.len() & 4 != 0 {
        let w = le32(&src[..4]);
        dst[..4].copy_from_slice(&w.to_le_bytes());
        t += u64::from(w);
        i = 4;
    }
    if src.len() & 2 != 0 {
        let w = le16(&src[i..i + 2]);
        dst[i..i + 2].copy_from_slice(&w.to_le_bytes());
        t += u64::from(w);
        i += 2;
    }
    if src.len() & 1 != 0 {
        dst[i] = src[i];
        t += u64::from(src[i]);
    }
    adc(acc, t)
}

/// Turns a 64-bit accumulator of little-endian words into the public big-endian-valued sum.
#[inline(always)]
fn finish(acc: u64) -> u16 {
    fold64(acc).swap_bytes()
}

// ---------------------------------------------------------------------------------------------
// (a) The reference.

/// (a) Reference checksum, written the way RFC 1071 §4.1 describes it: adds the bytes as
/// big-endian 16-bit words, one word at a time, into a 32-bit accumulator, pads an odd last
/// byte with a zero on its right, and folds the carries back in.
///
/// It is deliberately simple and slow; every other function in this module is tested against
/// it. Returns the folded sum, not complemented.
///
/// ```
/// use fastpath::checksum::rfc1071;
/// // The example of RFC 1071 §3.
/// assert_eq!(rfc1071(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
/// ```
pub fn rfc1071(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        // Fold as we go, so the accumulator can never overflow however long the input.
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = words.remainder() {
        acc += u32::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// [`rfc1071`]'s loop fused with a copy: each 16-bit word is read once, stored and added. The
/// fused loop of the 4.3BSD-style routine, so that fusing (paper 000 §7.1) can be measured apart from
/// a faster checksum.
fn copy_and_sum_rfc1071(dst: &mut [u8], src: &[u8]) -> u16 {
    let dst = &mut dst[..src.len()];
    let mut acc: u32 = 0;
    let mut d = dst.chunks_exact_mut(2);
    let mut s = src.chunks_exact(2);
    for (dw, sw) in (&mut d).zip(&mut s) {
        let w = [sw[0], sw[1]];
        dw.copy_from_slice(&w);
        acc += u32::from(u16::from_be_bytes(w));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let ([dl], [last]) = (d.into_remainder(), s.remainder()) {
        *dl = *last;
        acc += u32::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// [`unrolled32`]'s loop fused with a copy: 32-bit words, split into halves into two accumulators.
fn copy_and_sum_unrolled32(dst: &mut [u8], src: &[u8]) -> u16 {
    let dst = &mut dst[..src.len()];
    let (mut even, mut odd) = (0u64, 0u64);
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dw, sw) in (&mut d).zip(&mut s) {
        dw.copy_from_slice(sw);
        let (t5, t6) = (le32(&sw[..4]), le32(&sw[4..]));
        even += u64::from(t5 >> 16) + u64::from(t5 & 0xffff);
        odd += u64::from(t6 >> 16) + u64::from(t6 & 0xffff);
    }
    let (dst, src) = (d.into_remainder(), s.remainder());
    dst.copy_from_slice(src);
    finish(adc(adc(even, odd), sum_tail(0, src)))
}

// ---------------------------------------------------------------------------------------------
// (b) Kay & Pasquale.

/// (b) Kay & Pasquale (paper 001, "A RISC Checksum Algorithm" and figure 11): reads memory in
/// 32-bit words instead of 16-bit ones, splitting each word into its two 16-bit halves with a
/// shift and a mask (no carry flag needed, as on a RISC CPU); the inner loop is unrolled sixteen
/// times (sixteen 32-bit words, 64 bytes, per iteration); and two data registers alternate
/// (`t5`/`t6` in the figure) so a load is issued as soon as the previous value in that register
/// has been used.
///
/// Here the two alternating registers feed two independent accumulators, so that neither the
/// loads nor the additions form a single dependency chain; the Rust compiler, not hand
/// placement, schedules the loads. The accumulators are 64 bits wide (the paper's were 32) so
/// they need no folding inside the loop at any length. Leftover bytes are taken as 32-bit
/// words, then a 16-bit word, then a byte. Returns the folded sum, not complemented.
pub fn unrolled32(data: &[u8]) -> u16 {
    let (mut even, mut odd) = (0u64, 0u64);
    let mut blocks = data.chunks_exact(64);
    for block in &mut blocks {
        // Sixteen 32-bit loads, alternating between the "t5" and "t6" registers.
        let mut i = 0;
        while i < 64 {
            let t5 = le32(&block[i..i + 4]);
            let t6 = le32(&block[i + 4..i + 8]);
            even += u64::from(t5 >> 16);
            even += u64::from(t5 & 0xffff);
            odd += u64::from(t6 >> 16);
            odd += u64::from(t6 & 0xffff);
            i += 8;
        }
    }
    let rest = blocks.remainder();
    let mut words = rest.chunks_exact(4);
    for w in &mut words {
        let t = le32(w);
        even += u64::from(t >> 16);
        even += u64::from(t & 0xffff);
    }
    match *words.remainder() {
        [a, b, c] => odd += u64::from(u16::from_le_bytes([a, b])) + u64::from(c),
        [a, b] => odd += u64::from(u16::from_le_bytes([a, b])),
        [a] => odd += u64::from(a),
        _ => {}
    }
    finish(adc(even, odd))
}

// ---------------------------------------------------------------------------------------------
// (c) Portable wide loads.

/// (c) Portable fast checksum: 64-bit loads into four independent accumulators, 32 bytes per
/// iteration, each accumulator adding its carry back in (end-around carry) so no bit is lost.
///
/// This is paper 001's recipe (wide loads, unrolling, several registers in flight; Kay &
/// Pasquale, figure 11) on a 64-bit CPU with a carry flag: the four chains are independent, so
/// an out-of-order core runs them in parallel. Returns the folded sum, not complemented.
pub fn wide(data: &[u8]) -> u16 {
    finish(wide_acc(data))
}

/// The unfolded accumulator of [`wide`].
#[inline(always)]
fn wide_acc(data: &[u8]) -> u64 {
    let (mut a0, mut a1, mut a2, mut a3) = (0u64, 0u64, 0u64, 0u64);
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        a0 = adc(a0, le64(&b[0..8]));
        a1 = adc(a1, le64(&b[8..16]));
        a2 = adc(a2, le64(&b[16..24]));
        a3 = adc(a3, le64(&b[24..32]));
    }
    sum_tail(adc(adc(a0, a1), adc(a2, a3)), blocks.remainder())
}

/// Portable fused copy and checksum: [`wide`]'s loop with a store of each 64-bit word
/// (Partridge & Pink, paper 000 §7.1: "reads each word into a register, adds the word to the
/// running checksum, and then writes the word").
fn copy_and_sum_wide(dst: &mut [u8], src: &[u8]) -> u64 {
    let dst = &mut dst[..src.len()];
    let (mut a0, mut a1, mut a2, mut a3) = (0u64, 0u64, 0u64, 0u64);
    let mut d = dst.chunks_exact_mut(32);
    let mut s = src.chunks_exact(32);
    for (db, sb) in (&mut d).zip(&mut s) {
        let w0 = le64(&sb[0..8]);
        let w1 = le64(&sb[8..16]);
        let w2 = le64(&sb[16..24]);
        let w3 = le64(&sb[24..32]);
        db[0..8].copy_from_slice(&w0.to_le_bytes());
        db[8..16].copy_from_slice(&w1.to_le_bytes());
        db[16..24].copy_from_slice(&w2.to_le_bytes());
        db[24..32].copy_from_slice(&w3.to_le_bytes());
        a0 = adc(a0, w0);
        a1 = adc(a1, w1);
        a2 = adc(a2, w2);
        a3 = adc(a3, w3);
    }
    let acc = adc(adc(a0, a1), adc(a2, a3));
    copy_sum_tail(acc, d.into_remainder(), s.remainder())
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

/// The fastest checksum available on this CPU: the AVX-512 kernel from [`FAST_AVX512_MIN_LEN`]
/// bytes up where the CPU has AVX-512F and BW, the AVX2 kernel from [`FAST_SIMD_MIN_LEN`] bytes
/// up where it has AVX2, otherwise [`wide`].
///
/// CPU detection runs once; afterwards the choice costs a relaxed atomic load of a cached flag
/// and a well-predicted branch per width, so `fast` is cheap enough for every packet, and short
/// inputs (headers, small datagrams) never pay for vector setup. Returns the folded sum, not
/// complemented.
#[inline]
pub fn fast(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= FAST_SIMD_MIN_LEN {
        if data.len() >= FAST_AVX512_MIN_LEN {
            if let Some(avx512) = avx512::Avx512::detect() {
                return avx512.sum(data);
            }
        }
        if let Some(avx2) = x86::Avx2::detect() {
            return avx2.sum(data);
        }
    }
    wide(data)
}

/// (e) Fused copy and checksum: copies `src` into `dst` and returns the sum of `src`, touching
/// each byte once (Partridge & Pink, paper 000 §7.1 and table 8: the checksum adds little to the
/// cost of a copy loop; Chase et al., paper 002 §2.2, "integrated copy/checksum").
///
/// Uses the AVX-512 loop (64-byte loads and stores, masked at the ends) when the CPU has AVX-512F
/// and BW, else an AVX2 loop (32-byte loads and stores) when it has AVX2, when `src` is at least
/// [`COPY_SIMD_MIN_LEN`] bytes long; else a portable loop of 64-bit loads and stores with four
/// accumulators. Returns the folded sum, not complemented.
///
/// # Panics
///
/// If `dst` and `src` differ in length.
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy_and_sum: destination and source lengths differ"
    );
    #[cfg(target_arch = "x86_64")]
    if src.len() >= COPY_SIMD_MIN_LEN {
        if let Some(avx512) = avx512::Avx512::detect() {
            return avx512.copy_and_sum(dst, src);
        }
        if let Some(avx2) = x86::Avx2::detect() {
            return avx2.copy_and_sum(dst, src);
        }
    }
    finish(copy_and_sum_wide(dst, src))
}

/// [`copy_and_sum`] without AVX2, whatever the CPU: the portable fused loop of 64-bit loads and
/// stores. Kept public so the two fused loops can be measured against each other.
///
/// # Panics
///
/// If `dst` and `src` differ in length.
pub fn copy_and_sum_portable(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy_and_sum_portable: destination and source lengths differ"
    );
    finish(copy_and_sum_wide(dst, src))
}

// ---------------------------------------------------------------------------------------------
// (d) The IPv4 header.

/// (d) Partridge & Pink (paper 000 §6.1, "In-Line Checksum of IP Header"): the sum of a 20-byte
/// IPv4 header, as straight-line code that is always inlined: five 32-bit loads added into one
/// 64-bit register (which cannot overflow), then a branch-free fold. The paper found that the
/// call to a general routine tuned for long packets cost more than summing 20 bytes in-line.
///
/// Returns the folded sum, not complemented. To fill in the header checksum, sum the header with
/// its checksum field zeroed and store `!sum` big-endian in bytes 10..12; a received header is
/// intact when its sum, checksum field included, is `0xffff`. Headers with options (longer than
/// 20 bytes) go through [`fast`].
#[inline(always)]
pub fn ipv4_header_sum(header: &[u8; 20]) -> u16 {
    let h = header;
    let w0 = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let w1 = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    let w2 = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    let w3 = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    let w4 = u32::from_le_bytes([h[16], h[17], h[18], h[19]]);
    let acc = u64::from(w0) + u64::from(w1) + u64::from(w2) + u64::from(w3) + u64::from(w4);
    finish(acc)
}

// ---------------------------------------------------------------------------------------------
// Small pieces: pseudo-header, addition, incremental update.

/// Sum of the UDP/TCP pseudo-header of RFC 768 / RFC 793 (IPv4) or RFC 8200 §8.1 (IPv6): source
/// address, destination address, the protocol number (IPv6's next header) and the transport length
/// (header plus data). IPv6's pseudo-header carries the length in 32 bits and the protocol after
/// three zero bytes; the sum is the same, since the length here fits 16 bits (no jumbograms).
///
/// Add it to the transport header and data sums with [`add`] or [`Checksum::add_sum`].
/// Returns the folded sum, not complemented.
#[inline]
pub fn pseudo_header_sum<A: IpAddress>(src: A, dst: A, protocol: u8, length: u16) -> u16 {
    // IPv4: six 16-bit values; IPv6: eighteen. Well inside 32 bits either way.
    let acc = src.word_sum() + dst.word_sum() + u32::from(protocol) + u32::from(length);
    let acc = (acc & 0xffff) + (acc >> 16);
    ((acc & 0xffff) + (acc >> 16)) as u16
}

/// Ones'-complement addition of two sums (end-around carry). `add(a, b)` is `0` only when both
/// are `0`, matching the sum of the concatenated data when each sum covers an even number of
/// bytes (for pieces at odd offsets see [`Checksum::add_piece`]).
#[inline(always)]
pub fn add(a: u16, b: u16) -> u16 {
    let (s, carry) = a.overflowing_add(b);
    // Cannot overflow: when `carry` is set, `s <= 0xfffe`.
    s + u16::from(carry)
}

/// (f) Incremental update of a checksum *field* when one 16-bit word of the covered data
/// changes from `old` to `new`, by RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`.
///
/// `field` is the value stored in the header (the complemented sum), and the result is the new
/// value to store; all three are numbers in network byte order semantics (`u16::from_be_bytes`
/// of the bytes). Unlike the subtractive form (RFC 1624 eqn. 2), eqn. 3 never yields `0xffff`
/// for a field that was consistent with its data. It matches a full recomputation except in one
/// case: when the new data is all zeros, eqn. 3 yields `0x0000` where recomputation yields
/// `0xffff` (the same value in ones' complement; impossible for a real IPv4 header, whose
/// version field is nonzero).
#[inline]
pub fn update16(field: u16, old: u16, new: u16) -> u16 {
    !add(add(!field, !old), new)
}

/// [`update16`] for a 32-bit word that starts at an even offset of the covered data, e.g. an
/// IPv4 address rewritten by NAT (`u32::from(Ipv4Addr)` values), RFC 1624 eqn. 3 applied to
/// both halves at once.
#[inline]
pub fn update32(field: u16, old: u32, new: u32) -> u16 {
    let (old_hi, old_lo) = ((old >> 16) as u16, old as u16);
    let (new_hi, new_lo) = ((new >> 16) as u16, new as u16);
    !add(add(add(!field, !old_hi), add(!old_lo, new_hi)), new_lo)
}

// ---------------------------------------------------------------------------------------------
// Algorithm selection.

/// The checksum algorithms of this module, for selecting and measuring them at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`rfc1071`]: the 16-bit reference loop.
    Rfc1071,
    /// [`unrolled32`]: Kay & Pasquale's RISC loop (paper 001, figure 11).
    Unrolled32,
    /// [`wide`]: portable 64-bit loads with four accumulators.
    Wide,
    /// The AVX2 kernel (x86-64 CPUs with AVX2 only; see [`Algorithm::is_available`]). Sums
    /// 32-byte vectors with `vpmaddwd` into 32-bit lanes, 256 bytes per iteration. Used
    /// through [`Algorithm::sum`] it runs at every length, unlike [`fast`], which sends short
    /// inputs to [`wide`].
    Avx2,
    /// The AVX-512 kernel (x86-64 CPUs with AVX-512F and AVX-512BW only). Sums 64-byte vectors
    /// the same way, 512 bytes per iteration, with one masked vector for the unaligned head and
    /// one for the ragged tail, so no byte goes through a scalar loop.
    Avx512,
}

impl Algorithm {
    /// Every algorithm, available here or not, in the order of the paper trail.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Rfc1071,
        Algorithm::Unrolled32,
        Algorithm::Wide,
        Algorithm::Avx2,
        Algorithm::Avx512,
    ];

    /// The algorithm's name: `"rfc1071"`, `"unrolled32"`, `"wide"` or `"avx2"` (what
    /// [`FromStr`] parses).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rfc1071 => "rfc1071",
            Algorithm::Unrolled32 => "unrolled32",
            Algorithm::Wide => "wide",
            Algorithm::Avx2 => "avx2",
            Algorithm::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run the algorithm: always, except [`Algorithm::Avx2`], which needs
    /// an x86-64 CPU with AVX2, and [`Algorithm::Avx512`], which needs AVX-512F and AVX-512BW
    /// (detected once, then cached).
    pub fn is_available(self) -> bool {
        match self {
            Algorithm::Avx2 => avx2_available(),
            Algorithm::Avx512 => avx512_available(),
            _ => true,
        }
    }

    /// The fastest algorithm on this CPU for long inputs: [`Algorithm::Avx512`] if available,
    /// else [`Algorithm::Avx2`] if available, else [`Algorithm::Wide`].
    pub fn fastest() -> Algorithm {
        if avx512_available() {
            Algorithm::Avx512
        } else if avx2_available() {
            Algorithm::Avx2
        } else {
            Algorithm::Wide
        }
    }

    /// This algorithm's loop fused with a copy of `src` into `dst` (paper 000 §7.1): `rfc1071` and
    /// `unrolled32` get fused loops of their own word size, `wide` the portable fused loop, `avx2` and
    /// `avx512` their vector loops from [`COPY_SIMD_MIN_LEN`] bytes up and the portable loop below
    /// that or where the CPU lacks the features. Returns the folded sum of `src`.
    ///
    /// # Panics
    ///
    /// If `dst` and `src` differ in length.
    pub fn copy_and_sum(self, dst: &mut [u8], src: &[u8]) -> u16 {
        assert_eq!(
            dst.len(),
            src.len(),
            "copy_and_sum: destination and source lengths differ"
        );
        match self {
            Algorithm::Rfc1071 => copy_and_sum_rfc1071(dst, src),
            Algorithm::Unrolled32 => copy_and_sum_unrolled32(dst, src),
            Algorithm::Wide => copy_and_sum_portable(dst, src),
            Algorithm::Avx2 => {
                #[cfg(target_arch = "x86_64")]
                if src.len() >= COPY_SIMD_MIN_LEN {
                    if let Some(avx2) = x86::Avx2::detect() {
                        return avx2.copy_and_sum(dst, src);
                    }
                }
                copy_and_sum_portable(dst, src)
            }
            Algorithm::Avx512 => {
                #[cfg(target_arch = "x86_64")]
                if src.len() >= COPY_SIMD_MIN_LEN {
                    if let Some(avx512) = avx512::Avx512::detect() {
                        return avx512.copy_and_sum(dst, src);
                    }
                }
                copy_and_sum_portable(dst, src)
            }
        }
    }

    /// Sums a packet's `data` as the stack does with this algorithm chosen: the vector algorithms
    /// hand inputs shorter than [`FAST_SIMD_MIN_LEN`] to [`wide`], which is faster there (as
    /// [`fast`] does, and as [`Algorithm::copy_and_sum`] does below [`COPY_SIMD_MIN_LEN`]); the
    /// scalar ones run as they are. [`Algorithm::sum`] runs the algorithm itself at any length, for
    /// measuring it.
    #[inline]
    pub fn sum_packet(self, data: &[u8]) -> u16 {
        match self {
            Algorithm::Avx2 | Algorithm::Avx512 if data.len() < FAST_SIMD_MIN_LEN => wide(data),
            _ => self.sum(data),
        }
    }

    /// Sums `data` with this algorithm; returns the folded sum, not complemented. An
    /// algorithm that is not available on this CPU falls back to [`wide`], so this never fails.
    pub fn sum(self, data: &[u8]) -> u16 {
        match self {
            Algorithm::Rfc1071 => rfc1071(data),
            Algorithm::Unrolled32 => unrolled32(data),
            Algorithm::Wide => wide(data),
            Algorithm::Avx2 => {
                #[cfg(target_arch = "x86_64")]
                if let Some(avx2) = x86::Avx2::detect() {
                    return avx2.sum(data);
                }
                wide(data)
            }
            Algorithm::Avx512 => {
                #[cfg(target_arch = "x86_64")]
                if let Some(avx512) = avx512::Avx512::detect() {
                    return avx512.sum(data);
                }
                wide(data)
            }
        }
    }
}

/// Whether the AVX-512 kernels can run here (cached after the first call).
fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512::Avx512::detect().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX2 kernels can run here (cached after the first call).
fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86::Avx2::detect().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing an [`Algorithm`] from an unknown name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseAlgorithmError(String);

impl fmt::Display for ParseAlgorithmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown checksum algorithm {:?} (expected rfc1071, unrolled32, wide, avx2, avx512, fast or fastest)",
            self.0
        )
    }
}

impl std::error::Error for ParseAlgorithmError {}

impl FromStr for Algorithm {
    type Err = ParseAlgorithmError;

    /// Parses an algorithm's [`name`](Algorithm::name), or `"fast"`/`"fastest"` for
    /// [`Algorithm::fastest`]. Case-sensitive. `"avx2"` parses even where AVX2 is missing (it
    /// then sums with [`wide`]); check [`Algorithm::is_available`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fast" | "fastest" => Ok(Algorithm::fastest()),
            _ => Algorithm::ALL
                .into_iter()
                .find(|a| a.name() == s)
                .ok_or_else(|| ParseAlgorithmError(s.to_owned())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (g) Partial sums.

/// (g) A running checksum over a byte stream that arrives in scattered pieces (buffer chains,
/// header and payload in different places), each piece summed on its own and the partial sums
/// combined with ones'-complement addition, odd-length pieces included (Chase et al., paper 002
/// §3.2: a packet's data spans several host buffers, each DMA transfer yields its own partial
/// checksum, and the adapters combine them with ones'-complement addition; Partridge & Pink,
/// paper 000 §7.1, pass a partial checksum between the UDP and socket layers).
///
/// A piece that begins at an odd offset of the stream has its bytes in the opposite halves of
/// the 16-bit words, so its sum (computed as if it began at an even offset) is byte-swapped
/// before it is added (RFC 1071 §2(B)).
///
/// ```
/// use fastpath::checksum::{rfc1071, Checksum};
/// let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
/// let mut c = Checksum::new();
/// c.add_bytes(&data[..3]);
/// c.add_bytes(&data[3..]);
/// assert_eq!(c.sum(), rfc1071(&data));
/// assert_eq!(c.checksum(), !0xddf2);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Checksum {
    /// Folded sum so far, big-endian-valued.
    sum: u16,
    /// Bytes of the stream so far (only its parity matters to the sum).
    len: usize,
}

impl Checksum {
    /// An empty checksum: no bytes, sum zero.
    pub const fn new() -> Self {
        Checksum { sum: 0, len: 0 }
    }

    /// Adds the next piece of the byte stream, summed with [`fast`].
    #[inline]
    pub fn add_bytes(&mut self, data: &[u8]) {
        self.add_piece(fast(data), data.len());
    }

    /// Adds the next piece of the byte stream, summed with `alg` (see [`Algorithm::sum`]).
    pub fn add_bytes_with(&mut self, alg: Algorithm, data: &[u8]) {
        self.add_piece(alg.sum(data), data.len());
    }

    /// Adds the next piece of the stream, `len` bytes long, whose sum `sum` is already known
    /// (e.g. computed by a NIC or while copying), computed as if the piece began at an even
    /// offset. If the stream so far has an odd length, the piece's sum is byte-swapped first.
    #[inline]
    pub fn add_piece(&mut self, sum: u16, len: usize) {
        let sum = if self.len & 1 == 1 {
            sum.swap_bytes()
        } else {
            sum
        };
        self.sum = add(self.sum, sum);
        self.len = self.len.wrapping_add(len);
    }

    /// Copies the next piece of the stream from `src` into `dst` and adds it, in one fused pass
    /// ([`copy_and_sum`]).
    ///
    /// # Panics
    ///
    /// If `dst` and `src` differ in length.
    #[inline]
    pub fn copy_and_add(&mut self, dst: &mut [u8], src: &[u8]) {
        let sum = copy_and_sum(dst, src);
        self.add_piece(sum, src.len());
    }

    /// Fused copy of the next piece with `alg`'s fused loop ([`Algorithm::copy_and_sum`]).
    ///
    /// # Panics
    ///
    /// If `dst` and `src` differ in length.
    #[inline]
    pub fn copy_and_add_with(&mut self, alg: Algorithm, dst: &mut [u8], src: &[u8]) {
        let sum = alg.copy_and_sum(dst, src);
        self.add_piece(sum, src.len());
    }

    /// Copies `pieces` one after another into the start of `dst`, summing them in the same pass with
    /// `alg` (a gathered write fused with its checksum).
    ///
    /// # Panics
    ///
    /// If `dst` is shorter than the pieces together.
    #[inline]
    pub fn copy_and_add_pieces<P: std::ops::Deref<Target = [u8]>>(
        &mut self,
        alg: Algorithm,
        dst: &mut [u8],
        pieces: &[P],
    ) {
        let mut at = 0;
        // A ring's second piece is empty unless the bytes wrap: nothing to copy or sum.
        for piece in pieces.iter().filter(|p| !p.is_empty()) {
            self.copy_and_add_with(alg, &mut dst[at..at + piece.len()], piece);
            at += piece.len();
        }
    }

    /// Adds a 16-bit sum that is not part of the byte stream, e.g. [`pseudo_header_sum`]:
    /// it is added as is, and the stream length (and so its parity) does not change.
    #[inline]
    pub fn add_sum(&mut self, sum: u16) {
        self.sum = add(self.sum, sum);
    }

    /// Number of stream bytes added so far (not counting [`add_sum`](Checksum::add_sum)).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no stream bytes have been added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The folded sum so far, not complemented.
    pub fn sum(&self) -> u16 {
        self.sum
    }

    /// The value for a checksum field: the complement of [`sum`](Checksum::sum). (UDP
    /// transmits a computed `0x0000` as `0xffff`; that is the caller's business.)
    pub fn checksum(&self) -> u16 {
        !self.sum
    }
}
