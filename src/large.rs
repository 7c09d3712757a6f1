//! Large blocks: requests above the largest size class, or aligned beyond what a class can give, go
//! to the system allocator (`std::alloc::System`: malloc, posix_memalign, realloc, calloc). Counts are
//! kept per thread like the small classes' (no atomic read-modify-write); threads that exit fold
//! theirs into the shared totals here.

use crate::thread_cache;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use std::alloc::System;

/// Large blocks and bytes counted outside thread caches (wrapping sums).
static BLOCKS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// Counts a large block allocated (`add`) or freed.
#[inline]
fn count(add: bool, size: usize) {
    if !thread_cache::count_large(add, size) {
        if add {
            BLOCKS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(size, Ordering::Relaxed);
        } else {
            BLOCKS.fetch_sub(1, Ordering::Relaxed);
            BYTES.fetch_sub(size, Ordering::Relaxed);
        }
    }
}

/// Adds an exiting thread's counts to the shared totals.
pub fn fold(blocks: usize, bytes: usize) {
    BLOCKS.fetch_add(blocks, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
}

#[inline]
fn counted(p: *mut u8, size: usize) -> *mut u8 {
    if !p.is_null() {
        #[cfg(feature = "hardened")]
        crate::hardened::on_large_alloc(p);
        count(true, size);
    }
    p
}

/// # Safety
/// As `GlobalAlloc::alloc`.
pub unsafe fn alloc(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    counted(unsafe { System.alloc(layout) }, layout.size())
}

/// # Safety
/// As `GlobalAlloc::alloc_zeroed`.
pub unsafe fn alloc_zeroed(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract (calloc knows which pages are fresh and need no zeroing).
    counted(unsafe { System.alloc_zeroed(layout) }, layout.size())
}

/// # Safety
/// As `GlobalAlloc::dealloc`, for a block from this module.
pub unsafe fn dealloc(p: *mut u8, layout: Layout) {
    #[cfg(feature = "hardened")]
    crate::hardened::on_large_free(p, false);
    count(false, layout.size());
    // SAFETY: forwarded contract.
    unsafe { System.dealloc(p, layout) }
}

/// # Safety
/// As `GlobalAlloc::realloc`, for a block from this module that stays large.
pub unsafe fn realloc(p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: forwarded contract.
    let q = unsafe { System.realloc(p, layout, new_size) };
    if !q.is_null() {
        #[cfg(feature = "hardened")]
        {
            crate::hardened::on_large_free(p, false);
            crate::hardened::on_large_alloc(q);
        }
        count(false, layout.size());
        count(true, new_size);
    }
    q
}

/// (live large blocks, their requested bytes).
pub fn counts() -> (usize, usize) {
    let (n, b) = thread_cache::large_totals();
    let n = n.wrapping_add(BLOCKS.load(Ordering::Relaxed));
    let b = b.wrapping_add(BYTES.load(Ordering::Relaxed));
    // A snapshot racing with frees on other threads can see a transiently "negative" sum.
    let clamp = |x: usize| if x > isize::MAX as usize { 0 } else { x };
    (clamp(n), clamp(b))
}
