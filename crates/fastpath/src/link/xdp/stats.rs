//! The AF_XDP link's counters.

/// Counters of an AF_XDP link. The `rx_drop_*` counters are frames the link refused (the stack
/// never sees them); the `kernel_*` ones are the socket's own (`XDP_STATISTICS`), read when the
/// counters are asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames received and handed to the stack.
    pub rx_frames: u64,
    /// Bytes of those frames (from the Ethernet header on).
    pub rx_bytes: u64,
    /// Multi-buffer frames among them, joined from several chunks.
    pub rx_multi_buffer: u64,
    /// `receive` calls that found the RX ring empty.
    pub rx_ring_empty_polls: u64,
    /// `receive` calls that found the fill ring empty: the kernel had no chunk left to receive
    /// into (they were all on the RX ring), so it was dropping frames.
    pub fill_ring_empty: u64,
    /// Dropped: a descriptor outside the link's receive chunks, or crossing a chunk's end.
    pub rx_drop_bad_desc: u64,
    /// Dropped: a frame larger than the link's MTU allows (with its Ethernet header and a VLAN
    /// tag), or one of no bytes.
    pub rx_drop_oversize: u64,
    /// Frames received here and handed to the queue whose stack owns their port
    /// ([`XdpConfig::ephemeral_ports`](super::XdpConfig::ephemeral_ports)); counted in
    /// `rx_frames` too.
    pub rx_steered_out: u64,
    /// Frames other queues' links received and handed to this one's stack.
    pub rx_steered_in: u64,
    /// Dropped: a frame for another queue whose inbox was full.
    pub rx_drop_inbox_full: u64,
    /// Frames sent (posted on the TX ring).
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Multi-buffer frames among them, split over several chunks.
    pub tx_multi_buffer: u64,
    /// Frames among them whose UDP or TCP checksum was left to the kernel or device, asked for in
    /// their transmit metadata ([`XdpConfig::tx_checksum_offload`](super::XdpConfig::tx_checksum_offload)).
    pub tx_checksum_offloaded: u64,
    /// Dropped: the TX ring was full, or every transmit chunk was in flight.
    pub tx_drop_ring_full: u64,
    /// Dropped: an empty frame, or one larger than the link's MTU allows (counted here only: not
    /// in what `transmit` returns, which is what a full queue dropped).
    pub tx_drop_oversize: u64,
    /// `sendto` calls that asked the kernel to send.
    pub tx_kicks: u64,
    /// Of those, failures other than the kernel's "busy, call again" (`EAGAIN`, `EBUSY`,
    /// `ENOBUFS`).
    pub tx_kick_errors: u64,
    /// Completion ring entries naming no transmit chunk in flight (ignored).
    pub tx_bad_completions: u64,
    /// The kernel's count of frames it dropped for this socket for other reasons than a full RX
    /// ring or an empty fill ring (a frame too large for a chunk without multi-buffer, say).
    pub kernel_rx_dropped: u64,
    /// The kernel's count of invalid descriptors on the fill ring.
    pub kernel_rx_invalid_descs: u64,
    /// The kernel's count of invalid descriptors on the TX ring.
    pub kernel_tx_invalid_descs: u64,
    /// The kernel's count of frames dropped because the RX ring was full.
    pub kernel_rx_ring_full: u64,
    /// The kernel's count of frames dropped because the fill ring was empty.
    pub kernel_rx_fill_ring_empty_descs: u64,
    /// The kernel's count of kicks that found the TX ring empty.
    pub kernel_tx_ring_empty_descs: u64,
}

impl XdpStats {
    /// Takes the kernel's counters from `k`.
    pub(super) fn set_kernel(&mut self, k: &super::sys::KernelStats) {
        self.kernel_rx_dropped = k.rx_dropped;
        self.kernel_rx_invalid_descs = k.rx_invalid_descs;
        self.kernel_tx_invalid_descs = k.tx_invalid_descs;
        self.kernel_rx_ring_full = k.rx_ring_full;
        self.kernel_rx_fill_ring_empty_descs = k.rx_fill_ring_empty_descs;
        self.kernel_tx_ring_empty_descs = k.tx_ring_empty_descs;
    }
}

crate::link::published::counter_words!(XdpStats {
    rx_frames,
    rx_bytes,
    rx_multi_buffer,
    rx_ring_empty_polls,
    fill_ring_empty,
    rx_drop_bad_desc,
    rx_drop_oversize,
    rx_steered_out,
    rx_steered_in,
    rx_drop_inbox_full,
    tx_frames,
    tx_bytes,
    tx_multi_buffer,
    tx_checksum_offloaded,
    tx_drop_ring_full,
    tx_drop_oversize,
    tx_kicks,
    tx_kick_errors,
    tx_bad_completions,
    kernel_rx_dropped,
    kernel_rx_invalid_descs,
    kernel_tx_invalid_descs,
    kernel_rx_ring_full,
    kernel_rx_fill_ring_empty_descs,
    kernel_tx_ring_empty_descs,
});

impl std::fmt::Display for XdpStats {
    /// Prints like the TUN link's counters: a heading, then what is not zero.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "xdp:")?;
        for (n, what) in [
            (self.rx_frames, "frames received"),
            (self.rx_bytes, "bytes received"),
            (self.rx_multi_buffer, "frames joined from several chunks"),
            (self.rx_ring_empty_polls, "receive calls that found nothing"),
            (
                self.fill_ring_empty,
                "receive calls that found the fill ring empty",
            ),
            (self.rx_drop_bad_desc, "dropped: bad descriptor"),
            (self.rx_drop_oversize, "dropped: larger than the mtu"),
            (self.rx_steered_out, "frames handed to another queue"),
            (self.rx_steered_in, "frames from another queue"),
            (
                self.rx_drop_inbox_full,
                "dropped: another queue's inbox full",
            ),
            (self.tx_frames, "frames sent"),
            (self.tx_bytes, "bytes sent"),
            (self.tx_multi_buffer, "frames split over several chunks"),
            (
                self.tx_checksum_offloaded,
                "frames with their checksum offloaded",
            ),
            (self.tx_drop_ring_full, "dropped: tx ring full"),
            (
                self.tx_drop_oversize,
                "dropped: frame to send larger than the mtu",
            ),
            (self.tx_kicks, "kicks"),
            (self.tx_kick_errors, "kick errors"),
            (self.tx_bad_completions, "bad completions"),
            (self.kernel_rx_dropped, "kernel: rx dropped"),
            (
                self.kernel_rx_invalid_descs,
                "kernel: invalid fill descriptors",
            ),
            (
                self.kernel_tx_invalid_descs,
                "kernel: invalid tx descriptors",
            ),
            (self.kernel_rx_ring_full, "kernel: rx ring full"),
            (
                self.kernel_rx_fill_ring_empty_descs,
                "kernel: fill ring empty",
            ),
            (
                self.kernel_tx_ring_empty_descs,
                "kernel: tx ring empty at a kick",
            ),
        ] {
            if n > 0 {
                writeln!(f, "    {n} {what}")?;
            }
        }
        Ok(())
    }
}
