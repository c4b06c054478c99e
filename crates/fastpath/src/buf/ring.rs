//! A first-in first-out queue on a power-of-two ring, for sockets' receive queues and the loopback link.
//!
//! `std`'s `VecDeque` does the same, but its `push_back` is large enough that the compiler sometimes
//! calls it out of line from the receive path, at a few dozen instructions a datagram; this one's
//! push is a store, an add and a rarely taken branch to `grow`, so it always inlines. The queue is
//! bounded by its owner (a socket's receive buffer limit, the loopback link's packet limit), not
//! here.

/// A FIFO queue of `T`.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    /// A power-of-two number of slots (or none); the live ones are `head .. head + len`, wrapping.
    slots: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T> Ring<T> {
    /// The number of items queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds `value` at the back.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, value: T) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = (self.head + self.len) & (self.slots.len() - 1);
        // The slot is outside the live range, so empty: replaced without the check that would drop
        // what it held.
        let old = self.slots[i].replace(value);
        debug_assert!(old.is_none(), "a live slot overwritten");
        std::mem::forget(old);
        self.len += 1;
    }

    /// True when nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Takes the item at the front.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = (self.head + 1) & (self.slots.len() - 1);
        self.len -= 1;
        value
    }

    /// The item at the front.
    #[inline]
    pub(crate) fn front_mut(&mut self) -> Option<&mut T> {
        if self.len == 0 {
            return None;
        }
        self.slots[self.head].as_mut()
    }

    /// Twice the slots (at least 4), the items moved to the start in order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(4);
        let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
        for (k, slot) in slots.iter_mut().enumerate().take(self.len) {
            let i = (self.head + k) & (self.slots.len() - 1);
            *slot = self.slots[i].take();
        }
        self.slots = slots;
        self.head = 0;
    }
}

impl<T> Iterator for Ring<T> {
    type Item = T;

    /// Takes the items front to back.
    fn next(&mut self) -> Option<T> {
        self.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Against `VecDeque`, over pushes and pops that wrap and grow.
    #[test]
    fn behaves_as_a_vecdeque() {
        let mut ring = Ring::default();
        let mut reference = VecDeque::new();
        let mut seed = 12345u32;
        for i in 0..10_000u32 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            if seed >> 16 & 3 != 0 {
                ring.push_back(i);
                reference.push_back(i);
            } else {
                assert_eq!(ring.pop_front(), reference.pop_front());
            }
            assert_eq!(ring.len(), reference.len());
            assert_eq!(ring.front_mut().copied(), reference.front().copied());
        }
        let rest: Vec<u32> = ring.collect();
        assert_eq!(rest, reference.into_iter().collect::<Vec<_>>());
    }
}
