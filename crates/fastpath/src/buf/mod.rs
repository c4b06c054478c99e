//! Packet buffers: headroom so each layer prepends its header without moving the payload, and a pool that
//! recycles them.
//!
//! A [`PacketBuf`] owns one contiguous allocation with a movable window `[head, tail)` over it. Output
//! writes the payload once, after [`HEADROOM`] bytes of room, and every layer below prepends its header
//! with [`PacketBuf::push_front`]; input strips headers with [`PacketBuf::pull_front`]. Nothing is ever
//! moved.
//!
//! [`BufferPool`] hands out buffers either from free lists of fixed-size buffers (the default) or from
//! the heap, one allocation per packet (the 4.3BSD-like mode the papers measured), selected by
//! [`BufferMode`].

mod pool;
pub(crate) mod ring;

use std::fmt;

pub use pool::{BufferDepot, BufferMode, BufferPool, PoolStats};

/// Bytes reserved in front of the payload of every buffer made for output: room for a virtio-net header
/// (12), an IPv4 header with options (60) and a transport header, rounded up.
pub const HEADROOM: usize = 128;

/// Checksum offload state of a packet, as a link reports it on input or is asked for on output.
///
/// The two states mirror the virtio-net header flags the Linux TUN driver uses (paper 002 §3.2:
/// checksum offloading).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChecksumOffload {
    /// No offload information: the transport checksum is complete and must be verified in software.
    #[default]
    None,
    /// The transport checksum field holds only the pseudo-header sum; whoever transmits the packet
    /// (the link, or the peer it is delivered to locally) completes it. `start` is the offset from the
    /// start of the IP header where summing starts, `offset` where the result goes, relative to
    /// `start` (virtio's `VIRTIO_NET_HDR_F_NEEDS_CSUM`). Received like this, the data never crossed
    /// a wire and is trusted.
    Partial {
        /// Offset of the transport header from the start of the packet.
        start: u16,
        /// Offset of the checksum field within the transport header.
        offset: u16,
    },
    /// The link verified the transport checksum (virtio's `VIRTIO_NET_HDR_F_DATA_VALID`).
    Valid,
}

/// Per-packet metadata that travels with a buffer across a link: the transport checksum's offload
/// state ([`ChecksumOffload`]) and the segmentation offload size.
///
/// Both are packed into one 64-bit word, so that every copy of a [`PacketBuf`] moves whole words. As
/// a struct of an enum and a `u16`, a change of the checksum state was written as a 4-byte and a
/// 2-byte store, and the buffer's next move (into a link queue, a batch, a socket queue), often a
/// few instructions later, read the metadata back as one 8-byte load. A CPU cannot forward two
/// stores into one load: the load waited for the stores to reach the cache, every packet.
/// `peers_profile` ran 7% (32 datagrams a poll) to 8% (one) faster with the packed word (README,
/// "The release build, and where a datagram's time goes").
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta(u64);

// `PacketMeta`'s word: the checksum state's kind in the low byte, the TOS byte in bits 8-15 (the
// ECN field in bits 8-9, the DSCP above it),
// `Partial`'s `start` in bits 16-31 and `offset` in bits 32-47, `gso_size` in bits 48-63.
const META_NONE: u64 = 0;
const META_PARTIAL: u64 = 1;
const META_VALID: u64 = 2;
const META_ECN: u64 = 3 << 8;
const META_TOS: u64 = 0xff << 8;

impl PacketMeta {
    /// Metadata with these values.
    #[inline]
    pub const fn new(checksum: ChecksumOffload, gso_size: u16) -> PacketMeta {
        let low = match checksum {
            ChecksumOffload::None => META_NONE,
            ChecksumOffload::Partial { start, offset } => {
                META_PARTIAL | (start as u64) << 16 | (offset as u64) << 32
            }
            ChecksumOffload::Valid => META_VALID,
        };
        PacketMeta(low | (gso_size as u64) << 48)
    }

