//! Per-thread counters: the bytes the calling thread allocated and deallocated since it started,
//! as jemalloc's `thread.allocated` / `thread.deallocated` (and their pointer forms
//! `thread.allocatedp` / `thread.deallocatedp`), which services read to account memory per thread
//! or per request.

#[cfg(target_has_atomic = "64")]
use core::sync::atomic::AtomicU64;

/// Where a counter lives (`AtomicU64` on every target with 64-bit atomics).
#[cfg(poolalloc_pools)]
use crate::thread::heap::ByteCounter;
#[cfg(not(poolalloc_pools))]
#[cfg(target_has_atomic = "64")]
type ByteCounter = AtomicU64;
#[cfg(not(poolalloc_pools))]
#[cfg(not(target_has_atomic = "64"))]
type ByteCounter = core::sync::atomic::AtomicUsize;

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
/// **Width.** The counters are 64-bit (`u64`, jemalloc's `uint64_t`) on every target with 64-bit
/// atomics, 32-bit ones included (i686, armv7, wasm32): they do not wrap at 4 GiB there, and a
/// difference of two readings is the bytes in between, with plain `-` (wrapping only after
/// 2^64 bytes, `wrapping_sub` gives it then too). Each counter has one writer, its thread: on
/// 64-bit targets the fast paths' add is one `add`, as before; on 32-bit targets a 64-bit load
/// and store. (On the few targets without 64-bit atomics, none of them built in CI: 32-bit MIPS,
/// PowerPC, RISC-V, the counters are `usize`, wrapping at 4 GiB, read as `u64` (take differences
/// of them modulo 2^32), and the pointer forms are absent.)
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
    allocated: &'static ByteCounter,
    deallocated: &'static ByteCounter,
}

impl ThreadCounters {
    /// Bytes the thread allocated since it started (64-bit: see **Width**).
    #[inline]
    pub fn allocated(&self) -> u64 {
        read(self.allocated)
    }

    /// Bytes the thread deallocated since it started (64-bit: see **Width**).
    #[inline]
    pub fn deallocated(&self) -> u64 {
        read(self.deallocated)
    }

    /// The counter of bytes allocated itself, for a reader that keeps the pointer (jemalloc's
    /// `thread.allocatedp`). Only the allocator writes it, with plain loads and stores (never
    /// store to it); any thread may read it.
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub fn allocated_ptr(&self) -> &'static AtomicU64 {
        self.allocated
    }

    /// The counter of bytes deallocated itself (jemalloc's `thread.deallocatedp`).
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub fn deallocated_ptr(&self) -> &'static AtomicU64 {
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
static ZERO: ByteCounter = ByteCounter::new(0);

/// A counter's value.
#[inline]
fn read(c: &ByteCounter) -> u64 {
    #[cfg(poolalloc_pools)]
    return crate::thread::heap::read_counter(c);
    #[cfg(not(poolalloc_pools))]
    return c.load(core::sync::atomic::Ordering::Relaxed) as u64;
}

/// Bytes the calling thread allocated since it started (jemalloc's `thread.allocated`; 64-bit):
/// what [`ThreadCounters::allocated`] reads, exact inside a [`Heap::enter`](crate::Heap::enter)
/// scope too.
#[inline]
pub fn thread_allocated() -> u64 {
    counts()[0]
}

/// Bytes the calling thread deallocated since it started (jemalloc's `thread.deallocated`;
/// 64-bit), as [`thread_allocated`].
#[inline]
pub fn thread_deallocated() -> u64 {
    counts()[1]
}

#[inline]
fn counts() -> [u64; 2] {
    #[cfg(poolalloc_pools)]
    return crate::thread::heap::thread_counts();
    #[cfg(not(poolalloc_pools))]
    return [0, 0];
}

#[cfg(all(test, poolalloc_pools))]
mod tests {
    use super::*;
    use crate::PoolAlloc;
    use core::alloc::{GlobalAlloc, Layout};

    /// Differences of readings are the bytes in between across 2^32 (where a `usize` counter
    /// wrapped on 32-bit targets, and the `u64` difference was near 2^64: issue 41) and across
    /// 2^64 with `wrapping_sub`; the counters are 64-bit atomics for a reader that keeps them.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a PoolAlloc block maps a region of chunks (os::map_aligned trims its mapping, which Miri cannot unmap in part)"
    )]
    fn differences_are_exact_past_4_gib_and_at_the_wrap() {
        #[cfg(target_has_atomic = "64")]
        let _: &'static AtomicU64 = thread_counters().allocated_ptr();
        let p = PoolAlloc::new();
        let l = Layout::from_size_align(100, 8).unwrap();
        for start in [u64::from(u32::MAX) - 10, u64::MAX - 10] {
            crate::thread::heap::set_thread_counts(start, start);
            let c = thread_counters();
            let (a0, d0) = (c.allocated(), c.deallocated());
            assert_eq!((a0, d0), (start, start));
            // SAFETY: the layout is non-zero in size; the block is freed once, with it.
            unsafe {
                let b = p.alloc(l);
                assert!(!b.is_null());
                p.dealloc(b, l);
            }
            assert_eq!(c.allocated().wrapping_sub(a0), 100);
            assert_eq!(c.deallocated().wrapping_sub(d0), 100);
            assert_eq!(thread_allocated().wrapping_sub(a0), 100);
            assert_eq!(thread_deallocated().wrapping_sub(d0), 100);
            if start < u64::MAX / 2 {
                assert_eq!(c.allocated(), start + 100, "wrapped at 2^32");
            }
        }
        crate::thread::heap::set_thread_counts(0, 0);
    }
}
