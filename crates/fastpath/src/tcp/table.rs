//! The table of connections and listeners: slots, the demultiplexer over them, the ports in use,
//! and the heap of the connections' deadlines with the timer run that visits the due ones.

use super::*;

impl<N: Network> Tcp<N> {
    pub(super) fn insert(&mut self, entry: Entry<N::Addr>, pcb: Pcb<N::Addr>) -> (u32, u32) {
        if matches!(entry, Entry::Conn(_)) {
            self.connections += 1;
        }
        let (index, generation) = self.slots.insert(Slot {
            entry,
            in_demux: true,
            scheduled: None,
            parent: None,
            output_queued: false,
        });
        self.ports.take(pcb.local_port);
        self.demux.insert(SocketId(index), pcb);
        (index, generation)
    }

    /// Takes an entry out of the demultiplexer (it receives nothing more) but keeps its slot.
    pub(super) fn unhook(&mut self, index: u32) {
        let Some(slot) = self.slots.at_mut(index) else {
            return;
        };
        if !slot.in_demux {
            return;
        }
        slot.in_demux = false;
        let pcb = match &slot.entry {
            Entry::Conn(t) => pcb_of(t),
            Entry::TimeWait(t) => connected_pcb(t.local, t.remote),
            Entry::Listener(l) => Pcb::bound(l.local),
        };
        self.demux.remove(SocketId(index), &pcb);
        self.ports.release(pcb.local_port);
    }

    /// The table is full: frees the TIME-WAIT connections the application has closed that have the
    /// least of their 2 MSL left, a sixteenth of them (at least one), as Linux stops keeping
    /// TIME-WAIT sockets past `tcp_max_tw_buckets`. A server that closes first leaves a TIME-WAIT
    /// connection behind each of its connections, and 60 s of them at a thousand connections a
    /// second fill the table; then a new connection takes the place of an old one's TIME-WAIT rather
    /// than be refused. The search looks at every slot, once per sixteenth freed, and after one that
    /// found none, not again for a second (a table full of live connections is not searched for every
    /// SYN of a flood). True if there is room now.
    pub(super) fn recycle_time_wait(&mut self, cx: &mut TcpCx<impl Transmit, N>) -> bool {
        if self.no_time_wait_until.is_some_and(|t| cx.now < t) {
            return false;
        }
        let mut waiting: Vec<(Instant, u32)> = self
            .slots
            .iter()
            .filter_map(|(index, slot)| match &slot.entry {
                Entry::TimeWait(t) => Some((t.deadline, index)),
                Entry::Conn(t) if t.state == State::TimeWait && t.orphan => {
                    Some((t.deadline().unwrap_or(cx.now), index))
                }
                _ => None,
            })
            .collect();
        if waiting.is_empty() {
            self.no_time_wait_until = Some(cx.now + std::time::Duration::from_secs(1));
            return false;
        }
        let n = (waiting.len() / 16).max(1);
        waiting.select_nth_unstable(n - 1);
        for &(_, index) in &waiting[..n] {
            cx.counters.tcp.time_wait_recycled += 1;
            if let Some(Entry::Conn(mut tcb)) = self.remove(index) {
                tcb.release(cx.pool);
            }
        }
        true
    }

    /// Frees a slot. Its heap entry, if any, is dead now (the slot's generation moves on): dropped
    /// now if it is on top, else when it gets there.
    pub(crate) fn remove(&mut self, index: u32) -> Option<Entry<N::Addr>> {
        self.unhook(index);
        if self.intercept == Some(index) {
            self.intercept = None;
        }
        let generation = self.slots.generation(index);
        let entry = self.slots.remove(index, generation)?.entry;
        match &entry {
            Entry::Conn(tcb) => {
                self.connections -= 1;
                if tcb.held {
                    self.holds.remove(index);
                }
            }
            Entry::TimeWait(_) => self.connections -= 1,
            Entry::Listener(_) => {}
        }
        self.drop_dead_top();
        Some(entry)
    }

    /// The entry in slot `index`, if it holds one of `generation` (any generation when `None`).
    pub(super) fn entry(
        &mut self,
        index: u32,
        generation: Option<u32>,
    ) -> Option<&mut Entry<N::Addr>> {
        let slot = match generation {
            Some(g) => self.slots.get_mut(index, g),
            None => self.slots.at_mut(index),
        };
        slot.map(|s| &mut s.entry)
    }