    /// Transport checksum offload state.
    #[inline]
    pub const fn checksum(self) -> ChecksumOffload {
        match self.0 & 0xff {
            META_PARTIAL => ChecksumOffload::Partial {
                start: (self.0 >> 16) as u16,
                offset: (self.0 >> 32) as u16,
            },
            META_VALID => ChecksumOffload::Valid,
            _ => ChecksumOffload::None,
        }
    }

    /// Sets the transport checksum offload state.
    #[inline]
    pub fn set_checksum(&mut self, checksum: ChecksumOffload) {
        *self = PacketMeta(PacketMeta::new(checksum, self.gso_size()).0 | self.0 & META_TOS);
    }

    /// The IP header's ECN field (RFC 3168 §5: 0 not ECN-capable, 1 and 2 ECT, 3 CE) of a TCP
    /// segment: IP input's, for TCP to read, or TCP's for a segment it sends, for IP output to
    /// write. Zero on every other packet.
    #[inline]
    pub const fn ecn(self) -> u8 {
        ((self.0 & META_ECN) >> 8) as u8
    }

    /// Sets the ECN field (see [`ecn`](Self::ecn)).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        *self = PacketMeta(self.0 & !META_ECN | ((ecn & 3) as u64) << 8);
    }

    /// The whole byte IP output writes as the IPv4 header's TOS (IPv6's traffic class): the
    /// sending socket's DSCP in the top six bits ([`set_tos`](Self::set_tos)), the ECN field in the
    /// low two.
    #[inline]
    pub const fn tos(self) -> u8 {
        ((self.0 & META_TOS) >> 8) as u8
    }

    /// Sets the whole TOS byte (see [`tos`](Self::tos)).
    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        *self = PacketMeta(self.0 & !META_TOS | u64::from(tos) << 8);
    }

    /// Segmentation offload (paper 002 §3.3): when non-zero, the packet is a TCP segment larger than
    /// the MTU that the link cuts into segments of this many payload bytes (virtio's `gso_size` with
    /// `VIRTIO_NET_HDR_GSO_TCPV4`). Only set for links that offer [`LinkCapabilities::tso`].
    ///
    /// [`LinkCapabilities::tso`]: crate::link::LinkCapabilities::tso
    #[inline]
    pub const fn gso_size(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// Sets the segmentation offload size (see [`gso_size`](Self::gso_size)).
    #[inline]
    pub fn set_gso_size(&mut self, gso_size: u16) {
        *self = PacketMeta(self.0 & !(0xffff << 48) | (gso_size as u64) << 48);
    }
}

impl fmt::Debug for PacketMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketMeta")
            .field("checksum", &self.checksum())
            .field("gso_size", &self.gso_size())
            .field("ecn", &self.ecn())
            .finish()
    }
}

/// A packet: one allocation with a window `[head, tail)` of valid bytes, headroom before it and tailroom
/// after it.
#[derive(Debug)]
pub struct PacketBuf {
    storage: Box<[u8]>,
    // 32-bit offsets (buffers stay far below 4 GiB) keep the struct at 32 bytes: it is moved several
    // times per packet, from link queue to batch to socket queue.
    head: u32,
    tail: u32,
    /// Offload metadata.
    pub meta: PacketMeta,
}

impl PacketBuf {
    /// A buffer over `storage` whose window starts empty at `headroom`.
    ///
    /// # Panics
    /// If `headroom > storage.len()`.
    pub fn with_storage(storage: Vec<u8>, headroom: usize) -> PacketBuf {
        assert!(
            headroom <= storage.len(),
            "headroom past the end of the buffer"
        );
        PacketBuf {
            storage: storage.into_boxed_slice(),
            head: headroom as u32,
            tail: headroom as u32,
            meta: PacketMeta::default(),
        }
    }

