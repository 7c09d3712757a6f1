//! The counts `stats` reads: large blocks (counted by their allocating thread's heap), and per
//! class the chunks every heap owns, remote frees not yet collected and slots supplied.

use super::registry::{ORPHAN, ORPHAN_LARGE, REGISTRY};
use super::{bin, current, empty, exited, init_heap, owner_add, this_heap};
use crate::base::size_class::NUM_CLASSES;
use crate::chunks::chunk;
use crate::memory::chunk_lists;
use core::ptr;
use core::sync::atomic::Ordering::Relaxed;

/// Counts a large block of `bytes` allocated (`add`) or freed by this thread in the statistics (the
/// size-less interface's too; `large.rs`'s `large_alloc` & co. count in the thread's counters as
/// well).
#[inline]
pub(crate) fn count_large(add: bool, bytes: usize) {
    let mut h = this_heap();
    if h == empty() {
        h = init_heap();
    }
    let (n, b) = if add {
        (1usize, bytes)
    } else {
        (usize::MAX, bytes.wrapping_neg())
    };
    let (an, ab) = if add { (1, bytes) } else { (0, 0) };
    if h == exited() {
        for (o, d) in ORPHAN_LARGE.iter().zip([n, b, an, ab]) {
            o.fetch_add(d, Relaxed);
        }
        return;
    }
    // SAFETY: h is this thread's registered heap; only this thread writes its counters.
    unsafe {
        owner_add(&(*h).large_blocks, n);
        owner_add(&(*h).large_bytes, b);
        if add {
            owner_add(&(*h).large_allocated, an);
            owner_add(&(*h).large_allocated_bytes, ab);
        }
    }
}

/// Large blocks live and their bytes, large blocks allocated and their bytes since start
/// (wrapping sums over every heap and the orphans).
pub(crate) fn large_totals() -> [usize; 4] {
    let r = REGISTRY.lock();
    let mut t = ORPHAN_LARGE.each_ref().map(|o| o.load(Relaxed));
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the lock; we read atomics only.
        unsafe {
            let x = [
                &(*h).large_blocks,
                &(*h).large_bytes,
                &(*h).large_allocated,
                &(*h).large_allocated_bytes,
            ];
            for (t, x) in t.iter_mut().zip(x) {
                *t = t.wrapping_add(x.load(Relaxed));
            }
            h = (*h).next;
        }
    }
    t
}

/// The counts of one class that `stats` starts from, as wrapping sums over the heaps.
#[derive(Clone, Copy, Default)]
pub(crate) struct ClassTotals {
    /// `used` summed over the chunks the heaps own: live slots plus cached slots.
    pub(crate) used: usize,
    /// Live requested bytes of those chunks.
    pub(crate) requested: usize,
    /// Requested bytes of remote frees waiting in the heaps' batches: still counted live by
    /// their chunks (any chunk's, the source's abandoned ones included) until pushed.
    pub(crate) batched: usize,
    /// Cached slots: remote frees not yet collected (from any chunk, the source's abandoned
    /// ones included).
    pub(crate) cached: usize,
    /// Slots supplied to the fast paths since start.
    pub(crate) supplied: usize,
}

/// Per class: the counts of the chunks every heap owns (read from their headers, walking each
/// heap's lists under its `lists` lock), cached slots, slots supplied.
pub(crate) fn class_totals() -> [ClassTotals; NUM_CLASSES] {
    let mut t = [ClassTotals::default(); NUM_CLASSES];
    let r = REGISTRY.lock();
    for (c, o) in ORPHAN.iter().enumerate() {
        t[c].cached = o
            .cached
            .load(Relaxed)
            .wrapping_sub(chunk_lists::collected(c));
        t[c].supplied = o.supplied.load(Relaxed);
    }
    let mut h = r.live;
    while !h.is_null() {
        // SAFETY: registered heaps stay registered while we hold the registry lock. Under the
        // heap's `lists` lock its bins' lists hold only chunks it owns, which stay mapped and
        // live; their counts are atomics (the owner's fast path writes them meanwhile).
        unsafe {
            let l = (*h).lists.lock();
            for (c, x) in t.iter_mut().enumerate() {
                let b = bin(h, c);
                x.cached = x.cached.wrapping_add((*b).cached.load(Relaxed));
                x.batched = x.batched.wrapping_add((*b).batched_requested.load(Relaxed));
                x.supplied = x.supplied.wrapping_add((*b).supplied.load(Relaxed));
                for first in [*current(h, c), (*b).avail, (*b).full] {
                    let mut ch = first;
                    while !ch.is_null() && ch != chunk::dummy() {
                        x.used += chunk::used(ch) as usize;
                        // Racing a remote free, a chunk's figure can dip below zero: skip it.
                        let r = chunk::requested(ch) as usize;
                        x.requested += if r > chunk::CHUNK_SIZE { 0 } else { r };
                        ch = if first == *current(h, c) {
                            ptr::null_mut()
                        } else {
                            (*ch).next
                        };
                    }
                }
            }
            drop(l);
            h = (*h).next;
        }
    }
    t
}
