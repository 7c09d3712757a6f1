//! Per-thread counters: the bytes the calling thread allocated and deallocated since it started,
//! as jemalloc's `thread.allocated` / `thread.deallocated` (and their pointer forms
//! `thread.allocatedp` / `thread.deallocatedp`), which services read to account memory per thread
//! or per request.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The calling thread's counters, as [`thread_counters`] returns them: where they live, to read
/// with one load each, with no call, for as long as the thread runs.
///
/// **What is counted.** Every block of [`PoolAlloc`](crate::PoolAlloc) (its `GlobalAlloc` and
/// allocator-api2 methods) and of a [`Heap`](crate::Heap) (its `Allocator` methods, and the
/// global blocks inside [`Heap::enter`](crate::Heap::enter)), small and large, counts at its
/// requested size (`Layout::size()`): `allocated` grows by it when the thread allocates the
/// block (`alloc_zeroed` included), `deallocated` when the thread frees it, whichever thread
/// allocated it (a remote free counts for the thread that frees). A `realloc` counts the old
/// size as deallocated and the new one as allocated, in place or not. So the counts are exact:
/// summed over the threads that ran, `allocated - deallocated` is the requested bytes still
/// live. The requested size, not the slot's (jemalloc counts the usable size): the fast paths
/// hold it in a register, so each counter costs one `add` there
/// (`benches/results/fastpath-account.md`); a free with an allocator-api2 layout other than the
/// allocation's (any size the block fits is allowed) counts that layout's size.
///
/// **Not counted:** the size-less interface (`poolalloc::raw`, the C library: no size comes
/// back with its frees), the blocks a [`Heap`](crate::Heap) gives back at once when dropped (no
/// free happens), and a thread's blocks after its exit hook ran (in other thread-local
/// destructors, where its heap is gone). Where the pools do not run (a target with no port) the
/// counters stay zero.
///
/// **How long they are valid.** The counters live in the thread's heap, which is never unmapped:
/// the references stay valid forever (hence `'static`), and they count for this thread until it
/// exits. After that the heap goes to the next thread that starts, which counts from zero in it.
/// Inside a [`Heap::enter`](crate::Heap::enter) scope the heap of the scope carries the thread's
/// counts, so these references show the counts as at the scope's start until it ends;
/// [`thread_allocated`] and [`thread_deallocated`] are exact there too.
///
/// The counters are `usize`, wrapping: on a 32-bit target they wrap every 4 GiB (take differences
/// with `wrapping_sub`); on 64-bit targets, never in practice.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();
/// let counters = poolalloc::thread_counters();
/// let (a0, d0) = (counters.allocated(), counters.deallocated());
/// let v: Vec<u8> = Vec::with_capacity(1000);
/// assert_eq!(counters.allocated() - a0, 1000);
/// drop(v);
/// assert_eq!(counters.deallocated() - d0, 1000);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ThreadCounters {
    allocated: &'static AtomicUsize,
    deallocated: &'static AtomicUsize,
}

impl ThreadCounters {
    /// Bytes the thread allocated since it started (wrapping).
    #[inline]
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Relaxed) as u64
    }

    /// Bytes the thread deallocated since it started (wrapping).
    #[inline]
    pub fn deallocated(&self) -> u64 {
        self.deallocated.load(Relaxed) as u64
    }

    /// The counter of bytes allocated itself, for a reader that keeps the pointer (jemalloc's
    /// `thread.allocatedp`). Only the allocator writes it; any thread may read it.
    #[inline]
    pub fn allocated_ptr(&self) -> &'static AtomicUsize {
        self.allocated
    }

    /// The counter of bytes deallocated itself (jemalloc's `thread.deallocatedp`).
    #[inline]
    pub fn deallocated_ptr(&self) -> &'static AtomicUsize {
        self.deallocated
    }
}

/// The calling thread's counters ([`ThreadCounters`] says what they count and for how long they
/// are valid). Gives the thread its heap if it has none yet. Allocates nothing.
pub fn thread_counters() -> ThreadCounters {
    #[cfg(poolalloc_pools)]
    let [allocated, deallocated] = crate::thread::heap::thread_counters();
    #[cfg(not(poolalloc_pools))]
    let [allocated, deallocated] = [&ZERO, &ZERO];
    ThreadCounters {
        allocated,
        deallocated,
    }
}

/// The counters where the pools do not run.
#[cfg(not(poolalloc_pools))]
static ZERO: AtomicUsize = AtomicUsize::new(0);

/// Bytes the calling thread allocated since it started (jemalloc's `thread.allocated`; wrapping):
/// what [`ThreadCounters::allocated`] reads, exact inside a [`Heap::enter`](crate::Heap::enter)
/// scope too.
#[inline]
pub fn thread_allocated() -> u64 {
    counts()[0] as u64
}

/// Bytes the calling thread deallocated since it started (jemalloc's `thread.deallocated`;
/// wrapping), as [`thread_allocated`].
#[inline]
pub fn thread_deallocated() -> u64 {
    counts()[1] as u64
}

#[inline]
fn counts() -> [usize; 2] {
    #[cfg(poolalloc_pools)]
    return crate::thread::heap::thread_counts();
    #[cfg(not(poolalloc_pools))]
    return [0, 0];
}