    /// A buffer over recycled `storage` (for the pool).
    pub(crate) fn from_storage(storage: Box<[u8]>, headroom: usize) -> PacketBuf {
        debug_assert!(headroom <= storage.len());
        PacketBuf {
            storage,
            head: headroom as u32,
            tail: headroom as u32,
            meta: PacketMeta::default(),
        }
    }

    /// A buffer that holds a copy of `bytes` with [`HEADROOM`] in front: for tests and packet
    /// injection, not for the data path.
    pub fn from_slice(bytes: &[u8]) -> PacketBuf {
        let mut storage = vec![0; HEADROOM + bytes.len()];
        storage[HEADROOM..].copy_from_slice(bytes);
        PacketBuf {
            storage: storage.into_boxed_slice(),
            head: HEADROOM as u32,
            tail: (HEADROOM + bytes.len()) as u32,
            meta: PacketMeta::default(),
        }
    }

    /// The valid bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.storage[self.head as usize..self.tail as usize]
    }

    /// The valid bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.head as usize..self.tail as usize]
    }

    /// Number of valid bytes.
    #[inline]
    pub fn len(&self) -> usize {
        (self.tail - self.head) as usize
    }

    /// True when there are no valid bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Room left in front of the valid bytes.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.head as usize
    }

    /// Room left after the valid bytes.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.storage.len() - self.tail as usize
    }

    /// Bytes of memory this buffer holds, for accounting against limits (Linux calls it truesize).
    #[inline]
    pub fn truesize(&self) -> usize {
        self.storage.len()
    }

    /// Grows the window `n` bytes to the front and returns the new bytes, for a header to be written.
    ///
    /// # Panics
    /// If there is less than `n` bytes of headroom: output paths reserve [`HEADROOM`], so this is a bug.
    #[inline(always)]
    pub fn push_front(&mut self, n: usize) -> &mut [u8] {
        assert!(n <= self.head as usize, "no headroom for a {n}-byte header");
        self.head -= n as u32;
        let head = self.head as usize;
        &mut self.storage[head..head + n]
    }

    /// Drops `n` bytes from the front (a parsed header). Returns false, changing nothing, if there are
    /// fewer than `n` valid bytes.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        self.head += n as u32;
        true
    }

    /// Grows the window `n` bytes at the back and returns them, for payload to be written.
    ///
    /// # Panics
    /// If there is less than `n` bytes of tailroom (the buffer was allocated for its payload).
    #[inline(always)]
    pub fn extend(&mut self, n: usize) -> &mut [u8] {
        assert!(n <= self.tailroom(), "no tailroom for {n} bytes");
        let start = self.tail as usize;
        self.tail += n as u32;
        &mut self.storage[start..start + n]
    }

    /// Sets the window to `len` bytes from its start (for [`BufferPool::alloc_len`]).
    ///
    /// # Panics
    /// If `len` passes the end of the storage.
    #[inline(always)]
    pub(crate) fn set_len_within(&mut self, len: usize) {
        let head = self.head as usize;
        assert!(len <= self.storage.len() - head, "no room for {len} bytes");
        self.tail = (head + len) as u32;
    }

    /// Appends a copy of `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.extend(bytes.len()).copy_from_slice(bytes);
    }

    /// Shortens the window to `len` bytes (no effect if it is shorter already).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.tail = self.head + len as u32;
        }
    }

    /// Empties the window and places it at `headroom`, for reuse; clears the metadata.
    #[inline]
    pub fn reset(&mut self, headroom: usize) {
        let headroom = headroom.min(self.storage.len()) as u32;
        self.head = headroom;
        self.tail = headroom;
        self.meta = PacketMeta::default();
    }

    /// Gives the storage back (for the pool).
    pub(crate) fn into_storage(self) -> Box<[u8]> {
        self.storage
    }

    /// A copy in a fresh heap buffer with the same window and metadata (link duplication, broadcast).
    pub fn duplicate(&self) -> PacketBuf {
        PacketBuf {
            storage: self.storage.clone(),
            head: self.head,
            tail: self.tail,
            meta: self.meta,
        }
    }
}

