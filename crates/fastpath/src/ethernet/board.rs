//! A board where the stacks of one interface's queues share the answers they hear.
//!
//! With a stack per queue (AF_XDP on a multi-queue interface), every stack has the interface's
//! hardware and protocol addresses and resolves its neighbours itself, but the link hands each
//! frame to one queue only, chosen by a hash: the answer to one stack's ARP request or neighbour
//! solicitation may reach another stack, which did not ask and (rightly) ignores it. Each stack
//! posts here the answers addressed to the interface (an ARP reply to our hardware and protocol
//! address, a solicited advertisement to one of our addresses with the target's hardware address),
//! and looks at the board on every poll: an answer for an address it is itself resolving completes
//! that resolution (`NeighborCache::answered`), as if the answer had come to it; any other answer
//! changes nothing, so the board creates no entry either. It holds the last [`BOARD_ANSWERS`]
//! answers; a stack that did not look in time asks again.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::wire::MacAddr;

/// Answers the board keeps, the newest.
pub const BOARD_ANSWERS: usize = 64;

#[derive(Debug, Default)]
struct Inner {
    /// Answers posted so far: a stack that has seen this many has nothing new to read.
    posted: AtomicU64,
    answers: Mutex<VecDeque<(u64, IpAddr, MacAddr)>>,
}

/// The board (see the module's notes). Clones share it.
#[derive(Clone, Debug, Default)]
pub struct NeighborBoard {
    inner: Arc<Inner>,
}

impl NeighborBoard {
    /// An empty board.
    pub fn new() -> NeighborBoard {
        NeighborBoard::default()
    }

    /// Posts an answer heard: `ip` is at `mac`.
    pub(crate) fn post(&self, ip: IpAddr, mac: MacAddr) {
        let mut answers = self.inner.answers.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.inner.posted.load(Ordering::Relaxed) + 1;
        answers.push_back((n, ip, mac));
        if answers.len() > BOARD_ANSWERS {
            answers.pop_front();
        }
        self.inner.posted.store(n, Ordering::Release);
    }

    /// The answers posted after the first `seen`, and how many have been posted in all. Costs one
    /// atomic load when there is nothing new.
    pub(crate) fn since(&self, seen: u64) -> (Vec<(IpAddr, MacAddr)>, u64) {
        let posted = self.inner.posted.load(Ordering::Acquire);
        if posted == seen {
            return (Vec::new(), seen);
        }
        let answers = self.inner.answers.lock().unwrap_or_else(|e| e.into_inner());
        let posted = self.inner.posted.load(Ordering::Acquire);
        let new = answers
            .iter()
            .filter(|(n, _, _)| *n > seen)
            .map(|&(_, ip, mac)| (ip, mac))
            .collect();
        (new, posted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reader_gets_what_was_posted_since_it_last_looked_within_the_bound() {
        let board = NeighborBoard::new();
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        assert_eq!(board.since(0), (Vec::new(), 0));
        board.post("10.0.0.1".parse().unwrap(), mac);
        board.post("10.0.0.2".parse().unwrap(), mac);
        let (new, seen) = board.since(0);
        assert_eq!((new.len(), seen), (2, 2));
        assert_eq!(board.since(seen).0, Vec::new());
        board.post("10.0.0.3".parse().unwrap(), mac);
        assert_eq!(
            board.since(seen).0,
            vec![("10.0.0.3".parse().unwrap(), mac)]
        );
        for i in 0..200u8 {
            board.post(IpAddr::from([10, 0, 1, i]), mac);
        }
        assert_eq!(board.since(0).0.len(), BOARD_ANSWERS);
    }
}
