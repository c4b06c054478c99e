//! The transport checksum, decided and done in one place for UDP and TCP: on transmit, whether it is
//! computed while the payload is copied in (Partridge & Pink, paper 000 §7.1), in a separate pass
//! (4.3BSD), left to the link (paper 002 §3.2) or left out (Kay & Pasquale, paper 001); on receive,
//! whether the link vouched for it, or it is verified at once, or deferred to the copy to the
//! application (paper 000 §7.1.1). The switches are `StackConfig::copy_checksum`,
//! `StackConfig::checksum_policy` and `StackConfig::checksum` (the routine).

use std::io::{IoSlice, IoSliceMut};

use crate::addr::IpAddress;
use crate::buf::{gather, ChecksumOffload};
use crate::checksum::{self, Algorithm, Checksum};
use crate::config::{ChecksumPolicy, CopyChecksum, StackConfig};
use crate::ip::NextHop;
use crate::link::LinkCapabilities;

/// Where a datagram's payload comes from.
pub(crate) enum Payload<'a, 'b> {
    /// Copied from the application's buffers.
    Copy(&'a [IoSlice<'b>]),
    /// Written by the application straight into the stack's buffer of this length (zero copy,
    /// paper 002 §3.1).
    Fill(usize, &'a mut dyn FnMut(&mut [u8])),
}

impl Payload<'_, '_> {
    /// Its length in bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            // One buffer (every `send_to`) without the loop over pieces.
            Payload::Copy([piece]) => piece.len(),
            Payload::Copy(pieces) => pieces.iter().map(|p| p.len()).sum(),
            Payload::Fill(len, _) => *len,
        }
    }
}

/// How an outgoing datagram or segment is checksummed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxChecksum {
    /// Summed in the loop that copies the payload in (paper 000 §7.1).
    Fused,
    /// Copied, then summed in a second pass over the whole datagram (4.3BSD).
    Separate,
    /// Left to the link: the field holds the pseudo-header's sum, the link completes it.
    Offload,
    /// None at all: UDP's `no_checksum` option or Kay & Pasquale's rule, TCP's negotiated
    /// elimination (paper 001).
    None,
}

/// What to do with an arriving datagram's or segment's checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxChecksum {
    /// The link verified it (`ChecksumOffload::Valid` or a partial sum the kernel completes).
    Trusted,
    /// Verify the headers' part now and the payload's while it is copied to the application.
    Deferred,
    /// Verify the whole now.
    Now,
}

/// The checksum switches of a stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChecksumRules {
    algorithm: Algorithm,
    copy: CopyChecksum,
    policy: ChecksumPolicy,
}

impl ChecksumRules {
    pub(crate) fn of(config: &StackConfig) -> ChecksumRules {
        ChecksumRules {
            algorithm: config.checksum,
            copy: config.copy_checksum,
            policy: config.checksum_policy,
        }
    }

    /// The summing routine.
    #[inline]
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The transmit decision for a datagram over a link with `caps`: `none` when the transport has
    /// decided on no checksum; offload cannot cross `fragments`.
    #[inline]
    pub(crate) fn tx(&self, caps: &LinkCapabilities, none: bool, fragments: bool) -> TxChecksum {
        if none {
            TxChecksum::None
        } else if self.policy.use_offload && caps.tx_checksum_offload && !fragments {
            TxChecksum::Offload
        } else if self.copy == CopyChecksum::Separate {
            TxChecksum::Separate
        } else {
            TxChecksum::Fused
        }
    }

    /// Whether the link may do the checksum (and so cut TSO packets), when it offers to.
    #[inline]
    pub(crate) fn offload_allowed(&self) -> bool {
        self.policy.use_offload
    }

    /// Kay & Pasquale's rule (`eliminate_on_protected_hop`): no checksum when the next hop is the
    /// destination and the link is CRC-protected.
    #[inline]
    pub(crate) fn eliminated_on<A: IpAddress>(&self, hop: &NextHop<A>, dst: A) -> bool {
        self.policy.eliminate_on_protected_hop && hop.caps.crc_protected && hop.next_hop == dst
    }

    /// The receive decision for a packet with `meta` from its link; `deferrable` when the transport
    /// can finish the check at copy time (UDP).
    #[inline]
    pub(crate) fn rx(&self, meta: ChecksumOffload, deferrable: bool) -> RxChecksum {
        if self.policy.use_offload && meta != ChecksumOffload::None {
            RxChecksum::Trusted
        } else if deferrable && self.copy == CopyChecksum::Fused {
            RxChecksum::Deferred
        } else {
            RxChecksum::Now
        }
    }

    /// Verifies a whole datagram (checksum field included) against the pseudo-header's sum.
    #[inline]
    pub(crate) fn verify(&self, datagram: &[u8], pseudo: u16) -> bool {
        timed!(Checksum);
        checksum::add(pseudo, self.algorithm.sum_packet(datagram)) == 0xffff
    }

