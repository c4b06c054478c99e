//! TCP output: the segments a connection owes, and those sent with no connection (resets, cookies),
//! built into pool buffers with the checksum the transport rules ask for.

use super::*;

impl<N: Network> Tcp<N> {
    pub(super) fn send_reset(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        local: N::Socket,
        remote: N::Socket,
        seq: u32,
        ack: Option<u32>,
    ) {
        self.send_reset_with(cx, hop, (local, remote), (seq, ack), TcpOptions::default());
    }

    /// [`Tcp::send_reset`] with `options` (a connection's own timestamps).
    pub(super) fn send_reset_with(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        (local, remote): (N::Socket, N::Socket),
        (seq, ack): (u32, Option<u32>),
        options: TcpOptions,
    ) {
        let repr = TcpRepr {
            src_port: N::Addr::port(&local),
            dst_port: N::Addr::port(&remote),
            seq,
            ack: ack.unwrap_or(0),
            flags: if ack.is_some() {
                Flags::RST | Flags::ACK
            } else {
                Flags::RST
            },
            window: 0,
            urgent: 0,
            options,
        };
        cx.counters.tcp.out_rsts += 1;
        self.emit(cx, hop, local, remote, repr, &[]);
    }

    /// Builds and sends one segment whose payload is `pieces` (for segments with no connection).
    pub(super) fn emit(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        hop: &NextHop<N::Addr>,
        local: N::Socket,
        remote: N::Socket,
        repr: TcpRepr,
        pieces: &[&[u8]],
    ) {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let buf = build(
            &self.checksum,
            cx.pool,
            &mut cx.counters.tcp,
            hop,
            (N::Addr::ip(&local), N::Addr::ip(&remote)),
            &repr,
            (pieces, len, false),
        );
        cx.counters.tcp.out_segs += 1;
        cx.output(buf, hop, (N::Addr::ip(&local), N::Addr::ip(&remote)), true);
    }

    /// Sends everything connection `index` owes and the windows allow. The usual answer, nothing
    /// (asked four times a request/response, twice with nothing to send), inlined into the
    /// callers; [`Tcp::output_owed`] does the sending.
    #[inline(always)]
    pub(crate) fn output(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        layer!(Send, Tcp);
        if conn_at(&mut self.slots, index).is_some_and(|tcb| tcb.owes_nothing()) {
            return self.schedule(index);
        }
        self.output_owed(cx, index);
    }

