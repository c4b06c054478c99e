//! Listeners (RFC 9293 §3.10.7.2), SYN cookies (RFC 4987 §3.6), and the bounds on held SYNs
//! ([`holds`]).
//!
//! What a listener does with a segment is decided by a pure machine, [`Listener::on_segment`]: the
//! segment, the listener's queues and a narrow context ([`ListenCx`]: the clock, the configuration,
//! the secret, the route back) in, a [`ListenAction`] out (drop it, answer with a RST, answer with a
//! cookie SYN-ACK, or a new connection). It builds no packets and touches no table, so the unit tests
//! below drive it alone: a SYN in, the exact SYN-ACK or connection out. `Tcp::listen_input` carries
//! the action out (the table, the counters, the packets).

use std::net::SocketAddr;

use super::*;

mod holds;
pub(crate) use holds::{Holds, Pressure};

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener<A: IpAddress = std::net::Ipv4Addr> {
    pub(crate) local: A::Socket,
    pub(crate) backlog: usize,
    /// Children in SYN-RECEIVED (their slots).
    pub(crate) half_open: Vec<u32>,
    /// Established children waiting for `accept` (and, when `hold` is set, held ones).
    pub(crate) ready: VecDeque<SocketId>,
    /// SYNs are held: each becomes a connection for `accept` at once, answered only when the
    /// application confirms it (see [`Tcb::held`]).
    pub(crate) hold: bool,
    /// TCP Fast Open is on (RFC 7413), with at most this many connections taken by it whose
    /// handshake has not completed yet (`TCP_FASTOPEN`'s queue length).
    pub(crate) fast_open: Option<usize>,
    /// Those connections (their slots): also in `ready`.
    pub(crate) fast_open_pending: Vec<u32>,
    /// Socket options its connections take before they answer.
    pub(crate) options: TcpSocketOptions,
}

/// What a listener's decision asks of the table.
#[derive(Debug)]
pub(crate) enum ListenAction<A: IpAddress> {
    /// Drop the segment, counted under the reason.
    Drop(DropReason),
    /// Answer the segment as a closed port would (RFC 9293 §3.10.7.1), and drop it, counted.
    Reset(DropReason),
    /// Answer the SYN with this stateless SYN-ACK, whose sequence number is a cookie, through `hop`;
    /// keep nothing.
    Cookie { syn_ack: TcpRepr, hop: NextHop<A> },
    /// A new connection in SYN-RECEIVED, its SYN-ACK owed (or held for the application when the
    /// listener holds SYNs).
    Open(Box<Tcb<A>>),
    /// A new held connection that takes the place of the oldest one held (to its destination, or of
    /// all, as the bound met says): held SYNs are at their bound and cookies are off.
    Replace(Box<Tcb<A>>, Pressure),
    /// A connection rebuilt, established, from a valid cookie: it joins the accept queue, and takes
    /// the ACK's data, if any.
    FromCookie(Box<Tcb<A>>),
    /// A new connection in SYN-RECEIVED that took its SYN's data by TCP Fast Open: it joins the
    /// accept queue now, with that data, and its SYN-ACK is owed.
    FastOpen(Box<Tcb<A>>),
}

/// What a listener looks at besides the segment and its own queues.
pub(crate) struct ListenCx<'a, A: IpAddress> {
    pub(crate) now: Instant,
    pub(crate) cfg: &'a TcpConfig,
    pub(crate) isn: &'a IsnGenerator,
    /// When the last SYN cookie went out: an ACK is checked as a cookie only while one sent could
    /// still be valid, and is otherwise a stray (of a connection gone, say). Set when a cookie goes.
    pub(crate) last_cookie: &'a mut Option<Instant>,
    /// The table has room for another connection.
    pub(crate) room: bool,
    /// The route back to the peer, if there is one.
    pub(crate) hop: Option<NextHop<A>>,
    /// For a holding listener, the bound on held SYNs a new one would pass, if any ([`Holds`]).
    pub(crate) hold_pressure: Option<Pressure>,
    /// The key of Fast Open cookies.
    pub(crate) fast_open_key: SecretKey,
    /// Bytes of data the segment carries.
    pub(crate) data: usize,
}

