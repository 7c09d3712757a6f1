//! The optional code of the data path, behind one facade: the misuse checks (`hardened`), the
//! `testing` feature's hooks (`hooks`) and the sampling heap profiler (`profile`, feature
//! `profiling`). The entry points (`api/global.rs` for `PoolAlloc`, `api/raw.rs` for the size-less
//! interface, `thread/own_heap.rs` for `Heap`) and `thread/fork.rs` call only the functions here,
//! with no `cfg` of their own. Each dispatches to the features that are on, in the order its doc
//! says, and is an `#[inline(always)]` no-op (or a constant) where all of them are off, so the fast
//! path is then exactly as without them (snmalloc's `mitigations.h` plays the same part).
//!
//! Each feature has its no-op twin where it is off: `hardened.rs` holds its own (the memory layer
//! calls it directly to check large blocks and spans); the twins of the hooks and of the profiler
//! (which also stand in where the profiler does not record, `cfg(poolalloc_profiled)`) are below.
//!
//! | event | `hardened` | `testing` | `profiling` |
//! |---|---|---|---|
//! | allocation, free, realloc by `PoolAlloc` | | `watched`: the whole call goes out of line to `before_*` / `after_*` | |
//! | block handed to the program | `on_hand_out` (a slot), `zero_size_block` | | `on_alloc` (any block) |
//! | block freed | `on_slot_free` (a slot; before the free), `on_large_free`, `on_foreign`, `on_invalid_pointer` | | `on_free` (any block; before the free, so the address cannot be handed out again first); `frees_recorded` |
//! | realloc | `check_live`, `check_not_quarantined`, `request_of`, `on_request`; `is_zero_size_block` | | `on_resize_in_place` |
//! | the size-less interface (`raw`): a small request, a free | `padded`, `on_request` (the canary after the request, `hardened-full`); `on_raw_slot_free`, `on_raw_large_free` (the quarantine, `hardened-full`) | | |
//! | a block freed to a `Heap` | `on_heap_free` (a slot), `on_tracked_free` (a tracked block) | | |
//! | `fork` | `lock_for_fork`, `unlock_after_fork` | | the same |

use core::alloc::Layout;

#[cfg(poolalloc_pools)]
pub(crate) mod hardened;
#[cfg(feature = "testing")]
pub(crate) mod hooks;
#[cfg(feature = "profiling")]
pub mod profile;

#[cfg(feature = "testing")]
use hooks as testing;
#[cfg(poolalloc_profiled)]
use profile as profiler;

#[cfg(poolalloc_pools)]
pub(crate) use hardened::{
    check_live, check_not_quarantined, is_zero_size_block, on_foreign, on_hand_out,
    on_invalid_pointer, on_large_free, on_raw_large, on_raw_large_free, on_raw_slot_free,
    on_request, padded, request_of,
};

// `testing`: while a hook is armed (a limit set, a `count` or `forbid` running), `PoolAlloc`'s
// calls go out of line through `before_*` and `after_*`; otherwise one relaxed load each.

/// Whether `PoolAlloc`'s call must go through the `testing` hooks (`before_*`, `after_*`): one
/// relaxed load with the feature, false without it.
#[inline(always)]
pub(crate) fn watched() -> bool {
    testing::armed()
}

/// Before an allocation of `layout` (watched): aborts inside `forbid`; false when the limit
/// refuses it.
#[inline]
pub(crate) fn before_alloc(layout: Layout) -> bool {
    testing::before_alloc(layout)
}

/// After a watched allocation of `layout` that returned `p` (null when it failed).
#[inline]
pub(crate) fn after_alloc(p: *mut u8, layout: Layout) {
    testing::after_alloc(p, layout)
}

/// Before the watched free of `p`, a block of `layout`.
#[inline]
pub(crate) fn before_free(p: *mut u8, layout: Layout) {
    testing::before_free(p, layout)
}

/// Before a watched reallocation of a block of `layout` to `new_size`: aborts inside `forbid`;
/// false when the limit refuses the growth.
#[inline]
pub(crate) fn before_realloc(layout: Layout, new_size: usize) -> bool {
    testing::before_realloc(layout, new_size)
}

/// After a watched reallocation of `p` (a block of `layout`) to `new_size` that returned `q`
/// (null when it failed: `p` is intact).
#[inline]
pub(crate) fn after_realloc(p: *mut u8, layout: Layout, new_size: usize, q: *mut u8) {
    testing::after_realloc(p, layout, new_size, q)
}

// `profiling`: every block handed out passes the sampler's countdown (one subtract, one branch);
// a free forgets the block's record, if any, before the block can be handed out again.

/// A block of `size` requested bytes handed to the program (`p` null: the allocation failed).
#[inline(always)]
pub(crate) fn on_alloc(p: *mut u8, size: usize) {
    profiler::on_alloc(p, size)
}

/// Whether frees must call [`on_free`]: the profiler holds records. `PoolAlloc` then frees out of
/// line (the fast path keeps no register for it).
#[inline(always)]
pub(crate) fn frees_recorded() -> bool {
    profiler::armed()
}

