//! A `Heap` where the pools run: its small blocks are slots of a pools heap of its own
//! (`thread/heap`'s `owned_*` functions), its large ones `PoolAlloc`'s large blocks, and
//! [`Heap::enter`] routes the thread's global allocations into a second pools heap.

use super::{Heap, Inner};
use crate::thread::heap as crate_heap;
use crate::{base::size_class, checks, thread::heap};
use core::alloc::Layout;
use core::ptr;

/// The pools' heap whose chunks a [`Heap`] owns.
pub(super) type PoolsHeap = crate_heap::ThreadHeap;

/// Where tracked blocks come from where the pools run: `PoolAlloc`'s large blocks, counted as
/// `counted` bytes in the calling thread's counters (the block's size, without the header).
///
/// # Safety
/// `layout` has a non-zero size.
pub(super) unsafe fn backing_alloc(layout: Layout, counted: usize) -> *mut u8 {
    // SAFETY: a valid, non-zero layout (caller), which the large path takes whatever its size.
    unsafe { heap::large_alloc_as(layout, false, counted) }
}

/// # Safety
/// `p` came from [`backing_alloc`] with `layout`.
pub(super) unsafe fn backing_dealloc(p: *mut u8, layout: Layout, counted: usize) {
    // SAFETY: forwarded contract.
    unsafe { heap::large_dealloc_as(p, layout, counted) }
}

impl Heap {
    /// Runs `f` with the calling thread's global allocations routed into this heap: every
    /// small block `PoolAlloc` hands this thread meanwhile (a `String`, a `Vec`, a `Box` of 32
    /// KiB or less, made by any code) comes from the heap's chunks and counts in
    /// [`HeapStats::entered_bytes`](super::HeapStats::entered_bytes). Such a block is an
    /// ordinary global block: it may be freed anywhere, on any thread, after the scope, and may
    /// outlive the heap, which then retires its scope chunks as a thread's heap retires at exit
    /// instead of freeing them. Large blocks are not routed.
    ///
    /// The scope holds the heap's lock: another thread's use of this heap (its `Allocator`
    /// methods, `stats`, `enter`) waits for it to end; this thread's own use inside the scope
    /// does not. Nested scopes of this heap run as one; a scope of another heap inside it
    /// routes to that one until it ends. A panic in `f` ends the scope as a return does.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
    /// let tenant = poolalloc::Heap::new();
    /// let reply: String = tenant.enter(|| (0..1000).map(|i| i.to_string()).collect());
    /// assert!(tenant.stats().entered_bytes >= reply.len());
    /// drop(tenant); // `reply` stays valid
    /// assert!(reply.starts_with("0123"));
    /// ```
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.entered_here() {
            return f();
        }
        let mut guard = self.inner.lock();
        if guard.scoped.is_null() {
            guard.scoped = crate_heap::owned_new();
            if guard.scoped.is_null() {
                // No memory for a heap: nothing is routed.
                drop(guard);
                return f();
            }
            self.routed
                .store(guard.scoped, core::sync::atomic::Ordering::Release);
        }
        let scoped = guard.scoped;
        // The lock stays taken for the scope (released by `Leave`); no reference to the data
        // is held meanwhile (`with_inner` reaches it from this thread).
        core::mem::forget(guard);
        // SAFETY: we hold the lock, so we own `scoped` until `Leave` runs, on this thread.
        let prev = unsafe { crate_heap::owned_enter(scoped) };
        struct Leave<'a> {
            heap: &'a Heap,
            scoped: *mut PoolsHeap,
            prev: *mut PoolsHeap,
        }
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                // SAFETY: the scope's enter on this thread, with the lock still taken by it.
                unsafe {
                    crate_heap::owned_leave(self.scoped, self.prev);
                    self.heap.inner.force_unlock();
                }
            }
        }
        let _leave = Leave {
            heap: self,
            scoped,
            prev,
        };
        f()
    }

    /// Whether the calling thread is inside [`Heap::enter`] on this heap.
    pub(super) fn entered_here(&self) -> bool {
        crate_heap::owned_is_current(self.routed.load(core::sync::atomic::Ordering::Acquire))
    }
}

impl Inner {
    /// [`HeapStats::entered_bytes`](super::HeapStats::entered_bytes).
    pub(super) fn entered_bytes(&self) -> usize {
        if self.scoped.is_null() {
            return 0;
        }
        crate_heap::flush_current_batches();
        // SAFETY: we own the heap's data (its lock, or its scope on this thread).
        let b = unsafe { crate_heap::owned_requested(self.scoped) };
        // A snapshot racing a remote free may dip below zero for a moment.
        if b > isize::MAX as usize { 0 } else { b }
    }

    pub(super) fn alloc(&mut self, layout: Layout) -> *mut u8 {
        let Some(c) = size_class::class_of(layout.size(), layout.align()) else {
            return self.alloc_tracked(layout);
        };
        if self.pools.is_null() {
            self.pools = crate_heap::owned_new();
            if self.pools.is_null() {
                return ptr::null_mut();
            }
        }
        // SAFETY: we hold the heap's lock, so we own its pools heap, made by owned_new.
        let p = unsafe { crate_heap::owned_alloc(self.pools, c, layout.size()) };
        if !p.is_null() {
            checks::on_hand_out(p, c);
        }
        p
    }

    /// # Safety
    /// `p` is a live block of this heap of `layout`.
    pub(super) unsafe fn free(&mut self, p: *mut u8, layout: Layout) {
        if !size_class::is_small(layout.size(), layout.align()) {
            // SAFETY: forwarded contract: a large layout's block is tracked.
            return unsafe { self.free_tracked(p) };
        }
        // With `hardened`: p is a live block of this heap's chunks (`owned` runs once p is known
        // to lie in one of our chunks).
        let pools = self.pools;
        checks::on_heap_free(p, layout, || {
            // SAFETY: p is in one of our chunks (checked first), whose header `owned_by` reads.
            !pools.is_null() && unsafe { crate_heap::owned_by(pools, p) }
        });
        // SAFETY: p is a live slot of a chunk our pools heap owns (caller), and we hold
        // the lock.
        unsafe { crate_heap::owned_free(self.pools, p, layout.size()) }
    }

    pub(super) fn destroy_pools(&mut self) {
        if !self.pools.is_null() {
            // SAFETY: the heap is being dropped: no borrow of it is left, so no block of it
            // is referred to, and its pools heap made no remote free (every free of ours is
            // the owner's).
            unsafe { crate_heap::owned_destroy(self.pools) };
            self.pools = ptr::null_mut();
        }
        if !self.scoped.is_null() {
            // SAFETY: no scope runs (it would hold a borrow); the scope blocks may live on,
            // so the chunks are retired, not discarded.
            unsafe { crate_heap::owned_release(self.scoped) };
            self.scoped = ptr::null_mut();
        }
    }
}
