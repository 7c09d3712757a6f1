//! Large blocks (`memory::large`) for `PoolAlloc` and the `Heap`s' pools, counted in this thread's
//! heap: the entry points the global allocator's large path calls, out of line.

use super::counters::count_here;
use super::stats::count_large;
use crate::memory::large;
use core::alloc::Layout;

/// A large block of `layout` (zeroed when `zeroed`), counted in this thread's heap.
///
/// # Safety
/// As `GlobalAlloc::alloc`.
// Out of line: the large path beside the fast paths would change their code.
#[inline(never)]
pub(crate) unsafe fn large_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe { large_alloc_as(layout, zeroed, layout.size()) }
}

/// [`large_alloc`], counting `counted` bytes in this thread's counters (a `Heap`'s tracked block
/// counts the caller's size, not its header's room).
///
/// # Safety
/// As [`large_alloc`].
#[inline(always)]
pub(crate) unsafe fn large_alloc_as(layout: Layout, zeroed: bool, counted: usize) -> *mut u8 {
    let p = if zeroed {
        // SAFETY: forwarded contract.
        unsafe { large::alloc_zeroed(layout) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { large::alloc(layout) }
    };
    if !p.is_null() {
        count_large(true, layout.size());
        count_here(counted, 0);
    }
    p
}

/// [`large_alloc`] (not zeroed) for a block that grew out of the size classes: `large::alloc_grown`.
///
/// # Safety
/// As [`large_alloc`].
#[inline(never)]
pub(crate) unsafe fn large_alloc_grown(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    let p = unsafe { large::alloc_grown(layout) };
    if !p.is_null() {
        count_large(true, layout.size());
        count_here(layout.size(), 0);
    }
    p
}

/// Frees the large block `p` of `layout`, counted in this thread's heap.
///
/// # Safety
/// As `GlobalAlloc::dealloc`, for a block from [`large_alloc`].
// Out of line: the large path beside the fast paths would change their code.
#[inline(never)]
pub(crate) unsafe fn large_dealloc(p: *mut u8, layout: Layout) {
    // SAFETY: forwarded contract.
    unsafe { large_dealloc_as(p, layout, layout.size()) }
}

/// [`large_dealloc`], counting `counted` bytes in this thread's counters (as [`large_alloc_as`]).
///
/// # Safety
/// As [`large_dealloc`].
#[inline(always)]
pub(crate) unsafe fn large_dealloc_as(p: *mut u8, layout: Layout, counted: usize) {
    count_large(false, layout.size());
    count_here(0, counted);
    // SAFETY: forwarded contract.
    unsafe { large::dealloc(p, layout) }
}

/// Resizes the large block `p` of `layout` to `new_size` (still large), counted in this thread's
/// heap; null when out of memory (`p` untouched).
///
/// # Safety
/// As `GlobalAlloc::realloc`, for a block from [`large_alloc`] that stays large.
// Out of line: the large path beside the fast paths would change their code.
#[inline(never)]
pub(crate) unsafe fn large_realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    let q = unsafe { large::realloc(p, layout, new_size) };
    if !q.is_null() {
        count_large(false, layout.size());
        count_large(true, new_size);
        count_here(new_size, layout.size());
    }
    q
}