    /// Writes the payload into `datagram` after its `header_len` bytes of header (whose checksum
    /// field is zero) and returns the checksum field as `mode` says. `header_sum` gives the
    /// header's sum, needed only when the sum is fused with the copy; `pseudo` is the
    /// pseudo-header's.
    #[inline(always)]
    pub(crate) fn fill(
        &self,
        mode: TxChecksum,
        datagram: &mut [u8],
        header_len: usize,
        header_sum: impl FnOnce() -> u16,
        pseudo: u16,
        payload: &mut Payload<'_, '_>,
    ) -> u16 {
        let body = &mut datagram[header_len..];
        if let (TxChecksum::Fused, Payload::Copy(pieces)) = (mode, &*payload) {
            timed!(CopyChecksum);
            let mut sum = Checksum::new();
            sum.add_sum(header_sum());
            sum.add_sum(pseudo);
            sum.copy_and_add_pieces(self.algorithm, body, pieces);
            return sum.checksum();
        }
        match payload {
            Payload::Copy([piece]) => {
                timed!(Copy);
                crate::buf::copy(body, piece);
            }
            Payload::Copy(pieces) => {
                timed!(Copy);
                gather(body, pieces);
            }
            Payload::Fill(_, fill) => fill(body),
        }
        match mode {
            TxChecksum::Fused | TxChecksum::Separate => {
                timed!(Checksum);
                !checksum::add(self.algorithm.sum_packet(datagram), pseudo)
            }
            TxChecksum::Offload => pseudo,
            TxChecksum::None => 0,
        }
    }
}

/// Deferred verification's second half (paper 000 §7.1.1): copies `payload` into `bufs` (as much as
/// fits) and, when `head` holds the sum of the headers taken on arrival, sums the payload in the same
/// loop (and the rest that did not fit after it). Returns the bytes copied and whether the checksum
/// holds (always, with nothing deferred).
#[inline(always)]
pub(crate) fn copy_and_verify(
    algorithm: Algorithm,
    head: Option<u16>,
    payload: &[u8],
    bufs: &mut [IoSliceMut<'_>],
) -> (usize, bool) {
    let mut copied = 0;
    let Some(head) = head else {
        timed!(Copy);
        for b in bufs.iter_mut() {
            let n = b.len().min(payload.len() - copied);
            b[..n].copy_from_slice(&payload[copied..copied + n]);
            copied += n;
        }
        return (copied, true);
    };
    timed!(CopyChecksum);
    let mut sum = Checksum::new();
    sum.add_sum(head);
    for b in bufs.iter_mut() {
        let n = b.len().min(payload.len() - copied);
        sum.copy_and_add_with(algorithm, &mut b[..n], &payload[copied..copied + n]);
        copied += n;
    }
    if copied < payload.len() {
        sum.add_bytes(&payload[copied..]);
    }
    (copied, sum.sum() == 0xffff)
}

/// [`copy_and_verify`] into one buffer: the shape of `recv_from`, the hot path. The deferred sum is
/// out of line, so that the plain copy keeps the caller small.
#[inline(always)]
pub(crate) fn copy_and_verify_one(
    algorithm: Algorithm,
    head: Option<u16>,
    payload: &[u8],
    buf: &mut [u8],
) -> (usize, bool) {
    let n = buf.len().min(payload.len());
    match head {
        None => {
            timed!(Copy);
            buf[..n].copy_from_slice(&payload[..n]);
            (n, true)
        }
        Some(head) => (n, copy_and_sum_one(algorithm, head, payload, &mut buf[..n])),
    }
}

#[inline(never)]
fn copy_and_sum_one(algorithm: Algorithm, head: u16, payload: &[u8], buf: &mut [u8]) -> bool {
    timed!(CopyChecksum);
    let n = buf.len();
    let mut sum = Checksum::new();
    sum.add_sum(head);
    sum.copy_and_add_with(algorithm, buf, &payload[..n]);
    if n < payload.len() {
        sum.add_bytes(&payload[n..]);
    }
    sum.sum() == 0xffff
}

/// Whether a payload whose verification was deferred (`head`, the headers' sum) passes, without
/// copying it: for a datagram no socket will read (no ICMP error about a corrupted one, RFC 1122
/// §4.1.3.4) or one handed to the application in place.
#[inline]
pub(crate) fn deferred_ok(head: Option<u16>, payload: &[u8]) -> bool {
    head.is_none_or(|head| {
        let mut sum = Checksum::new();
        sum.add_sum(head);
        sum.add_bytes(payload);
        sum.sum() == 0xffff
    })
}

/// The sum of a UDP header's four 16-bit words from its fields: cheaper than the general routine
/// for 8 bytes.
#[inline(always)]
pub(crate) fn udp_header_sum(src_port: u16, dst_port: u16, len: u16, field: u16) -> u16 {
    checksum::fold32(u32::from(src_port) + u32::from(dst_port) + u32::from(len) + u32::from(field))
}