impl<A: IpAddress> Listener<A>
where
    A::Socket: Into<SocketAddr>,
{
    /// A listener on `local` with room for `backlog` half-open and as many established connections.
    pub(crate) fn new(local: A::Socket, backlog: usize, hold: bool) -> Listener<A> {
        Listener {
            local,
            backlog,
            half_open: Vec::new(),
            ready: VecDeque::new(),
            hold,
            fast_open: None,
            fast_open_pending: Vec::new(),
            options: TcpSocketOptions::default(),
        }
    }

    /// The listener's decision about `repr`, from `remote` to `local` (RFC 9293 §3.10.7.2).
    pub(crate) fn on_segment(
        &self,
        cx: &mut ListenCx<'_, A>,
        local: A::Socket,
        remote: A::Socket,
        repr: &TcpRepr,
    ) -> ListenAction<A> {
        let f = repr.flags;
        if f.contains(Flags::RST) {
            return ListenAction::Drop(DropReason::TcpUnexpected);
        }
        if f.contains(Flags::ACK) && !f.contains(Flags::SYN) {
            return self.on_ack(cx, local, remote, repr);
        }
        if f.contains(Flags::SYN) && f.contains(Flags::FIN) {
            // No connection starts with a FIN (Linux's listener discards these too).
            return ListenAction::Drop(DropReason::TcpBadFlags);
        }
        if !f.contains(Flags::SYN) || f.contains(Flags::ACK) {
            return if f.contains(Flags::ACK) {
                ListenAction::Reset(DropReason::TcpUnexpected)
            } else {
                ListenAction::Drop(DropReason::TcpUnexpected)
            };
        }
        let Some(hop) = cx.hop else {
            return ListenAction::Drop(DropReason::Ipv4NoRoute);
        };
        if !cx.room {
            return ListenAction::Drop(DropReason::TcpTooManyConnections);
        }
        if self.half_open.len() >= self.backlog || self.ready.len() >= self.backlog {
            // A cookie answers the SYN: not for a listener that holds them.
            if cx.cfg.syn_cookies && !self.hold {
                *cx.last_cookie = Some(cx.now);
                let syn_ack = cookie_syn_ack(cx, &hop, local, remote, repr);
                return ListenAction::Cookie { syn_ack, hop };
            }
            return ListenAction::Drop(DropReason::TcpListenOverflow);
        }
        let pressure = cx.hold_pressure.filter(|_| self.hold);
        if pressure.is_some() && cx.cfg.syn_cookies {
            // Held SYNs at their bound: this one is answered now, its destination asked only once
            // the peer's ACK has proved its address.
            *cx.last_cookie = Some(cx.now);
            let syn_ack = cookie_syn_ack(cx, &hop, local, remote, repr);
            return ListenAction::Cookie { syn_ack, hop };
        }
        let iss = cx.isn.isn(local, remote, cx.now);
        let mut tcb = Tcb::accept(local, remote, hop, iss, repr, cx.cfg);
        tcb.apply_options(&self.options, cx.cfg);
        tcb.held = self.hold;
        let fast_open = self.fast_open.or(cx.cfg.fast_open.every_listener).is_some();
        if fast_open && !self.hold && (repr.options.fast_open.is_some() || cx.data > 0) {
            let syn = fastopen::Syn {
                option: repr.options.fast_open.as_ref(),
                data: cx.data,
                valid: fastopen::cookie(
                    &cx.fast_open_key,
                    Into::<SocketAddr>::into(remote).ip(),
                    Into::<SocketAddr>::into(local).ip(),
                ),
            };
            let pending = self.fast_open_pending.len();
            match fastopen::decide(&cx.cfg.fast_open, self.fast_open, pending, &syn) {
                fastopen::Decision::Ignore => {}
                fastopen::Decision::SendCookie(option) => tcb.syn_fast_open = Some(option),
                fastopen::Decision::Accept => {
                    tcb.open_fast(repr);
                    return ListenAction::FastOpen(Box::new(tcb));
                }
            }
        }
        match pressure {
            Some(p) => ListenAction::Replace(Box::new(tcb), p),
            None => ListenAction::Open(Box::new(tcb)),
        }
    }

    /// An ACK: the last step of a handshake whose SYN-ACK was a cookie, or garbage.
    fn on_ack(
        &self,
        cx: &mut ListenCx<'_, A>,
        local: A::Socket,
        remote: A::Socket,
        ack: &TcpRepr,
    ) -> ListenAction<A> {
        let cookies_out = cx
            .last_cookie
            .is_some_and(|at| cx.now < at + isn::COOKIE_LIFETIME);
        // The cookie is checked once: the MSS it carries, if it is valid.
        let mss = if cx.cfg.syn_cookies && cookies_out {
            cx.isn.check_cookie(
                local,
                remote,
                ack.seq.wrapping_sub(1),
                ack.ack.wrapping_sub(1),
                cx.now,
            )
        } else {
            None
        };
        let room = self.ready.len() < self.backlog && cx.room;
        match (mss, room, cx.hop) {
            (Some(mss), true, Some(hop)) => ListenAction::FromCookie(Box::new(Tcb::from_cookie(
                local, remote, hop, ack, mss, cx.cfg,
            ))),
            (Some(_), _, _) => ListenAction::Reset(DropReason::TcpListenOverflow),
            (None, _, _) if cookies_out => ListenAction::Reset(DropReason::TcpBadCookie),
            (None, _, _) => ListenAction::Reset(DropReason::TcpStrayAck),
        }
    }
}

