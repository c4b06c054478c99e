//! The buffer pool: recycling instead of allocating and freeing for every packet.

use std::sync::{Arc, Mutex};

use super::{PacketBuf, HEADROOM};

/// Where packet buffers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BufferMode {
    /// Free lists of fixed-size buffers, reused packet after packet. Partridge & Pink (paper 000 §6.4)
    /// kept a one-buffer cache in `sendit` because fixed-size mbufs made reuse trivial; Kay & Pasquale
    /// (paper 001) count malloc/free among the per-packet costs. Once warm, no allocation per packet.
    #[default]
    Pool,
    /// One heap allocation per packet, sized to the packet, freed after use: the baseline.
    Heap,
}

impl std::str::FromStr for BufferMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pool" => Ok(BufferMode::Pool),
            "heap" => Ok(BufferMode::Heap),
            _ => Err(format!("unknown buffer mode `{s}` (expected pool or heap)")),
        }
    }
}

/// Sizes of the pool's buffer classes, headroom included: a 1500-byte frame, a 16 KiB packet (jumbo
/// frames up to MTU 16384, with their headroom), and a maximal IPv4 datagram (a reassembled one, or one
/// for a 64 KiB MTU link).
const CLASSES: [usize; 3] = [2048, HEADROOM + 16384, HEADROOM + 65536];

/// Counters of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out from a free list.
    pub reused: u64,
    /// Buffers that had to be allocated from the heap.
    pub allocated: u64,
    /// Buffers returned to a free list.
    pub recycled: u64,
    /// Buffers given back to the heap (heap mode, odd sizes, or a full free list).
    pub released: u64,
}

/// Free buffers of one size class, the last freed on top. Its push is a store and a rarely taken
/// branch to `grow`, so that it always inlines: `Vec::push` stayed out of line in larger programs, a
/// call of about 24 instructions for every buffer freed.
#[derive(Debug, Default)]
struct FreeList {
    /// The live buffers are `slots[..len]`; the slots past them are empty.
    slots: Vec<Option<Box<[u8]>>>,
    len: usize,
}

impl FreeList {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn push(&mut self, storage: Box<[u8]>) {
        if self.len == self.slots.len() {
            self.grow();
        }
        // Past the live ones, the slot is empty: replaced without the check that would drop what it
        // held.
        let old = self.slots[self.len].replace(storage);
        debug_assert!(old.is_none(), "a live slot overwritten");
        std::mem::forget(old);
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Box<[u8]>> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.slots[self.len].take()
    }

    /// Twice the slots, at least 8.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(8);
        self.slots.resize_with(n, || None);
    }

    /// Takes the top `n` buffers (at most all).
    fn take_top(&mut self, n: usize) -> impl Iterator<Item = Box<[u8]>> + '_ {
        let n = n.min(self.len);
        self.len -= n;
        self.slots[self.len..self.len + n]
            .iter_mut()
            .filter_map(Option::take)
    }

    /// Empties the list and gives back its memory.
    fn clear(&mut self) {
        *self = FreeList::default();
    }
}

/// Buffers moved between a pool and its depot at once.
const BATCH: usize = 32;

/// A depot's free buffers of one size class.
type Shelf = Vec<Box<[u8]>>;

/// A store of free buffers that several pools share, for stacks whose buffers travel from one to the
/// other (two stacks joined by an in-memory pair: the sender allocates what the receiver frees). Each
/// pool keeps its own free lists and only takes the depot's lock to move a batch of buffers in or out,
/// as Bonwick's magazines do. Cloning gives another handle to the same depot.
#[derive(Clone, Debug, Default)]
pub struct BufferDepot {
    shelves: Arc<Mutex<[Shelf; 3]>>,
}

