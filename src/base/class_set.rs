//! A set of size classes that any thread may change without a lock: one bit per class in atomic
//! words, one word on 64-bit targets and two on 32-bit ones (48 classes do not fit 32 bits, and a
//! 64-bit atomic is a loop of `cmpxchg8b` or `ldrexd`/`strexd` there, or missing altogether on
//! some 32-bit targets). The source's classes with an empty chunk and a heap's classes with a
//! hinted full chunk are such sets; both are hints, read without the lock that guards what they
//! point at.

use crate::base::size_class::NUM_CLASSES;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

const BITS: usize = usize::BITS as usize;
/// Words of the set.
const WORDS: usize = NUM_CLASSES.div_ceil(BITS);

/// Classes, each in or out; every access is `Relaxed` (the callers order what the bits stand for
/// with their own locks).
pub struct ClassSet([AtomicUsize; WORDS]);

/// The members of a [`ClassSet`] as read at one moment, each word once.
#[derive(Clone, Copy)]
pub struct Members([usize; WORDS]);

/// The word that holds class `c`'s bit, and the bit.
#[inline(always)]
fn at(c: usize) -> (usize, usize) {
    debug_assert!(c < NUM_CLASSES);
    // Clamped, so there is no bounds check; with one word (64-bit targets) the index is the
    // constant 0, which is what clippy sees.
    #[allow(clippy::unnecessary_min_or_max)]
    let w = (c / BITS).min(WORDS - 1);
    (w, 1 << (c % BITS))
}

impl ClassSet {
    /// The empty set.
    pub const fn new() -> Self {
        ClassSet([const { AtomicUsize::new(0) }; WORDS])
    }

    #[inline]
    pub fn contains(&self, c: usize) -> bool {
        let (w, bit) = at(c);
        self.0[w].load(Relaxed) & bit != 0
    }

    #[inline]
    pub fn insert(&self, c: usize) {
        let (w, bit) = at(c);
        self.0[w].fetch_or(bit, Relaxed);
    }

    #[inline]
    pub fn remove(&self, c: usize) {
        let (w, bit) = at(c);
        self.0[w].fetch_and(!bit, Relaxed);
    }

    /// Empties the set.
    pub fn clear(&self) {
        for w in &self.0 {
            w.store(0, Relaxed);
        }
    }

    /// The members now.
    #[inline]
    pub fn members(&self) -> Members {
        Members(core::array::from_fn(|i| self.0[i].load(Relaxed)))
    }
}

impl Members {
    #[inline]
    pub fn contains(&self, c: usize) -> bool {
        let (w, bit) = at(c);
        self.0[w] & bit != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_a_bit_of_its_own() {
        let s = ClassSet::new();
        for c in 0..NUM_CLASSES {
            assert!(!s.contains(c));
            s.insert(c);
            for o in 0..NUM_CLASSES {
                assert_eq!(s.contains(o), o == c, "inserted {c}, looked at {o}");
                assert_eq!(s.members().contains(o), o == c);
            }
            s.remove(c);
            assert!(!s.contains(c));
        }
        for c in (0..NUM_CLASSES).step_by(3) {
            s.insert(c);
        }
        let m = s.members();
        for c in 0..NUM_CLASSES {
            assert_eq!(m.contains(c), c % 3 == 0);
        }
        s.clear();
        assert!((0..NUM_CLASSES).all(|c| !s.contains(c)));
    }
}