    /// The connection a handle names (its generation must match).
    pub(crate) fn conn_mut(&mut self, index: u32, generation: u32) -> Option<&mut Tcb<N::Addr>> {
        match self.entry(index, Some(generation))? {
            Entry::Conn(t) => Some(t),
            Entry::Listener(_) | Entry::TimeWait(_) => None,
        }
    }

    pub(crate) fn tcb(&mut self, index: u32) -> Option<&mut Tcb<N::Addr>> {
        conn_at(&mut self.slots, index)
    }

    /// The listener a handle names (its generation must match).
    pub(crate) fn listener_mut(
        &mut self,
        index: u32,
        generation: u32,
    ) -> Option<&mut Listener<N::Addr>> {
        match self.entry(index, Some(generation))? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) | Entry::TimeWait(_) => None,
        }
    }

    /// Whether connection `index` waits in its listener's accept queue (made by a listener, not
    /// yet taken by `accept`).
    pub(super) fn awaiting_accept(&mut self, index: u32) -> bool {
        let Some(parent) = self.slots.at(index).and_then(|slot| slot.parent) else {
            return false;
        };
        self.listener(parent)
            .is_some_and(|l| l.ready.iter().any(|id| id.0 == index))
    }

    pub(super) fn listener(&mut self, index: u32) -> Option<&mut Listener<N::Addr>> {
        match self.entry(index, None)? {
            Entry::Listener(l) => Some(l),
            Entry::Conn(_) | Entry::TimeWait(_) => None,
        }
    }

    /// Takes the next connection from the accept queue of listener `index` (of `generation`):
    /// `None` when the listener is gone, `Some(None)` when its queue is empty, else the connection's
    /// slot, generation and peer, now the application's (no longer its listener's).
    pub(crate) fn accept(
        &mut self,
        index: u32,
        generation: u32,
    ) -> Option<Option<(u32, u32, N::Socket)>> {
        loop {
            let child = self.listener_mut(index, generation)?.ready.pop_front();
            let Some(SocketId(child)) = child else {
                return Some(None);
            };
            let child_generation = self.slots.generation(child);
            let Some(slot) = self.slots.at_mut(child) else {
                continue;
            };
            let Entry::Conn(tcb) = &slot.entry else {
                continue;
            };
            slot.parent = None;
            return Some(Some((child, child_generation, tcb.remote)));
        }
    }

    /// Learns connection `index`'s deadline, which may have changed: every path that runs the
    /// block (input, output, timers, the application's calls) ends here, through `tcp_output` or
    /// `tcp_timers`. Pushes a heap entry only when the deadline moved earlier than the one
    /// scheduled; a deadline that moved later (or went) leaves the entry as it is, to be looked at
    /// when it comes due.
    #[inline]
    pub(super) fn schedule(&mut self, index: u32) {
        // The usual case, inlined: a connection not in TIME-WAIT whose deadline is no earlier than
        // the one scheduled (or that has none): nothing to do.
        if let Some(Slot {
            entry: Entry::Conn(tcb),
            scheduled,
            ..
        }) = self.slots.at(index)
        {
            if tcb.state != State::TimeWait
                && tcb
                    .deadline()
                    .is_none_or(|at| scheduled.is_some_and(|s| at >= s))
            {
                return;
            }
        }
        self.schedule_general(index);
    }

    /// [`Tcp::schedule`]'s general case: a compact TIME-WAIT taken, a heap entry pushed.
    #[inline(never)]
    fn schedule_general(&mut self, index: u32) {
        let generation = self.slots.generation(index);
        let Some(slot) = self.slots.at_mut(index) else {
            return;
        };
        // A connection in TIME-WAIT that the application has closed takes its compact form.
        if let Entry::Conn(tcb) = &slot.entry {
            if let Some(compact) = tcb.time_wait() {
                slot.entry = Entry::TimeWait(Box::new(compact));
            }
        }
        let deadline = match &slot.entry {
            Entry::Conn(tcb) => tcb.deadline(),
            Entry::TimeWait(t) => Some(t.deadline),
            Entry::Listener(_) => None,
        };
        if let Some(at) = deadline.filter(|&at| slot.scheduled.is_none_or(|s| at < s)) {
            slot.scheduled = Some(at);
            self.timers.push(Reverse((at, index, generation)));
            if self.timers.len() > 2 * self.connections + 64 {
                self.compact_timers();
            }
        }
    }

    /// Drops dead entries (of connections gone, or left behind when a connection's deadline moved
    /// earlier) from the top of the heap, so that they cost no wake-up. Live entries whose
    /// connection's deadline moved later stay: they are looked at when they come due.
    pub(super) fn drop_dead_top(&mut self) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            let live = self
                .slots
                .get(index, generation)
                .is_some_and(|slot| slot.scheduled == Some(at));
            if live {
                return;
            }
            self.timers.pop();
        }
    }

    /// Rebuilds the heap from the live entries, when dead ones outnumber them.
    #[cold]
    pub(super) fn compact_timers(&mut self) {
        let slots = &self.slots;
        self.timers.retain(|&Reverse((at, index, generation))| {
            slots
                .get(index, generation)
                .is_some_and(|slot| slot.scheduled == Some(at))
        });
    }

    /// Takes the connections whose entries are due at `now` off the heap, into `self.due` (a
    /// connection whose deadline moved later since is among them: `timers` reschedules it).
    pub(super) fn take_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, index, generation))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if let Some(slot) = self.slots.get_mut(index, generation) {
                if slot.scheduled == Some(at) {
                    slot.scheduled = None;
                    self.due.push(index);
                }
            }
        }
    }

    /// When the next timer run may have work: never later than the earliest deadline of any
    /// connection, and earlier when the connection on top of the heap has moved its deadline later
    /// since its entry was pushed. That costs one run that finds it not due and pushes it again at
    /// its deadline; a connection gone leaves no entry on top.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|&Reverse((at, _, _))| at)
    }

    /// Listeners and connections bound to `port` overlapping `addr`.
    pub(super) fn listener_conflict(&self, local: N::Socket) -> bool {
        self.slots.iter().any(|(_, s)| match &s.entry {
            Entry::Listener(l) => {
                s.in_demux
                    && N::Addr::port(&l.local) == N::Addr::port(&local)
                    && (N::Addr::ip(&l.local).is_wildcard()
                        || N::Addr::ip(&local).is_wildcard()
                        || N::Addr::ip(&l.local) == N::Addr::ip(&local))
            }
            _ => false,
        })
    }

    /// Number of connections, in every state.
    pub(crate) fn connections(&self) -> usize {
        self.connections
    }

    /// Runs due TCP timers (from `poll`): only the connections whose deadlines are due are
    /// visited, each once per run (a timer re-armed for `now` waits for the next run).
    pub(crate) fn timers(&mut self, cx: &mut TcpCx<impl Transmit, N>) {
        let now = cx.now;
        self.take_due(now);
        let mut due = std::mem::take(&mut self.due);
        for &index in &due {
            #[cfg(test)]
            {
                self.timer_visits += 1;
            }
            if let Some(Slot {
                entry: Entry::TimeWait(t),
                ..
            }) = self.slots.at(index)
            {
                // A compact TIME-WAIT's only timer: its end.
                if t.deadline <= now {
                    self.remove(index);
                } else {
                    cx.counters.tcp.timer_early += 1;
                    self.schedule(index);
                }
                continue;
            }
            let mut tcx = cx.tcb();
            let Some(tcb) = self.tcb(index) else {
                continue;
            };
            if tcb.deadline().is_some_and(|d| d <= now) {
                let verdict = tcb.on_timer(&mut tcx);
                self.verdict(cx, index, verdict);
            } else {
                cx.counters.tcp.timer_early += 1;
            }
            self.schedule(index);
        }
        due.clear();
        self.due = due;
        // The pops may have left a dead entry on top.
        self.drop_dead_top();
        self.flush_dirty(cx);
    }
}

/// The connection in slot `index` of `slots`: [`Tcp::tcb`] borrowing the slots alone, so that the
/// table's other fields (the checksum rules) can be read beside it.
#[inline]
pub(super) fn conn_at<A: IpAddress>(slots: &mut Slots<Slot<A>>, index: u32) -> Option<&mut Tcb<A>> {
    match &mut slots.at_mut(index)?.entry {
        Entry::Conn(t) => Some(t),
        Entry::Listener(_) | Entry::TimeWait(_) => None,
    }
}