/// A stateless SYN-ACK whose ISN is a SYN cookie (RFC 4987 §3.6): the MSS the cookie encodes (the
/// peer's, capped by the route's) is the only option.
fn cookie_syn_ack<A: IpAddress>(
    cx: &ListenCx<'_, A>,
    hop: &NextHop<A>,
    local: A::Socket,
    remote: A::Socket,
    syn: &TcpRepr,
) -> TcpRepr
where
    A::Socket: Into<SocketAddr>,
{
    let mss = syn
        .options
        .mss
        .unwrap_or(536)
        .min(tcb::mss_for_mtu::<A>(hop.caps.mtu));
    let cookie = cx.isn.cookie(local, remote, syn.seq, mss, cx.now);
    TcpRepr {
        src_port: A::port(&local),
        dst_port: A::port(&remote),
        seq: cookie,
        ack: syn.seq.wrapping_add(1),
        flags: Flags::SYN | Flags::ACK,
        window: cx.cfg.recv_buffer.min(65535) as u16,
        urgent: 0,
        options: TcpOptions {
            mss: Some(mss),
            ..TcpOptions::default()
        },
    }
}

impl<N: Network> Tcp<N> {
    /// A segment for listener `index`: its decision, carried out.
    pub(super) fn listen_input(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        local: N::Socket,
        remote: N::Socket,
        repr: &TcpRepr,
        buf: PacketBuf,
    ) {
        // Room for a connection. Only a SYN may end TIME-WAITs early to make it: a stray ACK to a full
        // table must not.
        let syn = repr.flags.contains(Flags::SYN) && !repr.flags.contains(Flags::ACK);
        let room = self.connections() < cx.max_connections || (syn && self.recycle_time_wait(cx));
        // No way back that a loopback destination may take (a packet from outside the host to it):
        // as no route.
        let hop = cx
            .ip
            .route_link(N::Addr::ip(&remote))
            .ok()
            .filter(|hop| !super::off_host_loopback::<N>(N::Addr::ip(&local), hop));
        let dst = N::Addr::ip(&local);
        let Tcp {
            slots,
            isn,
            fast_open_key,
            last_cookie,
            holds,
            ..
        } = self;
        let Some(Slot {
            entry: Entry::Listener(listener),
            ..
        }) = slots.at(index)
        else {
            return cx.drop(buf, DropReason::TcpNoSocket);
        };
        let mut lcx = ListenCx {
            now: cx.now,
            cfg: cx.cfg,
            isn,
            fast_open_key: fastopen::key(&cx.cfg.fast_open, fast_open_key),
            data: buf.len(),
            last_cookie,
            room,
            hop,
            // Only a holding listener has bounds to meet: no lookup for the others.
            hold_pressure: if listener.hold {
                holds.pressure(dst)
            } else {
                None
            },
        };
        let hold = listener.hold;
        match listener.on_segment(&mut lcx, local, remote, repr) {
            ListenAction::Drop(reason) => cx.drop(buf, reason),
            ListenAction::Reset(reason) => {
                self.reply_reset(cx, local, remote, repr, buf.len());
                cx.drop(buf, reason);
            }
            ListenAction::Cookie { syn_ack, hop } => {
                cx.pool.free(buf);
                cx.counters.tcp.syn_cookies_sent += 1;
                if hold {
                    cx.counters.tcp.held_deferred += 1;
                }
                self.emit(cx, &hop, local, remote, syn_ack, &[]);
            }
            ListenAction::Replace(tcb, pressure) => {
                // The oldest held connection goes as its SYN would have been lost: the peer's
                // retransmission is a new SYN to decide on.
                if let Some(oldest) = self.holds.oldest(dst, pressure) {
                    cx.counters.tcp.held_replaced += 1;
                    if let Some(t) = self.tcb(oldest) {
                        t.orphan = true;
                    }
                    self.finish(cx, oldest);
                }
                cx.pool.free(buf);
                self.open(cx, index, tcb, hold);
            }
            ListenAction::Open(tcb) => {
                cx.pool.free(buf);
                self.open(cx, index, tcb, hold);
            }
            ListenAction::FastOpen(tcb) => {
                cx.counters.tcp.fast_open_accepted += 1;
                let child = self.adopt(cx, index, tcb);
                if let Some(l) = self.listener(index) {
                    l.ready.push_back(SocketId(child));
                    l.fast_open_pending.push(child);
                    self.hints.note(index);
                }
                if let Some(tcb) = self.tcb(child) {
                    tcb.take_syn_data(buf, &mut cx.tcb());
                } else {
                    cx.pool.free(buf);
                }
                self.output(cx, child);
            }
            ListenAction::FromCookie(tcb) => {
                cx.counters.tcp.syn_cookies_ok += 1;
                let child = self.adopt(cx, index, tcb);
                if let Some(l) = self.listener(index) {
                    l.ready.push_back(SocketId(child));
                    self.hints.note(index);
                }
                // The ACK may carry data already.
                if buf.is_empty() {
                    cx.pool.free(buf);
                } else {
                    self.conn_input(cx, child, repr, buf);
                }
            }
        }
    }

