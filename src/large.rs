//! Large blocks: requests above the largest size class, or aligned beyond what a class can give, go
//! to the system allocator (`std::alloc::System`: malloc, posix_memalign, realloc, calloc). This path
//! is not the fast path, so it keeps exact counts with atomics.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use std::alloc::System;

static BLOCKS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn counted(p: *mut u8, size: usize) -> *mut u8 {
    if !p.is_null() {
        #[cfg(feature = "hardened")]
        crate::hardened::on_large_alloc(p);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size, Ordering::Relaxed);
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
    BLOCKS.fetch_sub(1, Ordering::Relaxed);
    BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
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
        BYTES.fetch_add(new_size, Ordering::Relaxed);
        BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    q
}

/// (live large blocks, their requested bytes).
pub fn counts() -> (usize, usize) {
    (
        BLOCKS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    )
}