/// A block (of any size) is about to be freed or moved: its record, if any, goes first.
#[inline(always)]
pub(crate) fn on_free(p: *mut u8) {
    profiler::on_free(p)
}

/// A block resized in place to `new_size` bytes: the profiler sees it freed and allocated again.
#[inline(always)]
pub(crate) fn on_resize_in_place(p: *mut u8, new_size: usize) {
    profiler::on_free(p);
    profiler::on_alloc(p, new_size);
}

// `hardened` (the checks re-exported above; those that take another shape here below).

/// A small block (a slot) of `layout` is being freed, before the pools take it back: it must be a
/// live block of the layout's class (`hardened`), which marks it free.
#[cfg(poolalloc_pools)]
#[inline(always)]
pub(crate) fn on_slot_free(p: *mut u8, layout: Layout) {
    hardened::on_free(p, layout)
}

/// A block any access to faults, for a request of `size` bytes aligned to `align` when `size` is
/// zero (`hardened`, where the OS gives such memory); null otherwise, and always without the
/// feature (then the caller's test of it compiles away).
#[cfg(poolalloc_pools)]
#[inline(always)]
pub(crate) fn zero_size_block(size: usize, align: usize) -> *mut u8 {
    if cfg!(feature = "hardened") && size == 0 && align <= 16 {
        hardened::zero_size_block()
    } else {
        core::ptr::null_mut()
    }
}

/// A small block of `layout` freed to a `Heap`: with `hardened`, aborts unless `p` is in one of
/// our chunks and `owned()` (the heap's own pools own that chunk, read from its header), then
/// checks the free as [`on_slot_free`].
#[cfg(poolalloc_pools)]
#[inline(always)]
pub(crate) fn on_heap_free(p: *mut u8, layout: Layout, owned: impl FnOnce() -> bool) {
    hardened::on_heap_free(p, layout, owned)
}

/// A block tracked by a `Heap` (a large one, or any where the pools have no port) is freed to it:
/// with `hardened`, aborts unless the word at `check` (its header's check word, read without
/// faulting as `p` may be any pointer; null when `p` cannot have a header) equals `expected`.
#[inline(always)]
pub(crate) fn on_tracked_free(p: *mut u8, check: *mut u8, expected: usize) {
    #[cfg(feature = "hardened")]
    {
        let mut w = [0u8; size_of::<usize>()];
        if !check.is_null() {
            // SAFETY: w holds w.len() writable bytes; the OS layer reads `check` without faulting.
            unsafe { crate::os::copy_readable(check, w.as_mut_ptr(), w.len()) };
        }
        if usize::from_ne_bytes(w) != expected {
            crate::base::fatal::fatal(format_args!(
                "a block freed to a Heap that did not allocate it ({p:p})"
            ));
        }
    }
    #[cfg(not(feature = "hardened"))]
    let _ = (p, check, expected);
}

/// Before `fork`: the checks' and the profiler's locks (after the memory layer's).
#[cfg(poolalloc_pools)]
pub(crate) fn lock_for_fork() {
    hardened::lock_for_fork();
    profiler::lock_for_fork();
}

/// After `fork`, in parent and child: the locks of [`lock_for_fork`], in reverse order.
///
/// # Safety
/// Only after [`lock_for_fork`], by the same thread (or its forked child).
#[cfg(poolalloc_pools)]
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: forwarded contract.
    unsafe {
        profiler::unlock_after_fork();
        hardened::unlock_after_fork();
    }
}

/// The no-op twins of the `testing` hooks.
#[cfg(not(feature = "testing"))]
mod testing {
    use core::alloc::Layout;

    #[inline(always)]
    pub fn armed() -> bool {
        false
    }
    #[inline(always)]
    pub fn before_alloc(_layout: Layout) -> bool {
        true
    }
    #[inline(always)]
    pub fn after_alloc(_p: *mut u8, _layout: Layout) {}
    #[inline(always)]
    pub fn before_free(_p: *mut u8, _layout: Layout) {}
    #[inline(always)]
    pub fn before_realloc(_layout: Layout, _new_size: usize) -> bool {
        true
    }
    #[inline(always)]
    pub fn after_realloc(_p: *mut u8, _layout: Layout, _new_size: usize, _q: *mut u8) {}
}

/// The no-op twins of the profiler's data path, without the feature or where it does not record.
#[cfg(not(poolalloc_profiled))]
mod profiler {
    #[inline(always)]
    pub fn on_alloc(_p: *mut u8, _size: usize) {}
    #[inline(always)]
    pub fn on_free(_p: *mut u8) {}
    #[inline(always)]
    pub fn armed() -> bool {
        false
    }
    #[inline(always)]
    pub fn lock_for_fork() {}
    /// # Safety
    /// None: nothing to unlock (the twin of the profiler's).
    #[inline(always)]
    pub unsafe fn unlock_after_fork() {}
}
