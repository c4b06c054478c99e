//! A generational slot table: sockets are named by a slot index and the generation of the slot when
//! they were made, so a handle to a closed socket can never reach the socket that reuses its slot.

/// One slot: its generation, bumped when it is freed, and what it holds.
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values in slots, with a free list.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    /// Stores `value`; returns its index and generation.
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.value = Some(value);
        (index, slot.generation)
    }

    /// Takes the value out of slot `index` if it holds one of `generation`; the slot's generation
    /// moves on.
    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self
            .slots
            .get_mut(index as usize)
            .filter(|s| s.generation == generation)?;
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        Some(value)
    }

    /// The value in slot `index` if it is of `generation`.
    #[inline]
    pub(crate) fn get(&self, index: u32, generation: u32) -> Option<&T> {
        self.slots
            .get(index as usize)
            .filter(|s| s.generation == generation)?
            .value
            .as_ref()
    }

    /// The value in slot `index` if it is of `generation`.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        self.slots
            .get_mut(index as usize)
            .filter(|s| s.generation == generation)?
            .value
            .as_mut()
    }

    /// The value in slot `index`, whatever its generation (for indices the table itself handed to
    /// the demultiplexer).
    #[inline]
    pub(crate) fn at_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots.get_mut(index as usize)?.value.as_mut()
    }

    /// The value in slot `index`, whatever its generation.
    #[inline]
    pub(crate) fn at(&self, index: u32) -> Option<&T> {
        self.slots.get(index as usize)?.value.as_ref()
    }

    /// The generation of slot `index` (of its value, or of the next one it will hold).
    #[inline]
    pub(crate) fn generation(&self, index: u32) -> u32 {
        self.slots.get(index as usize).map_or(0, |s| s.generation)
    }

    /// Slots, used or free: every index is below this.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Every value, with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.value.as_ref()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_handle_never_reaches_the_slot_reused() {
        let mut t = Slots::default();
        let (i, g) = t.insert("first");
        assert_eq!(t.get(i, g), Some(&"first"));
        assert_eq!(t.remove(i, g), Some("first"));
        let (j, h) = t.insert("second");
        assert_eq!(j, i);
        assert_ne!(h, g);
        assert_eq!(t.get(i, g), None);
        assert_eq!(t.remove(i, g), None);
        assert_eq!(t.get_mut(j, h), Some(&mut "second"));
        assert_eq!(t.iter().count(), 1);
        assert_eq!(t.at_mut(j), Some(&mut "second"));
        assert_eq!(
            (t.at(j), t.generation(j), t.capacity()),
            (Some(&"second"), h, 1)
        );
    }
}
