//! Counters a link keeps as plain numbers on its own thread and publishes for its handles to read
//! from others: one relaxed store a counter after each `receive` and `transmit`, no lock. A reader
//! sees every counter exact as of some call, though not necessarily all of them as of the same one.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// `N` published counters.
pub(crate) struct Published<const N: usize>([AtomicU64; N]);

impl<const N: usize> Published<N> {
    pub(crate) fn new() -> Self {
        Published(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// Publishes `words` (a relaxed store is a plain store on x86 and a plain `str` on ARM: the
    /// reader on another core needs no more than each word whole).
    #[inline]
    pub(crate) fn store(&self, words: [u64; N]) {
        for (slot, word) in self.0.iter().zip(words) {
            slot.store(word, Ordering::Relaxed);
        }
    }

    /// The counters last published.
    pub(crate) fn load(&self) -> [u64; N] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

impl<const N: usize> fmt::Debug for Published<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.load()).finish()
    }
}

/// For a struct of `u64` counters: `WORDS`, `to_words` and `from_words` (the fields in the order
/// given, each named once so that a field added and not listed fails to compile), and `AddAssign`
/// adding field by field.
macro_rules! counter_words {
    ($ty:ident { $($field:ident),+ $(,)? }) => {
        impl $ty {
            /// How many counters there are.
            pub(crate) const WORDS: usize = [$(stringify!($field)),+].len();

            /// The counters in field order.
            pub(crate) fn to_words(self) -> [u64; Self::WORDS] {
                let $ty { $($field),+ } = self;
                [$($field),+]
            }

            /// The counters from [`Self::to_words`]'s order.
            pub(crate) fn from_words(words: [u64; Self::WORDS]) -> $ty {
                let [$($field),+] = words;
                $ty { $($field),+ }
            }
        }

        impl std::ops::AddAssign for $ty {
            /// Adds another link's counters: the counters of several queues of one interface, say.
            fn add_assign(&mut self, other: $ty) {
                let mut words = self.to_words();
                for (word, more) in words.iter_mut().zip(other.to_words()) {
                    *word += more;
                }
                *self = $ty::from_words(words);
            }
        }
    };
}
pub(crate) use counter_words;