    /// A new passive open of listener `index`: held for the application to take (when the listener
    /// holds SYNs), or half-open with its SYN-ACK sent.
    fn open(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        tcb: Box<Tcb<N::Addr>>,
        hold: bool,
    ) {
        let dst = N::Addr::ip(&tcb.local);
        let child = self.adopt(cx, index, tcb);
        if hold {
            // Not answered: the application takes it now and decides.
            cx.counters.tcp.held_syns += 1;
            self.holds.add(child, dst);
        }
        let Some(l) = self.listener(index) else {
            return;
        };
        if hold {
            l.ready.push_back(SocketId(child));
            self.hints.note(index);
            return;
        }
        l.half_open.push(child);
        self.output(cx, child);
    }

    /// Puts a passive open of listener `index` into the table, its MSS sized for the path MTU now
    /// known; returns its slot.
    fn adopt(
        &mut self,
        cx: &mut TcpCx<impl Transmit, N>,
        index: u32,
        mut tcb: Box<Tcb<N::Addr>>,
    ) -> u32 {
        let (mtu, epoch) = cx.path_mtu(N::Addr::ip(&tcb.remote), tcb.hop.caps.mtu);
        tcb.sync_path_mtu(mtu, epoch);
        cx.counters.tcp.passive_opens += 1;
        let pcb = pcb_of(&tcb);
        let (child, _) = self.insert(Entry::Conn(tcb), pcb);
        if let Some(slot) = self.slots.at_mut(child) {
            slot.parent = Some(index);
        }
        child
    }
}

#[cfg(test)]
mod tests;