/// Copies `src` into `dst`, which must be as long. A copy of 16 to 64 bytes (a small datagram's
/// payload) is two overlapping fixed-size moves the compiler emits in line; others go to `memcpy`.
/// Called out of line for a length it does not know, `memcpy` costs a call and its own dispatch on
/// the size: two of those were 9% of a 64-byte datagram's time in `examples/peers_profile`.
///
/// # Panics
///
/// If `dst` is shorter than `src` (and, in debug builds, if it is longer).
#[inline(always)]
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert_eq!(dst.len(), n, "a copy between slices of different lengths");
    let dst = &mut dst[..n];
    if (16..=32).contains(&n) {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if (33..=64).contains(&n) {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Copies `pieces` one after another into the start of `dst` (a gathered write).
///
/// # Panics
///
/// If `dst` is shorter than the pieces together.
#[inline]
pub(crate) fn gather<P: std::ops::Deref<Target = [u8]>>(dst: &mut [u8], pieces: &[P]) {
    let mut at = 0;
    for piece in pieces {
        dst[at..at + piece.len()].copy_from_slice(piece);
        at += piece.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_word_keeps_every_value() {
        let states = [
            ChecksumOffload::None,
            ChecksumOffload::Valid,
            ChecksumOffload::Partial {
                start: 20,
                offset: 6,
            },
            ChecksumOffload::Partial {
                start: u16::MAX,
                offset: u16::MAX,
            },
        ];
        for checksum in states {
            for gso in [0, 1, 1448, u16::MAX] {
                let mut meta = PacketMeta::new(checksum, gso);
                assert_eq!((meta.checksum(), meta.gso_size()), (checksum, gso));
                for other in states {
                    meta.set_checksum(other);
                    assert_eq!((meta.checksum(), meta.gso_size()), (other, gso));
                }
                meta.set_gso_size(7);
                assert_eq!((meta.checksum(), meta.gso_size()), (states[3], 7));
            }
        }
        assert_eq!(PacketMeta::default().checksum(), ChecksumOffload::None);
        assert_eq!(PacketMeta::default().gso_size(), 0);
    }

    #[test]
    fn copy_copies_every_length() {
        let src: Vec<u8> = (0..200u8).collect();
        for n in 0..=130 {
            let mut dst = vec![0xffu8; n + 3];
            copy(&mut dst[..n], &src[7..7 + n]);
            assert_eq!(&dst[..n], &src[7..7 + n], "length {n}");
            assert_eq!(&dst[n..], &[0xff; 3], "length {n} wrote past its end");
        }
    }

    #[test]
    #[should_panic]
    fn copy_into_a_shorter_slice_is_a_bug() {
        copy(&mut [0u8; 20], &[1u8; 40]);
    }

    #[test]
    fn headers_prepend_without_moving_the_payload() {
        let mut b = PacketBuf::with_storage(vec![0; 200], HEADROOM);
        b.extend_from_slice(b"payload");
        let payload_at = b.headroom();
        b.push_front(8).copy_from_slice(&[1; 8]);
        b.push_front(20).copy_from_slice(&[2; 20]);
        assert_eq!(b.len(), 35);
        assert_eq!(&b.data()[28..], b"payload");
        assert_eq!(b.headroom() + 28, payload_at);
        assert!(b.pull_front(28));
        assert_eq!(b.data(), b"payload");
        assert!(!b.pull_front(8));
        b.truncate(3);
        assert_eq!(b.data(), b"pay");
        b.truncate(10);
        assert_eq!(b.data(), b"pay");
    }

    #[test]
    #[should_panic(expected = "no headroom")]
    fn pushing_past_the_headroom_is_a_bug() {
        let mut b = PacketBuf::with_storage(vec![0; 16], 4);
        b.push_front(5);
    }
}
