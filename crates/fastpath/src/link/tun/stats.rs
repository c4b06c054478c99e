//! The TUN link's counters.

use std::fmt;

use super::vnet::RxDrop;
#[cfg(doc)]
use super::UDP_MAX_SEGMENTS;
#[cfg(doc)]
use crate::buf::ChecksumOffload;

/// Counters of a TUN link. The `rx_drop_*` counters are packets from the kernel the link refused; the
/// stack never sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunStats {
    /// Packets read and handed to the stack.
    pub rx_packets: u64,
    /// Bytes of those packets (IP packets, without the virtio header).
    pub rx_bytes: u64,
    /// `read` calls, including the ones that found nothing (`EAGAIN`).
    pub rx_reads: u64,
    /// Received with `NEEDS_CSUM` and passed on as [`ChecksumOffload::Partial`].
    pub rx_partial: u64,
    /// Received with `DATA_VALID` and passed on as [`ChecksumOffload::Valid`].
    pub rx_data_valid: u64,
    /// Received with `NEEDS_CSUM` on something other than a UDP datagram the stack can trust as
    /// partial (or with offload off): the link completed the checksum itself.
    pub rx_checksums_completed: u64,
    /// Dropped: shorter than the virtio header.
    pub rx_drop_truncated: u64,
    /// Dropped: the packet filled the whole buffer, so it may have been cut.
    pub rx_drop_oversize: u64,
    /// Dropped: `csum_start`/`csum_offset` point outside the packet or into its IP header.
    pub rx_drop_bad_checksum_offsets: u64,
    /// GSO packets (UDP segmentation offload) split into datagrams.
    pub rx_gso_packets: u64,
    /// Datagrams those GSO packets were split into (counted in `rx_packets` too).
    pub rx_gso_segments: u64,
    /// Dropped: a GSO packet of a kind not asked for (TCP, or UDP with USO off).
    pub rx_drop_gso: u64,
    /// TCP GSO packets (larger than the MTU) taken whole.
    pub rx_tso_packets: u64,
    /// Of those, read straight into a large buffer (the rest were gathered from the receive buffer
    /// and the scratch area into one, a copy of the whole packet).
    pub rx_tso_direct: u64,
    /// Small packets read into a large buffer while large ones were arriving, and copied into a
    /// small one (the price of reading the large ones without a copy).
    pub rx_small_copied: u64,
    /// Dropped: a UDP GSO packet that does not add up: a segment size of 0 or past the MTU, more than
    /// [`UDP_MAX_SEGMENTS`] segments, lengths that disagree, not a whole UDP/IPv4 datagram.
    pub rx_drop_gso_malformed: u64,
    /// `read` failures other than `EAGAIN` and `EINTR`.
    pub rx_errors: u64,
    /// Packets written.
    pub tx_packets: u64,
    /// Bytes of those packets (IP packets, without the virtio header).
    pub tx_bytes: u64,
    /// Written with `NEEDS_CSUM`: the checksum left to the kernel.
    pub tx_offloaded: u64,
    /// Packets sent as TCP segmentation offload (GSO TCPV4), for the kernel to cut.
    pub tx_tso: u64,
    /// Partial checksums the link completed because offload is off.
    pub tx_checksums_completed: u64,
    /// Dropped because the kernel would not take them now (`EAGAIN`); the stack counts them too.
    pub tx_drop_full: u64,
    /// `write` failures other than `EAGAIN` (the interface down, a packet the kernel refused).
    pub tx_errors: u64,
}

crate::link::published::counter_words!(TunStats {
    rx_packets,
    rx_bytes,
    rx_reads,
    rx_partial,
    rx_data_valid,
    rx_checksums_completed,
    rx_drop_truncated,
    rx_drop_oversize,
    rx_drop_bad_checksum_offsets,
    rx_gso_packets,
    rx_gso_segments,
    rx_drop_gso,
    rx_tso_packets,
    rx_tso_direct,
    rx_small_copied,
    rx_drop_gso_malformed,
    rx_errors,
    tx_packets,
    tx_bytes,
    tx_offloaded,
    tx_tso,
    tx_checksums_completed,
    tx_drop_full,
    tx_errors,
});

impl TunStats {
    /// Packets from the kernel the link dropped, all reasons together.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_drop_truncated
            + self.rx_drop_oversize
            + self.rx_drop_bad_checksum_offsets
            + self.rx_drop_gso
            + self.rx_drop_gso_malformed
    }

    /// Counts a packet from the kernel refused for `reason`.
    pub(super) fn count_drop(&mut self, reason: RxDrop) {
        match reason {
            RxDrop::BadChecksumOffsets => self.rx_drop_bad_checksum_offsets += 1,
            RxDrop::Gso => self.rx_drop_gso += 1,
            RxDrop::GsoMalformed => self.rx_drop_gso_malformed += 1,
        }
    }
}

impl fmt::Display for TunStats {
    /// One counter per line, like the stack's counters; zeros left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tun:")?;
        for (n, what) in [
            (self.rx_packets, "packets received"),
            (self.rx_bytes, "bytes received"),
            (self.rx_reads, "reads"),
            (
                self.rx_partial,
                "received with checksum partial (NEEDS_CSUM)",
            ),
            (
                self.rx_data_valid,
                "received with checksum valid (DATA_VALID)",
            ),
            (
                self.rx_checksums_completed,
                "received checksums completed by the link",
            ),
            (
                self.rx_drop_truncated,
                "dropped: shorter than the virtio header",
            ),
            (self.rx_drop_oversize, "dropped: larger than the buffer"),
            (
                self.rx_drop_bad_checksum_offsets,
                "dropped: bad checksum offsets",
            ),
            (self.rx_gso_packets, "GSO packets split"),
            (self.rx_gso_segments, "datagrams split from GSO packets"),
            (self.rx_drop_gso, "dropped: GSO packet"),
            (self.rx_tso_packets, "TCP GSO packets taken whole (GRO)"),
            (
                self.rx_tso_direct,
                "of those, read straight into a large buffer",
            ),
            (
                self.rx_small_copied,
                "small packets copied out of a large buffer",
            ),
            (self.rx_drop_gso_malformed, "dropped: malformed GSO packet"),
            (self.rx_errors, "read errors"),
            (self.tx_packets, "packets sent"),
            (self.tx_bytes, "bytes sent"),
            (
                self.tx_offloaded,
                "sent with checksum offloaded (NEEDS_CSUM)",
            ),
            (self.tx_tso, "sent as TCP segmentation offload (GSO)"),
            (
                self.tx_checksums_completed,
                "sent checksums completed by the link",
            ),
            (self.tx_drop_full, "dropped: kernel queue full"),
            (self.tx_errors, "write errors"),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_of_several_queues_add_up_field_by_field() {
        let a = TunStats {
            rx_packets: 3,
            rx_drop_gso: 1,
            tx_errors: 2,
            ..TunStats::default()
        };
        let b = TunStats {
            rx_packets: 4,
            rx_drop_truncated: 5,
            ..TunStats::default()
        };
        let mut sum = a;
        sum += b;
        assert_eq!(sum.rx_packets, 7);
        assert_eq!(sum.rx_dropped(), 6);
        assert_eq!(sum.tx_errors, 2);
    }
}
