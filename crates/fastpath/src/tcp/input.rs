//! TCP input: a segment is checked, found (through the demultiplexer, best match first) and handed
//! to its connection's state machine or its listener; the verdict is acted on, and the output it owes
//! waits for the end of the input batch.

use super::*;

impl<N: Network> Tcp<N> {
    /// Input: one TCP segment (the IP payload in `buf`).
    pub(crate) fn input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        mut buf: PacketBuf,
        (src, dst): (N::Addr, N::Addr),
        delivery: Delivery,
    ) {
        layer!(Receive, Tcp);
        if delivery == Delivery::Broadcast {
            return cx.drop(buf, DropReason::TcpBadAddress);
        }
        let repr = match TcpPacket::new_checked(buf.data()) {
            Ok(packet) => match TcpRepr::parse(&packet) {
                Ok(repr) => repr,
                Err(_) => return cx.drop(buf, DropReason::TcpBadHeader),
            },
            Err(WireError::Truncated) => return cx.drop(buf, DropReason::TcpTruncated),
            Err(_) => return cx.drop(buf, DropReason::TcpBadHeader),
        };
        let local = dst.socket(repr.dst_port);
        let remote = src.socket(repr.src_port);
        let mut found = self.demux.lookup(local, remote);
        if delivery == Delivery::Intercepted {
            // To another host's address: only a connection of its own takes it, never a listener
            // on a port of the host's (which the demultiplexer's wildcard match would find).
            found = found.filter(|id| {
                matches!(
                    self.slots.at(id.0),
                    Some(Slot {
                        entry: Entry::Conn(_) | Entry::TimeWait(_),
                        ..
                    })
                )
            });
        }
        // A connection that negotiated checksum elimination (paper 001) takes its segments unsummed;
        // everything else is verified, or vouched for by the link.
        let eliminated = !repr.flags.contains(Flags::SYN)
            && found.is_some_and(|id| self.tcb(id.0).is_some_and(|t| t.no_checksum));
        if eliminated {
            cx.counters.tcp.in_no_checksum += 1;
        } else if self.checksum.rx(buf.meta.checksum(), false) == RxChecksum::Trusted {
            cx.counters.tcp.in_checksum_offloaded += 1;
        } else {
            let pseudo = checksum::pseudo_header_sum(src, dst, 6, buf.len() as u16);
            if !self.checksum.verify(buf.data(), pseudo) {
                return cx.drop(buf, DropReason::TcpBadChecksum);
            }
        }
        // SYN with RST has no meaning anywhere, and is never answered. SYN with FIN goes on, as in
        // Linux: a closed port answers it with a RST (RFC 9293 §3.10.7.1: every segment without RST),
        // a listener drops it, a synchronized connection challenges its SYN (RFC 5961 §4), and in
        // SYN-SENT it is a SYN. A segment with no control bits at all (a "null scan") is not
        // refused here either: a closed port answers it with a RST, a listener drops it, a
        // connection finds it has no ACK.
        let f = repr.flags;
        if f.contains(Flags::SYN) && f.contains(Flags::RST) {
            return cx.drop(buf, DropReason::TcpBadFlags);
        }
        if src.is_wildcard() || repr.src_port == 0 || repr.dst_port == 0 {
            return cx.drop(buf, DropReason::TcpBadAddress);
        }
        cx.counters.tcp.in_segs += 1;
        let header_len = ((buf.data()[12] >> 4) as usize) * 4;
        buf.pull_front(header_len);

        let Some(SocketId(index)) = found else {
            if delivery == Delivery::Intercepted {
                return match self.intercept {
                    Some(l) => self.listen_input(cx, l, local, remote, &repr, buf),
                    None => cx.drop(buf, DropReason::TcpInterceptOff),
                };
            }
            self.reply_reset(cx, local, remote, &repr, buf.len());
            return cx.drop(buf, DropReason::TcpNoSocket);
        };
        if let Some(Slot {
            entry: Entry::TimeWait(t),
            ..
        }) = self.slots.at_mut(index)
        {
            // A compact TIME-WAIT: its block again, for the segment (compacted again when done).
            let tcb = t.revive(cx.cfg);
            if let Some(slot) = self.slots.at_mut(index) {
                slot.entry = Entry::Conn(Box::new(tcb));
            }
        }
        match self.slots.at(index).map(|s| &s.entry) {
            Some(Entry::Conn(_)) => {
                if self.conn_input(cx, index, &repr, buf) == Verdict::Reincarnate {
                    self.reincarnate(cx, index, (local, remote), &repr, delivery);
                }
            }
            Some(Entry::Listener(_)) => self.listen_input(cx, index, local, remote, &repr, buf),
            Some(Entry::TimeWait(_)) | None => cx.drop(buf, DropReason::TcpNoSocket),
        }
    }

    /// A segment to connection `index`; returns the block's verdict, which has been acted on.
    pub(super) fn conn_input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) -> Verdict {
        let prediction = cx.cfg.header_prediction;
        let mut tcx = cx.tcb();
        let Some(tcb) = self.tcb(index) else {
            tcx.pool.free(buf);
            return Verdict::Continue;
        };
        tcb.note_arrival(repr, buf.len(), tcx.now);
        let verdict = if prediction {
            match tcb.predict(repr, buf, &mut tcx) {
                Ok(()) => Verdict::Continue,
                Err(buf) => tcb.on_segment(repr, buf, &mut tcx),
            }
        } else {
            tcb.on_segment(repr, buf, &mut tcx)
        };
        self.verdict(cx, index, verdict);
        verdict
    }

    /// A SYN ended connection `index` in TIME-WAIT (now freed) and starts a new one: the listener
    /// (or the intercepting one) takes it, or it is answered as a closed port would be.
    #[cold]
    pub(super) fn reincarnate(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        (local, remote): (N::Socket, N::Socket),
        syn: &TcpRepr,
        delivery: Delivery,
    ) {
        debug_assert!(
            self.slots.at(index).is_none()
                || self.tcb(index).is_some_and(|t| t.state == State::Closed)
        );
        let listener = match delivery {
            Delivery::Intercepted => self.intercept,
            _ => self
                .demux
                .lookup(local, remote)
                .map(|id| id.0)
                .filter(|&i| {
                    matches!(
                        self.slots.at(i),
                        Some(Slot {
                            entry: Entry::Listener(_),
                            ..
                        })
                    )
                }),
        };
        match listener {
            // The SYN's payload, if it had any, was not kept: a listener does not take SYN data.
            Some(l) => {
                let empty = cx.pool.alloc(0);
                self.listen_input(cx, l, local, remote, syn, empty);
            }
            None => {
                cx.counters.drops.add(DropReason::TcpNoSocket);
                self.reply_reset(cx, local, remote, syn, 0);
            }
        }
    }

    /// Acts on what a block asked for, then sends what it owes.
    pub(super) fn verdict(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        verdict: Verdict,
    ) {
        self.hints.note(index);
        match verdict {
            Verdict::Continue => {}
            Verdict::FastOpenLearned => {
                if let Some(tcb) = self.tcb(index) {
                    let (server, mss) = (N::Addr::ip(&tcb.remote), tcb.peer_mss);
                    let cookie = tcb.syn_fast_open.take();
                    let try_exp = tcb.fast_open_try_exp;
                    let mss = u16::try_from(mss).unwrap_or(u16::MAX);
                    self.fast_open_cache.learn(server, cookie, mss, try_exp);
                }
            }
            Verdict::Established => {
                let parent = self.slots.at(index).and_then(|s| s.parent);
                let mut parent = parent.and_then(|p| Some((p, self.listener(p)?)));
                // Taken by Fast Open: in the accept queue (or accepted) already.
                let fast_open = parent.as_mut().and_then(|(_, l)| {
                    let pos = l.fast_open_pending.iter().position(|&i| i == index)?;
                    Some(l.fast_open_pending.swap_remove(pos))
                });
                if let Some((parent, l)) = parent.filter(|_| fast_open.is_none()) {
                    if let Some(pos) = l.half_open.iter().position(|&i| i == index) {
                        l.half_open.swap_remove(pos);
                    }
                    if l.ready.len() < l.backlog {
                        l.ready.push_back(SocketId(index));
                        self.hints.note(parent);
                    } else {
                        // The accept queue is full: refuse the connection.
                        cx.counters.drops.add(DropReason::TcpListenOverflow);
                        self.abort_with_reset(cx, index);
                        return;
                    }
                }
            }
            Verdict::Reset { seq, ack } => {
                if let Some(tcb) = self.tcb(index) {
                    let (local, remote, hop) = (tcb.local, tcb.remote, tcb.hop);
                    self.send_reset(cx, &hop, local, remote, seq, ack);
                }
                let closed = self.tcb(index).is_some_and(|t| t.state == State::Closed);
                if closed {
                    return self.finish(cx, index);
                }
            }
            Verdict::Remove | Verdict::Reincarnate => return self.finish(cx, index),
        }
        // Batched ACK processing: what the segments of one receive batch owe goes out once, after
        // the batch (a cumulative ACK for all of them, as GRO would give).
        if let Some(slot) = self.slots.at_mut(index) {
            let Entry::Conn(tcb) = &mut slot.entry else {
                return;
            };
            if std::mem::take(&mut tcb.ack_immediately) {
                return self.output(cx, index);
            }
            if !slot.output_queued {
                slot.output_queued = true;
                self.dirty.push(index);
            }
        }
    }

    /// True when connections wait to send what the last input batch made them owe.
    #[inline]
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Sends what every connection touched by the last input batch owes.
    #[inline]
    pub(crate) fn flush_dirty(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        if !self.dirty.is_empty() {
            self.flush_dirty_list(cx);
        }
    }

    #[inline(never)]
    pub(super) fn flush_dirty_list(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            if let Some(slot) = self.slots.at_mut(index) {
                slot.output_queued = false;
                if matches!(slot.entry, Entry::Conn(_)) {
                    self.output(cx, index);
                }
            }
        }
        dirty.clear();
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
    }

    /// The answer to a segment no connection wants (RFC 9293 §3.10.7.1): a RST, unless it was one.
    pub(super) fn reply_reset(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        local: N::Socket,
        remote: N::Socket,
        repr: &TcpRepr,
        payload_len: usize,
    ) {
        if repr.flags.contains(Flags::RST) {
            return;
        }
        let Ok(hop) = cx.ip.route_link(N::Addr::ip(&remote)) else {
            return;
        };
        if super::off_host_loopback::<N>(N::Addr::ip(&local), &hop) {
            return;
        }
        if repr.flags.contains(Flags::ACK) {
            self.send_reset(cx, &hop, local, remote, repr.ack, None);
        } else {
            let len = payload_len as u32
                + repr.flags.contains(Flags::SYN) as u32
                + repr.flags.contains(Flags::FIN) as u32;
            self.send_reset(cx, &hop, local, remote, 0, Some(repr.seq.wrapping_add(len)));
        }
    }
}
