//! Readiness hints: which sockets a transport layer touched since an event loop last asked, so that
//! the loop wakes the tasks waiting on those sockets instead of testing every waiting task after every
//! `poll` (what `fastpath-tokio`'s driver does with them).
//!
//! A hint says only that a socket *may* have become ready (data or a connection queued, an
//! acknowledgment that freed room, a state change, an error); the loop still asks the socket. Off
//! unless turned on ([`Stack::set_ready_hints`](crate::Stack::set_ready_hints)): then noting a socket
//! costs one push, and the list is bounded: past [`MAX_HINTS`] it stops growing and says so, and the
//! loop falls back to testing everything once.

/// Most hints kept between two takes; past it, the list is marked incomplete.
pub(crate) const MAX_HINTS: usize = 4096;

/// One layer's hints: socket indices, in the order touched (repeats allowed).
#[derive(Debug, Default)]
pub(crate) struct Hints {
    on: bool,
    list: Vec<u32>,
    overflowed: bool,
}

impl Hints {
    /// Turns noting on or off (off drops what was noted).
    pub(crate) fn set(&mut self, on: bool) {
        self.on = on;
        self.list.clear();
        self.overflowed = false;
    }

    /// Socket `index` may have become ready.
    #[inline]
    pub(crate) fn note(&mut self, index: u32) {
        if self.on {
            if self.list.len() < MAX_HINTS {
                self.list.push(index);
            } else {
                self.overflowed = true;
            }
        }
    }

    /// Hands every index noted to `f` and forgets them; false when some were not kept (the caller
    /// must consider every socket).
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32)) -> bool {
        for &i in &self.list {
            f(i);
        }
        self.list.clear();
        !std::mem::take(&mut self.overflowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_notes_nothing_on_notes_in_order_and_overflow_is_reported_once() {
        let mut h = Hints::default();
        h.note(1);
        let mut got = Vec::new();
        assert!(h.drain(|i| got.push(i)));
        assert!(got.is_empty());
        h.set(true);
        h.note(3);
        h.note(1);
        assert!(h.drain(|i| got.push(i)));
        assert_eq!(got, [3, 1]);
        for i in 0..MAX_HINTS as u32 + 10 {
            h.note(i);
        }
        got.clear();
        assert!(!h.drain(|i| got.push(i)), "overflow reported");
        assert_eq!(got.len(), MAX_HINTS, "the list stops growing");
        assert!(h.drain(|_| ()), "and the next take is complete again");
    }
}
