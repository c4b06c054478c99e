//! The Internet checksum (RFC 1071) in every form the papers measure. STUB: replaced by the full module.
#![allow(missing_docs)]
use std::net::Ipv4Addr;

/// RFC 1071 reference: sum of big-endian 16-bit words, folded. Returns the folded sum (not complemented).
pub fn rfc1071(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u32;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [b] = chunks.remainder() {
        acc += (*b as u32) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Rfc1071,
    Unrolled32,
    Wide,
    Avx2,
}

impl Algorithm {
    pub fn fastest() -> Algorithm {
        Algorithm::Rfc1071
    }
    pub fn name(self) -> &'static str {
        "rfc1071"
    }
    pub fn sum(self, data: &[u8]) -> u16 {
        rfc1071(data)
    }
}

pub fn fast(data: &[u8]) -> u16 {
    rfc1071(data)
}

pub fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

pub fn ipv4_header_sum(header: &[u8; 20]) -> u16 {
    rfc1071(header)
}

pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    dst.copy_from_slice(src);
    rfc1071(src)
}

pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let mut c = Checksum::new();
    c.add_bytes(&src.octets());
    c.add_bytes(&dst.octets());
    c.add_bytes(&[0, protocol]);
    c.add_bytes(&length.to_be_bytes());
    c.sum()
}

pub fn update16(field: u16, old: u16, new: u16) -> u16 {
    !add(add(!field, !old), new)
}

pub fn update32(field: u16, old: u32, new: u32) -> u16 {
    let f = update16(field, (old >> 16) as u16, (new >> 16) as u16);
    update16(f, old as u16, new as u16)
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Checksum {
    sum: u16,
    len: usize,
}

impl Checksum {
    pub const fn new() -> Self {
        Checksum { sum: 0, len: 0 }
    }
    pub fn add_piece(&mut self, sum: u16, len: usize) {
        let s = if self.len % 2 == 1 {
            sum.swap_bytes()
        } else {
            sum
        };
        self.sum = add(self.sum, s);
        self.len += len;
    }
    pub fn add_bytes(&mut self, data: &[u8]) {
        self.add_piece(rfc1071(data), data.len());
    }
    pub fn add_bytes_with(&mut self, alg: Algorithm, data: &[u8]) {
        self.add_piece(alg.sum(data), data.len());
    }
    pub fn copy_and_add(&mut self, dst: &mut [u8], src: &[u8]) {
        let s = copy_and_sum(dst, src);
        self.add_piece(s, src.len());
    }
    pub fn add_sum(&mut self, sum: u16) {
        self.sum = add(self.sum, sum);
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn sum(&self) -> u16 {
        self.sum
    }
    pub fn checksum(&self) -> u16 {
        !self.sum
    }
}
