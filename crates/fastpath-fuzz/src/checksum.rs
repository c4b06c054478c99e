//! The checksum routines, against a reference sum.

use std::net::Ipv4Addr;

use fastpath::checksum::{self, Algorithm, Checksum};

use crate::{reference_sum, Input};

/// The Internet checksum every way the stack computes it. The first byte says how many cuts (0 to
/// 7) to make, the next bytes where; the rest is the data. Every algorithm (available here or not:
/// an unavailable one falls back), every fused copy, [`Checksum`] over the pieces (odd lengths and
/// odd offsets included, summed with each algorithm), the in-line 20-byte header sum, the
/// pseudo-header sum and RFC 1624 incremental updates all agree with [`reference_sum`].
pub fn checksum(data: &[u8]) {
    let mut input = Input::new(data);
    let ncuts = input.below(8);
    let cuts: Vec<u16> = (0..ncuts).map(|_| input.u16()).collect();
    let data = input.rest();
    let expect = reference_sum(data);

    for alg in Algorithm::ALL {
        assert_eq!(alg.sum(data), expect, "{alg} sum of {} bytes", data.len());
        let mut dst = vec![0u8; data.len()];
        assert_eq!(
            alg.copy_and_sum(&mut dst, data),
            expect,
            "{alg} copy_and_sum"
        );
        assert_eq!(dst, data, "{alg} copy_and_sum copied");
    }
    assert_eq!(checksum::rfc1071(data), expect, "rfc1071");
    assert_eq!(checksum::unrolled32(data), expect, "unrolled32");
    assert_eq!(checksum::wide(data), expect, "wide");
    assert_eq!(checksum::fast(data), expect, "fast");
    let mut dst = vec![0u8; data.len()];
    assert_eq!(checksum::copy_and_sum(&mut dst, data), expect);
    assert_eq!(dst, data);
    dst.fill(0);
    assert_eq!(checksum::copy_and_sum_portable(&mut dst, data), expect);
    assert_eq!(dst, data);

    // Pieces: cut where the input says, in order.
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (data.len() + 1))
        .collect();
    at.sort_unstable();
    let mut bounds = vec![0];
    bounds.extend(at);
    bounds.push(data.len());
    for alg in Algorithm::ALL {
        let (mut by_sum, mut by_copy) = (Checksum::new(), Checksum::new());
        let mut copy = vec![0u8; data.len()];
        for w in bounds.windows(2) {
            let piece = &data[w[0]..w[1]];
            by_sum.add_bytes_with(alg, piece);
            by_copy.copy_and_add_with(alg, &mut copy[w[0]..w[1]], piece);
        }
        assert_eq!(by_sum.sum(), expect, "{alg} over pieces {bounds:?}");
        assert_eq!(by_copy.sum(), expect, "{alg} fused over pieces {bounds:?}");
        assert_eq!(by_sum.len(), data.len());
        assert_eq!(copy, data);
    }
    let mut plain = Checksum::new();
    for w in bounds.windows(2) {
        plain.add_bytes(&data[w[0]..w[1]]);
    }
    assert_eq!(plain.sum(), expect, "Checksum::add_bytes over pieces");
    assert_eq!(plain.checksum(), !expect);

    if let Some(header) = data.first_chunk::<20>() {
        assert_eq!(checksum::ipv4_header_sum(header), reference_sum(header));
    }
    if let Some(p) = data.first_chunk::<11>() {
        let (src, dst) = (
            Ipv4Addr::new(p[0], p[1], p[2], p[3]),
            Ipv4Addr::new(p[4], p[5], p[6], p[7]),
        );
        let length = u16::from_be_bytes([p[9], p[10]]);
        let mut pseudo = [0u8; 12];
        pseudo[..8].copy_from_slice(&p[..8]);
        pseudo[9] = p[8];
        pseudo[10..].copy_from_slice(&p[9..11]);
        assert_eq!(
            checksum::pseudo_header_sum(src, dst, p[8], length),
            reference_sum(&pseudo)
        );
        assert_eq!(
            checksum::add(reference_sum(&p[..4]), reference_sum(&p[4..8])),
            reference_sum(&p[..8])
        );
    }

    // RFC 1624: change a word (or two) of an even-length prefix and update the field incrementally.
    let even = &data[..data.len() & !1];
    if even.len() >= 2 {
        let field = !reference_sum(even);
        let i = (cuts.first().copied().unwrap_or(0) as usize % (even.len() / 2)) * 2;
        let new = cuts.get(1).copied().unwrap_or(0x1234);
        let mut changed = even.to_vec();
        changed[i..i + 2].copy_from_slice(&new.to_be_bytes());
        let updated = checksum::update16(field, u16::from_be_bytes([even[i], even[i + 1]]), new);
        same_field(updated, !reference_sum(&changed), &changed, "update16");
        if i + 4 <= even.len() {
            let old = u32::from_be_bytes(even[i..i + 4].try_into().expect("4 bytes"));
            let new = u32::from(new) << 16 | u32::from(cuts.get(2).copied().unwrap_or(7));
            changed[i..i + 4].copy_from_slice(&new.to_be_bytes());
            let updated = checksum::update32(field, old, new);
            same_field(updated, !reference_sum(&changed), &changed, "update32");
        }
    }
}

/// An incrementally updated field equals a recomputed one, except for the one case the docs of
/// `update16` allow: all-zero data, where `0x0000` and `0xffff` are the same number.
fn same_field(updated: u16, recomputed: u16, data: &[u8], what: &str) {
    if data.iter().all(|&b| b == 0) {
        assert!(matches!(updated, 0 | 0xffff), "{what}: {updated:#06x}");
    } else {
        assert_eq!(updated, recomputed, "{what} over {} bytes", data.len());
    }
}