impl BufferDepot {
    /// An empty depot.
    pub fn new() -> BufferDepot {
        BufferDepot::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [Shelf; 3]> {
        // A panic elsewhere cannot leave a list of free buffers inconsistent.
        self.shelves.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Hands out and takes back packet buffers.
#[derive(Debug)]
pub struct BufferPool {
    mode: BufferMode,
    free: [FreeList; 3],
    /// Free buffers each class's list keeps at most: the count given, lowered for the larger classes by
    /// the byte limit ([`Self::limit_free_bytes`]).
    max_free: [usize; 3],
    /// Free buffers a list keeps before it spills: with a depot, two batches at most, passing the rest
    /// on at once so that the pools that allocate refill quickly; without one, `max_free`.
    keep: [usize; 3],
    depot: Option<BufferDepot>,
    stats: PoolStats,
}

impl BufferPool {
    /// A pool in `mode` that keeps at most `max_free` free buffers of each size class.
    pub fn new(mode: BufferMode, max_free: usize) -> BufferPool {
        BufferPool {
            mode,
            free: Default::default(),
            max_free: [max_free; 3],
            keep: [max_free; 3],
            depot: None,
            stats: PoolStats::default(),
        }
    }

    /// Also keeps at most `bytes` of free buffers in each size class (at least one buffer): what the
    /// pool holds for reuse when the traffic that needed its buffers has gone. A larger class then
    /// keeps fewer buffers (with 8 MiB, 126 of 64 KiB but still 1024 of 2 KiB).
    pub fn limit_free_bytes(&mut self, bytes: usize) {
        for (class, size) in CLASSES.iter().enumerate() {
            self.max_free[class] = self.max_free[class].min((bytes / size).max(1));
        }
        self.update_keep();
    }

    fn update_keep(&mut self) {
        for class in 0..CLASSES.len() {
            self.keep[class] = match self.depot {
                Some(_) => (2 * BATCH).min(self.max_free[class]),
                None => self.max_free[class],
            };
        }
    }

    /// Shares `depot` with other pools: an empty free list refills from it a batch at a time, a full one
    /// spills a batch into it (which holds at most four times `max_free` per class).
    pub fn set_depot(&mut self, depot: BufferDepot) {
        self.depot = Some(depot);
        self.update_keep();
    }

    /// Hands every free buffer back to the heap (not the depot's: other pools may be using those).
    /// Returns how many bytes that was.
    pub fn release_free(&mut self) -> usize {
        let (n, bytes) = self.held();
        for list in &mut self.free {
            list.clear();
        }
        self.stats.released += n as u64;
        bytes
    }

    /// The mode.
    pub fn mode(&self) -> BufferMode {
        self.mode
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Free buffers held, and the bytes they hold.
    pub fn held(&self) -> (usize, usize) {
        let n = self.free.iter().map(FreeList::len).sum();
        let bytes = self
            .free
            .iter()
            .zip(CLASSES)
            .map(|(f, size)| f.len() * size)
            .sum();
        (n, bytes)
    }

    /// An empty buffer with [`HEADROOM`] in front and room for at least `capacity` bytes after it.
    #[inline(always)]
    pub fn alloc(&mut self, capacity: usize) -> PacketBuf {
        let needed = HEADROOM + capacity;
        if self.mode == BufferMode::Pool {
            if let Some(class) = CLASSES.iter().position(|&size| needed <= size) {
                // The common case: a free buffer of the class at hand.
                if let Some(storage) = self.free[class].pop() {
                    self.stats.reused += 1;
                    return PacketBuf::from_storage(storage, HEADROOM);
                }
                return self.alloc_empty(class);
            }
        }
        self.alloc_heap(needed)
    }

    /// A buffer with [`HEADROOM`] in front whose window is already `len` bytes long, for output that
    /// writes every one of them (the bytes are whatever the buffer held before). The same as
    /// [`Self::alloc`] and [`PacketBuf::extend`], but the window's end is stored as the value it is:
    /// set by `extend`, it was read back from the middle of the 8-byte store of the new buffer's
    /// start and end, which the CPU does not forward.
    #[inline(always)]
    pub(crate) fn alloc_len(&mut self, len: usize) -> PacketBuf {
        let mut buf = self.alloc(len);
        buf.set_len_within(len);
        buf
    }

    /// Allocates when the free list of `class` is empty: refills it from the depot, or from the heap.
    #[cold]
    fn alloc_empty(&mut self, class: usize) -> PacketBuf {
        self.refill(class);
        if let Some(storage) = self.free[class].pop() {
            self.stats.reused += 1;
            return PacketBuf::from_storage(storage, HEADROOM);
        }
        self.stats.allocated += 1;
        PacketBuf::with_storage(vec![0; CLASSES[class]], HEADROOM)
    }

    /// Allocates `needed` bytes from the heap (heap mode, or larger than every class).
    #[inline(never)]
    fn alloc_heap(&mut self, needed: usize) -> PacketBuf {
        self.stats.allocated += 1;
        PacketBuf::with_storage(vec![0; needed], HEADROOM)
    }

    /// Takes a buffer back: onto its free list in pool mode, to the heap otherwise.
    #[inline(always)]
    pub fn free(&mut self, buf: PacketBuf) {
        if self.mode == BufferMode::Pool {
            let size = buf.truesize();
            if let Some(class) = CLASSES.iter().position(|&s| s == size) {
                // The common case: room on the free list below the level that would spill.
                let list = &mut self.free[class];
                if list.len() < self.keep[class] {
                    list.push(buf.into_storage());
                    self.stats.recycled += 1;
                    return;
                }
                return self.free_full(class, buf);
            }
        }
        self.stats.released += 1;
        drop(buf);
    }
}

impl BufferPool {
    /// Frees `buf` of `class` when its free list holds `keep` buffers or more.
    #[cold]
    fn free_full(&mut self, class: usize, buf: PacketBuf) {
        self.spill(class);
        if self.free[class].len() < self.max_free[class] {
            self.free[class].push(buf.into_storage());
            self.stats.recycled += 1;
            return;
        }
        self.stats.released += 1;
        drop(buf);
    }

    #[cold]
    fn refill(&mut self, class: usize) {
        if let Some(depot) = &self.depot {
            let mut shelves = depot.lock();
            let shelf = &mut shelves[class];
            let n = BATCH.min(shelf.len());
            for storage in shelf.drain(shelf.len() - n..) {
                self.free[class].push(storage);
            }
        }
    }

    #[cold]
    fn spill(&mut self, class: usize) {
        if let Some(depot) = &self.depot {
            let mut shelves = depot.lock();
            let room = (4 * self.max_free[class]).saturating_sub(shelves[class].len());
            let n = BATCH.min(room);
            shelves[class].extend(self.free[class].take_top(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_and_heap_does_not() {
        let mut pool = BufferPool::new(BufferMode::Pool, 4);
        let b = pool.alloc(64);
        assert_eq!(b.headroom(), HEADROOM);
        assert!(b.tailroom() >= 64);
        pool.free(b);
        let b = pool.alloc(100);
        assert_eq!(pool.stats().reused, 1);
        pool.free(b);
        let big = pool.alloc(65535);
        assert!(big.tailroom() >= 65535);
        pool.free(big);
        assert_eq!(pool.held().0, 2);

        let mut heap = BufferPool::new(BufferMode::Heap, 4);
        let b = heap.alloc(64);
        heap.free(b);
        let _ = heap.alloc(64);
        assert_eq!(heap.stats().reused, 0);
        assert_eq!(heap.stats().allocated, 2);
    }

    #[test]
    fn a_free_list_is_last_in_first_out() {
        let mut list = FreeList::default();
        let storage = |n: usize| vec![0u8; n].into_boxed_slice();
        for n in 1..=20 {
            list.push(storage(n));
        }
        assert_eq!(list.len(), 20);
        assert_eq!(list.pop().map(|s| s.len()), Some(20));
        let top: Vec<usize> = list.take_top(3).map(|s| s.len()).collect();
        assert_eq!(top, [17, 18, 19]);
        assert_eq!(list.len(), 16);
        list.push(storage(99));
        assert_eq!(list.pop().map(|s| s.len()), Some(99));
        assert_eq!(list.take_top(100).count(), 16);
        assert_eq!((list.len(), list.pop()), (0, None));
        list.push(storage(5));
        list.clear();
        assert_eq!((list.len(), list.pop()), (0, None));
    }

    #[test]
    fn a_buffer_allocated_with_its_length_has_that_window() {
        let mut pool = BufferPool::new(BufferMode::Pool, 4);
        let b = pool.alloc(100);
        pool.free(b);
        let b = pool.alloc_len(72);
        assert_eq!((b.headroom(), b.len()), (HEADROOM, 72));
        assert_eq!(pool.stats().reused, 1);
        let big = pool.alloc_len(65535);
        assert_eq!((big.headroom(), big.len()), (HEADROOM, 65535));
    }

    #[test]
    fn free_lists_are_bounded() {
        let mut pool = BufferPool::new(BufferMode::Pool, 2);
        let bufs: Vec<_> = (0..5).map(|_| pool.alloc(10)).collect();
        for b in bufs {
            pool.free(b);
        }
        assert_eq!(pool.held().0, 2);
        assert_eq!(pool.stats().released, 3);
    }

    #[test]
    fn the_byte_limit_keeps_fewer_large_buffers() {
        let mut pool = BufferPool::new(BufferMode::Pool, 100);
        pool.limit_free_bytes(4 * CLASSES[2]);
        let small: Vec<_> = (0..50).map(|_| pool.alloc(10)).collect();
        let large: Vec<_> = (0..50).map(|_| pool.alloc(60_000)).collect();
        small.into_iter().chain(large).for_each(|b| pool.free(b));
        // 50 small buffers fit in the byte limit; only 4 large ones do.
        assert_eq!(pool.held(), (54, 50 * CLASSES[0] + 4 * CLASSES[2]));
        assert_eq!(pool.release_free(), 50 * CLASSES[0] + 4 * CLASSES[2]);
        assert_eq!(pool.held(), (0, 0));
        assert_eq!(pool.stats().released, 46 + 54);
    }

    #[test]
    fn pools_sharing_a_depot_stop_allocating() {
        let depot = BufferDepot::new();
        let (mut sender, mut receiver) = (
            BufferPool::new(BufferMode::Pool, 64),
            BufferPool::new(BufferMode::Pool, 64),
        );
        sender.set_depot(depot.clone());
        receiver.set_depot(depot);
        // Buffers flow one way: allocated by the sender, freed by the receiver.
        for _ in 0..10_000 {
            let b = sender.alloc(9000);
            receiver.free(b);
        }
        let allocated = sender.stats().allocated;
        assert!(allocated < 200, "{allocated} allocations");
        assert!(receiver.held().0 <= 64);
    }
}