    /// [`Tcp::output`] for a connection that owes something (or is not a connection).
    #[inline(never)]
    fn output_owed(&mut self, cx: &mut TcpCx<impl Transmit, N>, index: u32) {
        let use_offload = self.checksum.offload_allowed();
        if let Some(tcb) = self.tcb(index) {
            // A route changed since this connection last looked (a redirect, another default
            // router, a route added or removed, a path MTU learned or expired): it goes by the
            // route now in use, still from its own address (as Linux checks a socket's cached
            // route before it sends), or by the one it had if none is left; its MSS follows the
            // path MTU now in use.
            if tcb.route_epoch != cx.ip.route_epoch() {
                let remote = N::Addr::ip(&tcb.remote);
                if let Ok(hop) = cx.ip.route_link(remote) {
                    tcb.hop = NextHop {
                        src: N::Addr::ip(&tcb.local),
                        ..hop
                    };
                }
                let (mtu, epoch) = cx.path_mtu(remote, tcb.hop.caps.mtu);
                tcb.sync_path_mtu(mtu, epoch);
            }
        }
        for burst in 0..OUTPUT_BURST {
            let Some(tcb) = conn_at(&mut self.slots, index) else {
                return;
            };
            // The usual answer after the last segment went (asked above before the first).
            if burst > 0 && tcb.owes_nothing() {
                break;
            }
            // TSO (paper 002 §3.3): up to a 64 KiB packet when the link cuts segments and the checksum
            // is left to it as well.
            let caps = tcb.hop.caps;
            let tso = (caps.tso && caps.tx_checksum_offload && use_offload)
                .then_some(tso_max::<N::Addr>());
            let mut tcx = cx.tcb();
            let Some(Outgoing {
                mut repr,
                offset,
                len,
                segment_size,
                ecn,
            }) = tcb.next_segment(&mut tcx, tso)
            else {
                break;
            };
            tcb.stamp(&mut repr, tcx.now);
            let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
            let no_checksum = tcb.no_checksum && !repr.flags.contains(Flags::SYN);
            // The connection's DSCP with the segment's ECN field (RFC 3168 §5).
            let tos = tcb.dscp | ecn;
            let dont_frag = tcb.pmtu.dont_fragment();
            let (a, b) = tcb.tx.range(offset, len);
            let mut buf = build(
                &self.checksum,
                cx.pool,
                &mut cx.counters.tcp,
                &hop,
                (N::Addr::ip(&local), N::Addr::ip(&remote)),
                &repr,
                (&[a, b], len, no_checksum),
            );
            if tos != 0 {
                buf.meta.set_tos(tos);
            }
            if let Some(size) = segment_size {
                buf.meta.set_gso_size(size);
                cx.counters.tcp.out_tso_packets += 1;
            }
            cx.counters.tcp.out_segs += 1;
            cx.output(
                buf,
                &hop,
                (N::Addr::ip(&local), N::Addr::ip(&remote)),
                dont_frag,
            );
        }
        if let Some(tcb) = conn_at(&mut self.slots, index) {
            tcb.burst_sent(cx.cfg, cx.now);
        }
        self.schedule(index);
        // A connection that finished its close while sending (LAST-ACK acknowledged elsewhere) is
        // handled by its verdicts; nothing more here.
    }
}

/// Writes a segment into a pool buffer: header, payload copied from `pieces` (`len` bytes in all)
/// and the checksum as the transport checksum `rules` say for a route of `hop`'s link (fused with the
/// copy, paper 000 §7.1; separate; left to the link; or none, when elimination was negotiated:
/// `no_checksum`), counted in `counters`.
#[inline]
fn build<A: IpAddress>(
    rules: &ChecksumRules,
    pool: &mut BufferPool,
    counters: &mut TcpCounters,
    hop: &NextHop<A>,
    (local, remote): (A, A),
    repr: &TcpRepr,
    (pieces, len, no_checksum): (&[&[u8]], usize, bool),
) -> PacketBuf {
    let header_len = repr.header_len();
    let total = header_len + len;
    let mode = rules.tx(&hop.caps, no_checksum, false);
    let mut buf = {
        timed!(Buffers);
        pool.alloc(total)
    };
    let segment = buf.extend(total);
    repr.emit(&mut segment[..header_len]);
    let pseudo = checksum::pseudo_header_sum(local, remote, 6, total as u16);
    let slices: [IoSlice<'_>; 2] = [
        IoSlice::new(pieces.first().copied().unwrap_or(&[])),
        IoSlice::new(pieces.get(1).copied().unwrap_or(&[])),
    ];
    // The header's sum, for a checksum fused with the copy.
    let header_sum = match mode {
        TxChecksum::Fused => rules.algorithm().sum_packet(&segment[..header_len]),
        _ => 0,
    };
    let field = rules.fill(
        mode,
        segment,
        header_len,
        || header_sum,
        pseudo,
        &mut Payload::Copy(&slices[..pieces.len().min(2)]),
    );
    buf.data_mut()[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&field.to_be_bytes());
    match mode {
        TxChecksum::Offload => {
            buf.meta.set_checksum(ChecksumOffload::Partial {
                start: A::HEADER_LEN as u16,
                offset: CHECKSUM_OFFSET as u16,
            });
            counters.out_checksum_offloaded += 1;
        }
        TxChecksum::None => counters.out_no_checksum += 1,
        TxChecksum::Separate => counters.out_checksum_separate += 1,
        TxChecksum::Fused => {}
    }
    buf
}
