//! The heap store (mapped once, never unmapped), the registry of live heaps (for `stats`) and
//! of free ones (for reuse), and the orphan counters that a retired heap's counts fold into.

use super::{Bin, ThreadHeap, bin, new_heap};
use crate::base::lock::{Lock, Rank};
use crate::base::size_class::NUM_CLASSES;
use crate::os;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Live heaps (for stats) and free heaps (for reuse), under one lock.
pub(super) struct Registry {
    pub(super) live: *mut ThreadHeap,
    free: *mut ThreadHeap,
    /// Unused space of the last store block.
    store: *mut u8,
    store_left: usize,
}
// SAFETY: the pointers name heaps in the store; access is serialised by the lock.
unsafe impl Send for Registry {}
pub(super) static REGISTRY: Lock<Registry> = Lock::new(
    Rank::Registry,
    Registry {
        live: ptr::null_mut(),
        free: ptr::null_mut(),
        store: ptr::null_mut(),
        store_left: 0,
    },
);

/// Bytes the heap store maps at a time.
const STORE_BLOCK: usize = 256 * 1024;

/// Counters of threads that exited (and their remote frees after exit): cached slots and
/// supplied slots per class, updated with atomic read-modify-writes.
pub(super) static ORPHAN: [Bin; NUM_CLASSES] = [const {
    Bin {
        cached: AtomicUsize::new(0),
        batched_requested: AtomicUsize::new(0),
        supplied: AtomicUsize::new(0),
        avail: ptr::null_mut(),
        full: ptr::null_mut(),
    }
}; NUM_CLASSES];

// SAFETY: shared bins (ORPHAN) are used through their atomics only; their pointer fields are null
// and never written.
unsafe impl Sync for Bin {}

/// The large-block counters of threads that exited (and of frees by threads with no heap):
/// `large_blocks`, `large_bytes`, `large_allocated`, `large_allocated_bytes`, in that order.
pub(super) static ORPHAN_LARGE: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// A fresh heap on the registry, or null when the OS has no memory.
pub(super) fn new_registered_heap() -> *mut ThreadHeap {
    let mut r = REGISTRY.lock();
    let h = if !r.free.is_null() {
        let h = r.free;
        // SAFETY: heaps on the free list are ours under the lock, and were reset at exit.
        r.free = unsafe { (*h).next };
        h
    } else {
        let size = core::mem::size_of::<ThreadHeap>().next_multiple_of(64);
        if r.store_left < size {
            let m = os::map(STORE_BLOCK);
            if m.is_null() {
                return ptr::null_mut();
            }
            r.store = m;
            r.store_left = STORE_BLOCK;
        }
        let h = r.store.cast::<ThreadHeap>();
        // SAFETY: the store block has room for the heap; it is 64-aligned (page + multiples of 64).
        unsafe {
            h.write(new_heap());
            r.store = r.store.add(size);
        }
        r.store_left -= size;
        h
    };
    // SAFETY: h is ours under the lock; a heap from the free list may have been a `Heap`'s, or
    // a thread's, whose counters the new one does not continue.
    unsafe {
        (*h).owned = false;
        (*h).outer = ptr::null_mut();
        (*h).allocated.store(0, Relaxed);
        (*h).deallocated.store(0, Relaxed);
    }
    // SAFETY: h is ours; registry links are guarded by the lock we hold.
    unsafe {
        (*h).prev = ptr::null_mut();
        (*h).next = r.live;
        if !r.live.is_null() {
            (*r.live).prev = h;
        }
    }
    r.live = h;
    h
}

/// Folds `h`'s counters into the orphan totals, takes it off the registry and puts it on the free
/// list for reuse.
///
/// # Safety
/// The caller owns `h`, whose lists are empty, and nobody uses it afterwards.
pub(super) unsafe fn unregister(h: *mut ThreadHeap) {
    // SAFETY: forwarded; the registry links are guarded by its lock.
    unsafe {
        let mut r = REGISTRY.lock();
        for (c, o) in ORPHAN.iter().enumerate() {
            let b = bin(h, c);
            o.cached.fetch_add((*b).cached.swap(0, Relaxed), Relaxed);
            o.supplied
                .fetch_add((*b).supplied.swap(0, Relaxed), Relaxed);
        }
        for (o, x) in ORPHAN_LARGE.iter().zip([
            &(*h).large_blocks,
            &(*h).large_bytes,
            &(*h).large_allocated,
            &(*h).large_allocated_bytes,
        ]) {
            o.fetch_add(x.swap(0, Relaxed), Relaxed);
        }
        let (p, n) = ((*h).prev, (*h).next);
        if p.is_null() {
            r.live = n;
        } else {
            (*p).next = n;
        }
        if !n.is_null() {
            (*n).prev = p;
        }
        (*h).prev = ptr::null_mut();
        (*h).next = r.free;
        r.free = h;
    }
}
